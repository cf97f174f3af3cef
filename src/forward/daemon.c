/*
 * daemon.c — the `mstrace forward` run loop (see daemon.h).
 *
 * Why a signalfd: SIGINT/SIGTERM become ordinary readable events in the same
 * epoll set as the sockets, so stopping never races a half-handled frame and
 * no async-signal-safety rules leak into the rest of the daemon. SIGPIPE is
 * ignored: a write error is reported by write(), never by killing us.
 */
#include "forward/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

#define DEFAULT_STATS_INTERVAL_MS 5000u

typedef struct loop_state {
    bool stop;
    bool stats_requested;  /* SIGUSR1: print a stats line now */
    bool demand_requested; /* SIGUSR2: the service's snapshot on demand */
    int signo;
} loop_state;

uint64_t mst_daemon_now_ms(void) { return mst_clock_monotonic_ms(); }

static void on_signal_fd(void *ctx, int fd) {
    loop_state *ls = ctx;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGUSR1) {
            ls->stats_requested = true;
            continue;
        }
        if (si.ssi_signo == SIGUSR2) {
            ls->demand_requested = true;
            continue;
        }
        ls->stop = true;
        ls->signo = (int)si.ssi_signo;
    }
}

/* Blocks SIGINT/SIGTERM/SIGUSR1/SIGUSR2 (they are read from the returned
 * signalfd) and ignores SIGPIPE. Returns -1 on failure. */
static int setup_signals(sigset_t *old_mask) {
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    if (sigprocmask(SIG_BLOCK, &mask, old_mask) != 0) return -1;
    return signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* One stats line: at debug level (periodic, final), or at info level when
 * asked for with SIGUSR1 ("requested"). */
static void log_stats(const mst_daemon_service *svc, mst_frame_server *srv, const char *when) {
    mst_log_level level = strcmp(when, "requested") == 0 ? MST_LOG_INFO : MST_LOG_DEBUG;
    if (!mst_log_enabled(level)) return;
    mst_daemon_counts c;
    svc->get_counts(svc->self, &c);
    mst_frame_server_stats fs;
    mst_frame_server_get_stats(srv, &fs);
    mst_log(level, "stats (%s): received=%llu written=%llu rejected=%llu dropped=%llu "
              "connections: active=%llu accepted=%llu refused=%llu closed=%llu mid_frame=%llu "
              "frames: oversize=%llu truncated=%llu stalled=%llu memory_closed=%llu "
              "partial_bytes=%llu partial_peak=%llu bytes_in=%llu bytes_discarded=%llu "
              "read_errors=%llu accept_errors=%llu shed=%llu upstream_failed=%llu "
              "upstream_dropped=%llu %s",
              when, (unsigned long long)c.received, (unsigned long long)c.written,
              (unsigned long long)c.rejected, (unsigned long long)c.dropped,
              (unsigned long long)fs.conns_active, (unsigned long long)fs.conns_accepted,
              (unsigned long long)fs.conns_refused, (unsigned long long)fs.conns_closed,
              (unsigned long long)fs.conns_mid_frame, (unsigned long long)fs.frames_oversize, (unsigned long long)fs.frames_truncated,
              (unsigned long long)fs.stalled_closed, (unsigned long long)fs.memory_closed,
              (unsigned long long)fs.partial_bytes, (unsigned long long)fs.partial_peak,
              (unsigned long long)fs.bytes_received, (unsigned long long)fs.bytes_discarded,
              (unsigned long long)fs.read_errors, (unsigned long long)fs.accept_errors,
              (unsigned long long)fs.conns_shed, (unsigned long long)c.upstream_failed,
              (unsigned long long)c.upstream_dropped, c.extra);
}

/* After the stop: every payload read is written, rejected or dropped (the
 * drops by reason), and what reached the socket but never became a payload
 * is counted by the frame server. A mismatch is a bug in the counters,
 * reported as an error. */
static bool check_accounting(const mst_daemon_service *svc, mst_frame_server *srv) {
    mst_daemon_counts c;
    svc->get_counts(svc->self, &c);
    mst_frame_server_stats fs;
    mst_frame_server_get_stats(srv, &fs);
    if (c.upstream_failed || c.upstream_dropped)
        MST_WARN("%s: the traced processes reported %llu span(s) lost before they reached this "
                 "forwarder: failed=%llu (their sends did not get through) dropped=%llu (their "
                 "tracer queue was full); the output counts them in forwarder.spans_dropped",
                 svc->name, (unsigned long long)(c.upstream_failed + c.upstream_dropped),
                 (unsigned long long)c.upstream_failed, (unsigned long long)c.upstream_dropped);
    if (c.identity[0]) {
        if (c.identity_ok) {
            MST_INFO("%s accounting: %s", svc->name, c.identity);
        } else {
            MST_ERROR("%s accounting does not add up: %s", svc->name, c.identity);
            return false;
        }
    }
    if (c.received == c.written + c.rejected + c.dropped) {
        MST_INFO("%s accounting: received=%llu = written=%llu + rejected=%llu + dropped=%llu "
                 "(%s); not payloads: truncated=%llu stalled=%llu memory_closed=%llu "
                 "oversize=%llu refused_connections=%llu",
                 svc->name, (unsigned long long)c.received, (unsigned long long)c.written,
                 (unsigned long long)c.rejected, (unsigned long long)c.dropped,
                 c.dropped_why[0] ? c.dropped_why : "-",
                 (unsigned long long)fs.frames_truncated, (unsigned long long)fs.stalled_closed,
                 (unsigned long long)fs.memory_closed, (unsigned long long)fs.frames_oversize,
                 (unsigned long long)fs.conns_refused);
        return true;
    }
    MST_ERROR("%s accounting does not add up: received=%llu, written=%llu + rejected=%llu + "
              "dropped=%llu = %llu",
              svc->name, (unsigned long long)c.received, (unsigned long long)c.written,
              (unsigned long long)c.rejected, (unsigned long long)c.dropped,
              (unsigned long long)(c.written + c.rejected + c.dropped));
    return false;
}

/* The smaller of two epoll timeouts where -1 means "none". */
static int min_timeout(int a, int b) {
    if (a < 0) return b;
    if (b < 0) return a;
    return a < b ? a : b;
}

static const char *signal_name(int signo) {
    switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
    }
}

