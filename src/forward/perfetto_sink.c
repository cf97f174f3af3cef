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
#include "forward/chrome_trace.h"
#include "forward/format_stage.h"
#include "forward/out_queue.h"
#include "forward/pftrace_writer.h"
#include "forward/timeline.h"
#include "wire/loss_report.h"
#include "wire/perfetto_packet.h"

/* While events wait for a busy writer thread, the loop wakes this often to
 * hand them over (so they are written soon even if no traffic follows). */
#define HANDOFF_RETRY_MS 2
/* How often the forwarder's own counters are sampled onto the timeline. */
#define OWN_COUNTERS_EVERY_MS 1000

struct mst_perfetto_sink {
    char *path;
    mst_perfetto_format format;    /* JSON or PROTO (AUTO resolved at create) */
    mst_chrome_writer *writer;     /* JSON */
    mst_pftrace_writer *pwriter;   /* PROTO */
    /* A second output of the other format (mst_perfetto_sink_add_output):
     * the same spans written both ways from one run. The first output is the
     * primary: the stats line and the own counters are its. */
    char *path2;
    mst_chrome_writer *writer2;
    mst_pftrace_writer *pwriter2;
    mst_format_stage *stage;    /* the formatting thread, from open to close */
    /* Written by the event loop, read by both threads. */
    _Atomic uint64_t received;
    _Atomic uint64_t rejected;
    /* Loss the traced processes reported (loss reports, not spans). */
    _Atomic uint64_t upstream_failed;
    _Atomic uint64_t upstream_dropped;
    /* Written by both threads, read by both. */
    _Atomic uint64_t add_errors; /* out of memory: decoding, or the writer refused */
    /* Formatting thread only (the loop after close). */
    uint64_t second_errors;
    uint64_t last_counters_ms;
    uint64_t full_drops;        /* decoded but dropped: writes failing, output at its cap */
    uint64_t unflushed;         /* spans added since the last hand-off */
    /* The primary writer's statistics as of the last batch formatted, for
     * the loop's periodic stats line while the formatting thread runs. */
    pthread_mutex_t stats_mu;
    mst_chrome_stats stats_snapshot;
    uint64_t snapshot_full_drops; /* full_drops as of stats_snapshot */
    mst_chrome_stats final_stats; /* kept at close for the final stats line */
};

/* First few, then one line per 1000 (the line carries the count). */
static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

mst_perfetto_format mst_perfetto_format_for_path(const char *path) {
    if (path && ends_with(path, ".pftrace")) return MST_PERFETTO_FORMAT_PROTO;
    return MST_PERFETTO_FORMAT_JSON;
}

/* ---- the writer of the chosen format ---- */

/* The second output's failures are only counted and logged: the primary's
 * status is what the frame callback reports. */
static void w_add_second(mst_perfetto_sink *s, const mst_pf_span *span) {
    mst_status st = MST_OK;
    if (s->pwriter2) st = mst_pftrace_writer_add_span(s->pwriter2, span);
    else if (s->writer2) st = mst_chrome_writer_add_span(s->writer2, span);
    if (st != MST_OK && mst_log_this_count(++s->second_errors))
        MST_WARN("second output %s: span not written: %s (%llu so far)", s->path2,
                 mst_strerror(st), (unsigned long long)s->second_errors);
}

static mst_status w_add(mst_perfetto_sink *s, const mst_pf_span *span) {
    w_add_second(s, span);
    return s->pwriter ? mst_pftrace_writer_add_span(s->pwriter, span)
                      : mst_chrome_writer_add_span(s->writer, span);
}

static int w_handoff(mst_perfetto_sink *s) {
    int busy = 0;
    if (s->pwriter2) busy |= mst_pftrace_writer_handoff(s->pwriter2);
    if (s->writer2) busy |= mst_chrome_writer_handoff(s->writer2);
    return busy | (s->pwriter ? mst_pftrace_writer_handoff(s->pwriter)
                              : mst_chrome_writer_handoff(s->writer));
}

static void w_stats(const mst_perfetto_sink *s, mst_chrome_stats *cs) {
    if (s->pwriter) mst_pftrace_writer_get_stats(s->pwriter, cs);
    else if (s->writer) mst_chrome_writer_get_stats(s->writer, cs);
}

static bool w_open(const mst_perfetto_sink *s) { return s->writer || s->pwriter; }

