/*
 * json_scan.h — the byte-level JSON scanners shared by the strict pull
 * reader (json_reader.c) and the packet decoder's fast path
 * (perfetto_packet_fast.c): runs of plain string bytes, the RFC 8259
 * number grammar and int64 parsing. Why one copy: the fast path must accept
 * exactly what the reader accepts, so both use the same code for each
 * token; static inline because both run it for every token of a packet.
 */
#ifndef MST_WIRE_JSON_SCAN_H
#define MST_WIRE_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "wire/buf.h" /* mst_json_plain_prefix: one definition of a plain JSON byte */

#ifdef __SSE2__
/* One bit per byte of the 16 at p that is not plain (a control byte, a
 * byte >= 0x80, '"' or '\\'): one signed compare below 0x20 catches both
 * control bytes and bytes >= 0x80 (negative as int8), plus two equalities. */
static inline unsigned mst_json_special16(const uint8_t *p) {
    const __m128i lim = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'),
                  bslash = _mm_set1_epi8('\\');
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i m = _mm_or_si128(_mm_cmplt_epi8(x, lim),
                             _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)));
    return (unsigned)_mm_movemask_epi8(m);
}
#endif

/* Skips whole 16-byte blocks of plain bytes from p (SSE2; none without
 * it): returns the first other byte's address with *found set, or where
 * fewer than 16 bytes remain. */
static inline const uint8_t *mst_json_plain_blocks16(const uint8_t *p, const uint8_t *end,
                                                     bool *found) {
#ifdef __SSE2__
    while (end - p >= 16) {
        unsigned bits = mst_json_special16(p);
        if (bits) {
            *found = true;
            return p + __builtin_ctz(bits);
        }
        p += 16;
    }
#else
    (void)end;
#endif
    *found = false;
    return p;
}

/* Skips plain bytes from p; returns the first other byte's address or end.
 * Whole blocks are tested while a block remains (16 bytes with SSE2, else
 * 8-byte words, mst_json_special_mask8): a string is followed by at least
 * its closing quote and usually the rest of the input, so nearly every
 * string is scanned with block loads only and the byte loop of
 * mst_json_plain_prefix runs just at the very end of the input. */
static inline const uint8_t *mst_json_plain_run(const uint8_t *p, const uint8_t *end) {
    bool found;
    p = mst_json_plain_blocks16(p, end, &found);
    if (found) return p;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t m = mst_json_special_mask8(w);
        if (m) return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
#endif
    return p + mst_json_plain_prefix(p, (size_t)(end - p));
}

/* mst_json_plain_run for a caller that guarantees the 16 bytes before
 * `end` are readable (the packet decoder: its JSON follows a 17-byte
 * magic). The last partial block is then one load ending at `end`, its
 * bits for bytes before p shifted out, instead of word and byte loops:
 * the strings near the end of a packet (the last link's ids) cost one
 * block like the others. */
static inline const uint8_t *mst_json_plain_run_tail16(const uint8_t *p, const uint8_t *end) {
#ifdef __SSE2__
    bool found;
    p = mst_json_plain_blocks16(p, end, &found);
    if (found || p == end) return p;
    unsigned bits = mst_json_special16(end - 16) >> (16 - (end - p));
    return bits ? p + __builtin_ctz(bits) : end;
#else
    return mst_json_plain_run(p, end);
#endif
}

/* The end of the number that starts at p (RFC 8259 grammar: '-'? int frac?
 * exp?), or NULL with *err set to the reason and *at to the offending
 * byte. */
static inline const uint8_t *mst_json_number_end(const uint8_t *p, const uint8_t *end,
                                                 const char **err, const uint8_t **at) {
    if (p < end && *p == '-') p++;
    if (p >= end) { *err = "truncated number"; *at = p; return NULL; }
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        *err = "invalid number";
        *at = p;
        return NULL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') {
            *err = "digit expected after '.'";
            *at = p;
            return NULL;
        }
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') {
            *err = "digit expected in exponent";
            *at = p;
            return NULL;
        }
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    return p;
}

/* The value of 8 ASCII digits loaded little-endian (first digit in the low
 * byte): pairs, then quads, then the two halves are combined. */
