/*
 * out_queue.c — the threaded, chunked output of the Chrome Trace writer
 * (see out_queue.h for the file protocol and why).
 *
 * Hand-off rules (producer side):
 *   - a chunk is handed over once it holds CHUNK_BYTES, whatever the writer
 *     is doing (so a busy writer queues full chunks, never small ones);
 *   - a smaller chunk only when the writer is idle: at the end of every
 *     batch (mst_outq_handoff) and mid-batch from EARLY_BYTES on;
 *   - while the writer is stalled on a failed write, a hand-off appends the
 *     new elements to the retained tail chunk, so the retry writes both and
 *     the queue does not fill with small chunks.
 * The writer writes everything queued (at most MAX_IOV chunks) in one
 * pwritev, then recycles the chunks: up to KEEP_FREE stay allocated (their
 * pages resident), the rest are freed.
 *
 * Disk full, in pieces: every chunk keeps "cuts" — element boundaries at
 * least PIECE_BYTES apart, with the spans and flows before them — recorded
 * by mst_outq_added. When the space for the whole write cannot be reserved,
 * the longest prefix ending at a cut that can be reserved is written (found
 * by bisecting over the cuts with fallocate), so a disk with some room left
 * takes what fits and the rest waits; where a write still comes up short
 * (no fallocate, RLIMIT_FSIZE), the file is cut back to the last cut that
 * landed whole instead of to where the write started. A stalled writer
 * retries on its own every RETRY_MS, so space coming back is used without
 * new traffic.
 */
#include "forward/out_queue.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "forward/direct_write.h"

#define CHUNK_BYTES (2u << 20)  /* a chunk is handed over once this full */
#define EARLY_BYTES (256u << 10) /* ... or this full when the writer is idle */
#define KEEP_FREE 4             /* recycled chunks kept allocated */
#define MAX_IOV 64              /* chunks per pwritev */
#define PIECE_BYTES 4096u       /* cuts (element boundaries) at least this far apart: a page */
#define RETRY_MS 200            /* a stalled writer retries this often on its own */

/* An element boundary in a chunk: `off` bytes in, after `spans`/`flows`. */
typedef struct cut {
    size_t off;
    uint64_t spans, flows;
} cut;

typedef struct chunk {
    mst_buf b;
    uint64_t spans, flows;
    cut *cuts;                /* ascending; the chunk's end is a cut too, not stored */
    size_t n_cuts, cap_cuts;
    size_t last_cut;          /* cuts[n_cuts - 1].off, 0 when none: one compare per element */
    struct chunk *next;
} chunk;

/* A prefix of the queued chunks that ends at a cut: all of the chunks
 * before `c`, and `off` bytes of `c`; `file_len` bytes of elements. */
typedef struct prefix {
    chunk *c;
    size_t off;
    uint64_t spans, flows;     /* in c before off */
    uint64_t file_len;
} prefix;

const mst_outq_layout MST_OUTQ_JSON_ARRAY = {.tail = "]", .tail_len = 1, .first_skip = 1};

struct mst_outq {
    int fd;
    mst_direct_writer dw;     /* the writer thread's writes (direct_write.h) */
    const mst_outq_layout *layout;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* writer: a hand-off, a retry request or stop */
    pthread_cond_t cv_done;   /* flush: a write finished */
    chunk *cur;               /* producer's; NULL until needed */
    /* Under mu. The chunks head..tail are the writer's while `writing`. */
    chunk *head, *tail;
    chunk *free_list;
    size_t n_free;
    bool writing;
    bool stalled;             /* the last write failed and nothing new came */
    bool retry;               /* flush asks a stalled writer to try again */
    bool stop;
    int last_err;
    atomic_bool idle;         /* !writing && (!head || stalled): a hand-off is welcome */
    atomic_uint_fast64_t queued_bytes; /* bytes in head..tail */
    mst_outq_stats st;
    /* Writer-owned (or anyone's once the thread is joined). */
    uint64_t end_off;
    bool has_elements;
};

static void chunk_free(chunk *c) {
    if (!c) return;
    mst_buf_free(&c->b);
    free(c->cuts);
    free(c);
}

/* Records a cut at the chunk's current end. Out of memory only makes the
 * pieces coarser, so it is not an error. */
