/* test_span.c — recording a span: parent/ids, attribute limits and
 * replacement, UTF-8 truncation, links/events with attributes, status
 * rules, NULL-span no-ops, discard, and what an exporter receives. */
#include "testlib.h"
#include "core/span.h"
#include "core/tracer.h"

#include <stdlib.h>

/* An exporter that runs a check function on every span it receives. */
typedef struct check_exporter {
    mst_exporter base;
    int seen;
} check_exporter;

static void (*g_inspect)(const mst_span *s);

static mst_status check_export(mst_exporter *self, const mst_span *const *spans, size_t n) {
    check_exporter *e = (check_exporter *)self;
    for (size_t i = 0; i < n; i++) {
        if (g_inspect) g_inspect(spans[i]);
        e->seen++;
    }
    return MST_OK;
}
static void check_destroy(mst_exporter *self) { free(self); }
static const mst_exporter_ops check_ops = {.name = "check", .export_batch = check_export, .destroy = check_destroy};

static mst_tracer *g_t;
static check_exporter *g_e;

static void setup(void) {
    mst_tracer_options o = {.max_queue_size = 64, .max_export_batch_size = 16, .schedule_delay_ms = 10000};
    CHECK_EQ_INT(mst_tracer_create(&o, &g_t), MST_OK);
    g_e = calloc(1, sizeof *g_e);
    g_e->base.ops = &check_ops;
    CHECK_EQ_INT(mst_tracer_add_exporter(g_t, &g_e->base), MST_OK);
}

static void teardown(void) {
    CHECK_EQ_INT(mst_tracer_shutdown(g_t, 5000), MST_OK);
    g_t = NULL;
    g_inspect = NULL;
}

static const mst_attr *find(const mst_span *s, const char *key) {
    for (uint32_t i = 0; i < s->n_attrs; i++)
        if (strcmp(s->attrs[i].key.ptr, key) == 0) return &s->attrs[i];
    return NULL;
}

static void test_root_and_child(void) {
    setup();
    const mst_scope *sc = mst_tracer_scope(g_t, "ms_service_profiler.hook.Schedule", "1");
    CHECK(sc == mst_tracer_scope(g_t, "ms_service_profiler.hook.Schedule", "1")); /* interned */
    mst_span *root = mst_span_start(g_t, sc, "root", MST_SPAN_KIND_SERVER, NULL, 0);
    CHECK(root != NULL);
    mst_span_context rc;
    CHECK(mst_span_get_context(root, &rc));
    CHECK(mst_ctx_is_valid(&rc));
    CHECK(!rc.is_remote);
    CHECK_EQ_INT(rc.trace_flags, MST_TRACE_FLAG_SAMPLED);
    CHECK(!root->has_parent);
    mst_span *child = mst_span_start(g_t, sc, "child", MST_SPAN_KIND_INTERNAL, &rc, 123);
    CHECK(memcmp(child->trace_id.bytes, rc.trace_id.bytes, 16) == 0);
    CHECK(memcmp(child->parent_span_id.bytes, rc.span_id.bytes, 8) == 0);
    CHECK(child->has_parent);
    CHECK_EQ_INT(mst_span_start_ns(child), 123);
    CHECK_EQ_STR(mst_span_name(child), "child");
    CHECK_EQ_STR(mst_span_scope_name(child), "ms_service_profiler.hook.Schedule");
    mst_span_end(child, 100); /* before start: clamped */
    mst_span_end(root, 0);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 5000), MST_OK);
    CHECK_EQ_INT(g_e->seen, 2);
    teardown();
}

