/*
 * request_story.c — a request's story in its own trace (request_story.h).
 * Owns the story table: request id -> its context, the phase it is in, when
 * that phase began and the engine steps it was in since (a short malloc'd
 * array, at most MSTN_STORY_EVENTS). A phase span is started and ended at
 * once when its end is known (a span cannot change after its end is
 * exported): `queued` at the request's first step, `prefill` at the step
 * after the one that sampled its first token (or at a preemption),
 * `decode` at the step that reports it finished (step.finished_ids), at a
 * preemption, or at exit. Why in this process: the API server's
 * `vllm.request` span cannot see the engine's steps (another process); the
 * engine knows each request's context from its trace headers and already
 * reads every step in C. Runs on the scheduling thread under the GIL.
 */
#include "request_story.h"
#include "context.h"
#include "state.h"
#include "reqtable.h"

#include <stdlib.h>
#include <string.h>

#define SLOTS (MSTN_STORY_MAX * 2u)
#define TOMB UINT32_MAX
#define SCOPE_NAME "mstrace.request_story"

enum { PH_WAITING = 0, PH_PREFILL, PH_DECODE, PH_PREEMPTED };

typedef struct story_event {
    uint64_t ts;
    int64_t index, tokens, batch;
    mst_trace_id trace_id;
    mst_span_id span_id;
} story_event;

typedef struct story {
    char *id;                  /* NULL: free */
    size_t id_len;
    uint64_t hash, seq;        /* seq: age, for eviction */
    mstn_ctx ctx;
    bool has_ctx;
    uint8_t phase;
    bool sampled;              /* this prefill sampled its first token (P) */
    bool resumed;              /* the next prefill follows a preemption */
    bool queued_done;
    uint64_t queued_ns;        /* step.queued_ns; 0: unknown */
    uint64_t seg_start;        /* start of the current phase */
    uint64_t preempted_ns;
    uint64_t resume_ts;        /* a `resumed` event opens the next span */
    int64_t last_index;
    uint64_t last_end;         /* end of the last schedule span naming it */
    story_event *ev;
    uint32_t n_ev, cap_ev, dropped_ev;
} story;

static story g_pool[MSTN_STORY_MAX];
static uint32_t g_slots[SLOTS];  /* pool index + 1; 0 empty; TOMB deleted */
static uint32_t g_count, g_tombs;
static uint64_t g_seq;
static int64_t g_last_index = -1;
static uint64_t g_last_update_end;
static const mst_scope *g_scope;
static uint64_t g_scope_gen;

static uint32_t *slot_of(const char *id, size_t n, uint64_t h, bool for_insert) {
    uint32_t *tomb = NULL;
    for (uint32_t p = (uint32_t)h & (SLOTS - 1);; p = (p + 1) & (SLOTS - 1)) {
        uint32_t v = g_slots[p];
        if (v == 0)
            return for_insert && tomb ? tomb : &g_slots[p];
        if (v == TOMB) {
            if (!tomb)
                tomb = &g_slots[p];
            continue;
        }
        story *s = &g_pool[v - 1];
        if (s->hash == h && s->id_len == n && memcmp(s->id, id, n) == 0)
            return &g_slots[p];
    }
}

static story *find(const char *id, size_t n) {
    uint32_t v = *slot_of(id, n, mstn_id_hash(id, n), false);
    return v && v != TOMB ? &g_pool[v - 1] : NULL;
}

static void forget(story *s) {
    uint32_t *slot = slot_of(s->id, s->id_len, s->hash, false);
    *slot = TOMB;
    g_tombs++;
    g_count--;
    free(s->id);
    free(s->ev);
    memset(s, 0, sizeof *s);
    if (g_tombs > MSTN_STORY_MAX / 2) { /* rebuild without tombstones */
        memset(g_slots, 0, sizeof g_slots);
        g_tombs = 0;
        for (uint32_t i = 0; i < MSTN_STORY_MAX; i++)
            if (g_pool[i].id)
                *slot_of(g_pool[i].id, g_pool[i].id_len, g_pool[i].hash, true) = i + 1;
    }
}

static const mst_scope *scope(void) {
    if (!g_scope || g_scope_gen != mstn_g.tracer_gen) {
        g_scope = mst_tracer_scope(mstn_g.tracer, SCOPE_NAME, NULL);
        g_scope_gen = mstn_g.tracer_gen;
    }
    return g_scope;
}

/* Starts and ends the span `name` of s's current phase, [seg_start, end],
 * a child of the request's context, with its step events and, when
 * `last_event` is set, that event at `last_ts`. Clears the events. */