/* Serves until a stop signal; returns false on a fatal loop error. */
static bool serve(const mst_daemon_options *opts, const mst_daemon_service *svc,
                  mst_frame_server *srv, loop_state *ls) {
    uint32_t interval = opts->stats_interval_ms ? opts->stats_interval_ms
                                                : DEFAULT_STATS_INTERVAL_MS;
    uint64_t next_stats = mst_daemon_now_ms() + interval;
    int svc_timeout = -1;
    while (!ls->stop) {
        uint64_t now = mst_daemon_now_ms();
        int timeout = svc_timeout;
        if (mst_log_enabled(MST_LOG_DEBUG))
            timeout = min_timeout(timeout, next_stats > now ? (int)(next_stats - now) : 0);
        if (mst_frame_server_poll(srv, timeout) < 0) return false;
        now = mst_daemon_now_ms();
        svc_timeout = svc->after_batch(svc->self, now);
        if (now >= next_stats) {
            log_stats(svc, srv, "periodic");
            next_stats = now + interval;
        }
        if (ls->demand_requested) {
            ls->demand_requested = false;
            if (svc->on_demand) {
                MST_INFO("Received SIGUSR2: dump on demand");
                svc->on_demand(svc->self);
            } else {
                MST_INFO("Received SIGUSR2: this mode has nothing to dump; ignored");
            }
        }
        if (ls->stats_requested) {
            ls->stats_requested = false;
            log_stats(svc, srv, "requested");
        }
    }
    return true;
}

int mst_daemon_run(const mst_daemon_options *opts, const mst_daemon_service *svc) {
    char err[512] = "";
    sigset_t old_mask;
    int sfd = setup_signals(&old_mask);
    if (sfd < 0) {
        MST_ERROR("Start %s failed: cannot set up signal handling: %s", svc->name,
                  strerror(errno));
        return 1;
    }
    loop_state ls = {0};
    mst_frame_server_options so = {.socket_name = opts->socket_name,
                                   .on_frame = svc->on_frame,
                                   .on_close = svc->on_close,
                                   .hello = svc->hello,
                                   .hello_len = svc->hello_len,
                                   .ctx = svc->self,
                                   .max_partial_bytes = opts->max_partial_bytes,
                                   .stall_timeout_ms = opts->stall_timeout_ms,
                                   .bind_only = true};
    mst_frame_server *srv = NULL;
    /* Bind (claims the name; connects are refused), open the output, and
     * only then listen: "the socket accepts" means "ready to write". */
    mst_status st = mst_frame_server_create(&so, &srv, err, sizeof err);
    if (st == MST_OK && (st = svc->open(svc->self, err, sizeof err)) != MST_OK) {
        mst_frame_server_destroy(srv);
        srv = NULL;
    }
    if (st == MST_OK) st = mst_frame_server_listen(srv, err, sizeof err);
    if (st == MST_OK && mst_frame_server_watch_fd(srv, sfd, on_signal_fd, &ls) != MST_OK) {
        snprintf(err, sizeof err, "cannot watch the signal fd");
        st = MST_ERR_IO;
    }
    if (st != MST_OK) {
        MST_ERROR("Start %s failed: %s", svc->name, err[0] ? err : mst_strerror(st));
        mst_frame_server_destroy(srv);
        svc->close(svc->self);
        close(sfd);
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        return 1;
    }
    MST_INFO("Start %s success, listening on @%s, running...", svc->name, opts->socket_name);

    bool ok = serve(opts, svc, srv, &ls);
    if (ls.stop) MST_INFO("Received %s, stopping...", signal_name(ls.signo));

    /* Stop sequence: no new peers (the queued ones are taken), cut and read
     * every connection to its end, then close the output; the counters are
     * read after the close, which does the last drops. */
    mst_frame_server_stop_accepting(srv);
    mst_frame_server_drain_and_close_all(srv);
    svc->after_batch(svc->self, mst_daemon_now_ms());
    mst_status cst = svc->close(svc->self);
    log_stats(svc, srv, "final");
    bool counts_ok = check_accounting(svc, srv);
    mst_frame_server_destroy(srv);
    close(sfd);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    if (!ok || cst != MST_OK || !counts_ok) {
        MST_ERROR("Stop %s with errors.", svc->name);
        return 1;
    }
    MST_INFO("Stop %s success.", svc->name);
    return 0;
}
