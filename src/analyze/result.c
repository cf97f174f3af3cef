/*
 * result.c — the helpers of an analysis result (result.h): metric
 * samples, findings' numbers and sentences, stage prose, freeing.
 */
#include "analyze/result.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mst_an_request_metric_names[MST_AN_REQ_METRICS + 1] = {
    "queue_ms",   "ttft_ms",     "tpot_ms",      "e2e_ms", "prefill_ms",
    "decode_ms", "inference_ms", "handoff_ms",  "itl_ms"};

static const char *const stage_prose[MST_AN_STAGES] = {
    "scheduling (schedule + update_from_output)", "the model forward (workers)",
    "executor overhead around the forward (IPC/sync/input preparation)",
    "output processing (API server, concurrent with the engine)",
    "waiting outside hooked code while requests were queued"};

const char *mst_an_stage_prose(int stage) {
    return stage >= 0 && stage < MST_AN_STAGES ? stage_prose[stage] : "no single stage";
}

void mst_an_finding_num(mst_an_finding *f, const char *key, double v) {
    if (f->n_numbers < MST_AN_MAX_NUMBERS) {
        f->keys[f->n_numbers] = key;
        f->values[f->n_numbers++] = v;
    }
}

void mst_an_finding_say(mst_an_finding *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->sentence, sizeof f->sentence, fmt, ap);
    va_end(ap);
    if (f->fired && strcmp(f->severity, "info") == 0) f->severity = "warning";
}

double mst_an_request_metric(const mst_an_request *r, int metric) {
    switch (metric) {
    case MST_AN_REQ_QUEUE: return r->queue_ms;
    case MST_AN_REQ_TTFT: return r->ttft_ms;
    case MST_AN_REQ_TPOT: return r->tpot_ms;
    case MST_AN_REQ_E2E: return r->e2e_ms;
    case MST_AN_REQ_PREFILL: return r->prefill_ms;
    case MST_AN_REQ_DECODE: return r->decode_ms;
    case MST_AN_REQ_INFERENCE: return r->inference_ms;
    case MST_AN_REQ_HANDOFF: return r->handoff_ms;
    default: return NAN;
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

double *mst_an_step_sample(const mst_an_view *v, int metric, uint32_t proc, size_t *n, bool *oom) {
    *n = 0;
    double *out = sample_new(v->n_steps, oom);
    if (!out) return NULL;
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy || (proc != UINT32_MAX && s->proc != proc)) continue;
        out[(*n)++] = metric == MST_AN_STEP_WALL ? s->wall_ms : s->stage_ms[metric];
    }
    return sample_done(out, *n);
}

double *mst_an_request_sample(const mst_an_view *v, int metric, size_t *n, bool *oom) {
    *n = 0;
    if (metric == MST_AN_REQ_ITL) {
        double *out = sample_new(v->n_itls, oom);
        if (!out) return NULL;
        for (size_t i = 0; i < v->n_itls; i++)
            if (!v->requests[v->itls[i].request].excluded) out[(*n)++] = v->itls[i].ms;
        return sample_done(out, *n);
    }
    double *out = sample_new(v->n_requests, oom);
    if (!out) return NULL;
    for (size_t i = 0; i < v->n_requests; i++) {
        if (v->requests[i].excluded) continue;
        double x = mst_an_request_metric(&v->requests[i], metric);
        if (!isnan(x)) out[(*n)++] = x;
    }
    return sample_done(out, *n);
}

void mst_an_result_free(mst_an_result *r) {
    if (!r) return;
    free(r->findings);
    free(r->engines);
    free(r->timeline);
    for (int k = 0; k <= MST_AN_REQ_ITL; k++) free(r->samples[k]);
    for (size_t i = 0; i < r->n_warnings; i++) free(r->warnings[i]);
    free(r->warnings);
    memset(r, 0, sizeof *r);
}

