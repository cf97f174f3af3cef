/*
 * test_analyze_tracegen.c — a synthetic vLLM-like serving run with a
 * planted bottleneck, recorded through libmstrace and sent through the
 * Perfetto forwarder client, for `mstrace analyze`'s tests and benchmark.
 * Two programs in one:
 *
 *   - no arguments (ctest): every scenario is generated into a counting
 *     exporter; checks that the span count the generator reports equals
 *     what the pipeline exported, that a seed gives the same run twice and
 *     that the planted stage really is the slow one in the generated times.
 *
 *   - `--socket NAME --scenario S [--requests N] [--seed K] [--concurrency C]
 *      [--pid-base P] [--pad BYTES]`: sends the run to the forwarder listening on @NAME and
 *     prints {"spans":..,"requests":..,"steps":..} on stdout. Used by
 *     tests/integration/test_analyze.py and bench/bench_analyze.sh.
 *
 * The simulated server (three processes told apart by process.pid and
 * process.role, as the vLLM plugin tags them): an API server (vllm.request
 * per request from arrival to its last output; vllm.output.process per
 * step, sequential, so a slow output loop falls behind), an EngineCore
 * (schedule -> model.execute -> update_from_output per step) and a worker
 * (worker.execute_model with a model_runner.execute child inside the
 * executor span). The engine is a vLLM-v1-like scheduler: running requests
 * first, then waiting ones (FIFO) while the token budget
 * (max_num_batched_tokens), max_num_seqs and the KV cache (blocks of 16
 * tokens) allow; a running request that cannot get a block preempts the
 * newest running one (its blocks freed, back to the front of the waiting
 * queue, its tokens computed again when resumed). Each schedule span
 * carries the step record of docs/architecture.md "1a" (step.index,
 * request.ids, step.tokens, step.phase, step.new_ids, step.queued_ns,
 * step.resumed_ids, step.preempted_ids, step.finished_ids, scheduler.*,
 * kv_cache.usage) unless --old-format (what traces carried before it).
 * Load: a closed loop of C clients (a new request arrives when one
 * finishes), prompts of 100-500 tokens, 20-60 output tokens.
 *
 * Scenarios (durations in ms; noise ~10%):
 *   balanced   schedule 0.5, forward 1.0 + 0.0005/token, executor overhead
 *              0.2, update 0.3, host gap 0.3, output 0.6
 *   scheduler  schedule rises 0.5 -> 3.0 over the run
 *   drain      schedule rises 0.5 -> 3.0 to mid-run and falls back to 0.5
 *   model      forward 4 + 0.02/token
 *   executor   executor overhead 2.5
 *   output     output rises 0.6 -> 3.0 over the run
 *   waiting    host gap 2.0
 *   tail       a stall: 30 consecutive steps at 40% of the run with a 15x
 *              forward
 *   joining    request spans carry the external id, steps the internal one
 *              (nothing joins)
 *   kvfull     24 clients, a KV cache of 96 blocks: requests queue and
 *              running ones are preempted
 *   maxseqs    24 clients, max_num_seqs 4: requests queue, the KV cache
 *              has room
 *   prefill    8 clients with 200-400 output tokens; four bursts of four
 *              4000-token prompts; forward 1.0 + 0.002/token
 *   ramp       clients grow from 2 to 16 over the run; schedule and output
 *              cost grow with the batch (per request constant)
 *   longout    300-600 output tokens per request
 * --model-scale X multiplies the forward (one slow rank of several runs);
 * --engine-clock-offset-ms D shifts the engine's and worker's clocks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export/forward_client.h"
#include "mstrace.h"
#include "testlib.h"

#define MAX_RUNNING 64
#define MAX_CLIENTS 256
#define BLOCK 16

typedef struct gen_opts {
    const char *scenario;
    int requests;
    int concurrency;
    uint64_t seed;
    int64_t pid_base;
    int pad;          /* bytes of filler attribute per span (file size only) */
    double model_scale;
    double clock_offset_ms;
    bool old_format;
} gen_opts;

