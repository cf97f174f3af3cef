/*
 * flight_sink.c — the flight recorder as an output (flight_sink.h): ring,
 * request tracking, triggers, budget and dumps.
 *
 * A trigger adds its request (or, for an ERROR span that names none, the
 * span's trace) to the pending dump; the pending dump is written at the
 * next tick once it is due, so every trigger that fires before then is in
 * the same file ("merged"). A new dump needs room in the rate budget
 * (at most max_dumps_per_min in the last 60 s); a trigger that finds none is
 * suppressed and counted. A dump on demand is always written.
 */
#include "forward/flight_sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "forward/flight_dump.h"
#include "forward/flight_ring.h"
#include "wire/json_reader.h"

/* A dump for an ERROR span without a request waits this long, so the
 * spans of its trace from other processes are in the ring. */
#define SPAN_TRIGGER_GRACE_MS 2000
/* Requests named by an ERROR span, remembered until they complete. */
#define MAX_FLAGGED 4096
#define STATUS_ERROR 2

typedef struct flight_counts {
    uint64_t triggers_fired, triggers_suppressed, triggers_merged;
    uint64_t dumps_written, dump_bytes, dumps_failed, dumps_deleted, dumps_over_budget;
    uint64_t on_demand;
    uint64_t baseline_requests, baseline_spans;
} flight_counts;

typedef struct flight_sink {
    mst_flight_options opt;
    mst_flight_ring *ring;
    mst_flight_rules *rules;
    mst_flight_dumper *dumper;
    mst_timeline *tl;
    mst_arena arena;
    uint64_t now_ms;
    bool in_span;            /* a span is being added (its counter samples are not stored) */
    bool pending;
    uint64_t pending_due_ms;
    mst_flight_dump_plan plan;
    mst_flight_dump_plan *baseline; /* ordinary requests to send (baseline_n) */
    uint64_t *dump_times;    /* ms of the last max_dumps_per_min dumps, a ring */
    size_t dump_times_next;
    uint64_t flagged[MAX_FLAGGED]; /* hashes of requests an ERROR span named */
    size_t n_flagged, flagged_next;
    flight_counts c;
} flight_sink;

static uint64_t id_hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

static void flag_request(flight_sink *f, const char *id, size_t n) {
    f->flagged[f->flagged_next] = id_hash(id, n);
    f->flagged_next = (f->flagged_next + 1) % MAX_FLAGGED;
    if (f->n_flagged < MAX_FLAGGED) f->n_flagged++;
}

/* True (and forgotten) when an ERROR span named the request. */
static bool take_flag(flight_sink *f, const char *id, size_t n) {
    if (!f->n_flagged) return false;
    uint64_t h = id_hash(id, n);
    bool hit = false;
    for (size_t i = 0; i < f->n_flagged; i++)
        if (f->flagged[i] == h) {
            f->flagged[i] = 0;
            hit = true;
        }
    return hit;
}

static bool rate_allows(const flight_sink *f) {
    uint32_t k = f->opt.max_dumps_per_min;
    for (uint32_t i = 0; i < k; i++)
        if (!f->dump_times[i] || f->dump_times[i] + 60000 <= f->now_ms) return true;
    return false;
}

static void note_dump_time(flight_sink *f) {
    f->dump_times[f->dump_times_next] = f->now_ms ? f->now_ms : 1;
    f->dump_times_next = (f->dump_times_next + 1) % f->opt.max_dumps_per_min;
}

static void append_reason(flight_sink *f, const char *what) {
    size_t n = strlen(f->plan.reason);
    snprintf(f->plan.reason + n, sizeof f->plan.reason - n, "%s%s", n ? "; " : "", what);
}

