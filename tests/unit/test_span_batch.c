/*
 * test_span_batch.c — the forwarder's decoded span batches
 * (src/forward/span_batch.c) and the formatting thread they are handed to
 * (src/forward/format_stage.c): a batch owns every byte its spans point
 * to (the packets' buffers and the decoder's scratch arena are reused
 * before the spans are read), a bad packet leaves the batch as it was,
 * the limits hold, and the stage formats every span handed over, in order,
 * with never more than its fixed number of batches in play.
 */
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "forward/format_stage.h"
#include "forward/span_batch.h"
#include "testlib.h"

/* magic + JSON of a span whose fields depend on i; odd i have escapes in
 * the name, the category and an attribute key, so those strings live in
 * the decoder's arena rather than in the packet. */
static size_t make_packet(char *out, size_t cap, int i) {
    const char *esc = i % 2 ? "\\u0041" : "A";
    int n = snprintf(out, cap,
                     "MSPF_PERFETTO_V1\n"
                     "{\"name\":\"step%s-%d\",\"category\":\"cat%s\",\"trace_id\":\"%032x\","
                     "\"span_id\":\"%016x\",\"parent_span_id\":\"\",\"start_time_ns\":%d,"
                     "\"end_time_ns\":%d,\"kind\":1,\"status\":0,\"attributes\":{\"process.pid\":7,"
                     "\"thread.id\":8,\"k%s%d\":\"v%d\",\"batch.size\":%d},"
                     "\"resource_attributes\":{\"service.name\":\"svc%s\"},"
                     "\"links\":[{\"trace_id\":\"%032x\",\"span_id\":\"%016x\"}]}",
                     esc, i, esc, i + 1, i + 1, 1000 + i, 2000 + i, esc, i, i, i % 64, esc, i + 2,
                     i + 2);
    return (size_t)n;
}

static bool str_is(mst_str s, const char *want) {
    return s.ptr && s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static bool slice_is(mst_json_slice s, const char *want) {
    return s.ptr && s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* Checks span i of make_packet as decoded. */
static void check_span(const mst_pf_span *sp, int i) {
    char want[64];
    snprintf(want, sizeof want, "stepA-%d", i);
    CHECK(str_is(sp->name, want));
    CHECK(sp->name.ptr[sp->name.len] == '\0');
    CHECK(str_is(sp->category, "catA"));
    CHECK(sp->category.ptr[sp->category.len] == '\0');
    CHECK_EQ_INT(sp->start_ns, 1000 + i);
    CHECK_EQ_INT(sp->end_ns, 2000 + i);
    CHECK(sp->has_pid && sp->pid == 7);
    snprintf(want, sizeof want, "%016x", i + 1);
    CHECK_EQ_STR(sp->span_id, want);
    CHECK_EQ_INT(sp->n_attrs, 2);
    if (sp->n_attrs == 2) {
        snprintf(want, sizeof want, "kA%d", i);
        CHECK(str_is(sp->attrs[0].key, want));
        snprintf(want, sizeof want, "\"v%d\"", i);
        CHECK(slice_is(sp->attrs[0].value, want));
        CHECK(str_is(sp->attrs[1].key, "batch.size"));
        snprintf(want, sizeof want, "%d", i % 64);
        CHECK(slice_is(sp->attrs[1].value, want));
    }
    CHECK_EQ_INT(sp->n_resource, 1);
    if (sp->n_resource == 1) {
        CHECK(str_is(sp->resource[0].key, "service.name"));
        /* Values are the raw JSON text, escapes and all. */
        CHECK(slice_is(sp->resource[0].value, i % 2 ? "\"svc\\u0041\"" : "\"svcA\""));
    }
    CHECK_EQ_INT(sp->n_links, 1);
    if (sp->n_links == 1) {
        snprintf(want, sizeof want, "%016x", i + 2);
        CHECK_EQ_STR(sp->links[0].span_id, want);
    }
}

/* Adds packet i from a heap copy that is scribbled over and freed right
 * after, as the frame server reuses its buffer. */
static mst_status add_packet(mst_span_batch *b, int i) {
    char tmp[1024];
    size_t n = make_packet(tmp, sizeof tmp, i);
    uint8_t *copy = malloc(n);
    memcpy(copy, tmp, n);
    char err[200] = "";
    mst_status st = mst_span_batch_add(b, NULL, 0, copy, n, NULL, err, sizeof err);
    memset(copy, 'x', n);
    free(copy);
    return st;
}

static void test_batch_owns_its_bytes(void) {
    mst_span_batch *b = mst_span_batch_new();
    CHECK(b != NULL);
    /* Twice, so the second round runs on the blocks the reset kept. */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 600; i++) CHECK_EQ_INT(add_packet(b, i), MST_OK);
        CHECK_EQ_INT(mst_span_batch_count(b), 600);
        for (int i = 0; i < 600; i++) check_span(mst_span_batch_span(b, (size_t)i), i);
        mst_span_batch_reset(b);
        CHECK_EQ_INT(mst_span_batch_count(b), 0);
    }
    mst_span_batch_free(b);
}

