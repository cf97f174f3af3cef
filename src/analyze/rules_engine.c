/*
 * rules_engine.c — rules about the engine's own time (rules_engine.h).
 *
 * "Rising" compares cost at like batch sizes over the whole run: each busy
 * step's value is divided by the median of the steps of its batch class
 * (batch size in ~25 % wide classes, and prefill/decode/mixed), so a load
 * ramp — bigger batches, more cost per step, the same cost per request —
 * stays flat. The run is cut into RISE_BINS bins by time; the lowest bin
 * median is the base, the highest later one the peak, so a rise that
 * drains again before the end (a queue that grew and emptied) is seen too.
 */
#include "analyze/rules_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RISE_BINS 6
#define RISE_MIN_BIN 5
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
#define GAP_FILLED 0.5
#define RANK_RATIO 1.5
#define RANK_P 0.001

#define num mst_an_finding_num

/* ------------------------------------------------------------ rise */

typedef struct rise {
    double base_ms, peak_ms;   /* raw medians of the two bins */
    double ratio;              /* peak / base at like batch sizes */
    double p;                  /* Mann-Whitney, base bin vs peak bin */
    double other_ratio;        /* the same bins for a second metric (model) */
    int base_bin, peak_bin;
    size_t n_base, n_peak;
} rise;

static int batch_class(const mst_an_step *s) {
    int b = s->batch_size > 0 ? s->batch_size : 1;
    return (int)floor(log((double)b) / log(1.25)) * 3 + s->kind;
}

static double step_value(const mst_an_step *s, int metric) { return s->stage_ms[metric]; }

typedef struct cls_median {
    int cls;
    double median;
} cls_median;

static int cmp_cls_val(const void *a, const void *b) {
    const double *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* The median of `metric` per batch class, looked up by class (sorted). */
static cls_median *class_medians(const mst_an_view *v, int metric, size_t *n_out) {
    size_t n = 0;
    double *pairs = malloc((v->n_steps ? v->n_steps : 1) * 2 * sizeof *pairs);
    cls_median *out = malloc((v->n_steps ? v->n_steps : 1) * sizeof *out);
    if (!pairs || !out) {
        free(pairs);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < v->n_steps; i++) {
        if (!v->steps[i].busy) continue;
        pairs[2 * n] = batch_class(&v->steps[i]);
        pairs[2 * n + 1] = step_value(&v->steps[i], metric);
        n++;
    }
    qsort(pairs, n, 2 * sizeof *pairs, cmp_cls_val);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && pairs[2 * j] == pairs[2 * i]) j++;
        size_t mid = i + (j - i) / 2;
        double med = (j - i) % 2 ? pairs[2 * mid + 1] : (pairs[2 * mid + 1] + pairs[2 * (mid - 1) + 1]) / 2;
        out[k++] = (cls_median){(int)pairs[2 * i], med};
        i = j;
    }
    free(pairs);
    *n_out = k;
    return out;
}

static double class_median(const cls_median *cm, size_t n, int cls) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cm[mid].cls < cls) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && cm[lo].cls == cls ? cm[lo].median : NAN;
}

/* Values of `metric` (normalised by class when `norm`) in time bin b. */
static size_t bin_values(const mst_an_view *v, const mst_an_result *r, int metric, const cls_median *cm,
                         size_t ncm, int b, bool norm, double *out) {
    size_t n = 0;
    int64_t span = r->t1 - r->t0;
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy) continue;
        int bin = span > 0 ? (int)((double)(s->start_ns - r->t0) / (double)span * RISE_BINS) : 0;
        if (bin >= RISE_BINS) bin = RISE_BINS - 1;
        if (bin != b) continue;
        double x = step_value(s, metric);
        if (norm) {
            double med = class_median(cm, ncm, batch_class(s));
            x = med > 0 ? x / med : (x > 0 ? 2.0 : 1.0);
        }
        out[n++] = x;
    }
    return n;
}

