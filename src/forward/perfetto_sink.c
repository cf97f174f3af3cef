/*
 * perfetto_sink.c — glue between the frame server and the output writer
 * (Chrome Trace JSON or native Perfetto) for `mstrace forward
 * --perfetto-output` (see perfetto_sink.h). The format choice lives here
 * and nowhere else: every writer call goes through the small switch below.
 *
 * Threads: the event loop (on_frame, after_batch, get_counts, close)
 * copies and decodes each packet into a span batch (span_batch.h) and hands
 * full batches, and every batch at the end of an epoll batch, to the
 * formatting thread (format_stage.h), which owns the writers from open to
 * close: it adds the spans (timeline + writer), ticks the request tracks,
 * samples the forwarder's own counters and hands the output to each
 * writer's own thread. The counters both threads need are atomics; the
 * writers' statistics reach the loop as a snapshot taken under a mutex
 * after every batch. close() stops the formatting thread (every batch
 * handed over is formatted first) before it flushes and closes the writers
 * on the loop's thread, so the final counts are exact.
 */
#include "forward/perfetto_sink.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "forward/format_stage.h"
#include "forward/id_streams.h"
#include "forward/out_queue.h"
#include "forward/timeline.h"
#include "forward/writer_sinks.h"
#include "wire/loss_report.h"
#include "wire/perfetto_packet.h"

/* While events wait for a busy writer thread, the loop wakes this often to
 * hand them over (so they are written soon even if no traffic follows). */
#define HANDOFF_RETRY_MS 2
/* How often the forwarder's own counters are sampled onto the timeline. */
#define OWN_COUNTERS_EVERY_MS 1000
/* The primary output and at most one more (the other file format). */
#define MAX_OUTPUTS 2

struct mst_perfetto_sink {
    /* outputs[0] is the primary: the stats line and the own counters are
     * its; the others' failures are only logged. Each is one
     * implementation of output_sink.h, opened by svc_open. */
    char *paths[MAX_OUTPUTS];
    mst_perfetto_format formats[MAX_OUTPUTS]; /* AUTO resolved at create/add */
    size_t n_paths;
    mst_output_sink outputs[MAX_OUTPUTS];
    size_t n_outputs;
    const mst_flight_options *flight; /* set: outputs[0] is the flight recorder */
    mst_format_stage *stage;    /* the formatting thread, from open to close */
    mst_id_streams *ids;        /* event loop: request id streams per connection */
    /* Written by the event loop, read by both threads. */
    _Atomic uint64_t received;
    _Atomic uint64_t rejected;
    /* Loss the traced processes reported (loss reports, not spans). */
    _Atomic uint64_t upstream_failed;
    _Atomic uint64_t upstream_dropped;
    _Atomic bool demand;        /* a dump on demand was asked for (SIGUSR2) */
    /* Written by both threads, read by both. */
    _Atomic uint64_t add_errors; /* out of memory: decoding, or the writer refused */
    /* Formatting thread only (the loop after close). */
    uint64_t second_errors;
    uint64_t last_counters_ms;
    uint64_t full_drops;        /* decoded but dropped: writes failing, output at its cap */
    uint64_t unflushed;         /* spans added since the last hand-off */
    /* The primary output's statistics as of the last batch formatted, for
     * the loop's periodic stats line while the formatting thread runs. */
    pthread_mutex_t stats_mu;
    mst_chrome_stats stats_snapshot;
    char details_snapshot[384];
    char identity_snapshot[256];
    bool identity_ok;
    uint64_t snapshot_full_drops; /* full_drops as of stats_snapshot */
    mst_chrome_stats final_stats; /* kept at close for the final stats line */
};

/* ---- every output, through its table ---- */

/* The other outputs' failures are only counted and logged: the primary's
 * status is what the frame callback reports. */
static mst_status w_add(mst_perfetto_sink *s, const mst_pf_span *span) {
    for (size_t i = 1; i < s->n_outputs; i++) {
        const mst_output_sink *o = &s->outputs[i];
        mst_status st = o->ops->add_span(o->self, span);
        if (st != MST_OK && mst_log_this_count(++s->second_errors))
            MST_WARN("second output %s: span not written: %s (%llu so far)", s->paths[i],
                     mst_strerror(st), (unsigned long long)s->second_errors);
    }
    return s->outputs[0].ops->add_span(s->outputs[0].self, span);
}

static int w_handoff(mst_perfetto_sink *s) {
    int busy = 0;
    for (size_t i = 0; i < s->n_outputs; i++) busy |= s->outputs[i].ops->handoff(s->outputs[i].self);
    return busy;
}

