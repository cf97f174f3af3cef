/*
 * forward_client.c — owns the traced-process side of the Perfetto forwarder
 * link (docs/forwarder.md "Packets"): an mst_exporter that turns each span into one upstream
 * packet (perfetto_packet_encode.c) and sends it as a frame (4-byte
 * big-endian length + packet) over one persistent SOCK_STREAM connection to
 * the abstract socket "\0<name>" (default MSP_PERFETTO_SOCKET).
 *
 * Why it looks like this:
 *   - It runs only on the pipeline's exporter thread, so span producers never
 *     wait on it; still, that thread must not stall either, so the socket is
 *     non-blocking and one batch may wait for a full socket at most
 *     MST_FORWARD_SEND_BUDGET_MS (5 s) without progress, and a few budgets in
 *     all, before the rest of the batch is counted as failed.
 *   - Frames of a batch are gathered into one chunk buffer and written with
 *     as few send() calls as the kernel allows, into a socket whose send
 *     buffer is MST_FORWARD_SNDBUF_BYTES (4 MiB asked), so a burst of large
 *     spans goes to a busy forwarder in few wake-ups.
 *   - When the forwarder is absent or the connection breaks, spans are
 *     counted as failed (never queued up here). A connection that was up
 *     and broke (or that the client cut) is reconnected at the next batch;
 *     after a failed connect, a new one is tried at most every 5 s
 *     (upstream behaviour), so a forwarder that (re)appears is picked up.
 *     Unreachable / reachable-again are logged once per episode.
 *   - Loss is reported downstream (wire/loss_report.h): the first chunk of
 *     a batch starts with a loss report frame when this client failed spans
 *     or its tracer dropped some since the last report that went out whole,
 *     and a batch that lost spans tries one at once; the forwarder adds them
 *     to its output's forwarder.spans_dropped counter. Reports carry
 *     deltas, so a report that never arrives is included in the next one.
 *   - An optional client (the vLLM plugin's default: a Jaeger-only run never
 *     asked for Perfetto) that has not reached a forwarder yet in this
 *     process says so once at INFO and counts the spans as skipped, so such
 *     a run shows neither warnings nor "failed" counts for a sink nobody
 *     started. From the first connection on it behaves as a required one.
 *   - A frame cut in the middle (budget ran out mid-frame) would desync the
 *     stream, so such a connection is closed; the forwarder drops the
 *     partial frame at EOF.
 *   - Cancel (tracer shutdown out of its time, mst_exporter_ops.cancel): a
 *     flag set from the shutdown thread. Every wait for the socket is cut into
 *     slices of CANCEL_SLICE_MS that check it, so the send in flight stops
 *     within a slice even when the forwarder is alive but not reading
 *     (stopped, stalled, its buffer full); the frames that went out whole
 *     count as exported, the rest of the batch as failed, and every later
 *     batch fails at once. Exactly: exported + failed (+ skipped) = spans
 *     handed to export_batch.
 *   - Request id lists as changes (docs/forwarder.md "Request id lists as
 *     changes"): a forwarder that can rebuild them says so in a line it
 *     writes on accept (MST_PERFETTO_HELLO), read here before each batch.
 *     Only after that line, on that connection, does a span's request.ids
 *     go as a change to its stream's previous list (wire/ids_sender.h
 *     decides); an older forwarder writes nothing, so it only ever gets
 *     whole lists. A new connection, a frame that did not go out whole or
 *     could not be encoded make every stream send its next list whole.
 *   - In a fork()ed child the inherited fd is only close()d (shutdown() would
 *     also end the parent's connection).
 *   - Resource: the tracer's, read through the spans of each batch
 *     (mst_span_resource); the client builds none of its own.
 */
#include "export/forward_client.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/resource.h"
#include "core/tracer.h"
#include "wire/buf.h"
#include "wire/frame.h"
#include "wire/ids_sender.h"
#include "wire/loss_report.h"
#include "wire/perfetto_packet.h"

#define FRAME_HEADER_BYTES 4u
/* A wait for the socket checks the cancel flag this often. */
#define CANCEL_SLICE_MS 20u
/* The forwarder's capability line is read up to this many bytes. */
#define HELLO_MAX 64u

