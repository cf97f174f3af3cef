/*
 * perfetto_packet_types.h — what a decoded hook span packet is
 * (perfetto_packet.h has the format and the decoder): the span, its
 * attributes and links, the decoder's limits, and the arena array helper
 * both decoders build the lists with. A header of its own so the decoder's
 * fast path (perfetto_packet_fast.h) can name the types without including
 * the decoder it is part of.
 */
#ifndef MST_WIRE_PERFETTO_PACKET_TYPES_H
#define MST_WIRE_PERFETTO_PACKET_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "mstrace.h"          /* mst_str */
#include "wire/json_reader.h" /* mst_json_slice */

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

/* A request.ids list kept as list `seq` of stream `stream` on connection
 * `conn` (valid: false when not). When `change`, the list was rebuilt from
 * that stream's list seq - 1 (of n_base items): its items at the positions
 * left[0 .. n_left) (strictly increasing) removed, the other ones kept in
 * their order as items [0, joined_from), then the joined ones appended. The
 * rebuilt text is compact: '[', the items' JSON strings with ',' between,
 * ']'. `left` points into the span's own memory (span_batch.c copies it). */
typedef struct mst_pf_ids_origin {
    bool valid, change;
    uint64_t conn;
    int64_t stream, seq;
    uint32_t n_base, n_left, joined_from;
    const uint32_t *left;
} mst_pf_ids_origin;

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
    /* "request_links": how many links, at the end of `links`, join the span
     * to the requests of its request.ids (0..n_links; the forwarder draws
     * no flow for them, docs/forwarder.md "Output format"). */
    int64_t request_links;
    /* Request id streams (docs/forwarder.md "Request id lists as changes"):
     * "ids_stream" / "ids_seq" (both or neither; ids_fields says which were
     * there) make this span's request.ids list number ids_seq of the
     * sender's stream ids_stream on its connection. ids_change: the packet
     * has the magic MSPF_PERFETTO_V2 and the attribute attrs[ids_attr]
     * holds the change to the stream's previous list (ids_change.h), which
     * the forwarder's stream state (forward/id_streams.h) replaces with the
     * whole list before any output sees the span. */
    int64_t ids_stream, ids_seq;
    unsigned ids_fields;     /* bit 0: ids_stream seen, bit 1: ids_seq */
    bool ids_change;
    size_t ids_attr;         /* request.ids' index in attrs (ids_fields set) */
    /* Set by the forwarder's stream state (forward/id_streams.h), never by
     * a decoder: where this span's request.ids list comes from, so a
     * consumer that kept the stream's previous list can reuse its work on
     * the ids kept (the .pftrace writer, docs/architecture.md "The step
     * record in the .pftrace"). */
    mst_pf_ids_origin ids_origin;
    /* Set by the decoders (false by default, which says nothing): the
     * name, the category and every attribute and resource key are plain
     * JSON string text (no byte mst_json_plain_prefix would stop at), and
     * the ids are as the decoders leave them (32 / 16 lowercase hex digits,
     * parent_span_id 16 or none). Why: a writer then copies them between
     * quotes without checking each again (the Chrome Trace writer's
     * per-span checks were a fifth of its instructions). */
    bool plain_text;
} mst_pf_span;

/* A span as the decoders start it: every field absent (zero), name "",
 * category "Tracing" (the defaults of a packet that leaves them out). */
static inline void mst_pf_span_defaults(mst_pf_span *out) {
    __builtin_memset(out, 0, sizeof *out);
    out->name.ptr = "";
    out->category.ptr = "Tracing";
    out->category.len = 7;
}

/* Limits applied by the decoder (beyond them: MST_ERR_TOO_LARGE). */
#define MST_PF_MAX_ATTRS 1024
#define MST_PF_MAX_LINKS 1024
#define MST_PF_MAX_DEPTH 32

/* Grows an array carved from the arena by doubling (16 elements first):
 * copies the `count` used elements into a new block of twice *cap and
 * updates *cap; NULL on allocation failure. The arena cannot realloc, so
 * the old block is abandoned, bounding the waste to the final size. Shared
 * by the general decoder and its fast path (perfetto_packet_fast.c);
 * inline because a call per attributes object was ~2 % of a fast decode. */
static inline void *mst_pf_arena_grow(mst_arena *arena, void *old, size_t count, size_t *cap,
                                      size_t elem) {
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = mst_arena_alloc(arena, ncap * elem);
    if (!p) return NULL;
    if (count) __builtin_memcpy(p, old, count * elem);
    *cap = ncap;
    return p;
}

#endif /* MST_WIRE_PERFETTO_PACKET_TYPES_H */
