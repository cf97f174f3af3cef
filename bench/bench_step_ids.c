/*
 * bench_step_ids.c — what a step span costs in each file encoding as its
 * batch grows: bytes per span and spans per second of the Chrome Trace
 * JSON writer and the `.pftrace` writer, in process (no sockets; packets
 * are decoded once up front, as both outputs pay that alike), at IDS
 * request ids per span.
 *
 * Spans: the bench packet's schedule span (bench_packet.h: 10 attributes,
 * 1–2 links) plus `request.ids`. The ids are a rolling batch, as a serving
 * engine's are: each step keeps the previous step's requests but the
 * oldest, and one new request joins at the end (so every id recurs in IDS
 * consecutive steps) — what the `.pftrace` encoding exploits. `--fresh`
 * gives every span IDS ids never seen before instead (not a real engine's
 * traffic; the encoding's worst case). `--step` sends full step records
 * instead (step.tokens, step.phase, step.index, scheduler fields and one
 * link per request, as bench_flight.c, marked as request links with
 * `request_links` as the hook marks them: no flow drawn for them);
 * `--draw-links` leaves the mark out (a hook that did not send it: every
 * link drawn as a flow). `--engine` sends bench_forward's step records
 * instead (bench_packet.h "step packets": one engine's rolling batch with
 * vLLM-like ids, requests finishing and joining in their slots, each step
 * linking the previous one): the formatting thread's work of
 * `bench_forward --ids IDS` without the sockets, with the same spans in
 * the same order every run (so two builds' files can be compared).
 * `--joins` (with `--engine`) adds what a real serve joins to each step
 * (docs/architecture.md "One step on the timeline"): the engine's
 * update_from_output that ends the step, the worker's forward (another
 * process) and the API server's output processing, both naming the
 * step's requests; each output arrives before its step (it waits for it),
 * each forward two steps late (it finds its step among the done ones).
 *
 * `--changes` (with `--engine`) sends each step's request.ids as the
 * traced process's sender decides (ids_sender.h: keyframes and changes)
 * and gives the writers the list the daemon rebuilds from it
 * (id_streams.h), with what it kept (mst_pf_span.ids_origin): the files
 * are the bytes of a run without it.
 *
 * Usage: bench_step_ids [-k IDS] [-n SPANS] [-r ROUNDS] [--fresh] [--step [--draw-links]] [--engine [--joins] [--changes]]
 *                       [-f json|pftrace]
 *                       [-o FILE]
 *   (-o: the last round's file of the one output -f names is kept at FILE,
 *   to compare the files two builds write), prints, per output, bytes/span, the median spans/s over the rounds
 *   (wall clock of feeding and closing, the writer thread included), the
 *   median process CPU per span (both threads: the figure that holds on a
 *   busy machine) and the formatting thread's alone, and a SUMMARY line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_packet.h"
#include "forward/id_streams.h"
#include "forward/span_args.h"
#include "forward/writer_sinks.h"
#include "wire/perfetto_packet.h"

#define STEP_NS 20000000ll
#define POOL_SPANS 4096

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct pool {
    mst_arena arena;
    char **bufs;             /* the packets: decoded spans point into them */
    mst_pf_span *spans;
    size_t n;
} pool;

/* The text of span i's lists: ids (rolling or fresh), tokens, phase, links. */
static void lists(int i, int ids, bool fresh, char *idt, char *tok, char *ph, char *lk) {
    size_t a = 0, t = 0, l = 0;
    idt[a++] = tok[t++] = lk[l++] = '[';
    for (int k = 0; k < ids; k++) {
        int rid = fresh ? i * ids + k : i + k;
        a += (size_t)sprintf(idt + a, "%s\"cmpl-%08x-%04x\"", k ? "," : "", rid, rid & 0xffff);
        t += (size_t)sprintf(tok + t, "%s\"%d\"", k ? "," : "", k == ids - 1 ? 64 : 1);
        ph[k] = k == ids - 1 ? 'P' : 'd';
        l += (size_t)sprintf(lk + l, "%s{\"trace_id\":\"%032x\",\"span_id\":\"%016x\"}", k ? "," : "",
                             rid + 1, rid + 1);
    }
    idt[a++] = tok[t++] = lk[l++] = ']';
    idt[a] = tok[t] = lk[l] = ph[ids] = 0;
}

