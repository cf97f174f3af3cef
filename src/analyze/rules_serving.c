/*
 * rules_serving.c — rules about requests (rules_serving.h).
 */
#include "analyze/rules_serving.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAPACITY_SHARE 0.25     /* of request latency spent waiting */
#define CAPACITY_STEPS 0.2      /* of busy steps with requests waiting */
#define KV_FULL 0.9             /* kv_cache.usage */
#define PREEMPT_MIN 3
#define PREEMPT_PER_REQUEST 0.01
#define LONG_PREFILL_TOKENS 1024 /* prefill tokens in one step */
#define PREFILL_MIN_GAPS 10
#define PREFILL_MIN_STEPS 4    /* a pattern, not one incident */
#define PREFILL_ITL_RATIO 1.5
#define PREFILL_P 0.001
#define TAIL_MIN_REQUESTS 20
#define TAIL_RATIO 2.0
#define TAIL_PER_STEP 1.5
#define TAIL_QUEUE 1.5
#define JOIN_MIN 0.5

#define num mst_an_finding_num

/* Sum of queue + preempted time and of e2e over requests where both are known. */
static void waiting_share(const mst_an_view *v, double *wait_ms, double *e2e_ms, double *preempt_ms) {
    *wait_ms = *e2e_ms = *preempt_ms = 0;
    for (size_t i = 0; i < v->n_requests; i++) {
        const mst_an_request *q = &v->requests[i];
        if (q->excluded || isnan(q->e2e_ms) || isnan(q->queue_ms)) continue;
        *wait_ms += q->queue_ms + q->preempted_ms;
        *preempt_ms += q->preempted_ms;
        *e2e_ms += q->e2e_ms;
    }
}

bool mst_an_rule_capacity(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    size_t waiting = 0, kv = 0, seqs = 0, tokens = 0, known = 0;
    int32_t max_seqs = -1, max_tokens = -1;
    double kv_max = NAN;
    for (size_t i = 0; i < v->n_steps; i++) {
        const mst_an_step *s = &v->steps[i];
        if (!s->busy || s->rec.waiting < 0) continue;
        known++;
        if (s->rec.kv_usage > kv_max || isnan(kv_max)) kv_max = s->rec.kv_usage;
        if (s->rec.waiting == 0) continue;
        waiting++;
        if (s->rec.max_num_seqs > 0) max_seqs = s->rec.max_num_seqs;
        if (s->rec.max_num_batched_tokens > 0) max_tokens = s->rec.max_num_batched_tokens;
        if (s->rec.kv_usage >= KV_FULL || s->rec.preempted_n > 0) kv++;
        else if (s->rec.max_num_seqs > 0 && s->rec.running >= s->rec.max_num_seqs) seqs++;
        else if (s->rec.max_num_batched_tokens > 0 && s->scheduled_tokens >= s->rec.max_num_batched_tokens)
            tokens++;
    }
    double wait_ms, e2e_ms, pre_ms;
    waiting_share(v, &wait_ms, &e2e_ms, &pre_ms);
    double share = e2e_ms > 0 ? wait_ms / e2e_ms : 0;
    double frac = known ? (double)waiting / (double)known : 0;
    num(f, "waiting_share_of_latency", share);
    num(f, "steps_with_waiting", (double)waiting);
    num(f, "steps_with_queue_info", (double)known);
    num(f, "kv_full_steps", (double)kv);
    num(f, "max_num_seqs_steps", (double)seqs);
    num(f, "max_num_batched_tokens_steps", (double)tokens);
    num(f, "kv_usage_max", kv_max);
    num(f, "max_num_seqs", max_seqs);
    num(f, "max_num_batched_tokens", max_tokens);
    num(f, "preemptions", (double)v->preemptions);
    if (known == 0) {
        mst_an_finding_say(f,
                 "Not evaluated: no step carries scheduler.waiting, so queueing cannot be told apart.");
        return true;
    }
    f->fired = share >= CAPACITY_SHARE && frac >= CAPACITY_STEPS;
    const char *limit = kv >= seqs && kv >= tokens && kv > 0   ? "the KV cache is full"
                        : seqs >= tokens && seqs > 0            ? "max_num_seqs is reached"
                        : tokens > 0                            ? "max_num_batched_tokens is reached"
                                                                : "the limit is not in the trace";
    if (f->fired) {
        mst_an_finding_say(f,
                 "Capacity, not the forward, bounds the run: requests spend %.0f%% of their latency "
                 "waiting (queued %.0f%%, preempted %.0f%%), and in %.0f%% of the busy steps requests "
                 "were waiting because %s (KV usage up to %.0f%%, %llu preemptions; running at "
                 "max_num_seqs in %zu steps). Knobs: more KV cache (--gpu-memory-utilization, a "
                 "smaller --max-model-len), --max-num-seqs, --max-num-batched-tokens, or more "
                 "replicas.",
                 100 * share, e2e_ms > 0 ? 100 * (wait_ms - pre_ms) / e2e_ms : 0,
                 e2e_ms > 0 ? 100 * pre_ms / e2e_ms : 0, 100 * frac, limit,
                 isnan(kv_max) ? 0 : 100 * kv_max, (unsigned long long)v->preemptions, seqs);
    } else {
        mst_an_finding_say(f,
                 "Requests spend %.0f%% of their latency waiting; requests were waiting in %.0f%% of "
                 "the busy steps (rule: >= %.0f%% of latency and >= %.0f%% of steps).",
                 100 * share, 100 * frac, 100 * CAPACITY_SHARE, 100 * CAPACITY_STEPS);
    }
    (void)r;
    return true;
}

