/*
 * frame_server.h — the forwarder's socket front end: one epoll loop serving
 * many concurrent clients on a Linux abstract Unix socket (SOCK_STREAM).
 *
 * Why it exists on its own: both daemon modes (the Perfetto sink, docs/forwarder.md,
 * and the OTLP relay, docs/relay.md) share the same framing and the same peer
 * check, and differ only in what they do with a payload. The server knows
 * nothing about payloads: it hands each complete frame to a callback.
 *
 * Security: an abstract socket has no file permissions, so SO_PEERCRED is
 * the only door. A peer must have our uid and gid and (when /proc tells us)
 * live in our user and pid namespaces; anything else is refused and logged.
 *
 * Framing: 4-byte big-endian length, then that many payload bytes; many
 * frames per connection. A length of 0 or above the cap closes that one
 * connection (counted); partial frames are reassembled in a per-connection
 * buffer; EOF inside a frame is counted as truncated.
 *
 * Memory: the bytes held in unfinished frames across all connections are
 * capped (max_partial_bytes); a connection whose frame would pass the cap is
 * closed and counted. A connection that sends nothing for stall_timeout_ms
 * while in the middle of a frame is closed and counted. Buffers above 64 KiB
 * are mmap'd, so their memory goes back to the system when they are freed.
 *
 * Readiness: with bind_only the name is claimed (bind) but nobody can
 * connect until mst_frame_server_listen(), so the daemon can open its
 * output in between and "the socket accepts" means "ready to write".
 *
 * Stop: mst_frame_server_stop_accepting() refuses new connections but still
 * accepts the ones the kernel already queued; drain_and_close_all() cuts
 * every connection's receive side (later client writes fail with EPIPE) and
 * reads each to its end, so every byte the kernel accepted from a client is
 * read: delivered in a frame, or counted (truncated / refused / closed).
 *
 * Threading: single-threaded. Every call must come from the loop's thread.
 */
#ifndef MST_FORWARD_FRAME_SERVER_H
#define MST_FORWARD_FRAME_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mstrace.h"

typedef struct mst_frame_server mst_frame_server;

/* Default cap of the bytes held in unfinished frames, all connections. */
#define MST_FRAME_DEFAULT_PARTIAL_BYTES (256ull << 20)
/* Default time a connection may stall in the middle of a frame. */
#define MST_FRAME_DEFAULT_STALL_MS 30000u

/* One complete frame. `payload` is only valid during the call. */
typedef void (*mst_frame_cb)(void *ctx, const uint8_t *payload, size_t len, uint64_t conn_id);
/* A connection closed (after its last frame was delivered). */
typedef void (*mst_conn_close_cb)(void *ctx, uint64_t conn_id);
/* An extra fd (signalfd, timerfd...) became readable. */
typedef void (*mst_fd_cb)(void *ctx, int fd);

typedef struct mst_frame_server_options {
    const char *socket_name;   /* abstract name without the leading NUL */
    uint32_t max_frame_bytes;  /* 0 = MST_FRAME_MAX_BYTES */
    uint64_t max_partial_bytes; /* 0 = MST_FRAME_DEFAULT_PARTIAL_BYTES */
    uint32_t stall_timeout_ms; /* 0 = MST_FRAME_DEFAULT_STALL_MS */
    bool bind_only;            /* bind now, listen in mst_frame_server_listen() */
    mst_frame_cb on_frame;
    mst_conn_close_cb on_close; /* NULL: not told */
    /* Written once to every connection that passes the peer check, as it is
     * accepted (NULL: nothing): the Perfetto mode's capability line
     * (docs/forwarder.md "Request id lists as changes"). A client that
     * never reads it loses nothing: its frames are read and counted as
     * usual, and the reset its close then causes here (Linux reports
     * ECONNRESET, after the data, to a socket whose peer closed with
     * unread bytes) is taken as the end of the stream, silently. */
    const void *hello;
    size_t hello_len;
    void *ctx;
} mst_frame_server_options;

typedef struct mst_frame_server_stats {
    uint64_t conns_accepted;   /* passed the peer check */
    uint64_t conns_refused;    /* failed the peer check */
    uint64_t conns_closed;     /* accepted connections closed since */
    uint64_t conns_active;     /* open right now */
    uint64_t conns_mid_frame;  /* of which in the middle of a frame */
    uint64_t frames_received;  /* handed to the callback */
    uint64_t bytes_received;
    uint64_t frames_oversize;  /* length 0 or over the cap: conn closed */
    uint64_t frames_truncated; /* EOF or reset in the middle of a frame */
    uint64_t read_errors;      /* read() failed (not EAGAIN) */
    uint64_t accept_errors;    /* accept() failed, e.g. out of fds */
    uint64_t conns_shed;       /* out of fds: accepted on the reserve fd, read to
                                * the end and closed (frames delivered) */
    uint64_t stalled_closed;   /* closed: stalled mid-frame past the timeout */
    uint64_t memory_closed;    /* closed: its frame would pass max_partial_bytes
                                * (or out of memory) */
    uint64_t bytes_discarded;  /* read but in no delivered frame (truncated,
                                * stalled or memory-closed frames) */
    uint64_t partial_bytes;    /* held in unfinished frames right now */
    uint64_t partial_peak;     /* the most ever held at once */
} mst_frame_server_stats;

/* Raises RLIMIT_NOFILE (soft to hard), binds and (unless bind_only)
 * listens. On error returns MST_ERR_IO and a message (e.g. the name is
 * already in use) in err. */
mst_status mst_frame_server_create(const mst_frame_server_options *opts,
                                   mst_frame_server **out, char *err, size_t err_size);

/* Starts listening (after a bind_only create; a no-op otherwise). */
mst_status mst_frame_server_listen(mst_frame_server *s, char *err, size_t err_size);

/* Watches one more fd in the same epoll set; `cb` runs when it is readable.
 * The caller keeps ownership of the fd. */
mst_status mst_frame_server_watch_fd(mst_frame_server *s, int fd, mst_fd_cb cb, void *ctx);

/* Waits at most timeout_ms (-1 = forever) for readiness and handles one
 * batch of events (accepts, reads, frames, watched fds). Returns the number
 * of events handled (0 on timeout or EINTR) or -1 on a fatal epoll error. */
int mst_frame_server_poll(mst_frame_server *s, int timeout_ms);

/* No new connections from now on (connect() is refused); the connections
 * the kernel had already queued are accepted (peer-checked) so that their
 * data is read too; then the listening socket is closed. */
void mst_frame_server_stop_accepting(mst_frame_server *s);

/* Cuts the receive side of every open connection (shutdown(SHUT_RD): from
 * here a client's write fails with EPIPE, so it cannot hold the stop up),
 * then reads each connection to its end, delivers the complete frames and
 * closes it (a partial frame left over counts as truncated). */
void mst_frame_server_drain_and_close_all(mst_frame_server *s);

void mst_frame_server_get_stats(const mst_frame_server *s, mst_frame_server_stats *out);

/* Closes everything and frees s (NULL is fine). */
void mst_frame_server_destroy(mst_frame_server *s);

#endif /* MST_FORWARD_FRAME_SERVER_H */
