/*
 * test_packet_fast.c — the packet decoder's fast path
 * (src/wire/perfetto_packet_fast.c) against its general decoder
 * (mst_perfetto_packet_decode_general): every input is decoded three ways
 * (fast path alone, general decoder alone, the public decoder that tries
 * the fast path first) and must agree: when the fast path accepts, the
 * general decoder accepts and yields the same span; the public decoder's
 * status and error message are the general decoder's. Each test also says
 * whether the fast path must accept (the common shape: so a fast path that
 * declines everything fails here) or must decline (errors, top-level keys
 * with escapes, duplicates).
 *
 * Boundaries covered: escapes in keys and values, unusual key order and
 * whitespace, duplicate keys (plain, escaped, fingerprint collisions), ids
 * in upper case / wrong length / escaped / all-zero, numbers with signs,
 * fractions, exponents and overflow, multibyte and invalid UTF-8 at every
 * offset around the 16-byte blocks, NUL bytes, nesting and size limits,
 * truncation at every offset and single-byte mutations of a valid packet.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../bench/bench_packet.h"
#include "pf_span_compare.h"
#include "testlib.h"
#include "wire/perfetto_packet.h"
#include "wire/perfetto_packet_fast.h"

#define T32 "11111111111111111111111111111111"
#define S16 "2222222222222222"
#define IDS "\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\""

/* One input decoded the three ways. */
typedef struct tri {
    uint8_t *buf;
    size_t len;
    bool fast;
    mst_arena a_fast, a_general, a_public;
    mst_pf_span fast_span, general_span, public_span;
    mst_status st_general, st_public;
    char err_general[256], err_public[256];
} tri;

static unsigned g_fast_accepted, g_inputs;

/* Decodes magic + json[0..n) (an exact-size heap copy: ASan catches any
 * overread) the three ways and checks they agree. */
