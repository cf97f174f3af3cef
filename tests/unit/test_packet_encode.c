/*
 * test_packet_encode.c — pins the upstream Hook span packet (docs/forwarder.md "Packets") as
 * produced by perfetto_packet_encode.c: exact bytes for a simple span, then
 * escaping, string lists, links, parent, category and resource attributes,
 * each parsed back with the forwarder's strict decoder so encoder and
 * decoder agree on every field.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "wire/perfetto_packet.h"

/* ---- span builders (records filled by hand: no tracer needed) ---- */

static mst_str S(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }

static void span_init(mst_span *s, const char *name) {
    memset(s, 0, sizeof *s);
    mst_arena_init(&s->arena);
    for (int i = 0; i < 16; i++) s->trace_id.bytes[i] = (uint8_t)(i + 1);
    for (int i = 0; i < 8; i++) s->span_id.bytes[i] = (uint8_t)(0xa1 + i);
    s->name = S(name);
    s->kind = MST_SPAN_KIND_INTERNAL;
    s->start_ns = 1000;
    s->end_ns = 2500;
}

static mst_attr *add_attr(mst_span *s, const char *key, mst_attr_type type) {
    mst_attr *a = &s->attrs[s->n_attrs++];
    a->key = S(key);
    a->type = type;
    return a;
}

static void add_int(mst_span *s, const char *k, int64_t v) { add_attr(s, k, MST_ATTR_INT)->v.i = v; }
static void add_str(mst_span *s, const char *k, const char *v) { add_attr(s, k, MST_ATTR_STRING)->v.s = S(v); }

/* Encodes into a NUL-terminated heap string (caller frees). */
static char *encode(const mst_span *s, const mst_resource *res, size_t *len) {
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_perfetto_packet_encode(s, res, &b);
    CHECK(!b.failed);
    mst_buf_append_byte(&b, 0);
    *len = b.len - 1;
    return (char *)b.data;
}

/* Decodes `pkt`; the span result points into pkt and arena. */
static bool decode(const char *pkt, size_t len, mst_arena *arena, mst_pf_span *out) {
    char err[256] = "";
    mst_arena_init(arena);
    mst_status st = mst_perfetto_packet_decode((const uint8_t *)pkt, len, arena, out, err, sizeof err);
    if (st != MST_OK) fprintf(stderr, "  decode failed: %s\n", err);
    return st == MST_OK;
}

static bool slice_is(mst_json_slice v, const char *want) {
    return v.len == strlen(want) && memcmp(v.ptr, want, v.len) == 0;
}

static const mst_pf_kv *find_kv(const mst_pf_kv *kv, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (kv[i].key.len == strlen(key) && memcmp(kv[i].key.ptr, key, kv[i].key.len) == 0)
            return &kv[i]; /* keys are slices, not NUL-terminated */
    return NULL;
}

/* ---- tests ---- */

static void test_simple_span_exact_bytes(void) {
    mst_span s;
    span_init(&s, "vllm.model.execute");
    add_int(&s, "process.pid", 42);
    add_attr(&s, "flag", MST_ATTR_BOOL)->v.b = true;
    add_attr(&s, "ratio", MST_ATTR_DOUBLE)->v.d = 0.5;
    add_int(&s, "neg", -7);
    size_t len;
    char *pkt = encode(&s, NULL, &len);
    const char *want =
        "MSPF_PERFETTO_V1\n"
        "{\"name\":\"vllm.model.execute\",\"category\":\"Tracing\","
        "\"trace_id\":\"0102030405060708090a0b0c0d0e0f10\",\"span_id\":\"a1a2a3a4a5a6a7a8\","
        "\"parent_span_id\":\"\",\"start_time_ns\":1000,\"end_time_ns\":2500,\"kind\":1,\"status\":0,"
        "\"attributes\":{\"process.pid\":42,\"flag\":true,\"ratio\":0.5,\"neg\":-7},"
        "\"resource_attributes\":{},\"links\":[]}";
    CHECK_EQ_STR(pkt, want);
    CHECK_EQ_INT(len, strlen(want));
    free(pkt);
    mst_arena_release(&s.arena);
}

