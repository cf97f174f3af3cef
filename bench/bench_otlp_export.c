/*
 * bench_otlp_export.c — how many spans per second the OTLP exporter ships
 * end to end, against an in-process epoll OTLP/HTTP "null" sink (answers
 * every POST with an empty 200 at once, so the figure is ours, not the
 * collector's), and optionally what a real Jaeger sustains.
 *
 * Two figures per protocol:
 *   - exporter: prebuilt spans → export_batch (encode + libcurl POST) in
 *     batches of 512 on one thread: the exporter thread's ceiling, and that
 *     thread's CPU per span and per export (CLOCK_THREAD_CPUTIME_ID: what an
 *     exporter thread costs, whatever else the machine runs);
 *   - pipeline: spans recorded through the public API (start, 4 attributes,
 *     end) by one producer, queued, batched and exported by the tracer's
 *     exporter thread; the producer yields while the queue is nearly full so
 *     nothing is dropped and the figure is delivered spans / wall time.
 *
 *   bench_otlp_export [--spans N] [--jaeger URL --protocol P] [--exporter-only 1] [--null-sink 0]
 *                     [--batch B]   (spans per export, default 512)
 *   (--exporter-only 1: no pipeline run; --null-sink 0: Jaeger only; e.g. under callgrind)
 * Goal: ≥ 200,000 spans/s to the null sink (http/protobuf).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/span.h"
#include "mstrace_otlp.h"

#define BATCH_DEFAULT 512
static size_t g_batch = BATCH_DEFAULT; /* --batch: spans per export */
#define QUEUE 16384

/* ------------------------------------------------------------ null sink */

typedef struct sink_conn {
    int fd;
    char buf[16384];
    size_t have;
    size_t body_left;
    bool in_body;
} sink_conn;

typedef struct sink {
    int lfd, efd, stop_pipe[2];
    uint16_t port;
    pthread_t thread;
    _Atomic uint64_t requests, bytes;
} sink;

static const char k_ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                           "Content-Length: 0\r\n\r\n";

/* Consumes what is buffered: headers → Content-Length → discard body →
 * answer. Returns false when the connection must close. */
static bool sink_process(sink *s, sink_conn *c) {
    for (;;) {
        if (c->in_body) {
            size_t take = c->have < c->body_left ? c->have : c->body_left;
            memmove(c->buf, c->buf + take, c->have - take);
            c->have -= take;
            c->body_left -= take;
            if (c->body_left) return true;
            c->in_body = false;
            atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
            if (send(c->fd, k_ok, sizeof k_ok - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof k_ok - 1))
                return false;
            continue;
        }
        c->buf[c->have < sizeof c->buf ? c->have : sizeof c->buf - 1] = '\0';
        char *eoh = strstr(c->buf, "\r\n\r\n");
        if (!eoh) return c->have < sizeof c->buf - 1;
        size_t cl = 0;
        for (char *p = c->buf; p && p < eoh; p = strstr(p, "\r\n")) {
            if (*p == '\r') p += 2;
            if (strncasecmp(p, "Content-Length:", 15) == 0) cl = strtoul(p + 15, NULL, 10);
        }
        size_t hlen = (size_t)(eoh + 4 - c->buf);
        memmove(c->buf, c->buf + hlen, c->have - hlen);
        c->have -= hlen;
        c->body_left = cl;
        c->in_body = true;
    }
}

static void *sink_main(void *arg) {
    sink *s = arg;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(s->efd, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &s->stop_pipe) return NULL;
            if (p == s) {
                int fd;
                while ((fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    sink_conn *c = calloc(1, sizeof *c);
                    if (!c) { close(fd); continue; }
                    c->fd = fd;
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            sink_conn *c = p;
            bool alive = true;
            for (;;) {
                ssize_t r = recv(c->fd, c->buf + c->have, sizeof c->buf - 1 - c->have, 0);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) { alive = false; break; }
                if (r < 0) break;
                atomic_fetch_add_explicit(&s->bytes, (uint64_t)r, memory_order_relaxed);
                c->have += (size_t)r;
                if (!sink_process(s, c)) { alive = false; break; }
            }
            if (!alive) {
                epoll_ctl(s->efd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                free(c);
            }
        }
    }
}

static bool sink_start(sink *s) {
    memset(s, 0, sizeof *s);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s->lfd, 64) != 0 || getsockname(s->lfd, (struct sockaddr *)&sa, &len) != 0)
        return false;
    s->port = ntohs(sa.sin_port);
    s->efd = epoll_create1(EPOLL_CLOEXEC);
    if (s->efd < 0 || pipe2(s->stop_pipe, O_CLOEXEC) != 0) return false;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    epoll_ctl(s->efd, EPOLL_CTL_ADD, s->lfd, &ev);
    struct epoll_event sv = {.events = EPOLLIN, .data.ptr = &s->stop_pipe};
    epoll_ctl(s->efd, EPOLL_CTL_ADD, s->stop_pipe[0], &sv);
    return pthread_create(&s->thread, NULL, sink_main, s) == 0;
}

