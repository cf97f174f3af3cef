/*
 * otlp_encode_json.c — ExportTraceServiceRequest in the OTLP/JSON mapping
 * (otlp.h, docs/reference/otlp.md "OTLP/HTTP"): lowerCamelCase keys, trace/span ids as lowercase hex
 * (not protobuf-JSON base64), enums as integers, 64-bit integers as decimal
 * strings, NaN/Infinity as the proto3-JSON strings. Default values are
 * omitted as proto3 JSON does. JSON escaping comes from buf.h only.
 */
#include "wire/otlp.h"

#include <math.h>

#include "core/log.h"

#define LIT(b, s) mst_buf_append((b), (s), sizeof(s) - 1)

static void put_str(mst_buf *b, mst_str s) { mst_buf_append_json_str(b, s.ptr, s.len); }

static void put_u64_str(mst_buf *b, uint64_t v) {
    mst_buf_append_byte(b, '"');
    mst_buf_append_u64(b, v);
    mst_buf_append_byte(b, '"');
}

/* proto3 JSON spells non-finite doubles as strings; buf.h would say null. */
static void put_double(mst_buf *b, double d) {
    if (isnan(d)) LIT(b, "\"NaN\"");
    else if (isinf(d)) { if (d > 0) LIT(b, "\"Infinity\""); else LIT(b, "\"-Infinity\""); }
    else mst_buf_append_double(b, d);
}

static void put_hex(mst_buf *b, const uint8_t *p, size_t n) {
    mst_buf_append_byte(b, '"');
    mst_buf_append_hex(b, p, n);
    mst_buf_append_byte(b, '"');
}

static void put_value(mst_buf *b, const mst_attr *a) {
    switch (a->type) {
    case MST_ATTR_STRING:
        LIT(b, "{\"stringValue\":");
        put_str(b, a->v.s);
        break;
    case MST_ATTR_BOOL:
        if (a->v.b) LIT(b, "{\"boolValue\":true");
        else LIT(b, "{\"boolValue\":false");
        break;
    case MST_ATTR_INT:
        LIT(b, "{\"intValue\":\"");
        mst_buf_append_i64(b, a->v.i);
        mst_buf_append_byte(b, '"');
        break;
    case MST_ATTR_DOUBLE:
        LIT(b, "{\"doubleValue\":");
        put_double(b, a->v.d);
        break;
    case MST_ATTR_STRING_LIST:
        LIT(b, "{\"arrayValue\":{\"values\":[");
        for (uint32_t i = 0; i < a->v.list.count; i++) {
            if (i) mst_buf_append_byte(b, ',');
            LIT(b, "{\"stringValue\":");
            put_str(b, a->v.list.items[i]);
            mst_buf_append_byte(b, '}');
        }
        LIT(b, "]}");
        break;
    default: /* unknown type (a bug elsewhere): an empty AnyValue */
        mst_buf_append_byte(b, '{');
        break;
    }
    mst_buf_append_byte(b, '}');
}

/* ,"attributes":[...] (nothing when empty) and the dropped count. */
static void put_attrs(mst_buf *b, const mst_attr *attrs, uint32_t n, uint32_t dropped) {
    if (n) {
        LIT(b, ",\"attributes\":[");
        for (uint32_t i = 0; i < n; i++) {
            if (i) mst_buf_append_byte(b, ',');
            LIT(b, "{\"key\":");
            put_str(b, attrs[i].key);
            LIT(b, ",\"value\":");
            put_value(b, &attrs[i]);
            mst_buf_append_byte(b, '}');
        }
        mst_buf_append_byte(b, ']');
    }
    if (dropped) {
        LIT(b, ",\"droppedAttributesCount\":");
        mst_buf_append_u64(b, dropped);
    }
}

static uint32_t remote_flags(uint8_t trace_flags, bool is_remote) {
    return (uint32_t)trace_flags | 0x100u | (is_remote ? 0x200u : 0u);
}

static void put_event(mst_buf *b, const mst_event *e) {
    LIT(b, "{\"timeUnixNano\":");
    put_u64_str(b, e->time_ns);
    if (e->name.len) {
        LIT(b, ",\"name\":");
        put_str(b, e->name);
    }
    put_attrs(b, e->attrs, e->n_attrs, e->dropped_attrs);
    mst_buf_append_byte(b, '}');
}

/* Opens a Span or Span.Link object with the fields both start with. */
static void put_ids(mst_buf *b, const mst_trace_id *trace_id, const mst_span_id *span_id,
                    mst_str trace_state) {
    LIT(b, "{\"traceId\":");
    put_hex(b, trace_id->bytes, 16);
    LIT(b, ",\"spanId\":");
    put_hex(b, span_id->bytes, 8);
    if (trace_state.len) {
        LIT(b, ",\"traceState\":");
        put_str(b, trace_state);
    }
}

static void put_link(mst_buf *b, const mst_link *l) {
    put_ids(b, &l->trace_id, &l->span_id, l->trace_state);
    put_attrs(b, l->attrs, l->n_attrs, l->dropped_attrs);
    LIT(b, ",\"flags\":");
    mst_buf_append_u64(b, remote_flags(l->trace_flags, l->is_remote));
    mst_buf_append_byte(b, '}');
}

