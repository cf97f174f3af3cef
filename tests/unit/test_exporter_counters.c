/* test_exporter_counters.c — mst_exporter_counters (mstrace.h): batch
 * helpers add the right fields, read copies every field, reset zeroes
 * them, and two threads adding a fixed amount of work concurrently lose no
 * increment (bounded by work, not time). */
#include "testlib.h"
#include "mstrace.h"

#include <pthread.h>

#define ADDS_PER_THREAD 200000

static void test_batch_helpers(void) {
    mst_exporter_counters c = {0};
    mst_exporter_stats s;
    mst_exporter_counters_batch_ok(&c, 10, 2);
    mst_exporter_counters_batch_failed(&c, 7);
    mst_counter_add(&c.retries, 3);
    mst_counter_add(&c.retries, 0);
    mst_exporter_counters_read(&c, &s);
    CHECK_EQ_INT(s.spans_exported, 10);
    CHECK_EQ_INT(s.spans_rejected, 2);
    CHECK_EQ_INT(s.batches_ok, 1);
    CHECK_EQ_INT(s.spans_failed, 7);
    CHECK_EQ_INT(s.batches_failed, 1);
    CHECK_EQ_INT(s.retries, 3);
    mst_exporter_counters_reset(&c);
    mst_exporter_counters_read(&c, &s);
    CHECK_EQ_INT(s.spans_exported + s.spans_rejected + s.batches_ok + s.spans_failed + s.batches_failed +
                     s.retries, 0);
}

static void *adder(void *arg) {
    mst_exporter_counters *c = arg;
    for (int i = 0; i < ADDS_PER_THREAD; i++) mst_exporter_counters_batch_ok(c, 2, 1);
    return NULL;
}

static void test_concurrent_adds_are_exact(void) {
    mst_exporter_counters c = {0};
    pthread_t t1, t2;
    CHECK_EQ_INT(pthread_create(&t1, NULL, adder, &c), 0);
    CHECK_EQ_INT(pthread_create(&t2, NULL, adder, &c), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    mst_exporter_stats s;
    mst_exporter_counters_read(&c, &s);
    CHECK_EQ_INT(s.batches_ok, 2 * ADDS_PER_THREAD);
    CHECK_EQ_INT(s.spans_exported, 4 * ADDS_PER_THREAD);
    CHECK_EQ_INT(s.spans_rejected, 2 * ADDS_PER_THREAD);
}

static const mst_test_case tests[] = {
    {"batch_helpers", test_batch_helpers},
    {"concurrent_adds_are_exact", test_concurrent_adds_are_exact},
};
MST_TEST_MAIN(tests)
