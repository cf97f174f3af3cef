/*
 * test_otlp_vectors.c — OTLP encoder test vectors, shared with the Python
 * cross-check (tests/python/test_otlp_bytes.py).
 *
 *   test_otlp_vectors --write DIR   writes DIR/spans.pb (binary
 *       ExportTraceServiceRequest), DIR/spans.json (OTLP/JSON) and
 *       DIR/expected.json (exactly what was put in, derived from the same
 *       span records) so an independent decoder can check every field;
 *   test_otlp_vectors               self-check: encodes, decodes with
 *       otlp_decode.h and compares field by field (run by ctest).
 *
 * The vectors cover every attribute type (string, bool, int incl. extremes,
 * double, string list incl. empty), events, links with attributes and trace
 * state, remote and local parents, error status with escapes and Unicode,
 * dropped counts, W3C flags, and several scopes interleaved (grouping).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testlib.h"
#include "wire/otlp.h"
#include "wire/otlp_decode.h"

/* ------------------------------------------------------------- vectors */

static mst_str S(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }
static mst_attr A_STR(const char *k, const char *v) { mst_attr a = {.key = S(k), .type = MST_ATTR_STRING}; a.v.s = S(v); return a; }
static mst_attr A_INT(const char *k, int64_t v) { mst_attr a = {.key = S(k), .type = MST_ATTR_INT}; a.v.i = v; return a; }
static mst_attr A_DBL(const char *k, double v) { mst_attr a = {.key = S(k), .type = MST_ATTR_DOUBLE}; a.v.d = v; return a; }
static mst_attr A_BOOL(const char *k, bool v) { mst_attr a = {.key = S(k), .type = MST_ATTR_BOOL}; a.v.b = v; return a; }
static mst_attr A_LIST(const char *k, mst_str *items, uint32_t n) {
    mst_attr a = {.key = S(k), .type = MST_ATTR_STRING_LIST};
    a.v.list.items = items;
    a.v.list.count = n;
    return a;
}

static void fill_id(uint8_t *p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed * 17 + i * 31 + 1);
}

enum { N_SPANS = 5 };

typedef struct vectors {
    mst_resource res;
    mst_scope scopes[3];
    mst_span *spans[N_SPANS];
    mst_str list_a[3];
    mst_str list_b[1];
    mst_attr ev_attrs[3];
    mst_event events1[2];
    mst_event events4[1];
    mst_attr link_attrs[4];
    mst_link links2[2];
    mst_link links4[1];
    char long_value[301];
} vectors;

static void set_attrs(mst_span *s, const mst_attr *a, uint32_t n) {
    memcpy(s->attrs, a, n * sizeof *a);
    s->n_attrs = n;
}

static mst_span *new_span(vectors *v, int i, const mst_scope *sc, const char *name,
                          mst_span_kind kind) {
    mst_span *s = calloc(1, sizeof *s);
    if (!s) abort();
    fill_id(s->trace_id.bytes, 16, (uint8_t)(i < 3 ? 1 : 2)); /* two traces */
    fill_id(s->span_id.bytes, 8, (uint8_t)(10 + i));
    s->scope = sc;
    s->name = S(name);
    s->kind = kind;
    s->trace_flags = MST_TRACE_FLAG_SAMPLED;
    s->trace_state = S("");
    s->status_message = S("");
    s->start_ns = 1767225600000000000ull + (uint64_t)i * 1000003ull;
    s->end_ns = s->start_ns + 2500000ull + (uint64_t)i;
    v->spans[i] = s;
    return s;
}

