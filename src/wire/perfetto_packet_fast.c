/*
 * perfetto_packet_fast.c — the fast path of the packet decoder declared in
 * perfetto_packet_fast.h: the JSON of one packet decoded in a single pass
 * with the cursor in a register, for the forwarder's epoll thread (whose
 * decoding bounds the daemon's spans/s; the general decoder's per-member
 * pull-reader calls were most of its cost).
 *
 * What it handles inline: the documented fields in any order (the next
 * key is predicted in encoder order and checked with 16-byte compares; a
 * miss scans the key), plain (printable ASCII, no escape) keys, ids as
 * exactly 32/16 hex digits (16 per SSE2 block), integers (up to 8 digits
 * per 64-bit load), attribute values that are plain strings, numbers,
 * literals or flat arrays of those, and whitespace between tokens (tried
 * only where the expected byte is missing). Less common values take the
 * strict pull reader on the spot (a string with escapes or UTF-8, any other
 * container as an attribute value, an attribute key with escapes or UTF-8),
 * so they are exactly as strict as the general decoder. Everything else
 * declines, and the caller decodes again with the general decoder: a
 * top-level or link key that is not plain, a duplicate key, an id with
 * escapes, and every error (so the error codes and messages are the
 * general decoder's own).
 *
 * Token scanners are json_scan.h's, the same the reader uses.
 */
#include "wire/perfetto_packet_fast.h"

#include <string.h>

#include "wire/hex8.h"
#include "wire/json_reader.h"
#include "wire/json_scan.h"
#include "wire/perfetto_span_ranges.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__

/* Depth the general decoder's reader is at when it reads a value: the
 * packet object is 1, attributes objects 2, a link object 3 (inside the
 * links array). A value may nest MST_PF_MAX_DEPTH minus that. */
enum { DEPTH_TOP = 1, DEPTH_ATTRS = 2, DEPTH_LINK = 3 };

static inline uint64_t load8(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* Rare: whitespace between tokens (encoders write compact JSON), so every
 * token is first tried where it is expected and this runs only when that
 * fails. */
__attribute__((noinline)) static const uint8_t *skip_ws_slow(const uint8_t *p,
                                                             const uint8_t *end) {
    while (p < end && is_ws(*p)) p++;
    return p;
}

/* The byte after `c` at p (whitespace allowed before it), or NULL. */
static inline const uint8_t *expect(const uint8_t *p, const uint8_t *end, uint8_t c) {
    if (__builtin_expect(p < end && *p == c, 1)) return p + 1;
    p = skip_ws_slow(p, end);
    return (p < end && *p == c) ? p + 1 : NULL;
}

/* The closing quote of the plain string whose content starts at s, or NULL
 * (a byte needing a check or unescaping, or no closing quote). */
static inline const uint8_t *plain_string_end(const uint8_t *s, const uint8_t *end) {
    const uint8_t *q = mst_json_plain_run_tail16(s, end);
    return (q < end && *q == '"') ? q : NULL;
}

/* ---- the pull reader, on the spot, for less common tokens */

/* A reader over [p, end) allowing `depth_left` levels of nesting. */
static inline void reader_at(mst_json_reader *r, const uint8_t *p, const uint8_t *end,
                             unsigned depth_left) {
    mst_json_reader_init(r, p, (size_t)(end - p), depth_left);
}

/* Any value at p, validated by the reader; its raw text into *out. Returns
 * the byte after it, or NULL. */
__attribute__((noinline)) static const uint8_t *general_raw(const uint8_t *p, const uint8_t *end,
                                                            unsigned depth_left,
                                                            mst_json_slice *out) {
    mst_json_reader r;
    reader_at(&r, p, end, depth_left);
    return mst_json_read_raw(&r, out) ? r.p : NULL;
}

/* A string at p through the reader: unescaped into the arena and
 * NUL-terminated when `copy` (name, category), else as a slice into the
 * input or, with escapes, the arena (attribute keys, as the general
 * decoder reads them). Returns the byte after it, or NULL. A result that
 * is not plain JSON text clears span->plain_text (mst_pf_span), as the
 * general decoder's check of the same string would. */
__attribute__((noinline)) static const uint8_t *general_str(const uint8_t *p, const uint8_t *end,
                                                            mst_arena *arena, bool copy,
                                                            mst_str *out, mst_pf_span *span) {
    mst_json_reader r;
    reader_at(&r, p, end, 1);
    bool ok = copy ? mst_json_read_str(&r, arena, out) : mst_json_read_str_slice(&r, arena, out);
    if (ok && mst_json_plain_prefix((const uint8_t *)out->ptr, out->len) != out->len)
        span->plain_text = false;
    return ok ? r.p : NULL;
}

/* ---- values */

/* The end of an integer of 1..7 digits at p ('-' allowed) from one 8-byte
 * load, or NULL for anything else (a longer number, a fraction or
 * exponent, a leading zero, too little input left for the load), which the
 * caller then scans in full with the shared scanners. *digits and *w get
 * the run for a caller that wants its value. */
static inline const uint8_t *short_int_run(const uint8_t *p, const uint8_t *end, uint64_t *w,
                                           unsigned *digits) {
    const uint8_t *d = p + (p < end && *p == '-');
    if (end - d < 8) return NULL; /* the load, and d[k] for k <= 7 */
    *w = load8(d);
    unsigned k = mst_json_digit_run8(*w);
    if (k - 1u >= 7u || (d[0] == '0' && k > 1)) return NULL;
    uint8_t c = d[k];
    if (c == '.' || c == 'e' || c == 'E') return NULL;
    *digits = k;
    return d + k;
}

static inline const uint8_t *short_int_end(const uint8_t *p, const uint8_t *end) {
    uint64_t w;
    unsigned k;
    return short_int_run(p, end, &w, &k);
}

/* The end of a literal (true, false, null) at p, or NULL. */
static inline const uint8_t *literal_end(const uint8_t *p, const uint8_t *end) {
    switch (*p) {
    case 't': return end - p >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f': return end - p >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n': return end - p >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default: return NULL;
    }
}

#ifdef __SSE2__
/* Whether the 16 bytes at p are four plain one-byte string items, the
 * first three followed by ',' and the last by `last` (',' or the array's
 * ']'): "1","1","1","1", (quotes at the even positions and nowhere else,
 * nothing else to check or unescape). Why: a decode step's step.tokens
 * item is "1", and at batch 256 those were most of a step record's array
 * items, a block test each. */
static inline bool four_one_byte_items(const uint8_t *p, uint8_t last) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    unsigned quotes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')));
    unsigned commas = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(',')));
    unsigned want = last == ',' ? 0x8888u : 0x0888u;
    return quotes == 0x5555u && (commas & want) == want && (last == ',' || p[15] == last) &&
           mst_json_special16(p) == 0x5555u;
}

