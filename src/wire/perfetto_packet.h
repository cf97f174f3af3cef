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
#include "wire/perfetto_packet_types.h"

#define MST_PERFETTO_MAGIC "MSPF_PERFETTO_V1\n"
#define MST_PERFETTO_MAGIC_LEN 17

/* Appends magic + JSON for one span (category = the span's scope name;
 * resource_attributes from `res`, may be NULL). Sets out->failed on OOM. */
void mst_perfetto_packet_encode(const mst_span *span, const mst_resource *res, mst_buf *out);

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
