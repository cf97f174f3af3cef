/*
 * pb_writer.c — the out-of-line parts of the protobuf writer (pb_writer.h):
 * UTF-8 repair for proto3 strings and the rare length-resize of a
 * length-delimited field. Everything on the hot path is inline in the header.
 */
#include "wire/pb_writer.h"
#include "wire/utf8.h"

/* Index of the first byte that is not plain ASCII (or n). Eight bytes at a
 * time: attribute keys and values are almost always ASCII. */
static size_t ascii_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) break;
    }
    while (i < n && s[i] < 0x80) i++;
    return i;
}

bool mst_pb_utf8_valid(const char *str, size_t n) {
    const uint8_t *s = (const uint8_t *)str;
    size_t i = ascii_prefix(s, n);
    while (i < n) {
        size_t k = mst_utf8_seq_len(s + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

/* Size of s after replacing each invalid byte by U+FFFD (3 bytes). */
static size_t repaired_len(const uint8_t *s, size_t n) {
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t k = mst_utf8_seq_len(s + i, n - i);
        if (k) { out += k; i += k; }
        else { out += 3; i++; }
    }
    return out;
}

void mst_pb_field_string_slow(mst_buf *b, uint32_t field, const char *str, size_t n) {
    const uint8_t *s = (const uint8_t *)str;
    if (__builtin_expect(ascii_prefix(s, n) == n, 1) || mst_pb_utf8_valid(str, n)) {
        mst_pb_field_bytes(b, field, s, n);
        return;
    }
    size_t out_len = repaired_len(s, n);
    mst_pb_tag(b, field, MST_PB_WT_LEN);
    mst_pb_varint(b, out_len);
    if (!mst_pb_room(b, out_len)) return;
    uint8_t *o = b->data + b->len;
    for (size_t i = 0; i < n;) {
        size_t k = mst_utf8_seq_len(s + i, n - i);
        if (k) {
            memcpy(o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    b->len += out_len;
}

void mst_pb_end_resize(mst_buf *b, mst_pb_mark m, size_t body_len, unsigned need) {
    /* Protobuf lengths are int32 on every parser we talk to. */
    if (body_len > INT32_MAX) {
        b->failed = true;
        return;
    }
    if (need > m.hint && !mst_pb_room(b, need - m.hint)) return;
    uint8_t *len_at = b->data + m.body - m.hint;
    memmove(len_at + need, b->data + m.body, body_len);
    mst_pb_put_varint(len_at, body_len);
    b->len = (size_t)(len_at - b->data) + need + body_len;
}