typedef struct fwd_exporter {
    mst_exporter base;              /* first: the pipeline sees only this   */
    struct sockaddr_un addr;        /* sun_path = "\0<name>"                */
    socklen_t addr_len;
    char name[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* for logs    */
    int fd;                         /* -1 while not connected               */
    bool attempted;                 /* a connect was tried at least once    */
    uint64_t last_attempt_ms;       /* CLOCK_MONOTONIC of that attempt      */
    uint32_t retry_interval_ms;
    uint32_t send_budget_ms;
    bool unreachable;               /* logged as unreachable, not yet back  */
    bool optional;                  /* see mst_forward_exporter_set_optional */
    bool ever_connected;            /* a connect succeeded in this process  */
    bool slow_logged;               /* logged a send-budget overrun         */
    /* A connection that was up broke (or was cut): the next batch connects
     * at once, whatever the retry interval says. */
    bool reconnect_now;
    /* Loss already reported to a forwarder (loss_report.h): the client's
     * spans_failed and its tracer's dropped spans as of the last report
     * that went out whole. */
    uint64_t reported_failed, reported_dropped;
    bool cancel_logged;             /* logged the cancel of a send          */
    /* Set by fwd_cancel (another thread), read by the exporter thread. */
    atomic_bool cancelled;
    /* The forwarder's capability line as read so far on this connection,
     * and whether it said it takes request id changes. */
    char hello[HELLO_MAX];
    size_t hello_len;
    bool hello_done;
    bool ids_ok;
    mst_ids_sender *ids;            /* each stream's last list sent          */
    mst_buf chunk;                  /* frames of the batch being sent       */
    size_t *frame_ends;             /* end offset of each frame in chunk    */
    size_t frame_cap;
    /* Read by get_stats from any thread, written by the exporter thread. */
    mst_exporter_counters counters;
} fwd_exporter;

static const mst_exporter_ops k_forward_ops;

/* ------------------------------------------------------------ helpers */

static fwd_exporter *as_fwd(mst_exporter *exp) {
    return exp && exp->ops == &k_forward_ops ? (fwd_exporter *)exp : NULL;
}

static bool is_cancelled(const fwd_exporter *x) {
    return atomic_load_explicit(&x->cancelled, memory_order_acquire);
}

/* poll() on the socket for at most `ms`, in slices that check the cancel
 * flag; returns poll's result, or 0 when cancelled. */
static int poll_cancellable(fwd_exporter *x, short events, uint64_t ms) {
    uint64_t end = mst_clock_monotonic_ms() + ms;
    for (;;) {
        if (is_cancelled(x)) return 0;
        uint64_t now = mst_clock_monotonic_ms();
        if (now >= end) return 0;
        uint64_t slice = end - now < CANCEL_SLICE_MS ? end - now : CANCEL_SLICE_MS;
        struct pollfd p = {.fd = x->fd, .events = events};
        int r = poll(&p, 1, (int)slice);
        if (r < 0 && errno == EINTR) continue;
        if (r != 0) return r;
    }
}

/* Closing a connection that was up allows one reconnect right away: the
 * retry interval spaces out attempts at a forwarder that is not there, not
 * the one reconnect after a break (which, within the interval after the
 * last connect, would otherwise lose every batch until it passed). */
static void close_fd(fwd_exporter *x) {
    if (x->fd >= 0) {
        close(x->fd);
        x->reconnect_now = true;
    }
    x->fd = -1;
    x->hello_len = 0;
    x->hello_done = x->ids_ok = false;
    if (x->ids) mst_ids_sender_reset(x->ids);
}

/* Whether the line names `feature` among its space-separated words. */
static bool line_has_word(const char *line, size_t n, const char *feature) {
    size_t fn = strlen(feature);
    for (size_t i = 0; i + fn <= n; i++)
        if ((i == 0 || line[i - 1] == ' ') && memcmp(line + i, feature, fn) == 0 &&
            (i + fn == n || line[i + fn] == ' '))
            return true;
    return false;
}

/* Bytes from the forwarder: its capability line first ("MSPF_HELLO_V1"
 * and the features it takes, ending in a newline), then nothing; anything
 * else is ignored. */
static void take_hello(fwd_exporter *x, const char *p, size_t n) {
    for (size_t i = 0; i < n && !x->hello_done; i++) {
        if (p[i] == '\n' || x->hello_len == HELLO_MAX) {
            x->hello_done = true;
            x->ids_ok = p[i] == '\n' && x->hello_len >= 14 && memcmp(x->hello, "MSPF_HELLO_V1 ", 14) == 0 &&
                        x->ids && line_has_word(x->hello, x->hello_len, "ids-change");
            if (x->ids_ok) MST_DEBUG("perfetto forwarder @%s takes request.ids changes", x->name);
        } else {
            x->hello[x->hello_len++] = p[i];
        }
    }
}

/* An optional client before its first connection: absence is no failure. */
static bool not_there_yet(const fwd_exporter *x) { return x->optional && !x->ever_connected; }

/* The first failure of an episode is logged; later ones stay quiet until a
 * connect succeeds again. err 0 = the peer closed the stream. */
static void mark_unreachable(fwd_exporter *x, const char *what, int err) {
    close_fd(x);
    if (x->unreachable) return;
    x->unreachable = true;
    if (not_there_yet(x)) {
        MST_INFO("no Perfetto forwarder listens on @%s; hook spans go to the other exporters only "
                 "(start `mstrace forward --perfetto-output FILE` for a Perfetto timeline, picked up "
                 "within %u s; MSTRACE_PERFETTO=off turns this client off)",
                 x->name, (x->retry_interval_ms + 999) / 1000);
        return;
    }
    MST_WARN("perfetto forwarder @%s %s (%s); its spans are counted as failed, "
             "retrying every %u ms", x->name, what, err ? strerror(err) : "end of stream",
             x->retry_interval_ms);
}

static void mark_connected(fwd_exporter *x) {
    if (x->unreachable && not_there_yet(x)) MST_INFO("perfetto forwarder @%s found: hook spans go to it too", x->name);
    else if (x->unreachable) MST_INFO("perfetto forwarder @%s reachable again", x->name);
    else MST_DEBUG("connected to perfetto forwarder @%s", x->name);
    x->unreachable = false;
    x->ever_connected = true;
}

/* An idle connection whose peer went away shows up as readable (EOF) or
 * HUP; the forwarder sends nothing but its capability line (take_hello),
 * so other readiness means trouble or stray bytes (drained). Checked
 * before each batch so a restarted forwarder costs no batch when a
 * reconnect is allowed right away. */
static bool connection_alive(fwd_exporter *x) {
    struct pollfd p = {.fd = x->fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLERR | POLLNVAL)) return false;
    char sink[256];
    ssize_t r = recv(x->fd, sink, sizeof sink, MSG_DONTWAIT);
    if (r == 0) return false;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    take_hello(x, sink, (size_t)r);
    return !(p.revents & POLLHUP);
}

