/*
 * chrome_json.h — the number and string fast paths of the Chrome Trace
 * writer (chrome_trace.c): decimal digits (eight per SWAR word below 10^8,
 * else two per table lookup and eight per 64-bit division), timestamps as
 * exact decimal microseconds, hex text 16 digits at once, the cursor
 * writers (cur_*: unchecked, at a pointer into room the caller reserved),
 * and the raw_* (the same on an mst_buf) and put_* (checked) JSON
 * appenders. Every event has several numbers and
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

#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* The eight decimal digits of x (< 10^8, leading zeros included) as ASCII
 * in one word, first digit in the lowest byte (SWAR: the two halves of
 * four digits, then pairs, then single digits, each split by a multiply
 * and shift exact for its range: y * 10486 >> 20 == y / 100 for y < 10^4,
 * z * 103 >> 10 == z / 10 for z < 100). About 15 instructions against
 * four table lookups and their divisions. */
static inline uint64_t digits8_word(uint32_t x) {
    uint64_t v = (uint64_t)(x / 10000) | ((uint64_t)(x % 10000) << 32);
    uint64_t q = ((v * 10486) >> 20) & 0x0000007F0000007Full;
    v = q | ((v - q * 100) << 16);
    q = ((v * 103) >> 10) & 0x000F000F000F000Full;
    v = q | ((v - q * 10) << 8);
    return v + 0x3030303030303030ull;
}

/* x (< 10^8) without leading zeros ("0" for 0) at p: writes 8 bytes,
 * returns how many are the number's. */
static inline size_t put_u8digits(char *p, uint32_t x) {
    uint64_t w = digits8_word(x);
    unsigned lead = x ? (unsigned)__builtin_ctzll(w ^ 0x3030303030303030ull) >> 3 : 7;
    w >>= 8 * lead;
    memcpy(p, &w, 8);
    return 8 - lead;
}
#endif

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
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Numbers below 10^8 and timestamps are written as SWAR words, in place
 * (each writes at most 21 bytes there: within EV_NUM). */
#define MST_CHROME_SWAR_DIGITS 1
#endif

/* Cursor writers: each writes at o, into room the caller reserved, and
 * returns the byte after what it wrote. Why a cursor: an event is ~20
 * pieces, and a local pointer stays in a register where b->len (which a
 * store through b->data might alias) was loaded and stored per piece. */
static inline char *cur_mem(char *o, const void *p, size_t n) {
    memcpy(o, p, n);
    return o + n;
}
#define CLIT(o, s) cur_mem((o), (s), sizeof(s) - 1)

/* Number text right-aligned at `end` in a scratch, copied as a fixed
 * NUM_COPY bytes. */
static inline char *cur_num(char *o, const char *p, const char *end) {
    memcpy(o, p, NUM_COPY);
    return o + (end - p);
}

/* Signed decimal (same text as mst_buf_append_i64), EV_NUM bytes of room.
 * Numbers below 10^8 (pids, tids, kinds: nearly all) are one SWAR word
 * written in place. */
static inline char *cur_i64(char *o, int64_t v) {
#ifdef MST_CHROME_SWAR_DIGITS
    if (v >= 0 && v < 100000000) return o + put_u8digits(o, (uint32_t)v);
#endif
    char tmp[64];
    char *end = tmp + NUM_END;
    bool neg = v < 0;
    char *p = u64_digits(end, neg ? 0u - (uint64_t)v : (uint64_t)v);
    if (neg) *--p = '-';
    return cur_num(o, p, end);
}

/* Nanoseconds as exact decimal microseconds ("1000", "1.5", "-0.001"),
 * EV_NUM bytes of room. */
