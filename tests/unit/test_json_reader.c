/*
 * test_json_reader.c — the strict JSON reader (src/wire/json_reader.h):
 * RFC 8259 syntax, UTF-8 and escape validation (surrogates), depth limit,
 * int64 parsing, object/array iteration and raw slices. Every input is
 * copied into a malloc'd buffer of exactly its length so ASan catches any
 * read past the end.
 */
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "testlib.h"
#include "wire/json_reader.h"

/* Validates s (exact-size heap copy). */
static bool valid_n(const char *s, size_t n, unsigned depth) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, s, n);
    bool ok = mst_json_validate(copy, n, depth, NULL, NULL);
    free(copy);
    return ok;
}

static bool valid(const char *s) { return valid_n(s, strlen(s), 32); }

static void test_accepts_valid_documents(void) {
    const char *docs[] = {
        "{}", "[]", "0", "-0", "1.5e10", "-12.25E-3", "1E+2", "\"\"", "true", "false", "null",
        " \t\r\n{ \"a\" : [ 1 , 2 , { } , [ ] , \"x\" ] , \"b\" : null } \n",
        "{\"\\u00e9\\n\\t\\\"\\\\\\/\\b\\f\\r\":1}",
        "\"\\ud83d\\ude00\"", "\"\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\"", "\"\x7f\"",
        "[[[[[[[[[[]]]]]]]]]]", "\"\\u0000\"", "[1,[2,[3]],{\"a\":{\"b\":[]}}]",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        if (!valid(docs[i])) fprintf(stderr, "  rejected valid: %s\n", docs[i]);
        CHECK(valid(docs[i]));
    }
}

static void test_rejects_invalid_documents(void) {
    const char *docs[] = {
        "", " ", "{", "}", "[", "[1,]", "[,1]", "{\"a\":1,}", "{,}", "{\"a\"}", "{\"a\":}",
        "{a:1}", "{'a':1}", "[1 2]", "{\"a\":1 \"b\":2}", "01", "-", "+1", "1.", ".5", "1e",
        "1e+", "NaN", "Infinity", "tru", "nul", "falsey", "[true false]", "{} {}", "[]]",
        "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"a\tb\"", "\"a\nb\"", "\"\x01\"",
        "/* c */ {}", "[1]x", "\"\\", "{\"a\":1}}", "[\"a\",]", "{\"a\" 1}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        if (valid(docs[i])) fprintf(stderr, "  accepted invalid: %s\n", docs[i]);
        CHECK(!valid(docs[i]));
    }
}

static void test_utf8_strictness(void) {
    const char *bad[] = {
        "\"\xc0\xaf\"",             /* overlong '/' */
        "\"\xc1\xbf\"",             /* overlong */
        "\"\xe0\x80\xaf\"",         /* overlong 3-byte */
        "\"\xf0\x80\x80\xaf\"",     /* overlong 4-byte */
        "\"\xed\xa0\x80\"",         /* UTF-8 encoded surrogate U+D800 */
        "\"\xed\xbf\xbf\"",         /* U+DFFF */
        "\"\xf4\x90\x80\x80\"",     /* > U+10FFFF */
        "\"\xf5\x80\x80\x80\"", "\"\xff\"", "\"\x80\"", "\"\xc3\"", "\"\xe2\x9c\"",
        "\"\xc3\x28\"",             /* bad continuation */
        "\"\\ud83d\"",              /* lone high surrogate */
        "\"\\ude00\"",              /* lone low surrogate */
        "\"\\ud83d\\u0041\"",       /* high + non-low */
        "\"\\ud83d\\ud83d\"",       /* high + high */
        "\"\\ud83dx\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (valid(bad[i])) fprintf(stderr, "  accepted invalid UTF-8 #%zu\n", i);
        CHECK(!valid(bad[i]));
    }
    /* Edge code points that are valid. */
    CHECK(valid("\"\xed\x9f\xbf\""));         /* U+D7FF */
    CHECK(valid("\"\xee\x80\x80\""));         /* U+E000 */
    CHECK(valid("\"\xf4\x8f\xbf\xbf\""));     /* U+10FFFF */
    CHECK(valid("\"\\udbff\\udfff\""));
}

static void test_truncations_never_read_past_end(void) {
    const char *doc = "{\"k\\u00e9y\":[1,-2.5e3,\"\\ud83d\\ude00\xc3\xa9\",true,false,null,{\"x\":{}}]}";
    size_t n = strlen(doc);
    CHECK(valid_n(doc, n, 32));
    for (size_t i = 0; i < n; i++) CHECK(!valid_n(doc, i, 32));
}