typedef struct req {
    char id[64];
    char ext[40];
    int prompt, out_len, generated;
    int computed;     /* tokens with KV (reset by a preemption) */
    int blocks;
    int64_t arrival, queued;
    bool started, preempted, active, done;
} req;

typedef struct gen {
    const gen_opts *o;
    mst_tracer *tracer;
    const mst_scope *sc_req, *sc_sched, *sc_exec, *sc_out;
    uint64_t rng;
    uint64_t spans;
    int steps;
    int64_t out_free; /* API server's output loop is busy until then */
    int preemptions;
    long long tokens; /* output tokens generated */
    /* what the generated times say, for the self-check */
    double stage_sum[5];
} gen;

static uint64_t rnd(gen *g) {
    g->rng ^= g->rng >> 12;
    g->rng ^= g->rng << 25;
    g->rng ^= g->rng >> 27;
    return g->rng * 2685821657736338717ull;
}
static double unif(gen *g) { return (double)(rnd(g) >> 11) / 9007199254740992.0; }
static double noisy(gen *g, double ms) {
    double u1 = unif(g) + 1e-12, u2 = unif(g);
    double n = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
    double f = 1 + 0.1 * n;
    if (f < 0.5) f = 0.5;
    return ms * f;
}
static int64_t ns(double ms) { return (int64_t)(ms * 1e6); }
static bool is(const gen *g, const char *s) { return strcmp(g->o->scenario, s) == 0; }

static const char *g_pad; /* filler value, or NULL */

static void tag(mst_span *s, int64_t pid, const char *role) {
    if (g_pad) mst_span_set_str(s, "filler", g_pad);
    mst_span_set_int(s, "process.pid", pid);
    mst_span_set_int(s, "thread.id", pid + 1);
    mst_span_set_str(s, "process.role", role);
}

static void end_span(gen *g, mst_span *s, int64_t end) {
    mst_span_end(s, (uint64_t)end);
    g->spans++;
    if (g->tracer && g->spans % 2000 == 0) mst_tracer_flush(g->tracer, 30000);
}

static mst_span *start(gen *g, const mst_scope *sc, const char *name, const mst_span_context *parent,
                       int64_t t) {
    return mst_span_start(g->tracer, sc, name, MST_SPAN_KIND_INTERNAL, parent, (uint64_t)t);
}

static void set_batch(mst_span *s, req **batch, int n, int tokens, bool ext_ids) {
    const char *ids[MAX_RUNNING];
    for (int i = 0; i < n; i++) ids[i] = ext_ids ? batch[i]->ext : batch[i]->id;
    mst_span_set_str_list(s, "request.ids", ids, (size_t)n);
    mst_span_set_int(s, "batch.request_count", n);
    if (tokens >= 0) mst_span_set_int(s, "batch.scheduled_tokens", tokens);
}

/* A list of request ids (a string list attribute). */
static void set_ids(mst_span *s, const char *key, req **rs, int n) {
    if (n == 0) return; /* empty lists are not written */
    const char *ids[MAX_RUNNING];
    for (int i = 0; i < n; i++) ids[i] = rs[i]->id;
    mst_span_set_str_list(s, key, ids, (size_t)n);
}

/* An int list as libmstrace carries lists: decimal strings. */
static void set_ints(mst_span *s, const char *key, const int64_t *v, int n) {
    if (n == 0) return;
    static char buf[MAX_RUNNING][24];
    const char *items[MAX_RUNNING];
    for (int i = 0; i < n; i++) {
        snprintf(buf[i], sizeof buf[i], "%lld", (long long)v[i]);
        items[i] = buf[i];
    }
    mst_span_set_str_list(s, key, items, (size_t)n);
}

static void new_request(gen *g, req *r, int index, int64_t t) {
    memset(r, 0, sizeof *r);
    snprintf(r->ext, sizeof r->ext, "cmpl-%08llx-%d", (unsigned long long)(g->o->seed & 0xffffffff), index);
    snprintf(r->id, sizeof r->id, "%s-%08x", r->ext, (unsigned)(rnd(g) & 0xffffffff));
    r->prompt = 100 + (int)(unif(g) * 400);
    r->out_len = 20 + (int)(unif(g) * 41);
    if (is(g, "prefill")) r->out_len = 200 + (int)(unif(g) * 201);
    if (is(g, "longout")) r->out_len = 300 + (int)(unif(g) * 301);
    r->arrival = t;
    /* The API server hands it to the engine (tokenisation, IPC). */
    r->queued = t + ns(0.3) + ns(g->o->clock_offset_ms);
    r->active = true;
}