static void build_vectors(vectors *v) {
    memset(v, 0, sizeof *v);
    /* Resource */
    mst_attr ra[] = {A_STR("service.name", "mstrace-vectors"), A_INT("process.pid", 4242),
                     A_STR("telemetry.sdk.language", "c"), A_BOOL("host.virtual", true),
                     A_DBL("res.weight", 0.25)};
    memcpy(v->res.attrs, ra, sizeof ra);
    v->res.n_attrs = 5;
    v->res.dropped_attrs = 1;
    v->res.service_name = S("mstrace-vectors");
    /* Scopes */
    v->scopes[0] = (mst_scope){S("ms_service_profiler.hook.Schedule"), S("1.2.3"), NULL};
    v->scopes[1] = (mst_scope){S("vllm.engine"), S(""), NULL};
    v->scopes[2] = (mst_scope){S("mstrace.test \xE2\x9C\x93"), S("0.1"), NULL};
    v->list_a[0] = S("alpha");
    v->list_a[1] = S("");
    v->list_a[2] = S("\xC3\xBC\xC3\xB1\xC3\xAF \"q\" \\ \t");
    v->list_b[0] = S("one");
    memset(v->long_value, 'x', 300);
    v->long_value[300] = '\0';

    /* 0: root SERVER span, every attribute type, two events, OK status. */
    mst_span *s = new_span(v, 0, &v->scopes[0], "Schedule", MST_SPAN_KIND_SERVER);
    mst_attr a0[] = {A_STR("req.id", "chatcmpl-123"), A_INT("tokens.in", 512),
                     A_INT("neg", -1), A_INT("i64.min", INT64_MIN), A_INT("i64.max", INT64_MAX),
                     A_DBL("ratio", 3.141592653589793), A_DBL("tiny", 1e-300), A_DBL("neg.double", -2.5),
                     A_BOOL("yes", true), A_BOOL("no", false),
                     A_LIST("list", v->list_a, 3), A_LIST("empty.list", v->list_b, 0),
                     A_STR("empty.str", "")};
    set_attrs(s, a0, sizeof a0 / sizeof a0[0]);
    s->trace_state = S("vendor=abc,k2=v2");
    v->ev_attrs[0] = A_STR("ev.key", "ev-value");
    v->ev_attrs[1] = A_INT("ev.n", 7);
    v->ev_attrs[2] = A_LIST("ev.list", v->list_b, 1);
    v->events1[0] = (mst_event){S("enqueue"), s->start_ns + 10, v->ev_attrs, 3, 0};
    v->events1[1] = (mst_event){S("dequeue"), s->start_ns + 20, NULL, 0, 2};
    s->events = v->events1;
    s->n_events = s->event_cap = 2;
    s->status_code = MST_STATUS_OK;

    /* 1: local child of 0 with two links, ERROR status, dropped counts. */
    s = new_span(v, 1, &v->scopes[1], "engine.step", MST_SPAN_KIND_INTERNAL);
    s->has_parent = true;
    s->parent_span_id = v->spans[0]->span_id;
    mst_attr a1[] = {A_STR("model", "llama-3-8b"), A_DBL("kv.usage", 0.5)};
    set_attrs(s, a1, 2);
    v->link_attrs[0] = A_STR("link.kind", "batch-peer");
    v->link_attrs[1] = A_INT("link.idx", 0);
    v->link_attrs[2] = A_BOOL("link.remote", true);
    v->link_attrs[3] = A_DBL("link.w", 1.5);
    mst_link l0 = {.trace_flags = 1, .is_remote = true, .trace_state = S("ro=1"),
                   .attrs = v->link_attrs, .n_attrs = 3, .dropped_attrs = 0};
    fill_id(l0.trace_id.bytes, 16, 7);
    fill_id(l0.span_id.bytes, 8, 70);
    mst_link l1 = {.trace_flags = 0, .is_remote = false, .trace_state = S(""),
                   .attrs = v->link_attrs + 3, .n_attrs = 1, .dropped_attrs = 4};
    fill_id(l1.trace_id.bytes, 16, 8);
    fill_id(l1.span_id.bytes, 8, 80);
    v->links2[0] = l0;
    v->links2[1] = l1;
    s->links = v->links2;
    s->n_links = s->link_cap = 2;
    s->status_code = MST_STATUS_ERROR;
    s->status_message = S("boom \"quoted\"\n\x01 \xC3\xBCnicode \xF0\x9F\x94\xA5");
    s->dropped_attrs = 3;
    s->dropped_events = 1;
    s->dropped_links = 2;

    /* 2: back in scope 0 (grouping), remote parent, CLIENT. */
    s = new_span(v, 2, &v->scopes[0], "Schedule.remote", MST_SPAN_KIND_CLIENT);
    s->has_parent = true;
    s->parent_is_remote = true;
    fill_id(s->parent_span_id.bytes, 8, 99);
    mst_attr a2[] = {A_STR("http.route", "/v1/chat/completions")};
    set_attrs(s, a2, 1);

    /* 3: second trace, scope 2, unsampled flags, long value, one event. */
    s = new_span(v, 3, &v->scopes[2], "producer \xE2\x9C\x93", MST_SPAN_KIND_PRODUCER);
    s->trace_flags = 0;
    mst_attr a3[] = {A_STR("long", v->long_value), A_INT("zero", 0)};
    set_attrs(s, a3, 2);
    v->events4[0] = (mst_event){S(""), s->start_ns + 1, NULL, 0, 0};
    s->events = v->events4;
    s->n_events = s->event_cap = 1;
    mst_link l2 = {.trace_flags = 1, .is_remote = false, .trace_state = S(""), .attrs = NULL,
                   .n_attrs = 0, .dropped_attrs = 1};
    fill_id(l2.trace_id.bytes, 16, 9);
    fill_id(l2.span_id.bytes, 8, 90);
    v->links4[0] = l2;
    s->links = v->links4;
    s->n_links = s->link_cap = 1;

    /* 4: scope 1 again, CONSUMER, bare: no attributes, UNSET status. */
    s = new_span(v, 4, &v->scopes[1], "consume", MST_SPAN_KIND_CONSUMER);
    s->has_parent = true;
    s->parent_span_id = v->spans[3]->span_id;
}

