/*
 * request_pipeline.c — an LLM serving loop traced with libmstrace, using only
 * the public header. It shows the shape of a real integration:
 *   - a tracer configured from the environment (OTEL_BSP_*), feeding the
 *     Perfetto forwarder (socket from MSTRACE_PERFETTO_SOCKET, default
 *     MSP_PERFETTO_SOCKET) and, when OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT is
 *     set, an OTLP collector such as Jaeger;
 *   - an "API server" thread (main) that receives requests: one root
 *     "llm_request" SERVER span per request, carrying request.id;
 *   - an "engine core" thread that runs scheduler steps: a
 *     "vllm.scheduler.schedule" span linking every request it scheduled
 *     (link attribute request.id: request links, which Jaeger shows as
 *     references and the Perfetto files join through request.ids, with no
 *     arrow), then "vllm.model.execute" and "vllm.output.process";
 *   - one request aborted with status ERROR, to show the error path.
 * Every span carries process.pid and thread.id so the Perfetto timeline has
 * real process/thread tracks. Sleeps are small but realistic (schedule
 * ~0.2 ms, model 1–5 ms) so the timeline reads like a serving engine.
 *
 * Usage: example_request_pipeline [--requests N] [--steps N]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mstrace_otlp.h"

#define MAX_BATCH 8
#define ERROR_REQUEST_INDEX 2 /* this request is aborted (if it exists) */
#define ABORT_AFTER_TOKENS 2

typedef struct request {
    char id[32];
    mst_span *span;          /* the llm_request root span */
    mst_span_context ctx;    /* its context, for the scheduler's links */
    int prompt_tokens;
    int max_tokens;
    int generated;
    bool done;
} request;

typedef struct sim {
    mst_tracer *tracer;
    const mst_scope *scope_request, *scope_schedule, *scope_execute;
    request *reqs;
    int n_requests;
    int max_steps;
    int steps_run;
    atomic_int arrived;      /* requests [0, arrived) are visible to the engine */
    uint32_t rng_api;        /* one generator per thread: no shared state */
    uint32_t rng_engine;
} sim;

/* ------------------------------------------------------------- helpers */

