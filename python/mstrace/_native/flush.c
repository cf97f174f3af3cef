/*
 * flush.c — flushing the process-global tracer with the GIL released
 * (flush(), shutdown(), the otel bridge's close), counted: while any thread
 * waits inside mst_tracer_flush the tracer must not be freed (it waits on
 * the tracer's mutex and condition variable), so shutdown() and the exit
 * hook ask mstn_flushing() first. See flush.h.
 */
#include "flush.h"

#include <stdatomic.h>

/* Threads inside mst_tracer_flush() with the GIL released. Written with the
 * GIL held; read also by the Py_AtExit hook, hence atomic. */
static atomic_int g_flushing;

mst_status mstn_flush_released(mst_tracer *t, unsigned int timeout_ms) {
    mst_status st;
    atomic_fetch_add(&g_flushing, 1);
    Py_BEGIN_ALLOW_THREADS
    st = mst_tracer_flush(t, timeout_ms);
    Py_END_ALLOW_THREADS
    atomic_fetch_sub(&g_flushing, 1);
    return st;
}

int mstn_flushing(void) { return atomic_load(&g_flushing); }

void mstn_flush_after_fork_child(void) {
    atomic_store(&g_flushing, 0); /* the flushing threads were not copied */
}