/* A Unix stream connect normally completes or fails at once; EINPROGRESS
 * gets the send budget to finish. (EAGAIN, a full listen backlog, is a
 * failure: nothing is in progress; the next attempt comes after the retry
 * interval.) */
static bool finish_connect(fwd_exporter *x) {
    int r = poll_cancellable(x, POLLOUT, x->send_budget_ms);
    if (r <= 0) {
        errno = r == 0 ? (is_cancelled(x) ? ECANCELED : ETIMEDOUT) : errno;
        return false;
    }
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) return false;
    if (soerr) {
        errno = soerr;
        return false;
    }
    return true;
}

static bool try_connect(fwd_exporter *x) {
    x->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (x->fd < 0) {
        mark_unreachable(x, "cannot create a socket", errno);
        return false;
    }
    int sndbuf = (int)MST_FORWARD_SNDBUF_BYTES;
    if (setsockopt(x->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) != 0)
        MST_DEBUG("perfetto forwarder client: SO_SNDBUF %d not set: %s", sndbuf, strerror(errno));
    int r = connect(x->fd, (const struct sockaddr *)&x->addr, x->addr_len);
    if (r < 0 && (errno == EINPROGRESS || errno == EINTR)) r = finish_connect(x) ? 0 : -1;
    if (r < 0) {
        mark_unreachable(x, "is not reachable", errno);
        x->reconnect_now = false; /* never connected: the retry interval applies */
        return false;
    }
    mark_connected(x);
    return true;
}