/* From the opening quote at p, skips groups of four one-byte items while
 * the byte after each group is another item's opening quote: returns that
 * quote (p itself when no group is there), or the ',' or ']' after the
 * last closing quote of a group that ends the run of string items (as
 * string_items_end returns it). Reads 17 bytes per group, within end. */
static inline const uint8_t *one_byte_items_end(const uint8_t *p, const uint8_t *end) {
    while (end - p >= 17 && four_one_byte_items(p, ',')) {
        if (p[16] != '"') return p + 15;
        p += 16;
    }
    if (end - p >= 17 && four_one_byte_items(p, ']')) return p + 15; /* the array's last four */
    return p;
}

/* A run of plain string items in a flat array, from the item whose opening
 * quote is at p: each 16-byte block is tested once (mst_json_special16,
 * plain_string_end's test) for all the items in it, where plain_string_end
 * tests a block per item. Why: step.tokens at batch 256 is 256 items of
 * 3-5 bytes ("17",), a block each, and was most of a step record's decoding.
 * Returns the byte after the run's last closing quote (what follows it is
 * not ',' then '"'). NULL with *tail NULL: a byte that needs a check or
 * unescaping (the caller gives the array to the reader); NULL with *tail
 * set: fewer than 16 bytes were left for a block, *tail is the opening
 * quote of the item reached, which the caller reads by itself. */
static inline const uint8_t *string_items_end(const uint8_t *p, const uint8_t *end,
                                              const uint8_t **tail) {
    *tail = NULL;
    p = one_byte_items_end(p, end);
    if (*p != '"') return p; /* the ',' or ']' after four one-byte items */
    const uint8_t *s = p + 1; /* the current item's content */
    const uint8_t *b = s;     /* the block whose test is in m; b <= s < b + 16 */
    if (end - b < 16) goto near_end;
    unsigned m = mst_json_special16(b);
    for (;;) {
        unsigned bits = m & (0xFFFFu << (unsigned)(s - b));
        while (!bits) { /* the rest of the block is plain */
            b += 16;
            if (end - b < 16) goto near_end;
            m = bits = mst_json_special16(b);
        }
        const uint8_t *q = b + __builtin_ctz(bits);
        if (*q != '"') return NULL;
        const uint8_t *after = q + 1;
        if (end - after < 2 || after[0] != ',' || after[1] != '"') return after;
        bool one_byte = q == s + 1; /* then the next ones may be too */
        s = after + 2; /* at most b + 18 */
        if (one_byte && end - s >= 16) {
            const uint8_t *o = one_byte_items_end(s - 1, end);
            if (*o != '"') return o;
            if (o != s - 1) { /* groups skipped: a new block from o */
                s = o + 1;
                b = s;
                if (end - b < 16) goto near_end;
                m = mst_json_special16(b);
                continue;
            }
        }
        if (s - b >= 16) {
            b += 16;
            if (end - b < 16) goto near_end;
            m = mst_json_special16(b);
        }
    }
near_end:
    *tail = s - 1;
    return NULL;
}
#endif

