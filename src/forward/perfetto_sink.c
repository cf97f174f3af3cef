/*
 * perfetto_sink.c — glue between the frame server and the Chrome Trace
 * writer for `mstrace forward --perfetto-output` (see perfetto_sink.h).
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
#include <unistd.h>

#include "core/arena.h"
#include "core/log.h"
#include "forward/chrome_trace.h"
#include "wire/perfetto_packet.h"

/* While events wait for a busy writer thread, the loop wakes this often to
 * hand them over (so they are written soon even if no traffic follows). */
#define HANDOFF_RETRY_MS 2
/* Arena chunk kept between packets (a bigger one is freed after its packet). */
#define ARENA_KEEP_BYTES (64u * 1024u)

struct mst_perfetto_sink {
    char *path;
    mst_chrome_writer *writer;
    uint64_t received;
    uint64_t rejected;
    uint64_t add_errors;        /* decoded but the writer refused (OOM) */
    uint64_t full_drops;        /* decoded but dropped: writes failing, output at its cap */
    uint64_t unflushed;         /* spans added since the last hand-off */
    mst_chrome_stats final_stats; /* kept at close for the final stats line */
    mst_arena arena;
};

/* First few, then one line per 1000 (the line carries the count). */
static bool log_this(uint64_t count) { return count <= 5 || count % 1000 == 0; }

mst_status mst_perfetto_sink_create(const char *output_path, mst_perfetto_sink **out) {
    if (!output_path || !out) return MST_ERR_INVALID_ARG;
    mst_perfetto_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(output_path))) {
        free(s);
        return MST_ERR_NOMEM;
    }
    mst_arena_init(&s->arena);
    *out = s;
    return MST_OK;
}

void mst_perfetto_sink_destroy(mst_perfetto_sink *s) {
    if (!s) return;
    if (s->writer) mst_chrome_writer_close(s->writer);
    mst_arena_release(&s->arena);
    free(s->path);
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
        if (log_this(s->rejected))
            MST_WARN("rejected a %zu-byte packet from connection %llu: %s (%llu rejected so far)",
                     len, (unsigned long long)conn_id, err[0] ? err : mst_strerror(st),
                     (unsigned long long)s->rejected);
    } else if ((st = mst_chrome_writer_add_span(s->writer, &span)) == MST_ERR_QUEUE_FULL) {
        s->full_drops++; /* counted by the writer as spans_dropped */
        if (log_this(s->full_drops))
            MST_WARN("perfetto output: cannot buffer more unwritten output while writes fail; "
                     "span dropped (%llu dropped so far)",
                     (unsigned long long)s->full_drops);
    } else if (st != MST_OK) {
        s->add_errors++;
        if (log_this(s->add_errors))
            MST_WARN("could not add a span to the Chrome Trace output: %s (%llu so far)",
                     mst_strerror(st), (unsigned long long)s->add_errors);
    } else {
        s->unflushed++;
    }
    mst_arena_reset_keep(&s->arena, ARENA_KEEP_BYTES);
}

static mst_status svc_open(void *self, char *err, size_t err_size) {
    mst_perfetto_sink *s = self;
    return mst_chrome_writer_open(s->path, (int64_t)getpid(), &s->writer, err, err_size);
}

/* Hand over after every batch: a batch is what one epoll_wait returned, so
 * under load it already holds many spans (one large write), and when
 * traffic is light the file is valid JSON right away. The write itself runs
 * on the writer's thread; if that thread is still busy with the previous
 * events, these stay buffered and the loop comes back in HANDOFF_RETRY_MS. */
static int svc_after_batch(void *self, uint64_t now_ms) {
    mst_perfetto_sink *s = self;
    (void)now_ms;
    if (s->unflushed == 0) return -1;
    if (mst_chrome_writer_handoff(s->writer)) return HANDOFF_RETRY_MS;
    s->unflushed = 0;
    return -1;
}

static void svc_get_counts(void *self, mst_daemon_counts *out) {
    mst_perfetto_sink *s = self;
    mst_chrome_stats cs = s->final_stats;
    if (s->writer) mst_chrome_writer_get_stats(s->writer, &cs);
    memset(out, 0, sizeof *out);
    out->received = s->received;
    out->written = cs.spans_written;
    out->rejected = s->rejected;
    /* Spans, not attempts or links: received = written + rejected + dropped
     * once the writer is closed (spans_dropped includes full_drops). */
    out->dropped = cs.spans_dropped + s->add_errors;
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
    if (!s->writer) return MST_OK;
    /* The counters are taken after the close, which drops (and counts)
     * whatever still could not be written. */
    mst_status st = mst_chrome_writer_close_final(s->writer, &s->final_stats);
    s->writer = NULL;
    if (st != MST_OK) MST_ERROR("closing %s failed: %s", s->path, mst_strerror(st));
    return st;
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
