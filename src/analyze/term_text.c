/*
 * term_text.c — escaping of outside text for the terminal (term_text.h).
 */
#include "analyze/term_text.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "wire/utf8.h"

/* The code point of the valid sequence s[0..len), len 2..4. */
static uint32_t code_point(const uint8_t *s, size_t len) {
    uint32_t cp = s[0] & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < len; i++) cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

/* Code points above ASCII that a terminal acts on, or that reorder what is
 * shown around them. */
static int hidden_code_point(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x200E || cp == 0x200F ||
           (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

static void put_byte_escape(FILE *f, uint8_t c) {
    switch (c) {
    case '\n': fputs("\\n", f); return;
    case '\t': fputs("\\t", f); return;
    case '\r': fputs("\\r", f); return;
    case 0x1b: fputs("\\e", f); return;
    default: fprintf(f, "\\x%02x", c); return;
    }
}

void mst_an_term_write(FILE *f, const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0, plain = 0; /* s[plain..i) is a run written as it is */
    while (i < n) {
        uint8_t c = s[i];
        if (c >= 0x20 && c < 0x7f) {
            i++;
            continue;
        }
        size_t len = c < 0x80 ? 1 : mst_utf8_seq_len(s + i, n - i);
        bool bad = c < 0x20 || c == 0x7f || len == 0;
        uint32_t cp = len >= 2 ? code_point(s + i, len) : c;
        if (!bad && !hidden_code_point(cp)) {
            i += len;
            continue;
        }
        fwrite(s + plain, 1, i - plain, f);
        if (len >= 2) fprintf(f, "\\u%04x", (unsigned)cp);
        else put_byte_escape(f, c);
        i += len ? len : 1;
        plain = i;
    }
    fwrite(s + plain, 1, i - plain, f);
}

void mst_an_term_puts(FILE *f, const char *s) {
    if (s) mst_an_term_write(f, s, strlen(s));
}

void mst_an_term_line(FILE *f, const char *prefix, const char *text) {
    fputs(prefix, f);
    mst_an_term_puts(f, text);
    fputc('\n', f);
}
