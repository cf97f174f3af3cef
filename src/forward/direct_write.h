/*
 * direct_write.h — large writes of the forwarder's output file past the page
 * cache: the block-aligned middle of a write goes through a second, O_DIRECT
 * descriptor of the same file (from a staging buffer), its unaligned end
 * through the ordinary descriptor, so the file's bytes are exactly those of
 * one pwritev at that offset.
 *
 * Why: the output writer's buffered pwritev was most of the JSON output's
 * cost — the kernel's copy into freshly allocated page-cache pages, then
 * writeback, dirty-page throttling, all on the same cores as the daemon
 * (bench/RESULTS.md). A direct write is one user-space copy into a reused,
 * cache-hot buffer and a DMA; the writer thread then waits for the disk
 * instead of using a core.
 *
 * Rules: used only for writes whose aligned middle is at least
 * MST_DIRECT_MIN bytes (small writes stay buffered); the bytes of the block
 * before the write's offset are rewritten unchanged (kept from the last
 * write, else read back). Any failure of the direct path — a file system
 * without O_DIRECT, EINVAL, ENOSPC, EFBIG, a short write — is answered by
 * writing the whole range again the ordinary way, so what reaches the file,
 * and every error a caller sees, is what the buffered write gives; EINVAL
 * turns the direct path off for good. Where O_DIRECT cannot be opened the
 * writer is simply buffered.
 *
 * Threads: one writer thread at a time (the output queue's).
 */
#ifndef MST_FORWARD_DIRECT_WRITE_H
#define MST_FORWARD_DIRECT_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* A write goes direct only when its aligned middle is at least this big. */
#define MST_DIRECT_MIN (64u << 10)

typedef struct mst_direct_writer {
    int fd;          /* the caller's descriptor (buffered) */
    int dio_fd;      /* O_DIRECT descriptor of the same file, -1: off */
    size_t align;    /* offset / length / memory alignment of direct writes */
    uint8_t *stage;  /* staging buffer, `stage_cap` bytes, aligned */
    size_t stage_cap;
    /* The file's bytes [head_off, head_off + head_len) as the last direct
     * write left them (its end, after its last block boundary): the block
     * start the next write rewrites. */
    uint8_t *head;
    size_t head_len;
    uint64_t head_off;
    bool head_ok;
    uint64_t direct_bytes;   /* bytes written through dio_fd (stats, tests) */
} mst_direct_writer;

/* Sets w up for `fd`; the direct path only where the file system takes it
 * (w->dio_fd >= 0). Never fails: at worst every write is buffered. */
void mst_direct_writer_init(mst_direct_writer *w, int fd);

/* pwritev of the iov bytes at `off` (direct where it pays, see above),
 * retrying EINTR and short writes. Returns 0 or an errno; *landed = the
 * bytes that reached the file from `off` (all of them on success). The iov
 * array may be changed. */
int mst_direct_pwritev(mst_direct_writer *w, struct iovec *iov, int n, uint64_t off,
                       uint64_t *landed);

/* pwritev of every iov byte at off through `fd`, retrying EINTR and short
 * writes. Returns 0 or an errno; *landed = the bytes that reached the file
 * (all of them on success). The iov array is changed. */
int mst_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off, uint64_t *landed);

/* The file was changed other than by mst_direct_pwritev (a cut-back): the
 * kept block start is no longer trusted. */
void mst_direct_writer_forget(mst_direct_writer *w);

/* Closes the O_DIRECT descriptor and frees the buffers (not w->fd). */
void mst_direct_writer_close(mst_direct_writer *w);

#endif /* MST_FORWARD_DIRECT_WRITE_H */
