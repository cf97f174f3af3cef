/*
 * bench_packet.h — the upstream hook-span packets both forwarder
 * benchmarks send (bench_forward: over the socket; bench_forward_cpu:
 * in-process), so their figures describe the same input.
 *
 * The bench packet: ~700 bytes, 10 attributes, 1–2 links. Ids are
 * placeholders (S…, L…, M…) that the benchmarks overwrite per span, located
 * by bench_packet_placeholders().
 *
 * Step packets (--ids N): a `vllm.scheduler.schedule` step record carrying N
 * request ids (`request.ids`, `step.tokens`, `step.phase`, `step.new_ids`,
 * `step.finished_ids` and the batch/scheduler numbers; docs/architecture.md
 * "1a"). Why a rolling batch: a real engine keeps most of its running
 * requests from one step to the next — a few finish, a few join — so each id
 * recurs in the many steps of its request's life, and consumers (request
 * tracks, interning) see that reuse. Each request decodes for 32–287 steps
 * (a fixed pseudo-random sequence per client), then finishes and leaves the
 * batch; a new one (with a 64–1,023-token prefill) joins at the end, as in
 * vLLM's own order (bench_batch_advance). Ids look like vLLM's:
 * "chatcmpl-<32 hex>-<8 hex>".
 *
 * A step's request.ids goes whole, or — given the decision of a traced
 * process's own sender (wire/ids_sender.h, bench_step_ids_decide) — as a
 * change to the client's previous list with ids_stream / ids_seq (magic
 * MSPF_PERFETTO_V2; docs/forwarder.md "Request id lists as changes"), the
 * bytes the forwarder client's encoder writes for the same step.
 */
#ifndef MST_BENCH_PACKET_H
#define MST_BENCH_PACKET_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/ids_sender.h"

/* Writes magic + JSON for (thread, slot) into out; returns its length. */
static inline int bench_packet_format(char *out, size_t cap, int thread, int slot) {
    int two_links = slot % 2;
    return snprintf(out, cap,
        "MSPF_PERFETTO_V1\n"
        "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"ms_service_profiler.hook.Schedule\","
        "\"trace_id\":\"%032x\",\"span_id\":\"SSSSSSSSSSSSSSSS\",\"parent_span_id\":\"\","
        "\"start_time_ns\":%llu,\"end_time_ns\":%llu,\"kind\":1,\"status\":1,"
        "\"attributes\":{\"process.pid\":%d,\"thread.id\":%d,\"request.id\":\"chatcmpl-%08x\","
        "\"hook.module\":\"vllm.v1.core.sched.scheduler\",\"hook.class\":\"Scheduler\","
        "\"hook.method\":\"schedule\",\"batch.size\":%d,\"input.len\":%d,\"output.len\":%d,"
        "\"model\":\"Qwen2.5-0.5B-Instruct\",\"is_prefill\":true,\"kv_cache.usage\":0.4375},"
        "\"resource_attributes\":{\"service.name\":\"vllm\",\"host.name\":\"node-1\"},"
        "\"links\":[{\"trace_id\":\"%032x\",\"span_id\":\"LLLLLLLLLLLLLLLL\"}%s]}",
        thread + 1, 1700000000000000000ull + (unsigned long long)slot * 1000,
        1700000000000500000ull + (unsigned long long)slot * 1000, 4000 + thread, 4100 + thread,
        (unsigned)slot, slot % 64 + 1, 100 + slot % 900, slot % 300, thread + 1,
        two_links ? ",{\"trace_id\":\"00000000000000000000000000000001\","
                    "\"span_id\":\"MMMMMMMMMMMMMMMM\"}" : "");
}

/* Offsets (from `base`) of the span id and link span id placeholders in a
 * formatted packet at `pkt`; *link2 is 0 when the packet has one link. */
static inline void bench_packet_placeholders(const char *base, const char *pkt, size_t *span,
                                             size_t *link1, size_t *link2) {
    *span = (size_t)(strstr(pkt, "SSSSSSSSSSSSSSSS") - base);
    *link1 = (size_t)(strstr(pkt, "LLLLLLLLLLLLLLLL") - base);
    const char *m = strstr(pkt, "MMMMMMMMMMMMMMMM");
    *link2 = m ? (size_t)(m - base) : 0;
}

/* ---- step packets: a rolling batch of N requests per client ---- */

#define BENCH_ID_LEN 52 /* "\"chatcmpl-" + 32 hex + "-" + 8 hex + "\"", quotes included */

