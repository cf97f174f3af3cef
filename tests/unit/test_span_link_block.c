/* test_span_link_block.c — mst_span_add_link_block (mstrace.h), compiled
 * against include/mstrace.h only: a block of links copied on the calling
 * thread reaches an exporter as ordinary links, in order, after the links
 * added one by one, each with its attribute naming the list item it points
 * at; the limit (MST_MAX_LINKS, shared with mst_span_add_link) counts the
 * rest as dropped; invalid ids are skipped, an item out of range gets no
 * attribute, a second block adds nothing. The list the links name may be
 * set with its items' lengths (mst_span_set_str_list_n): exactly those
 * bytes are copied, without a NUL in the source. */
#include "testlib.h"
#include "mstrace.h"
#include "inspect_exporter.h"

#include <stdio.h>
#include <stdlib.h>

static mst_tracer *g_t;

/* Request k's context: trace id k+1 in its last two bytes, span id k+1. */
static mst_link_ref ref_of(unsigned k, uint16_t item) {
    mst_link_ref r;
    memset(&r, 0, sizeof r);
    r.trace_id.bytes[14] = (uint8_t)((k + 1) >> 8);
    r.trace_id.bytes[15] = (uint8_t)(k + 1);
    r.span_id.bytes[6] = (uint8_t)((k + 1) >> 8);
    r.span_id.bytes[7] = (uint8_t)(k + 1);
    r.trace_flags = MST_TRACE_FLAG_SAMPLED;
    r.is_remote = true;
    r.item = item;
    return r;
}

#define BATCH 300
static char g_names[MST_MAX_LINKS + 16][16];
static const char *g_items[MST_MAX_LINKS + 16];

static void fill_names(unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        snprintf(g_names[i], sizeof g_names[i], "req-%u", i);
        g_items[i] = g_names[i];
    }
}

static void inspect_batch(const mst_span *s) {
    size_t n = 0;
    const mst_link *l = mst_span_get_links(s, &n);
    CHECK_EQ_INT(n, 1 + BATCH);
    CHECK_EQ_INT(l[0].n_attrs, 1); /* the one added by mst_span_add_link comes first */
    CHECK_EQ_STR(l[0].attrs[0].v.s.ptr, "first");
    for (unsigned k = 0; k < BATCH; k++) {
        const mst_link *x = &l[1 + k];
        mst_link_ref want = ref_of(k, (uint16_t)k);
        CHECK(memcmp(x->trace_id.bytes, want.trace_id.bytes, 16) == 0);
        CHECK(memcmp(x->span_id.bytes, want.span_id.bytes, 8) == 0);
        CHECK(x->is_remote);
        CHECK_EQ_INT(x->trace_flags, MST_TRACE_FLAG_SAMPLED);
        CHECK_EQ_STR(x->trace_state.ptr, "");
        CHECK_EQ_INT(x->n_attrs, 1);
        CHECK_EQ_STR(x->attrs[0].key.ptr, "request.id");
        CHECK_EQ_INT(x->attrs[0].type, MST_ATTR_STRING);
        CHECK_EQ_STR(x->attrs[0].v.s.ptr, g_names[k]);
    }
    CHECK(l == mst_span_get_links(s, NULL)); /* expanded once */
    mst_span_dropped d;
    mst_span_get_dropped(s, &d);
    CHECK_EQ_INT(d.links, 0);
}

static void test_block_of_a_batch(void) {
    g_t = mst_test_inspect_setup();
    fill_names(BATCH);
    mst_span *s = mst_span_start(g_t, mst_tracer_scope(g_t, "s", NULL), "step", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_str_list(s, "request.ids", g_items, BATCH);
    mst_span_context one;
    memset(&one, 0, sizeof one);
    one.trace_id.bytes[0] = 9;
    one.span_id.bytes[0] = 9;
    mst_attr_in a = {.key = "why", .type = MST_ATTR_STRING, .v.s = "first"};
    mst_span_add_link(s, &one, &a, 1);
    mst_link_ref refs[BATCH];
    for (unsigned k = 0; k < BATCH; k++) refs[k] = ref_of(k, (uint16_t)k);
    mst_span_add_link_block(s, refs, BATCH, "request.id", "request.ids");
    mst_test_inspect_set(inspect_batch);
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_test_inspect_finish(), 1);
}

