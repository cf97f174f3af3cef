/*
 * pb_reader.c — the bounds-checked protobuf wire reader (see pb_reader.h).
 * Every read compares against `end` before touching a byte; lengths are
 * compared as sizes (end - p), never by forming an out-of-range pointer.
 */
#include "wire/pb_reader.h"
#include "wire/pb_writer.h" /* wire type constants */

mst_status mst_pb_read_varint(mst_pb_reader *r, uint64_t *out) {
    uint64_t v = 0;
    const uint8_t *p = r->p;
    for (unsigned i = 0; i < MST_PB_MAX_VARINT; i++) {
        if (p >= r->end) return MST_ERR_PARSE;
        uint8_t c = *p++;
        /* The 10th byte may only hold bit 63. */
        if (i == 9 && c > 1) return MST_ERR_PARSE;
        v |= (uint64_t)(c & 0x7F) << (7 * i);
        if (!(c & 0x80)) {
            r->p = p;
            *out = v;
            return MST_OK;
        }
    }
    return MST_ERR_PARSE;
}

static uint64_t load_le(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

mst_status mst_pb_next(mst_pb_reader *r, mst_pb_field *f) {
    if (r->p >= r->end) return MST_ERR_CLOSED;
    uint64_t key;
    if (mst_pb_read_varint(r, &key) != MST_OK) return MST_ERR_PARSE;
    uint64_t number = key >> 3;
    if (number == 0 || number > 0x1FFFFFFF) return MST_ERR_PARSE;
    f->number = (uint32_t)number;
    f->wire_type = (unsigned)(key & 7);
    f->u = 0;
    f->data = NULL;
    f->len = 0;
    size_t left;
    switch (f->wire_type) {
    case MST_PB_WT_VARINT:
        return mst_pb_read_varint(r, &f->u);
    case MST_PB_WT_FIXED64:
        if ((size_t)(r->end - r->p) < 8) return MST_ERR_PARSE;
        f->u = load_le(r->p, 8);
        r->p += 8;
        return MST_OK;
    case MST_PB_WT_FIXED32:
        if ((size_t)(r->end - r->p) < 4) return MST_ERR_PARSE;
        f->u = load_le(r->p, 4);
        r->p += 4;
        return MST_OK;
    case MST_PB_WT_LEN: {
        uint64_t n;
        if (mst_pb_read_varint(r, &n) != MST_OK) return MST_ERR_PARSE;
        left = (size_t)(r->end - r->p);
        if (n > left) return MST_ERR_PARSE;
        f->data = r->p;
        f->len = (size_t)n;
        f->u = n;
        r->p += n;
        return MST_OK;
    }
    default: /* 3/4: groups (deprecated, never in OTLP); 6/7: invalid */
        return MST_ERR_PARSE;
    }
}
