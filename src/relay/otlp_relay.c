/*
 * otlp_relay.c — the MindIE OTLP relay (see otlp_relay.h for the contract).
 *
 * Threads: the daemon's epoll thread validates and enqueues (never blocks:
 * one malloc and a short critical section); the sender thread owns the
 * transport, batches, posts and sleeps through backoff. They share only the
 * queue and the sender-side counters, both under one mutex.
 *
 * Why items stay queued while their batch is in flight: the byte/item bound
 * then covers everything the relay holds (memory stays bounded however long
 * the collector is down), and a failed batch is simply re-sent from the head.
 *
 * Stop: close() sets a flush deadline and waits for the sender; during the
 * flush every send uses a transport whose timeout fits in what is left of
 * the deadline, a failure ends the flush, and whatever is still queued is
 * counted as lost. A send already in flight when the stop arrives (it may
 * have the full export timeout) is cancelled through the transports' cancel
 * flag once the deadline passes; its payloads count as lost at exit (the
 * collector may still have received them).
 *
 * gRPC over plain http on libcurl < 8 (h2c reuse bug curl#10634) needs no
 * care here: the transport itself works around it (otlp_transport.c).
 */
#include "relay/otlp_relay.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err_text.h"
#include "core/log.h"
#include "otlp/otlp_config.h"
#include "otlp/otlp_transport.h"
#include "wire/buf.h"
#include "wire/otlp_decode.h"

#define DROP_WARN_INTERVAL_MS 10000u
#define DOWN_WARN_INTERVAL_MS 10000u
#define MIN_DRAIN_TIMEOUT_MS 50u

typedef struct relay_item {
    struct relay_item *next;
    uint32_t spans;
    uint32_t len;
    uint8_t data[];
} relay_item;

struct mst_otlp_relay {
    mst_otlp_config cfg;
    mst_otlp_relay_options opt;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;       /* sender waits: items, stop, backoff end */
    pthread_cond_t cv_done;       /* close() waits: sender finished */
    pthread_t thread;
    bool thread_started;

    /* ---- under mu */
    relay_item *head, *tail;
    uint64_t q_items, q_bytes;
    bool stopping;
    bool sender_done;
    atomic_bool cancel;           /* set by close() when the flush bound ends */
    uint64_t flush_deadline_ms;
    uint64_t forwarded, spans_forwarded, spans_refused;
    uint64_t failed, spans_failed;
    uint64_t lost_at_exit, spans_lost;
    uint64_t retries, send_errors, batches;

    /* ---- epoll thread only */
    uint64_t received, rejected, spans_received;
    uint64_t dropped_full, spans_dropped_full;
    uint64_t drops_logged;        /* dropped_full at the last drop warning */
    uint64_t last_drop_warn_ms;
    bool warned_queue;            /* the warn_queued_items line was printed */
    uint64_t last_queue_warn_ms;

    /* ---- sender thread only */
    mst_otlp_transport *transport;
    mst_otlp_transport *drain;    /* stop-time transport with a short timeout */
    uint32_t drain_timeout_ms;
    mst_buf batch;
    uint32_t backoff_ms;          /* 0: the collector is considered up */
    uint64_t down_since_ms;
    uint64_t last_down_warn_ms;
    uint64_t down_failures;
};

/* ------------------------------------------------------------ helpers */

static uint64_t now_ms(void) { return mst_daemon_now_ms(); }

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* ----------------------------------------------------- configuration */

/* "http(s)://[user@]host:port[/path]" with a port in 1..65535. Fills
 * *path_at with the offset of the path (or the end). */