static void free_vectors(vectors *v) {
    for (int i = 0; i < N_SPANS; i++) free(v->spans[i]);
}

/* ------------------------------------------------------- expected.json */

static void j_str(mst_buf *b, mst_str s) { mst_buf_append_json_str(b, s.ptr, s.len); }
static void j_key(mst_buf *b, const char *k) {
    mst_buf_append_json_str(b, k, strlen(k));
    mst_buf_append_byte(b, ':');
}
static void j_hex(mst_buf *b, const uint8_t *p, size_t n) {
    mst_buf_append_byte(b, '"');
    mst_buf_append_hex(b, p, n);
    mst_buf_append_byte(b, '"');
}

static void j_attrs(mst_buf *b, const mst_attr *a, uint32_t n) {
    static const char *names[] = {"", "string", "int", "double", "bool", "string_list"};
    mst_buf_append_byte(b, '[');
    for (uint32_t i = 0; i < n; i++) {
        if (i) mst_buf_append_byte(b, ',');
        mst_buf_append_cstr(b, "{\"key\":");
        j_str(b, a[i].key);
        mst_buf_append_cstr(b, ",\"type\":\"");
        mst_buf_append_cstr(b, names[a[i].type]);
        mst_buf_append_cstr(b, "\",\"value\":");
        switch (a[i].type) {
        case MST_ATTR_STRING: j_str(b, a[i].v.s); break;
        case MST_ATTR_INT: mst_buf_append_i64(b, a[i].v.i); break;
        case MST_ATTR_DOUBLE: mst_buf_append_double(b, a[i].v.d); break;
        case MST_ATTR_BOOL: mst_buf_append_cstr(b, a[i].v.b ? "true" : "false"); break;
        case MST_ATTR_STRING_LIST:
            mst_buf_append_byte(b, '[');
            for (uint32_t k = 0; k < a[i].v.list.count; k++) {
                if (k) mst_buf_append_byte(b, ',');
                j_str(b, a[i].v.list.items[k]);
            }
            mst_buf_append_byte(b, ']');
            break;
        }
        mst_buf_append_byte(b, '}');
    }
    mst_buf_append_byte(b, ']');
}