/* The end of a flat array at p (its '['): items that are plain strings,
 * numbers or literals, separated by bare ','. NULL for anything else (a
 * nested container, a string to check or unescape, whitespace, an error),
 * and the caller reads the array with the reader, which then accepts or
 * reports it as before: what is accepted here is exactly what the reader
 * accepts (the same scanners, json_scan.h; one level of nesting, within
 * every caller's depth). Why: a step record's lists (request.ids,
 * step.tokens: 256 items each at batch 256) were 90 % of its decoding
 * through the reader's per-item calls. */
static const uint8_t *flat_array_end(const uint8_t *p, const uint8_t *end) {
    p++;
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        if (p >= end) return NULL;
        const uint8_t *q;
        if (*p == '"') {
#ifdef __SSE2__
            const uint8_t *tail;
            q = string_items_end(p, end, &tail);
            if (!q) {
                if (!tail) return NULL;
                p = tail;
            }
#else
            q = NULL;
#endif
            if (!q) {
                q = plain_string_end(p + 1, end);
                if (!q) return NULL;
                q++;
            }
        } else if (*p == '-' || (unsigned)(*p - '0') <= 9) {
            q = short_int_end(p, end);
            if (!q) {
                const char *msg;
                const uint8_t *at;
                q = mst_json_number_end(p, end, &msg, &at);
                if (!q) return NULL;
            }
        } else {
            q = literal_end(p, end);
            if (!q) return NULL;
        }
        if (q >= end) return NULL;
        if (*q == ']') return q + 1;
        if (*q != ',') return NULL;
        p = q + 1;
    }
}

/* The raw text of any value at p into *out; returns the byte after it or
 * NULL. Plain strings, numbers, literals and flat arrays inline; the rest
 * through the reader. */
static inline __attribute__((always_inline)) const uint8_t *
read_raw(const uint8_t *p, const uint8_t *end, unsigned depth, mst_json_slice *out) {
    const uint8_t *q;
    const char *msg;
again:
    if (p >= end) return NULL;
    switch (*p) {
    case ' ': case '\t': case '\n': case '\r':
        p = skip_ws_slow(p, end);
        goto again;
    case '"':
        q = plain_string_end(p + 1, end);
        if (!q) return general_raw(p, end, MST_PF_MAX_DEPTH - depth, out);
        q++;
        break;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0) return NULL;
        q = p + 4;
        break;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0) return NULL;
        q = p + 5;
        break;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0) return NULL;
        q = p + 4;
        break;
    case '[':
        q = flat_array_end(p, end);
        if (!q) return general_raw(p, end, MST_PF_MAX_DEPTH - depth, out);
        break;
    case '{': return general_raw(p, end, MST_PF_MAX_DEPTH - depth, out);
    default:
        q = short_int_end(p, end);
        if (q) break;
        q = mst_json_number_end(p, end, &msg, &q);
        if (!q) return NULL;
        break;
    }
    out->ptr = (const char *)p;
    out->len = (size_t)(q - p);
    return q;
}

/* The end of a non-negative integer of 16..19 digits at p (a nanosecond
 * timestamp has 19) from three 8-byte loads, its value in *out; NULL for
 * anything else, which the caller parses in full. */
static inline const uint8_t *long_int(const uint8_t *p, const uint8_t *end, int64_t *out) {
    static const uint64_t pow10[4] = {1, 10, 100, 1000};
    if (end - p < 25 || p[0] == '0') return NULL; /* p[k3 + 16] is read for k3 <= 3 */
    uint64_t w1 = load8(p), w2 = load8(p + 8), w3 = load8(p + 16);
    if (mst_json_digit_run8(w1) != 8 || mst_json_digit_run8(w2) != 8) return NULL;
    unsigned k3 = mst_json_digit_run8(w3);
    if (k3 > 3) return NULL;
    uint8_t c = p[16 + k3];
    if (c == '.' || c == 'e' || c == 'E') return NULL;
    uint64_t v = (mst_json_value8(w1) * 100000000u + mst_json_value8(w2)) * pow10[k3];
    if (k3) v += mst_json_value_first(w3, k3);
    if (v > (uint64_t)INT64_MAX) return NULL; /* < 10^19: no wrap above */
    *out = (int64_t)v;
    return p + 16 + k3;
}