static void tri_run(tri *t, const char *json, size_t n) {
    t->len = MST_PERFETTO_MAGIC_LEN + n;
    t->buf = malloc(t->len);
    memcpy(t->buf, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
    memcpy(t->buf + MST_PERFETTO_MAGIC_LEN, json, n);
    mst_arena_init(&t->a_fast);
    mst_arena_init(&t->a_general);
    mst_arena_init(&t->a_public);
    mst_pf_span_defaults(&t->fast_span);
    t->fast = mst_pf_decode_fast(t->buf + MST_PERFETTO_MAGIC_LEN, n, &t->a_fast, &t->fast_span);
    t->st_general = mst_perfetto_packet_decode_general(t->buf, t->len, &t->a_general,
                                                       &t->general_span, t->err_general,
                                                       sizeof t->err_general);
    t->st_public = mst_perfetto_packet_decode(t->buf, t->len, &t->a_public, &t->public_span,
                                              t->err_public, sizeof t->err_public);
    g_inputs++;
    g_fast_accepted += t->fast;
    bool ok = true;
    const char *diff = NULL;
    if (t->fast && t->st_general != MST_OK) ok = false;
    if (t->fast && t->st_general == MST_OK &&
        (diff = pf_spans_differ(&t->fast_span, &t->general_span, t->buf, t->len)))
        ok = false;
    if (t->st_public != t->st_general || strcmp(t->err_public, t->err_general) != 0) ok = false;
    if (t->st_public == MST_OK && t->st_general == MST_OK &&
        (diff = pf_spans_differ(&t->public_span, &t->general_span, t->buf, t->len)))
        ok = false;
    if (!ok)
        fprintf(stderr, "  disagreement on %.*s\n  fast %d, general %d \"%s\", public %d \"%s\"%s%s\n",
                n > 400 ? 400 : (int)n, json, t->fast, t->st_general, t->err_general, t->st_public, t->err_public,
                diff ? ", differs in " : "", diff ? diff : "");
    CHECK(ok);
}

static void tri_done(tri *t) {
    mst_arena_release(&t->a_fast);
    mst_arena_release(&t->a_general);
    mst_arena_release(&t->a_public);
    free(t->buf);
}

/* The fast path must accept json, agreeing with the general decoder. */
static void expect_fast(const char *json) {
    tri t;
    tri_run(&t, json, strlen(json));
    if (!t.fast) fprintf(stderr, "  fast path declined: %.400s\n", json);
    CHECK(t.fast);
    CHECK_EQ_INT(t.st_public, MST_OK);
    tri_done(&t);
}

/* The fast path must decline a valid json the general decoder accepts. */
static void expect_declined_ok(const char *json) {
    tri t;
    tri_run(&t, json, strlen(json));
    CHECK(!t.fast);
    CHECK_EQ_INT(t.st_public, MST_OK);
    tri_done(&t);
}

/* An invalid packet: the fast path declines and the public decoder reports
 * `st` with a message containing `needle`. */
static void expect_error_n(const char *json, size_t n, mst_status st, const char *needle) {
    tri t;
    tri_run(&t, json, n);
    CHECK(!t.fast);
    if (t.st_public != st || !strstr(t.err_public, needle))
        fprintf(stderr, "  input %.*s\n  got %d \"%s\" (want %d, \"%s\")\n", n > 400 ? 400 : (int)n, json,
                t.st_public, t.err_public, st, needle);
    CHECK_EQ_INT(t.st_public, st);
    CHECK(strstr(t.err_public, needle) != NULL);
    tri_done(&t);
}

static void expect_error(const char *json, mst_status st, const char *needle) {
    expect_error_n(json, strlen(json), st, needle);
}

/* Only agreement (either outcome). */
static void expect_agree_n(const char *json, size_t n) {
    tri t;
    tri_run(&t, json, n);
    tri_done(&t);
}

/* The benchmark's packet (bench/bench_packet.h) with real hex ids. */
static size_t bench_json(char *out, size_t cap, int thread, int slot) {
    char pkt[2048];
    int n = bench_packet_format(pkt, sizeof pkt, thread, slot);
    size_t s, l1, l2;
    bench_packet_placeholders(pkt, pkt, &s, &l1, &l2);
    memcpy(pkt + s, "00000a0000000b0c", 16);
    memcpy(pkt + l1, "00000A0000000B0D", 16);
    if (l2) memcpy(pkt + l2, "00000a0000000b0e", 16);
    size_t len = (size_t)n - MST_PERFETTO_MAGIC_LEN;
    if (len >= cap) len = cap - 1;
    memcpy(out, pkt + MST_PERFETTO_MAGIC_LEN, len);
    out[len] = '\0';
    return len;
}

static void test_bench_packet_takes_fast_path(void) {
    char json[2048];
    for (int slot = 0; slot < 2; slot++) {
        size_t n = bench_json(json, sizeof json, 3, slot);
        tri t;
        tri_run(&t, json, n);
        CHECK(t.fast);
        const mst_pf_span *s = &t.fast_span;
        CHECK(s->name.len == 23 && strcmp(s->name.ptr, "vllm.scheduler.schedule") == 0);
        CHECK_EQ_STR(s->category.ptr, "ms_service_profiler.hook.Schedule");
        CHECK_EQ_STR(s->trace_id, "00000000000000000000000000000004");
        CHECK_EQ_STR(s->span_id, "00000a0000000b0c");
        CHECK_EQ_STR(s->parent_span_id, "");
        CHECK(s->start_ns == (int64_t)(1700000000000000000ull + (unsigned)slot * 1000));
        CHECK(s->end_ns == (int64_t)(1700000000000500000ull + (unsigned)slot * 1000));
        CHECK(s->kind == 1 && s->status == 1);
        CHECK(s->has_pid && s->pid == 4003 && s->has_tid && s->tid == 4103);
        CHECK_EQ_INT(s->n_attrs, 10);
        CHECK(s->attrs[0].key.len == 10 && memcmp(s->attrs[0].key.ptr, "request.id", 10) == 0);
        CHECK(s->attrs[9].key.len == 14 && memcmp(s->attrs[9].key.ptr, "kv_cache.usage", 14) == 0);
        CHECK(s->attrs[9].value.len == 6 && memcmp(s->attrs[9].value.ptr, "0.4375", 6) == 0);
        CHECK(s->attrs[8].value.len == 4 && memcmp(s->attrs[8].value.ptr, "true", 4) == 0);
        CHECK_EQ_INT(s->n_resource, 2);
        CHECK_EQ_INT(s->n_links, (size_t)(slot + 1));
        CHECK_EQ_STR(s->links[0].span_id, "00000a0000000b0d"); /* upper case lowered */
        if (slot) CHECK_EQ_STR(s->links[1].trace_id, "00000000000000000000000000000001");
        tri_done(&t);
    }
}

/* The step packets' small writers write what sprintf wrote: a few
 * thousand steps at 1, 8, 16 (the smallest list that goes as changes) and
 * 256 ids, changes, keyframes and whole lists, two clients. */
static void test_bench_step_format_is_sprintf(void) {
    static const int ids[] = {1, 8, 16, 256};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        for (int client = 0; client < 2; client++) {
            long bad = bench_step_format_check(client * 3, ids[i], ids[i] == 256 ? 1500 : 3000);
            if (bad >= 0) fprintf(stderr, "  %d ids, client %d: step %ld differs\n", ids[i], client, bad);
            CHECK_EQ_INT(bad, -1);
        }
}

static void test_key_order_whitespace_unknown_keys(void) {
    expect_fast("{\"links\":[{\"span_id\":\"" S16 "\",\"x\":[1,{\"y\":null}],\"trace_id\":\"" T32
                "\"}],\"attributes\":{},\"span_id\":\"" S16 "\",\"future\":{\"a\":[true,false]},"
                "\"trace_id\":\"" T32 "\",\"resource_attributes\":null,\"kind\":-3}");
    expect_fast(" \n{ \"trace_id\" : \"" T32 "\" ,\t\"span_id\":\r\"" S16 "\" , \"attributes\" : "
                "{ \"a\" : 1 , \"b\" : [ 1 , 2 ] } , \"links\" : [ { \"trace_id\" : \"" T32
                "\" , \"span_id\" : \"" S16 "\" } , {\"span_id\":\"" S16 "\",\"trace_id\":\"" T32
                "\"} ] , \"name\" : \"n\" } \n");
    expect_fast("{" IDS ",\"links\":[],\"attributes\":null,\"parent_span_id\":null}");
    expect_fast("{ " IDS " , \"links\" : [ ] , \"attributes\" : { } , \"resource_attributes\" :\t{\n}"
                " , \"parent_span_id\" : null , \"name\" : \"x\" , \"kind\" : 7 }");
    expect_fast("{" IDS ",\"links\":[ {\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\"} ]}");
    expect_fast("{" IDS ",\"name\":\"\",\"category\":\"\",\"\":1,\"unknown\":\"x\"}");
    expect_fast("{" IDS ",\"attributes\":{\"\":1,\"a\":\"\"}}");
    /* Duplicate unknown top-level keys are ignored, as documented. */
    expect_fast("{" IDS ",\"x\":1,\"x\":2}");
    expect_error("{" IDS ",}", MST_ERR_PARSE, "expected an object key");
    expect_error("{" IDS ",\"attributes\":{\"a\":1,}}", MST_ERR_PARSE, "expected an object key");
    expect_error("{" IDS ",\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\"},]}",
                 MST_ERR_PARSE, "trailing comma");
    expect_error("{" IDS "} x", MST_ERR_PARSE, "trailing data");
    expect_error("{" IDS "", MST_ERR_PARSE, "unexpected end");
    expect_error("{" IDS ",\"links\":[{}]}", MST_ERR_PARSE, "needs both");
    expect_error("{" IDS ",\"links\":[{\"trace_id\":\"" T32 "\"}]}", MST_ERR_PARSE, "needs both");
    expect_error("{" IDS ",\"links\":[1]}", MST_ERR_PARSE, "array of objects");
    expect_error("{" IDS ",\"links\":{}}", MST_ERR_PARSE, "array of objects");
    expect_error("{" IDS ",\"attributes\":[]}", MST_ERR_PARSE, "must be an object");
    expect_error("{" IDS ",\"attributes\":true}", MST_ERR_PARSE, "must be an object");
    expect_error("{" IDS ",\"name\":1}", MST_ERR_PARSE, "must be a string");
    expect_error("{" IDS ",\"x\":nul}", MST_ERR_PARSE, "invalid literal");
    expect_error("{" IDS ",\"attributes\":{\"a\":tru}}", MST_ERR_PARSE, "invalid literal");
    expect_error("{" IDS ",\"attributes\":nulL}", MST_ERR_PARSE, "");
    expect_error("{\"span_id\":\"" S16 "\"}", MST_ERR_PARSE, "missing field 'trace_id'");
    expect_error("[]", MST_ERR_PARSE, "must be an object");
    expect_error("", MST_ERR_PARSE, "unexpected end");
}

static void test_escapes(void) {
    /* Values: kept raw, validated; name/category unescaped. */
    expect_fast("{" IDS ",\"name\":\"a\\\"b\\\\c\\u00e9\\ud83d\\ude00\",\"category\":\"\\n\","
                "\"attributes\":{\"k\":\"x\\ny\\u0000z\",\"l\":[\"\\t\"]}}");
    /* Attribute keys with escapes: unescaped into the arena. */
    expect_fast("{" IDS ",\"attributes\":{\"a\\u0062c\":1,\"ab\\\"\":2,\"process.\\u0070id\":7}}");
    {
        tri t;
        const char *j = "{" IDS ",\"attributes\":{\"thread.\\u0069d\":9,\"caf\\u00e9\":1}}";
        tri_run(&t, j, strlen(j));
        CHECK(t.fast && t.fast_span.has_tid && t.fast_span.tid == 9);
        CHECK(t.fast_span.n_attrs == 1 && t.fast_span.attrs[0].key.len == 5 &&
              memcmp(t.fast_span.attrs[0].key.ptr, "caf\xc3\xa9", 5) == 0);
        tri_done(&t);
    }
    /* Top-level and link keys with escapes, and escaped ids: the general
     * decoder (which unescapes them to the known names). */
    expect_declined_ok("{\"trace_\\u0069d\":\"" T32 "\",\"span_id\":\"" S16 "\"}");
    expect_declined_ok("{\"trace_id\":\"\\u0031" "1111111111111111111111111111111\",\"span_id\":\"" S16 "\"}");
    expect_declined_ok("{" IDS ",\"links\":[{\"trace\\u005fid\":\"" T32 "\",\"span_id\":\"" S16 "\"}]}");
    expect_declined_ok("{" IDS ",\"\\u00e9\":1}");
    expect_error("{\"trace_\\u0069d\":\"" T32 "\",\"span_id\":\"" S16 "\",\"trace_id\":\"" T32 "\"}",
                 MST_ERR_PARSE, "duplicate key 'trace_id'");
    /* Bad escapes anywhere are errors. */
    expect_error("{" IDS ",\"attributes\":{\"k\":\"\\x\"}}", MST_ERR_PARSE, "invalid escape");
    expect_error("{" IDS ",\"attributes\":{\"\\x\":1}}", MST_ERR_PARSE, "invalid escape");
    expect_error("{" IDS ",\"name\":\"\\ud83d\"}", MST_ERR_PARSE, "surrogate");
    expect_error("{" IDS ",\"attributes\":{\"k\":\"\\ude00\"}}", MST_ERR_PARSE, "surrogate");
    expect_error("{" IDS ",\"attributes\":{\"k\":\"\\u12\"}}", MST_ERR_PARSE, "\\u escape");
}

static void test_duplicates(void) {
    expect_error("{" IDS ",\"name\":\"a\",\"name\":\"b\"}", MST_ERR_PARSE, "duplicate key 'name'");
    expect_error("{" IDS ",\"span_id\":\"" S16 "\"}", MST_ERR_PARSE, "duplicate key 'span_id'");
    expect_error("{" IDS ",\"attributes\":{},\"attributes\":{}}", MST_ERR_PARSE, "duplicate key");
    expect_error("{" IDS ",\"attributes\":{\"a\":1,\"b\":2,\"a\":3}}", MST_ERR_PARSE,
                 "duplicate key 'a' in 'attributes'");
    expect_error("{" IDS ",\"attributes\":{\"ab\":1,\"a\\u0062\":2}}", MST_ERR_PARSE,
                 "duplicate key 'ab'");
    expect_error("{" IDS ",\"attributes\":{\"a\\u0062\":1,\"ab\":2}}", MST_ERR_PARSE,
                 "duplicate key 'ab'");
    expect_error("{" IDS ",\"resource_attributes\":{\"service.name\":1,\"service.name\":2}}",
                 MST_ERR_PARSE, "in 'resource_attributes'");
    expect_error("{" IDS ",\"attributes\":{\"process.pid\":1,\"process.pid\":2}}", MST_ERR_PARSE,
                 "duplicate key 'process.pid'");
    expect_error("{" IDS ",\"attributes\":{\"thread.id\":\"x\",\"thread.id\":2}}", MST_ERR_PARSE,
                 "duplicate key 'thread.id'");
    expect_error("{" IDS ",\"attributes\":{\"thread.id\":2,\"thread.id\":\"x\"}}", MST_ERR_PARSE,
                 "duplicate key 'thread.id'");
    expect_error("{" IDS ",\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16
                 "\",\"span_id\":\"" S16 "\"}]}", MST_ERR_PARSE, "duplicate key 'span_id' in a link");
    /* Keys of every length 0..40 that share their first and last 8 bytes
     * (equal fingerprints) but differ in the middle or in length are all
     * kept; the same key twice is a duplicate at every length. */
    char json[8192], key[64];
    for (size_t len = 0; len <= 40; len++) {
        int n = snprintf(json, sizeof json, "{" IDS ",\"attributes\":{");
        for (int v = 0; v < 3; v++) {
            memset(key, 'k', len);
            if (len > 16) key[len / 2] = (char)('a' + v); /* differ in the middle only */
            else if (v) continue;
            key[len] = '\0';
            n += snprintf(json + n, sizeof json - (size_t)n, "%s\"%s\":%d", v ? "," : "", key, v);
        }
        snprintf(json + n, sizeof json - (size_t)n, ",\"k%s\":1}}", key);
        expect_fast(json);
        memset(key, 'k', len);
        key[len] = '\0';
        snprintf(json, sizeof json, "{" IDS ",\"attributes\":{\"%s\":1,\"x\":2,\"%s\":3}}", key, key);
        expect_error(json, MST_ERR_PARSE, "duplicate key");
    }
}

static void test_ids(void) {
    expect_fast("{\"trace_id\":\"ABCDEF0123456789abcdefABCDEF0000\",\"span_id\":\"FFFFFFFFFFFFFFFF\","
                "\"parent_span_id\":\"0000000000000000\"}");
    expect_fast("{\"trace_id\":\"00000000000000000000000000000001\",\"span_id\":\"1000000000000000\","
                "\"parent_span_id\":\"00000000000000aB\"}");
    expect_fast("{" IDS ",\"parent_span_id\":\"\"}");
    const char *bad[] = {
        "{\"trace_id\":\"111111111111111111111111111111111\",\"span_id\":\"" S16 "\"}",
        "{\"trace_id\":\"1111111111111111111111111111111\",\"span_id\":\"" S16 "\"}",
        "{\"trace_id\":\"1111111111111111111111111111111g\",\"span_id\":\"" S16 "\"}",
        "{\"trace_id\":\"111111111111111 1111111111111111\",\"span_id\":\"" S16 "\"}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":\"222222222222222\"}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":\"22222222222222222\"}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":\"2222222:22222222\"}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":\"22222222\\\"2222222\"}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":\"\"}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":null}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":1}",
        "{\"trace_id\":\"00000000000000000000000000000000\",\"span_id\":\"" S16 "\"}",
        "{\"trace_id\":\"" T32 "\",\"span_id\":\"0000000000000000\"}",
        "{" IDS ",\"parent_span_id\":\"000000000000000\"}",
        "{" IDS ",\"parent_span_id\":\"00000000000000000\"}",
        "{" IDS ",\"parent_span_id\":0}",
        "{" IDS ",\"links\":[{\"trace_id\":\"00000000000000000000000000000000\",\"span_id\":\"" S16 "\"}]}",
        "{" IDS ",\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"" T32 "\"}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_error(bad[i], MST_ERR_PARSE, "");
    /* An id cut at the end of the input, at every length. */
    char json[256];
    snprintf(json, sizeof json, "{\"span_id\":\"" S16 "\",\"trace_id\":\"" T32 "\"}");
    size_t at = strlen("{\"span_id\":\"" S16 "\",\"trace_id\":");
    for (size_t cut = 0; cut <= 34; cut++) expect_agree_n(json, at + cut);
}

static void test_numbers(void) {
    expect_fast("{" IDS ",\"start_time_ns\":0,\"end_time_ns\":9223372036854775807,"
                "\"kind\":-9223372036854775808,\"status\":-0}");
    expect_error("{" IDS ",\"start_time_ns\":-9223372036854775808,\"end_time_ns\":9223372036854775807}",
                 MST_ERR_PARSE, "field 'start_time_ns' is negative (-9223372036854775808)");
    expect_fast("{" IDS ",\"start_time_ns\":12345678,\"end_time_ns\":123456789,\"kind\":1234567890123456}");
    expect_fast("{" IDS ",\"attributes\":{\"a\":-1.5e+10,\"b\":0.0,\"c\":1E-2,\"d\":-0,"
                "\"e\":123456789012345678901234567890,\"f\":0e0}}");
    /* pid/tid: taken only when an int64 integer. */
    expect_fast("{" IDS ",\"attributes\":{\"process.pid\":7,\"thread.id\":0}}");
    expect_error("{" IDS ",\"attributes\":{\"process.pid\":-7,\"thread.id\":0}}", MST_ERR_PARSE,
                 "attribute 'process.pid' is out of range (-7; allowed 0..2147483647)");
    {
        tri t;
        const char *j = "{" IDS ",\"attributes\":{\"process.pid\":9223372036854775808,"
                        "\"thread.id\":1e3,\"x\":1}}";
        tri_run(&t, j, strlen(j));
        CHECK(t.fast && !t.fast_span.has_pid && !t.fast_span.has_tid);
        CHECK_EQ_INT(t.fast_span.n_attrs, 3);
        tri_done(&t);
        j = "{" IDS ",\"resource_attributes\":{\"process.pid\":5}}";
        tri_run(&t, j, strlen(j));
        CHECK(t.fast && !t.fast_span.has_pid && t.fast_span.n_resource == 1);
        tri_done(&t);
    }
    const char *bad_ints[] = {"9223372036854775808", "-9223372036854775809",
                              "99999999999999999999", "1.0", "1e3", "1E3", "01", "-01",
                              "+1", "-", "\"1\"", "1x", "--1", ".5", "0x10", "1.", "true"};
    char json[512];
    for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints[0]; i++) {
        snprintf(json, sizeof json, "{" IDS ",\"start_time_ns\":%s}", bad_ints[i]);
        expect_error(json, MST_ERR_PARSE, "");
        snprintf(json, sizeof json, "{" IDS ",\"kind\":%s,\"status\":1}", bad_ints[i]);
        expect_error(json, MST_ERR_PARSE, "");
    }
    const char *bad_nums[] = {"01", "-", "1.", "1.e5", "1e", "1e+", ".5", "+1", "-a", "1.5.5"};
    for (size_t i = 0; i < sizeof bad_nums / sizeof bad_nums[0]; i++) {
        snprintf(json, sizeof json, "{" IDS ",\"attributes\":{\"a\":%s}}", bad_nums[i]);
        expect_error(json, MST_ERR_PARSE, "");
    }
    /* Every integer length (each of the one-load, three-load and general
     * parsers) followed by more fields, signed and not, against strtoll. */
    for (int digits = 1; digits <= 22; digits++) {
        for (int neg = 0; neg <= 1; neg++) {
            char num[40];
            int m = 0;
            if (neg) num[m++] = '-';
            for (int d = 0; d < digits; d++) num[m++] = (char)('1' + (d * 7 + digits) % 9);
            num[m] = '\0';
            if (digits == 19) memcpy(num + neg, "9223372036854775807", 19); /* the limit */
            errno = 0;
            long long want = strtoll(num, NULL, 10);
            bool fits = errno == 0;
            /* kind/status: any int64; times and the pid: in their ranges
             * (mst_pf_span_check_ranges), else refused by both paths. */
            bool in_range = fits && want >= 0 && want <= INT32_MAX;
            snprintf(json, sizeof json, "{\"kind\":%s,\"status\":%s," IDS
                     ",\"attributes\":{\"y\":%s,\"x\":\"%s\"}}", num, num, num, num);
            tri t;
            tri_run(&t, json, strlen(json));
            CHECK(t.fast == fits);
            CHECK_EQ_INT(t.st_public, fits ? MST_OK : MST_ERR_PARSE);
            if (fits) CHECK(t.fast_span.kind == want && t.fast_span.status == want);
            tri_done(&t);
            snprintf(json, sizeof json, "{\"start_time_ns\":%s,\"end_time_ns\":%s," IDS
                     ",\"attributes\":{\"process.pid\":%s,\"x\":\"%s\"}}", num, num, num, num);
            tri_run(&t, json, strlen(json));
            CHECK(t.fast == in_range);
            CHECK_EQ_INT(t.st_public, in_range ? MST_OK : MST_ERR_PARSE);
            if (in_range) {
                CHECK(t.fast_span.start_ns == want && t.fast_span.end_ns == want);
                CHECK(t.fast_span.has_pid && t.fast_span.pid == want);
            }
            tri_done(&t);
        }
    }
    /* Every integer length at the end of the input, cut and whole. */
    for (int digits = 1; digits <= 21; digits++) {
        int n = snprintf(json, sizeof json, "{" IDS ",\"kind\":");
        for (int d = 0; d < digits; d++) json[n++] = (char)('1' + d % 9);
        memcpy(json + n, "}", 2);
        tri t;
        tri_run(&t, json, strlen(json));
        /* 19 digits "123456789123..." still fit int64; 20 do not. */
        CHECK(t.fast == (digits <= 19));
        CHECK_EQ_INT(t.st_public, digits <= 19 ? MST_OK : MST_ERR_PARSE);
        tri_done(&t);
        expect_agree_n(json, (size_t)n);
    }
}

