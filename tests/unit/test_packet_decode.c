/*
 * test_packet_decode.c — the strict Perfetto packet decoder
 * (src/wire/perfetto_packet_decode.c, docs/forwarder.md "Packets"): the upstream packet shape,
 * defaults, id normalisation, type errors naming the field, duplicate keys
 * (rejected), unknown keys (ignored), process.pid/thread.id extraction and
 * the size limits.
 */
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "wire/perfetto_packet.h"

#define T32 "11111111111111111111111111111111"
#define S16 "2222222222222222"

typedef struct decoded {
    mst_arena arena;
    mst_pf_span span;
    char err[256];
    mst_status st;
    uint8_t *copy;
} decoded;

/* Decodes magic + json from an exact-size heap copy (ASan bounds). */
/* Keys are length-carrying slices (not NUL-terminated; perfetto_packet.h). */
static bool key_eq(const mst_str *k, const char *want) {
    return k->ptr && k->len == strlen(want) && memcmp(k->ptr, want, k->len) == 0;
}

static void decode_json(decoded *d, const char *json) {
    size_t n = strlen(json);
    d->copy = malloc(MST_PERFETTO_MAGIC_LEN + n);
    memcpy(d->copy, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
    memcpy(d->copy + MST_PERFETTO_MAGIC_LEN, json, n);
    mst_arena_init(&d->arena);
    d->st = mst_perfetto_packet_decode(d->copy, MST_PERFETTO_MAGIC_LEN + n, &d->arena, &d->span,
                                       d->err, sizeof d->err);
}

static void done(decoded *d) {
    mst_arena_release(&d->arena);
    free(d->copy);
}

/* Expects a failure with `st` whose message contains `needle`. */
static void expect_error(const char *json, mst_status st, const char *needle) {
    decoded d;
    decode_json(&d, json);
    if (d.st != st || !strstr(d.err, needle))
        fprintf(stderr, "  input %s\n  got status %d err \"%s\" (want %d, \"%s\")\n", json, d.st,
                d.err, st, needle);
    CHECK_EQ_INT(d.st, st);
    CHECK(strstr(d.err, needle) != NULL);
    done(&d);
}

static const char *SEED_PACKET =
    "{\"name\": \"vllm.scheduler.schedule\", \"category\": \"ms_service_profiler.hook.Tracing\", "
    "\"trace_id\": \"" T32 "\", \"span_id\": \"" S16 "\", \"parent_span_id\": \"\", "
    "\"start_time_ns\": 2000000, \"end_time_ns\": 3000000, \"kind\": 1, \"status\": 1, "
    "\"attributes\": {\"process.pid\": 100, \"thread.id\": 200, \"request.id\": \"request-1\"}, "
    "\"resource_attributes\": {\"service.name\": \"vllm\"}, "
    "\"links\": [{\"trace_id\": \"33333333333333333333333333333333\", \"span_id\": \"4444444444444444\"}]}";

static void test_seed_packet(void) {
    decoded d;
    decode_json(&d, SEED_PACKET);
    CHECK_EQ_INT(d.st, MST_OK);
    mst_pf_span *s = &d.span;
    CHECK_EQ_STR(s->name.ptr, "vllm.scheduler.schedule");
    CHECK_EQ_STR(s->category.ptr, "ms_service_profiler.hook.Tracing");
    CHECK_EQ_STR(s->trace_id, T32);
    CHECK_EQ_STR(s->span_id, S16);
    CHECK_EQ_STR(s->parent_span_id, "");
    CHECK_EQ_INT(s->start_ns, 2000000);
    CHECK_EQ_INT(s->end_ns, 3000000);
    CHECK_EQ_INT(s->kind, 1);
    CHECK_EQ_INT(s->status, 1);
    CHECK(s->has_pid && s->pid == 100);
    CHECK(s->has_tid && s->tid == 200);
    CHECK_EQ_INT(s->n_attrs, 1);
    CHECK(key_eq(&s->attrs[0].key, "request.id"));
    CHECK(s->attrs[0].value.len == 11 && memcmp(s->attrs[0].value.ptr, "\"request-1\"", 11) == 0);
    CHECK_EQ_INT(s->n_resource, 1);
    CHECK(key_eq(&s->resource[0].key, "service.name"));
    CHECK_EQ_INT(s->n_links, 1);
    CHECK_EQ_STR(s->links[0].trace_id, "33333333333333333333333333333333");
    CHECK_EQ_STR(s->links[0].span_id, "4444444444444444");
    done(&d);
}

static void test_defaults_and_normalisation(void) {
    decoded d;
    decode_json(&d, "{\"trace_id\":\"ABCDEF0123456789ABCDEF0123456789\",\"span_id\":\"00000000000000Ff\","
                    "\"parent_span_id\":\"0000000000000000\",\"future_field\":{\"x\":[1,2]},"
                    "\"attributes\":null,\"links\":null,\"resource_attributes\":{}}");
    CHECK_EQ_INT(d.st, MST_OK);
    CHECK_EQ_STR(d.span.trace_id, "abcdef0123456789abcdef0123456789");
    CHECK_EQ_STR(d.span.span_id, "00000000000000ff");
    CHECK_EQ_STR(d.span.parent_span_id, "");
    CHECK_EQ_STR(d.span.name.ptr, "");
    CHECK_EQ_STR(d.span.category.ptr, "Tracing");
    CHECK(d.span.start_ns == 0 && d.span.end_ns == 0 && d.span.kind == 0 && d.span.status == 0);
    CHECK(!d.span.has_pid && !d.span.has_tid);
    CHECK(d.span.n_attrs == 0 && d.span.n_links == 0 && d.span.n_resource == 0);
    done(&d);

    decode_json(&d, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"parent_span_id\":null,"
                    "\"name\":\"caf\\u00e9 \\\"q\\\"\",\"attributes\":{\"process.pid\":\"100\","
                    "\"thread.id\":1.5,\"k\":[1,{\"a\":true}]}}");
    CHECK_EQ_INT(d.st, MST_OK);
    CHECK_EQ_STR(d.span.name.ptr, "caf\xc3\xa9 \"q\"");
    /* Non-integer pid/tid stay as ordinary attributes. */
    CHECK(!d.span.has_pid && !d.span.has_tid);
    CHECK_EQ_INT(d.span.n_attrs, 3);
    CHECK(key_eq(&d.span.attrs[0].key, "process.pid"));
    CHECK(key_eq(&d.span.attrs[1].key, "thread.id"));
    done(&d);

    decode_json(&d, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"parent_span_id\":\"ABCDEF0123456789\","
                    "\"start_time_ns\":5,\"end_time_ns\":9223372036854775807}");
    CHECK_EQ_INT(d.st, MST_OK);
    CHECK_EQ_STR(d.span.parent_span_id, "abcdef0123456789");
    CHECK_EQ_INT(d.span.start_ns, 5);
    CHECK(d.span.end_ns == INT64_MAX);
    done(&d);
}

/* Values that one of the two output encodings could not hold as they are
 * (a .pftrace timestamp is unsigned, a pid/tid an int32) are refused with
 * the value in the reason, by the fast path and the general decoder alike;
 * the edges of each range are accepted. */
static void test_value_ranges(void) {
    static const struct { const char *member, *err; } bad[] = {
        {"\"start_time_ns\":-9223372036854775808",
         "field 'start_time_ns' is negative (-9223372036854775808); times are ns since the Unix epoch"},
        {"\"end_time_ns\":-1", "field 'end_time_ns' is negative (-1); times are ns since the Unix epoch"},
        {"\"attributes\":{\"process.pid\":1099511627776}",
         "attribute 'process.pid' is out of range (1099511627776; allowed 0..2147483647)"},
        {"\"attributes\":{\"process.pid\":-1}", "attribute 'process.pid' is out of range (-1; allowed 0..2147483647)"},
        {"\"attributes\":{\"thread.id\":2147483648}",
         "attribute 'thread.id' is out of range (2147483648; allowed 0..2147483647)"},
        {"\"request_links\":1",
         "field 'request_links' is out of range (1; allowed 0..0, the number of links)"},
        {"\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\"}],\"request_links\":-1",
         "field 'request_links' is out of range (-1; allowed 0..1, the number of links)"},
    };
    char json[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(json, sizeof json, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",%s}", bad[i].member);
        decoded d;
        decode_json(&d, json);
        CHECK_EQ_INT(d.st, MST_ERR_PARSE);
        CHECK_EQ_STR(d.err, bad[i].err);
        done(&d);
    }
    decoded d;
    decode_json(&d, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"start_time_ns\":0,"
                    "\"end_time_ns\":9223372036854775807,\"attributes\":{\"process.pid\":2147483647,"
                    "\"thread.id\":0}}");
    CHECK_EQ_INT(d.st, MST_OK);
    CHECK(d.span.has_pid && d.span.pid == INT32_MAX && d.span.has_tid && d.span.tid == 0);
    done(&d);
    /* request_links before its links: checked once both are read. */
    decode_json(&d, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"request_links\":1,"
                    "\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\"}]}");
    CHECK_EQ_INT(d.st, MST_OK);
    CHECK_EQ_INT(d.span.request_links, 1);
    done(&d);
}

static void test_magic_required(void) {
    const char *bad[] = {"binary-otlp", "", "MSPF_PERFETTO_V1", "MSPF_PERFETTO_V3\n{}",
                         "mspf_perfetto_v1\n{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mst_arena a;
        mst_pf_span s;
        char err[128];
        mst_arena_init(&a);
        size_t n = strlen(bad[i]);
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, bad[i], n);
        CHECK_EQ_INT(mst_perfetto_packet_decode(copy, n, &a, &s, err, sizeof err), MST_ERR_PARSE);
        CHECK_EQ_STR(err, "missing MSPF_PERFETTO_V1 magic");
        free(copy);
        mst_arena_release(&a);
    }
}

