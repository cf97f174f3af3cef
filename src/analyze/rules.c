/*
 * rules.c — stage split, bottleneck rules, verdict and profile targets
 * (rules.h). Every threshold is a named constant below and is listed in
 * docs/analyze.md "Rules"; a rule reports its numbers whether or not it
 * fires, so a reader can see how close it came.
 */
#include "analyze/rules.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mst_an_request_metric_names[MST_AN_REQ_METRICS] = {"queue_ms", "ttft_ms",
                                                                     "tpot_ms", "e2e_ms"};

/* "Rising": the median of the last third of the run (by time) over the
 * first third, with a Mann–Whitney p-value and an absolute floor. */
#define RISE_RATIO 1.5
#define RISE_MIN_MS 0.02
#define RISE_P 0.001
#define FLAT_LO 0.8
#define FLAT_HI 1.25
#define MODEL_DOMINANT_SHARE 0.6
#define MODEL_FIT_R2 0.3
#define IPC_OF_MODEL 0.3
#define IPC_SHARE 0.1
#define OUTPUT_SHARE 0.5
#define WAITING_SHARE 0.2
#define TAIL_MIN_REQUESTS 20
#define TAIL_RATIO 2.0
#define TAIL_PER_STEP 1.5
#define TAIL_QUEUE 1.5
#define JOIN_MIN 0.5

static const char *const stage_prose[MST_AN_STAGES] = {
    "scheduling (schedule + update_from_output)", "the model forward (workers)",
    "executor overhead around the forward (IPC/sync/input preparation)",
    "output processing (API server)", "waiting outside hooked code while requests were queued"};

double mst_an_request_metric(const mst_an_request *r, int metric) {
    switch (metric) {
    case MST_AN_REQ_QUEUE: return r->queue_ms;
    case MST_AN_REQ_TTFT: return r->ttft_ms;
    case MST_AN_REQ_TPOT: return r->tpot_ms;
    default: return r->e2e_ms;
    }
}

/* Room for a sample of at most `max` values; NULL (and *oom set) when out
 * of memory. */
static double *sample_new(size_t max, bool *oom) {
    double *out = malloc((max ? max : 1) * sizeof *out);
    if (!out && oom) *oom = true;
    return out;
}

/* Sorts the n values taken; an empty sample is freed (NULL). */
static double *sample_done(double *out, size_t n) {
    mst_an_sort_doubles(out, n);
    if (n == 0) {
        free(out);
        return NULL;
    }
    return out;
}

double *mst_an_step_sample(const mst_an_view *v, int metric, size_t *n, bool *oom) {
    *n = 0;
    double *out = sample_new(v->n_steps, oom);
    if (!out) return NULL;
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy) continue;
        out[(*n)++] = metric == MST_AN_STEP_WALL ? s->wall_ms : s->stage_ms[metric];
    }
    return sample_done(out, *n);
}

double *mst_an_request_sample(const mst_an_view *v, int metric, size_t *n, bool *oom) {
    *n = 0;
    double *out = sample_new(v->n_requests, oom);
    if (!out) return NULL;
    for (size_t i = 0; i < v->n_requests; i++) {
        double x = mst_an_request_metric(&v->requests[i], metric);
        if (!isnan(x)) out[(*n)++] = x;
    }
    return sample_done(out, *n);
}

static mst_an_finding *add_finding(mst_an_result *r, const char *rule) {
    mst_an_finding *f = &r->findings[r->n_findings++];
    memset(f, 0, sizeof *f);
    f->rule = rule;
    f->severity = "info";
    return f;
}

static void num(mst_an_finding *f, const char *key, double v) {
    if (f->n_numbers < MST_AN_MAX_NUMBERS) {
        f->keys[f->n_numbers] = key;
        f->values[f->n_numbers++] = v;
    }
}

/* Early/late thirds of the busy steps by time for one step metric. */
typedef struct trend {
    double early, late, ratio, p;
    size_t n_early, n_late;
} trend;

