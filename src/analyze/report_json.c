/*
 * report_json.c — writes the analysis JSON (report_json.h). A tiny emitter
 * (comma bookkeeping per nesting level) over mst_buf; numbers that cannot
 * be computed are null.
 */
#include "analyze/report_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analysis.h"
#include "analyze/stats.h"

#define MAX_DEPTH 32
#define MAX_WINDOW_STEPS 64

typedef struct jw {
    mst_buf *b;
    int depth;
    bool need_comma[MAX_DEPTH];
} jw;

static void sep(jw *w) {
    if (w->need_comma[w->depth]) mst_buf_append_byte(w->b, ',');
    w->need_comma[w->depth] = true;
}
static void key(jw *w, const char *k) {
    sep(w);
    mst_buf_append_json_str(w->b, k, strlen(k));
    mst_buf_append_byte(w->b, ':');
    w->need_comma[w->depth] = true;
}
static void open_(jw *w, char c) {
    mst_buf_append_byte(w->b, (uint8_t)c);
    if (w->depth + 1 < MAX_DEPTH) w->depth++;
    w->need_comma[w->depth] = false;
}
static void close_(jw *w, char c) {
    mst_buf_append_byte(w->b, (uint8_t)c);
    if (w->depth > 0) w->depth--;
}
/* Values: inside arrays call sep first through the v* helpers. */
static void raw_num(jw *w, double v) {
    if (!isfinite(v)) {
        mst_buf_append_cstr(w->b, "null");
        return;
    }
    char tmp[40];
    if (v == floor(v) && fabs(v) < 1e15) snprintf(tmp, sizeof tmp, "%.0f", v);
    else snprintf(tmp, sizeof tmp, "%.9g", v);
    mst_buf_append_cstr(w->b, tmp);
}
static void kn(jw *w, const char *k, double v) {
    key(w, k);
    raw_num(w, v);
}
static void ki(jw *w, const char *k, int64_t v) {
    key(w, k);
    mst_buf_append_i64(w->b, v);
}
static void ks(jw *w, const char *k, const char *s) {
    key(w, k);
    if (s) mst_buf_append_json_str(w->b, s, strlen(s));
    else mst_buf_append_cstr(w->b, "null");
}
/* A string of exact length (it may hold a NUL, written as \u0000). */
static void ksn(jw *w, const char *k, const char *s, size_t n) {
    key(w, k);
    mst_buf_append_json_str(w->b, s, n);
}
static void kb(jw *w, const char *k, bool v) {
    key(w, k);
    mst_buf_append_cstr(w->b, v ? "true" : "false");
}
static void ko(jw *w, const char *k) {
    key(w, k);
    open_(w, '{');
}
static void ka(jw *w, const char *k) {
    key(w, k);
    open_(w, '[');
}
static void vs(jw *w, const char *s) {
    sep(w);
    mst_buf_append_json_str(w->b, s, strlen(s));
}
static void vo(jw *w) {
    sep(w);
    open_(w, '{');
}
static void va(jw *w) {
    sep(w);
    open_(w, '[');
}
static void vn(jw *w, double v) {
    sep(w);
    raw_num(w, v);
}
static void vi(jw *w, int64_t v) {
    sep(w);
    mst_buf_append_i64(w->b, v);
}

/* The p50/p90/p99 keys of a distribution: "p50" + suffix ("" or "_ms"), ... */
static void quantiles(jw *w, const char *suffix, const mst_an_quantiles *q) {
    const struct {
        const char *name;
        double v;
    } each[3] = {{"p50", q->p50}, {"p90", q->p90}, {"p99", q->p99}};
    for (int i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "%s%s", each[i].name, suffix);
        kn(w, k, each[i].v);
    }
}

/* ------------------------------------------------------------ sections */

/* A count that is -1 when unknown. */
static void num_or_null(jw *w, const char *k, int64_t v) {
    if (v < 0) {
        key(w, k);
        mst_buf_append_cstr(w->b, "null");
    } else ki(w, k, v);
}

