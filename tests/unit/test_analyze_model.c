/*
 * test_analyze_model.c — the step/request model (src/analyze/model.c) on a
 * hand-timed span stream whose every number is known: the stage split of
 * a step (schedule + update, the worker's forward, executor minus forward,
 * output, uncovered waiting between busy steps), the choice of the longest
 * tensor-parallel worker, an output loop that lags into idle steps (counted
 * for the last busy step), request metrics (queue, TTFT, TPOT, e2e, steps,
 * sharing), unjoined requests, out-of-order arrival of spans, and spans
 * with impossible times. The readers and the real forwarder are covered by
 * test_analyze_reader.c and tests/integration/test_analyze.py.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyze/model.h"
#include "testlib.h"

#define MS 1000000LL
#define T0 (1700000000000LL * MS / 1000) /* some epoch time, ns */

static mst_an_attr ids_attr(const mst_an_str *items, size_t n) {
    mst_an_attr a;
    memset(&a, 0, sizeof a);
    a.key = (mst_an_str){"request.ids", 11};
    a.type = MST_AN_VAL_STR_LIST;
    a.items = items;
    a.n_items = n;
    return a;
}

static mst_an_attr int_attr(const char *key, int64_t v) {
    mst_an_attr a;
    memset(&a, 0, sizeof a);
    a.key = (mst_an_str){key, strlen(key)};
    a.type = MST_AN_VAL_INT;
    a.i = v;
    return a;
}

static mst_an_attr str_attr(const char *key, const char *v) {
    mst_an_attr a;
    memset(&a, 0, sizeof a);
    a.key = (mst_an_str){key, strlen(key)};
    a.type = MST_AN_VAL_STR;
    a.s = (mst_an_str){v, strlen(v)};
    return a;
}

static void add(mst_an_model *m, const char *name, int64_t pid, double start_ms, double end_ms,
                const mst_an_attr *attrs, size_t n_attrs) {
    mst_an_span s;
    memset(&s, 0, sizeof s);
    s.name = (mst_an_str){name, strlen(name)};
    s.pid = pid;
    s.start_ns = T0 + (int64_t)(start_ms * MS);
    s.end_ns = T0 + (int64_t)(end_ms * MS);
    s.attrs = attrs;
    s.n_attrs = n_attrs;
    CHECK(mst_an_model_add_span(m, &s) == MST_OK);
}

/* A busy engine step of requests `ids` at time t (ms) on engine pid 10 with
 * workers 20 and 21 (tensor parallel): schedule 1 ms, executor 1..5 ms, the
 * workers' forwards 2..4 (pid 20) and 2..3.5 (pid 21), update 5..5.5. */
static void step(mst_an_model *m, double t, const mst_an_str *ids, size_t n) {
    mst_an_attr a[3] = {ids_attr(ids, n), int_attr("batch.request_count", (int64_t)n),
                        int_attr("batch.scheduled_tokens", (int64_t)n)};
    add(m, "vllm.scheduler.schedule", 10, t, t + 1, a, n ? 3 : 1);
    if (!n) return;
    add(m, "vllm.model.execute", 10, t + 1, t + 1.5, NULL, 0);
    add(m, "vllm.model.sample_tokens", 10, t + 4.5, t + 5, NULL, 0);
    add(m, "vllm.worker.execute_model", 20, t + 2, t + 4, NULL, 0);
    add(m, "vllm.worker.execute_model", 21, t + 2, t + 3.5, NULL, 0);
    add(m, "vllm.scheduler.update_from_output", 10, t + 5, t + 5.5, NULL, 0);
}

static bool near(double a, double b) { return fabs(a - b) < 1e-6; }