static int w_tick(mst_perfetto_sink *s, uint64_t now_ms) {
    int open = 0;
    for (size_t i = 0; i < s->n_outputs; i++) open |= s->outputs[i].ops->tick(s->outputs[i].self, now_ms);
    return open;
}

static void w_stats(const mst_perfetto_sink *s, mst_chrome_stats *cs) {
    if (s->n_outputs) s->outputs[0].ops->get_stats(s->outputs[0].self, cs);
}

/* The primary's details and identity into the snapshot (stats_mu held). */
static void w_details(mst_perfetto_sink *s) {
    s->details_snapshot[0] = 0;
    s->identity_snapshot[0] = 0;
    if (!s->n_outputs) return;
    const mst_output_sink *o = &s->outputs[0];
    o->ops->describe(o->self, s->details_snapshot, sizeof s->details_snapshot);
    s->identity_ok = !o->ops->identity ||
                     o->ops->identity(o->self, s->identity_snapshot, sizeof s->identity_snapshot);
}

static bool w_open(const mst_perfetto_sink *s) { return s->n_outputs > 0; }

static uint64_t load(_Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }
/* Adds one; returns the new count (for the rate-limited warnings). */
static uint64_t bump(_Atomic uint64_t *v) {
    return atomic_fetch_add_explicit(v, 1, memory_order_relaxed) + 1;
}
/* bump for a counter only the event loop writes (received, rejected): a
 * relaxed load and store, not a locked add, once per packet. */
static uint64_t bump_loop_only(_Atomic uint64_t *v) {
    uint64_t n = atomic_load_explicit(v, memory_order_relaxed) + 1;
    atomic_store_explicit(v, n, memory_order_relaxed);
    return n;
}

/* Dropped spans as the stats line counts them. */
static void own_counts(mst_perfetto_sink *s, const mst_chrome_stats *cs, uint64_t *dropped) {
    *dropped = cs->spans_dropped + load(&s->add_errors);
}

static void add_own_counters(mst_perfetto_sink *s) {
    uint64_t received = load(&s->received);
    /* No decoded span yet: nothing on the timeline to put them next to (an
     * output of only rejected payloads stays empty). */
    if (!w_open(s) || received == load(&s->rejected)) return;
    mst_chrome_stats cs;
    memset(&cs, 0, sizeof cs);
    w_stats(s, &cs);
    uint64_t dropped;
    own_counts(s, &cs, &dropped);
    /* On the timeline, every span lost on its way to this file: the traced
     * processes' reported losses too (mstrace analyze reads this counter). */
    dropped += load(&s->upstream_failed) + load(&s->upstream_dropped);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    for (size_t i = 0; i < s->n_outputs; i++)
        s->outputs[i].ops->add_forwarder_counters(s->outputs[i].self, now, received,
                                                  cs.spans_written, dropped);
}

mst_status mst_perfetto_sink_create(const char *output_path, mst_perfetto_format format,
                                    mst_perfetto_sink **out) {
    if (!output_path || !out) return MST_ERR_INVALID_ARG;
    mst_perfetto_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->paths[0] = strdup(output_path))) {
        free(s);
        return MST_ERR_NOMEM;
    }
    if (!(s->ids = mst_id_streams_new(0))) {
        free(s->paths[0]);
        free(s);
        return MST_ERR_NOMEM;
    }
    s->n_paths = 1;
    s->formats[0] = format == MST_PERFETTO_FORMAT_AUTO ? mst_perfetto_format_for_path(output_path)
                                                       : format;
    pthread_mutex_init(&s->stats_mu, NULL);
    *out = s;
    return MST_OK;
}

void mst_perfetto_sink_set_flight(mst_perfetto_sink *s, const mst_flight_options *opts) {
    if (s) s->flight = opts;
}

static void close_outputs(mst_perfetto_sink *s) {
    for (size_t i = 0; i < s->n_outputs; i++) s->outputs[i].ops->close(s->outputs[i].self, NULL);
    s->n_outputs = 0;
}

void mst_perfetto_sink_destroy(mst_perfetto_sink *s) {
    if (!s) return;
    mst_format_stage_stop(s->stage);
    close_outputs(s);
    pthread_mutex_destroy(&s->stats_mu);
    mst_id_streams_free(s->ids);
    for (size_t i = 0; i < s->n_paths; i++) free(s->paths[i]);
    free(s);
}

