/*
 * test_report_html.c — the HTML report writer (src/analyze/report_html.c):
 * the analysis JSON is embedded so that no string in it can end its script
 * element or break the JavaScript ("<", ">", "&", U+2028, U+2029 escaped,
 * nothing else changed), invalid JSON is refused before anything is
 * written, the page fetches nothing (a CSP that forbids it, no src/href),
 * and a failed write is reported. The page drawn in a real browser is
 * tested in tests/integration/test_analyze_report.py.
 */
#include <stdlib.h>
#include <string.h>

#include "analyze/report_html.h"
#include "testlib.h"

/* Renders `json` into a malloc'd NUL-terminated page (NULL on error). */
static char *render(const char *json, size_t len, mst_status *st, char *err, size_t err_size) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return NULL;
    *st = mst_report_html_write(f, json, len, err, err_size);
    fclose(f);
    return buf;
}

/* The text between the data element's start tag and the next "</script". */
static char *embedded_data(const char *page) {
    const char *open = "<script type=\"application/json\" id=\"mst-data\">";
    const char *a = strstr(page, open);
    if (!a) return NULL;
    a += strlen(open);
    const char *b = strstr(a, "</script");
    if (!b) return NULL;
    char *out = malloc((size_t)(b - a) + 1);
    memcpy(out, a, (size_t)(b - a));
    out[b - a] = 0;
    return out;
}

static void test_hostile_strings_are_escaped(void) {
    /* A span name a user controls: it tries to end the element, open a
     * comment, and carries the two line separators JavaScript once broke on. */
    const char json[] = "{\"span_names\":[{\"name\":\"</script><script>alert(1)</script><!-- a&b \xe2\x80\xa8|\xe2\x80\xa9\"}],"
                        "\"n\":1.5}";
    mst_status st = MST_ERR_INTERNAL;
    char err[128] = "";
    char *page = render(json, sizeof json - 1, &st, err, sizeof err);
    CHECK(page != NULL);
    CHECK_EQ_INT(st, MST_OK);
    char *data = embedded_data(page);
    CHECK(data != NULL);
    if (data) {
        CHECK_EQ_STR(data, "{\"span_names\":[{\"name\":\"\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"
                           "\\u003c/script\\u003e\\u003c!-- a\\u0026b \\u2028|\\u2029\"}],\"n\":1.5}");
        CHECK(strstr(data, "\xe2\x80\xa8") == NULL);
    }
    /* Exactly two script elements end: the data and the drawing script. */
    int ends = 0;
    for (const char *p = page; (p = strstr(p, "</script>")) != NULL; p++) ends++;
    CHECK_EQ_INT(ends, 2);
    free(data);
    free(page);
}

static void test_page_fetches_nothing(void) {
    const char json[] = "{\"schema\":\"mstrace.analyze/1\"}";
    mst_status st = MST_ERR_INTERNAL;
    char *page = render(json, sizeof json - 1, &st, NULL, 0);
    CHECK_EQ_INT(st, MST_OK);
    CHECK(page && strncmp(page, "<!DOCTYPE html>", 15) == 0);
    CHECK(page && strstr(page, "Content-Security-Policy\" content=\"default-src 'none';") != NULL);
    CHECK(page && strstr(page, " src=") == NULL);
    CHECK(page && strstr(page, " href=") == NULL);
    CHECK(page && strstr(page, "@import") == NULL);
    CHECK(page && strstr(page, "</html>\n") != NULL);
    free(page);
}

static void test_invalid_json_is_refused_and_nothing_written(void) {
    const char *bad[] = {"", "{", "{\"a\":1} x", "[1,]", "\"\xff\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mst_status st = MST_OK;
        char err[160] = "";
        char *page = render(bad[i], strlen(bad[i]), &st, err, sizeof err);
        CHECK_EQ_INT(st, MST_ERR_PARSE);
        CHECK(page && page[0] == 0);
        CHECK(strstr(err, "not valid JSON") != NULL);
        free(page);
    }
}

static void test_write_error_is_reported(void) {
    FILE *f = fopen("/dev/null", "r"); /* writes fail on a read-only stream */
    CHECK(f != NULL);
    if (!f) return;
    char err[128] = "";
    CHECK_EQ_INT(mst_report_html_write(f, "{}", 2, err, sizeof err), MST_ERR_IO);
    CHECK(strstr(err, "writing the HTML failed") != NULL);
    fclose(f);
    CHECK_EQ_INT(mst_report_html_write(NULL, "{}", 2, NULL, 0), MST_ERR_INVALID_ARG);
}

static const mst_test_case TESTS[] = {
    {"hostile_strings_are_escaped", test_hostile_strings_are_escaped},
    {"page_fetches_nothing", test_page_fetches_nothing},
    {"invalid_json_is_refused_and_nothing_written", test_invalid_json_is_refused_and_nothing_written},
    {"write_error_is_reported", test_write_error_is_reported},
};
MST_TEST_MAIN(TESTS)