/* True when a connection is open; connects when none is and the retry
 * interval since the last attempt has passed. */
static bool ensure_connected(fwd_exporter *x) {
    if (x->fd >= 0) {
        if (connection_alive(x)) return true;
        mark_unreachable(x, "closed the connection", 0);
    }
    uint64_t now = mst_clock_monotonic_ms();
    bool now_allowed = x->reconnect_now;
    x->reconnect_now = false;
    if (x->attempted && !now_allowed && now - x->last_attempt_ms < x->retry_interval_ms) return false;
    if (x->attempted && !not_there_yet(x)) mst_counter_add(&x->counters.retries, 1);
    x->attempted = true;
    x->last_attempt_ms = now;
    return try_connect(x);
}

/* Writes len bytes with non-blocking sends. It waits for POLLOUT at most
 * send_budget_ms without progress (each successful send restarts that
 * budget) and never past hard_deadline_ms; a cancel stops it within a
 * CANCEL_SLICE_MS slice (MST_ERR_CLOSED). *written tells how far it got. */
static mst_status send_all(fwd_exporter *x, const uint8_t *data, size_t len,
                           uint64_t hard_deadline_ms, size_t *written) {
    size_t off = 0;
    mst_status st = MST_OK;
    uint64_t deadline_ms = mst_clock_monotonic_ms() + x->send_budget_ms;
    if (deadline_ms > hard_deadline_ms) deadline_ms = hard_deadline_ms;
    while (off < len) {
        if (is_cancelled(x)) {
            st = MST_ERR_CLOSED;
            break;
        }
        ssize_t r = send(x->fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
            off += (size_t)r;
            deadline_ms = mst_clock_monotonic_ms() + x->send_budget_ms;
            if (deadline_ms > hard_deadline_ms) deadline_ms = hard_deadline_ms;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            uint64_t now = mst_clock_monotonic_ms();
            if (now >= deadline_ms) {
                st = MST_ERR_TIMEOUT;
                break;
            }
            poll_cancellable(x, POLLOUT, deadline_ms - now);
            continue; /* HUP/ERR surface as a send error next round, a cancel at the top */
        }
        mark_unreachable(x, "closed the connection", r < 0 ? errno : EPIPE);
        st = MST_ERR_UNAVAILABLE;
        break;
    }
    *written = off;
    return st;
}

static bool reserve_frames(fwd_exporter *x, size_t n) {
    if (n <= x->frame_cap) return true;
    size_t *p = realloc(x->frame_ends, n * sizeof *p);
    if (!p) return false;
    x->frame_ends = p;
    x->frame_cap = n;
    return true;
}

/* How span s's request.ids goes out (ids_sender.h): NULL when the
 * forwarder takes no changes or the span has no list. */
static const mst_ids_send *ids_decision(fwd_exporter *x, const mst_span *s, mst_ids_send *out) {
    if (!x->ids_ok) return NULL;
    const mst_attr *list = NULL;
    int64_t tid = 0;
    for (uint32_t i = 0; i < s->n_attrs; i++) {
        const mst_attr *a = &s->attrs[i];
        if (!list && a->type == MST_ATTR_STRING_LIST && a->key.len == 11 && memcmp(a->key.ptr, "request.ids", 11) == 0)
            list = a;
        else if (a->type == MST_ATTR_INT && a->key.len == 9 && memcmp(a->key.ptr, "thread.id", 9) == 0)
            tid = a->v.i;
    }
    if (!list) return NULL;
    mst_ids_sender_next(x->ids, s->name.ptr ? s->name.ptr : "", s->name.len, tid, list->v.list.items,
                        list->v.list.count, out);
    return out;
}

/* Appends one frame for span s to the chunk. False (chunk unchanged) when
 * it cannot be encoded or exceeds the frame limit. */