static int blocks_for(int tokens) { return (tokens + BLOCK - 1) / BLOCK; }

/* The tokens a request must compute before it samples: its prompt, or
 * everything it knew when it was preempted. */
static int need(const req *r) { return r->prompt + r->generated; }

typedef struct sched_limits {
    int max_seqs, budget, kv_blocks;
} sched_limits;

static sched_limits limits_of(const gen *g) {
    sched_limits l = {16, 8192, 100000};
    if (is(g, "kvfull")) l.kv_blocks = 96;
    if (is(g, "maxseqs")) l.max_seqs = 4;
    return l;
}

/* Runs the whole simulation; spans go to g->tracer (NULL: times only). */
static void run(gen *g) {
    const gen_opts *o = g->o;
    int64_t api = o->pid_base, core = o->pid_base + 10, worker = o->pid_base + 20;
    int64_t skew = ns(o->clock_offset_ms); /* engine and worker clocks */
    sched_limits lim = limits_of(g);
    req *reqs = calloc((size_t)o->requests, sizeof *reqs);
    if (!reqs) abort();
    /* Start about a minute in the past so the times look like a real run. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t t = (int64_t)now.tv_sec * 1000000000 - 60ll * 1000000000;
    int issued = 0, finished = 0;
    int conc = o->concurrency < o->requests ? o->concurrency : o->requests;
    if (is(g, "kvfull") || is(g, "maxseqs")) conc = 24 < o->requests ? 24 : o->requests;
    if (is(g, "prefill")) conc = 8 < o->requests ? 8 : o->requests;
    int clients = is(g, "ramp") ? 2 : conc;
    /* The engine's queues: request indices. */
    int waiting[MAX_CLIENTS + 32], n_wait = 0, running[MAX_RUNNING], n_run = 0;
    /* Issued requests the engine has not received yet. */
    int pending[MAX_CLIENTS + 32], n_pend = 0;
    int kv_used = 0;
    for (; issued < clients; issued++) {
        new_request(g, &reqs[issued], issued, t + ns(unif(g)));
        pending[n_pend++] = issued;
    }
    int bursts = 0;
    double est_steps = (double)o->requests * 40.0 / (conc < 16 ? conc : 16) + 1;
    if (is(g, "prefill") || is(g, "longout")) est_steps = (double)o->requests * (is(g, "prefill") ? 300 : 450) / conc;
    g->out_free = t;
    while (finished < o->requests) {
        double frac = (double)g->steps / est_steps;
        if (frac > 1) frac = 1;
        /* Arrivals: requests the engine has received by now join the queue. */
        for (int k = 0; k < n_pend;) {
            req *r = &reqs[pending[k]];
            if (r->queued - skew > t) {
                k++;
                continue;
            }
            r->started = true; /* in the engine now */
            waiting[n_wait++] = pending[k];
            pending[k] = pending[--n_pend];
        }
        if (is(g, "ramp")) {
            int want = 2 + (int)(14 * frac);
            while (clients < want && issued < o->requests) {
                new_request(g, &reqs[issued], issued, t);
                pending[n_pend++] = issued++;
                clients++;
            }
        }
        if (is(g, "prefill") && bursts < 4 && frac >= 0.15 + 0.2 * bursts && issued + 4 <= o->requests) {
            for (int k = 0; k < 4; k++, issued++) {
                new_request(g, &reqs[issued], issued, t);
                reqs[issued].prompt = 4000;
                reqs[issued].out_len = 20;
                pending[n_pend++] = issued;
            }
            bursts++;
        }
        /* ---- schedule(): running first, then waiting. */
        req *batch[MAX_RUNNING], *news[MAX_RUNNING], *resumed[MAX_RUNNING], *preempted[MAX_RUNNING];
        int64_t tok[MAX_RUNNING], queued_ns[MAX_RUNNING];
        char phase[MAX_RUNNING + 1];
        int n = 0, n_new = 0, n_res = 0, n_pre = 0, budget = lim.budget, tokens = 0, prefill_tokens = 0;
        for (int k = 0; k < n_run && budget > 0;) {
            req *r = &reqs[running[k]];
            int want = need(r) - r->computed;
            if (want < 1) want = 1;
            if (want > budget) want = budget;
            int more = blocks_for(r->computed + want) - r->blocks;
            while (more > 0 && kv_used + more > lim.kv_blocks && n_run > k + 1) {
                /* Preempt the newest running request. */
                req *v = &reqs[running[n_run - 1]];
                kv_used -= v->blocks;
                v->blocks = 0;
                v->computed = 0;
                v->preempted = true;
                memmove(waiting + 1, waiting, (size_t)n_wait * sizeof *waiting);
                waiting[0] = running[n_run - 1];
                n_wait++;
                n_run--;
                preempted[n_pre++] = v;
                g->preemptions++;
            }
            if (more > 0 && kv_used + more > lim.kv_blocks) break;
            kv_used += more > 0 ? more : 0;
            r->blocks += more > 0 ? more : 0;
            bool was_prefill = r->computed < need(r);
            r->computed += want;
            phase[n] = !was_prefill ? 'd' : r->computed < need(r) ? 'p' : 'P';
            tok[n] = want;
            if (phase[n] != 'd') prefill_tokens += want;
            batch[n++] = r;
            tokens += want;
            budget -= want;
            k++;
        }
        /* As vLLM's v1 scheduler: no waiting request is admitted in a step
         * that had to preempt. */
        while (n_pre == 0 && n_wait > 0 && budget > 0 && n_run < lim.max_seqs && n < MAX_RUNNING) {
            req *r = &reqs[waiting[0]];
            int want = need(r) - r->computed;
            if (want > budget) want = budget;
            int more = blocks_for(r->computed + want) - r->blocks;
            if (kv_used + more > lim.kv_blocks) break;
            kv_used += more;
            r->blocks += more;
            r->computed += want;
            phase[n] = r->computed < need(r) ? 'p' : 'P';
            tok[n] = want;
            prefill_tokens += want;
            batch[n++] = r;
            tokens += want;
            budget -= want;
            if (r->preempted) {
                resumed[n_res++] = r;
                r->preempted = false;
            } else {
                queued_ns[n_new] = r->queued;
                news[n_new++] = r;
            }
            running[n_run++] = waiting[0];
            memmove(waiting, waiting + 1, (size_t)(n_wait - 1) * sizeof *waiting);
            n_wait--;
        }
        phase[n] = 0;
        if (n == 0) {
            /* Idle: wait for the next arrival at the engine. */
            int64_t next = INT64_MAX;
            for (int k = 0; k < n_pend; k++)
                if (reqs[pending[k]].queued - skew < next) next = reqs[pending[k]].queued - skew;
            t = next == INT64_MAX ? t + ns(1) : (next > t ? next : t + ns(0.01));
            continue;
        }
        double sched = is(g, "scheduler") ? 0.5 + 2.5 * frac : 0.5;
        if (is(g, "drain")) sched = 0.5 + 2.5 * (frac < 0.5 ? 2 * frac : 2 * (1 - frac));
        if (is(g, "ramp")) sched = 0.1 + 0.04 * n;
        double per_token = is(g, "model") ? 0.02 : is(g, "prefill") ? 0.002 : 0.0005;
        double fwd = (is(g, "model") ? 4.0 : 1.0) + per_token * tokens;
        fwd *= o->model_scale;
        if (is(g, "tail") && frac >= 0.40 && frac < 0.40 + 30.0 / est_steps) fwd *= 15;
        double ipc = is(g, "executor") ? 2.5 : 0.2;
        double upd = 0.3;
        double gap = is(g, "waiting") ? 2.0 : 0.3;
        double out = is(g, "output") ? 0.6 + 2.4 * frac : 0.6;
        if (is(g, "ramp")) out = 0.1 + 0.05 * n;
        sched = noisy(g, sched);
        fwd = noisy(g, fwd);
        ipc = noisy(g, ipc);
        upd = noisy(g, upd);
        gap = noisy(g, gap);
        out = noisy(g, out);
        g->stage_sum[0] += sched + upd;
        g->stage_sum[1] += fwd;
        g->stage_sum[2] += ipc;
        g->stage_sum[3] += out;
        g->stage_sum[4] += gap;
        (void)prefill_tokens;
        bool ext = is(g, "joining");
        int64_t t_sched_end = t + ns(sched);
        int64_t t_exec_end = t_sched_end + ns(ipc + fwd);
        int64_t t_fwd = t_sched_end + ns(ipc / 2);
        int64_t t_upd_end = t_exec_end + ns(upd);
        /* Tokens: the requests whose prefill completed or that decoded. */
        req *out_reqs[MAX_RUNNING], *fin[MAX_RUNNING];
        int n_out = 0, n_fin = 0;
        for (int i = 0; i < n; i++)
            if (phase[i] != 'p') out_reqs[n_out++] = batch[i];
        if (g->tracer) {
            mst_span *s = start(g, g->sc_sched, "vllm.scheduler.schedule", NULL, t + skew);
            tag(s, core, "engine_core");
            set_batch(s, batch, n, tokens, false);
            mst_span_set_int(s, "engine.step", g->steps);
            if (!o->old_format) {
                mst_span_set_int(s, "step.index", g->steps);
                set_ints(s, "step.tokens", tok, n);
                mst_span_set_str(s, "step.phase", phase);
                set_ids(s, "step.new_ids", news, n_new);
                set_ints(s, "step.queued_ns", queued_ns, n_new);
                set_ids(s, "step.resumed_ids", resumed, n_res);
                set_ids(s, "step.preempted_ids", preempted, n_pre);
                mst_span_set_int(s, "scheduler.max_num_seqs", lim.max_seqs);
                mst_span_set_int(s, "scheduler.max_num_batched_tokens", lim.budget);
            }
            mst_span_set_int(s, "scheduler.waiting", n_wait);
            mst_span_set_int(s, "scheduler.running", n_run);
            mst_span_set_double(s, "kv_cache.usage", (double)kv_used / lim.kv_blocks);
            end_span(g, s, t_sched_end + skew);
            mst_span *e = start(g, g->sc_exec, "vllm.model.execute", NULL, t_sched_end + skew);
            tag(e, core, "engine_core");
            set_batch(e, batch, n, tokens, false);
            mst_span_context ectx;
            mst_span_get_context(e, &ectx);
            mst_span *w = start(g, g->sc_exec, "vllm.worker.execute_model", &ectx, t_fwd + skew);
            tag(w, worker, "worker_0");
            set_batch(w, batch, n, tokens, false);
            mst_span_context wctx;
            mst_span_get_context(w, &wctx);
            mst_span *rr = start(g, g->sc_exec, "vllm.model_runner.execute", &wctx, t_fwd + ns(0.02) + skew);
            tag(rr, worker, "worker_0");
            end_span(g, rr, t_fwd + ns(fwd) - ns(0.02) + skew);
            end_span(g, w, t_fwd + ns(fwd) + skew);
            end_span(g, e, t_exec_end + skew);
            mst_span *u = start(g, g->sc_sched, "vllm.scheduler.update_from_output", NULL, t_exec_end + skew);
            tag(u, core, "engine_core");
            end_span(g, u, t_upd_end + skew);
        }
        /* Output in the API server, after the step, one batch at a time. */
        int64_t o0 = t_upd_end + ns(0.05);
        if (g->out_free > o0) o0 = g->out_free;
        int64_t o1 = o0 + ns(out);
        g->out_free = o1;
        if (g->tracer && n_out) {
            mst_span *os = start(g, g->sc_out, "vllm.output.process", NULL, o0);
            tag(os, api, "api_server");
            set_batch(os, out_reqs, n_out, -1, ext);
            end_span(g, os, o1);
        }
        for (int i = 0; i < n_out; i++) {
            req *r = out_reqs[i];
            g->tokens++;
            if (++r->generated < r->out_len) continue;
            fin[n_fin++] = r;
            r->active = false;
            r->done = true;
            finished++;
            kv_used -= r->blocks;
            r->blocks = 0;
            for (int k = 0; k < n_run; k++)
                if (&reqs[running[k]] == r) {
                    memmove(running + k, running + k + 1, (size_t)(n_run - k - 1) * sizeof *running);
                    n_run--;
                    break;
                }
            if (g->tracer) {
                mst_span *rs = start(g, g->sc_req, "vllm.request", NULL, r->arrival);
                tag(rs, api, "api_server");
                mst_span_set_str(rs, "request.id", ext ? r->ext : r->id);
                const char *one[1] = {ext ? r->ext : r->id};
                mst_span_set_str_list(rs, "request.ids", one, 1);
                end_span(g, rs, o1);
            }
            bool burst = is(g, "prefill") && r->prompt == 4000;
            if (issued < o->requests && !burst) {
                new_request(g, &reqs[issued], issued, o1 + ns(0.2 + unif(g)));
                pending[n_pend++] = issued++;
            }
        }
        (void)fin;
        g->steps++;
        t = t_upd_end + ns(gap);
    }
    free(reqs);
}