/* The spans an input's traced processes failed to send (-1: it cannot say).
 * Its own count when it has one; else 0 when its forwarder.spans_dropped
 * counter is 0: that counter counts every span lost before the file, the
 * failed sends the processes reported (loss reports) included, so none
 * failed. A nonzero counter does not split them out: unknown. */
static int64_t input_spans_failed(const mst_an_input_info *in) {
    if (in->spans_failed >= 0) return in->spans_failed;
    return in->spans_dropped == 0 ? 0 : -1;
}

static void inputs(jw *w, const mst_an_view *v) {
    ka(w, "inputs");
    for (size_t i = 0; i < v->n_inputs; i++) {
        const mst_an_input_info *in = &v->inputs[i];
        vo(w);
        ks(w, "kind", in->kind);
        ks(w, "name", in->name);
        ki(w, "spans", (int64_t)in->spans);
        ki(w, "bytes", (int64_t)in->bytes);
        ki(w, "skipped", (int64_t)in->skipped);
        ki(w, "flows", (int64_t)in->flows);
        kb(w, "truncated", in->truncated);
        ka(w, "warnings");
        for (size_t k = 0; k < in->n_warnings; k++) vs(w, in->warnings[k]);
        close_(w, ']');
        close_(w, '}');
    }
    close_(w, ']');
}

static void data_quality(jw *w, const mst_an_view *v, const mst_an_result *r) {
    ko(w, "data_quality");
    kb(w, "lossy", r->lossy);
    ki(w, "spans", (int64_t)v->spans);
    ka(w, "processes");
    for (size_t i = 0; i < v->n_procs; i++) {
        vo(w);
        ki(w, "pid", v->procs[i].pid);
        ks(w, "role", v->procs[i].role);
        ki(w, "input", v->procs[i].source);
        ki(w, "spans", (int64_t)v->procs[i].spans);
        close_(w, '}');
    }
    close_(w, ']');
    /* Sums over the inputs that know the count; null when none does, and
     * for the failed spans also when an input that lost spans cannot say
     * how many of them failed (a partial sum would pass for the whole). */
    int64_t dropped = -1, failed = -1;
    bool failed_unknown = false;
    for (size_t i = 0; i < v->n_inputs; i++) {
        const mst_an_input_info *in = &v->inputs[i];
        int64_t f = input_spans_failed(in);
        if (in->spans_dropped >= 0) dropped = (dropped < 0 ? 0 : dropped) + in->spans_dropped;
        if (f >= 0) failed = (failed < 0 ? 0 : failed) + f;
        else if (in->spans_dropped > 0) failed_unknown = true;
    }
    num_or_null(w, "spans_dropped", dropped);
    num_or_null(w, "spans_failed", failed_unknown ? -1 : failed);
    ki(w, "unjoined_requests", (int64_t)v->unjoined);
    ka(w, "unjoined_examples");
    size_t shown = 0;
    for (size_t i = 0; i < v->n_requests && shown < 10; i++) {
        const mst_an_request *q = &v->requests[i];
        if (!q->excluded && q->has_span && q->n_steps == 0) {
            vs(w, v->strings + q->id_off);
            shown++;
        }
    }
    close_(w, ']');
    ki(w, "requests_without_span", (int64_t)(r->included_requests - v->requests_with_span));
    ki(w, "traces", (int64_t)v->traces);
    ki(w, "short_traces", (int64_t)v->short_traces);
    ki(w, "negative_gaps", (int64_t)v->negative_gaps);
    ki(w, "queue_over_ttft", (int64_t)v->queue_over_ttft);
    ki(w, "clock_skew", (int64_t)v->clock_skew);
    ki(w, "negative_itl", (int64_t)v->negative_itl);
    ki(w, "bad_times", (int64_t)v->bad_times);
    ki(w, "outside_window", (int64_t)v->outside_window);
    ki(w, "steps_without_request_ids", (int64_t)v->steps_without_ids);
    ki(w, "steps_with_record", (int64_t)v->steps_with_record);
    ki(w, "missing_steps", (int64_t)v->missing_steps);
    ki(w, "engines", (int64_t)v->n_engines);
    kb(w, "worker_spans", v->have_worker_spans);
    ka(w, "warnings");
    for (size_t i = 0; i < r->n_warnings; i++) vs(w, r->warnings[i]);
    close_(w, ']');
    close_(w, '}');
}

