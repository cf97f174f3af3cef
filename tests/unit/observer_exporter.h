/*
 * observer_exporter.h — for the C tests: an mst_exporter that wraps a real
 * one and records what the tracer did with it (observer_exporter.c): the
 * spans and batches handed over, the last status, the cancels, and, at
 * destroy (inside mst_tracer_shutdown), the inner exporter's counters and
 * the tracer's, both final by then.
 */
#ifndef MST_TEST_OBSERVER_EXPORTER_H
#define MST_TEST_OBSERVER_EXPORTER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "mstrace.h"

typedef struct mst_test_observer {
    mst_exporter base;
    mst_exporter *inner;           /* the real exporter (owned, destroyed with it) */
    mst_tracer *tracer;            /* optional: its counters are read at destroy */
    _Atomic int last_status;       /* what the inner export_batch returned, -1 before */
    _Atomic int batches;
    _Atomic uint64_t handed;       /* spans handed to the inner exporter */
    _Atomic int cancels;
    mst_exporter_stats final;      /* the inner counters, read before it is destroyed */
    mst_tracer_stats tracer_final; /* the tracer's at that moment (shutdown's last count done) */
    bool destroyed;
} mst_test_observer;

/* Sets `o` up around `inner`; the caller owns `o` (the tracer's destroy only
 * destroys the inner exporter). `tracer` may be NULL. */
void mst_test_observer_init(mst_test_observer *o, mst_exporter *inner, mst_tracer *tracer);

#endif /* MST_TEST_OBSERVER_EXPORTER_H */