/* A generator for `o`, seeded from o->seed, sending to `tr` (NULL: only
 * the times are generated, no spans). */
static void gen_init(gen *g, const gen_opts *o, mst_tracer *tr) {
    memset(g, 0, sizeof *g);
    g->o = o;
    g->rng = o->seed * 0x9E3779B97F4A7C15ull + 1;
    g->tracer = tr;
    if (!tr) return;
    g->sc_req = mst_tracer_scope(tr, "ms_service_profiler.hook.Request", NULL);
    g->sc_sched = mst_tracer_scope(tr, "ms_service_profiler.hook.Schedule", NULL);
    g->sc_exec = mst_tracer_scope(tr, "ms_service_profiler.hook.Execute", NULL);
    g->sc_out = g->sc_req;
}

static const char *const SCENARIOS[] = {"balanced", "scheduler", "drain",   "model",  "executor",
                                        "output",   "waiting",   "tail",    "joining", "kvfull",
                                        "maxseqs",  "prefill",   "ramp",    "longout"};

/* ------------------------------------------------------------ self-check */

typedef struct counting {
    mst_exporter base;
    uint64_t n;
} counting;
static mst_status count_batch(mst_exporter *self, const mst_span *const *spans, size_t n) {
    (void)spans;
    ((counting *)self)->n += n;
    return MST_OK;
}
static void count_destroy(mst_exporter *self) { (void)self; }
static const mst_exporter_ops COUNT_OPS = {.name = "count", .export_batch = count_batch,
                                           .destroy = count_destroy};

