/*
 * test_timeline_runs.c — the timeline's engine runs (forward/timeline.c:
 * scheduling steps with split request.ids counted lazily per engine)
 * against the eager path (mst_timeline_set_lazy_runs(tl, false)): the same
 * random span sequences go to both, and every sink callback (request tracks
 * with their phases, steps and counts, counters, engine steps) must be the
 * same, in the same order, field by field.
 *
 * The sequences (fixed seeds, bounded by steps): three engines' rolling
 * batches in vLLM's order (requests finish in their slots, new ones join at
 * the end, chunked prefills p/P, preemptions and resumes through the step
 * record's lists), a scheduling process that is no followed engine, one
 * engine's step naming another's request, duplicates, shuffles, steps out
 * of order (an earlier or equal start), missing or short step.phase, steps
 * read as JSON (not split), items without a hint, worker forwards (batch
 * spans), output spans, vllm.request spans, ticks (the grace and idle
 * completions, a clock set back), hints zeroed (the writer's interning
 * restart), and a table small enough that attached entries are evicted.
 * Split request.ids carry the change a writer vouches for (as the
 * `.pftrace` writer's lists rebuilt by the forwarder): the stream's
 * previous list without some positions, then the joined ones, numbered by
 * a seq per stream. Two engines share one stream (their seqs interleave);
 * lists read as JSON or too short for a run still advance the stream; and
 * some vouches are stale or wrong: a seq that no list of the stream has,
 * an n_prev off by one (with a left position to match), another engine's
 * stream key, a connection restarting the seqs, vouches kept across the
 * hints zeroed, a list of the stream the timeline never saw. (A wrong
 * vouch that names a list the timeline did see cannot be told from a true
 * one: the writer's numbering is trusted, so the lies here name none.)
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "forward/timeline.h"
#include "testlib.h"
#include "wire/perfetto_packet.h"

/* ---- what a sink was told: one text line per callback ---- */

typedef struct log_buf {
    char *p;
    size_t n, cap;
    size_t lines;
} log_buf;

static void log_add(log_buf *b, const char *fmt, ...) {
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    size_t len = (size_t)k < sizeof line ? (size_t)k : sizeof line - 1;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->n + len + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) abort();
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, line, len);
    b->n += len;
    b->p[b->n++] = '\n';
    b->lines++;
}

static void on_request(void *self, const mst_tl_request *r) {
    char ph[2048];
    size_t o = 0;
    for (unsigned i = 0; i < r->n_phases && o < sizeof ph - 64; i++)
        o += (size_t)snprintf(ph + o, sizeof ph - o, " [%s %lld %lld]", r->phases[i].name,
                              (long long)r->phases[i].start_ns, (long long)r->phases[i].end_ns);
    ph[o] = 0;
    log_add(self, "R %.*s pid=%lld %lld..%lld span=%d steps=%u pre=%u lane=%u n=%u%s",
            (int)r->id_len, r->id, (long long)r->pid, (long long)r->start_ns, (long long)r->end_ns,
            r->has_request_span, r->steps, r->preemptions, r->lane, r->n_phases, ph);
}

static void on_counter(void *self, const mst_tl_counter *c) {
    log_add(self, "C %s pid=%lld ts=%lld d=%d i=%lld v=%a raw=%.*s", c->name, (long long)c->pid,
            (long long)c->ts_ns, c->is_double, (long long)c->i, c->d, (int)c->raw_len,
            c->raw ? c->raw : "");
}

static void on_step(void *self, const mst_tl_step *st) {
    log_add(self, "S pid=%lld tid=%lld idx=%lld %lld..%lld req=%lld tok=%lld flow=%llx j=%u l=%u",
            (long long)st->pid, (long long)st->tid, (long long)st->index, (long long)st->start_ns,
            (long long)st->end_ns, (long long)st->requests, (long long)st->tokens,
            (unsigned long long)st->flow, st->n_joined, st->n_later);
}

/* ---- the generator ---- */

static uint64_t rng;
static uint32_t rnd(uint32_t n) { /* 0 .. n-1 */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}
static bool chance(uint32_t one_in) { return rnd(one_in) == 0; }

#define MAX_IDS 20000
#define MAX_BATCH 40
#define N_ENGINES 4 /* the last one's steps carry no step.index: no followed engine */