static uint32_t flags_of(uint8_t w3c, bool remote) { return w3c | 0x100u | (remote ? 0x200u : 0u); }

static void j_span(mst_buf *b, const mst_span *s) {
    mst_buf_append_byte(b, '{');
    j_key(b, "trace_id"); j_hex(b, s->trace_id.bytes, 16);
    mst_buf_append_byte(b, ','); j_key(b, "span_id"); j_hex(b, s->span_id.bytes, 8);
    mst_buf_append_byte(b, ','); j_key(b, "parent_span_id");
    if (s->has_parent) j_hex(b, s->parent_span_id.bytes, 8); else mst_buf_append_cstr(b, "\"\"");
    mst_buf_append_byte(b, ','); j_key(b, "trace_state"); j_str(b, s->trace_state);
    mst_buf_append_byte(b, ','); j_key(b, "name"); j_str(b, s->name);
    mst_buf_append_byte(b, ','); j_key(b, "kind"); mst_buf_append_u64(b, s->kind);
    mst_buf_append_byte(b, ','); j_key(b, "start_time_unix_nano"); mst_buf_append_u64(b, s->start_ns);
    mst_buf_append_byte(b, ','); j_key(b, "end_time_unix_nano"); mst_buf_append_u64(b, s->end_ns);
    mst_buf_append_byte(b, ','); j_key(b, "flags");
    mst_buf_append_u64(b, flags_of(s->trace_flags, s->has_parent && s->parent_is_remote));
    mst_buf_append_byte(b, ','); j_key(b, "attributes"); j_attrs(b, s->attrs, s->n_attrs);
    mst_buf_append_byte(b, ','); j_key(b, "dropped_attributes_count"); mst_buf_append_u64(b, s->dropped_attrs);
    mst_buf_append_byte(b, ','); j_key(b, "events"); mst_buf_append_byte(b, '[');
    for (uint32_t i = 0; i < s->n_events; i++) {
        const mst_event *e = &s->events[i];
        if (i) mst_buf_append_byte(b, ',');
        mst_buf_append_byte(b, '{');
        j_key(b, "time_unix_nano"); mst_buf_append_u64(b, e->time_ns);
        mst_buf_append_byte(b, ','); j_key(b, "name"); j_str(b, e->name);
        mst_buf_append_byte(b, ','); j_key(b, "attributes"); j_attrs(b, e->attrs, e->n_attrs);
        mst_buf_append_byte(b, ','); j_key(b, "dropped_attributes_count"); mst_buf_append_u64(b, e->dropped_attrs);
        mst_buf_append_byte(b, '}');
    }
    mst_buf_append_byte(b, ']');
    mst_buf_append_byte(b, ','); j_key(b, "dropped_events_count"); mst_buf_append_u64(b, s->dropped_events);
    mst_buf_append_byte(b, ','); j_key(b, "links"); mst_buf_append_byte(b, '[');
    for (uint32_t i = 0; i < s->n_links; i++) {
        const mst_link *l = &s->links[i];
        if (i) mst_buf_append_byte(b, ',');
        mst_buf_append_byte(b, '{');
        j_key(b, "trace_id"); j_hex(b, l->trace_id.bytes, 16);
        mst_buf_append_byte(b, ','); j_key(b, "span_id"); j_hex(b, l->span_id.bytes, 8);
        mst_buf_append_byte(b, ','); j_key(b, "trace_state"); j_str(b, l->trace_state);
        mst_buf_append_byte(b, ','); j_key(b, "attributes"); j_attrs(b, l->attrs, l->n_attrs);
        mst_buf_append_byte(b, ','); j_key(b, "dropped_attributes_count"); mst_buf_append_u64(b, l->dropped_attrs);
        mst_buf_append_byte(b, ','); j_key(b, "flags"); mst_buf_append_u64(b, flags_of(l->trace_flags, l->is_remote));
        mst_buf_append_byte(b, '}');
    }
    mst_buf_append_byte(b, ']');
    mst_buf_append_byte(b, ','); j_key(b, "dropped_links_count"); mst_buf_append_u64(b, s->dropped_links);
    mst_buf_append_byte(b, ','); j_key(b, "status"); mst_buf_append_byte(b, '{');
    j_key(b, "code"); mst_buf_append_u64(b, s->status_code);
    mst_buf_append_byte(b, ','); j_key(b, "message"); j_str(b, s->status_message);
    mst_buf_append_cstr(b, "}}");
}

