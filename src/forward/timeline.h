/*
 * timeline.h — the forwarder's timeline model, shared by both output
 * writers (Chrome Trace JSON in chrome_trace.c, native Perfetto in
 * pftrace_writer.c) so the two files say the same thing.
 *
 * What it derives from the decoded hook spans, beyond the span's own slice
 * on its process/thread track (which each writer lays out directly):
 *   - request tracks: one per request id, spanning arrival -> finish, with
 *     its phases. From the step record (docs/architecture.md "1a": the
 *     schedule spans' step.phase, step.new_ids/queued_ns, step.preempted_ids,
 *     step.resumed_ids): "queued" (queued_ns, else arrival -> first
 *     scheduled), "prefill chunk k" (one per p/P step, k from 1 again after a
 *     resume), "decode" (the first d step -> the next preemption or the
 *     finish), "preempted" (the preempting step -> the resuming one), and
 *     zero-length "preemption" / "resume" markers; each phase runs from its
 *     step's start to the next phase's start. Without a step record (older
 *     traces): "queued" (arrival -> first scheduled), "prefill" (first
 *     scheduling step -> the next one) and "decode" (-> finish). Fed by the
 *     `vllm.request` span (request.id; its start is the arrival, its end the
 *     finish) and by every other span naming the request in `request.ids`.
 *     A request is handed to the writer once it is complete: its
 *     `vllm.request` span arrived MST_TL_REQUEST_GRACE_MS ago (the engine's
 *     spans of the same request come from other processes whose exporters
 *     batch for seconds, often after it), or — for requests without one
 *     (no auto-trace) — no span named it for MST_TL_STEPS_IDLE_MS, spanning
 *     the first to the last span that named it; and at close, or when the
 *     bounded table evicts it. Time is the forwarder's (mst_timeline_tick). The scheduling steps are the
 *     spans with scheduler.running/waiting (set by the schedule adapter
 *     only); for requests no such span named, spans with
 *     batch.scheduled_tokens stand in.
 *   - counters: per process (engine) samples of the span attributes listed
 *     in mst_tl_counter_names (batch size, scheduled tokens, requests
 *     waiting/running, KV-cache usage), at the span's end; the preemptions
 *     so far per engine (MST_TL_PREEMPTIONS, from step.preempted_ids); and
 *     the forwarder's own spans received / written / dropped.
 *   - engine steps: one per schedule span with step.index, from its start
 *     to the end of the update_from_output that follows on the engine
 *     thread, joined by flows to the worker's forward and the step's output
 *     processing (mst_tl_step).
 *   - flow ids: a 64-bit id per (trace_id, span_id); a span carries its own
 *     id and the ids of the spans it links to, so a link is visible whatever
 *     order the two spans arrive in (no pending table in the native writer).
 *
 * Threads: one (the forwarder's event loop). Memory: the request table is
 * bounded (MST_TL_MAX_REQUESTS, oldest completed first).
 */
#ifndef MST_FORWARD_TIMELINE_H
#define MST_FORWARD_TIMELINE_H

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "wire/hex8.h"
#include "wire/perfetto_packet.h"

#define MST_TL_MAX_REQUESTS 65536
/* How long a request is held after its vllm.request span arrived. */
#define MST_TL_REQUEST_GRACE_MS 10000u
/* A request without one is complete after this long unnamed. */
#define MST_TL_STEPS_IDLE_MS 60000u
/* mst_timeline_tick scans for complete requests at most this often. */
#define MST_TL_SCAN_EVERY_MS 1000u
/* Name of the span that stands for a whole request (started by the plugin). */
#define MST_TL_REQUEST_SPAN "vllm.request"

/* Phases recorded per request from step records (prefill chunks, decode,
 * preemptions and markers); later ones are dropped and counted
 * (mst_tl_stats.phases_dropped). */
#define MST_TL_MAX_STEP_PHASES 48
/* A request track's phases: queued, then the recorded ones. */
#define MST_TL_MAX_PHASES (1 + MST_TL_MAX_STEP_PHASES)
/* The counter of preemptions so far, per engine process. */
#define MST_TL_PREEMPTIONS "preemptions (total)"

