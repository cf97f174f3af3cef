/*
 * frame_server.c — epoll server for length-prefixed frames on an abstract
 * Unix socket (see frame_server.h for the contract).
 *
 * Why it is built this way:
 *  - Level-triggered epoll with a bounded read budget per connection per
 *    batch: one busy client cannot starve the others, and nothing is lost
 *    when we stop reading early (the fd simply stays ready).
 *  - One shared 256 KiB read buffer: complete frames are handed to the
 *    callback straight from it (no copy); only the tail of an unfinished
 *    frame is copied into that connection's own buffer, which grows (never
 *    beyond 4 + the frame's length) and is released once it grows large
 *    and empties.
 *  - Connection buffers above 64 KiB are mmap'd rather than malloc'd:
 *    glibc raises its mmap threshold after the first large free, so big
 *    malloc'd frame buffers would then come from the heap and stay resident
 *    after the connections close (1 GB after 300 stalled 4 MiB frames).
 *    munmap gives the memory back at once. Every buffer's capacity is
 *    charged to one global budget (max_partial_bytes).
 *  - A connection in the middle of a frame whose last byte is older than
 *    the stall timeout is closed by a sweep that runs only while some
 *    connection holds a partial frame (the epoll timeout is shortened then).
 *  - A reserve fd is kept so that, when the process runs out of fds, a
 *    pending connection can still be accepted instead of making the
 *    level-triggered listen socket spin. That connection is not thrown
 *    away: its receive side is cut (the client's next write fails), what
 *    the kernel already holds is read and delivered, then it is closed.
 *  - Stop: shutdown(SHUT_RD) on the listener refuses new connects but keeps
 *    the kernel's queue of pending ones, which are accepted and drained
 *    too; shutdown(SHUT_RD) on a connection makes the peer's later writes
 *    fail (EPIPE) and lets us read the rest up to a definite EOF.
 */
#include "forward/frame_server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "wire/frame.h"

#define READ_BUF_BYTES (256u * 1024u)
#define READS_PER_EVENT 4            /* at most 1 MiB per connection per batch */
#define MAX_EVENTS 256
#define ACCEPTS_PER_EVENT 1024
#define KEEP_CONN_BUF_BYTES (64u * 1024u) /* larger idle buffers are released */
#define MAPPED_BUF_BYTES (64u * 1024u)  /* larger buffers are mmap'd */
#define MIN_CONN_BUF_BYTES 4096u
#define MAX_SWEEP_MS 1000u               /* stall sweep period cap */

enum src_kind { SRC_LISTEN = 1, SRC_CONN, SRC_WATCH };

/* Every epoll registration points at one of these (first member). */
typedef struct src {
    enum src_kind kind;
    int fd;
} src;

typedef struct conn {
    src base;
    uint64_t id;
    pid_t pid;                 /* peer pid, for messages */
    uint8_t *buf;              /* an unfinished frame: header + payload so far */
    size_t len;
    size_t cap;
    bool mapped;               /* buf is an mmap of cap bytes (else malloc) */
    bool listed;               /* in s->conns and the epoll set */
    uint64_t last_read_ms;     /* when bytes last arrived (stall timeout) */
    uint64_t bytes_in;         /* read from this connection */
    uint64_t bytes_framed;     /* of which delivered in frames (with headers) */
    struct conn *prev, *next;
} conn;

typedef struct watch {
    src base;
    mst_fd_cb cb;
    void *ctx;
    struct watch *next;
} watch;

typedef struct ns_id {
    bool known;
    dev_t dev;
    ino_t ino;
} ns_id;

