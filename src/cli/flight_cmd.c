/*
 * flight_cmd.c — `mstrace forward --flight-recorder ...` flags and the
 * `mstrace trigger` command (flight_cmd.h).
 *
 * How `mstrace trigger` reaches the daemon: it connects to the daemon's
 * abstract socket, reads the listening process's pid and uid with
 * SO_PEERCRED (the kernel's, not a claim of the peer's), checks the uid is
 * ours and sends it SIGUSR2, which the daemon reads through its signalfd.
 * No protocol of its own: nothing the daemon parses changes.
 */
#include "cli/flight_cmd.h"

#include "cli/cli_args.h"

#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "relay/flight_otlp.h"
#include "forward/flight_ring.h"
#include "wire/frame.h"

int mst_flight_cli_take(int argc, char **argv, int *i, mst_flight_cli *fc, const char **flag) {
    if (strcmp(argv[*i], "--flight-otlp") == 0) { /* a switch, no value */
        *flag = "--flight-otlp";
        fc->otlp = true;
        return 1;
    }
    static const char *const opts[] = {"--flight-recorder", "--max-dumps-per-minute",
                                       "--dump-disk-budget", "--dump-margin",
                                       "--flight-otlp-baseline", "--trigger"};
    const char *value = NULL;
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        int m = mst_cli_take_value(argc, argv, i, opts[k], &value);
        if (m == 0) continue;
        *flag = opts[k];
        if (m < 0) return -1;
        switch (k) {
        case 0: fc->recorder = value; break;
        case 1: fc->max_dumps_per_min = value; break;
        case 2: fc->disk_budget = value; break;
        case 3: fc->margin = value; break;
        case 4: fc->baseline = value; break;
        default:
            /* One more than the limit is kept so the limit can be reported. */
            if (fc->n_triggers <= MST_FLIGHT_MAX_TRIGGERS) fc->triggers[fc->n_triggers++] = value;
            break;
        }
        return 1;
    }
    return 0;
}

bool mst_flight_cli_given(const mst_flight_cli *fc) {
    return fc->recorder || fc->n_triggers || fc->max_dumps_per_min || fc->disk_budget || fc->margin ||
           fc->otlp || fc->baseline;
}

bool mst_flight_cli_start_export(const mst_flight_cli *fc, mst_flight_options *opts,
                                 mst_output_sink *out, char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    if (!fc->otlp) return true;
    char why[400] = "";
    if (mst_flight_otlp_open(out, why, sizeof why) != MST_OK) {
        snprintf(err, err_size, "--flight-otlp: %s", why[0] ? why : "cannot start the OTLP sender");
        return false;
    }
    opts->export_to = out;
    return true;
}

void mst_flight_cli_stop_export(mst_flight_options *opts, mst_output_sink *out) {
    if (!out->ops) return;
    out->ops->close(out->self, NULL);
    opts->export_to = NULL;
    memset(out, 0, sizeof *out);
}

static bool bad(char *err, size_t err_size, const char *flag, const char *why) {
    snprintf(err, err_size, "argument %s: %s", flag, why);
    return false;
}

bool mst_flight_cli_options(const mst_flight_cli *fc, mst_flight_options *out, char *err,
                            size_t err_size) {
    memset(out, 0, sizeof *out);
    char why[256];
    if (!fc->recorder)
        return bad(err, err_size,
                   fc->n_triggers          ? "--trigger"
                   : fc->max_dumps_per_min ? "--max-dumps-per-minute"
                   : fc->disk_budget       ? "--dump-disk-budget"
                   : fc->margin            ? "--dump-margin"
                   : fc->baseline          ? "--flight-otlp-baseline"
                                           : "--flight-otlp",
                   "only with --flight-recorder");
    if (mst_flight_parse_capacity(fc->recorder, &out->ring_bytes, &out->ring_duration_ns, why,
                                  sizeof why) != MST_OK)
        return bad(err, err_size, "--flight-recorder", why);
    if (out->ring_bytes && out->ring_bytes < MST_FLIGHT_RING_MIN_BYTES)
        return bad(err, err_size, "--flight-recorder", "the ring must hold at least 1MiB");
    if (out->ring_bytes > (1ull << 40))
        return bad(err, err_size, "--flight-recorder", "the ring may hold at most 1TiB");
    if (fc->n_triggers > MST_FLIGHT_MAX_TRIGGERS) {
        snprintf(why, sizeof why, "at most %d triggers", MST_FLIGHT_MAX_TRIGGERS);
        return bad(err, err_size, "--trigger", why);
    }
    for (size_t k = 0; k < fc->n_triggers; k++)
        if (mst_flight_parse_trigger(fc->triggers[k], &out->triggers[k], why, sizeof why) != MST_OK)
            return bad(err, err_size, "--trigger", why);
    out->n_triggers = fc->n_triggers;
    if (fc->max_dumps_per_min) {
        char *end;
        errno = 0;
        unsigned long k = strtoul(fc->max_dumps_per_min, &end, 10);
        if (fc->max_dumps_per_min[0] < '1' || fc->max_dumps_per_min[0] > '9' || *end || errno ||
            k > 1000)
            return bad(err, err_size, "--max-dumps-per-minute", "expected an integer 1..1000");
        out->max_dumps_per_min = (uint32_t)k;
    }
    if (fc->disk_budget &&
        mst_flight_parse_size(fc->disk_budget, strlen(fc->disk_budget), &out->disk_budget, why,
                              sizeof why) != MST_OK)
        return bad(err, err_size, "--dump-disk-budget", why);
    if (fc->baseline) {
        char *end;
        errno = 0;
        unsigned long n = strtoul(fc->baseline, &end, 10);
        if (fc->baseline[0] < '1' || fc->baseline[0] > '9' || *end || errno || n > 1000000)
            return bad(err, err_size, "--flight-otlp-baseline", "expected an integer 1..1000000");
        if (!fc->otlp) return bad(err, err_size, "--flight-otlp-baseline", "only with --flight-otlp");
        out->baseline_n = (uint32_t)n;
    }
    if (fc->margin &&
        mst_flight_parse_duration(fc->margin, strlen(fc->margin), &out->margin_ns, why,
                                  sizeof why) != MST_OK)
        return bad(err, err_size, "--dump-margin", why);
    return true;
}