typedef struct rid {
    char text[16];
    uint64_t hint[2];  /* per timeline: 0 eager, 1 lazy */
    int chunks_left;   /* prefill chunks still to come (P, then the last p) */
    int64_t arrival_ns;
} rid;

static rid ids[MAX_IDS];
static int n_ids;

typedef struct engine {
    int64_t pid, t_ns, index;
    int run[MAX_BATCH], n_run;
    int preempted[MAX_BATCH], n_pre;
} engine;

/* A list attribute of the span being built: its ids, split for the
 * timelines (or not). */
typedef struct list_attr {
    const char *key;
    int v[MAX_BATCH * 2 + 2];
    int n;
} list_attr;

/* A writer's stream of request.ids lists (what it vouches against). */
typedef struct wstream {
    int v[MAX_BATCH * 2 + 2], n;
    bool have;
    uint64_t conn;
    int64_t seq;
} wstream;
#define N_STREAMS 3 /* engines 1 and 2 share stream 1 */
static int stream_of(int e) { return e == 0 ? 0 : e <= 2 ? 1 : 2; }

typedef struct world {
    wstream ws[N_STREAMS];
    mst_timeline *tl[2];
    log_buf log[2];
    mst_tl_sink sink[2];
    engine eng[N_ENGINES];
    int pending_req[64], n_pending; /* finished requests whose vllm.request span is still to come */
    int64_t pending_end[64];
    uint64_t now_ms;
    uint64_t span_no;
} world;

static int new_id(world *w, int64_t ts) {
    (void)w;
    if (n_ids == MAX_IDS) return -1;
    rid *r = &ids[n_ids];
    snprintf(r->text, sizeof r->text, "req-%d", n_ids);
    r->hint[0] = r->hint[1] = 0;
    r->chunks_left = chance(3) ? 1 + (int)rnd(4) : 1;
    r->arrival_ns = ts - 1000000 - (int64_t)rnd(5000000);
    return n_ids++;
}

static size_t put_list(char *p, size_t cap, const list_attr *l) {
    size_t o = (size_t)snprintf(p, cap, ",\"%s\":[", l->key);
    for (int i = 0; i < l->n && o < cap; i++)
        o += (size_t)snprintf(p + o, cap - o, "%s\"%s\"", i ? "," : "", ids[l->v[i]].text);
    if (o < cap) o += (size_t)snprintf(p + o, cap - o, "]");
    return o;
}

/* The change vouched for the request.ids list fed next (NULL: none). */
static const mst_tl_list_change *g_vouch;

/* Feeds one span (name, pid, times, extra attributes `attrs` as JSON text,
 * lists) to both timelines; `split`: the lists are given split (with a
 * hint each unless `no_hint`). */
static void feed(world *w, const char *name, int64_t pid, int64_t start, int64_t end,
                 const char *attrs, const list_attr *lists, int n_lists, bool split) {
    static char json[65536];
    size_t o = (size_t)snprintf(json, sizeof json,
                                MST_PERFETTO_MAGIC
                                "{\"name\":\"%s\",\"category\":\"c\",\"trace_id\":\"%032llx\","
                                "\"span_id\":\"%016llx\",\"parent_span_id\":\"\",\"start_time_ns\":%lld,"
                                "\"end_time_ns\":%lld,\"kind\":1,\"status\":1,\"attributes\":{"
                                "\"process.pid\":%lld,\"thread.id\":1%s",
                                name, (unsigned long long)1, (unsigned long long)++w->span_no,
                                (long long)start, (long long)end, (long long)pid, attrs);
    for (int i = 0; i < n_lists; i++) o += put_list(json + o, sizeof json - o, &lists[i]);
    o += (size_t)snprintf(json + o, sizeof json - o, "},\"resource_attributes\":{},\"links\":[]}");
    CHECK(o < sizeof json);
    mst_arena a;
    mst_arena_init(&a);
    mst_pf_span s;
    char err[200];
    int rc = mst_perfetto_packet_decode((const uint8_t *)json, o, &a, &s, err, sizeof err);
    CHECK_EQ_INT(rc, MST_OK);
    if (rc != MST_OK) {
        fprintf(stderr, "  %s\n", err);
        mst_arena_release(&a);
        return;
    }
    static mst_tl_id_item items[2][4][MAX_BATCH * 2 + 2];
    mst_tl_split_list sl[2][4];
    bool no_hint[MAX_BATCH * 2 + 2];
    for (int k = 0; k < MAX_BATCH * 2 + 2; k++) no_hint[k] = chance(100);
    for (int t = 0; t < 2; t++) {
        size_t n_sl = 0;
        for (int i = 0; split && i < n_lists; i++) {
            const mst_json_slice *v = NULL;
            size_t kl = strlen(lists[i].key);
            for (size_t k = 0; k < s.n_attrs; k++)
                if (s.attrs[k].key.len == kl && memcmp(s.attrs[k].key.ptr, lists[i].key, kl) == 0)
                    v = &s.attrs[k].value;
            CHECK(v != NULL);
            if (!v) continue;
            for (int k = 0; k < lists[i].n; k++) {
                rid *r = &ids[lists[i].v[k]];
                items[t][i][k] = (mst_tl_id_item){r->text, strlen(r->text), no_hint[k] ? NULL : &r->hint[t]};
            }
            mst_tl_list_change c = {0};
            if (i == 0 && g_vouch) c = *g_vouch;
            sl[t][n_sl++] = (mst_tl_split_list){v, items[t][i], (size_t)lists[i].n, c};
        }
        (void)mst_timeline_add_span_split(w->tl[t], &s, s.pid, &a, &w->sink[t], sl[t], n_sl);
        mst_timeline_join_step(w->tl[t], &s, &(mst_tl_pos){s.pid, 1, s.start_ns, 1}, &(mst_tl_pos){0});
    }
    mst_arena_release(&a);
}