/* Decodes packet buf[0..len) into *s. */
static void decode_or_die(const char *buf, size_t len, mst_arena *arena, mst_pf_span *s) {
    char err[200];
    if (mst_perfetto_packet_decode((const uint8_t *)buf, len, arena, s, err, sizeof err) != MST_OK) {
        fprintf(stderr, "bench_step_ids: bad packet: %s\n", err);
        exit(1);
    }
}

/* --joins: span `name` of process pid, thread tid in [start, end] with
 * the step's request.ids (`ids`, its JSON text; NULL: none) into the next
 * slot of the pool. */
static void add_joined_span(pool *p, const char *name, int pid, int tid, uint64_t span_id, int64_t start,
                            int64_t end, const mst_json_slice *ids, int n_ids) {
    size_t cap = 1024 + (ids ? ids->len : 0);
    char *b = p->bufs[p->n] = malloc(cap);
    int len = snprintf(b, cap,
                       MST_PERFETTO_MAGIC "{\"name\":\"%s\",\"category\":\"ms_service_profiler.hook.Step\","
                       "\"trace_id\":\"%032llx\",\"span_id\":\"%016llx\",\"parent_span_id\":\"\","
                       "\"start_time_ns\":%lld,\"end_time_ns\":%lld,\"kind\":1,\"status\":1,"
                       "\"attributes\":{\"process.pid\":%d,\"thread.id\":%d%s%.*s,\"batch.request_count\":%d},"
                       "\"resource_attributes\":{\"service.name\":\"vllm\"},\"links\":[]}",
                       name, (unsigned long long)span_id, (unsigned long long)span_id, (long long)start,
                       (long long)end, pid, tid, ids ? ",\"request.ids\":" : "",
                       ids ? (int)ids->len : 0, ids ? ids->ptr : "", n_ids);
    if (len <= 0 || (size_t)len >= cap) {
        fprintf(stderr, "bench_step_ids: span too long\n");
        exit(1);
    }
    decode_or_die(b, (size_t)len, &p->arena, &p->spans[p->n++]);
}

/* --changes: the step's list as the daemon gives it on (id_streams.h),
 * rebuilt from the change the packet carries and kept in the pool's arena
 * (the stream's memory is reused at its next packet). */
static void apply_change(mst_id_streams *streams, mst_arena *arena, mst_pf_span *st) {
    mst_ids_outcome outcome;
    char err[200] = "";
    if (mst_id_streams_apply(streams, 1, st, arena, &outcome, err, sizeof err) != MST_OK ||
        (outcome != MST_IDS_CHANGE && outcome != MST_IDS_KEYFRAME && outcome != MST_IDS_NONE)) {
        fprintf(stderr, "bench_step_ids: a change not applied: %s\n", err);
        exit(1);
    }
    if (outcome != MST_IDS_CHANGE) return;
    mst_json_slice *v = &st->attrs[st->ids_attr].value;
    char *copy = mst_arena_alloc(arena, v->len);
    if (!copy) {
        fprintf(stderr, "bench_step_ids: out of memory\n");
        exit(1);
    }
    memcpy(copy, v->ptr, v->len);
    v->ptr = copy;
}

/* --engine: bench_forward's step packets of one engine, decoded; with
 * `joins`, each step's update, worker forward and output processing too
 * (POOL_SPANS / 4 steps then). */