static void test_type_errors_name_the_field(void) {
    const char *ids = "\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\"";
    char buf[512];
#define WITH(extra) (snprintf(buf, sizeof buf, "{%s,%s}", ids, extra), buf)
    expect_error(WITH("\"start_time_ns\":\"1\""), MST_ERR_PARSE, "start_time_ns");
    expect_error(WITH("\"end_time_ns\":1.5"), MST_ERR_PARSE, "end_time_ns");
    expect_error(WITH("\"end_time_ns\":1e3"), MST_ERR_PARSE, "end_time_ns");
    expect_error(WITH("\"start_time_ns\":99999999999999999999"), MST_ERR_PARSE, "start_time_ns");
    expect_error(WITH("\"kind\":null"), MST_ERR_PARSE, "kind");
    expect_error(WITH("\"status\":true"), MST_ERR_PARSE, "status");
    expect_error(WITH("\"name\":5"), MST_ERR_PARSE, "name");
    expect_error(WITH("\"category\":[]"), MST_ERR_PARSE, "category");
    expect_error(WITH("\"attributes\":[]"), MST_ERR_PARSE, "attributes");
    expect_error(WITH("\"attributes\":\"x\""), MST_ERR_PARSE, "attributes");
    expect_error(WITH("\"resource_attributes\":1"), MST_ERR_PARSE, "resource_attributes");
    expect_error(WITH("\"links\":{}"), MST_ERR_PARSE, "links");
    expect_error(WITH("\"links\":[1]"), MST_ERR_PARSE, "links");
    expect_error(WITH("\"links\":[{\"trace_id\":\"" T32 "\"}]"), MST_ERR_PARSE, "link");
    expect_error(WITH("\"links\":[{\"trace_id\":\"abc\",\"span_id\":\"" S16 "\"}]"), MST_ERR_PARSE,
                 "links[].trace_id");
    expect_error(WITH("\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"zz22222222222222\"}]"),
                 MST_ERR_PARSE, "links[].span_id");
    expect_error(WITH("\"parent_span_id\":\"123\""), MST_ERR_PARSE, "parent_span_id");
    expect_error(WITH("\"parent_span_id\":5"), MST_ERR_PARSE, "parent_span_id");
    expect_error("{\"span_id\":\"" S16 "\"}", MST_ERR_PARSE, "trace_id");
    expect_error("{\"trace_id\":\"" T32 "\"}", MST_ERR_PARSE, "span_id");
    expect_error("{\"trace_id\":\"" T32 "1\",\"span_id\":\"" S16 "\"}", MST_ERR_PARSE, "trace_id");
    expect_error("{\"trace_id\":\"00000000000000000000000000000000\",\"span_id\":\"" S16 "\"}",
                 MST_ERR_PARSE, "trace_id");
    expect_error("{\"trace_id\":\"" T32 "\",\"span_id\":\"g222222222222222\"}", MST_ERR_PARSE, "span_id");
    expect_error("[]", MST_ERR_PARSE, "object");
    expect_error(WITH("\"x\":1} "), MST_ERR_PARSE, "packet");
    expect_error(WITH("\"x\":1,}"), MST_ERR_PARSE, "packet");
    expect_error(WITH("\"name\":\"\xff\""), MST_ERR_PARSE, "name");
    expect_error(WITH("\"attributes\":{\"k\":\"\\ud800\"}"), MST_ERR_PARSE, "attributes");
#undef WITH
}

