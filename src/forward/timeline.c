/*
 * timeline.c — the timeline model shared by the forwarder's writers (see
 * timeline.h for what it derives). Owns the request table: request id ->
 * what the spans naming it revealed so far, a chained hash over a fixed
 * pool with a FIFO list; when full, the oldest entry is completed (or, if it
 * was already complete, forgotten). Completed entries stay until evicted so
 * a span that names a request after its `vllm.request` span arrived (an
 * output processed late) does not start a second track for it. Phases from
 * step records are kept per request as a short list of (time, kind) events
 * (a malloc'd array of at most MST_TL_MAX_STEP_PHASES), turned into slices
 * when the request is emitted.
 *
 * Runs: in vLLM's order nearly every request a scheduling step names is
 * one that the engine's previous step named too, decoding, and all such a
 * step changes of it is steps + 1, last_end_ns and last_seen_ms. So the
 * scheduling steps of a followed engine whose request.ids the writer split
 * (with hints: the `.pftrace` writer) are counted per engine ("its run",
 * tl_run): the run keeps the previous step's hint words and its own step
 * count with the last step's start, end and forwarder time. An entry is
 * attached to the run (req_entry.run_tag) once a step named it that left it
 * decoding with both first steps (sched1_ns, sched2_ns) before that step;
 * each later step of the run naming it with phase d (or none) only tags it
 * as counted (one compare of its tag), and the entry's steps, last_end_ns
 * and last_seen_ms stay behind. Settling (run_settle) realizes them — steps
 * plus the run's steps since run_base, the max with the last such step's
 * end and time — and detaches it. Why this is exact: for such a step the
 * eager path would do exactly that (first_ns is older, note_step returns
 * early since sched2_ns is older, engine is the same, phase d changes
 * nothing), the run's steps start and end in order (a step that does not
 * settles the run first) and the forwarder's clock only moves forward (a
 * clock set back settles every run), so the last step's end and time are
 * the max; and every reader of those fields settles first: req_emit (so
 * eviction and finish_all), the tick's scan, any step list and any
 * scheduling step naming it that the run does not count it in (another
 * engine's, a short one, its own with phase p or naming it twice: they
 * change engine, cur, sched*, or count it eagerly), and a step of the run
 * that does not name the entry (found by aligning its
 * words with the previous step's, as wire/ids_change.c; an entry the
 * alignment misses is found among the previous words: every attached entry
 * was named by the run's previous step). A settle during a step counts that
 * step when the step already counted the entry (its tag says so). Batch,
 * output and request spans only set first_ns (min), last_end_ns (max),
 * last_seen_ms (the latest time), wsteps and the request span's fields:
 * they commute with the run and do not settle. Steps naming fewer than
 * RUN_MIN_ITEMS requests are counted eagerly (a run step's fixed cost is
 * more than they save): like a foreign step they settle what they name,
 * the run's count does not move. mst_timeline_set_lazy_runs turns the runs
 * off, to test them against the eager path.
 *
 * By position: when the writer vouches for how a step's list came from
 * the stream's previous one (mst_tl_list_change: that list without some
 * positions, then joined ones) and that previous list is the one the run
 * last counted (the same stream, connection and origin, seq one less, as
 * many items), the step is counted without loading the kept requests'
 * entries. The run keeps per word of its list a flag: its entry attached
 * and named by that step. At a step's end the flags set are as many as the
 * run's attached entries, which are all named by it, so they are exactly
 * those, one each; attaching is only a run step's and any other detach
 * lowers `attached`, so a step finding the count unchanged knows the flags
 * still hold (else it counts by words). Then the flagged positions that
 * left are settled as of the previous step, the kept words and flags are
 * moved down to their new positions, and a kept flagged item not in phase
 * p / P is counted by the run's count alone; the rest by run_item_eager.
 * The entries so counted keep an earlier step in their run_tag, which is
 * then only behind, never wrong: it never names the step being counted
 * (tag_floor: they are retagged before 2^14 steps pass), so the words path
 * and the settles take them as not named yet, and anything that settles
 * one of the run's entries during such a step first tags the ones counted
 * so far (run_materialize), the rest of the step going item by item.
 */
#include "forward/timeline.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "forward/hash_mix.h"
#include "wire/json_reader.h"

/* The counter attributes; mst_timeline_add_span matches them by length
 * and names them by index (TL_BATCH_REQUESTS ...: same order). */
const char *const mst_tl_counter_names[] = {"batch.request_count", "batch.scheduled_tokens",
                                            "scheduler.waiting", "scheduler.running",
                                            "kv_cache.usage", NULL};
const char *const mst_tl_counter_labels[] = {"batch size (requests)", "scheduled tokens (tokens)",
                                             "waiting (requests)", "running (requests)",
                                             "KV cache usage (%)", NULL};
const char *const mst_tl_counter_json_names[] = {"batch size", "scheduled tokens", "waiting",
                                                 "running", "KV cache usage", NULL};
const char *const mst_tl_counter_json_keys[] = {"(requests)", "(tokens)", "(requests)",
                                                "(requests)", "(%)", NULL};

/* What a step record did to a request (its phases are built from these). */
enum { SEG_PREFILL = 1, SEG_DECODE, SEG_PREEMPTED, SEG_MARK_PREEMPTION, SEG_MARK_RESUME };
typedef struct tl_seg {
    int64_t ts;
    uint8_t kind;
    uint8_t chunk;           /* SEG_PREFILL: 1, 2, ... since the (re)start */
} tl_seg;

typedef struct req_entry {
    /* What every step naming the request reads or sets, first (one or
     * two cache lines a request at batch 256): */
    uint64_t serial;         /* this entry's number (0: free slot), for hints */
    uint64_t run_tag;        /* attached to an engine's run: RUN_TAG(serial, run, step), the run
                                (index + 1 in mst_timeline.runs) and its last step that counted it
                                (low 16 bits); its steps, last_end_ns and last_seen_ms are then
                                behind. 0: not */
    size_t id_len;
    int64_t first_ns, last_end_ns;     /* spans naming it */
    int64_t sched1_ns, sched2_ns;      /* first two scheduling steps (-1: none) */
    uint64_t last_seen_ms;   /* forwarder time of the last span naming it */
    uint32_t steps, wsteps;
    bool done;               /* emitted; kept only to ignore late spans */
    bool has_span;           /* its vllm.request span arrived: */
    uint8_t chunk;           /* prefill chunks since the last (re)start */
    uint8_t cur;             /* the kind of the last phase (0: none) */
    uint8_t n_segs, cap_segs;
    uint8_t engine;          /* the engine of the last scheduling step naming it (index + 1 in
                                mst_timeline.eng; 0: none yet, or not a followed engine) */
    uint32_t run_base;       /* attached: realized up to the run's step run_base */
    /* the rest */
    char *id;
    uint64_t hash;
    uint32_t chain;          /* next in bucket, index + 1 */
    uint32_t older, newer;   /* FIFO, index + 1; `older` doubles as free list */
    int64_t pid;
    int64_t wsched1_ns, wsched2_ns;    /* the same from batch spans (fallback) */
    int64_t span_start, span_end, span_pid;
    uint64_t span_seen_ms;   /* ... at this forwarder time */
    /* from step records (docs/architecture.md "1a") */
    tl_seg *segs;
    int64_t queued_ns;       /* step.queued_ns (0: unknown) */
    int64_t new_ns;          /* start of the step naming it in step.new_ids (-1) */
    uint32_t preemptions;
    uint32_t lane;           /* mst_tl_request.lane */
} req_entry;

/* Preemptions so far per engine process (the MST_TL_PREEMPTIONS counter). */
#define TL_PREEMPT_PIDS 16
/* Engines whose open step is followed (like TL_PREEMPT_PIDS). */
#define TL_ENGINES 16
/* Steps handed to the sink and spans waiting for their step, kept to join
 * the two whichever arrives first (bounded rings, oldest overwritten). The
 * processes' exporters batch for seconds, so one process's spans run
 * hundreds of steps ahead of another's (a real vLLM run: the worker's first
 * ~130 forwards before the engine's first step). Each engine keeps its last
 * TL_DONE_STEPS steps in order of their end (tl_done_ring), so a joining
 * span finds its step by a binary search in its engine's ring (in each
 * engine's when its engine is not known); a step scans only the part of
 * the waiting ring that may still hold a waiting span (join_waiting), and
 * nothing when none of its kind waits: every step pays that. */
#define TL_DONE_STEPS 1024u   /* per engine; a power of two */
#define TL_WAITING_SPANS MST_TL_WAITING_SPANS
/* A waiting span keeps the text of the first id of its request.ids up to
 * this long, to tell its engine when its step comes (a longer one whose
 * engine is not known yet: the span is taken as naming no request). */
#define TL_WAIT_ID_MAX 63u

/* Worker processes whose engine is remembered (a few per engine: one per
 * tensor- or pipeline-parallel rank). */
#define TL_WORKER_PIDS (4 * TL_ENGINES)

/* The step an engine thread is in (from its schedule span on). */
typedef struct tl_engine {
    int64_t pid, tid, index, start_ns, last_end_ns, requests, tokens;
    bool open;
} tl_engine;

enum { JOIN_WORKER = 1, JOIN_OUTPUT };
typedef struct tl_done_step {
    mst_tl_pos pos;           /* the step slice */
    int64_t end_ns;
    bool worker, output;      /* joined already */
} tl_done_step;
typedef struct tl_waiting_span {
    mst_tl_pos pos;
    uint8_t kind;             /* JOIN_*; 0: free or joined */
    uint8_t engine;           /* its engine (index + 1), 0: not known yet */
    uint8_t id_len;           /* of id: its first request id, 0: none kept */
    char id[TL_WAIT_ID_MAX];
} tl_waiting_span;
/* The steps of one engine handed to the sink, by end time (then in the
 * order they closed): a ring of TL_DONE_STEPS, the oldest forgotten. */
typedef struct tl_done_ring {
    tl_done_step *s;          /* allocated at the engine's first step */
    uint32_t head, n;         /* the oldest at s[head], n kept */
} tl_done_ring;

/* An engine's run (see the file comment): the request ids of its last
 * lazily counted scheduling step as hint words (slot | serial, 0: none),
 * in order, with a flag each, and the steps counted so far with the last
 * one's times. While a step is being counted (in_step), step count + 1 has
 * cur_end / cur_now and `named` entries attached with a run_tag of step
 * count + 1 (and, counting by position, v_fast more with an older one). */
typedef struct tl_run {
    uint64_t *prev, *next;   /* the last step's words; the buffer for this one's */
    /* Per word: its entry attached and named by that step (1) or not (0).
     * When n_flagged == attached, they are exactly the attached entries,
     * one position each (see run_vouched). */
    uint8_t *prev_on, *next_on;
    uint32_t n_flagged;      /* set in prev_on */
    /* The last step's list as its writer named it (mst_tl_list_change;
     * v_stream 0: not named): a step vouched as changed from it is counted
     * by position. */
    uint64_t v_stream, v_conn;
    int64_t v_origin, v_seq;
    /* While a step is counted by position (vouching): its items [0, v_idx)
     * are done and v_fast of them were counted without touching their
     * entries (their run_tag still names an earlier step). */
    bool vouching;
    uint32_t v_idx, v_fast;
    uint32_t tag_floor;      /* every attached entry's run_tag names this step or a later one */
    uint32_t n_prev, cap;
    uint32_t count;          /* steps counted */
    uint32_t attached;       /* entries with run == this run */
    uint32_t named;          /* in_step: attached entries this step named so far */
    bool in_step;
    int64_t last_start, last_end; /* step `count`'s */
    uint64_t last_now;
    int64_t cur_end;         /* in_step: step count + 1's */
    uint64_t cur_now;
} tl_run;