static void build_engine_pool(pool *p, int ids, bool joins, bool changes) {
    mst_arena_init(&p->arena);
    mst_ids_sender *sender = changes ? mst_ids_sender_new() : NULL;
    mst_id_streams *streams = changes ? mst_id_streams_new(0) : NULL;
    mst_str *items = changes ? calloc((size_t)ids + 1, sizeof *items) : NULL;
    if (changes && (!sender || !streams || !items)) {
        fprintf(stderr, "bench_step_ids: out of memory\n");
        exit(1);
    }
    p->n = 0;
    p->spans = calloc(POOL_SPANS, sizeof *p->spans);
    p->bufs = calloc(POOL_SPANS, sizeof *p->bufs);
    mst_pf_span *steps = joins ? calloc(POOL_SPANS / 4, sizeof *steps) : NULL;
    bench_batch b;
    bench_batch_init(&b, 0, ids);
    size_t n_steps = joins ? POOL_SPANS / 4 : POOL_SPANS;
    for (size_t i = 0; i < n_steps; i++) {
        char *buf = malloc(bench_step_cap(ids));
        mst_ids_send how;
        if (changes) bench_step_ids_decide(sender, &b, items, &how);
        size_t len = bench_step_format(buf, &b, i + 1, i, changes ? &how : NULL);
        bench_batch_advance(&b);
        mst_pf_span st;
        decode_or_die(buf, len, &p->arena, &st);
        if (changes) apply_change(streams, &p->arena, &st);
        if (!joins) {
            p->bufs[p->n] = buf;
            p->spans[p->n++] = st;
            continue;
        }
        const mst_json_slice *list = mst_span_find_kv(st.attrs, st.n_attrs, "request.ids");
        int64_t t0 = st.start_ns;
        uint64_t id = 0x100000 + 8 * (uint64_t)i;
        /* the output (after the step's end) first: it waits for its step;
         * the update on the engine's thread (bench_step_format's) ends it */
        add_joined_span(p, "vllm.output.process", 4200, 4201, id + 1, t0 + 15300000, t0 + 15800000, list, ids);
        p->bufs[p->n] = buf;
        p->spans[p->n++] = steps[i] = st;
        add_joined_span(p, "vllm.scheduler.update_from_output", 4000, 4100, id + 2, t0 + 15000000,
                        t0 + 15100000, NULL, 0);
        if (i >= 2) { /* the forward of two steps before: its step is done */
            const mst_pf_span *old = &steps[i - 2];
            add_joined_span(p, "vllm.worker.execute_model", 4300, 4301, id + 3, old->start_ns + 300000,
                            old->start_ns + 14800000,
                            mst_span_find_kv(old->attrs, old->n_attrs, "request.ids"), ids);
        }
    }
    free(steps);
    bench_batch_free(&b);
    free(items);
    mst_id_streams_free(streams);
    mst_ids_sender_free(sender);
}

static void build_pool(pool *p, int ids, bool fresh, bool step, bool draw_links) {
    mst_arena_init(&p->arena);
    p->n = POOL_SPANS;
    p->spans = calloc(p->n, sizeof *p->spans);
    size_t cap = 4096 + (size_t)ids * 160;
    p->bufs = calloc(p->n, sizeof *p->bufs);
    char *idt = malloc((size_t)ids * 40 + 8), *tok = malloc((size_t)ids * 8 + 8),
         *ph = malloc((size_t)ids + 8), *lk = malloc((size_t)ids * 80 + 8);
    char request_links[32] = "";
    if (!draw_links) snprintf(request_links, sizeof request_links, ",\"request_links\":%d", ids);
    for (size_t i = 0; i < p->n; i++) {
        lists((int)i, ids, fresh, idt, tok, ph, lk);
        char *b = p->bufs[i] = malloc(cap);
        long long s0 = 1700000000000000000ll + (long long)i * STEP_NS;
        int len;
        if (step)
            len = snprintf(b, cap,
                MST_PERFETTO_MAGIC "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"ms_service_profiler.hook.Schedule\","
                "\"trace_id\":\"%032zx\",\"span_id\":\"%016zx\",\"start_time_ns\":%lld,\"end_time_ns\":%lld,"
                "\"kind\":1,\"status\":1,\"attributes\":{\"process.pid\":200,\"thread.id\":201,"
                "\"process.role\":\"engine_core\",\"request.ids\":%s,\"step.index\":%zu,\"step.tokens\":%s,"
                "\"step.phase\":\"%s\",\"batch.request_count\":%d,\"batch.scheduled_tokens\":%d,"
                "\"scheduler.waiting\":%zu,\"scheduler.running\":%d,\"kv_cache.usage\":0.4375,"
                "\"scheduler.max_num_seqs\":256,\"scheduler.max_num_batched_tokens\":8192},"
                "\"resource_attributes\":{\"service.name\":\"vllm\",\"process.pid\":200,"
                "\"telemetry.sdk.name\":\"mstrace\",\"telemetry.sdk.language\":\"c\"},\"links\":%s%s}",
                i + 0x1000, i + 1, s0, s0 + 400000, idt, i, tok, ph, ids, ids + 63, i % 7, ids, lk,
                request_links);
        else
            len = snprintf(b, cap,
                MST_PERFETTO_MAGIC
                "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"ms_service_profiler.hook.Schedule\","
                "\"trace_id\":\"%032zx\",\"span_id\":\"%016zx\",\"parent_span_id\":\"\","
                "\"start_time_ns\":%lld,\"end_time_ns\":%lld,\"kind\":1,\"status\":1,"
                "\"attributes\":{\"process.pid\":4000,\"thread.id\":4100,"
                "\"hook.module\":\"vllm.v1.core.sched.scheduler\",\"hook.class\":\"Scheduler\","
                "\"hook.method\":\"schedule\",\"batch.size\":%d,\"input.len\":%zu,\"output.len\":%zu,"
                "\"model\":\"Qwen2.5-0.5B-Instruct\",\"is_prefill\":true,\"kv_cache.usage\":0.4375,"
                "\"request.ids\":%s},"
                "\"resource_attributes\":{\"service.name\":\"vllm\",\"host.name\":\"node-1\"},"
                "\"links\":[{\"trace_id\":\"%032zx\",\"span_id\":\"%016zx\"}]}",
                i + 1, i + 1, s0, s0 + 500000, ids, 100 + i % 900, i % 300, idt, i + 7, i + 7);
        char err[200];
        if (len <= 0 || (size_t)len >= cap ||
            mst_perfetto_packet_decode((const uint8_t *)b, (size_t)len, &p->arena, &p->spans[i], err,
                                       sizeof err) != MST_OK) {
            fprintf(stderr, "bench_step_ids: bad packet: %s\n", len > 0 && (size_t)len < cap ? err : "too long");
            exit(1);
        }
    }
    free(idt);
    free(tok);
    free(ph);
    free(lk);
}

