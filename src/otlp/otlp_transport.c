/*
 * otlp_transport.c — one encoded OTLP trace body → the collector, with the
 * OTLP retry rules (docs/reference/otlp.md "Retries"). See otlp_transport.h for the contract.
 * What the collector's reply says (partial success, grpc-status, RetryInfo)
 * is read by wire/otlp_response.c; this file keeps libcurl, retries, timing.
 *
 * Design notes:
 *   - One CURL easy handle per transport, kept for its whole life, so the
 *     TCP/TLS connection is reused between batches (keep-alive; gRPC too,
 *     over plaintext with the h2c workaround below). All options are set
 *     once when the handle is made; a send only sets the body, the time
 *     left and, for h2c, the HTTP version.
 *   - h2c workaround (gRPC over http:// on libcurl < 8.0, Debian 12's
 *     7.88.1): a second request asking for HTTP/2 "prior knowledge" on a
 *     reused connection fails ("Error in the HTTP2 framing layer",
 *     curl#10634: libcurl stacks a second HTTP/2 layer on the connection).
 *     Asking for plain HTTP/2 (CURL_HTTP_VERSION_2_0) on that same
 *     connection does not take that path and works, but on a new
 *     connection it would send an HTTP/1.1 Upgrade that gRPC servers do not
 *     speak. So: prior knowledge on a fresh handle (one connection) while
 *     no connection is known good; plain HTTP/2 while the handle holds one
 *     that answered and has nothing pending (no GOAWAY, no EOF: see
 *     h2c_reusable). While reusing, the handle may open no new connection
 *     (on_open_socket refuses: libcurl's own reconnect would send the
 *     Upgrade), so a request whose reused connection died between the check
 *     and the send fails, and is redone at once with prior knowledge on a
 *     fresh handle (counted as a retry); after
 *     H2C_REUSE_FAILURES_MAX such failures in a row the transport stops
 *     reusing (a connection per export, as before the workaround).
 *   - The whole export, retries and backoff sleeps included, fits in
 *     cfg.timeout_ms: a retry whose delay would cross the deadline is not
 *     attempted. So the exporter thread is busy for a bounded time and the
 *     pipeline's queue (not the producers) absorbs a slow collector.
 *   - gRPC is spoken directly over libcurl's HTTP/2: length-prefixed message
 *     out, grpc-status from headers or trailers in. No gRPC library needed.
 *   - Cancel (optional, for stop bounds): the progress callback and the
 *     sliced backoff sleep poll a caller-owned atomic flag, so a stop can
 *     abort a request in flight instead of waiting out the export timeout.
 *   - Permanent vs transient failures: what retrying cannot fix (the TLS
 *     set-up, an HTTP 4xx other than 408/429, a gRPC status saying the
 *     endpoint or the credentials are wrong, a URL libcurl cannot use) is
 *     a configuration error: the send returns MST_ERR_REJECTED at once
 *     with res->config_error set, and its line (what is wrong, which
 *     variable to fix) is logged once per transport until the cause
 *     changes, however many batches hit it. Outages (connection refused,
 *     429/502/503/504, retryable gRPC codes) keep the bounded backoff.
 *   - After fork() the child must not run curl_easy_cleanup on the inherited
 *     handle: cleanup would write a TLS close_notify or an HTTP/2 GOAWAY onto
 *     the socket the parent still uses. The child instead closes its own copy
 *     of the descriptor (close() on an inherited fd sends nothing; the parent's
 *     connection is untouched) and deliberately leaks the handle's memory
 *     (kept reachable in g_fork_orphans), then makes a fresh handle lazily.
 */
#include "otlp/otlp_transport.h"

#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/log.h"
#include "otlp/otlp_config.h"
#include "otlp/otlp_curl.h"
#include "wire/buf.h"
#include "wire/otlp_response.h"

#define GRPC_METHOD_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define RESP_MAX_BYTES (1u << 20)      /* a collector reply is tiny; cap it */
#define BACKOFF_FIRST_MS 1000.0
#define BACKOFF_MAX_MS 32000.0
#define WARN_INTERVAL_NS (10ull * 1000000000ull)
#define FORK_ORPHANS_MAX 64
#define CANCEL_SLICE_MS 20             /* backoff sleeps check cancel this often */
#define H2C_REUSE_FAILURES_MAX 3       /* reused-connection failures in a row before giving up reuse */

/* gRPC status codes the OTLP spec names as retryable. */
enum {
    GRPC_OK = 0, GRPC_CANCELLED = 1, GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_RESOURCE_EXHAUSTED = 8, GRPC_ABORTED = 10, GRPC_OUT_OF_RANGE = 11,
    GRPC_UNAVAILABLE = 14, GRPC_DATA_LOSS = 15,
    /* what no retry fixes: the address or the credentials are wrong */
    GRPC_NOT_FOUND = 5, GRPC_PERMISSION_DENIED = 7, GRPC_UNIMPLEMENTED = 12, GRPC_UNAUTHENTICATED = 16
};