static void test_simple_span_decodes_back(void) {
    mst_span s;
    span_init(&s, "vllm.model.execute");
    s.status_code = MST_STATUS_ERROR;
    s.kind = MST_SPAN_KIND_SERVER;
    s.start_ns = 1700000000123456789ull;
    s.end_ns = 1700000000223456789ull;
    add_int(&s, "process.pid", 42);
    add_int(&s, "thread.id", 4242);
    add_str(&s, "request.id", "req-1");
    size_t len;
    char *pkt = encode(&s, NULL, &len);
    mst_arena arena;
    mst_pf_span d;
    if (decode(pkt, len, &arena, &d)) {
        CHECK_EQ_STR(d.name.ptr, "vllm.model.execute");
        CHECK_EQ_STR(d.category.ptr, "Tracing");
        CHECK_EQ_STR(d.trace_id, "0102030405060708090a0b0c0d0e0f10");
        CHECK_EQ_STR(d.span_id, "a1a2a3a4a5a6a7a8");
        CHECK_EQ_STR(d.parent_span_id, "");
        CHECK(d.start_ns == 1700000000123456789ll);
        CHECK(d.end_ns == 1700000000223456789ll);
        CHECK_EQ_INT(d.kind, 2);
        CHECK_EQ_INT(d.status, 2);
        CHECK(d.has_pid && d.pid == 42);
        CHECK(d.has_tid && d.tid == 4242);
        CHECK_EQ_INT(d.n_attrs, 1);
        const mst_pf_kv *kv = find_kv(d.attrs, d.n_attrs, "request.id");
        CHECK(kv && slice_is(kv->value, "\"req-1\""));
        CHECK_EQ_INT(d.n_resource, 0);
        CHECK_EQ_INT(d.n_links, 0);
    } else {
        CHECK(!"decode");
    }
    mst_arena_release(&arena);
    free(pkt);
    mst_arena_release(&s.arena);
}

static void test_escaping(void) {
    mst_span s;
    span_init(&s, "a\"b\\c\nd\x01" "e\xff" "f\xc3\xa9");
    add_str(&s, "k\"ey", "tab\there");
    size_t len;
    char *pkt = encode(&s, NULL, &len);
    CHECK(strstr(pkt, "{\"name\":\"a\\\"b\\\\c\\nd\\u0001e\xEF\xBF\xBD" "f\xc3\xa9\",") != NULL);
    CHECK(strstr(pkt, "\"attributes\":{\"k\\\"ey\":\"tab\\there\"}") != NULL);
    mst_arena arena;
    mst_pf_span d;
    if (decode(pkt, len, &arena, &d)) {
        CHECK_EQ_STR(d.name.ptr, "a\"b\\c\nd\x01" "e\xEF\xBF\xBD" "f\xc3\xa9");
        CHECK_EQ_INT(d.n_attrs, 1);
        if (d.n_attrs == 1)
            CHECK(d.attrs[0].key.len == 4 && memcmp(d.attrs[0].key.ptr, "k\"ey", 4) == 0);
    } else {
        CHECK(!"decode");
    }
    mst_arena_release(&arena);
    free(pkt);
    mst_arena_release(&s.arena);
}

static void test_string_lists(void) {
    mst_span s;
    span_init(&s, "vllm.scheduler.schedule");
    mst_str items[3] = {S("req-1"), S("req\"2"), S("")};
    mst_attr *a = add_attr(&s, "request.ids", MST_ATTR_STRING_LIST);
    a->v.list.items = items;
    a->v.list.count = 3;
    mst_attr *e = add_attr(&s, "empty", MST_ATTR_STRING_LIST);
    e->v.list.items = NULL;
    e->v.list.count = 0;
    size_t len;
    char *pkt = encode(&s, NULL, &len);
    CHECK(strstr(pkt, "\"attributes\":{\"request.ids\":[\"req-1\",\"req\\\"2\",\"\"],\"empty\":[]}") != NULL);
    mst_arena arena;
    mst_pf_span d;
    if (decode(pkt, len, &arena, &d)) {
        const mst_pf_kv *kv = find_kv(d.attrs, d.n_attrs, "request.ids");
        CHECK(kv && slice_is(kv->value, "[\"req-1\",\"req\\\"2\",\"\"]"));
        kv = find_kv(d.attrs, d.n_attrs, "empty");
        CHECK(kv && slice_is(kv->value, "[]"));
    } else {
        CHECK(!"decode");
    }
    mst_arena_release(&arena);
    free(pkt);
    mst_arena_release(&s.arena);
}

