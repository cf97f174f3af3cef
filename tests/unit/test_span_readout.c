/* test_span_readout.c — the public read-out API (mstrace.h, "read-out"),
 * compiled against include/mstrace.h only (no internal header): what an
 * exporter outside the library sees of a finished span — every field, the
 * pointers are into the span (no copy: the same address twice), the dropped
 * counts past the limits, the resource, and empty values for a NULL span. */
#include "testlib.h"
#include "mstrace.h"
#include "inspect_exporter.h"

#include <stdlib.h>

static mst_tracer *g_t;

static mst_span_context g_parent;

static void inspect_full(const mst_span *s) {
    CHECK(memcmp(mst_span_get_trace_id(s)->bytes, g_parent.trace_id.bytes, 16) == 0);
    CHECK(mst_span_id_is_valid(mst_span_get_span_id(s)));
    const mst_span_id *p = mst_span_get_parent_id(s);
    CHECK(p != NULL && memcmp(p->bytes, g_parent.span_id.bytes, 8) == 0);
    CHECK(mst_span_get_parent_is_remote(s));
    CHECK_EQ_INT(mst_span_get_trace_flags(s), MST_TRACE_FLAG_SAMPLED);
    CHECK_EQ_STR(mst_span_get_trace_state(s).ptr, "k=v");
    CHECK_EQ_INT(mst_span_get_trace_state(s).len, 3);
    CHECK_EQ_INT(mst_span_get_kind(s), MST_SPAN_KIND_CLIENT);
    mst_str msg;
    CHECK_EQ_INT(mst_span_get_status(s, &msg), MST_STATUS_ERROR);
    CHECK_EQ_STR(msg.ptr, "boom");
    CHECK_EQ_INT(mst_span_get_status(s, NULL), MST_STATUS_ERROR);
    const mst_scope *sc = mst_span_get_scope(s);
    CHECK_EQ_STR(mst_scope_get_name(sc).ptr, "scope.a");
    CHECK_EQ_STR(mst_scope_get_version(sc).ptr, "");
    CHECK_EQ_STR(mst_span_name(s), "call");
    CHECK_EQ_INT(mst_span_start_ns(s), 10);
    CHECK_EQ_INT(mst_span_end_ns(s), 20);

    size_t n = 0;
    const mst_attr *a = mst_span_get_attrs(s, &n);
    CHECK_EQ_INT(n, MST_MAX_ATTRIBUTES);
    CHECK(a == mst_span_get_attrs(s, NULL)); /* a pointer into the span, not a copy */
    CHECK_EQ_STR(a[0].key.ptr, "k0");
    CHECK_EQ_INT(a[0].type, MST_ATTR_INT);
    CHECK_EQ_INT(a[0].v.i, 0);
    CHECK_EQ_INT(a[1].type, MST_ATTR_STRING_LIST);
    CHECK_EQ_INT(a[1].v.list.count, 2);
    CHECK_EQ_STR(a[1].v.list.items[1].ptr, "y");

    const mst_link *l = mst_span_get_links(s, &n);
    CHECK_EQ_INT(n, MST_MAX_LINKS);
    CHECK(l[0].is_remote);
    CHECK_EQ_STR(l[0].trace_state.ptr, "k=v");
    CHECK_EQ_INT(l[0].n_attrs, 1);
    CHECK_EQ_STR(l[0].attrs[0].v.s.ptr, "why");

    const mst_event *ev = mst_span_get_events(s, &n);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_STR(ev[0].name.ptr, "ev");
    CHECK_EQ_INT(ev[0].time_ns, 15);
    CHECK_EQ_INT(ev[0].n_attrs, 1);
    CHECK(ev[0].attrs[0].v.b);

    mst_span_dropped d;
    mst_span_get_dropped(s, &d);
    CHECK_EQ_INT(d.attrs, 3);
    CHECK_EQ_INT(d.links, 2);
    CHECK_EQ_INT(d.events, 0);

    const mst_attr *res = mst_span_get_resource(s, &n);
    bool has_service = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(res[i].key.ptr, "service.name") == 0) has_service = true;
    CHECK(has_service);
    CHECK(res == mst_span_get_resource(s, NULL)); /* the tracer's one array */
}