struct mst_frame_server {
    int epfd;
    src listen;
    char name[108];
    uint32_t max_frame;
    uint64_t max_partial;      /* budget for all connection buffers */
    uint32_t stall_ms;
    uint64_t now_ms;           /* monotonic, refreshed after each epoll_wait */
    uint64_t next_sweep_ms;
    uint64_t n_partial;        /* connections in the middle of a frame */
    mst_frame_cb on_frame;
    mst_conn_close_cb on_close;
    const void *hello;
    size_t hello_len;
    void *ctx;
    uid_t uid;
    gid_t gid;
    ns_id user_ns, pid_ns;
    bool proc_foreign;         /* /proc is another pid namespace's (see proc_is_foreign) */
    bool listening;
    int reserve_fd;
    uint64_t next_conn_id;
    conn *conns;
    watch *watches;
    uint8_t *rbuf;
    mst_frame_server_stats st;
};

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void raise_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        MST_WARN("could not raise the open-file limit from %llu: %s", (unsigned long long)old,
                 strerror(errno));
    else
        MST_DEBUG("open-file limit raised from %llu to %llu", (unsigned long long)old,
                  (unsigned long long)rl.rlim_max);
}

static ns_id ns_of(const char *path) {
    ns_id id = {0};
    struct stat stb;
    if (stat(path, &stb) == 0) {
        id.known = true;
        id.dev = stb.st_dev;
        id.ino = stb.st_ino;
    }
    return id;
}

/* True when the /proc mounted here belongs to another pid namespace than
 * ours (a daemon started with `unshare --pid --fork` but no --mount-proc):
 * /proc/<pid> of a peer pid, which SO_PEERCRED gives in our namespace, then
 * names some other process, so a peer's namespaces cannot be checked.
 * /proc/self names us by the pid of /proc's own namespace. */
static bool proc_is_foreign(void) {
    char link[32];
    ssize_t n = readlink("/proc/self", link, sizeof link - 1);
    if (n <= 0) return false; /* no /proc: the namespace ids are unknown anyway */
    link[n] = '\0';
    return strtol(link, NULL, 10) != (long)getpid();
}

/* ---------------------------------------------------------- connections */

/* Sets the unfinished-frame length, keeping the count of connections in
 * the middle of a frame (the stall sweep runs only while it is non-zero). */
static void conn_set_len(mst_frame_server *s, conn *c, size_t len) {
    if (c->len == 0 && len > 0) s->n_partial++;
    else if (c->len > 0 && len == 0) s->n_partial--;
    c->len = len;
}

static void conn_free_buf(mst_frame_server *s, conn *c) {
    if (c->mapped) munmap(c->buf, c->cap);
    else free(c->buf);
    s->st.partial_bytes -= c->cap;
    c->buf = NULL;
    c->cap = 0;
    c->mapped = false;
    conn_set_len(s, c, 0);
}

enum grow_result { GROW_OK = 0, GROW_OVER_BUDGET, GROW_NO_MEMORY };

/* Makes room for `need` bytes (need <= 4 + the frame's length): doubles,
 * but never past `limit` (the whole frame). Buffers above MAPPED_BUF_BYTES
 * are mmap'd. The new capacity is charged to the global budget first. */
static enum grow_result conn_grow(mst_frame_server *s, conn *c, size_t need, size_t limit) {
    if (need <= c->cap) return GROW_OK;
    size_t cap = c->cap ? c->cap : MIN_CONN_BUF_BYTES;
    while (cap < need) cap *= 2;
    if (cap > limit) cap = limit < need ? need : limit;
    bool mapped = cap > MAPPED_BUF_BYTES;
    if (mapped) cap = (cap + 4095u) & ~(size_t)4095u;
    if (s->st.partial_bytes - c->cap + cap > s->max_partial) return GROW_OVER_BUDGET;
    uint8_t *p;
    if (!mapped) {
        p = realloc(c->buf, cap);
        if (!p) return GROW_NO_MEMORY;
    } else if (c->mapped) {
        p = mremap(c->buf, c->cap, cap, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) return GROW_NO_MEMORY;
    } else {
        p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return GROW_NO_MEMORY;
        if (c->len) memcpy(p, c->buf, c->len);
        free(c->buf);
    }
    s->st.partial_bytes += cap - c->cap;
    if (s->st.partial_bytes > s->st.partial_peak) s->st.partial_peak = s->st.partial_bytes;
    c->buf = p;
    c->cap = cap;
    c->mapped = mapped;
    return GROW_OK;
}