/* Formatting thread: one decoded span into the output(s). */
static void add_span(mst_perfetto_sink *s, const mst_pf_span *span) {
    mst_status st = w_add(s, span);
    if (st == MST_ERR_QUEUE_FULL) {
        s->full_drops++; /* counted by the writer as spans_dropped */
        if (mst_log_this_count(s->full_drops))
            MST_WARN("perfetto output: cannot buffer more unwritten output while writes fail; "
                     "span dropped (%llu dropped so far)",
                     (unsigned long long)s->full_drops);
    } else if (st != MST_OK) {
        uint64_t n = bump(&s->add_errors);
        if (mst_log_this_count(n))
            MST_WARN("could not add a span to the Perfetto output: %s (%llu so far)",
                     mst_strerror(st), (unsigned long long)n);
    } else {
        s->unflushed++;
    }
}

static void stage_consume(void *self, const mst_span_batch *batch) {
    mst_perfetto_sink *s = self;
    size_t n = mst_span_batch_count(batch);
    for (size_t i = 0; i < n; i++) add_span(s, mst_span_batch_span(batch, i));
}

/* Event loop: a loss report (not a span) adds to the reported losses;
 * false when the payload is none. A malformed one is received and rejected
 * like any bad packet. */
static bool take_loss_report(mst_perfetto_sink *s, const uint8_t *payload, size_t len, uint64_t conn_id) {
    if (!mst_loss_report_is(payload, len)) return false;
    mst_loss_report r;
    if (!mst_loss_report_decode(payload, len, &r)) {
        bump_loop_only(&s->received);
        uint64_t n = bump_loop_only(&s->rejected);
        if (mst_log_this_count(n))
            MST_WARN("rejected a %zu-byte loss report from connection %llu: a report is %u bytes "
                     "(%llu rejected so far)", len, (unsigned long long)conn_id,
                     (unsigned)MST_LOSS_REPORT_BYTES, (unsigned long long)n);
        return true;
    }
    atomic_fetch_add_explicit(&s->upstream_failed, r.spans_failed, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->upstream_dropped, r.spans_dropped, memory_order_relaxed);
    MST_DEBUG("connection %llu reported %llu span(s) it failed to send and %llu its tracer dropped",
              (unsigned long long)conn_id, (unsigned long long)r.spans_failed,
              (unsigned long long)r.spans_dropped);
    return true;
}

/* Event loop: a change to a request.ids list whose base this forwarder
 * does not hold (id_streams.h) left its span without the list. */
static void note_no_base(const mst_perfetto_sink *s, uint64_t conn_id) {
    mst_id_streams_stats st;
    mst_id_streams_get_stats(s->ids, &st);
    if (mst_log_this_count(st.no_base))
        MST_WARN("connection %llu sent a request.ids change whose previous list this forwarder does not hold "
                 "(a packet of its stream was rejected or not kept); the span is kept without request.ids "
                 "until the stream's next whole list (%llu such spans so far)",
                 (unsigned long long)conn_id, (unsigned long long)st.no_base);
}

/* The connection closed: its request id streams go. */
static void svc_on_close(void *self, uint64_t conn_id) {
    mst_perfetto_sink *s = self;
    mst_id_streams_drop_conn(s->ids, conn_id);
}

/* Event loop: decode into the batch being filled; a full batch goes to the
 * formatting thread at once, the rest at the end of the epoll batch. */
void mst_perfetto_sink_on_frame(void *self, const uint8_t *payload, size_t len, uint64_t conn_id) {
    mst_perfetto_sink *s = self;
    if (take_loss_report(s, payload, len, conn_id)) return;
    bump_loop_only(&s->received);
    if (!s->stage) { /* not reached: the daemon exits when open fails */
        bump(&s->add_errors);
        return;
    }
    mst_span_batch *batch = mst_format_stage_batch(s->stage);
    char err[200]; /* only err[0] is read when nothing was written (not the whole array zeroed per span) */
    err[0] = '\0';
    mst_ids_outcome ids;
    mst_status st = mst_span_batch_add(batch, s->ids, conn_id, payload, len, &ids, err, sizeof err);
    if (ids == MST_IDS_NO_BASE) note_no_base(s, conn_id);
    if (st == MST_ERR_NOMEM) {
        uint64_t n = bump(&s->add_errors);
        if (mst_log_this_count(n))
            MST_WARN("out of memory for a %zu-byte packet from connection %llu; span dropped "
                     "(%llu so far)", len, (unsigned long long)conn_id, (unsigned long long)n);
    } else if (st != MST_OK) {
        uint64_t n = bump_loop_only(&s->rejected);
        if (mst_log_this_count(n))
            MST_WARN("rejected a %zu-byte packet from connection %llu: %s (%llu rejected so far)",
                     len, (unsigned long long)conn_id, err[0] ? err : mst_strerror(st),
                     (unsigned long long)n);
    }
    if (mst_span_batch_full(batch)) mst_format_stage_publish(s->stage);
}