static bool trend_of(const mst_an_view *v, int metric, int64_t t0, int64_t t1, trend *out) {
    memset(out, 0, sizeof *out);
    out->p = 1;
    size_t n = v->n_steps ? v->n_steps : 1;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return false;
    }
    int64_t third = t1 > t0 ? (t1 - t0) / 3 : 0; /* no busy step: t0 > t1 (sentinels) */
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy) continue;
        double x = s->stage_ms[metric];
        if (s->start_ns <= t0 + third) a[out->n_early++] = x;
        else if (s->start_ns >= t1 - third) b[out->n_late++] = x;
    }
    mst_an_mwu u;
    mst_an_mann_whitney(a, out->n_early, b, out->n_late, &u);
    out->p = u.p;
    mst_an_sort_doubles(a, out->n_early);
    mst_an_sort_doubles(b, out->n_late);
    out->early = mst_an_quantile_sorted(a, out->n_early, 0.5);
    out->late = mst_an_quantile_sorted(b, out->n_late, 0.5);
    out->ratio = out->early > 0 ? out->late / out->early : (out->late > 0 ? INFINITY : 1);
    free(a);
    free(b);
    return true;
}

static bool rising(const trend *t) {
    return t->n_early >= 5 && t->n_late >= 5 && t->ratio >= RISE_RATIO &&
           t->late - t->early >= RISE_MIN_MS && t->p < RISE_P;
}

/* ------------------------------------------------------------ rules */

static void rule_scheduler(const mst_an_view *v, mst_an_result *r, const trend *ts,
                           const trend *tm) {
    mst_an_finding *f = add_finding(r, "scheduler_rising");
    num(f, "schedule_early_ms", ts->early);
    num(f, "schedule_late_ms", ts->late);
    num(f, "schedule_ratio", ts->ratio);
    num(f, "p_value", ts->p);
    num(f, "model_early_ms", tm->early);
    num(f, "model_late_ms", tm->late);
    num(f, "model_ratio", tm->ratio);
    bool model_flat = tm->ratio >= FLAT_LO && tm->ratio <= FLAT_HI;
    f->fired = rising(ts) && model_flat;
    (void)v;
    if (f->fired) {
        f->severity = "warning";
        snprintf(f->sentence, sizeof f->sentence,
                 "Scheduler time per step rises from %.3f ms to %.3f ms (x%.1f, first vs last third "
                 "of the run, p=%.2g) while the model forward stays flat (%.3f -> %.3f ms): look at "
                 "queue length, KV-cache pressure, batch composition and the scheduling policy.",
                 ts->early, ts->late, ts->ratio, ts->p, tm->early, tm->late);
    } else if (rising(ts)) {
        snprintf(f->sentence, sizeof f->sentence,
                 "Scheduler time rises (%.3f -> %.3f ms) but so does the model forward (x%.2f): "
                 "the load grew, not the scheduler alone.",
                 ts->early, ts->late, tm->ratio);
    } else {
        snprintf(f->sentence, sizeof f->sentence,
                 "Scheduler time per step is steady (%.3f -> %.3f ms, first vs last third).",
                 ts->early, ts->late);
    }
}

