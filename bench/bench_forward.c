/*
 * bench_forward.c — throughput of `mstrace forward --perfetto-output`.
 *
 * Starts the real daemon as a child process (unique socket name, output and
 * log under /tmp), then 8 client threads send realistic hook span packets
 * (~10 attributes, 1-2 links, one persistent connection each, many frames per
 * write) until N spans are sent; SIGTERM makes the daemon drain and close.
 * Reports spans/s (from the first send to the daemon's clean exit, so every
 * span counted is in the file), input and output MB/s, and the daemon's peak
 * RSS (VmHWM just before the stop, and ru_maxrss from wait4). The daemon's
 * own final stats line is checked: written must equal N.
 *
 * Why CPU time is reported too: on a small box the 8 client threads compete
 * with the daemon for the same cores, and other work on the machine moves
 * the wall-clock figure. The daemon's user/sys CPU (wait4) and the clients'
 * CPU (RUSAGE_THREAD per client) per span tell where the time goes and are
 * much less sensitive to machine load; the load average is printed with the
 * summary so a figure can be judged. The daemon's threads are reported
 * apart: the main (epoll/decode) thread, the formatting thread
 * (mstrace-format) and the output writer (mstrace-writer); the busier of
 * the first two bounds the throughput.
 *
 * Output formats (-f): json (Chrome Trace JSON, .json), proto (native
 * Perfetto, .pftrace) or both (default): then each round runs both, in
 * alternating order (json proto, proto json, ...) so machine load drifts
 * hit both alike, and a RATIO line compares their medians (file size,
 * spans/s, daemon CPU per span, peak RSS).
 *
 * With -F SIZE the daemon is a flight recorder (--flight-recorder SIZE):
 * spans go into its ring and no file is written; the peak RSS then shows
 * the ring plus the daemon's fixed overhead under the offered load.
 *
 * With --ids N every span is a scheduler step record carrying N request ids
 * instead (bench_packet.h "step packets"): each client is one engine with a
 * rolling batch of N requests, as a real engine has — most of a step's
 * requests were in the previous step, a few finish and a few join — and each
 * step links to the client's previous step. Its SUMMARY line is the same.
 * Each client reads the daemon's capability line first, as the forwarder
 * client does, and then sends a step's request.ids as a change to its
 * previous list when the traced process's own sender (wire/ids_sender.h)
 * would (docs/forwarder.md "Request id lists as changes"); a daemon that
 * sends no such line (an older one) gets whole lists, as does every daemon
 * with --whole-lists.
 *
 * usage: bench_forward [-n SPANS] [-t THREADS] [-r RUNS] [-f json|proto|both]
 *                      [-b PATH/TO/mstrace] [-F RING_SIZE] [-o DIR] [--ids N]
 *        (default 2000000 spans, 8 threads, 3 runs, both formats, mstrace next
 *        to this binary or $MSTRACE_BIN, the bench packet)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>

#include "bench_packet.h"
#include "wire/perfetto_packet.h"

#define BATCH 256   /* frames per write() on the client side */
#define STEP_WRITE_BYTES (512u << 10) /* --ids: a write() once this many bytes are framed */

/* --ids N: step packets of N request ids (0: the bench packet). */
static int g_ids;
/* --whole-lists: never send request.ids as changes. */
static bool g_whole_lists;

typedef struct client {
    pthread_t th;
    int index;
    const char *sock_name;
    uint64_t spans;
    uint64_t bytes;
    double cpu_s;     /* this client thread's user + sys CPU */
    int failed;
    uint64_t changes; /* --ids: steps whose request.ids went as a change */
} client;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_abstract(const char *name) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(a.sun_path + 1, name, n);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

static void put_hex16(char *p, uint64_t v) {
    static const char hx[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        p[i] = hx[v & 15];
        v >>= 4;
    }
}

static void put_frame_len(char *p, size_t n) {
    p[0] = (char)((uint32_t)n >> 24);
    p[1] = (char)((uint32_t)n >> 16);
    p[2] = (char)((uint32_t)n >> 8);
    p[3] = (char)(uint32_t)n;
}

/* One packet template: offsets of the fields patched per send. */
typedef struct tmpl {
    char *buf;        /* 4-byte length + payload */
    size_t len;
    size_t off_span, off_link1, off_link2; /* off_link2 = 0: one link only */
} tmpl;