/* {"resource": {...}, "scopes": [{"name","version","spans":[...]}]} with
 * scopes in first-seen order, as the encoders must group them. */
static void write_expected(mst_buf *b, const vectors *v) {
    mst_buf_append_cstr(b, "{\"resource\":{\"attributes\":");
    j_attrs(b, v->res.attrs, v->res.n_attrs);
    mst_buf_append_cstr(b, ",\"dropped_attributes_count\":");
    mst_buf_append_u64(b, v->res.dropped_attrs);
    mst_buf_append_cstr(b, "},\"span_count\":");
    mst_buf_append_u64(b, N_SPANS);
    mst_buf_append_cstr(b, ",\"scopes\":[");
    const mst_scope *seen[N_SPANS];
    int n_seen = 0;
    for (int i = 0; i < N_SPANS; i++) {
        const mst_scope *sc = v->spans[i]->scope;
        bool dup = false;
        for (int k = 0; k < n_seen; k++) dup |= seen[k] == sc;
        if (dup) continue;
        seen[n_seen++] = sc;
        if (n_seen > 1) mst_buf_append_byte(b, ',');
        mst_buf_append_cstr(b, "{\"name\":");
        j_str(b, sc->name);
        mst_buf_append_cstr(b, ",\"version\":");
        j_str(b, sc->version);
        mst_buf_append_cstr(b, ",\"spans\":[");
        bool first = true;
        for (int j = i; j < N_SPANS; j++) {
            if (v->spans[j]->scope != sc) continue;
            if (!first) mst_buf_append_byte(b, ',');
            first = false;
            j_span(b, v->spans[j]);
        }
        mst_buf_append_cstr(b, "]}");
    }
    mst_buf_append_cstr(b, "]}\n");
}

/* ------------------------------------------------------- self-check */

