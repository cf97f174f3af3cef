/*
 * step_record.c — reads the step record of one scheduling step and the
 * finished requests of one output call (see step_record.h), and writes them
 * on the span. The attributes are in docs/reference/spans.md "The step
 * record"; the vLLM fields read, and where vLLM 0.32 sets them, in
 * docs/reference/vllm-internals.md "Objects and fields read".
 *
 * Cost: per scheduled request, until it is known to decode, one dict lookup
 * (scheduler.requests) and one to three attribute reads of its Request
 * (is_prefill_chunk; for a token-producing chunk num_computed_tokens and
 * num_prompt_tokens; num_tokens only for a chunk of more than one token past
 * the prompt); a decoding request then costs one pointer compare (g_decoding).
 * No Python object is created. The lists (new, resumed, preempted,
 * finished) are read once each.
 *
 * Error rule, stricter than adapters.c's: nothing here may switch the hook
 * off. A missing attribute or an odd shape means "not recorded"; an
 * exception raised while reading is cleared and means the same. The first
 * missing field of each kind is named in one INFO line per process.
 */
#include "step_record.h"
#include "log.h"
#include "pyattr.h"
#include "queued_times.h"
#include "reqtable.h"
#include "step_share.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(MSTN_MAX_IDS <= MST_MAX_VALUE_LEN, "step.phase must fit one string value");

static mstn_step g_static;
/* Requests known to be decoding, by the identity of their id object (the
 * same str every step: vLLM keys num_scheduled_tokens by
 * request.request_id): a direct-mapped cache, a miss only costs the full
 * read. Exact because a request leaves decode only through preemption and
 * comes back — like any request that starts, whatever object lives at a
 * reused address — through scheduled_new_reqs or resumed_req_ids, whose ids
 * are dropped from it before the phases are read. */
#define DECODING_SLOTS 4096u
static const PyObject *g_decoding[DECODING_SLOTS];
static bool g_static_busy;
static int64_t g_step_index;

/* ------------------------------------------------------------ the record */

static void step_clear(mstn_step *st) {
    st->is_step = false;
    st->index = -1;
    st->n_tokens = st->n_phase = 0;
    st->phase_ok = true;
    st->requests = NULL;
    st->new_ids.n = 0;
    st->hits_ok = true;
    st->n_queued_known = 0;
    st->resumed.n = st->preempted.n = st->finished.n = 0;
    st->max_num_seqs = st->max_num_batched_tokens = -1;
    st->n_held = st->n_owned = 0;
    st->out_finished.n = 0;
    st->pool_used = 0;
}

mstn_step *mstn_step_acquire(void) {
    mstn_step *st;
    if (!g_static_busy) {
        g_static_busy = true;
        st = &g_static;
    } else if (!(st = malloc(sizeof *st))) {
        return NULL;
    }
    step_clear(st);
    return st;
}

void mstn_step_release(mstn_step *st) {
    if (!st)
        return;
    Py_CLEAR(st->requests);
    for (size_t i = 0; i < st->n_held; i++)
        Py_DECREF(st->held[i]);
    for (size_t i = 0; i < st->n_owned; i++)
        Py_DECREF(st->owned[i]);
    st->n_held = st->n_owned = 0;
    if (st == &g_static)
        g_static_busy = false;
    else
        free(st);
}

/* Decimal text of v: one of these for 0..9 (most entries of step.tokens:
 * a decode step's 1), else in the record's pool (room for every list is
 * reserved: three numbers per id at most). */
static const char *const k_digits[10] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

static const char *num_text_n(mstn_step *st, int64_t v, size_t *len) {
    if (v >= 0 && v <= 9) {
        *len = 1;
        return k_digits[v];
    }
    char tmp[MSTN_NUM_TEXT], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    *--p = '\0';
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    size_t n = (size_t)(tmp + sizeof tmp - p);
    char *out = st->pool + st->pool_used;
    memcpy(out, p, n);
    st->pool_used += n;
    *len = n - 1;
    return out;
}

static const char *num_text(mstn_step *st, int64_t v) {
    size_t len;
    return num_text_n(st, v, &len);
}

/* ------------------------------------------------------ reading helpers */

