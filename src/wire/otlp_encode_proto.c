/*
 * otlp_encode_proto.c — ExportTraceServiceRequest in binary protobuf
 * (otlp.h, docs/reference/otlp.md), plus the scope grouping both OTLP encoders share.
 * Why hand-rolled on pb_writer: no protobuf runtime in libmstrace, and the
 * exporter thread must encode millions of spans/s. Fields are written in
 * field-number order, proto3 defaults omitted (oneof values always written).
 */
#include "wire/otlp.h"
#include "wire/pb_writer.h"

#include <stdlib.h>

#include "core/log.h"

/* -------------------------------------------------------------- values */

static void put_str(mst_buf *b, uint32_t field, mst_str s) {
    mst_pb_field_string(b, field, s.ptr, s.len);
}

/* Exact body size of an AnyValue holding a string of n bytes. */
static inline size_t str_value_size(size_t n) { return 1 + mst_pb_varint_size(n) + n; }

/* AnyValue{...} body of one attribute, with the exact size as hint where it
 * is cheap to know so mst_pb_end never has to move the body. */
static void put_any_value(mst_buf *b, uint32_t field, const mst_attr *a) {
    switch (a->type) {
    case MST_ATTR_STRING: {
        size_t body = str_value_size(a->v.s.len);
        mst_pb_mark m = mst_pb_begin(b, field, mst_pb_varint_size(body));
        put_str(b, 1, a->v.s);
        mst_pb_end(b, m);
        return;
    }
    case MST_ATTR_BOOL: {
        mst_pb_mark m = mst_pb_begin(b, field, 1);
        mst_pb_field_varint(b, 2, a->v.b ? 1 : 0);
        mst_pb_end(b, m);
        return;
    }
    case MST_ATTR_INT: {
        mst_pb_mark m = mst_pb_begin(b, field, 1);
        mst_pb_field_varint(b, 3, (uint64_t)a->v.i);
        mst_pb_end(b, m);
        return;
    }
    case MST_ATTR_DOUBLE: {
        mst_pb_mark m = mst_pb_begin(b, field, 1);
        mst_pb_field_double(b, 4, a->v.d);
        mst_pb_end(b, m);
        return;
    }
    case MST_ATTR_STRING_LIST: {
        mst_pb_mark m = mst_pb_begin(b, field, 2);
        mst_pb_mark arr = mst_pb_begin(b, 5, 2); /* ArrayValue */
        for (uint32_t i = 0; i < a->v.list.count; i++) {
            mst_str it = a->v.list.items[i];
            mst_pb_mark v = mst_pb_begin(b, 1, mst_pb_varint_size(str_value_size(it.len)));
            put_str(b, 1, it);
            mst_pb_end(b, v);
        }
        mst_pb_end(b, arr);
        mst_pb_end(b, m);
        return;
    }
    }
    /* Unknown type (a bug elsewhere): an empty AnyValue keeps the key. */
    mst_pb_mark m = mst_pb_begin(b, field, 1);
    mst_pb_end(b, m);
}

/* The common attribute in one go: short ASCII key, scalar or short ASCII
 * string value. Every length then fits one varint byte, so the KeyValue is
 * written with one room check and no back-patching. False: not that case. */