static uint64_t load(_Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }
/* Adds one; returns the new count (for the rate-limited warnings). */
static uint64_t bump(_Atomic uint64_t *v) {
    return atomic_fetch_add_explicit(v, 1, memory_order_relaxed) + 1;
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
    mst_pftrace_writer *pws[2] = {s->pwriter, s->pwriter2};
    mst_chrome_writer *jws[2] = {s->writer, s->writer2};
    for (int i = 0; i < 2; i++) {
        if (pws[i])
            mst_pftrace_writer_add_forwarder_counters(pws[i], now, received, cs.spans_written,
                                                      dropped);
        if (jws[i])
            mst_chrome_writer_add_forwarder_counters(jws[i], now, received, cs.spans_written,
                                                     dropped);
    }
}

mst_status mst_perfetto_sink_create(const char *output_path, mst_perfetto_format format,
                                    mst_perfetto_sink **out) {
    if (!output_path || !out) return MST_ERR_INVALID_ARG;
    mst_perfetto_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(output_path))) {
        free(s);
        return MST_ERR_NOMEM;
    }
    s->format = format == MST_PERFETTO_FORMAT_AUTO ? mst_perfetto_format_for_path(output_path)
                                                   : format;
    pthread_mutex_init(&s->stats_mu, NULL);
    *out = s;
    return MST_OK;
}

