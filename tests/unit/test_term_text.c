/*
 * test_term_text.c — analyze/term_text.h: every byte a terminal acts on is
 * written as a visible escape (C0 controls, DEL, C1 controls, bidi
 * overrides, invalid UTF-8), everything else — valid UTF-8 included —
 * passes unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/term_text.h"
#include "testlib.h"

/* What mst_an_term_write makes of s[0..n). */
static char *escaped(const char *s, size_t n) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) abort();
    mst_an_term_write(f, s, n);
    fclose(f);
    return out;
}

static void expect(const char *in, size_t n, const char *want) {
    char *got = escaped(in, n);
    CHECK_EQ_STR(got, want);
    free(got);
}

/* A literal with its exact length (NUL bytes inside included). */
#define EXPECT(lit, want) expect(lit, sizeof(lit) - 1, want)

static void test_controls_become_visible(void) {
    EXPECT("\x1b]0;t\x07\x1b[2J", "\\e]0;t\\x07\\e[2J");
    EXPECT("a\nb\tc\rd", "a\\nb\\tc\\rd");
    EXPECT("nul\0x", "nul\\x00x");
    EXPECT("del\x7f", "del\\x7f");
    EXPECT("\xc2\x9b" "1m", "\\u009b1m");           /* C1 CSI */
    EXPECT("\xe2\x80\xae" "txt", "\\u202etxt");      /* right-to-left override */
    EXPECT("\xe2\x81\xa6" "x\xe2\x81\xa9", "\\u2066x\\u2069");
    EXPECT("\xff\xc3", "\\xff\\xc3");               /* not UTF-8, cut sequence */
    EXPECT("\xed\xa0\x80", "\\xed\\xa0\\x80");      /* a surrogate */
}

static void test_text_passes_unchanged(void) {
    const char *plain = "request 42: caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82 \\x1b";
    expect(plain, strlen(plain), plain);
    EXPECT("", "");
}

static const mst_test_case TESTS[] = {
    {"controls_become_visible", test_controls_become_visible},
    {"text_passes_unchanged", test_text_passes_unchanged},
};
MST_TEST_MAIN(TESTS)