static bool put_kv_fast(mst_buf *b, uint32_t field, const mst_attr *a) {
    size_t k = a->key.len;
    if (field > 15 || k > 48 || !mst_pb_is_ascii(a->key.ptr, k)) return false;
    size_t v = 0;
    if (a->type == MST_ATTR_STRING) {
        v = a->v.s.len;
        if (v > 64 || !mst_pb_is_ascii(a->v.s.ptr, v)) return false;
    } else if (a->type == MST_ATTR_STRING_LIST) {
        return false;
    }
    if (!mst_pb_room(b, 2 + 2 + k + 2 + 2 + 2 + 10 + v)) return true; /* failed: no-op */
    uint8_t *p = b->data + b->len;
    uint8_t *kv_len;
    *p++ = (uint8_t)((field << 3) | MST_PB_WT_LEN);
    kv_len = p++;
    *p++ = (1 << 3) | MST_PB_WT_LEN; /* key */
    *p++ = (uint8_t)k;
    memcpy(p, a->key.ptr, k);
    p += k;
    *p++ = (2 << 3) | MST_PB_WT_LEN; /* value: AnyValue */
    uint8_t *val_len = p++;
    uint8_t *val = p;
    switch (a->type) {
    case MST_ATTR_STRING:
        *p++ = (1 << 3) | MST_PB_WT_LEN;
        *p++ = (uint8_t)v;
        memcpy(p, a->v.s.ptr, v);
        p += v;
        break;
    case MST_ATTR_BOOL:
        *p++ = (2 << 3) | MST_PB_WT_VARINT;
        *p++ = a->v.b ? 1 : 0;
        break;
    case MST_ATTR_INT:
        *p++ = (3 << 3) | MST_PB_WT_VARINT;
        p += mst_pb_put_varint(p, (uint64_t)a->v.i);
        break;
    case MST_ATTR_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &a->v.d, sizeof bits);
        *p++ = (4 << 3) | MST_PB_WT_FIXED64;
        for (unsigned i = 0; i < 8; i++) *p++ = (uint8_t)(bits >> (8 * i));
        break;
    }
    default:
        break; /* unknown type: empty AnyValue, as put_any_value */
    }
    *val_len = (uint8_t)(p - val);
    *kv_len = (uint8_t)(p - kv_len - 1);
    b->len = (size_t)(p - b->data);
    return true;
}

static void put_attrs(mst_buf *b, uint32_t field, const mst_attr *attrs, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        const mst_attr *a = &attrs[i];
        if (put_kv_fast(b, field, a)) continue;
        unsigned hint = 1;
        if (a->type == MST_ATTR_STRING) {
            size_t v = str_value_size(a->v.s.len);
            size_t body = 1 + mst_pb_varint_size(a->key.len) + a->key.len + 1 +
                          mst_pb_varint_size(v) + v;
            hint = mst_pb_varint_size(body);
        } else if (a->type == MST_ATTR_STRING_LIST) {
            hint = 2;
        }
        mst_pb_mark kv = mst_pb_begin(b, field, hint);
        put_str(b, 1, a->key);
        put_any_value(b, 2, a);
        mst_pb_end(b, kv);
    }
}

/* flags field: low byte W3C trace flags, bit 8 "is-remote is known", bit 9
 * "is remote" (docs/reference/otlp.md). */
static uint32_t remote_flags(uint8_t trace_flags, bool is_remote) {
    return (uint32_t)trace_flags | 0x100u | (is_remote ? 0x200u : 0u);
}

/* -------------------------------------------------------------- a span */

/* A guess of the encoded size of attributes, to pick a length hint: exact
 * enough to decide between one and two length bytes for links/events. */
static size_t attrs_estimate(const mst_attr *a, uint32_t n) {
    size_t est = 0;
    for (uint32_t i = 0; i < n; i++) {
        est += 8 + a[i].key.len;
        if (a[i].type == MST_ATTR_STRING) est += a[i].v.s.len;
        else if (a[i].type == MST_ATTR_STRING_LIST) est += 128; /* rarely small */
        else est += 10;
    }
    return est;
}

static void put_event(mst_buf *b, const mst_event *e) {
    size_t est = 16 + e->name.len + attrs_estimate(e->attrs, e->n_attrs);
    mst_pb_mark m = mst_pb_begin(b, 11, est < 120 ? 1 : 2);
    mst_pb_field_fixed64(b, 1, e->time_ns);
    if (e->name.len) put_str(b, 2, e->name);
    put_attrs(b, 3, e->attrs, e->n_attrs);
    if (e->dropped_attrs) mst_pb_field_varint(b, 4, e->dropped_attrs);
    mst_pb_end(b, m);
}

static void put_link(mst_buf *b, const mst_link *l) {
    size_t est = 40 + l->trace_state.len + attrs_estimate(l->attrs, l->n_attrs);
    mst_pb_mark m = mst_pb_begin(b, 13, est < 120 ? 1 : 2);
    mst_pb_field_id(b, 1, l->trace_id.bytes, 16);
    mst_pb_field_id(b, 2, l->span_id.bytes, 8);
    if (l->trace_state.len) put_str(b, 3, l->trace_state);
    put_attrs(b, 4, l->attrs, l->n_attrs);
    if (l->dropped_attrs) mst_pb_field_varint(b, 5, l->dropped_attrs);
    mst_pb_field_fixed32(b, 6, remote_flags(l->trace_flags, l->is_remote));
    mst_pb_end(b, m);
}

