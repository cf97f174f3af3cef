/*
 * bench_flight.c — the flight recorder's costs, in process (no sockets):
 * CPU per span taken into the ring vs the same spans written by the
 * .pftrace writer, memory per held span, the time to write a dump of 60 s
 * of engine traffic, and the resident memory under a large offered load.
 *
 * Traffic: engine steps as the tracer sends them (schedule with request.ids,
 * step.tokens, step.phase, batch and scheduler counters and one link per
 * request; execute; worker; output — 4 spans per step, each naming the
 * step's requests), at 50 steps/s of span time, with IDS request ids per
 * step (-k 8 or -k 256). Packets are decoded once (decoding is the
 * forwarder's cost either way) and the decoded spans fed to each output
 * through the output interface (output_sink.h).
 *
 * Usage: bench_flight [-k IDS] [-n SPANS] [-r ROUNDS] [--rss SPANS]
 *   prints one line per measure and a SUMMARY line; --rss offers SPANS
 *   spans as fast as one core takes them to a 64 MiB ring and prints RSS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "forward/flight_sink.h"
#include "forward/writer_sinks.h"
#include "wire/perfetto_packet.h"

#define STEP_NS 20000000ll /* 50 steps/s */
#define POOL_STEPS 512

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) v = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

typedef struct pool {
    mst_arena arena;
    char **bufs;
    mst_pf_span *spans;
    size_t n;
} pool;

/* Four decoded spans per step for POOL_STEPS steps, `ids` requests each. */
static void build_pool(pool *p, int ids) {
    mst_arena_init(&p->arena);
    p->n = POOL_STEPS * 4;
    p->spans = calloc(p->n, sizeof *p->spans);
    p->bufs = calloc(p->n, sizeof *p->bufs);
    size_t cap = 4096 + (size_t)ids * 160;
    static const char *const names[4] = {"vllm.scheduler.schedule", "vllm.model.execute",
                                         "vllm.worker.execute_model", "vllm.output.process"};
    for (size_t i = 0; i < p->n; i++) {
        int step = (int)(i / 4), kind = (int)(i % 4);
        char *b = p->bufs[i] = malloc(cap);
        char *ids_txt = malloc((size_t)ids * 40 + 8), *tok = malloc((size_t)ids * 8 + 8),
             *phase = malloc((size_t)ids + 8), *links = malloc((size_t)ids * 80 + 8);
        size_t a = 0, t = 0, l = 0;
        ids_txt[a++] = '[';
        tok[t++] = '[';
        links[l++] = '[';
        for (int k = 0; k < ids; k++) {
            int rid = step * 3 + k;
            a += (size_t)sprintf(ids_txt + a, "%s\"cmpl-%08x-%08x\"", k ? "," : "", rid, rid * 7);
            t += (size_t)sprintf(tok + t, "%s%d", k ? "," : "", k % 5 ? 1 : 64);
            phase[k] = k % 5 ? 'd' : 'P';
            l += (size_t)sprintf(links + l, "%s{\"trace_id\":\"%032x\",\"span_id\":\"%016x\"}",
                                 k ? "," : "", rid + 1, rid + 1);
        }
        ids_txt[a++] = ']';
        ids_txt[a] = 0;
        tok[t++] = ']';
        tok[t] = 0;
        phase[ids] = 0;
        links[l++] = ']';
        links[l] = 0;
        long long s0 = 1700000000000000000ll + (long long)step * STEP_NS + kind * 1000000;
        int pid = kind == 2 ? 300 : kind == 3 ? 100 : 200;
        int len = 0;
        if (kind == 0)
            len = snprintf(b, cap,
                MST_PERFETTO_MAGIC "{\"name\":\"%s\",\"category\":\"ms_service_profiler.hook.Schedule\","
                "\"trace_id\":\"%032x\",\"span_id\":\"%016zx\",\"start_time_ns\":%lld,\"end_time_ns\":%lld,"
                "\"kind\":1,\"status\":1,\"attributes\":{\"process.pid\":%d,\"thread.id\":%d,"
                "\"process.role\":\"engine_core\",\"request.ids\":%s,\"step.index\":%d,\"step.tokens\":%s,"
                "\"step.phase\":\"%s\",\"batch.request_count\":%d,\"batch.scheduled_tokens\":%d,"
                "\"scheduler.waiting\":%d,\"scheduler.running\":%d,\"kv_cache.usage\":0.4375,"
                "\"scheduler.max_num_seqs\":256,\"scheduler.max_num_batched_tokens\":8192},"
                "\"resource_attributes\":{\"service.name\":\"vllm\",\"process.pid\":%d,"
                "\"telemetry.sdk.name\":\"mstrace\",\"telemetry.sdk.language\":\"c\"},\"links\":%s}",
                names[kind], step + 0x1000, i + 1, s0, s0 + 400000, pid, pid, ids_txt, step, tok, phase,
                ids, ids * 3, step % 7, ids, pid, links);
        else
            len = snprintf(b, cap,
                MST_PERFETTO_MAGIC "{\"name\":\"%s\",\"category\":\"ms_service_profiler.hook.Model\","
                "\"trace_id\":\"%032x\",\"span_id\":\"%016zx\",\"parent_span_id\":\"%s\","
                "\"start_time_ns\":%lld,\"end_time_ns\":%lld,\"kind\":1,\"status\":1,"
                "\"attributes\":{\"process.pid\":%d,\"thread.id\":%d,\"request.ids\":%s,"
                "\"batch.request_count\":%d,\"batch.scheduled_tokens\":%d},"
                "\"resource_attributes\":{\"service.name\":\"vllm\",\"process.pid\":%d,"
                "\"telemetry.sdk.name\":\"mstrace\",\"telemetry.sdk.language\":\"c\"},\"links\":[]}",
                names[kind], step + (kind == 1 ? 0x1000 : 0x900000 * kind), i + 1,
                kind == 1 ? "0000000000000001" : "", s0, s0 + 8000000, pid, pid + 1, ids_txt, ids,
                ids * 3, pid);
        char err[200];
        if (len <= 0 || (size_t)len >= cap ||
            mst_perfetto_packet_decode((const uint8_t *)b, (size_t)len, &p->arena, &p->spans[i], err,
                                       sizeof err) != MST_OK) {
            fprintf(stderr, "bench_flight: bad packet: %s\n", err);
            exit(1);
        }
        free(ids_txt);
        free(tok);
        free(phase);
        free(links);
    }
}

