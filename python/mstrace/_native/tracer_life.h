/*
 * tracer_life.h — the process-global tracer's life cycle as other files of
 * the extension need it: a flush that releases the GIL and keeps the tracer
 * allocated while it waits. Defined in module.c.
 */
#ifndef MST_NATIVE_TRACER_LIFE_H
#define MST_NATIVE_TRACER_LIFE_H

#include "native_types.h"

/* mst_tracer_flush(t) with the GIL released, counted so that a concurrent
 * shutdown() (or the exit hook) keeps `t` allocated while it waits. */
mst_status mstn_flush_released(mst_tracer *t, unsigned int timeout_ms);

#endif /* MST_NATIVE_TRACER_LIFE_H */