static bool has_explicit_port(const char *url, size_t *path_at) {
    const char *auth = strstr(url, "://");
    if (!auth) return false;
    auth += 3;
    size_t alen = strcspn(auth, "/?#");
    *path_at = (size_t)(auth - url) + alen;
    const char *at = memchr(auth, '@', alen);
    if (at) {
        alen -= (size_t)(at + 1 - auth);
        auth = at + 1;
    }
    const char *end = auth + alen;
    const char *colon;
    if (alen && auth[0] == '[') {
        const char *rb = memchr(auth, ']', alen);
        if (!rb || rb + 1 >= end || rb[1] != ':') return false;
        colon = rb + 1;
    } else {
        colon = NULL;
        for (const char *c = auth; c < end; c++)
            if (*c == ':') colon = c;
        if (!colon || colon == auth) return false; /* no port, or no host */
    }
    size_t digits = (size_t)(end - colon - 1);
    if (digits == 0 || digits > 5) return false;
    unsigned long port = 0;
    for (const char *c = colon + 1; c < end; c++) {
        if (*c < '0' || *c > '9') return false;
        port = port * 10 + (unsigned long)(*c - '0');
    }
    return port >= 1 && port <= 65535;
}

static mst_status read_protocol(mst_otlp_protocol *out, char *err, size_t err_size) {
    const char *var = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
    const char *v = env_nonempty(var);
    if (!v) v = env_nonempty(var = "OTEL_EXPORTER_OTLP_PROTOCOL");
    if (!v) {
        mst_err_set(err, err_size, "OTEL_EXPORTER_OTLP_PROTOCOL is not set: the OTLP relay needs it "
                "(http/protobuf or grpc), e.g. OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf");
        return MST_ERR_INVALID_ARG;
    }
    if (strcmp(v, "http/protobuf") == 0) *out = MST_OTLP_HTTP_PROTOBUF;
    else if (strcmp(v, "grpc") == 0) *out = MST_OTLP_GRPC;
    else {
        mst_err_set(err, err_size, "%s=\"%s\": the OTLP relay supports http/protobuf or grpc%s", var, v,
                strcmp(v, "http/json") == 0 ? " (it forwards binary protobuf as received)" : "");
        return MST_ERR_UNSUPPORTED;
    }
    return MST_OK;
}

static mst_status read_endpoint(mst_otlp_protocol proto, char *out, size_t out_size, char *err,
                                size_t err_size) {
    const char *var = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
    const char *v = env_nonempty(var);
    bool as_is = v != NULL;
    if (!v) v = env_nonempty(var = "OTEL_EXPORTER_OTLP_ENDPOINT");
    if (!v) {
        mst_err_set(err, err_size, "OTEL_EXPORTER_OTLP_ENDPOINT is not set: the OTLP relay needs the "
                "collector URL with an explicit port, e.g. http://localhost:4318/v1/traces "
                "(http/protobuf) or http://localhost:4317 (grpc)");
        return MST_ERR_INVALID_ARG;
    }
    mst_status st = mst_otlp_url_check_basic(v, var, err, err_size);
    if (st != MST_OK) return st;
    size_t path_at = 0;
    if (!has_explicit_port(v, &path_at)) {
        mst_err_set(err, err_size, "%s=\"%s\": the URL needs a host and an explicit port "
                "(e.g. http://localhost:4318)", var, v);
        return MST_ERR_PARSE;
    }
    size_t n = strlen(v);
    const char *suffix = "";
    if (!as_is && proto == MST_OTLP_HTTP_PROTOBUF) {
        static const char tail[] = "/v1/traces";
        size_t tl = sizeof tail - 1;
        bool has_tail = n - path_at >= tl && strcmp(v + n - tl, tail) == 0;
        if (!has_tail) {
            while (n > path_at && v[n - 1] == '/') n--; /* no "//v1/traces" */
            suffix = tail;
        }
    }
    if (n + strlen(suffix) >= out_size) {
        mst_err_set(err, err_size, "%s is longer than %zu bytes", var, out_size - 1);
        return MST_ERR_TOO_LARGE;
    }
    snprintf(out, out_size, "%.*s%s", (int)n, v, suffix);
    return MST_OK;
}

