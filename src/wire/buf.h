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

typedef struct mst_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t max;   /* 0 = unlimited; growing past it sets failed */
    bool failed;
} mst_buf;

void mst_buf_init(mst_buf *b, size_t max);
void mst_buf_free(mst_buf *b);
void mst_buf_reset(mst_buf *b);             /* len = 0, failed = false */
/* Slow path of mst_buf_reserve: grows the allocation. */
bool mst_buf_grow(mst_buf *b, size_t extra);

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

#endif /* MST_WIRE_BUF_H */