/* A multibyte or invalid sequence at every offset 0..40 of a string, as an
 * attribute value, a name, an attribute key and an unknown top-level key:
 * crosses each 16-byte block edge of the scanners. */
static void test_utf8_at_block_edges(void) {
    static const char *const valid[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                        "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf", "\xee\x80\x80"};
    static const char *const invalid[] = {"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80",
                                          "\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\xe2\x82",
                                          "\x80", "\xbf", "\xf8\x88\x80\x80\x80", "\xff", "\xc3",
                                          "\x01", "\x1f", "\x7f\xc3"};
    static const char *const shapes[] = {
        "{" IDS ",\"attributes\":{\"k\":\"%s\"}}",
        "{" IDS ",\"name\":\"%s\"}",
        "{" IDS ",\"attributes\":{\"%s\":1}}",
        "{" IDS ",\"x%s\":1}",
        "{\"category\":\"%s\"," IDS "}",
    };
    char text[128], json[512];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t off = 0; off <= 40; off++) {
            for (size_t v = 0; v < sizeof valid / sizeof valid[0]; v++) {
                memset(text, 'a', off);
                snprintf(text + off, sizeof text - off, "%s%s", valid[v], "tail");
                snprintf(json, sizeof json, shapes[s], text);
                tri t;
                tri_run(&t, json, strlen(json));
                CHECK_EQ_INT(t.st_public, MST_OK);
                CHECK(t.fast == (s != 3)); /* a non-ASCII top-level key declines */
                tri_done(&t);
            }
            for (size_t v = 0; v < sizeof invalid / sizeof invalid[0]; v++) {
                memset(text, 'a', off);
                snprintf(text + off, sizeof text - off, "%s%s", invalid[v], "tail");
                snprintf(json, sizeof json, shapes[s], text);
                expect_error(json, MST_ERR_PARSE, v >= 12 && v <= 13 ? "control character"
                                                   : "invalid UTF-8");
            }
        }
    }
    /* NUL bytes: in a string (a control character) and between tokens. */
    char nul[128];
    int n = snprintf(nul, sizeof nul, "{" IDS ",\"attributes\":{\"k\":\"ab");
    nul[n++] = '\0';
    n += snprintf(nul + n, sizeof nul - (size_t)n, "\"}}");
    expect_error_n(nul, (size_t)n, MST_ERR_PARSE, "control character");
    n = snprintf(nul, sizeof nul, "{" IDS ",");
    nul[n++] = '\0';
    n += snprintf(nul + n, sizeof nul - (size_t)n, "\"kind\":1}");
    expect_error_n(nul, (size_t)n, MST_ERR_PARSE, "");
    n = snprintf(nul, sizeof nul, "{" IDS "}");
    nul[n++] = '\0';
    expect_error_n(nul, (size_t)n, MST_ERR_PARSE, "trailing data");
}

