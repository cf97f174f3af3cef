/*
 * test_frame_server.c — the forwarder's socket front end (forward/frame_server.h)
 * driven through a real abstract socket: complete frames are delivered, and
 * a peer that disconnects in the middle of a large frame (the path that
 * reads straight into the connection buffer) is closed and counted as
 * truncated, whatever errno happened to hold before the EOF. Also: a
 * bind_only server refuses connects until it listens; the stop accepts the
 * connections still queued by the kernel and reads every connection to its
 * end (later writes fail with EPIPE); a connection stalled mid-frame is
 * closed after the stall timeout; the unfinished-frame memory cap closes
 * the connection that would pass it and the buffers are given back.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "forward/frame_server.h"
#include "testlib.h"

static size_t g_frames;

static void on_frame(void *ctx, const uint8_t *payload, size_t len, uint64_t conn_id) {
    (void)ctx, (void)payload, (void)len, (void)conn_id;
    g_frames++;
}

/* calloc that stops the test run when memory is short (the buffers here
 * are written at once: a NULL would crash the test, not fail it). */
static void *test_calloc(size_t n) {
    void *p = calloc(1, n);
    if (!p) {
        fprintf(stderr, "  out of memory allocating %zu bytes for the test\n", n);
        abort();
    }
    return p;
}

/* A server on a per-process socket name with options `o` (its name and
 * frame callback are filled in here), with the frame count reset. NULL
 * (the test failed) when it cannot be created. */
static mst_frame_server *make_server_with(char *name, size_t name_size,
                                          mst_frame_server_options o) {
    snprintf(name, name_size, "mst_fs_test_%d", (int)getpid());
    o.socket_name = name;
    o.on_frame = on_frame;
    mst_frame_server *s = NULL;
    char err[256] = "";
    if (mst_frame_server_create(&o, &s, err, sizeof err) != MST_OK) {
        fprintf(stderr, "  cannot create the frame server: %s\n", err);
        s = NULL;
    }
    CHECK(s != NULL);
    g_frames = 0;
    return s;
}

static mst_frame_server *make_server(char *name, size_t name_size) {
    return make_server_with(name, name_size, (mst_frame_server_options){0});
}

static int connect_to(const char *name) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    memcpy(a.sun_path + 1, name, len);
    if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) abort();
        p += w;
        n -= (size_t)w;
    }
}

/* The 4-byte big-endian length that starts a frame. */
static void put_frame_len(uint8_t *p, size_t len) {
    p[0] = (uint8_t)(len >> 24);
    p[1] = (uint8_t)(len >> 16);
    p[2] = (uint8_t)(len >> 8);
    p[3] = (uint8_t)len;
}

/* Writes all n bytes while polling the server (the socket buffer is
 * smaller than what is written). */
static void write_polling(mst_frame_server *s, int fd, const uint8_t *p, size_t n) {
    size_t off = 0;
    while (off < n) {
        size_t k = n - off < 32768 ? n - off : 32768;
        write_all(fd, p + off, k);
        off += k;
        mst_frame_server_poll(s, 0);
    }
}

/* Polls the server (`ms` each, at most `rounds` times), reading its stats
 * into `st` after each poll, until `cond` (on st) holds: bounded by rounds
 * and the awaited event, not by time. */
#define POLL_UNTIL(s, st, rounds, ms, cond)                                   \
    for (int round_ = 0; round_ < (rounds) && !(cond); round_++) {          \
        mst_frame_server_poll((s), (ms));                                   \
        mst_frame_server_get_stats((s), &(st));                             \
    }

/* Polls until the server has no open connection (or a bounded number of rounds). */
static void poll_until_idle(mst_frame_server *s, mst_frame_server_stats *st) {
    for (int i = 0; i < 200; i++) {
        errno = EAGAIN; /* a stale EAGAIN must not be taken for "no data yet" */
        mst_frame_server_poll(s, 10);
        mst_frame_server_get_stats(s, st);
        if (st->conns_accepted > 0 && st->conns_active == 0) return;
    }
}

/* EOF inside a large frame whose rest is read directly into the connection
 * buffer: the connection must be closed and counted, not left readable (a
 * level-triggered epoll would then spin on it forever). */
