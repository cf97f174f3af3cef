/* test_batch_block.c — batch blocks (mstrace.h, src/core/batch_block.c):
 * a string list and link block copied once and read by several spans.
 *
 * - The same span recorded with the copying calls (mst_span_set_str_list_lit,
 *   mst_span_add_link_block) and with a block (mst_span_set_str_list_block_lit,
 *   mst_span_add_link_block_shared) encodes to the same OTLP proto, OTLP
 *   JSON and forwarder packet bytes (a 256-id batch with a cut item, an
 *   invalid link and an item out of range; links added one by one too).
 * - Reference counts: one per span given the block (both calls: one), dropped
 *   when the span is exported or discarded; the creator may release first; a
 *   span exported after its siblings and after the creator's release still
 *   reads the block.
 * - A span already holding another block copies the second one (same bytes).
 * - Released blocks are reused by the next blocks that fit (pool); a block too
 *   big for the pool, NULL arguments, and a fork child making blocks.
 */
#include "testlib.h"
#include "mstrace.h"

#include "core/batch_block.h"
#include "core/tracer.h"
#include "wire/buf.h"
#include "wire/otlp.h"
#include "wire/perfetto_packet.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------- an exporter keeping bytes */

#define MAX_KEPT 16

typedef struct kept {
    mst_buf proto, json, packet;
} kept;

typedef struct bytes_exporter {
    mst_exporter base;
    mst_tracer *tracer;
    size_t n;
    kept spans[MAX_KEPT];
} bytes_exporter;

static mst_status bytes_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    bytes_exporter *e = (bytes_exporter *)self;
    const mst_resource *res = mst_tracer_resource(e->tracer);
    for (size_t i = 0; i < n && e->n < MAX_KEPT; i++) {
        kept *k = &e->spans[e->n++];
        mst_buf_init(&k->proto, 0);
        mst_buf_init(&k->json, 0);
        mst_buf_init(&k->packet, 0);
        CHECK_EQ_INT(mst_otlp_encode_proto(res, &spans[i], 1, &k->proto), MST_OK);
        CHECK_EQ_INT(mst_otlp_encode_json(res, &spans[i], 1, &k->json), MST_OK);
        mst_perfetto_packet_encode(spans[i], res, &k->packet);
        CHECK(!k->packet.failed);
    }
    return MST_OK;
}

static void bytes_destroy(mst_exporter *self) { (void)self; }

static const mst_exporter_ops bytes_ops = {.name = "bytes", .export_batch = bytes_export,
                                           .destroy = bytes_destroy};

static bytes_exporter g_e;
static mst_tracer *g_t;

static void setup(void) {
    mst_tracer_options opts = {.max_queue_size = 64, .max_export_batch_size = 16,
                               .schedule_delay_ms = 600000};
    CHECK_EQ_INT(mst_tracer_create(&opts, &g_t), MST_OK);
    memset(&g_e, 0, sizeof g_e);
    g_e.base.ops = &bytes_ops;
    g_e.tracer = g_t;
    CHECK_EQ_INT(mst_tracer_add_exporter(g_t, &g_e.base), MST_OK);
}

static void teardown(void) {
    mst_tracer_shutdown(g_t, 10000);
    for (size_t i = 0; i < g_e.n; i++) {
        mst_buf_free(&g_e.spans[i].proto);
        mst_buf_free(&g_e.spans[i].json);
        mst_buf_free(&g_e.spans[i].packet);
    }
}

static bool same_buf(const mst_buf *a, const mst_buf *b) {
    return a->len == b->len && a->len > 0 && memcmp(a->data, b->data, a->len) == 0;
}

static bool same_span_bytes(size_t i, size_t j) {
    const kept *a = &g_e.spans[i], *b = &g_e.spans[j];
    return same_buf(&a->proto, &b->proto) && same_buf(&a->json, &b->json) && same_buf(&a->packet, &b->packet);
}

/* ------------------------------------------------------------ a batch */

#define BATCH 256
static char g_names[BATCH][48];
static const char *g_ids[BATCH];
static size_t g_lens[BATCH];
static mst_link_ref g_refs[BATCH];
static char g_big[MST_MAX_VALUE_LEN + 40];

/* Request k: "cmpl-<k>-<uuid-like>"; item 3 is over the value limit (cut);
 * link k names item k, except link 5 (invalid ids: skipped) and link 7 (an
 * item out of range: no attribute). */