static void findings(jw *w, const mst_an_result *r) {
    ko(w, "verdict");
    ks(w, "bottleneck", r->bottleneck_name);
    ks(w, "sentence", r->verdict);
    kn(w, "share", r->bottleneck >= 0 ? r->bottleneck_share : NAN);
    ka(w, "fired");
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].fired) vs(w, r->findings[i].rule);
    close_(w, ']');
    close_(w, '}');
    ka(w, "findings");
    for (size_t i = 0; i < r->n_findings; i++) {
        const mst_an_finding *f = &r->findings[i];
        vo(w);
        ks(w, "rule", f->rule);
        kb(w, "fired", f->fired);
        ks(w, "severity", f->severity);
        ks(w, "sentence", f->sentence);
        ko(w, "numbers");
        for (size_t k = 0; k < f->n_numbers; k++) kn(w, f->keys[k], f->values[k]);
        close_(w, '}');
        close_(w, '}');
    }
    close_(w, ']');
}

static void stages(jw *w, const mst_an_result *r) {
    ko(w, "stages");
    for (int g = 0; g < MST_AN_STAGES; g++) {
        const mst_an_stage_summary *s = &r->stages[g];
        ko(w, mst_an_stage_names[g]);
        kn(w, "total_ms", s->total_ms);
        kn(w, "share", s->share);
        kn(w, "mean_ms", s->mean_ms);
        quantiles(w, "_ms", &s->q_ms);
        ki(w, "count", (int64_t)s->count);
        kb(w, "concurrent", g == MST_AN_OUTPUT);
        close_(w, '}');
    }
    close_(w, '}');
    kn(w, "busy_wall_ms", r->busy_wall_ms);
    kn(w, "parts_share", r->parts_share);
    kn(w, "gap_output_share", r->gap_output_share);
}

static void engines(jw *w, const mst_an_view *v, const mst_an_result *r) {
    ka(w, "engines");
    for (size_t e = 0; e < r->n_engines; e++) {
        const mst_an_engine_summary *es = &r->engines[e];
        const mst_an_proc *p = &v->procs[es->proc];
        vo(w);
        ki(w, "pid", p->pid);
        ki(w, "input", p->source);
        ks(w, "input_name", p->source < v->n_inputs ? v->inputs[p->source].name : NULL);
        ks(w, "role", p->role);
        ki(w, "busy_steps", (int64_t)es->busy_steps);
        kn(w, "busy_wall_ms", es->busy_wall_ms);
        kn(w, "wall_p50_ms", es->wall_p50_ms);
        kn(w, "wall_p90_ms", es->wall_p90_ms);
        ko(w, "stage_p50_ms");
        for (int g = 0; g < MST_AN_STAGES; g++) kn(w, mst_an_stage_names[g], es->stage_p50_ms[g]);
        close_(w, '}');
        close_(w, '}');
    }
    close_(w, ']');
}

static int cmp_name_total(const void *a, const void *b) {
    const mst_an_name_stat *x = *(const mst_an_name_stat *const *)a;
    const mst_an_name_stat *y = *(const mst_an_name_stat *const *)b;
    if (x->total_ms != y->total_ms) return x->total_ms < y->total_ms ? 1 : -1;
    return strcmp(x->name, y->name);
}

