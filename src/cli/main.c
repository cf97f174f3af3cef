/*
 * main.c — the `mstrace` command line (docs/forwarder.md "Command line").
 *
 *   mstrace forward [--log-level L] [--perfetto-output PATH] [--format json|proto]
 *                   [--socket-name NAME]
 *                   [--relay-* tuning flags, OTLP relay mode only]
 *   mstrace analyze ... (cli/analyze_cmd.c, docs/analyze.md)
 *   mstrace trigger [--socket-name NAME] (cli/flight_cmd.c: a flight-recorder dump now)
 *   mstrace doctor ...  (execs `python3 -m mstrace.doctor ...`, see cmd_doctor)
 *   mstrace --help | --version
 *
 * Why it is this thin: parsing and dispatch only. `forward` with
 * --perfetto-output runs the Perfetto sink (forward/perfetto_sink.h);
 * without it, the OTLP relay (docs/relay.md, relay/otlp_relay.h), which plugs
 * into the same forward/daemon.h run loop as another mst_daemon_service.
 * Exit codes: 0 ok, 1 runtime error (bad output path, busy socket, missing
 * or invalid OTEL_EXPORTER_OTLP_* for the relay), 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/analyze_cmd.h"
#include "cli/cli_args.h"
#include "cli/flight_cmd.h"
#include "core/log.h"
#include "forward/daemon.h"
#include "forward/frame_server.h"
#include "relay/otlp_relay.h"
#include "forward/perfetto_sink.h"
#include "mstrace.h"
#include "mstrace_otlp.h"
#include "wire/frame.h"

#define EXIT_USAGE 2

typedef struct forward_args {
    const char *log_level;
    const char *perfetto_output;   /* NULL: the OTLP relay mode */
    const char *format;            /* --format json|proto; NULL: from the extension */
    const char *perfetto_output2;  /* a second --perfetto-output (the other format) */
    const char *socket_name;       /* NULL: the mode's standard name */
    const char *frame_buffer_limit;     /* NULL: MST_FRAME_DEFAULT_PARTIAL_BYTES */
    const char *frame_stall_timeout_ms; /* NULL: MST_FRAME_DEFAULT_STALL_MS */
    /* OTLP relay tuning (strings until validated; NULL: default) */
    const char *relay[8];
    mst_flight_cli flight;         /* --flight-recorder and its flags (cli/flight_cmd.h) */
} forward_args;

/* The --relay-* flags, in the order of forward_args.relay. */
static const char *const RELAY_FLAGS[8] = {
    "--relay-queue-bytes", "--relay-queue-items", "--relay-batch-items", "--relay-batch-bytes",
    "--relay-backoff-min-ms", "--relay-backoff-max-ms", "--relay-flush-timeout-ms",
    "--relay-warn-queued"};

static void print_main_usage(FILE *f) {
    fprintf(f,
            "usage: mstrace [--help] [--version] <command> [options]\n"
            "\n"
            "Request tracing for LLM serving engines.\n"
            "\n"
            "commands:\n"
            "  forward     receive spans from traced processes on this host: with\n"
            "              --perfetto-output, hook spans to a Perfetto trace (.pftrace) or\n"
            "              Chrome Trace JSON file; without it, relay OTLP requests (MindIE)\n"
            "              to a collector\n"
            "  analyze     explain a trace: where each request's time went, the bottleneck,\n"
            "              the long tail, run against run (docs/analyze.md)\n"
            "  trigger     ask a running `forward --flight-recorder` for a dump now\n"
            "  doctor      check this environment for tracing: the vLLM version, each hook\n"
            "              of the symbols YAML, the settings as the plugin reads them, the\n"
            "              forwarder socket, the OTLP endpoint; exit 1 when a part is missing.\n"
            "              Runs '$MSTRACE_PYTHON -m mstrace.doctor' (default python3): use the\n"
            "              Python that runs vLLM\n"
            "\n"
            "options:\n"
            "  -h, --help     show this help and exit\n"
            "  -V, --version  show the version and exit\n"
            "\n"
            "Run 'mstrace forward --help', 'mstrace analyze --help', 'mstrace trigger --help'\n"
            "or 'mstrace doctor --help' for a command's options.\n");
}