static void test_duplicate_keys_rejected(void) {
    const char *ids = "\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\"";
    char buf[512];
#define WITH(extra) (snprintf(buf, sizeof buf, "{%s,%s}", ids, extra), buf)
    expect_error(WITH("\"name\":\"a\",\"name\":\"b\""), MST_ERR_PARSE, "duplicate key 'name'");
    expect_error(WITH("\"trace_id\":\"" T32 "\""), MST_ERR_PARSE, "duplicate key 'trace_id'");
    expect_error(WITH("\"attributes\":{\"a\":1,\"b\":2,\"a\":3}"), MST_ERR_PARSE, "duplicate key 'a'");
    expect_error(WITH("\"attributes\":{\"process.pid\":1,\"process.pid\":2}"), MST_ERR_PARSE,
                 "duplicate key 'process.pid'");
    expect_error(WITH("\"attributes\":{\"a\\u0062\":1,\"ab\":2}"), MST_ERR_PARSE, "duplicate");
    expect_error(WITH("\"resource_attributes\":{\"s\":1,\"s\":1}"), MST_ERR_PARSE, "duplicate");
    expect_error(WITH("\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"span_id\":\"" S16 "\"}]"),
                 MST_ERR_PARSE, "duplicate");
#undef WITH
    /* Unknown keys may repeat: they are ignored. */
    decoded d;
    decode_json(&d, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"zz\":1,\"zz\":2}");
    CHECK_EQ_INT(d.st, MST_OK);
    done(&d);
}

