/*
 * exporter_counters.c — mst_exporter_counters (mstrace.h): the exact
 * per-exporter counters every exporter keeps the same way (the forwarder
 * client, the OTLP exporter, the Python extension's otel bridge, and
 * exporters written outside the library). Written by the exporter thread,
 * read by get_stats from any thread: relaxed atomics per field, as each
 * counter is exact on its own and no reader needs a cross-field snapshot.
 */
#include "mstrace.h"

#include <string.h>

static uint64_t load(const uint64_t *field) { return __atomic_load_n(field, __ATOMIC_RELAXED); }

void mst_exporter_counters_batch_failed(mst_exporter_counters *c, uint64_t spans) {
    mst_counter_add(&c->spans_failed, spans);
    mst_counter_add(&c->batches_failed, 1);
}

void mst_exporter_counters_batch_ok(mst_exporter_counters *c, uint64_t exported, uint64_t rejected) {
    mst_counter_add(&c->spans_exported, exported);
    mst_counter_add(&c->spans_rejected, rejected);
    mst_counter_add(&c->batches_ok, 1);
}

void mst_exporter_counters_read(const mst_exporter_counters *c, mst_exporter_stats *out) {
    memset(out, 0, sizeof *out);
    out->spans_exported = load(&c->spans_exported);
    out->spans_failed = load(&c->spans_failed);
    out->spans_rejected = load(&c->spans_rejected);
    out->batches_ok = load(&c->batches_ok);
    out->batches_failed = load(&c->batches_failed);
    out->retries = load(&c->retries);
    out->spans_skipped = load(&c->spans_skipped);
}

void mst_exporter_counters_reset(mst_exporter_counters *c) {
    __atomic_store_n(&c->spans_exported, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->spans_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->spans_rejected, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->batches_ok, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->batches_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->retries, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->spans_skipped, 0, __ATOMIC_RELAXED);
}