static void print_forward_usage(FILE *f) {
    fprintf(f,
            "usage: mstrace forward [-h] [--log-level {debug,info,warning,error,critical,fatal}]\n"
            "                       [--perfetto-output PATH] [--format {json,proto}]\n"
            "                       [--socket-name NAME]\n"
            "                       [--frame-buffer-limit BYTES] [--frame-stall-timeout-ms MS]\n"
            "                       [--flight-recorder SIZE|DURATION [--trigger EXPR ...]]\n"
            "\n"
            "Receive spans from traced processes over a local abstract Unix socket.\n"
            "Only processes of the same user (uid and gid) and namespaces may connect.\n"
            "\n"
            "With --perfetto-output: hook spans (socket @%s) are written to a\n"
            "Perfetto trace: native protobuf for a .pftrace path, Chrome Trace JSON for\n"
            "a .json path.\n"
            "Without it: the OTLP relay (socket @%s): each message is one binary\n"
            "ExportTraceServiceRequest (MindIE); valid ones are batched and forwarded to\n"
            "OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, as-is) using\n"
            "OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or grpc); both are required and the\n"
            "URL needs an explicit port, e.g. http://localhost:4318/v1/traces. A base URL\n"
            "gets /v1/traces appended for http/protobuf. TLS to an https:// collector:\n"
            "OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE (its CA), _CLIENT_CERTIFICATE and\n"
            "_CLIENT_KEY (mutual TLS). When the collector is down the relay queues\n"
            "(bounded), drops the newest when full and counts every loss; a configuration\n"
            "error (TLS, HTTP 4xx) fails at once with one line naming the variable.\n"
            "\n"
            "options:\n"
            "  -h, --help            show this help and exit\n"
            "  --log-level LEVEL     log level to print: debug, info (default), warning,\n"
            "                        error, critical, fatal; debug adds periodic statistics\n"
            "  --perfetto-output PATH\n"
            "                        trace file for hook spans (open it in Perfetto):\n"
            "                        .pftrace = native Perfetto protobuf, .json = Chrome\n"
            "                        Trace JSON. Must end in .pftrace or .json, contain no\n"
            "                        shell-special characters, have no symbolic link\n"
            "                        anywhere in the path, and if it exists be a regular\n"
            "                        file owned by you with no other hard link; it is\n"
            "                        truncated at start (mode 0640 at most).\n"
            "                        Works without any OTLP endpoint; with vLLM's own\n"
            "                        tracing on (--otlp-traces-endpoint) requests also\n"
            "                        carry their trace context into the hook spans.\n"
            "                        Given twice (one .json, one .pftrace): both files,\n"
            "                        the same spans, from one run.\n"
            "  --format FORMAT       json or proto: force the output format whatever the\n"
            "                        extension (default: from the extension)\n"
            "  --socket-name NAME    abstract socket name to listen on (default: see above);\n"
            "                        for testing, so several daemons can run side by side\n"
            "  --frame-buffer-limit BYTES\n"
            "                        memory for unfinished frames, all connections together;\n"
            "                        a connection whose frame would pass it is closed [%llu]\n"
            "  --frame-stall-timeout-ms MS\n"
            "                        close a connection that sends nothing for MS in the\n"
            "                        middle of a frame [%u]\n"
            "\n"
            "OTLP relay tuning (mainly for tests; defaults in brackets):\n"
            "  --relay-queue-bytes N     queue bound in bytes [%u]\n"
            "  --relay-queue-items N     queue bound in messages [%u]\n"
            "  --relay-batch-items N     messages per upstream request [%u]\n"
            "  --relay-batch-bytes N     bytes per upstream request [%u]\n"
            "  --relay-backoff-min-ms N  first wait after a failed send [%u]\n"
            "  --relay-backoff-max-ms N  longest wait between sends while down [%u]\n"
            "  --relay-flush-timeout-ms N  time to flush the queue at stop [%u]\n"
            "  --relay-warn-queued N     warn once when this many are queued; below\n"
            "                            --relay-queue-items, else a tenth of it [%u]\n",
            MST_PERFETTO_SOCKET_NAME, MST_OTLP_SOCKET_NAME,
            (unsigned long long)MST_FRAME_DEFAULT_PARTIAL_BYTES, MST_FRAME_DEFAULT_STALL_MS,
            MST_RELAY_DEFAULT_QUEUE_BYTES,
            MST_RELAY_DEFAULT_QUEUE_ITEMS, MST_RELAY_DEFAULT_BATCH_ITEMS,
            MST_RELAY_DEFAULT_BATCH_BYTES, MST_RELAY_DEFAULT_BACKOFF_MIN_MS,
            MST_RELAY_DEFAULT_BACKOFF_MAX_MS, MST_RELAY_DEFAULT_FLUSH_MS,
            MST_RELAY_DEFAULT_QUEUE_ITEMS / MST_RELAY_WARN_FRACTION);
    mst_flight_cli_usage(f);
}

