/*
 * test_otlp_response.c — unit tests of the OTLP reply parsers
 * (wire/otlp_response.h): partial success in protobuf, gRPC-framed and JSON
 * form (camelCase and proto names, int64 as string or number, escapes,
 * unknown fields, truncation), malformed replies (what was read is kept, the
 * error is MST_ERR_PARSE), grpc-status / grpc-message values and the
 * RetryInfo inside a base64 grpc-status-details-bin (padded, unpadded, URL
 * alphabet, other details first, clamping).
 */
#include <string.h>

#include "testlib.h"
#include "wire/otlp_response.h"
#include "wire/pb_writer.h"

/* ExportTraceServiceResponse{partial_success{rejected_spans, error_message}} */
static void build_response(mst_buf *b, int64_t rejected, const char *message) {
    mst_buf inner;
    mst_buf_init(&inner, 0);
    if (rejected) mst_pb_field_varint(&inner, 1, (uint64_t)rejected);
    if (message) mst_pb_field_bytes(&inner, 2, message, strlen(message));
    mst_pb_field_varint(b, 7, 99); /* an unknown field first: skipped */
    mst_pb_field_bytes(b, 1, inner.data, inner.len);
    mst_buf_free(&inner);
}

static void test_proto_partial(void) {
    mst_buf b;
    mst_buf_init(&b, 0);
    build_response(&b, 3, "bad spans");
    mst_otlp_partial p;
    CHECK_EQ_INT(mst_otlp_response_parse_proto(b.data, b.len, &p), MST_OK);
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 3);
    CHECK_EQ_STR(p.message, "bad spans");
    /* empty body and an empty partial_success */
    CHECK_EQ_INT(mst_otlp_response_parse_proto(NULL, 0, &p), MST_OK);
    CHECK(!p.present);
    static const uint8_t empty_partial[] = {0x0A, 0x00};
    CHECK_EQ_INT(mst_otlp_response_parse_proto(empty_partial, sizeof empty_partial, &p), MST_OK);
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 0);
    CHECK_EQ_STR(p.message, "");
    /* truncated: the partial_success field runs past the end */
    CHECK_EQ_INT(mst_otlp_response_parse_proto(b.data, b.len - 1, &p), MST_ERR_PARSE);
    CHECK(!p.present);
    /* a malformed partial_success: what came before the fault is kept */
    static const uint8_t bad_inner[] = {0x0A, 0x05, 0x08, 0x03, 0x12, 0x05, 'a'};
    CHECK_EQ_INT(mst_otlp_response_parse_proto(bad_inner, sizeof bad_inner, &p), MST_ERR_PARSE);
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 3);
    CHECK_EQ_STR(p.message, "");
    mst_buf_free(&b);
}

static void test_proto_message_cut(void) {
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[MST_OTLP_PARTIAL_MESSAGE_MAX - 2] = '\xC3'; /* a 2-byte sequence across the cut */
    big[MST_OTLP_PARTIAL_MESSAGE_MAX - 1] = '\xA9';
    mst_buf b;
    mst_buf_init(&b, 0);
    build_response(&b, 1, big);
    mst_otlp_partial p;
    CHECK_EQ_INT(mst_otlp_response_parse_proto(b.data, b.len, &p), MST_OK);
    CHECK_EQ_INT(strlen(p.message), MST_OTLP_PARTIAL_MESSAGE_MAX - 2);
    mst_buf_free(&b);
    /* a NUL byte ends the message */
    mst_buf_init(&b, 0);
    mst_buf inner;
    mst_buf_init(&inner, 0);
    mst_pb_field_bytes(&inner, 2, "ab\0cd", 5);
    mst_pb_field_bytes(&b, 1, inner.data, inner.len);
    CHECK_EQ_INT(mst_otlp_response_parse_proto(b.data, b.len, &p), MST_OK);
    CHECK_EQ_STR(p.message, "ab");
    mst_buf_free(&inner);
    mst_buf_free(&b);
}

static void test_grpc_frame(void) {
    mst_buf msg, b;
    mst_buf_init(&msg, 0);
    mst_buf_init(&b, 0);
    build_response(&msg, 5, "x");
    uint8_t hdr[5] = {0, 0, 0, (uint8_t)(msg.len >> 8), (uint8_t)msg.len};
    mst_buf_append(&b, hdr, 5);
    mst_buf_append(&b, msg.data, msg.len);
    mst_otlp_partial p;
    CHECK_EQ_INT(mst_otlp_response_parse_grpc(b.data, b.len, &p), MST_OK);
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 5);
    CHECK_EQ_INT(mst_otlp_response_parse_grpc(NULL, 0, &p), MST_OK);
    CHECK(!p.present);
    CHECK_EQ_INT(mst_otlp_response_parse_grpc(b.data, 4, &p), MST_ERR_PARSE);     /* short prefix */
    CHECK_EQ_INT(mst_otlp_response_parse_grpc(b.data, b.len - 1, &p), MST_ERR_PARSE); /* short body */
    CHECK(!p.present);
    b.data[0] = 1; /* compressed: not read */
    CHECK_EQ_INT(mst_otlp_response_parse_grpc(b.data, b.len, &p), MST_ERR_UNSUPPORTED);
    CHECK(!p.present);
    mst_buf_free(&msg);
    mst_buf_free(&b);
}

