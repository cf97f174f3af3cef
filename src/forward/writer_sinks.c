/*
 * writer_sinks.c — the Chrome Trace JSON writer and the native .pftrace
 * writer behind the output interface (writer_sinks.h, output_sink.h): one
 * table of functions per writer, each entry a thin call into the writer, so
 * the writers keep their own APIs and the forwarder sees one shape.
 */
#include "forward/writer_sinks.h"

#include <string.h>
#include <strings.h>

#include "forward/pftrace_writer.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

mst_perfetto_format mst_perfetto_format_for_path(const char *path) {
    if (path && ends_with(path, ".pftrace")) return MST_PERFETTO_FORMAT_PROTO;
    return MST_PERFETTO_FORMAT_JSON;
}

/* ---- Chrome Trace JSON ---- */

static mst_status json_add_span(void *self, const mst_pf_span *span) {
    return mst_chrome_writer_add_span(self, span);
}
static void json_add_counter(void *self, const mst_tl_counter *c) {
    mst_chrome_writer_add_counter(self, c);
}
static void json_own_counters(void *self, int64_t ts_ns, uint64_t received, uint64_t written,
                              uint64_t dropped) {
    mst_chrome_writer_add_forwarder_counters(self, ts_ns, received, written, dropped);
}
static int json_tick(void *self, uint64_t now_ms) { return mst_chrome_writer_tick(self, now_ms); }
static int json_handoff(void *self) { return mst_chrome_writer_handoff(self); }
static mst_status json_finish(void *self) { return mst_chrome_writer_flush_final(self); }
static void json_stats(const void *self, mst_chrome_stats *out) {
    mst_chrome_writer_get_stats(self, out);
}
static bool json_disk_stats(const void *self, mst_outq_stats *out) {
    mst_chrome_writer_get_disk_stats(self, out);
    return true;
}
static mst_status json_close(void *self, mst_chrome_stats *final) {
    return mst_chrome_writer_close_final(self, final);
}
static void no_details(const void *self, char *buf, size_t size) {
    (void)self;
    (void)buf;
    (void)size;
}

static const mst_output_sink_ops JSON_OPS = {
    .add_span = json_add_span,
    .add_counter = json_add_counter,
    .add_forwarder_counters = json_own_counters,
    .tick = json_tick,
    .handoff = json_handoff,
    .finish = json_finish,
    .get_stats = json_stats,
    .get_disk_stats = json_disk_stats,
    .describe = no_details,
    .close = json_close,
};

/* ---- native Perfetto (.pftrace) ---- */

static mst_status pf_add_span(void *self, const mst_pf_span *span) {
    return mst_pftrace_writer_add_span(self, span);
}
static void pf_add_counter(void *self, const mst_tl_counter *c) {
    mst_pftrace_writer_add_counter(self, c);
}
static void pf_own_counters(void *self, int64_t ts_ns, uint64_t received, uint64_t written,
                            uint64_t dropped) {
    mst_pftrace_writer_add_forwarder_counters(self, ts_ns, received, written, dropped);
}
static int pf_tick(void *self, uint64_t now_ms) { return mst_pftrace_writer_tick(self, now_ms); }
static int pf_handoff(void *self) { return mst_pftrace_writer_handoff(self); }
static mst_status pf_finish(void *self) { return mst_pftrace_writer_flush(self, true); }
static void pf_stats(const void *self, mst_chrome_stats *out) {
    mst_pftrace_writer_get_stats(self, out);
}
static bool pf_disk_stats(const void *self, mst_outq_stats *out) {
    mst_pftrace_writer_get_disk_stats(self, out);
    return true;
}
static mst_status pf_close(void *self, mst_chrome_stats *final) {
    return mst_pftrace_writer_close_final(self, final);
}

static const mst_output_sink_ops PFTRACE_OPS = {
    .add_span = pf_add_span,
    .add_counter = pf_add_counter,
    .add_forwarder_counters = pf_own_counters,
    .tick = pf_tick,
    .handoff = pf_handoff,
    .finish = pf_finish,
    .get_stats = pf_stats,
    .get_disk_stats = pf_disk_stats,
    .describe = no_details,
    .close = pf_close,
};

mst_status mst_writer_sink_open(const char *path, mst_perfetto_format format, int64_t default_pid,
                                mst_output_sink *out, char *err, size_t err_size) {
    if (!path || !out) return MST_ERR_INVALID_ARG;
    if (format == MST_PERFETTO_FORMAT_AUTO) format = mst_perfetto_format_for_path(path);
    memset(out, 0, sizeof *out);
    if (format == MST_PERFETTO_FORMAT_PROTO) {
        mst_pftrace_writer *w = NULL;
        mst_status st = mst_pftrace_writer_open(path, default_pid, &w, err, err_size);
        if (st != MST_OK) return st;
        *out = (mst_output_sink){&PFTRACE_OPS, w};
        return MST_OK;
    }
    mst_chrome_writer *w = NULL;
    mst_status st = mst_chrome_writer_open(path, default_pid, &w, err, err_size);
    if (st != MST_OK) return st;
    *out = (mst_output_sink){&JSON_OPS, w};
    return MST_OK;
}