static bool append_frame(fwd_exporter *x, const mst_span *s, const mst_resource *res) {
    mst_buf *b = &x->chunk;
    size_t start = b->len;
    static const uint8_t placeholder[FRAME_HEADER_BYTES];
    mst_buf_append(b, placeholder, FRAME_HEADER_BYTES);
    mst_ids_send how;
    mst_perfetto_packet_encode_ids(s, res, ids_decision(x, s, &how), b);
    size_t payload = b->len - start - FRAME_HEADER_BYTES;
    if (b->failed || payload > MST_FRAME_MAX_BYTES) {
        b->len = start;
        b->failed = false;
        if (x->ids) mst_ids_sender_reset(x->ids); /* the forwarder never sees this list */
        return false;
    }
    uint8_t *h = b->data + start;
    h[0] = (uint8_t)(payload >> 24);
    h[1] = (uint8_t)(payload >> 16);
    h[2] = (uint8_t)(payload >> 8);
    h[3] = (uint8_t)payload;
    return true;
}

/* The loss not yet reported (loss_report.h): this client's failed spans
 * and its tracer's dropped ones since the last report that went out whole.
 * False when there is none. */
static bool unreported_loss(fwd_exporter *x, const mst_span *any, mst_loss_report *r) {
    mst_exporter_stats st;
    mst_exporter_counters_read(&x->counters, &st);
    uint64_t dropped = mst_span_tracer_dropped(any);
    r->spans_failed = st.spans_failed - x->reported_failed;
    r->spans_dropped = dropped >= x->reported_dropped ? dropped - x->reported_dropped : 0;
    return r->spans_failed || r->spans_dropped;
}

/* Appends a loss report frame to the chunk (it goes before the spans). */
static void append_report(fwd_exporter *x, const mst_loss_report *r) {
    uint8_t frame[FRAME_HEADER_BYTES + MST_LOSS_REPORT_BYTES] = {0, 0, 0, MST_LOSS_REPORT_BYTES};
    mst_loss_report_encode(r, frame + FRAME_HEADER_BYTES);
    mst_buf_append(&x->chunk, frame, sizeof frame);
}

static void note_reported(fwd_exporter *x, const mst_loss_report *r) {
    x->reported_failed += r->spans_failed;
    x->reported_dropped += r->spans_dropped;
}

/* Frames whose last byte went out count as exported, the others failed
 * (returned). The chunk's first `base` bytes are a loss report (0: none).
 * A frame cut in the middle leaves the stream unusable: close it. */
static size_t settle_chunk(fwd_exporter *x, size_t base, size_t nframes, size_t written) {
    size_t done = 0;
    while (done < nframes && x->frame_ends[done] <= written) done++;
    mst_counter_add(&x->counters.spans_exported, done);
    mst_counter_add(&x->counters.spans_failed, nframes - done);
    if (done < nframes && x->ids) mst_ids_sender_reset(x->ids); /* its lists did not all arrive */
    size_t prev_end = done ? x->frame_ends[done - 1] : base;
    bool cut = (written > 0 && written < base) || (done < nframes && written > prev_end);
    if (cut) close_fd(x);
    return nframes - done;
}

/* After a batch that lost spans, while the connection is still up (the
 * budget ran out between two frames): one non-blocking try to tell the
 * forwarder now rather than with the next batch, which may never come (the
 * process exits). A report the socket cannot take whole goes with the next
 * batch; one cut in the middle is finished within the send budget. */