mst_status mst_otlp_relay_config_from_env(mst_otlp_config *cfg, char *err, size_t err_size) {
    if (!cfg) return MST_ERR_INVALID_ARG;
    if (err && err_size) err[0] = '\0';
    mst_otlp_protocol proto;
    char endpoint[sizeof cfg->endpoint];
    mst_status st = read_protocol(&proto, err, err_size);
    if (st == MST_OK) st = read_endpoint(proto, endpoint, sizeof endpoint, err, err_size);
    if (st != MST_OK) return st;
    /* Headers, timeout and compression follow the exporter's rules; its
     * endpoint and protocol are replaced by the relay's stricter ones. */
    if ((st = mst_otlp_config_from_env(cfg, err, err_size)) != MST_OK) return st;
    cfg->protocol = proto;
    snprintf(cfg->endpoint, sizeof cfg->endpoint, "%s", endpoint);
    return MST_OK;
}

/* ------------------------------------------------------------ lifetime */

static void apply_defaults(mst_otlp_relay_options *o) {
    if (!o->queue_max_bytes) o->queue_max_bytes = MST_RELAY_DEFAULT_QUEUE_BYTES;
    if (!o->queue_max_items) o->queue_max_items = MST_RELAY_DEFAULT_QUEUE_ITEMS;
    if (!o->batch_max_items) o->batch_max_items = MST_RELAY_DEFAULT_BATCH_ITEMS;
    if (!o->batch_max_bytes) o->batch_max_bytes = MST_RELAY_DEFAULT_BATCH_BYTES;
    if (!o->backoff_min_ms) o->backoff_min_ms = MST_RELAY_DEFAULT_BACKOFF_MIN_MS;
    if (!o->backoff_max_ms) o->backoff_max_ms = MST_RELAY_DEFAULT_BACKOFF_MAX_MS;
    if (o->backoff_max_ms < o->backoff_min_ms) o->backoff_max_ms = o->backoff_min_ms;
    if (!o->flush_timeout_ms) o->flush_timeout_ms = MST_RELAY_DEFAULT_FLUSH_MS;
    /* Well before the bound, or the warning and the first drop come together. */
    if (!o->warn_queued_items || o->warn_queued_items >= o->queue_max_items)
        o->warn_queued_items = o->queue_max_items / MST_RELAY_WARN_FRACTION;
    if (!o->warn_queued_items) o->warn_queued_items = 1;
}

mst_status mst_otlp_relay_create(const mst_otlp_config *cfg, const mst_otlp_relay_options *opts,
                                 mst_otlp_relay **out) {
    if (!cfg || !out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    mst_otlp_relay *r = calloc(1, sizeof *r);
    if (!r) return MST_ERR_NOMEM;
    r->cfg = *cfg;
    if (opts) r->opt = *opts;
    apply_defaults(&r->opt);
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv_work, &ca);
    pthread_cond_init(&r->cv_done, &ca);
    pthread_condattr_destroy(&ca);
    mst_buf_init(&r->batch, 0);
    atomic_init(&r->cancel, false);
    mst_status st = mst_otlp_transport_create(&r->cfg, &r->transport);
    if (st != MST_OK) {
        mst_otlp_relay_destroy(r);
        return st;
    }
    mst_otlp_transport_set_cancel(r->transport, &r->cancel);
    *out = r;
    return MST_OK;
}

static void free_list(relay_item *it) {
    while (it) {
        relay_item *next = it->next;
        free(it);
        it = next;
    }
}

