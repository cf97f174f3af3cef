/*
 * test_otlp_encode.c — unit tests of the OTLP encoders (otlp.h) and the
 * strict decoder (otlp_decode.h): exact OTLP/JSON text of a small span,
 * non-finite doubles, UTF-8 repair, scope grouping with many interleaved
 * scopes, large batches (length hints overflowing), spans recorded through
 * the public API and encoded inside an exporter, and decoder rejections
 * (bad ids, wrong wire types, invalid UTF-8, deep nesting, truncation).
 * The full field-by-field round trip lives in test_otlp_vectors.c.
 */
#include <math.h>
#include <stdlib.h>

#include "core/tracer.h"
#include "testlib.h"
#include "wire/otlp.h"
#include "wire/otlp_decode.h"
#include "wire/pb_writer.h"

static mst_str S(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }

static mst_span *mk_span(const mst_scope *sc, const char *name, uint8_t seed) {
    mst_span *s = calloc(1, sizeof *s);
    if (!s) abort();
    for (int i = 0; i < 16; i++) s->trace_id.bytes[i] = (uint8_t)(seed + i + 1);
    for (int i = 0; i < 8; i++) s->span_id.bytes[i] = (uint8_t)(seed * 3 + i + 1);
    s->scope = sc;
    s->name = S(name);
    s->kind = MST_SPAN_KIND_INTERNAL;
    s->trace_flags = 1;
    s->trace_state = S("");
    s->status_message = S("");
    s->start_ns = 1000;
    s->end_ns = 2000;
    return s;
}

static mst_buf encode(bool json, const mst_resource *res, mst_span **spans, size_t n) {
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_status st = json ? mst_otlp_encode_json(res, (const mst_span *const *)spans, n, &b)
                         : mst_otlp_encode_proto(res, (const mst_span *const *)spans, n, &b);
    CHECK_EQ_INT(st, MST_OK);
    return b;
}

static bool buf_is(const mst_buf *b, const char *want) {
    size_t n = strlen(want);
    if (b->len != n || memcmp(b->data, want, n) != 0) {
        fprintf(stderr, "  got:  %.*s\n  want: %s\n", (int)b->len, (const char *)b->data, want);
        return false;
    }
    return true;
}

static void test_json_exact(void) {
    mst_scope sc = {S("hook"), S("1.0"), NULL};
    mst_span *s = mk_span(&sc, "step", 0);
    s->has_parent = true;
    s->parent_is_remote = true;
    memset(s->parent_span_id.bytes, 0xab, 8);
    s->attrs[0] = (mst_attr){.key = S("n"), .type = MST_ATTR_INT, .v.i = -7};
    s->attrs[1] = (mst_attr){.key = S("q\"k"), .type = MST_ATTR_STRING, .v.s = S("a\nb")};
    s->n_attrs = 2;
    s->status_code = MST_STATUS_ERROR;
    s->status_message = S("bad");
    mst_resource res;
    memset(&res, 0, sizeof res);
    res.attrs[0] = (mst_attr){.key = S("service.name"), .type = MST_ATTR_STRING, .v.s = S("svc")};
    res.n_attrs = 1;
    mst_buf b = encode(true, &res, &s, 1);
    CHECK(buf_is(&b,
        "{\"resourceSpans\":[{\"resource\":{ \"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"svc\"}}]},"
        "\"scopeSpans\":[{\"scope\":{\"name\":\"hook\",\"version\":\"1.0\"},\"spans\":[{"
        "\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060708\","
        "\"parentSpanId\":\"abababababababab\",\"flags\":769,\"name\":\"step\",\"kind\":1,"
        "\"startTimeUnixNano\":\"1000\",\"endTimeUnixNano\":\"2000\","
        "\"attributes\":[{\"key\":\"n\",\"value\":{\"intValue\":\"-7\"}},"
        "{\"key\":\"q\\\"k\",\"value\":{\"stringValue\":\"a\\nb\"}}],"
        "\"status\":{\"message\":\"bad\",\"code\":2}}]}]}]}"));
    mst_buf_free(&b);
    free(s);
}

