/*
 * test_otlp_transport_driver.c — two programs in one, for the OTLP transport
 * and exporter (src/otlp/otlp_*.c):
 *
 *   - no arguments (ctest): self-contained checks against a tiny HTTP/1.1
 *     responder thread it starts on loopback: 503 then 200 is retried once;
 *     400 is not retried; a 200 carrying partial_success is parsed and not
 *     retried; the connection is kept alive across sends; a fork()ed child
 *     gets a fresh connection while the parent keeps its own; a refused
 *     connection is retried with backoff and ends as MST_ERR_UNAVAILABLE;
 *     retries + 1 == attempts == requests the responder saw, also when the
 *     deadline passes during a backoff sleep (forced with the overrun knob);
 *     the cancel flag aborts a request in flight and a backoff sleep with
 *     MST_ERR_CLOSED.
 *
 *   - `--url U --protocol P --spans N [--timeout-ms T] [--batch B | --batches K]
 *      [--backoff-scale S] [--gzip] [--fork-after F]`: sets the OTEL_EXPORTER_OTLP_TRACES_*
 *     variables (other OTEL_* variables such as HEADERS come from the caller),
 *     builds the config with mst_otlp_config_from_env, creates the exporter
 *     with mst_otlp_exporter_create and exports N spans (a request span with
 *     children and linked batch spans) in batches of B through the
 *     exporter's ops (--batches K: K batches of about N/K spans, all on one
 *     exporter, i.e. one transport), then prints the counters as one JSON
 *     line on stdout. --fork-after F: after F batches the process forks; the
 *     child (after the exporter's after_fork_child) exports the next batch
 *     and exits, the parent waits for it, skips that batch and goes on on
 *     its own connection ("child_ok" in the JSON line). Used by tests/integration/test_otlp_retry.py,
 *     test_otlp_grpc.py and test_jaeger_export.py.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/span.h"
#include "otlp/otlp_transport.h"
#include "testlib.h"

/* ------------------------------------------------------ tiny responder */

typedef struct canned {
    int status;               /* 0: never answer (hold until the peer leaves) */
    const char *body;
    size_t body_len;
} canned;

#define MAX_CONNS 16

typedef struct responder {
    int lfd;
    uint16_t port;
    pthread_t acceptor;
    pthread_t conns[MAX_CONNS];
    int conn_fds[MAX_CONNS];
    _Atomic int n_conns;
    _Atomic int n_requests;
    const canned *script;
    size_t script_len;
    _Atomic size_t next;
} responder;

typedef struct conn_arg { responder *r; int fd; } conn_arg;

static bool read_request(int fd) {
    char buf[65536];
    size_t have = 0;
    char *eoh = NULL;
    while (!eoh) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0) return false;
        have += (size_t)n;
        buf[have] = '\0';
        eoh = strstr(buf, "\r\n\r\n");
        if (!eoh && have >= sizeof buf - 1) return false;
    }
    size_t body = 0;
    for (char *p = buf; p < eoh; p = strstr(p, "\r\n") + 2) {
        if (strncasecmp(p, "Content-Length:", 15) == 0) body = strtoul(p + 15, NULL, 10);
    }
    size_t got = have - (size_t)(eoh + 4 - buf);
    while (got < body) {
        ssize_t n = read(fd, buf, sizeof buf < body - got ? sizeof buf : body - got);
        if (n <= 0) return false;
        got += (size_t)n;
    }
    return true;
}

static void *conn_main(void *arg) {
    conn_arg a = *(conn_arg *)arg;
    free(arg);
    while (read_request(a.fd)) {
        size_t i = atomic_fetch_add(&a.r->next, 1);
        const canned *c = &a.r->script[i < a.r->script_len ? i : a.r->script_len - 1];
        atomic_fetch_add(&a.r->n_requests, 1);
        if (c->status == 0) {
            char sink[256];
            while (read(a.fd, sink, sizeof sink) > 0) { /* hold */ }
            break;
        }
        char head[256];
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 %d X\r\nContent-Type: application/x-protobuf\r\n"
                         "Content-Length: %zu\r\n\r\n", c->status, c->body_len);
        if (write(a.fd, head, (size_t)n) != n) break;
        if (c->body_len && write(a.fd, c->body, c->body_len) != (ssize_t)c->body_len) break;
    }
    return NULL;
}