typedef struct warn_limiter {
    uint64_t last_ns;
    uint32_t suppressed;
} warn_limiter;

struct mst_otlp_transport {
    mst_otlp_config cfg;
    char url[sizeof(((mst_otlp_config *)0)->endpoint) + sizeof GRPC_METHOD_PATH];
    bool grpc;
    CURL *curl;                   /* lazily created, reused (keep-alive)    */
    bool h2c_workaround;          /* gRPC, http://, libcurl < 8.0 (see top) */
    bool h2c_live;                /* the handle's connection answered       */
    bool h2c_reuse_off;           /* gave up reusing (see top)              */
    bool curl_used;               /* the handle has made a request          */
    bool h2c_no_new_connection;   /* reusing: on_open_socket refuses        */
    uint8_t h2c_reuse_failures;   /* in a row, on a reused connection       */
    struct curl_slist *headers;
    mst_buf zbuf;                 /* gzip output                            */
    mst_buf frame;                /* gRPC length-prefixed message           */
    mst_buf resp;                 /* response body of the current attempt   */
    /* per-attempt response headers/trailers */
    long retry_after_ms;          /* -1: none                               */
    int grpc_status;              /* -1: none                               */
    bool grpc_reply;              /* content-type application/grpc[+...]   */
    char grpc_message[256];
    long grpc_retry_ms;           /* from RetryInfo, -1: none               */
    uint64_t rng;
    warn_limiter warn_fail;       /* failures and rejections               */
    warn_limiter warn_partial;    /* partial successes (separate: both show) */
    const atomic_bool *cancel;    /* optional, see set_cancel               */
    CURLcode last_rc;             /* of the last attempt, for messages      */
    char config_error[512];       /* the configuration error last logged    */
    char errbuf[CURL_ERROR_SIZE];
};

/* A server-given retry delay (Retry-After, gRPC RetryInfo) is capped at a day. */
#define RETRY_HINT_MAX_S ((long long)MST_OTLP_RETRY_DELAY_MAX_S)
static _Atomic(double) g_backoff_scale = 1.0;
static _Atomic(uint32_t) g_backoff_overrun_ms = 0; /* tests only, see the .h */
static CURL *g_fork_orphans[FORK_ORPHANS_MAX];

void mst_otlp_transport_set_backoff_scale(double scale) {
    atomic_store(&g_backoff_scale, scale < 0 ? 0 : scale);
}

void mst_otlp_transport_set_backoff_overrun_ms(uint32_t ms) {
    atomic_store(&g_backoff_overrun_ms, ms);
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool cancelled(const mst_otlp_transport *t) {
    return t->cancel && atomic_load_explicit(t->cancel, memory_order_acquire);
}

static void sleep_ms(uint64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) { /* EINTR: keep the remaining time */ }
}

/* Sleeps `ms` in slices so a cancel is seen within CANCEL_SLICE_MS; false
 * when cancelled. */
static bool sleep_cancellable(const mst_otlp_transport *t, uint64_t ms) {
    if (!t->cancel) {
        sleep_ms(ms);
        return true;
    }
    while (ms > 0) {
        if (cancelled(t)) return false;
        uint64_t slice = ms < CANCEL_SLICE_MS ? ms : CANCEL_SLICE_MS;
        sleep_ms(slice);
        ms -= slice;
    }
    return !cancelled(t);
}

/* CURLOPT_XFERINFOFUNCTION: non-zero aborts the transfer
 * (CURLE_ABORTED_BY_CALLBACK), which attempt() maps to MST_ERR_CLOSED. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    return cancelled(ud) ? 1 : 0;
}

/* xorshift64*: jitter only needs to decorrelate processes, not be secret. */
static double rand_unit(mst_otlp_transport *t) {
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return (double)((t->rng * 2685821657736338717ull) >> 11) / (double)(1ull << 53);
}

/* At most one warning per WARN_INTERVAL_NS per transport: a dead collector
 * must not flood the serving engine's log. */
static void warn_limited(warn_limiter *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn_limited(warn_limiter *w, const char *fmt, ...) {
    uint64_t now = mono_ns();
    if (w->last_ns && now - w->last_ns < WARN_INTERVAL_NS) {
        w->suppressed++;
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w->suppressed)
        MST_WARN("%s (%u similar messages suppressed)", msg, w->suppressed);
    else
        MST_WARN("%s", msg);
    w->last_ns = now;
    w->suppressed = 0;
}

/* ------------------------------------------------------- curl callbacks */

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
    mst_otlp_transport *t = ud;
    size_t n = size * nmemb;
    mst_buf_append(&t->resp, data, n); /* over RESP_MAX_BYTES: kept truncated */
    return n;
}