static void test_depth_limit(void) {
    char buf[200];
    for (unsigned d = 1; d <= 40; d++) {
        size_t n = 0;
        for (unsigned i = 0; i < d; i++) buf[n++] = '[';
        for (unsigned i = 0; i < d; i++) buf[n++] = ']';
        CHECK_EQ_INT(valid_n(buf, n, 32), d <= 32);
    }
    /* Depth counts objects too, and the reader API honours it. */
    const char *deep = "{\"a\":{\"b\":{\"c\":1}}}";
    CHECK(valid_n(deep, strlen(deep), 3));
    CHECK(!valid_n(deep, strlen(deep), 2));
}

static bool read_int(const char *s, int64_t *v) {
    mst_json_reader r;
    mst_json_reader_init(&r, s, strlen(s), 32);
    return mst_json_read_i64(&r, v) && mst_json_finish(&r);
}

static void test_integers(void) {
    int64_t v = 0;
    CHECK(read_int("0", &v) && v == 0);
    CHECK(read_int("-0", &v) && v == 0);
    CHECK(read_int("123456789", &v) && v == 123456789);
    CHECK(read_int("9223372036854775807", &v) && v == INT64_MAX);
    CHECK(read_int("-9223372036854775808", &v) && v == INT64_MIN);
    CHECK(!read_int("9223372036854775808", &v));
    CHECK(!read_int("-9223372036854775809", &v));
    CHECK(!read_int("99999999999999999999999", &v));
    CHECK(!read_int("1.0", &v));
    CHECK(!read_int("1e3", &v));
    CHECK(!read_int("01", &v));
    CHECK(!read_int("\"1\"", &v));
    CHECK(!read_int("-", &v));
    CHECK(!read_int("", &v));
    /* Every digit count, inside a document (the 8-digit word path) and at
     * the very end of the input (the byte path), against strtoll. */
    for (int digits = 1; digits <= 26; digits++) {
        for (int k = 0; k < 3; k++) {
            char num[32], doc[64];
            for (int i = 0; i < digits; i++)
                num[i] = (char)('0' + (i == 0 ? 1 + k * 4 % 9 : (k * 7 + i * 3) % 10));
            num[digits] = '\0';
            if (k == 2) memset(num, '9', (size_t)digits);
            errno = 0;
            long long want = strtoll(num, NULL, 10);
            bool fits = errno == 0;
            CHECK(read_int(num, &v) == fits && (!fits || v == want));
            snprintf(doc, sizeof doc, "[%s,\"tail-of-doc\"]", num);
            mst_json_reader r;
            mst_json_reader_init(&r, doc, strlen(doc), 32);
            CHECK(mst_json_array_begin(&r) && mst_json_array_next(&r) == 1);
            CHECK(mst_json_read_i64(&r, &v) == fits && (!fits || v == want));
            /* Negative, and followed by a fraction, inside a document. */
            snprintf(doc, sizeof doc, "[-%s,\"tail-of-doc\"]", num);
            errno = 0;
            want = -strtoll(num, NULL, 10);
            fits = errno == 0; /* the magnitude fits, so its negation does */
            mst_json_reader_init(&r, doc, strlen(doc), 32);
            CHECK(mst_json_array_begin(&r) && mst_json_array_next(&r) == 1);
            CHECK(mst_json_read_i64(&r, &v) == fits && (!fits || v == want));
            snprintf(doc, sizeof doc, "[%s.5,\"tail-of-doc\"]", num);
            mst_json_reader_init(&r, doc, strlen(doc), 32);
            CHECK(mst_json_array_begin(&r) && mst_json_array_next(&r) == 1);
            CHECK(!mst_json_read_i64(&r, &v));
            /* A leading zero is not an integer at any length. */
            snprintf(doc, sizeof doc, "[0%s,\"tail-of-doc\"]", num);
            mst_json_reader_init(&r, doc, strlen(doc), 32);
            CHECK(mst_json_array_begin(&r) && mst_json_array_next(&r) == 1);
            CHECK(!mst_json_read_i64(&r, &v));
        }
    }
    CHECK(!read_int("12345678.5", &v));
    CHECK(!read_int("1234567812345678e1", &v));
    mst_json_slice s = {"42", 2};
    CHECK(mst_json_slice_to_i64(&s, &v) && v == 42);
    s = (mst_json_slice){"4.2", 3};
    CHECK(!mst_json_slice_to_i64(&s, &v));
    s = (mst_json_slice){"\"4\"", 3};
    CHECK(!mst_json_slice_to_i64(&s, &v));
}