static void *accept_main(void *arg) {
    responder *r = arg;
    for (;;) {
        int fd = accept(r->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR) continue;
            return NULL;
        }
        int i = atomic_load(&r->n_conns);
        conn_arg *a = malloc(sizeof *a);
        if (i >= MAX_CONNS || !a) {
            free(a);
            close(fd);
            continue;
        }
        a->r = r;
        a->fd = fd;
        r->conn_fds[i] = fd;
        if (pthread_create(&r->conns[i], NULL, conn_main, a) != 0) {
            free(a);
            close(fd);
            continue;
        }
        atomic_store(&r->n_conns, i + 1);
    }
}

static int listen_loopback(uint16_t *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static bool responder_start(responder *r, const canned *script, size_t n) {
    memset(r, 0, sizeof *r);
    r->script = script;
    r->script_len = n;
    r->lfd = listen_loopback(&r->port);
    if (r->lfd < 0) return false;
    return pthread_create(&r->acceptor, NULL, accept_main, r) == 0;
}

static void responder_stop(responder *r) {
    shutdown(r->lfd, SHUT_RDWR);
    pthread_join(r->acceptor, NULL);
    close(r->lfd);
    int n = atomic_load(&r->n_conns);
    for (int i = 0; i < n; i++) shutdown(r->conn_fds[i], SHUT_RDWR);
    for (int i = 0; i < n; i++) {
        pthread_join(r->conns[i], NULL);
        close(r->conn_fds[i]);
    }
}

static void http_config(mst_otlp_config *cfg, uint16_t port) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->endpoint, sizeof cfg->endpoint, "http://127.0.0.1:%u/v1/traces", port);
    cfg->protocol = MST_OTLP_HTTP_PROTOBUF;
    cfg->timeout_ms = 30000; /* never the limit on a loaded machine unless a test sets its own */
}

/* ------------------------------------------------------------ self checks */

static const uint8_t k_body[] = {0x0a, 0x00}; /* ExportTraceServiceRequest{resource_spans={}} */
/* ExportTraceServiceResponse{partial_success{rejected_spans=3, error_message="bad"}} */
static const char k_partial[] = "\x0a\x07\x08\x03\x12\x03" "bad";

static void test_retry_reject_partial_keepalive(void) {
    static const canned script[] = {
        {503, NULL, 0}, {200, NULL, 0},           /* send 1: one retry       */
        {400, NULL, 0},                           /* send 2: not retried     */
        {200, k_partial, sizeof k_partial - 1},   /* send 3: partial success */
        {200, NULL, 0},                           /* sends 4, 5 (fork)       */
    };
    mst_otlp_transport_set_backoff_scale(0.01);
    responder r;
    CHECK(responder_start(&r, script, sizeof script / sizeof script[0]));
    mst_otlp_config cfg;
    http_config(&cfg, r.port);
    mst_otlp_transport *t = NULL;
    CHECK_EQ_INT(mst_otlp_transport_create(&cfg, &t), MST_OK);
    if (!t) return;
    mst_otlp_send_result res;
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_OK);
    CHECK_EQ_INT(res.attempts, 2);
    CHECK_EQ_INT(res.retries, 1);
    CHECK_EQ_INT(res.http_status, 200);
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_ERR_REJECTED);
    CHECK_EQ_INT(res.attempts, 1);
    CHECK_EQ_INT(res.http_status, 400);
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_OK);
    CHECK_EQ_INT(res.attempts, 1);
    CHECK(res.partial_success);
    CHECK_EQ_INT(res.rejected_spans, 3);
    CHECK_EQ_INT(atomic_load(&r.n_requests), 4);
    CHECK_EQ_INT(atomic_load(&r.n_conns), 1); /* keep-alive across sends */

    pid_t pid = fork();
    if (pid == 0) {
        mst_otlp_transport_after_fork_child(t);
        mst_status st = mst_otlp_transport_send(t, k_body, sizeof k_body, &res);
        mst_otlp_transport_destroy(t);
        _exit(st == MST_OK ? 0 : 1);
    }
    int wst = 0;
    CHECK(pid > 0 && waitpid(pid, &wst, 0) == pid);
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    /* the parent's connection survived the child */
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_OK);
    CHECK_EQ_INT(res.attempts, 1);
    CHECK_EQ_INT(atomic_load(&r.n_requests), 6);
    CHECK_EQ_INT(atomic_load(&r.n_conns), 2); /* the child's own + the parent's */
    mst_otlp_transport_destroy(t);
    responder_stop(&r);
    mst_otlp_transport_set_backoff_scale(1.0);
}