static void emit(story *s, const char *name, uint64_t end, const char *last_event, uint64_t last_ts) {
    mst_tracer *tr = mstn_g.tracer;
    uint64_t start = s->seg_start;
    if (end < start)
        end = start;
    mst_span *span = NULL;
    if (tr && s->has_ctx && mstn_ctx_sampled(&s->ctx)) {
        if (s->ctx.synthetic) { /* its span id names no span: a root in its trace */
            mst_span_id sid = mst_span_id_random();
            span = mst_span_start_with_ids(tr, scope(), name, MST_SPAN_KIND_INTERNAL, NULL, &s->ctx.trace_id,
                                           &sid, start);
        } else {
            mst_span_context pc;
            mstn_ctx_to_public(&s->ctx, &pc);
            span = mst_span_start(tr, scope(), name, MST_SPAN_KIND_INTERNAL, &pc, start);
        }
    }
    if (span) {
        mst_span_set_strn_lit(span, MST_LIT("request.id"), s->id, strlen(s->id));
        mst_span_set_int_lit(span, MST_LIT("process.pid"), mstn_g.pid);
        if (mstn_g.role[0])
            mst_span_set_strn_lit(span, MST_LIT("process.role"), mstn_g.role, strlen(mstn_g.role));
        if (s->n_ev || s->dropped_ev)
            mst_span_set_int_lit(span, MST_LIT("request.steps"), (int64_t)(s->n_ev + s->dropped_ev));
        if (s->dropped_ev)
            mst_span_set_int_lit(span, MST_LIT("steps.dropped"), s->dropped_ev);
        if (s->resume_ts)
            mst_span_add_event(span, "resumed", s->resume_ts, NULL, 0);
        for (uint32_t i = 0; i < s->n_ev; i++) {
            const story_event *e = &s->ev[i];
            char t[33], sp[17];
            mst_trace_id_to_hex(&e->trace_id, t);
            mst_span_id_to_hex(&e->span_id, sp);
            mst_attr_in a[5] = {
                {.key = "step.index", .type = MST_ATTR_INT, .v.i = e->index},
                {.key = "step.tokens", .type = MST_ATTR_INT, .v.i = e->tokens},
                {.key = "batch.request_count", .type = MST_ATTR_INT, .v.i = e->batch},
                {.key = "step.span_id", .type = MST_ATTR_STRING, .v.s = sp},
                {.key = "step.trace_id", .type = MST_ATTR_STRING, .v.s = t},
            };
            mst_span_add_event(span, "step", e->ts, a, 5);
        }
        if (last_event)
            mst_span_add_event(span, last_event, last_ts, NULL, 0);
        mst_span_set_status(span, MST_STATUS_OK, NULL);
        mst_span_end(span, end);
    }
    s->n_ev = s->dropped_ev = 0;
    s->resume_ts = 0;
}

/* Ends the phase s is in at `t` (a prefill or decode), with `why` as its
 * last event. */
static void end_phase(story *s, uint64_t t, const char *why) {
    if (s->phase == PH_PREFILL)
        emit(s, "vllm.request.prefill", t, why, t);
    else if (s->phase == PH_DECODE)
        emit(s, "vllm.request.decode", t, why, t);
}

static story *get(const char *id, size_t n) {
    story *s = find(id, n);
    if (s)
        return s;
    if (g_count == MSTN_STORY_MAX) { /* full: the oldest story ends here */
        story *old = NULL;
        for (uint32_t i = 0; i < MSTN_STORY_MAX; i++)
            if (g_pool[i].id && (!old || g_pool[i].seq < old->seq))
                old = &g_pool[i];
        end_phase(old, old->last_end, "evicted");
        forget(old);
    }
    uint32_t i = 0;
    while (g_pool[i].id)
        i++;
    s = &g_pool[i];
    if (!(s->id = malloc(n + 1)))
        return NULL;
    memcpy(s->id, id, n);
    s->id[n] = '\0';
    s->id_len = n;
    s->hash = mstn_id_hash(id, n);
    s->seq = ++g_seq;
    s->last_index = -1;
    *slot_of(id, n, s->hash, true) = i + 1;
    g_count++;
    return s;
}

static void add_event(story *s, const story_event *e) {
    if (s->n_ev == s->cap_ev) {
        uint32_t cap = s->cap_ev ? s->cap_ev * 2 : 8;
        if (cap > MSTN_STORY_EVENTS)
            cap = MSTN_STORY_EVENTS;
        story_event *g = s->n_ev < cap ? realloc(s->ev, cap * sizeof *g) : NULL;
        if (!g) {
            s->dropped_ev++;
            return;
        }
        s->ev = g;
        s->cap_ev = cap;
    }
    s->ev[s->n_ev++] = *e;
}