static void test_nesting_and_limits(void) {
    /* Value depth: the packet object is level 1, attributes 2, a link 3. */
    static const struct { const char *pre, *post; int free_levels; } where[] = {
        {"{" IDS ",\"x\":", "}", 31},
        {"{" IDS ",\"attributes\":{\"x\":", "}}", 30},
        {"{" IDS ",\"links\":[{\"trace_id\":\"" T32 "\",\"span_id\":\"" S16 "\",\"x\":", "}]}", 29},
    };
    char json[1024];
    for (size_t w = 0; w < 3; w++) {
        for (int levels = where[w].free_levels; levels <= where[w].free_levels + 1; levels++) {
            /* {"k":[{"k":[ ... 1 ... ]}]} with `levels` containers */
            int n = snprintf(json, sizeof json, "%s", where[w].pre);
            for (int i = 0; i < levels; i++)
                n += snprintf(json + n, sizeof json - (size_t)n, "%s", i % 2 ? "[" : "{\"k\":");
            n += snprintf(json + n, sizeof json - (size_t)n, "1");
            for (int i = levels - 1; i >= 0; i--) json[n++] = i % 2 ? ']' : '}';
            snprintf(json + n, sizeof json - (size_t)n, "%s", where[w].post);
            if (levels == where[w].free_levels) expect_fast(json);
            else expect_error(json, MST_ERR_PARSE, "nesting too deep");
        }
    }
    /* MST_PF_MAX_ATTRS entries pass, one more is TOO_LARGE (process.pid
     * counts like any key); likewise links. */
    size_t cap = 256 * 1024;
    char *big = malloc(cap);
    for (int extra = 0; extra <= 1; extra++) {
        int n = snprintf(big, cap, "{" IDS ",\"attributes\":{");
        for (int i = 0; i < MST_PF_MAX_ATTRS - 1 + extra; i++)
            n += snprintf(big + n, cap - (size_t)n, "%s\"k%d\":%d", i ? "," : "", i, i);
        snprintf(big + n, cap - (size_t)n, ",\"process.pid\":1}}");
        if (!extra) expect_fast(big);
        else expect_error(big, MST_ERR_TOO_LARGE, "more than 1024 entries in 'attributes'");
        n = snprintf(big, cap, "{" IDS ",\"links\":[");
        for (int i = 0; i < MST_PF_MAX_LINKS + extra; i++)
            n += snprintf(big + n, cap - (size_t)n, "%s{\"trace_id\":\"" T32 "\",\"span_id\":\"%016x\"}",
                          i ? "," : "", i + 1);
        snprintf(big + n, cap - (size_t)n, "]}");
        if (!extra) expect_fast(big);
        else expect_error(big, MST_ERR_TOO_LARGE, "more than 1024 links");
    }
    free(big);
}