static bool span_names(jw *w, const mst_an_view *v) {
    const mst_an_name_stat **o = malloc((v->n_names ? v->n_names : 1) * sizeof *o);
    if (!o) return false;
    for (size_t i = 0; i < v->n_names; i++) o[i] = &v->names[i];
    qsort(o, v->n_names, sizeof *o, cmp_name_total);
    ka(w, "span_names");
    for (size_t i = 0; i < v->n_names; i++) {
        vo(w);
        ks(w, "name", o[i]->name);
        ki(w, "count", (int64_t)o[i]->count);
        kn(w, "total_ms", o[i]->total_ms);
        mst_an_quantiles q = mst_an_hist_quantiles(o[i]->hist, 1e6);
        quantiles(w, "_ms", &q);
        kn(w, "max_ms", o[i]->max_ms);
        close_(w, '}');
    }
    close_(w, ']');
    free(o);
    return true;
}

static const char *kind_name(uint8_t k) {
    return k == MST_AN_PREFILL ? "prefill" : k == MST_AN_MIXED ? "mixed" : "decode";
}

static void steps(jw *w, const mst_an_view *v, const mst_an_result *r, size_t cap) {
    ko(w, "steps");
    ki(w, "count", (int64_t)v->n_steps);
    ki(w, "busy", (int64_t)r->busy_steps);
    size_t kinds[3] = {0, 0, 0};
    for (size_t i = 0; i < v->n_steps; i++)
        if (v->steps[i].busy) kinds[v->steps[i].kind]++;
    ko(w, "kinds");
    ki(w, "decode", (int64_t)kinds[MST_AN_DECODE]);
    ki(w, "prefill", (int64_t)kinds[MST_AN_PREFILL]);
    ki(w, "mixed", (int64_t)kinds[MST_AN_MIXED]);
    close_(w, '}');
    ka(w, "series");
    size_t stride = v->n_steps > cap ? (v->n_steps + cap - 1) / cap : 1;
    for (size_t i = 0; i < v->n_steps; i += stride) {
        const mst_an_step *s = &v->steps[i];
        vo(w);
        ki(w, "index", (int64_t)i);
        ki(w, "pid", v->procs[s->proc].pid);
        ki(w, "start_ns", s->start_ns);
        kn(w, "wall_ms", s->wall_ms);
        for (int g = 0; g < MST_AN_STAGES; g++) {
            char k[24];
            snprintf(k, sizeof k, "%s_ms", mst_an_stage_names[g]);
            kn(w, k, s->stage_ms[g]);
        }
        kn(w, "output_busy_ms", s->output_overlap_ms);
        ki(w, "batch_size", s->batch_size);
        ki(w, "scheduled_tokens", s->scheduled_tokens);
        ks(w, "kind", kind_name(s->kind));
        ki(w, "step_index", s->rec.index >= 0 ? s->rec.index : (int64_t)s->ordinal);
        num_or_null(w, "prefill_tokens", s->rec.prefill_tokens);
        num_or_null(w, "decode_tokens", s->rec.decode_tokens);
        num_or_null(w, "waiting", s->rec.waiting);
        num_or_null(w, "running", s->rec.running);
        kn(w, "kv_usage", s->rec.kv_usage);
        ki(w, "preempted", s->rec.preempted_n);
        close_(w, '}');
    }
    close_(w, ']');
    ki(w, "series_stride", (int64_t)stride);
    ko(w, "timeline");
    ki(w, "bin_ns", r->timeline_bin_ns);
    ka(w, "bins");
    for (size_t b = 0; b < r->n_timeline; b++) {
        const mst_an_timeline_bin *x = &r->timeline[b];
        vo(w);
        ki(w, "start_ns", x->start_ns);
        ki(w, "steps", (int64_t)x->steps);
        num_or_null(w, "prefill_tokens", x->prefill_tokens);
        num_or_null(w, "decode_tokens", x->decode_tokens);
        num_or_null(w, "waiting_max", x->waiting_max);
        num_or_null(w, "running_max", x->running_max);
        kn(w, "kv_usage_max", x->kv_usage_max);
        ki(w, "preemptions", (int64_t)x->preemptions);
        close_(w, '}');
    }
    close_(w, ']');
    close_(w, '}');
    ko(w, "model_fit");
    ks(w, "x", r->fit_x);
    kn(w, "slope_ms", r->fit_x ? r->fit.slope : NAN);
    kn(w, "intercept_ms", r->fit_x ? r->fit.intercept : NAN);
    kn(w, "r2", r->fit_x ? r->fit.r2 : NAN);
    ki(w, "n", (int64_t)r->fit.n);
    close_(w, '}');
    close_(w, '}');
}

