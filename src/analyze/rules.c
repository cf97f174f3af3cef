/*
 * rules.c — the analysis (rules.h): stage split, per-request metrics,
 * per-engine summaries, data-quality warnings, the rule table and the
 * verdict, profile targets. The rules themselves are in rules_engine.c and
 * rules_serving.c; this file only runs them, in the order of RULES.
 */
#include "analyze/rules.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/rules_engine.h"
#include "analyze/rules_serving.h"

/* Every rule, in the order its finding is reported: name, function,
 * needs busy steps, verdict name when it fires (or NULL). To add one: write
 * an mst_an_rule_fn (rules_engine.c or rules_serving.c), add a row here, and
 * document it in docs/analyze.md "Rules". */
static const mst_an_rule RULES[] = {
    {"capacity", mst_an_rule_capacity, true, "capacity"},
    {"preemption", mst_an_rule_preemption, true, NULL},
    {"prefill_interference", mst_an_rule_prefill_interference, true, NULL},
    {"scheduler_rising", mst_an_rule_scheduler_rising, true, NULL},
    {"model_dominant", mst_an_rule_model_dominant, true, NULL},
    {"executor_gap", mst_an_rule_executor_gap, true, NULL},
    {"output_rising", mst_an_rule_output_rising, true, NULL},
    {"host_waiting", mst_an_rule_host_waiting, true, NULL},
    {"rank_imbalance", mst_an_rule_rank_imbalance, true, NULL},
    {"long_tail", mst_an_rule_long_tail, false, NULL},
    {"broken_joining", mst_an_rule_broken_joining, false, NULL},
    {"clock", mst_an_rule_clock, false, NULL},
};

const mst_an_rule *mst_an_rules(size_t *n) {
    *n = sizeof RULES / sizeof RULES[0];
    return RULES;
}

/* ------------------------------------------------------------ warnings */

static bool warn(mst_an_result *r, const char *fmt, ...) {
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char **nw = realloc(r->warnings, (r->n_warnings + 1) * sizeof *nw);
    if (!nw) return false;
    r->warnings = nw;
    if (!(nw[r->n_warnings] = strdup(line))) return false;
    r->n_warnings++;
    return true;
}