static int64_t thread_id(void) { return (int64_t)syscall(SYS_gettid); }

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* xorshift: reproducible runs without touching the C library's rand state. */
static uint32_t next_rand(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static int rand_between(uint32_t *s, int lo, int hi) { return lo + (int)(next_rand(s) % (uint32_t)(hi - lo + 1)); }

/* process.pid / thread.id on every span: the Perfetto tracks come from them. */
static void set_origin(mst_span *span) {
    mst_span_set_int(span, "process.pid", (int64_t)getpid());
    mst_span_set_int(span, "thread.id", thread_id());
}

/* ------------------------------------------------------- API server side */

static void receive_request(sim *s, int i) {
    request *r = &s->reqs[i];
    snprintf(r->id, sizeof r->id, "req-%04d", i);
    r->prompt_tokens = rand_between(&s->rng_api, 16, 512);
    r->max_tokens = rand_between(&s->rng_api, 3, 12);
    r->span = mst_span_start(s->tracer, s->scope_request, "llm_request", MST_SPAN_KIND_SERVER, NULL, 0);
    set_origin(r->span);
    mst_span_set_str(r->span, "request.id", r->id);
    mst_span_set_str(r->span, "gen_ai.request.model", "demo-llm-7b");
    mst_span_set_int(r->span, "gen_ai.usage.prompt_tokens", r->prompt_tokens);
    mst_span_set_int(r->span, "gen_ai.request.max_tokens", r->max_tokens);
    mst_span_get_context(r->span, &r->ctx);
    /* Publish: the engine reads the request only after this store. */
    atomic_store_explicit(&s->arrived, i + 1, memory_order_release);
}

/* ----------------------------------------------------------- engine side */

static void finish_request(request *r, const char *reason) {
    mst_span_set_int(r->span, "gen_ai.usage.completion_tokens", r->generated);
    mst_span_set_str(r->span, "request.finish_reason", reason);
    mst_span_end(r->span, 0);
    r->span = NULL;
    r->done = true;
}

static void abort_request(request *r) {
    mst_span_set_str(r->span, "error.type", "ClientDisconnected");
    mst_span_set_status(r->span, MST_STATUS_ERROR, "request aborted: client disconnected mid-stream");
    finish_request(r, "abort");
}

/* Picks up to MAX_BATCH unfinished requests; returns how many. */
static int pick_batch(sim *s, int *batch) {
    int arrived = atomic_load_explicit(&s->arrived, memory_order_acquire);
    int n = 0;
    for (int i = 0; i < arrived && n < MAX_BATCH; i++)
        if (!s->reqs[i].done) batch[n++] = i;
    return n;
}

/* The scheduler step: one span linking every scheduled request. */
static void schedule(sim *s, const int *batch, int n, int step, mst_span_context *step_ctx) {
    mst_span *span = mst_span_start(s->tracer, s->scope_schedule, "vllm.scheduler.schedule",
                                    MST_SPAN_KIND_INTERNAL, NULL, 0);
    set_origin(span);
    const char *ids[MAX_BATCH];
    int64_t tokens = 0;
    for (int k = 0; k < n; k++) {
        request *r = &s->reqs[batch[k]];
        ids[k] = r->id;
        tokens += r->generated == 0 ? r->prompt_tokens : 1; /* prefill, then decode */
        mst_attr_in link_attr = {.key = "request.id", .type = MST_ATTR_STRING, .v.s = r->id};
        mst_span_add_link(span, &r->ctx, &link_attr, 1);
    }
    mst_span_set_int(span, "batch.request_count", n);
    mst_span_set_int(span, "batch.scheduled_tokens", tokens);
    mst_span_set_str_list(span, "request.ids", ids, (size_t)n);
    mst_span_set_int(span, "engine.step", step);
    sleep_us(200);
    mst_span_get_context(span, step_ctx);
    mst_span_end(span, 0);
}

static void execute_model(sim *s, const int *batch, int n, const mst_span_context *step_ctx) {
    bool prefill = false;
    for (int k = 0; k < n; k++) prefill |= s->reqs[batch[k]].generated == 0;
    mst_span *span = mst_span_start(s->tracer, s->scope_execute, "vllm.model.execute",
                                    MST_SPAN_KIND_INTERNAL, step_ctx, 0);
    set_origin(span);
    mst_span_set_int(span, "batch.request_count", n);
    mst_span_set_bool(span, "batch.has_prefill", prefill);
    mst_span_set_str(span, "model.name", "demo-llm-7b");
    sleep_us(prefill ? rand_between(&s->rng_engine, 3000, 5000) : rand_between(&s->rng_engine, 1000, 2500));
    mst_span_end(span, 0);
}

/* Detokenize/stream one token per request; finished requests end here. */
static void process_outputs(sim *s, const int *batch, int n, const mst_span_context *step_ctx) {
    mst_span *span = mst_span_start(s->tracer, s->scope_request, "vllm.output.process",
                                    MST_SPAN_KIND_INTERNAL, step_ctx, 0);
    set_origin(span);
    int finished = 0;
    for (int k = 0; k < n; k++) {
        int i = batch[k];
        request *r = &s->reqs[i];
        r->generated++;
        if (i == ERROR_REQUEST_INDEX && r->generated == ABORT_AFTER_TOKENS) {
            abort_request(r);
            finished++;
        } else if (r->generated >= r->max_tokens) {
            finish_request(r, "length");
            finished++;
        }
    }
    mst_span_set_int(span, "batch.request_count", n);
    mst_span_set_int(span, "batch.finished_count", finished);
    sleep_us(100);
    mst_span_end(span, 0);
}

static bool all_done(sim *s) {
    if (atomic_load_explicit(&s->arrived, memory_order_acquire) < s->n_requests) return false;
    for (int i = 0; i < s->n_requests; i++)
        if (!s->reqs[i].done) return false;
    return true;
}

static void *engine_main(void *arg) {
    sim *s = arg;
    int batch[MAX_BATCH];
    while (s->steps_run < s->max_steps && !all_done(s)) {
        int n = pick_batch(s, batch);
        if (n == 0) { /* idle: wait for the API server */
            sleep_us(200);
            continue;
        }
        mst_span_context step_ctx;
        schedule(s, batch, n, s->steps_run, &step_ctx);
        execute_model(s, batch, n, &step_ctx);
        process_outputs(s, batch, n, &step_ctx);
        s->steps_run++;
    }
    return NULL;
}

/* ------------------------------------------------------------ set-up */

static int parse_args(int argc, char **argv, int *requests, int *steps) {
    for (int i = 1; i < argc; i++) {
        int *dst = strcmp(argv[i], "--requests") == 0 ? requests
                 : strcmp(argv[i], "--steps") == 0 ? steps : NULL;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "usage: %s [--requests N] [--steps N]\n", argv[0]);
            return -1;
        }
        char *end;
        long v = strtol(argv[++i], &end, 10);
        if (*end || v < 1 || v > 100000) {
            fprintf(stderr, "%s: %s must be 1..100000\n", argv[0], argv[i - 1]);
            return -1;
        }
        *dst = (int)v;
    }
    return 0;
}