typedef struct bench_batch {
    int n;              /* requests per step */
    int client;
    uint64_t rng;       /* xorshift64 state: the same sequence every run */
    uint64_t next_req;  /* requests started so far (numbers the ids) */
    uint64_t step;      /* steps written so far */
    char *id;           /* per slot: the request's id as a JSON string, BENCH_ID_LEN bytes */
    int *left;          /* per slot: decode steps left */
    int *prompt;        /* per slot: prompt tokens; > 0 while its prefill is due */
    char *finished;     /* ids (as id) of the requests finished since the previous step */
    int n_finished;
} bench_batch;

static inline uint64_t bench_rand(bench_batch *b) {
    uint64_t x = b->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return b->rng = x;
}

static inline char *bench_put_hex(char *p, uint64_t v, int digits) {
    static const char hx[] = "0123456789abcdef";
    for (int i = digits - 1; i >= 0; i--) {
        p[i] = hx[v & 15];
        v >>= 4;
    }
    return p + digits;
}

/* Writes "\"chatcmpl-<32 hex>-<8 hex>\"" (BENCH_ID_LEN bytes) for request
 * `req` of `client`: vLLM's request id shape (a uuid4 hex and the engine's
 * suffix). */
static inline void bench_put_id(char *p, int client, uint64_t req) {
    uint64_t h = (req + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(client + 1) * 0xC2B2AE3D27D4EB4Full;
    *p++ = '"';
    memcpy(p, "chatcmpl-", 9);
    p = bench_put_hex(p + 9, h, 16);
    p = bench_put_hex(p, h * 0xff51afd7ed558ccdull, 16);
    *p++ = '-';
    p = bench_put_hex(p, (h * 0x94d049bb133111ebull) >> 32, 8);
    *p = '"';
}

static inline void bench_batch_join(bench_batch *b, int slot) {
    bench_put_id(b->id + (size_t)slot * BENCH_ID_LEN, b->client, b->next_req++);
    b->left[slot] = 32 + (int)(bench_rand(b) % 256);
    b->prompt[slot] = 64 + (int)(bench_rand(b) % 960);
}

/* A client's batch of n requests, already running (mid-decode). */
static inline void bench_batch_init(bench_batch *b, int client, int n) {
    memset(b, 0, sizeof *b);
    b->n = n;
    b->client = client;
    b->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(client + 1) << 32);
    b->id = malloc((size_t)n * BENCH_ID_LEN);
    b->left = calloc((size_t)n, sizeof *b->left);
    b->prompt = calloc((size_t)n, sizeof *b->prompt);
    b->finished = malloc((size_t)n * BENCH_ID_LEN);
    for (int i = 0; i < n; i++) {
        bench_batch_join(b, i);
        b->left[i] = 1 + (int)(bench_rand(b) % (uint64_t)b->left[i]);
        b->prompt[i] = 0;
    }
}

static inline void bench_batch_free(bench_batch *b) {
    free(b->id);
    free(b->left);
    free(b->prompt);
    free(b->finished);
}

/* The next step, in vLLM's order: requests whose decode is done finish and
 * leave the batch, the others keep their order, and as many new requests
 * (their prefill is this step) join at the end. That is how vLLM's v1
 * scheduler lists a step: the running requests first, in `Scheduler.running`'s
 * order (finished ones removed with `remove_all`, which keeps the order), then
 * the requests admitted from the queue, which are appended to `running`. */
static inline void bench_batch_advance(bench_batch *b) {
    b->n_finished = 0;
    int kept = 0;
    for (int i = 0; i < b->n; i++) {
        if (b->prompt[i] > 0) { /* prefilled last step: decoding now */
            b->prompt[i] = 0;
        } else if (--b->left[i] <= 0) {
            memcpy(b->finished + (size_t)b->n_finished++ * BENCH_ID_LEN,
                   b->id + (size_t)i * BENCH_ID_LEN, BENCH_ID_LEN);
            continue;
        }
        if (kept != i) {
            memcpy(b->id + (size_t)kept * BENCH_ID_LEN, b->id + (size_t)i * BENCH_ID_LEN, BENCH_ID_LEN);
            b->left[kept] = b->left[i];
            b->prompt[kept] = b->prompt[i];
        }
        kept++;
    }
    while (kept < b->n) bench_batch_join(b, kept++);
    b->step++;
}

