/*
 * bench_forward_cpu.c — the forwarder's per-span CPU cost without sockets:
 * the packets bench_forward sends (same shape: ~10 attributes, 1-2 links,
 * ids linking to the previous and the next span) are decoded and written
 * to a Chrome Trace JSON file and to a native Perfetto (.pftrace) file
 * in-process, the two alternating run by run, exactly as the Perfetto sink does
 * (decode into a reused arena, add_span, hand over to the writer thread
 * every 256 spans like an epoll batch).
 *
 * Why: on a small, shared box the end-to-end benchmark's spans/s moves with
 * other load and even its CPU figures wobble; this measures the epoll
 * thread's own work (its thread CPU time, CLOCK_THREAD_CPUTIME_ID) and
 * splits it into decoding and formatting, so a change to either can be
 * judged (the daemon runs the two on separate threads, so the SUMMARY also
 * gives the bound the slower of them sets). The writer thread's pwrite is
 * not counted (it runs elsewhere).
 *
 * usage: bench_forward_cpu [-n SPANS] [-r RUNS]   (default 1000000, 5)
 * Prints a SUMMARY line per format and a RATIO line (proto vs json).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "forward/chrome_trace.h"
#include "forward/pftrace_writer.h"
#include "wire/perfetto_packet.h"
#include "bench_packet.h"

#define SLOTS 256

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put_hex16(char *p, unsigned long long v) {
    static const char hx[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        p[i] = hx[v & 15];
        v >>= 4;
    }
}

typedef struct tmpl {
    char json[2048];
    size_t len;
    size_t off_span, off_link1, off_link2;
} tmpl;

static void build(tmpl *t, int thread, int slot) {
    int n = bench_packet_format(t->json, sizeof t->json, thread, slot);
    t->len = (size_t)n;
    bench_packet_placeholders(t->json, t->json, &t->off_span, &t->off_link1, &t->off_link2);
}

/* The writer a pass feeds: JSON (w) or proto (pw); both NULL: decode only. */
typedef struct sinkw {
    mst_chrome_writer *w;
    mst_pftrace_writer *pw;
} sinkw;

static mst_status sink_add(sinkw *k, const mst_pf_span *s) {
    return k->pw ? mst_pftrace_writer_add_span(k->pw, s) : mst_chrome_writer_add_span(k->w, s);
}

static void sink_handoff(sinkw *k) {
    if (k->pw) (void)mst_pftrace_writer_handoff(k->pw);
    else (void)mst_chrome_writer_handoff(k->w);
}

/* One pass over n spans; with no writer only decodes. Returns CPU s. */
static double pass(tmpl *t, unsigned long long n, sinkw *k, int *errors) {
    bool any = k && (k->w || k->pw);
    mst_arena arena;
    mst_arena_init(&arena);
    double t0 = thread_cpu_s();
    for (unsigned long long i = 0; i < n; i++) {
        tmpl *p = &t[i % SLOTS];
        unsigned long long id = (1ull << 40) + i + 1;
        put_hex16(p->json + p->off_span, id);
        put_hex16(p->json + p->off_link1, id - 1);
        if (p->off_link2) put_hex16(p->json + p->off_link2, id + 1);
        mst_pf_span span;
        if (mst_perfetto_packet_decode((const uint8_t *)p->json, p->len, &arena, &span, NULL, 0) !=
            MST_OK)
            (*errors)++;
        else if (any && sink_add(k, &span) != MST_OK)
            (*errors)++;
        mst_arena_reset_keep(&arena, 64u * 1024u);
        if (any && i % SLOTS == SLOTS - 1) sink_handoff(k);
    }
    double dt = thread_cpu_s() - t0;
    mst_arena_release(&arena);
    return dt;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    unsigned long long n = 1000000;
    int runs = 5, opt;
    while ((opt = getopt(argc, argv, "n:r:")) != -1) {
        if (opt == 'n') n = strtoull(optarg, NULL, 10);
        else if (opt == 'r') runs = atoi(optarg);
        else {
            fprintf(stderr, "usage: %s [-n SPANS] [-r RUNS]\n", argv[0]);
            return 2;
        }
    }
    if (runs < 1 || runs > 99 || n < 1) return 2;
    static tmpl t[SLOTS];
    for (int i = 0; i < SLOTS; i++) build(&t[i], i % 8, i);
    static const char *const names[2] = {"json", "proto"};
    double dec[99], all[2][99], size[2][99];
    int errors = 0;
    for (int r = 0; r < runs; r++) {
        dec[r] = pass(t, n, NULL, &errors) / (double)n * 1e6;
        for (int k2 = 0; k2 < 2; k2++) {
            int f = (r % 2) ? 1 - k2 : k2; /* alternate the order every run */
            char path[64], err[256];
            snprintf(path, sizeof path, "/tmp/bench_forward_cpu_%d.%s", (int)getpid(),
                     f ? "pftrace" : "json");
            sinkw k = {NULL, NULL};
            mst_status st = f ? mst_pftrace_writer_open(path, 1, &k.pw, err, sizeof err)
                              : mst_chrome_writer_open(path, 1, &k.w, err, sizeof err);
            if (st != MST_OK) {
                fprintf(stderr, "bench_forward_cpu: %s\n", err);
                return 1;
            }
            all[f][r] = pass(t, n, &k, &errors) / (double)n * 1e6;
            double t0 = thread_cpu_s();
            if ((f ? mst_pftrace_writer_close(k.pw) : mst_chrome_writer_close(k.w)) != MST_OK)
                errors++;
            all[f][r] += (thread_cpu_s() - t0) / (double)n * 1e6;
            struct stat sb;
            size[f][r] = stat(path, &sb) == 0 ? (double)sb.st_size / (double)n : 0;
            unlink(path);
            printf("  run %s: decode %.3f us/span, decode+format %.3f us/span (format %.3f), "
                   "%.1f bytes/span\n", names[f], dec[r], all[f][r], all[f][r] - dec[r],
                   size[f][r]);
        }
    }
    qsort(dec, (size_t)runs, sizeof dec[0], cmp_double);
    double load[1] = {-1};
    getloadavg(load, 1);
    double med[2], bytes[2];
    for (int f = 0; f < 2; f++) {
        qsort(all[f], (size_t)runs, sizeof all[f][0], cmp_double);
        qsort(size[f], (size_t)runs, sizeof size[f][0], cmp_double);
        med[f] = all[f][runs / 2];
        bytes[f] = size[f][runs / 2];
        /* The daemon decodes on its epoll thread and formats on another
         * (format_stage.h): with a core each, the slower of the two bounds it. */
        double fmt = med[f] - dec[runs / 2];
        double slower = fmt > dec[runs / 2] ? fmt : dec[runs / 2];
        printf("SUMMARY bench_forward_cpu %s: median decode %.3f us/span, decode+format %.3f us/span "
               "(format ~%.3f) = %.0f spans/s on one core, %.0f spans/s with decode and format on "
               "a core each, %.1f bytes/span, %llu spans x %d runs, loadavg %.2f%s\n",
               names[f], dec[runs / 2], med[f], fmt, 1e6 / med[f], 1e6 / slower, bytes[f], n,
               runs, load[0], errors ? " (ERRORS)" : "");
    }
    printf("RATIO bench_forward_cpu proto vs json: decode+format %.2fx the CPU, format alone %.2fx, "
           "file %.2fx smaller\n", med[1] / med[0], (med[1] - dec[runs / 2]) / (med[0] - dec[runs / 2]),
           bytes[0] / bytes[1]);
    return errors ? 1 : 0;
}