/* One phase slice of a request track (start == end: a marker). */
typedef struct mst_tl_phase {
    const char *name;  /* "queued", "prefill chunk 2", "decode", "preempted",
                          "preemption", "resume"; or "prefill" (no step record) */
    int64_t start_ns, end_ns;
} mst_tl_phase;

/* A complete request track. */
typedef struct mst_tl_request {
    const char *id;          /* valid during the callback only */
    size_t id_len;
    int64_t pid;             /* process of the request span, else of its first span */
    int64_t start_ns;        /* arrival (request span start) or first naming span */
    int64_t end_ns;          /* finish (request span end) or last naming span's end */
    bool has_request_span;
    uint32_t steps;          /* scheduling steps that named it */
    uint32_t preemptions;    /* step records that preempted it */
    mst_tl_phase phases[MST_TL_MAX_PHASES]; /* in time order, nested in the request */
    unsigned n_phases;
    uint32_t lane;           /* this request's number, from 1 in order first seen (its track) */
} mst_tl_request;

/* Where a slice was written, and its own flow id (a flow joining it). */
typedef struct mst_tl_pos {
    int64_t pid, tid, ts_ns;
    uint64_t flow;
} mst_tl_pos;

/* One engine step (docs/architecture.md "1a"): from the start of the
 * schedule span carrying step.index to the end of the update_from_output
 * span that follows it on the same engine thread (else the last span of the
 * engine before the next schedule). `joined`: the worker's forward
 * (vllm.worker.execute_model within the step) and the output processing of
 * the step (the first vllm.output.process starting after the step ends),
 * of the same engine (mst_timeline_join_step), when their slices were
 * already written; one written later is joined to the step by
 * mst_timeline_join_step. */
#define MST_TL_STEP_JOINS 2
/* Spans kept waiting for their step (a ring: the oldest is forgotten). */
#define MST_TL_WAITING_SPANS 4096
typedef struct mst_tl_step {
    int64_t pid, tid;        /* the engine thread */
    int64_t index;           /* step.index */
    int64_t start_ns, end_ns;
    int64_t requests, tokens; /* batch.request_count, batch.scheduled_tokens; -1: unknown */
    uint64_t flow;           /* the step slice's own flow id */
    mst_tl_pos joined[MST_TL_STEP_JOINS];
    unsigned n_joined;
    /* Flow ids a span joined later carries (the position
     * mst_timeline_join_step returns has it), one per kind not yet joined:
     * a writer whose flows are ids on both ends puts them on the step. */
    uint64_t later[MST_TL_STEP_JOINS];
    unsigned n_later;
    /* The flow id joining the step to its worker forward and to its output
     * processing: the span's own id when it was joined already, else the
     * one it will carry (in `later`). */
    uint64_t worker_flow, output_flow;
} mst_tl_step;

typedef struct mst_tl_counter {
    const char *name;        /* static string with its unit: "KV cache usage (%)"
                                (mst_tl_counter_labels), or the forwarder's own */
    int64_t pid;             /* the process the counter track belongs to */
    int64_t ts_ns;
    bool is_double;
    int64_t i;
    double d;
    /* The value's JSON text as the span carried it (NULL for the
     * forwarder's own counters): the JSON writer copies it as is. */
    const char *raw;
    size_t raw_len;
    /* The JSON's parts (a viewer names a counter "<event name> <arg key>"):
     * "KV cache usage" and "(%)"; NULL: `name` and "value" (the forwarder's
     * own). Last, so that initializers without them keep that meaning. */
    const char *json_name, *json_key;
} mst_tl_counter;

/* What a writer does with the model's output. */
typedef struct mst_tl_sink {
    void *self;
    void (*request)(void *self, const mst_tl_request *r);
    void (*counter)(void *self, const mst_tl_counter *c);
    void (*step)(void *self, const mst_tl_step *st); /* may be NULL */
} mst_tl_sink;

typedef struct mst_tl_stats {
    uint64_t requests_emitted;
    uint64_t requests_evicted;   /* completed early because the table was full */
    uint64_t counters_emitted;
    uint64_t phases_dropped;     /* over MST_TL_MAX_STEP_PHASES for one request */
    uint64_t steps_by_position;  /* scheduling steps counted by a vouched change (mst_tl_list_change) */
    uint64_t items_by_position;  /* ... their requests counted without reading their entries */
} mst_tl_stats;