static void sink_stop(sink *s) {
    if (write(s->stop_pipe[1], "x", 1) != 1) return;
    pthread_join(s->thread, NULL);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    close(s->efd);
    close(s->lfd); /* connections still open are reclaimed at exit */
}

/* ------------------------------------------------------------ workloads */

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* The exporter thread's CPU over one bench_exporter run. */
typedef struct exporter_cpu {
    double us_per_span, us_per_export;
} exporter_cpu;

static const char *proto_name(mst_otlp_protocol p) {
    return p == MST_OTLP_GRPC ? "grpc" : p == MST_OTLP_HTTP_JSON ? "http/json" : "http/protobuf";
}

static mst_status make_exporter(const char *url, mst_otlp_protocol proto, mst_exporter **out) {
    mst_otlp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "%s", url);
    cfg.protocol = proto;
    cfg.timeout_ms = 10000;
    return mst_otlp_exporter_create(&cfg, out);
}

static const mst_scope k_scope = {{"bench.otlp", 10}, {"1", 1}, NULL};
static mst_str cstr(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }

/* The exporter thread's ceiling: prebuilt spans, encode + POST per batch. */
static double bench_exporter(const char *url, mst_otlp_protocol proto, size_t n, exporter_cpu *cpu) {
    mst_exporter *exp = NULL;
    if (make_exporter(url, proto, &exp) != MST_OK) return -1;
    mst_span *spans = calloc(g_batch, sizeof *spans);
    const mst_span **ptrs = calloc(g_batch, sizeof *ptrs);
    if (!spans || !ptrs) return -1;
    mst_trace_id tid = mst_trace_id_random();
    uint64_t t0 = mst_clock_now_ns();
    for (size_t i = 0; i < g_batch; i++) {
        mst_span *s = &spans[i];
        s->trace_id = tid;
        s->span_id = mst_span_id_random();
        s->has_parent = i > 0;
        s->parent_span_id = spans[0].span_id;
        s->trace_flags = 1;
        s->scope = &k_scope;
        s->name = cstr(i ? "decode_step" : "request");
        s->kind = i ? MST_SPAN_KIND_INTERNAL : MST_SPAN_KIND_SERVER;
        s->start_ns = t0 + i * 1000;
        s->end_ns = s->start_ns + 900;
        s->attrs[0] = (mst_attr){.key = cstr("request.id"), .type = MST_ATTR_STRING,
                                 .v.s = cstr("cmpl-0123456789abcdef")};
        s->attrs[1] = (mst_attr){.key = cstr("batch.size"), .type = MST_ATTR_INT, .v.i = 64};
        s->attrs[2] = (mst_attr){.key = cstr("gpu.util"), .type = MST_ATTR_DOUBLE, .v.d = 0.87};
        s->attrs[3] = (mst_attr){.key = cstr("prefill"), .type = MST_ATTR_BOOL, .v.b = false};
        s->n_attrs = 4;
        ptrs[i] = s;
    }
    double start = now_s(), cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    size_t done = 0;
    while (done < n) {
        if (exp->ops->export_batch(exp, ptrs, g_batch) != MST_OK) break;
        done += g_batch;
    }
    double el = now_s() - start, cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    cpu->us_per_span = done ? cpu_s * 1e6 / (double)done : 0;
    cpu->us_per_export = done ? cpu_s * 1e6 / (double)(done / g_batch) : 0;
    mst_exporter_stats st;
    exp->ops->get_stats(exp, &st);
    exp->ops->destroy(exp);
    free(spans);
    free(ptrs);
    if (st.spans_failed) fprintf(stderr, "  exporter: %llu spans failed\n",
                                 (unsigned long long)st.spans_failed);
    return (double)st.spans_exported / el;
}