/* "Retry-After: 3" or "Retry-After: <HTTP date>" → ms from now. */
static long parse_retry_after(const char *v) {
    char *end;
    long long secs = strtoll(v, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (end != v && *end == '\0')
        return secs < 0 ? 0 : (long)(secs > RETRY_HINT_MAX_S ? RETRY_HINT_MAX_S * 1000 : secs * 1000);
    time_t when = curl_getdate(v, NULL);
    if (when < 0) return -1;
    time_t now = time(NULL);
    return when <= now ? 0 : (long)((when - now) > RETRY_HINT_MAX_S ? RETRY_HINT_MAX_S * 1000 : (when - now) * 1000);
}

static bool header_is(const char *line, size_t n, const char *name, const char **value,
                      size_t *vlen) {
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':') return false;
    const char *v = line + k + 1;
    const char *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t')) v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ')) e--;
    *value = v;
    *vlen = (size_t)(e - v);
    return true;
}

/* Headers and (HTTP/2) trailers both arrive here, one line per call. */
static size_t on_header(char *line, size_t size, size_t nmemb, void *ud) {
    mst_otlp_transport *t = ud;
    size_t n = size * nmemb;
    const char *v;
    size_t vn;
    char tmp[512];
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) { /* a new response (e.g. after 1xx) */
        t->retry_after_ms = -1;
        t->grpc_status = -1;
        t->grpc_reply = false;
        t->grpc_message[0] = '\0';
        t->grpc_retry_ms = -1;
    } else if (header_is(line, n, "retry-after", &v, &vn)) {
        snprintf(tmp, sizeof tmp, "%.*s", (int)vn, v);
        t->retry_after_ms = parse_retry_after(tmp);
    } else if (header_is(line, n, "content-type", &v, &vn)) {
        t->grpc_reply = vn >= 16 && strncasecmp(v, "application/grpc", 16) == 0;
    } else if (header_is(line, n, "grpc-status", &v, &vn)) {
        t->grpc_status = mst_otlp_grpc_status_parse(v, vn);
    } else if (header_is(line, n, "grpc-message", &v, &vn)) {
        mst_otlp_grpc_message_decode(v, vn, t->grpc_message, sizeof t->grpc_message);
    } else if (header_is(line, n, "grpc-status-details-bin", &v, &vn)) {
        t->grpc_retry_ms = mst_otlp_grpc_retry_delay_ms(v, vn);
    }
    return n;
}

/* CURLOPT_OPENSOCKETFUNCTION of h2c handles: no new connection while
 * reusing (see the top), else what libcurl would do (plus close-on-exec). */