void mst_otlp_relay_destroy(mst_otlp_relay *r) {
    if (!r) return;
    free_list(r->head);
    mst_otlp_transport_destroy(r->transport);
    mst_otlp_transport_destroy(r->drain);
    mst_buf_free(&r->batch);
    pthread_cond_destroy(&r->cv_work);
    pthread_cond_destroy(&r->cv_done);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* ------------------------------------------------------- epoll thread */

static size_t item_cost(size_t len) { return sizeof(relay_item) + len; }

static void count_drop(mst_otlp_relay *r, uint64_t spans) {
    r->dropped_full++;
    r->spans_dropped_full += spans;
    if (r->dropped_full == 1) {
        MST_WARN("Trace data queue is full, discarding the oldest data. (upstream's words; this relay "
                 "keeps the oldest, which are being delivered, and discards the NEWEST payloads until "
                 "the collector catches up) OTLP relay queue: %u payloads / %llu bytes max; every "
                 "drop is counted", r->opt.queue_max_items, (unsigned long long)r->opt.queue_max_bytes);
        r->drops_logged = 1;
        r->last_drop_warn_ms = now_ms();
    }
}

void mst_otlp_relay_on_frame(void *self, const uint8_t *payload, size_t len, uint64_t conn_id) {
    mst_otlp_relay *r = self;
    r->received++;
    mst_otlp_counts counts;
    if (mst_otlp_validate(payload, len, &counts) != MST_OK) {
        r->rejected++;
        if (mst_log_this_count(r->rejected))
            MST_WARN("rejected a %zu-byte payload from connection %llu: not a valid "
                     "ExportTraceServiceRequest (%llu rejected so far)", len,
                     (unsigned long long)conn_id, (unsigned long long)r->rejected);
        return;
    }
    r->spans_received += counts.spans;
    uint32_t spans = counts.spans > UINT32_MAX ? UINT32_MAX : (uint32_t)counts.spans;
    size_t cost = item_cost(len);
    /* This thread is the only producer and the sender only removes items,
     * so room seen here is still there after the unlocked malloc. Checking
     * first keeps a full queue from costing a malloc/free per payload. */
    pthread_mutex_lock(&r->mu);
    bool room = r->q_items < r->opt.queue_max_items && r->q_bytes + cost <= r->opt.queue_max_bytes;
    pthread_mutex_unlock(&r->mu);
    relay_item *it = room && len <= UINT32_MAX ? malloc(cost) : NULL;
    if (!it) {
        count_drop(r, spans);
        return;
    }
    it->next = NULL;
    it->spans = spans;
    it->len = (uint32_t)len;
    memcpy(it->data, payload, len);
    pthread_mutex_lock(&r->mu);
    if (r->tail) r->tail->next = it;
    else r->head = it;
    r->tail = it;
    r->q_items++;
    r->q_bytes += cost;
    uint64_t items = r->q_items, bytes = r->q_bytes;
    pthread_cond_signal(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
    bool backlog = items >= r->opt.warn_queued_items ||
                   bytes >= r->opt.queue_max_bytes / MST_RELAY_WARN_FRACTION;
    if (backlog && !r->warned_queue) {
        r->warned_queue = true;
        r->last_queue_warn_ms = now_ms();
        MST_WARN("Trace data is being stacked: %llu payloads (%llu bytes) queued for the collector at "
                 "%s (is it down or slow?); at %u payloads or %llu bytes the newest are dropped",
                 (unsigned long long)items, (unsigned long long)bytes, r->cfg.endpoint,
                 r->opt.queue_max_items, (unsigned long long)r->opt.queue_max_bytes);
    }
}

/* ------------------------------------------------------- sender thread */

static void pop_items(mst_otlp_relay *r, uint32_t n, relay_item **freed) {
    relay_item *first = r->head, *last = NULL;
    for (uint32_t i = 0; i < n; i++) {
        last = r->head;
        r->q_items--;
        r->q_bytes -= item_cost(last->len);
        r->head = last->next;
    }
    if (!r->head) r->tail = NULL;
    if (last) last->next = NULL;
    *freed = first;
}

static void abs_deadline(struct timespec *ts, uint64_t at_ms) {
    ts->tv_sec = (time_t)(at_ms / 1000);
    ts->tv_nsec = (long)(at_ms % 1000) * 1000000L;
}

/* Batch view: the first n items (≤ batch caps, at least one). */
static uint32_t batch_size(const mst_otlp_relay *r, uint64_t *spans) {
    uint32_t n = 0;
    uint64_t bytes = 0;
    *spans = 0;
    for (const relay_item *it = r->head; it && n < r->opt.batch_max_items; it = it->next) {
        if (n > 0 && bytes + it->len > r->opt.batch_max_bytes) break;
        bytes += it->len;
        *spans += it->spans;
        n++;
    }
    return n;
}

/* The transport a send uses: the normal one, or during the stop flush one
 * whose timeout fits in what is left of the flush deadline. NULL: no time. */
static mst_otlp_transport *pick_transport(mst_otlp_relay *r, bool stopping, uint64_t deadline) {
    if (!stopping) return r->transport;
    uint64_t now = now_ms();
    if (now + MIN_DRAIN_TIMEOUT_MS > deadline) return NULL;
    uint64_t left = deadline - now;
    if (left >= r->cfg.timeout_ms) return r->transport;
    if (!r->drain || r->drain_timeout_ms > left) {
        mst_otlp_transport_destroy(r->drain);
        r->drain = NULL;
        mst_otlp_config c = r->cfg;
        c.timeout_ms = (uint32_t)left;
        if (mst_otlp_transport_create(&c, &r->drain) != MST_OK) return NULL;
        mst_otlp_transport_set_cancel(r->drain, &r->cancel);
        mst_otlp_transport_adopt_log_state(r->drain, r->transport); /* a cause is logged once */
        r->drain_timeout_ms = c.timeout_ms;
    }
    return r->drain;
}

static bool retryable(mst_status st) {
    return st == MST_ERR_UNAVAILABLE || st == MST_ERR_TIMEOUT || st == MST_ERR_NOMEM;
}

static void note_down(mst_otlp_relay *r, mst_status st, const mst_otlp_send_result *res,
                      uint64_t queued) {
    uint64_t now = now_ms();
    r->down_failures++;
    if (r->backoff_ms == 0) {
        r->backoff_ms = r->opt.backoff_min_ms;
        r->down_since_ms = now;
    } else {
        uint64_t next = (uint64_t)r->backoff_ms * 2;
        r->backoff_ms = next > r->opt.backoff_max_ms ? r->opt.backoff_max_ms : (uint32_t)next;
    }
    if (r->stopping) {
        MST_WARN("OTLP relay: sending to %s failed while stopping (%s); %llu payloads left "
                 "unsent", r->cfg.endpoint, mst_strerror(st), (unsigned long long)queued);
    } else if (r->down_failures == 1 || now - r->last_down_warn_ms >= DOWN_WARN_INTERVAL_MS) {
        MST_WARN("OTLP relay: sending to %s failed (%s, HTTP %ld, grpc-status %d); %llu "
                 "payloads queued, retrying in %u ms (%llu failed sends so far)",
                 r->cfg.endpoint, mst_strerror(st), res->http_status, res->grpc_status,
                 (unsigned long long)queued, r->backoff_ms,
                 (unsigned long long)r->down_failures);
        r->last_down_warn_ms = now;
    }
}

static void note_up(mst_otlp_relay *r) {
    if (r->backoff_ms != 0)
        MST_INFO("OTLP relay: delivery to %s resumed after %llu failed sends (%llu ms)",
                 r->cfg.endpoint, (unsigned long long)r->down_failures,
                 (unsigned long long)(now_ms() - r->down_since_ms));
    r->backoff_ms = 0;
    r->down_failures = 0;
}

/* Concatenates the batch (protobuf merge of repeated resource_spans) unless
 * it is a single item, which is sent from its own bytes. */
static bool build_body(mst_otlp_relay *r, relay_item *first, uint32_t n, const uint8_t **body,
                       size_t *len) {
    if (n == 1) {
        *body = first->data;
        *len = first->len;
        return true;
    }
    mst_buf_reset(&r->batch);
    /* Never read the last item's next: the epoll thread may be linking a
     * new tail behind it right now. */
    relay_item *it = first;
    for (uint32_t i = 0;;) {
        mst_buf_append(&r->batch, it->data, it->len);
        if (++i == n) break;
        it = it->next;
    }
    if (r->batch.failed) return false;
    *body = r->batch.data;
    *len = r->batch.len;
    return true;
}

/* Handles the outcome of one send under mu; returns the items to free. */
static relay_item *settle(mst_otlp_relay *r, uint32_t n, uint64_t spans, mst_status st,
                          const mst_otlp_send_result *res, bool *give_up) {
    relay_item *freed = NULL;
    r->retries += res->retries;
    if (st == MST_ERR_CLOSED) {
        /* cancelled by close(): the items stay queued and count as lost */
        *give_up = true;
        return NULL;
    }
    if (st == MST_OK) {
        pop_items(r, n, &freed);
        uint64_t refused = res->rejected_spans > 0 ? (uint64_t)res->rejected_spans : 0;
        if (refused > spans) refused = spans;
        r->forwarded += n;
        r->spans_forwarded += spans - refused;
        r->spans_refused += refused;
        r->batches++;
        return freed;
    }
    if (retryable(st)) {
        r->send_errors++;
        note_down(r, st, res, r->q_items);
        if (r->stopping) *give_up = true;
        return NULL;
    }
    /* A non-retryable answer (4xx, bad config): retrying would fail again.
     * A configuration error was logged by the transport, once. */
    pop_items(r, n, &freed);
    r->failed += n;
    r->spans_failed += spans;
    r->send_errors++;
    if (!res->config_error && mst_log_this_count(r->failed))
        MST_WARN("OTLP relay: the collector at %s refused %u payload(s) (%s, HTTP %ld, "
                 "grpc-status %d); not retried (%llu failed so far)", r->cfg.endpoint, n,
                 mst_strerror(st), res->http_status, res->grpc_status,
                 (unsigned long long)r->failed);
    return freed;
}

static void *sender_main(void *arg) {
    mst_otlp_relay *r = arg;
    uint64_t backoff_until = 0;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->head && !r->stopping) pthread_cond_wait(&r->cv_work, &r->mu);
        if (!r->head) break;
        bool stopping = r->stopping;
        uint64_t deadline = r->flush_deadline_ms;
        uint64_t now = now_ms();
        if (!stopping && backoff_until > now) {
            struct timespec ts;
            abs_deadline(&ts, backoff_until);
            pthread_cond_timedwait(&r->cv_work, &r->mu, &ts);
            continue;
        }
        if (r->backoff_ms) r->retries++; /* a re-send after a failed batch */
        uint64_t spans = 0;
        uint32_t n = batch_size(r, &spans);
        relay_item *first = r->head;
        pthread_mutex_unlock(&r->mu);

        /* Items [first, n) are ours to read: only this thread removes items. */
        mst_otlp_transport *t = pick_transport(r, stopping, deadline);
        if (!t) {
            pthread_mutex_lock(&r->mu);
            break; /* the flush deadline is (nearly) over */
        }
        const uint8_t *body = NULL;
        size_t len = 0;
        mst_otlp_send_result res;
        memset(&res, 0, sizeof res);
        res.grpc_status = -1;
        mst_status st;
        if (!build_body(r, first, n, &body, &len)) st = MST_ERR_NOMEM;
        else st = mst_otlp_transport_send(t, body, len, &res);

        pthread_mutex_lock(&r->mu);
        bool give_up = false;
        relay_item *freed = settle(r, n, spans, st, &res, &give_up);
        if (st == MST_OK) note_up(r);
        backoff_until = r->backoff_ms ? now_ms() + r->backoff_ms : 0;
        if (freed) {
            pthread_mutex_unlock(&r->mu);
            free_list(freed);
            pthread_mutex_lock(&r->mu);
        }
        if (give_up) break;
    }
    /* Stopping: whatever is left could not be flushed in time. */
    relay_item *left = r->head;
    for (relay_item *it = left; it; it = it->next) {
        r->lost_at_exit++;
        r->spans_lost += it->spans;
    }
    r->head = r->tail = NULL;
    r->q_items = r->q_bytes = 0;
    r->sender_done = true;
    pthread_cond_broadcast(&r->cv_done);
    pthread_mutex_unlock(&r->mu);
    free_list(left);
    return NULL;
}