static void stage_split_and_requests(void) {
    mst_an_model *m = mst_an_model_new();
    CHECK(m != NULL);
    const mst_an_str ab[2] = {{"a", 1}, {"b", 1}};
    const mst_an_str b_only[1] = {{"b", 1}};
    /* Spans arrive out of time order, as processes flush at different times:
     * the API server's spans first. */
    mst_an_attr ra[1] = {str_attr("request.id", "a")};
    mst_an_attr rb[1] = {str_attr("request.id", "b")};
    mst_an_attr rz[1] = {str_attr("request.id", "z")}; /* never scheduled */
    add(m, "vllm.request", 30, -2, 16.5, ra, 1);
    add(m, "vllm.request", 30, -1, 36.5, rb, 1);
    add(m, "vllm.request", 30, 0, 1, rz, 1);
    mst_an_attr oab[1] = {ids_attr(ab, 2)};
    mst_an_attr ob[1] = {ids_attr(b_only, 1)};
    add(m, "vllm.output.process", 30, 6, 6.5, oab, 1);   /* step 0's output, in step 0's window */
    add(m, "vllm.output.process", 30, 16, 16.5, oab, 1); /* step 1's */
    /* Steps at 0, 10 (busy: a, b), 20 (busy: b), 30 and 40 (idle). */
    step(m, 0, ab, 2);
    step(m, 10, ab, 2);
    step(m, 20, b_only, 1);
    step(m, 30, NULL, 0);
    step(m, 40, NULL, 0);
    /* A lagging output loop: step 2's output starts at 35, in idle step 3's window. */
    add(m, "vllm.output.process", 30, 35, 36.5, ob, 1);
    mst_an_attr bad[1] = {int_attr("x", 1)};
    mst_an_span s;
    memset(&s, 0, sizeof s);
    s.name = (mst_an_str){"weird", 5};
    s.start_ns = INT64_MIN + 5;
    s.end_ns = INT64_MAX;
    s.attrs = bad;
    s.n_attrs = 1;
    CHECK(mst_an_model_add_span(m, &s) == MST_OK);
    CHECK(mst_an_model_finish(m) == MST_OK);

    mst_an_view v;
    mst_an_model_view(m, &v);
    CHECK_EQ_INT(v.bad_times, 1);
    CHECK_EQ_INT(v.n_engines, 1);
    CHECK_EQ_INT(v.n_steps, 5);
    CHECK(v.have_worker_spans);
    const mst_an_step *st = v.steps;
    CHECK(st[0].busy && st[1].busy && st[2].busy && !st[3].busy && !st[4].busy);
    CHECK(st[0].paired && st[1].paired && !st[2].paired);
    /* Step 0: schedule 1 + update 0.5; model = the longer worker (pid 20,
     * 2 ms); executor window 1..5 = 4 ms, ipc 4 - 2 = 2 ms; output 0.5;
     * window 0..10 covered by schedule 0-1, execute 1-1.5, workers 2-4,
     * sample 4.5-5, update 5-5.5; the parts sum to the 10 ms wall, so
     * waiting is the rest: 10 - 1.5 - 2 - 2 = 4.5 ms. */
    CHECK(near(st[0].stage_ms[MST_AN_SCHEDULE], 1.5));
    CHECK(near(st[0].stage_ms[MST_AN_MODEL], 2.0));
    CHECK(near(st[0].stage_ms[MST_AN_IPC], 2.0));
    CHECK(near(st[0].stage_ms[MST_AN_OUTPUT], 0.5));
    CHECK(near(st[0].stage_ms[MST_AN_WAITING], 4.5));
    double sum = 0;
    for (int g = 0; g < MST_AN_STAGES; g++)
        if (g != MST_AN_OUTPUT) sum += st[0].stage_ms[g];
    CHECK(near(sum, st[0].wall_ms));
    CHECK(near(st[0].output_overlap_ms, 0.5)); /* the API server's 6..6.5, concurrent */
    CHECK(near(st[0].wall_ms, 10.0));
    CHECK(v.procs[st[0].model_proc].pid == 20);
    CHECK_EQ_INT(st[0].batch_size, 2);
    /* Step 2 is followed by an idle step: no waiting, wall = its own spans. */
    CHECK(near(st[2].stage_ms[MST_AN_WAITING], 0.0));
    CHECK(near(st[2].wall_ms, 5.5));
    /* The lagging output (35..36.5) counts for step 2, the last busy step. */
    CHECK(near(st[2].stage_ms[MST_AN_OUTPUT], 1.5));
    CHECK(near(st[3].stage_ms[MST_AN_OUTPUT], 0.0));
    CHECK(v.procs[st[2].output_proc].pid == 30);

    /* Requests: a (arrival -2, steps 0 and 1, outputs 6..6.5 and 16..16.5,
     * span end 16.5), b (arrival -1, steps 0..2, outputs end 6.5, 16.5,
     * 36.5), z (a request span no step names: unjoined). TTFT and e2e are
     * taken when the API server starts processing the output, as vLLM
     * stamps them. */
    CHECK_EQ_INT(v.n_requests, 3);
    CHECK_EQ_INT(v.requests_with_span, 3);
    CHECK_EQ_INT(v.unjoined, 1);
    const mst_an_request *a = NULL, *b = NULL;
    for (size_t i = 0; i < v.n_requests; i++) {
        const char *id = v.strings + v.requests[i].id_off;
        if (!strcmp(id, "a")) a = &v.requests[i];
        if (!strcmp(id, "b")) b = &v.requests[i];
    }
    CHECK(a && b);
    CHECK(near(a->queue_ms, 2.0));
    CHECK(near(a->ttft_ms, 8.0));
    CHECK(near(a->tpot_ms, 10.0));
    CHECK(near(a->e2e_ms, 18.0));
    CHECK_EQ_INT(a->n_steps, 2);
    CHECK_EQ_INT(a->max_shared, 2);
    CHECK(near(b->queue_ms, 1.0));
    CHECK(near(b->tpot_ms, 15.0)); /* (36.5 - 6.5) / 2 */
    CHECK(near(b->e2e_ms, 36.0));
    CHECK_EQ_INT(b->n_steps, 3);
    CHECK_EQ_INT(b->n_outputs, 3);
    CHECK(v.procs[b->span_proc].pid == 30);
    mst_an_model_free(m);
}