static void rule_model(const mst_an_view *v, mst_an_result *r) {
    mst_an_finding *f = add_finding(r, "model_dominant");
    double share = r->stages[MST_AN_MODEL].share;
    num(f, "model_share", share);
    num(f, "slope_ms", r->fit.slope);
    num(f, "intercept_ms", r->fit.intercept);
    num(f, "r2", r->fit.r2);
    bool grows = r->fit.n >= 3 && r->fit.slope > 0 && r->fit.r2 >= MODEL_FIT_R2;
    f->fired = share >= MODEL_DOMINANT_SHARE && grows;
    (void)v;
    const char *unit = r->fit_x && strcmp(r->fit_x, "batch_size") == 0 ? "request in the batch"
                                                                          : "scheduled token";
    if (f->fired) {
        f->severity = "warning";
        snprintf(f->sentence, sizeof f->sentence,
                 "The model forward takes %.0f%% of the busy engine time and grows with the batch: "
                 "%.4f ms per %s (r2=%.2f, intercept %.3f ms). Model compute bounds throughput: "
                 "continue with a profiler on the worker (see profile_targets).",
                 100 * share, r->fit.slope, unit, r->fit.r2, r->fit.intercept);
    } else {
        snprintf(f->sentence, sizeof f->sentence,
                 "The model forward takes %.0f%% of the busy engine time (rule: >= %.0f%% and "
                 "growing with the batch; slope %.4f ms per %s, r2=%.2f).",
                 100 * share, 100 * MODEL_DOMINANT_SHARE, r->fit.slope, unit, r->fit.r2);
    }
}

static void rule_executor(const mst_an_view *v, mst_an_result *r) {
    mst_an_finding *f = add_finding(r, "executor_gap");
    double ipc = r->stages[MST_AN_IPC].total_ms, model = r->stages[MST_AN_MODEL].total_ms;
    double of_model = model > 0 ? ipc / model : 0;
    num(f, "ipc_total_ms", ipc);
    num(f, "ipc_p50_ms", r->stages[MST_AN_IPC].q_ms.p50);
    num(f, "ipc_of_model", of_model);
    num(f, "ipc_share", r->stages[MST_AN_IPC].share);
    if (!v->have_worker_spans) {
        snprintf(f->sentence, sizeof f->sentence,
                 "Not evaluated: no worker or model-runner spans, so the executor cannot be "
                 "compared with the forward.");
        return;
    }
    f->fired = of_model >= IPC_OF_MODEL && r->stages[MST_AN_IPC].share >= IPC_SHARE;
    if (f->fired) {
        f->severity = "warning";
        snprintf(f->sentence, sizeof f->sentence,
                 "The executor's model step exceeds the workers' forward by %.3f ms per step "
                 "(median; %.0f%% of the forward time, %.0f%% of the busy time): IPC to the "
                 "workers, synchronisation or input preparation.",
                 r->stages[MST_AN_IPC].q_ms.p50, 100 * of_model, 100 * r->stages[MST_AN_IPC].share);
    } else {
        snprintf(f->sentence, sizeof f->sentence,
                 "Executor overhead around the forward is %.0f%% of the forward time (rule: >= "
                 "%.0f%%).",
                 100 * of_model, 100 * IPC_OF_MODEL);
    }
}

static void rule_output(const mst_an_view *v, mst_an_result *r, const trend *to) {
    mst_an_finding *f = add_finding(r, "output_rising");
    double share = r->stages[MST_AN_OUTPUT].share;
    num(f, "output_early_ms", to->early);
    num(f, "output_late_ms", to->late);
    num(f, "output_ratio", to->ratio);
    num(f, "p_value", to->p);
    num(f, "output_share", share);
    (void)v;
    bool rise = rising(to);
    f->fired = rise || share >= OUTPUT_SHARE;
    if (f->fired) {
        f->severity = "warning";
        if (rise)
            snprintf(f->sentence, sizeof f->sentence,
                     "Output processing per step rises from %.3f ms to %.3f ms (x%.1f, p=%.2g; "
                     "%.0f%% of the busy time): detokenisation, response building, request "
                     "completion or network back-pressure in the API server.",
                     to->early, to->late, to->ratio, to->p, 100 * share);
        else
            snprintf(f->sentence, sizeof f->sentence,
                     "Output processing takes %.0f%% of the busy engine time (%.3f ms per step on "
                     "average): the API server's output loop %s.",
                     100 * share, r->stages[MST_AN_OUTPUT].mean_ms,
                     share >= 1.0 ? "cannot keep up with the engine and falls behind"
                                  : "keeps up only barely");
    } else {
        snprintf(f->sentence, sizeof f->sentence,
                 "Output processing is steady (%.3f -> %.3f ms per step) at %.0f%% of the busy time.",
                 to->early, to->late, 100 * share);
    }
}

