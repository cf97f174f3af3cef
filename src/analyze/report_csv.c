/*
 * report_csv.c — request.csv and step.csv (report_csv.h). Unknown values
 * are empty cells. Text cells (ids, roles) come from the trace, which is
 * outside input, and the file is opened by spreadsheets, so every text
 * cell follows OWASP's rule against CSV injection: one that starts with
 * '=', '+', '-', '@', TAB or CR — what a spreadsheet takes for a formula —
 * gets a leading single quote and is quoted. A cell is quoted (quotes
 * doubled) when it holds a comma, quote, CR, LF or NUL. Ids are written
 * whole, every byte as the model holds it (a NUL inside an id included),
 * so two different ids never print alike.
 */
#include "analyze/report_csv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analyze/output_file.h"

static void cell_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6f", v);
    else fputs(",", f);
}

/* A cell a spreadsheet would run as a formula (OWASP). */
static bool formula_like(const char *s, size_t n) {
    return n && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' ||
                 s[0] == '\r');
}

static void cell_text(FILE *f, const char *s, size_t n, bool first) {
    if (!first) fputc(',', f);
    bool formula = formula_like(s, n);
    bool quote = formula;
    for (size_t i = 0; i < n && !quote; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r' || s[i] == '\0';
    if (!quote) {
        fwrite(s, 1, n, f);
        return;
    }
    fputc('"', f);
    if (formula) fputc('\'', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') fputc('"', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

static void cell_str(FILE *f, const char *s, bool first) { cell_text(f, s, strlen(s), first); }


static const char *kind_name(uint8_t k) {
    return k == MST_AN_PREFILL ? "prefill" : k == MST_AN_MIXED ? "mixed" : "decode";
}

static void write_requests(FILE *f, const mst_an_view *vp) {
    const mst_an_view v = *vp;
    fputs("request_id,arrival_ns,queue_wait_time_ms,first_token_latency_ms,tpot_ms,"
          "execution_time_ms,steps,outputs,max_batch_size,mean_batch_size,has_request_span\n", f);
    for (size_t i = 0; i < v.n_requests; i++) {
        const mst_an_request *q = &v.requests[i];
        if (q->excluded) continue; /* outside --window / --skip-warmup */
        cell_text(f, v.strings + q->id_off, q->id_len, true);
        if (q->arrival_ns != INT64_MIN) fprintf(f, ",%lld", (long long)q->arrival_ns);
        else fputs(",", f);
        cell_num(f, q->queue_ms);
        cell_num(f, q->ttft_ms);
        cell_num(f, q->tpot_ms);
        cell_num(f, q->e2e_ms);
        fprintf(f, ",%u,%u,%u", q->n_steps, q->n_outputs, q->max_shared);
        cell_num(f, q->n_steps ? (double)q->shared_sum / q->n_steps : NAN);
        fprintf(f, ",%d\n", q->has_span ? 1 : 0);
    }
}

static void write_steps(FILE *f, const mst_an_view *vp) {
    const mst_an_view v = *vp;
    fputs("index,pid,role,start_ns,batch_size,batch_type,scheduled_tokens,during_time_ms,"
          "schedule_ms,model_ms,ipc_ms,output_ms,waiting_ms,busy\n", f);
    for (size_t i = 0; i < v.n_steps; i++) {
        const mst_an_step *s = &v.steps[i];
        fprintf(f, "%zu,%lld,", i, (long long)v.procs[s->proc].pid);
        cell_str(f, v.procs[s->proc].role, true);
        fprintf(f, ",%lld,%d,%s,", (long long)s->start_ns, s->batch_size, kind_name(s->kind));
        if (s->scheduled_tokens >= 0) fprintf(f, "%d", s->scheduled_tokens);
        cell_num(f, s->wall_ms);
        for (int g = 0; g < MST_AN_STAGES; g++) cell_num(f, s->stage_ms[g]);
        fprintf(f, ",%d\n", s->busy ? 1 : 0);
    }
}

/* One CSV file of DIR through output_file.h (renamed into place whole). */
static mst_status write_one(int dirfd, const char *dir, const char *name,
                            void (*rows)(FILE *, const mst_an_view *), const mst_an_view *v,
                            char *err, size_t err_size) {
    mst_an_output o;
    mst_status st = mst_an_output_open_in(&o, dirfd, dir, name, "--csv", err, err_size);
    if (st != MST_OK) return st;
    rows(o.f, v);
    return mst_an_output_commit(&o, err, err_size);
}

mst_status mst_an_report_csv(const mst_an_model *m, const char *dir, char *err, size_t err_size) {
    int dirfd = mst_an_output_open_dir(dir, "--csv", err, err_size);
    if (dirfd < 0) return MST_ERR_IO;
    mst_an_view v;
    mst_an_model_view(m, &v);
    mst_status st = write_one(dirfd, dir, "request.csv", write_requests, &v, err, err_size);
    if (st == MST_OK) st = write_one(dirfd, dir, "step.csv", write_steps, &v, err, err_size);
    close(dirfd);
    return st;
}
