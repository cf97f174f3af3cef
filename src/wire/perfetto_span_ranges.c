/*
 * perfetto_span_ranges.c — the value-range rule of decoded hook spans (see
 * perfetto_span_ranges.h for the ranges and why).
 */
#include "wire/perfetto_span_ranges.h"

#include <stdint.h>
#include <stdio.h>

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
