/* buf.c — growable byte buffer and its appenders (see buf.h). */
#include "wire/buf.h"
#include "wire/utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mst_buf_init(mst_buf *b, size_t max) {
    memset(b, 0, sizeof *b);
    b->max = max;
}

void mst_buf_free(mst_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void mst_buf_reset(mst_buf *b) {
    b->len = 0;
    b->failed = false;
}

bool mst_buf_grow(mst_buf *b, size_t extra) {
    if (b->failed) return false;
    if (extra > SIZE_MAX - b->len) goto fail;
    size_t need = b->len + extra;
    if (need <= b->cap) return true;
    if (b->max && need > b->max) goto fail;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (b->max && cap > b->max) cap = b->max;
    uint8_t *p = realloc(b->data, cap);
    if (!p) goto fail;
    b->data = p;
    b->cap = cap;
    return true;
fail:
    b->failed = true;
    return false;
}

void mst_buf_append_cstr(mst_buf *b, const char *s) { mst_buf_append(b, s, strlen(s)); }

void mst_buf_append_u64(mst_buf *b, uint64_t v) {
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    mst_buf_append(b, tmp + i, sizeof tmp - i);
}

void mst_buf_append_i64(mst_buf *b, int64_t v) {
    if (v < 0) {
        mst_buf_append_byte(b, '-');
        mst_buf_append_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        mst_buf_append_u64(b, (uint64_t)v);
    }
}

void mst_buf_append_double(mst_buf *b, double v) {
    if (!isfinite(v)) {
        mst_buf_append(b, "null", 4);
        return;
    }
    /* Range first: converting a double outside int64 is undefined (x86
     * gives INT64_MIN, aarch64 saturates). */
    if (fabs(v) < 1e15 && v == (double)(int64_t)v) {
        mst_buf_append_i64(b, (int64_t)v);
        return;
    }
    char tmp[32];
    /* %.17g always round-trips; try the shorter %.15g first. */
    int n = snprintf(tmp, sizeof tmp, "%.15g", v);
    if (n > 0 && strtod(tmp, NULL) != v) n = snprintf(tmp, sizeof tmp, "%.17g", v);
    if (n > 0) mst_buf_append(b, tmp, (size_t)n);
}

void mst_buf_append_hex(mst_buf *b, const uint8_t *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    if (!mst_buf_reserve(b, n * 2)) return;
    uint8_t *out = b->data + b->len;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = (uint8_t)digits[p[i] >> 4];
        out[2 * i + 1] = (uint8_t)digits[p[i] & 15];
    }
    b->len += n * 2;
}

void mst_buf_append_json_str(mst_buf *b, const char *str, size_t n) {
    static const char digits[] = "0123456789abcdef";
    const uint8_t *s = (const uint8_t *)str;
    if (!mst_buf_reserve(b, n + 2)) return;
    b->data[b->len++] = '"';
    size_t run = 0; /* start of a run of bytes copied verbatim */
    size_t i = 0;
    while (i < n) {
        /* Plain ASCII runs are found 8 bytes at a time and copied at the end
         * of the run with one memcpy. */
        i += mst_json_plain_prefix(s + i, n - i);
        if (i >= n) break;
        uint8_t c = s[i];
        size_t seq = c >= 0x80 ? mst_utf8_seq_len(s + i, n - i) : 0;
        if (seq) { i += seq; continue; }
        mst_buf_append(b, s + run, i - run);
        switch (c) {
        case '"': mst_buf_append(b, "\\\"", 2); break;
        case '\\': mst_buf_append(b, "\\\\", 2); break;
        case '\n': mst_buf_append(b, "\\n", 2); break;
        case '\r': mst_buf_append(b, "\\r", 2); break;
        case '\t': mst_buf_append(b, "\\t", 2); break;
        default:
            if (c < 0x20) {
                char esc[6] = {'\\', 'u', '0', '0', digits[c >> 4], digits[c & 15]};
                mst_buf_append(b, esc, 6);
            } else {
                mst_buf_append(b, "\xEF\xBF\xBD", 3); /* U+FFFD for a bad byte */
            }
        }
        i++;
        run = i;
    }
    mst_buf_append(b, s + run, n - run);
    mst_buf_append_byte(b, '"');
}