/* Logs and counts a connection that cannot buffer its frame. */
static void note_memory_refusal(mst_frame_server *s, conn *c, enum grow_result g, size_t need) {
    s->st.memory_closed++;
    if (mst_log_this_count(s->st.memory_closed))
        MST_WARN("connection %llu (pid %d): %s buffering a %zu-byte frame (%llu bytes held in "
                 "unfinished frames, cap %llu); closing that connection (%llu closed for "
                 "memory so far)",
                 (unsigned long long)c->id, (int)c->pid,
                 g == GROW_OVER_BUDGET ? "over the memory cap" : "out of memory", need,
                 (unsigned long long)s->st.partial_bytes, (unsigned long long)s->max_partial,
                 (unsigned long long)s->st.memory_closed);
}

static void conn_close(mst_frame_server *s, conn *c, bool count_truncated) {
    if (count_truncated && c->len > 0) {
        s->st.frames_truncated++;
        if (mst_log_this_count(s->st.frames_truncated))
            MST_WARN("connection %llu (pid %d) ended in the middle of a frame (%zu bytes "
                     "received); %llu truncated frames so far",
                     (unsigned long long)c->id, (int)c->pid, c->len,
                     (unsigned long long)s->st.frames_truncated);
    }
    s->st.bytes_discarded += c->bytes_in - c->bytes_framed;
    conn_free_buf(s, c);
    if (c->listed) epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->base.fd, NULL);
    close(c->base.fd);
    if (c->listed) {
        if (c->prev) c->prev->next = c->next;
        else s->conns = c->next;
        if (c->next) c->next->prev = c->prev;
        s->st.conns_closed++;
        s->st.conns_active--;
    }
    if (s->on_close) s->on_close(s->ctx, c->id);
    free(c);
}

/* Checks a frame length; false (after a warning) when the frame is refused. */
static bool frame_len_ok(mst_frame_server *s, conn *c, uint32_t n) {
    if (n != 0 && n <= s->max_frame) return true;
    s->st.frames_oversize++;
    if (mst_log_this_count(s->st.frames_oversize))
        MST_WARN("connection %llu (pid %d) sent a frame of %u bytes; frames must be 1..%u "
                 "bytes; closing that connection (%llu such frames so far)",
                 (unsigned long long)c->id, (int)c->pid, n, s->max_frame,
                 (unsigned long long)s->st.frames_oversize);
    return false;
}

static void deliver(mst_frame_server *s, conn *c, const uint8_t *payload, size_t n) {
    s->st.frames_received++;
    c->bytes_framed += 4 + n;
    s->on_frame(s->ctx, payload, n, c->id);
}

/* Moves bytes from `p` into the connection's unfinished frame. Returns how
 * many were consumed, or -1 when the connection must be closed. When the
 * frame completes it is delivered and c->len goes back to 0. */
static ssize_t conn_feed_partial(mst_frame_server *s, conn *c, const uint8_t *p, size_t n) {
    size_t used = 0;
    enum grow_result g;
    if (c->len < 4) {
        size_t take = 4 - c->len < n ? 4 - c->len : n;
        if ((g = conn_grow(s, c, 4, MIN_CONN_BUF_BYTES)) != GROW_OK) {
            note_memory_refusal(s, c, g, 4);
            return -1;
        }
        memcpy(c->buf + c->len, p, take);
        conn_set_len(s, c, c->len + take);
        used += take;
        if (c->len < 4) return (ssize_t)used;
        if (!frame_len_ok(s, c, be32(c->buf))) return -1;
    }
    size_t need = 4 + (size_t)be32(c->buf);
    size_t take = need - c->len < n - used ? need - c->len : n - used;
    if ((g = conn_grow(s, c, c->len + take, need)) != GROW_OK) {
        note_memory_refusal(s, c, g, need);
        return -1;
    }
    memcpy(c->buf + c->len, p + used, take);
    conn_set_len(s, c, c->len + take);
    used += take;
    if (c->len == need) {
        deliver(s, c, c->buf + 4, need - 4);
        conn_set_len(s, c, 0);
        if (c->cap > KEEP_CONN_BUF_BYTES) conn_free_buf(s, c);
    }
    return (ssize_t)used;
}

