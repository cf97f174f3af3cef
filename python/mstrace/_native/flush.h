/*
 * flush.h — flushing the process-global tracer with the GIL released,
 * counted so that nothing frees the tracer while a flush waits (flush.c).
 */
#ifndef MST_NATIVE_FLUSH_H
#define MST_NATIVE_FLUSH_H

#include "native_types.h"

/* mst_tracer_flush(t) with the GIL released, counted so that a concurrent
 * shutdown() (or the exit hook) keeps `t` allocated while it waits. */
mst_status mstn_flush_released(mst_tracer *t, unsigned int timeout_ms);
/* Threads inside mstn_flush_released now: while > 0, the tracer they wait
 * on must not be freed (flush it instead of shutting it down). Any thread. */
int mstn_flushing(void);
/* fork() child: the flushing threads were not copied. */
void mstn_flush_after_fork_child(void);

#endif /* MST_NATIVE_FLUSH_H */