/* ------------------------------------------------------------- service */

static mst_status svc_open(void *self, char *err, size_t err_size) {
    mst_otlp_relay *r = self;
    int rc = pthread_create(&r->thread, NULL, sender_main, r);
    if (rc != 0) {
        mst_err_set(err, err_size, "cannot start the OTLP sender thread: %s", strerror(rc));
        return MST_ERR_NOMEM;
    }
    r->thread_started = true;
    MST_INFO("OTLP relay forwarding to %s (%s), queue up to %u payloads / %llu bytes",
             r->cfg.endpoint, r->cfg.protocol == MST_OTLP_GRPC ? "grpc" : "http/protobuf",
             r->opt.queue_max_items, (unsigned long long)r->opt.queue_max_bytes);
    return MST_OK;
}

/* Rate-limited drop report (the epoll thread's periodic hook). */
static int svc_after_batch(void *self, uint64_t now) {
    mst_otlp_relay *r = self;
    if (r->dropped_full > r->drops_logged && now - r->last_drop_warn_ms >= DROP_WARN_INTERVAL_MS) {
        MST_WARN("Trace data queue is full, discarding the oldest data. (upstream's words; the newest "
                 "are discarded here) OTLP relay: %llu payloads (%llu spans) dropped so far",
                 (unsigned long long)r->dropped_full, (unsigned long long)r->spans_dropped_full);
        r->drops_logged = r->dropped_full;
        r->last_drop_warn_ms = now;
    }
    if (r->warned_queue) {
        pthread_mutex_lock(&r->mu);
        bool empty = r->q_items == 0;
        pthread_mutex_unlock(&r->mu);
        /* Re-arm once the backlog has cleared, at most once per interval. */
        if (empty && now - r->last_queue_warn_ms >= DOWN_WARN_INTERVAL_MS) r->warned_queue = false;
    }
    return r->dropped_full > r->drops_logged ? (int)DROP_WARN_INTERVAL_MS : -1;
}

