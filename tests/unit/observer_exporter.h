/*
 * observer_exporter.h — for the C tests: an mst_exporter that wraps a real
 * one and records what the tracer did with it (observer_exporter.c): the
 * spans and batches handed over, the last status, the cancels, and, at
 * destroy (inside mst_tracer_shutdown), the inner exporter's counters and
 * the tracer's, both final by then. Also the forwarder-client tests' common
 * setup: a tracer exporting through an observer around a forwarder client.
 */
#ifndef MST_TEST_OBSERVER_EXPORTER_H
#define MST_TEST_OBSERVER_EXPORTER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/* A tracer (a queue of 65,536, batches of 512, no timed export: spans go out
 * on flush and shutdown) exporting through `o` around a forwarder client of
 * abstract socket `socket_name` with that send budget and, unless 0, that
 * reconnect interval. NULL (everything freed) when one cannot be made. */
mst_tracer *mst_test_forward_tracer(const char *socket_name, uint32_t send_budget_ms, uint32_t retry_interval_ms,
                                    mst_test_observer *o);
/* Flushes `t`: true when every span so far reached the forwarder; else says
 * so on stderr, shuts `t` down and returns false. */
bool mst_test_warmup_reached(mst_tracer *t, const mst_test_observer *o);

#endif /* MST_TEST_OBSERVER_EXPORTER_H */