/* Handles n freshly read bytes at p. Returns false when the connection was
 * refused (oversize frame / OOM) and must be closed. */
static bool conn_consume(mst_frame_server *s, conn *c, const uint8_t *p, size_t n) {
    if (c->len > 0) {
        ssize_t used = conn_feed_partial(s, c, p, n);
        if (used < 0) return false;
        p += used;
        n -= (size_t)used;
    }
    while (n >= 4) {
        uint32_t flen = be32(p);
        if (!frame_len_ok(s, c, flen)) return false;
        if ((size_t)flen > n - 4) break;
        deliver(s, c, p + 4, flen);
        p += 4 + (size_t)flen;
        n -= 4 + (size_t)flen;
    }
    if (n > 0 && conn_feed_partial(s, c, p, n) < 0) return false;
    return true;
}

/* Reads from a payload-sized gap directly into the connection's buffer when
 * a large frame is in progress (saves copying big frames twice). */
static size_t direct_read_room(const conn *c) {
    if (c->len < 4) return 0;
    size_t need = 4 + (size_t)be32(c->buf);
    return need - c->len > READ_BUF_BYTES ? need - c->len : 0;
}

/* Counts r freshly read bytes. */
static void note_read(mst_frame_server *s, conn *c, ssize_t r) {
    s->st.bytes_received += (uint64_t)r;
    c->bytes_in += (uint64_t)r;
    c->last_read_ms = s->now_ms;
}

/* One read(); returns >0 bytes handled, 0 at EOF, -1 on EAGAIN, -2 when the
 * connection must be closed (error or refused frame). `limit` caps the read. */
static ssize_t conn_read_once(mst_frame_server *s, conn *c, size_t limit) {
    size_t room = direct_read_room(c);
    if (room) {
        if (room > limit) room = limit;
        size_t need = 4 + (size_t)be32(c->buf);
        enum grow_result g = conn_grow(s, c, c->len + room, need);
        if (g != GROW_OK) {
            note_memory_refusal(s, c, g, need);
            return -2;
        }
        ssize_t r;
        do r = read(c->base.fd, c->buf + c->len, room);
        while (r < 0 && errno == EINTR);
        if (r > 0) {
            note_read(s, c, r);
            conn_set_len(s, c, c->len + (size_t)r);
            if (c->len == need) {
                deliver(s, c, c->buf + 4, need - 4);
                conn_free_buf(s, c);
            }
            return r;
        }
        if (r == 0) return 0; /* EOF: errno is stale here, never inspect it */
        goto read_failed;
    }
    {
        size_t want = limit < READ_BUF_BYTES ? limit : READ_BUF_BYTES;
        ssize_t r;
        do r = read(c->base.fd, s->rbuf, want);
        while (r < 0 && errno == EINTR);
        if (r > 0) {
            note_read(s, c, r);
            return conn_consume(s, c, s->rbuf, (size_t)r) ? r : -2;
        }
        if (r == 0) return 0;
    }
read_failed:
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    if (errno != ECONNRESET) {
        s->st.read_errors++;
        if (mst_log_this_count(s->st.read_errors))
            MST_WARN("read from connection %llu failed: %s", (unsigned long long)c->id,
                     strerror(errno));
    }
    return 0; /* treat like EOF: close, counting a partial frame as truncated */
}

static void conn_on_readable(mst_frame_server *s, conn *c) {
    for (int i = 0; i < READS_PER_EVENT; i++) {
        ssize_t r = conn_read_once(s, c, READ_BUF_BYTES);
        if (r == -1) return;
        if (r == 0) { conn_close(s, c, true); return; }
        if (r == -2) { conn_close(s, c, false); return; }
        if ((size_t)r < READ_BUF_BYTES) return; /* socket is (very likely) empty now */
    }
}

/* ------------------------------------------------------------ accepting */

