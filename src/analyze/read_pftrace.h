/*
 * read_pftrace.h — streamed reader of the forwarder's native Perfetto
 * output (`mstrace forward --perfetto-output X.pftrace`, docs/forwarder.md):
 * a `perfetto.protos.Trace`, i.e. a stream of `TracePacket`s. Each span
 * slice (a SLICE_BEGIN carrying the span's name and debug annotations on a
 * thread track, closed by its SLICE_END) becomes one mst_an_span handed to
 * the sink — the same records the Chrome JSON reader (read_chrome.h) makes
 * from the same spans, so both outputs of one run give the same analysis.
 *
 * What is read: interned names (per packet sequence, restarted where a
 * packet says SEQ_INCREMENTAL_STATE_CLEARED), process and thread track
 * descriptors (pid, tid; the process track's name is the role, as the
 * JSON's process_name), the "overlapping spans N" child tracks of a thread,
 * the debug annotations (span attributes; trace/span/parent ids as hex
 * text, inline or interned, and span.status as in the JSON; lists as JSON
 * text or as arrays of strings, inline or interned; `request.ids` rebuilt
 * from its stream's keyframe and deltas, pftrace_id_streams.h), flow ids beyond a slice's own (its links,
 * counted) and the forwarder's `forwarder.spans_dropped` counter (the loss
 * the file itself reports). The request tracks and the per-engine counters
 * are derived from the spans by the forwarder and add nothing: skipped.
 *
 * Memory: the file is read packet by packet through a buffer of
 * MST_AN_INPUT_CHUNK bytes (grown only for a larger packet, at most
 * 64 MiB); besides it, the
 * interning table of the current generation, the track table (processes,
 * threads and their lanes; not the per-request tracks), the last
 * request-id list of each stream and the slices still open (the forwarder
 * writes a slice's end right after its begin).
 *
 * Bad input: a file that cannot be opened, is empty, or does not start
 * with a Trace.packet field is an error (MST_ERR_IO / MST_ERR_PARSE, one
 * sentence in err). A file that ends inside a packet (cut by a SIGKILL
 * while being written) or whose framing breaks mid-way is read up to the
 * last whole packet, with info->truncated and a warning. A packet that is
 * not a valid TracePacket is skipped and counted (info->skipped). An
 * interned id whose definition the file lacks (a packet lost) reads as
 * absent, counted in a warning.
 */
#ifndef MST_ANALYZE_READ_PFTRACE_H
#define MST_ANALYZE_READ_PFTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/input_file.h"

/* True when the first bytes of an input (`n` of them, as many as the file
 * has up to 64) look like a Perfetto protobuf trace rather than JSON: the
 * first byte is the Trace.packet tag (0x0a) and the first non-blank byte is
 * not '[' or '{'. How `mstrace analyze` picks the reader, whatever the
 * file's extension. */
bool mst_an_pftrace_sniff(const void *head, size_t n);

/* mst_an_pftrace_sniff on the start of the file at `path`; false when it
 * cannot be read (the JSON reader then reports why). */
bool mst_an_pftrace_file_sniff(const char *path);

/* The format for mst_an_read_file / mst_an_read_buffer (input_file.h):
 * reads the input (input index `source`), calling `fn` per span. */
extern const mst_an_format mst_an_pftrace_format;

#endif /* MST_ANALYZE_READ_PFTRACE_H */