static void test_connection_refused(void) {
    uint16_t port = 0;
    int fd = listen_loopback(&port);
    CHECK(fd >= 0);
    close(fd); /* nobody listens on `port` now */
    mst_otlp_transport_set_backoff_scale(0.01);
    mst_otlp_config cfg;
    http_config(&cfg, port);
    cfg.timeout_ms = 1500;
    mst_otlp_transport *t = NULL;
    CHECK_EQ_INT(mst_otlp_transport_create(&cfg, &t), MST_OK);
    mst_otlp_send_result res;
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_ERR_UNAVAILABLE);
    CHECK(res.attempts >= 2);
    CHECK_EQ_INT(res.retries + 1, res.attempts);
    CHECK_EQ_INT(res.http_status, 0);
    mst_otlp_transport_destroy(t);
    mst_otlp_transport_set_backoff_scale(1.0);
}

/* The thread wakes from a backoff sleep after the export deadline (what a
 * loaded machine does; the overrun knob makes it certain): the send stops
 * without a second request, and no retry is counted for a request that was
 * never sent. This used to end with retries == attempts. */
static void test_deadline_crossed_in_backoff(void) {
    uint16_t port = 0;
    int fd = listen_loopback(&port);
    CHECK(fd >= 0);
    close(fd); /* refused: retryable */
    mst_otlp_transport_set_backoff_scale(0.01); /* the first backoff: 7.5-12.5 ms */
    mst_otlp_transport_set_backoff_overrun_ms(2100);
    mst_otlp_config cfg;
    http_config(&cfg, port);
    cfg.timeout_ms = 2000; /* room for the first attempt, not for the overrun */
    mst_otlp_transport *t = NULL;
    CHECK_EQ_INT(mst_otlp_transport_create(&cfg, &t), MST_OK);
    mst_otlp_send_result res;
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_ERR_UNAVAILABLE);
    CHECK_EQ_INT(res.attempts, 1);
    CHECK_EQ_INT(res.retries, 0);
    mst_otlp_transport_destroy(t);
    mst_otlp_transport_set_backoff_overrun_ms(0);
    mst_otlp_transport_set_backoff_scale(1.0);
}

/* 503 three times, then 200: exactly four requests reach the responder and
 * the counters say so (attempts 4, retries 3), however slow the machine. */
static void test_retry_counts_match_requests(void) {
    static const canned script[] = {{503, NULL, 0}, {502, NULL, 0}, {504, NULL, 0}, {200, NULL, 0}};
    mst_otlp_transport_set_backoff_scale(0.01);
    responder r;
    CHECK(responder_start(&r, script, sizeof script / sizeof script[0]));
    mst_otlp_config cfg;
    http_config(&cfg, r.port);
    cfg.timeout_ms = 60000; /* never the limit: the backoffs sum to ~90 ms */
    mst_otlp_transport *t = NULL;
    CHECK_EQ_INT(mst_otlp_transport_create(&cfg, &t), MST_OK);
    if (!t) return;
    mst_otlp_send_result res;
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_OK);
    CHECK_EQ_INT(res.attempts, 4);
    CHECK_EQ_INT(res.retries, 3);
    CHECK_EQ_INT(res.http_status, 200);
    mst_otlp_transport_destroy(t);
    responder_stop(&r);
    CHECK_EQ_INT(atomic_load(&r.n_requests), 4);
    mst_otlp_transport_set_backoff_scale(1.0);
}