/* Without worker spans the executor window is the model time (no ipc). */
static void executor_only(void) {
    mst_an_model *m = mst_an_model_new();
    const mst_an_str one[1] = {{"r", 1}};
    mst_an_attr a[1] = {ids_attr(one, 1)};
    for (int i = 0; i < 3; i++) {
        add(m, "vllm.scheduler.schedule", 1, i * 10, i * 10 + 1, a, 1);
        add(m, "vllm.model.execute", 1, i * 10 + 1, i * 10 + 7, NULL, 0);
    }
    CHECK(mst_an_model_finish(m) == MST_OK);
    mst_an_view v;
    mst_an_model_view(m, &v);
    CHECK(!v.have_worker_spans);
    CHECK_EQ_INT(v.n_steps, 3);
    CHECK(near(v.steps[0].stage_ms[MST_AN_MODEL], 6.0));
    CHECK(near(v.steps[0].stage_ms[MST_AN_IPC], 0.0));
    CHECK(near(v.steps[0].stage_ms[MST_AN_WAITING], 3.0));
    CHECK_EQ_INT(v.steps[0].batch_size, 1); /* from the ids: no batch.request_count */
    CHECK_EQ_INT(v.requests_with_span, 0);
    CHECK(isnan(v.requests[0].queue_ms)); /* arrival unknown */
    mst_an_model_free(m);
}

static mst_an_attr list_attr(const char *key, const mst_an_str *items, size_t n) {
    mst_an_attr a = ids_attr(items, n);
    a.key = (mst_an_str){key, strlen(key)};
    return a;
}

/* One engine step carrying a step record: schedule at t (0.5 ms), update
 * t+0.5..t+1 (its tokens are output at t+1). */
static void record_step(mst_an_model *m, double t, const mst_an_attr *attrs, size_t n) {
    add(m, "vllm.scheduler.schedule", 10, t, t + 0.5, attrs, n);
    add(m, "vllm.scheduler.update_from_output", 10, t + 0.5, t + 1, NULL, 0);
}

