/*
 * bench_forward_cpu.c — the forwarder's per-span CPU cost without sockets:
 * the packets bench_forward sends (same shape: ~10 attributes, 1-2 links,
 * ids linking to the previous and the next span; the same 8 clients, each
 * with its own trace and its own run of span ids, their spans interleaved
 * 256 at a time as the daemon reads them) are decoded and written
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
 * usage: bench_forward_cpu [-n SPANS] [-r RUNS] [-f json|proto|both] [-k DIR] [-i IDS] [-c]
 *        (default 1000000 spans, 5 runs, both formats, the bench packet;
 *        -i IDS: step records of IDS request ids, as bench_forward --ids;
 *        -c: their request.ids as changes to the client's previous list,
 *        as a traced process sends them to a forwarder that takes them, and
 *        rebuilt into whole lists as the daemon does (forward/id_streams.h),
 *        in the measured time: the files must be the bytes of a run without
 *        -c, which -k lets one check with cmp)
 * Prints a SUMMARY line per format and, for both, a RATIO line (proto vs
 * json). With -k the last run's files are kept in DIR (as
 * bench_forward_cpu.json / .pftrace), so two builds' outputs of the same
 * input can be compared byte for byte.
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
#include "forward/id_streams.h"
#include "forward/pftrace_writer.h"
#include "wire/perfetto_packet.h"
#include "bench_packet.h"

#define SLOTS 256  /* packet templates per client, and spans per turn */
#define CLIENTS 8  /* as bench_forward's default */

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

/* The input of a pass: CLIENTS clients taking turns of SLOTS spans, each
 * turn's packets made before the clock runs (their making is not the
 * forwarder's work). Bench packets: span i of client c has bench_forward's
 * ids, (c + 1) << 40 plus its sequence number, a link to the client's
 * previous span (already seen: a flow) and, on odd slots, one to trace 1's
 * next span (pending; resolved for client 0). With ids > 0 (-i), step
 * packets: each client one engine with a rolling batch (bench_packet.h),
 * as bench_forward --ids. */
typedef struct input {
    int ids;
    bool changes;         /* -c: request.ids as changes */
    mst_ids_sender *sender[CLIENTS];
    mst_str *items;       /* the sender's scratch: a batch's ids */
    tmpl t[CLIENTS][SLOTS];
    bench_batch batch[CLIENTS];
    unsigned long long seq[CLIENTS];
    char *buf;            /* the turn's packets, back to back */
    size_t off[SLOTS + 1];
} input;

static bool input_init(input *in, int ids, bool changes) {
    memset(in, 0, sizeof *in);
    in->ids = ids;
    in->changes = changes && ids;
    for (int c = 0; c < CLIENTS; c++) {
        for (int i = 0; i < SLOTS; i++) build(&in->t[c][i], c, i);
        if (ids) bench_batch_init(&in->batch[c], c, ids);
        if (in->changes && !(in->sender[c] = mst_ids_sender_new())) return false;
    }
    if (in->changes && !(in->items = calloc((size_t)ids, sizeof *in->items))) return false;
    in->buf = malloc(SLOTS * (ids ? bench_step_cap(ids) : sizeof in->t[0][0].json));
    return in->buf != NULL;
}

static void input_free(input *in) {
    for (int c = 0; in->ids && c < CLIENTS; c++) bench_batch_free(&in->batch[c]);
    for (int c = 0; c < CLIENTS; c++) mst_ids_sender_free(in->sender[c]);
    free(in->items);
    free(in->buf);
}

/* Makes client c's next `k` packets (k <= SLOTS; the bench packets of
 * slots 0..k-1: a turn is made in one call for them). */