static int cmp_req_ptr_e2e(const void *a, const void *b) {
    const mst_an_request *x = *(const mst_an_request *const *)a;
    const mst_an_request *y = *(const mst_an_request *const *)b;
    double ex = isnan(x->e2e_ms) ? -1 : x->e2e_ms, ey = isnan(y->e2e_ms) ? -1 : y->e2e_ms;
    return (ex < ey) - (ex > ey); /* descending */
}

static void window(jw *w, int64_t a, int64_t b, const char *stage) {
    va(w);
    vi(w, a);
    vi(w, b);
    vs(w, stage);
    close_(w, ']');
}

static void metric(jw *w, const char *k, const mst_an_metric_summary *m) {
    ko(w, k);
    ki(w, "n", (int64_t)m->n);
    kn(w, "mean", m->mean);
    quantiles(w, "", &m->q);
    kn(w, "max", m->max);
    close_(w, '}');
}

/* A request row's metrics (the slowest rows and the requests triggers name). */
static void request_metrics(jw *w, const mst_an_request *q) {
    for (int k = 0; k < MST_AN_REQ_METRICS; k++)
        kn(w, mst_an_request_metric_names[k], mst_an_request_metric(q, k));
}

static bool requests(jw *w, const mst_an_view *v, const mst_an_result *r, size_t top, size_t max_cdf) {
    ko(w, "requests");
    ki(w, "count", (int64_t)r->included_requests);
    ki(w, "with_span", (int64_t)v->requests_with_span);
    ki(w, "joined", (int64_t)r->joined_requests);
    uint64_t preempted = 0, recomputed = 0;
    for (size_t i = 0; i < v->n_requests; i++)
        if (!v->requests[i].excluded) {
            preempted += v->requests[i].preemptions ? 1 : 0;
            recomputed += v->requests[i].recomputed_tokens;
        }
    ki(w, "preemptions", (int64_t)v->preemptions);
    ki(w, "preempted_requests", (int64_t)preempted);
    ki(w, "recomputed_tokens", (int64_t)recomputed);
    for (int k = 0; k <= MST_AN_REQ_ITL; k++) metric(w, mst_an_request_metric_names[k], &r->requests[k]);
    ko(w, "cdf");
    for (int k = 0; k <= MST_AN_REQ_ITL; k++) {
        ka(w, mst_an_request_metric_names[k]);
        size_t n = r->requests[k].n;
        const double *x = r->samples[k];
        size_t pts = n < max_cdf ? n : max_cdf;
        for (size_t i = 0; i < pts; i++) {
            /* Evenly spaced ranks, always including the maximum. */
            size_t idx = pts == 1 ? n - 1 : (size_t)((double)i * (double)(n - 1) / (double)(pts - 1));
            va(w);
            vn(w, x[idx]);
            vn(w, (double)(idx + 1) / (double)n);
            close_(w, ']');
        }
        close_(w, ']');
    }
    close_(w, '}');

    /* The slowest `top` requests, with the windows of their steps. */
    const mst_an_request **o = malloc((v->n_requests ? v->n_requests : 1) * sizeof *o);
    if (!o) return false;
    size_t n_o = 0;
    for (size_t i = 0; i < v->n_requests; i++)
        if (!v->requests[i].excluded) o[n_o++] = &v->requests[i];
    qsort(o, n_o, sizeof *o, cmp_req_ptr_e2e);
    size_t n_top = 0;
    while (n_top < top && n_top < n_o && !isnan(o[n_top]->e2e_ms)) n_top++;
    ka(w, "slowest");
    for (size_t t = 0; t < n_top; t++) {
        const mst_an_request *q = o[t];
        uint32_t qi = (uint32_t)(q - v->requests);
        vo(w);
        ks(w, "id", v->strings + q->id_off);
        ki(w, "arrival_ns", q->arrival_ns);
        request_metrics(w, q);
        ki(w, "steps", q->n_steps);
        ki(w, "outputs", q->n_outputs);
        ki(w, "tokens", q->n_tokens);
        ki(w, "preemptions", q->preemptions);
        kn(w, "preempted_ms", q->preempted_ms);
        ki(w, "max_shared", q->max_shared);
        kn(w, "mean_shared", q->n_steps ? (double)q->shared_sum / q->n_steps : NAN);
        ka(w, "step_windows");
        size_t listed = 0;
        for (size_t s = 0; s < v->n_steps && listed < MAX_WINDOW_STEPS; s++) {
            const mst_an_step *st = &v->steps[s];
            bool in = false;
            for (uint32_t k = 0; k < st->ids_n && !in; k++) in = v->ids[st->ids_off + k] == qi;
            if (!in) continue;
            listed++;
            int64_t sched_end = st->start_ns + (int64_t)(st->stage_ms[MST_AN_SCHEDULE] * 1e6);
            window(w, st->start_ns, sched_end, "schedule");
            if (st->model_start_ns != INT64_MIN)
                window(w, st->model_start_ns, st->model_end_ns, "model");
        }
        close_(w, ']');
        close_(w, '}');
    }
    close_(w, ']');
    free(o);
    close_(w, '}');
    return true;
}