/* An integer field (int64, integer syntax): the byte after it or NULL.
 * Short ones (kind, status, pids) from one load, timestamps from three;
 * the rest through the shared parser. */
static inline const uint8_t *read_int(const uint8_t *p, const uint8_t *end, int64_t *out) {
    uint64_t w;
    unsigned k;
    const uint8_t *q = short_int_run(p, end, &w, &k);
    if (q) {
        int64_t v = (int64_t)mst_json_value_first(w, k);
        *out = *p == '-' ? -v : v;
        return q;
    }
    q = long_int(p, end, out);
    if (q) return q;
    const uint8_t *stop = NULL;
    return mst_json_parse_int(p, end, out, &stop) == 0 ? stop : NULL;
}

/* A string value copied into the arena with a NUL (name, category). */
static inline const uint8_t *read_str_copy(const uint8_t *p, const uint8_t *end, mst_arena *arena,
                                           mst_str *out, mst_pf_span *span) {
    if (p >= end || *p != '"') return NULL;
    const uint8_t *q = plain_string_end(p + 1, end);
    if (!q) return general_str(p, end, arena, true, out, span);
    size_t n = (size_t)(q - (p + 1));
    char *dst = mst_arena_alloc(arena, n + 1);
    if (!dst) return NULL;
    memcpy(dst, p + 1, n);
    dst[n] = '\0';
    out->ptr = dst;
    out->len = (uint32_t)n;
    return q + 1;
}

/* 16 hex digits at s (any case) lowercased into out; false when one is
 * not a hex digit. Sets bits in *nonzero for digits other than '0'. With
 * SSE2 one block (mst_hex16_sse2_mask), storing the lowered bytes. */
static inline bool hex16_lower(const uint8_t *s, char *out, unsigned *nonzero) {
#ifdef __SSE2__
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i l = _mm_or_si128(x, _mm_set1_epi8(0x20)), letter;
    unsigned hex = mst_hex16_sse2_mask(x, l, &letter);
    _mm_storeu_si128((__m128i *)(void *)out, l);
    *nonzero |= (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(l, _mm_set1_epi8('0'))) ^ 0xFFFFu;
    return hex == 0xFFFFu;
#else
    uint64_t a, b;
    bool ok = mst_hex8_lower(load8(s), &a) & mst_hex8_lower(load8(s + 8), &b);
    *nonzero |= ((a ^ 0x3030303030303030ull) | (b ^ 0x3030303030303030ull)) != 0;
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
    return ok;
#endif
}

/* An id of exactly n (16 or 32) hex digits in quotes, lowercased into out
 * with a NUL. allow_root: "" and an all-zero id give "" (parent_span_id);
 * otherwise all-zero declines. Any other shape declines (an error, or
 * escapes the general decoder unescapes). */
static inline const uint8_t *read_id(const uint8_t *p, const uint8_t *end, size_t n, char *out,
                                     bool allow_root) {
    if ((size_t)(end - p) < 2 || p[0] != '"') return NULL;
    if (allow_root && p[1] == '"') {
        out[0] = '\0';
        return p + 2;
    }
    if ((size_t)(end - p) < n + 2 || p[n + 1] != '"') return NULL;
    unsigned nonzero = 0;
    bool ok = hex16_lower(p + 1, out, &nonzero);
    if (n == 32) ok &= hex16_lower(p + 17, out + 16, &nonzero);
    if (!ok) return NULL;
    out[n] = '\0';
    if (!nonzero) {
        if (!allow_root) return NULL;
        out[0] = '\0'; /* an all-zero parent id means "no parent" */
    }
    return p + n + 2;
}

/* A plain key at p (whitespace allowed before it and around the ':'):
 * its content [*k, *k + *n) and the byte after the ':', or NULL. */
static inline const uint8_t *read_key(const uint8_t *p, const uint8_t *end, const uint8_t **k,
                                      size_t *n) {
    p = expect(p, end, '"');
    if (!p) return NULL;
    const uint8_t *q = plain_string_end(p, end);
    if (!q) return NULL;
    *k = p;
    *n = (size_t)(q - p);
    return expect(q + 1, end, ':');
}

/* After a member's value: past the ',' (*more = 1) or past the
 * container's closing byte (*more = 0); NULL for anything else. */