static void test_object_iteration_and_raw(void) {
    const char *doc = "{ \"a\\u0041\" : \"x\\ty\\u00e9\\ud83d\\ude00\" , \"n\": -7,\"r\": [1, {\"z\":null}] }";
    mst_json_reader r;
    mst_arena arena;
    mst_arena_init(&arena);
    mst_json_reader_init(&r, doc, strlen(doc), 32);
    CHECK(mst_json_peek(&r) == MST_JSON_OBJECT);
    CHECK(mst_json_object_begin(&r));
    mst_str k, v;
    CHECK_EQ_INT(mst_json_object_next(&r), 1);
    CHECK(mst_json_read_key(&r, &arena, &k));
    CHECK_EQ_STR(k.ptr, "aA");
    CHECK_EQ_INT(k.len, 2);
    CHECK(mst_json_peek(&r) == MST_JSON_STRING);
    CHECK(mst_json_read_str(&r, &arena, &v));
    CHECK_EQ_STR(v.ptr, "x\ty\xc3\xa9\xf0\x9f\x98\x80");
    CHECK_EQ_INT(mst_json_object_next(&r), 1);
    char kb[4];
    size_t kl;
    bool fits;
    CHECK(mst_json_read_key_into(&r, kb, sizeof kb, &kl, &fits));
    CHECK(fits && kl == 1 && kb[0] == 'n');
    int64_t n;
    CHECK(mst_json_read_i64(&r, &n) && n == -7);
    CHECK_EQ_INT(mst_json_object_next(&r), 1);
    CHECK(mst_json_read_key(&r, &arena, &k));
    mst_json_slice raw;
    CHECK(mst_json_read_raw(&r, &raw));
    CHECK(raw.len == strlen("[1, {\"z\":null}]") && memcmp(raw.ptr, "[1, {\"z\":null}]", raw.len) == 0);
    CHECK_EQ_INT(mst_json_object_next(&r), 0);
    CHECK(mst_json_finish(&r));

    /* A key longer than the buffer is validated, consumed and flagged. */
    const char *doc2 = "{\"longer_than_four\":1}";
    mst_json_reader_init(&r, doc2, strlen(doc2), 32);
    CHECK(mst_json_object_begin(&r));
    CHECK_EQ_INT(mst_json_object_next(&r), 1);
    CHECK(mst_json_read_key_into(&r, kb, sizeof kb, &kl, &fits));
    CHECK(!fits && kl == 16);
    CHECK(mst_json_read_raw(&r, &raw));
    CHECK_EQ_INT(mst_json_object_next(&r), 0);
    CHECK(mst_json_finish(&r));

    /* \u0000 yields an embedded NUL with an exact length. */
    const char *doc3 = "\"a\\u0000b\"";
    mst_json_reader_init(&r, doc3, strlen(doc3), 32);
    CHECK(mst_json_read_str(&r, &arena, &v));
    CHECK(v.len == 3 && memcmp(v.ptr, "a\0b", 4) == 0);
    mst_arena_release(&arena);
}

static void test_errors_are_sticky_and_located(void) {
    const char *doc = "{\"a\":[1,2,}";
    mst_json_reader r;
    mst_json_slice raw;
    mst_json_reader_init(&r, doc, strlen(doc), 32);
    CHECK(!mst_json_read_raw(&r, &raw));
    CHECK(r.err != NULL);
    CHECK_EQ_INT(r.err_off, 10);
    CHECK(!mst_json_finish(&r));
    CHECK(mst_json_peek(&r) == MST_JSON_INVALID);
    CHECK_EQ_INT(mst_json_object_next(&r), -1);
}

static const mst_test_case TESTS[] = {
    {"accepts_valid_documents", test_accepts_valid_documents},
    {"rejects_invalid_documents", test_rejects_invalid_documents},
    {"utf8_strictness", test_utf8_strictness},
    {"truncations_never_read_past_end", test_truncations_never_read_past_end},
    {"depth_limit", test_depth_limit},
    {"integers", test_integers},
    {"object_iteration_and_raw", test_object_iteration_and_raw},
    {"errors_are_sticky_and_located", test_errors_are_sticky_and_located},
};

MST_TEST_MAIN(TESTS)