/* The bench packet cut at every offset (each cut fails, fast declines) and
 * with every byte replaced by bytes that matter to a JSON scanner, removed
 * or doubled: the three decoders must agree on every variant. */
static void test_truncations_and_mutations(void) {
    char json[2048], mut[2048];
    static const uint8_t bytes[] = {'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\n', 0x00,
                                    0x1f, 0x7f, 0x80, 0xc3, 0xe2, 0xff, 'A', 'f', 'g', '0',
                                    '9', '-', '+', '.', 'e', 'n', 't', 'u'};
    for (int slot = 0; slot < 2; slot++) {
        size_t n = bench_json(json, sizeof json, 1, slot);
        for (size_t cut = 0; cut < n; cut++) {
            tri t;
            tri_run(&t, json, cut);
            CHECK(!t.fast && t.st_public == MST_ERR_PARSE);
            tri_done(&t);
        }
        for (size_t i = 0; i < n; i++) {
            for (size_t b = 0; b < sizeof bytes; b++) {
                memcpy(mut, json, n);
                mut[i] = (char)bytes[b];
                expect_agree_n(mut, n);
            }
            memcpy(mut, json, i); /* byte i removed */
            memcpy(mut + i, json + i + 1, n - i - 1);
            expect_agree_n(mut, n - 1);
            memcpy(mut, json, i + 1); /* byte i doubled */
            memcpy(mut + i + 1, json + i, n - i);
            expect_agree_n(mut, n + 1);
        }
    }
    /* The fast path took a fair share of all inputs: it is not dead code. */
    fprintf(stderr, "  fast path accepted %u of %u inputs so far\n", g_fast_accepted, g_inputs);
    CHECK(g_fast_accepted > g_inputs / 10);
}