static void test_remote_parent_and_sampling(void) {
    setup();
    mst_span_context p;
    const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    CHECK_EQ_INT(mst_ctx_parse_traceparent(tp, strlen(tp), &p), MST_OK);
    CHECK_EQ_INT(mst_ctx_parse_tracestate("k=v", 3, &p), MST_OK);
    mst_span *s = mst_span_start(g_t, NULL, "x", MST_SPAN_KIND_SERVER, &p, 0);
    CHECK(s && s->parent_is_remote);
    CHECK_EQ_STR(s->trace_state.ptr, "k=v");
    mst_span_context c;
    mst_span_get_context(s, &c);
    CHECK_EQ_STR(c.trace_state, "k=v");
    mst_span_end(s, 0);
    p.trace_flags = 0; /* not sampled: nothing recorded */
    CHECK(mst_span_start(g_t, NULL, "x", MST_SPAN_KIND_SERVER, &p, 0) == NULL);
    mst_trace_id tid = {{0}};
    mst_span_id sid = mst_span_id_random();
    CHECK(mst_span_start_with_ids(g_t, NULL, "x", 1, NULL, &tid, &sid, 0) == NULL);
    tid = mst_trace_id_random();
    s = mst_span_start_with_ids(g_t, NULL, "x", 1, NULL, &tid, &sid, 0);
    CHECK(s && memcmp(s->span_id.bytes, sid.bytes, 8) == 0);
    mst_span_end(s, 0);
    mst_tracer_stats st;
    mst_tracer_get_stats(g_t, &st);
    CHECK_EQ_INT(st.spans_started, 2);
    teardown();
}

static void inspect_attrs(const mst_span *s) {
    CHECK_EQ_INT(s->n_attrs, MST_MAX_ATTRIBUTES);
    CHECK_EQ_INT(s->dropped_attrs, 8);
    const mst_attr *a = find(s, "k0");
    CHECK(a && a->type == MST_ATTR_STRING);
    if (a) CHECK_EQ_STR(a->v.s.ptr, "replaced");
    a = find(s, "k1");
    CHECK(a && a->type == MST_ATTR_INT && a->v.i == -5);
    a = find(s, "k2");
    CHECK(a && a->type == MST_ATTR_DOUBLE && a->v.d == 2.5);
    a = find(s, "k3");
    CHECK(a && a->type == MST_ATTR_BOOL && a->v.b);
    a = find(s, "k4");
    CHECK(a && a->type == MST_ATTR_STRING_LIST && a->v.list.count == MST_MAX_LIST_ITEMS);
    if (a) CHECK_EQ_STR(a->v.list.items[1].ptr, "b");
    a = find(s, "k5");
    CHECK(a && a->v.s.len == 1023); /* cut before a 2-byte character */
    a = find(s, "k6");
    CHECK(a && a->v.s.len == 3);
    if (a) CHECK_EQ_STR(a->v.s.ptr, "abc");
}

static void test_attribute_limits(void) {
    setup();
    g_inspect = inspect_attrs;
    mst_span *s = mst_span_start(g_t, NULL, "attrs", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_str(s, "k0", "first value that is long");
    mst_span_set_str(s, "k0", "replaced");
    mst_span_set_int(s, "k1", 1);
    mst_span_set_int(s, "k1", -5);
    mst_span_set_double(s, "k2", 2.5);
    mst_span_set_bool(s, "k3", true);
    const char *items[MST_MAX_LIST_ITEMS + 72];
    for (int i = 0; i < MST_MAX_LIST_ITEMS + 72; i++) items[i] = (i % 2) ? "b" : "a";
    mst_span_set_str_list(s, "k4", items, MST_MAX_LIST_ITEMS + 72);
    char big[1100];
    memset(big, 'x', sizeof big);
    big[1023] = (char)0xc3; /* é straddles the 1024-byte limit */
    big[1024] = (char)0xa9;
    big[1099] = '\0';
    mst_span_set_str(s, "k5", big);
    mst_span_set_strn(s, "k6", "abcdef", 3);
    for (int i = 7; i < 40; i++) {
        char k[16];
        sprintf(k, "k%d", i);
        mst_span_set_int(s, k, i);
    }
    mst_span_set_str(s, "k0", "replaced"); /* existing key still settable when full */
    mst_span_set_str(s, NULL, "ignored");
    mst_span_set_str(s, "", "ignored");
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 5000), MST_OK);
    CHECK_EQ_INT(g_e->seen, 1);
    teardown();
}