static void test_json_non_finite(void) {
    mst_scope sc = {S("s"), S(""), NULL};
    mst_span *s = mk_span(&sc, "x", 0);
    s->attrs[0] = (mst_attr){.key = S("a"), .type = MST_ATTR_DOUBLE, .v.d = NAN};
    s->attrs[1] = (mst_attr){.key = S("b"), .type = MST_ATTR_DOUBLE, .v.d = -INFINITY};
    s->attrs[2] = (mst_attr){.key = S("c"), .type = MST_ATTR_DOUBLE, .v.d = 0.1};
    s->n_attrs = 3;
    mst_buf b = encode(true, NULL, &s, 1);
    mst_buf_append_byte(&b, 0);
    CHECK(strstr((char *)b.data, "{\"doubleValue\":\"NaN\"}") != NULL);
    CHECK(strstr((char *)b.data, "{\"doubleValue\":\"-Infinity\"}") != NULL);
    CHECK(strstr((char *)b.data, "{\"doubleValue\":0.1}") != NULL);
    CHECK(strstr((char *)b.data, "\"resource\":{}") != NULL);
    mst_buf_free(&b);
    free(s);
}

typedef struct name_capture {
    char names[64][64];
    int n;
    char scopes[64][64];
} name_capture;

static mst_status cap_span(void *ctx, const mst_otlp_span_view *sv) {
    name_capture *c = ctx;
    if (c->n < 64) {
        snprintf(c->names[c->n], 64, "%.*s", (int)sv->name.len, (const char *)sv->name.ptr);
        snprintf(c->scopes[c->n], 64, "%.*s", (int)sv->scope->name.len, (const char *)sv->scope->name.ptr);
        c->n++;
    }
    return MST_OK;
}

static void test_proto_utf8_repaired(void) {
    mst_scope sc = {S("s"), S(""), NULL};
    mst_span *s = mk_span(&sc, "bad\xFFname", 0);
    mst_buf b = encode(false, NULL, &s, 1);
    name_capture *c = calloc(1, sizeof *c);
    mst_otlp_visitor v = {.ctx = c, .on_span = cap_span};
    CHECK_EQ_INT(mst_otlp_decode(b.data, b.len, &v, NULL), MST_OK);
    CHECK_EQ_STR(c->names[0], "bad\xEF\xBF\xBDname");
    free(c);
    mst_buf_free(&b);
    free(s);
}

static void test_scope_grouping(void) {
    enum { NS = 20, NSP = 60 };
    mst_scope scopes[NS];
    char scope_names[NS][16];
    char span_names[NSP][16];
    for (int i = 0; i < NS; i++) {
        snprintf(scope_names[i], 16, "scope%d", i);
        scopes[i] = (mst_scope){S(scope_names[i]), S(""), NULL};
    }
    mst_span *spans[NSP];
    for (int i = 0; i < NSP; i++) {
        snprintf(span_names[i], 16, "span%d", i);
        /* scopes appear in order 7, 14, 1, 8, ... (i*7 % NS) */
        spans[i] = mk_span(&scopes[(i * 7) % NS], span_names[i], (uint8_t)i);
    }
    spans[5]->scope = NULL; /* a span without scope: its own group */
    mst_buf b = encode(false, NULL, spans, NSP);
    name_capture *c = calloc(1, sizeof *c);
    mst_otlp_visitor v = {.ctx = c, .on_span = cap_span};
    mst_otlp_counts counts;
    CHECK_EQ_INT(mst_otlp_decode(b.data, b.len, &v, &counts), MST_OK);
    CHECK_EQ_INT(counts.spans, NSP);
    CHECK_EQ_INT(counts.scope_spans, NS + 1);
    CHECK_EQ_INT(c->n, NSP);
    /* expected: first-seen scope order, input order within a scope */
    int k = 0;
    bool done[NSP] = {false};
    for (int i = 0; i < NSP; i++) {
        if (done[i]) continue;
        for (int j = i; j < NSP; j++) {
            if (done[j] || spans[j]->scope != spans[i]->scope) continue;
            done[j] = true;
            CHECK_EQ_STR(c->names[k], span_names[j]);
            k++;
        }
    }
    CHECK_EQ_INT(k, NSP);
    mst_buf_free(&b);
    free(c);
    for (int i = 0; i < NSP; i++) free(spans[i]);
}