/* mst_pf_span.plain_text: true exactly when the name, the category and
 * every kept key are plain JSON text; both decoders say the same (tri_run
 * compares it), whichever of them the packet takes. */
static void expect_plain(const char *json, bool want) {
    tri t;
    tri_run(&t, json, strlen(json));
    CHECK_EQ_INT(t.st_public, MST_OK);
    if (t.public_span.plain_text != want) fprintf(stderr, "  plain_text wrong on %.400s\n", json);
    CHECK_EQ_INT(t.public_span.plain_text, want);
    CHECK_EQ_INT(t.general_span.plain_text, want);
    tri_done(&t);
}

static void test_plain_text(void) {
    expect_plain("{" IDS "}", true); /* the defaults: "" and "Tracing" */
    expect_plain("{\"name\":\"n\",\"category\":\"c\"," IDS ",\"attributes\":{\"a\":\"\\u00e9\\n\","
                 "\"b\":[\"\\\"\"]},\"resource_attributes\":{\"service.name\":\"caf\xc3\xa9\"}}",
                 true); /* values do not count */
    expect_plain("{" IDS ",\"attributes\":{\"a\\u0062c\":1}}", true); /* unescaped, plain */
    expect_plain("{" IDS ",\"attributes\":{\"thread.\\u0069d\":9}}", true); /* taken out */
    expect_plain("{\"name\":\"caf\\u00e9\"," IDS "}", false);
    expect_plain("{\"name\":\"caf\xc3\xa9\"," IDS "}", false);
    expect_plain("{\"category\":\"a\\nb\"," IDS "}", false);
    expect_plain("{" IDS ",\"attributes\":{\"a\":1,\"k\\\"\":2}}", false);
    expect_plain("{" IDS ",\"attributes\":{\"k\xc3\xa9y\":2}}", false);
    expect_plain("{" IDS ",\"resource_attributes\":{\"a\\u0001\":2}}", false);
    /* an escaped top-level key: the general decoder's only */
    expect_plain("{" IDS ",\"\\u0078\":1,\"attributes\":{\"a\":1}}", true);
    expect_plain("{" IDS ",\"\\u0078\":1,\"attributes\":{\"\\u00e9\":1}}", false);
}