void mst_otlp_relay_get_stats(mst_otlp_relay *r, mst_otlp_relay_stats *o) {
    memset(o, 0, sizeof *o);
    o->received = r->received;
    o->rejected = r->rejected;
    o->spans_received = r->spans_received;
    o->dropped_full = r->dropped_full;
    pthread_mutex_lock(&r->mu);
    o->forwarded = r->forwarded;
    o->spans_forwarded = r->spans_forwarded;
    o->spans_refused = r->spans_refused;
    o->spans_dropped = r->spans_dropped_full + r->spans_lost;
    o->failed = r->failed;
    o->spans_failed = r->spans_failed;
    o->lost_at_exit = r->lost_at_exit;
    o->retries = r->retries;
    o->send_errors = r->send_errors;
    o->batches = r->batches;
    o->queued = r->q_items;
    o->queued_bytes = r->q_bytes;
    pthread_mutex_unlock(&r->mu);
}

static void svc_get_counts(void *self, mst_daemon_counts *out) {
    mst_otlp_relay_stats s;
    mst_otlp_relay_get_stats(self, &s);
    memset(out, 0, sizeof *out);
    out->received = s.received;
    out->written = s.forwarded; /* payloads, like received/rejected/dropped */
    out->rejected = s.rejected;
    out->dropped = s.dropped_full + s.failed + s.lost_at_exit;
    snprintf(out->dropped_why, sizeof out->dropped_why,
             "queue_full=%llu refused_upstream=%llu unsent_at_exit=%llu",
             (unsigned long long)s.dropped_full, (unsigned long long)s.failed,
             (unsigned long long)s.lost_at_exit);
    snprintf(out->extra, sizeof out->extra,
             /* extra[] is 256 bytes: forwarded is already "written" */
             "relay: spans_forwarded=%llu spans_received=%llu dropped_full=%llu failed=%llu "
             "lost_at_exit=%llu spans_dropped=%llu retries=%llu send_errors=%llu batches=%llu "
             "queued=%llu queued_bytes=%llu",
             (unsigned long long)s.spans_forwarded, (unsigned long long)s.spans_received,
             (unsigned long long)s.dropped_full, (unsigned long long)s.failed,
             (unsigned long long)s.lost_at_exit, (unsigned long long)s.spans_dropped,
             (unsigned long long)s.retries, (unsigned long long)s.send_errors,
             (unsigned long long)s.batches, (unsigned long long)s.queued,
             (unsigned long long)s.queued_bytes);
}

