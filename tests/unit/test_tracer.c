/* test_tracer.c — the pipeline: batching by size, the schedule delay,
 * flush, errors-only filtering, failing exporters, options from the
 * environment, and exact counters under concurrent producers with a small
 * queue (drops happen; every span is accounted for exactly once). */
#include "testlib.h"
#include "core/tracer.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct rec_exporter {
    mst_exporter base;
    _Atomic uint64_t spans, batches, max_batch, flushes;
    _Atomic int fail;
    int *destroyed;
} rec_exporter;

static mst_status rec_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    rec_exporter *e = (rec_exporter *)self;
    for (size_t i = 0; i < n; i++) CHECK(spans[i]->end_ns >= spans[i]->start_ns);
    atomic_fetch_add(&e->spans, n);
    atomic_fetch_add(&e->batches, 1);
    if (n > atomic_load(&e->max_batch)) atomic_store(&e->max_batch, n);
    return atomic_load(&e->fail) ? MST_ERR_UNAVAILABLE : MST_OK;
}
static mst_status rec_flush(mst_exporter *self, uint32_t timeout_ms) {
    atomic_fetch_add(&((rec_exporter *)self)->flushes, 1);
    return MST_OK;
}
static void rec_destroy(mst_exporter *self) {
    rec_exporter *e = (rec_exporter *)self;
    if (e->destroyed) (*e->destroyed)++;
    free(self);
}
static const mst_exporter_ops rec_ops = {
    .name = "rec", .export_batch = rec_export, .flush = rec_flush, .destroy = rec_destroy};

static rec_exporter *rec_new(void) {
    rec_exporter *e = calloc(1, sizeof *e);
    e->base.ops = &rec_ops;
    return e;
}

static void end_n(mst_tracer *t, int n, mst_status_code code) {
    for (int i = 0; i < n; i++) {
        mst_span *s = mst_span_start(t, NULL, "s", MST_SPAN_KIND_INTERNAL, NULL, 0);
        mst_span_set_int(s, "i", i);
        if (code != MST_STATUS_UNSET) mst_span_set_status(s, code, "boom");
        mst_span_end(s, 0);
    }
}

/* Waits until the exporter thread has delivered `want` spans. The limit
 * (120 s) only turns a hang into a failure; the assertions after it never
 * depend on how soon a loaded machine runs that thread. */
static void wait_for(_Atomic uint64_t *v, uint64_t want) {
    for (int i = 0; i < 120000 && atomic_load(v) < want; i++) usleep(1000);
}

static void test_batch_size_wakes_exporter(void) {
    mst_tracer *t;
    mst_tracer_options o = {.max_queue_size = 256, .max_export_batch_size = 10, .schedule_delay_ms = 600000};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    rec_exporter *e = rec_new();
    int destroyed = 0;
    e->destroyed = &destroyed;
    CHECK_EQ_INT(mst_tracer_add_exporter(t, &e->base), MST_OK);
    end_n(t, 25, MST_STATUS_UNSET);
    /* Two full batches go out without a flush; 5 wait for the timer. */
    wait_for(&e->spans, 20);
    CHECK_EQ_INT(atomic_load(&e->spans), 20);
    CHECK_EQ_INT(atomic_load(&e->max_batch), 10);
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    CHECK_EQ_INT(st.queue_depth, 5);
    CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
    CHECK_EQ_INT(atomic_load(&e->spans), 25);
    CHECK(atomic_load(&e->flushes) >= 1);
    mst_tracer_get_stats(t, &st);
    CHECK_EQ_INT(st.spans_started, 25);
    CHECK_EQ_INT(st.spans_ended, 25);
    CHECK_EQ_INT(st.spans_queued, 25);
    CHECK_EQ_INT(st.spans_exported, 25);
    CHECK_EQ_INT(st.batches_exported, 3);
    CHECK_EQ_INT(st.queue_depth, 0);
    mst_exporter_stats es;
    mst_exporter_get_stats(&e->base, &es); /* no get_stats op: zeros */
    CHECK_EQ_INT(es.spans_exported, 0);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 5000), MST_OK);
    CHECK_EQ_INT(destroyed, 1);
}

