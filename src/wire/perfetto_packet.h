/*
 * perfetto_packet.h — the upstream "Hook span packet" carried over
 * \0MSP_PERFETTO_SOCKET (docs/forwarder.md "Packets"): the 17-byte magic "MSPF_PERFETTO_V1\n"
 * followed by compact UTF-8 JSON
 *   {"name","category","trace_id","span_id","parent_span_id","start_time_ns",
 *    "end_time_ns","kind","status","attributes":{},"resource_attributes":{},
 *    "links":[{"trace_id","span_id"}]}
 * The encoder (perfetto_packet_encode.c) runs in traced processes; the strict
 * decoder (perfetto_packet_decode.c) runs in the forwarder on untrusted input.
 */
#ifndef MST_WIRE_PERFETTO_PACKET_H
#define MST_WIRE_PERFETTO_PACKET_H

#include "core/resource.h"
#include "core/span.h"
#include "wire/buf.h"
#include "wire/ids_sender.h"
#include "wire/perfetto_packet_types.h"

#define MST_PERFETTO_MAGIC "MSPF_PERFETTO_V1\n"
#define MST_PERFETTO_MAGIC_LEN 17
/* The magic of a packet whose request.ids is a change to its stream's
 * previous list (ids_change.h; docs/forwarder.md "Request id lists as
 * changes"): the same JSON otherwise. A forwarder that cannot apply
 * changes rejects it as a bad magic, so no list is ever lost silently. */
#define MST_PERFETTO_CHANGE_MAGIC "MSPF_PERFETTO_V2\n"
/* What the forwarder writes to every connection it accepts (Perfetto mode),
 * naming what it takes beyond V1; a client sends changes only after it has
 * read this line (docs/forwarder.md "Request id lists as changes"). */
#define MST_PERFETTO_HELLO "MSPF_HELLO_V1 ids-change\n"
#define MST_PERFETTO_HELLO_LEN 25

/* Appends magic + JSON for one span (category = the span's scope name;
 * resource_attributes from `res`, may be NULL). Sets out->failed on OOM. */
void mst_perfetto_packet_encode(const mst_span *span, const mst_resource *res, mst_buf *out);
/* The same with the span's request.ids in a stream (ids_sender.h decided
 * how): ids_stream / ids_seq added, and for a change the list replaced by
 * the change and the magic by MST_PERFETTO_CHANGE_MAGIC. ids NULL or not
 * in_stream: exactly mst_perfetto_packet_encode. */
void mst_perfetto_packet_encode_ids(const mst_span *span, const mst_resource *res, const mst_ids_send *ids,
                                    mst_buf *out);

/* ---- decoding (forwarder side; input is untrusted) ---- */

/* Decodes one packet payload (magic + JSON). Every string, key and nested
 * value is checked (UTF-8, JSON syntax, field types). The result points into
 * `data` and `arena`; both must outlive it. On error returns MST_ERR_PARSE /
 * MST_ERR_TOO_LARGE and writes a one-line reason into err. */
mst_status mst_perfetto_packet_decode(const uint8_t *data, size_t len, mst_arena *arena,
                                      mst_pf_span *out, char *err, size_t err_size);

/* The same decoder without its fast path (perfetto_packet_fast.h): the
 * general pull-reader decoder that mst_perfetto_packet_decode falls back
 * to. Same contract; exported so tests and the fuzzer can check that both
 * paths agree. */
mst_status mst_perfetto_packet_decode_general(const uint8_t *data, size_t len, mst_arena *arena,
                                              mst_pf_span *out, char *err, size_t err_size);

#endif /* MST_WIRE_PERFETTO_PACKET_H */
