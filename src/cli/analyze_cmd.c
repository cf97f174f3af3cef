/*
 * analyze_cmd.c — the `mstrace analyze` command line (docs/analyze.md).
 *
 *   mstrace analyze TRACE.json|TRACE.pftrace [TRACE2 ...] [--json PATH] [--csv DIR] [--top N] [-o report.html]
 *   mstrace analyze --jaeger http://HOST:16686 --service NAME [--since 1h | --start T --end T]
 *   mstrace analyze --compare BEFORE AFTER [...]
 *
 * Inputs: Chrome JSON (read_chrome.h) or .pftrace (read_pftrace.h), picked by
 * the file's first bytes; Jaeger (read_jaeger.h) for http:// inputs.
 * Owns option parsing (one table, OPTIONS below), loading each side's
 * inputs into a model (src/analyze/model.h; --window / --skip-warmup cut
 * it) with a progress line on stderr for inputs that take more than a
 * second, and writing the outputs. The analysis is built once
 * (analysis.h); the JSON, the HTML (from that JSON), the CSVs and, unless
 * --quiet or --json -, the text summary (report_text.h) all render it.
 * Exit codes: 0 ok; 1 an output could not be written; 2 usage error, or an
 * input that is not a trace (one line on stderr).
 */
#include "cli/analyze_cmd.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analysis.h"
#include "analyze/model.h"
#include "analyze/output_file.h"
#include "analyze/progress.h"
#include "analyze/read_chrome.h"
#include "analyze/read_jaeger.h"
#include "analyze/read_pftrace.h"
#include "analyze/report_csv.h"
#include "analyze/report_html.h"
#include "analyze/report_json.h"
#include "analyze/report_text.h"
#include "analyze/term_text.h"
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
    bool quiet;
    /* Inputs named http://... or https://... (and --jaeger URL) are Jaeger
     * query APIs, read over this window (read_jaeger.h). */
    mst_an_jaeger_query jaeger;
    bool has_start, has_end;
    /* The numeric options (opt_def.number below): --top N, and for Jaeger
     * the N options and the DURATION ones (in microseconds). Each starts at
     * its table entry's `unset`; the Jaeger ones go on into `jaeger` once
     * parsed. */
    int64_t top, jaeger_limit, jaeger_max_requests;
    int64_t since_us, jaeger_deadline_us, jaeger_min_window_us;
    /* --window START..END (offsets from the trace's first span, ns) and
     * --skip-warmup, for file inputs. */
    bool has_window, skip_warmup;
    int64_t window_lo_ns, window_hi_ns;
} analyze_args;

typedef enum opt_id {
    OPT_JSON, OPT_CSV, OPT_TOP, OPT_OUTPUT, OPT_COMPARE, OPT_QUIET, OPT_HELP,
    OPT_JAEGER, OPT_SERVICE, OPT_SINCE, OPT_START, OPT_END, OPT_JAEGER_LIMIT,
    OPT_JAEGER_DEADLINE, OPT_JAEGER_MAX_REQUESTS, OPT_JAEGER_MIN_WINDOW,
    OPT_JAEGER_CA, OPT_JAEGER_CERT, OPT_JAEGER_KEY,
    OPT_WINDOW, OPT_SKIP_WARMUP
} opt_id;

/* The value of a numeric option: an integer N, or a DURATION
 * (mst_an_jaeger_parse_duration: 90s, 30m, 1h, 2d, 1ms, 1us; stored in
 * microseconds), that goes into an int64_t field of analyze_args once it is
 * within [min, max]; the field holds `unset` when the option is not given.
 * A DURATION's error line gives `examples`. */
typedef struct number_value {
    size_t field; /* offsetof(analyze_args, ...) */
    int64_t min, max, unset;
    const char *examples; /* NULL: an integer N */
} number_value;

typedef struct opt_def {
    const char *long_name;
    const char *short_name; /* NULL when none */
    int n_values;           /* values that follow the flag */
    opt_id id;
    const char *meta;       /* the values' names in --help; NULL when none */
    const char *help;
    const number_value *number; /* N and DURATION options: parsed by the table (parse_number_opt) */
} opt_def;