static void test_full_span(void) {
    g_t = mst_test_inspect_setup();
    static const char tp[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    CHECK_EQ_INT(mst_ctx_parse_traceparent(tp, sizeof tp - 1, &g_parent), MST_OK);
    CHECK_EQ_INT(mst_ctx_parse_tracestate("k=v", 3, &g_parent), MST_OK);
    const mst_scope *sc = mst_tracer_scope(g_t, "scope.a", NULL);
    mst_span *s = mst_span_start(g_t, sc, "call", MST_SPAN_KIND_CLIENT, &g_parent, 10);
    CHECK(s != NULL);
    mst_span_set_int(s, "k0", 0);
    const char *items[] = {"x", "y"};
    mst_span_set_str_list(s, "list", items, 2);
    for (int i = 2; i < MST_MAX_ATTRIBUTES + 3; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        mst_span_set_int(s, key, i);
    }
    mst_attr_in why = {.key = "reason", .type = MST_ATTR_STRING, .v.s = "why"};
    for (int i = 0; i < MST_MAX_LINKS + 2; i++) mst_span_add_link(s, &g_parent, &why, 1);
    mst_attr_in flag = {.key = "flag", .type = MST_ATTR_BOOL, .v.b = true};
    mst_span_add_event(s, "ev", 15, &flag, 1);
    mst_span_set_status(s, MST_STATUS_ERROR, "boom");
    mst_test_inspect_set(inspect_full);
    mst_span_end(s, 20);
    CHECK_EQ_INT(mst_test_inspect_finish(), 1);
}

static void inspect_root(const mst_span *s) {
    CHECK(mst_span_get_parent_id(s) == NULL);
    CHECK(!mst_span_get_parent_is_remote(s));
    CHECK_EQ_STR(mst_span_get_trace_state(s).ptr, "");
    mst_str msg;
    CHECK_EQ_INT(mst_span_get_status(s, &msg), MST_STATUS_UNSET);
    CHECK_EQ_STR(msg.ptr, "");
    size_t n = 99;
    mst_span_get_links(s, &n);
    CHECK_EQ_INT(n, 0);
    n = 99;
    mst_span_get_events(s, &n);
    CHECK_EQ_INT(n, 0);
    CHECK_EQ_STR(mst_scope_get_version(mst_span_get_scope(s)).ptr, "2.0");
}

static void test_root_span(void) {
    g_t = mst_test_inspect_setup();
    mst_span *s = mst_span_start(g_t, mst_tracer_scope(g_t, "scope.b", "2.0"), "root", MST_SPAN_KIND_INTERNAL,
                                 NULL, 0);
    mst_test_inspect_set(inspect_root);
    mst_span_end(s, 0);
    CHECK_EQ_INT(mst_test_inspect_finish(), 1);
}

static void test_null_span(void) {
    size_t n = 99;
    CHECK(!mst_trace_id_is_valid(mst_span_get_trace_id(NULL)));
    CHECK(!mst_span_id_is_valid(mst_span_get_span_id(NULL)));
    CHECK(mst_span_get_parent_id(NULL) == NULL);
    CHECK_EQ_INT(mst_span_get_kind(NULL), MST_SPAN_KIND_UNSPECIFIED);
    mst_str msg;
    CHECK_EQ_INT(mst_span_get_status(NULL, &msg), MST_STATUS_UNSET);
    CHECK_EQ_STR(msg.ptr, "");
    CHECK(mst_span_get_scope(NULL) == NULL);
    CHECK_EQ_STR(mst_scope_get_name(NULL).ptr, "");
    CHECK(mst_span_get_attrs(NULL, &n) == NULL);
    CHECK_EQ_INT(n, 0);
    n = 99;
    CHECK(mst_span_get_resource(NULL, &n) == NULL);
    CHECK_EQ_INT(n, 0);
    mst_span_dropped d = {1, 1, 1};
    mst_span_get_dropped(NULL, &d);
    CHECK_EQ_INT(d.attrs + d.links + d.events, 0);
}

static const mst_test_case tests[] = {
    {"full_span", test_full_span},
    {"root_span", test_root_span},
    {"null_span", test_null_span},
};
MST_TEST_MAIN(tests)