static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *addr) {
    const mst_otlp_transport *t = ud;
    (void)purpose;
    if (t->h2c_no_new_connection) return CURL_SOCKET_BAD;
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

/* ---------------------------------------------------------- construction */

static int add_user_header(void *ctx, const char *key, const char *value) {
    struct curl_slist **list = ctx;
    char line[2400];
    /* "k;" is libcurl's way to send a header with an empty value */
    if (value[0]) snprintf(line, sizeof line, "%s: %s", key, value);
    else snprintf(line, sizeof line, "%s;", key);
    struct curl_slist *l = curl_slist_append(*list, line);
    if (!l) return -1;
    *list = l;
    return 0;
}

static mst_status build_headers(mst_otlp_transport *t) {
    const char *fixed[6] = {0};
    size_t nf = 0;
    if (t->grpc) {
        fixed[nf++] = "Content-Type: application/grpc";
        fixed[nf++] = "TE: trailers";
        if (t->cfg.gzip) fixed[nf++] = "grpc-encoding: gzip";
    } else {
        fixed[nf++] = t->cfg.protocol == MST_OTLP_HTTP_JSON ? "Content-Type: application/json"
                                                            : "Content-Type: application/x-protobuf";
        if (t->cfg.gzip) fixed[nf++] = "Content-Encoding: gzip";
    }
    fixed[nf++] = "Expect:"; /* no 100-continue round trip on big bodies */
    fixed[nf++] = "Accept:";
    for (size_t i = 0; i < nf; i++) {
        struct curl_slist *l = curl_slist_append(t->headers, fixed[i]);
        if (!l) return MST_ERR_NOMEM;
        t->headers = l;
    }
    char err[512];
    mst_status st = mst_otlp_headers_parse(t->cfg.headers, add_user_header, &t->headers, err,
                                           sizeof err);
    if (st != MST_OK) MST_ERROR("OTLP exporter headers: %s", err);
    return st;
}

/* gRPC ignores the URL path of the endpoint: the method path is fixed. */
static mst_status build_url(mst_otlp_transport *t) {
    const char *ep = t->cfg.endpoint;
    if (strncasecmp(ep, "http://", 7) != 0 && strncasecmp(ep, "https://", 8) != 0) {
        MST_ERROR("OTLP endpoint \"%s\" must start with http:// or https://", ep);
        return MST_ERR_PARSE;
    }
    if (!t->grpc) {
        snprintf(t->url, sizeof t->url, "%s", ep);
        return MST_OK;
    }
    const char *auth = strstr(ep, "://") + 3;
    size_t alen = strcspn(auth, "/?#");
    size_t slen = (size_t)(auth - ep);
    snprintf(t->url, sizeof t->url, "%.*s%.*s%s", (int)slen, ep, (int)alen, auth, GRPC_METHOD_PATH);
    return MST_OK;
}

mst_status mst_otlp_transport_create(const mst_otlp_config *cfg, mst_otlp_transport **out) {
    if (!cfg || !out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    if (cfg->protocol != MST_OTLP_GRPC && cfg->protocol != MST_OTLP_HTTP_PROTOBUF &&
        cfg->protocol != MST_OTLP_HTTP_JSON)
        return MST_ERR_UNSUPPORTED;
    if (memchr(cfg->endpoint, '\0', sizeof cfg->endpoint) == NULL ||
        memchr(cfg->headers, '\0', sizeof cfg->headers) == NULL)
        return MST_ERR_INVALID_ARG;
    char err[256];
    if (mst_otlp_curl_init(err, sizeof err) != MST_OK) {
        MST_ERROR("OTLP exporter: %s", err);
        return MST_ERR_INTERNAL;
    }
    mst_otlp_transport *t = calloc(1, sizeof *t);
    if (!t) return MST_ERR_NOMEM;
    t->cfg = *cfg;
    if (t->cfg.timeout_ms == 0) t->cfg.timeout_ms = 10000;
    t->grpc = cfg->protocol == MST_OTLP_GRPC;
    t->rng = mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)t;
    if (!t->rng) t->rng = 0x9e3779b97f4a7c15ull;
    mst_buf_init(&t->zbuf, 0);
    mst_buf_init(&t->frame, 0);
    mst_buf_init(&t->resp, RESP_MAX_BYTES);
    mst_status st = build_url(t);
    if (st == MST_OK) st = build_headers(t);
    if (st != MST_OK) {
        mst_otlp_transport_destroy(t);
        return st;
    }
    *out = t;
    return MST_OK;
}

static mst_status make_handle(mst_otlp_transport *t) {
    CURL *c = curl_easy_init();
    if (!c) return MST_ERR_NOMEM;
    bool https = strncasecmp(t->url, "https://", 8) == 0;
    /* libcurl before 8.0 (Debian 12 ships 7.88.1) fails the second request
     * asking for HTTP/2 prior knowledge on a reused connection (curl#10634;
     * gRPC over http:// works around it, see the top). HTTP/2 negotiated by
     * ALPN over TLS reuses fine there, but http/protobuf and http/json keep
     * HTTP/1.1 on those versions (as the Python OTLP exporter does anyway). */
    bool h2_reuse_ok = curl_version_info(CURLVERSION_NOW)->version_num >= 0x080000;
    long version = CURL_HTTP_VERSION_1_1;
    if (t->grpc) version = https ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    else if (https && h2_reuse_ok) version = CURL_HTTP_VERSION_2TLS; /* ALPN: h2 or 1.1 */
    t->h2c_workaround = t->grpc && !https && !h2_reuse_ok;
    t->h2c_live = false;
    t->curl_used = false;
    CURLcode rc = CURLE_OK;
#define SETOPT(opt, val) do { if (rc == CURLE_OK) rc = curl_easy_setopt(c, opt, val); } while (0)
    SETOPT(CURLOPT_URL, t->url);
    SETOPT(CURLOPT_NOSIGNAL, 1L);           /* exporter thread: no SIGALRM */
    SETOPT(CURLOPT_HTTP_VERSION, version);
    SETOPT(CURLOPT_HTTPHEADER, t->headers);
    SETOPT(CURLOPT_USERAGENT, "mstrace/" MSTRACE_VERSION_STRING " (OTLP exporter; libcurl)");
    SETOPT(CURLOPT_POST, 1L);
    SETOPT(CURLOPT_WRITEFUNCTION, on_body);
    SETOPT(CURLOPT_WRITEDATA, t);
    SETOPT(CURLOPT_HEADERFUNCTION, on_header);
    SETOPT(CURLOPT_HEADERDATA, t);
    SETOPT(CURLOPT_ERRORBUFFER, t->errbuf);
    SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
    SETOPT(CURLOPT_TCP_NODELAY, 1L);
    SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_XFERINFOFUNCTION, on_progress);
    SETOPT(CURLOPT_XFERINFODATA, t);
    SETOPT(CURLOPT_NOPROGRESS, 0L); /* the progress callback checks cancel */
    if (t->h2c_workaround) {
        SETOPT(CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
        SETOPT(CURLOPT_OPENSOCKETDATA, t);
    }
#undef SETOPT
    if (rc == CURLE_OK) rc = mst_otlp_curl_set_tls(c, &t->cfg.tls);
    if (rc != CURLE_OK) {
        MST_ERROR("OTLP exporter: libcurl option rejected: %s", curl_easy_strerror(rc));
        curl_easy_cleanup(c);
        return rc == CURLE_OUT_OF_MEMORY ? MST_ERR_NOMEM : MST_ERR_UNSUPPORTED;
    }
    t->curl = c;
    return MST_OK;
}

/* ------------------------------------------------------------- sending */

static mst_status gzip_body(mst_otlp_transport *t, const uint8_t *body, size_t len) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return MST_ERR_NOMEM;
    mst_buf_reset(&t->zbuf);
    size_t bound = deflateBound(&zs, (uLong)len) + 32;
    if (!mst_buf_reserve(&t->zbuf, bound)) {
        deflateEnd(&zs);
        return MST_ERR_NOMEM;
    }
    zs.next_in = (Bytef *)(uintptr_t)body;
    zs.avail_in = (uInt)len;
    zs.next_out = t->zbuf.data;
    zs.avail_out = (uInt)bound;
    int zrc = deflate(&zs, Z_FINISH);
    t->zbuf.len = zs.total_out;
    deflateEnd(&zs);
    return zrc == Z_STREAM_END ? MST_OK : MST_ERR_INTERNAL;
}