static void test_bad_packet_leaves_batch_as_before(void) {
    mst_span_batch *b = mst_span_batch_new();
    CHECK_EQ_INT(add_packet(b, 1), MST_OK);
    char pkt[1024];
    size_t n = make_packet(pkt, sizeof pkt, 3);
    char err[200] = "";
    /* Cut in the middle of the links: a parse error after the arrays and
     * escaped strings were already made. */
    CHECK_EQ_INT(mst_span_batch_add(b, NULL, 0, (const uint8_t *)pkt, n - 10, NULL, err, sizeof err),
                 MST_ERR_PARSE);
    CHECK(err[0] != '\0');
    CHECK_EQ_INT(mst_span_batch_count(b), 1);
    CHECK_EQ_INT(add_packet(b, 5), MST_OK);
    CHECK_EQ_INT(mst_span_batch_count(b), 2);
    check_span(mst_span_batch_span(b, 0), 1);
    check_span(mst_span_batch_span(b, 1), 5);
    /* Failed packets take no room: 10,000 of them do not fill the batch. */
    for (int k = 0; k < 10000; k++)
        (void)mst_span_batch_add(b, NULL, 0, (const uint8_t *)pkt, n - 10, NULL, err, sizeof err);
    CHECK(!mst_span_batch_full(b));
    mst_span_batch_free(b);
}

static void test_limits(void) {
    mst_span_batch *b = mst_span_batch_new();
    for (int i = 0; i < MST_SPAN_BATCH_MAX_SPANS; i++) {
        CHECK(!mst_span_batch_full(b));
        CHECK_EQ_INT(add_packet(b, i), MST_OK);
    }
    CHECK(mst_span_batch_full(b));
    CHECK_EQ_INT(add_packet(b, 0), MST_ERR_QUEUE_FULL);
    CHECK_EQ_INT(mst_span_batch_count(b), MST_SPAN_BATCH_MAX_SPANS);
    check_span(mst_span_batch_span(b, MST_SPAN_BATCH_MAX_SPANS - 1), MST_SPAN_BATCH_MAX_SPANS - 1);
    mst_span_batch_reset(b);

    /* One packet bigger than the byte limit fits an empty batch, which is
     * then full; after the reset the batch works as before. */
    size_t big = MST_SPAN_BATCH_FULL_BYTES + 4096;
    char *pkt = malloc(big + 512);
    int n = snprintf(pkt, 512,
                     "MSPF_PERFETTO_V1\n{\"name\":\"big\",\"trace_id\":\"%032x\",\"span_id\":"
                     "\"%016x\",\"start_time_ns\":1,\"end_time_ns\":2,\"attributes\":{\"blob\":\"",
                     1, 1);
    memset(pkt + n, 'b', big);
    memcpy(pkt + n + big, "\"}}", 3);
    char err[200] = "";
    CHECK_EQ_INT(mst_span_batch_add(b, NULL, 0, (const uint8_t *)pkt, (size_t)n + big + 3, NULL, err, sizeof err),
                 MST_OK);
    free(pkt);
    CHECK(mst_span_batch_full(b));
    const mst_pf_span *sp = mst_span_batch_span(b, 0);
    CHECK(str_is(sp->name, "big"));
    CHECK_EQ_INT(sp->attrs[0].value.len, big + 2);
    CHECK(sp->attrs[0].value.ptr[1] == 'b' && sp->attrs[0].value.ptr[big] == 'b');
    mst_span_batch_reset(b);
    CHECK_EQ_INT(add_packet(b, 9), MST_OK);
    check_span(mst_span_batch_span(b, 0), 9);
    mst_span_batch_free(b);
}