static void test_eof_inside_large_frame_closes(void) {
    char name[64];
    mst_frame_server *s = make_server(name, sizeof name);
    if (!s) return;
    int fd = connect_to(name);
    CHECK(fd >= 0);
    size_t flen = 3u * 1024u * 1024u; /* well above the 256 KiB read buffer */
    size_t sent = 64u * 1024u;
    uint8_t *buf = test_calloc(4 + sent);
    put_frame_len(buf, flen);
    write_all(fd, buf, 4 + sent);
    mst_frame_server_stats st = {0};
    /* Let the server take the header and the first bytes before the EOF. */
    POLL_UNTIL(s, st, 20, 10, st.bytes_received >= 4 + sent);
    CHECK_EQ_INT(st.bytes_received, 4 + sent);
    close(fd);
    poll_until_idle(s, &st);
    CHECK_EQ_INT(st.conns_active, 0);
    CHECK_EQ_INT(st.conns_closed, 1);
    CHECK_EQ_INT(st.frames_truncated, 1);
    CHECK_EQ_INT(g_frames, 0);
    free(buf);
    mst_frame_server_destroy(s);
}

/* A large frame sent completely is delivered once. */
static void test_large_frame_delivered(void) {
    char name[64];
    mst_frame_server *s = make_server(name, sizeof name);
    if (!s) return;
    int fd = connect_to(name);
    CHECK(fd >= 0);
    size_t flen = 1024u * 1024u;
    uint8_t *buf = test_calloc(4 + flen);
    put_frame_len(buf, flen);
    write_polling(s, fd, buf, 4 + flen);
    close(fd);
    mst_frame_server_stats st;
    poll_until_idle(s, &st);
    CHECK_EQ_INT(g_frames, 1);
    CHECK_EQ_INT(st.frames_truncated, 0);
    CHECK_EQ_INT(st.conns_active, 0);
    free(buf);
    mst_frame_server_destroy(s);
}

/* n frames of `len` payload bytes each. */
static uint8_t *frames(size_t n, size_t len, size_t *total) {
    *total = n * (4 + len);
    uint8_t *b = test_calloc(*total);
    for (size_t i = 0; i < n; i++) {
        put_frame_len(b + i * (4 + len), len);
    }
    return b;
}

static void test_bind_only_refuses_until_listen(void) {
    char name[64];
    mst_frame_server *s = make_server_with(name, sizeof name,
                                           (mst_frame_server_options){.bind_only = true});
    if (!s) return;
    errno = 0;
    int fd = connect_to(name);
    CHECK(fd < 0 && errno == ECONNREFUSED);
    char err[256];
    CHECK_EQ_INT(mst_frame_server_listen(s, err, sizeof err), MST_OK);
    fd = connect_to(name);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    mst_frame_server_destroy(s);
}

/* At the stop, a connection never accepted (still in the kernel's queue)
 * and an accepted one that wrote without being read are both read to their
 * end; afterwards the clients' writes fail. */
static void test_stop_reads_queued_connections_to_the_end(void) {
    char name[64];
    mst_frame_server *s = make_server(name, sizeof name);
    if (!s) return;
    int a = connect_to(name);
    mst_frame_server_stats st = {0};
    POLL_UNTIL(s, st, 200, 10, st.conns_accepted == 1); /* accept a */
    CHECK_EQ_INT(st.conns_accepted, 1);
    int b = connect_to(name); /* queued in the kernel, not accepted */
    size_t total;
    uint8_t *buf = frames(100, 200, &total);
    write_all(a, buf, total);
    write_all(b, buf, total / 10);
    mst_frame_server_stop_accepting(s);
    CHECK(connect_to(name) < 0);
    mst_frame_server_drain_and_close_all(s);
    mst_frame_server_get_stats(s, &st);
    CHECK_EQ_INT(g_frames, 110);
    CHECK_EQ_INT(st.bytes_received, total + total / 10);
    CHECK_EQ_INT(st.conns_accepted, 2);
    CHECK_EQ_INT(st.conns_active, 0);
    CHECK_EQ_INT(st.frames_truncated, 0);
    signal(SIGPIPE, SIG_IGN);
    CHECK(write(a, buf, 10) < 0 && (errno == EPIPE || errno == ECONNRESET));
    close(a);
    close(b);
    free(buf);
    mst_frame_server_destroy(s);
}