static const number_value TOP = {offsetof(analyze_args, top), 0, 100000, 10, NULL};
/* 0 in the query is its default */
static const number_value JAEGER_LIMIT = {offsetof(analyze_args, jaeger_limit), 1, 100000, 0, NULL};
static const number_value JAEGER_MAX_REQUESTS = {offsetof(analyze_args, jaeger_max_requests), 1, 100000000, 0, NULL};
static const number_value SINCE = {offsetof(analyze_args, since_us), 0, INT64_MAX, -1, "90s, 30m, 1h or 2d"};
/* at least 1 ms, and its milliseconds fit the query's deadline_ms */
static const number_value JAEGER_DEADLINE = {offsetof(analyze_args, jaeger_deadline_us), 1000,
                                             INT64_C(0x7fffffff) * 1000 + 999, -1, "90s, 30m or 1h"};
static const number_value JAEGER_MIN_WINDOW = {offsetof(analyze_args, jaeger_min_window_us), 1, INT64_MAX, -1,
                                               "1ms or 1us"};

static const opt_def OPTIONS[] = {
    {"--json", NULL, 1, OPT_JSON, "PATH", "write the whole analysis as JSON to PATH ('-': stdout)", NULL},
    {"--csv", NULL, 1, OPT_CSV, "DIR", "write DIR/request.csv and DIR/step.csv", NULL},
    {"--top", NULL, 1, OPT_TOP, "N", "list the N slowest requests (default 10)", &TOP},
    {"--output", "-o", 1, OPT_OUTPUT, "PATH", "write the HTML report to PATH", NULL},
    {"--compare", NULL, 2, OPT_COMPARE, "BEFORE AFTER",
     "compare BEFORE with AFTER (each a trace file, or several joined with ',')", NULL},
    {"--jaeger", NULL, 1, OPT_JAEGER, "URL", "read the spans from Jaeger's query API at URL (http://HOST:16686)",
     NULL},
    {"--service", NULL, 1, OPT_SERVICE, "NAME", "the Jaeger service(s) to read (',' between several)", NULL},
    {"--since", NULL, 1, OPT_SINCE, "DURATION", "Jaeger window: the last DURATION (90s, 30m, 1h, 2d; default 1h)",
     &SINCE},
    {"--start", NULL, 1, OPT_START, "TIME", "Jaeger window start: RFC 3339 time or Unix seconds", NULL},
    {"--end", NULL, 1, OPT_END, "TIME", "Jaeger window end (default: now)", NULL},
    {"--jaeger-limit", NULL, 1, OPT_JAEGER_LIMIT, "N", "traces per Jaeger request (default 500)", &JAEGER_LIMIT},
    {"--jaeger-deadline", NULL, 1, OPT_JAEGER_DEADLINE, "DURATION",
     "stop reading Jaeger after DURATION in all (default 10m; exit 2)", &JAEGER_DEADLINE},
    {"--jaeger-max-requests", NULL, 1, OPT_JAEGER_MAX_REQUESTS, "N",
     "stop reading Jaeger after N requests (default 100000; exit 2)", &JAEGER_MAX_REQUESTS},
    {"--jaeger-min-window", NULL, 1, OPT_JAEGER_MIN_WINDOW, "DURATION",
     "do not split Jaeger windows below DURATION (default 1ms; 1us = Jaeger's resolution)", &JAEGER_MIN_WINDOW},
    {"--jaeger-ca", NULL, 1, OPT_JAEGER_CA, "PATH", "https Jaeger: CA file (PEM) that signed its certificate", NULL},
    {"--jaeger-cert", NULL, 1, OPT_JAEGER_CERT, "PATH", "https Jaeger, mutual TLS: client certificate (PEM)", NULL},
    {"--jaeger-key", NULL, 1, OPT_JAEGER_KEY, "PATH", "https Jaeger, mutual TLS: the client certificate's key (PEM)",
     NULL},
    {"--window", NULL, 1, OPT_WINDOW, "START..END",
     "analyse only START..END of file inputs, offsets from the trace's start (10s..70s, 2m.., ..90s)", NULL},
    {"--skip-warmup", NULL, 0, OPT_SKIP_WARMUP, NULL,
     "leave out each engine's first busy step and the requests that arrived before it ended", NULL},
    {"--quiet", "-q", 0, OPT_QUIET, NULL, "no progress line and no text summary", NULL},
    {"--help", "-h", 0, OPT_HELP, NULL, "show this help and exit", NULL},
};
#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