static void build_packet(tmpl *t, int thread, int slot) {
    char json[2048];
    int n = bench_packet_format(json, sizeof json, thread, slot);
    t->len = 4 + (size_t)n;
    t->buf = malloc(t->len);
    put_frame_len(t->buf, (size_t)n);
    memcpy(t->buf + 4, json, (size_t)n);
    bench_packet_placeholders(t->buf, t->buf + 4, &t->off_span, &t->off_link1, &t->off_link2);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Whether the daemon's capability line (read as the forwarder client
 * does, waiting at most 5 s for it) says it takes request.ids changes. */
/* Whether this run's daemon announces request id changes: asked once on a
 * connection of its own before the clock starts, so a daemon that
 * announces nothing (one built before the changes) costs the run no wait. */
static bool g_daemon_takes_changes;

static bool daemon_takes_changes(int fd) {
    char line[64];
    size_t n = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (n < sizeof line && poll(&p, 1, 5000) == 1) {
        ssize_t r = recv(fd, line + n, 1, 0);
        if (r <= 0) return false;
        if (line[n++] == '\n') break;
    }
    return n == MST_PERFETTO_HELLO_LEN && memcmp(line, MST_PERFETTO_HELLO, n) == 0;
}

/* --ids: this client is one engine; each span is its next step. */
static void send_steps(client *c, int fd) {
    bench_batch b;
    bench_batch_init(&b, c->index, g_ids);
    mst_ids_sender *sender =
        !g_whole_lists && g_daemon_takes_changes && daemon_takes_changes(fd) ? mst_ids_sender_new() : NULL;
    mst_str *items = calloc((size_t)g_ids, sizeof *items);

    size_t cap = STEP_WRITE_BYTES + 4 + bench_step_cap(g_ids);
    char *buf = malloc(cap);
    uint64_t base = (uint64_t)(c->index + 1) << 40;
    size_t len = 0;
    for (uint64_t seq = 0; seq < c->spans; seq++) {
        uint64_t id = base + seq + 1;
        mst_ids_send how;
        if (sender) bench_step_ids_decide(sender, &b, items, &how);
        c->changes += sender && how.in_stream && how.change;
        size_t n = bench_step_format(buf + len + 4, &b, id, seq ? id - 1 : 0, sender ? &how : NULL);
        put_frame_len(buf + len, n);
        len += 4 + n;
        bench_batch_advance(&b);
        if (len >= STEP_WRITE_BYTES || seq + 1 == c->spans) {
            if (write_all(fd, buf, len) != 0) {
                c->failed = 1;
                break;
            }
            c->bytes += len;
            len = 0;
        }
    }
    free(buf);
    free(items);
    mst_ids_sender_free(sender);
    bench_batch_free(&b);
}

static void *client_main(void *arg) {
    client *c = arg;
    int fd = connect_abstract(c->sock_name);
    if (fd < 0) {
        c->failed = 1;
        return NULL;
    }
    if (g_ids > 0) {
        send_steps(c, fd);
        close(fd);
        struct rusage ru;
        if (getrusage(RUSAGE_THREAD, &ru) == 0) c->cpu_s = tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
        return NULL;
    }
    tmpl t[BATCH];
    size_t batch_len = 0;
    for (int i = 0; i < BATCH; i++) {
        build_packet(&t[i], c->index, i);
        batch_len += t[i].len;
    }
    char *batch = malloc(batch_len);
    size_t *off = malloc(sizeof(size_t) * BATCH);
    for (int i = 0, o = 0; i < BATCH; i++) {
        memcpy(batch + o, t[i].buf, t[i].len);
        off[i] = (size_t)o;
        o += (int)t[i].len;
    }
    uint64_t base = (uint64_t)(c->index + 1) << 40;
    uint64_t seq = 0;
    while (seq < c->spans) {
        uint64_t n = c->spans - seq < BATCH ? c->spans - seq : BATCH;
        size_t len = 0;
        for (uint64_t i = 0; i < n; i++) {
            char *p = batch + off[i];
            uint64_t id = base + seq + i + 1;
            put_hex16(p + t[i].off_span, id);
            put_hex16(p + t[i].off_link1, id - 1);    /* the previous span: already seen */
            if (t[i].off_link2) put_hex16(p + t[i].off_link2, id + 1); /* a later one */
            len += t[i].len;
        }
        if (write_all(fd, batch, len) != 0) {
            c->failed = 1;
            break;
        }
        c->bytes += len;
        seq += n;
    }
    close(fd);
    free(batch);
    free(off);
    for (int i = 0; i < BATCH; i++) free(t[i].buf);
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) c->cpu_s = tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
    return NULL;
}

static long vm_hwm_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* CPU seconds (user + sys) of the daemon's main (epoll) thread, its
 * formatting thread and all its other threads (the output writer), from
 * /proc/PID/task/TID/stat. Why: the busier of the main and the formatting
 * thread bounds the throughput. */
