/*
 * perfetto_span_ranges.c — the value-range rule of decoded hook spans (see
 * perfetto_span_ranges.h for the ranges and why).
 */
#include "wire/perfetto_span_ranges.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool mst_pf_span_check_ranges(const mst_pf_span *s, char *err, size_t err_size) {
    if (mst_pf_span_in_range(s)) return true;
    const char *what = NULL;
    int64_t v = 0;
    if (s->start_ns < 0) what = "start_time_ns", v = s->start_ns;
    else if (s->end_ns < 0) what = "end_time_ns", v = s->end_ns;
    if (what) {
        if (err && err_size)
            snprintf(err, err_size, "field '%s' is negative (%lld); times are ns since the Unix epoch",
                     what, (long long)v);
        return false;
    }
    if (s->has_pid && (s->pid < 0 || s->pid > INT32_MAX)) what = "process.pid", v = s->pid;
    else if (s->has_tid && (s->tid < 0 || s->tid > INT32_MAX)) what = "thread.id", v = s->tid;
    if (what) {
        if (err && err_size)
            snprintf(err, err_size, "attribute '%s' is out of range (%lld; allowed 0..%d)", what,
                     (long long)v, INT32_MAX);
        return false;
    }
    if (err && err_size)
        snprintf(err, err_size, "field 'request_links' is out of range (%lld; allowed 0..%zu, the number of links)",
                 (long long)s->request_links, s->n_links);
    return false;
}

/* Why here: one rule for both decoders, like the ranges above. */
bool mst_pf_span_check_ids(mst_pf_span *s, char *err, size_t err_size) {
    const char *why = NULL;
    if (s->ids_fields == 0 && !s->ids_change) return true;
    if (s->ids_fields != 3u)
        why = s->ids_change ? "a MSPF_PERFETTO_V2 packet needs 'ids_stream' and 'ids_seq'"
                            : "fields 'ids_stream' and 'ids_seq' go together";
    else if (s->ids_stream < 0 || s->ids_stream > INT32_MAX)
        why = "field 'ids_stream' is out of range (allowed 0..2147483647)";
    else if (s->ids_seq < 1)
        why = "field 'ids_seq' is out of range (allowed 1..2^63-1)";
    if (!why) {
        size_t i = 0;
        while (i < s->n_attrs && !(s->attrs[i].key.len == 11 && memcmp(s->attrs[i].key.ptr, "request.ids", 11) == 0))
            i++;
        char want = s->ids_change ? '{' : '[';
        if (i == s->n_attrs)
            why = "'ids_stream'/'ids_seq' on a span without a 'request.ids' attribute";
        else if (s->attrs[i].value.len == 0 || s->attrs[i].value.ptr[0] != want)
            why = s->ids_change ? "attribute 'request.ids' of a MSPF_PERFETTO_V2 packet must be a change object"
                                : "attribute 'request.ids' with 'ids_seq' must be a list";
        else
            s->ids_attr = i;
    }
    if (why && err && err_size) snprintf(err, err_size, "%s", why);
    return why == NULL;
}