/* Waits for the sender until the flush deadline; past it, cancels the send
 * in flight (the transport returns MST_ERR_CLOSED within about a second)
 * so the stop bound is not overrun by a whole export timeout. */
static void wait_sender_or_cancel(mst_otlp_relay *r) {
    pthread_mutex_lock(&r->mu);
    struct timespec ts;
    abs_deadline(&ts, r->flush_deadline_ms);
    while (!r->sender_done && now_ms() < r->flush_deadline_ms)
        pthread_cond_timedwait(&r->cv_done, &r->mu, &ts);
    bool done = r->sender_done;
    pthread_mutex_unlock(&r->mu);
    if (!done) {
        MST_WARN("OTLP relay: the flush bound (%u ms) expired with a send to %s in flight; "
                 "cancelling it", r->opt.flush_timeout_ms, r->cfg.endpoint);
        atomic_store_explicit(&r->cancel, true, memory_order_release);
    }
}

/* Asks the sender to flush within flush_timeout_ms, waits for it, joins it
 * and prints the summary. Losing spans to a down collector is reported, not
 * an error: the exit code stays 0. */
static mst_status svc_close(void *self) {
    mst_otlp_relay *r = self;
    if (r->thread_started) {
        pthread_mutex_lock(&r->mu);
        uint64_t queued = r->q_items;
        r->flush_deadline_ms = now_ms() + r->opt.flush_timeout_ms;
        r->stopping = true;
        pthread_cond_broadcast(&r->cv_work);
        pthread_mutex_unlock(&r->mu);
        if (queued)
            MST_INFO("OTLP relay: flushing %llu queued payloads (up to %u ms)",
                     (unsigned long long)queued, r->opt.flush_timeout_ms);
        wait_sender_or_cancel(r);
        pthread_join(r->thread, NULL);
        r->thread_started = false;
    }
    mst_otlp_relay_stats s;
    mst_otlp_relay_get_stats(r, &s);
    MST_INFO("OTLP relay summary: received=%llu rejected=%llu forwarded=%llu dropped_full=%llu "
             "failed=%llu lost_at_exit=%llu spans_received=%llu spans_forwarded=%llu "
             "spans_dropped=%llu spans_failed=%llu retries=%llu",
             (unsigned long long)s.received, (unsigned long long)s.rejected,
             (unsigned long long)s.forwarded, (unsigned long long)s.dropped_full,
             (unsigned long long)s.failed, (unsigned long long)s.lost_at_exit,
             (unsigned long long)s.spans_received, (unsigned long long)s.spans_forwarded,
             (unsigned long long)s.spans_dropped, (unsigned long long)s.spans_failed,
             (unsigned long long)s.retries);
    uint64_t lost = s.dropped_full + s.failed + s.lost_at_exit;
    if (lost)
        MST_WARN("OTLP relay: %llu of %llu accepted payloads were not delivered (queue full: %llu, "
                 "refused upstream: %llu, unsent at exit: %llu)", (unsigned long long)lost,
                 (unsigned long long)(s.received - s.rejected), (unsigned long long)s.dropped_full,
                 (unsigned long long)s.failed, (unsigned long long)s.lost_at_exit);
    return MST_OK;
}

void mst_otlp_relay_service(mst_otlp_relay *r, mst_daemon_service *svc) {
    memset(svc, 0, sizeof *svc);
    svc->name = "OTLP relay";
    svc->self = r;
    svc->open = svc_open;
    svc->on_frame = mst_otlp_relay_on_frame;
    svc->after_batch = svc_after_batch;
    svc->get_counts = svc_get_counts;
    svc->close = svc_close;
}