/* The data-quality warnings every output shows (text included). */
static bool warnings(const mst_an_view *v, mst_an_result *r) {
    bool ok = true;
    for (size_t i = 0; i < v->n_inputs; i++) {
        if (v->inputs[i].truncated)
            ok &= warn(r, "%s was cut short (e.g. the forwarder was killed): the analysis covers only "
                       "the spans before the cut", v->inputs[i].name);
        if (v->inputs[i].skipped)
            ok &= warn(r, "%s: %llu events skipped as unreadable", v->inputs[i].name,
                       (unsigned long long)v->inputs[i].skipped);
    }
    if (v->unjoined)
        ok &= warn(r, "%llu request spans have no step carrying their id (unjoined; see "
                   "unjoined_examples)", (unsigned long long)v->unjoined);
    if (v->negative_gaps)
        ok &= warn(r, "%llu clock anomalies (a step starting before the previous one ended, or a "
                   "request scheduled before it was queued): clocks of the processes may disagree",
                   (unsigned long long)v->negative_gaps);
    if (v->queue_over_ttft)
        ok &= warn(r, "%llu requests queued longer than their time to first token: the engine's and "
                   "the API server's clocks disagree", (unsigned long long)v->queue_over_ttft);
    if (v->clock_skew)
        ok &= warn(r, "%llu requests reached the engine before they arrived, or had a token output by "
                   "the engine after the API server processed it: the engine's and the API "
                   "server's clocks disagree", (unsigned long long)v->clock_skew);
    if (v->negative_itl)
        ok &= warn(r, "%llu negative inter-token gaps", (unsigned long long)v->negative_itl);
    if (v->missing_steps)
        ok &= warn(r, "%llu engine steps are missing (gaps in step.index): their spans were lost before they "
                   "reached the trace (a tracer queue that overflowed, a process killed before it flushed); "
                   "tokens and gaps of the requests in them are undercounted",
                   (unsigned long long)v->missing_steps);
    if (v->bad_times)
        ok &= warn(r, "%llu spans left out: their times are not on any clock (beyond 146 years from "
                   "the epoch)", (unsigned long long)v->bad_times);
    if (v->outside_window)
        ok &= warn(r, "%llu steps and requests outside --window / --skip-warmup left out",
                   (unsigned long long)v->outside_window);
    if (v->n_steps && v->steps_with_record == 0 && r->included_requests)
        ok &= warn(r, "the steps carry no step record (step.phase, step.queued_ns): queue is "
                   "measured from arrival (it includes the API server's hand-off), each step that "
                   "scheduled a request counts as one of its tokens, and preemptions are unknown");
    if (v->spans && v->n_steps == 0) ok &= warn(r, "no vllm.scheduler.schedule spans: no engine steps to analyse");
    return ok;
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
    /* The three busy steps with the most time in the bottleneck stage; an
     * engine's first step is cold (compilation, first allocations) and is
     * no target. */
    int g = r->bottleneck >= 0 && r->bottleneck < MST_AN_STAGES ? r->bottleneck : MST_AN_MODEL;
    size_t best[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
    for (size_t i = 0; i < v->n_steps; i++) {
        if (!v->steps[i].busy || v->steps[i].ordinal == 0) continue;
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
        bool output = g == MST_AN_OUTPUT && s->output_start_ns != INT64_MIN;
        /* A host stall is the gap after the step's own spans, not the step. */
        bool stall = g == MST_AN_WAITING && s->paired;
        uint32_t proc = model ? s->model_proc : output ? s->output_proc : s->proc;
        snprintf(what, sizeof what, "step %zu (%s pid %lld)", best[k],
                 model ? "worker" : output ? "output" : "engine", (long long)pid_of(v, proc));
        snprintf(why, sizeof why, "%.3f ms of %s in one step (median %.3f ms), batch %d, %d tokens%s",
                 s->stage_ms[g], mst_an_stage_names[g], r->stages[g].q_ms.p50, s->batch_size,
                 s->scheduled_tokens, stall ? "; the window is the stall itself" : "");
        int64_t end = s->start_ns + (int64_t)(s->wall_ms * 1e6);
        if (s->end_ns > end && !stall) end = s->end_ns;
        int64_t start = model ? s->model_start_ns : output ? s->output_start_ns
                        : stall ? s->engine_end_ns : s->start_ns;
        add_target(r, what, pid_of(v, proc), start, model ? s->model_end_ns : output ? s->output_end_ns : end,
                   why);
    }
    /* The two slowest requests end to end. */
    const mst_an_request *slow[2] = {NULL, NULL};
    for (size_t i = 0; i < v->n_requests; i++) {
        const mst_an_request *q = &v->requests[i];
        if (q->excluded || isnan(q->e2e_ms)) continue;
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
                 "slowest request: %.1f ms end to end (queue %.1f ms, TTFT %.1f ms, %u steps, %u "
                 "preemptions)",
                 q->e2e_ms, q->queue_ms, q->ttft_ms, q->n_steps, q->preemptions);
        int64_t end = q->arrival_ns + (int64_t)(q->e2e_ms * 1e6);
        add_target(r, what, pid_of(v, q->span_proc), q->arrival_ns, end, why);
    }
}

/* ------------------------------------------------------------ parts */

static bool stages(const mst_an_view *v, mst_an_result *r) {
    bool oom = false;
    double overlap = 0, gap_out = 0, gap = 0;
    r->t0 = INT64_MAX;
    r->t1 = INT64_MIN;
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy) continue;
        r->busy_steps++;
        r->busy_wall_ms += s->wall_ms;
        overlap += s->output_overlap_ms;
        gap_out += s->gap_output_ms;
        if (s->paired) gap += s->stage_ms[MST_AN_WAITING];
        if (s->start_ns < r->t0) r->t0 = s->start_ns;
        if (s->start_ns > r->t1) r->t1 = s->start_ns;
    }
    if (r->busy_steps == 0) r->t0 = r->t1 = 0;
    r->gap_output_share = gap > 0 ? (gap_out < gap ? gap_out / gap : 1) : 0;
    for (int g = 0; g < MST_AN_STAGES; g++) {
        size_t n;
        double *x = mst_an_step_sample(v, g, UINT32_MAX, &n, &oom);
        mst_an_stage_summary *ss = &r->stages[g];
        ss->count = n;
        for (size_t i = 0; i < n; i++) ss->total_ms += x[i];
        /* The output loop runs beside the engine: its share is the part of
         * the engine's busy time in which it was busy, never added. */
        double part = g == MST_AN_OUTPUT ? overlap : ss->total_ms;
        ss->share = r->busy_wall_ms > 0 ? part / r->busy_wall_ms : 0;
        if (g != MST_AN_OUTPUT) r->parts_share += ss->share;
        ss->mean_ms = n ? ss->total_ms / (double)n : NAN;
        ss->q_ms = mst_an_quantiles_sorted(x, n);
        free(x);
    }
    return !oom;
}

