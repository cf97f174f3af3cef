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
#include <unistd.h>

#include "core/log.h"

#define CHUNK_BYTES (2u << 20)  /* a chunk is handed over once this full */
#define EARLY_BYTES (256u << 10) /* ... or this full when the writer is idle */
#define KEEP_FREE 4             /* recycled chunks kept allocated */
#define MAX_IOV 64              /* chunks per pwritev */

typedef struct chunk {
    mst_buf b;
    uint64_t spans, flows;
    struct chunk *next;
} chunk;

const mst_outq_layout MST_OUTQ_JSON_ARRAY = {.tail = "]", .tail_len = 1, .first_skip = 1};

struct mst_outq {
    int fd;
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
    free(c);
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

/* pwritev of every iov byte at off, retrying EINTR and short writes. */
static int pwritev_all(int fd, struct iovec *iov, int n, uint64_t off) {
    while (n > 0) {
        ssize_t k = pwritev(fd, iov, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (k == 0) return EIO;
        off += (uint64_t)k;
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

/* Puts the tail back at end_off and cuts the file there: undoes a failed
 * (partial) write so the file is valid again. Writer side (or after the
 * join); false when that failed too. */
static bool restore_tail(mst_outq *q) {
    const mst_outq_layout *l = q->layout;
    bool ok = true;
    if (l->tail_len) {
        struct iovec iov = {.iov_base = (void *)l->tail, .iov_len = l->tail_len};
        ok = pwritev_all(q->fd, &iov, 1, q->end_off) == 0;
    }
    /* Cutting back never needs space, and frees what the partial write took. */
    if (ftruncate(q->fd, (off_t)(q->end_off + l->tail_len)) != 0) ok = false;
    return ok;
}

/* Writes chunks first..(at most MAX_IOV) and the tail at end_off. Returns 0
 * or an errno (the file then restored, *restore_failed set if that failed
 * too); *last = the last chunk written (or attempted). */
static int write_chunks(mst_outq *q, chunk *first, chunk *stop_after, chunk **last,
                        uint64_t *bytes, bool *restore_failed) {
    struct iovec iov[MAX_IOV + 1];
    int n = 0;
    size_t total = 0;
    chunk *c = first;
    for (;;) {
        const uint8_t *p = c->b.data;
        size_t len = c->b.len;
        if (n == 0 && !q->has_elements && len) { /* e.g. the first element's ',' */
            size_t skip = q->layout->first_skip < len ? q->layout->first_skip : len;
            p += skip;
            len -= skip;
        }
        iov[n].iov_base = (void *)p;
        iov[n].iov_len = len;
        total += len;
        n++;
        *last = c;
        if (c == stop_after || n == MAX_IOV) break;
        c = c->next;
    }
    iov[n].iov_base = (void *)q->layout->tail;
    iov[n].iov_len = q->layout->tail_len;
    /* Reserve the blocks first (without changing the file's size): on a full
     * disk the write then fails before any byte of it reaches the file, so a
     * reader never sees a partial write even for the moment before the undo
     * below. Where fallocate is not supported, or the limit is not space
     * (RLIMIT_FSIZE), the write is tried and undone as before. */
    size_t need = total + q->layout->tail_len;
    if (need && fallocate(q->fd, FALLOC_FL_KEEP_SIZE, (off_t)q->end_off, (off_t)need) != 0) {
        int fe = errno;
        if (fe == ENOSPC || fe == EDQUOT) {
            *restore_failed = false; /* nothing was written: the file is as it was */
            return fe;
        }
    }
    int e = pwritev_all(q->fd, iov, n + 1, q->end_off);
    if (e) {
        *restore_failed = !restore_tail(q);
        return e;
    }
    if (total) q->has_elements = true;
    q->end_off += total;
    *bytes = total; /* the old tail was overwritten by the new one */
    return 0;
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

static void after_write_locked(mst_outq *q, chunk *last, int e, uint64_t bytes) {
    q->last_err = e;
    if (!e) {
        uint64_t spans, flows;
        release_through_locked(q, last, &spans, &flows);
        q->st.spans_written += spans;
        q->st.flows_written += flows;
        q->st.bytes_written += bytes;
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

static void *writer_main(void *arg) {
    mst_outq *q = arg;
    pthread_setname_np(pthread_self(), "mstrace-writer"); /* for top/perf */
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && !(q->head && (!q->stalled || q->retry)))
            pthread_cond_wait(&q->cv_work, &q->mu);
        if (!q->head || (q->stalled && !q->retry)) break; /* stop: nothing to try */
        q->retry = false;
        q->writing = true;
        chunk *first = q->head, *stop_after = q->tail, *last = NULL;
        pthread_mutex_unlock(&q->mu);
        uint64_t bytes = 0;
        bool restore_failed = false;
        int e = write_chunks(q, first, stop_after, &last, &bytes, &restore_failed);
        pthread_mutex_lock(&q->mu);
        if (restore_failed) q->st.write_errors++;
        q->writing = false;
        after_write_locked(q, last, e, bytes);
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
        mst_buf_append(&q->tail->b, c->b.data, c->b.len);
        if (q->tail->b.failed) { /* out of memory: keep them here for now */
            q->tail->b.failed = false;
            return;
        }
        q->tail->spans += c->spans;
        q->tail->flows += c->flows;
        atomic_fetch_add_explicit(&q->queued_bytes, c->b.len, memory_order_relaxed);
        mst_buf_reset(&c->b);
        c->spans = c->flows = 0;
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
    q->layout = layout;
    q->end_off = end_off;
    q->st.bytes_written = bytes_so_far;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv_work, NULL);
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