static void finish_request(world *w, int id, int64_t end) {
    if (w->n_pending < 64 && chance(4) != 0) {
        w->pending_req[w->n_pending] = id;
        w->pending_end[w->n_pending++] = end;
    }
}

/* Sends the vllm.request spans of some finished requests. */
static void send_request_spans(world *w) {
    for (int i = 0; i < w->n_pending;) {
        if (!chance(3)) {
            i++;
            continue;
        }
        char attrs[64];
        int id = w->pending_req[i];
        snprintf(attrs, sizeof attrs, ",\"request.id\":\"%s\"", ids[id].text);
        feed(w, "vllm.request", 7, ids[id].arrival_ns, w->pending_end[i], attrs, NULL, 0, false);
        w->pending_req[i] = w->pending_req[--w->n_pending];
        w->pending_end[i] = w->pending_end[w->n_pending];
    }
}

/* One scheduling step of engine e (and what follows it). */
static void engine_step(world *w, int e) {
    engine *g = &w->eng[e];
    list_attr L[5] = {{"request.ids", {0}, 0}, {"step.new_ids", {0}, 0},
                      {"step.preempted_ids", {0}, 0}, {"step.resumed_ids", {0}, 0},
                      {"step.queued_ns", {0}, 0}};
    int64_t start = g->t_ns;
    if (chance(80)) start -= 30000000; /* out of order */
    else if (chance(150)) start -= 20000000; /* the previous step's start again */
    else g->t_ns += 20000000 + rnd(1000000);
    int64_t end = start + 4000000 + rnd(2000000);
    /* finishing (in their slots: the next one joins at the end) */
    for (int i = 0; i < g->n_run;) {
        if (chance(25)) {
            finish_request(w, g->run[i], start);
            memmove(&g->run[i], &g->run[i + 1], (size_t)(g->n_run - i - 1) * sizeof g->run[0]);
            g->n_run--;
        } else {
            i++;
        }
    }
    /* preempted from the end, resumed later */
    if (g->n_run && chance(30) && g->n_pre < MAX_BATCH) {
        int id = g->run[--g->n_run];
        g->preempted[g->n_pre++] = id;
        L[2].v[L[2].n++] = id;
    }
    if (g->n_pre && chance(4) && g->n_run < MAX_BATCH - 1) {
        int id = g->preempted[0];
        memmove(&g->preempted[0], &g->preempted[1], (size_t)(g->n_pre - 1) * sizeof g->preempted[0]);
        g->n_pre--;
        ids[id].chunks_left = 1 + (int)rnd(2);
        g->run[g->n_run++] = id;
        L[3].v[L[3].n++] = id;
    }
    int cap = e == 0 ? 36 : e == 1 ? 24 : 14; /* runs count steps of 16 or more */
    while (g->n_run < cap && chance(2)) {
        int id = new_id(w, start);
        if (id < 0) break;
        g->run[g->n_run++] = id;
        L[1].v[L[1].n++] = id;
    }
    char phase[MAX_BATCH * 2 + 4];
    int np = 0;
    for (int i = 0; i < g->n_run; i++) L[0].v[L[0].n++] = g->run[i];
    if (g->n_run > 1 && chance(100)) { /* reordered */
        int a = (int)rnd((uint32_t)L[0].n), b = (int)rnd((uint32_t)L[0].n), t = L[0].v[a];
        L[0].v[a] = L[0].v[b];
        L[0].v[b] = t;
    }
    if (L[0].n && chance(100)) { /* a duplicate */
        int d = L[0].v[rnd((uint32_t)L[0].n)];
        L[0].v[L[0].n++] = d;
    }
    if (chance(40)) { /* another engine's request */
        engine *o = &w->eng[(e + 1) % N_ENGINES];
        if (o->n_run) L[0].v[L[0].n++] = o->run[rnd((uint32_t)o->n_run)];
    }
    for (int i = 0; i < L[0].n; i++) {
        rid *r = &ids[L[0].v[i]];
        char c = 'd';
        if (r->chunks_left > 1) c = 'P', r->chunks_left--;
        else if (r->chunks_left == 1) c = 'p', r->chunks_left = 0;
        if (chance(300)) c = 'x';
        else if (c == 'd' && chance(200)) c = chance(2) ? 'p' : 'P'; /* not vLLM's, but possible */
        phase[np++] = c;
    }
    if (chance(40) && np) np = (int)rnd((uint32_t)np); /* short */
    phase[np] = 0;
    char attrs[1024];
    size_t o = (size_t)snprintf(attrs, sizeof attrs,
                                ",\"scheduler.running\":%d,\"scheduler.waiting\":%d,"
                                "\"batch.request_count\":%d,\"kv_cache.usage\":0.%d",
                                g->n_run, g->n_pre, L[0].n, (int)rnd(100));
    if (e != N_ENGINES - 1) o += (size_t)snprintf(attrs + o, sizeof attrs - o, ",\"step.index\":%lld", (long long)g->index++);
    if (!chance(50)) o += (size_t)snprintf(attrs + o, sizeof attrs - o, ",\"step.phase\":\"%s\"", phase);
    o += (size_t)snprintf(attrs + o, sizeof attrs - o, ",\"step.queued_ns\":[");
    for (int i = 0; i < L[1].n; i++)
        o += (size_t)snprintf(attrs + o, sizeof attrs - o, "%s\"%lld\"", i ? "," : "",
                              (long long)ids[L[1].v[i]].arrival_ns + 100);
    snprintf(attrs + o, sizeof attrs - o, "]");
    bool split = !chance(40);
    /* What the writer vouches for: the list against its stream's previous
     * one (greedy, as the forwarder's change: the longest prefix kept in
     * order, the rest joined), sometimes stale or wrong. */
    static uint32_t left[MAX_BATCH * 2 + 3];
    mst_tl_list_change c = {0};
    wstream *ws = &w->ws[stream_of(e)];
    if (chance(300)) ws->conn++, ws->seq = 0; /* a new connection numbers its lists anew */
    bool unseen = ws->have && ws->n > 1 && chance(40);
    if (unseen) { /* a list the timeline did not see (two swapped) */
        int a = (int)rnd((uint32_t)ws->n), t = ws->v[a];
        ws->v[a] = ws->v[(a + 1) % ws->n];
        ws->v[(a + 1) % ws->n] = t;
        ws->seq++;
    }
    if (ws->have && split && !chance(20)) {
        uint32_t nl = 0, q = 0;
        size_t kept = 0;
        for (; kept < (size_t)L[0].n; kept++) {
            uint32_t f = q;
            while (f < (uint32_t)ws->n && ws->v[f] != L[0].v[kept]) f++;
            if (f == (uint32_t)ws->n) break;
            while (q < f) left[nl++] = q++;
            q++;
        }
        while (q < (uint32_t)ws->n) left[nl++] = q++;
        c = (mst_tl_list_change){0x1000 + (uint64_t)stream_of(e), ws->conn, 5, ws->seq + 1,
                                 (uint32_t)ws->n, nl, left, kept};
        if (chance(60)) c.seq += 1000000 + (int64_t)rnd(2); /* a seq no list of the stream has */
        else if (chance(60)) left[c.n_left++] = c.n_prev++;           /* a wrong n_prev */
        else if (chance(60)) c.stream = 0x1000 + (uint64_t)stream_of(e + 1); /* another's key */
    }
    ws->seq++;
    ws->have = split || chance(2);
    ws->n = L[0].n;
    memcpy(ws->v, L[0].v, (size_t)L[0].n * sizeof ws->v[0]);
    g_vouch = c.stream ? &c : NULL;
    feed(w, "vllm.scheduler.schedule", g->pid, start, end, attrs, L, 4, split);
    g_vouch = NULL;
    /* the worker's forward (a batch span), the output processing, the update */
    list_attr ids_only[1] = {L[0]};
    if (chance(3)) {
        char b[96];
        snprintf(b, sizeof b, ",\"batch.scheduled_tokens\":%d", L[0].n * 3);
        feed(w, "vllm.worker.execute_model", g->pid + 100, start + 100000, end - 100000, b, ids_only, 1,
             chance(2));
    }
    if (chance(3))
        feed(w, "vllm.output.process", 999, end + 100000, end + 900000, "", ids_only, 1, chance(2));
    if (chance(2)) feed(w, "vllm.scheduler.update_from_output", g->pid, end, end + 200000, "", NULL, 0, false);
}