static void inspect_long_key(const mst_span *s) {
    CHECK_EQ_INT(s->n_attrs, 1);
    CHECK_EQ_INT(s->attrs[0].key.len, MST_MAX_KEY_LEN);
}

static void test_long_key_truncated(void) {
    setup();
    g_inspect = inspect_long_key;
    char key[300];
    memset(key, 'k', sizeof key);
    key[299] = '\0';
    mst_span *s = mst_span_start(g_t, NULL, "k", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_int(s, key, 1);
    mst_span_set_int(s, key, 2); /* same truncated key: replaced */
    mst_span_end(s, 0);
    mst_tracer_flush(g_t, 5000);
    teardown();
}

static void inspect_links_events(const mst_span *s) {
    CHECK_EQ_INT(s->n_links, MST_MAX_LINKS);
    CHECK_EQ_INT(s->dropped_links, 2);
    CHECK_EQ_INT(s->links[5].n_attrs, 1);
    CHECK_EQ_STR(s->links[5].attrs[0].key.ptr, "request.id");
    CHECK_EQ_STR(s->links[5].attrs[0].v.s.ptr, "req-5");
    CHECK_EQ_INT(s->links[0].trace_state.len, 3);
    CHECK_EQ_INT(s->n_events, MST_MAX_EVENTS);
    CHECK_EQ_INT(s->dropped_events, 1);
    CHECK_EQ_STR(s->events[3].name.ptr, "ev");
    CHECK_EQ_INT(s->events[3].time_ns, 4);
    CHECK_EQ_INT(s->events[3].n_attrs, MST_MAX_ATTRIBUTES);
    CHECK_EQ_INT(s->events[3].dropped_attrs, 3);
    CHECK_EQ_INT(s->status_code, MST_STATUS_ERROR);
    CHECK_EQ_INT(s->status_message.len, MST_MAX_STATUS_MESSAGE_LEN);
    CHECK_EQ_STR(s->name.ptr, "renamed");
}

static void test_links_events_status(void) {
    setup();
    g_inspect = inspect_links_events;
    mst_span *s = mst_span_start(g_t, NULL, "le", MST_SPAN_KIND_INTERNAL, NULL, 0);
    for (int i = 0; i < MST_MAX_LINKS + 2; i++) {
        mst_span_context c;
        memset(&c, 0, sizeof c);
        c.trace_id = mst_trace_id_random();
        c.span_id = mst_span_id_random();
        strcpy(c.trace_state, "a=b");
        c.trace_state_len = 3;
        char rid[32];
        sprintf(rid, "req-%d", i);
        mst_attr_in a = {.key = "request.id", .type = MST_ATTR_STRING, .v.s = rid};
        mst_span_add_link(s, &c, &a, 1);
    }
    mst_span_context zero;
    memset(&zero, 0, sizeof zero);
    mst_span_add_link(s, &zero, NULL, 0); /* invalid: ignored */
    mst_attr_in ea[35];
    char keys[35][8];
    for (int i = 0; i < 35; i++) {
        sprintf(keys[i], "e%d", i);
        ea[i].key = keys[i];
        ea[i].type = MST_ATTR_INT;
        ea[i].v.i = i;
    }
    for (int i = 0; i < MST_MAX_EVENTS + 1; i++) mst_span_add_event(s, "ev", (uint64_t)i + 1, ea, 35);
    char msg[2000];
    memset(msg, 'm', sizeof msg);
    msg[1999] = '\0';
    mst_span_set_status(s, MST_STATUS_ERROR, "short");
    mst_span_set_status(s, MST_STATUS_ERROR, msg);
    mst_span_set_status(s, MST_STATUS_UNSET, NULL); /* ignored */
    mst_span_set_name(s, "renamed");
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 5000), MST_OK);
    CHECK_EQ_INT(g_e->seen, 1);
    teardown();
}

/* Lists are copied as one block and a link's lone attribute may share the
 * previous link's key: every item and key must still be its own exact,
 * NUL-terminated string (a key that only starts like the previous one is
 * not shared; empty and NULL items are ""; an item over the limit is cut on
 * a UTF-8 boundary). */