static void test_stalled_mid_frame_is_closed(void) {
    char name[64];
    mst_frame_server *s = make_server_with(name, sizeof name,
                                           (mst_frame_server_options){.stall_timeout_ms = 20});
    if (!s) return;
    int idle = connect_to(name);
    int stalled = connect_to(name);
    size_t total;
    uint8_t *buf = frames(1, 100, &total);
    write_all(idle, buf, total);        /* a whole frame, then idle */
    write_all(stalled, buf, total / 2); /* half a frame, then silence */
    mst_frame_server_stats st = {0};
    POLL_UNTIL(s, st, 10000, 50, st.stalled_closed != 0);
    CHECK_EQ_INT(st.stalled_closed, 1);
    CHECK_EQ_INT(st.conns_active, 1); /* the idle one stays */
    CHECK_EQ_INT(st.conns_mid_frame, 0);
    CHECK_EQ_INT(st.bytes_discarded, total / 2);
    CHECK_EQ_INT(g_frames, 1);
    close(idle);
    close(stalled);
    free(buf);
    mst_frame_server_destroy(s);
}

/* A client that kept sending while the server did not read (the daemon
 * busy, e.g. waiting for a slow disk) is not stalled: its bytes are queued
 * in the kernel. The frame is delivered, nothing is closed. */
static void test_unread_data_is_not_a_stall(void) {
    char name[64];
    mst_frame_server *s = make_server_with(name, sizeof name,
                                           (mst_frame_server_options){.stall_timeout_ms = 20});
    if (!s) return;
    int fd = connect_to(name);
    size_t total;
    uint8_t *buf = frames(1, 100, &total);
    write_all(fd, buf, total / 2);
    mst_frame_server_stats st = {0};
    POLL_UNTIL(s, st, 1000, 10, st.conns_mid_frame != 0);
    CHECK_EQ_INT(st.conns_mid_frame, 1);
    mst_frame_server_poll(s, 0); /* schedules the stall sweep */
    write_all(fd, buf + total / 2, total - total / 2); /* the rest, not read yet */
    struct timespec pause = {0, 60 * 1000 * 1000};     /* longer than the timeout */
    nanosleep(&pause, NULL);
    mst_frame_server_poll(s, 10);
    mst_frame_server_get_stats(s, &st);
    CHECK_EQ_INT(st.stalled_closed, 0);
    CHECK_EQ_INT(g_frames, 1);
    CHECK_EQ_INT(st.conns_active, 1);
    close(fd);
    free(buf);
    mst_frame_server_destroy(s);
}

static void test_partial_memory_cap(void) {
    char name[64];
    mst_frame_server *s = make_server_with(
        name, sizeof name, (mst_frame_server_options){.max_partial_bytes = 3u << 20});
    if (!s) return;
    size_t flen = 2u << 20, part = (1u << 20) + 1000; /* each grows to a 2 MiB buffer */
    uint8_t *buf = test_calloc(4 + part);
    put_frame_len(buf, flen);
    int c1 = connect_to(name), c2 = connect_to(name);
    mst_frame_server_stats st = {0};
    write_polling(s, c1, buf, 4 + part);
    POLL_UNTIL(s, st, 1000, 10, st.bytes_received >= 4 + part);
    signal(SIGPIPE, SIG_IGN);
    for (size_t off = 0; off < 4 + part && st.memory_closed == 0; off += 32768) {
        size_t k = 4 + part - off < 32768 ? 4 + part - off : 32768;
        if (write(c2, buf + off, k) < 0) break; /* closed for memory */
        mst_frame_server_poll(s, 0);
        mst_frame_server_get_stats(s, &st);
    }
    POLL_UNTIL(s, st, 1000, 10, st.memory_closed != 0);
    CHECK_EQ_INT(st.memory_closed, 1);
    CHECK(st.partial_peak <= 3u << 20);
    CHECK_EQ_INT(st.conns_mid_frame, 1);
    close(c1);
    close(c2);
    POLL_UNTIL(s, st, 1000, 10, st.conns_active == 0);
    CHECK_EQ_INT(st.conns_active, 0);
    CHECK_EQ_INT(st.partial_bytes, 0);
    CHECK_EQ_INT(st.frames_truncated, 1);
    free(buf);
    mst_frame_server_destroy(s);
}

static const mst_test_case TESTS[] = {
    {"bind_only_refuses_until_listen", test_bind_only_refuses_until_listen},
    {"stop_reads_queued_connections_to_the_end", test_stop_reads_queued_connections_to_the_end},
    {"stalled_mid_frame_is_closed", test_stalled_mid_frame_is_closed},
    {"partial_memory_cap", test_partial_memory_cap},
    {"unread_data_is_not_a_stall", test_unread_data_is_not_a_stall},
    {"eof_inside_large_frame_closes", test_eof_inside_large_frame_closes},
    {"large_frame_delivered", test_large_frame_delivered},
};

MST_TEST_MAIN(TESTS)