static void rule_waiting(const mst_an_view *v, mst_an_result *r) {
    mst_an_finding *f = add_finding(r, "host_waiting");
    double share = r->stages[MST_AN_WAITING].share;
    num(f, "waiting_share", share);
    num(f, "waiting_total_ms", r->stages[MST_AN_WAITING].total_ms);
    num(f, "waiting_p50_ms", r->stages[MST_AN_WAITING].q_ms.p50);
    (void)v;
    f->fired = share >= WAITING_SHARE;
    if (f->fired) {
        f->severity = "warning";
        snprintf(f->sentence, sizeof f->sentence,
                 "Between back-to-back busy steps the engine spends %.0f%% of the time in no hooked "
                 "call and with no worker forward running (%.3f ms per step, median): a host "
                 "bubble (Python overhead, GC, a lock, blocking I/O) while requests were queued.",
                 100 * share, r->stages[MST_AN_WAITING].q_ms.p50);
    } else {
        snprintf(f->sentence, sizeof f->sentence,
                 "Host waiting between busy steps is %.0f%% of the busy time (rule: >= %.0f%%).",
                 100 * share, 100 * WAITING_SHARE);
    }
}

typedef struct group_stats {
    double e2e, queue, steps, per_step[MST_AN_STAGES], per_step_total, shared;
    size_t n;
} group_stats;

static void group_add(group_stats *g, const mst_an_request *q) {
    g->n++;
    g->e2e += q->e2e_ms;
    g->queue += isnan(q->queue_ms) ? 0 : q->queue_ms;
    g->steps += q->n_steps;
    g->shared += q->max_shared;
    for (int s = 0; s < MST_AN_STAGES; s++) {
        double x = q->n_steps ? q->stage_ms[s] / q->n_steps : 0;
        g->per_step[s] += x;
        g->per_step_total += x;
    }
}

static void group_mean(group_stats *g) {
    if (!g->n) return;
    double n = (double)g->n;
    g->e2e /= n;
    g->queue /= n;
    g->steps /= n;
    g->shared /= n;
    g->per_step_total /= n;
    for (int s = 0; s < MST_AN_STAGES; s++) g->per_step[s] /= n;
}

static int cmp_req_e2e(const void *a, const void *b) {
    double x = (*(const mst_an_request *const *)a)->e2e_ms;
    double y = (*(const mst_an_request *const *)b)->e2e_ms;
    return (x > y) - (x < y);
}

