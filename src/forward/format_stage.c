/*
 * format_stage.c — the forwarder's formatting thread and the bounded hand-over
 * of span batches to it (format_stage.h).
 *
 * One mutex and two condition variables guard a FIFO of handed-over
 * batches and a stack of free ones. Both are touched once per batch (up to
 * a thousand spans), never per span, so the lock costs nothing that shows.
 */
#include "forward/format_stage.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "forward/daemon.h"

struct mst_format_stage {
    mst_format_stage_ops ops;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work;   /* a batch was handed over, or stop */
    pthread_cond_t freed;  /* a batch came back */
    mst_span_batch *all[MST_FORMAT_STAGE_BATCHES];
    mst_span_batch *free_stack[MST_FORMAT_STAGE_BATCHES];
    size_t n_free;
    mst_span_batch *queue[MST_FORMAT_STAGE_BATCHES]; /* FIFO ring */
    size_t q_head, q_len;
    mst_span_batch *filling; /* the loop's; not in either list */
    bool stopping;
};

/* Waits on cv until the monotonic deadline (ms); false once it has passed. */
static bool wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ms) {
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000),
                          .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    return pthread_cond_timedwait(cv, mu, &ts) != ETIMEDOUT;
}

static void *stage_main(void *arg) {
    mst_format_stage *st = arg;
    pthread_setname_np(pthread_self(), "mstrace-format"); /* for top/perf/bench_forward */
    int64_t deadline = -1; /* monotonic ms of the next `after`, -1 none */
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (st->q_len == 0 && !st->stopping) {
            if (deadline < 0) {
                pthread_cond_wait(&st->work, &st->mu);
            } else if (!wait_until(&st->work, &st->mu, (uint64_t)deadline) ||
                       mst_daemon_now_ms() >= (uint64_t)deadline) {
                break;
            }
        }
        mst_span_batch *b = NULL;
        if (st->q_len) {
            b = st->queue[st->q_head];
            st->q_head = (st->q_head + 1) % MST_FORMAT_STAGE_BATCHES;
            st->q_len--;
        } else if (st->stopping) {
            break;
        }
        pthread_mutex_unlock(&st->mu);
        if (b) {
            st->ops.consume(st->ops.self, b);
            mst_span_batch_reset(b);
        }
        uint64_t now = mst_daemon_now_ms();
        int next = st->ops.after(st->ops.self, now);
        pthread_mutex_lock(&st->mu);
        if (b) {
            st->free_stack[st->n_free++] = b;
            pthread_cond_signal(&st->freed);
        }
        deadline = next < 0 ? -1 : (int64_t)(now + (uint64_t)next);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

static void free_stage(mst_format_stage *st) {
    for (size_t i = 0; i < MST_FORMAT_STAGE_BATCHES; i++) mst_span_batch_free(st->all[i]);
    free(st);
}

mst_status mst_format_stage_start(const mst_format_stage_ops *ops, mst_format_stage **out) {
    if (!ops || !ops->consume || !ops->after || !out) return MST_ERR_INVALID_ARG;
    mst_format_stage *st = calloc(1, sizeof *st);
    if (!st) return MST_ERR_NOMEM;
    st->ops = *ops;
    for (size_t i = 0; i < MST_FORMAT_STAGE_BATCHES; i++) {
        if (!(st->all[i] = mst_span_batch_new())) {
            free_stage(st);
            return MST_ERR_NOMEM;
        }
        st->free_stack[st->n_free++] = st->all[i];
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->work, &ca);
    pthread_cond_init(&st->freed, NULL);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&st->thread, NULL, stage_main, st) != 0) {
        pthread_cond_destroy(&st->work);
        pthread_cond_destroy(&st->freed);
        pthread_mutex_destroy(&st->mu);
        free_stage(st);
        return MST_ERR_IO;
    }
    *out = st;
    return MST_OK;
}

mst_span_batch *mst_format_stage_batch(mst_format_stage *st) {
    if (st->filling) return st->filling;
    pthread_mutex_lock(&st->mu);
    while (st->n_free == 0) pthread_cond_wait(&st->freed, &st->mu);
    st->filling = st->free_stack[--st->n_free];
    pthread_mutex_unlock(&st->mu);
    return st->filling;
}

void mst_format_stage_publish(mst_format_stage *st) {
    mst_span_batch *b = st->filling;
    if (!b || mst_span_batch_count(b) == 0) return;
    st->filling = NULL;
    pthread_mutex_lock(&st->mu);
    st->queue[(st->q_head + st->q_len) % MST_FORMAT_STAGE_BATCHES] = b;
    st->q_len++;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->mu);
}

void mst_format_stage_stop(mst_format_stage *st) {
    if (!st) return;
    mst_format_stage_publish(st);
    pthread_mutex_lock(&st->mu);
    st->stopping = true;
    pthread_cond_signal(&st->work);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->thread, NULL);
    pthread_cond_destroy(&st->work);
    pthread_cond_destroy(&st->freed);
    pthread_mutex_destroy(&st->mu);
    free_stage(st);
}
