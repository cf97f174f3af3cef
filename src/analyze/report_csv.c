/*
 * report_csv.c — request.csv and step.csv (report_csv.h). Unknown values
 * are empty cells; ids are quoted when they hold a comma or quote.
 */
#include "analyze/report_csv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void cell_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, ",%.6f", v);
    else fputs(",", f);
}

static void cell_str(FILE *f, const char *s, bool first) {
    if (!first) fputc(',', f);
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static FILE *open_in(const char *dir, const char *name, char *path, size_t path_size, char *err,
                     size_t err_size) {
    snprintf(path, path_size, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) snprintf(err, err_size, "cannot write %s: %s", path, strerror(errno));
    return f;
}

static mst_status close_checked(FILE *f, const char *path, char *err, size_t err_size) {
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad) {
        snprintf(err, err_size, "cannot write %s", path);
        return MST_ERR_IO;
    }
    return MST_OK;
}

static const char *kind_name(uint8_t k) {
    return k == MST_AN_PREFILL ? "prefill" : k == MST_AN_MIXED ? "mixed" : "decode";
}

mst_status mst_an_report_csv(const mst_an_model *m, const char *dir, char *err, size_t err_size) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, err_size, "cannot create %s: %s", dir, strerror(errno));
        return MST_ERR_IO;
    }
    mst_an_view v;
    mst_an_model_view(m, &v);
    char path[4096];
    FILE *f = open_in(dir, "request.csv", path, sizeof path, err, err_size);
    if (!f) return MST_ERR_IO;
    fputs("request_id,arrival_ns,queue_wait_time_ms,first_token_latency_ms,tpot_ms,"
          "execution_time_ms,steps,outputs,max_batch_size,mean_batch_size,has_request_span\n", f);
    for (size_t i = 0; i < v.n_requests; i++) {
        const mst_an_request *q = &v.requests[i];
        if (q->excluded) continue; /* outside --window / --skip-warmup */
        cell_str(f, v.strings + q->id_off, true);
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
    mst_status st = close_checked(f, path, err, err_size);
    if (st != MST_OK) return st;
    f = open_in(dir, "step.csv", path, sizeof path, err, err_size);
    if (!f) return MST_ERR_IO;
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
    return close_checked(f, path, err, err_size);
}