static mst_status json(const char *s, mst_otlp_partial *p) {
    return mst_otlp_response_parse_json((const uint8_t *)s, strlen(s), p);
}

static void test_json_partial(void) {
    mst_otlp_partial p;
    CHECK_EQ_INT(json("{\"partialSuccess\":{\"rejectedSpans\":\"7\",\"errorMessage\":\"too old\"}}", &p),
                 MST_OK);
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 7);
    CHECK_EQ_STR(p.message, "too old");
    CHECK_EQ_INT(json(" { \"x\" : [1, {\"partialSuccess\":1}], \"partial_success\" : {\"rejected_spans\": 12,"
                      " \"error_message\": \"a\\\"b\\u00e9\", \"other\": null} } ", &p), MST_OK);
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 12);
    CHECK_EQ_STR(p.message, "a\"b\xC3\xA9");
    /* the key inside a string or a nested object is not the field */
    CHECK_EQ_INT(json("{\"note\":\"\\\"partialSuccess\\\":{\\\"rejectedSpans\\\":3}\"}", &p), MST_OK);
    CHECK(!p.present);
    CHECK_EQ_INT(json("{}", &p), MST_OK);
    CHECK(!p.present);
    CHECK_EQ_INT(mst_otlp_response_parse_json(NULL, 0, &p), MST_OK);
    CHECK(!p.present);
    CHECK_EQ_INT(json("{\"partialSuccess\":{}}", &p), MST_OK);
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 0);
    CHECK_EQ_INT(json("{\"partialSuccess\":{\"rejectedSpans\":null,\"errorMessage\":null}}", &p), MST_OK);
    CHECK_EQ_INT(p.rejected_spans, 0);
}

static void test_json_malformed(void) {
    mst_otlp_partial p;
    CHECK_EQ_INT(json("{\"partialSuccess\":{\"rejectedSpans\":\"4\"", &p), MST_ERR_PARSE); /* truncated */
    CHECK(p.present);
    CHECK_EQ_INT(p.rejected_spans, 4);
    CHECK_EQ_INT(json("{\"partialSuccess\":{\"rejectedSpans\":\"4x\"}}", &p), MST_ERR_PARSE);
    CHECK_EQ_INT(json("{\"partialSuccess\":{\"rejectedSpans\":1.5}}", &p), MST_ERR_PARSE);
    CHECK_EQ_INT(json("{\"partialSuccess\":{\"rejectedSpans\":\"99999999999999999999\"}}", &p), MST_ERR_PARSE);
    CHECK_EQ_INT(json("not json", &p), MST_ERR_PARSE);
    CHECK(!p.present);
    CHECK_EQ_INT(json("{} {}", &p), MST_ERR_PARSE);
    CHECK_EQ_INT(json("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", &p), MST_ERR_PARSE);
    CHECK_EQ_INT(json("{\"partialSuccess\":\"text\"}", &p), MST_OK); /* not an object: not the field */
    CHECK(!p.present);
}

static void test_grpc_status_and_message(void) {
    CHECK_EQ_INT(mst_otlp_grpc_status_parse("14", 2), 14);
    CHECK_EQ_INT(mst_otlp_grpc_status_parse(" 0 ", 3), 0);
    CHECK_EQ_INT(mst_otlp_grpc_status_parse("", 0), -1);
    CHECK_EQ_INT(mst_otlp_grpc_status_parse("abc", 3), -1);   /* was atoi: 0 = OK */
    CHECK_EQ_INT(mst_otlp_grpc_status_parse("1 4", 3), -1);
    CHECK_EQ_INT(mst_otlp_grpc_status_parse("99999999999", 11), -1);
    CHECK_EQ_INT(mst_otlp_grpc_status_parse("1499", 2), 14);  /* length, not NUL, ends it */
    char out[16];
    const char *m = "a%20b%zz%4";
    mst_otlp_grpc_message_decode(m, strlen(m), out, sizeof out);
    CHECK_EQ_STR(out, "a b%zz%4");
    const char *e = "%C3%A9t%C3%A9";
    mst_otlp_grpc_message_decode(e, strlen(e), out, sizeof out);
    CHECK_EQ_STR(out, "\xC3\xA9t\xC3\xA9");
    mst_otlp_grpc_message_decode(e, strlen(e), out, 3); /* cut: no half sequence */
    CHECK_EQ_STR(out, "\xC3\xA9");
    mst_otlp_grpc_message_decode(e, strlen(e), out, 2);
    CHECK_EQ_STR(out, "");
}