static void test_gzip_and_headers_accepted(void) {
    static const canned script[] = {{200, NULL, 0}};
    responder r;
    CHECK(responder_start(&r, script, 1));
    mst_otlp_config cfg;
    http_config(&cfg, r.port);
    cfg.gzip = true;
    snprintf(cfg.headers, sizeof cfg.headers, "x-a=1,x-empty=");
    mst_otlp_transport *t = NULL;
    CHECK_EQ_INT(mst_otlp_transport_create(&cfg, &t), MST_OK);
    uint8_t big[100000];
    memset(big, 'x', sizeof big);
    mst_otlp_send_result res;
    CHECK_EQ_INT(mst_otlp_transport_send(t, big, sizeof big, &res), MST_OK);
    CHECK_EQ_INT(res.attempts, 1);
    mst_otlp_transport_destroy(t);
    responder_stop(&r);
}

typedef struct cancel_later {
    atomic_bool *flag;
    responder *r;
} cancel_later;

/* Sets the flag once the responder has seen the first request, so the
 * transport is inside a request or its backoff sleep (not before it). */
static void *cancel_after_first_request(void *arg) {
    cancel_later *c = arg;
    while (atomic_load(&c->r->n_requests) < 1) usleep(1000);
    usleep(50 * 1000);
    atomic_store(c->flag, true);
    return NULL;
}

/* script {0}: the request hangs; {503}: the transport backs off (7.5-12.5 s with
 * scale 10). Either way the export timeout (30 s) is far away, so
 * MST_ERR_CLOSED can only come from the cancel flag. */
static void run_cancel_case(const canned *script, size_t n) {
    responder r;
    CHECK(responder_start(&r, script, n));
    mst_otlp_config cfg;
    http_config(&cfg, r.port);
    cfg.timeout_ms = 30000;
    mst_otlp_transport *t = NULL;
    CHECK_EQ_INT(mst_otlp_transport_create(&cfg, &t), MST_OK);
    if (!t) return;
    atomic_bool flag = false;
    mst_otlp_transport_set_cancel(t, &flag);
    cancel_later cl = {&flag, &r};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, cancel_after_first_request, &cl) == 0);
    mst_otlp_send_result res;
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_ERR_CLOSED);
    CHECK_EQ_INT(res.attempts, 1);
    CHECK_EQ_INT(res.retries, 0);
    pthread_join(th, NULL);
    /* still set: later sends do not start at all */
    CHECK_EQ_INT(mst_otlp_transport_send(t, k_body, sizeof k_body, &res), MST_ERR_CLOSED);
    CHECK_EQ_INT(res.attempts, 0);
    /* cleared: the transport works again */
    atomic_store(&flag, false);
    mst_otlp_transport_set_cancel(t, NULL);
    mst_otlp_transport_destroy(t);
    responder_stop(&r);
    CHECK_EQ_INT(atomic_load(&r.n_requests), 1);
}

static void test_cancel_in_flight(void) {
    static const canned script[] = {{0, NULL, 0}};
    run_cancel_case(script, 1);
}

static void test_cancel_in_backoff(void) {
    static const canned script[] = {{503, NULL, 0}, {200, NULL, 0}};
    /* a 7.5-12.5 s backoff (inside the 30 s timeout): the cancel, however
     * late a loaded machine runs its thread, lands in it, never after it */
    mst_otlp_transport_set_backoff_scale(10.0);
    run_cancel_case(script, 2);
    mst_otlp_transport_set_backoff_scale(1.0);
}

