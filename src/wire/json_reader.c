/*
 * json_reader.c — the strict pull JSON reader of json_reader.h.
 *
 * Shape: strings are scanned once to validate them (runs of plain ASCII
 * are skipped a block at a time: mst_json_plain_run in json_scan.h) and
 * unescaped in a second pass only when they contain a backslash.
 * Containers are tracked as two 64-bit bit stacks (object-or-array, has a
 * member yet), so skipping a nested value is an iterative loop with no
 * recursion: deep or hostile input cannot exhaust the C stack.
 * Every access is preceded by a `p < end` check.
 */
#include "wire/json_reader.h"

#include <string.h>

#include "wire/json_scan.h" /* the token scanners, shared with the packet fast path */

static bool fail(mst_json_reader *r, const uint8_t *at, const char *msg) {
    if (!r->err) {
        r->err = msg;
        r->err_off = (size_t)(at - r->start);
    }
    return false;
}

void mst_json_reader_init(mst_json_reader *r, const void *data, size_t len, unsigned max_depth) {
    memset(r, 0, sizeof *r);
    r->start = r->p = (const uint8_t *)data;
    r->end = r->start + len;
    if (max_depth < 1) max_depth = 1;
    if (max_depth > 64) max_depth = 64;
    r->max_depth = max_depth;
}

/* Packets are compact JSON: the next byte is almost never whitespace, so
 * one compare (every JSON whitespace byte is <= ' ') settles the usual case. */
static inline void skip_ws(mst_json_reader *r) {
    const uint8_t *p = r->p, *end = r->end;
    if (p < end && *p > ' ') return;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    r->p = p;
}

/* ------------------------------------------------------------ strings */

/* Length of the valid UTF-8 sequence starting with a byte >= 0x80 at s, or
 * 0 (overlong, surrogate, > U+10FFFF, truncated, bad continuation). */