static bool bytes_eq(mst_otlp_bytes a, mst_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static void check_value(const mst_otlp_value *val, const mst_attr *a) {
    switch (a->type) {
    case MST_ATTR_STRING:
        CHECK_EQ_INT(val->type, MST_OTLP_VALUE_STRING);
        CHECK(bytes_eq(val->raw, a->v.s));
        break;
    case MST_ATTR_INT:
        CHECK_EQ_INT(val->type, MST_OTLP_VALUE_INT);
        CHECK(val->i == a->v.i);
        break;
    case MST_ATTR_DOUBLE:
        CHECK_EQ_INT(val->type, MST_OTLP_VALUE_DOUBLE);
        CHECK(memcmp(&val->d, &a->v.d, sizeof(double)) == 0);
        break;
    case MST_ATTR_BOOL:
        CHECK_EQ_INT(val->type, MST_OTLP_VALUE_BOOL);
        CHECK(val->b == a->v.b);
        break;
    case MST_ATTR_STRING_LIST: {
        CHECK_EQ_INT(val->type, MST_OTLP_VALUE_ARRAY);
        mst_otlp_iter it;
        mst_otlp_array_values(val, &it);
        mst_otlp_value item;
        uint32_t k = 0;
        while (mst_otlp_next_value(&it, &item)) {
            CHECK(k < a->v.list.count);
            if (k >= a->v.list.count) break;
            CHECK_EQ_INT(item.type, MST_OTLP_VALUE_STRING);
            CHECK(bytes_eq(item.raw, a->v.list.items[k]));
            k++;
        }
        CHECK_EQ_INT(k, a->v.list.count);
        break;
    }
    }
}

static void check_attrs(mst_otlp_iter *it, const mst_attr *a, uint32_t n) {
    mst_otlp_kv kv;
    uint32_t i = 0;
    while (mst_otlp_next_kv(it, &kv)) {
        CHECK(i < n);
        if (i >= n) return;
        CHECK(bytes_eq(kv.key, a[i].key));
        check_value(&kv.value, &a[i]);
        i++;
    }
    CHECK_EQ_INT(i, n);
}

typedef struct walk {
    const vectors *v;
    int scope_idx;
    const mst_scope *order[N_SPANS]; /* expected span order: grouped */
    const mst_span *expect[N_SPANS];
    int next;
} walk;

static mst_status on_resource(void *ctx, const mst_otlp_resource_view *r) {
    walk *w = ctx;
    mst_otlp_iter it;
    mst_otlp_resource_attrs(r, &it);
    check_attrs(&it, w->v->res.attrs, w->v->res.n_attrs);
    CHECK_EQ_INT(r->dropped_attrs, w->v->res.dropped_attrs);
    return MST_OK;
}

static mst_status on_span(void *ctx, const mst_otlp_span_view *sv) {
    walk *w = ctx;
    CHECK(w->next < N_SPANS);
    if (w->next >= N_SPANS) return MST_ERR_INTERNAL;
    const mst_span *s = w->expect[w->next++];
    CHECK(bytes_eq(sv->scope->name, s->scope->name));
    CHECK(bytes_eq(sv->scope->version, s->scope->version));
    CHECK(memcmp(sv->trace_id, s->trace_id.bytes, 16) == 0);
    CHECK(memcmp(sv->span_id, s->span_id.bytes, 8) == 0);
    CHECK(sv->has_parent == s->has_parent);
    if (s->has_parent) CHECK(memcmp(sv->parent_span_id, s->parent_span_id.bytes, 8) == 0);
    CHECK(bytes_eq(sv->trace_state, s->trace_state));
    CHECK(bytes_eq(sv->name, s->name));
    CHECK_EQ_INT(sv->kind, s->kind);
    CHECK(sv->start_ns == s->start_ns);
    CHECK(sv->end_ns == s->end_ns);
    CHECK_EQ_INT(sv->flags, flags_of(s->trace_flags, s->has_parent && s->parent_is_remote));
    CHECK_EQ_INT(sv->n_attrs, s->n_attrs);
    CHECK_EQ_INT(sv->dropped_attrs, s->dropped_attrs);
    CHECK_EQ_INT(sv->n_events, s->n_events);
    CHECK_EQ_INT(sv->dropped_events, s->dropped_events);
    CHECK_EQ_INT(sv->n_links, s->n_links);
    CHECK_EQ_INT(sv->dropped_links, s->dropped_links);
    CHECK_EQ_INT(sv->status_code, s->status_code);
    CHECK(bytes_eq(sv->status_message, s->status_message));
    mst_otlp_iter it;
    mst_otlp_span_attrs(sv, &it);
    check_attrs(&it, s->attrs, s->n_attrs);
    mst_otlp_span_events(sv, &it);
    mst_otlp_event_view ev;
    for (uint32_t i = 0; mst_otlp_next_event(&it, &ev); i++) {
        const mst_event *e = &s->events[i];
        CHECK(ev.time_ns == e->time_ns);
        CHECK(bytes_eq(ev.name, e->name));
        CHECK_EQ_INT(ev.dropped_attrs, e->dropped_attrs);
        mst_otlp_iter ai;
        mst_otlp_event_attrs(&ev, &ai);
        check_attrs(&ai, e->attrs, e->n_attrs);
    }
    mst_otlp_span_links(sv, &it);
    mst_otlp_link_view lv;
    for (uint32_t i = 0; mst_otlp_next_link(&it, &lv); i++) {
        const mst_link *l = &s->links[i];
        CHECK(memcmp(lv.trace_id, l->trace_id.bytes, 16) == 0);
        CHECK(memcmp(lv.span_id, l->span_id.bytes, 8) == 0);
        CHECK(bytes_eq(lv.trace_state, l->trace_state));
        CHECK_EQ_INT(lv.flags, flags_of(l->trace_flags, l->is_remote));
        CHECK_EQ_INT(lv.dropped_attrs, l->dropped_attrs);
        mst_otlp_iter ai;
        mst_otlp_link_attrs(&lv, &ai);
        check_attrs(&ai, l->attrs, l->n_attrs);
    }
    return MST_OK;
}

static void test_vectors_roundtrip(void) {
    vectors *v = malloc(sizeof *v);
    build_vectors(v);
    mst_buf b;
    mst_buf_init(&b, 0);
    CHECK_EQ_INT(mst_otlp_encode_proto(&v->res, (const mst_span *const *)v->spans, N_SPANS, &b), MST_OK);
    walk w = {.v = v};
    /* expected order: by scope in first-seen order */
    const mst_scope *seen[N_SPANS];
    int n_seen = 0;
    for (int i = 0; i < N_SPANS; i++) {
        bool dup = false;
        for (int k = 0; k < n_seen; k++) dup |= seen[k] == v->spans[i]->scope;
        if (!dup) seen[n_seen++] = v->spans[i]->scope;
    }
    int n = 0;
    for (int k = 0; k < n_seen; k++)
        for (int i = 0; i < N_SPANS; i++)
            if (v->spans[i]->scope == seen[k]) w.expect[n++] = v->spans[i];
    mst_otlp_visitor vis = {.ctx = &w, .on_resource = on_resource, .on_span = on_span};
    mst_otlp_counts c;
    CHECK_EQ_INT(mst_otlp_decode(b.data, b.len, &vis, &c), MST_OK);
    CHECK_EQ_INT(w.next, N_SPANS);
    CHECK_EQ_INT(c.resource_spans, 1);
    CHECK_EQ_INT(c.scope_spans, 3);
    CHECK_EQ_INT(c.spans, N_SPANS);
    CHECK_EQ_INT(c.events, 3);
    CHECK_EQ_INT(c.links, 3);
    mst_buf_reset(&b);
    CHECK_EQ_INT(mst_otlp_encode_json(&v->res, (const mst_span *const *)v->spans, N_SPANS, &b), MST_OK);
    CHECK(b.len > 0 && b.data[0] == '{' && b.data[b.len - 1] == '}');
    mst_buf_free(&b);
    free_vectors(v);
    free(v);
}

/* --------------------------------------------------------------- write */

static int write_file(const char *dir, const char *name, const mst_buf *b) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "test_otlp_vectors: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t w = fwrite(b->data, 1, b->len, f);
    if (fclose(f) != 0 || w != b->len) {
        fprintf(stderr, "test_otlp_vectors: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int write_vectors(const char *dir) {
    mkdir(dir, 0755); /* may exist */
    vectors *v = malloc(sizeof *v);
    if (!v) return 1;
    build_vectors(v);
    int rc = 0;
    mst_buf b;
    mst_buf_init(&b, 0);
    const mst_span *const *spans = (const mst_span *const *)v->spans;
    if (mst_otlp_encode_proto(&v->res, spans, N_SPANS, &b) != MST_OK) rc = 1;
    rc |= write_file(dir, "spans.pb", &b);
    mst_buf_reset(&b);
    if (mst_otlp_encode_json(&v->res, spans, N_SPANS, &b) != MST_OK) rc = 1;
    rc |= write_file(dir, "spans.json", &b);
    mst_buf_reset(&b);
    write_expected(&b, v);
    rc |= b.failed;
    rc |= write_file(dir, "expected.json", &b);
    mst_buf_free(&b);
    free_vectors(v);
    free(v);
    return rc;
}

static const mst_test_case tests[] = {
    {"vectors_roundtrip", test_vectors_roundtrip},
};

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_vectors(argv[2]);
    return mst_test_run_all(tests, sizeof tests / sizeof tests[0], argc, argv);
}