static double median_of(double *x, size_t n) {
    mst_an_sort_doubles(x, n);
    return mst_an_quantile_sorted(x, n, 0.5);
}

/* The rise of `metric` at like batch sizes; `other` (or -1) is measured
 * over the same two bins. False when out of memory. */
static bool rise_of(const mst_an_view *v, const mst_an_result *r, int metric, int other, rise *out) {
    memset(out, 0, sizeof *out);
    out->ratio = out->other_ratio = 1;
    out->p = 1;
    out->base_bin = out->peak_bin = -1;
    size_t ncm = 0, nco = 0;
    cls_median *cm = class_medians(v, metric, &ncm);
    cls_median *co = other >= 0 ? class_medians(v, other, &nco) : NULL;
    double *a = malloc((v->n_steps ? v->n_steps : 1) * sizeof *a);
    double *b = malloc((v->n_steps ? v->n_steps : 1) * sizeof *b);
    if (!cm || (other >= 0 && !co) || !a || !b) {
        free(cm);
        free(co);
        free(a);
        free(b);
        return false;
    }
    double med[RISE_BINS];
    for (int k = 0; k < RISE_BINS; k++) {
        size_t n = bin_values(v, r, metric, cm, ncm, k, true, a);
        med[k] = n >= RISE_MIN_BIN ? median_of(a, n) : NAN;
    }
    /* The largest rise from a bin to a later one. */
    double best = 0;
    for (int i = 0; i < RISE_BINS; i++)
        for (int j = i + 1; j < RISE_BINS; j++)
            if (!isnan(med[i]) && !isnan(med[j]) && med[i] > 0 && med[j] / med[i] > best) {
                best = med[j] / med[i];
                out->base_bin = i;
                out->peak_bin = j;
            }
    if (out->base_bin >= 0) {
        out->ratio = best;
        size_t na = bin_values(v, r, metric, cm, ncm, out->base_bin, true, a);
        size_t nb = bin_values(v, r, metric, cm, ncm, out->peak_bin, true, b);
        mst_an_mwu u;
        mst_an_mann_whitney(a, na, b, nb, &u);
        out->p = u.p;
        out->n_base = na;
        out->n_peak = nb;
        na = bin_values(v, r, metric, cm, ncm, out->base_bin, false, a);
        nb = bin_values(v, r, metric, cm, ncm, out->peak_bin, false, b);
        out->base_ms = median_of(a, na);
        out->peak_ms = median_of(b, nb);
        if (other >= 0) {
            na = bin_values(v, r, other, co, nco, out->base_bin, true, a);
            nb = bin_values(v, r, other, co, nco, out->peak_bin, true, b);
            double ma = median_of(a, na), mb = median_of(b, nb);
            out->other_ratio = ma > 0 ? mb / ma : 1;
        }
    }
    free(cm);
    free(co);
    free(a);
    free(b);
    return true;
}

static bool rising(const rise *t) {
    return t->base_bin >= 0 && t->ratio >= RISE_RATIO && t->peak_ms - t->base_ms >= RISE_MIN_MS &&
           t->p < RISE_P;
}

/* A rise's numbers under keys made from the literal prefix. */
#define RISE_NUMBERS(f, prefix, t)                     \
    do {                                               \
        num((f), prefix "_base_ms", (t)->base_ms);     \
        num((f), prefix "_peak_ms", (t)->peak_ms);     \
        num((f), prefix "_ratio", (t)->ratio);         \
        num((f), prefix "_peak_bin", (t)->peak_bin);   \
        num((f), "p_value", (t)->p);                   \
    } while (0)

/* "first sixth" .. "last sixth" of the run */
static const char *bin_name(int b) {
    static const char *const names[RISE_BINS] = {"first sixth", "second sixth", "third sixth",
                                                 "fourth sixth", "fifth sixth", "last sixth"};
    return b >= 0 && b < RISE_BINS ? names[b] : "?";
}

/* ------------------------------------------------------------ rules */