static void inspect_shared_copies(const mst_span *s) {
    const char *want_keys[] = {"request.id", "request.id", "request.idx", "request", "request.id"};
    CHECK_EQ_INT(s->n_links, 5);
    for (uint32_t i = 0; i < s->n_links && i < 5; i++) {
        CHECK_EQ_INT(s->links[i].n_attrs, 1);
        CHECK_EQ_STR(s->links[i].attrs[0].key.ptr, want_keys[i]);
        CHECK_EQ_INT(s->links[i].attrs[0].key.len, strlen(want_keys[i]));
    }
    CHECK_EQ_INT(s->links[3].attrs[0].type, MST_ATTR_INT);
    CHECK_EQ_INT(s->links[3].attrs[0].v.i, 7);
    CHECK_EQ_STR(s->links[4].attrs[0].v.s.ptr, "id-4");
    const mst_attr *a = find(s, "ids");
    CHECK(a && a->v.list.count == 4);
    if (!a || a->v.list.count != 4) return;
    CHECK_EQ_STR(a->v.list.items[0].ptr, "first");
    CHECK_EQ_INT(a->v.list.items[1].len, 0);
    CHECK_EQ_STR(a->v.list.items[1].ptr, "");
    CHECK_EQ_STR(a->v.list.items[2].ptr, "");
    CHECK_EQ_INT(a->v.list.items[3].len, MST_MAX_VALUE_LEN - 1); /* before the 2-byte character */
    CHECK_EQ_INT(a->v.list.items[3].ptr[a->v.list.items[3].len], '\0');
}

static void test_shared_copies(void) {
    setup();
    g_inspect = inspect_shared_copies;
    mst_span *s = mst_span_start(g_t, NULL, "shared", MST_SPAN_KIND_INTERNAL, NULL, 0);
    const char *keys[] = {"request.id", "request.id", "request.idx", "request", "request.id"};
    for (int i = 0; i < 5; i++) {
        mst_span_context c;
        memset(&c, 0, sizeof c);
        c.trace_id = mst_trace_id_random();
        c.span_id = mst_span_id_random();
        char v[16];
        sprintf(v, "id-%d", i);
        mst_attr_in at = {.key = keys[i], .type = MST_ATTR_STRING, .v.s = v};
        if (i == 3) {
            at.type = MST_ATTR_INT;
            at.v.i = 7;
        }
        mst_span_add_link(s, &c, &at, 1);
    }
    static char big[1100];
    memset(big, 'y', sizeof big);
    big[MST_MAX_VALUE_LEN - 1] = (char)0xc3; /* é straddles the limit */
    big[MST_MAX_VALUE_LEN] = (char)0xa9;
    big[sizeof big - 1] = '\0';
    const char *items[] = {"first", "", NULL, big};
    mst_span_set_str_list(s, "ids", items, 4);
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 5000), MST_OK);
    CHECK_EQ_INT(g_e->seen, 1);
    teardown();
}