/* Fields whose absence is logged (once per process each). */
enum { MISS_REQUESTS, MISS_PHASE, MISS_NEW, MISS_CACHED, MISS_PREEMPTED, MISS_FINISHED, MISS_LIMITS, MISS_KINDS };
static bool g_missing_logged[MISS_KINDS];

static void note_missing(int kind, const char *field, const char *attr) {
    if (g_missing_logged[kind])
        return;
    g_missing_logged[kind] = true;
    mstn_log("info", "vLLM's %s could not be read: %s is not recorded", field, attr);
}

/* getattr(obj, name) as a new reference, or NULL (missing, or raised:
 * cleared). */
static PyObject *attr_or_null(PyObject *obj, PyObject *name) {
    PyObject *v = NULL;
    if (mstn_getattr_opt(obj, name, &v) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return v;
}

/* An int (bool excluded) into *out; false when v is not one or too big.
 * Token counts and the Request fields read are small ints: those of one
 * digit are read in place (CPython's compact-int form), the rest through
 * the general conversion. */
static bool int_value(PyObject *v, int64_t *out) {
    if (!v || !PyLong_Check(v) || PyBool_Check(v))
        return false;
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
        *out = (int64_t)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return true;
    }
#else
    Py_ssize_t size = Py_SIZE(v); /* -1, 1: one digit and its sign; 0: zero, no digit read */
    if (size >= -1 && size <= 1) {
        *out = size ? (int64_t)size * (int64_t)((PyLongObject *)v)->ob_digit[0] : 0;
        return true;
    }
#endif
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
    }
    *out = (int64_t)x;
    return true;
}

static bool int_attr(PyObject *obj, PyObject *name, int64_t *out) {
    PyObject *v = attr_or_null(obj, name);
    bool ok = int_value(v, out);
    Py_XDECREF(v);
    return ok;
}

static size_t decoding_slot(const PyObject *id) {
    uint64_t x = (uint64_t)(uintptr_t)id;
    x = (x ^ (x >> 29)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 52) & (DECODING_SLOTS - 1);
}

/* A request (re)starting: not decoding. */
static void forget_decoding(PyObject *id) {
    size_t k = decoding_slot(id);
    if (g_decoding[k] == id)
        g_decoding[k] = NULL;
}

/* May this request appear in a list? Not when its context is known and
 * unsampled (the rule of request.ids: nothing recorded for that request). */
static bool id_recorded(const char *u, size_t n) {
    mstn_ctx c;
    return !mstn_req_get(u, n, &c) || mstn_ctx_sampled(&c);
}

/* UTF-8 of a str id (borrowed from the object), or NULL for anything else:
 * vLLM's ids are str; other ids are left out of the step lists. */
static const char *id_text(PyObject *id, Py_ssize_t *n) {
    if (!PyUnicode_Check(id))
        return NULL;
    const char *u = PyUnicode_AsUTF8AndSize(id, n);
    if (!u)
        PyErr_Clear();
    return u;
}

/* Appends a str id to `l` (if recorded); the caller keeps `id` alive. A
 * request that restarts (resumed, preempted) is forgotten as decoding. */
static bool list_add(mstn_id_list *l, PyObject *id, bool restarts, const char **u_out,
                     Py_ssize_t *n_out) {
    if (restarts)
        forget_decoding(id);
    Py_ssize_t n = 0;
    const char *u = id_text(id, &n);
    if (!u || !id_recorded(u, (size_t)n))
        return false;
    if (l->n >= MSTN_MAX_IDS)
        return false;
    l->s[l->n++] = u;
    if (u_out) {
        *u_out = u;
        *n_out = n;
    }
    return true;
}

/* Keeps `o` (a new reference, or NULL) alive until the record is released;
 * returns it. Room for every collection the record reads. */
static PyObject *hold(mstn_step *st, PyObject *o) {
    if (o)
        st->held[st->n_held++] = o;
    return o;
}

/* Every item of a set / frozenset / list / tuple of ids into `l`. False when
 * `c` is none of these (None is an empty collection). */
