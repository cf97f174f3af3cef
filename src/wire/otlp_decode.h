/*
 * otlp_decode.h — a strict, bounds-checked decoder for a binary
 * ExportTraceServiceRequest (docs/reference/otlp.md). Used by the MindIE relay (count and
 * validate the spans of a payload before forwarding it) and by tests (read
 * back what the encoder wrote). Zero-copy: views point into the input,
 * which must outlive them.
 *
 * Strictness: the whole message is validated before any visitor callback
 * runs. Rejected (MST_ERR_PARSE): malformed wire format (see pb_reader.h);
 * a known field with the wrong wire type; trace ids that are not 16 bytes
 * or all zero, span ids not 8 bytes or all zero, a parent_span_id that is
 * neither empty nor 8 bytes; strings that are not valid UTF-8; AnyValue
 * nested deeper than MST_OTLP_MAX_DEPTH. Unknown fields are skipped (newer
 * proto versions add fields).
 */
#ifndef MST_WIRE_OTLP_DECODE_H
#define MST_WIRE_OTLP_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/span.h"
#include "wire/pb_reader.h"

#define MST_OTLP_MAX_DEPTH 16

typedef struct mst_otlp_bytes {
    const uint8_t *ptr;   /* into the input; not NUL-terminated */
    size_t len;
} mst_otlp_bytes;

typedef enum mst_otlp_value_type {
    MST_OTLP_VALUE_EMPTY = 0,   /* AnyValue with no member set */
    MST_OTLP_VALUE_STRING = 1,
    MST_OTLP_VALUE_BOOL = 2,
    MST_OTLP_VALUE_INT = 3,
    MST_OTLP_VALUE_DOUBLE = 4,
    MST_OTLP_VALUE_ARRAY = 5,   /* raw = ArrayValue body, iterate with mst_otlp_iter */
    MST_OTLP_VALUE_KVLIST = 6,  /* raw = KeyValueList body */
    MST_OTLP_VALUE_BYTES = 7    /* raw = the bytes */
} mst_otlp_value_type;

typedef struct mst_otlp_value {
    mst_otlp_value_type type;
    mst_otlp_bytes raw;   /* string / bytes payload, array or kvlist body */
    int64_t i;
    double d;
    bool b;
} mst_otlp_value;

typedef struct mst_otlp_kv {
    mst_otlp_bytes key;
    mst_otlp_value value;
} mst_otlp_kv;

/* Iterates the repeated field `field` of an already validated message body
 * (attributes of a span = field 9 of the span's raw bytes, etc.). */
typedef struct mst_otlp_iter {
    mst_pb_reader r;
    uint32_t field;
} mst_otlp_iter;

typedef struct mst_otlp_resource_view {
    mst_otlp_bytes raw;          /* Resource body (empty when absent) */
    uint32_t n_attrs;
    uint32_t dropped_attrs;
    mst_otlp_bytes schema_url;   /* of the ResourceSpans */
} mst_otlp_resource_view;

typedef struct mst_otlp_scope_view {
    mst_otlp_bytes raw;          /* InstrumentationScope body */
    mst_otlp_bytes name;
    mst_otlp_bytes version;
    uint32_t n_attrs;
    mst_otlp_bytes schema_url;   /* of the ScopeSpans */
    uint32_t n_spans;
} mst_otlp_scope_view;

typedef struct mst_otlp_event_view {
    uint64_t time_ns;
    mst_otlp_bytes name;
    mst_otlp_bytes raw;          /* attributes: field 3 */
    uint32_t n_attrs;
    uint32_t dropped_attrs;
} mst_otlp_event_view;

typedef struct mst_otlp_link_view {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    mst_otlp_bytes trace_state;
    mst_otlp_bytes raw;          /* attributes: field 4 */
    uint32_t n_attrs;
    uint32_t dropped_attrs;
    uint32_t flags;
} mst_otlp_link_view;

typedef struct mst_otlp_span_view {
    const mst_otlp_resource_view *resource;
    const mst_otlp_scope_view *scope;
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    bool has_parent;
    mst_otlp_bytes trace_state;
    mst_otlp_bytes name;
    uint32_t kind;
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t n_attrs, dropped_attrs;
    uint32_t n_events, dropped_events;
    uint32_t n_links, dropped_links;
    bool has_status;
    uint32_t status_code;
    mst_otlp_bytes status_message;
    uint32_t flags;
    mst_otlp_bytes raw;          /* Span body: attrs 9, events 11, links 13 */
} mst_otlp_span_view;

/* Callbacks; any may be NULL. A non-MST_OK return stops the walk and is
 * returned by mst_otlp_decode. */
typedef struct mst_otlp_visitor {
    void *ctx;
    mst_status (*on_resource)(void *ctx, const mst_otlp_resource_view *res);
    mst_status (*on_scope)(void *ctx, const mst_otlp_resource_view *res,
                           const mst_otlp_scope_view *scope);
    mst_status (*on_span)(void *ctx, const mst_otlp_span_view *span);
} mst_otlp_visitor;

typedef struct mst_otlp_counts {
    uint64_t resource_spans;
    uint64_t scope_spans;
    uint64_t spans;
    uint64_t events;
    uint64_t links;
    uint64_t attributes;   /* every KeyValue, at any level */
} mst_otlp_counts;

/* Validates the message; fills *counts (may be NULL). MST_ERR_PARSE with
 * nothing visited when invalid. */
mst_status mst_otlp_validate(const void *data, size_t len, mst_otlp_counts *counts);

/* Validates, then walks the message calling `v` (may be NULL). */
mst_status mst_otlp_decode(const void *data, size_t len, const mst_otlp_visitor *v,
                           mst_otlp_counts *counts);

/* Iteration over validated bodies (views from the callbacks above). */
void mst_otlp_iter_init(mst_otlp_iter *it, mst_otlp_bytes body, uint32_t field);
bool mst_otlp_next_kv(mst_otlp_iter *it, mst_otlp_kv *out);
bool mst_otlp_next_value(mst_otlp_iter *it, mst_otlp_value *out);   /* ArrayValue: field 1 */
bool mst_otlp_next_event(mst_otlp_iter *it, mst_otlp_event_view *out);
bool mst_otlp_next_link(mst_otlp_iter *it, mst_otlp_link_view *out);

/* Convenience: iterators over a span's attributes / events / links, an
 * event's or link's attributes, a resource's attributes, an array's values. */
void mst_otlp_span_attrs(const mst_otlp_span_view *s, mst_otlp_iter *it);
void mst_otlp_span_events(const mst_otlp_span_view *s, mst_otlp_iter *it);
void mst_otlp_span_links(const mst_otlp_span_view *s, mst_otlp_iter *it);
void mst_otlp_event_attrs(const mst_otlp_event_view *e, mst_otlp_iter *it);
void mst_otlp_link_attrs(const mst_otlp_link_view *l, mst_otlp_iter *it);
void mst_otlp_resource_attrs(const mst_otlp_resource_view *r, mst_otlp_iter *it);
void mst_otlp_array_values(const mst_otlp_value *array, mst_otlp_iter *it);

#endif /* MST_WIRE_OTLP_DECODE_H */