static void chunk_add_cut(chunk *c, size_t off, uint64_t spans, uint64_t flows) {
    if (c->n_cuts == c->cap_cuts) {
        size_t cap = c->cap_cuts ? c->cap_cuts * 2 : 64;
        cut *n = realloc(c->cuts, cap * sizeof *n);
        if (!n) return;
        c->cuts = n;
        c->cap_cuts = cap;
    }
    c->cuts[c->n_cuts++] = (cut){off, spans, flows};
    c->last_cut = off;
}

/* Records a cut at `off` when it is PIECE_BYTES past the last one. */
static inline void chunk_maybe_cut(chunk *c, size_t off, uint64_t spans, uint64_t flows) {
    if (off - c->last_cut >= PIECE_BYTES) chunk_add_cut(c, off, spans, flows);
}

/* Drops the first `off` bytes of c (they are in the file now), with the
 * spans and flows before them; the cuts after it move down. */
static void chunk_trim_front(chunk *c, size_t off, uint64_t spans, uint64_t flows) {
    memmove(c->b.data, c->b.data + off, c->b.len - off);
    c->b.len -= off;
    c->spans -= spans;
    c->flows -= flows;
    size_t k = 0;
    for (size_t i = 0; i < c->n_cuts; i++) {
        if (c->cuts[i].off <= off) continue;
        c->cuts[k++] = (cut){c->cuts[i].off - off, c->cuts[i].spans - spans,
                             c->cuts[i].flows - flows};
    }
    c->n_cuts = k;
    c->last_cut = k ? c->cuts[k - 1].off : 0;
}

static chunk *chunk_new(void) {
    chunk *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    mst_buf_init(&c->b, 0);
    /* Sized once (a little over CHUNK_BYTES so the element that crosses the
     * line fits) rather than grown by doubling: no multi-MB reallocs. */
    if (!mst_buf_reserve(&c->b, CHUNK_BYTES + (64u << 10))) {
        chunk_free(c);
        return NULL;
    }
    return c;
}

/* Under mu: keeps a written chunk for reuse or frees it (an oversized one
 * grown by a huge element is always freed). */
static void recycle_locked(mst_outq *q, chunk *c) {
    if (q->n_free < KEEP_FREE && c->b.cap <= CHUNK_BYTES * 2) {
        mst_buf_reset(&c->b);
        c->spans = c->flows = 0;
        c->n_cuts = c->last_cut = 0;
        c->next = q->free_list;
        q->free_list = c;
        q->n_free++;
    } else {
        chunk_free(c);
    }
}

static void set_idle_locked(mst_outq *q) {
    atomic_store_explicit(&q->idle, !q->writing && (!q->head || q->stalled),
                          memory_order_release);
}

/* Puts the tail at `at` and cuts the file right after it: the file is then
 * valid up to `at`. Writer side (or after the join); false when that
 * failed. Only ever called where the bytes at `at` are already the file's
 * (end_off, or inside what a write just put there), so it needs no space. */
static bool put_tail_at(mst_outq *q, uint64_t at) {
    const mst_outq_layout *l = q->layout;
    bool ok = true;
    if (l->tail_len) {
        struct iovec iov = {.iov_base = (void *)l->tail, .iov_len = l->tail_len};
        uint64_t landed;
        ok = mst_pwritev_all(q->fd, &iov, 1, at, &landed) == 0;
    }
    mst_direct_writer_forget(&q->dw);
    /* Cutting back never needs space, and frees what a partial write took. */
    if (ftruncate(q->fd, (off_t)(at + l->tail_len)) != 0) ok = false;
    return ok;
}

/* Undoes a failed (partial) write: the file is valid again at end_off. */
static bool restore_tail(mst_outq *q) { return put_tail_at(q, q->end_off); }

/* Bytes at the start of c that never go to the file: the very first
 * element's first_skip (JSON: its leading ','). */
static size_t chunk_skip(const mst_outq *q, const chunk *c, const chunk *first) {
    if (c != first || q->has_elements) return 0;
    return q->layout->first_skip < c->b.len ? q->layout->first_skip : c->b.len;
}

/* All of the chunks first..last as a prefix. */
static prefix whole_prefix(const mst_outq *q, chunk *first, chunk *last) {
    prefix p = {.c = last, .off = last->b.len, .spans = last->spans, .flows = last->flows};
    for (chunk *c = first;; c = c->next) {
        p.file_len += c->b.len - chunk_skip(q, c, first);
        if (c == last) break;
    }
    return p;
}

/* The prefixes of first..last that end at a cut, shortest first; the last
 * one is all of them. Failure path only (it allocates); NULL when out of
 * memory. */
