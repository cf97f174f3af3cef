/*
 * otlp_response.c — parsers of an OTLP collector's reply (see
 * otlp_response.h): partial success in protobuf, gRPC and JSON form, the
 * grpc-status / grpc-message values, and the RetryInfo inside
 * grpc-status-details-bin. Built on the strict readers of this layer
 * (pb_reader.c, json_reader.c), so the bounds and syntax rules live once.
 */
#include "wire/otlp_response.h"

#include <string.h>

#include "core/arena.h"
#include "wire/json_reader.h"
#include "wire/pb_reader.h"
#include "wire/pb_writer.h" /* wire type constants */

#define JSON_MAX_DEPTH 16           /* a reply is flat; deeper is hostile */
#define DETAILS_MAX_BYTES 2048      /* decoded grpc-status-details-bin kept */

/* Copies a peer's string into a fixed buffer: cut at a NUL byte (the
 * message is only logged, as a C string) and at a UTF-8 boundary. */
static void copy_message(char *dst, size_t cap, const char *s, size_t n) {
    const char *nul = n ? memchr(s, '\0', n) : NULL;
    if (nul) n = (size_t)(nul - s);
    n = mst_utf8_cut(s, n, cap - 1);
    if (n) memcpy(dst, s, n);
    dst[n] = '\0';
}

/* --------------------------------------------------------------- protobuf */

/* ExportTracePartialSuccess{rejected_spans=1 int64, error_message=2 string} */
static mst_status parse_partial_fields(const uint8_t *p, size_t n, mst_otlp_partial *out) {
    mst_pb_reader r;
    mst_pb_field f;
    mst_status st;
    mst_pb_reader_init(&r, p, n);
    while ((st = mst_pb_next(&r, &f)) == MST_OK) {
        if (f.number == 1 && f.wire_type == MST_PB_WT_VARINT)
            out->rejected_spans = (int64_t)f.u;
        else if (f.number == 2 && f.wire_type == MST_PB_WT_LEN)
            copy_message(out->message, sizeof out->message, (const char *)f.data, f.len);
    }
    return st == MST_ERR_CLOSED ? MST_OK : st;
}

mst_status mst_otlp_response_parse_proto(const uint8_t *body, size_t len, mst_otlp_partial *out) {
    memset(out, 0, sizeof *out);
    mst_pb_reader r;
    mst_pb_field f;
    mst_status st;
    mst_pb_reader_init(&r, body, len);
    while ((st = mst_pb_next(&r, &f)) == MST_OK) {
        if (f.number != 1 || f.wire_type != MST_PB_WT_LEN) continue; /* unknown: skipped */
        out->present = true;
        mst_status inner = parse_partial_fields(f.data, f.len, out);
        if (inner != MST_OK) return inner;
    }
    return st == MST_ERR_CLOSED ? MST_OK : st;
}

mst_status mst_otlp_response_parse_grpc(const uint8_t *body, size_t len, mst_otlp_partial *out) {
    memset(out, 0, sizeof *out);
    if (len == 0) return MST_OK; /* no message: a plain success */
    if (len < 5) return MST_ERR_PARSE;
    if (body[0] != 0) return MST_ERR_UNSUPPORTED; /* compressed reply: not read */
    size_t mlen = ((size_t)body[1] << 24) | ((size_t)body[2] << 16) | ((size_t)body[3] << 8) | body[4];
    if (mlen > len - 5) return MST_ERR_PARSE;
    return mst_otlp_response_parse_proto(body + 5, mlen, out);
}

/* ------------------------------------------------------------------- JSON */

static bool key_is(const char *key, size_t n, const char *camel, const char *snake) {
    return (n == strlen(camel) && memcmp(key, camel, n) == 0) ||
           (n == strlen(snake) && memcmp(key, snake, n) == 0);
}

/* proto3 JSON writes an int64 as a decimal string; a number is accepted too. */
static bool read_json_int64(mst_json_reader *r, int64_t *out) {
    mst_json_type t = mst_json_peek(r);
    if (t == MST_JSON_NUMBER) return mst_json_read_i64(r, out);
    if (t != MST_JSON_STRING) return false;
    char digits[24];
    size_t n;
    bool fits;
    if (!mst_json_read_str_into(r, digits, sizeof digits, &n, &fits) || !fits) return false;
    mst_json_slice s = {digits, n};
    return mst_json_slice_to_i64(&s, out);
}

static bool parse_partial_json(mst_json_reader *r, mst_arena *arena, mst_otlp_partial *out) {
    if (!mst_json_object_begin(r)) return false;
    int more;
    while ((more = mst_json_object_next(r)) == 1) {
        char key[32];
        size_t kn;
        bool fits;
        if (!mst_json_read_key_into(r, key, sizeof key, &kn, &fits)) return false;
        if (fits && key_is(key, kn, "rejectedSpans", "rejected_spans")) {
            if (mst_json_peek(r) == MST_JSON_NULL) {
                if (!mst_json_read_raw(r, &(mst_json_slice){0})) return false;
            } else if (!read_json_int64(r, &out->rejected_spans)) {
                return false;
            }
        } else if (fits && key_is(key, kn, "errorMessage", "error_message") &&
                   mst_json_peek(r) == MST_JSON_STRING) {
            mst_str s;
            if (!mst_json_read_str_slice(r, arena, &s)) return false;
            copy_message(out->message, sizeof out->message, s.ptr, s.len);
        } else {
            mst_json_slice skip;
            if (!mst_json_read_raw(r, &skip)) return false;
        }
    }
    return more == 0;
}