static void test_schedule_delay_exports_partial_batch(void) {
    mst_tracer *t;
    mst_tracer_options o = {.max_queue_size = 256, .max_export_batch_size = 100, .schedule_delay_ms = 20};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    rec_exporter *e = rec_new();
    mst_tracer_add_exporter(t, &e->base);
    end_n(t, 3, MST_STATUS_UNSET);
    wait_for(&e->spans, 3);
    CHECK_EQ_INT(atomic_load(&e->spans), 3);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 5000), MST_OK);
}

static void test_errors_only_filter(void) {
    mst_tracer *t;
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 8, .export_errors_only = true};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    rec_exporter *e = rec_new();
    mst_tracer_add_exporter(t, &e->base);
    end_n(t, 5, MST_STATUS_OK);
    end_n(t, 4, MST_STATUS_ERROR);
    end_n(t, 3, MST_STATUS_UNSET);
    CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    CHECK_EQ_INT(st.spans_started, 12);
    CHECK_EQ_INT(st.spans_filtered, 8);
    CHECK_EQ_INT(st.spans_exported, 4);
    CHECK_EQ_INT(atomic_load(&e->spans), 4);
    mst_tracer_shutdown(t, 5000);
}

/* Sinks are independent: a batch one exporter delivered counts as exported
 * at the tracer level even when another failed; only a batch that no
 * exporter delivered counts as failed. */
static void test_failing_exporter_counts_failed(void) {
    mst_tracer *t;
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 8};
    CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
    rec_exporter *good = rec_new(), *bad = rec_new();
    atomic_store(&bad->fail, 1);
    mst_tracer_add_exporter(t, &good->base);
    mst_tracer_add_exporter(t, &bad->base);
    end_n(t, 10, MST_STATUS_UNSET);
    CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
    mst_tracer_stats st;
    mst_tracer_get_stats(t, &st);
    CHECK_EQ_INT(st.spans_failed, 0);
    CHECK_EQ_INT(st.spans_exported, 10);
    CHECK_EQ_INT(atomic_load(&good->spans), 10);
    /* Now every sink fails: the next spans are failed. */
    atomic_store(&good->fail, 1);
    end_n(t, 6, MST_STATUS_UNSET);
    CHECK_EQ_INT(mst_tracer_flush(t, 5000), MST_OK);
    mst_tracer_get_stats(t, &st);
    CHECK_EQ_INT(st.spans_failed, 6);
    CHECK_EQ_INT(st.spans_exported, 10);
    mst_tracer_shutdown(t, 5000);
}

enum { THREADS = 4, PER_THREAD = 20000 };
static mst_tracer *g_t;
static void *producer(void *arg) {
    (void)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        mst_span *s = mst_span_start(g_t, NULL, "p", MST_SPAN_KIND_INTERNAL, NULL, 0);
        mst_span_set_str(s, "k", "v");
        if (i % 97 == 0) mst_span_discard(s);
        else mst_span_end(s, 0);
    }
    return NULL;
}

/* An exporter that holds its first batch until the test opens the gate, so
 * the queue fills and drops happen whatever the scheduler does (with a free
 * exporter thread they depended on it outpacing the producers or not). */
typedef struct gate_exporter {
    rec_exporter rec;
    _Atomic int open;
} gate_exporter;
static mst_status gate_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    gate_exporter *g = (gate_exporter *)self;
    while (!atomic_load(&g->open)) usleep(1000);
    return rec_export(self, spans, n);
}
static const mst_exporter_ops gate_ops = {
    .name = "gate", .export_batch = gate_export, .flush = rec_flush, .destroy = rec_destroy};