static inline char *bench_put_str(char *p, const char *s) {
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Writes `n` ids of `ids` (BENCH_ID_LEN bytes each) as JSON list items. */
static inline char *bench_put_ids(char *p, const char *ids, int n) {
    for (int i = 0; i < n; i++) {
        if (i) *p++ = ',';
        memcpy(p, ids + (size_t)i * BENCH_ID_LEN, BENCH_ID_LEN);
        p += BENCH_ID_LEN;
    }
    return p;
}

/* Writes "\"<v>\"" for 0 <= v < 10,000. */
static inline char *bench_put_quoted_uint(char *p, int v) {
    if (v < 10) { /* a decode step's 1 token: most items */
        p[0] = '"';
        p[1] = (char)('0' + v);
        p[2] = '"';
        return p + 3;
    }
    char d[4];
    int k = 0;
    do {
        d[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && k < 4);
    *p++ = '"';
    while (k) *p++ = d[--k];
    *p++ = '"';
    return p;
}

/* Bytes a step packet of n requests can take at most. */
static inline size_t bench_step_cap(int n) {
    /* request.ids, step.new_ids and step.finished_ids (each at most n ids),
     * step.tokens (at most 7 bytes an item), step.phase, the rest */
    return 2048 + (size_t)n * (3 * (BENCH_ID_LEN + 1) + 7 + 1);
}

/* How b's current request.ids goes out, decided by a traced process's
 * sender for this client's stream (the step span's name on its thread):
 * items needs room for b->n ids. */
static inline void bench_step_ids_decide(mst_ids_sender *s, const bench_batch *b, mst_str *items,
                                         mst_ids_send *how) {
    for (int i = 0; i < b->n; i++)
        items[i] = (mst_str){b->id + (size_t)i * BENCH_ID_LEN + 1, BENCH_ID_LEN - 2};
    mst_ids_sender_next(s, "vllm.scheduler.schedule", 23, 4100 + b->client, items, (uint32_t)b->n, how);
}

/* ---- the formatting the benchmarks use ----
 * Small writers instead of sprintf: the bench client's formatting is the
 * benchmark's own cost, not mstrace's (a traced process's exporter has its
 * own encoders), and sprintf was a fifth of a client's instructions at
 * 256 ids. bench_step_format_check holds it to the sprintf bytes. */

/* Writes v in decimal. */
static inline char *bench_put_u64(char *p, uint64_t v) {
    char d[20];
    int k = 0;
    do {
        d[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k) *p++ = d[--k];
    return p;
}

/* Writes "\"<32 hex of hi, lo>\"". */
static inline char *bench_put_trace_id(char *p, uint64_t hi, uint64_t lo) {
    *p++ = '"';
    p = bench_put_hex(p, hi, 16);
    p = bench_put_hex(p, lo, 16);
    *p++ = '"';
    return p;
}

/* {"left":[positions],"joined":[ids]}: the list as the change `how` says. */
static inline char *bench_put_ids_change(char *p, const bench_batch *b, const mst_ids_send *how) {
    p = bench_put_str(p, "{\"left\":[");
    for (uint32_t i = 0; i < how->n_left; i++) {
        if (i) *p++ = ',';
        p = bench_put_u64(p, how->left[i]);
    }
    p = bench_put_str(p, "],\"joined\":[");
    p = bench_put_ids(p, b->id + (size_t)how->joined_from * BENCH_ID_LEN, b->n - (int)how->joined_from);
    return bench_put_str(p, "]}");
}

/* The step record's per-request lists of b's current step (step.tokens,
 * step.phase, step.new_ids, step.finished_ids), each after a comma, as both
 * formatters write them; *tokens gets the step's scheduled tokens. */
static inline char *bench_put_step_lists(char *p, const bench_batch *b, long *tokens) {
    p = bench_put_str(p, ",\"step.tokens\":[");
    int n_new = 0;
    for (int i = 0; i < b->n; i++) {
        int t = b->prompt[i] > 0 ? b->prompt[i] : 1;
        *tokens += t;
        n_new += b->prompt[i] > 0;
        if (i) *p++ = ',';
        p = bench_put_quoted_uint(p, t);
    }
    p = bench_put_str(p, "],\"step.phase\":\"");
    for (int i = 0; i < b->n; i++) *p++ = b->prompt[i] > 0 ? 'P' : 'd';
    *p++ = '"';
    if (n_new) {
        p = bench_put_str(p, ",\"step.new_ids\":[");
        for (int i = 0, k = 0; i < b->n; i++)
            if (b->prompt[i] > 0) {
                if (k++) *p++ = ',';
                p = bench_put_ids(p, b->id + (size_t)i * BENCH_ID_LEN, 1);
            }
        *p++ = ']';
    }
    if (b->n_finished) {
        p = bench_put_str(p, ",\"step.finished_ids\":[");
        p = bench_put_ids(p, b->finished, b->n_finished);
        *p++ = ']';
    }
    return p;
}

/* request.ids's value — whole, or as the change `change` (NULL: whole)
 * written by put_change — then bench_put_step_lists. */
static inline char *bench_put_request_lists(char *p, const bench_batch *b, const mst_ids_send *change,
                                            char *(*put_change)(char *, const bench_batch *,
                                                                const mst_ids_send *),
                                            long *tokens) {
    if (change) {
        p = put_change(p, b, change);
    } else {
        *p++ = '[';
        p = bench_put_ids(p, b->id, b->n);
        *p++ = ']';
    }
    return bench_put_step_lists(p, b, tokens);
}

/* Writes magic + JSON of b's current step into out (bench_step_cap bytes)
 * for the client's thread; span_id links to prev_span_id (0: no link);
 * `how` (NULL: whole, as an older client sends) is the sender's decision
 * for this step's list. Returns its length. */
static inline size_t bench_step_format(char *out, const bench_batch *b, uint64_t span_id,
                                       uint64_t prev_span_id, const mst_ids_send *how) {
    char *p = out;
    int c = b->client;
    uint64_t t0 = 1700000000000000000ull + b->step * 20000000ull;
    bool change = how && how->in_stream && how->change;
    p = bench_put_str(p, change ? "MSPF_PERFETTO_V2\n" : "MSPF_PERFETTO_V1\n");
    p = bench_put_str(p, "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"ms_service_profiler.hook.Schedule\","
                         "\"trace_id\":");
    p = bench_put_trace_id(p, (uint64_t)(c + 1), span_id);
    p = bench_put_str(p, ",\"span_id\":\"");
    p = bench_put_hex(p, span_id, 16);
    p = bench_put_str(p, "\",\"parent_span_id\":\"\",\"start_time_ns\":");
    p = bench_put_u64(p, t0);
    p = bench_put_str(p, ",\"end_time_ns\":");
    p = bench_put_u64(p, t0 + 150000);
    p = bench_put_str(p, ",\"kind\":1,\"status\":1,\"attributes\":{\"process.pid\":");
    p = bench_put_u64(p, (uint64_t)(4000 + c));
    p = bench_put_str(p, ",\"thread.id\":");
    p = bench_put_u64(p, (uint64_t)(4100 + c));
    p = bench_put_str(p, ",\"hook.module\":\"vllm.v1.core.sched.scheduler\",\"hook.class\":\"Scheduler\","
                         "\"hook.method\":\"schedule\",\"step.index\":");
    p = bench_put_u64(p, b->step);
    p = bench_put_str(p, ",\"request.ids\":");
    long tokens = 0;
    p = bench_put_request_lists(p, b, change ? how : NULL, bench_put_ids_change, &tokens);
    p = bench_put_str(p, ",\"batch.request_count\":");
    p = bench_put_u64(p, (uint64_t)b->n);
    p = bench_put_str(p, ",\"batch.scheduled_tokens\":");
    p = bench_put_u64(p, (uint64_t)tokens);
    p = bench_put_str(p, ",\"scheduler.waiting\":");
    p = bench_put_u64(p, b->step % 4);
    p = bench_put_str(p, ",\"scheduler.running\":");
    p = bench_put_u64(p, (uint64_t)b->n);
    p = bench_put_str(p, ",\"kv_cache.usage\":0.4375,"
                         "\"scheduler.max_num_seqs\":256,\"scheduler.max_num_batched_tokens\":8192},"
                         "\"resource_attributes\":{\"service.name\":\"vllm\",\"host.name\":\"node-1\"},"
                         "\"links\":[");
    if (prev_span_id) {
        p = bench_put_str(p, "{\"trace_id\":");
        p = bench_put_trace_id(p, (uint64_t)(c + 1), prev_span_id);
        p = bench_put_str(p, ",\"span_id\":\"");
        p = bench_put_hex(p, prev_span_id, 16);
        p = bench_put_str(p, "\"}");
    }
    *p++ = ']';
    if (how && how->in_stream) {
        p = bench_put_str(p, ",\"ids_stream\":");
        p = bench_put_u64(p, how->stream);
        p = bench_put_str(p, ",\"ids_seq\":");
        p = bench_put_u64(p, how->seq);
    }
    *p++ = '}';
    return (size_t)(p - out);
}

/* ---- the reference formatting (sprintf), for the self-check only ----
 * The step packet as it was first written with sprintf: bench_step_format
 * (below) writes the same bytes with small writers, and
 * bench_step_format_check compares the two. */

/* {"left":[positions],"joined":[ids]}: the list as the change `how` says. */
static inline char *bench_put_ids_change_printf(char *p, const bench_batch *b, const mst_ids_send *how) {
    p = bench_put_str(p, "{\"left\":[");
    for (uint32_t i = 0; i < how->n_left; i++) p += sprintf(p, i ? ",%u" : "%u", how->left[i]);
    p = bench_put_str(p, "],\"joined\":[");
    p = bench_put_ids(p, b->id + (size_t)how->joined_from * BENCH_ID_LEN, b->n - (int)how->joined_from);
    return bench_put_str(p, "]}");
}

/* bench_step_format's bytes, through sprintf. */
static inline size_t bench_step_format_printf(char *out, const bench_batch *b, uint64_t span_id,
                                       uint64_t prev_span_id, const mst_ids_send *how) {
    char *p = out;
    int c = b->client;
    uint64_t t0 = 1700000000000000000ull + b->step * 20000000ull;
    bool change = how && how->in_stream && how->change;
    p = bench_put_str(p, change ? "MSPF_PERFETTO_V2\n" : "MSPF_PERFETTO_V1\n");
    p += sprintf(p, "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"ms_service_profiler.hook.Schedule\","
                 "\"trace_id\":\"%016llx%016llx\",\"span_id\":\"%016llx\",\"parent_span_id\":\"\","
                 "\"start_time_ns\":%llu,\"end_time_ns\":%llu,\"kind\":1,\"status\":1,"
                 "\"attributes\":{\"process.pid\":%d,\"thread.id\":%d,"
                 "\"hook.module\":\"vllm.v1.core.sched.scheduler\",\"hook.class\":\"Scheduler\","
                 "\"hook.method\":\"schedule\",\"step.index\":%llu,\"request.ids\":",
                 (unsigned long long)(c + 1), (unsigned long long)span_id, (unsigned long long)span_id,
                 (unsigned long long)t0, (unsigned long long)(t0 + 150000), 4000 + c, 4100 + c,
                 (unsigned long long)b->step);
    long tokens = 0;
    p = bench_put_request_lists(p, b, change ? how : NULL, bench_put_ids_change_printf, &tokens);
    p += sprintf(p, ",\"batch.request_count\":%d,\"batch.scheduled_tokens\":%ld,"
                 "\"scheduler.waiting\":%d,\"scheduler.running\":%d,\"kv_cache.usage\":0.4375,"
                 "\"scheduler.max_num_seqs\":256,\"scheduler.max_num_batched_tokens\":8192},"
                 "\"resource_attributes\":{\"service.name\":\"vllm\",\"host.name\":\"node-1\"},"
                 "\"links\":[",
                 b->n, tokens, (int)(b->step % 4), b->n);
    if (prev_span_id)
        p += sprintf(p, "{\"trace_id\":\"%016llx%016llx\",\"span_id\":\"%016llx\"}",
                     (unsigned long long)(c + 1), (unsigned long long)prev_span_id,
                     (unsigned long long)prev_span_id);
    *p++ = ']';
    if (how && how->in_stream)
        p += sprintf(p, ",\"ids_stream\":%u,\"ids_seq\":%llu", how->stream, (unsigned long long)how->seq);
    *p++ = '}';
    return (size_t)(p - out);
}


/* Whether bench_step_format writes the sprintf bytes: `steps` steps of a
 * rolling batch of n ids (client `client`), each list as its sender
 * decides (changes, keyframes) and, every third step, whole. Returns the
 * first step that differs, or -1. */
static inline long bench_step_format_check(int client, int n, long steps) {
    bench_batch b;
    bench_batch_init(&b, client, n);
    mst_ids_sender *s = mst_ids_sender_new();
    mst_str *items = malloc((size_t)(n ? n : 1) * sizeof *items);
    size_t cap = bench_step_cap(n);
    char *a = malloc(cap), *c = malloc(cap);
    long bad = -1;
    for (long i = 0; s && items && a && c && i < steps && bad < 0; i++) {
        mst_ids_send how;
        bench_step_ids_decide(s, &b, items, &how);
        const mst_ids_send *h = i % 3 == 2 ? NULL : &how;
        uint64_t span = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1), prev = i ? span - 1 : 0;
        size_t la = bench_step_format(a, &b, span, prev, h);
        size_t lc = bench_step_format_printf(c, &b, span, prev, h);
        if (la != lc || memcmp(a, c, la) != 0) bad = i;
        bench_batch_advance(&b);
    }
    if (!s || !items || !a || !c) bad = 0;
    free(a);
    free(c);
    free(items);
    mst_ids_sender_free(s);
    bench_batch_free(&b);
    return bad;
}

#endif
