/*
 * test_frame_server.c — the forwarder's socket front end (forward/frame_server.h)
 * driven through a real abstract socket: complete frames are delivered, and
 * a peer that disconnects in the middle of a large frame (the path that
 * reads straight into the connection buffer) is closed and counted as
 * truncated, whatever errno happened to hold before the EOF.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static mst_frame_server *make_server(char *name, size_t name_size) {
    snprintf(name, name_size, "mst_fs_test_%d", (int)getpid());
    mst_frame_server_options o = {.socket_name = name, .on_frame = on_frame};
    mst_frame_server *s = NULL;
    char err[256] = "";
    if (mst_frame_server_create(&o, &s, err, sizeof err) != MST_OK) {
        fprintf(stderr, "  cannot create the frame server: %s\n", err);
        return NULL;
    }
    return s;
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
    CHECK(s != NULL);
    if (!s) return;
    int fd = connect_to(name);
    CHECK(fd >= 0);
    size_t flen = 3u * 1024u * 1024u; /* well above the 256 KiB read buffer */
    size_t sent = 64u * 1024u;
    uint8_t *buf = calloc(1, 4 + sent);
    buf[0] = (uint8_t)(flen >> 24);
    buf[1] = (uint8_t)(flen >> 16);
    buf[2] = (uint8_t)(flen >> 8);
    buf[3] = (uint8_t)flen;
    write_all(fd, buf, 4 + sent);
    mst_frame_server_stats st;
    /* Let the server take the header and the first bytes before the EOF. */
    for (int i = 0; i < 20; i++) {
        mst_frame_server_poll(s, 10);
        mst_frame_server_get_stats(s, &st);
        if (st.bytes_received >= 4 + sent) break;
    }
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
    CHECK(s != NULL);
    if (!s) return;
    g_frames = 0;
    int fd = connect_to(name);
    CHECK(fd >= 0);
    size_t flen = 1024u * 1024u;
    uint8_t *buf = calloc(1, 4 + flen);
    buf[1] = (uint8_t)(flen >> 16);
    buf[2] = (uint8_t)(flen >> 8);
    buf[3] = (uint8_t)flen;
    /* The kernel buffer is smaller than the frame: interleave writes and polls. */
    size_t off = 0;
    while (off < 4 + flen) {
        size_t n = 4 + flen - off < 32768 ? 4 + flen - off : 32768;
        write_all(fd, buf + off, n);
        off += n;
        mst_frame_server_poll(s, 0);
    }
    close(fd);
    mst_frame_server_stats st;
    poll_until_idle(s, &st);
    CHECK_EQ_INT(g_frames, 1);
    CHECK_EQ_INT(st.frames_truncated, 0);
    CHECK_EQ_INT(st.conns_active, 0);
    free(buf);
    mst_frame_server_destroy(s);
}

static const mst_test_case TESTS[] = {
    {"eof_inside_large_frame_closes", test_eof_inside_large_frame_closes},
    {"large_frame_delivered", test_large_frame_delivered},
};

MST_TEST_MAIN(TESTS)