/* Large batch with big values: every length hint is wrong somewhere. */
static void test_large_batch(void) {
    enum { N = 1500 };
    static char big[20000];
    memset(big, 'v', sizeof big - 1);
    mst_scope sc = {S("s"), S("v"), NULL};
    mst_span **spans = calloc(N, sizeof *spans);
    for (int i = 0; i < N; i++) {
        spans[i] = mk_span(&sc, "big", (uint8_t)i);
        size_t len = (size_t)(i * 13) % sizeof big;
        spans[i]->attrs[0] = (mst_attr){.key = S("big"), .type = MST_ATTR_STRING, .v.s = {big, (uint32_t)len}};
        spans[i]->n_attrs = 1;
    }
    mst_buf b = encode(false, NULL, spans, N);
    mst_otlp_counts counts;
    CHECK_EQ_INT(mst_otlp_validate(b.data, b.len, &counts), MST_OK);
    CHECK_EQ_INT(counts.spans, N);
    CHECK_EQ_INT(counts.attributes, N);
    mst_buf_free(&b);
    /* the same batch under a size cap fails cleanly */
    mst_buf_init(&b, 4096);
    CHECK_EQ_INT(mst_otlp_encode_proto(NULL, (const mst_span *const *)spans, N, &b), MST_ERR_NOMEM);
    mst_buf_free(&b);
    for (int i = 0; i < N; i++) free(spans[i]);
    free(spans);
}

static void test_empty_batch(void) {
    mst_buf b = encode(false, NULL, NULL, 0);
    mst_otlp_counts counts;
    CHECK_EQ_INT(mst_otlp_validate(b.data, b.len, &counts), MST_OK);
    CHECK_EQ_INT(counts.resource_spans, 1);
    CHECK_EQ_INT(counts.spans, 0);
    mst_buf_free(&b);
    CHECK_EQ_INT(mst_otlp_validate(NULL, 0, &counts), MST_OK);
    CHECK_EQ_INT(counts.spans, 0);
}

/* ----------------------------------------------------- decoder rejects */

/* Wraps a Span body into a full request. */
static mst_buf wrap_span(const mst_buf *span) {
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_pb_mark rs = mst_pb_begin(&b, 1, 1);
    mst_pb_mark ss = mst_pb_begin(&b, 2, 1);
    mst_pb_field_bytes(&b, 2, span->data, span->len);
    mst_pb_end(&b, ss);
    mst_pb_end(&b, rs);
    return b;
}

static mst_status decode_span_body(void (*build)(mst_buf *)) {
    mst_buf span;
    mst_buf_init(&span, 0);
    build(&span);
    mst_buf req = wrap_span(&span);
    mst_status st = mst_otlp_validate(req.data, req.len, NULL);
    mst_buf_free(&span);
    mst_buf_free(&req);
    return st;
}