static void put_span(mst_buf *b, const mst_span *s) {
    mst_pb_mark m = mst_pb_begin(b, 2, 2); /* ScopeSpans.spans; typical 128..16K */
    mst_pb_field_id(b, 1, s->trace_id.bytes, 16);
    mst_pb_field_id(b, 2, s->span_id.bytes, 8);
    if (s->trace_state.len) put_str(b, 3, s->trace_state);
    if (s->has_parent) mst_pb_field_id(b, 4, s->parent_span_id.bytes, 8);
    if (s->name.len) put_str(b, 5, s->name);
    if (s->kind) mst_pb_field_varint(b, 6, (uint64_t)s->kind);
    mst_pb_field_fixed64(b, 7, s->start_ns);
    mst_pb_field_fixed64(b, 8, s->end_ns);
    put_attrs(b, 9, s->attrs, s->n_attrs < MST_MAX_ATTRIBUTES ? s->n_attrs : MST_MAX_ATTRIBUTES);
    if (s->dropped_attrs) mst_pb_field_varint(b, 10, s->dropped_attrs);
    for (uint32_t i = 0; i < s->n_events; i++) put_event(b, &s->events[i]);
    if (s->dropped_events) mst_pb_field_varint(b, 12, s->dropped_events);
    for (uint32_t i = 0; i < s->n_links; i++) put_link(b, &s->links[i]);
    if (s->dropped_links) mst_pb_field_varint(b, 14, s->dropped_links);
    if (s->status_code != MST_STATUS_UNSET || s->status_message.len) {
        mst_pb_mark st = mst_pb_begin(b, 15, 1);
        if (s->status_message.len) put_str(b, 2, s->status_message);
        if (s->status_code) mst_pb_field_varint(b, 3, (uint64_t)s->status_code);
        mst_pb_end(b, st);
    }
    mst_pb_field_fixed32(b, 16, remote_flags(s->trace_flags, s->has_parent && s->parent_is_remote));
    mst_pb_end(b, m);
}

/* ------------------------------------------------------------- request */

static void put_resource(mst_buf *b, const mst_resource *res) {
    mst_pb_mark m = mst_pb_begin(b, 1, 2);
    if (res) {
        put_attrs(b, 1, res->attrs, res->n_attrs < MST_MAX_ATTRIBUTES ? res->n_attrs : MST_MAX_ATTRIBUTES);
        if (res->dropped_attrs) mst_pb_field_varint(b, 2, res->dropped_attrs);
    }
    mst_pb_end(b, m);
}

static void put_scope(mst_buf *b, const mst_scope *sc) {
    mst_pb_mark m = mst_pb_begin(b, 1, 1);
    if (sc) {
        if (sc->name.len) put_str(b, 1, sc->name);
        if (sc->version.len) put_str(b, 2, sc->version);
    }
    mst_pb_end(b, m);
}

mst_status mst_otlp_encode_proto(const mst_resource *res, const mst_span *const *spans,
                                 size_t n, mst_buf *out) {
    if (!out || (n && !spans)) return MST_ERR_INVALID_ARG;
    mst_otlp_groups g;
    mst_status st = mst_otlp_group_spans(spans, n, &g);
    if (st != MST_OK) return st;
    /* ~400 bytes per typical span: one reserve instead of many doublings. */
    mst_pb_room(out, 256 + n * 448);
    mst_pb_mark rs = mst_pb_begin(out, 1, 3); /* resource_spans */
    put_resource(out, res);
    for (uint32_t k = 0; k < g.n_scopes; k++) {
        mst_pb_mark ss = mst_pb_begin(out, 2, 3); /* scope_spans */
        put_scope(out, g.scopes[k]);
        for (uint32_t j = g.start[k]; j < g.start[k + 1]; j++) put_span(out, spans[g.order[j]]);
        mst_pb_end(out, ss);
    }
    mst_pb_end(out, rs);
    mst_otlp_groups_free(&g);
    if (out->failed) {
        MST_ERROR("OTLP protobuf encoding of %zu spans failed: out of memory or over the size limit", n);
        return MST_ERR_NOMEM;
    }
    return MST_OK;
}