static const mst_test_case tests[] = {
    {"retry_reject_partial_keepalive", test_retry_reject_partial_keepalive},
    {"connection_refused", test_connection_refused},
    {"deadline_crossed_in_backoff", test_deadline_crossed_in_backoff},
    {"retry_counts_match_requests", test_retry_counts_match_requests},
    {"gzip_and_headers_accepted", test_gzip_and_headers_accepted},
    {"cancel_in_flight", test_cancel_in_flight},
    {"cancel_in_backoff", test_cancel_in_backoff},
};

/* --------------------------------------------------------- driver mode */

static const mst_scope k_scope = {{"mstrace.test.driver", 19}, {"1.0", 3}, NULL};

static mst_str cstr(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }

/* span i of a request-shaped workload: 0 = the request (SERVER); i % 3 == 2
 * a scheduler "batch" span in a trace of its own that links to the request
 * (FOLLOWS_FROM in Jaeger); otherwise a "child" (INTERNAL) of the request
 * (CHILD_OF), every 4th one with an ERROR status. Attributes of each type. */
static void fill_span(mst_span *s, mst_link *link, size_t i, const mst_trace_id *tid,
                      const mst_span_id *root, uint64_t t0) {
    memset(s, 0, sizeof *s);
    s->trace_id = *tid;
    s->span_id = mst_span_id_random();
    s->trace_flags = MST_TRACE_FLAG_SAMPLED;
    s->scope = &k_scope;
    s->start_ns = t0 + i * 1000;
    s->end_ns = s->start_ns + 500;
    s->attrs[0].key = cstr("driver.index");
    s->attrs[0].type = MST_ATTR_INT;
    s->attrs[0].v.i = (int64_t)i;
    s->attrs[1].key = cstr("driver.flag");
    s->attrs[1].type = MST_ATTR_BOOL;
    s->attrs[1].v.b = true;
    s->attrs[2].key = cstr("driver.ratio");
    s->attrs[2].type = MST_ATTR_DOUBLE;
    s->attrs[2].v.d = 0.5;
    s->attrs[3].key = cstr("driver.text");
    s->attrs[3].type = MST_ATTR_STRING;
    s->attrs[3].v.s = cstr("hello");
    s->n_attrs = 4;
    if (i == 0) {
        s->name = cstr("request");
        s->kind = MST_SPAN_KIND_SERVER;
        s->span_id = *root;
        return;
    }
    if (i % 3 == 2) {
        s->name = cstr("batch");
        s->kind = MST_SPAN_KIND_INTERNAL;
        s->trace_id = mst_trace_id_random();
        memset(link, 0, sizeof *link);
        link->trace_id = *tid;
        link->span_id = *root;
        link->trace_flags = MST_TRACE_FLAG_SAMPLED;
        s->links = link;
        s->n_links = 1;
        s->link_cap = 1;
        return;
    }
    s->name = cstr("child");
    s->kind = MST_SPAN_KIND_INTERNAL;
    s->has_parent = true;
    s->parent_span_id = *root;
    if (i % 4 == 0) {
        s->status_code = MST_STATUS_ERROR;
        s->status_message = cstr("driver error");
    }
}

static int usage(void) {
    fprintf(stderr, "usage: test_otlp_transport_driver [--url U --protocol grpc|http/protobuf|"
                    "http/json --spans N [--timeout-ms T] [--batch B | --batches K] [--backoff-scale S] "
                    "[--gzip] [--fork-after F]]\n");
    return 2;
}

