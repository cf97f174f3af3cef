/*
 * request_life.c — request phases and vLLM's per-request metrics from the
 * step records (request_life.h).
 */
#include "analyze/request_life.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


#define NONE INT64_MIN
/* A negative interval shorter than this is rounding between processes'
 * clocks, not an anomaly. */
#define CLOCK_SLACK_NS 1000000

static double ms(int64_t ns) { return (double)ns / 1e6; }

typedef struct itl_vec {
    mst_an_itl *p;
    size_t n, cap;
} itl_vec;

static bool token(mst_an_request *r, int64_t t, uint32_t step, uint32_t req, itl_vec *out,
                  mst_an_life_counts *c) {
    if (r->first_token_ns == NONE) r->first_token_ns = t;
    else {
        if (out->n == out->cap) return false; /* sized by the first pass: cannot happen */
        int64_t gap = t - r->last_token_ns;
        if (gap < 0) c->negative_itl++;
        out->p[out->n++] = (mst_an_itl){(float)ms(gap), step, req};
    }
    r->last_token_ns = t;
    r->n_tokens++;
    return true;
}

/* The life events of one step. */
static bool one_step(const mst_an_life_in *in, uint32_t s, mst_an_request *rq, itl_vec *out,
                     mst_an_life_counts *c) {
    const mst_an_step *st = &in->steps[s];
    const mst_an_step_record *x = &st->rec;
    for (uint32_t k = 0; k < x->new_n; k++) {
        mst_an_request *r = &rq[in->ids[x->new_off + k]];
        /* 0: the hook did not see the request arrive (docs/architecture.md "1a"). */
        if (r->queued_ns == NONE && k < x->queued_n && in->queued[x->queued_off + k] > 0)
            r->queued_ns = in->queued[x->queued_off + k];
        if (r->scheduled_ns == NONE) r->scheduled_ns = st->start_ns;
    }
    for (uint32_t k = 0; k < x->resumed_n; k++) {
        mst_an_request *r = &rq[in->ids[x->resumed_off + k]];
        if (r->preempted_at_ns != NONE) r->preempted_ms += ms(st->start_ns - r->preempted_at_ns);
        r->preempted_at_ns = NONE;
        r->computed_since_resume = 0;
    }
    for (uint32_t k = 0; k < st->ids_n; k++) {
        uint32_t qi = in->ids[st->ids_off + k];
        mst_an_request *r = &rq[qi];
        if (r->scheduled_ns == NONE) r->scheduled_ns = st->start_ns;
        int32_t tok = in->id_tokens[st->ids_off + k];
        uint8_t ph = in->id_phase[st->ids_off + k];
        if (tok > 0) r->computed_since_resume += (uint64_t)tok;
        /* A 'p' chunk leaves prompt to compute: no token this step. */
        bool produces = !x->has_phase || ph != 'p';
        if (produces && !token(r, st->token_ns, s, qi, out, c)) return false;
    }
    for (uint32_t k = 0; k < x->preempted_n; k++) {
        mst_an_request *r = &rq[in->ids[x->preempted_off + k]];
        r->preemptions++;
        c->preemptions++;
        r->recomputed_tokens += r->computed_since_resume;
        r->computed_since_resume = 0;
        r->preempted_at_ns = st->start_ns;
    }
    return true;
}

/* vLLM's definitions (vllm/v1/metrics/stats.py) on one request. */
static void metrics(const mst_an_life_in *in, mst_an_request *r, mst_an_life_counts *c) {
    bool arrived = r->arrival_ns != NONE;
    int64_t first_out = r->first_out_start_ns, last_out = r->last_out_start_ns;
    if (r->scheduled_ns != NONE) {
        if (r->queued_ns != NONE) r->queue_ms = ms(r->scheduled_ns - r->queued_ns);
        else if (arrived) {
            r->queue_ms = ms(r->scheduled_ns - r->arrival_ns);
            r->queue_from_arrival = true;
        }
        if (r->queue_ms < -ms(CLOCK_SLACK_NS)) c->negative_queue++;
        if (r->queue_ms < 0) r->queue_ms = 0;
    }
    if (arrived && r->queued_ns != NONE) r->handoff_ms = ms(r->queued_ns - r->arrival_ns);
    /* The engine cannot receive a request before it arrived, nor output a
     * token after the API server processed it: either means the two
     * processes' clocks disagree. */
    if ((arrived && r->queued_ns != NONE && r->queued_ns - r->arrival_ns < -CLOCK_SLACK_NS) ||
        (r->first_token_ns != NONE && first_out != NONE && r->first_token_ns - first_out > CLOCK_SLACK_NS))
        c->clock_skew++;
    if (r->first_token_ns != NONE && r->scheduled_ns != NONE) {
        r->prefill_ms = ms(r->first_token_ns - r->scheduled_ns);
        r->inference_ms = ms(r->last_token_ns - r->scheduled_ns);
        r->decode_ms = ms(r->last_token_ns - r->first_token_ns);
    }
    if (arrived) {
        /* TTFT and e2e are the API server's: when it processes the output
         * (vLLM stamps the iteration before process_outputs runs). */
        int64_t ft = first_out != NONE ? first_out : r->first_token_ns;
        int64_t end = last_out != NONE ? last_out : r->finish_ns != NONE ? r->finish_ns : r->last_token_ns;
        if (ft != NONE) r->ttft_ms = ms(ft - r->arrival_ns);
        if (end != NONE) r->e2e_ms = ms(end - r->arrival_ns);
    }
    if (in->have_records) {
        if (r->n_tokens >= 2) r->tpot_ms = r->decode_ms / (r->n_tokens - 1);
    } else if (r->n_outputs >= 2) {
        r->tpot_ms = ms(r->last_out_ns - r->first_out_ns) / (r->n_outputs - 1);
    } else if (r->n_tokens >= 2) {
        r->tpot_ms = r->decode_ms / (r->n_tokens - 1);
    }
    if (!isnan(r->queue_ms) && !isnan(r->ttft_ms) && r->queue_ms > r->ttft_ms + ms(CLOCK_SLACK_NS))
        c->queue_over_ttft++;
}

mst_status mst_an_life_build(const mst_an_life_in *in, mst_an_request *rq, size_t n_requests,
                             mst_an_itl **itls, size_t *n_itls, mst_an_life_counts *c) {
    memset(c, 0, sizeof *c);
    /* Every token after a request's first is one gap: count the tokens
     * first, so the gaps (one per output token: the largest array here)
     * are allocated once, at their size. */
    size_t tokens = 0;
    for (size_t s = 0; s < in->n_steps; s++) {
        const mst_an_step *st = &in->steps[s];
        for (uint32_t k = 0; k < st->ids_n; k++)
            tokens += !st->rec.has_phase || in->id_phase[st->ids_off + k] != 'p';
    }
    itl_vec out = {tokens ? malloc(tokens * sizeof(mst_an_itl)) : NULL, 0, tokens};
    if (tokens && !out.p) return MST_ERR_NOMEM;
    for (size_t s = 0; s < in->n_steps; s++)
        if (!one_step(in, (uint32_t)s, rq, &out, c)) {
            free(out.p);
            return MST_ERR_NOMEM;
        }
    for (size_t i = 0; i < n_requests; i++) metrics(in, &rq[i], c);
    *itls = out.p;
    *n_itls = out.n;
    return MST_OK;
}
