/*
 * test_read_jaeger.c — the Jaeger query API answer parser
 * (src/analyze/read_jaeger.c): the span mapping (ids, microseconds to ns,
 * CHILD_OF parent vs links, tags to typed attributes, a JSON-array string
 * tag back to a string list, status, pid/tid/role from span and process
 * tags), traces delivered once across pages, and the errors (not JSON, not
 * Jaeger JSON, an "errors"-only answer, Jaeger unreachable). The HTTP pager
 * runs against the real Jaeger in tests/integration/test_analyze_jaeger.py.
 */
#include <stdlib.h>
#include <string.h>

#include "analyze/read_jaeger.h"
#include "testlib.h"

/* The answer Jaeger gives for two traces (shape of /api/traces; also the
 * fuzz corpus file answer-two-traces). */
static const char ANSWER[] =
    "{\"data\":[{\"traceID\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"spans\":[{\"traceID\":\"4bf92f3577b34d"
    "a6a3ce929d0e0e4736\",\"spanID\":\"00f067aa0ba902b7\",\"operationName\":\"llm_request\",\"references\""
    ":[],\"startTime\":1764525600000000,\"duration\":1500,\"tags\":[{\"key\":\"request.id\",\"type\":\"strin"
    "g\",\"value\":\"cmpl-1\"},{\"key\":\"otel.status_code\",\"type\":\"string\",\"value\":\"ERROR\"},{\"key\":\"th"
    "read.id\",\"type\":\"int64\",\"value\":77}],\"logs\":[],\"processID\":\"p1\",\"warnings\":null},{\"traceID"
    "\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"spanID\":\"00f067aa0ba902b8\",\"operationName\":\"vllm.sch"
    "eduler.schedule\",\"references\":[{\"refType\":\"CHILD_OF\",\"traceID\":\"4bf92f3577b34da6a3ce929d0e"
    "0e4736\",\"spanID\":\"00f067aa0ba902b7\"},{\"refType\":\"FOLLOWS_FROM\",\"traceID\":\"1\",\"spanID\":\"2\"}"
    "],\"startTime\":1764525600000100,\"duration\":200,\"tags\":[{\"key\":\"request.ids\",\"type\":\"string\""
    ",\"value\":\"[\\\"cmpl-1\\\",\\\"cmpl-2\\\"]\"},{\"key\":\"batch.scheduled_tokens\",\"type\":\"int64\",\"value\""
    ":64},{\"key\":\"ratio\",\"type\":\"float64\",\"value\":2},{\"key\":\"ok\",\"type\":\"bool\",\"value\":true}],\""
    "processID\":\"p2\"}],\"processes\":{\"p1\":{\"serviceName\":\"api\",\"tags\":[{\"key\":\"process.pid\",\"typ"
    "e\":\"int64\",\"value\":4240}]},\"p2\":{\"serviceName\":\"engine\",\"tags\":[{\"key\":\"process.pid\",\"type"
    "\":\"int64\",\"value\":4242},{\"key\":\"process.role\",\"type\":\"string\",\"value\":\"engine_core\"}]}},\"w"
    "arnings\":null},{\"traceID\":\"abc\",\"spans\":[],\"processes\":{}}],\"total\":0,\"limit\":0,\"offset\":0"
    ",\"errors\":null}";

typedef struct seen_span {
    char name[64];
    uint8_t trace_id[16], span_id[8], parent[8];
    int64_t start_ns, end_ns, pid, tid;
    char role[32];
    int status;
    size_t n_links;
    char ids[64]; /* request.ids items joined by ',' */
    int64_t tokens;
    double ratio;
    int ratio_is_double;
} seen_span;

typedef struct collect {
    seen_span spans[8];
    size_t n;
} collect;

