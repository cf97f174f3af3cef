/*
 * analyze_cmd.c — the `mstrace analyze` command line (docs/analyze.md).
 *
 *   mstrace analyze TRACE.json [TRACE2.json ...] [--json PATH] [--csv DIR] [--top N]
 *   mstrace analyze --compare BEFORE AFTER [...]
 *
 * Owns option parsing (one table, OPTIONS below), loading each side's
 * inputs into a model (src/analyze/model.h) with a progress line on stderr
 * for inputs that take more than a second, and writing the outputs. With
 * no output option the verdict, the fired rules, the stage split and the
 * profile targets are printed as text. Every number comes from the same
 * analysis JSON (report_json.h) so the outputs agree.
 * Exit codes: 0 ok; 1 an output could not be written; 2 usage error, or an
 * input that is not a trace (one line on stderr).
 */
#include "cli/analyze_cmd.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyze/compare.h"
#include "analyze/model.h"
#include "analyze/read_chrome.h"
#include "analyze/report_csv.h"
#include "analyze/report_json.h"
#include "analyze/rules.h"
#include "wire/buf.h"

#define EXIT_OUTPUT 1
#define EXIT_USAGE 2
#define MAX_INPUTS 256

typedef struct analyze_args {
    const char *inputs[MAX_INPUTS]; /* the analysed side ("after" with --compare) */
    size_t n_inputs;
    const char *before[MAX_INPUTS]; /* --compare: the before side */
    size_t n_before;
    bool compare;
    const char *json_path;  /* "-" = stdout */
    const char *csv_dir;
    const char *html_path;  /* -o */
    long top;
    bool quiet;
} analyze_args;

typedef enum opt_id { OPT_JSON, OPT_CSV, OPT_TOP, OPT_OUTPUT, OPT_COMPARE, OPT_QUIET, OPT_HELP } opt_id;

typedef struct opt_def {
    const char *long_name;
    const char *short_name; /* NULL when none */
    int n_values;           /* values that follow the flag */
    opt_id id;
    const char *help;
} opt_def;

static const opt_def OPTIONS[] = {
    {"--json", NULL, 1, OPT_JSON, "write the whole analysis as JSON to PATH ('-': stdout)"},
    {"--csv", NULL, 1, OPT_CSV, "write DIR/request.csv and DIR/step.csv"},
    {"--top", NULL, 1, OPT_TOP, "list the N slowest requests (default 10)"},
    {"--output", "-o", 1, OPT_OUTPUT, "write the HTML report to PATH"},
    {"--compare", NULL, 2, OPT_COMPARE,
     "compare BEFORE with AFTER (each a trace file, or several joined with ',')"},
    {"--quiet", "-q", 0, OPT_QUIET, "no progress line and no text summary"},
    {"--help", "-h", 0, OPT_HELP, "show this help and exit"},
};
#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

static void usage(FILE *f) {
    fprintf(f,
            "usage: mstrace analyze TRACE.json [TRACE2.json ...] [options]\n"
            "       mstrace analyze --compare BEFORE AFTER [options]\n"
            "\n"
            "Where the time of a traced server went: engine steps split into schedule, model,\n"
            "ipc, output and waiting; per request queue, TTFT, TPOT and end-to-end times; the\n"
            "bottleneck rules with numbers; time windows and pids to aim a profiler at.\n"
            "Inputs are the Chrome Trace JSON files of `mstrace forward --perfetto-output`\n"
            "(several files are merged; a file cut by a kill is read up to the cut).\n"
            "\n"
            "options:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char flag[64];
        const opt_def *o = &OPTIONS[i];
        const char *meta = o->id == OPT_COMPARE ? " BEFORE AFTER"
                           : o->id == OPT_CSV   ? " DIR"
                           : o->id == OPT_TOP   ? " N"
                           : o->n_values        ? " PATH"
                                                : "";
        snprintf(flag, sizeof flag, "%s%s%s%s", o->short_name ? o->short_name : "",
                 o->short_name ? ", " : "", o->long_name, meta);
        fprintf(f, "  %-28s %s\n", flag, o->help);
    }
    fprintf(f, "\nWith no output option the verdict is printed as text. See docs/analyze.md.\n");
}