void mst_perfetto_sink_destroy(mst_perfetto_sink *s) {
    if (!s) return;
    mst_format_stage_stop(s->stage);
    if (s->writer) mst_chrome_writer_close(s->writer);
    if (s->pwriter) mst_pftrace_writer_close(s->pwriter);
    if (s->writer2) mst_chrome_writer_close(s->writer2);
    if (s->pwriter2) mst_pftrace_writer_close(s->pwriter2);
    pthread_mutex_destroy(&s->stats_mu);
    free(s->path);
    free(s->path2);
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

/* Event loop: decode into the batch being filled; a full batch goes to the
 * formatting thread at once, the rest at the end of the epoll batch. */
/* Event loop: a loss report (not a span) adds to the reported losses;
 * false when the payload is none. A malformed one is received and rejected
 * like any bad packet. */
static bool take_loss_report(mst_perfetto_sink *s, const uint8_t *payload, size_t len, uint64_t conn_id) {
    if (!mst_loss_report_is(payload, len)) return false;
    mst_loss_report r;
    if (!mst_loss_report_decode(payload, len, &r)) {
        bump(&s->received);
        uint64_t n = bump(&s->rejected);
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

void mst_perfetto_sink_on_frame(void *self, const uint8_t *payload, size_t len, uint64_t conn_id) {
    mst_perfetto_sink *s = self;
    if (take_loss_report(s, payload, len, conn_id)) return;
    bump(&s->received);
    if (!s->stage) { /* not reached: the daemon exits when open fails */
        bump(&s->add_errors);
        return;
    }
    mst_span_batch *batch = mst_format_stage_batch(s->stage);
    char err[200] = "";
    mst_status st = mst_span_batch_add(batch, payload, len, err, sizeof err);
    if (st == MST_ERR_NOMEM) {
        uint64_t n = bump(&s->add_errors);
        if (mst_log_this_count(n))
            MST_WARN("out of memory for a %zu-byte packet from connection %llu; span dropped "
                     "(%llu so far)", len, (unsigned long long)conn_id, (unsigned long long)n);
    } else if (st != MST_OK) {
        uint64_t n = bump(&s->rejected);
        if (mst_log_this_count(n))
            MST_WARN("rejected a %zu-byte packet from connection %llu: %s (%llu rejected so far)",
                     len, (unsigned long long)conn_id, err[0] ? err : mst_strerror(st),
                     (unsigned long long)n);
    }
    if (mst_span_batch_full(batch)) mst_format_stage_publish(s->stage);
}

static int stage_after(void *self, uint64_t now_ms);

static mst_status svc_open(void *self, char *err, size_t err_size) {
    mst_perfetto_sink *s = self;
    mst_status st = s->format == MST_PERFETTO_FORMAT_PROTO
                        ? mst_pftrace_writer_open(s->path, (int64_t)getpid(), &s->pwriter, err, err_size)
                        : mst_chrome_writer_open(s->path, (int64_t)getpid(), &s->writer, err, err_size);
    /* The second output has the other format (checked when it was added). */
    if (st == MST_OK && s->path2)
        st = s->format == MST_PERFETTO_FORMAT_PROTO
                 ? mst_chrome_writer_open(s->path2, (int64_t)getpid(), &s->writer2, err, err_size)
                 : mst_pftrace_writer_open(s->path2, (int64_t)getpid(), &s->pwriter2, err, err_size);
    if (st != MST_OK) return st;
    mst_format_stage_ops ops = {.self = s, .consume = stage_consume, .after = stage_after};
    st = mst_format_stage_start(&ops, &s->stage);
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
    int open = 0;
    if (s->writer) open |= mst_chrome_writer_tick(s->writer, now_ms);
    if (s->pwriter) open |= mst_pftrace_writer_tick(s->pwriter, now_ms);
    if (s->writer2) open |= mst_chrome_writer_tick(s->writer2, now_ms);
    if (s->pwriter2) open |= mst_pftrace_writer_tick(s->pwriter2, now_ms);
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
    if (s->stage) { /* running: the formatting thread's last snapshot */
        pthread_mutex_lock(&s->stats_mu);
        cs = s->stats_snapshot;
        uint64_t full_drops = s->snapshot_full_drops;
        pthread_mutex_unlock(&s->stats_mu);
        /* ... with the file's counters as of now: the snapshot is taken when
         * a batch is handed to the writer thread, before it is written. */
        mst_outq_stats os;
        if (s->pwriter) mst_pftrace_writer_get_disk_stats(s->pwriter, &os);
        else mst_chrome_writer_get_disk_stats(s->writer, &os);
        mst_chrome_stats_add_outq(&cs, &os, full_drops);
    } else {
        w_stats(s, &cs);
    }
    memset(out, 0, sizeof *out);
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
             "write_errors=%llu spans_dropped=%llu write_waits=%llu bytes_out=%llu",
             (unsigned long long)cs.flows_written, (unsigned long long)cs.flows_pending,
             (unsigned long long)cs.positions_evicted, (unsigned long long)cs.pending_evicted,
             (unsigned long long)cs.write_errors, (unsigned long long)cs.spans_dropped,
             (unsigned long long)cs.write_waits,
             (unsigned long long)cs.bytes_written);
}

static mst_status svc_close(void *self) {
    mst_perfetto_sink *s = self;
    /* Every span decoded is formatted before the writers close; from here
     * on the writers are this thread's. */
    mst_format_stage_stop(s->stage);
    s->stage = NULL;
    if (!w_open(s)) return MST_OK;
    /* Complete the open request tracks and take a last own-counter sample
     * first; the counters kept are taken after the close, which drops (and
     * counts) whatever still could not be written. */
    mst_status fst = s->pwriter ? mst_pftrace_writer_flush(s->pwriter, true)
                                : mst_chrome_writer_flush_final(s->writer);
    add_own_counters(s);
    mst_status st = s->pwriter ? mst_pftrace_writer_close_final(s->pwriter, &s->final_stats)
                               : mst_chrome_writer_close_final(s->writer, &s->final_stats);
    if (st == MST_OK) st = fst;
    s->writer = NULL;
    s->pwriter = NULL;
    if (st != MST_OK) MST_ERROR("closing %s failed: %s", s->path, mst_strerror(st));
    if (s->pwriter2 || s->writer2) {
        mst_status st2 = s->pwriter2 ? mst_pftrace_writer_flush(s->pwriter2, true)
                                     : mst_chrome_writer_flush_final(s->writer2);
        mst_status c2 = s->pwriter2 ? mst_pftrace_writer_close(s->pwriter2)
                                    : mst_chrome_writer_close(s->writer2);
        if (st2 == MST_OK) st2 = c2;
        s->pwriter2 = NULL;
        s->writer2 = NULL;
        if (st2 != MST_OK) MST_ERROR("closing %s failed: %s", s->path2, mst_strerror(st2));
        if (st == MST_OK) st = st2;
    }
    return st;
}

mst_status mst_perfetto_sink_add_output(mst_perfetto_sink *s, const char *path) {
    if (!s || !path || s->path2) return MST_ERR_INVALID_ARG;
    if (mst_perfetto_format_for_path(path) == s->format) return MST_ERR_INVALID_ARG;
    return (s->path2 = strdup(path)) ? MST_OK : MST_ERR_NOMEM;
}

void mst_perfetto_sink_service(mst_perfetto_sink *s, mst_daemon_service *svc) {
    memset(svc, 0, sizeof *svc);
    svc->name = "Perfetto forwarder";
    svc->self = s;
    svc->open = svc_open;
    svc->on_frame = mst_perfetto_sink_on_frame;
    svc->after_batch = svc_after_batch;
    svc->get_counts = svc_get_counts;
    svc->close = svc_close;
}
