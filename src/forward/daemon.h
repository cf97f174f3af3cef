/*
 * daemon.h — the `mstrace forward` run loop, independent of what is done
 * with the payloads.
 *
 * Why a service vtable: the daemon has two modes that share everything but
 * the sink — the Perfetto sink (docs/forwarder.md, perfetto_sink.h) and the OTLP relay
 * (docs/relay.md, added separately). A mode fills an mst_daemon_service and calls
 * mst_daemon_run(); the loop owns the socket (frame_server.h), the signals
 * (SIGINT/SIGTERM/SIGUSR1/SIGUSR2 through a signalfd, SIGPIPE ignored), the flush timer and
 * the periodic debug statistics.
 *
 * Start: bind the socket name (a busy name fails before the output is
 * touched), open the output (service->open), and only then listen: a
 * client that can connect is talking to a daemon that can write.
 *
 * Stop sequence on SIGINT/SIGTERM: refuse new connections but accept the
 * ones the kernel already queued, cut every connection's receive side (a
 * client's later write fails with EPIPE), read each to its end, hand those
 * frames to the service, then service->close() (flush + close the output;
 * the last drops happen there), and only then the final stats and the
 * accounting check: every payload received is written, rejected or counted
 * as dropped (received = written + rejected + dropped).
 */
#ifndef MST_FORWARD_DAEMON_H
#define MST_FORWARD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "forward/frame_server.h"

/* Counters a service reports for the periodic stats line. */
typedef struct mst_daemon_counts {
    uint64_t received;   /* payloads handed to the service */
    uint64_t written;    /* spans delivered (written to the file / relayed) */
    uint64_t rejected;   /* payloads refused (bad magic, JSON, types...) */
    uint64_t dropped;    /* payloads accepted but lost afterwards (write failures,
                          * full queue, out of memory), counted in payloads */
    char dropped_why[128]; /* `dropped` by reason, "name=N ..." ("" if none) */
    /* Spans lost before they were sent, as the traced processes reported
     * them (loss reports, wire/loss_report.h): not in `received`. */
    uint64_t upstream_failed;  /* their exporter could not deliver them */
    uint64_t upstream_dropped; /* their tracer's queue was full */
    char extra[640];     /* service-specific details, "" if none */
    char identity[256];  /* a further identity of the service's, "" if none ... */
    bool identity_ok;    /* ... and whether it adds up */
} mst_daemon_counts;

typedef struct mst_daemon_service {
    const char *name;          /* for log lines, e.g. "Perfetto forwarder" */
    void *self;
    /* Called once the socket is bound (so a busy socket never truncates an
     * output file). On error: message in err, the daemon exits with 1. */
    mst_status (*open)(void *self, char *err, size_t err_size);
    mst_frame_cb on_frame;
    mst_conn_close_cb on_close;  /* NULL: not told (frame_server.h) */
    const void *hello;           /* written to each accepted client (frame_server.h) */
    size_t hello_len;
    /* After every batch of readiness events (and on timeouts). Returns how
     * many ms may pass before it must be called again (-1: no deadline). */
    int (*after_batch)(void *self, uint64_t now_ms);
    void (*get_counts)(void *self, mst_daemon_counts *out);
    /* Flush and release everything; called once, also after errors. Counts
     * read after it are final (get_counts must still work). */
    mst_status (*close)(void *self);
    /* SIGUSR2 (`mstrace trigger`): a snapshot on demand, on the loop's
     * thread. NULL: the signal is logged and ignored. */
    void (*on_demand)(void *self);
} mst_daemon_service;

typedef struct mst_daemon_options {
    const char *socket_name;   /* abstract name, no leading NUL */
    uint32_t stats_interval_ms; /* debug stats period; 0 = 5000 */
    uint64_t max_partial_bytes; /* unfinished frames, all connections; 0 = default */
    uint32_t stall_timeout_ms;  /* a connection stalled mid-frame is closed; 0 = default */
} mst_daemon_options;

/* Runs until SIGINT/SIGTERM (or a fatal error). Returns the process exit
 * code: 0 after a clean stop, 1 when it could not start or lost data at
 * close. */
int mst_daemon_run(const mst_daemon_options *opts, const mst_daemon_service *svc);

/* Monotonic milliseconds (CLOCK_MONOTONIC). */
uint64_t mst_daemon_now_ms(void);

#endif /* MST_FORWARD_DAEMON_H */