static int usage_error(const char *fmt, const char *what) {
    usage(stderr);
    fprintf(stderr, "mstrace analyze: error: ");
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

/* Splits a comma-joined list of paths into out[] (the string is modified). */
static size_t split_paths(char *s, const char **out, size_t cap) {
    size_t n = 0;
    for (char *tok = strtok(s, ","); tok && n < cap; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

/* Returns -1 when parsed, else the exit code. */
static int parse_args(int argc, char **argv, analyze_args *a) {
    memset(a, 0, sizeof *a);
    a->top = 10;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const opt_def *o = NULL;
        for (size_t k = 0; k < N_OPTIONS && !o; k++)
            if (strcmp(arg, OPTIONS[k].long_name) == 0 ||
                (OPTIONS[k].short_name && strcmp(arg, OPTIONS[k].short_name) == 0))
                o = &OPTIONS[k];
        if (!o) {
            if (arg[0] == '-' && arg[1] != 0) return usage_error("unrecognized argument: %s", arg);
            if (a->n_inputs >= MAX_INPUTS) return usage_error("too many inputs (at most %s)", "256");
            a->inputs[a->n_inputs++] = arg;
            continue;
        }
        if (i + o->n_values >= argc)
            return usage_error(o->n_values == 2 ? "argument %s: expected two arguments"
                                                : "argument %s: expected one argument",
                               o->long_name);
        switch (o->id) {
        case OPT_JSON: a->json_path = argv[++i]; break;
        case OPT_CSV: a->csv_dir = argv[++i]; break;
        case OPT_OUTPUT: a->html_path = argv[++i]; break;
        case OPT_QUIET: a->quiet = true; break;
        case OPT_HELP: usage(stdout); return 0;
        case OPT_TOP: {
            char *end;
            errno = 0;
            long v = strtol(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || v < 0 || v > 100000)
                return usage_error("argument --top: expected an integer 0..100000, got '%s'", argv[i]);
            a->top = v;
            break;
        }
        case OPT_COMPARE:
            if (a->compare) return usage_error("argument %s: given twice", "--compare");
            a->compare = true;
            a->n_before = split_paths(argv[++i], a->before, MAX_INPUTS);
            a->n_inputs += split_paths(argv[++i], a->inputs + a->n_inputs, MAX_INPUTS - a->n_inputs);
            break;
        }
    }
    if (a->compare && (a->n_before == 0 || a->n_inputs == 0))
        return usage_error("argument %s: BEFORE and AFTER must each name a trace", "--compare");
    if (a->n_inputs == 0) return usage_error("no input: give a trace file%s", "");
    return -1;
}

/* ------------------------------------------------------------ loading */

typedef struct progress {
    const char *name;
    struct timespec t0;
    double last_print;
    bool printed;
    bool quiet;
    bool tty;
} progress;

static double since(const struct timespec *t0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total) {
    progress *p = ctx;
    if (p->quiet) return;
    double t = since(&p->t0);
    /* Only inputs that take more than a second; then about once a second
     * on a terminal, every 5 s into a log. */
    if (t < 1.0 || t - p->last_print < (p->tty ? 0.5 : 5.0)) return;
    p->last_print = t;
    p->printed = true;
    double mib = (double)done / 1048576.0;
    if (total)
        fprintf(stderr, "%smstrace analyze: reading %s: %.0f / %.0f MiB (%.0f%%), %.1f MiB/s%s",
                p->tty ? "\r" : "", p->name, mib, (double)total / 1048576.0,
                100.0 * (double)done / (double)total, mib / t, p->tty ? "" : "\n");
    else
        fprintf(stderr, "%smstrace analyze: reading %s: %.0f MiB%s", p->tty ? "\r" : "", p->name,
                mib, p->tty ? "" : "\n");
    fflush(stderr);
}

/* Reads every input of one side into a new, finished model; NULL after
 * printing one error line. */
static mst_an_model *load_side(const char *const *paths, size_t n, bool quiet) {
    mst_an_model *m = mst_an_model_new();
    if (!m) {
        fprintf(stderr, "mstrace analyze: error: out of memory\n");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        char err[512] = "";
        mst_an_input_info info;
        progress p = {paths[i], {0, 0}, 0, false, quiet, isatty(2) == 1};
        clock_gettime(CLOCK_MONOTONIC, &p.t0);
        mst_status st = mst_an_read_chrome_file(paths[i], (uint32_t)i, mst_an_model_add_span, m,
                                                on_progress, &p, &info, err, sizeof err);
        if (p.printed && p.tty) fputc('\n', stderr);
        if (st != MST_OK) {
            fprintf(stderr, "mstrace analyze: error: %s\n", err[0] ? err : "cannot read input");
            mst_an_input_info_free(&info);
            mst_an_model_free(m);
            return NULL;
        }
        if (info.spans == 0) {
            fprintf(stderr, "mstrace analyze: error: %s: no spans (no X events in the trace)\n",
                    paths[i]);
            mst_an_input_info_free(&info);
            mst_an_model_free(m);
            return NULL;
        }
        for (size_t k = 0; k < info.n_warnings && !quiet; k++)
            fprintf(stderr, "mstrace analyze: warning: %s: %s\n", paths[i], info.warnings[k]);
        if (mst_an_model_add_input(m, &info) != MST_OK) {
            mst_an_input_info_free(&info);
            mst_an_model_free(m);
            fprintf(stderr, "mstrace analyze: error: out of memory\n");
            return NULL;
        }
    }
    if (mst_an_model_finish(m) != MST_OK) {
        fprintf(stderr, "mstrace analyze: error: out of memory building the model\n");
        mst_an_model_free(m);
        return NULL;
    }
    return m;
}

/* ------------------------------------------------------------ outputs */

static bool write_file(const char *path, const void *data, size_t len) {
    if (strcmp(path, "-") == 0) return fwrite(data, 1, len, stdout) == len && fflush(stdout) == 0;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "mstrace analyze: error: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    bool ok = fwrite(data, 1, len, f) == len;
    if (fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "mstrace analyze: error: cannot write %s\n", path);
    return ok;
}

static void print_ms(const char *label, double v) {
    if (isfinite(v)) printf("%s%.3f ms", label, v);
    else printf("%s-", label);
}

/* The text summary: what a person reads first. */
static void print_summary(const mst_an_model *m, const mst_an_model *before, const analyze_args *a) {
    mst_an_view v;
    mst_an_model_view(m, &v);
    mst_an_result *r = malloc(sizeof *r);
    if (!r || mst_an_evaluate(&v, r) != MST_OK) {
        free(r);
        return;
    }
    printf("data: %llu spans from %zu input(s), %zu processes, %zu engine steps (%zu busy), %zu "
           "requests (%zu joined)%s\n",
           (unsigned long long)v.spans, v.n_inputs, v.n_procs, v.n_steps, r->busy_steps,
           v.n_requests, r->joined_requests, r->lossy ? "; LOSSY INPUT, see warnings" : "");
    printf("verdict: %s\n", r->verdict);
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].fired)
            printf("[%s] %s: %s\n", r->findings[i].severity, r->findings[i].rule,
                   r->findings[i].sentence);
    if (r->busy_steps) {
        printf("stages over busy steps (share of busy time, median per step):\n");
        for (int g = 0; g < MST_AN_STAGES; g++) {
            printf("  %-9s %5.1f%%", mst_an_stage_names[g], 100 * r->stages[g].share);
            print_ms("  p50 ", r->stages[g].p50_ms);
            print_ms("  p99 ", r->stages[g].p99_ms);
            putchar('\n');
        }
    }
    for (size_t i = 0; i < r->n_targets; i++)
        printf("profile: %s pid %lld, %lld..%lld ns: %s\n", r->targets[i].what,
               (long long)r->targets[i].pid, (long long)r->targets[i].start_ns,
               (long long)r->targets[i].end_ns, r->targets[i].why);
    free(r);
    (void)before;
    (void)a;
}