/* Opens the pending dump, or joins it; false when suppressed. */
static bool take_trigger(flight_sink *f, const char *what, uint64_t due_ms) {
    f->c.triggers_fired++;
    if (f->pending) {
        f->c.triggers_merged++;
        append_reason(f, what);
        if (due_ms > f->pending_due_ms) f->pending_due_ms = due_ms;
        return true;
    }
    if (!rate_allows(f)) {
        f->c.triggers_suppressed++;
        if (mst_log_this_count(f->c.triggers_suppressed))
            MST_WARN("flight recorder: trigger %s suppressed: %u dumps in the last minute already "
                     "(%llu suppressed so far)", what, f->opt.max_dumps_per_min,
                     (unsigned long long)f->c.triggers_suppressed);
        return false;
    }
    memset(&f->plan, 0, sizeof f->plan);
    f->plan.margin_ns = f->opt.margin_ns;
    f->pending = true;
    f->pending_due_ms = due_ms;
    append_reason(f, what);
    return true;
}

static int64_t phase_dur(const mst_tl_request *r, const char *prefix, bool last_end,
                         int64_t *end) {
    int64_t d = -1;
    size_t n = strlen(prefix);
    for (unsigned i = 0; i < r->n_phases; i++)
        if (strncmp(r->phases[i].name, prefix, n) == 0) {
            int64_t x = r->phases[i].end_ns - r->phases[i].start_ns;
            d = d < 0 ? x : d + x;
            if (last_end && end) *end = r->phases[i].end_ns;
        }
    return d;
}

static void request_metrics(const mst_tl_request *r, mst_flight_metrics *m) {
    for (int k = 0; k < MST_FLIGHT_METRICS; k++) m->v[k] = -1;
    m->v[MST_FLIGHT_E2E] = r->end_ns - r->start_ns;
    if (!r->n_phases) return;
    int64_t q = phase_dur(r, "queued", false, NULL);
    m->v[MST_FLIGHT_QUEUE] = q < 0 ? 0 : q;
    int64_t prefill_end = -1;
    if (phase_dur(r, "prefill", true, &prefill_end) >= 0) m->v[MST_FLIGHT_TTFT] = prefill_end - r->start_ns;
    int64_t decode = phase_dur(r, "decode", false, NULL);
    if (decode >= 0 && r->steps >= 2) m->v[MST_FLIGHT_TPOT] = decode / (int64_t)(r->steps - 1);
}

/* An ordinary request: 1 in baseline_n of them (by id hash, so the choice
 * does not depend on the order requests complete in) go to the collector
 * with their steps at the next tick. */
static void take_baseline(flight_sink *f, const mst_tl_request *r) {
    if (!f->baseline || id_hash(r->id, r->id_len) % f->opt.baseline_n) return;
    mst_flight_dump_plan *b = f->baseline;
    if (b->n_ids >= MST_FLIGHT_DUMP_MAX_IDS || r->id_len >= MST_FLIGHT_ID_MAX) return;
    memcpy(b->ids[b->n_ids], r->id, r->id_len);
    b->ids[b->n_ids][r->id_len] = 0;
    b->n_ids++;
    f->c.baseline_requests++;
}

static void flush_baseline(flight_sink *f) {
    if (!f->baseline || !f->baseline->n_ids) return;
    f->c.baseline_spans += mst_flight_dump_export(f->dumper, f->ring, f->baseline);
    f->baseline->n_ids = 0;
}

/* The timeline completed a request: the SLO and error triggers. */
static void tl_request(void *self, const mst_tl_request *r) {
    flight_sink *f = self;
    mst_flight_metrics m;
    request_metrics(r, &m);
    bool had_error = take_flag(f, r->id, r->id_len);
    char reason[160];
    if (mst_flight_rules_check(f->rules, &m, had_error, f->now_ms, reason, sizeof reason) < 0) {
        take_baseline(f, r);
        return;
    }
    char what[MST_FLIGHT_ID_MAX + 200];
    snprintf(what, sizeof what, "%s request %.*s", reason, (int)(r->id_len > 200 ? 200 : r->id_len),
             r->id);
    if (!take_trigger(f, what, f->now_ms)) return;
    if (f->plan.n_ids < MST_FLIGHT_DUMP_MAX_IDS && r->id_len < MST_FLIGHT_ID_MAX) {
        memcpy(f->plan.ids[f->plan.n_ids], r->id, r->id_len);
        f->plan.ids[f->plan.n_ids][r->id_len] = 0;
        f->plan.n_ids++;
    }
}