static void make_batch(void) {
    memset(g_big, 'q', sizeof g_big - 1);
    for (unsigned k = 0; k < BATCH; k++) {
        snprintf(g_names[k], sizeof g_names[k], "cmpl-%u-0123456789abcdef0123456789ab", k);
        g_ids[k] = g_names[k];
        g_lens[k] = strlen(g_names[k]);
        mst_link_ref *r = &g_refs[k];
        memset(r, 0, sizeof *r);
        r->trace_id.bytes[0] = 0x11;
        r->trace_id.bytes[14] = (uint8_t)((k + 1) >> 8);
        r->trace_id.bytes[15] = (uint8_t)(k + 1);
        r->span_id.bytes[7] = (uint8_t)(k + 1);
        r->span_id.bytes[0] = 0x22;
        r->trace_flags = MST_TRACE_FLAG_SAMPLED;
        r->is_remote = k % 2;
        r->item = (uint16_t)k;
    }
    g_ids[3] = g_big;
    g_lens[3] = sizeof g_big - 1;
    memset(&g_refs[5].trace_id, 0, sizeof g_refs[5].trace_id);
    g_refs[7].item = BATCH + 9;
}

static mst_span *start_fixed(const char *name) {
    mst_trace_id tid;
    mst_span_id sid;
    memset(&tid, 0x5a, sizeof tid);
    memset(&sid, 0x6b, sizeof sid);
    const mst_scope *sc = mst_tracer_scope(g_t, "ms_service_profiler.hook.Schedule", "1");
    return mst_span_start_with_ids(g_t, sc, name, MST_SPAN_KIND_INTERNAL, NULL, &tid, &sid, 1000);
}

/* The attributes around the list, as the hooks set them. */
static void head_attrs(mst_span *s) {
    mst_span_set_int_lit(s, MST_LIT("process.pid"), 4242);
    mst_span_set_int_lit(s, MST_LIT("thread.id"), 77);
}

static void tail_attrs(mst_span *s) {
    mst_span_set_int_lit(s, MST_LIT("batch.request_count"), BATCH);
    mst_span_set_int_lit(s, MST_LIT("step.index"), 12);
}

static void step_link(mst_span *s) {
    mst_span_context c;
    memset(&c, 0, sizeof c);
    memset(&c.trace_id, 0x33, sizeof c.trace_id);
    memset(&c.span_id, 0x44, sizeof c.span_id);
    c.trace_flags = MST_TRACE_FLAG_SAMPLED;
    mst_span_add_link(s, &c, NULL, 0);
}

static void record_copied(void) {
    mst_span *s = start_fixed("vllm.model");
    head_attrs(s);
    mst_span_set_str_list_lit(s, MST_LIT("request.ids"), g_ids, g_lens, BATCH);
    tail_attrs(s);
    mst_span_add_link_block(s, g_refs, BATCH, "request.id", "request.ids");
    step_link(s);
    mst_span_end(s, 5000);
}

static void record_shared(mst_batch_block *b) {
    mst_span *s = start_fixed("vllm.model");
    head_attrs(s);
    mst_span_set_str_list_block_lit(s, MST_LIT("request.ids"), b);
    tail_attrs(s);
    mst_span_add_link_block_shared(s, b, "request.id", "request.ids");
    step_link(s);
    mst_span_end(s, 5000);
}

static uint32_t refs_of(mst_batch_block *b) { return atomic_load(&b->refs); }

/* ------------------------------------------------------------- tests */

/* Released blocks come back to the next blocks that fit (first, while the
 * process-wide pool holds nothing else). */
static void test_pool_reuse(void) {
    make_batch();
    mst_batch_block *a[4];
    for (int i = 0; i < 4; i++) a[i] = mst_batch_block_new(g_ids, g_lens, BATCH, g_refs, BATCH);
    for (int i = 0; i < 4; i++) {
        CHECK(a[i] != NULL);
        CHECK_EQ_INT(refs_of(a[i]), 1);
        mst_batch_block_release(a[i]);
    }
    const char *one[] = {"x"};
    for (int i = 0; i < 4; i++) {
        mst_batch_block *b = mst_batch_block_new(one, NULL, 1, NULL, 0); /* smaller: fits */
        bool reused = b == a[0] || b == a[1] || b == a[2] || b == a[3];
        CHECK(reused);
        size_t n = 0;
        const mst_str *it = mst_batch_block_items(b, &n);
        CHECK_EQ_INT(n, 1);
        CHECK_EQ_STR(it[0].ptr, "x");
        CHECK(mst_batch_block_links(b, &n) == NULL && n == 0);
        a[i] = b;
    }
    for (int i = 0; i < 4; i++) mst_batch_block_release(a[i]);
    /* a block over what the pool keeps (~1 MB): freed, not pooled (ASan: no leak) */
    static const char *big[MST_MAX_LIST_ITEMS + 5];
    for (size_t i = 0; i < MST_MAX_LIST_ITEMS + 5; i++) big[i] = g_big;
    mst_batch_block *b = mst_batch_block_new(big, NULL, MST_MAX_LIST_ITEMS + 5, g_refs, BATCH);
    size_t n = 0;
    const mst_str *it = mst_batch_block_items(b, &n);
    CHECK_EQ_INT(n, MST_MAX_LIST_ITEMS); /* over the limit: left out */
    CHECK_EQ_INT(it[n - 1].len, MST_MAX_VALUE_LEN);
    mst_batch_block_release(b);
}

