/*
 * test_pb.c — unit tests of the protobuf writer (pb_writer.h) and the
 * bounds-checked reader (pb_reader.h): varint edges, fixed widths, length
 * back-patching when the hinted length size is wrong either way, UTF-8
 * repair of strings, and every malformed input the reader must reject.
 */
#include <stdlib.h>

#include "testlib.h"
#include "wire/pb_reader.h"
#include "wire/pb_writer.h"

static void test_varint_roundtrip(void) {
    static const uint64_t vals[] = {0, 1, 127, 128, 255, 300, 16383, 16384, 2097151, 2097152,
                                    UINT32_MAX, (uint64_t)INT64_MAX, (uint64_t)-1};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        mst_buf b;
        mst_buf_init(&b, 0);
        mst_pb_varint(&b, vals[i]);
        CHECK_EQ_INT(b.len, mst_pb_varint_size(vals[i]));
        mst_pb_reader r;
        mst_pb_reader_init(&r, b.data, b.len);
        uint64_t v = 0;
        CHECK_EQ_INT(mst_pb_read_varint(&r, &v), MST_OK);
        CHECK(v == vals[i]);
        CHECK(mst_pb_reader_done(&r));
        /* every strict prefix is truncated */
        for (size_t n = 0; n < b.len; n++) {
            mst_pb_reader_init(&r, b.data, n);
            CHECK_EQ_INT(mst_pb_read_varint(&r, &v), MST_ERR_PARSE);
        }
        mst_buf_free(&b);
    }
    CHECK_EQ_INT(mst_pb_varint_size((uint64_t)-1), 10);
}