/* vLLM's definitions from the step record, on a hand-timed life: request a
 * arrives at 0, reaches the engine at 1, is prefilled in two chunks (steps
 * at 2 and 4, its first token at 5), decodes one token (step 6, token at 7),
 * is preempted by step 8 and resumed by step 10 (token at 11). Request b's
 * step.queued_ns is 0 (unknown). Some lists come as JSON text, as Jaeger and
 * a reader that keeps numeric arrays raw give them. */
static void step_record_life(void) {
    mst_an_model *m = mst_an_model_new();
    CHECK(m != NULL);
    const mst_an_str a[1] = {{"a", 1}}, b[1] = {{"b", 1}};
    char queued[32];
    snprintf(queued, sizeof queued, "%lld", (long long)(T0 + 1 * MS));
    const mst_an_str q_a[1] = {{queued, strlen(queued)}}, q_zero[1] = {{"0", 1}};
    const mst_an_str t100[1] = {{"100", 3}}, t1[1] = {{"1", 1}}, t10[1] = {{"10", 2}};
    mst_an_attr ra[1] = {str_attr("request.id", "a")};
    add(m, "vllm.request", 30, 0, 30, ra, 1);
    mst_an_attr s0[6] = {ids_attr(a, 1), list_attr("step.tokens", t100, 1), str_attr("step.phase", "p"),
                         list_attr("step.new_ids", a, 1), list_attr("step.queued_ns", q_a, 1),
                         int_attr("scheduler.waiting", 1)};
    record_step(m, 2, s0, 6);
    /* Jaeger keeps a string list as JSON text: ["50"]; the new ids' list too. */
    mst_an_attr s1[3] = {ids_attr(a, 1), str_attr("step.tokens", "[\"50\"]"), str_attr("step.phase", "P")};
    record_step(m, 4, s1, 3);
    mst_an_attr s2[3] = {ids_attr(a, 1), list_attr("step.tokens", t1, 1), str_attr("step.phase", "d")};
    record_step(m, 6, s2, 3);
    mst_an_attr s3[6] = {ids_attr(b, 1), list_attr("step.tokens", t10, 1), str_attr("step.phase", "P"),
                         str_attr("step.new_ids", "[\"b\"]"), list_attr("step.queued_ns", q_zero, 1),
                         list_attr("step.preempted_ids", a, 1)};
    record_step(m, 8, s3, 6);
    mst_an_attr tok_text = str_attr("step.tokens", "[152]");
    tok_text.type = MST_AN_VAL_OTHER; /* a reader that keeps a numeric array raw */
    mst_an_attr s4[4] = {ids_attr(a, 1), tok_text, str_attr("step.phase", "P"), list_attr("step.resumed_ids", a, 1)};
    record_step(m, 10, s4, 4);
    mst_an_attr oa[1] = {ids_attr(a, 1)};
    add(m, "vllm.output.process", 30, 5.5, 6, oa, 1);
    add(m, "vllm.output.process", 30, 7.5, 8, oa, 1);
    add(m, "vllm.output.process", 30, 11.5, 12, oa, 1);
    CHECK(mst_an_model_finish(m) == MST_OK);
    mst_an_view v;
    mst_an_model_view(m, &v);
    CHECK_EQ_INT(v.steps_with_record, 5);
    CHECK_EQ_INT(v.preemptions, 1);
    CHECK_EQ_INT(v.steps[0].rec.prefill_tokens, 100);
    CHECK_EQ_INT(v.steps[4].rec.prefill_tokens, 152);
    CHECK_EQ_INT(v.steps[1].rec.prefill_tokens, 50);
    CHECK_EQ_INT(v.steps[3].rec.new_n, 1);
    CHECK_EQ_INT(v.steps[0].rec.waiting, 1);
    CHECK(v.steps[2].kind == MST_AN_DECODE && v.steps[1].kind == MST_AN_PREFILL);
    const mst_an_request *ra_ = NULL, *rb = NULL;
    for (size_t i = 0; i < v.n_requests; i++) {
        if (!strcmp(v.strings + v.requests[i].id_off, "a")) ra_ = &v.requests[i];
        if (!strcmp(v.strings + v.requests[i].id_off, "b")) rb = &v.requests[i];
    }
    CHECK(ra_ && rb);
    CHECK(near(ra_->handoff_ms, 1.0));   /* arrival 0 -> the engine received it at 1 */
    CHECK(near(ra_->queue_ms, 1.0));     /* received 1 -> first scheduled 2 */
    CHECK(!ra_->queue_from_arrival);
    CHECK(near(ra_->prefill_ms, 3.0));   /* scheduled 2 -> first token 5 (the P chunk's update end) */
    CHECK(near(ra_->decode_ms, 6.0));    /* 5 -> 11 */
    CHECK(near(ra_->inference_ms, 9.0));
    CHECK_EQ_INT(ra_->n_tokens, 3);
    CHECK(near(ra_->tpot_ms, 3.0));      /* 6 / (3 - 1) */
    CHECK(near(ra_->ttft_ms, 5.5));      /* the first output's start - arrival */
    CHECK(near(ra_->e2e_ms, 11.5));      /* the last output's start - arrival */
    CHECK_EQ_INT(ra_->preemptions, 1);
    CHECK(near(ra_->preempted_ms, 2.0)); /* preempted by step 8, resumed by step 10 */
    CHECK_EQ_INT(ra_->recomputed_tokens, 151);
    /* Every gap between a's tokens: 5 -> 7 and 7 -> 11 (across the preemption). */
    size_t n_a = 0;
    double gaps = 0;
    for (size_t i = 0; i < v.n_itls; i++)
        if (&v.requests[v.itls[i].request] == ra_) {
            n_a++;
            gaps += v.itls[i].ms;
        }
    CHECK_EQ_INT(n_a, 2);
    CHECK(near(gaps, 6.0));
    CHECK(isnan(rb->queue_ms) && isnan(rb->handoff_ms)); /* queued_ns 0: unknown, and no arrival */
    mst_an_model_free(m);
}

