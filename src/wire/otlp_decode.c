/*
 * otlp_decode.c — strict decoder of a binary ExportTraceServiceRequest
 * (see otlp_decode.h). One set of parse_* functions serves both passes: the
 * validation pass (no visitor, counts everything) and the walk (visitor
 * callbacks on data already known valid). Every read goes through
 * pb_reader, which is bounds-checked; recursion depth is bounded by
 * MST_OTLP_MAX_DEPTH (AnyValue nesting is the only unbounded recursion).
 */
#include "wire/otlp_decode.h"
#include "wire/pb_writer.h" /* wire type constants, UTF-8 check */

#include <string.h>

typedef struct dctx {
    const mst_otlp_visitor *v;   /* NULL in the validation pass */
    mst_otlp_counts *c;
} dctx;

#define TRY(expr) do { mst_status _st = (expr); if (_st != MST_OK) return _st; } while (0)

static mst_otlp_bytes as_bytes(const mst_pb_field *f) {
    mst_otlp_bytes b = {f->data, f->len};
    return b;
}

static mst_status want(const mst_pb_field *f, unsigned wire_type) {
    return f->wire_type == wire_type ? MST_OK : MST_ERR_PARSE;
}

static mst_status get_string(const mst_pb_field *f, mst_otlp_bytes *out) {
    TRY(want(f, MST_PB_WT_LEN));
    if (!mst_pb_utf8_valid((const char *)f->data, f->len)) return MST_ERR_PARSE;
    *out = as_bytes(f);
    return MST_OK;
}