static void put_span(mst_buf *b, const mst_span *s) {
    put_ids(b, &s->trace_id, &s->span_id, s->trace_state);
    if (s->has_parent) {
        LIT(b, ",\"parentSpanId\":");
        put_hex(b, s->parent_span_id.bytes, 8);
    }
    LIT(b, ",\"flags\":");
    mst_buf_append_u64(b, remote_flags(s->trace_flags, s->has_parent && s->parent_is_remote));
    LIT(b, ",\"name\":");
    put_str(b, s->name);
    if (s->kind) {
        LIT(b, ",\"kind\":");
        mst_buf_append_u64(b, (uint64_t)s->kind);
    }
    LIT(b, ",\"startTimeUnixNano\":");
    put_u64_str(b, s->start_ns);
    LIT(b, ",\"endTimeUnixNano\":");
    put_u64_str(b, s->end_ns);
    put_attrs(b, s->attrs, s->n_attrs < MST_MAX_ATTRIBUTES ? s->n_attrs : MST_MAX_ATTRIBUTES,
              s->dropped_attrs);
    if (s->n_events) {
        LIT(b, ",\"events\":[");
        for (uint32_t i = 0; i < s->n_events; i++) {
            if (i) mst_buf_append_byte(b, ',');
            put_event(b, &s->events[i]);
        }
        mst_buf_append_byte(b, ']');
    }
    if (s->dropped_events) {
        LIT(b, ",\"droppedEventsCount\":");
        mst_buf_append_u64(b, s->dropped_events);
    }
    if (s->n_links) {
        LIT(b, ",\"links\":[");
        for (uint32_t i = 0; i < s->n_links; i++) {
            if (i) mst_buf_append_byte(b, ',');
            put_link(b, &s->links[i]);
        }
        mst_buf_append_byte(b, ']');
    }
    if (s->dropped_links) {
        LIT(b, ",\"droppedLinksCount\":");
        mst_buf_append_u64(b, s->dropped_links);
    }
    /* As in the protobuf encoder: no status member for UNSET without a
     * message, so both encodings describe the same message. */
    if (s->status_code != MST_STATUS_UNSET || s->status_message.len) {
        LIT(b, ",\"status\":{");
        if (s->status_message.len) {
            LIT(b, "\"message\":");
            put_str(b, s->status_message);
            if (s->status_code) mst_buf_append_byte(b, ',');
        }
        if (s->status_code) {
            LIT(b, "\"code\":");
            mst_buf_append_u64(b, (uint64_t)s->status_code);
        }
        mst_buf_append_byte(b, '}');
    }
    mst_buf_append_byte(b, '}');
}

static void put_resource(mst_buf *b, const mst_resource *res) {
    LIT(b, "\"resource\":{");
    if (res) {
        /* put_attrs starts each member with ','; here it is the first
         * member, so that comma becomes (insignificant) whitespace. */
        size_t at = b->len;
        put_attrs(b, res->attrs, res->n_attrs < MST_MAX_ATTRIBUTES ? res->n_attrs : MST_MAX_ATTRIBUTES,
                  res->dropped_attrs);
        if (!b->failed && b->len > at) b->data[at] = ' '; /* drop the first ',' */
    }
    mst_buf_append_byte(b, '}');
}

static void put_scope(mst_buf *b, const mst_scope *sc) {
    LIT(b, "{\"scope\":{");
    if (sc) {
        LIT(b, "\"name\":");
        put_str(b, sc->name);
        if (sc->version.len) {
            LIT(b, ",\"version\":");
            put_str(b, sc->version);
        }
    }
    LIT(b, "},\"spans\":[");
}

mst_status mst_otlp_encode_json(const mst_resource *res, const mst_span *const *spans,
                                size_t n, mst_buf *out) {
    if (!out || (n && !spans)) return MST_ERR_INVALID_ARG;
    mst_otlp_groups g;
    mst_status st = mst_otlp_group_spans(spans, n, &g);
    if (st != MST_OK) return st;
    mst_buf_reserve(out, 256 + n * 1024);
    LIT(out, "{\"resourceSpans\":[{");
    put_resource(out, res);
    LIT(out, ",\"scopeSpans\":[");
    for (uint32_t k = 0; k < g.n_scopes; k++) {
        if (k) mst_buf_append_byte(out, ',');
        put_scope(out, g.scopes[k]);
        for (uint32_t j = g.start[k]; j < g.start[k + 1]; j++) {
            if (j != g.start[k]) mst_buf_append_byte(out, ',');
            put_span(out, spans[g.order[j]]);
        }
        LIT(out, "]}");
    }
    LIT(out, "]}]}");
    mst_otlp_groups_free(&g);
    if (out->failed) {
        MST_ERROR("OTLP JSON encoding of %zu spans failed: out of memory or over the size limit", n);
        return MST_ERR_NOMEM;
    }
    return MST_OK;
}