static inline const uint8_t *next_member(const uint8_t *p, const uint8_t *end, uint8_t close,
                                         int *more) {
    if (__builtin_expect(p >= end || (*p != ',' && *p != close), 0)) {
        p = skip_ws_slow(p, end);
        if (p >= end || (*p != ',' && *p != close)) return NULL;
    }
    *more = *p == ',';
    return p + 1;
}

/* Past the opening byte of a container at p: *empty tells whether the
 * closing byte follows (then the result is past it). */
static inline const uint8_t *open_container(const uint8_t *p, const uint8_t *end, uint8_t close,
                                            bool *empty) {
    p++;
    if (p < end && is_ws(*p)) p = skip_ws_slow(p, end);
    *empty = p < end && *p == close;
    return *empty ? p + 1 : p;
}

/* p at byte c (whitespace allowed before it), or NULL. */
static inline const uint8_t *at_byte(const uint8_t *p, const uint8_t *end, uint8_t c) {
    if (__builtin_expect(p < end && *p == c, 1)) return p;
    p = skip_ws_slow(p, end);
    return (p < end && *p == c) ? p : NULL;
}

/* A key as encoders write it, with its quotes and ':' ("name":). */
typedef struct key_pattern {
    char bytes[32];
    unsigned len;
} key_pattern;

/* Whether the key `k` is at p. Why: encoders write the known fields in one
 * order (perfetto_packet_encode.c), so the decoder predicts the next key
 * and checks it with one or two 16-byte compares, instead of scanning the
 * key for its closing quote, checking the ':' and classifying it. */
static inline bool key_pattern_at(const uint8_t *p, const uint8_t *end, const key_pattern *k) {
#ifdef __SSE2__
    if (end - p < 32) return false;
    const __m128i *pat = (const __m128i *)(const void *)k->bytes;
    unsigned m = (unsigned)_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), _mm_loadu_si128(pat)));
    if (k->len > 16)
        m |= (unsigned)_mm_movemask_epi8(
                 _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)),
                                _mm_loadu_si128(pat + 1)))
             << 16;
    unsigned want = (1u << k->len) - 1u; /* len < 32 */
    return (m & want) == want;
#else
    return (size_t)(end - p) >= k->len && memcmp(p, k->bytes, k->len) == 0;
#endif
}

static const key_pattern LINK_TRACE_ID = {"\"trace_id\":", 11};
static const key_pattern LINK_SPAN_ID = {"\"span_id\":", 10};

/* "null" at p: the byte after it, else NULL. */
static inline const uint8_t *read_null(const uint8_t *p, const uint8_t *end) {
    return (end - p >= 4 && memcmp(p, "null", 4) == 0) ? p + 4 : NULL;
}

/* ---- attributes */

/* A 64-bit fingerprint of a key's content for the duplicate check: equal
 * keys give equal fingerprints, and equal fingerprints are confirmed byte
 * by byte. It mixes the key's last 8 bytes (fewer: zero-extended) and,
 * past 8 bytes, its first 8, so keys of up to 16 bytes count whole. */
static inline uint64_t fingerprint_mix(uint64_t last, const uint8_t *k, size_t n) {
    uint64_t first = n > 8 ? load8(k) : 0;
    uint64_t h = (last ^ (first * 0x9E3779B97F4A7C15ull) ^ n) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 31);
}

/* For a key inside the packet: the 8 bytes ending at its end are readable
 * even for a short key (the JSON follows the 17-byte magic), so a short
 * key is one load shifted to drop the bytes before it (no byte copy). */
static inline uint64_t fingerprint_in_packet(const uint8_t *k, size_t n) {
    uint64_t last = load8(k + n - 8);
    if (n < 8) last = n ? last >> (64 - 8 * n) : 0;
    return fingerprint_mix(last, k, n);
}

/* The same value for a key anywhere (an unescaped copy in the arena). */
static uint64_t fingerprint_anywhere(const uint8_t *k, size_t n) {
    uint64_t last = 0;
    if (n >= 8) last = load8(k + n - 8);
    else memcpy(&last, k, n);
    return fingerprint_mix(last, k, n);
}

static inline bool key_is(const uint8_t *k, size_t n, const char *lit, size_t lit_len) {
    return n == lit_len && memcmp(k, lit, lit_len) == 0;
}

/* "attributes" / "resource_attributes" at p: an object of any values, or
 * null. With take_pid_tid, integer process.pid / thread.id go to
 * out->pid / out->tid instead of the list. */