static int usage_error(const char *fmt, const char *what) {
    print_forward_usage(stderr);
    fprintf(stderr, "mstrace forward: error: ");
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

/* Returns -1 to continue, else an exit code. */
static int parse_forward_args(int argc, char **argv, forward_args *fa) {
    static const char *const opts[] = {"--log-level", "--perfetto-output", "--socket-name",
                                       "--frame-buffer-limit", "--frame-stall-timeout-ms",
                                       "--format"};
    const char **slots[] = {&fa->log_level, &fa->perfetto_output, &fa->socket_name,
                            &fa->frame_buffer_limit, &fa->frame_stall_timeout_ms, &fa->format};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            print_forward_usage(stdout);
            return 0;
        }
        int matched = 0;
        /* A second --perfetto-output is kept apart: one run, both formats. */
        const char *prev_output = fa->perfetto_output;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !matched; k++) {
            matched = mst_cli_take_value(argc, argv, &i, opts[k], slots[k]);
            if (matched > 0 && k == 1 && prev_output) {
                if (fa->perfetto_output2)
                    return usage_error("argument %s: given more than twice", opts[k]);
                fa->perfetto_output2 = fa->perfetto_output;
                fa->perfetto_output = prev_output;
            }
            if (matched < 0) return usage_error("argument %s: expected one argument", opts[k]);
        }
        for (size_t k = 0; k < sizeof RELAY_FLAGS / sizeof RELAY_FLAGS[0] && !matched; k++) {
            matched = mst_cli_take_value(argc, argv, &i, RELAY_FLAGS[k], &fa->relay[k]);
            if (matched < 0)
                return usage_error("argument %s: expected one argument", RELAY_FLAGS[k]);
        }
        const char *flag = NULL;
        if (!matched && (matched = mst_flight_cli_take(argc, argv, &i, &fa->flight, &flag)) < 0)
            return usage_error("argument %s: expected one argument", flag);
        if (!matched) return usage_error("unrecognized argument: %s", argv[i]);
    }
    return -1;
}

static void warn_if_root(void) {
    if (geteuid() == 0)
        MST_WARN("Security Warning: Running with root privileges may compromise system "
                 "security. Run the program as the user who runs the serving engine.");
}

/* A positive decimal integer ≤ max; returns false otherwise. */
static bool parse_count(const char *s, uint64_t max, uint64_t *out);

/* The frame server's limits from --frame-*; returns -1 when valid, else the
 * usage exit code. */
static int frame_options(const forward_args *fa, mst_daemon_options *d) {
    uint64_t v = 0;
    if (fa->frame_buffer_limit) {
        if (!parse_count(fa->frame_buffer_limit, 1ull << 40, &v))
            return usage_error("argument %s: expected a positive integer", "--frame-buffer-limit");
        d->max_partial_bytes = v;
    }
    if (fa->frame_stall_timeout_ms) {
        if (!parse_count(fa->frame_stall_timeout_ms, 24ull * 3600 * 1000, &v))
            return usage_error("argument %s: expected a positive integer (at most a day)",
                               "--frame-stall-timeout-ms");
        d->stall_timeout_ms = (uint32_t)v;
    }
    return -1;
}

/* Runs `svc` under the daemon (mst_daemon_run) on --socket-name, or on
 * `default_socket` without it; its exit code. */
static int run_service(const forward_args *fa, const mst_daemon_options *frame_opts, const mst_daemon_service *svc,
                       const char *default_socket) {
    mst_daemon_options dopts = *frame_opts;
    dopts.socket_name = fa->socket_name ? fa->socket_name : default_socket;
    return mst_daemon_run(&dopts, svc);
}