static void usage(FILE *f) {
    fprintf(f,
            "usage: mstrace analyze TRACE.json|TRACE.pftrace [TRACE2 ...] [options]\n"
            "       mstrace analyze --jaeger URL --service NAME [--since DURATION | --start TIME --end TIME]\n"
            "       mstrace analyze --compare BEFORE AFTER [options]\n"
            "\n"
            "Where the time of a traced server went: engine steps split into schedule, model,\n"
            "ipc and waiting (output processing runs beside them); per request vLLM's queue,\n"
            "prefill, decode, TTFT, TPOT, ITL and end-to-end times, preemptions; the rules\n"
            "(capacity, preemption, prefill interference, rank imbalance, ...) with numbers;\n"
            "time windows and pids to aim a profiler at.\n"
            "Inputs are the Chrome Trace JSON or native .pftrace files of `mstrace forward\n"
            "--perfetto-output`, told apart by content (several files are merged; a file cut\n"
            "by a kill is read up to the cut), or Jaeger's query API (--jaeger URL, or an\n"
            "input named http://...: --service and the window apply).\n"
            "\n"
            "options:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char flag[64];
        const opt_def *o = &OPTIONS[i];
        snprintf(flag, sizeof flag, "%s%s%s%s%s", o->short_name ? o->short_name : "",
                 o->short_name ? ", " : "", o->long_name, o->meta ? " " : "", o->meta ? o->meta : "");
        fprintf(f, "  %-28s %s\n", flag, o->help);
    }
    fprintf(f, "\nA text summary goes to stdout unless --quiet or --json -. See docs/analyze.md.\n");
}