bool mst_an_rule_scheduler_rising(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    rise ts;
    if (!rise_of(v, r, MST_AN_SCHEDULE, MST_AN_MODEL, &ts)) return false;
    RISE_NUMBERS(f, "schedule", &ts);
    num(f, "model_ratio", ts.other_ratio);
    bool model_flat = ts.other_ratio >= FLAT_LO && ts.other_ratio <= FLAT_HI;
    f->fired = rising(&ts) && model_flat;
    if (f->fired) {
        mst_an_finding_say(f,
                 "Scheduler time per step rises x%.1f at like batch sizes, from %.3f ms (%s of the run) "
                 "to %.3f ms (%s, p=%.2g), while the model forward stays flat (x%.2f): look at queue "
                 "length, KV-cache pressure, batch composition and the scheduling policy.",
                 ts.ratio, ts.base_ms, bin_name(ts.base_bin), ts.peak_ms, bin_name(ts.peak_bin), ts.p,
                 ts.other_ratio);
    } else if (rising(&ts)) {
        mst_an_finding_say(f,
                 "Scheduler time rises (x%.2f at like batch sizes) but so does the model forward "
                 "(x%.2f): the steps got heavier, not the scheduler alone.",
                 ts.ratio, ts.other_ratio);
    } else {
        mst_an_finding_say(f,
                 "Scheduler time per step is steady at like batch sizes (largest rise between sixths "
                 "of the run x%.2f, rule: >= x%.1f with p < %g).",
                 ts.ratio, RISE_RATIO, RISE_P);
    }
    return true;
}

bool mst_an_rule_model_dominant(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    (void)v;
    double share = r->stages[MST_AN_MODEL].share;
    num(f, "model_share", share);
    num(f, "slope_ms", r->fit.slope);
    num(f, "intercept_ms", r->fit.intercept);
    num(f, "r2", r->fit.r2);
    bool grows = r->fit.n >= 3 && r->fit.slope > 0 && r->fit.r2 >= MODEL_FIT_R2;
    f->fired = share >= MODEL_DOMINANT_SHARE && grows;
    const char *unit = r->fit_x && strcmp(r->fit_x, "batch_size") == 0 ? "request in the batch"
                                                                          : "scheduled token";
    if (f->fired) {
        mst_an_finding_say(f,
                 "The model forward takes %.0f%% of the busy engine time and grows with the batch: "
                 "%.4f ms per %s (r2=%.2f, intercept %.3f ms). Model compute bounds throughput: "
                 "continue with a profiler on the worker (see profile_targets).",
                 100 * share, r->fit.slope, unit, r->fit.r2, r->fit.intercept);
    } else {
        mst_an_finding_say(f,
                 "The model forward takes %.0f%% of the busy engine time (rule: >= %.0f%% and "
                 "growing with the batch; slope %.4f ms per %s, r2=%.2f).",
                 100 * share, 100 * MODEL_DOMINANT_SHARE, r->fit.slope, unit, r->fit.r2);
    }
    return true;
}

bool mst_an_rule_executor_gap(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    double ipc = r->stages[MST_AN_IPC].total_ms, model = r->stages[MST_AN_MODEL].total_ms;
    double of_model = model > 0 ? ipc / model : 0;
    num(f, "ipc_total_ms", ipc);
    num(f, "ipc_p50_ms", r->stages[MST_AN_IPC].q_ms.p50);
    num(f, "ipc_of_model", of_model);
    num(f, "ipc_share", r->stages[MST_AN_IPC].share);
    if (!v->have_worker_spans) {
        mst_an_finding_say(f,
                 "Not evaluated: no worker or model-runner spans, so the executor cannot be "
                 "compared with the forward.");
        return true;
    }
    f->fired = of_model >= IPC_OF_MODEL && r->stages[MST_AN_IPC].share >= IPC_SHARE;
    if (f->fired) {
        mst_an_finding_say(f,
                 "The executor's model step exceeds the workers' forward by %.3f ms per step "
                 "(median; %.0f%% of the forward time, %.0f%% of the busy time): IPC to the "
                 "workers, synchronisation or input preparation.",
                 r->stages[MST_AN_IPC].q_ms.p50, 100 * of_model, 100 * r->stages[MST_AN_IPC].share);
    } else {
        mst_an_finding_say(f,
                 "Executor overhead around the forward is %.0f%% of the forward time (rule: >= "
                 "%.0f%%).",
                 100 * of_model, 100 * IPC_OF_MODEL);
    }
    return true;
}