static void test_status_ok_is_final(void) {
    setup();
    mst_span *s = mst_span_start(g_t, NULL, "st", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_status(s, MST_STATUS_OK, "ignored message");
    CHECK_EQ_INT(s->status_code, MST_STATUS_OK);
    CHECK_EQ_INT(s->status_message.len, 0);
    mst_span_set_status(s, MST_STATUS_ERROR, "late");
    CHECK_EQ_INT(s->status_code, MST_STATUS_OK);
    mst_span_end(s, 0);
    teardown();
}

static void test_null_span_is_noop(void) {
    mst_span *s = mst_span_start(NULL, NULL, "x", MST_SPAN_KIND_INTERNAL, NULL, 0);
    CHECK(s == NULL);
    mst_span_set_str(s, "k", "v");
    mst_span_set_strn(s, "k", "v", 1);
    mst_span_set_int(s, "k", 1);
    mst_span_set_double(s, "k", 1);
    mst_span_set_bool(s, "k", 1);
    mst_span_set_str_list(s, "k", NULL, 0);
    mst_span_set_int_lit(s, MST_LIT("k"), 1);
    mst_span_set_double_lit(s, MST_LIT("k"), 1);
    mst_span_set_strn_lit(s, MST_LIT("k"), "v", 1);
    mst_span_set_str_list_lit(s, MST_LIT("k"), NULL, NULL, 0);
    mst_span_set_attr(s, NULL);
    mst_span_add_link(s, NULL, NULL, 0);
    mst_span_add_event(s, "e", 0, NULL, 0);
    mst_span_set_status(s, MST_STATUS_ERROR, "m");
    mst_span_set_name(s, "n");
    mst_span_context c;
    CHECK(!mst_span_get_context(s, &c));
    CHECK_EQ_STR(mst_span_name(s), "");
    CHECK_EQ_INT(mst_span_end_ns(s), 0);
    mst_span_end(s, 0);
    mst_span_discard(s);
}

static const char k_lit_count[] = "batch.request_count";

static void inspect_literal_keys(const mst_span *s) {
    CHECK_EQ_INT(s->n_attrs, MST_MAX_ATTRIBUTES);
    CHECK_EQ_INT(s->dropped_attrs, 1); /* the 33rd key */
    const mst_attr *a = find(s, "batch.request_count");
    CHECK(a && a->key.ptr == k_lit_count); /* stored by pointer, not copied */
    CHECK(a && a->type == MST_ATTR_INT && a->v.i == 9); /* replaced by the copying setter, same slot */
    CHECK(a == &s->attrs[0]);
    a = find(s, "kv_cache.usage");
    CHECK(a && a->type == MST_ATTR_DOUBLE && a->v.d == 0.25);
    a = find(s, "step.phase");
    CHECK(a && a->type == MST_ATTR_STRING && a->v.s.len == 2);
    CHECK_EQ_STR(a->v.s.ptr, "pd");
    a = find(s, "request.ids");
    CHECK(a && a->type == MST_ATTR_STRING_LIST && a->v.list.count == 2);
    CHECK_EQ_STR(a->v.list.items[0].ptr, "r1");
    CHECK_EQ_STR(a->v.list.items[1].ptr, "r22");
    a = find(s, "step.new_ids");
    CHECK(a && a->v.list.count == 2 && a->v.list.items[1].len == 3); /* lens NULL: measured */
    a = find(s, "cut.list"); /* an item over the value limit: cut, the others as given */
    CHECK(a && a->v.list.count == 3);
    CHECK_EQ_INT(a->v.list.items[0].len, MST_MAX_VALUE_LEN);
    CHECK_EQ_STR(a->v.list.items[1].ptr, "");
    CHECK_EQ_STR(a->v.list.items[2].ptr, "zz");
    a = find(s, "copied.first");
    CHECK(a && a->type == MST_ATTR_INT && a->v.i == 2); /* a copied key replaced by a literal one */
    CHECK(find(s, "") == NULL);
    char cut_key[MST_MAX_KEY_LEN + 1];
    memset(cut_key, 'k', MST_MAX_KEY_LEN);
    cut_key[MST_MAX_KEY_LEN] = '\0';
    a = find(s, cut_key);
    CHECK(a && a->key.len == MST_MAX_KEY_LEN && a->type == MST_ATTR_INT && a->v.i == 4);
}

/* mst_span_set_*_lit: the key by pointer; replacing, limits and the
 * no-op cases as the copying setters. */
static void test_literal_keys(void) {
    setup();
    g_inspect = inspect_literal_keys;
    mst_span *s = mst_span_start(g_t, NULL, "lit", MST_SPAN_KIND_INTERNAL, NULL, 0);
    mst_span_set_int_lit(s, k_lit_count, sizeof k_lit_count - 1, 4);
    mst_span_set_int(s, "batch.request_count", 9);
    mst_span_set_double_lit(s, MST_LIT("kv_cache.usage"), 0.25);
    mst_span_set_strn_lit(s, MST_LIT("step.phase"), "pdx", 2);
    const char *ids[] = {"r1xx", "r22"};
    const size_t lens[] = {2, 3};
    mst_span_set_str_list_lit(s, MST_LIT("request.ids"), ids, lens, 2);
    const char *plain[] = {"a", "bcd"};
    mst_span_set_str_list_lit(s, MST_LIT("step.new_ids"), plain, NULL, 2);
    static char big[MST_MAX_VALUE_LEN + 10];
    memset(big, 'y', sizeof big - 1);
    const char *cut[] = {big, NULL, "zzz"};
    const size_t cut_lens[] = {sizeof big - 1, 5, 2};
    mst_span_set_str_list_lit(s, MST_LIT("cut.list"), cut, cut_lens, 3);
    mst_span_set_int(s, "copied.first", 1);
    mst_span_set_int_lit(s, MST_LIT("copied.first"), 2);
    mst_span_set_int_lit(s, MST_LIT(""), 3);                 /* empty key: ignored */
    char longkey[MST_MAX_KEY_LEN + 2];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    mst_span_set_int_lit(s, longkey, sizeof longkey - 1, 3); /* over the key limit: cut, as copied keys */
    mst_span_set_int(s, longkey, 4);                          /* the same cut key: replaced */
    mst_span_set_strn_lit(s, MST_LIT("null.value"), NULL, 0); /* no value: ignored */
    for (int i = 0; i < MST_MAX_ATTRIBUTES - 8; i++) {
        char k[16];
        sprintf(k, "k%d", i);
        mst_span_set_int(s, k, i);
    }
    mst_span_set_int_lit(s, MST_LIT("one.too.many"), 1); /* the table is full: dropped */
    mst_span_set_int_lit(s, k_lit_count, sizeof k_lit_count - 1, 9); /* a key held: still set */
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_tracer_flush(g_t, 5000), MST_OK);
    CHECK_EQ_INT(g_e->seen, 1);
    teardown();
}