struct mst_timeline {
    req_entry *e;
    uint32_t *buckets;       /* index + 1 */
    uint32_t mask, cap, count, used, free_head, oldest, newest;
    uint64_t seed;
    uint64_t now_ms;         /* forwarder time of the last tick */
    uint32_t open;           /* entries not yet emitted */
    uint64_t last_scan_ms;
    mst_tl_stats st;
    struct { int64_t pid; uint64_t n; } preempt[TL_PREEMPT_PIDS];
    unsigned n_preempt;
    uint32_t next_lane;
    tl_engine eng[TL_ENGINES];
    unsigned n_eng;
    tl_done_ring done[TL_ENGINES]; /* of eng[i] */
    /* The engine of each worker process seen with one (tl_worker_engine),
     * the oldest replaced when full. */
    struct { int64_t pid; uint8_t engine; } worker_engine[TL_WORKER_PIDS];
    unsigned n_worker_engine, next_worker_engine;
    tl_waiting_span waiting[TL_WAITING_SPANS];
    /* Spans ever put in the ring, and the oldest that may still wait: every
     * earlier one was joined or overwritten, so a step scans only
     * [waiting_lo, waiting_next) — nothing when none waits (the usual case:
     * its forward and output processing were written after the step). */
    uint64_t waiting_next, waiting_lo;
    uint32_t waiting_live[JOIN_OUTPUT + 1]; /* waiting spans per kind */
    uint64_t fwd_last_received, fwd_last_written, fwd_last_dropped; /* last forwarder sample */
    bool fwd_sampled;
    int64_t fwd_last_ts_ns;  /* of the last forwarder sample */
    int64_t last_span_end_ns; /* latest end of a span added: the traced window's end */
    int64_t rank_base_ns;    /* mst_timeline_arrival_rank */
    bool have_rank_base;
    uint64_t serial;         /* entries made so far (req_entry.serial) */
    tl_run runs[TL_ENGINES]; /* of eng[i] */
    uint32_t attached;       /* entries attached to any run (none: nothing to settle) */
    bool eager_runs;         /* mst_timeline_set_lazy_runs(tl, false) */
};

/* A hint (mst_tl_id_item.hint): the entry's slot + 1 in its low HINT_SLOT_BITS
 * and its serial above (never reused: no hint is written once serials run
 * out of their bits). */
#define HINT_SLOT_BITS 24
#define HINT_SLOTS ((1ull << HINT_SLOT_BITS) - 1)
#define HINT_SERIALS (1ull << (64 - HINT_SLOT_BITS))

/* ---- runs (see the file comment) ---- */

/* req_entry.run_tag of entry `serial` attached to run `run` (index + 1)
 * that the run's step `step` counted last (its low 16 bits: an attached
 * entry's is the run's count or, while a step is counted, the next), in
 * the bits of a hint word (its serial above HINT_SLOT_BITS): one compare
 * with a hint word's serial part tells a live entry counted by the run's
 * previous step. Its parts. */
#define RUN_TAG(serial, run, step) \
    ((uint64_t)(serial) << HINT_SLOT_BITS | (uint64_t)((step) & 0xffffu) << 8 | (run))
#define TAG_RUN(tag) ((uint8_t)((tag) & 0xff))
#define TAG_STEP(tag) ((uint32_t)((tag) >> 8) & 0xffffu)
#define STEP16(step) ((uint32_t)(step) & 0xffffu)

static void run_settle_tagged(mst_timeline *tl, req_entry *x);
static void run_materialize(mst_timeline *tl, tl_run *r, uint8_t run);

/* Realizes the fields entry x's run kept behind and detaches it: the
 * run's steps after run_base up to the last one that counted x (this
 * step, while it is being counted and already named x), and that step's
 * end and forwarder time, the latest of each (the run's steps start and
 * end in order, the forwarder's clock only moves forward). When the run
 * is counting a step by position, the entries that step counted so far
 * are tagged first (run_materialize), so that x's tag tells. */
static __attribute__((noinline)) void run_settle(mst_timeline *tl, req_entry *x) {
    uint8_t run = TAG_RUN(x->run_tag);
    if (tl->runs[run - 1].vouching) run_materialize(tl, &tl->runs[run - 1], run);
    run_settle_tagged(tl, x);
}

/* run_settle when x's run_tag tells whether the step being counted named
 * it: no step is counted by position, or x is not among its items so far
 * (a position that left, an attached item in phase p / P reached). */
static void run_settle_tagged(mst_timeline *tl, req_entry *x) {
    tl_run *r = &tl->runs[TAG_RUN(x->run_tag) - 1];
    uint32_t upto = r->count;
    int64_t end = r->last_end;
    uint64_t now = r->last_now;
    if (r->in_step && TAG_STEP(x->run_tag) == STEP16(r->count + 1)) {
        upto++;
        end = r->cur_end;
        now = r->cur_now;
        r->named--;
    }
    if (upto != x->run_base) {
        x->steps += upto - x->run_base;
        if (end > x->last_end_ns) x->last_end_ns = end;
        if (now > x->last_seen_ms) x->last_seen_ms = now;
    }
    x->run_tag = 0;
    r->attached--;
    tl->attached--;
}

/* The live entry hint word w names, or NULL. */
static inline req_entry *word_entry(mst_timeline *tl, uint64_t w) {
    uint64_t slot = w & HINT_SLOTS;
    if (slot - 1 >= tl->used) return NULL; /* slot 0 (none) wraps past every count */
    req_entry *x = &tl->e[slot - 1];
    return x->serial == w >> HINT_SLOT_BITS ? x : NULL;
}

/* Ends counting run r's step by position: the entries of its items so far
 * that it counted (next_on) get their run_tag for this step, as the words
 * path would have given them. */
static void run_materialize(mst_timeline *tl, tl_run *r, uint8_t run) {
    uint32_t step = r->count + 1;
    for (uint32_t k = 0; k < r->v_idx; k++) {
        if (!r->next_on[k]) continue;
        req_entry *x = word_entry(tl, r->next[k]);
        if (x && TAG_RUN(x->run_tag) == run) x->run_tag = RUN_TAG(x->serial, run, step);
    }
    r->named += r->v_fast;
    r->v_fast = 0;
    r->vouching = false;
}

/* Settles the entry of word w when it is attached to run `run` (index +
 * 1) and the step being counted did not name it yet. */
static inline void run_settle_word(mst_timeline *tl, uint64_t w, uint8_t run) {
    req_entry *x = word_entry(tl, w);
    if (x && TAG_RUN(x->run_tag) == run && TAG_STEP(x->run_tag) != STEP16(tl->runs[run - 1].count + 1))
        run_settle(tl, x);
}

/* Settles every entry attached to run `run` (index + 1): those its last
 * step named, which are all (else the whole table is searched). */
static void run_settle_all(mst_timeline *tl, uint8_t run) {
    tl_run *r = &tl->runs[run - 1];
    for (uint32_t k = 0; k < r->n_prev && r->attached; k++) {
        req_entry *x = word_entry(tl, r->prev[k]);
        if (x && TAG_RUN(x->run_tag) == run) run_settle(tl, x);
    }
    for (uint32_t i = 0; i < tl->used && r->attached; i++)
        if (tl->e[i].serial && TAG_RUN(tl->e[i].run_tag) == run) run_settle(tl, &tl->e[i]);
}

void mst_timeline_set_lazy_runs(mst_timeline *tl, bool lazy) {
    if (!lazy)
        for (unsigned k = 0; k < TL_ENGINES; k++) run_settle_all(tl, (uint8_t)(k + 1));
    tl->eager_runs = !lazy;
}