static int usage_error(const char *fmt, const char *what) {
    usage(stderr);
    fprintf(stderr, "mstrace analyze: error: ");
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

/* Where numeric value `d` goes in `a`. */
static int64_t *number_field(analyze_args *a, const number_value *d) {
    return (int64_t *)(void *)((char *)a + d->field);
}

/* The value of N or DURATION option `o` into its field; -1 when it is one
 * within the option's bounds, else the usage exit code (after the usage and
 * an error line). */
static int parse_number_opt(const opt_def *o, const char *text, analyze_args *a) {
    const number_value *d = o->number;
    int64_t v;
    bool ok;
    if (d->examples) {
        ok = mst_an_jaeger_parse_duration(text, &v);
    } else {
        char *end;
        errno = 0;
        v = strtoll(text, &end, 10);
        ok = !errno && !*end && end != text;
    }
    if (!ok || v < d->min || v > d->max) {
        usage(stderr);
        if (d->examples)
            fprintf(stderr, "mstrace analyze: error: argument %s: expected a duration such as %s, got '%s'\n",
                    o->long_name, d->examples, text);
        else
            fprintf(stderr, "mstrace analyze: error: argument %s: expected an integer %lld..%lld, got '%s'\n",
                    o->long_name, (long long)d->min, (long long)d->max, text);
        return EXIT_USAGE;
    }
    *number_field(a, d) = v;
    return -1;
}

/* Splits a comma-joined list of paths into out[] (the string is modified). */
static size_t split_paths(char *s, const char **out, size_t cap) {
    size_t n = 0;
    for (char *tok = strtok(s, ","); tok && n < cap; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

static bool is_jaeger_input(const char *path) {
    return strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0;
}

/* The Jaeger window from --since / --start / --end (default: the last
 * hour); -1 when fine, else the exit code. */
static int check_jaeger_args(analyze_args *a) {
    bool any = false;
    for (size_t i = 0; i < a->n_inputs; i++) any |= is_jaeger_input(a->inputs[i]);
    for (size_t i = 0; i < a->n_before; i++) any |= is_jaeger_input(a->before[i]);
    if (!any) {
        if (a->jaeger.service || a->since_us >= 0 || a->has_start || a->has_end || a->jaeger.ca_file ||
            a->jaeger.cert_file || a->jaeger.key_file)
            return usage_error("%s: --service, --since, --start, --end and --jaeger-ca/-cert/-key need "
                               "--jaeger URL", "argument");
        return -1;
    }
    if (!a->jaeger.service || !a->jaeger.service[0])
        return usage_error("argument %s: required with --jaeger (the service name the spans were sent with)",
                           "--service");
    if (a->since_us >= 0 && a->has_start)
        return usage_error("argument %s: give either --since or --start", "--since");
    if (!a->has_end) a->jaeger.end_us = (int64_t)time(NULL) * 1000000 + 60000000; /* clock skew */
    if (!a->has_start) a->jaeger.start_us = a->jaeger.end_us - (a->since_us >= 0 ? a->since_us : 3600000000LL);
    if (a->jaeger.end_us < a->jaeger.start_us) return usage_error("argument %s: the window ends before it starts", "--end");
    return -1;
}

/* START..END: two durations (either may be empty) from the trace's start. */
static bool parse_window(const char *text, analyze_args *a) {
    const char *dots = strstr(text, "..");
    if (!dots) return false;
    char lo[64], hi[64];
    size_t nl = (size_t)(dots - text), nh = strlen(dots + 2);
    if (nl >= sizeof lo || nh >= sizeof hi || (nl == 0 && nh == 0)) return false;
    memcpy(lo, text, nl);
    lo[nl] = 0;
    memcpy(hi, dots + 2, nh + 1);
    int64_t us;
    const int64_t max_us = INT64_C(3153600000000000); /* 100 years: offsets + the epoch fit in ns */
    a->window_lo_ns = INT64_MIN;
    a->window_hi_ns = INT64_MAX;
    if (nl) {
        if (!mst_an_jaeger_parse_duration(lo, &us) || us < 0 || us > max_us) return false;
        a->window_lo_ns = us * 1000;
    }
    if (nh) {
        if (!mst_an_jaeger_parse_duration(hi, &us) || us < 0 || us > max_us) return false;
        a->window_hi_ns = us * 1000;
    }
    if (nl && nh && a->window_hi_ns <= a->window_lo_ns) return false;
    a->has_window = true;
    return true;
}

/* Returns -1 when parsed, else the exit code. */
static int parse_args(int argc, char **argv, analyze_args *a) {
    memset(a, 0, sizeof *a);
    for (size_t k = 0; k < N_OPTIONS; k++)
        if (OPTIONS[k].number) *number_field(a, OPTIONS[k].number) = OPTIONS[k].number->unset;
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
        if (o->number) {
            int rc = parse_number_opt(o, argv[++i], a);
            if (rc >= 0) return rc;
            continue;
        }
        switch (o->id) {
        case OPT_JSON: a->json_path = argv[++i]; break;
        case OPT_CSV: a->csv_dir = argv[++i]; break;
        case OPT_OUTPUT: a->html_path = argv[++i]; break;
        case OPT_QUIET: a->quiet = true; break;
        case OPT_JAEGER:
            if (a->n_inputs >= MAX_INPUTS) return usage_error("too many inputs (at most %s)", "256");
            a->inputs[a->n_inputs++] = argv[++i];
            break;
        case OPT_SERVICE: a->jaeger.service = argv[++i]; break;
        case OPT_JAEGER_CA: a->jaeger.ca_file = argv[++i]; break;
        case OPT_JAEGER_CERT: a->jaeger.cert_file = argv[++i]; break;
        case OPT_JAEGER_KEY: a->jaeger.key_file = argv[++i]; break;
        case OPT_START:
        case OPT_END: {
            int64_t *dst = o->id == OPT_START ? &a->jaeger.start_us : &a->jaeger.end_us;
            if (!mst_an_jaeger_parse_time(argv[++i], dst))
                return usage_error("expected an RFC 3339 time (2026-11-30T18:00:00Z) or Unix seconds, got '%s'",
                                   argv[i]);
            *(o->id == OPT_START ? &a->has_start : &a->has_end) = true;
            break;
        }
        case OPT_WINDOW:
            if (!parse_window(argv[++i], a))
                return usage_error("argument --window: expected START..END offsets such as 10s..70s, 2m.. or "
                                   "..90s, got '%s'", argv[i]);
            break;
        case OPT_SKIP_WARMUP: a->skip_warmup = true; break;
        case OPT_TOP:
        case OPT_JAEGER_LIMIT:
        case OPT_JAEGER_MAX_REQUESTS:
        case OPT_SINCE:
        case OPT_JAEGER_DEADLINE:
        case OPT_JAEGER_MIN_WINDOW: break; /* N and DURATION options: parsed above, by their table entry */
        case OPT_HELP: usage(stdout); return 0;
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
    if (a->has_window || a->skip_warmup)
        for (size_t i = 0; i < a->n_inputs; i++)
            if (is_jaeger_input(a->inputs[i]))
                return usage_error("argument %s: for file inputs (a Jaeger window is --start/--end)",
                                   a->has_window ? "--window" : "--skip-warmup");
    a->jaeger.limit = (unsigned)a->jaeger_limit;
    a->jaeger.max_requests = (unsigned)a->jaeger_max_requests;
    if (a->jaeger_deadline_us >= 0) a->jaeger.deadline_ms = (long)(a->jaeger_deadline_us / 1000);
    if (a->jaeger_min_window_us >= 0) a->jaeger.min_window_us = a->jaeger_min_window_us;
    return check_jaeger_args(a);
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

/* True when a progress line is due now (progress.h's pace), with the
 * seconds since the start in *t; the line then counts as printed. */
static bool progress_line_due(progress *p, double *t) {
    if (p->quiet) return false;
    *t = since(&p->t0);
    if (!mst_an_progress_due(*t, p->last_print, p->tty)) return false;
    p->last_print = *t;
    p->printed = true;
    return true;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total) {
    progress *p = ctx;
    double t;
    if (!progress_line_due(p, &t)) return;
    mst_an_progress_print(stderr, p->name, done, total, t, p->tty);
    fflush(stderr);
}

/* The same for a Jaeger query, page by page. */
static void on_pages(void *ctx, uint64_t requests, uint64_t spans, uint64_t traces, int64_t window_us) {
    progress *p = ctx;
    double t;
    if (!progress_line_due(p, &t)) return;
    mst_an_progress_print_query(stderr, p->name, requests, spans, traces, window_us, p->tty);
    fflush(stderr);
}

/* Reads every input of one side into a new, finished model; NULL after
 * printing one error line. */
static mst_an_model *load_side(const char *const *paths, size_t n, const analyze_args *a) {
    bool quiet = a->quiet;
    const mst_an_jaeger_query *jq = &a->jaeger;
    mst_an_model *m = mst_an_model_new();
    if (!m) {
        fprintf(stderr, "mstrace analyze: error: out of memory\n");
        return NULL;
    }
    if (a->has_window) mst_an_model_set_window(m, a->window_lo_ns, a->window_hi_ns, true);
    if (a->skip_warmup) mst_an_model_skip_warmup(m);
    for (size_t i = 0; i < n; i++) {
        char err[512] = "";
        mst_an_input_info info;
        progress p = {paths[i], {0, 0}, 0, false, quiet, isatty(2) == 1};
        clock_gettime(CLOCK_MONOTONIC, &p.t0);
        mst_status st;
        if (is_jaeger_input(paths[i])) {
            mst_an_jaeger_query q = *jq;
            q.base_url = paths[i];
            q.progress_pages = on_pages; /* requests and spans say more than bytes */
            q.progress_ctx = &p;
            st = mst_an_read_jaeger(&q, (uint32_t)i, mst_an_model_add_span, m, &info, err, sizeof err);
        } else {
            /* by content, whatever the extension */
            const mst_an_format *format =
                mst_an_pftrace_file_sniff(paths[i]) ? &mst_an_pftrace_format : &mst_an_chrome_format;
            st = mst_an_read_file(format, paths[i], (uint32_t)i, mst_an_model_add_span, m, on_progress, &p,
                                  &info, err, sizeof err);
        }
        if (p.printed && p.tty) fputc('\n', stderr);
        if (st != MST_OK) {
            mst_an_term_line(stderr, "mstrace analyze: error: ", err[0] ? err : "cannot read input");
            mst_an_input_info_free(&info);
            mst_an_model_free(m);
            return NULL;
        }
        if (info.spans == 0) {
            if (is_jaeger_input(paths[i]))
                fprintf(stderr, "mstrace analyze: error: %s: no spans of service %s in the window\n", paths[i],
                        jq->service);
            else if (!info.skipped || !info.n_warnings)
                fprintf(stderr, "mstrace analyze: error: %s: no spans (no %s in the trace)\n", paths[i],
                        strcmp(info.kind, "pftrace") == 0 ? "span slices" : "X events");
            else /* say what was skipped and why (the readers' warnings), on the one line */
                for (size_t k = 0; k < info.n_warnings; k++) {
                    if (!k) fprintf(stderr, "mstrace analyze: error: %s: no spans, ", paths[i]);
                    mst_an_term_puts(stderr, info.warnings[k]);
                    fputs(k + 1 < info.n_warnings ? "; " : "\n", stderr);
                }
            mst_an_input_info_free(&info);
            mst_an_model_free(m);
            return NULL;
        }
        for (size_t k = 0; k < info.n_warnings && !quiet; k++) {
            fprintf(stderr, "mstrace analyze: warning: %s: ", paths[i]);
            mst_an_term_line(stderr, "", info.warnings[k]); /* may quote the input */
        }
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

/* The analysis JSON (--json), or the HTML report made from exactly that
 * JSON (-o, report_html.h), into `path` (`flag` names the option in
 * errors). Files go through output_file.h (no link followed, 0640, renamed
 * into place when complete). */
static bool write_output(const char *path, const char *flag, const char *json, size_t len, bool html) {
    mst_an_output o;
    char err[PATH_MAX + 256] = "";
    if (mst_an_output_open(&o, path, flag, err, sizeof err) != MST_OK) {
        mst_an_term_line(stderr, "mstrace analyze: error: ", err);
        return false;
    }
    if (!html) {
        fwrite(json, 1, len, o.f);
    } else if (mst_report_html_write(o.f, json, len, err, sizeof err) != MST_OK) {
        mst_an_output_abort(&o);
        fprintf(stderr, "mstrace analyze: error: %s: ", path);
        mst_an_term_line(stderr, "", err[0] ? err : "cannot write");
        return false;
    }
    if (mst_an_output_commit(&o, err, sizeof err) != MST_OK) {
        mst_an_term_line(stderr, "mstrace analyze: error: ", err);
        return false;
    }
    return true;
}

/* "a.json,b.json": every input of a side, as the compare view names it. */
static void join_names(char *out, size_t size, const char *const *paths, size_t n) {
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && len + 1 < size; i++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", i ? "," : "", paths[i]);
}

int mst_analyze_main(int argc, char **argv) {
    analyze_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    mst_an_model *before = NULL;
    if (a.compare && !(before = load_side(a.before, a.n_before, &a))) return EXIT_USAGE;
    mst_an_model *m = load_side(a.inputs, a.n_inputs, &a);
    if (!m) {
        mst_an_model_free(before);
        return EXIT_USAGE;
    }
    rc = 0;
    mst_buf json;
    mst_buf_init(&json, 0);
    char before_label[4096] = "", after_label[4096] = "";
    if (a.compare) {
        join_names(before_label, sizeof before_label, a.before, a.n_before);
        join_names(after_label, sizeof after_label, a.inputs, a.n_inputs);
    }
    mst_an_json_options jo = {(size_t)a.top, 0, 0, a.compare ? before_label : NULL,
                              a.compare ? after_label : NULL};
    mst_an_analysis an;
    if (mst_an_analyze(m, before, &an) != MST_OK) {
        fprintf(stderr, "mstrace analyze: error: out of memory analysing\n");
        mst_an_model_free(m);
        mst_an_model_free(before);
        return EXIT_OUTPUT;
    }
    if (mst_an_report_json(&an, &jo, &json) != MST_OK) {
        fprintf(stderr, "mstrace analyze: error: out of memory writing the analysis\n");
        rc = EXIT_OUTPUT;
    }
    const char *text = (const char *)json.data;
    if (!rc && a.json_path && !write_output(a.json_path, "--json", text, json.len, false)) rc = EXIT_OUTPUT;
    if (!rc && a.html_path && !write_output(a.html_path, "-o", text, json.len, true)) rc = EXIT_OUTPUT;
    if (!rc && a.csv_dir) {
        char err[512] = "";
        if (mst_an_report_csv(m, a.csv_dir, err, sizeof err) != MST_OK) {
            fprintf(stderr, "mstrace analyze: error: %s\n", err);
            rc = EXIT_OUTPUT;
        }
    }
    bool to_stdout = a.json_path && strcmp(a.json_path, "-") == 0;
    if (!rc && !a.quiet && !to_stdout) mst_an_report_text(stdout, &an, before_label, after_label);
    mst_an_analysis_free(&an);
    mst_buf_free(&json);
    mst_an_model_free(m);
    mst_an_model_free(before);
    return rc;
}
