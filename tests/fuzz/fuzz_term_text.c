/*
 * fuzz_term_text.c — libFuzzer target for the terminal escaping of trace
 * text (src/analyze/term_text.c), which every outside string printed by
 * `mstrace analyze` goes through. Invariants on the output of any input:
 * no C0 control byte and no DEL, valid UTF-8 with no C1 control and no
 * bidirectional override/isolate code point, and an input with none of
 * those (and no invalid UTF-8) comes out unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/term_text.h"
#include "wire/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The code point of the valid sequence at s (len 1..4). */
static unsigned long cp_at(const uint8_t *s, size_t len) {
    if (len == 1) return s[0];
    unsigned long cp = s[0] & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < len; i++) cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

static int special(unsigned long cp) {
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* True when s holds only valid UTF-8 without a special code point. */
static int clean(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t len = mst_utf8_seq_len(s + i, n - i);
        if (!len || special(cp_at(s + i, len))) return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) return 0;
    mst_an_term_write(f, (const char *)data, size);
    if (fclose(f) != 0) abort();
    if (!clean((const uint8_t *)out, len)) abort();
    if (clean(data, size) && (len != size || memcmp(out, data, size) != 0)) abort();
    free(out);
    return 0;
}