static prefix *list_prefixes(const mst_outq *q, chunk *first, chunk *last, size_t *n) {
    size_t total = 0;
    for (chunk *c = first;; c = c->next) {
        total += c->n_cuts + 1;
        if (c == last) break;
    }
    prefix *p = malloc(total * sizeof *p);
    if (!p) return NULL;
    uint64_t base = 0;
    size_t k = 0;
    for (chunk *c = first;; c = c->next) {
        size_t skip = chunk_skip(q, c, first);
        for (size_t i = 0; i < c->n_cuts; i++) {
            const cut *x = &c->cuts[i];
            if (x->off > skip && x->off < c->b.len)
                p[k++] = (prefix){c, x->off, x->spans, x->flows, base + x->off - skip};
        }
        base += c->b.len - skip;
        p[k++] = (prefix){c, c->b.len, c->spans, c->flows, base};
        if (c == last) break;
    }
    *n = k;
    return p;
}

/* The iovecs for `end` (the chunks from first up to it, then the tail). */
static int prefix_iov(const mst_outq *q, chunk *first, const prefix *end, struct iovec *iov) {
    int n = 0;
    for (chunk *c = first;; c = c->next) {
        size_t skip = chunk_skip(q, c, first);
        size_t len = c == end->c ? end->off : c->b.len;
        iov[n].iov_base = c->b.data + skip;
        iov[n].iov_len = len - skip;
        n++;
        if (c == end->c) break;
    }
    iov[n].iov_base = (void *)q->layout->tail;
    iov[n].iov_len = q->layout->tail_len;
    return n + 1;
}

static bool no_space(int e) { return e == ENOSPC || e == EDQUOT; }

/* The space for all of first..last could not be reserved: finds the
 * longest prefix ending at a cut whose space can be (bisecting: a prefix
 * that fits means every shorter one fits). False when none fits. */
static bool longest_reservable(const mst_outq *q, chunk *first, chunk *last, prefix *out) {
    size_t n;
    prefix *p = list_prefixes(q, first, last, &n);
    if (!p) return false;
    long lo = -1, hi = (long)n - 1; /* p[hi] (everything) did not fit */
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        off_t len = (off_t)(p[mid].file_len + q->layout->tail_len);
        if (fallocate(q->fd, FALLOC_FL_KEEP_SIZE, (off_t)q->end_off, len) == 0) lo = mid;
        else hi = mid;
    }
    if (lo >= 0) *out = p[lo];
    free(p);
    return lo >= 0;
}

/* After a write that came up short with `landed` bytes in the file: the
 * longest prefix ending at a cut that landed whole with room for the tail
 * inside what landed (so the tail needs no new space). */
static bool longest_landed(const mst_outq *q, chunk *first, chunk *last, uint64_t landed,
                           prefix *out) {
    size_t n;
    prefix *p = list_prefixes(q, first, last, &n);
    if (!p) return false;
    bool found = false;
    for (size_t i = 0; i < n && p[i].file_len + q->layout->tail_len <= landed; i++) {
        *out = p[i];
        found = p[i].file_len > 0;
    }
    free(p);
    return found;
}

/* Writes chunks first..(at most MAX_IOV) and the tail at end_off; as much
 * of them as the disk takes, in whole elements. Returns 0 when all were
 * written, else an errno; *done = what is in the file now (done->c NULL:
 * nothing, the file as it was — restored, *restore_failed set if that
 * failed too). */
static int write_chunks(mst_outq *q, chunk *first, chunk *stop_after, prefix *done,
                        bool *restore_failed) {
    chunk *end = first;
    for (int n = 1; end != stop_after && n < MAX_IOV; n++) end = end->next;
    memset(done, 0, sizeof *done);
    prefix target = whole_prefix(q, first, end);
    /* Reserve the blocks first (without changing the file's size): on a full
     * disk the write then fails before any byte of it reaches the file, so a
     * reader never sees a partial write even for the moment before the undo
     * below. When the whole does not fit, the longest prefix that does is
     * written. Where fallocate is not supported, or the limit is not space
     * (RLIMIT_FSIZE), the write is tried and a short one cut back below. */
    int partial_err = 0;
    size_t need = target.file_len + q->layout->tail_len;
    if (need && fallocate(q->fd, FALLOC_FL_KEEP_SIZE, (off_t)q->end_off, (off_t)need) != 0) {
        int fe = errno;
        if (no_space(fe)) {
            if (!longest_reservable(q, first, end, &target)) return fe; /* nothing written */
            partial_err = fe;
        }
    }
    struct iovec iov[MAX_IOV + 1];
    int n = prefix_iov(q, first, &target, iov);
    uint64_t landed;
    int e = mst_direct_pwritev(&q->dw, iov, n, q->end_off, &landed);
    if (!e) {
        *done = target;
        return partial_err;
    }
    prefix keep;
    if (longest_landed(q, first, end, landed, &keep) &&
        put_tail_at(q, q->end_off + keep.file_len)) {
        *done = keep;
        return e;
    }
    *restore_failed = !restore_tail(q);
    return e;
}

