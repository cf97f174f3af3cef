/*
 * frame_listener.c — the forwarder stand-in of frame_listener.h.
 */
#include "frame_listener.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "wire/loss_report.h"
#include "wire/perfetto_packet.h"

static void handle_frame(listener *l, const uint8_t *p, size_t len) {
    mst_loss_report r;
    if (mst_loss_report_decode(p, len, &r)) {
        atomic_fetch_add(&l->reports, 1);
        atomic_fetch_add(&l->reported_failed, r.spans_failed);
        atomic_fetch_add(&l->reported_dropped, r.spans_dropped);
        return;
    }
    mst_arena arena;
    mst_arena_init(&arena);
    mst_pf_span s;
    char err[200];
    if (mst_perfetto_packet_decode(p, len, &arena, &s, err, sizeof err) == MST_OK) {
        int i = atomic_load(&l->frames);
        if (i < KEEP_NAMES) {
            pthread_mutex_lock(&l->mu);
            snprintf(l->names[i], sizeof l->names[i], "%s", s.name.ptr);
            pthread_mutex_unlock(&l->mu);
        }
        atomic_fetch_add(&l->frames, 1);
    } else {
        fprintf(stderr, "  listener: bad frame: %s\n", err);
        atomic_fetch_add(&l->bad, 1);
    }
    mst_arena_release(&arena);
}

/* Reads what is there; parses complete frames; false at EOF/error (a
 * partial frame left at EOF is dropped, as the forwarder does). */
static bool conn_read(listener *l, conn *c) {
    if (c->cap - c->len < 65536) {
        c->cap = c->cap ? c->cap * 2 : 131072;
        c->buf = realloc(c->buf, c->cap);
    }
    ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
    if (r <= 0) return false;
    c->len += (size_t)r;
    size_t off = 0;
    while (c->len - off >= 4) {
        const uint8_t *h = c->buf + off;
        size_t flen = ((size_t)h[0] << 24) | ((size_t)h[1] << 16) | ((size_t)h[2] << 8) | h[3];
        if (c->len - off - 4 < flen) break;
        handle_frame(l, h + 4, flen);
        off += 4 + flen;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    return true;
}

static void *listener_main(void *arg) {
    listener *l = arg;
    conn *conns = l->conns;
    int nconns = 0;
    while (!atomic_load(&l->stop)) {
        struct pollfd p[MAX_CONNS + 1];
        p[0] = (struct pollfd){.fd = l->lfd, .events = POLLIN};
        bool reading = !atomic_load(&l->paused);
        for (int i = 0; i < nconns; i++) p[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = reading ? POLLIN : 0};
        int polled = nconns;
        if (poll(p, (nfds_t)polled + 1, 10) <= 0) continue;
        if ((p[0].revents & POLLIN) && nconns < MAX_CONNS) {
            int fd = accept(l->lfd, NULL, NULL);
            if (fd >= 0) {
                conns[nconns++] = (conn){.fd = fd};
                l->nconns = nconns;
                atomic_fetch_add(&l->accepted, 1);
            }
        }
        /* Backwards, so a removal can move the last (already seen) slot in. */
        for (int i = polled - 1; i >= 0 && reading; i--) {
            if (!(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (!conn_read(l, &conns[i])) {
                atomic_fetch_add(&l->closed, 1);
                close(conns[i].fd);
                free(conns[i].buf);
                conns[i] = conns[--nconns];
                l->nconns = nconns;
            }
        }
    }
    for (int i = 0; i < nconns; i++) {
        close(conns[i].fd);
        free(conns[i].buf);
    }
    return NULL;
}

bool listener_start(listener *l, const char *name) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(a.sun_path + 1, name, n);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (l->lfd < 0 || bind(l->lfd, (struct sockaddr *)&a, alen) < 0 || listen(l->lfd, 16) < 0) {
        perror("listener");
        return false;
    }
    return pthread_create(&l->thread, NULL, listener_main, l) == 0;
}

void listener_stop(listener *l) {
    atomic_store(&l->stop, true);
    pthread_join(l->thread, NULL);
    close(l->lfd);
    pthread_mutex_destroy(&l->mu);
}

bool wait_frames(listener *l, int n) {
    for (int i = 0; i < 2000 && atomic_load(&l->frames) < n; i++) nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
    return atomic_load(&l->frames) == n;
}

bool wait_all_closed(listener *l) {
    for (int i = 0; i < 2000 && atomic_load(&l->closed) < atomic_load(&l->accepted); i++)
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
    return atomic_load(&l->closed) == atomic_load(&l->accepted);
}