static inline uint64_t mst_json_value8(uint64_t w) {
    w -= 0x3030303030303030ull;
    w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFull;
    w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFull;
    return (w * 10000 + (w >> 32)) & 0xFFFFFFFFull;
}

/* Integer syntax at [p, end), a byte at a time: see mst_json_parse_int. */
static inline int mst_json_parse_int_bytes(const uint8_t *p, const uint8_t *end, int64_t *out,
                                           const uint8_t **stop) {
    bool neg = false;
    if (p < end && *p == '-') { neg = true; p++; }
    if (p >= end || (unsigned)(*p - '0') > 9) return 1;
    if (*p == '0' && p + 1 < end && (unsigned)(p[1] - '0') <= 9) return 1;
    const uint8_t *first = p;
    uint64_t v = 0;
    while (p < end && (unsigned)(*p - '0') <= 9) {
        if (p - first < 19) v = v * 10 + (unsigned)(*p - '0');
        p++;
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return 1;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    if (p - first > 19 || v > limit) return 2;
    *out = neg ? (int64_t)(0u - v) : (int64_t)v;
    *stop = p;
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* How many of the 8 bytes of w (first byte in the low byte) lead as ASCII
 * digits, 0..8. A byte is a digit when its high nibble is 3 and adding 6
 * does not carry out of its low nibble; a carry can only come out of a
 * non-digit byte and only disturbs bytes after it, so the first non-digit
 * is found exactly. */
static inline unsigned mst_json_digit_run8(uint64_t w) {
    const uint64_t hi = 0xF0F0F0F0F0F0F0F0ull, three = 0x3030303030303030ull;
    uint64_t nd = ((w & hi) ^ three) | (((w + 0x0606060606060606ull) & hi) ^ three);
    return nd ? (unsigned)__builtin_ctzll(nd) >> 3 : 8;
}

/* The value of the first k (1..8) digits of w: they are shifted to the top
 * and '0's fill in below (leading zeros), then all 8 are converted. */
static inline uint64_t mst_json_value_first(uint64_t w, unsigned k) {
    if (k < 8) w = (w << (64 - 8 * k)) | (0x3030303030303030ull >> (8 * k));
    return mst_json_value8(w);
}
#endif

/* Integer syntax at [p, end): 0 ok (*stop = first byte after), 1 not an
 * integer (not a number, fraction, exponent, leading zero), 2 overflow.
 * Why no per-digit overflow test: int64 has 19 digits, and any 19-digit
 * value fits uint64 (< 10^19 < 2^64), so the digits are accumulated
 * unchecked and compared with the limit once; 20 or more digits (no
 * leading zeros are allowed) always overflow.
 * Digits are taken 8 per 64-bit load (a run's length from
 * mst_json_digit_run8, its value from mst_json_value_first): a small
 * number is one load, a 19-digit timestamp three, where a byte loop took
 * a step per digit. Near the end of the input (fewer than 8 bytes per
 * load), and past 16 digits, the byte loop finishes. */
static inline int mst_json_parse_int(const uint8_t *p, const uint8_t *end, int64_t *out,
                                     const uint8_t **stop) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    static const uint64_t pow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                      100000000};
    const uint8_t *s = p;
    bool neg = false;
    if (p < end && *p == '-') { neg = true; p++; }
    const uint8_t *first = p;
    uint64_t v = 0;
    unsigned total = 0;
    for (int block = 0; block < 3; block++) {
        if (end - p < 8) return mst_json_parse_int_bytes(s, end, out, stop);
        uint64_t w;
        memcpy(&w, p, 8);
        unsigned k = mst_json_digit_run8(w);
        if (k == 0) break;
        v = v * pow10[k] + mst_json_value_first(w, k);
        total += k;
        p += k;
        if (k < 8) break;
        if (block == 2) return mst_json_parse_int_bytes(s, end, out, stop); /* 24+ digits */
    }
    if (total == 0) return 1;
    if (*first == '0' && total > 1) return 1; /* leading zero */
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return 1;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    if (total > 19 || v > limit) return 2;
    *out = neg ? (int64_t)(0u - v) : (int64_t)v;
    *stop = p;
    return 0;
#else
    return mst_json_parse_int_bytes(p, end, out, stop);
#endif
}

#endif /* MST_WIRE_JSON_SCAN_H */
