/*
 * buf.h — a growable byte buffer with the appenders every encoder needs
 * (raw bytes, decimal numbers, lowercase hex, JSON strings). Shared by the
 * OTLP protobuf/JSON encoders, the Perfetto packet codec and the Chrome
 * Trace writer so JSON escaping exists exactly once.
 *
 * Error model: an append that cannot grow the buffer sets `failed` and
 * becomes a no-op; callers check `failed` once at the end.
 */
#ifndef MST_WIRE_BUF_H
#define MST_WIRE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/visibility.h"

typedef struct mst_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t max;   /* 0 = unlimited; growing past it sets failed */
    bool failed;
} mst_buf;

MST_SHARED_INTERNAL void mst_buf_init(mst_buf *b, size_t max);
MST_SHARED_INTERNAL void mst_buf_free(mst_buf *b);
MST_SHARED_INTERNAL void mst_buf_reset(mst_buf *b);             /* len = 0, failed = false */
/* Slow path of mst_buf_reserve: grows the allocation. */
MST_SHARED_INTERNAL bool mst_buf_grow(mst_buf *b, size_t extra);

/* Ensures room for `extra` more bytes. Inline because every appender calls
 * it and the common case (room left) is one compare. */
static inline bool mst_buf_reserve(mst_buf *b, size_t extra) {
    if (!b->failed && extra <= b->cap - b->len) return true;
    return mst_buf_grow(b, extra);
}

static inline void mst_buf_append(mst_buf *b, const void *p, size_t n) {
    if (n == 0 || !mst_buf_reserve(b, n)) return;
    __builtin_memcpy(b->data + b->len, p, n);
    b->len += n;
}

static inline void mst_buf_append_byte(mst_buf *b, uint8_t c) {
    if (!mst_buf_reserve(b, 1)) return;
    b->data[b->len++] = c;
}
void mst_buf_append_cstr(mst_buf *b, const char *s);
void mst_buf_append_u64(mst_buf *b, uint64_t v);   /* decimal */
void mst_buf_append_i64(mst_buf *b, int64_t v);    /* decimal */
/* Shortest round-trip decimal for finite values; NaN/Inf become null
 * (JSON has no literal for them). */
void mst_buf_append_double(mst_buf *b, double v);
void mst_buf_append_hex(mst_buf *b, const uint8_t *p, size_t n); /* lowercase */
/* A JSON string literal with quotes; invalid UTF-8 bytes become U+FFFD,
 * control characters \uXXXX. */
void mst_buf_append_json_str(mst_buf *b, const char *s, size_t n);

/* Length of the leading run of s[0..n) made of "plain" bytes: printable
 * ASCII other than '"' and '\\', i.e. bytes a JSON string holds verbatim
 * with nothing to check. Shared by the escaper above and the strict reader
 * (json_reader.c), which both spend most of their time in such runs.
 *
 * Why word-at-a-time: 8 bytes are tested with a handful of ALU operations
 * (no SIMD, no alignment needs: memcpy loads). For a word w and the byte
 * pattern K = 0x0101..01:
 *   control  (b < 0x20): (w - 0x20*K) & ~w & 0x80*K
 *   quote / backslash:   z = w ^ c*K; (z - K) & ~z & 0x80*K (zero byte test)
 *   non-ASCII (b >= 0x80): w & 0x80*K
 * A borrow can only flag a byte above a truly special byte, never below,
 * so the lowest flagged byte is exact. */
static inline uint64_t mst_json_special_mask8(uint64_t w) {
    const uint64_t k = 0x0101010101010101ull, hi = 0x8080808080808080ull;
    uint64_t ctl = (w - 0x20 * k) & ~w;
    uint64_t q = w ^ ('"' * k), bs = w ^ ('\\' * k);
    q = (q - k) & ~q;
    bs = (bs - k) & ~bs;
    return (ctl | q | bs | w) & hi;
}

static inline size_t mst_json_plain_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, s + i, 8);
        uint64_t m = mst_json_special_mask8(w);
        if (m) return i + ((size_t)__builtin_ctzll(m) >> 3);
    }
#endif
    for (; i < n; i++) {
        uint8_t c = s[i];
        if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') break;
    }
    return i;
}

#endif /* MST_WIRE_BUF_H */