static void test_links_parent_category_resource(void) {
    mst_span s;
    span_init(&s, "vllm.scheduler.schedule");
    mst_scope scope = {.name = S("ms_service_profiler.hook.Schedule"), .version = S("")};
    s.scope = &scope;
    s.has_parent = true;
    for (int i = 0; i < 8; i++) s.parent_span_id.bytes[i] = (uint8_t)(0xf0 + i);
    mst_link links[2];
    memset(links, 0, sizeof links);
    for (int l = 0; l < 2; l++) {
        for (int i = 0; i < 16; i++) links[l].trace_id.bytes[i] = (uint8_t)(0x10 * l + i);
        for (int i = 0; i < 8; i++) links[l].span_id.bytes[i] = (uint8_t)(0x30 + 0x10 * l + i);
    }
    s.links = links;
    s.n_links = 2;
    s.link_cap = 2;
    mst_resource res;
    memset(&res, 0, sizeof res);
    res.attrs[0] = (mst_attr){.key = S("service.name"), .type = MST_ATTR_STRING, .v.s = S("vllm")};
    res.attrs[1] = (mst_attr){.key = S("process.pid"), .type = MST_ATTR_INT, .v.i = 7};
    res.n_attrs = 2;
    size_t len;
    char *pkt = encode(&s, &res, &len);
    CHECK(strstr(pkt, "\"category\":\"ms_service_profiler.hook.Schedule\"") != NULL);
    CHECK(strstr(pkt, "\"parent_span_id\":\"f0f1f2f3f4f5f6f7\"") != NULL);
    CHECK(strstr(pkt, "\"resource_attributes\":{\"service.name\":\"vllm\",\"process.pid\":7}") != NULL);
    CHECK(strstr(pkt, "\"links\":[{\"trace_id\":\"000102030405060708090a0b0c0d0e0f\","
                      "\"span_id\":\"3031323334353637\"},"
                      "{\"trace_id\":\"101112131415161718191a1b1c1d1e1f\","
                      "\"span_id\":\"4041424344454647\"}]}") != NULL);
    mst_arena arena;
    mst_pf_span d;
    if (decode(pkt, len, &arena, &d)) {
        CHECK_EQ_STR(d.category.ptr, "ms_service_profiler.hook.Schedule");
        CHECK_EQ_STR(d.parent_span_id, "f0f1f2f3f4f5f6f7");
        CHECK_EQ_INT(d.n_links, 2);
        if (d.n_links == 2) {
            CHECK_EQ_STR(d.links[0].trace_id, "000102030405060708090a0b0c0d0e0f");
            CHECK_EQ_STR(d.links[1].span_id, "4041424344454647");
        }
        CHECK_EQ_INT(d.n_resource, 2);
        const mst_pf_kv *kv = find_kv(d.resource, d.n_resource, "service.name");
        CHECK(kv && slice_is(kv->value, "\"vllm\""));
    } else {
        CHECK(!"decode");
    }
    mst_arena_release(&arena);
    free(pkt);
    mst_arena_release(&s.arena);
}

/* A step span's request links (one attribute request.id each, at the end
 * of its links, on a span carrying request.ids) are counted in
 * "request_links"; a link before them (the step link) is not, and neither
 * are they without request.ids on the span. */