static void test_discard_and_replace_budget(void) {
    setup();
    mst_span *s = mst_span_start(g_t, NULL, "d", MST_SPAN_KIND_INTERNAL, NULL, 0);
    char v[1000];
    /* Growing replacements stay bounded by the replace budget. */
    for (int i = 0; i < 5000; i++) {
        size_t n = (size_t)(i % 999) + 1;
        memset(v, 'a', n);
        v[n] = '\0';
        mst_span_set_str(s, "grow", v);
        mst_span_set_name(s, v);
    }
    size_t total = s->arena.inline_used;
    for (mst_arena_chunk *c = s->arena.chunks; c; c = c->next) total += c->cap;
    CHECK(total < (2u << 20));
    mst_span_discard(s);
    mst_tracer_stats st;
    mst_tracer_get_stats(g_t, &st);
    CHECK_EQ_INT(st.spans_started, 1);
    CHECK_EQ_INT(st.spans_ended, 1);
    CHECK_EQ_INT(st.spans_filtered, 1);
    CHECK_EQ_INT(st.spans_queued, 0);
    teardown();
}

static void test_shutdown_rejects_new_spans(void) {
    mst_tracer *t;
    CHECK_EQ_INT(mst_tracer_create(NULL, &t), MST_OK);
    CHECK_EQ_INT(mst_tracer_shutdown(t, 1000), MST_OK);
    /* the tracer is freed: only a NULL tracer may be used afterwards */
    CHECK(mst_span_start(NULL, NULL, "x", 1, NULL, 0) == NULL);
}

static const mst_test_case tests[] = {
    {"root_and_child", test_root_and_child},
    {"remote_parent_and_sampling", test_remote_parent_and_sampling},
    {"attribute_limits", test_attribute_limits},
    {"long_key_truncated", test_long_key_truncated},
    {"links_events_status", test_links_events_status},
    {"shared_copies", test_shared_copies},
    {"status_ok_is_final", test_status_ok_is_final},
    {"literal_keys", test_literal_keys},
    {"null_span_is_noop", test_null_span_is_noop},
    {"discard_and_replace_budget", test_discard_and_replace_budget},
    {"shutdown_rejects_new_spans", test_shutdown_rejects_new_spans},
};
MST_TEST_MAIN(tests)