static void self_check(void) {
    for (size_t k = 0; k < sizeof SCENARIOS / sizeof *SCENARIOS; k++) {
        gen_opts o = {SCENARIOS[k], 120, 12, 7, 1000, 0, 1.0, 0, false};
        counting ex = {{&COUNT_OPS}, 0};
        mst_tracer_options to = {0};
        to.max_queue_size = 1 << 16;
        mst_tracer *tr;
        CHECK(mst_tracer_create(&to, &tr) == MST_OK);
        CHECK(mst_tracer_add_exporter(tr, &ex.base) == MST_OK);
        gen g;
        gen_init(&g, &o, tr);
        run(&g);
        CHECK(mst_tracer_shutdown(tr, 30000) == MST_OK);
        CHECK(ex.n == g.spans);
        /* Same seed, same times. */
        gen h;
        gen_init(&h, &o, NULL);
        run(&h);
        CHECK(h.steps == g.steps);
        CHECK(fabs(h.stage_sum[1] - g.stage_sum[1]) < 1e-6);
        /* The planted stage is the slow one in the generated times. */
        int top = 0;
        for (int s = 1; s < 5; s++)
            if (g.stage_sum[s] > g.stage_sum[top]) top = s;
        if (strcmp(o.scenario, "model") == 0 || strcmp(o.scenario, "balanced") == 0) CHECK(top == 1);
        if (strcmp(o.scenario, "executor") == 0) CHECK(g.stage_sum[2] > g.stage_sum[1]);
        if (strcmp(o.scenario, "waiting") == 0) CHECK(g.stage_sum[4] > g.stage_sum[1]);
        /* A KV cache too small for the load preempts; enough of it never does. */
        if (strcmp(o.scenario, "kvfull") == 0) CHECK(g.preemptions > 0);
        if (strcmp(o.scenario, "balanced") == 0 || strcmp(o.scenario, "maxseqs") == 0) CHECK(g.preemptions == 0);
    }
}

