/*
 * utf8.h — the one UTF-8 sequence validator of the wire layer. Owned here so
 * the protobuf writer's proto3 string repair (pb_writer.c) and the JSON
 * string escaper (buf.c) agree byte for byte on what is valid UTF-8:
 * shortest form only, no surrogates, nothing above U+10FFFF.
 * Static inline because both callers run it per byte on hot paths.
 */
#ifndef MST_WIRE_UTF8_H
#define MST_WIRE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid.
 * n is the number of bytes available at s (at least 1). */
static inline size_t mst_utf8_seq_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    return len;
}

#endif