/* The reference encoding: 7 bits a byte, low first, high bit = more. */
static unsigned ref_varint(uint8_t *p, uint64_t v) {
    unsigned n = 0;
    do {
        p[n] = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v) p[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

/* Every bit length, at and around its edges and with mixed bits: both
 * varint writers give the reference's bytes, of the size
 * mst_pb_varint_size says, and write nothing past them (the wide writer's
 * 8-byte store included). */
static void test_varint_every_length(void) {
    int checked = 0;
    for (unsigned bits = 0; bits <= 64; bits++) {
        uint64_t top = bits ? 1ull << (bits - 1) : 0;
        uint64_t low = bits >= 64 ? ~0ull : (1ull << bits) - 1;
        const uint64_t vals[] = {top, low, top | 1u, (0x5A5A5A5A5A5A5A5Aull & low) | top,
                                 (0xA5A5A5A5A5A5A5A5ull & low) | top};
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            uint8_t want[24];
            unsigned k = ref_varint(want, vals[i]);
            CHECK_EQ_INT(mst_pb_varint_size(vals[i]), k);
            for (int wide = 0; wide < 2; wide++) {
                uint8_t got[24];
                memset(got, 0xEE, sizeof got);
                unsigned n = wide ? mst_pb_put_varint_wide(got, vals[i]) : mst_pb_put_varint(got, vals[i]);
                CHECK_EQ_INT(n, k);
                CHECK(memcmp(got, want, k) == 0);
                for (unsigned j = n; j < sizeof got; j++) CHECK(got[j] == 0xEE);
            }
            checked++;
        }
    }
    CHECK_EQ_INT(checked, 65 * 5);
    uint8_t f[8];
    mst_pb_put_fixed64(f, 0x0102030405060708ull);
    for (unsigned i = 0; i < 8; i++) CHECK(f[i] == 8 - i);
}

static void test_fixed_and_fields(void) {
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_pb_field_fixed64(&b, 7, 0x0102030405060708ull);
    mst_pb_field_fixed32(&b, 16, 0x301);
    mst_pb_field_varint(&b, 6, 2);
    mst_pb_field_double(&b, 4, 1.5);
    mst_pb_field_bytes(&b, 1, "abc", 3);
    /* fixed64 field 7: tag 0x39, little-endian payload */
    CHECK_EQ_INT(b.data[0], 0x39);
    CHECK_EQ_INT(b.data[1], 0x08);
    CHECK_EQ_INT(b.data[8], 0x01);
    /* field 16 needs a two-byte tag: (16 << 3) | 5 = 133 */
    CHECK_EQ_INT(b.data[9], 0x85);
    CHECK_EQ_INT(b.data[10], 0x01);
    mst_pb_reader r;
    mst_pb_reader_init(&r, b.data, b.len);
    mst_pb_field f;
    CHECK_EQ_INT(mst_pb_next(&r, &f), MST_OK);
    CHECK(f.number == 7 && f.wire_type == MST_PB_WT_FIXED64 && f.u == 0x0102030405060708ull);
    CHECK_EQ_INT(mst_pb_next(&r, &f), MST_OK);
    CHECK(f.number == 16 && f.wire_type == MST_PB_WT_FIXED32 && f.u == 0x301);
    CHECK_EQ_INT(mst_pb_next(&r, &f), MST_OK);
    CHECK(f.number == 6 && f.wire_type == MST_PB_WT_VARINT && f.u == 2);
    CHECK_EQ_INT(mst_pb_next(&r, &f), MST_OK);
    double d;
    memcpy(&d, &f.u, sizeof d);
    CHECK(f.number == 4 && d == 1.5);
    CHECK_EQ_INT(mst_pb_next(&r, &f), MST_OK);
    CHECK(f.number == 1 && f.wire_type == MST_PB_WT_LEN && f.len == 3 && memcmp(f.data, "abc", 3) == 0);
    CHECK_EQ_INT(mst_pb_next(&r, &f), MST_ERR_CLOSED);
    mst_buf_free(&b);
}

/* A nested field whose body is `n` bytes, opened with each possible hint:
 * the result must be identical to the minimal encoding. */
static void test_length_backpatch(void) {
    static const size_t sizes[] = {0, 1, 127, 128, 16383, 16384, 70000};
    char *payload = malloc(70000);
    memset(payload, 'z', 70000);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        mst_buf ref;
        mst_buf_init(&ref, 0);
        mst_pb_field_bytes(&ref, 3, payload, sizes[i]);
        for (unsigned hint = 1; hint <= 5; hint++) {
            mst_buf b;
            mst_buf_init(&b, 0);
            mst_pb_field_varint(&b, 1, 42); /* something before */
            size_t pre = b.len;
            mst_pb_mark m = mst_pb_begin(&b, 3, hint);
            mst_buf_append(&b, payload, sizes[i]);
            mst_pb_end(&b, m);
            mst_pb_field_varint(&b, 2, 7); /* and after */
            CHECK(!b.failed);
            CHECK_EQ_INT(b.len - pre - 2, ref.len);
            CHECK(memcmp(b.data + pre, ref.data, ref.len) == 0);
            mst_buf_free(&b);
        }
        mst_buf_free(&ref);
    }
    /* nested: outer grows because inner did */
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_pb_mark outer = mst_pb_begin(&b, 1, 1);
    mst_pb_mark inner = mst_pb_begin(&b, 2, 1);
    mst_buf_append(&b, payload, 200);
    mst_pb_end(&b, inner);
    mst_pb_end(&b, outer);
    mst_pb_reader r;
    mst_pb_reader_init(&r, b.data, b.len);
    mst_pb_field f, g;
    CHECK_EQ_INT(mst_pb_next(&r, &f), MST_OK);
    CHECK_EQ_INT(f.len, 203);
    mst_pb_reader_init(&r, f.data, f.len);
    CHECK_EQ_INT(mst_pb_next(&r, &g), MST_OK);
    CHECK_EQ_INT(g.len, 200);
    mst_buf_free(&b);
    free(payload);
}

static void test_size_limit_fails_cleanly(void) {
    mst_buf b;
    mst_buf_init(&b, 64);
    char big[100] = {0};
    mst_pb_mark m = mst_pb_begin(&b, 1, 1);
    mst_pb_field_bytes(&b, 2, big, sizeof big);
    mst_pb_end(&b, m);
    mst_pb_field_varint(&b, 3, 1);
    CHECK(b.failed);
    CHECK(b.len <= 64);
    mst_buf_free(&b);
}