static const uint8_t *read_kv_object(const uint8_t *p, const uint8_t *end, mst_arena *arena,
                                     bool take_pid_tid, mst_pf_span *out, mst_pf_kv **kvs_out,
                                     size_t *n_out) {
    if (p < end && *p == 'n') return read_null(p, end);
    if (p >= end || *p != '{') return NULL;
    bool empty;
    p = open_container(p, end, '}', &empty);
    if (empty) return p;
    mst_pf_kv *kvs = NULL;
    size_t n = 0, cap = 0;
    /* Fingerprints of the stored keys, and one bit per fingerprint: a key
     * whose bit is clear cannot be a duplicate, so the scan over the
     * stored keys runs only on a bit match. */
    uint64_t fps[MST_PF_MAX_ATTRS];
    uint64_t bloom = 0;
    bool pid_seen = false, tid_seen = false;
    size_t taken = 0; /* pid/tid taken out: they count toward the limit too */
    for (;;) {
        /* The member is parsed straight into the next slot (no copy from
         * locals): the slot is only kept when n is incremented below. A
         * member past MST_PF_MAX_ATTRS stored ones declines whatever it
         * holds (the limit checks below), so it declines here, unread. */
        if (n == cap) {
            if (n == MST_PF_MAX_ATTRS) return NULL;
            kvs = mst_pf_arena_grow(arena, kvs, n, &cap, sizeof *kvs);
            if (!kvs) return NULL;
        }
        mst_pf_kv *slot = &kvs[n];
        uint64_t fp;
        p = at_byte(p, end, '"');
        if (!p) return NULL;
        const uint8_t *q = plain_string_end(p + 1, end);
        if (q) {
            slot->key.ptr = (const char *)(p + 1);
            slot->key.len = (uint32_t)(q - (p + 1));
            fp = fingerprint_in_packet(p + 1, slot->key.len);
            q++;
        } else {
            q = general_str(p, end, arena, false, &slot->key, out);
            if (!q) return NULL;
            fp = fingerprint_anywhere((const uint8_t *)slot->key.ptr, slot->key.len);
        }
        p = expect(q, end, ':');
        if (!p) return NULL;
        const uint8_t *k = (const uint8_t *)slot->key.ptr;
        const size_t kn = slot->key.len;
        uint64_t mask = (uint64_t)1 << (fp >> 58);
        if (bloom & mask) {
            for (size_t i = 0; i < n; i++)
                if (fps[i] == fp && kvs[i].key.len == kn && memcmp(kvs[i].key.ptr, k, kn) == 0)
                    return NULL; /* duplicate key */
        }
        p = read_raw(p, end, DEPTH_ATTRS, &slot->value);
        if (!p) return NULL;
        if (take_pid_tid && (key_is(k, kn, "process.pid", 11) || key_is(k, kn, "thread.id", 9))) {
            bool is_pid = kn == 11;
            bool *seen = is_pid ? &pid_seen : &tid_seen;
            if (*seen) return NULL; /* duplicate key */
            *seen = true;
            int64_t v;
            const uint8_t *vs = (const uint8_t *)slot->value.ptr;
            /* Parsed in the packet (not the slice) so the 8-byte loads
             * apply; the slice is one number token, so the integer ends
             * at the slice's end exactly when the slice is an integer. */
            if (read_int(vs, end, &v) == vs + slot->value.len) {
                if (n + taken == MST_PF_MAX_ATTRS) return NULL;
                taken++;
                if (is_pid) {
                    out->pid = v;
                    out->has_pid = true;
                } else {
                    out->tid = v;
                    out->has_tid = true;
                }
                goto next;
            }
        }
        if (n + taken == MST_PF_MAX_ATTRS) return NULL;
        fps[n] = fp;
        bloom |= mask;
        n++;
    next:;
        int more;
        p = next_member(p, end, '}', &more);
        if (!p) return NULL;
        if (!more) break;
    }
    *kvs_out = n ? kvs : NULL; /* as the general decoder: no list, no array */
    *n_out = n;
    return p;
}

/* ---- links */