/* Flat arrays of strings (a step record's request.ids, step.tokens): items
 * of every length around the 16-byte blocks the fast path tests once for
 * several items, runs broken by numbers, literals and empty strings, the
 * array near the packet's end (fewer than 16 bytes left for a block), and
 * an escape or a control byte at every item: all as the general decoder. */
static void test_string_arrays_at_block_edges(void) {
    static const char *const shapes[] = {
        "{" IDS ",\"attributes\":{\"a\":[%s],\"b\":1}}",
        "{" IDS ",\"attributes\":{\"a\":[%s]}}",
        "{\"attributes\":{\"a\":[%s]}," IDS "}",
    };
    char items[2048], json[2300];
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        for (size_t len = 0; len <= 36; len++) {
            for (size_t count = 1; count <= 12; count++) {
                for (int odd = -1; odd < (int)count; odd++) { /* odd: the item made different */
                    for (int kind = 0; kind < 4; kind++) { /* 0 number, 1 escape, 2 control, 3 literal */
                        if (odd < 0 && kind) break;
                        size_t n = 0;
                        for (size_t i = 0; i < count; i++) {
                            if (i) items[n++] = ',';
                            if ((int)i == odd && kind == 0) { n += (size_t)sprintf(items + n, "%zu", len); continue; }
                            if ((int)i == odd && kind == 3) { n += (size_t)sprintf(items + n, "null"); continue; }
                            items[n++] = '"';
                            for (size_t k = 0; k < len; k++) items[n++] = (char)('a' + (i + k) % 26);
                            if ((int)i == odd && kind == 1) n += (size_t)sprintf(items + n, "\\n");
                            if ((int)i == odd && kind == 2) items[n++] = '\t';
                            items[n++] = '"';
                        }
                        items[n] = '\0';
                        snprintf(json, sizeof json, shapes[sh], items);
                        if (kind == 2) expect_error(json, MST_ERR_PARSE, "control character");
                        else expect_fast(json);
                    }
                }
            }
        }
    }
}

