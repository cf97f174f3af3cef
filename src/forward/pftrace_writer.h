/*
 * pftrace_writer.h — the forwarder's native Perfetto writer (`.pftrace`):
 * Perfetto's `Trace` protobuf as a stream of whole `TracePacket`s (layout in
 * wire/perfetto_trace_encode.h), fed by the same decoded spans and timeline
 * model (timeline.h) as the Chrome Trace JSON writer.
 *
 * What it writes: a clock snapshot (timestamps are the spans' own), a
 * process track per pid (named role (service) as in the JSON) and a thread
 * track per (pid, tid); per span a slice begin/end pair on its thread track
 * with an interned name and category and one debug annotation per span
 * attribute (plus the ids, kind, status, service and resource attributes,
 * as the JSON args; request-id lists as interned arrays, `request.ids` as
 * keyframes and deltas: docs/architecture.md 1a); flow ids: every slice carries its own span's id and
 * the ids of the spans it links to, so the link shows whichever arrives
 * first; request tracks under a "Requests" track; counter tracks per
 * process; the forwarder's own counters.
 *
 * Output runs through out_queue.h in stream mode: packets are appended
 * whole, so a file cut anywhere (SIGKILL) loads up to the last whole
 * packet. Path rules, back-pressure and drops are as for the JSON writer
 * (chrome_trace.h). Every function is called from one thread.
 */
#ifndef MST_FORWARD_PFTRACE_WRITER_H
#define MST_FORWARD_PFTRACE_WRITER_H

#include "forward/chrome_trace.h"
#include "wire/perfetto_packet.h"

typedef struct mst_pftrace_writer mst_pftrace_writer;

/* Checks `path` against the output path rules (output_path.h), opens it and
 * writes the first packet (clock snapshot). `default_pid` is used for spans
 * without process.pid. */
mst_status mst_pftrace_writer_open(const char *path, int64_t default_pid,
                                   mst_pftrace_writer **out, char *err, size_t err_size);
/* Buffers the packets for one span; as mst_chrome_writer_add_span
 * (MST_ERR_QUEUE_FULL: dropped and counted, nothing else changed). */
mst_status mst_pftrace_writer_add_span(mst_pftrace_writer *w, const mst_pf_span *span);
/* Samples the forwarder's own counters at ts_ns (Unix epoch ns). */
void mst_pftrace_writer_add_forwarder_counters(mst_pftrace_writer *w, int64_t ts_ns,
                                               uint64_t received, uint64_t written,
                                               uint64_t dropped);
/* One counter sample on its process's counter track (c->name static). */
void mst_pftrace_writer_add_counter(mst_pftrace_writer *w, const struct mst_tl_counter *c);
/* As mst_chrome_writer_tick: request tracks that became complete. */
int mst_pftrace_writer_tick(mst_pftrace_writer *w, uint64_t now_ms);
/* As mst_chrome_writer_handoff / _flush. Flush also completes every open
 * request track (see timeline.h) when `final` is true. */
int mst_pftrace_writer_handoff(mst_pftrace_writer *w);
mst_status mst_pftrace_writer_flush(mst_pftrace_writer *w, bool final);
/* The same counters as the JSON writer (flows_pending is always 0). */
void mst_pftrace_writer_get_stats(const mst_pftrace_writer *w, mst_chrome_stats *out);
/* How many request.ids lists were split by what the forwarder knew of
 * them (mst_pf_span.ids_origin) instead of by their text. */
uint64_t mst_pftrace_writer_lists_by_origin(const mst_pftrace_writer *w);
/* As mst_chrome_writer_get_disk_stats. */
void mst_pftrace_writer_get_disk_stats(const mst_pftrace_writer *w, struct mst_outq_stats *out);
/* Flushes (final) and closes; frees w. */
mst_status mst_pftrace_writer_close(mst_pftrace_writer *w);
/* The same, and *final (may be NULL) gets the counters after the close. */
mst_status mst_pftrace_writer_close_final(mst_pftrace_writer *w, mst_chrome_stats *final);

#endif /* MST_FORWARD_PFTRACE_WRITER_H */
