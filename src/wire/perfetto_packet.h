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
#include "wire/json_reader.h" /* mst_json_slice */

#define MST_PERFETTO_MAGIC "MSPF_PERFETTO_V1\n"
#define MST_PERFETTO_MAGIC_LEN 17

/* Appends magic + JSON for one span (category = the span's scope name;
 * resource_attributes from `res`, may be NULL). Sets out->failed on OOM. */
void mst_perfetto_packet_encode(const mst_span *span, const mst_resource *res, mst_buf *out);

/* ---- decoding (forwarder side; input is untrusted) ---- */

typedef struct mst_pf_kv {
    /* Unescaped key as a length-carrying slice, NOT NUL-terminated: it
     * points into the packet buffer when the key has no escape (why: no
     * copy per key on the forwarder's hot path), else into the arena. Use
     * key.len with memcmp, never strcmp/%s. */
    mst_str key;
    mst_json_slice value;   /* points into the packet buffer */
} mst_pf_kv;

typedef struct mst_pf_link {
    char trace_id[33];      /* 32 lowercase hex + NUL */
    char span_id[17];
} mst_pf_link;

typedef struct mst_pf_span {
    mst_str name;
    mst_str category;
    char trace_id[33];
    char span_id[17];
    char parent_span_id[17]; /* "" for a root span */
    int64_t start_ns;
    int64_t end_ns;
    int64_t kind;
    int64_t status;
    bool has_pid, has_tid;   /* attributes process.pid / thread.id (ints) */
    int64_t pid, tid;
    mst_pf_kv *attrs;        /* every attribute except process.pid/thread.id */
    size_t n_attrs;
    mst_pf_kv *resource;
    size_t n_resource;
    mst_pf_link *links;
    size_t n_links;
} mst_pf_span;

/* Limits applied by the decoder (beyond them: MST_ERR_TOO_LARGE). */
#define MST_PF_MAX_ATTRS 1024
#define MST_PF_MAX_LINKS 1024
#define MST_PF_MAX_DEPTH 32

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