/* The copying calls and the block give the same bytes in every encoder;
 * the spans drop their references when exported. */
static void test_same_bytes_as_copies(void) {
    setup();
    make_batch();
    mst_batch_block *b = mst_batch_block_new(g_ids, g_lens, BATCH, g_refs, BATCH);
    CHECK(b != NULL);
    record_copied();
    record_shared(b);
    record_shared(b);
    CHECK_EQ_INT(refs_of(b), 3); /* the creator and two spans, one each */
    CHECK_EQ_INT(mst_tracer_flush(g_t, 10000), MST_OK);
    CHECK_EQ_INT(refs_of(b), 1);
    CHECK_EQ_INT(g_e.n, 3);
    CHECK(same_span_bytes(0, 1));
    CHECK(same_span_bytes(0, 2));
    CHECK(g_e.spans[0].proto.len > BATCH * 40); /* the batch is really in it */
    mst_batch_block_release(b);
    teardown();
}

/* Whoever releases last frees: the creator first, then the spans, one of
 * them exported long after its siblings; a discarded span drops its
 * reference too. */
static void test_release_order(void) {
    setup();
    make_batch();
    mst_batch_block *b = mst_batch_block_new(g_ids, g_lens, BATCH, g_refs, BATCH);
    record_copied();                               /* span 0: the reference bytes */
    mst_span *late = start_fixed("vllm.model");    /* given the block now, ended last */
    head_attrs(late);
    mst_span_set_str_list_block_lit(late, MST_LIT("request.ids"), b);
    mst_span *dropped = start_fixed("vllm.model");
    mst_span_set_str_list_block_lit(dropped, MST_LIT("request.ids"), b);
    record_shared(b);                              /* span 1: a sibling */
    CHECK_EQ_INT(refs_of(b), 4);
    mst_span_discard(dropped);
    CHECK_EQ_INT(refs_of(b), 3);
    mst_batch_block_release(b); /* the creator goes first */
    CHECK_EQ_INT(mst_tracer_flush(g_t, 10000), MST_OK);
    CHECK_EQ_INT(g_e.n, 2);
    CHECK_EQ_INT(refs_of(b), 1); /* only `late` */
    /* other blocks come and go (maybe reusing freed memory) before `late` ends */
    const char *other[] = {"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"};
    for (int i = 0; i < 40; i++) mst_batch_block_release(mst_batch_block_new(other, NULL, 1, NULL, 0));
    tail_attrs(late);
    mst_span_add_link_block_shared(late, b, "request.id", "request.ids");
    step_link(late);
    mst_span_end(late, 5000);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 10000), MST_OK);
    CHECK_EQ_INT(g_e.n, 3);
    CHECK(same_span_bytes(0, 1));
    CHECK(same_span_bytes(0, 2));
    teardown();
}

/* A span holding one block given a second: the second is copied, and the
 * span reads the same as with copies. */
static void test_second_block_copied(void) {
    setup();
    make_batch();
    const char *one[] = {"unrelated"};
    mst_batch_block *first = mst_batch_block_new(one, NULL, 1, g_refs, 1);
    mst_batch_block *b = mst_batch_block_new(g_ids, g_lens, BATCH, g_refs, BATCH);
    record_copied();
    mst_span *s = start_fixed("vllm.model");
    mst_span_set_str_list_block_lit(s, MST_LIT("other.ids"), first);
    head_attrs(s);
    mst_span_set_str_list_block_lit(s, MST_LIT("request.ids"), b);
    tail_attrs(s);
    mst_span_add_link_block_shared(s, b, "request.id", "request.ids");
    step_link(s);
    CHECK_EQ_INT(refs_of(first), 2);
    CHECK_EQ_INT(refs_of(b), 1); /* copied, not held */
    /* the same span recorded with copies, for its bytes */
    mst_span *c = start_fixed("vllm.model");
    mst_span_set_str_list_lit(c, MST_LIT("other.ids"), one, NULL, 1);
    head_attrs(c);
    mst_span_set_str_list_lit(c, MST_LIT("request.ids"), g_ids, g_lens, BATCH);
    tail_attrs(c);
    mst_span_add_link_block(c, g_refs, BATCH, "request.id", "request.ids");
    step_link(c);
    mst_batch_block_release(b);
    mst_batch_block_release(first);
    mst_span_end(s, 5000);
    mst_span_end(c, 5000);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 10000), MST_OK);
    CHECK_EQ_INT(g_e.n, 3);
    CHECK(same_span_bytes(1, 2));
    CHECK(!same_span_bytes(0, 1));
    teardown();
}

