/*
 * frame_listener.h — for the C tests: a Perfetto forwarder stand-in on an
 * abstract Unix socket (frame_listener.c). A thread accepts connections and
 * reads the client's length-prefixed frames, decoding each with the real
 * packet decoder: `frames` counts those that decode, `bad` the others
 * (loss reports, wire/loss_report.h, are summed apart: `reports`), a
 * frame cut at EOF is dropped (as the forwarder does). `paused` accepts but
 * reads nothing, so the client's sends back up; `closed` counts connections
 * the client ended (EOF read).
 */
#ifndef MST_TEST_FRAME_LISTENER_H
#define MST_TEST_FRAME_LISTENER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_CONNS 8
#define KEEP_NAMES 64

typedef struct conn {
    int fd;
    uint8_t *buf;
    size_t len, cap;
} conn;

typedef struct listener {
    char name[64];
    int lfd;
    pthread_t thread;
    atomic_bool stop;
    atomic_bool paused;       /* accept, but do not read */
    atomic_int frames;        /* complete frames that decoded */
    atomic_int bad;           /* frames that did not decode */
    atomic_int reports;       /* loss reports */
    _Atomic uint64_t reported_failed, reported_dropped; /* their sums */
    atomic_int accepted;      /* connections accepted */
    atomic_int closed;        /* connections read to EOF (or a read error) */
    pthread_mutex_t mu;
    char names[KEEP_NAMES][64]; /* span names of the first frames */
    /* Connections live here, not on the thread's stack, so a fork()ed child
     * (where the thread is gone) still sees their buffers as reachable. */
    conn conns[MAX_CONNS];
    int nconns;
} listener;

/* Listens on abstract socket `name` and starts the thread; false (with a
 * perror line) when the socket or the thread cannot be made. */
bool listener_start(listener *l, const char *name);
/* Stops the thread, closes every connection and the socket. */
void listener_stop(listener *l);
/* Waits (bounded, not asserted as a time) until the listener has n frames. */
bool wait_frames(listener *l, int n);
/* Waits until every connection it accepted was read to its end (the client
 * closed it): all it sent is counted. Bounded like wait_frames; false when
 * some connection is still open then. */
bool wait_all_closed(listener *l);

#endif /* MST_TEST_FRAME_LISTENER_H */