static void thread_cpu(pid_t pid, double *main_s, double *format_s, double *other_s) {
    *main_s = *format_s = *other_s = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return;
    double tick = (double)sysconf(_SC_CLK_TCK);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char sp[320], line[1024];
        snprintf(sp, sizeof sp, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
        FILE *f = fopen(sp, "r");
        if (!f) continue;
        if (fgets(line, sizeof line, f)) {
            char *p = strrchr(line, ')'); /* the name may hold spaces */
            unsigned long long ut = 0, st = 0;
            if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                            &ut, &st) == 2) {
                double cpu = (double)(ut + st) / tick;
                if (atoi(e->d_name) == (int)pid) *main_s += cpu;
                else if (strstr(line, "(mstrace-format)")) *format_s += cpu;
                else *other_s += cpu;
            }
        }
        fclose(f);
    }
    closedir(d);
}

/* The last "written=N" in the daemon's log (its final stats line). */
static long long final_written(const char *log_path) {
    FILE *f = fopen(log_path, "r");
    if (!f) return -1;
    char line[4096];
    long long w = -1;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "stats (final)");
        if (p && (p = strstr(p, " written="))) w = atoll(p + 9);
    }
    fclose(f);
    return w;
}

typedef struct result {
    double spans_per_s, in_mb_s, out_mb_s, out_bytes;
    double daemon_user_s, daemon_sys_s, client_cpu_s;
    double main_thread_s, format_thread_s, other_threads_s; /* sampled when the clients are done */
    long hwm_kb, maxrss_kb;
} result;

/* -F SIZE: the daemon runs as a flight recorder of SIZE (nothing written). */
static const char *g_flight;
/* -o DIR: where the output file (and the daemon's log) go. */
static const char *g_dir = "/tmp";