static bool rule_tail(const mst_an_view *v, mst_an_result *r) {
    mst_an_finding *f = add_finding(r, "long_tail");
    const mst_an_request **q = malloc((v->n_requests ? v->n_requests : 1) * sizeof *q);
    if (!q) return false;
    size_t n = 0;
    for (size_t i = 0; i < v->n_requests; i++)
        if (!isnan(v->requests[i].e2e_ms) && v->requests[i].n_steps > 0) q[n++] = &v->requests[i];
    num(f, "requests", (double)n);
    if (n < TAIL_MIN_REQUESTS) {
        snprintf(f->sentence, sizeof f->sentence,
                 "Not evaluated: %zu requests with a known end-to-end time (needs %d).", n,
                 TAIL_MIN_REQUESTS);
        free(q);
        return true;
    }
    qsort(q, n, sizeof *q, cmp_req_e2e);
    size_t n_tail = (n + 99) / 100;
    group_stats tail = {0}, mid = {0};
    for (size_t i = n - n_tail; i < n; i++) group_add(&tail, q[i]);
    size_t lo = (size_t)(0.45 * (double)n), hi = (size_t)(0.55 * (double)n);
    if (hi <= lo) hi = lo + 1;
    for (size_t i = lo; i < hi && i < n; i++) group_add(&mid, q[i]);
    group_mean(&tail);
    group_mean(&mid);
    double ratio = mid.e2e > 0 ? tail.e2e / mid.e2e : 0;
    double step_ratio = mid.per_step_total > 0 ? tail.per_step_total / mid.per_step_total : 0;
    double queue_ratio = mid.queue > 0 ? tail.queue / mid.queue : (tail.queue > 0 ? INFINITY : 1);
    /* What the tail's extra time is made of: queueing, or per-step time of
     * one stage over the tail's steps. */
    double queue_extra = tail.queue - mid.queue;
    int worst = -1;
    double worst_extra = 0;
    for (int s = 0; s < MST_AN_STAGES; s++) {
        double extra = (tail.per_step[s] - mid.per_step[s]) * tail.steps;
        if (extra > worst_extra) {
            worst_extra = extra;
            worst = s;
        }
    }
    num(f, "tail_requests", (double)n_tail);
    num(f, "tail_e2e_ms", tail.e2e);
    num(f, "median_e2e_ms", mid.e2e);
    num(f, "e2e_ratio", ratio);
    num(f, "tail_per_step_ms", tail.per_step_total);
    num(f, "median_per_step_ms", mid.per_step_total);
    num(f, "per_step_ratio", step_ratio);
    num(f, "tail_queue_ms", tail.queue);
    num(f, "median_queue_ms", mid.queue);
    num(f, "tail_steps", tail.steps);
    num(f, "tail_batch_size", tail.shared);
    num(f, "median_batch_size", mid.shared);
    bool slow_steps = step_ratio >= TAIL_PER_STEP;
    bool queued = queue_ratio >= TAIL_QUEUE && queue_extra >= 0.25 * (tail.e2e - mid.e2e);
    f->fired = ratio >= TAIL_RATIO && (slow_steps || queued);
    if (f->fired) {
        f->severity = "warning";
        if (queued && (!slow_steps || queue_extra >= worst_extra))
            snprintf(f->sentence, sizeof f->sentence,
                     "Long tail: the slowest 1%% (%zu requests) take %.1f ms end to end, %.1fx the "
                     "median (%.1f ms), mostly queueing (%.1f ms vs %.1f ms before their first "
                     "step); they shared batches of %.1f requests on average (median requests: "
                     "%.1f).",
                     n_tail, tail.e2e, ratio, mid.e2e, tail.queue, mid.queue, tail.shared,
                     mid.shared);
        else
            snprintf(f->sentence, sizeof f->sentence,
                     "Long tail: the slowest 1%% (%zu requests) take %.1f ms end to end, %.1fx the "
                     "median (%.1f ms); their steps are %.1fx slower (%.3f vs %.3f ms per step), "
                     "mostly in %s (%.3f vs %.3f ms per step); they shared batches of %.1f requests "
                     "on average (median requests: %.1f).",
                     n_tail, tail.e2e, ratio, mid.e2e, step_ratio, tail.per_step_total,
                     mid.per_step_total, worst >= 0 ? stage_prose[worst] : "no single stage",
                     worst >= 0 ? tail.per_step[worst] : 0, worst >= 0 ? mid.per_step[worst] : 0,
                     tail.shared, mid.shared);
        num(f, "stage", worst);
    } else if (ratio >= TAIL_RATIO) {
        snprintf(f->sentence, sizeof f->sentence,
                 "The slowest 1%% take %.1fx the median end to end, but at the same per-step time "
                 "(x%.2f) and queueing: they are longer requests (%.0f vs %.0f steps), not slowed "
                 "ones.",
                 ratio, step_ratio, tail.steps, mid.steps);
    } else {
        snprintf(f->sentence, sizeof f->sentence,
                 "No long tail: the slowest 1%% take %.1fx the median end to end.", ratio);
    }
    free(q);
    return true;
}

