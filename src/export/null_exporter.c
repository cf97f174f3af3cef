/*
 * null_exporter.c — an exporter that counts and discards (benchmarks,
 * tests), and mst_exporter_get_stats, the generic counter read-out that
 * every exporter shares.
 *
 * The counters are written by the exporter thread and may be read from any
 * thread, so they are updated with relaxed atomics.
 */
#include "mstrace.h"

#include <stdlib.h>
#include <string.h>

typedef struct null_exporter {
    mst_exporter base;
    uint64_t spans;
    uint64_t batches;
} null_exporter;

static mst_status null_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    (void)spans;
    null_exporter *e = (null_exporter *)self;
    __atomic_fetch_add(&e->spans, (uint64_t)n, __ATOMIC_RELAXED);
    __atomic_fetch_add(&e->batches, 1, __ATOMIC_RELAXED);
    return MST_OK;
}

static void null_get_stats(mst_exporter *self, mst_exporter_stats *out) {
    null_exporter *e = (null_exporter *)self;
    out->spans_exported = __atomic_load_n(&e->spans, __ATOMIC_RELAXED);
    out->batches_ok = __atomic_load_n(&e->batches, __ATOMIC_RELAXED);
}

static void null_destroy(mst_exporter *self) { free(self); }

static const mst_exporter_ops null_ops = {
    .name = "null",
    .export_batch = null_export,
    .get_stats = null_get_stats,
    .destroy = null_destroy,
};

mst_exporter *mst_null_exporter_create(void) {
    null_exporter *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->base.ops = &null_ops;
    return &e->base;
}

void mst_exporter_get_stats(mst_exporter *exporter, mst_exporter_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof(*out));
    if (exporter && exporter->ops && exporter->ops->get_stats) exporter->ops->get_stats(exporter, out);
}