static void test_limits(void) {
    size_t cap = 64 * (MST_PF_MAX_ATTRS + 2) + 256;
    char *buf = malloc(cap);
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = (size_t)snprintf(buf, cap, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"attributes\":{");
        /* process.pid/thread.id count against the limit like every key. */
        n += (size_t)snprintf(buf + n, cap - n, "\"process.pid\":1,\"thread.id\":2");
        for (int i = 0; i < MST_PF_MAX_ATTRS - 2 + extra; i++)
            n += (size_t)snprintf(buf + n, cap - n, ",\"k%d\":%d", i, i);
        snprintf(buf + n, cap - n, "}}");
        decoded d;
        decode_json(&d, buf);
        CHECK_EQ_INT(d.st, extra ? MST_ERR_TOO_LARGE : MST_OK);
        if (!extra) CHECK_EQ_INT(d.span.n_attrs, MST_PF_MAX_ATTRS - 2);
        if (extra) CHECK_EQ_STR(d.err, "more than 1024 entries in 'attributes'");
        done(&d);
    }
    free(buf);
    cap = 80 * (MST_PF_MAX_LINKS + 2) + 256;
    buf = malloc(cap);
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = (size_t)snprintf(buf, cap, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"links\":[");
        for (int i = 0; i < MST_PF_MAX_LINKS + extra; i++)
            n += (size_t)snprintf(buf + n, cap - n, "%s{\"trace_id\":\"" T32 "\",\"span_id\":\"%016x\"}",
                                  i ? "," : "", i + 1);
        snprintf(buf + n, cap - n, "]}");
        decoded d;
        decode_json(&d, buf);
        CHECK_EQ_INT(d.st, extra ? MST_ERR_TOO_LARGE : MST_OK);
        if (!extra) {
            CHECK_EQ_INT(d.span.n_links, MST_PF_MAX_LINKS);
            CHECK_EQ_STR(d.span.links[MST_PF_MAX_LINKS - 1].span_id, "0000000000000400");
        }
        done(&d);
    }
    free(buf);
    /* Nesting beyond MST_PF_MAX_DEPTH inside an attribute value. */
    char deep[256];
    size_t n = (size_t)snprintf(deep, sizeof deep, "{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"attributes\":{\"d\":");
    for (int i = 0; i < MST_PF_MAX_DEPTH; i++) deep[n++] = '[';
    for (int i = 0; i < MST_PF_MAX_DEPTH; i++) deep[n++] = ']';
    snprintf(deep + n, sizeof deep - n, "}}");
    expect_error(deep, MST_ERR_PARSE, "nesting too deep");
}

static void test_truncated_packets_fail_cleanly(void) {
    size_t n = strlen(SEED_PACKET);
    for (size_t i = 0; i < n; i++) {
        char *part = malloc(i + 1);
        memcpy(part, SEED_PACKET, i);
        part[i] = '\0';
        decoded d;
        decode_json(&d, part);
        CHECK(d.st == MST_ERR_PARSE);
        done(&d);
        free(part);
    }
}

static const mst_test_case TESTS[] = {
    {"seed_packet", test_seed_packet},
    {"defaults_and_normalisation", test_defaults_and_normalisation},
    {"magic_required", test_magic_required},
    {"type_errors_name_the_field", test_type_errors_name_the_field},
    {"duplicate_keys_rejected", test_duplicate_keys_rejected},
    {"limits", test_limits},
    {"value_ranges", test_value_ranges},
    {"truncated_packets_fail_cleanly", test_truncated_packets_fail_cleanly},
};

MST_TEST_MAIN(TESTS)
