/*
 * pb_writer.h — a minimal protobuf (proto3 wire format) writer on mst_buf,
 * for the OTLP encoder and the Perfetto trace encoder. Why hand-written: the
 * OTLP encoder runs on the exporter thread for every batch and the Perfetto
 * one on the forwarder for every span; both must reach millions of spans/s
 * with no protobuf runtime dependency.
 *
 * Length-delimited fields: mst_pb_begin() writes the tag and reserves `hint`
 * bytes for the length, the body is appended, mst_pb_end() writes the length
 * varint and, only when its size differs from the hint, memmoves the body.
 * Callers pick hints from typical sizes (1 for a KeyValue, 2 for a span), so
 * the memmove is rare; this beats a separate sizing pass over the spans.
 *
 * Error model (as mst_buf): a failed append marks the buffer failed and
 * later calls are no-ops; check buf->failed once at the end.
 */
#ifndef MST_WIRE_PB_WRITER_H
#define MST_WIRE_PB_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/buf.h"

enum {
    MST_PB_WT_VARINT = 0,
    MST_PB_WT_FIXED64 = 1,
    MST_PB_WT_LEN = 2,
    MST_PB_WT_FIXED32 = 5
};

#define MST_PB_MAX_VARINT 10

/* An open length-delimited field: where its body starts and how many bytes
 * were reserved in front of it for the length. */
typedef struct mst_pb_mark {
    size_t body;
    unsigned hint;
} mst_pb_mark;

/* Makes room for n more bytes; cheap inline check, slow path in buf.c. */
static inline bool mst_pb_room(mst_buf *b, size_t n) {
    if (__builtin_expect(!b->failed && b->cap - b->len >= n, 1)) return true;
    return mst_buf_reserve(b, n);
}

/* Bytes of v as a varint (7 payload bits a byte), without a loop: exact
 * sizes are computed for every field of a Perfetto event packet. */
static inline unsigned mst_pb_varint_size(uint64_t v) {
    return v < 0x80 ? 1 : (unsigned)(((63 - __builtin_clzll(v)) * 9 + 73) >> 6);
}

/* Writes v at p (room checked by the caller); returns the byte count. */
static inline unsigned mst_pb_put_varint(uint8_t *p, uint64_t v) {
    unsigned n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* The same, for fields whose values are usually 8 bytes and more
 * (timestamps: 9, hashed track uuids: 9-10): their first 8 bytes are made
 * at once by spreading 56 bits into 7-bit groups (28|28, then 14-bit, then
 * 7-bit groups: three shift-and-mask steps) instead of a loop iteration per
 * byte; that store stays within the varint's own bytes. Small values pay
 * one more compare than mst_pb_put_varint, so it is kept apart. */
static inline unsigned mst_pb_put_varint_wide(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (v >= (1ull << 49)) {
        uint64_t x = v & ((1ull << 56) - 1);
        x = ((x & 0x00FFFFFFF0000000ull) << 4) | (x & 0x000000000FFFFFFFull);
        x = ((x & 0x0FFFC0000FFFC000ull) << 2) | (x & 0x00003FFF00003FFFull);
        x = ((x & 0x3F803F803F803F80ull) << 1) | (x & 0x007F007F007F007Full);
        x |= 0x8080808080808080ull;
        if (v < (1ull << 56)) x &= ~(0x80ull << 56); /* exactly 8 bytes: the last ends it */
        memcpy(p, &x, 8);
        if (v < (1ull << 56)) return 8;
        return 8 + mst_pb_put_varint(p + 8, v >> 56);
    }
#endif
    return mst_pb_put_varint(p, v);
}

/* A fixed64 (little-endian) at p (room checked by the caller): one store
 * where the host is little-endian. */
static inline void mst_pb_put_fixed64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    for (unsigned i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
#endif
}

static inline void mst_pb_varint(mst_buf *b, uint64_t v) {
    if (!mst_pb_room(b, MST_PB_MAX_VARINT)) return;
    b->len += mst_pb_put_varint(b->data + b->len, v);
}

static inline void mst_pb_tag(mst_buf *b, uint32_t field, unsigned wire_type) {
    mst_pb_varint(b, ((uint64_t)field << 3) | wire_type);
}

/* field = v as a varint (int32/int64/uint32/uint64/bool/enum). Negative
 * int64 values are sent as their two's complement (10 bytes), as proto3
 * int64 requires. */
static inline void mst_pb_field_varint(mst_buf *b, uint32_t field, uint64_t v) {
    if (!mst_pb_room(b, 2 * MST_PB_MAX_VARINT)) return;
    uint8_t *p = b->data + b->len;
    unsigned n = mst_pb_put_varint(p, ((uint64_t)field << 3) | MST_PB_WT_VARINT);
    n += mst_pb_put_varint(p + n, v);
    b->len += n;
}

static inline void mst_pb_field_fixed64(mst_buf *b, uint32_t field, uint64_t v) {
    if (!mst_pb_room(b, MST_PB_MAX_VARINT + 8)) return;
    uint8_t *p = b->data + b->len;
    unsigned n = mst_pb_put_varint(p, ((uint64_t)field << 3) | MST_PB_WT_FIXED64);
    mst_pb_put_fixed64(p + n, v);
    b->len += n + 8;
}

static inline void mst_pb_field_fixed32(mst_buf *b, uint32_t field, uint32_t v) {
    if (!mst_pb_room(b, MST_PB_MAX_VARINT + 4)) return;
    uint8_t *p = b->data + b->len;
    unsigned n = mst_pb_put_varint(p, ((uint64_t)field << 3) | MST_PB_WT_FIXED32);
    for (unsigned i = 0; i < 4; i++) p[n + i] = (uint8_t)(v >> (8 * i));
    b->len += n + 4;
}

static inline void mst_pb_field_double(mst_buf *b, uint32_t field, double d) {
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    mst_pb_field_fixed64(b, field, v);
}

/* field = the n raw bytes at p (bytes, or a string already known valid). */
static inline void mst_pb_field_bytes(mst_buf *b, uint32_t field, const void *p, size_t n) {
    if (!mst_pb_room(b, 2 * MST_PB_MAX_VARINT + n)) return;
    uint8_t *o = b->data + b->len;
    unsigned k = mst_pb_put_varint(o, ((uint64_t)field << 3) | MST_PB_WT_LEN);
    k += mst_pb_put_varint(o + k, n);
    if (n) memcpy(o + k, p, n);
    b->len += k + n;
}

/* field = exactly 8 / 16 bytes (span and trace ids): constant-size copies
 * the compiler turns into two moves instead of a memcpy call. */
static inline void mst_pb_field_id(mst_buf *b, uint32_t field, const uint8_t *id, unsigned n) {
    if (!mst_pb_room(b, MST_PB_MAX_VARINT + 1 + 16)) return;
    uint8_t *o = b->data + b->len;
    unsigned k = mst_pb_put_varint(o, ((uint64_t)field << 3) | MST_PB_WT_LEN);
    o[k++] = (uint8_t)n;
    if (n == 16) memcpy(o + k, id, 16);
    else memcpy(o + k, id, 8);
    b->len += k + n;
}

/* True when the n (<= 64 typical) bytes at s are plain ASCII: ORs 8 bytes
 * at a time; any high bit means UTF-8 (or garbage) that needs checking. */
static inline bool mst_pb_is_ascii(const char *s, size_t n) {
    uint64_t hi = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        hi |= w;
    }
    for (; i < n; i++) hi |= (uint8_t)s[i];
    return !(hi & 0x8080808080808080ull);
}