static void rule_joining(const mst_an_view *v, mst_an_result *r) {
    mst_an_finding *f = add_finding(r, "broken_joining");
    size_t busy = r->busy_steps;
    double short_frac = v->traces ? (double)v->short_traces / (double)v->traces : 0;
    double joined_frac =
        v->requests_with_span ? (double)r->joined_requests / (double)v->requests_with_span : 0;
    num(f, "spans", (double)v->spans);
    num(f, "traces", (double)v->traces);
    num(f, "short_traces", (double)v->short_traces);
    num(f, "short_trace_fraction", short_frac);
    num(f, "request_spans", (double)v->requests_with_span);
    num(f, "joined_requests", (double)r->joined_requests);
    num(f, "unjoined_requests", (double)v->unjoined);
    num(f, "steps_without_ids", (double)v->steps_without_ids);
    const char *why = NULL;
    char buf[300];
    if (v->spans <= 2) {
        why = "the input holds only 1-2 spans";
    } else if (busy > 0 && v->steps_without_ids == busy) {
        why = "no step span carries request.ids, so steps cannot be tied to requests";
    } else if (v->requests_with_span > 0 && joined_frac < JOIN_MIN) {
        snprintf(buf, sizeof buf,
                 "only %.0f%% of the %llu request spans join a step through request.ids",
                 100 * joined_frac, (unsigned long long)v->requests_with_span);
        why = buf;
    } else if (busy > 0 && v->n_requests == 0) {
        why = "no request ids anywhere";
    }
    f->fired = why != NULL;
    if (f->fired) {
        f->severity = "critical";
        snprintf(f->sentence, sizeof f->sentence,
                 "Joining is broken: %s (%.0f%% of %llu traces hold 1-2 spans). Spans are exported, "
                 "but the request chain is not proven: check links, request.ids and "
                 "MS_PROFILER_AUTO_TRACE.",
                 why, 100 * short_frac, (unsigned long long)v->traces);
    } else {
        snprintf(f->sentence, sizeof f->sentence,
                 "Requests join their steps: %zu of %llu request spans (%.0f%% of traces hold 1-2 "
                 "spans, normal for batch spans that link several requests).",
                 r->joined_requests, (unsigned long long)v->requests_with_span, 100 * short_frac);
    }
}

/* ------------------------------------------------------------ targets */

static int64_t pid_of(const mst_an_view *v, uint32_t proc) { return v->procs[proc].pid; }

static void add_target(mst_an_result *r, const char *what, int64_t pid, int64_t s, int64_t e,
                       const char *why) {
    if (r->n_targets >= MST_AN_MAX_TARGETS) return;
    mst_an_target *t = &r->targets[r->n_targets++];
    snprintf(t->what, sizeof t->what, "%s", what);
    snprintf(t->why, sizeof t->why, "%s", why);
    t->pid = pid;
    t->start_ns = s;
    t->end_ns = e;
}