typedef struct mst_timeline mst_timeline;

/* Span attributes plotted as per-engine counters (from the scheduling
 * steps: the schedule spans), NULL-terminated; their track names with the
 * unit (same order), and the two parts of each. kv_cache.usage (0..1) is
 * drawn in percent. */
extern const char *const mst_tl_counter_names[];
extern const char *const mst_tl_counter_labels[];
extern const char *const mst_tl_counter_json_names[];
extern const char *const mst_tl_counter_json_keys[];
/* Names of the forwarder's own counter tracks. */
#define MST_TL_FWD_RECEIVED "forwarder.spans_received"
#define MST_TL_FWD_WRITTEN "forwarder.spans_written"
#define MST_TL_FWD_DROPPED "forwarder.spans_dropped"

mst_timeline *mst_timeline_new(uint32_t max_requests);
void mst_timeline_free(mst_timeline *tl);

/* Feeds one span (pid already defaulted by the caller); completed requests
 * and counter samples go to `sink`. `arena` is scratch for unescaping ids
 * (reset by the caller). Returns false on out of memory (the span's
 * request bookkeeping is then partly skipped; nothing else is harmed). */
bool mst_timeline_add_span(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                           mst_arena *arena, const mst_tl_sink *sink);

/* One item of a request-id list its caller split already: the text
 * between the quotes of a JSON string without escapes. `hint` (may be
 * NULL): a word the caller keeps with this id's text only, where the
 * timeline remembers where it found the id (its table slot and that
 * entry's serial: a hint of an entry since evicted is told as stale and
 * costs a lookup). The caller sets the word to 0 whenever it gives it to
 * another text — including a text change during the call that passed it
 * (then it zeroes every word it passed). */
typedef struct mst_tl_id_item {
    const char *s;
    size_t n;
    uint64_t *hint;
} mst_tl_id_item;

/* What a caller vouches for about how a split list came from the one
 * before it (optional: stream 0 vouches nothing). The `.pftrace` writer
 * fills it for a request.ids list the forwarder rebuilt from a change whose
 * base the writer verified as its own previous list of that stream: the
 * list is list `seq` of the sequence (stream, conn, origin) — the caller's
 * stream key, and the connection and stream its lists are numbered on, one
 * list per seq — and is list seq - 1 of that sequence (of n_prev items)
 * without the items at positions left[0..n_left) (strictly increasing, each
 * below n_prev), the others kept in their order as items [0, kept), then
 * items [kept, n) joined. The timeline uses it only when the list before
 * it that it saw is that list seq - 1 (its own record tells); otherwise
 * (or when it does not add up) the list counts as if nothing were vouched. */
typedef struct mst_tl_list_change {
    uint64_t stream, conn;
    int64_t origin, seq;
    uint32_t n_prev, n_left;
    const uint32_t *left;
    size_t kept;
} mst_tl_list_change;

/* A list of span attribute `value` (a JSON array of plain strings) split
 * into items[0..n), in order, and what the caller vouches for about it. */
typedef struct mst_tl_split_list {
    const mst_json_slice *value;
    const mst_tl_id_item *items;
    size_t n;
    mst_tl_list_change change;
} mst_tl_split_list;

/* mst_timeline_add_span for a caller that split some of the span's id
 * lists already (the `.pftrace` writer, which writes them as interned
 * ids): an attribute value among lists[0..n_lists) is read from its items
 * instead of its JSON text, to the same result. */
bool mst_timeline_add_span_split(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                                 mst_arena *arena, const mst_tl_sink *sink,
                                 const mst_tl_split_list *lists, size_t n_lists);

/* Whether scheduling steps whose request.ids come split (the `.pftrace`
 * writer's) are counted lazily by their engine's run (the default; see
 * timeline.c) or each request eagerly. Both give the same results, to the
 * byte: the switch exists so that tests can verify the runs against the
 * eager path. */
void mst_timeline_set_lazy_runs(mst_timeline *tl, bool lazy);