/* The slow path of mst_pb_field_string: non-ASCII or long strings. */
void mst_pb_field_string_slow(mst_buf *b, uint32_t field, const char *s, size_t n);

/* field = a proto3 string. proto3 parsers (Go, Python) reject a message
 * whose strings are not valid UTF-8, which would lose the whole batch, so
 * invalid bytes are replaced by U+FFFD (as the JSON appender does). Short
 * ASCII strings (keys, most values) take the inline path. */
static inline void mst_pb_field_string(mst_buf *b, uint32_t field, const char *s, size_t n) {
    if (n <= 64 && mst_pb_is_ascii(s, n)) {
        mst_pb_field_bytes(b, field, s, n);
        return;
    }
    mst_pb_field_string_slow(b, field, s, n);
}

/* True when s[0..n) is valid UTF-8 (no surrogates, no overlongs). */
bool mst_pb_utf8_valid(const char *s, size_t n);

/* Opens a length-delimited field; `hint` (1..5) bytes are reserved for the
 * length. */
static inline mst_pb_mark mst_pb_begin(mst_buf *b, uint32_t field, unsigned hint) {
    mst_pb_mark m = {0, hint};
    if (!mst_pb_room(b, MST_PB_MAX_VARINT + hint)) return m;
    uint8_t *p = b->data + b->len;
    unsigned n = mst_pb_put_varint(p, ((uint64_t)field << 3) | MST_PB_WT_LEN);
    b->len += n + hint;
    m.body = b->len;
    return m;
}

/* The slow path of mst_pb_end: the length needs another size than hinted. */
void mst_pb_end_resize(mst_buf *b, mst_pb_mark m, size_t body_len, unsigned need);

/* Closes the field opened by `m`, writing its length. */
static inline void mst_pb_end(mst_buf *b, mst_pb_mark m) {
    if (b->failed) return;
    size_t body_len = b->len - m.body;
    unsigned need = mst_pb_varint_size(body_len);
    if (__builtin_expect(need != m.hint, 0)) {
        mst_pb_end_resize(b, m, body_len, need);
        return;
    }
    mst_pb_put_varint(b->data + m.body - m.hint, body_len);
}

#endif /* MST_WIRE_PB_WRITER_H */