static void targets(const mst_an_view *v, mst_an_result *r) {
    /* The three busy steps with the most time in the bottleneck stage. */
    int g = r->bottleneck >= 0 ? r->bottleneck : MST_AN_MODEL;
    size_t best[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
    for (size_t i = 0; i < v->n_steps; i++) {
        if (!v->steps[i].busy) continue;
        double x = v->steps[i].stage_ms[g];
        for (int k = 0; k < 3; k++) {
            if (best[k] == SIZE_MAX || x > v->steps[best[k]].stage_ms[g]) {
                for (int j = 2; j > k; j--) best[j] = best[j - 1];
                best[k] = i;
                break;
            }
        }
    }
    for (int k = 0; k < 3 && best[k] != SIZE_MAX; k++) {
        const mst_an_step *s = &v->steps[best[k]];
        char what[160], why[300];
        bool model = g == MST_AN_MODEL && s->model_start_ns != INT64_MIN;
        uint32_t proc = model ? s->model_proc : g == MST_AN_OUTPUT ? s->output_proc : s->proc;
        snprintf(what, sizeof what, "step %zu (%s pid %lld)", best[k],
                 model ? "worker" : g == MST_AN_OUTPUT ? "output" : "engine",
                 (long long)pid_of(v, proc));
        snprintf(why, sizeof why, "%.3f ms of %s in one step (median %.3f ms), batch %d, %d tokens",
                 s->stage_ms[g], mst_an_stage_names[g], r->stages[g].q_ms.p50, s->batch_size,
                 s->scheduled_tokens);
        int64_t end = s->start_ns + (int64_t)(s->wall_ms * 1e6);
        if (s->end_ns > end) end = s->end_ns;
        bool output = g == MST_AN_OUTPUT && s->output_start_ns != INT64_MIN;
        add_target(r, what, pid_of(v, proc),
                   model ? s->model_start_ns : output ? s->output_start_ns : s->start_ns,
                   model ? s->model_end_ns : output ? s->output_end_ns : end, why);
    }
    /* The two slowest requests end to end. */
    const mst_an_request *slow[2] = {NULL, NULL};
    for (size_t i = 0; i < v->n_requests; i++) {
        const mst_an_request *q = &v->requests[i];
        if (isnan(q->e2e_ms)) continue;
        if (!slow[0] || q->e2e_ms > slow[0]->e2e_ms) {
            slow[1] = slow[0];
            slow[0] = q;
        } else if (!slow[1] || q->e2e_ms > slow[1]->e2e_ms) {
            slow[1] = q;
        }
    }
    for (int k = 0; k < 2 && slow[k]; k++) {
        const mst_an_request *q = slow[k];
        char what[160], why[300];
        snprintf(what, sizeof what, "request %.100s", v->strings + q->id_off);
        snprintf(why, sizeof why,
                 "slowest request: %.1f ms end to end (queue %.1f ms, TTFT %.1f ms, %u steps)",
                 q->e2e_ms, q->queue_ms, q->ttft_ms, q->n_steps);
        int64_t end = q->arrival_ns + (int64_t)(q->e2e_ms * 1e6);
        add_target(r, what, pid_of(v, q->span_proc), q->arrival_ns, end, why);
    }
}

/* ------------------------------------------------------------ main */

mst_status mst_an_evaluate(const mst_an_view *v, mst_an_result *r) {
    memset(r, 0, sizeof *r);
    r->bottleneck = -1;
    bool oom = false;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy) continue;
        r->busy_steps++;
        r->busy_wall_ms += s->wall_ms;
        if (s->start_ns < t0) t0 = s->start_ns;
        if (s->start_ns > t1) t1 = s->start_ns;
    }
    for (int g = 0; g < MST_AN_STAGES; g++) {
        size_t n;
        double *x = mst_an_step_sample(v, g, &n, &oom);
        mst_an_stage_summary *ss = &r->stages[g];
        ss->count = n;
        for (size_t i = 0; i < n; i++) ss->total_ms += x[i];
        ss->share = r->busy_wall_ms > 0 ? ss->total_ms / r->busy_wall_ms : 0;
        ss->mean_ms = n ? ss->total_ms / (double)n : NAN;
        ss->q_ms = mst_an_quantiles_sorted(x, n);
        free(x);
        if (r->busy_steps && (r->bottleneck < 0 || ss->total_ms > r->stages[r->bottleneck].total_ms))
            r->bottleneck = g;
    }
    if (oom) return MST_ERR_NOMEM;
    if (r->busy_steps == 0) t0 = t1 = 0;
    for (size_t i = 0; i < v->n_requests; i++)
        if (v->requests[i].has_span && v->requests[i].n_steps > 0) r->joined_requests++;
    for (size_t i = 0; i < v->n_inputs; i++)
        if (v->inputs[i].truncated || v->inputs[i].spans_dropped > 0 ||
            v->inputs[i].spans_failed > 0 || v->inputs[i].skipped > 0)
            r->lossy = true;
    if (v->bad_times) r->lossy = true;

    /* Model time against the batch: the better of tokens and batch size. */
    if (r->busy_steps >= 3) {
        double *x1 = malloc(r->busy_steps * sizeof *x1), *x2 = malloc(r->busy_steps * sizeof *x2),
               *y = malloc(r->busy_steps * sizeof *y);
        if (!x1 || !x2 || !y) {
            free(x1);
            free(x2);
            free(y);
            return MST_ERR_NOMEM;
        }
        size_t n = 0, nt = 0;
        for (size_t i = 0; i < v->n_steps; i++) {
            const mst_an_step *s = &v->steps[i];
            if (!s->busy) continue;
            x1[n] = s->scheduled_tokens;
            x2[n] = s->batch_size;
            y[n++] = s->stage_ms[MST_AN_MODEL];
            if (s->scheduled_tokens >= 0) nt++;
        }
        mst_an_fit ft, fb;
        bool have_t = nt == n && mst_an_fit_line(x1, y, n, &ft);
        mst_an_fit_line(x2, y, n, &fb);
        if (have_t && ft.r2 >= fb.r2) {
            r->fit = ft;
            r->fit_x = "scheduled_tokens";
        } else {
            r->fit = fb;
            r->fit_x = "batch_size";
        }
        free(x1);
        free(x2);
        free(y);
    }

    if (r->busy_steps == 0) {
        snprintf(r->verdict, sizeof r->verdict,
                 v->n_steps ? "No step scheduled any request: nothing to attribute."
                            : "No engine steps (vllm.scheduler.schedule spans) in the input: only "
                              "per-name span statistics are available.");
    } else {
        int g = r->bottleneck, second = -1;
        for (int k = 0; k < MST_AN_STAGES; k++)
            if (k != g && (second < 0 || r->stages[k].total_ms > r->stages[second].total_ms))
                second = k;
        r->bottleneck_share = r->stages[g].share;
        size_t n;
        double *w = mst_an_step_sample(v, MST_AN_STEP_WALL, &n, &oom);
        double med = mst_an_quantile_sorted(w, n, 0.5);
        free(w);
        snprintf(r->verdict, sizeof r->verdict,
                 "%c%s bounds throughput: %.0f%% of the busy engine time (%zu busy steps, %.3f ms "
                 "per step median wall); next is %s at %.0f%%.",
                 stage_prose[g][0] >= 'a' && stage_prose[g][0] <= 'z' ? stage_prose[g][0] - 32
                                                                      : stage_prose[g][0],
                 stage_prose[g] + 1, 100 * r->stages[g].share, r->busy_steps, med,
                 stage_prose[second], 100 * r->stages[second].share);
    }

    trend ts, tm, to;
    if (!trend_of(v, MST_AN_SCHEDULE, t0, t1, &ts) || !trend_of(v, MST_AN_MODEL, t0, t1, &tm) ||
        !trend_of(v, MST_AN_OUTPUT, t0, t1, &to))
        return MST_ERR_NOMEM;
    rule_scheduler(v, r, &ts, &tm);
    rule_model(v, r);
    rule_executor(v, r);
    rule_output(v, r, &to);
    rule_waiting(v, r);
    if (!rule_tail(v, r)) return MST_ERR_NOMEM;
    rule_joining(v, r);
    if (r->busy_steps == 0) {
        /* Rules about steps say nothing without steps. */
        for (size_t i = 0; i < r->n_findings; i++) {
            mst_an_finding *f = &r->findings[i];
            if (strcmp(f->rule, "broken_joining") == 0 || strcmp(f->rule, "long_tail") == 0)
                continue;
            f->fired = false;
            f->severity = "info";
            snprintf(f->sentence, sizeof f->sentence, "Not evaluated: no busy engine steps.");
        }
    }
    targets(v, r);
    return MST_OK;
}