static mst_status grpc_frame(mst_otlp_transport *t, const uint8_t *msg, size_t len) {
    if (len > 0xffffffffu) return MST_ERR_TOO_LARGE;
    uint8_t hdr[5] = {t->cfg.gzip ? 1 : 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                      (uint8_t)(len >> 8), (uint8_t)len};
    mst_buf_reset(&t->frame);
    mst_buf_append(&t->frame, hdr, sizeof hdr);
    mst_buf_append(&t->frame, msg, len);
    return t->frame.failed ? MST_ERR_NOMEM : MST_OK;
}

typedef enum attempt_kind { ATTEMPT_OK, ATTEMPT_RETRY, ATTEMPT_FAIL } attempt_kind;

typedef struct attempt_outcome {
    attempt_kind kind;
    mst_status status;       /* for ATTEMPT_FAIL / the status if retries run out */
    long delay_hint_ms;      /* server-given delay, -1 none */
} attempt_outcome;

/* libcurl failures that are the configuration's, not the collector's
 * (TLS ones are read by mst_otlp_curl_tls_problem). */
static bool curl_error_is_config(CURLcode rc) {
    return rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT || rc == CURLE_SSL_CIPHER ||
           rc == CURLE_NOT_BUILT_IN || rc == CURLE_BAD_FUNCTION_ARGUMENT;
}

/* The collector accepted the export (gRPC OK or HTTP 2xx): records a partial
 * success from its response in r, warns about it, and returns ATTEMPT_OK. */
static attempt_outcome accepted(mst_otlp_transport *t, const mst_otlp_partial *pi,
                                mst_otlp_send_result *r) {
    r->partial_success = pi->present && (pi->rejected_spans > 0 || pi->message[0]);
    r->rejected_spans = pi->rejected_spans > 0 ? pi->rejected_spans : 0;
    if (pi->rejected_spans > 0 || pi->message[0])
        warn_limited(&t->warn_partial, "OTLP collector at %s accepted the export partially: %lld span(s) "
                     "rejected: %s", t->url, (long long)pi->rejected_spans,
                     pi->message[0] ? pi->message : "(no message)");
    attempt_outcome o = {ATTEMPT_OK, MST_OK, -1};
    return o;
}

/* The endpoint's variable for messages ("the OTLP endpoint" when the
 * program set it). */
static const char *endpoint_var(const mst_otlp_transport *t) {
    return t->cfg.endpoint_from[0] ? t->cfg.endpoint_from : "the OTLP endpoint";
}

/* A failure retrying cannot fix: logged once until the cause changes (the
 * message differs), then only counted; the batch fails at once. */