/* "links" at p: an array of {"trace_id","span_id"} objects, or null. */
static const uint8_t *read_links(const uint8_t *p, const uint8_t *end, mst_arena *arena,
                                 mst_pf_span *out) {
    if (p < end && *p == 'n') return read_null(p, end);
    if (p >= end || *p != '[') return NULL;
    bool empty;
    p = open_container(p, end, ']', &empty);
    if (empty) return p;
    mst_pf_link *links = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        p = at_byte(p, end, '{');
        if (!p || n == MST_PF_MAX_LINKS) return NULL;
        if (n == cap) {
            links = mst_pf_arena_grow(arena, links, n, &cap, sizeof *links);
            if (!links) return NULL;
        }
        mst_pf_link *l = &links[n];
        bool have_trace = false, have_span = false;
        p = open_container(p, end, '}', &empty);
        if (empty) return NULL; /* no ids */
        for (;;) {
            const uint8_t *k;
            size_t kn;
            if (key_pattern_at(p, end, &LINK_TRACE_ID)) { /* the usual order */
                k = p + 1;
                kn = 8;
                p += LINK_TRACE_ID.len;
            } else if (key_pattern_at(p, end, &LINK_SPAN_ID)) {
                k = p + 1;
                kn = 7;
                p += LINK_SPAN_ID.len;
            } else {
                p = read_key(p, end, &k, &kn);
                if (!p) return NULL;
                if (p < end && is_ws(*p)) p = skip_ws_slow(p, end);
            }
            if (key_is(k, kn, "trace_id", 8)) {
                if (have_trace) return NULL;
                have_trace = true;
                p = read_id(p, end, 32, l->trace_id, false);
            } else if (key_is(k, kn, "span_id", 7)) {
                if (have_span) return NULL;
                have_span = true;
                p = read_id(p, end, 16, l->span_id, false);
            } else {
                mst_json_slice ignored;
                p = read_raw(p, end, DEPTH_LINK, &ignored);
            }
            if (!p) return NULL;
            int more;
            p = next_member(p, end, '}', &more);
            if (!p) return NULL;
            if (!more) break;
        }
        if (!have_trace || !have_span) return NULL;
        n++;
        int more;
        p = next_member(p, end, ']', &more);
        if (!p) return NULL;
        if (!more) break;
    }
    out->links = links;
    out->n_links = n;
    return p;
}

/* ---- the packet object */

/* The known fields in encoder order: index I_x, bit F_x = 1 << I_x. */
enum {
    I_NAME, I_CATEGORY, I_TRACE_ID, I_SPAN_ID, I_PARENT, I_START, I_END, I_KIND, I_STATUS,
    I_ATTRS, I_RESOURCE, I_LINKS, I_REQUEST_LINKS, I_IDS_STREAM, I_IDS_SEQ, I_UNKNOWN
};
enum {
    F_NAME = 1u << I_NAME,
    F_CATEGORY = 1u << I_CATEGORY,
    F_TRACE_ID = 1u << I_TRACE_ID,
    F_SPAN_ID = 1u << I_SPAN_ID,
    F_PARENT = 1u << I_PARENT,
    F_START = 1u << I_START,
    F_END = 1u << I_END,
    F_KIND = 1u << I_KIND,
    F_STATUS = 1u << I_STATUS,
    F_ATTRS = 1u << I_ATTRS,
    F_RESOURCE = 1u << I_RESOURCE,
    F_LINKS = 1u << I_LINKS,
    F_REQUEST_LINKS = 1u << I_REQUEST_LINKS,
    F_IDS_STREAM = 1u << I_IDS_STREAM,
    F_IDS_SEQ = 1u << I_IDS_SEQ
};

/* The known fields in the order encoders write them; FIELD_ORDER[i] is
 * field 1 << i. */
static const key_pattern FIELD_ORDER[] = {
    {"\"name\":", 7},           {"\"category\":", 11},       {"\"trace_id\":", 11},
    {"\"span_id\":", 10},       {"\"parent_span_id\":", 17}, {"\"start_time_ns\":", 16},
    {"\"end_time_ns\":", 14},   {"\"kind\":", 7},            {"\"status\":", 9},
    {"\"attributes\":", 13},    {"\"resource_attributes\":", 22}, {"\"links\":", 8},
    {"\"request_links\":", 16}, {"\"ids_stream\":", 13},     {"\"ids_seq\":", 10}};
enum { N_FIELDS = sizeof FIELD_ORDER / sizeof FIELD_ORDER[0] };
_Static_assert((unsigned)N_FIELDS == (unsigned)I_UNKNOWN, "FIELD_ORDER lists every known field in I_ order");

/* Which known field a top-level key names (0 = unknown): the length picks
 * the candidate, one compare of constant size confirms it. */
static inline unsigned field_of(const uint8_t *k, size_t n) {
    switch (n) {
    case 4: return !memcmp(k, "name", 4) ? F_NAME : !memcmp(k, "kind", 4) ? F_KIND : 0;
    case 5: return !memcmp(k, "links", 5) ? F_LINKS : 0;
    case 6: return !memcmp(k, "status", 6) ? F_STATUS : 0;
    case 7: return !memcmp(k, "span_id", 7) ? F_SPAN_ID : !memcmp(k, "ids_seq", 7) ? F_IDS_SEQ : 0;
    case 8: return !memcmp(k, "trace_id", 8) ? F_TRACE_ID : !memcmp(k, "category", 8) ? F_CATEGORY : 0;
    case 10: return !memcmp(k, "attributes", 10) ? F_ATTRS : !memcmp(k, "ids_stream", 10) ? F_IDS_STREAM : 0;
    case 11: return !memcmp(k, "end_time_ns", 11) ? F_END : 0;
    case 13: return !memcmp(k, "start_time_ns", 13) ? F_START : !memcmp(k, "request_links", 13) ? F_REQUEST_LINKS : 0;
    case 14: return !memcmp(k, "parent_span_id", 14) ? F_PARENT : 0;
    case 19: return !memcmp(k, "resource_attributes", 19) ? F_RESOURCE : 0;
    default: return 0;
    }
}