static bool list_from_collection(mstn_id_list *l, PyObject *c, bool restarts) {
    if (c == Py_None)
        return true;
    if (PyList_Check(c) || PyTuple_Check(c)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(c);
        PyObject **items = PySequence_Fast_ITEMS(c);
        for (Py_ssize_t i = 0; i < n; i++)
            list_add(l, items[i], restarts, NULL, NULL);
        return true;
    }
    if (!PyAnySet_Check(c))
        return false;
    PyObject *it = PyObject_GetIter(c), *item;
    if (!it) {
        PyErr_Clear();
        return false;
    }
    /* The set keeps each item alive after the iterator's reference goes. */
    while ((item = PyIter_Next(it))) {
        list_add(l, item, restarts, NULL, NULL);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    PyErr_Clear();
    return true;
}

/* ------------------------------------------------------ the schedule call */

/* p / P / d for the Request `req` that got `sched` tokens, or 0 when its
 * fields cannot be read. vLLM (scheduler.py _update_after_schedule) has
 * already advanced num_computed_tokens by them and set is_prefill_chunk =
 * num_computed_tokens < num_tokens + num_output_placeholders: more to
 * compute before a token is sampled. A token-producing chunk is the prefill's
 * last ('P') when it started inside the tokens that must be computed first:
 * the prompt, or — for a request resumed after preemption, which recomputes
 * everything it had — all its tokens but the newest (before < num_tokens - 1,
 * vLLM's `prefill_end`). Decode steps (one token; with speculative decoding
 * 1 + k, starting at num_tokens - 1) are 'd'. */
static char phase_of(PyObject *req, int64_t sched) {
    PyObject *chunk = attr_or_null(req, mstn_n.is_prefill_chunk);
    bool known = chunk && PyBool_Check(chunk), prefill = chunk == Py_True;
    Py_XDECREF(chunk);
    if (known && prefill)
        return 'p';
    int64_t after, prompt, ntok = -1;
    if (!int_attr(req, mstn_n.num_computed_tokens, &after) ||
        !int_attr(req, mstn_n.num_prompt_tokens, &prompt))
        return 0;
    int64_t before = after - sched;
    if (!known || (before >= prompt && sched > 1)) {
        if (!int_attr(req, mstn_n.num_tokens, &ntok))
            return 0;
    }
    if (!known) { /* older vLLM: the same rule from its parts */
        int64_t placeholders = 0;
        int_attr(req, mstn_n.num_output_placeholders, &placeholders);
        if (after < ntok + placeholders)
            return 'p';
    }
    if (before < prompt)
        return 'P';
    if (sched == 1)
        return 'd';
    return before >= ntok - 1 ? 'd' : 'P';
}

void mstn_step_scheduled(mstn_step *st, PyObject *key, PyObject *tokens) {
    int64_t n = 0;
    bool have = int_value(tokens, &n);
    if (st->n_tokens >= MSTN_MAX_IDS)
        return;
    st->tokens[st->n_tokens] = num_text_n(st, have ? n : 0, &st->token_lens[st->n_tokens]);
    st->n_tokens++;
    if (!st->phase_ok)
        return;
    char ph = 0;
    size_t slot = decoding_slot(key);
    if (g_decoding[slot] == key) {
        ph = 'd';
    } else if (st->requests && have) {
        PyObject *req = PyDict_GetItemWithError(st->requests, key); /* borrowed */
        if (req)
            ph = phase_of(req, n);
        else
            PyErr_Clear();
        if (ph == 'P' || ph == 'd') /* has sampled: decodes from now on */
            g_decoding[slot] = key;
    }
    if (!ph) {
        if (st->requests)
            note_missing(MISS_PHASE, "Request.is_prefill_chunk / num_computed_tokens / num_prompt_tokens",
                         "step.phase");
        st->phase_ok = false;
        return;
    }
    st->phase[st->n_phase++] = ph;
}

/* Was this request preempted before (vLLM's V2 model runner sends resumed
 * requests as new ones: scheduler.py "scheduled_new_reqs.extend(
 * scheduled_resumed_reqs)")? */
static bool was_preempted(const mstn_step *st, PyObject *id) {
    if (!st->requests)
        return false;
    PyObject *req = PyDict_GetItemWithError(st->requests, id);
    if (!req) {
        PyErr_Clear();
        return false;
    }
    int64_t n = 0;
    return int_attr(req, mstn_n.num_preemptions, &n) && n > 0;
}

/* scheduled_new_reqs: NewRequestData(req_id, num_computed_tokens = prefix
 * cache hits, local and external), and the time each was queued. */
static void read_new(mstn_step *st, PyObject *so) {
    PyObject *list = hold(st, attr_or_null(so, mstn_n.scheduled_new_reqs));
    if (!list || !PyList_Check(list)) {
        note_missing(MISS_NEW, "SchedulerOutput.scheduled_new_reqs", "step.new_ids");
        return;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list) && st->n_owned < MSTN_MAX_IDS; i++) {
        PyObject *nr = PyList_GET_ITEM(list, i);
        PyObject *id = attr_or_null(nr, mstn_n.req_id);
        if (!id)
            continue;
        st->owned[st->n_owned++] = id; /* its text is borrowed below */
        forget_decoding(id);
        if (was_preempted(st, id)) {
            list_add(&st->resumed, id, false, NULL, NULL);
            continue;
        }
        const char *u;
        Py_ssize_t n;
        size_t at = st->new_ids.n;
        if (!list_add(&st->new_ids, id, false, &u, &n))
            continue;
        int64_t hit = 0;
        if (!int_attr(nr, mstn_n.num_computed_tokens, &hit))
            st->hits_ok = false;
        st->prefix_hits[at] = num_text(st, hit);
        uint64_t ns = 0;
        if (mstn_queued_take(u, (size_t)n, &ns))
            st->n_queued_known++;
        st->queued[at] = num_text(st, (int64_t)ns);
    }
}

