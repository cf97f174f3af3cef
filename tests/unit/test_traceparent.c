/* test_traceparent.c — strict W3C traceparent/tracestate parsing and
 * traceparent formatting (docs/reference/otlp.md "W3C trace context"). */
#include "testlib.h"
#include "mstrace.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static mst_status parse(const char *s, mst_span_context *c) {
    return mst_ctx_parse_traceparent(s, strlen(s), c);
}

static void test_valid_traceparent(void) {
    mst_span_context c;
    CHECK_EQ_INT(parse(TP, &c), MST_OK);
    CHECK(c.is_remote);
    CHECK_EQ_INT(c.trace_flags, 1);
    CHECK_EQ_INT(c.trace_id.bytes[0], 0x4b);
    CHECK_EQ_INT(c.span_id.bytes[7], 0xb7);
    CHECK_EQ_INT(c.trace_state_len, 0);
    char out[56];
    CHECK_EQ_INT(mst_ctx_format_traceparent(&c, out, sizeof out), MST_OK);
    CHECK_EQ_STR(out, TP);
    CHECK_EQ_INT(strlen(out), MST_TRACEPARENT_LEN);
    /* optional whitespace around the value */
    CHECK_EQ_INT(parse(" \t" TP " ", &c), MST_OK);
    CHECK_EQ_INT(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c), MST_OK);
    CHECK_EQ_INT(c.trace_flags, 0);
}

static void test_invalid_traceparent(void) {
    static const char *bad[] = {
        "",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* uppercase */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* zero trace */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", /* zero span */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version ff */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", /* v00 extra */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",  /* short flags */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* separator */
        "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version */
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", /* shifted */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", /* flags */
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", /* v01 no dash */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mst_span_context c;
        memset(&c, 0x5a, sizeof c);
        if (parse(bad[i], &c) != MST_ERR_PARSE) {
            fprintf(stderr, "  accepted: \"%s\"\n", bad[i]);
            mst_test_failed_flag = 1;
        }
    }
    CHECK_EQ_INT(mst_ctx_parse_traceparent(NULL, 0, NULL), MST_ERR_INVALID_ARG);
}

static void test_future_version(void) {
    mst_span_context c;
    CHECK_EQ_INT(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &c), MST_OK);
    CHECK_EQ_INT(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-the-future", &c), MST_OK);
    CHECK_EQ_INT(c.trace_flags, 9);
    char out[56];
    CHECK_EQ_INT(mst_ctx_format_traceparent(&c, out, sizeof out), MST_OK);
    CHECK_EQ_STR(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09");
}

static void test_format_errors(void) {
    mst_span_context c;
    memset(&c, 0, sizeof c);
    char out[56];
    CHECK_EQ_INT(mst_ctx_format_traceparent(&c, out, sizeof out), MST_ERR_INVALID_ARG);
    CHECK_EQ_INT(parse(TP, &c), MST_OK);
    CHECK_EQ_INT(mst_ctx_format_traceparent(&c, out, 55), MST_ERR_INVALID_ARG);
    CHECK(mst_ctx_is_valid(&c));
    CHECK(!mst_ctx_is_valid(NULL));
}

static mst_status ts(const char *s, mst_span_context *c) {
    return mst_ctx_parse_tracestate(s, strlen(s), c);
}

static void test_tracestate_valid(void) {
    mst_span_context c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(ts("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", &c), MST_OK);
    CHECK_EQ_STR(c.trace_state, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    CHECK_EQ_INT(c.trace_state_len, strlen(c.trace_state));
    CHECK_EQ_INT(ts("  a=1 ,\t, b@vendor=x y  ,", &c), MST_OK);
    CHECK_EQ_STR(c.trace_state, "a=1,b@vendor=x y");
    CHECK_EQ_INT(ts("", &c), MST_OK);
    CHECK_EQ_STR(c.trace_state, "");
    CHECK_EQ_INT(ts("1tenant@sys=v", &c), MST_OK);
}

static void test_tracestate_invalid(void) {
    static const char *bad[] = {
        "a", "=1", "A=1", "a=", "a=1,a=2", "a=x=y", "1a=1", "a@=1", "a@1sys=1", "a=1 x\x01",
        "t@toolongsystemid=1", "a= 1 ,b=\x7f",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mst_span_context c;
        memset(&c, 0, sizeof c);
        strcpy(c.trace_state, "old");
        c.trace_state_len = 3;
        if (ts(bad[i], &c) != MST_ERR_PARSE || c.trace_state_len != 0 || c.trace_state[0]) {
            fprintf(stderr, "  tracestate accepted or kept: \"%s\"\n", bad[i]);
            mst_test_failed_flag = 1;
        }
    }
}

static void test_tracestate_limits(void) {
    char buf[1024];
    mst_span_context c;
    size_t n = 0;
    for (int i = 0; i < 32; i++) n += (size_t)sprintf(buf + n, "%sk%d=v", i ? "," : "", i);
    CHECK_EQ_INT(ts(buf, &c), MST_OK);
    sprintf(buf + n, ",k32=v");
    CHECK_EQ_INT(ts(buf, &c), MST_ERR_PARSE); /* 33 members */
    memset(buf, 0, sizeof buf);
    strcpy(buf, "a=");
    memset(buf + 2, 'x', 256);
    CHECK_EQ_INT(ts(buf, &c), MST_OK); /* 256-char value */
    buf[2 + 256] = 'x';
    CHECK_EQ_INT(ts(buf, &c), MST_ERR_PARSE); /* 257 */
    /* over 512 chars in total */
    n = 0;
    for (int i = 0; i < 3; i++) n += (size_t)sprintf(buf + n, "%sk%d=%0200d", i ? "," : "", i, 7);
    CHECK_EQ_INT(ts(buf, &c), MST_ERR_PARSE);
}

static const mst_test_case tests[] = {
    {"valid_traceparent", test_valid_traceparent},
    {"invalid_traceparent", test_invalid_traceparent},
    {"future_version", test_future_version},
    {"format_errors", test_format_errors},
    {"tracestate_valid", test_tracestate_valid},
    {"tracestate_invalid", test_tracestate_invalid},
    {"tracestate_limits", test_tracestate_limits},
};
MST_TEST_MAIN(tests)