static int run_once(const char *bin, const char *ext, uint64_t total, int threads,
                    result *res) {
    char sock[64], out[PATH_MAX], log_path[PATH_MAX];
    snprintf(sock, sizeof sock, "mstrace-bench-%d-%ld", (int)getpid(), (long)random());
    snprintf(out, sizeof out, "%s/%s.%s", g_dir, sock, ext);
    snprintf(log_path, sizeof log_path, "%s/%s.log", g_dir, sock);
    pid_t pid = fork();
    if (pid == 0) {
        int lfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (lfd >= 0) dup2(lfd, 2);
        if (g_flight)
            execl(bin, bin, "forward", "--log-level", "debug", "--perfetto-output", out,
                  "--socket-name", sock, "--flight-recorder", g_flight, (char *)NULL);
        else
            execl(bin, bin, "forward", "--log-level", "debug", "--perfetto-output", out,
                  "--socket-name", sock, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 3000; i++) { /* wait up to 30 s for the socket */
        int fd = connect_abstract(sock);
        if (fd >= 0) {
            g_daemon_takes_changes = g_ids > 0 && !g_whole_lists && daemon_takes_changes(fd);
            close(fd);
            break;
        }
        usleep(10000);
    }
    client *cs = calloc((size_t)threads, sizeof *cs);
    double t0 = now_s();
    for (int i = 0; i < threads; i++) {
        cs[i].index = i;
        cs[i].sock_name = sock;
        cs[i].spans = total / (uint64_t)threads + ((uint64_t)i < total % (uint64_t)threads);
        pthread_create(&cs[i].th, NULL, client_main, &cs[i]);
    }
    uint64_t in_bytes = 0;
    int failed = 0;
    uint64_t changes = 0;
    res->client_cpu_s = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(cs[i].th, NULL);
        in_bytes += cs[i].bytes;
        changes += cs[i].changes;
        res->client_cpu_s += cs[i].cpu_s;
        failed |= cs[i].failed;
    }
    res->hwm_kb = vm_hwm_kb(pid);
    thread_cpu(pid, &res->main_thread_s, &res->format_thread_s, &res->other_threads_s);
    kill(pid, SIGTERM);
    int status = 0;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    double dt = now_s() - t0;
    res->maxrss_kb = ru.ru_maxrss;
    res->daemon_user_s = tv_s(ru.ru_utime);
    res->daemon_sys_s = tv_s(ru.ru_stime);
    struct stat st;
    double out_bytes = stat(out, &st) == 0 ? (double)st.st_size : 0;
    res->out_bytes = out_bytes;
    long long written = final_written(log_path);
    res->spans_per_s = (double)total / dt;
    res->in_mb_s = (double)in_bytes / dt / 1e6;
    res->out_mb_s = out_bytes / dt / 1e6;
    printf("  run (%s): %llu spans in %.3f s: %.0f spans/s, in %.1f MB/s, out %.1f MB/s "
           "(file %.1f MB, %.1f bytes/span), daemon VmHWM %.1f MB (maxrss %.1f MB), daemon CPU user %.2f s sys %.2f s "
           "(%.2f us/span; main thread %.2f, format %.2f, writer %.2f), clients CPU %.2f s (%.2f us/span), "
           "exit %d, written %lld; sent %.0f bytes/span, request.ids as a change in %.1f %% of spans\n",
           ext, (unsigned long long)total, dt, res->spans_per_s, res->in_mb_s, res->out_mb_s,
           out_bytes / 1e6, out_bytes / (double)total, res->hwm_kb / 1024.0, res->maxrss_kb / 1024.0, res->daemon_user_s,
           res->daemon_sys_s, (res->daemon_user_s + res->daemon_sys_s) / (double)total * 1e6,
           res->main_thread_s / (double)total * 1e6, res->format_thread_s / (double)total * 1e6,
           res->other_threads_s / (double)total * 1e6,
           res->client_cpu_s, res->client_cpu_s / (double)total * 1e6,
           WIFEXITED(status) ? WEXITSTATUS(status) : -1, written, (double)in_bytes / (double)total,
           100.0 * (double)changes / (double)total);
    free(cs);
    unlink(out);
    int ok = !failed && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
             written == (long long)total;
    if (ok) unlink(log_path);
    else fprintf(stderr, "bench_forward: run failed (clients %s, see %s)\n",
                 failed ? "failed" : "ok", log_path);
    return ok ? 0 : -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Medians of one format's runs. */
typedef struct mode_summary {
    double sps, in, out, bytes, dcpu, ccpu, mcpu, fcpu;
    double sps_min, sps_max;
    long hwm_kb;
} mode_summary;

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

static void summarize(const result *rs, int n, uint64_t total, mode_summary *m) {
    double sps[99], in[99], out[99], bytes[99], dcpu[99], ccpu[99], mcpu[99], fcpu[99];
    m->hwm_kb = 0;
    for (int r = 0; r < n; r++) {
        sps[r] = rs[r].spans_per_s;
        in[r] = rs[r].in_mb_s;
        out[r] = rs[r].out_mb_s;
        bytes[r] = rs[r].out_bytes;
        dcpu[r] = (rs[r].daemon_user_s + rs[r].daemon_sys_s) / (double)total * 1e6;
        ccpu[r] = rs[r].client_cpu_s / (double)total * 1e6;
        mcpu[r] = rs[r].main_thread_s / (double)total * 1e6;
        fcpu[r] = rs[r].format_thread_s / (double)total * 1e6;
        if (rs[r].hwm_kb > m->hwm_kb) m->hwm_kb = rs[r].hwm_kb;
        if (rs[r].maxrss_kb > m->hwm_kb) m->hwm_kb = rs[r].maxrss_kb;
    }
    m->sps = median(sps, n);
    m->sps_min = sps[0];
    m->sps_max = sps[n - 1];
    m->in = median(in, n);
    m->out = median(out, n);
    m->bytes = median(bytes, n);
    m->dcpu = median(dcpu, n);
    m->ccpu = median(ccpu, n);
    m->mcpu = median(mcpu, n);
    m->fcpu = median(fcpu, n);
}

#define USAGE                                                                                  \
    "usage: %s [-n SPANS] [-t THREADS] [-r RUNS] [-f json|proto|both] [-b mstrace] [-F RING_SIZE]\n" \
    "          [-o DIR] [--ids N [--whole-lists]]\n"                                                     \
    "Throughput of the real `mstrace forward` daemon: THREADS clients (default 8) send SPANS spans\n" \
    "(default 2000000) per run, RUNS runs (default 3) per format (json, proto or both, alternated).\n" \
    "  -b mstrace  the daemon binary (default: next to this one, or $MSTRACE_BIN)\n"                 \
    "  -F SIZE     the daemon runs as a flight recorder of SIZE (no file)\n"                          \
    "  -o DIR      the output file's directory (default /tmp; removed after each run)\n"            \
    "  --ids N     every span is a vllm.scheduler.schedule step record carrying N request ids\n"      \
    "              (1..1024; request.ids, step.tokens, step.phase, step.new_ids, step.finished_ids)\n" \
    "              instead of the bench packet. Each client is one engine with a rolling batch of\n" \
    "              N requests, as a real engine has: each step keeps most of the previous step's\n"   \
    "              requests, a few finish (after 32-287 decode steps) and new ones join (their\n"    \
    "              prefill that step), so request ids recur from step to step; ids are vLLM-like\n"   \
    "              \"chatcmpl-<32 hex>-<8 hex>\"; each step links to its engine's previous step.\n" \
    "              request.ids goes as a change to the client's previous list when the daemon\n"   \
    "              says it takes changes, as the forwarder client sends it.\n"                      \
    "  --whole-lists  with --ids: always send request.ids whole (as an older client does)\n"

int main(int argc, char **argv) {
    uint64_t total = 2000000;
    int threads = 8, runs = 3;
    char bin[PATH_MAX] = "";
    const char *formats = "both";
    int opt;
    static const struct option longopts[] = {
        {"ids", required_argument, NULL, 'i'}, {"whole-lists", no_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    while ((opt = getopt_long(argc, argv, "n:t:r:b:f:F:o:i:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n': total = strtoull(optarg, NULL, 10); break;
        case 't': threads = atoi(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 'b': snprintf(bin, sizeof bin, "%s", optarg); break;
        case 'f': formats = optarg; break;
        case 'F': g_flight = optarg; break;
        case 'i': g_ids = atoi(optarg); break;
        case 'w': g_whole_lists = true; break;
        case 'o': g_dir = optarg; break;
        case 'h':
            printf(USAGE, argv[0]);
            return 0;
        default:
            fprintf(stderr, USAGE, argv[0]);
            return 2;
        }
    }
    if (threads < 1 || runs < 1 || runs > 99 || total < (uint64_t)threads || g_ids < 0 ||
        g_ids > 1024) {
        fprintf(stderr, USAGE, argv[0]);
        return 2;
    }
    static const char *const names[2] = {"json", "proto"};
    static const char *const exts[2] = {"json", "pftrace"};
    bool use[2] = {strcmp(formats, "proto") != 0, strcmp(formats, "json") != 0};
    if (strcmp(formats, "json") && strcmp(formats, "proto") && strcmp(formats, "both")) return 2;
    if (!bin[0] && getenv("MSTRACE_BIN")) snprintf(bin, sizeof bin, "%s", getenv("MSTRACE_BIN"));
    if (!bin[0]) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return 1;
        self[n] = 0;
        snprintf(bin, sizeof bin, "%s/mstrace", dirname(self));
    }
    signal(SIGPIPE, SIG_IGN);
    srandom((unsigned)getpid());
    printf("bench_forward: %s forward, %d client threads, %llu spans per run, %d runs, "
           "formats %s, %s\n", bin, threads, (unsigned long long)total, runs, formats,
           g_ids ? "step records" : "bench packet");
    if (g_ids) printf("bench_forward: %d request ids per span (rolling batch per client)\n", g_ids);
    static result rs[2][99];
    int failures = 0;
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 2; k++) {
            int f = (r % 2) ? 1 - k : k; /* alternate the order every round */
            if (!use[f]) continue;
            if (run_once(bin, exts[f], total, threads, &rs[f][r]) != 0) failures++;
        }
    }
    double load[3] = {-1, -1, -1};
    if (getloadavg(load, 3) < 0) load[0] = -1;
    mode_summary ms[2];
    for (int f = 0; f < 2; f++) {
        if (!use[f]) continue;
        summarize(rs[f], runs, total, &ms[f]);
        printf("SUMMARY bench_forward %s: median %.0f spans/s (min %.0f, max %.0f, %d runs), "
               "in %.1f MB/s, out %.1f MB/s, file %.1f MB (%.1f bytes/span), peak daemon RSS "
               "%.1f MB, daemon CPU %.2f us/span (main thread %.2f, format thread %.2f), clients CPU "
               "%.2f us/span, "
               "%ld CPUs, loadavg %.2f%s\n",
               names[f], ms[f].sps, ms[f].sps_min, ms[f].sps_max, runs, ms[f].in, ms[f].out,
               ms[f].bytes / 1e6, ms[f].bytes / (double)total, ms[f].hwm_kb / 1024.0, ms[f].dcpu,
               ms[f].mcpu, ms[f].fcpu, ms[f].ccpu, sysconf(_SC_NPROCESSORS_ONLN), load[0],
               failures ? " (SOME RUNS FAILED)" : "");
    }
    if (use[0] && use[1])
        printf("RATIO bench_forward proto vs json: file %.2fx smaller, %.2fx spans/s, daemon CPU "
               "per span %.2fx, peak RSS %.2fx\n",
               ms[0].bytes / ms[1].bytes, ms[1].sps / ms[0].sps, ms[1].dcpu / ms[0].dcpu,
               (double)ms[1].hwm_kb / (double)ms[0].hwm_kb);
    return failures ? 1 : 0;
}