/* SO_PEERCRED check (docs/forwarder.md "Socket and peer check"): the only door of an abstract socket. */
static bool peer_allowed(mst_frame_server *s, int fd, struct ucred *cr, char *why, size_t why_size) {
    socklen_t len = sizeof *cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len) != 0) {
        snprintf(why, why_size, "SO_PEERCRED failed: %s", strerror(errno));
        return false;
    }
    if (cr->uid != s->uid || cr->gid != s->gid) {
        snprintf(why, why_size, "uid/gid differ from the forwarder's (uid %u gid %u)",
                 (unsigned)s->uid, (unsigned)s->gid);
        return false;
    }
    if (cr->pid <= 0) {
        snprintf(why, why_size, "the peer's pid is not visible in our pid namespace");
        return false;
    }
    if (s->proc_foreign) {
        snprintf(why, why_size, "this forwarder's /proc belongs to another pid namespace, so the peer's "
                                "namespaces cannot be checked (give it its own: unshare --mount-proc)");
        return false;
    }
    static const char *const kinds[2] = {"user", "pid"};
    const ns_id *ours[2] = {&s->user_ns, &s->pid_ns};
    for (int i = 0; i < 2; i++) {
        if (!ours[i]->known) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)cr->pid, kinds[i]);
        ns_id theirs = ns_of(path);
        if (!theirs.known) continue; /* unreadable (or gone): only uid/gid count */
        if (theirs.dev != ours[i]->dev || theirs.ino != ours[i]->ino) {
            snprintf(why, why_size, "the peer is in another %s namespace", kinds[i]);
            return false;
        }
    }
    return true;
}

static conn *conn_new(mst_frame_server *s, int fd, pid_t pid) {
    conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base.kind = SRC_CONN;
    c->base.fd = fd;
    c->id = ++s->next_conn_id;
    c->pid = pid;
    c->last_read_ms = s->now_ms;
    return c;
}

static void add_conn(mst_frame_server *s, int fd, pid_t pid) {
    conn *c = conn_new(s, fd, pid);
    if (!c) {
        MST_WARN("out of memory accepting a connection; closing it");
        close(fd);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        MST_WARN("epoll_ctl(ADD) failed for a new connection: %s", strerror(errno));
        close(fd);
        free(c);
        return;
    }
    /* A fresh socket's buffer takes the few bytes at once; a peer already
     * gone (EPIPE) is found by the read that follows, as before. */
    if (s->hello_len && send(fd, s->hello, s->hello_len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)s->hello_len)
        MST_DEBUG("connection %llu: capability line not sent: %s", (unsigned long long)c->id, strerror(errno));
    c->listed = true;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->st.conns_accepted++;
    s->st.conns_active++;
    MST_DEBUG("connection %llu accepted from pid %d", (unsigned long long)c->id, (int)pid);
}

/* Reads c to its end and closes it: the receive side is cut first, so the
 * peer's later writes fail and the read ends at a definite EOF after the
 * last byte the kernel accepted. Frames are delivered; a partial frame left
 * over counts as truncated. */
static void drain_to_end(mst_frame_server *s, conn *c) {
    shutdown(c->base.fd, SHUT_RD);
    for (;;) {
        ssize_t r = conn_read_once(s, c, READ_BUF_BYTES);
        if (r == -2) { conn_close(s, c, false); return; }
        if (r <= 0) break; /* EOF, error or (cannot happen after SHUT_RD) EAGAIN */
    }
    conn_close(s, c, true);
}

/* Runs the peer check on an accepted fd; false (fd closed, counted, logged)
 * when the peer is refused. */
static bool admit_peer(mst_frame_server *s, int fd, pid_t *pid) {
    struct ucred cr = {0};
    char why[160];
    if (peer_allowed(s, fd, &cr, why, sizeof why)) {
        *pid = cr.pid;
        return true;
    }
    s->st.conns_refused++;
    if (mst_log_this_count(s->st.conns_refused))
        MST_WARN("refused a connection from pid %d uid %u gid %u: %s (%llu refused so far)",
                 (int)cr.pid, (unsigned)cr.uid, (unsigned)cr.gid, why,
                 (unsigned long long)s->st.conns_refused);
    close(fd);
    return false;
}