static int driver_main(int argc, char **argv) {
    const char *url = NULL, *protocol = NULL, *timeout = NULL;
    size_t n = 0, batch = 0, batches = 0, fork_after = 0;
    bool gzip = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--gzip") == 0) { gzip = true; continue; }
        if (!v) return usage();
        if (strcmp(a, "--url") == 0) url = v;
        else if (strcmp(a, "--protocol") == 0) protocol = v;
        else if (strcmp(a, "--spans") == 0) n = strtoul(v, NULL, 10);
        else if (strcmp(a, "--timeout-ms") == 0) timeout = v;
        else if (strcmp(a, "--batch") == 0) batch = strtoul(v, NULL, 10);
        else if (strcmp(a, "--batches") == 0) batches = strtoul(v, NULL, 10);
        else if (strcmp(a, "--backoff-scale") == 0) mst_otlp_transport_set_backoff_scale(atof(v));
        else if (strcmp(a, "--fork-after") == 0) fork_after = strtoul(v, NULL, 10);
        else return usage();
        i++;
    }
    if (!url || !protocol || n == 0 || (batch && batches) || batches > n) return usage();
    if (batches) batch = (n + batches - 1) / batches; /* K batches (the last may be short) */
    if (batch == 0 || batch > n) batch = n;
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url, 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol, 1);
    if (timeout) setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", timeout, 1);
    if (gzip) setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip", 1);
    mst_otlp_config cfg;
    char err[512];
    mst_status st = mst_otlp_config_from_env(&cfg, err, sizeof err);
    if (st != MST_OK) {
        fprintf(stderr, "config: %s (%s)\n", err, mst_strerror(st));
        return 2;
    }
    mst_exporter *exp = NULL;
    if ((st = mst_otlp_exporter_create(&cfg, &exp)) != MST_OK) {
        fprintf(stderr, "exporter: %s\n", mst_strerror(st));
        return 2;
    }
    mst_span *spans = calloc(n, sizeof *spans);
    mst_link *links = calloc(n, sizeof *links);
    const mst_span **ptrs = calloc(n, sizeof *ptrs);
    if (!spans || !links || !ptrs) return 3;
    mst_trace_id tid = mst_trace_id_random();
    mst_span_id root = mst_span_id_random();
    uint64_t t0 = mst_clock_now_ns();
    for (size_t i = 0; i < n; i++) {
        fill_span(&spans[i], &links[i], i, &tid, &root, t0);
        ptrs[i] = &spans[i];
    }
    int calls_failed = 0, calls = 0, child_ok = -1; /* -1: no fork */
    mst_status last = MST_OK;
    for (size_t off = 0, k = 0; off < n; off += batch, k++) {
        size_t m = n - off < batch ? n - off : batch;
        if (fork_after && k == fork_after) {
            pid_t pid = fork();
            if (pid == 0) {
                exp->ops->after_fork_child(exp);
                mst_status cs = exp->ops->export_batch(exp, ptrs + off, m);
                exp->ops->destroy(exp);
                _exit(cs == MST_OK ? 0 : 1);
            }
            int wst = 0;
            child_ok = pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
            continue; /* the child's batch */
        }
        mst_status s = exp->ops->export_batch(exp, ptrs + off, m);
        calls++;
        if (s != MST_OK) { calls_failed++; last = s; }
    }
    mst_exporter_stats stats;
    exp->ops->get_stats(exp, &stats);
    char tid_hex[33];
    mst_trace_id_to_hex(&tid, tid_hex);
    printf("{\"status\": \"%s\", \"status_code\": %d, \"calls\": %d, \"calls_failed\": %d, "
           "\"trace_id\": \"%s\", "
           "\"spans_exported\": %llu, \"spans_failed\": %llu, \"spans_rejected\": %llu, "
           "\"batches_ok\": %llu, \"batches_failed\": %llu, \"retries\": %llu, \"child_ok\": %d}\n",
           mst_strerror(last), (int)last, calls, calls_failed, tid_hex,
           (unsigned long long)stats.spans_exported, (unsigned long long)stats.spans_failed,
           (unsigned long long)stats.spans_rejected, (unsigned long long)stats.batches_ok,
           (unsigned long long)stats.batches_failed, (unsigned long long)stats.retries, child_ok);
    exp->ops->destroy(exp);
    free(spans);
    free(links);
    free(ptrs);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strncmp(argv[1], "--", 2) == 0) return driver_main(argc, argv);
    return mst_test_run_all(tests, sizeof tests / sizeof tests[0], argc, argv);
}