/* scheduled_cached_reqs.resumed_req_ids (a set, vLLM >= 0.11.1), or its
 * older form resumed_from_preemption (list[bool] parallel to req_ids). */
static void read_resumed(mstn_step *st, PyObject *so) {
    PyObject *cached = attr_or_null(so, mstn_n.scheduled_cached_reqs);
    if (!cached)
        goto missing;
    PyObject *ids = hold(st, attr_or_null(cached, mstn_n.resumed_req_ids));
    bool ok = ids && list_from_collection(&st->resumed, ids, true);
    if (!ok) {
        PyObject *flags = attr_or_null(cached, mstn_n.resumed_from_preemption);
        PyObject *all = flags ? hold(st, attr_or_null(cached, mstn_n.req_ids)) : NULL;
        ok = flags && all && PyList_Check(flags) && PyList_Check(all);
        for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(flags) && i < PyList_GET_SIZE(all); i++)
            if (PyList_GET_ITEM(flags, i) == Py_True)
                list_add(&st->resumed, PyList_GET_ITEM(all, i), true, NULL, NULL);
        Py_XDECREF(flags);
    }
    Py_DECREF(cached);
    if (ok)
        return;
missing:
    note_missing(MISS_CACHED, "SchedulerOutput.scheduled_cached_reqs.resumed_req_ids", "step.resumed_ids");
}

static void read_set(mstn_step *st, mstn_id_list *l, PyObject *so, PyObject *name, bool restarts,
                     int kind, const char *field, const char *attr) {
    PyObject *c = hold(st, attr_or_null(so, name));
    if (!c || !list_from_collection(l, c, restarts))
        note_missing(kind, field, attr);
}

void mstn_step_begin(mstn_step *st, PyObject *so, PyObject *sched) {
    st->is_step = true;
    st->index = g_step_index++;
    if (sched) {
        PyObject *req = attr_or_null(sched, mstn_n.requests);
        if (req && PyDict_Check(req))
            st->requests = req;
        else {
            Py_XDECREF(req);
            note_missing(MISS_REQUESTS, "Scheduler.requests", "step.phase");
        }
    }
    if (!so)
        return;
    read_new(st, so);
    read_resumed(st, so);
}

void mstn_step_forget_all(void) {
    memset(g_decoding, 0, sizeof g_decoding);
    mstn_share_forget();
}

