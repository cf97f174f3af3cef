/* test_queue.c — the lock-free MPMC queue: FIFO order, exact capacity
 * (including non-power-of-two), wrap-around, and no loss or duplication
 * under concurrent producers and consumers. */
#include "testlib.h"
#include "core/queue.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

static void test_fifo_and_capacity(void) {
    mst_queue q;
    CHECK(mst_queue_init(&q, 5));
    uint64_t depth = 0;
    for (uintptr_t i = 1; i <= 5; i++) {
        CHECK(mst_queue_push(&q, (void *)i, &depth));
        CHECK_EQ_INT(depth, i);
    }
    CHECK(!mst_queue_push(&q, (void *)6, NULL)); /* exactly 5 */
    CHECK_EQ_INT(mst_queue_size(&q), 5);
    for (uintptr_t i = 1; i <= 5; i++) CHECK_EQ_INT((uintptr_t)mst_queue_pop(&q), i);
    CHECK(mst_queue_pop(&q) == NULL);
    /* wrap around many laps */
    for (uintptr_t i = 1; i < 1000; i++) {
        CHECK(mst_queue_push(&q, (void *)i, NULL));
        CHECK(mst_queue_push(&q, (void *)(i + 5000), NULL));
        CHECK_EQ_INT((uintptr_t)mst_queue_pop(&q), i);
        CHECK_EQ_INT((uintptr_t)mst_queue_pop(&q), i + 5000);
    }
    CHECK_EQ_INT(mst_queue_size(&q), 0);
    mst_queue_destroy(&q);
}

static int dropped_items;
static void count_drop(void *item, void *ctx) {
    (void)item;
    (void)ctx;
    dropped_items++;
}

static void test_reset_after_fork(void) {
    mst_queue q;
    CHECK(mst_queue_init(&q, 8));
    for (uintptr_t i = 1; i <= 6; i++) mst_queue_push(&q, (void *)i, NULL);
    mst_queue_pop(&q);
    dropped_items = 0;
    mst_queue_reset_after_fork(&q, count_drop, NULL);
    CHECK_EQ_INT(dropped_items, 5);
    CHECK_EQ_INT(mst_queue_size(&q), 0);
    CHECK(mst_queue_push(&q, (void *)7, NULL));
    CHECK_EQ_INT((uintptr_t)mst_queue_pop(&q), 7);
    mst_queue_destroy(&q);
}

/* 4 producers and 2 consumers through 64 slots: every push meets a full
 * queue and every pop an empty one many times, which is what the test is
 * about; more items only repeat that. A thread that finds the queue full or
 * empty yields instead of spinning, so on a loaded machine the run costs
 * the same work, not a scheduler's worth of busy loops (it took 150 s with
 * 100000 items per producer and pure spinning on a busy 2-core box). */
enum { PRODUCERS = 4, CONSUMERS = 2, ITEMS_PER_ROUND = 1000, ROUNDS = 20 };
static mst_queue g_q;
static _Atomic int g_producers_done;
static unsigned char *g_seen;
static _Atomic uint64_t g_popped, g_failed_push;
static uintptr_t g_per_producer;

static void *producer(void *arg) {
    uintptr_t base = (uintptr_t)arg * g_per_producer;
    for (uintptr_t i = 0; i < g_per_producer; i++) {
        while (!mst_queue_push(&g_q, (void *)(base + i + 1), NULL)) {
            atomic_fetch_add(&g_failed_push, 1);
            sched_yield();
        }
    }
    atomic_fetch_add(&g_producers_done, 1);
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        void *p = mst_queue_pop(&g_q);
        if (p) {
            uintptr_t v = (uintptr_t)p - 1;
            __atomic_fetch_add(&g_seen[v], 1, __ATOMIC_RELAXED);
            atomic_fetch_add(&g_popped, 1);
        } else if (atomic_load(&g_producers_done) == PRODUCERS && mst_queue_size(&g_q) == 0) {
            return NULL;
        } else {
            sched_yield();
        }
    }
}

static void test_concurrent_no_loss(void) {
    g_per_producer = (uintptr_t)mst_test_stress_rounds(ROUNDS) * ITEMS_PER_ROUND;
    size_t total = PRODUCERS * g_per_producer;
    CHECK(mst_queue_init(&g_q, 64));
    g_seen = calloc(total, 1);
    pthread_t p[PRODUCERS], c[CONSUMERS];
    for (uintptr_t i = 0; i < CONSUMERS; i++) pthread_create(&c[i], NULL, consumer, NULL);
    for (uintptr_t i = 0; i < PRODUCERS; i++) pthread_create(&p[i], NULL, producer, (void *)i);
    for (int i = 0; i < PRODUCERS; i++) pthread_join(p[i], NULL);
    for (int i = 0; i < CONSUMERS; i++) pthread_join(c[i], NULL);
    CHECK_EQ_INT(atomic_load(&g_popped), total);
    size_t bad = 0;
    for (size_t i = 0; i < total; i++) bad += g_seen[i] != 1;
    CHECK_EQ_INT(bad, 0);
    free(g_seen);
    mst_queue_destroy(&g_q);
}

static const mst_test_case tests[] = {
    {"fifo_and_capacity", test_fifo_and_capacity},
    {"reset_after_fork", test_reset_after_fork},
    {"concurrent_no_loss", test_concurrent_no_loss},
};
MST_TEST_MAIN(tests)