static const uint8_t TID[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t SID[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t ZERO[16] = {0};

static void ok_span(mst_buf *b) {
    mst_pb_field_bytes(b, 1, TID, 16);
    mst_pb_field_bytes(b, 2, SID, 8);
    mst_pb_field_string(b, 5, "n", 1);
}
static void short_trace(mst_buf *b) { mst_pb_field_bytes(b, 1, TID, 15); mst_pb_field_bytes(b, 2, SID, 8); }
static void zero_trace(mst_buf *b) { mst_pb_field_bytes(b, 1, ZERO, 16); mst_pb_field_bytes(b, 2, SID, 8); }
static void no_span_id(mst_buf *b) { mst_pb_field_bytes(b, 1, TID, 16); }
static void zero_span_id(mst_buf *b) { mst_pb_field_bytes(b, 1, TID, 16); mst_pb_field_bytes(b, 2, ZERO, 8); }
static void bad_parent(mst_buf *b) { ok_span(b); mst_pb_field_bytes(b, 4, SID, 7); }
static void name_as_varint(mst_buf *b) { ok_span(b); mst_pb_field_varint(b, 5, 3); }
static void start_as_varint(mst_buf *b) { ok_span(b); mst_pb_field_varint(b, 7, 3); }
static void flags_as_fixed64(mst_buf *b) { ok_span(b); mst_pb_field_fixed64(b, 16, 3); }
static void bad_utf8_name(mst_buf *b) {
    mst_pb_field_bytes(b, 1, TID, 16);
    mst_pb_field_bytes(b, 2, SID, 8);
    mst_pb_field_bytes(b, 5, "a\xFF", 2);
}
static void unknown_fields(mst_buf *b) {
    ok_span(b);
    mst_pb_field_varint(b, 99, 1);
    mst_pb_field_bytes(b, 100, "zz", 2);
    mst_pb_field_fixed32(b, 101, 5);
}
static void link_short_id(mst_buf *b) {
    ok_span(b);
    mst_pb_mark m = mst_pb_begin(b, 13, 1);
    mst_pb_field_bytes(b, 1, TID, 16);
    mst_pb_field_bytes(b, 2, SID, 4);
    mst_pb_end(b, m);
}
static void deep_nesting(mst_buf *b) {
    ok_span(b);
    mst_pb_mark kv = mst_pb_begin(b, 9, 1);
    mst_pb_field_string(b, 1, "k", 1);
    mst_pb_mark marks[2 * (MST_OTLP_MAX_DEPTH + 2)];
    int n = 0;
    for (int i = 0; i < MST_OTLP_MAX_DEPTH + 2; i++) {
        marks[n++] = mst_pb_begin(b, 2 - (i > 0), 1); /* value, then array values */
        marks[n++] = mst_pb_begin(b, 5, 1);           /* array_value */
    }
    while (n) mst_pb_end(b, marks[--n]);
    mst_pb_end(b, kv);
}
static void dropped_too_big(mst_buf *b) { ok_span(b); mst_pb_field_varint(b, 10, 1ull << 33); }

static void test_decoder_rejects(void) {
    CHECK_EQ_INT(decode_span_body(ok_span), MST_OK);
    CHECK_EQ_INT(decode_span_body(unknown_fields), MST_OK);
    CHECK_EQ_INT(decode_span_body(short_trace), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(zero_trace), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(no_span_id), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(zero_span_id), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(bad_parent), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(name_as_varint), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(start_as_varint), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(flags_as_fixed64), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(bad_utf8_name), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(link_short_id), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(deep_nesting), MST_ERR_PARSE);
    CHECK_EQ_INT(decode_span_body(dropped_too_big), MST_ERR_PARSE);
}

/* Every truncation of a valid request either fails or (cut exactly at a
 * field boundary of the top level) validates; nothing reads past the end
 * (ASan build) and a failure never reports spans. */
static void test_truncations(void) {
    mst_scope sc = {S("s"), S("1"), NULL};
    mst_span *s = mk_span(&sc, "trunc", 1);
    s->attrs[0] = (mst_attr){.key = S("k"), .type = MST_ATTR_STRING, .v.s = S("value")};
    s->n_attrs = 1;
    mst_buf b = encode(false, NULL, &s, 1);
    for (size_t n = 0; n < b.len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.data, n);
        mst_otlp_counts counts;
        mst_status st = mst_otlp_validate(copy, n, &counts);
        if (n > 0) CHECK_EQ_INT(st, MST_ERR_PARSE);
        if (st != MST_OK) CHECK_EQ_INT(counts.spans, 0);
        free(copy);
    }
    mst_buf_free(&b);
    free(s);
}

/* ------------------------------------------- through the public API */

typedef struct cap_exporter {
    mst_exporter base;
    mst_tracer *tracer;
    size_t spans;
    size_t decoded;
    int failures;
    size_t links, events;
} cap_exporter;

static mst_status cap_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    cap_exporter *e = (cap_exporter *)self;
    mst_buf b;
    mst_buf_init(&b, 0);
    if (mst_otlp_encode_proto(mst_tracer_resource(e->tracer), spans, n, &b) != MST_OK) e->failures++;
    mst_otlp_counts c;
    if (mst_otlp_validate(b.data, b.len, &c) != MST_OK) e->failures++;
    e->spans += n;
    e->decoded += c.spans;
    e->links += c.links;
    e->events += c.events;
    mst_buf_reset(&b);
    if (mst_otlp_encode_json(mst_tracer_resource(e->tracer), spans, n, &b) != MST_OK) e->failures++;
    mst_buf_free(&b);
    return MST_OK;
}