/* Both timelines told their sinks the same, line by line, and counted the
 * same. */
static void compare_logs(world *w, uint64_t seed, uint32_t max_requests, size_t min_lines) {
    /* (max_requests: a small table must have evicted) */
    /* the same callbacks, line by line */
    CHECK(w->log[0].lines > min_lines);
    CHECK_EQ_INT(w->log[1].lines, w->log[0].lines);
    CHECK_EQ_INT(w->log[1].n, w->log[0].n);
    size_t n = w->log[0].n < w->log[1].n ? w->log[0].n : w->log[1].n;
    for (size_t i = 0, line = 1, ls = 0; i < n; i++) {
        if (w->log[0].p[i] != w->log[1].p[i]) {
            const char *a = w->log[0].p + ls, *b = w->log[1].p + ls;
            fprintf(stderr, "  seed %llu: line %zu differs:\n  eager: %.*s\n  lazy:  %.*s\n",
                    (unsigned long long)seed, line, (int)(strchr(a, '\n') - a), a,
                    (int)(strchr(b, '\n') - b), b);
            CHECK(!"lazy runs differ from the eager path");
            break;
        }
        if (w->log[0].p[i] == '\n') line++, ls = i + 1;
    }
    mst_tl_stats st[2];
    for (int t = 0; t < 2; t++) mst_timeline_get_stats(w->tl[t], &st[t]);
    CHECK_EQ_INT(st[1].requests_emitted, st[0].requests_emitted);
    CHECK_EQ_INT(st[1].requests_evicted, st[0].requests_evicted);
    CHECK_EQ_INT(st[1].counters_emitted, st[0].counters_emitted);
    CHECK_EQ_INT(st[1].phases_dropped, st[0].phases_dropped);
    /* the vouched changes were taken (and never by the eager path) */
    CHECK_EQ_INT(st[0].steps_by_position, 0);
    if (min_lines > 100) CHECK(st[1].steps_by_position > 0 && st[1].items_by_position > 0);
    fprintf(stderr, "  seed %llu: %llu steps, %llu items by position\n", (unsigned long long)seed,
            (unsigned long long)st[1].steps_by_position, (unsigned long long)st[1].items_by_position);
    if (max_requests < 100) CHECK(st[0].requests_evicted > 0); /* attached ones among them */
}

