/*
 * main.c — the `mstrace` command line (SPEC §1).
 *
 *   mstrace forward [--log-level L] [--perfetto-output PATH] [--socket-name NAME]
 *   mstrace --help | --version
 *
 * Why it is this thin: parsing and dispatch only. `forward` with
 * --perfetto-output runs the Perfetto sink (forward/perfetto_sink.h);
 * without it, the OTLP relay (SPEC §6), which plugs into the same
 * forward/daemon.h run loop as another mst_daemon_service.
 * Exit codes: 0 ok, 1 runtime error (bad output path, busy socket), 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "forward/daemon.h"
#include "forward/perfetto_sink.h"
#include "mstrace.h"
#include "wire/perfetto_packet.h"

#define EXIT_USAGE 2

typedef struct forward_args {
    const char *log_level;
    const char *perfetto_output;   /* NULL: the OTLP relay mode */
    const char *socket_name;       /* NULL: the mode's standard name */
} forward_args;

static void print_main_usage(FILE *f) {
    fprintf(f,
            "usage: mstrace [--help] [--version] <command> [options]\n"
            "\n"
            "Request tracing for LLM serving engines.\n"
            "\n"
            "commands:\n"
            "  forward     receive hook spans from traced processes on this host and write\n"
            "              them as a Perfetto/Chrome Trace JSON file (--perfetto-output)\n"
            "\n"
            "options:\n"
            "  -h, --help     show this help and exit\n"
            "  -V, --version  show the version and exit\n"
            "\n"
            "Run 'mstrace forward --help' for the forward options.\n");
}

static void print_forward_usage(FILE *f) {
    fprintf(f,
            "usage: mstrace forward [-h] [--log-level {debug,info,warning,error,critical,fatal}]\n"
            "                       [--perfetto-output PATH] [--socket-name NAME]\n"
            "\n"
            "Receive spans from traced processes over a local abstract Unix socket.\n"
            "Only processes of the same user (uid and gid) and namespaces may connect.\n"
            "\n"
            "options:\n"
            "  -h, --help            show this help and exit\n"
            "  --log-level LEVEL     log level to print: debug, info (default), warning,\n"
            "                        error, critical, fatal; debug adds periodic statistics\n"
            "  --perfetto-output PATH\n"
            "                        Chrome Trace JSON file for hook spans (open it in\n"
            "                        Perfetto). Must end in .json, contain no shell-special\n"
            "                        characters, not be a symlink, and if it exists be a\n"
            "                        regular file owned by you; it is truncated at start.\n"
            "                        vLLM OTLP tracing must also be enabled.\n"
            "  --socket-name NAME    abstract socket name to listen on (default %s);\n"
            "                        for testing, so several daemons can run side by side\n",
            MST_PERFETTO_SOCKET_NAME);
}

/* Matches "--opt VALUE" or "--opt=VALUE"; advances *i past a separate value.
 * Returns 1 matched, 0 not this option, -1 value missing. */
static int take_value(int argc, char **argv, int *i, const char *opt, const char **value) {
    size_t n = strlen(opt);
    const char *a = argv[*i];
    if (strncmp(a, opt, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
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
    static const char *const opts[] = {"--log-level", "--perfetto-output", "--socket-name"};
    const char **slots[] = {&fa->log_level, &fa->perfetto_output, &fa->socket_name};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            print_forward_usage(stdout);
            return 0;
        }
        int matched = 0;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !matched; k++) {
            matched = take_value(argc, argv, &i, opts[k], slots[k]);
            if (matched < 0) return usage_error("argument %s: expected one argument", opts[k]);
        }
        if (!matched) return usage_error("unrecognized argument: %s", argv[i]);
    }
    return -1;
}

static void warn_if_root(void) {
    if (geteuid() == 0)
        MST_WARN("Security Warning: Running with root privileges may compromise system "
                 "security. Run the program as the user who runs the serving engine.");
}

static int run_perfetto(const forward_args *fa) {
    mst_perfetto_sink *sink = NULL;
    if (mst_perfetto_sink_create(fa->perfetto_output, &sink) != MST_OK) {
        MST_ERROR("Start trace service failed: out of memory");
        return 1;
    }
    mst_daemon_service svc;
    mst_perfetto_sink_service(sink, &svc);
    mst_daemon_options dopts = {
        .socket_name = fa->socket_name ? fa->socket_name : MST_PERFETTO_SOCKET_NAME};
    int rc = mst_daemon_run(&dopts, &svc);
    mst_perfetto_sink_destroy(sink);
    return rc;
}

/* SPEC §6: the legacy OTLP relay on \0OTLP_SOCKET. Not built yet; when it
 * lands it becomes another mst_daemon_service run by mst_daemon_run(). */
static int run_otlp_relay(const forward_args *fa) {
    (void)fa;
    MST_ERROR("Start trace service failed: the OTLP relay mode (mstrace forward without "
              "--perfetto-output) is not built yet in this version; pass "
              "--perfetto-output PATH.json to write hook spans for Perfetto");
    return 1;
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
    warn_if_root();
    if (fa.perfetto_output) return run_perfetto(&fa);
    return run_otlp_relay(&fa);
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
    print_main_usage(stderr);
    fprintf(stderr, "mstrace: error: unknown command '%s'\n", cmd);
    return EXIT_USAGE;
}
