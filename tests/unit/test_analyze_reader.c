/*
 * test_analyze_reader.c — the streamed Chrome Trace JSON reader
 * (src/analyze/read_chrome.c) on small inputs: typed attributes and
 * request.ids lists, escapes, exact microsecond-to-nanosecond times, the
 * process role from an M event or process.role, the forwarder's dropped
 * counter, a cut at every byte of a file (never a crash; complete events
 * before the cut are kept), the file reader across its chunk boundary, and
 * bad top levels. The real forwarder's output is exercised end to end by
 * tests/integration/test_analyze.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/read_chrome.h"
#include "testlib.h"

typedef struct seen {
    int spans;
    char names[8][64];
    int64_t start[8], end[8], pid[8];
    char role[8][32];
    int ids_n[8];
    char id0[8][32];
    int64_t batch[8];
    uint8_t span_id[8][8];
} seen;

static mst_status sink(void *ctx, const mst_an_span *s) {
    seen *x = ctx;
    int i = x->spans++;
    if (i >= 8) return MST_OK;
    snprintf(x->names[i], sizeof x->names[i], "%.*s", (int)s->name.len, s->name.ptr);
    snprintf(x->role[i], sizeof x->role[i], "%.*s", (int)s->role.len, s->role.ptr);
    x->start[i] = s->start_ns;
    x->end[i] = s->end_ns;
    x->pid[i] = s->pid;
    memcpy(x->span_id[i], s->span_id, 8);
    const mst_an_attr *a = mst_an_span_attr(s, "request.ids", 11);
    if (a && a->type == MST_AN_VAL_STR_LIST) {
        x->ids_n[i] = (int)a->n_items;
        if (a->n_items)
            snprintf(x->id0[i], sizeof x->id0[i], "%.*s", (int)a->items[0].len, a->items[0].ptr);
    } else {
        x->ids_n[i] = -1;
    }
    a = mst_an_span_attr(s, "batch.request_count", 19);
    x->batch[i] = a && a->type == MST_AN_VAL_INT ? a->i : -1;
    return MST_OK;
}

static const char DOC[] =
    "[\n"
    "{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":7,\"tid\":0,\"args\":{\"name\":\"engine_core (svc)\"}}"
    ",{\"name\":\"vllm.scheduler.schedule\",\"cat\":\"c\",\"ph\":\"X\",\"ts\":1700000000000000.123,"
    "\"dur\":270.5,\"pid\":7,\"tid\":8,\"args\":{\"batch.request_count\":2,\"request.ids\":[\"a\\u0041\",\"b\"],"
    "\"x\":{\"deep\":[1,{\"k\":null}]},\"f\":1.5e3,\"ok\":true,\"trace_id\":\"48a53a89442e0a64c76b9ef78a1d24ab\","
    "\"span_id\":\"322cf08388dce573\",\"parent_span_id\":\"\",\"span.kind\":1,\"span.status\":1}}"
    ",{\"name\":\"request.link\",\"cat\":\"Tracing.Flow\",\"ph\":\"f\",\"ts\":1,\"pid\":7,\"tid\":8,\"id\":\"x\",\"bp\":\"e\"}"
    ",{\"name\":\"forwarder.spans_dropped\",\"ph\":\"C\",\"ts\":5,\"pid\":9,\"tid\":0,\"args\":{\"value\":3}}"
    ",{\"name\":\"r\",\"ph\":\"b\",\"cat\":\"request\",\"id\":\"q\",\"ts\":5,\"pid\":9,\"tid\":0}"
    ",{\"name\":\"vllm.output.process\",\"ph\":\"X\",\"ts\":-2,\"dur\":0,\"pid\":5,\"tid\":5,"
    "\"args\":{\"process.role\":\"api_server\",\"request.ids\":[1,\"mixed\"]}}"
    "]\n";

static void reads_every_field(void) {
    seen x;
    memset(&x, 0, sizeof x);
    mst_an_input_info info;
    char err[256];
    CHECK(mst_an_read_buffer(&mst_an_chrome_format, DOC, sizeof DOC - 1, "doc", 3, sink, &x, &info, err,
                             sizeof err) == MST_OK);
    CHECK_EQ_INT(x.spans, 2);
    CHECK_EQ_STR(x.names[0], "vllm.scheduler.schedule");
    CHECK_EQ_INT(x.start[0], 1700000000000000123ll);
    CHECK_EQ_INT(x.end[0] - x.start[0], 270500);
    CHECK_EQ_INT(x.pid[0], 7);
    CHECK_EQ_STR(x.role[0], "engine_core"); /* from the M event, service part cut */
    CHECK_EQ_INT(x.ids_n[0], 2);
    CHECK_EQ_STR(x.id0[0], "aA");          /* \u0041 unescaped */
    CHECK_EQ_INT(x.batch[0], 2);
    CHECK(x.span_id[0][0] == 0x32 && x.span_id[0][7] == 0x73);
    CHECK_EQ_STR(x.role[1], "api_server"); /* process.role wins */
    CHECK_EQ_INT(x.start[1], -2000);
    CHECK_EQ_INT(x.ids_n[1], -1);          /* a mixed list is not a string list */
    CHECK_EQ_INT(info.flows, 1);
    CHECK_EQ_INT(info.spans_dropped, 3);
    CHECK_EQ_INT(info.skipped, 0);
    CHECK(!info.truncated);
    mst_an_input_info_free(&info);
}

/* Every prefix of the document: never an error once the first span is
 * complete, never a crash; spans complete before the cut are all kept. */