static void b64(const mst_buf *in, bool pad, bool url, char *out) {
    static const char std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char web[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *a = url ? web : std;
    size_t o = 0;
    for (size_t i = 0; i < in->len; i += 3) {
        uint32_t v = (uint32_t)in->data[i] << 16;
        if (i + 1 < in->len) v |= (uint32_t)in->data[i + 1] << 8;
        if (i + 2 < in->len) v |= in->data[i + 2];
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        if (i + 1 < in->len) out[o++] = a[(v >> 6) & 63]; else if (pad) out[o++] = '=';
        if (i + 2 < in->len) out[o++] = a[v & 63]; else if (pad) out[o++] = '=';
    }
    out[o] = '\0';
}

/* google.rpc.Status{code, message, details: [other Any, RetryInfo Any]} */
static void build_status(mst_buf *b, int64_t secs, int64_t nanos, bool other_first) {
    mst_buf dur, ri, any;
    mst_buf_init(&dur, 0);
    mst_buf_init(&ri, 0);
    mst_buf_init(&any, 0);
    if (secs) mst_pb_field_varint(&dur, 1, (uint64_t)secs);
    if (nanos) mst_pb_field_varint(&dur, 2, (uint64_t)nanos);
    mst_pb_field_bytes(&ri, 1, dur.data, dur.len);
    const char *url = "type.googleapis.com/google.rpc.RetryInfo";
    mst_pb_field_bytes(&any, 1, url, strlen(url));
    mst_pb_field_bytes(&any, 2, ri.data, ri.len);
    mst_pb_field_varint(b, 1, 8);
    mst_pb_field_bytes(b, 2, "slow down", 9);
    if (other_first) {
        mst_buf other;
        mst_buf_init(&other, 0);
        const char *ou = "type.googleapis.com/google.rpc.DebugInfo";
        mst_pb_field_bytes(&other, 1, ou, strlen(ou));
        mst_pb_field_bytes(&other, 2, ri.data, ri.len);
        mst_pb_field_bytes(b, 3, other.data, other.len);
        mst_buf_free(&other);
    }
    mst_pb_field_bytes(b, 3, any.data, any.len);
    mst_buf_free(&dur);
    mst_buf_free(&ri);
    mst_buf_free(&any);
}

static void test_retry_info(void) {
    char text[4096];
    mst_buf b;
    mst_buf_init(&b, 0);
    build_status(&b, 2, 500000000, false);
    b64(&b, true, false, text);
    CHECK_EQ_INT(mst_otlp_grpc_retry_delay_ms(text, strlen(text)), 2500);
    b64(&b, false, true, text);
    CHECK_EQ_INT(mst_otlp_grpc_retry_delay_ms(text, strlen(text)), 2500);
    /* another detail before it is skipped */
    mst_buf_reset(&b);
    build_status(&b, 1, 0, true);
    b64(&b, false, false, text);
    CHECK_EQ_INT(mst_otlp_grpc_retry_delay_ms(text, strlen(text)), 1000);
    /* clamping: a huge delay is a day, bad nanos are ignored */
    mst_buf_reset(&b);
    build_status(&b, (int64_t)1 << 40, 2000000000, false);
    b64(&b, true, false, text);
    CHECK_EQ_INT(mst_otlp_grpc_retry_delay_ms(text, strlen(text)), 86400L * 1000);
    /* no RetryInfo, garbage, empty */
    mst_buf_reset(&b);
    mst_pb_field_varint(&b, 1, 8);
    b64(&b, true, false, text);
    CHECK_EQ_INT(mst_otlp_grpc_retry_delay_ms(text, strlen(text)), -1);
    CHECK_EQ_INT(mst_otlp_grpc_retry_delay_ms("!!!", 3), -1);
    CHECK_EQ_INT(mst_otlp_grpc_retry_delay_ms("", 0), -1);
    mst_buf_free(&b);
}

static const mst_test_case tests[] = {
    {"proto_partial", test_proto_partial},
    {"proto_message_cut", test_proto_message_cut},
    {"grpc_frame", test_grpc_frame},
    {"json_partial", test_json_partial},
    {"json_malformed", test_json_malformed},
    {"grpc_status_and_message", test_grpc_status_and_message},
    {"retry_info", test_retry_info},
};
MST_TEST_MAIN(tests)