static void cap_destroy(mst_exporter *self) { (void)self; }

static const mst_exporter_ops cap_ops = {.name = "capture", .export_batch = cap_export,
                                         .destroy = cap_destroy};

static void test_public_api_spans(void) {
    mst_tracer *t = NULL;
    mst_tracer_options opts = {.max_queue_size = 256, .max_export_batch_size = 64, .schedule_delay_ms = 10};
    CHECK_EQ_INT(mst_tracer_create(&opts, &t), MST_OK);
    if (!t) return;
    static cap_exporter cap;
    memset(&cap, 0, sizeof cap);
    cap.base.ops = &cap_ops;
    cap.tracer = t;
    CHECK_EQ_INT(mst_tracer_add_exporter(t, &cap.base), MST_OK);
    const mst_scope *sc1 = mst_tracer_scope(t, "ms_service_profiler.hook.Schedule", "1");
    const mst_scope *sc2 = mst_tracer_scope(t, "vllm", NULL);
    mst_span_context link_ctx;
    memset(&link_ctx, 0, sizeof link_ctx);
    link_ctx.trace_id = mst_trace_id_random();
    link_ctx.span_id = mst_span_id_random();
    link_ctx.trace_flags = 1;
    const char *items[] = {"a", "b"};
    for (int i = 0; i < 100; i++) {
        mst_span *s = mst_span_start(t, i % 2 ? sc1 : sc2, "hook", MST_SPAN_KIND_INTERNAL, NULL, 0);
        CHECK(s != NULL);
        mst_span_set_str(s, "req.id", "r-1");
        mst_span_set_int(s, "batch", i);
        mst_span_set_double(s, "ratio", 0.5);
        mst_span_set_bool(s, "prefill", i % 3 == 0);
        mst_span_set_str_list(s, "ids", items, 2);
        mst_attr_in la = {.key = "peer", .type = MST_ATTR_STRING, .v.s = "x"};
        mst_span_add_link(s, &link_ctx, &la, 1);
        mst_span_add_event(s, "ev", 0, NULL, 0);
        if (i == 7) mst_span_set_status(s, MST_STATUS_ERROR, "bad \xFF bytes");
        mst_span_end(s, 0);
    }
    CHECK_EQ_INT(mst_tracer_flush(t, 10000), MST_OK);
    CHECK_EQ_INT(cap.failures, 0);
    CHECK_EQ_INT(cap.spans, 100);
    CHECK_EQ_INT(cap.decoded, 100);
    CHECK_EQ_INT(cap.links, 100);
    CHECK_EQ_INT(cap.events, 100);
    mst_tracer_shutdown(t, 10000);
}

static const mst_test_case tests[] = {
    {"json_exact", test_json_exact},
    {"json_non_finite", test_json_non_finite},
    {"proto_utf8_repaired", test_proto_utf8_repaired},
    {"scope_grouping", test_scope_grouping},
    {"large_batch", test_large_batch},
    {"empty_batch", test_empty_batch},
    {"decoder_rejects", test_decoder_rejects},
    {"truncations", test_truncations},
    {"public_api_spans", test_public_api_spans},
};
MST_TEST_MAIN(tests)