/* Takes the chunks head..`upto` off the queue (written or given up on),
 * recycles them and returns how many spans and flows they held. Under mu. */
static void release_through_locked(mst_outq *q, chunk *upto, uint64_t *spans, uint64_t *flows) {
    *spans = *flows = 0;
    for (chunk *c = q->head;;) {
        chunk *next = c->next;
        *spans += c->spans;
        *flows += c->flows;
        atomic_fetch_sub_explicit(&q->queued_bytes, c->b.len, memory_order_relaxed);
        bool end = c == upto;
        recycle_locked(q, c);
        if (end) {
            q->head = next;
            break;
        }
        c = next;
    }
    if (!q->head) q->tail = NULL;
}

/* `done` is in the file: the chunks before done->c leave the queue, and
 * done->c too when it was written whole, else its written front is cut
 * off. Counts what was written. Under mu (writer side). */
static void commit_locked(mst_outq *q, const prefix *done) {
    uint64_t spans = 0, flows = 0;
    if (done->c != q->head) {
        chunk *before = q->head;
        while (before->next != done->c) before = before->next;
        release_through_locked(q, before, &spans, &flows);
    }
    if (done->off == done->c->b.len) {
        uint64_t s, f;
        release_through_locked(q, done->c, &s, &f);
        spans += s;
        flows += f;
    } else {
        chunk_trim_front(done->c, done->off, done->spans, done->flows);
        atomic_fetch_sub_explicit(&q->queued_bytes, done->off, memory_order_relaxed);
        spans += done->spans;
        flows += done->flows;
    }
    q->st.spans_written += spans;
    q->st.flows_written += flows;
    q->st.bytes_written += done->file_len; /* the old tail was overwritten by the new one */
    q->end_off += done->file_len;
    if (done->file_len) q->has_elements = true;
}

/* Gives up on the retained chunks head..`upto` (writer side or after the
 * join), counting their spans as dropped; the file already ends at its
 * last good state (restore_tail after the failed write). Under mu. */
static void drop_retained_locked(mst_outq *q, chunk *upto) {
    uint64_t spans, flows;
    release_through_locked(q, upto, &spans, &flows);
    q->st.spans_dropped += spans;
    MST_ERROR("perfetto output: dropping %llu buffered spans after write errors",
              (unsigned long long)spans);
    if (!restore_tail(q)) q->st.write_errors++;
}

static void after_write_locked(mst_outq *q, int e, const prefix *done) {
    q->last_err = e;
    if (done->c) commit_locked(q, done);
    if (!e) {
        q->stalled = false;
        return;
    }
    q->st.write_errors++;
    if (q->st.write_errors == 1 || q->st.write_errors % 1000 == 0)
        MST_ERROR("perfetto output: write failed: %s (%llu errors so far)", strerror(e),
                  (unsigned long long)q->st.write_errors);
    q->stalled = true;
    if (atomic_load_explicit(&q->queued_bytes, memory_order_relaxed) > MST_OUTQ_MAX_RETAIN_BYTES) {
        drop_retained_locked(q, q->tail);
        q->stalled = false;
    }
}

/* Under mu: waits for work; a stalled writer (data kept after a failed
 * write) wakes itself every RETRY_MS to try again, so freed space is used
 * even when no new data arrives. */
static void wait_work_locked(mst_outq *q) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += (long)RETRY_MS * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    while (!q->stop && !(q->head && (!q->stalled || q->retry))) {
        if (!(q->head && q->stalled)) {
            pthread_cond_wait(&q->cv_work, &q->mu);
        } else if (pthread_cond_timedwait(&q->cv_work, &q->mu, &deadline) == ETIMEDOUT) {
            q->retry = true;
        }
    }
}