/* Out of fds: accept one pending connection on the reserve fd (so the
 * level-triggered listen socket does not spin), read what the kernel has
 * already accepted from it, deliver it and close it. The client's next
 * write fails, which its exporter counts; nothing the kernel took is lost.
 * Returns false when no connection could be taken. */
static bool shed_one_connection(mst_frame_server *s) {
    if (s->reserve_fd < 0) return false;
    close(s->reserve_fd);
    s->reserve_fd = -1;
    int fd = accept4(s->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    pid_t pid = 0;
    if (fd >= 0 && admit_peer(s, fd, &pid)) {
        conn *c = conn_new(s, fd, pid);
        if (c) {
            uint64_t frames_before = s->st.frames_received;
            s->st.conns_shed++;
            drain_to_end(s, c);
            if (mst_log_this_count(s->st.conns_shed))
                MST_WARN("out of file descriptors: connection from pid %d accepted, its %llu "
                         "queued frames read, then closed (its later writes fail); %llu "
                         "connections shed so far",
                         (int)pid, (unsigned long long)(s->st.frames_received - frames_before),
                         (unsigned long long)s->st.conns_shed);
        } else {
            close(fd);
        }
    }
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0;
}

/* Accepts up to `max` pending connections; false when the queue is empty
 * (or accept failed for a reason other than running out of fds). */
static bool accept_pending(mst_frame_server *s, int max) {
    for (int i = 0; i < max; i++) {
        int fd = accept4(s->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno; /* the log line below may overwrite errno */
            if (e == EINTR || e == ECONNABORTED) continue;
            if (e == EAGAIN || e == EWOULDBLOCK) return false;
            s->st.accept_errors++;
            if (mst_log_this_count(s->st.accept_errors))
                MST_WARN("accept failed: %s (%llu accept errors so far)", strerror(e),
                         (unsigned long long)s->st.accept_errors);
            if (e != EMFILE && e != ENFILE) return false;
            if (!shed_one_connection(s)) return false;
            continue;
        }
        pid_t pid = 0;
        if (admit_peer(s, fd, &pid)) add_conn(s, fd, pid);
    }
    return true;
}

static void on_listen_readable(mst_frame_server *s) { accept_pending(s, ACCEPTS_PER_EVENT); }

/* ------------------------------------------------------------ lifecycle */

/* Binds the abstract name (claiming it: a second daemon fails here, and a
 * connect() is refused until listen_now()). */
static mst_status bind_name(mst_frame_server *s, char *err, size_t err_size) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t n = strlen(s->name);
    memcpy(addr.sun_path + 1, s->name, n); /* sun_path[0] = 0: abstract */
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, err_size, "socket(AF_UNIX) failed: %s", strerror(errno));
        return MST_ERR_IO;
    }
    if (bind(fd, (struct sockaddr *)&addr, alen) != 0) {
        int e = errno;
        if (e == EADDRINUSE)
            snprintf(err, err_size, "the abstract socket @%s is already in use "
                     "(is another mstrace forward running?)", s->name);
        else
            snprintf(err, err_size, "bind(@%s) failed: %s", s->name, strerror(e));
        close(fd);
        return MST_ERR_IO;
    }
    s->listen.kind = SRC_LISTEN;
    s->listen.fd = fd;
    return MST_OK;
}

mst_status mst_frame_server_listen(mst_frame_server *s, char *err, size_t err_size) {
    if (s->listening) return MST_OK;
    if (listen(s->listen.fd, 4096) != 0) { /* the kernel caps it at net.core.somaxconn */
        snprintf(err, err_size, "listen(@%s) failed: %s", s->name, strerror(errno));
        return MST_ERR_IO;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->listen.fd, &ev) != 0) {
        snprintf(err, err_size, "epoll_ctl(listen) failed: %s", strerror(errno));
        return MST_ERR_IO;
    }
    s->listening = true;
    return MST_OK;
}