static void targets(jw *w, const mst_an_result *r) {
    ka(w, "profile_targets");
    for (size_t i = 0; i < r->n_targets; i++) {
        const mst_an_target *t = &r->targets[i];
        vo(w);
        ks(w, "what", t->what);
        ki(w, "pid", t->pid);
        ki(w, "start_ns", t->start_ns);
        ki(w, "end_ns", t->end_ns);
        ks(w, "why", t->why);
        close_(w, '}');
    }
    close_(w, ']');
}

static void side(jw *w, const char *k, const mst_an_side *s) {
    ko(w, k);
    ki(w, "n", (int64_t)s->n);
    quantiles(w, "", &s->q);
    close_(w, '}');
}

static void input_names(jw *w, const char *k, const mst_an_view *v) {
    ka(w, k);
    for (size_t i = 0; i < v->n_inputs; i++) vs(w, v->inputs[i].name ? v->inputs[i].name : "");
    close_(w, ']');
}

static void compare(jw *w, const mst_an_analysis *an, const mst_an_json_options *opt) {
    key(w, "compare");
    const mst_an_comparison *c = an->compare;
    if (!c) {
        mst_buf_append_cstr(w->b, "null");
        return;
    }
    open_(w, '{');
    ks(w, "before", opt->before_label ? opt->before_label : "before");
    ks(w, "after", opt->after_label ? opt->after_label : "after");
    input_names(w, "before_inputs", &an->before_view);
    input_names(w, "after_inputs", &an->view);
    kn(w, "alpha", MST_AN_COMPARE_P);
    kn(w, "min_change_pct", 100 * MST_AN_COMPARE_MIN_CHANGE);
    ka(w, "tests");
    vs(w, "mann-whitney");
    vs(w, "bootstrap-p90");
    vs(w, "bootstrap-p99");
    close_(w, ']');
    ka(w, "metrics");
    for (size_t i = 0; i < c->n_metrics; i++) {
        const mst_an_compare_metric *m = &c->metrics[i];
        vo(w);
        ks(w, "metric", m->metric);
        side(w, "before", &m->before);
        side(w, "after", &m->after);
        kn(w, "change_pct", m->change_pct);
        kn(w, "p90_change_pct", m->p90_change_pct);
        kn(w, "p99_change_pct", m->p99_change_pct);
        kn(w, "p_value", m->p_value);
        kn(w, "p90_p_value", m->p90_p_value);
        kn(w, "p99_p_value", m->p99_p_value);
        kn(w, "cliffs_delta", m->cliffs_delta);
        ks(w, "test", m->significant ? m->test : NULL);
        kb(w, "significant", m->significant);
        ks(w, "sentence", m->sentence);
        close_(w, '}');
    }
    close_(w, ']');
    ki(w, "significant", (int64_t)c->n_significant);
    ks(w, "verdict", c->verdict);
    close_(w, '}');
}