static int run_perfetto(const forward_args *fa, const mst_daemon_options *frame_opts) {
    mst_perfetto_sink *sink = NULL;
    mst_perfetto_format fmt = MST_PERFETTO_FORMAT_AUTO;
    if (fa->format) fmt = strcmp(fa->format, "proto") == 0 ? MST_PERFETTO_FORMAT_PROTO
                                                           : MST_PERFETTO_FORMAT_JSON;
    if (mst_perfetto_sink_create(fa->perfetto_output, fmt, &sink) != MST_OK) {
        MST_ERROR("Start trace service failed: out of memory");
        return 1;
    }
    if (fa->perfetto_output2 && mst_perfetto_sink_add_output(sink, fa->perfetto_output2) != MST_OK) {
        mst_perfetto_sink_destroy(sink);
        return usage_error("argument --perfetto-output: a second output must have the other format "
                           "(one .json, one .pftrace): %s", fa->perfetto_output2);
    }
    mst_flight_options flight;
    if (mst_flight_cli_given(&fa->flight)) {
        char err[400];
        bool ok = mst_flight_cli_options(&fa->flight, &flight, err, sizeof err);
        if (ok && fa->perfetto_output2) {
            snprintf(err, sizeof err, "argument --flight-recorder: with one --perfetto-output only");
            ok = false;
        }
        if (!ok) {
            mst_perfetto_sink_destroy(sink);
            return usage_error("%s", err);
        }
        mst_perfetto_sink_set_flight(sink, &flight);
    }
    mst_output_sink collector;
    char err[512];
    if (!mst_flight_cli_start_export(&fa->flight, &flight, &collector, err, sizeof err)) {
        MST_ERROR("Start Perfetto forwarder failed: %s", err);
        mst_perfetto_sink_destroy(sink);
        return 1;
    }
    mst_daemon_service svc;
    mst_perfetto_sink_service(sink, &svc);
    int rc = run_service(fa, frame_opts, &svc, MST_PERFETTO_SOCKET_NAME);
    mst_perfetto_sink_destroy(sink);
    mst_flight_cli_stop_export(&flight, &collector);
    return rc;
}

/* A positive decimal integer ≤ max; returns false otherwise. */
static bool parse_count(const char *s, uint64_t max, uint64_t *out) {
    if (!s || !*s) return false;
    uint64_t v = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9') return false;
        if (v > (max - (uint64_t)(*c - '0')) / 10) return false;
        v = v * 10 + (uint64_t)(*c - '0');
    }
    if (v == 0) return false;
    *out = v;
    return true;
}

/* Returns -1 when the --relay-* flags are valid, else the usage exit code. */
static int relay_options(const forward_args *fa, mst_otlp_relay_options *o) {
    uint64_t v[8] = {0};
    for (size_t k = 0; k < 8; k++) {
        if (!fa->relay[k]) continue;
        uint64_t max = k == 0 ? (1ull << 40) : UINT32_MAX;
        if (!parse_count(fa->relay[k], max, &v[k]))
            return usage_error("argument %s: expected a positive integer", RELAY_FLAGS[k]);
    }
    memset(o, 0, sizeof *o);
    o->queue_max_bytes = v[0];
    o->queue_max_items = (uint32_t)v[1];
    o->batch_max_items = (uint32_t)v[2];
    o->batch_max_bytes = (uint32_t)v[3];
    o->backoff_min_ms = (uint32_t)v[4];
    o->backoff_max_ms = (uint32_t)v[5];
    o->flush_timeout_ms = (uint32_t)v[6];
    o->warn_queued_items = (uint32_t)v[7];
    return -1;
}

/* docs/relay.md: the legacy OTLP relay on \0OTLP_SOCKET, another
 * mst_daemon_service run by mst_daemon_run(). The upstream settings are
 * checked before the socket is bound: a bad environment is exit 1. */