/* ---- the formatting thread ---- */

typedef struct recorder {
    int64_t *starts; /* start_ns of every span consumed, in order */
    size_t n, cap;
    size_t batches;
    _Atomic int afters;
    int afters_due;  /* `after` asks to run again until called this often */
} recorder;

static void rec_consume(void *self, const mst_span_batch *batch) {
    recorder *r = self;
    r->batches++;
    for (size_t i = 0; i < mst_span_batch_count(batch); i++) {
        if (r->n < r->cap) r->starts[r->n] = mst_span_batch_span(batch, i)->start_ns;
        r->n++;
    }
}

static int rec_after(void *self, uint64_t now_ms) {
    (void)now_ms;
    recorder *r = self;
    int done = atomic_fetch_add(&r->afters, 1) + 1;
    return done < r->afters_due ? 0 : -1;
}

static void test_stage_formats_everything_in_order(void) {
    int total = mst_test_stress_rounds(30000);
    recorder r = {.cap = (size_t)total};
    r.starts = calloc(r.cap, sizeof *r.starts);
    mst_format_stage_ops ops = {.self = &r, .consume = rec_consume, .after = rec_after};
    mst_format_stage *st = NULL;
    CHECK_EQ_INT(mst_format_stage_start(&ops, &st), MST_OK);
    mst_span_batch *seen[16];
    size_t n_seen = 0;
    size_t published = 0;
    for (int i = 0; i < total; i++) {
        mst_span_batch *b = mst_format_stage_batch(st);
        bool known = false;
        for (size_t k = 0; k < n_seen; k++) known |= seen[k] == b;
        if (!known && n_seen < 16) seen[n_seen++] = b;
        CHECK_EQ_INT(add_packet(b, i), MST_OK);
        /* Hand over at uneven points, and whenever the batch is full. */
        if (mst_span_batch_full(b) || i % 97 == 0) {
            mst_format_stage_publish(st);
            published++;
        }
    }
    /* The last partly filled batch is handed over by stop. */
    mst_format_stage_stop(st);
    CHECK(n_seen <= MST_FORMAT_STAGE_BATCHES);
    CHECK_EQ_INT(r.n, total);
    CHECK(r.batches >= published);
    for (int i = 0; i < total; i++)
        if (r.starts[i] != 1000 + i) {
            CHECK_EQ_INT(r.starts[i], 1000 + i);
            break;
        }
    /* Each batch was followed by its `after`. */
    CHECK(atomic_load(&r.afters) >= (int)r.batches);
    free(r.starts);
}

static void test_stage_after_runs_without_batches(void) {
    recorder r = {.afters_due = 5};
    mst_format_stage_ops ops = {.self = &r, .consume = rec_consume, .after = rec_after};
    mst_format_stage *st = NULL;
    CHECK_EQ_INT(mst_format_stage_start(&ops, &st), MST_OK);
    /* Nothing is handed over: the stage calls `after` on its own while it
     * asks to be called again (0 ms), then waits for work. Bounded by work;
     * a broken stage never gets there, and the alarm then ends the test
     * visibly instead of letting it spin. The first call needs one batch to
     * start the cycle. */
    mst_span_batch *b = mst_format_stage_batch(st);
    CHECK_EQ_INT(add_packet(b, 0), MST_OK);
    mst_format_stage_publish(st);
    alarm(60); /* default action: the test dies with SIGALRM */
    while (atomic_load(&r.afters) < 5) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    alarm(0);
    mst_format_stage_stop(st);
    CHECK_EQ_INT(atomic_load(&r.afters), 5);
    CHECK_EQ_INT(r.batches, 1);
}

static const mst_test_case TESTS[] = {
    {"batch_owns_its_bytes", test_batch_owns_its_bytes},
    {"bad_packet_leaves_batch_as_before", test_bad_packet_leaves_batch_as_before},
    {"limits", test_limits},
    {"stage_formats_everything_in_order", test_stage_formats_everything_in_order},
    {"stage_after_runs_without_batches", test_stage_after_runs_without_batches},
};

MST_TEST_MAIN(TESTS)
