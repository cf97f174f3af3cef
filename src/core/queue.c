/*
 * queue.c — the bounded lock-free MPMC pointer queue of queue.h.
 *
 * Invariant (Vyukov): cell i of the ring carries seq == pos when it is free
 * for the push claiming position pos, seq == pos + 1 when it holds the item
 * pushed at pos, and seq == pos + ring_size once popped (free for the next
 * lap). A producer claims a position with one CAS on `enq`, writes the
 * pointer, then publishes with a release store of seq; a consumer does the
 * mirror on `deq`. No locks, no syscalls, no allocation after init.
 */
#include "core/queue.h"

#include <stdlib.h>

bool mst_queue_init(mst_queue *q, uint32_t capacity) {
    if (capacity == 0) capacity = 1;
    uint64_t ring = 1;
    while (ring < capacity) ring <<= 1;
    q->cells = malloc(sizeof(mst_queue_cell) * ring);
    if (!q->cells) return false;
    q->mask = ring - 1;
    q->capacity = capacity;
    for (uint64_t i = 0; i < ring; i++) {
        atomic_init(&q->cells[i].seq, i);
        q->cells[i].data = NULL;
    }
    atomic_init(&q->enq, 0);
    atomic_init(&q->deq, 0);
    return true;
}

void mst_queue_destroy(mst_queue *q) {
    free(q->cells);
    q->cells = NULL;
}

bool mst_queue_push(mst_queue *q, void *p, uint64_t *depth_hint) {
    uint64_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
    uint64_t deq;
    mst_queue_cell *c;
    for (;;) {
        c = &q->cells[pos & q->mask];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            /* The logical capacity may be below the ring size. */
            deq = atomic_load_explicit(&q->deq, memory_order_relaxed);
            if (pos - deq >= q->capacity) return false;
            /* seq_cst: the pipeline's sleep/wake handshake relies on this
             * RMW being ordered before the producer's later load of the
             * consumer's "sleeping" flag (a locked op on x86 anyway). */
            if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1, memory_order_seq_cst,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return false; /* the ring is full: the cell still holds last lap's item */
        } else {
            pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
        }
    }
    c->data = p;
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
    if (depth_hint) *depth_hint = pos + 1 - deq;
    return true;
}

void *mst_queue_pop(mst_queue *q) {
    uint64_t pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
    mst_queue_cell *c;
    for (;;) {
        c = &q->cells[pos & q->mask];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - (pos + 1));
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->deq, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return NULL; /* empty, or the producer has not published yet */
        } else {
            pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
        }
    }
    void *p = c->data;
    atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
    return p;
}

uint64_t mst_queue_size(const mst_queue *q) {
    mst_queue *m = (mst_queue *)q;
    uint64_t d = atomic_load_explicit(&m->deq, memory_order_seq_cst);
    uint64_t e = atomic_load_explicit(&m->enq, memory_order_seq_cst);
    return e > d ? e - d : 0;
}

void mst_queue_reset_after_fork(mst_queue *q, void (*drop)(void *item, void *ctx), void *ctx) {
    uint64_t d = atomic_load_explicit(&q->deq, memory_order_relaxed);
    uint64_t e = atomic_load_explicit(&q->enq, memory_order_relaxed);
    for (uint64_t pos = d; pos != e; pos++) {
        mst_queue_cell *c = &q->cells[pos & q->mask];
        if (atomic_load_explicit(&c->seq, memory_order_relaxed) == pos + 1 && drop) drop(c->data, ctx);
    }
    for (uint64_t i = 0; i <= q->mask; i++) {
        atomic_store_explicit(&q->cells[i].seq, i, memory_order_relaxed);
        q->cells[i].data = NULL;
    }
    atomic_store_explicit(&q->enq, 0, memory_order_relaxed);
    atomic_store_explicit(&q->deq, 0, memory_order_relaxed);
}