/* Per engine: its steps are one contiguous run of the view's steps. */
static bool engines(const mst_an_view *v, mst_an_result *r) {
    r->engines = calloc(v->n_engines ? v->n_engines : 1, sizeof *r->engines);
    double *x = malloc((v->n_steps ? v->n_steps : 1) * sizeof *x);
    if (!r->engines || !x) {
        free(x);
        return false;
    }
    for (size_t lo = 0; lo < v->n_steps && r->n_engines < v->n_engines;) {
        size_t hi = lo;
        while (hi < v->n_steps && v->steps[hi].proc == v->steps[lo].proc) hi++;
        mst_an_engine_summary *e = &r->engines[r->n_engines++];
        e->proc = v->steps[lo].proc;
        for (int g = 0; g <= MST_AN_STEP_WALL; g++) {
            size_t n = 0;
            for (size_t i = lo; i < hi; i++)
                if (v->steps[i].busy) x[n++] = g == MST_AN_STEP_WALL ? v->steps[i].wall_ms : v->steps[i].stage_ms[g];
            mst_an_sort_doubles(x, n);
            if (g < MST_AN_STAGES) {
                e->stage_p50_ms[g] = mst_an_quantile_sorted(x, n, 0.5);
                continue;
            }
            e->busy_steps = n;
            for (size_t k = 0; k < n; k++) e->busy_wall_ms += x[k];
            e->wall_p50_ms = mst_an_quantile_sorted(x, n, 0.5);
            e->wall_p90_ms = mst_an_quantile_sorted(x, n, 0.9);
        }
        lo = hi;
    }
    free(x);
    return true;
}

static bool request_summaries(const mst_an_view *v, mst_an_result *r) {
    bool oom = false;
    for (size_t i = 0; i < v->n_requests; i++) {
        if (v->requests[i].excluded) continue;
        r->included_requests++;
        if (v->requests[i].has_span && v->requests[i].n_steps > 0) r->joined_requests++;
    }
    for (int k = 0; k <= MST_AN_REQ_ITL; k++) {
        size_t n;
        r->samples[k] = mst_an_request_sample(v, k, &n, &oom);
        mst_an_metric_summary *m = &r->requests[k];
        m->n = n;
        m->q = mst_an_quantiles_sorted(r->samples[k], n);
        m->mean = mst_an_mean(r->samples[k], n);
        m->max = n ? r->samples[k][n - 1] : NAN;
    }
    return !oom;
}

/* The scheduler's state over time, in equal bins from the first busy step
 * to the end of the last. */
static bool timeline(const mst_an_view *v, mst_an_result *r) {
    if (r->busy_steps == 0) return true;
    int64_t end = r->t1;
    for (size_t i = 0; i < v->n_steps; i++)
        if (v->steps[i].busy && v->steps[i].start_ns == r->t1)
            end = r->t1 + (int64_t)(v->steps[i].wall_ms * 1e6);
    size_t nb = r->busy_steps < MST_AN_TIMELINE_BINS ? r->busy_steps : MST_AN_TIMELINE_BINS;
    int64_t span = end - r->t0 + 1;
    r->timeline_bin_ns = span / (int64_t)nb + (span % (int64_t)nb ? 1 : 0);
    r->timeline = calloc(nb, sizeof *r->timeline);
    if (!r->timeline) return false;
    r->n_timeline = nb;
    for (size_t b = 0; b < nb; b++) {
        mst_an_timeline_bin *x = &r->timeline[b];
        x->start_ns = r->t0 + (int64_t)b * r->timeline_bin_ns;
        x->prefill_tokens = x->decode_tokens = -1;
        x->waiting_max = x->running_max = -1;
        x->kv_usage_max = NAN;
    }
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy) continue;
        size_t b = (size_t)((s->start_ns - r->t0) / r->timeline_bin_ns);
        if (b >= nb) b = nb - 1;
        mst_an_timeline_bin *x = &r->timeline[b];
        x->steps++;
        if (s->rec.has_phase) {
            x->prefill_tokens = (x->prefill_tokens < 0 ? 0 : x->prefill_tokens) + s->rec.prefill_tokens;
            x->decode_tokens = (x->decode_tokens < 0 ? 0 : x->decode_tokens) + s->rec.decode_tokens;
        }
        if (s->rec.waiting > x->waiting_max) x->waiting_max = s->rec.waiting;
        if (s->rec.running > x->running_max) x->running_max = s->rec.running;
        if (s->rec.kv_usage > x->kv_usage_max || (isnan(x->kv_usage_max) && !isnan(s->rec.kv_usage)))
            x->kv_usage_max = s->rec.kv_usage;
        x->preemptions += s->rec.preempted_n;
    }
    return true;
}