static void tick_both(world *w) {
    for (int t = 0; t < 2; t++) mst_timeline_tick(w->tl[t], w->now_ms, &w->sink[t]);
}

/* Two timelines of max_requests, the first eager. */
static world *world_new(uint32_t max_requests) {
    world *w = calloc(1, sizeof *w);
    CHECK(w != NULL);
    if (!w) return NULL;
    for (int t = 0; t < 2; t++) {
        w->tl[t] = mst_timeline_new(max_requests);
        CHECK(w->tl[t] != NULL);
        w->sink[t] = (mst_tl_sink){&w->log[t], on_request, on_counter, on_step};
    }
    mst_timeline_set_lazy_runs(w->tl[0], false);
    return w;
}

static void world_free(world *w) {
    for (int t = 0; t < 2; t++) {
        mst_timeline_free(w->tl[t]);
        free(w->log[t].p);
    }
    free(w);
}

/* One sequence: `steps` scheduling steps over the engines. */
static void run_sequence(uint64_t seed, int steps, uint32_t max_requests) {
    rng = seed * 0x9E3779B97F4A7C15ull + 1;
    n_ids = 0;
    world *w = world_new(max_requests);
    if (!w) return;
    for (int e = 0; e < N_ENGINES; e++) {
        w->eng[e].pid = 7 + e;
        w->eng[e].t_ns = 1000000000ll + e * 3000000;
    }
    w->now_ms = chance(2) ? 0 : 5;
    for (int k = 0; k < steps; k++) {
        int e = chance(3) ? (int)rnd(N_ENGINES) : 0;
        engine_step(w, e);
        if (chance(5)) send_request_spans(w);
        if (chance(8)) {
            if (chance(300)) w->now_ms -= w->now_ms > 2000 ? rnd(2000) : w->now_ms; /* set back */
            else w->now_ms += chance(150) ? (chance(2) ? 60000 - rnd(600) : 60000 + rnd(2000)) : chance(60) ? 9000 + rnd(2000) : rnd(600);
            tick_both(w);
        }
        if (chance(400)) /* the writer restarted interning: every hint dropped */
            for (int i = 0; i < n_ids; i++) ids[i].hint[0] = ids[i].hint[1] = 0;
    }
    send_request_spans(w);
    w->now_ms += 11000;
    tick_both(w);
    for (int t = 0; t < 2; t++) mst_timeline_finish_all(w->tl[t], &w->sink[t]);
    compare_logs(w, seed, max_requests, (size_t)steps);
    world_free(w);
}