mst_status mst_frame_server_create(const mst_frame_server_options *opts,
                                   mst_frame_server **out, char *err, size_t err_size) {
    if (!opts || !out || !opts->on_frame || !opts->socket_name) {
        snprintf(err, err_size, "frame server: missing options");
        return MST_ERR_INVALID_ARG;
    }
    size_t nlen = strlen(opts->socket_name);
    if (nlen == 0 || nlen > 106) {
        snprintf(err, err_size, "socket name must be 1..106 characters");
        return MST_ERR_INVALID_ARG;
    }
    *out = NULL;
    raise_nofile_limit();
    mst_frame_server *s = calloc(1, sizeof *s);
    if (!s || !(s->rbuf = malloc(READ_BUF_BYTES))) {
        free(s);
        snprintf(err, err_size, "out of memory");
        return MST_ERR_NOMEM;
    }
    memcpy(s->name, opts->socket_name, nlen + 1);
    s->max_frame = opts->max_frame_bytes ? opts->max_frame_bytes : MST_FRAME_MAX_BYTES;
    s->max_partial = opts->max_partial_bytes ? opts->max_partial_bytes
                                             : MST_FRAME_DEFAULT_PARTIAL_BYTES;
    s->stall_ms = opts->stall_timeout_ms ? opts->stall_timeout_ms : MST_FRAME_DEFAULT_STALL_MS;
    s->now_ms = mst_clock_monotonic_ms();
    s->on_frame = opts->on_frame;
    s->on_close = opts->on_close;
    s->hello = opts->hello;
    s->hello_len = opts->hello ? opts->hello_len : 0;
    s->ctx = opts->ctx;
    s->uid = getuid();
    s->gid = getgid();
    s->user_ns = ns_of("/proc/self/ns/user");
    s->pid_ns = ns_of("/proc/self/ns/pid");
    s->proc_foreign = proc_is_foreign();
    if (s->proc_foreign)
        MST_WARN("/proc belongs to another pid namespace than this forwarder's: every client will be "
                 "refused (its namespaces cannot be checked); run the forwarder with its own /proc, "
                 "e.g. unshare --pid --fork --mount-proc");
    s->listen.fd = -1;
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0) {
        snprintf(err, err_size, "epoll_create1 failed: %s", strerror(errno));
        mst_frame_server_destroy(s);
        return MST_ERR_IO;
    }
    mst_status st = bind_name(s, err, err_size);
    if (st == MST_OK && !opts->bind_only) st = mst_frame_server_listen(s, err, err_size);
    if (st != MST_OK) {
        mst_frame_server_destroy(s);
        return st;
    }
    *out = s;
    return MST_OK;
}

mst_status mst_frame_server_watch_fd(mst_frame_server *s, int fd, mst_fd_cb cb, void *ctx) {
    watch *w = calloc(1, sizeof *w);
    if (!w) return MST_ERR_NOMEM;
    w->base.kind = SRC_WATCH;
    w->base.fd = fd;
    w->cb = cb;
    w->ctx = ctx;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        free(w);
        return MST_ERR_IO;
    }
    w->next = s->watches;
    s->watches = w;
    return MST_OK;
}

/* How often the stall sweep runs while some frame is unfinished. */
static uint64_t sweep_period_ms(const mst_frame_server *s) {
    uint64_t p = s->stall_ms / 4;
    if (p < 1) p = 1;
    return p > MAX_SWEEP_MS ? MAX_SWEEP_MS : p;
}

/* Closes every connection that has been in the middle of a frame without
 * sending a byte for stall_ms. The client's silence is what counts, not
 * ours: when the daemon itself did not read for a while (waiting for a
 * slow disk), bytes already queued in the kernel mean it is not stalled. */