static void every_cut(void) {
    const char *first_end = strstr(DOC, "\"span.status\":1}}") + strlen("\"span.status\":1}}");
    size_t need = (size_t)(first_end - DOC);
    for (size_t n = 0; n < sizeof DOC - 1; n++) {
        seen x;
        memset(&x, 0, sizeof x);
        mst_an_input_info info;
        char err[256] = "";
        char *copy = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
        memcpy(copy, DOC, n);
        mst_status st =
            mst_an_read_buffer(&mst_an_chrome_format, copy, n, "cut", 0, sink, &x, &info, err, sizeof err);
        if (n >= need) {
            CHECK(st == MST_OK);
            CHECK(x.spans >= 1);
            if (n < sizeof DOC - 2) CHECK(info.truncated || x.spans == 2);
        } else {
            CHECK(x.spans == 0);
        }
        if (st != MST_OK) CHECK(err[0] != 0);
        mst_an_input_info_free(&info);
        free(copy);
    }
}

static void bad_top_levels(void) {
    const char *bad[] = {"", "  ", "{}", "\"x\"", "12", "nope", "\n\x10\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        seen x;
        memset(&x, 0, sizeof x);
        mst_an_input_info info;
        char err[256] = "";
        mst_status st = mst_an_read_buffer(&mst_an_chrome_format, bad[i], strlen(bad[i]), "bad", 0, sink, &x,
                                           &info, err, sizeof err);
        CHECK(st != MST_OK);
        CHECK(strstr(err, "bad") != NULL);
        CHECK(strchr(err, '\n') == NULL);
        mst_an_input_info_free(&info);
    }
    /* A broken event in the middle is skipped and counted, the rest read. */
    const char mid[] = "[{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":1},"
                       "{\"name\":\"b\",\"ph\":\"X\",\"ts\":01},"
                       "{\"name\":\"c\",\"ph\":\"X\",\"ts\":2,\"dur\":1,\"pid\":1,\"tid\":1}]";
    seen x;
    memset(&x, 0, sizeof x);
    mst_an_input_info info;
    char err[256];
    CHECK(mst_an_read_buffer(&mst_an_chrome_format, mid, sizeof mid - 1, "mid", 0, sink, &x, &info, err,
                             sizeof err) == MST_OK);
    CHECK_EQ_INT(x.spans, 2);
    CHECK_EQ_INT(info.skipped, 1);
    CHECK(info.n_warnings >= 1);
    mst_an_input_info_free(&info);
}

static mst_status count_only(void *ctx, const mst_an_span *s) {
    (void)s;
    (*(int *)ctx)++;
    return MST_OK;
}

/* What the reader told the progress callback. */
typedef struct progress_calls {
    int calls;
    uint64_t last_done, total;
    bool backwards;
} progress_calls;

static void on_progress(void *ctx, uint64_t done, uint64_t total) {
    progress_calls *p = ctx;
    if (done <= p->last_done) p->backwards = true;
    p->calls++;
    p->last_done = done;
    p->total = total;
}

/* A file larger than the reader's chunk, with an event larger than it too. */
static void file_across_chunks(void) {
    char path[] = "/tmp/mst_analyze_reader_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("[", f);
    int n = 0;
    for (; n < 60000; n++)
        fprintf(f, "%s{\"name\":\"s%d\",\"ph\":\"X\",\"ts\":%d.5,\"dur\":1,\"pid\":1,\"tid\":2,\"args\":"
                   "{\"request.ids\":[\"r%d\"],\"pad\":\"%0100d\"}}\n",
                n ? "," : "", n % 7, n, n, 0);
    /* One 6 MiB event (bigger than a 4 MiB chunk). */
    fputs(",{\"name\":\"big\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":1,\"tid\":2,\"args\":{\"blob\":\"", f);
    for (int i = 0; i < 6 * 1024; i++) fprintf(f, "%01024d", 0);
    fputs("\"}}]", f);
    n++;
    fclose(f);
    int got = 0;
    mst_an_input_info info;
    char err[256];
    progress_calls pc = {0};
    CHECK(mst_an_read_file(&mst_an_chrome_format, path, 0, count_only, &got, on_progress, &pc, &info, err,
                           sizeof err) == MST_OK);
    CHECK_EQ_INT(got, n);
    CHECK(!info.truncated && info.skipped == 0);
    /* > 16 MiB: the progress callback ran, at most once per 16 MiB read,
     * with growing byte counts and the file's size as the total. */
    CHECK(info.bytes > (16u << 20));
    CHECK(pc.calls >= 1 && (uint64_t)pc.calls <= info.bytes / (16u << 20));
    CHECK(!pc.backwards && pc.last_done >= (16u << 20) && pc.last_done <= info.bytes);
    CHECK_EQ_INT(pc.total, info.bytes);
    mst_an_input_info_free(&info);
    CHECK(mst_an_read_file(&mst_an_chrome_format, "/nonexistent/x.json", 0, count_only, &got, NULL, NULL,
                           &info, err, sizeof err) == MST_ERR_IO);
    CHECK(strstr(err, "cannot open") != NULL);
    mst_an_input_info_free(&info);
    unlink(path);
}

static const mst_test_case tests[] = {
    {"reads_every_field", reads_every_field},
    {"every_cut", every_cut},
    {"bad_top_levels", bad_top_levels},
    {"file_across_chunks", file_across_chunks},
};
MST_TEST_MAIN(tests)