/* A span's counter samples are not stored: its record holds them, and a
 * dump derives them again (flight_dump.c). Only the forwarder's own
 * counters, which come from no span, are records of their own. */
static void tl_counter(void *self, const mst_tl_counter *c) {
    flight_sink *f = self;
    if (!f->in_span) mst_flight_ring_add_counter(f->ring, c, f->now_ms);
}

static mst_tl_sink tl_sink(flight_sink *f) { return (mst_tl_sink){f, tl_request, tl_counter}; }

/* An ERROR span: its requests are flagged (they fire when they complete);
 * one that names none fires for its own trace. */
static void on_error_span(flight_sink *f, const mst_pf_span *s) {
    bool named = false;
    for (size_t a = 0; a < s->n_attrs; a++) {
        const mst_pf_kv *kv = &s->attrs[a];
        bool one = kv->key.len == 10 && memcmp(kv->key.ptr, "request.id", 10) == 0;
        bool many = kv->key.len == 11 && memcmp(kv->key.ptr, "request.ids", 11) == 0;
        if (!one && !many) continue;
        mst_json_reader r;
        mst_json_reader_init(&r, kv->value.ptr, kv->value.len, MST_PF_MAX_DEPTH);
        mst_str id;
        if (one) {
            if (mst_json_peek(&r) == MST_JSON_STRING && mst_json_read_str_slice(&r, &f->arena, &id)) {
                flag_request(f, id.ptr, id.len);
                named = true;
            }
            continue;
        }
        if (mst_json_peek(&r) != MST_JSON_ARRAY || !mst_json_array_begin(&r)) continue;
        while (mst_json_array_next(&r) == 1) {
            if (mst_json_peek(&r) != MST_JSON_STRING) {
                mst_json_slice skip;
                if (!mst_json_read_raw(&r, &skip)) break;
                continue;
            }
            if (!mst_json_read_str_slice(&r, &f->arena, &id)) break;
            flag_request(f, id.ptr, id.len);
            named = true;
        }
    }
    if (named) return;
    char what[160];
    snprintf(what, sizeof what, "error span %.*s", (int)(s->name.len > 100 ? 100 : s->name.len),
             s->name.ptr);
    if (!take_trigger(f, what, f->now_ms + SPAN_TRIGGER_GRACE_MS)) return;
    if (f->plan.n_traces < MST_FLIGHT_DUMP_MAX_TRACES) {
        uint8_t *t = f->plan.traces[f->plan.n_traces++];
        for (int i = 0; i < 16; i++) {
            unsigned hi = (unsigned)s->trace_id[2 * i], lo = (unsigned)s->trace_id[2 * i + 1];
            hi = hi <= '9' ? hi - '0' : hi - 'a' + 10;
            lo = lo <= '9' ? lo - '0' : lo - 'a' + 10;
            t[i] = (uint8_t)(hi << 4 | lo);
        }
    }
}

static mst_status f_add_span(void *self, const mst_pf_span *s) {
    flight_sink *f = self;
    /* Spans of the first batch come before the first tick: their arrival
     * is now, not 0 (which the age bound would evict at once). */
    if (!f->now_ms) f->now_ms = mst_clock_monotonic_ms();
    int64_t pid = s->has_pid ? s->pid : (int64_t)getpid();
    /* A span not held still counts for its request. */
    mst_flight_ring_add_span(f->ring, s, pid, f->now_ms);
    f->in_span = true;
    mst_tl_sink sink = tl_sink(f);
    mst_timeline_add_span(f->tl, s, pid, &f->arena, &sink);
    if (s->status == STATUS_ERROR && mst_flight_rules_on_error(f->rules)) on_error_span(f, s);
    f->in_span = false;
    mst_arena_reset_keep(&f->arena, 1 << 16);
    return MST_OK;
}

