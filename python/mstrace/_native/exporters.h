/*
 * exporters.h — the exporters init() gives the process-global tracer, and
 * their counters for stats() (exporters.c).
 */
#ifndef MST_NATIVE_EXPORTERS_H
#define MST_NATIVE_EXPORTERS_H

#include "native_types.h"

/* Creates the process-global tracer (mstn_g.tracer, tracer_gen bumped) and
 * its exporters: the Perfetto forwarder client (`perfetto`, unless
 * MSTRACE_PERFETTO=off), the OTLP exporter or the otel bridge
 * (MS_TRACE_EXPORTER; `otlp`), or only the null exporter (`null_exp`).
 * Fills `info` (exporters, exporter_mode, endpoint, protocol). -1 with an
 * exception. */
int mstn_build_tracer(const char *forward_socket, bool otlp, bool perfetto, bool null_exp,
                      PyObject *info);
/* False when MSTRACE_PERFETTO=off: no Perfetto client is created. */
bool mstn_perfetto_client_wanted(void);
/* One dict of counters per exporter built by the last init(), added to
 * `ex` under its name. 0, or -1 with an exception. */
int mstn_exporters_stats(PyObject *ex);
/* shutdown(): the exporters went with the tracer. */
void mstn_exporters_forget(void);

#endif /* MST_NATIVE_EXPORTERS_H */