bool mst_pf_decode_fast(const uint8_t *json, size_t len, mst_arena *arena, mst_pf_span *out) {
    const uint8_t *end = json + len;
    if (len >= UINT32_MAX) return false; /* slices carry 32-bit lengths */
    const uint8_t *p = at_byte(json, end, '{');
    if (!p) return false;
    p++;
    unsigned seen = 0, next = 0; /* next: the field predicted to come next */
    out->plain_text = true; /* until a string says otherwise (general_str) */
    for (;;) {
        unsigned fi; /* the field's I_ index */
        p = at_byte(p, end, '"');
        if (!p) return false;
        if (next < N_FIELDS && key_pattern_at(p, end, &FIELD_ORDER[next])) {
            fi = next;
            p += FIELD_ORDER[next].len;
            next++;
        } else {
            const uint8_t *k;
            size_t kn;
            p = read_key(p, end, &k, &kn);
            if (!p) return false;
            unsigned f = field_of(k, kn);
            fi = f ? (unsigned)__builtin_ctz(f) : I_UNKNOWN;
            if (f) next = fi + 1; /* predict from here on */
        }
        unsigned f = fi < I_UNKNOWN ? 1u << fi : 0;
        if (f & seen) return false; /* duplicate key */
        seen |= f;
        const uint8_t *v = p;
    value:
        switch (fi) {
        case I_NAME: p = read_str_copy(p, end, arena, &out->name, out); break;
        case I_CATEGORY: p = read_str_copy(p, end, arena, &out->category, out); break;
        case I_TRACE_ID: p = read_id(p, end, 32, out->trace_id, false); break;
        case I_SPAN_ID: p = read_id(p, end, 16, out->span_id, false); break;
        case I_PARENT:
            if (p < end && *p == 'n') {
                out->parent_span_id[0] = '\0';
                p = read_null(p, end);
            } else {
                p = read_id(p, end, 16, out->parent_span_id, true);
            }
            break;
        case I_START: p = read_int(p, end, &out->start_ns); break;
        case I_END: p = read_int(p, end, &out->end_ns); break;
        case I_KIND: p = read_int(p, end, &out->kind); break;
        case I_STATUS: p = read_int(p, end, &out->status); break;
        case I_ATTRS:
            p = read_kv_object(p, end, arena, true, out, &out->attrs, &out->n_attrs);
            break;
        case I_RESOURCE:
            p = read_kv_object(p, end, arena, false, out, &out->resource, &out->n_resource);
            break;
        case I_LINKS: p = read_links(p, end, arena, out); break;
        case I_REQUEST_LINKS: p = read_int(p, end, &out->request_links); break;
        case I_IDS_STREAM: p = read_int(p, end, &out->ids_stream); break;
        case I_IDS_SEQ: p = read_int(p, end, &out->ids_seq); break;
        default: {
            mst_json_slice ignored;
            p = read_raw(p, end, DEPTH_TOP, &ignored);
            break;
        }
        }
        if (!p) {
            /* Whitespace before the value: skip it and read the value again. */
            if (v < end && is_ws(*v)) {
                p = v = skip_ws_slow(v, end);
                goto value;
            }
            return false;
        }
        int more;
        p = next_member(p, end, '}', &more);
        if (!p) return false;
        if (!more) break;
    }
    if (p != end && skip_ws_slow(p, end) != end) return false;
    /* Out-of-range values: declined, the general decoder reports them. */
    out->ids_fields = (seen & F_IDS_STREAM ? 1u : 0u) | (seen & F_IDS_SEQ ? 2u : 0u);
    return (seen & (F_TRACE_ID | F_SPAN_ID)) == (F_TRACE_ID | F_SPAN_ID) &&
           mst_pf_span_in_range(out) && mst_pf_span_check_ids(out, NULL, 0);
}

#else /* not little-endian: the word loads above assume it */

bool mst_pf_decode_fast(const uint8_t *json, size_t len, mst_arena *arena, mst_pf_span *out) {
    (void)json, (void)len, (void)arena, (void)out;
    return false; /* the general decoder handles every packet */
}

#endif
