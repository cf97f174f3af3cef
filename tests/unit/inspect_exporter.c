/*
 * inspect_exporter.c — the inspecting exporter and its tracer for the C
 * tests (inspect_exporter.h).
 */
#include "inspect_exporter.h"

#include <stdlib.h>

#include "testlib.h"

typedef struct inspect_exporter {
    mst_exporter base;
    int seen;
} inspect_exporter;

static void (*g_inspect)(const mst_span *s);
static mst_tracer *g_tracer;
static inspect_exporter *g_exporter;

static mst_status inspect_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    inspect_exporter *e = (inspect_exporter *)self;
    for (size_t i = 0; i < n; i++) {
        if (g_inspect) g_inspect(spans[i]);
        e->seen++;
    }
    return MST_OK;
}

static void inspect_destroy(mst_exporter *self) { free(self); }

static const mst_exporter_ops inspect_ops = {.name = "inspect", .export_batch = inspect_export,
                                             .destroy = inspect_destroy};

mst_tracer *mst_test_inspect_setup(void) {
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 16, .schedule_delay_ms = 10000};
    CHECK_EQ_INT(mst_tracer_create(&o, &g_tracer), MST_OK);
    g_exporter = calloc(1, sizeof *g_exporter);
    g_exporter->base.ops = &inspect_ops;
    CHECK_EQ_INT(mst_tracer_add_exporter(g_tracer, &g_exporter->base), MST_OK);
    return g_tracer;
}

void mst_test_inspect_set(void (*inspect)(const mst_span *s)) { g_inspect = inspect; }

int mst_test_inspect_finish(void) {
    CHECK_EQ_INT(mst_tracer_flush(g_tracer, 5000), MST_OK);
    int seen = g_exporter->seen;
    CHECK_EQ_INT(mst_tracer_shutdown(g_tracer, 5000), MST_OK);
    g_tracer = NULL;
    g_inspect = NULL;
    return seen;
}
