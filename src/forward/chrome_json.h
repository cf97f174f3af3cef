/*
 * chrome_json.h — the number and string fast paths of the Chrome Trace
 * writer (chrome_trace.c): decimal digit formatting (two digits per table
 * lookup, eight per 64-bit division), timestamps as exact decimal
 * microseconds, and the raw_* (unchecked, into room the caller reserved)
 * and put_* (checked) JSON appenders. Every event has several numbers and
 * short strings, and the generic appenders were ~15% of the forwarder's
 * time, so everything here is inline: this is the per-span path. The JSON
 * escaping rules stay in buf.c (mst_json_plain_prefix decides what is
 * plain for both). Private to the Chrome Trace writer.
 */
#ifndef MST_FORWARD_CHROME_JSON_H
#define MST_FORWARD_CHROME_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "wire/buf.h"

static const char digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Eight decimal digits of x (< 10^8) at p, two per table lookup. */
static inline void put8_digits(char *p, uint32_t x) {
    uint32_t hi = x / 10000, lo = x % 10000;
    memcpy(p, digits2 + 2 * (hi / 100), 2);
    memcpy(p + 2, digits2 + 2 * (hi % 100), 2);
    memcpy(p + 4, digits2 + 2 * (lo / 100), 2);
    memcpy(p + 6, digits2 + 2 * (lo % 100), 2);
}

/* Decimal digits of v written to end at `end`; returns the first digit.
 * At most 20 bytes before `end`. Eight digits per 64-bit division, then
 * 32-bit arithmetic (timestamps in us have 16 digits). */
static inline char *u64_digits(char *end, uint64_t v) {
    while (v >= 100000000u) {
        uint32_t lo = (uint32_t)(v % 100000000u);
        v /= 100000000u;
        end -= 8;
        put8_digits(end, lo);
    }
    uint32_t x = (uint32_t)v;
    while (x >= 100) {
        unsigned r = x % 100;
        x /= 100;
        end -= 2;
        memcpy(end, digits2 + 2 * r, 2);
    }
    if (x >= 10) {
        end -= 2;
        memcpy(end, digits2 + 2 * x, 2);
    } else {
        *--end = (char)('0' + x);
    }
    return end;
}

/* Number text is built in a 64-byte scratch, right-aligned at NUM_END, and
 * copied out as a fixed NUM_COPY bytes (two vector moves, no length-
 * dependent memcpy call); only its real length is kept, so the event's
 * reserved room includes NUM_COPY of slack per number (EV_NUM). */
#define NUM_END 28
#define NUM_COPY 32
#define EV_NUM (NUM_COPY + 8)

static inline void raw_num(mst_buf *b, const char *p, const char *end) {
    memcpy(b->data + b->len, p, NUM_COPY);
    b->len += (size_t)(end - p);
}

/* Unchecked signed decimal (same text as mst_buf_append_i64); the caller
 * reserved EV_NUM bytes. */
static inline void raw_i64(mst_buf *b, int64_t v) {
    char tmp[64];
    char *end = tmp + NUM_END;
    bool neg = v < 0;
    char *p = u64_digits(end, neg ? 0u - (uint64_t)v : (uint64_t)v);
    if (neg) *--p = '-';
    raw_num(b, p, end);
}

/* Unchecked nanoseconds as exact decimal microseconds ("1000", "1.5",
 * "-0.001"); the caller reserved EV_NUM bytes. */
static inline void raw_us(mst_buf *b, bool neg, uint64_t ns) {
    char tmp[64];
    char *end = tmp + NUM_END - 4; /* the fraction goes after it */
    char *p = u64_digits(end, ns / 1000);
    if (neg && ns) *--p = '-';
    unsigned frac = (unsigned)(ns % 1000);
    if (frac) {
        end[0] = '.';
        end[1] = (char)('0' + frac / 100);
        memcpy(end + 2, digits2 + 2 * (frac % 100), 2);
        end += 4;
        while (end[-1] == '0') end--;
    }
    raw_num(b, p, end);
}

static inline void raw_ts(mst_buf *b, int64_t ns) {
    bool neg = ns < 0;
    raw_us(b, neg, neg ? 0u - (uint64_t)ns : (uint64_t)ns);
}

/* Checked signed decimal (M events). */
static inline void put_i64(mst_buf *b, int64_t v) {
    if (mst_buf_reserve(b, EV_NUM)) raw_i64(b, v);
}

/* Unchecked bytes / literal into reserved room. */
static inline void raw(mst_buf *b, const void *p, size_t n) {
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
#define RLIT(b, s) raw((b), (s), sizeof(s) - 1)

/* A JSON string into room reserved for `need` bytes (n + 2 of them for
 * this string): plain text is copied between quotes; anything else goes to
 * the escaper in buf.c (which owns the escaping rules, reserves for itself
 * and may write up to 6n + 2 bytes), after which `need` is reserved again
 * for the rest of the event. False when out of memory (b->failed). */
static inline bool raw_str(mst_buf *b, const char *s, size_t n, size_t need) {
    if (mst_json_plain_prefix((const uint8_t *)s, n) == n) {
        uint8_t *d = b->data + b->len;
        d[0] = '"';
        memcpy(d + 1, s, n);
        d[n + 1] = '"';
        b->len += n + 2;
        return true;
    }
    mst_buf_append_json_str(b, s, n);
    return mst_buf_reserve(b, need);
}

/* A lowercase-hex id (as the decoder leaves it) of at most `max` digits,
 * quoted; the usual full length is copied as a fixed-size block. False
 * when out of memory. */
static inline bool raw_id(mst_buf *b, const char *id, size_t max, size_t need) {
    size_t n = strnlen(id, max);
    if (n == max && mst_json_plain_prefix((const uint8_t *)id, n) == n) {
        uint8_t *d = b->data + b->len;
        d[0] = '"';
        if (max == 32) memcpy(d + 1, id, 32);
        else memcpy(d + 1, id, 16);
        d[max + 1] = '"';
        b->len += max + 2;
        return true;
    }
    return raw_str(b, id, n, need);
}

/* A JSON string: short plain-ASCII text (the usual name, key, id) is
 * copied between quotes in place; anything else goes to the escaper in
 * buf.c, which owns the escaping rules (mst_json_plain_prefix decides what
 * is plain for both). */
static inline void put_str(mst_buf *b, const char *s, size_t n) {
    if (n <= 256 && mst_json_plain_prefix((const uint8_t *)s, n) == n &&
        mst_buf_reserve(b, n + 2)) {
        uint8_t *d = b->data + b->len;
        d[0] = '"';
        memcpy(d + 1, s, n);
        d[n + 1] = '"';
        b->len += n + 2;
        return;
    }
    mst_buf_append_json_str(b, s, n);
}

#define LIT(b, s) mst_buf_append((b), (s), sizeof(s) - 1)
#endif /* MST_FORWARD_CHROME_JSON_H */