static void *writer_main(void *arg) {
    mst_outq *q = arg;
    pthread_setname_np(pthread_self(), "mstrace-writer"); /* for top/perf */
    pthread_mutex_lock(&q->mu);
    for (;;) {
        wait_work_locked(q);
        if (!q->head || (q->stalled && !q->retry)) break; /* stop: nothing to try */
        q->retry = false;
        q->writing = true;
        chunk *first = q->head, *stop_after = q->tail;
        pthread_mutex_unlock(&q->mu);
        prefix done;
        bool restore_failed = false;
        int e = write_chunks(q, first, stop_after, &done, &restore_failed);
        pthread_mutex_lock(&q->mu);
        if (restore_failed) q->st.write_errors++;
        q->writing = false;
        after_write_locked(q, e, &done);
        set_idle_locked(q);
        pthread_cond_broadcast(&q->cv_done);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Under mu: queues the current chunk behind whatever is queued (or, when
 * the writer is stalled on a failed write, appends it to the retained tail
 * chunk) and wakes the writer. While a write is in flight only chunks
 * after its last one change. The producer's next chunk is a recycled one,
 * else made lazily by mst_outq_buf. */
static void push_locked(mst_outq *q) {
    chunk *c = q->cur;
    if (!c || c->b.len == 0) return;
    if (q->stalled && q->tail && !q->writing) {
        chunk *t = q->tail;
        size_t old_len = t->b.len;
        mst_buf_append(&t->b, c->b.data, c->b.len);
        if (t->b.failed) { /* out of memory: keep them here for now */
            t->b.failed = false;
            return;
        }
        /* The old end and c's cuts are element boundaries of the tail now. */
        chunk_maybe_cut(t, old_len, t->spans, t->flows);
        for (size_t i = 0; i < c->n_cuts; i++)
            chunk_maybe_cut(t, old_len + c->cuts[i].off, t->spans + c->cuts[i].spans,
                            t->flows + c->cuts[i].flows);
        t->spans += c->spans;
        t->flows += c->flows;
        atomic_fetch_add_explicit(&q->queued_bytes, c->b.len, memory_order_relaxed);
        mst_buf_reset(&c->b);
        c->spans = c->flows = 0;
        c->n_cuts = c->last_cut = 0;
    } else {
        c->next = NULL;
        if (q->tail) q->tail->next = c; else q->head = c;
        q->tail = c;
        atomic_fetch_add_explicit(&q->queued_bytes, c->b.len, memory_order_relaxed);
        q->cur = NULL;
        if (q->free_list) { /* recycled chunk, taken while we hold the lock */
            q->cur = q->free_list;
            q->free_list = q->cur->next;
            q->n_free--;
        }
    }
    q->stalled = false; /* new data: the writer tries again */
    set_idle_locked(q);
    pthread_cond_signal(&q->cv_work);
}

mst_buf *mst_outq_buf(mst_outq *q) {
    if (!q->cur && !(q->cur = chunk_new())) return NULL;
    return &q->cur->b;
}

void mst_outq_added(mst_outq *q, uint64_t spans, uint64_t flows) {
    chunk *c = q->cur;
    c->spans += spans;
    c->flows += flows;
    chunk_maybe_cut(c, c->b.len, c->spans, c->flows);
    bool full = c->b.len >= CHUNK_BYTES;
    if (full || (c->b.len >= EARLY_BYTES &&
                 atomic_load_explicit(&q->idle, memory_order_acquire))) {
        /* A full chunk is queued even behind a write in flight; a partial
         * one only while the writer has nothing to do. */
        pthread_mutex_lock(&q->mu);
        if (full || !q->writing) push_locked(q);
        pthread_mutex_unlock(&q->mu);
    }
}

bool mst_outq_wait_room(mst_outq *q, uint64_t cap) {
    pthread_mutex_lock(&q->mu);
    q->st.waits++;
    for (;;) {
        uint64_t un = atomic_load_explicit(&q->queued_bytes, memory_order_relaxed) +
                      (q->cur ? q->cur->b.len : 0);
        if (un < cap) break;
        if (q->writing || (q->head && !q->stalled)) { /* the writer is making progress */
            pthread_cond_wait(&q->cv_done, &q->mu);
        } else if (q->cur && q->cur->b.len && q->stalled) { /* a retry with the new data */
            size_t before = q->cur->b.len;
            push_locked(q);
            if (q->cur && q->cur->b.len == before) break; /* out of memory */
        } else {
            break;
        }
    }
    bool ok = atomic_load_explicit(&q->queued_bytes, memory_order_relaxed) +
                  (q->cur ? q->cur->b.len : 0) < cap;
    pthread_mutex_unlock(&q->mu);
    return ok;
}

uint64_t mst_outq_unwritten(const mst_outq *q) {
    return atomic_load_explicit(&q->queued_bytes, memory_order_relaxed) +
           (q->cur ? q->cur->b.len : 0);
}

int mst_outq_handoff(mst_outq *q) {
    if (!q->cur || q->cur->b.len == 0) return 0;
    if (!atomic_load_explicit(&q->idle, memory_order_acquire)) return 1;
    pthread_mutex_lock(&q->mu);
    if (!q->writing) push_locked(q);
    int busy = q->cur && q->cur->b.len ? 1 : 0;
    pthread_mutex_unlock(&q->mu);
    return busy;
}

mst_status mst_outq_flush(mst_outq *q) {
    pthread_mutex_lock(&q->mu);
    while (q->writing) pthread_cond_wait(&q->cv_done, &q->mu);
    push_locked(q);
    if (q->head) {
        q->retry = true;
        pthread_cond_signal(&q->cv_work);
        while (q->writing || (q->head && (!q->stalled || q->retry)))
            pthread_cond_wait(&q->cv_done, &q->mu);
    }
    mst_status st = MST_OK;
    if (q->head) st = q->last_err == ENOMEM ? MST_ERR_NOMEM : MST_ERR_IO;
    else if (q->cur && q->cur->b.len) st = MST_ERR_NOMEM; /* could not join a retry */
    pthread_mutex_unlock(&q->mu);
    return st;
}

void mst_outq_get_stats(mst_outq *q, mst_outq_stats *out) {
    pthread_mutex_lock(&q->mu);
    *out = q->st;
    pthread_mutex_unlock(&q->mu);
}

static void outq_free(mst_outq *q) {
    chunk_free(q->cur);
    for (chunk *c = q->head; c;) {
        chunk *next = c->next;
        chunk_free(c);
        c = next;
    }
    for (chunk *c = q->free_list; c;) {
        chunk *next = c->next;
        chunk_free(c);
        c = next;
    }
    mst_direct_writer_close(&q->dw);
    pthread_cond_destroy(&q->cv_work);
    pthread_cond_destroy(&q->cv_done);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

mst_status mst_outq_start(int fd, uint64_t end_off, uint64_t bytes_so_far, mst_outq **out) {
    return mst_outq_start_layout(fd, &MST_OUTQ_JSON_ARRAY, end_off, bytes_so_far, out);
}

mst_status mst_outq_start_layout(int fd, const mst_outq_layout *layout, uint64_t end_off,
                                 uint64_t bytes_so_far, mst_outq **out) {
    *out = NULL;
    mst_outq *q = calloc(1, sizeof *q);
    if (!q) return MST_ERR_NOMEM;
    q->fd = fd;
    mst_direct_writer_init(&q->dw, fd);
    q->layout = layout;
    q->end_off = end_off;
    q->st.bytes_written = bytes_so_far;
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t mono; /* the retry timer must not jump with the wall clock */
    pthread_condattr_init(&mono);
    pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv_work, &mono);
    pthread_condattr_destroy(&mono);
    pthread_cond_init(&q->cv_done, NULL);
    atomic_init(&q->idle, true);
    atomic_init(&q->queued_bytes, 0);
    /* The writer takes no signals: the daemon reads SIGINT/SIGTERM from a
     * signalfd, which needs them blocked in every thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&q->th, NULL, writer_main, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        outq_free(q);
        return MST_ERR_NOMEM;
    }
    q->started = true;
    *out = q;
    return MST_OK;
}

mst_status mst_outq_stop(mst_outq *q, mst_outq_stats *final) {
    mst_status st = mst_outq_flush(q);
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_signal(&q->cv_work);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    /* Only this thread is left: what could not be written is dropped. */
    pthread_mutex_lock(&q->mu);
    if (q->cur && q->cur->b.len) { /* out of memory joining the retry */
        q->cur->next = NULL;
        if (q->tail) q->tail->next = q->cur; else q->head = q->cur;
        q->tail = q->cur;
        atomic_fetch_add_explicit(&q->queued_bytes, q->cur->b.len, memory_order_relaxed);
        q->cur = NULL;
    }
    if (q->head) drop_retained_locked(q, q->tail);
    if (final) *final = q->st;
    pthread_mutex_unlock(&q->mu);
    outq_free(q);
    return st;
}