static void test_request_links_counted(void) {
    mst_span s;
    span_init(&s, "vllm.model.execute");
    mst_str items[2] = {S("req-1"), S("req-2")};
    mst_attr *ids = add_attr(&s, "request.ids", MST_ATTR_STRING_LIST);
    ids->v.list.items = items;
    ids->v.list.count = 2;
    mst_link links[3];
    mst_attr link_attrs[3] = {
        {.key = S("why"), .type = MST_ATTR_STRING, .v.s = S("step")},
        {.key = S("request.id"), .type = MST_ATTR_STRING, .v.s = S("req-1")},
        {.key = S("request.id"), .type = MST_ATTR_STRING, .v.s = S("req-2")}};
    memset(links, 0, sizeof links);
    for (int l = 0; l < 3; l++) {
        links[l].trace_id.bytes[0] = (uint8_t)(l + 1);
        links[l].span_id.bytes[0] = (uint8_t)(l + 1);
        links[l].attrs = &link_attrs[l];
        links[l].n_attrs = 1;
    }
    s.links = links;
    s.n_links = s.link_cap = 3;
    size_t len;
    char *pkt = encode(&s, NULL, &len);
    CHECK(strstr(pkt, "\"span_id\":\"0300000000000000\"}],\"request_links\":2}") != NULL);
    mst_arena arena;
    mst_pf_span d;
    if (decode(pkt, len, &arena, &d)) {
        CHECK_EQ_INT(d.n_links, 3);
        CHECK_EQ_INT(d.request_links, 2);
    } else {
        CHECK(!"decode");
    }
    mst_arena_release(&arena);
    free(pkt);
    /* The step link last: the request links are not at the end, none counted. */
    mst_link swapped[3] = {links[1], links[2], links[0]};
    s.links = swapped;
    pkt = encode(&s, NULL, &len);
    CHECK(strstr(pkt, "request_links") == NULL);
    free(pkt);
    /* No request.ids on the span: its request.id links are user links. */
    s.links = links;
    ids->key = S("other.ids");
    pkt = encode(&s, NULL, &len);
    CHECK(strstr(pkt, "request_links") == NULL);
    free(pkt);
    mst_arena_release(&s.arena);
}

static void test_empty_scope_name_is_tracing_and_nan_is_null(void) {
    mst_span s;
    span_init(&s, "x");
    mst_scope scope = {.name = S(""), .version = S("")};
    s.scope = &scope;
    add_attr(&s, "nan", MST_ATTR_DOUBLE)->v.d = NAN;
    add_attr(&s, "f", MST_ATTR_BOOL)->v.b = false;
    size_t len;
    char *pkt = encode(&s, NULL, &len);
    CHECK(strstr(pkt, "\"category\":\"Tracing\"") != NULL);
    CHECK(strstr(pkt, "\"attributes\":{\"nan\":null,\"f\":false}") != NULL);
    free(pkt);
    mst_arena_release(&s.arena);
}

static void test_appends_after_existing_bytes_and_reports_oom(void) {
    mst_span s;
    span_init(&s, "x");
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_buf_append(&b, "HDR", 3);
    mst_perfetto_packet_encode(&s, NULL, &b);
    CHECK(!b.failed);
    CHECK(b.len > 3 + MST_PERFETTO_MAGIC_LEN);
    CHECK(memcmp(b.data, "HDR" MST_PERFETTO_MAGIC, 3 + MST_PERFETTO_MAGIC_LEN) == 0);
    mst_buf_free(&b);
    mst_buf_init(&b, 64); /* too small for any packet */
    mst_perfetto_packet_encode(&s, NULL, &b);
    CHECK(b.failed);
    mst_buf_free(&b);
    mst_arena_release(&s.arena);
}

static const mst_test_case tests[] = {
    {"simple_span_exact_bytes", test_simple_span_exact_bytes},
    {"simple_span_decodes_back", test_simple_span_decodes_back},
    {"escaping", test_escaping},
    {"string_lists", test_string_lists},
    {"links_parent_category_resource", test_links_parent_category_resource},
    {"request_links_counted", test_request_links_counted},
    {"empty_scope_name_is_tracing_and_nan_is_null", test_empty_scope_name_is_tracing_and_nan_is_null},
    {"appends_after_existing_bytes_and_reports_oom", test_appends_after_existing_bytes_and_reports_oom},
};
MST_TEST_MAIN(tests)