mst_status mst_otlp_response_parse_json(const uint8_t *body, size_t len, mst_otlp_partial *out) {
    memset(out, 0, sizeof *out);
    if (len == 0) return MST_OK; /* an empty 200: full success */
    mst_json_reader r;
    mst_arena arena;
    mst_arena_init(&arena);
    mst_json_reader_init(&r, body, len, JSON_MAX_DEPTH);
    bool ok = mst_json_object_begin(&r);
    int more = -1;
    while (ok && (more = mst_json_object_next(&r)) == 1) {
        char key[32];
        size_t kn;
        bool fits;
        ok = mst_json_read_key_into(&r, key, sizeof key, &kn, &fits);
        if (ok && fits && key_is(key, kn, "partialSuccess", "partial_success") &&
            mst_json_peek(&r) == MST_JSON_OBJECT) {
            out->present = true;
            ok = parse_partial_json(&r, &arena, out);
        } else if (ok) {
            mst_json_slice skip;
            ok = mst_json_read_raw(&r, &skip);
        }
    }
    ok = ok && more == 0 && mst_json_finish(&r);
    bool nomem = r.nomem;
    mst_arena_release(&arena);
    return ok ? MST_OK : nomem ? MST_ERR_NOMEM : MST_ERR_PARSE;
}

/* ------------------------------------------------------------ gRPC values */

int mst_otlp_grpc_status_parse(const char *value, size_t len) {
    size_t i = 0;
    while (i < len && (value[i] == ' ' || value[i] == '\t')) i++;
    size_t digits = 0;
    int64_t v = 0;
    for (; i < len && value[i] >= '0' && value[i] <= '9'; i++, digits++) {
        v = v * 10 + (value[i] - '0');
        if (v > INT32_MAX) return -1;
    }
    while (i < len && (value[i] == ' ' || value[i] == '\t')) i++;
    return digits && i == len ? (int)v : -1;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void mst_otlp_grpc_message_decode(const char *value, size_t len, char *out, size_t cap) {
    if (cap == 0) return;
    char tmp[1024];
    size_t o = 0;
    for (size_t i = 0; i < len && o < sizeof tmp; i++) {
        int hi, lo;
        if (value[i] == '%' && i + 2 < len && (hi = hex_digit(value[i + 1])) >= 0 &&
            (lo = hex_digit(value[i + 2])) >= 0) {
            tmp[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            tmp[o++] = value[i];
        }
    }
    copy_message(out, cap, tmp, o);
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Lenient on purpose (gRPC sends -bin values unpadded; proxies may fold
 * blanks in): characters outside both alphabets are skipped. */
static size_t b64_decode(const char *s, size_t n, uint8_t *out, size_t cap) {
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n && o < cap; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) continue;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o;
}

/* google.rpc.RetryInfo{retry_delay=1 google.protobuf.Duration{seconds=1, nanos=2}} */
static long retry_info_delay_ms(const uint8_t *p, size_t n) {
    mst_pb_reader r, d;
    mst_pb_field f, g;
    int64_t secs = 0, nanos = 0;
    mst_pb_reader_init(&r, p, n);
    while (mst_pb_next(&r, &f) == MST_OK) {
        if (f.number != 1 || f.wire_type != MST_PB_WT_LEN) continue;
        mst_pb_reader_init(&d, f.data, f.len);
        while (mst_pb_next(&d, &g) == MST_OK) {
            if (g.wire_type != MST_PB_WT_VARINT) continue;
            if (g.number == 1) secs = (int64_t)g.u;
            if (g.number == 2) nanos = (int64_t)g.u;
        }
    }
    /* Values from the collector: clamp before the arithmetic (seconds * 1000
     * could overflow) and cap like Retry-After (one day). */
    if (secs < 0) secs = 0;
    if (secs > MST_OTLP_RETRY_DELAY_MAX_S) secs = MST_OTLP_RETRY_DELAY_MAX_S;
    if (nanos < 0 || nanos > 999999999) nanos = 0;
    return (long)(secs * 1000 + nanos / 1000000);
}

/* google.protobuf.Any{type_url=1, value=2}: the RetryInfo delay, or -1. */
static long any_retry_delay_ms(const uint8_t *p, size_t n) {
    static const char suffix[] = "google.rpc.RetryInfo";
    const size_t slen = sizeof suffix - 1;
    mst_pb_reader r;
    mst_pb_field f;
    bool is_retry_info = false;
    const uint8_t *value = NULL;
    size_t value_len = 0;
    mst_pb_reader_init(&r, p, n);
    while (mst_pb_next(&r, &f) == MST_OK) {
        if (f.wire_type != MST_PB_WT_LEN) continue;
        if (f.number == 1 && f.len >= slen && memcmp(f.data + f.len - slen, suffix, slen) == 0)
            is_retry_info = true;
        if (f.number == 2) {
            value = f.data;
            value_len = f.len;
        }
    }
    if (r.p != r.end || !is_retry_info) return -1; /* malformed Any, or another detail */
    return retry_info_delay_ms(value, value_len);
}

long mst_otlp_grpc_retry_delay_ms(const char *value, size_t len) {
    uint8_t raw[DETAILS_MAX_BYTES];
    size_t n = b64_decode(value, len, raw, sizeof raw);
    /* google.rpc.Status{code=1, message=2, details=3 repeated Any} */
    mst_pb_reader r;
    mst_pb_field f;
    mst_pb_reader_init(&r, raw, n);
    while (mst_pb_next(&r, &f) == MST_OK) {
        if (f.number != 3 || f.wire_type != MST_PB_WT_LEN) continue;
        long ms = any_retry_delay_ms(f.data, f.len);
        if (ms >= 0) return ms;
    }
    return -1;
}