/* Advances the model's clock (the forwarder's monotonic ms) and, at most
 * once per MST_TL_SCAN_EVERY_MS, hands complete requests to `sink`. */
void mst_timeline_tick(mst_timeline *tl, uint64_t now_ms, const mst_tl_sink *sink);

/* Requests known and not yet handed to the sink (a caller keeps ticking
 * while there are any). */
uint32_t mst_timeline_open_requests(const mst_timeline *tl);

/* Completes every request still open (at close). */
void mst_timeline_finish_all(mst_timeline *tl, const mst_tl_sink *sink);

/* The forwarder's own counters at ts_ns (the daemon's clock; held at the
 * latest end of a span added, so they end with the traced work), on the
 * track of process `pid`; nothing when no count changed. */
void mst_timeline_forwarder_counters(mst_timeline *tl, int64_t pid, int64_t ts_ns,
                                     uint64_t received, uint64_t written, uint64_t dropped,
                                     const mst_tl_sink *sink);

void mst_timeline_get_stats(const mst_timeline *tl, mst_tl_stats *out);

/* The lane (mst_tl_request.lane) of the request a `vllm.request` span
 * stands for, creating its entry; 0 when s is not one (or out of memory).
 * A writer calls it before writing the span, to put it on its request's
 * own track. */
uint32_t mst_timeline_request_lane(mst_timeline *tl, const mst_pf_span *s, int64_t pid,
                                   mst_arena *arena, const mst_tl_sink *sink);

/* The scope (category) of the spans the plugin's EngineCore writes for a
 * request's own trace (its phases and steps in Jaeger): the writers draw the
 * same phases from the step record, so they skip these. */
#define MST_TL_STORY_SCOPE "mstrace.request_story"
static inline bool mst_tl_is_story_span(const mst_pf_span *s) {
    return s->category.len == sizeof MST_TL_STORY_SCOPE - 1 &&
           memcmp(s->category.ptr, MST_TL_STORY_SCOPE, s->category.len) == 0;
}

/* Thread ids of the tracks the writers add inside a traced process (the
 * same in both files): above every real Linux tid (at most 2^22), below
 * 2^31. A request's own thread, by its lane; an engine's step track. */
#define MST_TL_REQUEST_TID 0x40000000ll
#define MST_TL_REQUEST_LANES 0x3fff0000u
#define MST_TL_STEPS_TID 0x7fff0000ll
static inline int64_t mst_tl_request_tid(uint32_t lane) {
    return MST_TL_REQUEST_TID + (int64_t)(lane % MST_TL_REQUEST_LANES);
}

/* The rank of a request arriving at start_ns among this file's requests
 * (its thread's sort index): milliseconds since a minute before the first
 * span seen, from 1 (0 and below are the real threads'), within int32. */
int32_t mst_timeline_arrival_rank(mst_timeline *tl, int64_t start_ns);

/* Whether s is a span an engine step is joined to (a worker forward or an
 * output processing). */
bool mst_timeline_joins_step(const mst_pf_span *s);

/* Called by a writer before writing span s at `at` (its pid, tid, start and
 * own flow id): when s is a worker forward or an output processing whose
 * engine step was already handed to the sink, true with *step the step
 * slice's position (the writer joins the two with a flow). Otherwise s is
 * remembered (a bounded ring) and joined when its step completes. The
 * returned position's flow is the one of mst_tl_step.later for s.
 *
 * Its step: a worker forward's is the step of its engine that contains
 * its start and has no forward joined yet; an output processing's the last
 * step of its engine that ended at or before its start, if that step's
 * output is not joined yet. Its engine is the one whose scheduling step
 * named the first id of its request.ids (with data parallelism each
 * EngineCore is an engine, and a span of one is never joined to another's
 * step, however their steps overlap); a span naming requests no step named
 * yet waits for its engine's step. A worker forward's engine is also its
 * process's: the engine of that process's forwards before it (a worker
 * runs one engine's batches), so a forward naming no request (an idle
 * data-parallel engine's dummy batch) joins its own engine's step. A span
 * of no known engine naming no request may join any engine's step: of a
 * forward's candidates the one that started last, of an output's the one
 * that ended last (equal: the engine seen first).
 * Each engine's last 1,024 steps are kept, in order of their end, and
 * found by a binary search. */