bool mst_an_rule_output_rising(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    rise to;
    if (!rise_of(v, r, MST_AN_OUTPUT, -1, &to)) return false;
    double share = r->stages[MST_AN_OUTPUT].share;
    RISE_NUMBERS(f, "output", &to);
    num(f, "output_share", share);
    bool rose = rising(&to);
    f->fired = rose || share >= OUTPUT_SHARE;
    if (f->fired) {
        if (rose)
            mst_an_finding_say(f,
                     "Output processing per step rises x%.1f at like batch sizes, from %.3f ms (%s of "
                     "the run) to %.3f ms (%s, p=%.2g); the API server's output loop is busy %.0f%% of "
                     "the engine's busy time (concurrent with it): detokenisation, response building, "
                     "request completion or network back-pressure in the API server.",
                     to.ratio, to.base_ms, bin_name(to.base_bin), to.peak_ms, bin_name(to.peak_bin), to.p,
                     100 * share);
        else
            mst_an_finding_say(f,
                     "The API server's output loop is busy %.0f%% of the engine's busy time (%.3f ms of "
                     "output work per step on average, concurrent with the engine): it %s.",
                     100 * share, r->stages[MST_AN_OUTPUT].mean_ms,
                     share >= 0.95 ? "cannot keep up with the engine and falls behind"
                                   : "keeps up only barely");
    } else {
        mst_an_finding_say(f,
                 "Output processing is steady at like batch sizes (x%.2f) and the output loop is busy "
                 "%.0f%% of the engine's busy time (concurrent, not added to the engine's time).",
                 to.ratio, 100 * share);
    }
    return true;
}

bool mst_an_rule_host_waiting(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    (void)v;
    double share = r->stages[MST_AN_WAITING].share;
    num(f, "waiting_share", share);
    num(f, "waiting_total_ms", r->stages[MST_AN_WAITING].total_ms);
    num(f, "waiting_p50_ms", r->stages[MST_AN_WAITING].q_ms.p50);
    num(f, "gap_output_share", r->gap_output_share);
    f->fired = share >= WAITING_SHARE;
    if (f->fired) {
        if (r->gap_output_share >= GAP_FILLED)
            mst_an_finding_say(f,
                     "The engine is idle %.0f%% of its busy time between steps (%.3f ms per step, "
                     "median), and the API server's output processing fills %.0f%% of those gaps: the "
                     "engine waits for output processing (same CPU, the GIL or a synchronous output "
                     "path). Make output processing cheaper or give the API server its own core.",
                     100 * share, r->stages[MST_AN_WAITING].q_ms.p50, 100 * r->gap_output_share);
        else
            mst_an_finding_say(f,
                     "Between back-to-back busy steps the engine spends %.0f%% of the time in no hooked "
                     "call and with no worker forward running (%.3f ms per step, median), and no other "
                     "traced stage fills those gaps (output busy in %.0f%% of them): a host bubble "
                     "(Python overhead, GC, a lock, blocking I/O) while requests were queued.",
                     100 * share, r->stages[MST_AN_WAITING].q_ms.p50, 100 * r->gap_output_share);
    } else {
        mst_an_finding_say(f,
                 "Host waiting between busy steps is %.0f%% of the busy time (rule: >= %.0f%%).",
                 100 * share, 100 * WAITING_SHARE);
    }
    return true;
}