static inline size_t utf8_seq(const uint8_t *s, const uint8_t *end) {
    uint8_t c = s[0];
    size_t avail = (size_t)(end - s);
    if (c < 0xC2) return 0;
    if (c < 0xE0) return (avail >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c < 0xF0) {
        if (avail < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* UTF-16 surrogate */
        return 3;
    }
    if (c < 0xF5) {
        if (avail < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

static inline int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads 4 hex digits at s (caller checked 4 bytes exist); -1 if not hex. */
static inline long hex4(const uint8_t *s) {
    int a = hexval(s[0]), b = hexval(s[1]), c = hexval(s[2]), d = hexval(s[3]);
    if ((a | b | c | d) < 0) return -1;
    return (long)((a << 12) | (b << 8) | (c << 4) | d);
}

/* The rest of a string from p, its first byte that is not plain (an
 * escape, non-ASCII, a control byte, the closing quote or the end); [s,
 * p) was plain. Kept out of line so the common all-plain string costs no
 * register saves (the caller below is inlined into every reader). */
__attribute__((noinline)) static bool scan_string_rest(mst_json_reader *r, const uint8_t *p,
                                                       const uint8_t **e, bool *esc) {
    const uint8_t *end = r->end;
    bool has_esc = false;
    for (;; p = mst_json_plain_run(p, end)) {
        if (p >= end) return fail(r, p, "unterminated string");
        uint8_t c = *p;
        if (c == '"') break;
        if (c == '\\') {
            has_esc = true;
            if (end - p < 2) return fail(r, p, "unterminated string");
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                continue;
            case 'u': break;
            default: return fail(r, p, "invalid escape in string");
            }
            if (end - p < 6) return fail(r, p, "truncated \\u escape");
            long u = hex4(p + 2);
            if (u < 0) return fail(r, p, "invalid \\u escape");
            if (u >= 0xDC00 && u <= 0xDFFF) return fail(r, p, "lone low surrogate in \\u escape");
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (end - p < 12 || p[6] != '\\' || p[7] != 'u')
                    return fail(r, p, "high surrogate not followed by a low surrogate");
                long lo = hex4(p + 8);
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(r, p, "high surrogate not followed by a low surrogate");
                p += 12;
            } else {
                p += 6;
            }
            continue;
        }
        if (c < 0x20) return fail(r, p, "control character in string");
        size_t n = utf8_seq(p, end);
        if (!n) return fail(r, p, "invalid UTF-8 in string");
        p += n;
    }
    *e = p;
    *esc = has_esc;
    r->p = p + 1;
    return true;
}

/* Validates the string whose opening quote is at r->p. On success the
 * content is [*s, *e), r->p is past the closing quote, *esc tells whether a
 * backslash occurs. */
static inline bool scan_string(mst_json_reader *r, const uint8_t **s, const uint8_t **e,
                               bool *esc) {
    const uint8_t *p = mst_json_plain_run(r->p + 1, r->end);
    *s = r->p + 1;
    if (p < r->end && *p == '"') {
        *e = p;
        *esc = false;
        r->p = p + 1;
        return true;
    }
    return scan_string_rest(r, p, e, esc);
}

static size_t put_utf8(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Unescapes validated string content [s, e) into dst, writing at most cap
 * bytes; returns the full unescaped length (which never exceeds e - s). */
static size_t unescape(const uint8_t *s, const uint8_t *e, uint8_t *dst, size_t cap) {
    size_t n = 0;
    while (s < e) {
        const uint8_t *q = s;
        while (q < e && *q != '\\') q++;
        size_t run = (size_t)(q - s);
        if (n < cap) memcpy(dst + n, s, run <= cap - n ? run : cap - n);
        n += run;
        s = q;
        if (s >= e) break;
        uint8_t tmp[4];
        size_t k = 1;
        switch (s[1]) {
        case 'b': tmp[0] = '\b'; s += 2; break;
        case 'f': tmp[0] = '\f'; s += 2; break;
        case 'n': tmp[0] = '\n'; s += 2; break;
        case 'r': tmp[0] = '\r'; s += 2; break;
        case 't': tmp[0] = '\t'; s += 2; break;
        case 'u': {
            uint32_t cp = (uint32_t)hex4(s + 2);
            s += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* validated: a low surrogate follows */
                uint32_t lo = (uint32_t)hex4(s + 2);
                s += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            k = put_utf8(cp, tmp);
            break;
        }
        default: tmp[0] = s[1]; s += 2; break; /* '"', '\\', '/' */
        }
        for (size_t i = 0; i < k; i++, n++)
            if (n < cap) dst[n] = tmp[i];
    }
    return n;
}

static bool string_to_arena(mst_json_reader *r, mst_arena *arena, mst_str *out) {
    const uint8_t *s, *e;
    bool esc;
    const uint8_t *at = r->p;
    if (!scan_string(r, &s, &e, &esc)) return false;
    size_t raw = (size_t)(e - s);
    if (raw >= UINT32_MAX) return fail(r, at, "string too long");
    char *dst = mst_arena_alloc(arena, raw + 1);
    if (!dst) {
        r->nomem = true;
        return fail(r, at, "out of memory");
    }
    size_t n = esc ? unescape(s, e, (uint8_t *)dst, raw) : (memcpy(dst, s, raw), raw);
    dst[n] = '\0';
    out->ptr = dst;
    out->len = (uint32_t)n;
    return true;
}

/* The content as it is when it has no escape (why: most keys and values
 * are plain, and copying each one into the arena was a malloc-free but
 * still measurable alloc + libc memcpy per key), else unescaped. */
__attribute__((noinline)) static bool string_to_arena_again(mst_json_reader *r,
                                                             const uint8_t *at, mst_arena *arena,
                                                             mst_str *out) {
    r->p = at; /* rare: rescan through the copying path */
    return string_to_arena(r, arena, out);
}

/* Inlined into its callers (keys and ids of every packet): as a call, its
 * register saves and restores were about a third of its cost. */
static inline __attribute__((always_inline)) bool string_to_slice(mst_json_reader *r,
                                                                  mst_arena *arena,
                                                                  mst_str *out) {
    const uint8_t *s, *e;
    bool esc;
    const uint8_t *at = r->p;
    if (!scan_string(r, &s, &e, &esc)) return false;
    if (esc) return string_to_arena_again(r, at, arena, out);
    size_t raw = (size_t)(e - s);
    if (raw >= UINT32_MAX) return fail(r, at, "string too long");
    out->ptr = (const char *)s;
    out->len = (uint32_t)raw;
    return true;
}

static bool string_to_buf(mst_json_reader *r, char *dst, size_t cap, size_t *len, bool *fits) {
    const uint8_t *s, *e;
    bool esc;
    if (!scan_string(r, &s, &e, &esc)) return false;
    size_t n;
    if (esc) {
        n = unescape(s, e, (uint8_t *)dst, cap);
    } else {
        n = (size_t)(e - s);
        if (n <= cap) memcpy(dst, s, n);
    }
    *len = n;
    *fits = n <= cap;
    return true;
}

static inline bool expect_colon(mst_json_reader *r) {
    skip_ws(r);
    if (r->p >= r->end || *r->p != ':') return fail(r, r->p, "expected ':' after object key");
    r->p++;
    return true;
}

static bool at_string(mst_json_reader *r, const char *what) {
    if (r->err) return false;
    skip_ws(r);
    if (r->p >= r->end || *r->p != '"') return fail(r, r->p, what);
    return true;
}

bool mst_json_read_key(mst_json_reader *r, mst_arena *arena, mst_str *out) {
    return at_string(r, "expected an object key") && string_to_arena(r, arena, out) &&
           expect_colon(r);
}

bool mst_json_read_key_slice(mst_json_reader *r, mst_arena *arena, mst_str *out) {
    return at_string(r, "expected an object key") && string_to_slice(r, arena, out) &&
           expect_colon(r);
}

bool mst_json_read_str_slice(mst_json_reader *r, mst_arena *arena, mst_str *out) {
    return at_string(r, "expected a string") && string_to_slice(r, arena, out);
}

bool mst_json_read_key_into(mst_json_reader *r, char *dst, size_t cap, size_t *len, bool *fits) {
    return at_string(r, "expected an object key") && string_to_buf(r, dst, cap, len, fits) &&
           expect_colon(r);
}

bool mst_json_read_str(mst_json_reader *r, mst_arena *arena, mst_str *out) {
    return at_string(r, "expected a string") && string_to_arena(r, arena, out);
}

bool mst_json_read_str_into(mst_json_reader *r, char *dst, size_t cap, size_t *len, bool *fits) {
    return at_string(r, "expected a string") && string_to_buf(r, dst, cap, len, fits);
}

/* ------------------------------------------------------------ numbers */

/* Scans a number per the RFC grammar starting at r->p. */
static bool scan_number(mst_json_reader *r) {
    /* Set by mst_json_number_end on every NULL return; initialised because
     * gcc 12 at -O3 with the sanitizers cannot see that through the inline
     * function and warns (maybe-uninitialized). */
    const char *msg = "invalid number";
    const uint8_t *at = r->p;
    const uint8_t *p = mst_json_number_end(r->p, r->end, &msg, &at);
    if (!p) return fail(r, at, msg);
    r->p = p;
    return true;
}

bool mst_json_read_i64(mst_json_reader *r, int64_t *out) {
    if (r->err) return false;
    skip_ws(r);
    const uint8_t *stop = NULL;
    int rc = mst_json_parse_int(r->p, r->end, out, &stop);
    if (rc == 1) return fail(r, r->p, "expected an integer");
    if (rc == 2) return fail(r, r->p, "integer out of int64 range");
    r->p = stop;
    return true;
}

bool mst_json_slice_to_i64(const mst_json_slice *v, int64_t *out) {
    const uint8_t *p = (const uint8_t *)v->ptr, *end = p + v->len, *stop = NULL;
    int64_t x;
    if (mst_json_parse_int(p, end, &x, &stop) != 0 || stop != end) return false;
    *out = x;
    return true;
}

/* ------------------------------------------------------------ structure */

mst_json_type mst_json_peek(mst_json_reader *r) {
    if (r->err) return MST_JSON_INVALID;
    skip_ws(r);
    if (r->p >= r->end) {
        fail(r, r->p, "unexpected end of input");
        return MST_JSON_INVALID;
    }
    switch (*r->p) {
    case '{': return MST_JSON_OBJECT;
    case '[': return MST_JSON_ARRAY;
    case '"': return MST_JSON_STRING;
    case 't': return MST_JSON_TRUE;
    case 'f': return MST_JSON_FALSE;
    case 'n': return MST_JSON_NULL;
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9': return MST_JSON_NUMBER;
    default:
        fail(r, r->p, "unexpected character");
        return MST_JSON_INVALID;
    }
}

static bool push(mst_json_reader *r, bool is_object) {
    if (r->depth >= r->max_depth) return fail(r, r->p, "nesting too deep");
    uint64_t bit = (uint64_t)1 << r->depth;
    if (is_object) r->kinds |= bit; else r->kinds &= ~bit;
    r->nonempty &= ~bit;
    r->depth++;
    r->p++; /* the bracket */
    return true;
}

static bool top_is_object(const mst_json_reader *r) {
    return (r->kinds >> (r->depth - 1)) & 1u;
}

static bool open_container(mst_json_reader *r, uint8_t bracket, const char *msg) {
    if (r->err) return false;
    skip_ws(r);
    if (r->p >= r->end || *r->p != bracket) return fail(r, r->p, msg);
    return push(r, bracket == '{');
}

bool mst_json_object_begin(mst_json_reader *r) {
    return open_container(r, '{', "expected an object");
}

bool mst_json_array_begin(mst_json_reader *r) {
    return open_container(r, '[', "expected an array");
}

/* Shared by object_next / array_next: handles ',' and the closing bracket.
 * Inlined into each, so is_object is a constant there (called once per
 * member of every packet: the shared copy tested it at run time). */
static inline __attribute__((always_inline)) int container_next(mst_json_reader *r,
                                                                bool is_object) {
    if (r->err) return -1;
    if (r->depth == 0 || top_is_object(r) != is_object) {
        fail(r, r->p, "reader misuse: no such container open");
        return -1;
    }
    uint8_t close = is_object ? '}' : ']';
    uint64_t bit = (uint64_t)1 << (r->depth - 1);
    skip_ws(r);
    if (r->p >= r->end) {
        fail(r, r->p, "unexpected end of input");
        return -1;
    }
    if (*r->p == close) {
        r->p++;
        r->depth--;
        return 0;
    }
    if (r->nonempty & bit) {
        if (*r->p != ',') {
            fail(r, r->p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
            return -1;
        }
        r->p++;
        skip_ws(r);
    }
    r->nonempty |= bit;
    if (is_object && (r->p >= r->end || *r->p != '"')) {
        fail(r, r->p, "expected an object key");
        return -1;
    }
    if (!is_object && (r->p >= r->end || *r->p == ']')) {
        fail(r, r->p, r->p >= r->end ? "unexpected end of input" : "trailing comma in array");
        return -1;
    }
    return 1;
}

int mst_json_object_next(mst_json_reader *r) { return container_next(r, true); }
int mst_json_array_next(mst_json_reader *r) { return container_next(r, false); }

static bool scan_literal(mst_json_reader *r, const char *lit, size_t n) {
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0)
        return fail(r, r->p, "invalid literal");
    r->p += n;
    return true;
}

/* Scans one scalar value at r->p (after whitespace). */
static bool scan_scalar(mst_json_reader *r) {
    const uint8_t *s, *e;
    bool esc;
    switch (*r->p) {
    case '"': return scan_string(r, &s, &e, &esc);
    case 't': return scan_literal(r, "true", 4);
    case 'f': return scan_literal(r, "false", 5);
    case 'n': return scan_literal(r, "null", 4);
    default: return scan_number(r);
    }
}

/* Iterative skip of one complete value; the container depth returns to
 * where it started. */
static bool skip_value(mst_json_reader *r) {
    const unsigned base = r->depth;
    for (;;) {
        /* a value is expected here */
        skip_ws(r);
        if (r->p >= r->end) return fail(r, r->p, "unexpected end of input");
        uint8_t c = *r->p;
        if (c == '{' || c == '[') {
            if (!push(r, c == '{')) return false;
            skip_ws(r);
            if (r->p < r->end && *r->p == (c == '{' ? '}' : ']')) {
                r->p++;
                r->depth--;
            } else if (c == '{') {
                if (!at_string(r, "expected an object key")) return false;
                const uint8_t *s, *e;
                bool esc;
                if (!scan_string(r, &s, &e, &esc) || !expect_colon(r)) return false;
                continue;
            } else {
                continue;
            }
        } else if (c == '"' || c == 't' || c == 'f' || c == 'n' || c == '-' ||
                   (c >= '0' && c <= '9')) {
            if (!scan_scalar(r)) return false;
        } else {
            return fail(r, r->p, "unexpected character");
        }
        /* after a complete value: close containers or move to the next member */
        for (;;) {
            if (r->depth == base) return true;
            skip_ws(r);
            if (r->p >= r->end) return fail(r, r->p, "unexpected end of input");
            bool obj = top_is_object(r);
            c = *r->p;
            if (c == (obj ? '}' : ']')) {
                r->p++;
                r->depth--;
                continue;
            }
            if (c != ',') return fail(r, r->p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            r->p++;
            if (obj) {
                if (!at_string(r, "expected an object key")) return false;
                const uint8_t *s, *e;
                bool esc;
                if (!scan_string(r, &s, &e, &esc) || !expect_colon(r)) return false;
            }
            break;
        }
    }
}

bool mst_json_read_raw(mst_json_reader *r, mst_json_slice *out) {
    if (r->err) return false;
    skip_ws(r);
    const uint8_t *begin = r->p;
    /* Strings and numbers (most attribute values) are scanned directly;
     * scan_number checks its own first byte. Containers and literals take
     * the general loop. */
    bool ok;
    if (begin < r->end && *begin == '"') {
        const uint8_t *s, *e;
        bool esc;
        ok = scan_string(r, &s, &e, &esc);
    } else if (begin < r->end && (*begin == '-' || (unsigned)(*begin - '0') <= 9)) {
        ok = scan_number(r);
    } else {
        ok = skip_value(r);
    }
    if (!ok) return false;
    out->ptr = (const char *)begin;
    out->len = (size_t)(r->p - begin);
    return true;
}

bool mst_json_finish(mst_json_reader *r) {
    if (r->err) return false;
    if (r->depth != 0) return fail(r, r->p, "unclosed container");
    skip_ws(r);
    if (r->p != r->end) return fail(r, r->p, "trailing data after the JSON value");
    return true;
}

bool mst_json_validate(const void *data, size_t len, unsigned max_depth, const char **err,
                       size_t *err_off) {
    mst_json_reader r;
    mst_json_slice raw;
    mst_json_reader_init(&r, data, len, max_depth);
    bool ok = mst_json_read_raw(&r, &raw) && mst_json_finish(&r);
    if (err) *err = r.err;
    if (err_off) *err_off = r.err_off;
    return ok;
}