static void inspect_limit(const mst_span *s) {
    size_t n = 0;
    const mst_link *l = mst_span_get_links(s, &n);
    /* 2 invalid skipped out of MST_MAX_LINKS taken; 16 over the limit, and a
     * whole second block of 3, dropped */
    CHECK_EQ_INT(n, MST_MAX_LINKS - 2);
    CHECK_EQ_INT(l[0].n_attrs, 0); /* item out of range: no attribute */
    CHECK_EQ_STR(l[1].attrs[0].v.s.ptr, g_names[1]);
    mst_span_dropped d;
    mst_span_get_dropped(s, &d);
    CHECK_EQ_INT(d.links, 16 + 3);
}

static void test_limit_invalid_and_out_of_range(void) {
    g_t = mst_test_inspect_setup();
    fill_names(MST_MAX_LINKS + 16);
    mst_span *s = mst_span_start(g_t, mst_tracer_scope(g_t, "s", NULL), "step", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_str_list(s, "request.ids", g_items, MST_MAX_LIST_ITEMS);
    static mst_link_ref refs[MST_MAX_LINKS + 16];
    for (unsigned k = 0; k < MST_MAX_LINKS + 16; k++) refs[k] = ref_of(k, (uint16_t)k);
    refs[0].item = 60000;
    memset(&refs[5].trace_id, 0, sizeof refs[5].trace_id);
    memset(&refs[6].span_id, 0, sizeof refs[6].span_id);
    mst_span_add_link_block(s, refs, MST_MAX_LINKS + 16, "request.id", "request.ids");
    mst_span_add_link_block(s, refs, 3, "request.id", "request.ids");
    mst_test_inspect_set(inspect_limit);
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_test_inspect_finish(), 1);
}

static void inspect_no_list(const mst_span *s) {
    size_t n = 0;
    const mst_link *l = mst_span_get_links(s, &n);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(l[0].n_attrs, 0);
    CHECK_EQ_INT(l[1].n_attrs, 0);
}

static void test_no_list_no_attribute(void) {
    g_t = mst_test_inspect_setup();
    mst_span *s = mst_span_start(g_t, mst_tracer_scope(g_t, "s", NULL), "step", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_link_ref refs[2] = {ref_of(0, 0), ref_of(1, 1)};
    mst_span_add_link_block(s, refs, 2, "request.id", "request.ids"); /* no such list on the span */
    mst_span_add_link_block(NULL, refs, 2, "request.id", NULL);       /* NULL span: nothing */
    mst_test_inspect_set(inspect_no_list);
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_test_inspect_finish(), 1);
}

static void inspect_lengths(const mst_span *s) {
    size_t n = 0;
    const mst_attr *a = mst_span_get_attrs(s, &n);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(a[0].v.list.count, 2);
    CHECK_EQ_STR(a[0].v.list.items[0].ptr, "abc");
    CHECK_EQ_INT(a[0].v.list.items[0].len, 3);
    CHECK_EQ_STR(a[0].v.list.items[1].ptr, "");
    const mst_link *l = mst_span_get_links(s, &n);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_STR(l[0].attrs[0].v.s.ptr, "abc");
}

static void test_list_with_lengths(void) {
    g_t = mst_test_inspect_setup();
    static const char text[] = "abcdef"; /* items are prefixes: no NUL after them */
    const char *items[] = {text, text};
    size_t lens[] = {3, 0};
    mst_span *s = mst_span_start(g_t, mst_tracer_scope(g_t, "s", NULL), "step", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_str_list_n(s, "request.ids", items, lens, 2);
    mst_link_ref r = ref_of(0, 0);
    mst_span_add_link_block(s, &r, 1, "request.id", "request.ids");
    mst_test_inspect_set(inspect_lengths);
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_test_inspect_finish(), 1);
}

static const mst_test_case tests[] = {
    {"list_with_lengths", test_list_with_lengths},
    {"block_of_a_batch", test_block_of_a_batch},
    {"limit_invalid_and_out_of_range", test_limit_invalid_and_out_of_range},
    {"no_list_no_attribute", test_no_list_no_attribute},
};
MST_TEST_MAIN(tests)