bool mst_an_rule_preemption(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    uint64_t recomputed = 0, preempted_requests = 0;
    for (size_t i = 0; i < v->n_requests; i++) {
        const mst_an_request *q = &v->requests[i];
        if (q->excluded) continue;
        recomputed += q->recomputed_tokens;
        if (q->preemptions) preempted_requests++;
    }
    double wait_ms, e2e_ms, pre_ms;
    waiting_share(v, &wait_ms, &e2e_ms, &pre_ms);
    size_t n = r->included_requests;
    double per_request = n ? (double)v->preemptions / (double)n : 0;
    num(f, "preemptions", (double)v->preemptions);
    num(f, "preempted_requests", (double)preempted_requests);
    num(f, "per_request", per_request);
    num(f, "recomputed_tokens", (double)recomputed);
    num(f, "time_lost_ms", pre_ms);
    num(f, "share_of_latency", e2e_ms > 0 ? pre_ms / e2e_ms : 0);
    if (v->steps_with_record == 0 && v->preemptions == 0) {
        mst_an_finding_say(f,
                 "Not evaluated: the steps carry no step record (step.preempted_ids), so preemptions "
                 "are not in the trace.");
        return true;
    }
    f->fired = v->preemptions >= PREEMPT_MIN && per_request >= PREEMPT_PER_REQUEST;
    if (f->fired) {
        mst_an_finding_say(f,
                 "%llu preemptions (%.2f per request, %llu requests preempted): %llu tokens computed "
                 "again after resuming, and %.1f ms of request time spent preempted (%.0f%% of "
                 "latency). The KV cache cannot hold the running batch: fewer concurrent sequences "
                 "(--max-num-seqs), more KV cache (--gpu-memory-utilization) or shorter contexts.",
                 (unsigned long long)v->preemptions, per_request, (unsigned long long)preempted_requests,
                 (unsigned long long)recomputed, pre_ms, e2e_ms > 0 ? 100 * pre_ms / e2e_ms : 0);
    } else {
        mst_an_finding_say(f,
                 "%llu preemptions (rule: >= %d and >= %.0f%% of requests).",
                 (unsigned long long)v->preemptions, PREEMPT_MIN, 100 * PREEMPT_PER_REQUEST);
    }
    return true;
}

/* Prefill tokens a step carried: from its step record, else what its
 * scheduled tokens exceed one per request by. */
static int64_t prefill_tokens(const mst_an_step *s) {
    if (s->rec.has_phase) return s->rec.prefill_tokens;
    if (s->scheduled_tokens < 0) return 0;
    return s->scheduled_tokens - s->batch_size;
}

