/*
 * perfetto_sink.c — glue between the frame server and the output writer
 * (Chrome Trace JSON or native Perfetto) for `mstrace forward
 * --perfetto-output` (see perfetto_sink.h). The format choice lives here
 * and nowhere else: every writer call goes through the small switch below.
 *
 * Why per-packet arena reset: the decoder's strings/arrays live in an arena
 * that is emptied after every packet, so memory does not grow with traffic
 * and a huge packet's allocations are returned at once. Its first chunk
 * (up to ARENA_KEEP_BYTES) is kept across packets, so an ordinary packet
 * costs no malloc/free.
 */
#include "forward/perfetto_sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/log.h"
#include "forward/chrome_trace.h"
#include "forward/pftrace_writer.h"
#include "forward/timeline.h"
#include "wire/perfetto_packet.h"

/* While events wait for a busy writer thread, the loop wakes this often to
 * hand them over (so they are written soon even if no traffic follows). */
#define HANDOFF_RETRY_MS 2
/* Arena chunk kept between packets (a bigger one is freed after its packet). */
#define ARENA_KEEP_BYTES (64u * 1024u)
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
    uint64_t second_errors;
    uint64_t last_counters_ms;
    uint64_t received;
    uint64_t rejected;
    uint64_t add_errors;        /* decoded but the writer refused (OOM) */
    uint64_t full_drops;        /* decoded but dropped: writes failing, output at its cap */
    uint64_t unflushed;         /* spans added since the last hand-off */
    mst_chrome_stats final_stats; /* kept at close for the final stats line */
    mst_arena arena;
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

/* Dropped spans as the stats line counts them. */
static void own_counts(const mst_perfetto_sink *s, const mst_chrome_stats *cs, uint64_t *dropped) {
    *dropped = cs->spans_dropped + s->add_errors;
}

static void add_own_counters(mst_perfetto_sink *s) {
    /* No decoded span yet: nothing on the timeline to put them next to (an
     * output of only rejected payloads stays empty). */
    if (!w_open(s) || s->received == s->rejected) return;
    mst_chrome_stats cs;
    memset(&cs, 0, sizeof cs);
    w_stats(s, &cs);
    uint64_t dropped;
    own_counts(s, &cs, &dropped);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    mst_pftrace_writer *pws[2] = {s->pwriter, s->pwriter2};
    mst_chrome_writer *jws[2] = {s->writer, s->writer2};
    for (int i = 0; i < 2; i++) {
        if (pws[i])
            mst_pftrace_writer_add_forwarder_counters(pws[i], now, s->received, cs.spans_written,
                                                      dropped);
        if (jws[i])
            mst_chrome_writer_add_forwarder_counters(jws[i], now, s->received, cs.spans_written,
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
    mst_arena_init(&s->arena);
    *out = s;
    return MST_OK;
}

void mst_perfetto_sink_destroy(mst_perfetto_sink *s) {
    if (!s) return;
    if (s->writer) mst_chrome_writer_close(s->writer);
    if (s->pwriter) mst_pftrace_writer_close(s->pwriter);
    if (s->writer2) mst_chrome_writer_close(s->writer2);
    if (s->pwriter2) mst_pftrace_writer_close(s->pwriter2);
    mst_arena_release(&s->arena);
    free(s->path);
    free(s->path2);
    free(s);
}

void mst_perfetto_sink_on_frame(void *self, const uint8_t *payload, size_t len, uint64_t conn_id) {
    mst_perfetto_sink *s = self;
    s->received++;
    mst_pf_span span;
    char err[200] = "";
    mst_status st = mst_perfetto_packet_decode(payload, len, &s->arena, &span, err, sizeof err);
    if (st != MST_OK) {
        s->rejected++;
        if (mst_log_this_count(s->rejected))
            MST_WARN("rejected a %zu-byte packet from connection %llu: %s (%llu rejected so far)",
                     len, (unsigned long long)conn_id, err[0] ? err : mst_strerror(st),
                     (unsigned long long)s->rejected);
    } else if ((st = w_add(s, &span)) == MST_ERR_QUEUE_FULL) {
        s->full_drops++; /* counted by the writer as spans_dropped */
        if (mst_log_this_count(s->full_drops))
            MST_WARN("perfetto output: cannot buffer more unwritten output while writes fail; "
                     "span dropped (%llu dropped so far)",
                     (unsigned long long)s->full_drops);
    } else if (st != MST_OK) {
        s->add_errors++;
        if (mst_log_this_count(s->add_errors))
            MST_WARN("could not add a span to the Perfetto output: %s (%llu so far)",
                     mst_strerror(st), (unsigned long long)s->add_errors);
    } else {
        s->unflushed++;
    }
    mst_arena_reset_keep(&s->arena, ARENA_KEEP_BYTES);
}

static mst_status svc_open(void *self, char *err, size_t err_size) {
    mst_perfetto_sink *s = self;
    mst_status st = s->format == MST_PERFETTO_FORMAT_PROTO
                        ? mst_pftrace_writer_open(s->path, (int64_t)getpid(), &s->pwriter, err, err_size)
                        : mst_chrome_writer_open(s->path, (int64_t)getpid(), &s->writer, err, err_size);
    if (st != MST_OK || !s->path2) return st;
    /* The second output has the other format (checked when it was added). */
    return s->format == MST_PERFETTO_FORMAT_PROTO
               ? mst_chrome_writer_open(s->path2, (int64_t)getpid(), &s->writer2, err, err_size)
               : mst_pftrace_writer_open(s->path2, (int64_t)getpid(), &s->pwriter2, err, err_size);
}

/* Hand over after every batch: a batch is what one epoll_wait returned, so
 * under load it already holds many spans (one large write), and when
 * traffic is light the file is valid JSON right away. The write itself runs
 * on the writer's thread; if that thread is still busy with the previous
 * events, these stay buffered and the loop comes back in HANDOFF_RETRY_MS. */
static int svc_after_batch(void *self, uint64_t now_ms) {
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
    if (s->unflushed == 0) return -1;
    if (now_ms - s->last_counters_ms >= OWN_COUNTERS_EVERY_MS) {
        s->last_counters_ms = now_ms;
        add_own_counters(s);
    }
    if (w_handoff(s)) return HANDOFF_RETRY_MS;
    s->unflushed = 0;
    return open ? (int)MST_TL_SCAN_EVERY_MS : -1;
}

static void svc_get_counts(void *self, mst_daemon_counts *out) {
    mst_perfetto_sink *s = self;
    mst_chrome_stats cs = s->final_stats;
    w_stats(s, &cs);
    memset(out, 0, sizeof *out);
    out->received = s->received;
    out->written = cs.spans_written;
    out->rejected = s->rejected;
    /* Spans, not attempts or links: received = written + rejected + dropped
     * once the writer is closed (spans_dropped includes full_drops). */
    own_counts(s, &cs, &out->dropped);
    snprintf(out->dropped_why, sizeof out->dropped_why, "write_failed=%llu out_of_memory=%llu",
             (unsigned long long)cs.spans_dropped, (unsigned long long)s->add_errors);
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