static void test_counters_exact_under_contention(void) {
    mst_tracer_options o = {.max_queue_size = 32, .max_export_batch_size = 8, .schedule_delay_ms = 1};
    CHECK_EQ_INT(mst_tracer_create(&o, &g_t), MST_OK);
    gate_exporter *gate = calloc(1, sizeof *gate);
    gate->rec.base.ops = &gate_ops;
    mst_tracer_add_exporter(g_t, &gate->rec.base);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, producer, NULL);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    atomic_store(&gate->open, 1);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 60000), MST_OK);
    mst_tracer_stats st;
    mst_tracer_get_stats(g_t, &st);
    fprintf(stderr, "  started %llu exported %llu dropped %llu filtered %llu failed %llu batches %llu\n",
            (unsigned long long)st.spans_started, (unsigned long long)st.spans_exported,
            (unsigned long long)st.spans_dropped, (unsigned long long)st.spans_filtered,
            (unsigned long long)st.spans_failed, (unsigned long long)st.batches_exported);
    CHECK_EQ_INT(st.spans_started, THREADS * PER_THREAD);
    CHECK_EQ_INT(st.spans_ended, THREADS * PER_THREAD);
    CHECK_EQ_INT(st.spans_started, st.spans_exported + st.spans_dropped + st.spans_filtered + st.spans_failed);
    CHECK_EQ_INT(st.spans_queued, st.spans_exported);
    CHECK(st.spans_dropped > 0); /* the queue (32) filled while the exporter held its batch */
    CHECK_EQ_INT(atomic_load(&gate->rec.spans), st.spans_exported);
    CHECK_EQ_INT(st.queue_depth, 0);
    CHECK_EQ_INT(mst_tracer_shutdown(g_t, 5000), MST_OK);
}

/* Spans open when shutdown starts, ended on other threads while it runs:
 * shutdown may free the pipeline only after every such mst_span_end has
 * finished touching it (ASan reports a use after free otherwise). Each round
 * is one chance to interleave; 100 rounds (300 before, with threads that
 * busy-waited for the start signal: 124 s on a loaded 2-core box) keep the
 * chance while the waiting threads now yield. */
enum { SD_THREADS = 4, SD_SPANS = 8, SD_ROUNDS = 100 };
typedef struct sd_arg {
    mst_span *spans[SD_SPANS];
    _Atomic int *go;
} sd_arg;
static void *end_on_go(void *arg) {
    sd_arg *a = arg;
    while (!atomic_load(a->go)) sched_yield();
    for (int i = 0; i < SD_SPANS; i++) mst_span_end(a->spans[i], 0);
    return NULL;
}

/* A thread descheduled for longer than shutdown's grace period makes it
 * keep the pipeline on purpose; kept here so LeakSanitizer sees it reachable. */
static mst_tracer *g_sd_tracers[SD_ROUNDS];

static void test_spans_ended_during_shutdown(void) {
    int rounds = mst_test_stress_rounds(SD_ROUNDS);
    for (int r = 0; r < rounds; r++) {
        mst_tracer *t;
        mst_tracer_options o = {.max_queue_size = 4, .max_export_batch_size = 2, .schedule_delay_ms = 1};
        CHECK_EQ_INT(mst_tracer_create(&o, &t), MST_OK);
        g_sd_tracers[r] = t;
        mst_tracer_add_exporter(t, mst_null_exporter_create());
        _Atomic int go = 0;
        sd_arg args[SD_THREADS];
        pthread_t th[SD_THREADS];
        for (int i = 0; i < SD_THREADS; i++) {
            args[i].go = &go;
            for (int k = 0; k < SD_SPANS; k++)
                args[i].spans[k] = mst_span_start(t, NULL, "open", MST_SPAN_KIND_INTERNAL, NULL, 0);
            pthread_create(&th[i], NULL, end_on_go, &args[i]);
        }
        atomic_store(&go, 1);
        mst_tracer_shutdown(t, 1000);
        for (int i = 0; i < SD_THREADS; i++) pthread_join(th[i], NULL);
    }
}