static void f_add_counter(void *self, const mst_tl_counter *c) {
    flight_sink *f = self;
    mst_flight_ring_add_counter(f->ring, c, f->now_ms);
}

static void f_own_counters(void *self, int64_t ts_ns, uint64_t received, uint64_t written,
                           uint64_t dropped) {
    flight_sink *f = self;
    mst_tl_sink sink = tl_sink(f);
    mst_timeline_forwarder_counters(f->tl, (int64_t)getpid(), ts_ns, received, written, dropped,
                                    &sink);
}

/* The recorder's own counters as samples for the dump's counter tracks. */
static size_t own_samples(const flight_sink *f, mst_tl_counter *out) {
    mst_flight_ring_stats rs;
    mst_flight_ring_get_stats(f->ring, &rs);
    static const char *const names[] = {
        "flight.spans_seen",      "flight.spans_held",         "flight.spans_evicted",
        "flight.triggers_fired",  "flight.triggers_suppressed", "flight.dumps_written",
        "flight.dump_bytes"};
    uint64_t vals[] = {rs.spans_seen,         rs.spans_held,           rs.spans_evicted,
                       f->c.triggers_fired,   f->c.triggers_suppressed, f->c.dumps_written,
                       f->c.dump_bytes};
    size_t n = sizeof vals / sizeof vals[0];
    for (size_t i = 0; i < n; i++)
        out[i] = (mst_tl_counter){names[i], (int64_t)getpid(), 0, false, (int64_t)vals[i], 0, NULL, 0};
    return n;
}

static void write_dump(flight_sink *f, const mst_flight_dump_plan *plan) {
    mst_tl_counter own[8];
    size_t n_own = own_samples(f, own);
    mst_flight_dump_result res;
    char err[600] = "";
    mst_status st = mst_flight_dump_write(f->dumper, f->ring, plan, own, n_own, &res, err, sizeof err);
    if (st != MST_OK) {
        f->c.dumps_failed++;
        MST_WARN("flight recorder: dump for %s failed: %s; the ring is kept (%llu failed so far)",
                 plan->reason, err[0] ? err : mst_strerror(st), (unsigned long long)f->c.dumps_failed);
        return;
    }
    f->c.dumps_written++;
    f->c.dump_bytes += res.bytes;
    char note[64] = ""; /* also sent to a collector (flight_otlp.h) */
    if (f->opt.export_to)
        snprintf(note, sizeof note, "; %llu spans to the collector", (unsigned long long)res.exported);
    f->c.dumps_deleted += res.deleted;
    if (res.over_budget) f->c.dumps_over_budget++;
    MST_INFO("flight recorder: dump %s: trigger %s; window %.3f s; %llu spans, %llu counter "
             "samples, %llu bytes%s%s",
             res.path, plan->reason, (double)(res.end_ns - res.start_ns) / 1e9,
             (unsigned long long)res.spans, (unsigned long long)res.counters,
             (unsigned long long)res.bytes,
             res.over_budget ? " (larger than the disk budget alone: removed)" : "",
             note);
    if (res.deleted)
        MST_INFO("flight recorder: removed %llu older dump(s), %llu bytes, for the disk budget",
                 (unsigned long long)res.deleted, (unsigned long long)res.deleted_bytes);
}

static void flush_pending(flight_sink *f, bool force) {
    if (!f->pending || (!force && f->now_ms < f->pending_due_ms)) return;
    f->pending = false;
    note_dump_time(f);
    write_dump(f, &f->plan);
}

