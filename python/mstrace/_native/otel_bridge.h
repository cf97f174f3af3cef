/*
 * otel_bridge.h — MS_TRACE_EXPORTER=otel: an mst_exporter that hands every
 * finished hook span to the process's global OpenTelemetry SDK
 * TracerProvider (its active span processor's on_end), so hook spans travel
 * with vLLM's own spans through vLLM's BatchSpanProcessor/OTLP exporter and
 * share its resource. The hot path is unchanged (C span record, lock-free
 * queue); the conversion to ReadableSpan happens on the pipeline's exporter
 * thread, which takes the GIL once per batch.
 */
#ifndef MST_NATIVE_OTEL_BRIDGE_H
#define MST_NATIVE_OTEL_BRIDGE_H

#include "native_types.h"

/* GIL held. Imports mstrace.otel_bridge and the SDK classes. Returns the
 * exporter, or NULL after logging one warning (SDK not importable), with no
 * Python exception pending. */
mst_exporter *mstn_otel_bridge_create(void);

/* `_native._otel_bridge_close()` (GIL held; registered with atexit by
 * otel_bridge.py): flushes the tracer with the GIL released so queued hook
 * spans reach the provider, then makes every later export skip Python and
 * waits (GIL released) until no exporter thread is inside Python. */
PyObject *mstn_otel_bridge_close(PyObject *module, PyObject *unused);

#endif /* MST_NATIVE_OTEL_BRIDGE_H */