/* NULL spans and blocks: nothing happens; an empty block sets an empty list
 * and adds no links; a second link block on a span is dropped as with
 * copies. */
static void test_null_and_empty(void) {
    setup();
    mst_batch_block_release(NULL);
    size_t n = 7;
    CHECK(mst_batch_block_items(NULL, &n) == NULL && n == 0);
    n = 7;
    CHECK(mst_batch_block_links(NULL, &n) == NULL && n == 0);
    mst_batch_block *empty = mst_batch_block_new(NULL, NULL, 5, NULL, 3);
    CHECK(empty != NULL);
    mst_span_set_str_list_block_lit(NULL, MST_LIT("k"), empty);
    mst_span_add_link_block_shared(NULL, empty, "request.id", NULL);
    mst_span *s = start_fixed("e");
    mst_span_set_str_list_block_lit(s, MST_LIT("k"), NULL);
    mst_span_set_str_list_block_lit(s, MST_LIT("k"), empty);
    mst_span_add_link_block_shared(s, empty, "request.id", "k");
    mst_span_add_link_block_shared(s, NULL, "request.id", "k");
    mst_span *c = start_fixed("e");
    mst_span_set_str_list_lit(c, MST_LIT("k"), NULL, NULL, 0);
    mst_span_end(s, 5000);
    mst_span_end(c, 5000);
    /* a second block after a first: its links dropped, counted */
    make_batch();
    mst_batch_block *b = mst_batch_block_new(g_ids, g_lens, 4, g_refs, 4);
    mst_span *twice = start_fixed("t");
    mst_span_add_link_block(twice, g_refs, 4, "request.id", NULL);
    mst_span_add_link_block_shared(twice, b, "request.id", NULL);
    mst_span *twice_c = start_fixed("t");
    mst_span_add_link_block(twice_c, g_refs, 4, "request.id", NULL);
    mst_span_add_link_block(twice_c, g_refs, 4, "request.id", NULL);
    mst_span_end(twice, 5000);
    mst_span_end(twice_c, 5000);
    mst_batch_block_release(b);
    mst_batch_block_release(empty);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 10000), MST_OK);
    CHECK_EQ_INT(g_e.n, 4);
    CHECK(same_span_bytes(0, 1));
    CHECK(same_span_bytes(2, 3));
    teardown();
}

/* A fork child makes, shares and releases blocks of its own (its pool is
 * fresh), and exports what it records. */
static void test_fork_child(void) {
    make_batch();
    mst_batch_block *held = mst_batch_block_new(g_ids, g_lens, BATCH, g_refs, BATCH);
    mst_batch_block_release(mst_batch_block_new(g_ids, g_lens, 8, g_refs, 8)); /* one in the pool */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setup();
        int bad = 0;
        for (int i = 0; i < 50; i++) {
            mst_batch_block *b = mst_batch_block_new(g_ids, g_lens, BATCH, g_refs, BATCH);
            if (!b) bad++;
            if (i == 0) record_copied();
            if (i < 3) record_shared(b);
            mst_batch_block_release(b);
        }
        if (mst_tracer_flush(g_t, 10000) != MST_OK || g_e.n != 4 || !same_span_bytes(0, 1) ||
            !same_span_bytes(0, 3))
            bad++;
        mst_batch_block_release(held); /* the parent's block, copied into the child */
        teardown();
        _exit(bad ? 1 : 0);
    }
    CHECK(pid > 0);
    int st = 0;
    CHECK_EQ_INT(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    size_t n = 0;
    const mst_str *it = mst_batch_block_items(held, &n);
    CHECK_EQ_INT(n, BATCH);
    CHECK_EQ_STR(it[BATCH - 1].ptr, g_names[BATCH - 1]);
    mst_batch_block_release(held);
}

static const mst_test_case tests[] = {
    {"pool_reuse", test_pool_reuse},
    {"same_bytes_as_copies", test_same_bytes_as_copies},
    {"release_order", test_release_order},
    {"second_block_copied", test_second_block_copied},
    {"null_and_empty", test_null_and_empty},
    {"fork_child", test_fork_child},
};

MST_TEST_MAIN(tests)