static void sweep_stalled(mst_frame_server *s) {
    for (conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->len == 0 || s->now_ms - c->last_read_ms < s->stall_ms) continue;
        int queued = 0;
        if (ioctl(c->base.fd, FIONREAD, &queued) == 0 && queued > 0) {
            c->last_read_ms = s->now_ms;
            continue;
        }
        s->st.stalled_closed++;
        if (mst_log_this_count(s->st.stalled_closed))
            MST_WARN("connection %llu (pid %d) stalled for %llu ms in the middle of a frame "
                     "(%zu bytes of %zu received); closing it (%llu stalled connections "
                     "closed so far)",
                     (unsigned long long)c->id, (int)c->pid,
                     (unsigned long long)(s->now_ms - c->last_read_ms), c->len,
                     c->len >= 4 ? 4 + (size_t)be32(c->buf) : (size_t)0,
                     (unsigned long long)s->st.stalled_closed);
        conn_close(s, c, false);
    }
    s->next_sweep_ms = s->now_ms + sweep_period_ms(s);
}

int mst_frame_server_poll(mst_frame_server *s, int timeout_ms) {
    struct epoll_event evs[MAX_EVENTS];
    if (s->n_partial > 0) { /* wake up in time for the stall sweep */
        uint64_t now = mst_clock_monotonic_ms();
        /* Scheduled once, then kept: a sweep that is due runs after this
         * wait, however far apart the polls are. */
        if (s->next_sweep_ms == 0) s->next_sweep_ms = now + sweep_period_ms(s);
        int until = s->next_sweep_ms > now ? (int)(s->next_sweep_ms - now) : 0;
        if (timeout_ms < 0 || until < timeout_ms) timeout_ms = until;
    }
    int n = epoll_wait(s->epfd, evs, MAX_EVENTS, timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return 0;
        MST_ERROR("epoll_wait failed: %s", strerror(errno));
        return -1;
    }
    s->now_ms = mst_clock_monotonic_ms();
    if (s->n_partial > 0 && s->now_ms >= s->next_sweep_ms) sweep_stalled(s);
    for (int i = 0; i < n; i++) {
        src *src_ = evs[i].data.ptr;
        switch (src_->kind) {
        case SRC_LISTEN: on_listen_readable(s); break;
        case SRC_CONN: conn_on_readable(s, (conn *)src_); break;
        case SRC_WATCH: ((watch *)src_)->cb(((watch *)src_)->ctx, src_->fd); break;
        }
    }
    return n;
}

static void close_listener(mst_frame_server *s) {
    if (s->listen.fd < 0) return;
    if (s->listening) epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->listen.fd, NULL);
    close(s->listen.fd);
    s->listen.fd = -1;
    s->listening = false;
}

void mst_frame_server_stop_accepting(mst_frame_server *s) {
    if (!s || s->listen.fd < 0) return;
    if (s->listening) {
        /* From here connect() is refused; the queue of connections the
         * kernel already completed stays and is accepted below, so a client
         * that connected and wrote before the stop is read like the others. */
        shutdown(s->listen.fd, SHUT_RD);
        s->now_ms = mst_clock_monotonic_ms();
        while (accept_pending(s, ACCEPTS_PER_EVENT)) {
        }
    }
    close_listener(s);
}

void mst_frame_server_drain_and_close_all(mst_frame_server *s) {
    if (!s) return;
    /* Cut every connection first, so no client keeps writing while the
     * others are read. */
    for (conn *c = s->conns; c; c = c->next) shutdown(c->base.fd, SHUT_RD);
    s->now_ms = mst_clock_monotonic_ms();
    while (s->conns) drain_to_end(s, s->conns);
}

void mst_frame_server_get_stats(const mst_frame_server *s, mst_frame_server_stats *out) {
    *out = s->st;
    out->conns_mid_frame = s->n_partial;
}

void mst_frame_server_destroy(mst_frame_server *s) {
    if (!s) return;
    close_listener(s);
    while (s->conns) conn_close(s, s->conns, false);
    while (s->watches) {
        watch *w = s->watches;
        s->watches = w->next;
        if (s->epfd >= 0) epoll_ctl(s->epfd, EPOLL_CTL_DEL, w->base.fd, NULL);
        free(w);
    }
    if (s->epfd >= 0) close(s->epfd);
    if (s->reserve_fd >= 0) close(s->reserve_fd);
    free(s->rbuf);
    free(s);
}