static int f_tick(void *self, uint64_t now_ms) {
    flight_sink *f = self;
    f->now_ms = now_ms;
    mst_flight_ring_expire(f->ring, now_ms);
    mst_tl_sink sink = tl_sink(f);
    mst_timeline_tick(f->tl, now_ms, &sink);
    flush_pending(f, false);
    flush_baseline(f);
    /* Always again: the request clock, a pending dump, a dump on demand. */
    return 1;
}

static int f_handoff(void *self) {
    (void)self;
    return 0;
}

static mst_status f_finish(void *self) {
    flight_sink *f = self;
    mst_tl_sink sink = tl_sink(f);
    mst_timeline_finish_all(f->tl, &sink);
    flush_pending(f, true);
    flush_baseline(f);
    return MST_OK;
}

static void f_on_demand(void *self) {
    flight_sink *f = self;
    f->c.triggers_fired++;
    f->c.on_demand++;
    mst_flight_dump_plan *plan = calloc(1, sizeof *plan);
    if (!plan) {
        f->c.dumps_failed++;
        return;
    }
    plan->whole_ring = true;
    snprintf(plan->reason, sizeof plan->reason, "on demand");
    note_dump_time(f);
    write_dump(f, plan);
    free(plan);
}

static void f_stats(const void *self, mst_chrome_stats *out) {
    const flight_sink *f = self;
    mst_flight_ring_stats rs;
    mst_flight_ring_get_stats(f->ring, &rs);
    memset(out, 0, sizeof *out);
    /* "written" = taken into the ring; spans too large to hold are dropped. */
    out->spans_written = rs.spans_seen - rs.spans_not_held;
    out->spans_dropped = rs.spans_not_held;
    out->bytes_written = f->c.dump_bytes;
    out->write_errors = f->c.dumps_failed;
}

static void f_describe(const void *self, char *buf, size_t size) {
    const flight_sink *f = self;
    mst_flight_ring_stats rs;
    mst_flight_ring_get_stats(f->ring, &rs);
    size_t n = strlen(buf);
    snprintf(buf + n, size - n,
             " flight: seen=%llu held=%llu evicted=%llu not_held=%llu counters_held=%llu "
             "ring_bytes=%llu/%llu triggers_fired=%llu suppressed=%llu merged=%llu dumps=%llu "
             "dump_bytes=%llu dumps_failed=%llu dumps_deleted=%llu",
             (unsigned long long)rs.spans_seen, (unsigned long long)rs.spans_held,
             (unsigned long long)rs.spans_evicted, (unsigned long long)rs.spans_not_held,
             (unsigned long long)rs.counters_held, (unsigned long long)rs.bytes_used,
             (unsigned long long)rs.bytes_cap, (unsigned long long)f->c.triggers_fired,
             (unsigned long long)f->c.triggers_suppressed, (unsigned long long)f->c.triggers_merged,
             (unsigned long long)f->c.dumps_written, (unsigned long long)f->c.dump_bytes,
             (unsigned long long)f->c.dumps_failed, (unsigned long long)f->c.dumps_deleted);
    if (f->opt.export_to) {
        n = strlen(buf);
        snprintf(buf + n, size - n, " baseline_requests=%llu baseline_spans=%llu",
                 (unsigned long long)f->c.baseline_requests, (unsigned long long)f->c.baseline_spans);
        f->opt.export_to->ops->describe(f->opt.export_to->self, buf, size);
    }
}