static mst_status on_span(void *ctx, const mst_an_span *s) {
    collect *c = ctx;
    if (c->n >= 8) return MST_ERR_TOO_LARGE;
    seen_span *o = &c->spans[c->n++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%.*s", (int)s->name.len, s->name.ptr);
    snprintf(o->role, sizeof o->role, "%.*s", (int)s->role.len, s->role.ptr);
    memcpy(o->trace_id, s->trace_id, 16);
    memcpy(o->span_id, s->span_id, 8);
    memcpy(o->parent, s->parent_span_id, 8);
    o->start_ns = s->start_ns;
    o->end_ns = s->end_ns;
    o->pid = s->pid;
    o->tid = s->tid;
    o->status = s->status;
    o->n_links = s->n_links;
    const mst_an_attr *a = mst_an_span_attr(s, "request.ids", 11);
    if (a && a->type == MST_AN_VAL_STR_LIST)
        for (size_t i = 0; i < a->n_items; i++)
            snprintf(o->ids + strlen(o->ids), sizeof o->ids - strlen(o->ids), "%s%.*s", i ? "," : "",
                     (int)a->items[i].len, a->items[i].ptr);
    a = mst_an_span_attr(s, "batch.scheduled_tokens", 22);
    if (a && a->type == MST_AN_VAL_INT) o->tokens = a->i;
    a = mst_an_span_attr(s, "ratio", 5);
    if (a) {
        o->ratio_is_double = a->type == MST_AN_VAL_DOUBLE;
        o->ratio = a->d;
    }
    return MST_OK;
}

static void test_span_mapping(void) {
    collect c = {0};
    mst_an_input_info info;
    CHECK(mst_an_input_info_init(&info, "jaeger", "test"));
    mst_an_jaeger_pages *p = mst_an_jaeger_pages_new(3, on_span, &c, &info);
    size_t traces = 0;
    char err[256] = "";
    CHECK_EQ_INT(mst_an_jaeger_pages_parse(p, ANSWER, sizeof ANSWER - 1, &traces, err, sizeof err), MST_OK);
    CHECK_EQ_INT(traces, 1); /* the trace "abc" with no spans does not count toward a full page */
    CHECK_EQ_INT(c.n, 2);
    CHECK_EQ_INT(info.spans, 2);
    const seen_span *r = &c.spans[0], *s = &c.spans[1];
    CHECK_EQ_STR(r->name, "llm_request");
    CHECK_EQ_INT(r->trace_id[0], 0x4b);
    CHECK_EQ_INT(r->trace_id[15], 0x36);
    CHECK_EQ_INT(r->span_id[7], 0xb7);
    CHECK_EQ_INT(r->start_ns, 1764525600000000000LL);
    CHECK_EQ_INT(r->end_ns, 1764525600001500000LL);
    CHECK_EQ_INT(r->pid, 4240);   /* process tag */
    CHECK_EQ_INT(r->tid, 77);     /* span tag thread.id */
    CHECK_EQ_STR(r->role, "api"); /* no process.role: the service name */
    CHECK_EQ_INT(r->status, 2);
    CHECK_EQ_INT(r->parent[7], 0);
    CHECK_EQ_STR(s->name, "vllm.scheduler.schedule");
    CHECK_EQ_INT(s->parent[7], 0xb7); /* CHILD_OF in the same trace */
    CHECK_EQ_INT(s->n_links, 1);      /* the FOLLOWS_FROM reference */
    CHECK_EQ_STR(s->ids, "cmpl-1,cmpl-2");
    CHECK_EQ_INT(s->tokens, 64);
    CHECK(s->ratio_is_double && s->ratio == 2.0); /* float64 stays a double */
    CHECK_EQ_INT(s->pid, 4242);
    CHECK_EQ_STR(s->role, "engine_core");
    CHECK_EQ_INT(s->start_ns, 1764525600000100000LL);
    CHECK_EQ_INT(s->end_ns, 1764525600000300000LL);

    /* The same traces in a later page (overlapping windows): not again. */
    CHECK_EQ_INT(mst_an_jaeger_pages_parse(p, ANSWER, sizeof ANSWER - 1, &traces, err, sizeof err), MST_OK);
    CHECK_EQ_INT(traces, 1); /* seen before, still a real trace of this page */
    CHECK_EQ_INT(c.n, 2);
    mst_an_jaeger_pages_free(p);
    mst_an_input_info_free(&info);
}

static void test_errors(void) {
    static const struct {
        const char *body;
        mst_status st;
        const char *says;
    } cases[] = {
        {"", MST_ERR_PARSE, "not a Jaeger query API answer"},
        {"<html>404 page not found</html>", MST_ERR_PARSE, "not a Jaeger query API answer"},
        {"[1,2]", MST_ERR_PARSE, "not a Jaeger query API answer"},
        {"{\"traces\":[]}", MST_ERR_PARSE, "no \"data\""},
        {"{\"data\":[{\"spans\":[{\"spanID\":1}]}]}", MST_ERR_PARSE, "not a Jaeger query API answer"},
        {"{\"data\":[], \"errors\":[{\"code\":400,\"msg\":\"parameter service is required\"}]}",
         MST_ERR_REJECTED, "parameter service is required"},
        {"{\"data\":[{\"traceID\":\"1\",\"spans\":[{\"spanID\":\"1\",\"operationName\":\"x\",\"startTime\":5,",
         MST_ERR_PARSE, "at byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        collect c = {0};
        mst_an_jaeger_pages *p = mst_an_jaeger_pages_new(0, on_span, &c, NULL);
        size_t traces = 0;
        char err[256] = "";
        mst_status st = mst_an_jaeger_pages_parse(p, cases[i].body, strlen(cases[i].body), &traces, err,
                                                  sizeof err);
        CHECK_EQ_INT(st, cases[i].st);
        if (!strstr(err, cases[i].says)) fprintf(stderr, "  case %zu: err \"%s\"\n", i, err);
        CHECK(strstr(err, cases[i].says) != NULL);
        mst_an_jaeger_pages_free(p);
    }
}

static void test_unusable_span_is_skipped_and_counted(void) {
    const char body[] = "{\"data\":[{\"traceID\":\"01\",\"spans\":[{\"spanID\":\"zz\",\"operationName\":\"x\","
                        "\"startTime\":1,\"duration\":1},{\"spanID\":\"02\",\"operationName\":\"y\",\"startTime\":1,"
                        "\"duration\":2}]}]}";
    collect c = {0};
    mst_an_input_info info;
    CHECK(mst_an_input_info_init(&info, "jaeger", "test"));
    mst_an_jaeger_pages *p = mst_an_jaeger_pages_new(0, on_span, &c, &info);
    size_t traces = 0;
    char err[256] = "";
    CHECK_EQ_INT(mst_an_jaeger_pages_parse(p, body, sizeof body - 1, &traces, err, sizeof err), MST_OK);
    CHECK_EQ_INT(c.n, 1);
    CHECK_EQ_STR(c.spans[0].name, "y");
    CHECK_EQ_INT(c.spans[0].trace_id[15], 1); /* a short id is right-aligned */
    CHECK_EQ_INT(info.skipped, 1);
    mst_an_jaeger_pages_free(p);
    mst_an_input_info_free(&info);
}

static void test_unreachable_and_bad_query(void) {
    mst_an_input_info info;
    char err[256] = "";
    /* Port 1 on loopback: nothing listens there. */
    mst_an_jaeger_query q = {.base_url = "http://127.0.0.1:1", .service = "x", .start_us = 0, .end_us = 10,
                             .timeout_ms = 30000};
    CHECK_EQ_INT(mst_an_read_jaeger(&q, 0, on_span, NULL, &info, err, sizeof err), MST_ERR_UNAVAILABLE);
    CHECK(strstr(err, "cannot reach Jaeger at http://127.0.0.1:1") != NULL);
    mst_an_input_info_free(&info);
    q.base_url = "127.0.0.1:16686";
    CHECK_EQ_INT(mst_an_read_jaeger(&q, 0, on_span, NULL, &info, err, sizeof err), MST_ERR_INVALID_ARG);
    CHECK(strstr(err, "http://") != NULL);
    mst_an_input_info_free(&info);
}

static void test_time_values(void) {
    int64_t us = 0;
    CHECK(mst_an_jaeger_parse_duration("1h", &us) && us == 3600000000LL);
    CHECK(mst_an_jaeger_parse_duration("30m", &us) && us == 1800000000LL);
    CHECK(mst_an_jaeger_parse_duration("1.5s", &us) && us == 1500000LL);
    CHECK(mst_an_jaeger_parse_duration("2d", &us) && us == 172800000000LL);
    CHECK(mst_an_jaeger_parse_duration("90", &us) && us == 90000000LL);
    CHECK(mst_an_jaeger_parse_duration("5ms", &us) && us == 5000LL);
    CHECK(mst_an_jaeger_parse_duration("1us", &us) && us == 1LL);
    CHECK(!mst_an_jaeger_parse_duration("1u", &us) && !mst_an_jaeger_parse_duration("1mss", &us));
    CHECK(!mst_an_jaeger_parse_duration("", &us));
    CHECK(!mst_an_jaeger_parse_duration("-1h", &us));
    CHECK(!mst_an_jaeger_parse_duration("1w", &us));
    CHECK(!mst_an_jaeger_parse_duration("h", &us));
    CHECK(mst_an_jaeger_parse_time("2026-11-30T18:00:00Z", &us) && us == 1796061600000000LL);
    CHECK(mst_an_jaeger_parse_time("2026-11-30T18:00:00.25Z", &us) && us == 1796061600250000LL);
    CHECK(mst_an_jaeger_parse_time("2026-11-30T20:00:00+02:00", &us) && us == 1796061600000000LL);
    CHECK(mst_an_jaeger_parse_time("1796061600", &us) && us == 1796061600000000LL);
    CHECK(mst_an_jaeger_parse_time("1796061600.5", &us) && us == 1796061600500000LL);
    CHECK(!mst_an_jaeger_parse_time("2026-11-30", &us));
    CHECK(!mst_an_jaeger_parse_time("2026-11-30T18:00:00", &us)); /* no zone: ambiguous */
    CHECK(!mst_an_jaeger_parse_time("yesterday", &us));
}

static const mst_test_case TESTS[] = {
    {"time_values", test_time_values},
    {"span_mapping", test_span_mapping},
    {"errors", test_errors},
    {"unusable_span_is_skipped_and_counted", test_unusable_span_is_skipped_and_counted},
    {"unreachable_and_bad_query", test_unreachable_and_bad_query},
};
MST_TEST_MAIN(TESTS)