/* Model time against the batch: the better of tokens and batch size. */
static bool model_fit(const mst_an_view *v, mst_an_result *r) {
    if (r->busy_steps < 3) return true;
    double *x1 = malloc(r->busy_steps * sizeof *x1), *x2 = malloc(r->busy_steps * sizeof *x2),
           *y = malloc(r->busy_steps * sizeof *y);
    if (!x1 || !x2 || !y) {
        free(x1);
        free(x2);
        free(y);
        return false;
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
    return true;
}

/* The stage that bounds throughput: the largest part of the engine's
 * time, or the output loop when it is busy for more of it. */
static void verdict(const mst_an_view *v, mst_an_result *r) {
    if (r->busy_steps == 0) {
        snprintf(r->verdict, sizeof r->verdict,
                 v->n_steps ? "No step scheduled any request: nothing to attribute."
                            : "No engine steps (vllm.scheduler.schedule spans) in the input: only "
                              "per-name span statistics are available.");
        return;
    }
    int g = -1, second = -1;
    for (int k = 0; k < MST_AN_STAGES; k++)
        if (g < 0 || r->stages[k].share > r->stages[g].share) g = k;
    for (int k = 0; k < MST_AN_STAGES; k++)
        if (k != g && (second < 0 || r->stages[k].share > r->stages[second].share)) second = k;
    r->bottleneck = g;
    r->bottleneck_name = mst_an_stage_names[g];
    r->bottleneck_share = r->stages[g].share;
    size_t n;
    bool oom = false;
    double *w = mst_an_step_sample(v, MST_AN_STEP_WALL, UINT32_MAX, &n, &oom);
    double med = mst_an_quantile_sorted(w, n, 0.5);
    free(w);
    const char *p = mst_an_stage_prose(g);
    if (g == MST_AN_OUTPUT)
        snprintf(r->verdict, sizeof r->verdict,
                 "Output processing in the API server bounds throughput: its output loop is busy %.0f%% of the "
                 "engine's busy time, concurrently with it (%zu busy steps, %.3f ms per step median wall); the "
                 "largest part of the engine's own time is %s at %.0f%%.",
                 100 * r->stages[g].share, r->busy_steps, med, mst_an_stage_prose(second), 100 * r->stages[second].share);
    else
        snprintf(r->verdict, sizeof r->verdict,
                 "%c%s bounds throughput: %.0f%% of the busy engine time (%zu busy steps, %.3f ms per step "
                 "median wall); next is %s at %.0f%%.",
                 p[0] >= 'a' && p[0] <= 'z' ? p[0] - 32 : p[0], p + 1, 100 * r->stages[g].share, r->busy_steps,
                 med, mst_an_stage_prose(second), 100 * r->stages[second].share);
}

/* ------------------------------------------------------------ main */

mst_status mst_an_evaluate(const mst_an_view *v, mst_an_result *r) {
    memset(r, 0, sizeof *r);
    r->bottleneck = -1;
    for (size_t i = 0; i < v->n_inputs; i++)
        if (v->inputs[i].truncated || v->inputs[i].spans_dropped > 0 || v->inputs[i].spans_failed > 0 ||
            v->inputs[i].skipped > 0)
            r->lossy = true;
    if (v->bad_times || v->missing_steps) r->lossy = true;
    size_t n_rules;
    const mst_an_rule *rules = mst_an_rules(&n_rules);
    r->findings = calloc(n_rules, sizeof *r->findings);
    if (!r->findings || !stages(v, r) || !engines(v, r) || !request_summaries(v, r) || !model_fit(v, r) ||
        !warnings(v, r) || !timeline(v, r))
        goto oom;
    verdict(v, r);
    for (size_t i = 0; i < n_rules; i++) {
        mst_an_finding *f = &r->findings[r->n_findings++];
        f->rule = rules[i].name;
        f->severity = "info";
        if (rules[i].needs_steps && r->busy_steps == 0) {
            mst_an_finding_say(f, "Not evaluated: no busy engine steps.");
            continue;
        }
        if (!rules[i].run(v, r, f)) goto oom;
        if (f->fired && rules[i].verdict) {
            r->bottleneck = MST_AN_VERDICT_RULE;
            r->bottleneck_name = rules[i].verdict;
            r->bottleneck_share = f->n_numbers ? f->values[0] : NAN;
            snprintf(r->verdict, sizeof r->verdict, "%s", f->sentence);
        }
    }
    targets(v, r);
    return MST_OK;
oom:
    mst_an_result_free(r);
    return MST_ERR_NOMEM;
}