static bool f_identity(const void *self, char *buf, size_t size) {
    const flight_sink *f = self;
    mst_flight_ring_stats rs;
    mst_flight_ring_get_stats(f->ring, &rs);
    /* Every trigger ends as one dump's (written or failed), merged into
     * one, or suppressed; on_demand ones are dumps of their own. */
    uint64_t dumps = f->c.dumps_written + f->c.dumps_failed;
    bool spans_ok = rs.spans_seen == rs.spans_held + rs.spans_evicted + rs.spans_not_held;
    bool trig_ok = f->c.triggers_fired == dumps + f->c.triggers_merged + f->c.triggers_suppressed;
    snprintf(buf, size,
             "flight recorder: seen=%llu = held=%llu + evicted=%llu + not_held=%llu; "
             "triggers=%llu = dumps=%llu (failed=%llu) + merged=%llu + suppressed=%llu",
             (unsigned long long)rs.spans_seen, (unsigned long long)rs.spans_held,
             (unsigned long long)rs.spans_evicted, (unsigned long long)rs.spans_not_held,
             (unsigned long long)f->c.triggers_fired, (unsigned long long)dumps,
             (unsigned long long)f->c.dumps_failed, (unsigned long long)f->c.triggers_merged,
             (unsigned long long)f->c.triggers_suppressed);
    return spans_ok && trig_ok;
}

static mst_status f_close(void *self, mst_chrome_stats *final) {
    flight_sink *f = self;
    if (final) f_stats(f, final);
    mst_flight_ring_free(f->ring);
    mst_flight_rules_free(f->rules);
    mst_flight_dumper_free(f->dumper);
    mst_timeline_free(f->tl);
    mst_arena_release(&f->arena);
    free(f->dump_times);
    free(f->baseline);
    free(f);
    return MST_OK;
}

static const mst_output_sink_ops FLIGHT_OPS = {
    .add_span = f_add_span,
    .add_counter = f_add_counter,
    .add_forwarder_counters = f_own_counters,
    .tick = f_tick,
    .handoff = f_handoff,
    .finish = f_finish,
    .get_stats = f_stats,
    .describe = f_describe,
    .identity = f_identity,
    .on_demand = f_on_demand,
    .close = f_close,
};

mst_status mst_flight_sink_open(const char *path, mst_perfetto_format format,
                                const mst_flight_options *opts, mst_output_sink *out, char *err,
                                size_t err_size) {
    flight_sink *f = calloc(1, sizeof *f);
    if (!f) return MST_ERR_NOMEM;
    f->opt = *opts;
    if (!f->opt.ring_bytes) f->opt.ring_bytes = MST_FLIGHT_DEFAULT_RING_BYTES;
    if (!f->opt.max_dumps_per_min) f->opt.max_dumps_per_min = MST_FLIGHT_DEFAULT_DUMPS_PER_MIN;
    if (!f->opt.disk_budget) f->opt.disk_budget = MST_FLIGHT_DEFAULT_DISK_BUDGET;
    mst_arena_init(&f->arena);
    mst_status st = mst_flight_dumper_new(path, format, f->opt.disk_budget, &f->dumper, err, err_size);
    if (st == MST_OK) {
        mst_flight_dumper_set_export(f->dumper, f->opt.export_to);
        uint64_t age_ms = (uint64_t)(f->opt.ring_duration_ns / 1000000);
        f->ring = mst_flight_ring_new(f->opt.ring_bytes, age_ms);
        f->rules = mst_flight_rules_new(f->opt.triggers, f->opt.n_triggers);
        f->tl = mst_timeline_new(MST_TL_MAX_REQUESTS);
        f->dump_times = calloc(f->opt.max_dumps_per_min, sizeof *f->dump_times);
        if (f->opt.export_to && f->opt.baseline_n) f->baseline = calloc(1, sizeof *f->baseline);
        if (!f->ring || !f->rules || !f->tl || !f->dump_times ||
            (f->opt.export_to && f->opt.baseline_n && !f->baseline)) {
            snprintf(err, err_size, "out of memory for a %llu-byte flight recorder",
                     (unsigned long long)f->opt.ring_bytes);
            st = MST_ERR_NOMEM;
        }
    }
    if (st != MST_OK) {
        f_close(f, NULL);
        return st;
    }
    *out = (mst_output_sink){&FLIGHT_OPS, f};
    return MST_OK;
}