mst_timeline *mst_timeline_new(uint32_t max_requests) {
    if (max_requests < 2) max_requests = 2;
    mst_timeline *tl = calloc(1, sizeof *tl);
    if (!tl) return NULL;
    uint32_t nb = 16;
    while (nb < max_requests * 2u && nb < (1u << 30)) nb <<= 1;
    tl->e = calloc(max_requests, sizeof *tl->e);
    tl->buckets = calloc(nb, sizeof *tl->buckets);
    if (!tl->e || !tl->buckets) {
        mst_timeline_free(tl);
        return NULL;
    }
    tl->mask = nb - 1;
    tl->cap = max_requests;
    /* Ids come from other processes: a per-instance seed keeps crafted ids
     * from piling into one bucket. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    tl->seed = ((uint64_t)(uintptr_t)tl ^ ((uint64_t)getpid() << 32)) ^
               (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull;
    return tl;
}

void mst_timeline_free(mst_timeline *tl) {
    if (!tl) return;
    if (tl->e)
        for (uint32_t i = 0; i < tl->used; i++) {
            free(tl->e[i].id);
            free(tl->e[i].segs);
        }
    free(tl->e);
    free(tl->buckets);
    for (unsigned k = 0; k < TL_ENGINES; k++) {
        free(tl->done[k].s);
        free(tl->runs[k].prev);
        free(tl->runs[k].next);
        free(tl->runs[k].prev_on);
        free(tl->runs[k].next_on);
    }
    free(tl);
}

/* Every byte, 8 at a time (request ids are 20-40 bytes and each step
 * hashes its whole batch), mixed with the seed. */
static uint64_t str_hash(uint64_t seed, const char *s, size_t n) {
    uint64_t h = mst_mum_bytes(0xcbf29ce484222325ull ^ seed ^ n, s, n);
    return h ^ (h >> 29);
}

static uint32_t req_find(const mst_timeline *tl, const char *id, size_t n, uint64_t h) {
    for (uint32_t i = tl->buckets[h & tl->mask]; i; i = tl->e[i - 1].chain) {
        const req_entry *x = &tl->e[i - 1];
        if (x->hash == h && x->id_len == n && memcmp(x->id, id, n) == 0) return i;
    }
    return 0;
}

/* Unlinks entry i from its bucket and the FIFO and frees its slot. */
static void req_remove(mst_timeline *tl, uint32_t i) {
    req_entry *x = &tl->e[i - 1];
    if (x->run_tag) run_settle(tl, x); /* emitted entries are not attached: only for safety */
    uint32_t *link = &tl->buckets[x->hash & tl->mask];
    while (*link != i) link = &tl->e[*link - 1].chain;
    *link = x->chain;
    if (x->older) tl->e[x->older - 1].newer = x->newer; else tl->oldest = x->newer;
    if (x->newer) tl->e[x->newer - 1].older = x->older; else tl->newest = x->older;
    free(x->id);
    x->id = NULL;
    free(x->segs);
    x->segs = NULL;
    x->serial = 0;
    x->older = tl->free_head;
    tl->free_head = i;
    tl->count--;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* "prefill chunk k" for k = 1 .. MST_TL_MAX_STEP_PHASES (index k - 1). */
static const char *const k_chunk_names[MST_TL_MAX_STEP_PHASES] = {
    "prefill chunk 1", "prefill chunk 2", "prefill chunk 3", "prefill chunk 4",
    "prefill chunk 5", "prefill chunk 6", "prefill chunk 7", "prefill chunk 8",
    "prefill chunk 9", "prefill chunk 10", "prefill chunk 11", "prefill chunk 12",
    "prefill chunk 13", "prefill chunk 14", "prefill chunk 15", "prefill chunk 16",
    "prefill chunk 17", "prefill chunk 18", "prefill chunk 19", "prefill chunk 20",
    "prefill chunk 21", "prefill chunk 22", "prefill chunk 23", "prefill chunk 24",
    "prefill chunk 25", "prefill chunk 26", "prefill chunk 27", "prefill chunk 28",
    "prefill chunk 29", "prefill chunk 30", "prefill chunk 31", "prefill chunk 32",
    "prefill chunk 33", "prefill chunk 34", "prefill chunk 35", "prefill chunk 36",
    "prefill chunk 37", "prefill chunk 38", "prefill chunk 39", "prefill chunk 40",
    "prefill chunk 41", "prefill chunk 42", "prefill chunk 43", "prefill chunk 44",
    "prefill chunk 45", "prefill chunk 46", "prefill chunk 47", "prefill chunk 48"};

static const char *seg_name(const tl_seg *g) {
    switch (g->kind) {
    case SEG_PREFILL: return k_chunk_names[(g->chunk ? g->chunk : 1) - 1];
    case SEG_DECODE: return "decode";
    case SEG_PREEMPTED: return "preempted";
    case SEG_MARK_PREEMPTION: return "preemption";
    default: return "resume";
    }
}

static bool seg_is_mark(const tl_seg *g) {
    return g->kind == SEG_MARK_PREEMPTION || g->kind == SEG_MARK_RESUME;
}

/* The phases of a request with step records: "queued" from its queued time
 * (else its arrival) to its first scheduling step, then each recorded phase
 * from its step's start to the next phase's start (the last to the end),
 * markers as zero-length slices between them; all within the request. */
static void step_phases(const req_entry *x, mst_tl_request *r) {
    int64_t first = -1;
    for (unsigned i = 0; i < x->n_segs && first < 0; i++)
        if (!seg_is_mark(&x->segs[i])) first = x->segs[i].ts;
    int64_t qs = clamp(x->queued_ns > 0 ? x->queued_ns : r->start_ns, r->start_ns, r->end_ns);
    int64_t qe = clamp(x->new_ns >= 0 ? x->new_ns : first >= 0 ? first : r->start_ns, qs, r->end_ns);
    if (qe > qs) r->phases[r->n_phases++] = (mst_tl_phase){"queued", qs, qe};
    int64_t floor_ns = qe;
    for (unsigned i = 0; i < x->n_segs; i++) {
        const tl_seg *g = &x->segs[i];
        int64_t start = clamp(g->ts, floor_ns, r->end_ns), end = start;
        if (!seg_is_mark(g)) {
            end = r->end_ns;
            for (unsigned j = i + 1; j < x->n_segs; j++)
                if (!seg_is_mark(&x->segs[j])) {
                    end = clamp(x->segs[j].ts, start, r->end_ns);
                    break;
                }
        }
        r->phases[r->n_phases++] = (mst_tl_phase){seg_name(g), start, end};
        floor_ns = start; /* out-of-order input cannot make slices overlap */
    }
}

/* Builds the request track of entry x (request span times when known) and
 * hands it to the sink. */
static void req_emit(mst_timeline *tl, req_entry *x, const mst_tl_sink *sink) {
    if (x->run_tag) run_settle(tl, x);
    bool has_span = x->has_span;
    int64_t span_start = x->span_start, span_end = x->span_end, span_pid = x->span_pid;
    mst_tl_request r;
    memset(&r, 0, sizeof r);
    r.id = x->id;
    r.id_len = x->id_len;
    r.has_request_span = has_span;
    r.pid = has_span ? span_pid : x->pid;
    r.start_ns = has_span ? span_start : x->first_ns;
    r.end_ns = has_span ? span_end : x->last_end_ns;
    if (r.end_ns < r.start_ns) r.end_ns = r.start_ns;
    bool strong = x->sched1_ns >= 0;
    int64_t first = strong ? x->sched1_ns : x->wsched1_ns;
    int64_t second = strong ? x->sched2_ns : x->wsched2_ns;
    r.steps = strong ? x->steps : x->wsteps;
    r.preemptions = x->preemptions;
    r.lane = x->lane;
    if (x->n_segs) {
        step_phases(x, &r);
    } else if (first >= 0) {
        int64_t s1 = clamp(first, r.start_ns, r.end_ns);
        int64_t s2 = second >= 0 ? clamp(second, s1, r.end_ns) : r.end_ns;
        if (s1 > r.start_ns) r.phases[r.n_phases++] = (mst_tl_phase){"queued", r.start_ns, s1};
        r.phases[r.n_phases++] = (mst_tl_phase){"prefill", s1, s2};
        if (s2 < r.end_ns) r.phases[r.n_phases++] = (mst_tl_phase){"decode", s2, r.end_ns};
    }
    x->done = true;
    tl->open--;
    tl->st.requests_emitted++;
    if (sink && sink->request) sink->request(sink->self, &r);
}

/* Finds or adds the entry for id. NULL on out of memory. */
static req_entry *req_get(mst_timeline *tl, const char *id, size_t n, int64_t pid,
                          const mst_tl_sink *sink) {
    uint64_t h = str_hash(tl->seed, id, n);
    uint32_t i = req_find(tl, id, n, h);
    if (i) return &tl->e[i - 1];
    char *copy = malloc(n + 1);
    if (!copy) return NULL;
    memcpy(copy, id, n);
    copy[n] = 0;
    if (tl->count == tl->cap) {
        req_entry *old = &tl->e[tl->oldest - 1];
        if (!old->done) {
            tl->st.requests_evicted++;
            req_emit(tl, old, sink);
        }
        req_remove(tl, tl->oldest);
    }
    if (tl->free_head) {
        i = tl->free_head;
        tl->free_head = tl->e[i - 1].older;
    } else {
        i = ++tl->used;
    }
    req_entry *x = &tl->e[i - 1];
    memset(x, 0, sizeof *x);
    x->id = copy;
    x->id_len = n;
    x->hash = h;
    x->pid = pid;
    x->first_ns = INT64_MAX;
    x->last_end_ns = INT64_MIN;
    x->sched1_ns = x->sched2_ns = x->wsched1_ns = x->wsched2_ns = -1;
    x->new_ns = -1;
    x->last_seen_ms = tl->now_ms;
    x->serial = ++tl->serial;
    if (!++tl->next_lane) tl->next_lane = 1;
    x->lane = tl->next_lane;
    tl->open++;
    x->chain = tl->buckets[h & tl->mask];
    tl->buckets[h & tl->mask] = i;
    x->older = tl->newest;
    if (tl->newest) tl->e[tl->newest - 1].newer = i; else tl->oldest = i;
    tl->newest = i;
    tl->count++;
    return x;
}

/* Exact powers of ten a double holds (10^22 is the largest). */
const double mst_tl_pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number with a fraction or an exponent (the whole of [p, p + n))
 * whose digits fit 2^53 and whose decimal exponent is within +-22, as
 * strtod reads it: both the digits and the power of ten are exact doubles,
 * so one IEEE multiply or divide rounds exactly once, to the same double
 * strtod returns (Clinger's fast path). False for anything else (the caller
 * takes strtod). Why: kv_cache.usage-like values are on every schedule
 * span, read once for the counter and once for the annotation, and strtod
 * was ~7% of the proto writer's instructions. */
static bool decimal_fast(const char *p, size_t n, double *out) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    size_t j = 0;
    bool neg = p[0] == '-';
    j += neg;
    uint64_t m = 0;
    int digits = 0, exp10 = 0;
    size_t int_start = j;
    for (unsigned c; j < n && (c = (unsigned char)p[j] - (unsigned)'0') <= 9; j++, digits++)
        m = m * 10 + c;
    if (j == int_start) return false;
    bool shaped = false; /* a fraction or an exponent: a double */
    if (j < n && p[j] == '.') {
        size_t f = ++j;
        for (unsigned c; j < n && (c = (unsigned char)p[j] - (unsigned)'0') <= 9;
             j++, digits++, exp10--)
            m = m * 10 + c;
        if (j == f) return false;
        shaped = true;
    }
    if (j < n && (p[j] == 'e' || p[j] == 'E')) {
        j++;
        bool eneg = false;
        if (j < n && (p[j] == '+' || p[j] == '-')) eneg = p[j++] == '-';
        size_t e0 = j;
        int e = 0;
        for (; j < n && p[j] >= '0' && p[j] <= '9' && j - e0 < 4; j++) e = e * 10 + (p[j] - '0');
        if (j == e0 || j != n) return false; /* no digits, or 4+ digits */
        exp10 += eneg ? -e : e;
        shaped = true;
    }
    /* 19 digits cannot overflow m; 2^53 bounds an exact double. */
    if (!shaped || j != n || digits > 19 || m > (1ull << 53) || exp10 < -22 || exp10 > 22)
        return false;
    double x = (double)m;
    x = exp10 < 0 ? x / mst_tl_pow10_exact[-exp10] : x * mst_tl_pow10_exact[exp10];
    *out = neg ? -x : x;
    return true;
#else
    (void)p;
    (void)n;
    (void)out;
    return false;
#endif
}

/* A JSON number as int64 (integer syntax) or double. False if not a number. */
bool mst_tl_json_number_text(const mst_json_slice *v, bool *is_double, int64_t *i, double *d) {
    if (!v || !v->len || v->len >= 64 || !(v->ptr[0] == '-' || (v->ptr[0] >= '0' && v->ptr[0] <= '9')))
        return false;
    /* Short integers and plain decimals were read inline
     * (mst_tl_json_number); here: exponents, long numbers, anything else. */
    if (decimal_fast(v->ptr, v->len, d)) {
        *is_double = true;
        return true;
    }
    char tmp[64];
    memcpy(tmp, v->ptr, v->len);
    tmp[v->len] = 0;
    *is_double = memchr(tmp, '.', v->len) || memchr(tmp, 'e', v->len) || memchr(tmp, 'E', v->len);
    char *end;
    errno = 0;
    if (*is_double) *d = strtod(tmp, &end);
    else *i = strtoll(tmp, &end, 10);
    return *end == 0 && errno != ERANGE;
}

/* Index of each counter in mst_tl_counter_names (same order). */
enum { TL_BATCH_REQUESTS, TL_SCHEDULED_TOKENS, TL_WAITING, TL_RUNNING, TL_KV_USAGE };

/* Hands the counter sample of attribute `a` (counter `which` of
 * mst_tl_counter_names) to the sink when its value is a number. */
static void emit_counter(mst_timeline *tl, const mst_pf_span *s, int64_t pid, size_t a,
                         unsigned which, const mst_tl_sink *sink) {
    const mst_json_slice *v = &s->attrs[a].value;
    mst_tl_counter c = {mst_tl_counter_labels[which], pid, s->end_ns, false, 0, 0, v->ptr, v->len,
                        mst_tl_counter_json_names[which], mst_tl_counter_json_keys[which]};
    if (mst_tl_json_number(v, &c.is_double, &c.i, &c.d)) {
        if (which == TL_KV_USAGE) {
            /* a fraction, drawn in percent */
            c.d = (c.is_double ? c.d : (double)c.i) * 100.0;
            c.is_double = true;
            c.raw = NULL;
            c.raw_len = 0;
        }
        tl->st.counters_emitted++;
        if (sink && sink->counter) sink->counter(sink->self, &c);
    }
}

/* Keeps the two earliest distinct step starts (spans arrive by end time). */
static void note_step(int64_t start, int64_t *first, int64_t *second, uint32_t *count) {
    (*count)++;
    /* The usual: a step after the request's first two (a second one is
     * always after the first). */
    if (*second >= 0 && start > *second) return;
    if (*first < 0 || start < *first) {
        *second = *first;
        *first = start;
    } else if (start != *first && (*second < 0 || start < *second)) {
        *second = start;
    }
}

/* req_get of a split item: the entry its hint names when that entry is
 * still the one the hint was written for (its serial), else by hash; the
 * hint is updated. */
static inline req_entry *req_get_item(mst_timeline *tl, const mst_tl_id_item *it, int64_t pid,
                                      const mst_tl_sink *sink) {
    uint64_t h = it->hint ? *it->hint : 0, slot = h & HINT_SLOTS;
    if (slot - 1 < tl->used) { /* slot 0 (none) wraps past every count */
        req_entry *x = &tl->e[slot - 1];
        if (x->serial == h >> HINT_SLOT_BITS && x->id_len == it->n) return x;
    }
    req_entry *x = req_get(tl, it->s, it->n, pid, sink);
    if (x && it->hint) {
        uint64_t i = (uint64_t)(x - tl->e) + 1;
        *it->hint = i < HINT_SLOTS && x->serial < HINT_SERIALS ? x->serial << HINT_SLOT_BITS | i : 0;
    }
    return x;
}

/* The items of one list of request ids: its JSON text, or the caller's
 * split of it (mst_timeline_add_span_split). */
typedef struct tl_id_cursor {
    mst_json_reader r;
    const mst_tl_id_item *items; /* NULL: read r */
    const mst_tl_split_list *list; /* items' */
    size_t n, next;
} tl_id_cursor;

/* Starts c on list `v`: its split among lists[0..n_lists) when there, else
 * its JSON. False when it is not an array (nothing to read). */
static bool cursor_begin(tl_id_cursor *c, const mst_json_slice *v, const mst_tl_split_list *lists,
                         size_t n_lists) {
    for (size_t i = 0; i < n_lists; i++)
        if (lists[i].value == v) {
            c->items = lists[i].items;
            c->list = &lists[i];
            c->n = lists[i].n;
            c->next = 0;
            return true;
        }
    c->items = NULL;
    mst_json_reader_init(&c->r, v->ptr, v->len, MST_PF_MAX_DEPTH);
    return mst_json_peek(&c->r) == MST_JSON_ARRAY && mst_json_array_begin(&c->r);
}

/* The open entry of a list item's request (found or added): NULL when its
 * request was already emitted, or out of memory (*ok = false). */
static inline req_entry *item_request(mst_timeline *tl, req_entry *e, bool sched, bool *ok) {
    if (!e) {
        *ok = false;
        return NULL;
    }
    if (e->done) return NULL;
    /* A scheduling step (or a step list) that is not its run's own: the
     * entry's run stops here. Other spans only set what commutes with it. */
    if (sched && e->run_tag) run_settle(tl, e);
    e->last_seen_ms = tl->now_ms;
    return e;
}

/* next_request of a JSON list. */
static int next_json_request(mst_timeline *tl, mst_json_reader *r, int64_t pid, mst_arena *arena,
                             const mst_tl_sink *sink, bool sched, req_entry **x, bool *ok) {
    *x = NULL;
    if (mst_json_array_next(r) != 1) return 0;
    if (mst_json_peek(r) != MST_JSON_STRING) {
        mst_json_slice skip;
        return mst_json_read_raw(r, &skip) ? 1 : 0;
    }
    mst_str id;
    if (!mst_json_read_str_slice(r, arena, &id)) return 0;
    *x = item_request(tl, req_get(tl, id.ptr, id.len, pid, sink), sched, ok);
    return 1;
}

/* Reads the next item of a list of request ids: 1 with *x the item's open
 * entry, or NULL when the item is not a string, its request was already
 * emitted, or out of memory (*ok = false); 0 at the end of the list or on
 * bad JSON. Inline: a split list's items (the usual) take a few loads. */
static inline __attribute__((always_inline)) int
next_request(mst_timeline *tl, tl_id_cursor *c, int64_t pid, mst_arena *arena,
             const mst_tl_sink *sink, bool sched, req_entry **x, bool *ok) {
    if (!c->items) return next_json_request(tl, &c->r, pid, arena, sink, sched, x, ok);
    if (c->next == c->n) return 0;
    *x = item_request(tl, req_get_item(tl, &c->items[c->next++], pid, sink), sched, ok);
    return 1;
}

/* ---- step records (docs/architecture.md "1a") ---- */

/* Appends a phase event to x. Prefill chunks stop being recorded a few
 * short of the cap (the last recorded chunk then stands for the rest), so
 * a long chunked prefill leaves room for its decode and preemptions. */
static void seg_add(mst_timeline *tl, req_entry *x, int64_t ts, uint8_t kind) {
    unsigned limit = kind == SEG_PREFILL ? MST_TL_MAX_STEP_PHASES - 4 : MST_TL_MAX_STEP_PHASES;
    if (x->n_segs >= limit) {
        tl->st.phases_dropped++;
        return;
    }
    if (x->n_segs == x->cap_segs) {
        unsigned cap = x->cap_segs ? x->cap_segs * 2u : 4u;
        if (cap > MST_TL_MAX_STEP_PHASES) cap = MST_TL_MAX_STEP_PHASES;
        tl_seg *g = realloc(x->segs, cap * sizeof *g);
        if (!g) {
            tl->st.phases_dropped++;
            return;
        }
        x->segs = g;
        x->cap_segs = (uint8_t)cap;
    }
    x->segs[x->n_segs++] = (tl_seg){ts, kind, kind == SEG_PREFILL ? x->chunk : 0};
}

/* The request's phase in a step that scheduled it (step.phase: p, P, d). */
static void note_phase(mst_timeline *tl, req_entry *x, int64_t ts, char ph) {
    if (ph == 'p' || ph == 'P') {
        if (x->chunk < MST_TL_MAX_STEP_PHASES) x->chunk++;
        seg_add(tl, x, ts, SEG_PREFILL);
        x->cur = SEG_PREFILL;
    } else if (ph == 'd' && x->cur != SEG_DECODE) {
        seg_add(tl, x, ts, SEG_DECODE);
        x->cur = SEG_DECODE;
    }
}

enum { LIST_PREEMPTED, LIST_RESUMED, LIST_NEW };

/* Notes every request of a step list (a JSON array of ids) at ts; for
 * LIST_NEW with `queued` (step.queued_ns, parallel) its queued time.
 * *count gets the number of items. False on out of memory. */
static bool note_step_list(mst_timeline *tl, const mst_json_slice *list, int kind,
                           const mst_json_slice *queued, int64_t ts, int64_t pid, mst_arena *arena,
                           const mst_tl_sink *sink, const mst_tl_split_list *lists, size_t n_lists,
                           uint64_t *count) {
    tl_id_cursor r;
    mst_json_reader q;
    if (!cursor_begin(&r, list, lists, n_lists)) return true;
    bool have_q = false;
    if (queued) {
        mst_json_reader_init(&q, queued->ptr, queued->len, MST_PF_MAX_DEPTH);
        have_q = mst_json_peek(&q) == MST_JSON_ARRAY && mst_json_array_begin(&q);
    }
    bool ok = true;
    req_entry *x;
    while (next_request(tl, &r, pid, arena, sink, tl->attached != 0, &x, &ok)) {
        mst_json_slice qv = {NULL, 0};
        if (have_q && (mst_json_array_next(&q) != 1 || !mst_json_read_raw(&q, &qv))) have_q = false;
        (*count)++;
        if (!x) continue;
        if (kind == LIST_PREEMPTED) {
            seg_add(tl, x, ts, SEG_MARK_PREEMPTION);
            seg_add(tl, x, ts, SEG_PREEMPTED);
            x->cur = SEG_PREEMPTED;
            x->chunk = 0;
            x->preemptions++;
        } else if (kind == LIST_RESUMED) {
            seg_add(tl, x, ts, SEG_MARK_RESUME);
            x->chunk = 0;
        } else {
            if (x->new_ns < 0) x->new_ns = ts;
            /* a decimal string ("1796116600602211917"); "0" = unknown */
            int64_t ns = 0;
            for (size_t k = 1; qv.len >= 2 && k + 1 < qv.len && qv.ptr[k] >= '0' && qv.ptr[k] <= '9' &&
                               ns < INT64_MAX / 10 - 9; k++)
                ns = ns * 10 + (qv.ptr[k] - '0');
            if (ns > 0 && !x->queued_ns) x->queued_ns = ns;
        }
    }
    return ok;
}

/* The preemptions counter of the engine `pid`: sampled at each of its step
 * records when it changed (and at its first). */
static void note_preemptions(mst_timeline *tl, int64_t pid, int64_t ts, uint64_t n,
                             const mst_tl_sink *sink) {
    unsigned i = 0;
    while (i < tl->n_preempt && tl->preempt[i].pid != pid) i++;
    bool first = i == tl->n_preempt;
    if (first) {
        if (i == TL_PREEMPT_PIDS) return;
        tl->preempt[i].pid = pid;
        tl->preempt[i].n = 0;
        tl->n_preempt++;
    }
    if (!first && !n) return;
    tl->preempt[i].n += n;
    mst_tl_counter c = {MST_TL_PREEMPTIONS, pid, ts, false, (int64_t)tl->preempt[i].n, 0, NULL, 0,
                        "preemptions", "(total)"};
    tl->st.counters_emitted++;
    if (sink && sink->counter) sink->counter(sink->self, &c);
}

/* What a span naming request x in its request.ids tells of it: its times,
 * a step (step 2 or 1, as note_request_ids; a scheduling step of engine
 * `engine`, index + 1, 0: not an engine's) and its phase ph (the step
 * record's character for it, or -1). */
static inline void note_named(mst_timeline *tl, req_entry *x, int64_t start, int64_t end, int step,
                              uint8_t engine, int ph) {
    if (start < x->first_ns) x->first_ns = start;
    if (end > x->last_end_ns) x->last_end_ns = end;
    if (step == 2) {
        note_step(start, &x->sched1_ns, &x->sched2_ns, &x->steps);
        x->engine = engine;
    } else if (step == 1) note_step(start, &x->wsched1_ns, &x->wsched2_ns, &x->wsteps);
    /* Most requests of a step are decoding, as in the step before: nothing
     * to record, told here without a call (note_phase is not inlined). */
    if (ph == 'd' ? x->cur != SEG_DECODE : ph == 'p' || ph == 'P') note_phase(tl, x, start, (char)ph);
}

/* Scheduling steps naming fewer requests are counted eagerly: a run step
 * costs some 200 instructions more than its items' ~20 less each
 * (callgrind, bench_step_ids --engine). Exact either way: such a step
 * settles the entries it names (item_request); the others stay attached,
 * the run's count does not move. */
#define RUN_MIN_ITEMS 16u

/* How far past the next previous word a run step looks for an item's
 * word (vLLM's order: a few requests leave between two that stay). */
#define RUN_LOOKAHEAD 32u

/* Ends a run's list of words: no hint word (the serial's top bits are
 * never all set). */
#define RUN_END UINT64_MAX

/* Room for this step's n words in run r (and RUN_END); false when out of memory or too
 * many (the step is then counted eagerly). */
static bool run_reserve(tl_run *r, size_t n) {
    if (n < r->cap) return true; /* and one past: RUN_END */
    if (n >= HINT_SLOTS) return false;
    uint32_t cap = r->cap ? r->cap : 64;
    while (cap <= n) cap *= 2;
    uint64_t *a = realloc(r->prev, cap * sizeof *a);
    if (!a) return false;
    r->prev = a;
    uint64_t *b = realloc(r->next, cap * sizeof *b);
    if (!b) return false;
    r->next = b;
    uint8_t *c = realloc(r->prev_on, cap);
    if (!c) return false;
    r->prev_on = c;
    uint8_t *d = realloc(r->next_on, cap);
    if (!d) return false;
    r->next_on = d;
    if (!r->cap) r->prev[0] = RUN_END; /* else kept by realloc */
    r->cap = cap;
    return true;
}

/* The previous items of run r from j up to the one with word w (within
 * RUN_LOOKAHEAD), whose entries are settled as of the previous step: they
 * left (greedy alignment, as wire/ids_change.c). Returns the index after
 * w's, or j when w is not among them (w joined). Only which entries are settled early depends on
 * it, never a result. */
static __attribute__((noinline)) uint32_t run_align(mst_timeline *tl, tl_run *r, uint8_t run,
                                                    uint32_t j, uint32_t m, uint64_t w) {
    uint32_t lim = m - j > RUN_LOOKAHEAD ? j + RUN_LOOKAHEAD : m;
    for (uint32_t k = j + 1; k < lim; k++)
        if (r->prev[k] == w) {
            for (; j < k; j++) run_settle_word(tl, r->prev[j], run);
            return k + 1;
        }
    return j;
}

/* An item of run step `step_no` of engine `run` counted as
 * note_request_ids does (after settling its entry), its entry then
 * attached when every later step of the run that names it would only
 * count it: it is decoding (a later phase d changes nothing) and sched2_ns
 * is before them. Returns the item's word for the run's list. */
static __attribute__((noinline)) uint64_t run_item_eager(mst_timeline *tl, tl_run *r, uint8_t run, uint32_t step_no,
                               const mst_tl_id_item *it, int ph, const mst_pf_span *s,
                               int64_t pid, const mst_tl_sink *sink, bool *ok, uint8_t *on) {
    req_entry *x = item_request(tl, req_get_item(tl, it, pid, sink), true, ok);
    uint64_t w = it->hint ? *it->hint : 0;
    *on = 0;
    if (!x) return w;
    note_named(tl, x, s->start_ns, s->end_ns, 2, run, ph);
    if (x->cur == SEG_DECODE && x->sched2_ns >= 0 && x->sched2_ns < s->start_ns &&
        w == (x->serial << HINT_SLOT_BITS | (uint64_t)(x - tl->e + 1))) {
        x->run_tag = RUN_TAG(x->serial, run, step_no);
        x->run_base = step_no;
        r->attached++;
        tl->attached++;
        r->named++;
        *on = 1;
    }
    return w;
}

/* The items of a run step from idx on that the run counts (see
 * note_run_step), up to the first one it may not: each the next previous
 * one (RUN_END at prev[m]), a live entry counted by the run's previous step
 * (its tag), of the same length, not in phase p / P; each tagged as counted
 * by this step. Returns the index of the first other item. Its own
 * function: this loop is what a step costs per request, and has all the
 * registers to itself. */
static inline __attribute__((always_inline)) size_t
run_skip_items(mst_timeline *tl, const mst_tl_id_item *items, size_t idx, size_t n,
         const uint64_t *restrict prev, uint32_t *j_io, uint64_t *restrict next,
         uint8_t *restrict next_on, const unsigned char *ph, size_t n_phase, uint64_t counted,
         uint64_t counting, uint32_t *skipped_io, bool flags) {
    req_entry *const e = tl->e;
    const uint64_t used = tl->used;
    const uint64_t *pp = prev + *j_io;
    uint32_t skipped = 0;
    for (; idx < n; idx++) {
        const mst_tl_id_item *it = &items[idx];
        uint64_t w = it->hint ? *it->hint : 0;
        uint64_t slot = w & HINT_SLOTS;
        if (*pp != w || slot - 1 >= used) break; /* slot 0 (none) wraps */
        req_entry *x = &e[slot - 1];
        uint64_t serial_part = w & ~(uint64_t)HINT_SLOTS;
        if (x->run_tag != (serial_part | counted) || x->id_len != it->n ||
            (idx < n_phase && (ph[idx] | 0x20) == 'p'))
            break;
        x->run_tag = serial_part | counting;
        skipped++;
        next[idx] = w;
        if (flags) next_on[idx] = 1;
        pp++;
    }
    *j_io = (uint32_t)(pp - prev);
    *skipped_io += skipped;
    return idx;
}

/* run_skip_items keeping the flags (the step's list may be the base of a
 * vouched change: it names its stream), and without (it does not). */
static __attribute__((noinline)) size_t
run_skip(mst_timeline *tl, const mst_tl_id_item *items, size_t idx, size_t n,
         const uint64_t *restrict prev, uint32_t *j_io, uint64_t *restrict next,
         uint8_t *restrict next_on, const unsigned char *ph, size_t n_phase, uint64_t counted,
         uint64_t counting, uint32_t *skipped_io) {
    return run_skip_items(tl, items, idx, n, prev, j_io, next, next_on, ph, n_phase, counted, counting,
                          skipped_io, true);
}
static __attribute__((noinline)) size_t
run_skip_unflagged(mst_timeline *tl, const mst_tl_id_item *items, size_t idx, size_t n,
                   const uint64_t *restrict prev, uint32_t *j_io, uint64_t *restrict next,
                   const unsigned char *ph, size_t n_phase, uint64_t counted, uint64_t counting,
                   uint32_t *skipped_io) {
    return run_skip_items(tl, items, idx, n, prev, j_io, next, NULL, ph, n_phase, counted, counting,
                          skipped_io, false);
}

/* Whether step list change c (vouched by its writer) says how the list
 * came from run r's last one, and r's position flags are exactly its
 * attached entries (every attach is a run step's, with its flag; any other
 * detach lowers `attached`): then the step is counted by position. */
static bool run_vouched(const tl_run *r, const mst_tl_list_change *c, size_t n) {
    if (!c->stream || c->stream != r->v_stream || c->conn != r->v_conn || c->origin != r->v_origin ||
        r->v_seq == INT64_MAX || c->seq != r->v_seq + 1 || c->n_prev != r->n_prev ||
        r->n_flagged != r->attached || c->kept > n || c->kept + c->n_left != c->n_prev ||
        (c->n_left && !c->left))
        return false;
    for (uint32_t i = 0; i < c->n_left; i++)
        if (c->left[i] >= c->n_prev || (i && c->left[i] <= c->left[i - 1])) return false;
    return true;
}

/* The first of a step's items [i, end) that a step counted by position
 * counts itself: its entry not attached (on[i] 0) or its phase p / P.
 * Eight at a time (the flags are 0 or 1; a zero byte told as in strlen). */
static inline size_t run_next_own(const uint8_t *on, const unsigned char *ph, size_t n_phase, size_t i,
                                  size_t end) {
    const uint64_t ones = 0x0101010101010101ull, highs = ones * 0x80;
    for (; i + 8 <= end; i += 8) {
        uint64_t f, p;
        memcpy(&f, on + i, 8);
        uint64_t z = (f - ones) & ~f & highs;
        if (i + 8 <= n_phase) {
            memcpy(&p, ph + i, 8);
            p = (p | ones * 0x20) ^ ones * 'p';
            z |= (p - ones) & ~p & highs;
        } else if (i < n_phase) {
            break;
        }
        if (z) break;
    }
    for (; i < end; i++)
        if (!on[i] || (i < n_phase && (ph[i] | 0x20) == 'p')) return i;
    return end;
}

/* Counts a step of run r by position (run_vouched): the previous items
 * that left are settled as of the previous step (their flags tell which
 * were attached), the kept ones copied with their words and flags, and of
 * those a flagged one not in phase p / P is counted by the run's count
 * alone, without touching its entry (its run_tag stays behind: v_fast);
 * every other item by run_item_eager. Anything that would settle one of
 * the run's entries meanwhile (an eviction, an item naming it again) first
 * tags the ones counted so far (run_materialize), and the rest of the step
 * is then counted item by item. Returns the flags set. */
static uint32_t run_step_by_position(mst_timeline *tl, tl_run *r, uint8_t run, uint32_t step_no,
                                     const mst_pf_span *s, int64_t pid, const mst_tl_id_item *items,
                                     size_t n, const mst_tl_list_change *c, const unsigned char *ph,
                                     size_t n_phase, const mst_tl_sink *sink, bool *ok) {
    const uint64_t *prev = r->prev;
    uint64_t *next = r->next;
    const uint8_t *prev_on = r->prev_on;
    uint8_t *next_on = r->next_on;
    for (uint32_t i = 0; i < c->n_left; i++) {
        if (!prev_on[c->left[i]]) continue;
        req_entry *x = word_entry(tl, prev[c->left[i]]);
        if (x && TAG_RUN(x->run_tag) == run) run_settle_tagged(tl, x);
    }
    uint32_t flagged = 0, g = 0;
    size_t idx = 0;
    r->vouching = true;
    r->v_fast = 0;
    for (uint32_t li = 0; li <= c->n_left && r->vouching; li++) {
        uint32_t end = li < c->n_left ? c->left[li] : c->n_prev;
        size_t stop = idx + (end - g);
        memcpy(next + idx, prev + g, (end - g) * sizeof *next);
        memcpy(next_on + idx, prev_on + g, end - g);
        g = end + 1;
        while (r->vouching) {
            size_t o = run_next_own(next_on, ph, n_phase, idx, stop);
            r->v_fast += (uint32_t)(o - idx);
            flagged += (uint32_t)(o - idx);
            idx = o;
            if (idx == stop) break;
            r->v_idx = (uint32_t)idx;
            if (next_on[idx]) { /* attached, phase p / P: not counted by this step yet */
                req_entry *x = word_entry(tl, next[idx]);
                if (x && TAG_RUN(x->run_tag) == run) run_settle_tagged(tl, x);
            }
            next[idx] = run_item_eager(tl, r, run, step_no, &items[idx], idx < n_phase ? ph[idx] : -1, s,
                                       pid, sink, ok, &next_on[idx]);
            flagged += next_on[idx++];
        }
    }
    /* the joined ones (and the rest, if the run stopped vouching) */
    for (; idx < n; idx++) {
        r->v_idx = (uint32_t)idx;
        next[idx] = run_item_eager(tl, r, run, step_no, &items[idx], idx < n_phase ? ph[idx] : -1, s, pid,
                                   sink, ok, &next_on[idx]);
        flagged += next_on[idx];
    }
    r->v_idx = (uint32_t)n;
    return flagged;
}

/* note_request_ids of a scheduling step of engine `run` (index + 1) whose
 * request.ids the writer split: a step of the engine's run (see the file
 * comment). When the writer vouched for how the list came from the run's
 * last one, by position (run_step_by_position); else by words: an item
 * whose hint word names a live entry attached to this run and counted by
 * its previous step (so not named by this one yet), with a phase that
 * changes nothing (not p / P), is counted by the run's step count alone;
 * every other one by run_item_eager. The previous step's entries this one
 * does not name are settled as of the previous step. */
static __attribute__((noinline)) bool note_run_step(mst_timeline *tl, const mst_pf_span *s, int64_t pid, uint8_t run,
                          const mst_tl_id_item *items, size_t n, const mst_tl_list_change *change,
                          const mst_str *phase, const mst_tl_sink *sink) {
    tl_run *r = &tl->runs[run - 1];
    /* Out of order (or two threads' steps): what the run holds cannot be
     * counted on; the same for a list it cannot keep. */
    if (r->attached && (s->start_ns <= r->last_start || s->end_ns < r->last_end))
        run_settle_all(tl, run);
    bool ok = true;
    if (!run_reserve(r, n)) {
        run_settle_all(tl, run);
        r->n_prev = r->n_flagged = 0;
        r->v_stream = 0;
        if (r->cap) r->prev[0] = RUN_END;
        for (size_t idx = 0; idx < n; idx++) {
            req_entry *x = item_request(tl, req_get_item(tl, &items[idx], pid, sink), true, &ok);
            if (x) note_named(tl, x, s->start_ns, s->end_ns, 2, run,
                              phase && idx < phase->len ? (unsigned char)phase->ptr[idx] : -1);
        }
        return ok;
    }
    uint32_t step_no = r->count + 1;
    r->in_step = true;
    r->cur_end = s->end_ns;
    r->cur_now = tl->now_ms;
    r->named = 0;
    /* Entries attached to the run were all counted by its previous step
     * (the others were settled): run_tag tells them from this step's. */
    const uint64_t counted = RUN_TAG(0, run, r->count), counting = RUN_TAG(0, run, step_no);
    /* Locals the compiler need not reload after each store (the loop is
     * what a step costs per request). */
    const uint64_t *restrict prev = r->prev;
    uint64_t *restrict next = r->next;
    uint8_t *restrict next_on = r->next_on;
    const unsigned char *ph_chars = phase ? (const unsigned char *)phase->ptr : NULL;
    const size_t n_phase = phase ? phase->len : 0;
    uint32_t j = 0, m = r->n_prev, skipped = 0, flagged = 0;
    size_t idx = 0;
    if (run_vouched(r, change, n)) {
        flagged = run_step_by_position(tl, r, run, step_no, s, pid, items, n, change, ph_chars, n_phase,
                                       sink, &ok);
        tl->st.steps_by_position++;
        tl->st.items_by_position += r->v_fast;
        j = m;
        idx = n;
    }
    while (idx < n) {
        idx = change->stream ? run_skip(tl, items, idx, n, prev, &j, next, next_on, ph_chars, n_phase,
                                        counted, counting, &skipped)
                             : run_skip_unflagged(tl, items, idx, n, prev, &j, next, ph_chars, n_phase,
                                                  counted, counting, &skipped);
        if (idx == n) break;
        /* Any other: aligned first (previous items skipped over left). */
        const mst_tl_id_item *it = &items[idx];
        uint64_t w = it->hint ? *it->hint : 0;
        if (prev[j] == w) j++;
        else if (j < m && w) j = run_align(tl, r, run, j, m, w);
        int ph = idx < n_phase ? ph_chars[idx] : -1;
        /* (attached to this run and not named by this step yet: its tag
         * names an earlier step, the previous one or, after steps counted
         * by position, one before) */
        req_entry *x = word_entry(tl, w);
        if (x && (x->run_tag & ~(uint64_t)0xffff00) == RUN_TAG(x->serial, run, 0) &&
            TAG_STEP(x->run_tag) != STEP16(step_no) && x->id_len == it->n && (ph | 0x20) != 'p') {
            x->run_tag = RUN_TAG(x->serial, 0, 0) | counting;
            skipped++;
            next[idx] = w;
            next_on[idx] = 1;
        } else {
            next[idx] = run_item_eager(tl, r, run, step_no, it, ph, s, pid, sink, &ok, &next_on[idx]);
            flagged += next_on[idx];
        }
        idx++;
    }
    r->named += skipped;
    flagged += skipped;
    for (; j < m; j++) run_settle_word(tl, prev[j], run);
    /* Counted by position: the entries it did not touch are tagged only
     * when something is to be settled, or before their tags could be read
     * as a later step's (16 bits of step; tag_floor). */
    bool behind = false;
    if (r->vouching) {
        if (r->named + r->v_fast != r->attached || step_no - r->tag_floor >= 1u << 14) {
            run_materialize(tl, r, run);
        } else {
            behind = r->v_fast != 0;
            r->named += r->v_fast;
            r->vouching = false;
        }
    }
    if (!behind) r->tag_floor = step_no;
    /* An entry attached before this step that it did not name and the
     * alignment missed (an unusual order): found among the previous words. */
    for (uint32_t k = 0; r->named != r->attached && k < m; k++) run_settle_word(tl, prev[k], run);
    for (uint32_t i = 0; r->named != r->attached && i < tl->used; i++) /* never: for safety */
        if (tl->e[i].serial && TAG_RUN(tl->e[i].run_tag) == run &&
            TAG_STEP(tl->e[i].run_tag) != STEP16(step_no))
            run_settle(tl, &tl->e[i]);
    r->in_step = false;
    r->count = step_no;
    r->last_start = s->start_ns;
    r->last_end = s->end_ns;
    r->last_now = tl->now_ms;
    next[n] = RUN_END;
    r->next = r->prev;
    r->prev = next;
    r->next_on = r->prev_on;
    r->prev_on = next_on;
    r->n_prev = (uint32_t)n;
    r->n_flagged = change->stream ? flagged : UINT32_MAX; /* no stream: its flags are not kept */
    r->v_stream = change->stream;
    r->v_conn = change->conn;
    r->v_origin = change->origin;
    r->v_seq = change->seq;
    return ok;
}

/* Notes every request in the span's request.ids (a validated JSON array).
 * step: 2 = a scheduling step (the schedule adapter's span), 1 = a batch
 * span (batch.scheduled_tokens: also the model steps), used only for
 * requests that no scheduling step named, 0 = neither; `engine`: the
 * engine a scheduling step is of (note_named). `phase`: the step record's
 * step.phase (one character per id), or NULL. */
static bool note_request_ids(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                             const mst_json_slice *ids, int step, uint8_t engine,
                             const mst_str *phase,
                             mst_arena *arena, const mst_tl_sink *sink,
                             const mst_tl_split_list *lists, size_t n_lists) {
    tl_id_cursor r;
    if (!cursor_begin(&r, ids, lists, n_lists)) return true;
    bool ok = true;
    int64_t start = s->start_ns, end = s->end_ns;
    size_t n_phase = phase ? phase->len : 0;
    if (r.items) { /* split by the writer: one pass over its items */
        if (step == 2 && engine && r.n >= RUN_MIN_ITEMS && !tl->eager_runs)
            return note_run_step(tl, s, pid, engine, r.items, r.n, &r.list->change, phase, sink);
        /* Two loops: the usual one (nothing attached) without the check. */
        if (step == 2 && tl->attached)
            for (size_t idx = 0; idx < r.n; idx++) {
                req_entry *x = item_request(tl, req_get_item(tl, &r.items[idx], pid, sink), true, &ok);
                if (x) note_named(tl, x, start, end, step, engine, idx < n_phase ? (unsigned char)phase->ptr[idx] : -1);
            }
        else
            for (size_t idx = 0; idx < r.n; idx++) {
                req_entry *x = item_request(tl, req_get_item(tl, &r.items[idx], pid, sink), false, &ok);
                if (x) note_named(tl, x, start, end, step, engine, idx < n_phase ? (unsigned char)phase->ptr[idx] : -1);
            }
        return ok;
    }
    req_entry *x;
    for (size_t idx = 0; next_request(tl, &r, pid, arena, sink, step == 2 && tl->attached, &x, &ok); idx++)
        if (x) note_named(tl, x, start, end, step, engine, idx < n_phase ? (unsigned char)phase->ptr[idx] : -1);
    return ok;
}

/* ---- engine steps ---- */

#define TL_SCHEDULE_SPAN "vllm.scheduler.schedule"
#define TL_UPDATE_SPAN "vllm.scheduler.update_from_output"
#define TL_WORKER_SPAN "vllm.worker.execute_model"
#define TL_OUTPUT_SPAN "vllm.output.process"

static bool name_is(const mst_pf_span *s, const char *lit) {
    size_t n = strlen(lit);
    return s->name.len == n && memcmp(s->name.ptr, lit, n) == 0;
}

/* The step slice's own flow id: from the engine and the step number (a
 * different kind of key than a span's, so never one of theirs but by chance). */
static uint64_t step_flow(int64_t pid, int64_t index) {
    return mst_tl_flow_mix((uint64_t)pid ^ 0x5354455053ull, (uint64_t)index, 0x73746570ull);
}

/* The flow id a span of `kind` joined to a written step carries. */
static uint64_t join_flow(uint64_t step, uint8_t kind) {
    return mst_tl_flow_mix(step, kind, 0x6a6f696eull);
}

/* The engine (index + 1) of request id (s, n) when a scheduling step of a
 * known engine named it; 0 otherwise. */
static uint8_t id_engine(const mst_timeline *tl, const char *s, size_t n) {
    uint32_t i = req_find(tl, s, n, str_hash(tl->seed, s, n));
    return i ? tl->e[i - 1].engine : 0;
}

/* The first plain (unescaped) string item of a JSON list of ids; false when
 * there is none. */
static bool first_plain_id(const mst_json_slice *list, const char **s, size_t *n) {
    const char *p = list->ptr, *end = list->ptr + list->len;
    while (p < end && (*p == ' ' || *p == '[' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    if (p == end || *p != '"') return false;
    const char *q = ++p;
    while (q < end && *q != '"' && *q != '\\') q++;
    if (q == end || *q != '"' || q == p) return false;
    *s = p;
    *n = (size_t)(q - p);
    return true;
}

/* Which engine a worker forward or an output processing belongs to
 * (docs/architecture.md "One step on the timeline"): the engine whose
 * scheduling step last named the first id of its request.ids — a worker's
 * batch is its step's, and an output span processes one engine's outputs
 * (vLLM's API server handles each engine's EngineCoreOutputs on its own).
 * 0: not known, *id (the first id) then tells why: NULL when the span
 * names no request the timeline can read (no request.ids, an escaped
 * id), else no scheduling step named it yet (its step is still to come). */
static uint8_t span_engine(const mst_timeline *tl, const mst_pf_span *s, const char **id,
                           size_t *id_n) {
    *id = NULL;
    *id_n = 0;
    for (size_t a = 0; a < s->n_attrs; a++)
        if (s->attrs[a].key.len == 11 && memcmp(s->attrs[a].key.ptr, "request.ids", 11) == 0) {
            if (!first_plain_id(&s->attrs[a].value, id, id_n)) return 0;
            return id_engine(tl, *id, *id_n);
        }
    return 0;
}

/* Whether waiting span w may join a step of `engine`: a span of that
 * engine, or one naming no request (its engine is looked up again by its
 * first id while not known: the step may have named it since). */
static bool waiting_joins(const mst_timeline *tl, tl_waiting_span *w, uint8_t engine) {
    if (!w->engine && w->id_len) w->engine = id_engine(tl, w->id, w->id_len);
    return w->engine == engine || (!w->engine && !w->id_len);
}

/* Joins the waiting span of `kind` that belongs to the step [start, end]
 * of engine `engine` (index + 1) to it: a worker forward that started
 * within it, or the earliest output processing that started after it
 * ended (of equal starts, the one in the lowest ring slot); of the spans
 * naming requests only those of this engine (waiting_joins). */
static bool join_waiting(mst_timeline *tl, uint8_t kind, uint8_t engine, int64_t start,
                         int64_t end, mst_tl_step *st) {
    if (!tl->waiting_live[kind]) return false;
    tl_waiting_span *best = NULL;
    for (uint64_t n = tl->waiting_lo; n < tl->waiting_next; n++) {
        tl_waiting_span *w = &tl->waiting[n % TL_WAITING_SPANS];
        if (w->kind != kind) continue;
        int64_t t = w->pos.ts_ns;
        bool in = kind == JOIN_WORKER ? t >= start && t <= end : t >= end;
        if (!in || (best && (t > best->pos.ts_ns || (t == best->pos.ts_ns && w > best)))) continue;
        if (waiting_joins(tl, w, engine)) best = w;
    }
    if (!best) return false;
    st->joined[st->n_joined++] = best->pos;
    best->kind = 0;
    tl->waiting_live[kind]--;
    while (tl->waiting_lo < tl->waiting_next && !tl->waiting[tl->waiting_lo % TL_WAITING_SPANS].kind)
        tl->waiting_lo++;
    return true;
}

/* Puts span `at` of `kind` in the waiting ring, over its oldest entry when
 * full, with its engine or the first request id to tell it by later. */
static void wait_for_step(mst_timeline *tl, const mst_tl_pos *at, uint8_t kind, uint8_t engine,
                          const char *id, size_t id_n) {
    tl_waiting_span *w = &tl->waiting[tl->waiting_next % TL_WAITING_SPANS];
    if (w->kind) tl->waiting_live[w->kind]--;
    w->pos = *at;
    w->kind = kind;
    w->engine = engine;
    w->id_len = 0;
    if (!engine && id && id_n <= TL_WAIT_ID_MAX) {
        memcpy(w->id, id, id_n);
        w->id_len = (uint8_t)id_n;
    }
    tl->waiting_live[kind]++;
    if (++tl->waiting_next - tl->waiting_lo > TL_WAITING_SPANS)
        tl->waiting_lo = tl->waiting_next - TL_WAITING_SPANS;
}

/* Step k (0: the oldest kept) of ring r. */
static inline tl_done_step *done_at(const tl_done_ring *r, uint32_t k) {
    return &r->s[(r->head + k) & (TL_DONE_STEPS - 1)];
}

/* Keeps step d in its engine's ring (over the oldest when full), in order
 * of end time: a step that ended before the last one kept (spans out of
 * order) is moved back to its place. NULL when out of memory (the step is
 * then not joined to spans arriving after it). */
static tl_done_step *done_add(tl_done_ring *r, const tl_done_step *d) {
    if (!r->s && !(r->s = malloc(TL_DONE_STEPS * sizeof *r->s))) return NULL;
    if (r->n == TL_DONE_STEPS) {
        r->head = (r->head + 1) & (TL_DONE_STEPS - 1);
        r->n--;
    }
    uint32_t k = r->n++;
    for (; k && done_at(r, k - 1)->end_ns > d->end_ns; k--) *done_at(r, k) = *done_at(r, k - 1);
    *done_at(r, k) = *d;
    return done_at(r, k);
}

/* The number of r's steps that ended before t (at_or_before: at or
 * before t): the steps are in order of end, so a binary search. */
static uint32_t done_ended_before(const tl_done_ring *r, int64_t t, bool at_or_before) {
    uint32_t lo = 0, hi = r->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int64_t e = done_at(r, mid)->end_ns;
        if (e < t || (at_or_before && e == t)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The step of ring r a span of `kind` starting at t belongs to, or NULL:
 * a worker forward's is the first step ending at or after t, if it started
 * at or before t (the one step containing t: one engine's steps follow
 * each other); an output processing's is the last step that ended at or
 * before t (of equal ends, the last closed). */
static tl_done_step *done_candidate(const tl_done_ring *r, uint8_t kind, int64_t t) {
    if (kind == JOIN_WORKER) {
        uint32_t k = done_ended_before(r, t, false);
        tl_done_step *d = k < r->n ? done_at(r, k) : NULL;
        return d && d->pos.ts_ns <= t ? d : NULL;
    }
    uint32_t k = done_ended_before(r, t, true);
    return k ? done_at(r, k - 1) : NULL;
}

/* Hands the open step of engine e to the sink, ending at end_ns. */
static void step_close(mst_timeline *tl, tl_engine *e, int64_t end_ns, const mst_tl_sink *sink) {
    e->open = false;
    uint8_t engine = (uint8_t)(e - tl->eng + 1);
    mst_tl_step st;
    memset(&st, 0, sizeof st);
    st.pid = e->pid;
    st.tid = e->tid;
    st.index = e->index;
    st.start_ns = e->start_ns;
    st.end_ns = end_ns > e->start_ns ? end_ns : e->start_ns;
    st.requests = e->requests;
    st.tokens = e->tokens;
    st.flow = step_flow(e->pid, e->index);
    tl_done_step d = {{st.pid, st.tid, st.start_ns, st.flow}, st.end_ns, false, false};
    d.worker = join_waiting(tl, JOIN_WORKER, engine, st.start_ns, st.end_ns, &st);
    st.worker_flow = d.worker ? st.joined[st.n_joined - 1].flow : join_flow(st.flow, JOIN_WORKER);
    d.output = join_waiting(tl, JOIN_OUTPUT, engine, st.start_ns, st.end_ns, &st);
    st.output_flow = d.output ? st.joined[st.n_joined - 1].flow : join_flow(st.flow, JOIN_OUTPUT);
    if (!d.worker) st.later[st.n_later++] = st.worker_flow;
    if (!d.output) st.later[st.n_later++] = st.output_flow;
    (void)done_add(&tl->done[engine - 1], &d);
    if (sink && sink->step) sink->step(sink->self, &st);
}

/* Follows the engine's steps: a schedule span with step.index opens one
 * (closing the previous), the update_from_output on the same thread closes
 * it, other spans of that thread extend it. Returns the engine of the
 * span's process (index + 1 in tl->eng), 0 when it is none. */
static uint8_t note_engine_step(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                                const mst_json_slice *index, int64_t requests, int64_t tokens,
                                const mst_tl_sink *sink) {
    unsigned i = 0;
    while (i < tl->n_eng && tl->eng[i].pid != pid) i++;
    bool is_d;
    int64_t idx = 0;
    double dv;
    bool opens = index && name_is(s, TL_SCHEDULE_SPAN) && mst_tl_json_number(index, &is_d, &idx, &dv) &&
                 !is_d && idx >= 0;
    if (i == tl->n_eng) {
        if (!opens || i == TL_ENGINES) return 0;
        tl->n_eng++;
        tl->eng[i].open = false;
    }
    tl_engine *e = &tl->eng[i];
    int64_t tid = s->has_tid ? s->tid : 0;
    if (opens) {
        if (e->open) step_close(tl, e, e->last_end_ns, sink);
        *e = (tl_engine){pid, tid, idx, s->start_ns, s->end_ns, requests, tokens, true};
        return (uint8_t)(i + 1);
    }
    if (!e->open || tid != e->tid) return (uint8_t)(i + 1);
    if (s->end_ns > e->last_end_ns) e->last_end_ns = s->end_ns;
    if (name_is(s, TL_UPDATE_SPAN)) step_close(tl, e, e->last_end_ns, sink);
    return (uint8_t)(i + 1);
}

static uint8_t join_kind(const mst_pf_span *s) {
    return name_is(s, TL_WORKER_SPAN) ? JOIN_WORKER : name_is(s, TL_OUTPUT_SPAN) ? JOIN_OUTPUT : 0;
}

bool mst_timeline_joins_step(const mst_pf_span *s) { return join_kind(s) != 0; }

/* A worker process runs the batches of one engine (its EngineCore's
 * executor started it), so a forward naming no request — an idle data-
 * parallel engine's dummy batch, which runs while the other engines step —
 * is its process's engine's. Remembers `engine` (index + 1) for worker
 * process pid when known, and returns the one remembered otherwise (0:
 * none). */
static uint8_t tl_worker_engine(mst_timeline *tl, int64_t pid, uint8_t engine) {
    unsigned i = 0;
    while (i < tl->n_worker_engine && tl->worker_engine[i].pid != pid) i++;
    if (!engine) return i < tl->n_worker_engine ? tl->worker_engine[i].engine : 0;
    if (i == tl->n_worker_engine) {
        if (tl->n_worker_engine < TL_WORKER_PIDS) {
            tl->n_worker_engine++;
        } else {
            i = tl->next_worker_engine;
            tl->next_worker_engine = (i + 1) % TL_WORKER_PIDS;
        }
    }
    tl->worker_engine[i].pid = pid;
    tl->worker_engine[i].engine = engine;
    return engine;
}

bool mst_timeline_join_step(mst_timeline *tl, const mst_pf_span *s, const mst_tl_pos *at,
                            mst_tl_pos *step) {
    uint8_t kind = join_kind(s);
    if (!tl || !kind) return false;
    const char *id;
    size_t id_n;
    uint8_t engine = span_engine(tl, s, &id, &id_n);
    if (kind == JOIN_WORKER) engine = tl_worker_engine(tl, at->pid, engine);
    /* Its engine's step (none yet when no step named its requests: it
     * waits); for a span naming no request of no known engine (an output
     * processing, a worker before its first batch), the best of every
     * engine's: of
     * the steps containing a worker forward's start whose forward is not
     * joined yet, the one that started last; the output's that ended last.
     * Equal: the engine seen first. */
    tl_done_step *best = NULL;
    unsigned k_end = engine ? engine : id ? 0 : tl->n_eng;
    for (unsigned k = engine ? engine - 1u : 0; k < k_end; k++) {
        tl_done_step *d = done_candidate(&tl->done[k], kind, at->ts_ns);
        if (!d) continue;
        if (kind == JOIN_WORKER ? !d->worker && (!best || d->pos.ts_ns > best->pos.ts_ns)
                                : !best || d->end_ns > best->end_ns)
            best = d;
    }
    /* Joined already: its forward (with tensor parallelism one per rank:
     * the first one joins) or its output processing came before. */
    if (best && (kind == JOIN_WORKER ? best->worker : best->output)) best = NULL;
    if (best) {
        if (kind == JOIN_WORKER) best->worker = true;
        else best->output = true;
        *step = best->pos;
        step->flow = join_flow(best->pos.flow, kind);
        return true;
    }
    wait_for_step(tl, at, kind, engine, id, id_n);
    return false;
}

/* The request.id of a vllm.request span, unescaped into arena. */
static bool request_span_id(const mst_pf_span *s, mst_arena *arena, mst_str *id) {
    if (!name_is(s, MST_TL_REQUEST_SPAN)) return false;
    const mst_json_slice *rid = NULL;
    for (size_t a = 0; a < s->n_attrs && !rid; a++)
        if (s->attrs[a].key.len == 10 && memcmp(s->attrs[a].key.ptr, "request.id", 10) == 0)
            rid = &s->attrs[a].value;
    if (!rid || rid->len < 2 || rid->ptr[0] != '"') return false;
    mst_json_reader r;
    mst_json_reader_init(&r, rid->ptr, rid->len, 1);
    return mst_json_read_str_slice(&r, arena, id);
}

int32_t mst_timeline_arrival_rank(mst_timeline *tl, int64_t start_ns) {
    if (!tl->have_rank_base) {
        tl->have_rank_base = true;
        tl->rank_base_ns = start_ns - 60ll * 1000000000ll;
    }
    int64_t ms = (start_ns - tl->rank_base_ns) / 1000000;
    return (int32_t)(ms < 0 ? 1 : ms > INT32_MAX - 1 ? INT32_MAX : ms + 1);
}

uint32_t mst_timeline_request_lane(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                                   mst_arena *arena, const mst_tl_sink *sink) {
    mst_str id;
    if (!tl || !request_span_id(s, arena, &id)) return 0;
    req_entry *x = req_get(tl, id.ptr, id.len, pid, sink);
    return x ? x->lane : 0;
}


static inline bool key_is(const mst_str *k, const char *lit, size_t n) {
    return k->len == n && memcmp(k->ptr, lit, n) == 0;
}
#define KEY_IS(k, lit) key_is(k, lit, sizeof lit - 1)

bool mst_timeline_add_span(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                           mst_arena *arena, const mst_tl_sink *sink) {
    return mst_timeline_add_span_split(tl, s, pid, arena, sink, NULL, 0);
}

bool mst_timeline_add_span_split(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                                 mst_arena *arena, const mst_tl_sink *sink,
                                 const mst_tl_split_list *lists, size_t n_lists) {
    /* One pass over the attributes, dispatched on the key's length: the
     * counter samples (every such attribute, in order) and the first of
     * each key the request bookkeeping reads. */
    const mst_json_slice *rid = NULL, *ids = NULL;
    /* the step record's lists */
    const mst_json_slice *phase = NULL, *new_ids = NULL, *queued = NULL, *resumed = NULL,
                         *preempted = NULL;
    if (!tl->have_rank_base) (void)mst_timeline_arrival_rank(tl, s->start_ns);
    if (s->end_ns > tl->last_span_end_ns) tl->last_span_end_ns = s->end_ns;
    const mst_json_slice *step_index = NULL, *batch_count = NULL, *batch_tokens = NULL;
    bool sched_step = false, batch_step = false;
    uint8_t engine = 0; /* of the span's process (index + 1), when it is an engine's */
    size_t ctr_at[TL_KV_USAGE + 1] = {0}; /* counter attributes, index + 1 */
    for (size_t a = 0; a < s->n_attrs; a++) {
        const mst_str *k = &s->attrs[a].key;
        const mst_json_slice *v = &s->attrs[a].value;
        switch (k->len) {
        case 10:
            if (!rid && KEY_IS(k, "request.id")) rid = v;
            else if (!phase && KEY_IS(k, "step.phase")) phase = v;
            else if (!step_index && KEY_IS(k, "step.index")) step_index = v;
            break;
        case 11:
            if (!ids && KEY_IS(k, "request.ids")) ids = v;
            break;
        case 12:
            if (!new_ids && KEY_IS(k, "step.new_ids")) new_ids = v;
            break;
        case 14:
            if (KEY_IS(k, "kv_cache.usage")) ctr_at[TL_KV_USAGE] = a + 1;
            else if (!queued && KEY_IS(k, "step.queued_ns")) queued = v;
            break;
        case 16:
            if (!resumed && KEY_IS(k, "step.resumed_ids")) resumed = v;
            break;
        case 18:
            if (!preempted && KEY_IS(k, "step.preempted_ids")) preempted = v;
            break;
        case 17:
            /* Set only by the schedule adapter: a scheduling step. */
            if (KEY_IS(k, "scheduler.waiting")) {
                sched_step = true;
                ctr_at[TL_WAITING] = a + 1;
            } else if (KEY_IS(k, "scheduler.running")) {
                sched_step = true;
                ctr_at[TL_RUNNING] = a + 1;
            }
            break;
        case 19:
            if (KEY_IS(k, "batch.request_count")) {
                batch_count = v;
                ctr_at[TL_BATCH_REQUESTS] = a + 1;
            }
            break;
        case 22:
            /* Also set by the model adapter: a batch step. */
            if (KEY_IS(k, "batch.scheduled_tokens")) {
                batch_step = true;
                batch_tokens = v;
                ctr_at[TL_SCHEDULED_TOKENS] = a + 1;
            }
            break;
        default:
            break;
        }
    }
    /* Counters once per engine: from its scheduling steps only (the batch
     * attributes of the model and output spans say the same again). */
    if (sched_step)
        for (unsigned k = 0; k <= TL_KV_USAGE; k++)
            if (ctr_at[k]) emit_counter(tl, s, pid, ctr_at[k] - 1, k, sink);
    {
        bool is_d;
        double dv;
        int64_t nreq = -1, ntok = -1;
        if (batch_count && (!mst_tl_json_number(batch_count, &is_d, &nreq, &dv) || is_d)) nreq = -1;
        if (batch_tokens && (!mst_tl_json_number(batch_tokens, &is_d, &ntok, &dv) || is_d)) ntok = -1;
        engine = note_engine_step(tl, s, pid, step_index, nreq, ntok, sink);
    }
    bool is_request_span = s->name.len == sizeof MST_TL_REQUEST_SPAN - 1 &&
                           memcmp(s->name.ptr, MST_TL_REQUEST_SPAN, s->name.len) == 0;
    if (is_request_span) {
        if (!rid || rid->len < 2 || rid->ptr[0] != '"') return true;
        mst_json_reader r;
        mst_json_reader_init(&r, rid->ptr, rid->len, 1);
        mst_str id;
        if (!mst_json_read_str_slice(&r, arena, &id)) return true;
        req_entry *x = req_get(tl, id.ptr, id.len, pid, sink);
        if (!x) return false;
        /* Held for MST_TL_REQUEST_GRACE_MS: the other processes' spans of the
         * same request (their exporters batch for seconds) may still come. */
        if (!x->done && !x->has_span) {
            x->has_span = true;
            x->span_start = s->start_ns;
            x->span_end = s->end_ns;
            x->span_pid = pid;
            x->span_seen_ms = tl->now_ms;
        }
        return true;
    }
    int step = sched_step ? 2 : batch_step ? 1 : 0;
    mst_str ph = {NULL, 0};
    bool record = false, ok = true;
    if (step == 2 && phase && phase->len >= 2 && phase->ptr[0] == '"') {
        mst_json_reader r;
        mst_json_reader_init(&r, phase->ptr, phase->len, 1);
        record = mst_json_read_str_slice(&r, arena, &ph);
    }
    if (record) {
        /* Preempted, then resumed (a resumed request is scheduled in the
         * same step: its first chunk follows the marker), then new. */
        uint64_t n_preempted = 0, n = 0;
        if (preempted)
            ok &= note_step_list(tl, preempted, LIST_PREEMPTED, NULL, s->start_ns, pid, arena, sink,
                                 lists, n_lists, &n_preempted);
        if (resumed)
            ok &= note_step_list(tl, resumed, LIST_RESUMED, NULL, s->start_ns, pid, arena, sink, lists,
                                 n_lists, &n);
        if (new_ids)
            ok &= note_step_list(tl, new_ids, LIST_NEW, queued, s->start_ns, pid, arena, sink, lists,
                                 n_lists, &n);
        note_preemptions(tl, pid, s->end_ns, n_preempted, sink);
    }
    if (!ids) return ok;
    return note_request_ids(tl, s, pid, ids, step, engine, record ? &ph : NULL, arena, sink, lists,
                            n_lists) && ok;
}

void mst_timeline_finish_all(mst_timeline *tl, const mst_tl_sink *sink) {
    for (unsigned k = 0; k < tl->n_eng; k++)
        if (tl->eng[k].open) step_close(tl, &tl->eng[k], tl->eng[k].last_end_ns, sink);
    for (uint32_t i = tl->oldest; i; i = tl->e[i - 1].newer) {
        req_entry *x = &tl->e[i - 1];
        if (!x->done) req_emit(tl, x, sink);
    }
}

uint32_t mst_timeline_open_requests(const mst_timeline *tl) { return tl ? tl->open : 0; }

void mst_timeline_tick(mst_timeline *tl, uint64_t now_ms, const mst_tl_sink *sink) {
    /* The runs take the latest forwarder time as the last: a clock set
     * back settles them first. */
    if (now_ms < tl->now_ms)
        for (unsigned k = 0; k < tl->n_eng; k++) run_settle_all(tl, (uint8_t)(k + 1));
    tl->now_ms = now_ms;
    if (now_ms - tl->last_scan_ms < MST_TL_SCAN_EVERY_MS) return;
    tl->last_scan_ms = now_ms;
    /* A full scan, at most once a second: ready entries are not in FIFO
     * order (arrival of the request span is), and the table is bounded. */
    for (uint32_t i = tl->oldest; i;) {
        req_entry *x = &tl->e[i - 1];
        uint32_t next = x->newer;
        if (x->run_tag) run_settle(tl, x); /* last_seen_ms is read */
        /* Noted before the first tick: their clock starts now. */
        if (x->has_span && !x->span_seen_ms) x->span_seen_ms = now_ms;
        if (!x->last_seen_ms) x->last_seen_ms = now_ms;
        if (!x->done &&
            ((x->has_span && now_ms - x->span_seen_ms >= MST_TL_REQUEST_GRACE_MS) ||
             (!x->has_span && now_ms - x->last_seen_ms >= MST_TL_STEPS_IDLE_MS)))
            req_emit(tl, x, sink);
        i = next;
    }
}

void mst_timeline_forwarder_counters(mst_timeline *tl, int64_t pid, int64_t ts_ns,
                                     uint64_t received, uint64_t written, uint64_t dropped,
                                     const mst_tl_sink *sink) {
    /* Sampled only while something changes, and never after the latest
     * end of a span added: a forwarder idling before and after the traced
     * work, or receiving the exporters' last batches seconds after it,
     * would stretch the file's time span (the viewer's default zoom) far
     * beyond it. A later sample is held at that end (the values it writes
     * are the counts as of now; both clocks only move forward, so the
     * samples stay in time order). */
    if (!received && !written && !dropped) return;
    if (tl->last_span_end_ns > 0 && ts_ns > tl->last_span_end_ns) ts_ns = tl->last_span_end_ns;
    if (tl->fwd_sampled && ts_ns < tl->fwd_last_ts_ns) ts_ns = tl->fwd_last_ts_ns;
    if (tl->fwd_sampled && received == tl->fwd_last_received && written == tl->fwd_last_written &&
        dropped == tl->fwd_last_dropped)
        return;
    tl->fwd_sampled = true;
    tl->fwd_last_received = received;
    tl->fwd_last_written = written;
    tl->fwd_last_dropped = dropped;
    tl->fwd_last_ts_ns = ts_ns;
    const char *names[3] = {MST_TL_FWD_RECEIVED, MST_TL_FWD_WRITTEN, MST_TL_FWD_DROPPED};
    uint64_t vals[3] = {received, written, dropped};
    for (int k = 0; k < 3; k++) {
        mst_tl_counter c = {names[k], pid, ts_ns, false, (int64_t)vals[k], 0, NULL, 0, NULL, NULL};
        tl->st.counters_emitted++;
        if (sink && sink->counter) sink->counter(sink->self, &c);
    }
}

void mst_timeline_get_stats(const mst_timeline *tl, mst_tl_stats *out) {
    if (tl) *out = tl->st;
    else memset(out, 0, sizeof *out);
}

/* Hex digit values (any case; every other byte 0, as the Chrome writer). */
static const uint8_t hexval_tbl[256] = {
    ['0'] = 0, ['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 5, ['6'] = 6, ['7'] = 7,
    ['8'] = 8, ['9'] = 9, ['a'] = 10, ['b'] = 11, ['c'] = 12, ['d'] = 13, ['e'] = 14,
    ['f'] = 15, ['A'] = 10, ['B'] = 11, ['C'] = 12, ['D'] = 13, ['E'] = 14, ['F'] = 15};

/* Up to 16 hex digits as a number, stopping at NUL. */
static inline uint64_t hex64(const char *h) {
    uint64_t v = 0;
    for (int i = 0; i < 16 && h[i]; i++) v = (v << 4) | hexval_tbl[(uint8_t)h[i]];
    return v;
}

uint64_t mst_tl_flow_id(const char *trace_hex, const char *span_hex) {
    size_t tl = strnlen(trace_hex, 32);
    uint64_t t_hi = hex64(trace_hex);
    uint64_t t_lo = tl > 16 ? hex64(trace_hex + 16) : 0;
    return mst_tl_flow_mix(t_hi, t_lo, hex64(span_hex));
}
