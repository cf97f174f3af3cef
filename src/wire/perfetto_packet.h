/*
 * perfetto_packet.h — the upstream "Hook span packet" carried over
 * \0MSP_PERFETTO_SOCKET (SPEC §5): the 17-byte magic "MSPF_PERFETTO_V1\n"
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

#define MST_PERFETTO_MAGIC "MSPF_PERFETTO_V1\n"
#define MST_PERFETTO_MAGIC_LEN 17
#define MST_PERFETTO_SOCKET_NAME "MSP_PERFETTO_SOCKET"
#define MST_OTLP_SOCKET_NAME "OTLP_SOCKET"
/* Largest frame payload either daemon accepts (4-byte length prefix). */
#define MST_FRAME_MAX_BYTES (4u * 1024u * 1024u)

/* Appends magic + JSON for one span (category = the span's scope name;
 * resource_attributes from `res`, may be NULL). Sets out->failed on OOM. */
void mst_perfetto_packet_encode(const mst_span *span, const mst_resource *res, mst_buf *out);

#endif /* MST_WIRE_PERFETTO_PACKET_H */