bool mst_an_rule_rank_imbalance(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    num(f, "engines", (double)r->n_engines);
    size_t used = 0, slow = SIZE_MAX;
    for (size_t e = 0; e < r->n_engines; e++) {
        if (r->engines[e].busy_steps < 10) continue;
        used++;
        if (slow == SIZE_MAX || r->engines[e].wall_p50_ms > r->engines[slow].wall_p50_ms) slow = e;
    }
    if (used < 2) {
        mst_an_finding_say(f,
                 "Not evaluated: %zu engine(s) with at least 10 busy steps (needs 2 or more).", used);
        return true;
    }
    /* The others' median of per-engine medians, and the slow one's stage
     * that differs most. */
    double *others = malloc(r->n_engines * sizeof *others);
    if (!others) return false;
    size_t no = 0;
    for (size_t e = 0; e < r->n_engines; e++)
        if (e != slow && r->engines[e].busy_steps >= 10) others[no++] = r->engines[e].wall_p50_ms;
    double rest = median_of(others, no);
    const mst_an_engine_summary *es = &r->engines[slow];
    int worst = MST_AN_MODEL;
    double worst_d = -INFINITY;
    for (int g = 0; g < MST_AN_STAGES; g++) {
        if (g == MST_AN_OUTPUT) continue;
        no = 0;
        for (size_t e = 0; e < r->n_engines; e++)
            if (e != slow && r->engines[e].busy_steps >= 10) others[no++] = r->engines[e].stage_p50_ms[g];
        double d = es->stage_p50_ms[g] - median_of(others, no);
        if (d > worst_d) {
            worst_d = d;
            worst = g;
        }
    }
    free(others);
    /* Significance: the slow engine's step walls against all the others'. */
    bool oom = false;
    size_t na = 0, nb = 0;
    double *a = mst_an_step_sample(v, MST_AN_STEP_WALL, es->proc, &na, &oom);
    double *b = malloc((v->n_steps ? v->n_steps : 1) * sizeof *b);
    if (oom || !b) {
        free(a);
        free(b);
        return false;
    }
    nb = 0;
    for (size_t i = 0; i < v->n_steps; i++)
        if (v->steps[i].busy && v->steps[i].proc != es->proc) b[nb++] = v->steps[i].wall_ms;
    mst_an_mwu u;
    mst_an_mann_whitney(a, na, b, nb, &u);
    free(a);
    free(b);
    double ratio = rest > 0 ? es->wall_p50_ms / rest : 1;
    const mst_an_proc *p = &v->procs[es->proc];
    const char *file = p->source < v->n_inputs ? v->inputs[p->source].name : "?";
    num(f, "slowest_pid", (double)p->pid);
    num(f, "slowest_input", (double)p->source);
    num(f, "slowest_wall_p50_ms", es->wall_p50_ms);
    num(f, "others_wall_p50_ms", rest);
    num(f, "ratio", ratio);
    num(f, "p_value", u.p);
    num(f, "stage", worst);
    f->fired = ratio >= RANK_RATIO && u.p < RANK_P;
    if (f->fired) {
        mst_an_finding_say(f,
                 "One engine is slower than the others: pid %lld in %.300s takes %.3f ms per step "
                 "(median) against %.3f ms for the other %zu engines (x%.2f, p=%.2g), mostly in %s "
                 "(+%.3f ms per step). With data or pipeline parallelism the slowest rank paces the "
                 "others: check that host's load, its device, and the data routed to it.",
                 (long long)p->pid, file, es->wall_p50_ms, rest, used - 1, ratio, u.p,
                 mst_an_stage_prose(worst), worst_d);
    } else {
        mst_an_finding_say(f,
                 "The %zu engines are balanced: the slowest (pid %lld) takes x%.2f the others' median "
                 "step time (rule: >= x%.1f with p < %g).",
                 used, (long long)p->pid, ratio, RANK_RATIO, RANK_P);
    }
    return true;
}