static mst_status get_u32(const mst_pb_field *f, uint32_t *out) {
    TRY(want(f, MST_PB_WT_VARINT));
    if (f->u > UINT32_MAX) return MST_ERR_PARSE;
    *out = (uint32_t)f->u;
    return MST_OK;
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* A non-zero id of exactly n bytes. */
static mst_status get_id(const mst_pb_field *f, uint8_t *out, size_t n) {
    TRY(want(f, MST_PB_WT_LEN));
    if (f->len != n || all_zero(f->data, n)) return MST_ERR_PARSE;
    memcpy(out, f->data, n);
    return MST_OK;
}

/* Runs the loop body for each field of `body`; malformed wire → PARSE. */
#define FOR_FIELDS(body, f)                                                   \
    mst_pb_reader f##_rd;                                                     \
    mst_pb_reader_init(&f##_rd, (body).ptr, (body).len);                      \
    mst_status f##_st;                                                        \
    mst_pb_field f;                                                           \
    while ((f##_st = mst_pb_next(&f##_rd, &f)) == MST_OK)
/* After the loop: only a clean end of input is acceptable. */
#define END_FIELDS(f) if (f##_st != MST_ERR_CLOSED) return MST_ERR_PARSE

/* ------------------------------------------------------- values, attrs */

static mst_status parse_kv(dctx *d, mst_otlp_bytes body, unsigned depth, mst_otlp_kv *out);
static mst_status parse_value(dctx *d, mst_otlp_bytes body, unsigned depth, mst_otlp_value *out);

/* Checks the items (field 1, LEN) of an ArrayValue (AnyValues) or a
 * KeyValueList (KeyValues, when `kvs`); both containers share this shape. */
static mst_status parse_items(dctx *d, mst_otlp_bytes list, unsigned depth, bool kvs) {
    FOR_FIELDS(list, g) {
        if (g.number != 1) continue;
        TRY(want(&g, MST_PB_WT_LEN));
        if (kvs) {
            mst_otlp_kv kv;
            TRY(parse_kv(d, as_bytes(&g), depth, &kv));
        } else {
            mst_otlp_value item;
            TRY(parse_value(d, as_bytes(&g), depth, &item));
        }
    }
    END_FIELDS(g);
    return MST_OK;
}

static mst_status parse_value(dctx *d, mst_otlp_bytes body, unsigned depth, mst_otlp_value *out) {
    if (depth > MST_OTLP_MAX_DEPTH) return MST_ERR_PARSE;
    memset(out, 0, sizeof *out);
    FOR_FIELDS(body, f) {
        switch (f.number) {
        case 1:
            TRY(get_string(&f, &out->raw));
            out->type = MST_OTLP_VALUE_STRING;
            break;
        case 2:
            TRY(want(&f, MST_PB_WT_VARINT));
            out->type = MST_OTLP_VALUE_BOOL;
            out->b = f.u != 0;
            break;
        case 3:
            TRY(want(&f, MST_PB_WT_VARINT));
            out->type = MST_OTLP_VALUE_INT;
            out->i = (int64_t)f.u;
            break;
        case 4:
            TRY(want(&f, MST_PB_WT_FIXED64));
            out->type = MST_OTLP_VALUE_DOUBLE;
            memcpy(&out->d, &f.u, sizeof out->d);
            break;
        case 5: /* ArrayValue{values=1} */
            TRY(want(&f, MST_PB_WT_LEN));
            out->type = MST_OTLP_VALUE_ARRAY;
            out->raw = as_bytes(&f);
            TRY(parse_items(d, out->raw, depth + 1, false));
            break;
        case 6: /* KeyValueList{values=1} */
            TRY(want(&f, MST_PB_WT_LEN));
            out->type = MST_OTLP_VALUE_KVLIST;
            out->raw = as_bytes(&f);
            TRY(parse_items(d, out->raw, depth + 1, true));
            break;
        case 7:
            TRY(want(&f, MST_PB_WT_LEN));
            out->type = MST_OTLP_VALUE_BYTES;
            out->raw = as_bytes(&f);
            break;
        default:
            break;
        }
    }
    END_FIELDS(f);
    return MST_OK;
}

static mst_status parse_kv(dctx *d, mst_otlp_bytes body, unsigned depth, mst_otlp_kv *out) {
    memset(out, 0, sizeof *out);
    if (d) d->c->attributes++;
    FOR_FIELDS(body, f) {
        if (f.number == 1) {
            TRY(get_string(&f, &out->key));
        } else if (f.number == 2) {
            TRY(want(&f, MST_PB_WT_LEN));
            TRY(parse_value(d, as_bytes(&f), depth + 1, &out->value));
        }
    }
    END_FIELDS(f);
    return MST_OK;
}

/* One attribute KeyValue field (validated), counted into *n. */
static mst_status attr_field(dctx *d, const mst_pb_field *f, uint32_t *n) {
    TRY(want(f, MST_PB_WT_LEN));
    mst_otlp_kv kv;
    TRY(parse_kv(d, as_bytes(f), 0, &kv));
    if (*n == UINT32_MAX) return MST_ERR_PARSE;
    (*n)++;
    return MST_OK;
}

/* --------------------------------------------------- resource and scope */

static mst_status parse_resource(dctx *d, mst_otlp_bytes body, mst_otlp_resource_view *out) {
    out->raw = body;
    out->n_attrs = 0;
    out->dropped_attrs = 0;
    FOR_FIELDS(body, f) {
        if (f.number == 1) TRY(attr_field(d, &f, &out->n_attrs));
        else if (f.number == 2) TRY(get_u32(&f, &out->dropped_attrs));
    }
    END_FIELDS(f);
    return MST_OK;
}

static mst_status parse_scope(dctx *d, mst_otlp_bytes body, mst_otlp_scope_view *out) {
    out->raw = body;
    FOR_FIELDS(body, f) {
        uint32_t dropped;
        switch (f.number) {
        case 1: TRY(get_string(&f, &out->name)); break;
        case 2: TRY(get_string(&f, &out->version)); break;
        case 3: TRY(attr_field(d, &f, &out->n_attrs)); break;
        case 4: TRY(get_u32(&f, &dropped)); break;
        default: break;
        }
    }
    END_FIELDS(f);
    return MST_OK;
}

/* ---------------------------------------------------------------- span */

static mst_status parse_event(dctx *d, mst_otlp_bytes body, mst_otlp_event_view *out) {
    memset(out, 0, sizeof *out);
    out->raw = body;
    FOR_FIELDS(body, f) {
        switch (f.number) {
        case 1: TRY(want(&f, MST_PB_WT_FIXED64)); out->time_ns = f.u; break;
        case 2: TRY(get_string(&f, &out->name)); break;
        case 3: TRY(attr_field(d, &f, &out->n_attrs)); break;
        case 4: TRY(get_u32(&f, &out->dropped_attrs)); break;
        default: break;
        }
    }
    END_FIELDS(f);
    return MST_OK;
}

static mst_status parse_link(dctx *d, mst_otlp_bytes body, mst_otlp_link_view *out) {
    memset(out, 0, sizeof *out);
    out->raw = body;
    bool have_trace = false, have_span = false;
    FOR_FIELDS(body, f) {
        switch (f.number) {
        case 1: TRY(get_id(&f, out->trace_id, 16)); have_trace = true; break;
        case 2: TRY(get_id(&f, out->span_id, 8)); have_span = true; break;
        case 3: TRY(get_string(&f, &out->trace_state)); break;
        case 4: TRY(attr_field(d, &f, &out->n_attrs)); break;
        case 5: TRY(get_u32(&f, &out->dropped_attrs)); break;
        case 6: TRY(want(&f, MST_PB_WT_FIXED32)); out->flags = (uint32_t)f.u; break;
        default: break;
        }
    }
    END_FIELDS(f);
    return have_trace && have_span ? MST_OK : MST_ERR_PARSE;
}

static mst_status parse_status(mst_otlp_bytes body, mst_otlp_span_view *out) {
    out->has_status = true;
    out->status_code = 0;
    out->status_message.ptr = NULL;
    out->status_message.len = 0;
    FOR_FIELDS(body, f) {
        if (f.number == 2) TRY(get_string(&f, &out->status_message));
        else if (f.number == 3) TRY(get_u32(&f, &out->status_code));
    }
    END_FIELDS(f);
    return MST_OK;
}

static mst_status counted(uint32_t *n) {
    if (*n == UINT32_MAX) return MST_ERR_PARSE;
    (*n)++;
    return MST_OK;
}

static mst_status parse_span(dctx *d, mst_otlp_bytes body, mst_otlp_span_view *out) {
    memset(out, 0, sizeof *out);
    out->raw = body;
    bool have_trace = false, have_span = false;
    FOR_FIELDS(body, f) {
        switch (f.number) {
        case 1: TRY(get_id(&f, out->trace_id, 16)); have_trace = true; break;
        case 2: TRY(get_id(&f, out->span_id, 8)); have_span = true; break;
        case 3: TRY(get_string(&f, &out->trace_state)); break;
        case 4: /* empty, or 8 bytes; all zero is read as "no parent" */
            TRY(want(&f, MST_PB_WT_LEN));
            if (f.len != 0 && f.len != 8) return MST_ERR_PARSE;
            out->has_parent = f.len == 8 && !all_zero(f.data, 8);
            if (f.len == 8) memcpy(out->parent_span_id, f.data, 8);
            break;
        case 5: TRY(get_string(&f, &out->name)); break;
        case 6: TRY(get_u32(&f, &out->kind)); break;
        case 7: TRY(want(&f, MST_PB_WT_FIXED64)); out->start_ns = f.u; break;
        case 8: TRY(want(&f, MST_PB_WT_FIXED64)); out->end_ns = f.u; break;
        case 9: TRY(attr_field(d, &f, &out->n_attrs)); break;
        case 10: TRY(get_u32(&f, &out->dropped_attrs)); break;
        case 11: {
            TRY(want(&f, MST_PB_WT_LEN));
            mst_otlp_event_view ev;
            TRY(parse_event(d, as_bytes(&f), &ev));
            TRY(counted(&out->n_events));
            if (d) d->c->events++;
            break;
        }
        case 12: TRY(get_u32(&f, &out->dropped_events)); break;
        case 13: {
            TRY(want(&f, MST_PB_WT_LEN));
            mst_otlp_link_view lv;
            TRY(parse_link(d, as_bytes(&f), &lv));
            TRY(counted(&out->n_links));
            if (d) d->c->links++;
            break;
        }
        case 14: TRY(get_u32(&f, &out->dropped_links)); break;
        case 15: TRY(want(&f, MST_PB_WT_LEN)); TRY(parse_status(as_bytes(&f), out)); break;
        case 16: TRY(want(&f, MST_PB_WT_FIXED32)); out->flags = (uint32_t)f.u; break;
        default: break;
        }
    }
    END_FIELDS(f);
    return have_trace && have_span ? MST_OK : MST_ERR_PARSE;
}

/* ----------------------------------------------------------- containers */

static mst_status parse_scope_spans(dctx *d, mst_otlp_bytes body, const mst_otlp_resource_view *res) {
    mst_otlp_scope_view sc;
    memset(&sc, 0, sizeof sc);
    {
        FOR_FIELDS(body, f) {
            switch (f.number) {
            case 1: TRY(want(&f, MST_PB_WT_LEN)); TRY(parse_scope(d, as_bytes(&f), &sc)); break;
            case 2:
                TRY(want(&f, MST_PB_WT_LEN));
                TRY(counted(&sc.n_spans));
                if (!d->v) { /* validation pass: check the span now */
                    mst_otlp_span_view sv;
                    TRY(parse_span(d, as_bytes(&f), &sv));
                    d->c->spans++;
                }
                break;
            case 3: TRY(get_string(&f, &sc.schema_url)); break;
            default: break;
            }
        }
        END_FIELDS(f);
    }
    if (!d->v) return MST_OK;
    if (d->v->on_scope) TRY(d->v->on_scope(d->v->ctx, res, &sc));
    FOR_FIELDS(body, f) {
        if (f.number != 2) continue;
        mst_otlp_span_view sv;
        TRY(parse_span(d, as_bytes(&f), &sv));
        sv.resource = res;
        sv.scope = &sc;
        if (d->v->on_span) TRY(d->v->on_span(d->v->ctx, &sv));
    }
    END_FIELDS(f);
    return MST_OK;
}

static mst_status parse_resource_spans(dctx *d, mst_otlp_bytes body) {
    mst_otlp_resource_view res;
    memset(&res, 0, sizeof res);
    /* The resource may follow its scope_spans on the wire: read it first. */
    {
        FOR_FIELDS(body, f) {
            if (f.number == 1) {
                TRY(want(&f, MST_PB_WT_LEN));
                TRY(parse_resource(d, as_bytes(&f), &res));
            } else if (f.number == 3) {
                TRY(get_string(&f, &res.schema_url));
            } else if (f.number == 2) {
                TRY(want(&f, MST_PB_WT_LEN));
            }
        }
        END_FIELDS(f);
    }
    if (d->v && d->v->on_resource) TRY(d->v->on_resource(d->v->ctx, &res));
    FOR_FIELDS(body, f) {
        if (f.number != 2) continue;
        if (!d->v) d->c->scope_spans++;
        TRY(parse_scope_spans(d, as_bytes(&f), &res));
    }
    END_FIELDS(f);
    return MST_OK;
}

static mst_status parse_request(dctx *d, const void *data, size_t len) {
    mst_otlp_bytes body = {(const uint8_t *)data, len};
    FOR_FIELDS(body, f) {
        if (f.number != 1) continue;
        TRY(want(&f, MST_PB_WT_LEN));
        if (!d->v) d->c->resource_spans++;
        TRY(parse_resource_spans(d, as_bytes(&f)));
    }
    END_FIELDS(f);
    return MST_OK;
}

mst_status mst_otlp_validate(const void *data, size_t len, mst_otlp_counts *counts) {
    mst_otlp_counts local;
    memset(&local, 0, sizeof local);
    if (!data && len) return MST_ERR_INVALID_ARG;
    dctx d = {NULL, &local};
    mst_status st = parse_request(&d, data, len);
    if (counts) *counts = st == MST_OK ? local : (mst_otlp_counts){0};
    return st;
}

mst_status mst_otlp_decode(const void *data, size_t len, const mst_otlp_visitor *v,
                           mst_otlp_counts *counts) {
    TRY(mst_otlp_validate(data, len, counts));
    if (!v) return MST_OK;
    mst_otlp_counts scratch; /* the walk counts again; keep the first result */
    memset(&scratch, 0, sizeof scratch);
    dctx d = {v, &scratch};
    return parse_request(&d, data, len);
}

/* ------------------------------------------------------------ iterators */

void mst_otlp_iter_init(mst_otlp_iter *it, mst_otlp_bytes body, uint32_t field) {
    mst_pb_reader_init(&it->r, body.ptr, body.len);
    it->field = field;
}

/* Next LEN field numbered it->field, or false at the end. */
static bool next_len_field(mst_otlp_iter *it, mst_otlp_bytes *out) {
    mst_pb_field f;
    while (mst_pb_next(&it->r, &f) == MST_OK) {
        if (f.number == it->field && f.wire_type == MST_PB_WT_LEN) {
            *out = as_bytes(&f);
            return true;
        }
    }
    return false;
}

bool mst_otlp_next_kv(mst_otlp_iter *it, mst_otlp_kv *out) {
    mst_otlp_bytes b;
    return next_len_field(it, &b) && parse_kv(NULL, b, 0, out) == MST_OK;
}

bool mst_otlp_next_value(mst_otlp_iter *it, mst_otlp_value *out) {
    mst_otlp_bytes b;
    return next_len_field(it, &b) && parse_value(NULL, b, 1, out) == MST_OK;
}

bool mst_otlp_next_event(mst_otlp_iter *it, mst_otlp_event_view *out) {
    mst_otlp_bytes b;
    return next_len_field(it, &b) && parse_event(NULL, b, out) == MST_OK;
}

bool mst_otlp_next_link(mst_otlp_iter *it, mst_otlp_link_view *out) {
    mst_otlp_bytes b;
    return next_len_field(it, &b) && parse_link(NULL, b, out) == MST_OK;
}

void mst_otlp_span_attrs(const mst_otlp_span_view *s, mst_otlp_iter *it) { mst_otlp_iter_init(it, s->raw, 9); }
void mst_otlp_span_events(const mst_otlp_span_view *s, mst_otlp_iter *it) { mst_otlp_iter_init(it, s->raw, 11); }
void mst_otlp_span_links(const mst_otlp_span_view *s, mst_otlp_iter *it) { mst_otlp_iter_init(it, s->raw, 13); }
void mst_otlp_event_attrs(const mst_otlp_event_view *e, mst_otlp_iter *it) { mst_otlp_iter_init(it, e->raw, 3); }
void mst_otlp_link_attrs(const mst_otlp_link_view *l, mst_otlp_iter *it) { mst_otlp_iter_init(it, l->raw, 4); }
void mst_otlp_resource_attrs(const mst_otlp_resource_view *r, mst_otlp_iter *it) { mst_otlp_iter_init(it, r->raw, 1); }
void mst_otlp_array_values(const mst_otlp_value *a, mst_otlp_iter *it) {
    mst_otlp_bytes none = {NULL, 0};
    mst_otlp_iter_init(it, a->type == MST_OTLP_VALUE_ARRAY ? a->raw : none, 1);
}
