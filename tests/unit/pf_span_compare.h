/*
 * pf_span_compare.h — compares two decoded Perfetto packet spans
 * (perfetto_packet.h) field by field, for the tests and the fuzzer that
 * check the decoder's fast path (perfetto_packet_fast.c) against its
 * general decoder: same strings, ids, numbers, flags, and attribute keys
 * and values that point at the same bytes of the packet (or, for an
 * unescaped key, hold the same bytes elsewhere).
 */
#ifndef MST_TEST_PF_SPAN_COMPARE_H
#define MST_TEST_PF_SPAN_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "wire/perfetto_packet.h"

static inline bool pf_str_same(const mst_str *a, const mst_str *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->ptr, b->ptr, a->len) == 0);
}

static inline bool pf_in(const void *p, const uint8_t *data, size_t len) {
    const uint8_t *q = p;
    return q >= data && q < data + len;
}

/* NULL when the lists match, else what differs. */
static inline const char *pf_kvs_differ(const mst_pf_kv *a, size_t na, const mst_pf_kv *b,
                                        size_t nb, const uint8_t *data, size_t len) {
    if (na != nb) return "number of entries";
    for (size_t i = 0; i < na; i++) {
        if (!pf_str_same(&a[i].key, &b[i].key)) return "a key";
        bool ia = pf_in(a[i].key.ptr, data, len), ib = pf_in(b[i].key.ptr, data, len);
        if (ia != ib || (ia && a[i].key.ptr != b[i].key.ptr)) return "where a key points";
        if (a[i].value.ptr != b[i].value.ptr || a[i].value.len != b[i].value.len)
            return "a value slice";
    }
    return NULL;
}

/* NULL when the spans decoded from data[0..len) match, else what differs. */
static inline const char *pf_spans_differ(const mst_pf_span *a, const mst_pf_span *b,
                                          const uint8_t *data, size_t len) {
    if (!pf_str_same(&a->name, &b->name) || a->name.ptr[a->name.len] != '\0') return "name";
    if (!pf_str_same(&a->category, &b->category) || a->category.ptr[a->category.len] != '\0')
        return "category";
    if (strcmp(a->trace_id, b->trace_id) != 0) return "trace_id";
    if (strcmp(a->span_id, b->span_id) != 0) return "span_id";
    if (strcmp(a->parent_span_id, b->parent_span_id) != 0) return "parent_span_id";
    if (a->start_ns != b->start_ns || a->end_ns != b->end_ns) return "times";
    if (a->kind != b->kind || a->status != b->status) return "kind/status";
    if (a->has_pid != b->has_pid || (a->has_pid && a->pid != b->pid)) return "pid";
    if (a->has_tid != b->has_tid || (a->has_tid && a->tid != b->tid)) return "tid";
    const char *d = pf_kvs_differ(a->attrs, a->n_attrs, b->attrs, b->n_attrs, data, len);
    if (d) return d;
    d = pf_kvs_differ(a->resource, a->n_resource, b->resource, b->n_resource, data, len);
    if (d) return d;
    if (a->plain_text != b->plain_text) return "plain_text";
    if (a->n_links != b->n_links) return "number of links";
    if (a->request_links != b->request_links) return "request_links";
    if (a->ids_fields != b->ids_fields || a->ids_stream != b->ids_stream || a->ids_seq != b->ids_seq ||
        a->ids_change != b->ids_change || (a->ids_fields && a->ids_attr != b->ids_attr))
        return "request id stream fields";
    for (size_t i = 0; i < a->n_links; i++)
        if (strcmp(a->links[i].trace_id, b->links[i].trace_id) != 0 ||
            strcmp(a->links[i].span_id, b->links[i].span_id) != 0)
            return "a link";
    return NULL;
}

#endif /* MST_TEST_PF_SPAN_COMPARE_H */