void mst_flight_cli_usage(FILE *f) {
    fprintf(f,
            "\n"
            "Flight recorder (with --perfetto-output; nothing is written until a trigger):\n"
            "  --flight-recorder SIZE|DURATION[,SIZE|DURATION]\n"
            "                        keep the last SIZE (e.g. 256MiB) and/or DURATION (e.g.\n"
            "                        120s) of spans and counters in memory (size default\n"
            "                        256MiB); dumps are written next to PATH as\n"
            "                        NAME.<UTC time>-<n>.EXT\n"
            "  --trigger EXPR        when to dump (repeatable, any may fire): error;\n"
            "                        METRIC>DURATION (e2e>2s, ttft>500ms, tpot>50ms,\n"
            "                        queue>1s); METRIC>pQ[@WINDOW] above the running\n"
            "                        percentile of the last WINDOW (default 5m): e2e>p99\n"
            "  --max-dumps-per-minute K\n"
            "                        at most K dumps in any minute; more triggers are\n"
            "                        suppressed and counted [%u]\n"
            "  --dump-disk-budget SIZE\n"
            "                        the dumps kept next to PATH; the oldest are deleted\n"
            "                        to stay under it [1GiB]\n"
            "  --dump-margin DURATION\n"
            "                        also every span within +-DURATION of the request\n"
            "  --flight-otlp         also send each triggered dump's spans (each span once)\n"
            "                        to OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, as the OTLP\n"
            "                        relay does (http/protobuf or grpc, bounded queue)\n"
            "  --flight-otlp-baseline N\n"
            "                        with --flight-otlp: also 1 in N ordinary requests\n"
            "                        (by request id) with the steps that carried them\n"
            "  `mstrace trigger [--socket-name NAME]` (or SIGUSR2) dumps the whole ring.\n",
            MST_FLIGHT_DEFAULT_DUMPS_PER_MIN);
}

static void trigger_usage(FILE *f) {
    fprintf(f,
            "usage: mstrace trigger [-h] [--socket-name NAME]\n"
            "\n"
            "Ask the flight recorder of a running `mstrace forward --flight-recorder` on\n"
            "this host for a dump of its whole ring now (it sends the daemon SIGUSR2).\n"
            "\n"
            "options:\n"
            "  -h, --help            show this help and exit\n"
            "  --socket-name NAME    the daemon's abstract socket name [%s]\n",
            MST_PERFETTO_SOCKET_NAME);
}

int mst_trigger_main(int argc, char **argv) {
    const char *name = MST_PERFETTO_SOCKET_NAME;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            trigger_usage(stdout);
            return 0;
        }
        int m = mst_cli_take_value(argc, argv, &i, "--socket-name", &name);
        if (m == 1 && name[0] && strlen(name) < sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
            continue;
        trigger_usage(stderr);
        fprintf(stderr, "mstrace trigger: error: %s\n",
                m < 0 ? "argument --socket-name: expected one argument"
                : m > 0 ? "argument --socket-name: expected a name of 1..106 bytes"
                        : "unrecognized argument");
        return 2;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(addr.sun_path + 1, name, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, len) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
        fprintf(stderr, "mstrace trigger: no mstrace forward listens on @%s: %s\n", name,
                strerror(errno));
        if (fd >= 0) close(fd);
        return 1;
    }
    close(fd);
    if (cred.uid != geteuid()) {
        fprintf(stderr, "mstrace trigger: @%s belongs to uid %u, not to you (uid %u)\n", name,
                (unsigned)cred.uid, (unsigned)geteuid());
        return 1;
    }
    if (kill(cred.pid, SIGUSR2) != 0) {
        fprintf(stderr, "mstrace trigger: cannot signal mstrace forward (pid %d): %s\n",
                (int)cred.pid, strerror(errno));
        return 1;
    }
    printf("asked mstrace forward (pid %d, @%s) for a dump of its flight recorder\n",
           (int)cred.pid, name);
    return 0;
}
