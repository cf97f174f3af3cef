/*
 * test_analyze_progress.c — the progress line `mstrace analyze` prints while
 * it reads a large input (src/analyze/progress.c), without a clock: when a
 * line is due (not in the first second; then every 0.5 s on a terminal,
 * every 5 s into a log) and its exact text, on a terminal (in place, no
 * newline) and into a log (one line each), with and without a known size.
 * The reader side (the callback that drives it, every 16 MiB read) is
 * tested in test_analyze_reader.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/progress.h"
#include "testlib.h"

/* What mst_an_progress_print writes, as a malloc'd string. */
static char *printed(const char *name, uint64_t done, uint64_t total, double secs, bool tty) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) abort();
    mst_an_progress_print(f, name, done, total, secs, tty);
    fclose(f);
    return s;
}

static void due_only_after_a_second_then_spaced(void) {
    CHECK(!mst_an_progress_due(0.0, 0, true));
    CHECK(!mst_an_progress_due(0.99, 0, true));
    CHECK(mst_an_progress_due(1.0, 0, true));
    /* terminal: every 0.5 s */
    CHECK(!mst_an_progress_due(1.4, 1.0, true));
    CHECK(mst_an_progress_due(1.5, 1.0, true));
    /* log: every 5 s, the first after 5 s too */
    CHECK(!mst_an_progress_due(1.0, 0, false));
    CHECK(!mst_an_progress_due(4.99, 0, false));
    CHECK(mst_an_progress_due(5.0, 0, false));
    CHECK(!mst_an_progress_due(9.9, 5.0, false));
    CHECK(mst_an_progress_due(10.0, 5.0, false));
}

static void line_with_known_size(void) {
    uint64_t mib = 1u << 20;
    char *log = printed("run.json", 12 * mib, 40 * mib, 2.0, false);
    CHECK_EQ_STR(log, "mstrace analyze: reading run.json: 12 / 40 MiB (30%), 6.0 MiB/s\n");
    free(log);
    char *tty = printed("run.json", 12 * mib, 40 * mib, 2.0, true);
    CHECK_EQ_STR(tty, "\rmstrace analyze: reading run.json: 12 / 40 MiB (30%), 6.0 MiB/s");
    free(tty);
}

static void line_with_unknown_size(void) {
    char *log = printed("http://jaeger:16686", 48u << 20, 0, 3.0, false);
    CHECK_EQ_STR(log, "mstrace analyze: reading http://jaeger:16686: 48 MiB\n");
    free(log);
    char *tty = printed("/dev/stdin", 48u << 20, 0, 3.0, true);
    CHECK_EQ_STR(tty, "\rmstrace analyze: reading /dev/stdin: 48 MiB");
    free(tty);
}

/* A query read page by page: requests, spans, traces and the window. */
static void line_of_a_paged_query(void) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) abort();
    mst_an_progress_print_query(f, "http://j:16686 service=vllm", 1200, 3456, 789, 1764525600000000LL, false);
    mst_an_progress_print_query(f, "q", 1, 0, 0, 5, true);
    fclose(f);
    CHECK_EQ_STR(s, "mstrace analyze: reading http://j:16686 service=vllm: 1200 requests, 3456 spans of 789 "
                    "traces, window at 1764525600000000 us\n"
                    "\rmstrace analyze: reading q: 1 requests, 0 spans of 0 traces, window at 5 us");
    free(s);
}

static const mst_test_case TESTS[] = {
    {"line_of_a_paged_query", line_of_a_paged_query},
    {"due_only_after_a_second_then_spaced", due_only_after_a_second_then_spaced},
    {"line_with_known_size", line_with_known_size},
    {"line_with_unknown_size", line_with_unknown_size},
};
MST_TEST_MAIN(TESTS)
