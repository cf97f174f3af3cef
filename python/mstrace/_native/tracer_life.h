/*
 * tracer_life.h — init/flush/shutdown/stats of the process-global tracer and
 * the extension's fork handler (tracer_life.c).
 */
#ifndef MST_NATIVE_TRACER_LIFE_H
#define MST_NATIVE_TRACER_LIFE_H

#include "native_types.h"

/* init(*, service_name=None, forward_socket=None, otlp=True, perfetto=True,
 * null_exporter=False, process_role=None) -> dict */
PyObject *mstn_py_init(PyObject *m, PyObject *args, PyObject *kw);
/* flush(timeout_ms=5000) -> bool */
PyObject *mstn_py_flush(PyObject *m, PyObject *args, PyObject *kw);
/* shutdown() */
PyObject *mstn_py_shutdown(PyObject *m, PyObject *unused);
/* stats() -> dict of tracer, exporter and request counters */
PyObject *mstn_py_stats(PyObject *m, PyObject *unused);
/* pthread_atfork child handler (registered at import). */
void mstn_at_fork_child(void);

#endif /* MST_NATIVE_TRACER_LIFE_H */