bool mst_an_rule_prefill_interference(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    /* One array: the gaps in long-prefill steps from the front, the others
     * from the back (the gaps are the largest sample of a run). */
    size_t n = v->n_itls;
    double *gaps = malloc((n ? n : 1) * sizeof *gaps);
    if (!gaps) return false;
    size_t nw = 0, no = 0, long_steps = 0;
    for (size_t i = 0; i < v->n_steps; i++)
        if (v->steps[i].busy && prefill_tokens(&v->steps[i]) >= LONG_PREFILL_TOKENS) long_steps++;
    for (size_t i = 0; i < n; i++) {
        const mst_an_itl *g = &v->itls[i];
        if (v->requests[g->request].excluded) continue;
        if (prefill_tokens(&v->steps[g->step]) >= LONG_PREFILL_TOKENS) gaps[nw++] = g->ms;
        else gaps[n - 1 - no++] = g->ms;
    }
    double *with = gaps, *without = gaps + n - no;
    mst_an_mwu u;
    mst_an_mann_whitney(with, nw, without, no, &u);
    mst_an_sort_doubles(with, nw);
    mst_an_sort_doubles(without, no);
    double mw = mst_an_quantile_sorted(with, nw, 0.5), mo = mst_an_quantile_sorted(without, no, 0.5);
    const mst_an_metric_summary *itl = &r->requests[MST_AN_REQ_ITL];
    double ratio = mo > 0 ? mw / mo : NAN, tail = itl->q.p50 > 0 ? itl->q.p99 / itl->q.p50 : NAN;
    free(gaps);
    num(f, "itl_p50_ms", itl->q.p50);
    num(f, "itl_p99_ms", itl->q.p99);
    num(f, "itl_p99_over_p50", tail);
    num(f, "long_prefill_steps", (double)long_steps);
    num(f, "itl_with_long_prefill_p50_ms", mw);
    num(f, "itl_without_p50_ms", mo);
    num(f, "ratio", ratio);
    num(f, "p_value", u.p);
    num(f, "long_prefill_tokens", LONG_PREFILL_TOKENS);
    if (nw < PREFILL_MIN_GAPS || no < PREFILL_MIN_GAPS || long_steps < PREFILL_MIN_STEPS) {
        mst_an_finding_say(f,
                 "No pattern of decodes stalled behind long prefills: %zu steps carried >= %d prefill "
                 "tokens, with %zu inter-token gaps in them (needs %d steps and %d gaps to judge).",
                 long_steps, LONG_PREFILL_TOKENS, nw, PREFILL_MIN_STEPS, PREFILL_MIN_GAPS);
        return true;
    }
    f->fired = ratio >= PREFILL_ITL_RATIO && u.p < PREFILL_P;
    if (f->fired) {
        mst_an_finding_say(f,
                 "Long prefills stall the decodes: an inter-token gap in one of the %zu steps carrying "
                 ">= %d prefill tokens is %.3f ms (median) against %.3f ms in the others (x%.1f, "
                 "p=%.2g; ITL p99 is %.1fx its p50). Knobs: a smaller chunked-prefill budget "
                 "(--max-num-batched-tokens), --long-prefill-token-threshold, or disaggregated "
                 "prefill.",
                 long_steps, LONG_PREFILL_TOKENS, mw, mo, ratio, u.p, tail);
    } else {
        mst_an_finding_say(f,
                 "Decodes are not held up by long prefills: gaps in steps with >= %d prefill tokens "
                 "x%.2f the others (rule: >= x%.1f with p < %g).",
                 LONG_PREFILL_TOKENS, ratio, PREFILL_ITL_RATIO, PREFILL_P);
    }
    return true;
}

bool mst_an_rule_clock(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    (void)r;
    num(f, "queue_over_ttft", (double)v->queue_over_ttft);
    num(f, "clock_skew", (double)v->clock_skew);
    num(f, "negative_itl", (double)v->negative_itl);
    num(f, "negative_gaps", (double)v->negative_gaps);
    uint64_t bad = v->queue_over_ttft + v->clock_skew + v->negative_itl + v->negative_gaps;
    f->fired = bad > 0;
    if (f->fired) {
        mst_an_finding_say(f,
                 "The processes' clocks disagree (a data-quality warning, not a bottleneck): %llu "
                 "requests queued longer than their time to first token, %llu with engine times "
                 "that contradict the API server's, %llu negative inter-token gaps, %llu other negative gaps. "
                 "Queue, hand-off and TTFT mix two clocks: synchronise the hosts (chrony/NTP) before "
                 "trusting them.",
                 (unsigned long long)v->queue_over_ttft, (unsigned long long)v->clock_skew,
                 (unsigned long long)v->negative_itl, (unsigned long long)v->negative_gaps);
    } else {
        mst_an_finding_say(f,
                 "The clocks agree: no queue longer than TTFT and no negative gap.");
    }
    return true;
}

typedef struct group_stats {
    double e2e, queue, steps, per_step[MST_AN_STAGES], per_step_total, shared;
    size_t n;
} group_stats;

