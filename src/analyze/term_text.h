/*
 * term_text.h — text from a trace made safe to print on a terminal. A trace
 * is outside input (any process of the same user can put spans into it),
 * and request ids, span names, Jaeger error messages and file names reach
 * the text summary and the error lines of `mstrace analyze`; written raw,
 * "\x1b]0;...\a\x1b[2J" would retitle and clear the reader's terminal and a
 * newline would forge a line of the report.
 *
 * The rule: bytes a terminal acts on are written as visible escapes — C0
 * controls (newline and tab included) as \n \t \r \e or \xNN, DEL as \x7f,
 * C1 controls (U+0080..U+009F) and the bidirectional overrides/isolates
 * (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) as \uNNNN, bytes that
 * are not valid UTF-8 as \xNN. Everything else, valid UTF-8 included, is
 * written as it is.
 */
#ifndef MST_ANALYZE_TERM_TEXT_H
#define MST_ANALYZE_TERM_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Writes s[0..n) to f under the rule above. */
void mst_an_term_write(FILE *f, const char *s, size_t n);

/* mst_an_term_write of a C string (NULL prints nothing). */
void mst_an_term_puts(FILE *f, const char *s);

/* One line: `prefix` (the program's own text, written as it is), then
 * `text` escaped, then a newline. */
void mst_an_term_line(FILE *f, const char *prefix, const char *text);

#endif /* MST_ANALYZE_TERM_TEXT_H */