static void report_now(fwd_exporter *x, const mst_span *any) {
    mst_loss_report r;
    if (x->fd < 0 || is_cancelled(x) || !unreported_loss(x, any, &r)) return;
    mst_buf_reset(&x->chunk);
    append_report(x, &r);
    if (x->chunk.failed) return;
    ssize_t n = send(x->fd, x->chunk.data, x->chunk.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    size_t written = n > 0 ? (size_t)n : 0;
    if (written > 0 && written < x->chunk.len) {
        size_t more = 0;
        uint64_t deadline = mst_clock_monotonic_ms() + x->send_budget_ms;
        send_all(x, x->chunk.data + written, x->chunk.len - written, deadline, &more);
        written += more;
        if (written < x->chunk.len) close_fd(x);
    }
    if (written == x->chunk.len) note_reported(x, &r);
}

/* A batch that reaches no forwarder: skipped while an optional client has
 * never connected, failed otherwise. */
static void count_undelivered(fwd_exporter *x, size_t n) {
    if (not_there_yet(x))
        mst_counter_add(&x->counters.spans_skipped, n);
    else
        mst_exporter_counters_batch_failed(&x->counters, n);
}

/* -------------------------------------------------------------- ops */

static mst_status fwd_export_batch(mst_exporter *self, const mst_span *const *spans, size_t n) {
    fwd_exporter *x = (fwd_exporter *)self;
    if (n == 0) return MST_OK;
    if (is_cancelled(x)) { /* shut down: not even a connect attempt */
        count_undelivered(x, n);
        return MST_ERR_CLOSED;
    }
    if (!ensure_connected(x)) {
        count_undelivered(x, n);
        /* Delivered nowhere by this sink, either way. */
        return is_cancelled(x) ? MST_ERR_CLOSED : MST_ERR_UNAVAILABLE;
    }
    if (!reserve_frames(x, n)) {
        mst_exporter_counters_batch_failed(&x->counters, n);
        return MST_ERR_NOMEM;
    }
    uint64_t deadline = mst_clock_monotonic_ms() + (uint64_t)x->send_budget_ms * MST_FORWARD_BATCH_LIMIT_FACTOR;
    mst_status result = MST_OK;
    /* The tracer's resource, through the spans (one tracer per batch). */
    const mst_resource *res = mst_span_resource(spans[0]);
    size_t i = 0;
    /* Loss since the last report goes first, in the first chunk. */
    mst_loss_report loss;
    bool report = unreported_loss(x, spans[0], &loss);
    while (i < n) {
        mst_buf_reset(&x->chunk);
        size_t nframes = 0, bad = 0, base = 0;
        if (report) append_report(x, &loss);
        if (report && !x->chunk.failed) base = x->chunk.len;
        else mst_buf_reset(&x->chunk);
        for (; i < n && x->chunk.len < MST_FORWARD_CHUNK_BYTES; i++) {
            if (append_frame(x, spans[i], res)) x->frame_ends[nframes++] = x->chunk.len;
            else bad++;
        }
        if (bad) {
            mst_counter_add(&x->counters.spans_failed, bad);
            result = MST_ERR_TOO_LARGE;
            MST_DEBUG("perfetto forwarder client: %zu span(s) could not be encoded", bad);
        }
        if (nframes == 0 && base == 0) continue;
        size_t written = 0;
        mst_status st = send_all(x, x->chunk.data, x->chunk.len, deadline, &written);
        size_t unsent = settle_chunk(x, base, nframes, written);
        if (base && written >= base) note_reported(x, &loss);
        report = false;
        if (st != MST_OK) {
            mst_counter_add(&x->counters.spans_failed, n - i);
            if (st == MST_ERR_CLOSED && !x->cancel_logged) {
                x->cancel_logged = true;
                MST_WARN("perfetto forwarder @%s: tracer shutdown cancelled the send in flight (the forwarder "
                         "was not reading fast enough); %zu span(s) of the batch counted as failed",
                         x->name, unsent + (n - i));
            }
            if (st == MST_ERR_TIMEOUT && !x->slow_logged) {
                x->slow_logged = true;
                MST_WARN("perfetto forwarder @%s is not reading fast enough (no progress for %u ms, "
                         "or a batch over %u ms); the rest of the batch is counted as failed",
                         x->name, x->send_budget_ms, x->send_budget_ms * MST_FORWARD_BATCH_LIMIT_FACTOR);
            }
            result = st;
            break;
        }
    }
    if (result == MST_OK) x->slow_logged = false;
    mst_counter_add(result == MST_OK ? &x->counters.batches_ok : &x->counters.batches_failed, 1);
    if (result != MST_OK) report_now(x, spans[0]);
    return result;
}

/* Nothing is buffered between batches. */
static mst_status fwd_flush(mst_exporter *self, uint32_t timeout_ms) { return MST_OK; }

/* Tracer shutdown out of time (any thread): the send in flight stops within
 * CANCEL_SLICE_MS, later batches fail at once; the counting is done by the
 * exporter thread as the send returns. */
static void fwd_cancel(mst_exporter *self) {
    fwd_exporter *x = as_fwd(self);
    if (x) atomic_store_explicit(&x->cancelled, true, memory_order_release);
}

static void fwd_after_fork_child(mst_exporter *self) {
    fwd_exporter *x = (fwd_exporter *)self;
    close_fd(x); /* close only: the parent keeps using the same connection (its streams reset too) */
    x->attempted = false;
    x->unreachable = false;
    x->ever_connected = false; /* per process: the child has not connected */
    x->slow_logged = false;
    x->cancel_logged = false;
    x->reconnect_now = false;
    x->reported_failed = x->reported_dropped = 0; /* the counters restart below */
    atomic_store(&x->cancelled, false); /* a shutdown in the parent is not the child's */
    mst_buf_reset(&x->chunk);
    mst_exporter_counters_reset(&x->counters);
}

static void fwd_get_stats(mst_exporter *self, mst_exporter_stats *out) {
    fwd_exporter *x = (fwd_exporter *)self;
    mst_exporter_counters_read(&x->counters, out);
}

static void fwd_destroy(mst_exporter *self) {
    fwd_exporter *x = (fwd_exporter *)self;
    if (!x) return;
    close_fd(x);
    mst_ids_sender_free(x->ids);
    mst_buf_free(&x->chunk);
    free(x->frame_ends);
    free(x);
}

static const mst_exporter_ops k_forward_ops = {
    .name = "perfetto-forward",
    .export_batch = fwd_export_batch,
    .flush = fwd_flush,
    .after_fork_child = fwd_after_fork_child,
    .get_stats = fwd_get_stats,
    .destroy = fwd_destroy,
    .cancel = fwd_cancel,
};

/* ------------------------------------------------------------ public */

mst_status mst_forward_exporter_create(const char *socket_name, mst_exporter **out) {
    if (!out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    const char *name = socket_name && *socket_name ? socket_name : MST_PERFETTO_SOCKET_NAME;
    size_t len = strlen(name);
    fwd_exporter *x;
    if (len + 1 > sizeof x->addr.sun_path) {
        MST_ERROR("perfetto forwarder socket name is %zu bytes; at most %zu fit an abstract "
                  "socket address", len, sizeof x->addr.sun_path - 1);
        return MST_ERR_INVALID_ARG;
    }
    x = calloc(1, sizeof *x);
    if (!x) return MST_ERR_NOMEM;
    x->base.ops = &k_forward_ops;
    x->fd = -1;
    atomic_init(&x->cancelled, false);
    x->retry_interval_ms = MST_FORWARD_RETRY_INTERVAL_MS;
    x->send_budget_ms = MST_FORWARD_SEND_BUDGET_MS;
    x->addr.sun_family = AF_UNIX;
    memcpy(x->addr.sun_path + 1, name, len); /* sun_path[0] = '\0': abstract */
    x->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    memcpy(x->name, name, len + 1);
    mst_buf_init(&x->chunk, 0);
    /* Without it (out of memory) every list simply goes whole. */
    x->ids = mst_ids_sender_new();
    *out = &x->base;
    return MST_OK;
}

void mst_forward_exporter_set_optional(mst_exporter *exp, bool optional) {
    fwd_exporter *x = as_fwd(exp);
    if (x) x->optional = optional;
}

void mst_forward_exporter_set_retry_interval_ms(mst_exporter *exp, uint32_t ms) {
    fwd_exporter *x = as_fwd(exp);
    if (x) x->retry_interval_ms = ms;
}

void mst_forward_exporter_set_send_budget_ms(mst_exporter *exp, uint32_t ms) {
    fwd_exporter *x = as_fwd(exp);
    if (x) x->send_budget_ms = ms;
}

bool mst_forward_exporter_wait_changes(mst_exporter *exp, uint32_t timeout_ms) {
    fwd_exporter *x = as_fwd(exp);
    if (!x) return false;
    uint64_t end = mst_clock_monotonic_ms() + timeout_ms;
    while (x->fd >= 0 && !x->hello_done && mst_clock_monotonic_ms() < end) {
        if (poll_cancellable(x, POLLIN, end - mst_clock_monotonic_ms()) <= 0) break;
        if (!connection_alive(x)) close_fd(x);
    }
    return x->ids_ok;
}

void mst_forward_exporter_drop_connection(mst_exporter *exp) {
    fwd_exporter *x = as_fwd(exp);
    if (x) close_fd(x);
}

bool mst_forward_exporter_is_connected(const mst_exporter *exp) {
    fwd_exporter *x = as_fwd((mst_exporter *)exp);
    return x && x->fd >= 0;
}