/* Feeds n spans (the pool again and again, moved on in time) and closes;
 * returns the wall seconds, *fmt_cpu this thread's CPU seconds (the
 * formatting: what the daemon's formatting thread does), *cpu the process CPU seconds (this thread and
 * the writer's) and *bytes the file's size. */
static double run(const char *path, const pool *p, size_t n, double *cpu, double *fmt_cpu,
                  unsigned long long *bytes) {
    mst_output_sink o;
    char err[300];
    if (mst_writer_sink_open(path, MST_PERFETTO_FORMAT_AUTO, 1, &o, err, sizeof err) != MST_OK) {
        fprintf(stderr, "bench_step_ids: %s\n", err);
        exit(1);
    }
    double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID),
           f0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    uint64_t ms = 1;
    for (size_t i = 0; i < n; i++) {
        mst_pf_span s = p->spans[i % p->n];
        int64_t shift = (int64_t)(i / p->n) * POOL_SPANS * STEP_NS;
        s.start_ns += shift;
        s.end_ns += shift;
        o.ops->add_span(o.self, &s);
        if (i % 1024 == 1023) { /* a batch boundary, as the formatting thread sees it */
            o.ops->tick(o.self, ms++);
            while (o.ops->handoff(o.self)) usleep(100);
        }
    }
    mst_chrome_stats cs;
    o.ops->close(o.self, &cs);
    double wall = now_s(CLOCK_MONOTONIC) - t0;
    *cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    *fmt_cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - f0;
    *bytes = cs.bytes_written;
    return wall;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int ids = 8, rounds = 5;
    long long n = 200000;
    bool fresh = false, step = false, draw_links = false, engine = false, joins = false, changes = false;
    int only = -1; /* -f: one output only */
    const char *keep = NULL; /* -o */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-k") == 0 && i + 1 < argc) ids = atoi(argv[++i]);
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) n = atoll(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--fresh") == 0) fresh = true;
        else if (strcmp(argv[i], "--step") == 0) step = true;
        else if (strcmp(argv[i], "--draw-links") == 0) draw_links = true;
        else if (strcmp(argv[i], "--engine") == 0) engine = true;
        else if (strcmp(argv[i], "--joins") == 0) joins = true;
        else if (strcmp(argv[i], "--changes") == 0) changes = true;
        else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) keep = argv[++i];
        else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc) {
            i++;
            only = strcmp(argv[i], "json") == 0 ? 0 : strcmp(argv[i], "pftrace") == 0 ? 1 : -2;
            if (only == -2) {
                fprintf(stderr, "bench_step_ids: -f json or -f pftrace\n");
                return 2;
            }
        }
        else {
            fprintf(stderr, "usage: bench_step_ids [-k IDS] [-n SPANS] [-r ROUNDS] [--fresh] [--step [--draw-links]] [--engine [--joins] [--changes]] [-f json|pftrace] [-o FILE]\n");
            return 2;
        }
    }
    if (keep && only < 0) {
        fprintf(stderr, "bench_step_ids: -o needs -f json or -f pftrace\n");
        return 2;
    }
    if (ids < 1 || ids > 1024 || n < 1 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "bench_step_ids: -k 1..1024, -n >= 1, -r 1..99\n");
        return 2;
    }
    char dir[] = "/tmp/bench-step-ids-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    pool p;
    if (joins && !engine) {
        fprintf(stderr, "bench_step_ids: --joins needs --engine\n");
        return 2;
    }
    if (changes && !engine) {
        fprintf(stderr, "bench_step_ids: --changes needs --engine\n");
        return 2;
    }
    if (engine) build_engine_pool(&p, ids, joins, changes);
    else build_pool(&p, ids, fresh, step, draw_links);
    static const char *const ext[2] = {"json", "pftrace"};
    double rate[2][99] = {{0}}, cpu_us[2][99] = {{0}}, fmt_us[2][99] = {{0}}, per_span[2] = {0, 0};
    for (int r = 0; r < rounds; r++)
        for (int f = 0; f < 2; f++) { /* alternated */
            if (only >= 0 && f != only) continue;
            char path[600];
            snprintf(path, sizeof path, "%s/out.%s", dir, ext[f]);
            unsigned long long bytes;
            double cpu, fmt_cpu;
            rate[f][r] = (double)n / run(path, &p, (size_t)n, &cpu, &fmt_cpu, &bytes);
            cpu_us[f][r] = cpu / (double)n * 1e6;
            fmt_us[f][r] = fmt_cpu / (double)n * 1e6;
            per_span[f] = (double)bytes / (double)n;
            if (keep && r == rounds - 1 && rename(path, keep) != 0) {
                fprintf(stderr, "bench_step_ids: cannot keep the file at %s\n", keep);
                return 1;
            }
            unlink(path);
        }
    printf("%d request ids per span (%s, %s); %lld spans per run, %d rounds\n", ids,
           engine ? "one engine's batch" : fresh ? "fresh ids every span" : "rolling batch",
           engine ? (joins ? "bench_forward's step records, each with its update, forward and output" : "bench_forward's step records") : !step ? "bench packet" : draw_links ? "full step records, every link drawn" : "full step records",
           n, rounds);
    for (int f = 0; f < 2; f++) {
        qsort(rate[f], (size_t)rounds, sizeof(double), cmp_double);
        qsort(cpu_us[f], (size_t)rounds, sizeof(double), cmp_double);
        qsort(fmt_us[f], (size_t)rounds, sizeof(double), cmp_double);
        printf("%-8s %8.0f bytes/span  %9.0f spans/s wall (median; min %.0f, max %.0f)  %.3f us CPU/span "
               "(median; = %.0f spans per CPU second; formatting thread %.3f us)\n", ext[f], per_span[f],
               rate[f][rounds / 2], rate[f][0], rate[f][rounds - 1], cpu_us[f][rounds / 2],
               1e6 / cpu_us[f][rounds / 2], fmt_us[f][rounds / 2]);
    }
    printf("SUMMARY ids=%d json_bytes=%.0f pftrace_bytes=%.0f ratio=%.2f json_spans_s=%.0f "
           "pftrace_spans_s=%.0f json_cpu_us=%.3f pftrace_cpu_us=%.3f\n", ids, per_span[0], per_span[1],
           per_span[1] > 0 ? per_span[0] / per_span[1] : 0, rate[0][rounds / 2], rate[1][rounds / 2],
           cpu_us[0][rounds / 2], cpu_us[1][rounds / 2]);
    mst_arena_release(&p.arena);
    for (size_t i = 0; i < p.n; i++) free(p.bufs[i]);
    free(p.bufs);
    free(p.spans);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}