/* A small table: attached entries are evicted. */
static void test_runs_as_eager_small_table(void) {
    for (uint64_t seed = 1; seed <= 8; seed++) run_sequence(seed, 4000, 48);
}

/* A table that holds everything: long runs. */
static void test_runs_as_eager_large_table(void) {
    for (uint64_t seed = 11; seed <= 18; seed++) run_sequence(seed, 4000, 4096);
}

/* The forwarder's clock set back while requests are attached: a later
 * span naming them (an output) set their time past the steps' since; the
 * idle completion then sees the steps' time, as the eager path does. */
static void test_runs_with_the_clock_set_back(void) {
    rng = 99;
    n_ids = 0;
    world *w = world_new(64);
    if (!w) return;
    w->eng[0].pid = 7;
    w->eng[0].t_ns = 1000000000ll;
    list_attr ids_only[1] = {{"request.ids", {0}, 0}};
    /* (runs count steps of 16 requests or more) */
    char ps[24] = "pppppppppppppppppppp", ds[24] = "dddddddddddddddddddd";
    for (int i = 0; i < 20; i++) ids_only[0].v[ids_only[0].n++] = new_id(w, w->eng[0].t_ns);
    w->now_ms = 1000;
    tick_both(w); /* a scan */
    for (int k = 0; k < 5; k++) {
        char attrs[128];
        snprintf(attrs, sizeof attrs, ",\"scheduler.running\":20,\"step.index\":%d,\"step.phase\":\"%s\"", k,
                 k ? ds : ps);
        int64_t t = w->eng[0].t_ns + k * 20000000ll;
        if (k == 3) { /* attached: an output at 1500, then the clock at 1200 (no scan) */
            w->now_ms = 1500;
            tick_both(w);
            feed(w, "vllm.output.process", 999, t - 1000000, t - 500000, "", ids_only, 1, true);
            w->now_ms = 1200;
            tick_both(w);
        }
        feed(w, "vllm.scheduler.schedule", 7, t, t + 5000000, attrs, ids_only, 1, true);
    }
    w->now_ms = 1200 + MST_TL_STEPS_IDLE_MS + 100; /* idle since 1200, not since 1500 */
    tick_both(w);
    CHECK(w->log[0].lines >= 20);
    CHECK(strstr(w->log[0].p, "R req-0") != NULL); /* completed at the tick, before finish_all */
    for (int t = 0; t < 2; t++) mst_timeline_finish_all(w->tl[t], &w->sink[t]);
    compare_logs(w, 99, 4096, 3);
    world_free(w);
}

static const mst_test_case TESTS[] = {
    {"runs_with_the_clock_set_back", test_runs_with_the_clock_set_back},
    {"runs_as_eager_small_table", test_runs_as_eager_small_table},
    {"runs_as_eager_large_table", test_runs_as_eager_large_table},
};

MST_TEST_MAIN(TESTS)