bool mst_timeline_join_step(mst_timeline *tl, const mst_pf_span *s, const mst_tl_pos *at,
                            mst_tl_pos *step);

/* A validated JSON number (raw text) as int64 (integer syntax) or double;
 * false when the value is not a number or does not fit. The out-of-line
 * part of mst_tl_json_number (fractions, exponents, long integers). */
bool mst_tl_json_number_text(const mst_json_slice *v, bool *is_double, int64_t *i, double *d);

/* Exact powers of ten a double holds: 1e0 .. 1e22. */
extern const double mst_tl_pow10_exact[23];

/* The same; the usual attribute values inline: integers of up to 18
 * characters (batch sizes, lengths, token counts) and plain decimals of
 * up to 18 characters ("0.4375": KV-cache usage), the latter as strtod
 * reads them (digits and power of ten are exact doubles, so one division
 * rounds once: Clinger's fast path, as mst_tl_json_number_text). */
static inline bool mst_tl_json_number(const mst_json_slice *v, bool *is_double, int64_t *i,
                                      double *d) {
    if (v && v->len && v->len <= 18) {
        const char *p = v->ptr;
        size_t n = v->len, k = p[0] == '-';
        uint64_t x = 0;
        size_t j = k;
        for (; j < n; j++) {
            unsigned c = (unsigned char)p[j] - (unsigned)'0';
            if (c > 9) break;
            x = x * 10 + c;
        }
        if (j == n && j > k) {
            *is_double = false;
            *i = k ? -(int64_t)x : (int64_t)x;
            return true;
        }
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
        if (j > k && j < n && p[j] == '.') {
            size_t f = ++j;
            for (; j < n; j++) {
                unsigned c = (unsigned char)p[j] - (unsigned)'0';
                if (c > 9) break;
                x = x * 10 + c;
            }
            /* 17 digits at most: x < 10^17 < 2^57; exact below 2^53. */
            if (j == n && j > f && x <= (1ull << 53)) {
                double r = (double)x / mst_tl_pow10_exact[n - f];
                *is_double = true;
                *d = k ? -r : r;
                return true;
            }
        }
#endif
    }
    return mst_tl_json_number_text(v, is_double, i, d);
}

/* Flow id of the span (trace_id, span_id): hex ids of any case and length
 * (up to 32 / 16 digits, stopping at NUL); never 0. The general path of
 * mst_tl_span_flow_id, which decoded ids take 16 digits at a time. */
uint64_t mst_tl_flow_id(const char *trace_hex, const char *span_hex);

/* The 64 bits of a flow id from the id values (trace high and low words,
 * span id): the span id mixed with the trace id, so the same span id in two
 * traces gives two flows. */
static inline uint64_t mst_tl_flow_mix(uint64_t t_hi, uint64_t t_lo, uint64_t sp) {
    uint64_t h = sp ^ (t_hi * 0x9E3779B97F4A7C15ull) ^
                 ((t_lo + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full);
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h ? h : 1;
}

/* mst_tl_flow_id of a decoded span's or link's ids (the arrays of
 * mst_pf_span / mst_pf_link: 33 and 17 bytes, read whole). Inline: the
 * writer takes 2-3 per span; decoded ids (32 + 16 lowercase hex digits)
 * are converted 16 digits at a time; anything else takes mst_tl_flow_id,
 * to the same value. */
static inline uint64_t mst_tl_span_flow_id(const char trace_hex[33], const char span_hex[17]) {
    /* A NUL is not a hex digit: success means all 48 digits are there. */
#ifdef MST_HEX8_SWAR
    uint64_t t_hi, t_lo, sp;
    if (mst_hex16_value(trace_hex, &t_hi) && mst_hex16_value(trace_hex + 16, &t_lo) &&
        mst_hex16_value(span_hex, &sp))
        return mst_tl_flow_mix(t_hi, t_lo, sp);
#endif
    return mst_tl_flow_id(trace_hex, span_hex);
}

#endif /* MST_FORWARD_TIMELINE_H */
