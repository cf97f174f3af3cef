/*
 * writer_sinks.h — the two file writers (chrome_trace.h, pftrace_writer.h)
 * as implementations of the output interface (output_sink.h). Only this
 * file knows both writers' function names; the sink and the flight
 * recorder's dumps open a writer through it.
 */
#ifndef MST_FORWARD_WRITER_SINKS_H
#define MST_FORWARD_WRITER_SINKS_H

#include "forward/output_sink.h"

/* The format AUTO stands for with `path`: .pftrace = proto, else JSON. */
mst_perfetto_format mst_perfetto_format_for_path(const char *path);

/* Opens `path` (output path rules, output_path.h) as a writer of `format`
 * (AUTO: from the extension) and fills *out. On error: status and a
 * one-line message in err. */
mst_status mst_writer_sink_open(const char *path, mst_perfetto_format format, int64_t default_pid,
                                mst_output_sink *out, char *err, size_t err_size);

#endif /* MST_FORWARD_WRITER_SINKS_H */
