/*
 * direct_write.c — writes of the output file past the page cache (see
 * direct_write.h for the rules and why).
 *
 * A write [off, end) goes as: the block start before `off` (kept from the
 * last write, else read back) and the write's bytes are copied into the
 * staging buffer and written through the O_DIRECT descriptor up to the last
 * block boundary before `end`, at most a staging buffer at a time; the
 * bytes after that boundary (less than a block) are written through the
 * ordinary descriptor and kept as the next write's block start. The kernel
 * keeps the two descriptors coherent (a direct write first writes back and
 * drops the cached pages in its range).
 */
#include "forward/direct_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN 4096u             /* a multiple of every device's logical block size */
#define STAGE_BYTES (2u << 20)  /* one direct write at most; a multiple of ALIGN */

void mst_direct_writer_init(mst_direct_writer *w, int fd) {
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->dio_fd = -1;
    /* The same file, opened again with O_DIRECT (the caller's descriptor
     * keeps its flags: cut-backs and small writes stay buffered). */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int d = open(path, O_RDWR | O_DIRECT | O_CLOEXEC); /* read: see load_head */
    if (d < 0) return; /* no /proc, or a file system without O_DIRECT */
    w->dio_fd = d;
    w->align = ALIGN;
}

void mst_direct_writer_forget(mst_direct_writer *w) { w->head_ok = false; }

void mst_direct_writer_close(mst_direct_writer *w) {
    if (w->dio_fd >= 0) close(w->dio_fd);
    w->dio_fd = -1;
    free(w->stage);
    free(w->head);
    w->stage = w->head = NULL;
}

int mst_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off, uint64_t *landed) {
    *landed = 0;
    while (n > 0) {
        ssize_t k = pwritev(fd, iov, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (k == 0) return EIO;
        off += (uint64_t)k;
        *landed += (uint64_t)k;
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

/* Reads the iov bytes in order into a buffer. */
typedef struct iov_cursor {
    const struct iovec *iov;
    int n, i;
    size_t in; /* bytes of iov[i] already taken */
} iov_cursor;

static void cursor_take(iov_cursor *c, uint8_t *dst, size_t len) {
    while (len > 0 && c->i < c->n) {
        size_t k = c->iov[c->i].iov_len - c->in;
        if (k > len) k = len;
        memcpy(dst, (const uint8_t *)c->iov[c->i].iov_base + c->in, k);
        dst += k;
        len -= k;
        c->in += k;
        if (c->in == c->iov[c->i].iov_len) {
            c->i++;
            c->in = 0;
        }
    }
}

static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off) {
    struct iovec one = {(void *)p, len};
    uint64_t landed;
    return mst_pwritev_all(fd, &one, 1, off, &landed);
}

/* The file's bytes [base, off) into stage: the kept block start, else
 * read back — the whole block, through the O_DIRECT descriptor (the
 * caller's may be write-only), which sees buffered writes too. */
static int load_head(mst_direct_writer *w, uint64_t base, uint64_t off) {
    size_t h = (size_t)(off - base);
    if (!h) return 0;
    if (w->head_ok && w->head_off == base && w->head_len >= h) {
        memcpy(w->stage, w->head, h);
        return 0;
    }
    ssize_t k;
    do k = pread(w->dio_fd, w->stage, w->align, (off_t)base);
    while (k < 0 && errno == EINTR);
    if (k < 0) return errno;
    return (size_t)k >= h ? 0 : EIO; /* shorter: the file is not what the caller says */
}

/* The direct path for a write of `total` bytes at off; 0 or an errno (then
 * the caller writes it all again the ordinary way). */
static int direct_path(mst_direct_writer *w, const struct iovec *iov, int n, uint64_t off,
                       size_t total) {
    const uint64_t a = w->align;
    uint64_t end = off + total, base = off & ~(a - 1), dio_end = end & ~(a - 1);
    if (!w->stage) {
        void *p = NULL;
        if (posix_memalign(&p, a, STAGE_BYTES) != 0) return ENOMEM;
        w->stage = p;
        w->stage_cap = STAGE_BYTES;
    }
    if (!w->head && !(w->head = malloc(a))) return ENOMEM;
    int e = load_head(w, base, off);
    w->head_ok = false; /* until this write is all in */
    if (e) return e;
    iov_cursor c = {iov, n, 0, 0};
    size_t fill = (size_t)(off - base);
    for (uint64_t at = base; at < dio_end;) {
        size_t seg = dio_end - at < w->stage_cap ? (size_t)(dio_end - at) : w->stage_cap;
        cursor_take(&c, w->stage + fill, seg - fill);
        if ((e = pwrite_all(w->dio_fd, w->stage, seg, at))) return e;
        w->direct_bytes += seg;
        at += seg;
        fill = 0;
    }
    size_t rem = (size_t)(end - dio_end); /* < a, or the whole write was in one block */
    cursor_take(&c, w->stage, rem); /* fill is 0: the loop ran at least once */
    if ((e = pwrite_all(w->fd, w->stage, rem, dio_end))) return e;
    memcpy(w->head, w->stage, rem);
    w->head_off = dio_end;
    w->head_len = rem;
    w->head_ok = true;
    return 0;
}

int mst_direct_pwritev(mst_direct_writer *w, struct iovec *iov, int n, uint64_t off,
                       uint64_t *landed) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    if (w->dio_fd >= 0) {
        uint64_t a = w->align, base = off & ~(a - 1), dio_end = (off + total) & ~(a - 1);
        if (dio_end > base && dio_end - base >= MST_DIRECT_MIN) {
            int e = direct_path(w, iov, n, off, total);
            if (!e) {
                *landed = total;
                return 0;
            }
            w->head_ok = false;
            if (e == EINVAL) { /* this file system's alignment, or none: off for good */
                close(w->dio_fd);
                w->dio_fd = -1;
            }
            /* What the direct path wrote is what the ordinary write below
             * writes again; its result is the one that counts. */
        }
    }
    w->head_ok = false; /* a buffered write: the block start is read back if needed */
    return mst_pwritev_all(w->fd, iov, n, off, landed);
}