int mst_analyze_main(int argc, char **argv) {
    analyze_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    if (a.html_path) {
        fprintf(stderr, "mstrace analyze: error: -o/--output: the HTML report is not part of this "
                        "build yet; use --json\n");
        return EXIT_USAGE;
    }
    mst_an_model *before = NULL;
    if (a.compare && !(before = load_side(a.before, a.n_before, a.quiet))) return EXIT_USAGE;
    mst_an_model *m = load_side(a.inputs, a.n_inputs, a.quiet);
    if (!m) {
        mst_an_model_free(before);
        return EXIT_USAGE;
    }
    rc = 0;
    mst_buf json;
    mst_buf_init(&json, 0);
    char before_label[1024] = "", after_label[1024] = "";
    if (a.compare) {
        snprintf(before_label, sizeof before_label, "%s", a.before[0]);
        snprintf(after_label, sizeof after_label, "%s", a.inputs[0]);
    }
    mst_an_json_options jo = {(size_t)a.top, 0, 0, a.compare ? before_label : NULL,
                              a.compare ? after_label : NULL};
    if (mst_an_report_json(m, before, &jo, &json) != MST_OK) {
        fprintf(stderr, "mstrace analyze: error: out of memory writing the analysis\n");
        rc = EXIT_OUTPUT;
    }
    if (!rc && a.json_path && !write_file(a.json_path, json.data, json.len)) rc = EXIT_OUTPUT;
    if (!rc && a.csv_dir) {
        char err[512] = "";
        if (mst_an_report_csv(m, a.csv_dir, err, sizeof err) != MST_OK) {
            fprintf(stderr, "mstrace analyze: error: %s\n", err);
            rc = EXIT_OUTPUT;
        }
    }
    bool to_stdout = a.json_path && strcmp(a.json_path, "-") == 0;
    if (!rc && !a.quiet && !to_stdout) {
        print_summary(m, before, &a);
        if (before) {
            mst_an_view bv, av;
            mst_an_model_view(before, &bv);
            mst_an_model_view(m, &av);
            mst_an_comparison *c = malloc(sizeof *c);
            if (c && mst_an_compare(&bv, &av, c) == MST_OK) {
                printf("compare %s -> %s:\n", before_label, after_label);
                for (size_t i = 0; i < c->n_metrics; i++) printf("  %s\n", c->metrics[i].sentence);
                printf("compare verdict: %s\n", c->verdict);
            }
            free(c);
        }
    }
    mst_buf_free(&json);
    mst_an_model_free(m);
    mst_an_model_free(before);
    return rc;
}