static void group_add(group_stats *g, const mst_an_request *q) {
    g->n++;
    g->e2e += q->e2e_ms;
    g->queue += (isnan(q->queue_ms) ? 0 : q->queue_ms) + q->preempted_ms;
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

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

bool mst_an_rule_long_tail(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
    (void)r;
    const mst_an_request **q = malloc((v->n_requests ? v->n_requests : 1) * sizeof *q);
    if (!q) return false;
    size_t n = 0;
    for (size_t i = 0; i < v->n_requests; i++)
        if (!v->requests[i].excluded && !isnan(v->requests[i].e2e_ms) && v->requests[i].n_steps > 0) q[n++] = &v->requests[i];
    num(f, "requests", (double)n);
    if (n < TAIL_MIN_REQUESTS) {
        mst_an_finding_say(f,
                 "Not evaluated: %zu requests with a known end-to-end time (needs %d).", n,
                 TAIL_MIN_REQUESTS);
        free(q);
        return true;
    }
    qsort(q, n, sizeof *q, cmp_req_e2e);
    size_t n_tail = (n + 99) / 100;
    group_stats tail = {0}, mid = {0};
    for (size_t i = n - n_tail; i < n; i++) group_add(&tail, q[i]);
    /* The median requests of the same engine(s) as the tail: with several
     * engines, a tail that is just the slow engine's requests is that
     * engine's (rank_imbalance), not a tail of its own. */
    uint32_t *tail_engines = malloc(n_tail * sizeof *tail_engines);
    if (!tail_engines) {
        free(q);
        return false;
    }
    for (size_t k = 0; k < n_tail; k++) tail_engines[k] = q[n - n_tail + k]->engine_proc;
    qsort(tail_engines, n_tail, sizeof *tail_engines, cmp_u32);
    size_t n_same = 0;
    for (size_t i = 0; i < n; i++)
        if (bsearch(&q[i]->engine_proc, tail_engines, n_tail, sizeof *tail_engines, cmp_u32))
            q[n_same++] = q[i]; /* keeps the e2e order */
    free(tail_engines);
    size_t lo = (size_t)(0.45 * (double)n_same), hi = (size_t)(0.55 * (double)n_same);
    if (hi <= lo) hi = lo + 1;
    for (size_t i = lo; i < hi && i < n_same; i++) group_add(&mid, q[i]);
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
        if (queued && (!slow_steps || queue_extra >= worst_extra))
            mst_an_finding_say(f,
                     "Long tail: the slowest 1%% (%zu requests) take %.1f ms end to end, %.1fx the "
                     "median (%.1f ms), mostly queueing (%.1f ms vs %.1f ms before their first "
                     "step); they shared batches of %.1f requests on average (median requests: "
                     "%.1f).",
                     n_tail, tail.e2e, ratio, mid.e2e, tail.queue, mid.queue, tail.shared,
                     mid.shared);
        else
            mst_an_finding_say(f,
                     "Long tail: the slowest 1%% (%zu requests) take %.1f ms end to end, %.1fx the "
                     "median (%.1f ms); their steps are %.1fx slower (%.3f vs %.3f ms per step), "
                     "mostly in %s (%.3f vs %.3f ms per step); they shared batches of %.1f requests "
                     "on average (median requests: %.1f).",
                     n_tail, tail.e2e, ratio, mid.e2e, step_ratio, tail.per_step_total,
                     mid.per_step_total, worst >= 0 ? mst_an_stage_prose(worst) : "no single stage",
                     worst >= 0 ? tail.per_step[worst] : 0, worst >= 0 ? mid.per_step[worst] : 0,
                     tail.shared, mid.shared);
        num(f, "stage", worst);
    } else if (ratio >= TAIL_RATIO) {
        mst_an_finding_say(f,
                 "The slowest 1%% take %.1fx the median end to end, but at the same per-step time "
                 "(x%.2f) and queueing: they are longer requests (%.0f vs %.0f steps), not slowed "
                 "ones.",
                 ratio, step_ratio, tail.steps, mid.steps);
    } else {
        mst_an_finding_say(f,
                 "No long tail: the slowest 1%% take %.1fx the median end to end.", ratio);
    }
    free(q);
    return true;
}

bool mst_an_rule_broken_joining(const mst_an_view *v, const mst_an_result *r, mst_an_finding *f) {
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
    } else if (busy > 0 && r->included_requests == 0) {
        why = "no request ids anywhere";
    }
    f->fired = why != NULL;
    if (f->fired) {
        f->severity = "critical";
        mst_an_finding_say(f,
                 "Joining is broken: %s (%.0f%% of %llu traces hold 1-2 spans). Spans are exported, "
                 "but the request chain is not proven: check links, request.ids and "
                 "MS_PROFILER_AUTO_TRACE.",
                 why, 100 * short_frac, (unsigned long long)v->traces);
    } else {
        mst_an_finding_say(f,
                 "Requests join their steps: %zu of %llu request spans (%.0f%% of traces hold 1-2 "
                 "spans, normal for batch spans that link several requests).",
                 r->joined_requests, (unsigned long long)v->requests_with_span, 100 * short_frac);
    }
    return true;
}