static void test_string_utf8_repair(void) {
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_pb_field_string(&b, 1, "ok \xC3\xBC", 5); /* valid: copied */
    CHECK_EQ_INT(b.data[1], 5);
    mst_buf_reset(&b);
    mst_pb_field_string(&b, 1, "a\xFF" "b\xC3", 4); /* two bad bytes */
    CHECK_EQ_INT(b.data[1], 8);
    CHECK(memcmp(b.data + 2, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD", 8) == 0);
    CHECK(mst_pb_utf8_valid("\xF0\x9F\x94\xA5", 4));
    CHECK(!mst_pb_utf8_valid("\xED\xA0\x80", 3)); /* surrogate */
    CHECK(!mst_pb_utf8_valid("\xC0\x80", 2));     /* overlong */
    CHECK(!mst_pb_utf8_valid("\xF4\x90\x80\x80", 4)); /* > U+10FFFF */
    mst_buf_free(&b);
}

static mst_status next_of(const void *p, size_t n) {
    mst_pb_reader r;
    mst_pb_field f;
    mst_pb_reader_init(&r, p, n);
    return mst_pb_next(&r, &f);
}

static void test_reader_rejects(void) {
    /* 11-byte varint */
    static const uint8_t long_varint[] = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    CHECK_EQ_INT(next_of(long_varint, sizeof long_varint), MST_ERR_PARSE);
    /* 10th byte > 1 overflows 64 bits */
    static const uint8_t overflow[] = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02};
    CHECK_EQ_INT(next_of(overflow, sizeof overflow), MST_ERR_PARSE);
    static const uint8_t max_ok[] = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    CHECK_EQ_INT(next_of(max_ok, sizeof max_ok), MST_OK);
    static const uint8_t trunc_tag[] = {0x80};
    CHECK_EQ_INT(next_of(trunc_tag, 1), MST_ERR_PARSE);
    static const uint8_t trunc_val[] = {0x08, 0x80};
    CHECK_EQ_INT(next_of(trunc_val, 2), MST_ERR_PARSE);
    static const uint8_t field0[] = {0x00, 0x01};
    CHECK_EQ_INT(next_of(field0, 2), MST_ERR_PARSE);
    for (uint8_t wt = 3; wt <= 7; wt++) {
        if (wt == 5) continue;
        uint8_t g[] = {(uint8_t)(0x08 | wt), 0, 0, 0, 0, 0, 0, 0, 0};
        CHECK_EQ_INT(next_of(g, sizeof g), MST_ERR_PARSE);
    }
    static const uint8_t len_past[] = {0x0A, 0x05, 'a', 'b'};
    CHECK_EQ_INT(next_of(len_past, sizeof len_past), MST_ERR_PARSE);
    static const uint8_t len_huge[] = {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    CHECK_EQ_INT(next_of(len_huge, sizeof len_huge), MST_ERR_PARSE);
    static const uint8_t f64_short[] = {0x09, 1, 2, 3, 4, 5, 6, 7};
    CHECK_EQ_INT(next_of(f64_short, sizeof f64_short), MST_ERR_PARSE);
    static const uint8_t f32_short[] = {0x0D, 1, 2, 3};
    CHECK_EQ_INT(next_of(f32_short, sizeof f32_short), MST_ERR_PARSE);
    /* field number above 2^29-1 */
    static const uint8_t big_field[] = {0xF8, 0xFF, 0xFF, 0xFF, 0x7F, 0x00};
    CHECK_EQ_INT(next_of(big_field, sizeof big_field), MST_ERR_PARSE);
    CHECK_EQ_INT(next_of(NULL, 0), MST_ERR_CLOSED);
}

static const mst_test_case tests[] = {
    {"varint_roundtrip", test_varint_roundtrip},
    {"varint_every_length", test_varint_every_length},
    {"fixed_and_fields", test_fixed_and_fields},
    {"length_backpatch", test_length_backpatch},
    {"size_limit_fails_cleanly", test_size_limit_fails_cleanly},
    {"string_utf8_repair", test_string_utf8_repair},
    {"reader_rejects", test_reader_rejects},
};
MST_TEST_MAIN(tests)