static int stage_after(void *self, uint64_t now_ms);

/* A dump on demand asked for since the last look: to every output that
 * has one (formatting thread, or the loop's after the stage stopped). */
static void take_demand(mst_perfetto_sink *s) {
    if (atomic_exchange_explicit(&s->demand, false, memory_order_relaxed))
        for (size_t i = 0; i < s->n_outputs; i++)
            if (s->outputs[i].ops->on_demand) s->outputs[i].ops->on_demand(s->outputs[i].self);
}

static mst_status svc_open(void *self, char *err, size_t err_size) {
    mst_perfetto_sink *s = self;
    for (size_t i = 0; i < s->n_paths; i++) {
        mst_output_sink *o = &s->outputs[s->n_outputs];
        mst_status st = i == 0 && s->flight
                            ? mst_flight_sink_open(s->paths[0], s->formats[0], s->flight, o, err,
                                                   err_size)
                            : mst_writer_sink_open(s->paths[i], s->formats[i], (int64_t)getpid(), o,
                                                   err, err_size);
        if (st != MST_OK) return st;
        s->n_outputs++;
    }
    mst_format_stage_ops ops = {.self = s, .consume = stage_consume, .after = stage_after};
    mst_status st = mst_format_stage_start(&ops, &s->stage);
    if (st != MST_OK) snprintf(err, err_size, "cannot start the formatting thread: %s", mst_strerror(st));
    return st;
}

/* Formatting thread, after every batch it formatted (a batch is at most what
 * one epoll_wait returned, so under load it holds many spans: one large
 * write; when traffic is light the file is valid right away) and when the
 * time asked for last has passed. The write itself runs on the writer's
 * thread; if that thread is still busy with the previous events, these stay
 * buffered and this runs again in HANDOFF_RETRY_MS. */
static int stage_after(void *self, uint64_t now_ms) {
    mst_perfetto_sink *s = self;
    /* Request tracks complete on the forwarder's clock (timeline.h): tick
     * every output, and come back while requests are open even without
     * traffic. A tick that wrote events needs a hand-off like spans do. */
    take_demand(s);
    int open = w_tick(s, now_ms);
    if (open) s->unflushed++;
    int next = -1;
    if (s->unflushed) {
        if (now_ms - s->last_counters_ms >= OWN_COUNTERS_EVERY_MS) {
            s->last_counters_ms = now_ms;
            add_own_counters(s);
        }
        if (w_handoff(s)) {
            next = HANDOFF_RETRY_MS;
        } else {
            s->unflushed = 0;
            next = open ? (int)MST_TL_SCAN_EVERY_MS : -1;
        }
    }
    pthread_mutex_lock(&s->stats_mu);
    w_stats(s, &s->stats_snapshot);
    w_details(s);
    s->snapshot_full_drops = s->full_drops;
    pthread_mutex_unlock(&s->stats_mu);
    return next;
}

/* Event loop, after every batch of readiness events: whatever was decoded
 * goes to the formatting thread now (it does the periodic work itself). */
static int svc_after_batch(void *self, uint64_t now_ms) {
    (void)now_ms;
    mst_perfetto_sink *s = self;
    if (s->stage) mst_format_stage_publish(s->stage);
    return -1;
}

static void svc_get_counts(void *self, mst_daemon_counts *out) {
    mst_perfetto_sink *s = self;
    mst_chrome_stats cs = s->final_stats;
    char details[sizeof s->details_snapshot];
    pthread_mutex_lock(&s->stats_mu);
    if (s->stage) { /* running: the formatting thread's last snapshot ... */
        cs = s->stats_snapshot;
        /* ... with the file's counters as of now: the snapshot is taken when
         * a batch is handed to the writer thread, before it is written. */
        mst_outq_stats os;
        const mst_output_sink *o = &s->outputs[0];
        if (o->ops && o->ops->get_disk_stats && o->ops->get_disk_stats(o->self, &os))
            mst_chrome_stats_add_outq(&cs, &os, s->snapshot_full_drops);
    }
    memcpy(details, s->details_snapshot, sizeof details);
    memset(out, 0, sizeof *out);
    memcpy(out->identity, s->identity_snapshot, sizeof out->identity);
    out->identity_ok = s->identity_ok;
    pthread_mutex_unlock(&s->stats_mu);
    out->received = load(&s->received);
    out->written = cs.spans_written;
    out->rejected = load(&s->rejected);
    out->upstream_failed = load(&s->upstream_failed);
    out->upstream_dropped = load(&s->upstream_dropped);
    /* Spans, not attempts or links: received = written + rejected + dropped
     * once the writer is closed (spans_dropped includes full_drops). */
    own_counts(s, &cs, &out->dropped);
    snprintf(out->dropped_why, sizeof out->dropped_why, "write_failed=%llu out_of_memory=%llu",
             (unsigned long long)cs.spans_dropped, (unsigned long long)load(&s->add_errors));
    snprintf(out->extra, sizeof out->extra,
             "flows=%llu pending_links=%llu evicted_positions=%llu evicted_links=%llu "
             "write_errors=%llu spans_dropped=%llu write_waits=%llu bytes_out=%llu%s",
             (unsigned long long)cs.flows_written, (unsigned long long)cs.flows_pending,
             (unsigned long long)cs.positions_evicted, (unsigned long long)cs.pending_evicted,
             (unsigned long long)cs.write_errors, (unsigned long long)cs.spans_dropped,
             (unsigned long long)cs.write_waits,
             (unsigned long long)cs.bytes_written, details);
}