static inline char *cur_us(char *o, bool neg, uint64_t ns) {
    uint64_t us = ns / 1000;
    unsigned frac = (unsigned)(ns % 1000);
#ifdef MST_CHROME_SWAR_DIGITS
    /* Up to 16 integer digits (every int64 of ns: < 9.3 * 10^15 us) as
     * one or two SWAR words written in place, then the fraction. */
    if (us < 10000000000000000ull) {
        if (neg && ns) *o++ = '-';
        if (us < 100000000u) {
            o += put_u8digits(o, (uint32_t)us);
        } else {
            o += put_u8digits(o, (uint32_t)(us / 100000000u));
            uint64_t lo = digits8_word((uint32_t)(us % 100000000u));
            memcpy(o, &lo, 8);
            o += 8;
        }
        if (frac) {
            o[0] = '.';
            o[1] = (char)('0' + frac / 100);
            memcpy(o + 2, digits2 + 2 * (frac % 100), 2);
            o += 4;
            while (o[-1] == '0') o--;
        }
        return o;
    }
#endif
    char tmp[64];
    char *end = tmp + NUM_END - 4; /* the fraction goes after it */
    char *p = u64_digits(end, us);
    if (neg && ns) *--p = '-';
    if (frac) {
        end[0] = '.';
        end[1] = (char)('0' + frac / 100);
        memcpy(end + 2, digits2 + 2 * (frac % 100), 2);
        end += 4;
        while (end[-1] == '0') end--;
    }
    return cur_num(o, p, end);
}

static inline char *cur_ts(char *o, int64_t ns) {
    bool neg = ns < 0;
    return cur_us(o, neg, neg ? 0u - (uint64_t)ns : (uint64_t)ns);
}

/* A JSON string known to be plain (mst_pf_span.plain_text) between
 * quotes: no check. */
static inline char *cur_plain_str(char *o, const char *s, size_t n) {
    o[0] = '"';
    memcpy(o + 1, s, n);
    o[n + 1] = '"';
    return o + n + 2;
}

/* The cursor of b's room, and b after writing up to o. */
static inline char *cur_of(mst_buf *b) { return (char *)b->data + b->len; }
static inline void cur_done(mst_buf *b, const char *o) { b->len = (size_t)(o - (char *)b->data); }

/* The same into a buffer with reserved room (b->len moves). */
static inline void raw_i64(mst_buf *b, int64_t v) { cur_done(b, cur_i64(cur_of(b), v)); }
static inline void raw_us(mst_buf *b, bool neg, uint64_t ns) { cur_done(b, cur_us(cur_of(b), neg, ns)); }
static inline void raw_ts(mst_buf *b, int64_t ns) { cur_done(b, cur_ts(cur_of(b), ns)); }

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

/* The 16 lowercase hex digits of v, most significant first (flow ids,
 * the bytes of a table key). With SSE2 the 16 nibbles are spread to bytes
 * and turned into digits at once, instead of a table lookup per digit. */
static inline void hex16_text(uint64_t v, char out[16]) {
#if defined(__SSE2__) && defined(__x86_64__)
    __m128i b = _mm_cvtsi64_si128((long long)__builtin_bswap64(v)); /* first byte first */
    __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
    __m128i nib = _mm_unpacklo_epi8(hi, lo); /* high nibble of each byte first */
    __m128i letter = _mm_cmpgt_epi8(nib, _mm_set1_epi8(9));
    __m128i text = _mm_add_epi8(_mm_add_epi8(nib, _mm_set1_epi8('0')),
                                _mm_and_si128(letter, _mm_set1_epi8('a' - '0' - 10)));
    _mm_storeu_si128((__m128i *)(void *)out, text);
#else
    static const char hx[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, v >>= 4) out[i] = hx[v & 15];
#endif
}

/* The hex text of 8 bytes (a table key's part: its bytes in order). */
static inline void hex_bytes8(const uint8_t p[8], char out[16]) {
    uint64_t v;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, p, 8);
    v = __builtin_bswap64(v); /* first byte most significant */
#else
    v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
#endif
    hex16_text(v, out);
}

/* A decoded id (mst_pf_span.plain_text: exactly `n` lowercase hex digits,
 * or none for a root's parent) quoted. */
static inline char *cur_decoded_id(char *o, const char *id, size_t n) {
    o[0] = '"';
    if (!id[0]) {
        o[1] = '"';
        return o + 2;
    }
    if (n == 32) memcpy(o + 1, id, 32);
    else memcpy(o + 1, id, 16);
    o[n + 1] = '"';
    return o + n + 2;
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