/* End to end through the public API and the tracer's exporter thread. */
static double bench_pipeline(const char *url, mst_otlp_protocol proto, size_t n) {
    mst_tracer_options opts = {.max_queue_size = QUEUE, .max_export_batch_size = g_batch,
                               .schedule_delay_ms = 5, .export_timeout_ms = 30000};
    mst_tracer *tr = NULL;
    mst_exporter *exp = NULL;
    if (mst_tracer_create(&opts, &tr) != MST_OK) return -1;
    if (make_exporter(url, proto, &exp) != MST_OK || mst_tracer_add_exporter(tr, exp) != MST_OK) {
        mst_tracer_shutdown(tr, 1000);
        return -1;
    }
    const mst_scope *scope = mst_tracer_scope(tr, "bench.otlp", "1");
    double start = now_s();
    mst_span *root = mst_span_start(tr, scope, "request", MST_SPAN_KIND_SERVER, NULL, 0);
    mst_span_context ctx;
    mst_span_get_context(root, &ctx);
    for (size_t i = 1; i < n; i++) {
        if ((i & 255) == 0) {
            mst_tracer_stats ts;
            for (;;) { /* stay below the queue bound: measure delivery, not drops */
                mst_tracer_get_stats(tr, &ts);
                if (ts.queue_depth < QUEUE - 1024) break;
                sched_yield();
            }
        }
        mst_span *s = mst_span_start(tr, scope, "decode_step", MST_SPAN_KIND_INTERNAL, &ctx, 0);
        mst_span_set_str(s, "request.id", "cmpl-0123456789abcdef");
        mst_span_set_int(s, "batch.size", 64);
        mst_span_set_double(s, "gpu.util", 0.87);
        mst_span_set_bool(s, "prefill", false);
        mst_span_end(s, 0);
    }
    mst_span_end(root, 0);
    mst_tracer_flush(tr, 60000);
    double el = now_s() - start;
    mst_exporter_stats es;
    mst_exporter_get_stats(exp, &es);
    mst_tracer_stats ts;
    mst_tracer_get_stats(tr, &ts);
    mst_tracer_shutdown(tr, 10000);
    if (es.spans_failed || ts.spans_dropped)
        fprintf(stderr, "  pipeline: %llu failed, %llu dropped\n",
                (unsigned long long)es.spans_failed, (unsigned long long)ts.spans_dropped);
    return (double)es.spans_exported / el;
}

static bool g_exporter_only;
static bool g_null_sink = true;

static void run_all(const char *label, const char *http_url, const char *grpc_url, size_t n,
                    int only_proto) {
    static const mst_otlp_protocol protos[] = {MST_OTLP_HTTP_PROTOBUF, MST_OTLP_HTTP_JSON,
                                               MST_OTLP_GRPC};
    for (size_t i = 0; i < 3; i++) {
        if (only_proto != -1 && (int)protos[i] != only_proto) continue; /* -2: none */
        const char *url = protos[i] == MST_OTLP_GRPC ? grpc_url : http_url;
        if (!url) continue;
        exporter_cpu cpu = {0, 0};
        double e = bench_exporter(url, protos[i], n, &cpu);
        double p = g_exporter_only ? 0 : bench_pipeline(url, protos[i], n);
        printf("%-10s %-14s exporter %10.0f spans/s   pipeline %10.0f spans/s   exporter CPU %6.3f us/span "
               "%8.1f us/export\n", label, proto_name(protos[i]), e, p, cpu.us_per_span, cpu.us_per_export);
    }
}

int main(int argc, char **argv) {
    size_t n = 500000;
    const char *jaeger = NULL;
    int proto = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--spans") == 0) n = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--jaeger") == 0) jaeger = argv[i + 1];
        else if (strcmp(argv[i], "--exporter-only") == 0) g_exporter_only = strcmp(argv[i + 1], "0") != 0;
        else if (strcmp(argv[i], "--null-sink") == 0) g_null_sink = strcmp(argv[i + 1], "0") != 0;
        else if (strcmp(argv[i], "--batch") == 0) g_batch = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--protocol") == 0)
            proto = strcmp(argv[i + 1], "grpc") == 0 ? MST_OTLP_GRPC
                    : strcmp(argv[i + 1], "http/json") == 0 ? MST_OTLP_HTTP_JSON
                                                            : MST_OTLP_HTTP_PROTOBUF;
    }
    if (g_batch == 0 || g_batch > n) {
        fprintf(stderr, "bench_otlp_export: --batch must be 1..--spans\n");
        return 2;
    }
    mst_log_set_level(MST_LOG_WARNING);
    sink s;
    if (!sink_start(&s)) {
        fprintf(stderr, "cannot start the null sink\n");
        return 1;
    }
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", s.port);
    printf("OTLP export, %zu spans per run, batches of %zu (goal: >= 200000 spans/s to the null sink)\n",
           n, g_batch);
    run_all("null-sink", url, NULL, n, proto == MST_OTLP_GRPC || !g_null_sink ? -2 : proto);
    printf("null sink: %llu requests, %.1f MB received\n",
           (unsigned long long)atomic_load(&s.requests), (double)atomic_load(&s.bytes) / 1e6);
    sink_stop(&s);
    if (jaeger) {
        /* --jaeger is the OTLP endpoint: .../v1/traces for HTTP, host:port base for grpc */
        run_all("jaeger", proto == MST_OTLP_GRPC ? NULL : jaeger,
                proto == MST_OTLP_GRPC ? jaeger : NULL, n < 100000 ? n : 100000, proto);
    }
    return 0;
}