/* The i-th span of the stream: a pool span moved to step i/4. */
static mst_pf_span span_at(const pool *p, size_t i) {
    mst_pf_span s = p->spans[i % p->n];
    int64_t shift = (int64_t)(i / p->n) * POOL_STEPS * STEP_NS;
    s.start_ns += shift;
    s.end_ns += shift;
    return s;
}

typedef struct run_cost {
    double thread_us, process_us; /* per span */
} run_cost;

static run_cost feed(const mst_output_sink *o, const pool *p, size_t n) {
    double t0 = now_s(CLOCK_THREAD_CPUTIME_ID), p0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t ms = 1;
    for (size_t i = 0; i < n; i++) {
        mst_pf_span s = span_at(p, i);
        o->ops->add_span(o->self, &s);
        if (i % 1024 == 1023) { /* a batch boundary, as the formatting thread sees it */
            o->ops->tick(o->self, ms++);
            while (o->ops->handoff(o->self)) usleep(200);
        }
    }
    run_cost c = {(now_s(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)n * 1e6, 0};
    o->ops->finish(o->self);
    c.process_us = (now_s(CLOCK_PROCESS_CPUTIME_ID) - p0) / (double)n * 1e6;
    return c;
}

static unsigned long long field(const char *text, const char *key) {
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static int rss_mode(long long n_spans, const pool *p, const char *dir) {
    long base = status_kb("VmRSS:");
    mst_flight_options opt;
    memset(&opt, 0, sizeof opt);
    opt.ring_bytes = 64ull << 20;
    char path[512], err[300];
    snprintf(path, sizeof path, "%s/rss.pftrace", dir);
    mst_output_sink o;
    if (mst_flight_sink_open(path, MST_PERFETTO_FORMAT_AUTO, &opt, &o, err, sizeof err) != MST_OK) {
        fprintf(stderr, "bench_flight: %s\n", err);
        return 1;
    }
    long opened = status_kb("VmRSS:");
    double w0 = now_s(CLOCK_MONOTONIC);
    feed(&o, p, (size_t)n_spans);
    double wall = now_s(CLOCK_MONOTONIC) - w0;
    char d[600] = "";
    o.ops->describe(o.self, d, sizeof d);
    long rss = status_kb("VmRSS:"), hwm = status_kb("VmHWM:");
    printf("rss: %lld spans in %.1f s (%.2f M spans/s offered and taken), ring 64 MiB: RSS before "
           "open %ld KiB, after open %ld KiB, at end %ld KiB, peak %ld KiB; peak - before - ring = "
           "%ld KiB; held=%llu evicted=%llu\n",
           n_spans, wall, (double)n_spans / wall / 1e6, base, opened, rss, hwm,
           hwm - base - 64 * 1024, field(d, " held="), field(d, " evicted="));
    o.ops->close(o.self, NULL);
    return 0;
}

int main(int argc, char **argv) {
    int ids = 8, rounds = 5;
    long long n = 200000, rss_n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-k") == 0 && i + 1 < argc) ids = atoi(argv[++i]);
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) n = atoll(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rss") == 0 && i + 1 < argc) rss_n = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_flight [-k IDS] [-n SPANS] [-r ROUNDS] [--rss SPANS]\n");
            return 2;
        }
    }
    if (ids < 1 || ids > 1024 || n < 1 || rounds < 1 || rounds > 99) return 2;
    char dir[] = "/tmp/bench-flight-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    pool p;
    build_pool(&p, ids);
    if (rss_n) {
        int rc = rss_mode(rss_n, &p, dir);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        return rc | system(cmd);
    }
    double pf_t[99], pf_p[99], ring_t[99], ring_p[99], dump_s[99], per_span[99], pf_bytes = 0;
    unsigned long long dump_bytes = 0, held = 0;
    /* A 60 s dump: 60 s of span time at 50 steps/s, 4 spans a step. */
    size_t n60 = 60 * 50 * 4;
    for (int r = 0; r < rounds; r++) {
        char path[512], err[300];
        snprintf(path, sizeof path, "%s/w%d.pftrace", dir, r);
        mst_output_sink o;
        if (mst_writer_sink_open(path, MST_PERFETTO_FORMAT_AUTO, 1, &o, err, sizeof err) != MST_OK) {
            fprintf(stderr, "bench_flight: %s\n", err);
            return 1;
        }
        run_cost c = feed(&o, &p, (size_t)n);
        mst_chrome_stats cs;
        o.ops->close(o.self, &cs);
        pf_t[r] = c.thread_us;
        pf_p[r] = c.process_us;
        pf_bytes = (double)cs.bytes_written / (double)n;
        unlink(path);

        /* Steady state: a 64 MiB ring that has wrapped once (its pages are
         * resident and every add evicts), then the timed run. */
        mst_flight_options opt;
        memset(&opt, 0, sizeof opt);
        opt.ring_bytes = 64ull << 20;
        snprintf(path, sizeof path, "%s/f%d.pftrace", dir, r);
        if (mst_flight_sink_open(path, MST_PERFETTO_FORMAT_AUTO, &opt, &o, err, sizeof err) != MST_OK) {
            fprintf(stderr, "bench_flight: %s\n", err);
            return 1;
        }
        char d[600] = "";
        for (int warm = 0; warm < 50 && !field(d, " evicted="); warm++) {
            feed(&o, &p, (size_t)n);
            d[0] = 0;
            o.ops->describe(o.self, d, sizeof d);
        }
        c = feed(&o, &p, (size_t)n);
        ring_t[r] = c.thread_us;
        ring_p[r] = c.process_us;
        o.ops->close(o.self, NULL);
        /* Memory per held span: a ring that holds every span of a run. */
        opt.ring_bytes = 1ull << 30;
        if (mst_flight_sink_open(path, MST_PERFETTO_FORMAT_AUTO, &opt, &o, err, sizeof err) != MST_OK)
            return 1;
        feed(&o, &p, (size_t)n);
        d[0] = 0;
        o.ops->describe(o.self, d, sizeof d);
        held = field(d, " held=");
        per_span[r] = (double)field(d, " ring_bytes=") / (double)held;
        o.ops->close(o.self, NULL);

        /* The 60 s dump, on demand (whole ring), timed on the wall clock. */
        opt.ring_bytes = 1ull << 30;
        snprintf(path, sizeof path, "%s/d%d.pftrace", dir, r);
        mst_flight_sink_open(path, MST_PERFETTO_FORMAT_AUTO, &opt, &o, err, sizeof err);
        feed(&o, &p, n60);
        double w0 = now_s(CLOCK_MONOTONIC);
        o.ops->on_demand(o.self);
        dump_s[r] = now_s(CLOCK_MONOTONIC) - w0;
        mst_chrome_stats fs;
        o.ops->get_stats(o.self, &fs);
        dump_bytes = fs.bytes_written;
        o.ops->close(o.self, NULL);
    }
    printf("ids per step span: %d; %lld spans per run, %d rounds (median)\n", ids, n, rounds);
    printf(".pftrace writer: %.3f us/span on the calling thread, %.3f us/span process CPU "
           "(with its writer thread), %.0f bytes/span in the file\n",
           median(pf_t, rounds), median(pf_p, rounds), pf_bytes);
    printf("flight ring:     %.3f us/span on the calling thread, %.3f us/span process CPU "
           "(64 MiB ring, wrapped: every add evicts), %.0f bytes/held span in the ring, %llu held\n",
           median(ring_t, rounds), median(ring_p, rounds), median(per_span, rounds), held);
    printf("60 s dump (%zu spans): %.3f s wall, %llu bytes\n", n60, median(dump_s, rounds), dump_bytes);
    printf("SUMMARY ids=%d pftrace_us=%.3f pftrace_proc_us=%.3f ring_us=%.3f ring_proc_us=%.3f "
           "ring_bytes_per_span=%.0f dump60_s=%.3f\n",
           ids, median(pf_t, rounds), median(pf_p, rounds), median(ring_t, rounds),
           median(ring_p, rounds), median(per_span, rounds), median(dump_s, rounds));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    for (size_t i = 0; i < p.n; i++) free(p.bufs[i]);
    free(p.bufs);
    free(p.spans);
    mst_arena_release(&p.arena);
    return system(cmd);
}