/* Arrays of one-byte string items ("1","1",...: a decode step's
 * step.tokens, read four at a time): 1..24 items at every alignment, with
 * every byte of the array text in turn replaced by each byte that breaks
 * or changes the pattern (a quote, a backslash, a control byte, a UTF-8
 * lead byte, ',', ']', a space, a digit, a letter): the fast path and the
 * general decoder agree on every input, and the clean arrays take the
 * fast path. */
static void test_one_byte_string_items(void) {
    static const char subst[] = {'"', '\\', '\x01', '\xc3', ',', ']', ' ', '7', 'x', '['};
    char items[256], json[512];
    for (size_t pad = 0; pad < 4; pad++) {
        for (size_t count = 1; count <= 24; count++) {
            size_t n = 0;
            for (size_t i = 0; i < count; i++) {
                if (i) items[n++] = ',';
                items[n++] = '"';
                items[n++] = (char)('0' + i % 10);
                items[n++] = '"';
            }
            char pads[4] = {0};
            memset(pads, 'p', pad);
            snprintf(json, sizeof json, "{" IDS ",\"attributes\":{\"%s\":[%.*s],\"b\":1}}", pads, (int)n, items);
            expect_fast(json);
            size_t at0 = (size_t)(strchr(json, '[') - json) + 1;
            for (size_t k = 0; k < n; k++)
                for (size_t v = 0; v < sizeof subst; v++) {
                    char mutated[512];
                    size_t len = strlen(json);
                    memcpy(mutated, json, len + 1);
                    mutated[at0 + k] = subst[v];
                    expect_agree_n(mutated, len);
                }
        }
    }
}

static const mst_test_case TESTS[] = {
    {"bench_packet_takes_fast_path", test_bench_packet_takes_fast_path},
    {"bench_step_format_is_sprintf", test_bench_step_format_is_sprintf},
    {"key_order_whitespace_unknown_keys", test_key_order_whitespace_unknown_keys},
    {"escapes", test_escapes},
    {"duplicates", test_duplicates},
    {"ids", test_ids},
    {"numbers", test_numbers},
    {"utf8_at_block_edges", test_utf8_at_block_edges},
    {"nesting_and_limits", test_nesting_and_limits},
    {"truncations_and_mutations", test_truncations_and_mutations},
    {"plain_text", test_plain_text},
    {"string_arrays_at_block_edges", test_string_arrays_at_block_edges},
    {"one_byte_string_items", test_one_byte_string_items},
};

MST_TEST_MAIN(TESTS)