static int64_t dec(const char *text) {
    int64_t v = 0;
    for (const char *p = text; p && *p >= '0' && *p <= '9' && v < INT64_MAX / 10 - 9; p++)
        v = v * 10 + (*p - '0');
    return v;
}

void mstn_story_step(const mstn_batch *b, const mstn_ctx *step, uint64_t start_ns, uint64_t end_ns) {
    const mstn_step *st = b ? b->step : NULL;
    if (!st || !st->is_step || !mstn_g.story_wanted) /* no Jaeger-bound exporter: nobody reads them */
        return;
    uint64_t t = start_ns;
    g_last_index = st->index;
    /* finished since the previous step: the last decode ends here */
    for (size_t i = 0; i < st->finished.n; i++) {
        story *s = find(st->finished.s[i], strlen(st->finished.s[i]));
        if (!s)
            continue;
        end_phase(s, t, "finished");
        forget(s);
    }
    for (size_t i = 0; i < st->preempted.n; i++) {
        story *s = find(st->preempted.s[i], strlen(st->preempted.s[i]));
        if (!s)
            continue;
        end_phase(s, t, "preempted");
        s->phase = PH_PREEMPTED;
        s->preempted_ns = t;
    }
    for (size_t i = 0; i < st->resumed.n; i++) {
        story *s = find(st->resumed.s[i], strlen(st->resumed.s[i]));
        if (s)
            s->resumed = true;
    }
    /* the scheduled requests whose context this process knows */
    for (size_t k = 0; k < b->n_links; k++) {
        size_t idx = b->link_at[k].item;
        story *s = get(b->ids[idx], b->id_lens[idx]);
        if (!s)
            continue;
        mstn_batch_link_ctx(b, k, &s->ctx);
        s->has_ctx = true;
        char ph = st->phase_ok && idx < st->n_phase ? st->phase[idx] : '?';
        if (!s->queued_done) {
            s->queued_done = true;
            for (size_t j = 0; j < st->new_ids.n; j++)
                if (strcmp(st->new_ids.s[j], s->id) == 0) {
                    s->queued_ns = j < MSTN_MAX_IDS ? (uint64_t)dec(st->queued[j]) : 0;
                    break;
                }
            if (s->queued_ns && s->queued_ns < t) {
                s->seg_start = s->queued_ns;
                emit(s, "vllm.request.queued", t, NULL, 0);
            }
        }
        if (s->phase == PH_WAITING || s->phase == PH_PREEMPTED) {
            bool resumed = s->phase == PH_PREEMPTED || s->resumed;
            s->phase = PH_PREFILL;
            s->sampled = false;
            s->seg_start = t;
            if (resumed) {
                s->resume_ts = t;
                s->resumed = false;
            }
        } else if (s->phase == PH_PREFILL && (s->sampled || ph == 'd')) {
            emit(s, "vllm.request.prefill", t, NULL, 0);
            s->phase = PH_DECODE;
            s->seg_start = t;
        }
        if (ph == 'P')
            s->sampled = true;
        story_event e = {t, st->index, idx < st->n_tokens ? dec(st->tokens[idx]) : 0, b->request_count,
                         step->trace_id, step->span_id};
        add_event(s, &e);
        s->last_index = st->index;
        s->last_end = end_ns;
    }
}

void mstn_story_update_end(uint64_t end_ns) { g_last_update_end = end_ns; }

void mstn_story_end_all(void) {
    for (uint32_t i = 0; i < MSTN_STORY_MAX; i++) {
        story *s = &g_pool[i];
        if (!s->id)
            continue;
        /* its last step's update ended the decode, when that is known */
        uint64_t end = s->last_index == g_last_index && g_last_update_end > s->last_end ? g_last_update_end
                                                                                        : s->last_end;
        end_phase(s, end, NULL);
        forget(s);
    }
}

void mstn_story_clear(void) {
    for (uint32_t i = 0; i < MSTN_STORY_MAX; i++) {
        free(g_pool[i].id);
        free(g_pool[i].ev);
    }
    memset(g_pool, 0, sizeof g_pool);
    memset(g_slots, 0, sizeof g_slots);
    g_count = g_tombs = 0;
    g_last_index = -1;
    g_last_update_end = 0;
    g_scope = NULL;
}

PyObject *mstn_py_end_stories(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    mstn_story_end_all();
    Py_RETURN_NONE;
}