static attempt_outcome config_error(mst_otlp_transport *t, mst_otlp_send_result *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static attempt_outcome config_error(mst_otlp_transport *t, mst_otlp_send_result *r, const char *fmt, ...) {
    char msg[sizeof t->config_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->config_error = true;
    if (strcmp(msg, t->config_error) != 0) {
        MST_ERROR("OTLP export to %s: configuration error, not retried: %s", t->url, msg);
        snprintf(t->config_error, sizeof t->config_error, "%s", msg);
    }
    attempt_outcome o = {ATTEMPT_FAIL, MST_ERR_REJECTED, -1};
    return o;
}

/* An HTTP 4xx that is not 408/429: what the status says to fix. */
static attempt_outcome http_4xx(mst_otlp_transport *t, long http, mst_otlp_send_result *r) {
    if (http == 401 || http == 403)
        return config_error(t, r, "HTTP %ld: the collector refused the credentials; check "
                            "OTEL_EXPORTER_OTLP_[TRACES_]HEADERS", http);
    if (http == 404 || http == 405)
        return config_error(t, r, "HTTP %ld: no OTLP trace receiver at this URL; check %s (HTTP "
                            "receivers listen on /v1/traces, usually port 4318; gRPC on 4317)", http,
                            endpoint_var(t));
    return config_error(t, r, "HTTP %ld: the collector refused the request; check %s and the "
                        "collector's OTLP receiver", http, endpoint_var(t));
}

static attempt_outcome classify_grpc(mst_otlp_transport *t, long http, mst_otlp_send_result *r) {
    attempt_outcome o = {ATTEMPT_FAIL, MST_ERR_REJECTED, -1};
    int gs = t->grpc_status;
    r->grpc_status = gs;
    mst_otlp_partial reply;
    if (gs < 0 && http == 200 && t->grpc_reply && t->resp.len >= 5 &&
        mst_otlp_response_parse_grpc(t->resp.data, t->resp.len, &reply) == MST_OK) {
        /* A whole response message but no grpc-status: libcurl 7.88 drops
         * the trailers when the server closes the connection (or sends a
         * GOAWAY) in the same read. A unary gRPC server sends the response
         * message only for a call that succeeded, so the export was
         * accepted; failing it would count delivered spans as lost. */
        MST_DEBUG("OTLP gRPC export to %s: a response message without trailers; taken as OK", t->url);
        return accepted(t, &reply, r);
    }
    if (gs < 0) {
        /* no grpc-status: an HTTP-level failure (proxy, wrong port ...) */
        if (http == 408 || http == 429 || http == 502 || http == 503 || http == 504) {
            o.kind = ATTEMPT_RETRY;
            o.status = MST_ERR_UNAVAILABLE;
            return o;
        }
        if (http >= 400 && http < 500) return http_4xx(t, http, r);
        warn_limited(&t->warn_fail, "OTLP gRPC export to %s: HTTP %ld without grpc-status", t->url, http);
        return o;
    }
    if (gs == GRPC_OK) {
        mst_otlp_partial pi;
        /* A malformed reply keeps what was read before the fault: the
         * export itself succeeded (otlp_response.h). */
        mst_otlp_response_parse_grpc(t->resp.data, t->resp.len, &pi);
        return accepted(t, &pi, r);
    }
    bool retry = gs == GRPC_CANCELLED || gs == GRPC_DEADLINE_EXCEEDED || gs == GRPC_ABORTED ||
                 gs == GRPC_OUT_OF_RANGE || gs == GRPC_UNAVAILABLE || gs == GRPC_DATA_LOSS ||
                 (gs == GRPC_RESOURCE_EXHAUSTED && t->grpc_retry_ms >= 0);
    if (retry) {
        o.kind = ATTEMPT_RETRY;
        o.status = MST_ERR_UNAVAILABLE;
        o.delay_hint_ms = t->grpc_retry_ms;
        return o;
    }
    if (gs == GRPC_UNAUTHENTICATED || gs == GRPC_PERMISSION_DENIED)
        return config_error(t, r, "grpc-status %d %s: the collector refused the credentials; check "
                            "OTEL_EXPORTER_OTLP_[TRACES_]HEADERS", gs, t->grpc_message);
    if (gs == GRPC_UNIMPLEMENTED || gs == GRPC_NOT_FOUND)
        return config_error(t, r, "grpc-status %d %s: no OTLP trace service at this address; check %s "
                            "(gRPC receivers usually listen on port 4317)", gs, t->grpc_message,
                            endpoint_var(t));
    warn_limited(&t->warn_fail, "OTLP gRPC export to %s rejected: grpc-status %d %s", t->url, gs,
                 t->grpc_message);
    return o;
}

static attempt_outcome classify_http(mst_otlp_transport *t, long http, mst_otlp_send_result *r) {
    attempt_outcome o = {ATTEMPT_FAIL, MST_ERR_REJECTED, -1};
    if (http >= 200 && http < 300) {
        mst_otlp_partial pi; /* see classify_grpc for a malformed reply */
        if (t->cfg.protocol == MST_OTLP_HTTP_JSON)
            mst_otlp_response_parse_json(t->resp.data, t->resp.len, &pi);
        else
            mst_otlp_response_parse_proto(t->resp.data, t->resp.len, &pi);
        return accepted(t, &pi, r);
    }
    if (http == 408 || http == 429 || http == 502 || http == 503 || http == 504) {
        o.kind = ATTEMPT_RETRY;
        o.status = MST_ERR_UNAVAILABLE;
        o.delay_hint_ms = t->retry_after_ms;
        return o;
    }
    if (http >= 400 && http < 500) return http_4xx(t, http, r);
    warn_limited(&t->warn_fail, "OTLP export to %s rejected with HTTP %ld (not retried)", t->url, http);
    return o;
}

/* h2c workaround (see the top): the handle holds a connection that answered
 * and the server has sent nothing since (a GOAWAY, a reset or EOF would be
 * readable), so plain HTTP/2 reuses it. */
static bool h2c_reusable(mst_otlp_transport *t) {
    if (!t->curl || !t->h2c_live || t->h2c_reuse_off) return false;
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(t->curl, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD)
        return false;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

/* Before an h2c request: plain HTTP/2 on the connection that answered, else
 * prior knowledge on a fresh handle, so that no connection the libcurl bug
 * may have broken is asked again. *reusing says which. */
static mst_status h2c_prepare(mst_otlp_transport *t, bool *reusing) {
    *reusing = h2c_reusable(t);
    if (!*reusing && t->curl && t->curl_used) {
        curl_easy_cleanup(t->curl); /* ours (not a fork's): closing it is fine */
        t->curl = NULL;
    }
    mst_status st = t->curl ? MST_OK : make_handle(t);
    if (st != MST_OK) return st;
    curl_easy_setopt(t->curl, CURLOPT_HTTP_VERSION,
                     *reusing ? (long)CURL_HTTP_VERSION_2_0 : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    t->h2c_live = false;
    t->h2c_no_new_connection = *reusing;
    t->curl_used = true;
    return MST_OK;
}

/* After an h2c request: true when it failed on the reused connection and is
 * to be redone at once with prior knowledge (a cancel or the deadline is
 * not redone). Gives up reuse after H2C_REUSE_FAILURES_MAX in a row. */
static bool h2c_redo(mst_otlp_transport *t, bool reused, CURLcode rc) {
    if (rc == CURLE_OK) {
        t->h2c_live = true;
        if (reused) t->h2c_reuse_failures = 0;
        return false;
    }
    if (!reused || rc == CURLE_ABORTED_BY_CALLBACK || rc == CURLE_OPERATION_TIMEDOUT) return false;
    if (++t->h2c_reuse_failures >= H2C_REUSE_FAILURES_MAX && !t->h2c_reuse_off) {
        t->h2c_reuse_off = true;
        MST_WARN("OTLP gRPC export to %s: %u requests in a row failed on a reused HTTP/2 connection (last: %s); "
                 "one connection per export from now on", t->url, (unsigned)t->h2c_reuse_failures,
                 t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc));
    }
    return true;
}

/* One request with the time left to `deadline` (ns); for h2c, with the
 * redo described at the top. Counts what it sends in r. */
static CURLcode perform(mst_otlp_transport *t, const uint8_t *p, size_t n, uint64_t deadline,
                        mst_otlp_send_result *r, mst_status *st) {
    *st = MST_OK;
    for (int pass = 0;; pass++) {
        bool reused = false;
        if (t->h2c_workaround && (*st = h2c_prepare(t, &reused)) != MST_OK) return CURLE_OK;
        uint64_t now = mono_ns();
        uint64_t remaining_ms = now < deadline ? (deadline - now + 999999) / 1000000 : 1;
        t->retry_after_ms = -1;
        t->grpc_status = -1;
        t->grpc_reply = false;
        t->grpc_message[0] = '\0';
        t->grpc_retry_ms = -1;
        t->errbuf[0] = '\0';
        mst_buf_reset(&t->resp);
        curl_easy_setopt(t->curl, CURLOPT_POSTFIELDS, (const char *)p);
        curl_easy_setopt(t->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
        curl_easy_setopt(t->curl, CURLOPT_TIMEOUT_MS, (long)remaining_ms);
        /* Both counters move here, where a request is really sent, so
         * retries + 1 == attempts holds whatever stops the loop afterwards (a
         * deadline crossed or a cancel seen after a backoff sleep). */
        if (r->attempts++ > 0) r->retries++;
        CURLcode rc = curl_easy_perform(t->curl);
        t->last_rc = rc;
        if (!t->h2c_workaround) return rc;
        bool redo = h2c_redo(t, reused, rc); /* also records a success */
        if (!redo || pass > 0 || cancelled(t) || mono_ns() >= deadline) return rc;
        MST_DEBUG("OTLP gRPC export to %s: the reused connection failed (%s); again on a new one", t->url,
                  t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc));
    }
}

static attempt_outcome attempt(mst_otlp_transport *t, const uint8_t *p, size_t n, uint64_t deadline,
                               mst_otlp_send_result *r) {
    attempt_outcome o = {ATTEMPT_FAIL, MST_ERR_INTERNAL, -1};
    uint64_t now = mono_ns();
    uint64_t remaining_ms = now < deadline ? (deadline - now + 999999) / 1000000 : 1; /* TLS probe bound */
    mst_status pst;
    CURLcode rc = perform(t, p, n, deadline, r, &pst);
    if (pst != MST_OK) {
        o.status = pst;
        return o;
    }
    if (rc != CURLE_OK) {
        const char *why = t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc);
        char tls_msg[sizeof t->config_error];
        if (rc == CURLE_ABORTED_BY_CALLBACK) {
            o.status = MST_ERR_CLOSED; /* only on_progress aborts: cancelled */
        } else if (rc == CURLE_OPERATION_TIMEDOUT) {
            o.status = MST_ERR_TIMEOUT;
            warn_limited(&t->warn_fail, "OTLP export to %s timed out: %s", t->url, why);
        } else if (mst_otlp_curl_tls_problem(rc, why, t->url, &t->cfg.tls, (long)remaining_ms,
                                             tls_msg, sizeof tls_msg)) {
            return config_error(t, r, "%s", tls_msg);
        } else if (curl_error_is_config(rc)) {
            return config_error(t, r, "%s; check %s", why, endpoint_var(t));
        } else if (rc == CURLE_OUT_OF_MEMORY) {
            o.status = MST_ERR_NOMEM;
            warn_limited(&t->warn_fail, "OTLP export to %s failed: %s", t->url, why);
        } else {
            o.kind = ATTEMPT_RETRY; /* connection refused/reset, DNS, HTTP/2 stream errors ... */
            o.status = MST_ERR_UNAVAILABLE;
        }
        return o;
    }
    long http = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &http);
    r->http_status = http;
    return t->grpc ? classify_grpc(t, http, r) : classify_http(t, http, r);
}

/* Exponential backoff (1 s, 2 s, 4 s … capped) with ±25 % jitter. */
static uint64_t backoff_ms(mst_otlp_transport *t, uint32_t retry) {
    double d = BACKOFF_FIRST_MS;
    for (uint32_t i = 0; i < retry && d < BACKOFF_MAX_MS; i++) d *= 2;
    if (d > BACKOFF_MAX_MS) d = BACKOFF_MAX_MS;
    d *= 0.75 + 0.5 * rand_unit(t);
    d *= atomic_load(&g_backoff_scale);
    return (uint64_t)d;
}

mst_status mst_otlp_transport_send(mst_otlp_transport *t, const uint8_t *body, size_t len,
                                   mst_otlp_send_result *res) {
    mst_otlp_send_result local;
    mst_otlp_send_result *r = res ? res : &local;
    memset(r, 0, sizeof *r);
    r->grpc_status = -1;
    if (!t || (!body && len)) return MST_ERR_INVALID_ARG;
    uint64_t deadline = mono_ns() + (uint64_t)t->cfg.timeout_ms * 1000000ull;
    const uint8_t *p = body;
    size_t n = len;
    mst_status st = MST_OK;
    if (t->cfg.gzip) {
        if ((st = gzip_body(t, p, n)) != MST_OK) return st;
        p = t->zbuf.data;
        n = t->zbuf.len;
    }
    if (t->grpc) {
        if ((st = grpc_frame(t, p, n)) != MST_OK) return st;
        p = t->frame.data;
        n = t->frame.len;
    }
    if (!t->curl && (st = make_handle(t)) != MST_OK) return st;
    for (;;) {
        if (cancelled(t)) return MST_ERR_CLOSED;
        uint64_t now = mono_ns();
        if (now >= deadline) return r->attempts ? MST_ERR_UNAVAILABLE : MST_ERR_TIMEOUT;
        attempt_outcome o = attempt(t, p, n, deadline, r);
        if (o.kind != ATTEMPT_RETRY) return o.status;
        uint64_t delay = o.delay_hint_ms >= 0 ? (uint64_t)o.delay_hint_ms : backoff_ms(t, r->retries);
        now = mono_ns();
        /* Compared in ms so a large delay cannot wrap the sum. */
        if (now >= deadline || delay >= (deadline - now) / 1000000ull) {
            warn_limited(&t->warn_fail, "OTLP export to %s failed after %u attempt(s) (last: %s, HTTP %ld, "
                         "grpc-status %d); giving up within the %u ms export timeout",
                         t->url, r->attempts,
                         t->errbuf[0] ? t->errbuf : curl_easy_strerror(t->last_rc),
                         r->http_status, r->grpc_status, t->cfg.timeout_ms);
            return o.status;
        }
        MST_DEBUG("OTLP export to %s: retry %u in %llu ms", t->url, r->attempts,
                  (unsigned long long)delay);
        /* A loaded machine may wake this thread long after `delay` (the
         * overrun knob reproduces that in tests): the loop head then sees
         * the deadline and stops without counting a retry it never sent. */
        if (!sleep_cancellable(t, delay + atomic_load(&g_backoff_overrun_ms))) return MST_ERR_CLOSED;
    }
}

void mst_otlp_transport_after_fork_child(mst_otlp_transport *t) {
    if (!t || !t->curl) return;
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(t->curl, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK && fd != CURL_SOCKET_BAD)
        close(fd); /* our copy only: sends nothing, the parent's stays open */
    for (size_t i = 0; i < FORK_ORPHANS_MAX; i++) {
        if (!g_fork_orphans[i]) {
            g_fork_orphans[i] = t->curl; /* deliberately leaked, see the top */
            break;
        }
    }
    t->curl = NULL;
    t->warn_fail.last_ns = t->warn_partial.last_ns = 0;
    t->rng ^= (uint64_t)getpid() << 17;
}

void mst_otlp_transport_adopt_log_state(mst_otlp_transport *t, const mst_otlp_transport *from) {
    if (t && from) snprintf(t->config_error, sizeof t->config_error, "%s", from->config_error);
}

void mst_otlp_transport_set_cancel(mst_otlp_transport *t, const atomic_bool *flag) {
    if (t) t->cancel = flag;
}

void mst_otlp_transport_destroy(mst_otlp_transport *t) {
    if (!t) return;
    if (t->curl) curl_easy_cleanup(t->curl);
    curl_slist_free_all(t->headers);
    mst_buf_free(&t->zbuf);
    mst_buf_free(&t->frame);
    mst_buf_free(&t->resp);
    free(t);
}