/* Why a flight-recorder dump was written (absent from other traces). */
static void flight_recorder(jw *w, const mst_an_analysis *an) {
    const mst_an_view *v = &an->view;
    if (!v->n_triggers) return;
    ko(w, "flight_recorder");
    ka(w, "triggers");
    for (size_t t = 0; t < v->n_triggers; t++) {
        const mst_an_trigger *tr = &v->triggers[t];
        vo(w);
        ks(w, "trigger", tr->reason);
        kb(w, "on_demand", tr->on_demand);
        ki(w, "start_ns", tr->start_ns);
        ki(w, "end_ns", tr->end_ns);
        kn(w, "window_ms", (double)(tr->end_ns - tr->start_ns) / 1e6);
        ki(w, "pid", tr->pid);
        ki(w, "request_ids_total", (int64_t)tr->n_ids);
        ka(w, "requests");
        for (uint32_t k = 0; k < tr->n_ids_kept; k++) {
            uint32_t q = an->flight.request[t][k];
            vo(w);
            ksn(w, "id", tr->ids[k], tr->id_len[k]);
            kb(w, "in_dump", q != UINT32_MAX);
            if (q != UINT32_MAX) {
                const mst_an_request *r = &v->requests[q];
                ki(w, "arrival_ns", r->arrival_ns);
                request_metrics(w, r);
                ki(w, "steps", r->n_steps);
                ki(w, "tokens", r->n_tokens);
                ki(w, "preemptions", r->preemptions);
                ki(w, "max_shared", r->max_shared);
            }
            close_(w, '}');
        }
        close_(w, ']');
        close_(w, '}');
    }
    close_(w, ']');
    ki(w, "triggers_not_shown", (int64_t)v->triggers_dropped);
    close_(w, '}');
}

mst_status mst_an_report_json(const mst_an_analysis *an, const mst_an_json_options *opt_in, mst_buf *out) {
    mst_an_json_options opt = {10, 2000, 200, NULL, NULL};
    if (opt_in) {
        opt = *opt_in;
        if (!opt.max_series) opt.max_series = 2000;
        if (!opt.max_cdf) opt.max_cdf = 200;
    }
    const mst_an_view *v = &an->view;
    const mst_an_result *r = &an->result;
    jw w = {out, 0, {false}};
    open_(&w, '{');
    ks(&w, "schema", "mstrace.analyze/2");
    ks(&w, "generated_by", "mstrace " MSTRACE_VERSION_STRING);
    flight_recorder(&w, an);
    inputs(&w, v);
    data_quality(&w, v, r);
    findings(&w, r);
    stages(&w, r);
    engines(&w, v, r);
    bool ok = span_names(&w, v);
    steps(&w, v, r, opt.max_series);
    ok = ok && requests(&w, v, r, opt.top, opt.max_cdf);
    targets(&w, r);
    compare(&w, an, &opt);
    close_(&w, '}');
    mst_buf_append_byte(out, '\n');
    if (!ok || out->failed) return MST_ERR_NOMEM;
    return MST_OK;
}