static mst_status svc_close(void *self) {
    mst_perfetto_sink *s = self;
    /* Every span decoded is formatted before the outputs close; from here
     * on the outputs are this thread's. */
    mst_format_stage_stop(s->stage);
    s->stage = NULL;
    mst_id_streams_stats ids;
    mst_id_streams_get_stats(s->ids, &ids);
    MST_DEBUG("request.ids streams: %llu whole list(s) kept as a base, %llu change(s) rebuilt into whole lists, "
              "%llu malformed change(s) rejected", (unsigned long long)ids.keyframes, (unsigned long long)ids.changes,
              (unsigned long long)ids.bad_changes);
    if (ids.no_base || ids.not_kept)
        MST_WARN("%llu span(s) arrived as request.ids changes without their previous list and were kept without "
                 "request.ids; %llu whole list(s) could not be kept as a base (stream or memory limits)",
                 (unsigned long long)ids.no_base, (unsigned long long)ids.not_kept);
    if (!w_open(s)) return MST_OK;
    take_demand(s); /* asked for just before the stop */
    /* Complete what is still open and take a last own-counter sample
     * first; the counters kept are the primary's after its close, which
     * drops (and counts) whatever still could not be written. */
    mst_status fst = s->outputs[0].ops->finish(s->outputs[0].self);
    add_own_counters(s);
    /* The details as of now (what the flight recorder reports is final
     * once it finished; the file writers' counters come from the close). */
    pthread_mutex_lock(&s->stats_mu);
    w_details(s);
    pthread_mutex_unlock(&s->stats_mu);
    mst_status result = MST_OK;
    for (size_t i = 0; i < s->n_outputs; i++) {
        const mst_output_sink *o = &s->outputs[i];
        mst_status f = i == 0 ? fst : o->ops->finish(o->self);
        mst_status c = o->ops->close(o->self, i == 0 ? &s->final_stats : NULL);
        if (c == MST_OK) c = f;
        if (c != MST_OK) MST_ERROR("closing %s failed: %s", s->paths[i], mst_strerror(c));
        if (result == MST_OK) result = c;
    }
    s->n_outputs = 0;
    return result;
}

mst_status mst_perfetto_sink_add_output(mst_perfetto_sink *s, const char *path) {
    if (!s || !path || s->n_paths >= MAX_OUTPUTS || s->flight) return MST_ERR_INVALID_ARG;
    mst_perfetto_format f = mst_perfetto_format_for_path(path);
    if (f == s->formats[0]) return MST_ERR_INVALID_ARG;
    if (!(s->paths[s->n_paths] = strdup(path))) return MST_ERR_NOMEM;
    s->formats[s->n_paths++] = f;
    return MST_OK;
}

static void svc_on_demand(void *self) {
    mst_perfetto_sink *s = self;
    atomic_store_explicit(&s->demand, true, memory_order_relaxed);
}

void mst_perfetto_sink_service(mst_perfetto_sink *s, mst_daemon_service *svc) {
    memset(svc, 0, sizeof *svc);
    svc->name = "Perfetto forwarder";
    svc->self = s;
    svc->open = svc_open;
    svc->on_frame = mst_perfetto_sink_on_frame;
    svc->on_close = svc_on_close;
    svc->hello = MST_PERFETTO_HELLO;
    svc->hello_len = MST_PERFETTO_HELLO_LEN;
    svc->after_batch = svc_after_batch;
    svc->get_counts = svc_get_counts;
    svc->close = svc_close;
    /* Only the flight recorder has a snapshot to give (the daemon logs and
     * ignores SIGUSR2 otherwise). */
    svc->on_demand = s->flight ? svc_on_demand : NULL;
}
