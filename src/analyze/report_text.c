/*
 * report_text.c — the text summary (report_text.h).
 */
#include "analyze/report_text.h"

#include "analyze/term_text.h"

#include <math.h>
#include <string.h>

/* Outside text inside a sentence the analysis wrote (sentences quote ids,
 * file names and pids): escaped by term_text.h's one rule. */
static void line(FILE *f, const char *prefix, const char *text) { mst_an_term_line(f, prefix, text); }

static void cell(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, " %10.3f", v);
    else fprintf(f, " %10s", "-");
}

static void latency_table(FILE *f, const mst_an_result *r) {
    static const struct {
        int metric;
        const char *label;
    } rows[] = {{MST_AN_REQ_QUEUE, "queue"},     {MST_AN_REQ_TTFT, "TTFT"},     {MST_AN_REQ_TPOT, "TPOT"},
                {MST_AN_REQ_ITL, "ITL"},         {MST_AN_REQ_PREFILL, "prefill"}, {MST_AN_REQ_DECODE, "decode"},
                {MST_AN_REQ_E2E, "e2e"},         {MST_AN_REQ_HANDOFF, "hand-off"}};
    fprintf(f, "latency (ms)            n        p50        p90        p99       mean\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const mst_an_metric_summary *m = &r->requests[rows[i].metric];
        fprintf(f, "  %-12s %10zu", rows[i].label, m->n);
        cell(f, m->q.p50);
        cell(f, m->q.p90);
        cell(f, m->q.p99);
        cell(f, m->mean);
        fputc('\n', f);
    }
}

/* "label 1.5 ms", or "label -" when unknown. */
static void ms_or_dash(FILE *f, const char *label, double v) {
    if (isfinite(v)) fprintf(f, "%s %.1f ms", label, v);
    else fprintf(f, "%s -", label);
}

/* A request a trigger names, with where its time went. */
static void trigger_request(FILE *f, const mst_an_view *v, const char *id, size_t id_len, uint32_t q) {
    fputs("flight-recorder request ", f);
    mst_an_term_write(f, id, id_len);
    if (q == UINT32_MAX) {
        fputs(": not in this dump\n", f);
        return;
    }
    const mst_an_request *r = &v->requests[q];
    ms_or_dash(f, ": e2e", r->e2e_ms);
    ms_or_dash(f, " (queue", r->queue_ms);
    ms_or_dash(f, ", prefill", r->prefill_ms);
    ms_or_dash(f, ", decode", r->decode_ms);
    fprintf(f, ") over %u step%s, at most %u requests in a step\n", r->n_steps, r->n_steps == 1 ? "" : "s",
            r->max_shared);
}

/* First: why a flight-recorder dump was written (the forwarder's own
 * words, which name the requests), then each named request's split. */
static void flight_lines(FILE *f, const mst_an_analysis *an) {
    const mst_an_view *v = &an->view;
    for (size_t t = 0; t < v->n_triggers; t++) {
        const mst_an_trigger *tr = &v->triggers[t];
        fputs("flight-recorder dump: trigger ", f);
        mst_an_term_puts(f, tr->reason[0] ? tr->reason : "(unnamed)");
        if (tr->on_demand) fputs(" (the whole ring)", f);
        fprintf(f, ", window %lld..%lld ns (%.1f ms)\n", (long long)tr->start_ns, (long long)tr->end_ns,
                (double)(tr->end_ns - tr->start_ns) / 1e6);
        for (uint32_t k = 0; k < tr->n_ids_kept; k++) trigger_request(f, v, tr->ids[k], tr->id_len[k], an->flight.request[t][k]);
        if (tr->n_ids > tr->n_ids_kept)
            fprintf(f, "flight-recorder: %llu more requests named (the first %d are shown)\n",
                    (unsigned long long)(tr->n_ids - tr->n_ids_kept), MST_AN_TRIGGER_IDS_KEPT);
    }
    if (v->triggers_dropped)
        fprintf(f, "flight-recorder: %llu more trigger spans (the first %d are shown)\n",
                (unsigned long long)v->triggers_dropped, MST_AN_TRIGGERS_KEPT);
}

void mst_an_report_text(FILE *f, const mst_an_analysis *an, const char *before_label,
                        const char *after_label) {
    const mst_an_view *v = &an->view;
    const mst_an_result *r = &an->result;
    flight_lines(f, an);
    fprintf(f,
            "data: %llu spans from %zu input(s), %zu processes, %zu engine(s), %zu engine steps (%zu busy), "
            "%zu requests (%zu joined), %llu preemptions%s\n",
            (unsigned long long)v->spans, v->n_inputs, v->n_procs, v->n_engines, v->n_steps, r->busy_steps,
            r->included_requests, r->joined_requests, (unsigned long long)v->preemptions,
            r->lossy ? "; LOSSY INPUT, see warnings" : "");
    line(f, "verdict: ", r->verdict);
    for (size_t i = 0; i < r->n_warnings; i++) line(f, "data-quality warning: ", r->warnings[i]);
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].fired) {
            fprintf(f, "[%s] %s: ", r->findings[i].severity, r->findings[i].rule);
            line(f, "", r->findings[i].sentence);
        }
    if (r->included_requests) latency_table(f, r);
    if (r->busy_steps) {
        fprintf(f, "engine time over busy steps (parts sum to %.1f%%; output runs beside the engine):\n",
                100 * r->parts_share);
        for (int g = 0; g < MST_AN_STAGES; g++) {
            fprintf(f, "  %-9s %5.1f%%%s", mst_an_stage_names[g], 100 * r->stages[g].share,
                    g == MST_AN_OUTPUT ? " busy (concurrent)" : "");
            fprintf(f, "  p50 ");
            if (isfinite(r->stages[g].q_ms.p50)) fprintf(f, "%.3f ms", r->stages[g].q_ms.p50);
            else fputc('-', f);
            fprintf(f, "  p99 ");
            if (isfinite(r->stages[g].q_ms.p99)) fprintf(f, "%.3f ms", r->stages[g].q_ms.p99);
            else fputc('-', f);
            fputc('\n', f);
        }
    }
    if (r->n_engines > 1)
        for (size_t e = 0; e < r->n_engines && e < 16; e++) {
            const mst_an_proc *p = &v->procs[r->engines[e].proc];
            fprintf(f, "engine pid %lld (", (long long)p->pid);
            mst_an_term_puts(f, p->source < v->n_inputs ? v->inputs[p->source].name : "?");
            fprintf(f, "): %zu busy steps, %.3f ms per step median\n", r->engines[e].busy_steps,
                    r->engines[e].wall_p50_ms);
        }
    if (r->n_engines > 16) fprintf(f, "... and %zu more engines (see the JSON's engines)\n", r->n_engines - 16);
    for (size_t i = 0; i < r->n_targets; i++) {
        fputs("profile: ", f);
        mst_an_term_puts(f, r->targets[i].what);
        fprintf(f, " pid %lld, %lld..%lld ns: ", (long long)r->targets[i].pid, (long long)r->targets[i].start_ns,
                (long long)r->targets[i].end_ns);
        line(f, "", r->targets[i].why);
    }
    if (an->compare) {
        fputs("compare ", f);
        mst_an_term_puts(f, before_label ? before_label : "before");
        fputs(" -> ", f);
        mst_an_term_puts(f, after_label ? after_label : "after");
        fputs(":\n", f);
        for (size_t i = 0; i < an->compare->n_metrics; i++) line(f, "  ", an->compare->metrics[i].sentence);
        line(f, "compare verdict: ", an->compare->verdict);
    }
}