void mstn_step_finish(mstn_step *st, PyObject *so, PyObject *sched) {
    read_set(st, &st->preempted, so, mstn_n.preempted_req_ids, true, MISS_PREEMPTED,
             "SchedulerOutput.preempted_req_ids", "step.preempted_ids");
    read_set(st, &st->finished, so, mstn_n.finished_req_ids, false, MISS_FINISHED,
             "SchedulerOutput.finished_req_ids", "step.finished_ids");
    if (sched && (!int_attr(sched, mstn_n.max_num_running_reqs, &st->max_num_seqs) ||
                  !int_attr(sched, mstn_n.max_num_scheduled_tokens, &st->max_num_batched_tokens)))
        note_missing(MISS_LIMITS, "Scheduler.max_num_running_reqs / max_num_scheduled_tokens",
                     "scheduler.max_num_seqs / max_num_batched_tokens");
    Py_CLEAR(st->requests);
}

/* --------------------------------------------------------- the output call */

/* vllm/v1/engine/__init__.py FINISH_REASON_STRINGS, indexed by FinishReason. */
static const char *const k_finish_reasons[] = {"stop", "length", "abort", "error", "repetition"};

void mstn_step_output_finished(mstn_step *st, const char *id, PyObject *reason) {
    if (st->out_finished.n >= MSTN_MAX_IDS)
        return;
    const char *text = "unknown";
    int64_t v;
    if (int_value(reason, &v)) { /* FinishReason is an IntEnum */
        if (v >= 0 && v < (int64_t)(sizeof k_finish_reasons / sizeof *k_finish_reasons))
            text = k_finish_reasons[v];
    } else if (PyUnicode_Check(reason)) { /* a str reason: one of vLLM's names */
        for (size_t i = 0; i < sizeof k_finish_reasons / sizeof *k_finish_reasons; i++)
            if (PyUnicode_CompareWithASCIIString(reason, k_finish_reasons[i]) == 0)
                text = k_finish_reasons[i];
    }
    st->reasons[st->out_finished.n] = text;
    st->out_finished.s[st->out_finished.n++] = id;
}

/* ----------------------------------------------------------- the span */

static void set_list(mst_span *span, const char *key, size_t key_len, const char *const *items, size_t n) {
    if (n)
        mst_span_set_str_list_lit(span, key, key_len, items, NULL, n);
}

void mstn_step_apply(const mstn_step *st, mst_span *span, size_t n_ids) {
    if (st->out_finished.n) {
        set_list(span, MST_LIT("output.finished_ids"), st->out_finished.s, st->out_finished.n);
        set_list(span, MST_LIT("output.finish_reasons"), st->reasons, st->out_finished.n);
    }
    if (!st->is_step)
        return;
    mst_span_set_int_lit(span, MST_LIT("step.index"), st->index);
    if (st->n_tokens == n_ids && n_ids) /* lengths known: not measured again */
        mst_span_set_str_list_lit(span, MST_LIT("step.tokens"), st->tokens, st->token_lens, st->n_tokens);
    if (st->phase_ok && st->n_phase == n_ids && n_ids) {
        /* one character per id: at most MSTN_MAX_IDS = MST_MAX_VALUE_LEN bytes */
        mst_span_set_strn_lit(span, MST_LIT("step.phase"), st->phase, st->n_phase);
    }
    set_list(span, MST_LIT("step.new_ids"), st->new_ids.s, st->new_ids.n);
    if (st->hits_ok)
        set_list(span, MST_LIT("step.prefix_hit_tokens"), st->prefix_hits, st->new_ids.n);
    if (st->n_queued_known)
        set_list(span, MST_LIT("step.queued_ns"), st->queued, st->new_ids.n);
    set_list(span, MST_LIT("step.resumed_ids"), st->resumed.s, st->resumed.n);
    set_list(span, MST_LIT("step.preempted_ids"), st->preempted.s, st->preempted.n);
    set_list(span, MST_LIT("step.finished_ids"), st->finished.s, st->finished.n);
    if (st->max_num_seqs >= 0)
        mst_span_set_int_lit(span, MST_LIT("scheduler.max_num_seqs"), st->max_num_seqs);
    if (st->max_num_batched_tokens >= 0)
        mst_span_set_int_lit(span, MST_LIT("scheduler.max_num_batched_tokens"), st->max_num_batched_tokens);
}