static void add_otlp_if_configured(mst_tracer *tracer) {
    mst_otlp_config cfg;
    char err[256] = "";
    mst_status st = mst_otlp_config_from_env(&cfg, err, sizeof err);
    if (st == MST_ERR_UNAVAILABLE) return; /* no endpoint set: Perfetto only */
    if (st != MST_OK) {
        fprintf(stderr, "OTLP export disabled: %s (%s)\n", err, mst_strerror(st));
        return;
    }
    mst_exporter *otlp = NULL;
    st = mst_otlp_exporter_create(&cfg, &otlp);
    if (st == MST_OK) st = mst_tracer_add_exporter(tracer, otlp);
    if (st == MST_OK) printf("OTLP export to %s\n", cfg.endpoint);
    else fprintf(stderr, "OTLP export disabled: %s\n", mst_strerror(st));
}

static void print_counters(mst_tracer *tracer, mst_exporter *fwd, const sim *s) {
    mst_tracer_stats ts;
    mst_tracer_get_stats(tracer, &ts);
    printf("requests: %d, engine steps: %d\n", s->n_requests, s->steps_run);
    printf("tracer: started=%llu ended=%llu exported=%llu failed=%llu dropped=%llu "
           "filtered=%llu batches=%llu queued_now=%u\n",
           (unsigned long long)ts.spans_started, (unsigned long long)ts.spans_ended,
           (unsigned long long)ts.spans_exported, (unsigned long long)ts.spans_failed,
           (unsigned long long)ts.spans_dropped, (unsigned long long)ts.spans_filtered,
           (unsigned long long)ts.batches_exported, ts.queue_depth);
    mst_exporter_stats es;
    mst_exporter_get_stats(fwd, &es);
    printf("perfetto forwarder client: exported=%llu failed=%llu batches_ok=%llu "
           "batches_failed=%llu reconnect_attempts=%llu\n",
           (unsigned long long)es.spans_exported, (unsigned long long)es.spans_failed,
           (unsigned long long)es.batches_ok, (unsigned long long)es.batches_failed,
           (unsigned long long)es.retries);
}

int main(int argc, char **argv) {
    int n_requests = 8, max_steps = 64;
    if (parse_args(argc, argv, &n_requests, &max_steps) != 0) return 2;

    mst_tracer_options opts;
    mst_tracer_options_from_env(&opts);
    mst_tracer *tracer = NULL;
    mst_status st = mst_tracer_create(&opts, &tracer);
    if (st != MST_OK) {
        fprintf(stderr, "mst_tracer_create: %s\n", mst_strerror(st));
        return 1;
    }
    mst_exporter *fwd = NULL;
    st = mst_forward_exporter_create(getenv("MSTRACE_PERFETTO_SOCKET"), &fwd);
    if (st == MST_OK) st = mst_tracer_add_exporter(tracer, fwd);
    if (st != MST_OK) {
        fprintf(stderr, "forwarder exporter: %s\n", mst_strerror(st));
        mst_tracer_shutdown(tracer, 1000);
        return 1;
    }
    add_otlp_if_configured(tracer);

    sim s = {
        .tracer = tracer,
        .scope_request = mst_tracer_scope(tracer, "ms_service_profiler.hook.Request", "0.1.0"),
        .scope_schedule = mst_tracer_scope(tracer, "ms_service_profiler.hook.Schedule", "0.1.0"),
        .scope_execute = mst_tracer_scope(tracer, "ms_service_profiler.hook.Execute", "0.1.0"),
        .reqs = calloc((size_t)n_requests, sizeof(request)),
        .n_requests = n_requests,
        .max_steps = max_steps,
        .rng_api = 0x9e3779b9u,
        .rng_engine = 0x85ebca6bu,
    };
    if (!s.reqs) return 1;

    pthread_t engine;
    if (pthread_create(&engine, NULL, engine_main, &s) != 0) return 1;
    /* Requests arrive 0.5–1.5 ms apart, so batches grow and shrink. */
    for (int i = 0; i < n_requests; i++) {
        receive_request(&s, i);
        sleep_us(rand_between(&s.rng_api, 500, 1500));
    }
    pthread_join(engine, NULL);
    /* Step limit reached: whatever is left ends here (the engine is gone). */
    for (int i = 0; i < n_requests; i++)
        if (!s.reqs[i].done) finish_request(&s.reqs[i], "step_limit");

    st = mst_tracer_flush(tracer, 10000);
    if (st != MST_OK) fprintf(stderr, "flush: %s\n", mst_strerror(st));
    print_counters(tracer, fwd, &s);
    mst_tracer_shutdown(tracer, 10000);
    free(s.reqs);
    return 0;
}