static void input_turn(input *in, int c, size_t k) {
    size_t len = 0;
    for (size_t i = 0; i < k; i++) {
        unsigned long long id = ((unsigned long long)(c + 1) << 40) + ++in->seq[c];
        in->off[i] = len;
        if (in->ids) {
            mst_ids_send how;
            if (in->changes) bench_step_ids_decide(in->sender[c], &in->batch[c], in->items, &how);
            len += bench_step_format(in->buf + len, &in->batch[c], id, in->seq[c] > 1 ? id - 1 : 0,
                                     in->changes ? &how : NULL);
            bench_batch_advance(&in->batch[c]);
            continue;
        }
        tmpl *p = &in->t[c][i];
        put_hex16(p->json + p->off_span, id);
        put_hex16(p->json + p->off_link1, id - 1);
        if (p->off_link2) put_hex16(p->json + p->off_link2, id + 1);
        memcpy(in->buf + len, p->json, p->len);
        len += p->len;
    }
    in->off[k] = len;
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

/* One pass over n spans (a fresh input of `ids`); with no writer only
 * decodes. Returns the CPU seconds of the decoding and writing. A client's
 * turn of SLOTS spans is made in parts of at most READ_BYTES, each decoded
 * right after it is made, as the daemon decodes what one read brought
 * (cache-warm; 256 step records of 256 ids would be 4 MB, out of cache).
 * Every turn ends with a hand-over to the writer thread, like an epoll
 * batch. */
#define READ_BYTES (256u * 1024u) /* the daemon's read buffer */
static double pass(input *in, int ids, bool changes, unsigned long long n, sinkw *k, int *errors) {
    bool any = k && (k->w || k->pw);
    mst_id_streams *streams = changes ? mst_id_streams_new(0) : NULL;
    if (!input_init(in, ids, changes) || (changes && !streams)) {
        (*errors)++;
        return 0;
    }
    size_t part = ids ? READ_BYTES / bench_step_cap(ids) : SLOTS;
    if (part < 1) part = 1;
    if (part > SLOTS) part = SLOTS;
    mst_arena arena;
    mst_arena_init(&arena);
    double cpu = 0;
    for (unsigned long long i = 0; i < n; i += SLOTS) {
        int c = (int)((i / SLOTS) % CLIENTS);
        size_t turn = n - i < SLOTS ? (size_t)(n - i) : SLOTS;
        for (size_t done = 0; done < turn; done += part) {
            size_t m = turn - done < part ? turn - done : part;
            input_turn(in, c, m);
            double t0 = thread_cpu_s();
            for (size_t j = 0; j < m; j++) {
                mst_pf_span span;
                const uint8_t *pkt = (const uint8_t *)in->buf + in->off[j];
                mst_ids_outcome outcome;
                if (mst_perfetto_packet_decode(pkt, in->off[j + 1] - in->off[j], &arena, &span,
                                               NULL, 0) != MST_OK ||
                    mst_id_streams_apply(streams, (uint64_t)c + 1, &span, &arena, &outcome, NULL, 0) != MST_OK ||
                    outcome == MST_IDS_NO_BASE || outcome == MST_IDS_NOT_KEPT)
                    (*errors)++;
                else if (any && sink_add(k, &span) != MST_OK)
                    (*errors)++;
                mst_arena_reset_keep(&arena, 64u * 1024u);
            }
            if (any && done + m == turn) sink_handoff(k);
            cpu += thread_cpu_s() - t0;
        }
    }
    mst_arena_release(&arena);
    input_free(in);
    mst_id_streams_free(streams);
    return cpu;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    unsigned long long n = 1000000;
    int runs = 5, opt;
    const char *formats = "both", *keep = NULL;
    int ids = 0;
    bool changes = false;
    while ((opt = getopt(argc, argv, "n:r:f:k:i:c")) != -1) {
        if (opt == 'n') n = strtoull(optarg, NULL, 10);
        else if (opt == 'r') runs = atoi(optarg);
        else if (opt == 'f') formats = optarg;
        else if (opt == 'k') keep = optarg;
        else if (opt == 'i') ids = atoi(optarg);
        else if (opt == 'c') changes = true;
        else {
            fprintf(stderr, "usage: %s [-n SPANS] [-r RUNS] [-f json|proto|both] [-k DIR] [-i IDS] [-c]\n",
                    argv[0]);
            return 2;
        }
    }
    bool use[2] = {strcmp(formats, "proto") != 0, strcmp(formats, "json") != 0};
    if (runs < 1 || runs > 99 || n < 1 || ids < 0 || ids > 1024 ||
        (strcmp(formats, "json") && strcmp(formats, "proto") && strcmp(formats, "both")))
        return 2;
    static input in;
    static const char *const names[2] = {"json", "proto"};
    double dec[99], all[2][99], size[2][99];
    int errors = 0;
    for (int r = 0; r < runs; r++) {
        dec[r] = pass(&in, ids, changes, n, NULL, &errors) / (double)n * 1e6;
        for (int k2 = 0; k2 < 2; k2++) {
            int f = (r % 2) ? 1 - k2 : k2; /* alternate the order every run */
            if (!use[f]) continue;
            char path[4096], err[256];
            if (keep)
                snprintf(path, sizeof path, "%s/bench_forward_cpu.%s", keep, f ? "pftrace" : "json");
            else
                snprintf(path, sizeof path, "/tmp/bench_forward_cpu_%d.%s", (int)getpid(),
                         f ? "pftrace" : "json");
            sinkw k = {NULL, NULL};
            mst_status st = f ? mst_pftrace_writer_open(path, 1, &k.pw, err, sizeof err)
                              : mst_chrome_writer_open(path, 1, &k.w, err, sizeof err);
            if (st != MST_OK) {
                fprintf(stderr, "bench_forward_cpu: %s\n", err);
                return 1;
            }
            all[f][r] = pass(&in, ids, changes, n, &k, &errors) / (double)n * 1e6;
            double t0 = thread_cpu_s();
            if ((f ? mst_pftrace_writer_close(k.pw) : mst_chrome_writer_close(k.w)) != MST_OK)
                errors++;
            all[f][r] += (thread_cpu_s() - t0) / (double)n * 1e6;
            struct stat sb;
            size[f][r] = stat(path, &sb) == 0 ? (double)sb.st_size / (double)n : 0;
            if (!keep) unlink(path);
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
        if (!use[f]) continue;
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
               "a core each, %.1f bytes/span, %llu spans x %d runs, %d request ids per span%s, loadavg "
               "%.2f%s\n",
               names[f], dec[runs / 2], med[f], fmt, 1e6 / med[f], 1e6 / slower, bytes[f], n,
               runs, ids, changes && ids ? " (sent as changes)" : "", load[0], errors ? " (ERRORS)" : "");
    }
    if (use[0] && use[1])
        printf("RATIO bench_forward_cpu proto vs json: decode+format %.2fx the CPU, format alone %.2fx, "
           "file %.2fx smaller\n", med[1] / med[0], (med[1] - dec[runs / 2]) / (med[0] - dec[runs / 2]),
           bytes[0] / bytes[1]);
    return errors ? 1 : 0;
}
