/*
 * queue.h — a bounded lock-free multi-producer multi-consumer queue of
 * pointers (Dmitry Vyukov's ring: one sequence number per cell, one CAS per
 * push or pop, no locks). The pipeline uses one as the span queue (many
 * producer threads, one exporter thread) and one as the pool of recycled
 * span records (pushed by the exporter thread, popped by producers).
 *
 * Capacity is exact: the ring is the next power of two, and a push refuses
 * when `capacity` items are already claimed.
 */
#ifndef MST_CORE_QUEUE_H
#define MST_CORE_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mst_queue_cell {
    _Atomic uint64_t seq;
    void *data;
} mst_queue_cell;

typedef struct mst_queue {
    mst_queue_cell *cells;
    uint64_t mask;       /* ring size - 1 */
    uint64_t capacity;   /* logical capacity (<= ring size) */
    _Alignas(64) _Atomic uint64_t enq;  /* next position to claim for a push */
    _Alignas(64) _Atomic uint64_t deq;  /* next position to pop */
    char pad[64 - sizeof(uint64_t)];
} mst_queue;

/* capacity >= 1. Returns false when malloc fails. */
bool mst_queue_init(mst_queue *q, uint32_t capacity);
void mst_queue_destroy(mst_queue *q);

/* Pushes p; false when full. On success *depth_hint (if not NULL) gets the
 * number of items claimed in the queue right after this push, computed from
 * a possibly stale consumer position (so it may over-estimate, never under). */
bool mst_queue_push(mst_queue *q, void *p, uint64_t *depth_hint);
/* Pops one item; NULL when empty or when the oldest item is claimed but not
 * yet published by its producer (callers retry later). */
void *mst_queue_pop(mst_queue *q);
/* Items claimed and not yet popped (a snapshot). */
uint64_t mst_queue_size(const mst_queue *q);
/* Position counters: pushes claimed so far / pops done so far. */
static inline uint64_t mst_queue_enq_pos(const mst_queue *q) {
    return atomic_load_explicit(&((mst_queue *)q)->enq, memory_order_acquire);
}
static inline uint64_t mst_queue_deq_pos(const mst_queue *q) {
    return atomic_load_explicit(&((mst_queue *)q)->deq, memory_order_acquire);
}

/* For a fork()ed child, where other threads may have died mid-push or
 * mid-pop: calls drop(item, ctx) on every published item, then empties the
 * queue and resets its positions to 0. Single-threaded use only. */
void mst_queue_reset_after_fork(mst_queue *q, void (*drop)(void *item, void *ctx), void *ctx);

#endif /* MST_CORE_QUEUE_H */