int main(int argc, char **argv) {
    if (argc == 1) {
        static const mst_test_case tests[] = {{"every_scenario", self_check}};
        return mst_test_run_all(tests, 1, argc, argv);
    }
    gen_opts o = {"balanced", 300, 12, 1, 40000, 0, 1.0, 0, false};
    const char *socket = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--old-format")) {
            o.old_format = true;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "argument %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--socket")) socket = argv[i + 1];
        else if (!strcmp(argv[i], "--model-scale")) o.model_scale = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--engine-clock-offset-ms")) o.clock_offset_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--scenario")) o.scenario = argv[i + 1];
        else if (!strcmp(argv[i], "--requests")) o.requests = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--concurrency")) o.concurrency = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) o.seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--pid-base")) o.pid_base = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--pad")) o.pad = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    bool known = false;
    for (size_t k = 0; k < sizeof SCENARIOS / sizeof *SCENARIOS; k++)
        known |= strcmp(SCENARIOS[k], o.scenario) == 0;
    if (!socket || !known || o.requests < 1 || o.concurrency < 1 || o.concurrency > MAX_CLIENTS) {
        fprintf(stderr, "usage: %s --socket NAME --scenario S [--requests N] [--seed K] "
                        "[--concurrency C] [--pid-base P] [--model-scale X] [--engine-clock-offset-ms D] [--old-format]\n", argv[0]);
        return 2;
    }
    if (o.pad > 0 && o.pad <= MST_MAX_VALUE_LEN) {
        char *pad = malloc((size_t)o.pad + 1);
        if (!pad) return 1;
        memset(pad, 'x', (size_t)o.pad);
        pad[o.pad] = 0;
        g_pad = pad;
    }
    mst_tracer_options to = {0};
    to.max_queue_size = 1 << 16;
    to.max_export_batch_size = 512;
    to.schedule_delay_ms = 50;
    mst_tracer *tr;
    mst_exporter *ex;
    if (mst_tracer_create(&to, &tr) != MST_OK || mst_forward_exporter_create(socket, &ex) != MST_OK ||
        mst_tracer_add_exporter(tr, ex) != MST_OK) {
        fprintf(stderr, "cannot set up the tracer\n");
        return 1;
    }
    /* The tests compare counts exactly: a forwarder starved of CPU on a busy
     * machine must slow the generator down, not make it count spans failed
     * after the default 1 s without progress. */
    mst_forward_exporter_set_send_budget_ms(ex, 60000);
    gen g;
    gen_init(&g, &o, tr);
    run(&g);
    mst_tracer_flush(tr, 60000);
    mst_tracer_stats st;
    mst_tracer_get_stats(tr, &st);
    mst_exporter_stats es;
    mst_exporter_get_stats(ex, &es);
    mst_tracer_shutdown(tr, 60000);
    printf("{\"spans\":%llu,\"requests\":%d,\"steps\":%d,\"preemptions\":%d,\"tokens\":%lld,\"exported\":%llu,"
           "\"dropped\":%llu,\"failed\":%llu}\n",
           (unsigned long long)g.spans, o.requests, g.steps, g.preemptions, g.tokens, (unsigned long long)es.spans_exported,
           (unsigned long long)st.spans_dropped, (unsigned long long)es.spans_failed);
    return 0;
}