static int run_otlp_relay(const forward_args *fa, const mst_otlp_relay_options *ro,
                          const mst_daemon_options *frame_opts) {
    mst_otlp_config cfg;
    char err[512] = "";
    mst_status st = mst_otlp_relay_config_from_env(&cfg, err, sizeof err);
    if (st != MST_OK) {
        MST_ERROR("Start trace service failed: %s", err[0] ? err : mst_strerror(st));
        return 1;
    }
    mst_otlp_relay *relay = NULL;
    if ((st = mst_otlp_relay_create(&cfg, ro, &relay)) != MST_OK) {
        MST_ERROR("Start trace service failed: cannot create the OTLP relay: %s", mst_strerror(st));
        return 1;
    }
    mst_daemon_service svc;
    mst_otlp_relay_service(relay, &svc);
    int rc = run_service(fa, frame_opts, &svc, MST_OTLP_SOCKET_NAME);
    mst_otlp_relay_destroy(relay);
    return rc;
}

static int cmd_forward(int argc, char **argv) {
    forward_args fa = {0};
    int rc = parse_forward_args(argc, argv, &fa);
    if (rc >= 0) return rc;
    mst_log_level level = MST_LOG_INFO;
    if (fa.log_level && mst_log_level_parse(fa.log_level, &level) != MST_OK)
        return usage_error("argument --log-level: invalid choice: '%s' (choose from debug, "
                           "info, warning, error, critical, fatal)", fa.log_level);
    mst_log_set_level(level);
    mst_otlp_relay_options ro;
    if ((rc = relay_options(&fa, &ro)) >= 0) return rc;
    mst_daemon_options frame_opts = {0};
    if ((rc = frame_options(&fa, &frame_opts)) >= 0) return rc;
    if (fa.format && strcmp(fa.format, "json") != 0 && strcmp(fa.format, "proto") != 0)
        return usage_error("argument --format: invalid choice: '%s' (choose from json, proto)",
                           fa.format);
    if (fa.format && !fa.perfetto_output)
        return usage_error("argument %s: only with --perfetto-output", "--format");
    if (fa.format && fa.perfetto_output2)
        return usage_error("argument %s: not with two --perfetto-output (each takes its extension's "
                           "format)", "--format");
    if (fa.perfetto_output) {
        for (size_t k = 0; k < sizeof RELAY_FLAGS / sizeof RELAY_FLAGS[0]; k++)
            if (fa.relay[k])
                return usage_error("argument %s: only for the OTLP relay (without "
                                   "--perfetto-output)", RELAY_FLAGS[k]);
    }
    if (mst_flight_cli_given(&fa.flight) && !fa.perfetto_output)
        return usage_error("argument %s: only with --perfetto-output (the dumps' name and format)",
                           "--flight-recorder");
    warn_if_root();
    if (fa.perfetto_output) return run_perfetto(&fa, &frame_opts);
    return run_otlp_relay(&fa, &ro, &frame_opts);
}

/* `mstrace doctor ARGS`: the checks need the Python that serves vLLM (its
 * imports, its plugin entry point, the extension it loads), so the binary
 * only hands over: exec `$MSTRACE_PYTHON -m mstrace.doctor ARGS` (default
 * `python3` from PATH). Returns only when that cannot be run: 127. */
static int cmd_doctor(int argc, char **argv) {
    const char *py = getenv("MSTRACE_PYTHON");
    if (!py || !*py) py = "python3";
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) {
        fprintf(stderr, "mstrace doctor: out of memory\n");
        return 1;
    }
    args[0] = (char *)py;
    args[1] = "-m";
    args[2] = "mstrace.doctor";
    for (int i = 0; i < argc; i++) args[3 + i] = argv[i];
    fflush(NULL);
    execvp(py, args);
    fprintf(stderr, "mstrace doctor: cannot run %s: %s (set MSTRACE_PYTHON to the Python that runs "
            "vLLM, or run 'python -m mstrace.doctor' with it)\n", py, strerror(errno));
    free(args);
    return 127;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_main_usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        print_main_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("mstrace %s\n", mst_version());
        return 0;
    }
    if (strcmp(cmd, "forward") == 0) return cmd_forward(argc - 2, argv + 2);
    if (strcmp(cmd, "analyze") == 0) return mst_analyze_main(argc - 2, argv + 2);
    if (strcmp(cmd, "trigger") == 0) return mst_trigger_main(argc - 2, argv + 2);
    if (strcmp(cmd, "doctor") == 0) return cmd_doctor(argc - 2, argv + 2);
    print_main_usage(stderr);
    fprintf(stderr, "mstrace: error: unknown command '%s'\n", cmd);
    return EXIT_USAGE;
}