/* step.index counts every schedule() call: a jump is steps lost before the
 * trace, counted (and the input is lossy). */
static void missing_steps(void) {
    mst_an_model *m = mst_an_model_new();
    CHECK(m != NULL);
    const mst_an_str one[1] = {{"r", 1}};
    static const int64_t index[] = {0, 1, 5, 6};
    for (int i = 0; i < 4; i++) {
        mst_an_attr a[2] = {ids_attr(one, 1), int_attr("step.index", index[i])};
        add(m, "vllm.scheduler.schedule", 10, i * 10, i * 10 + 1, a, 2);
    }
    CHECK(mst_an_model_finish(m) == MST_OK);
    mst_an_view v;
    mst_an_model_view(m, &v);
    CHECK_EQ_INT(v.missing_steps, 3);
    mst_an_model_free(m);
}

/* Processes are keyed by (input, pid): many pids, each found again. */
static void many_processes(void) {
    mst_an_model *m = mst_an_model_new();
    CHECK(m != NULL);
    for (int round = 0; round < 2; round++)
        for (int64_t pid = 1; pid <= 20000; pid++) {
            mst_an_span s;
            memset(&s, 0, sizeof s);
            s.name = (mst_an_str){"x", 1};
            s.pid = pid * 7919;
            s.source = (uint32_t)(pid % 3);
            s.start_ns = T0;
            s.end_ns = T0 + 1;
            CHECK(mst_an_model_add_span(m, &s) == MST_OK);
        }
    CHECK(mst_an_model_finish(m) == MST_OK);
    mst_an_view v;
    mst_an_model_view(m, &v);
    CHECK_EQ_INT(v.n_procs, 20000);
    for (size_t i = 0; i < v.n_procs; i++) CHECK_EQ_INT(v.procs[i].spans, 2);
    mst_an_model_free(m);
}

static const mst_test_case tests[] = {
    {"stage_split_and_requests", stage_split_and_requests},
    {"executor_only", executor_only},
    {"step_record_life", step_record_life},
    {"missing_steps", missing_steps},
    {"many_processes", many_processes},
};
MST_TEST_MAIN(tests)