static void test_options_from_env(void) {
    setenv("OTEL_BSP_SCHEDULE_DELAY", "250", 1);
    setenv("OTEL_BSP_MAX_QUEUE_SIZE", "abc", 1);
    setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-3", 1);
    setenv("OTEL_BSP_EXPORT_TIMEOUT", "99999999999", 1);
    setenv("MS_PROFILER_SAMPLE_ERROR", "1", 1);
    mst_tracer_options o;
    mst_tracer_options_from_env(&o);
    CHECK_EQ_INT(o.schedule_delay_ms, 250);
    CHECK_EQ_INT(o.max_queue_size, 2048);
    CHECK_EQ_INT(o.max_export_batch_size, 512);
    CHECK_EQ_INT(o.export_timeout_ms, 30000);
    CHECK(o.export_errors_only);
    setenv("MS_PROFILER_SAMPLE_ERROR", "yes", 1);
    mst_tracer_options_from_env(&o);
    CHECK(!o.export_errors_only);
    unsetenv("OTEL_BSP_SCHEDULE_DELAY");
    unsetenv("OTEL_BSP_MAX_QUEUE_SIZE");
    unsetenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE");
    unsetenv("OTEL_BSP_EXPORT_TIMEOUT");
    unsetenv("MS_PROFILER_SAMPLE_ERROR");
    mst_tracer_options_from_env(&o);
    CHECK_EQ_INT(o.schedule_delay_ms, 5000);
    CHECK(!o.export_errors_only);
}

static void test_resource(void) {
    setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from%20attrs, deployment.environment = prod ,bad,x=%zz", 1);
    unsetenv("OTEL_SERVICE_NAME");
    mst_tracer *t;
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    const mst_resource *r = mst_tracer_resource(t);
    CHECK_EQ_STR(r->service_name.ptr, "from attrs");
    int found = 0;
    for (uint32_t i = 0; i < r->n_attrs; i++) {
        const mst_attr *a = &r->attrs[i];
        if (!strcmp(a->key.ptr, "deployment.environment")) found += !strcmp(a->v.s.ptr, "prod");
        if (!strcmp(a->key.ptr, "process.pid")) found += a->type == MST_ATTR_INT && a->v.i == getpid();
        if (!strcmp(a->key.ptr, "telemetry.sdk.name")) found += !strcmp(a->v.s.ptr, "mstrace");
        if (!strcmp(a->key.ptr, "telemetry.sdk.language")) found += !strcmp(a->v.s.ptr, "c");
        if (!strcmp(a->key.ptr, "process.executable.name")) found += !strcmp(a->v.s.ptr, "test_tracer");
        if (!strcmp(a->key.ptr, "x")) found += 100;
    }
    CHECK_EQ_INT(found, 5);
    mst_tracer_shutdown(t, 1000);
    setenv("OTEL_SERVICE_NAME", "svc", 1);
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    CHECK_EQ_STR(mst_tracer_resource(t)->service_name.ptr, "svc");
    mst_tracer_shutdown(t, 1000);
    unsetenv("OTEL_SERVICE_NAME");
    unsetenv("OTEL_RESOURCE_ATTRIBUTES");
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    CHECK_EQ_STR(mst_tracer_resource(t)->service_name.ptr, "unknown_service");
    mst_tracer_shutdown(t, 1000);
}

static void test_shutdown_once_and_flush_after(void) {
    mst_tracer *t;
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    CHECK_EQ_INT(mst_tracer_flush(t, 100), MST_OK); /* nothing started yet */
    mst_tracer_add_exporter(t, mst_null_exporter_create());
    end_n(t, 3, MST_STATUS_UNSET);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 5000), MST_OK); /* exports the 3 on the way out */
    CHECK_EQ_INT(mst_tracer_shutdown(NULL, 1), MST_ERR_INVALID_ARG);
    CHECK_EQ_INT(mst_tracer_add_exporter(NULL, NULL), MST_ERR_INVALID_ARG);
}

static const mst_test_case tests[] = {
    {"batch_size_wakes_exporter", test_batch_size_wakes_exporter},
    {"schedule_delay_exports_partial_batch", test_schedule_delay_exports_partial_batch},
    {"errors_only_filter", test_errors_only_filter},
    {"failing_exporter_counts_failed", test_failing_exporter_counts_failed},
    {"counters_exact_under_contention", test_counters_exact_under_contention},
    {"spans_ended_during_shutdown", test_spans_ended_during_shutdown},
    {"options_from_env", test_options_from_env},
    {"resource", test_resource},
    {"shutdown_once_and_flush_after", test_shutdown_once_and_flush_after},
};
MST_TEST_MAIN(tests)
