/*
 * model.c — collecting spans and building engine steps and requests
 * (model.h). Owns the compact span records, the request-id and process
 * tables, the per-name histograms and the trace-size counter.
 *
 * Collection is one pass in file order (processes flush at different
 * times, so records arrive out of time order); finish() sorts once and
 * joins by time (which step window a span starts in) and by request id.
 */
#include "analyze/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const mst_an_stage_names[MST_AN_STAGES] = {"schedule", "model", "ipc", "output",
                                                       "waiting"};

#define MAX_NAMES 1024
#define MAX_TRACES (4u << 20)
#define NONE INT64_MIN
/* Times beyond +-2^62 ns (146 years from the epoch) are not a clock: such
 * spans are counted and left out, so every difference of two times fits. */
#define TIME_LIMIT (INT64_C(1) << 62)

enum { K_SCHEDULE, K_UPDATE, K_EXEC, K_SAMPLE, K_WORKER, K_RUNNER, K_OUTPUT, K_KINDS };

typedef struct rec {
    int64_t start, end;
    uint32_t proc;
    uint32_t ids_off, ids_n;
    int32_t batch, tokens;
    uint8_t kind;
} rec;

typedef struct vec {
    void *p;
    size_t n, cap;
} vec;

static bool vec_push(vec *v, const void *x, size_t sz) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 256;
        void *np = realloc(v->p, nc * sz);
        if (!np) return false;
        v->p = np;
        v->cap = nc;
    }
    memcpy((char *)v->p + v->n * sz, x, sz);
    v->n++;
    return true;
}

/* Appends n bytes to a byte vector. */
static bool vec_append(vec *v, const void *x, size_t n) {
    if (n == 0) return true;
    if (v->n + n > v->cap) {
        size_t nc = v->cap ? v->cap : 4096;
        while (nc < v->n + n) nc *= 2;
        void *np = realloc(v->p, nc);
        if (!np) return false;
        v->p = np;
        v->cap = nc;
    }
    memcpy((char *)v->p + v->n, x, n);
    v->n += n;
    return true;
}

/* Open-addressing map from a byte string to a uint32 value. */
typedef struct strmap {
    uint64_t *slots; /* (hash32 << 32) | (value + 1) */
    size_t mask, count;
} strmap;

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

struct mst_an_model {
    vec inputs;    /* mst_an_input_info */
    vec procs;     /* mst_an_proc */
    size_t last_proc;
    vec names;     /* mst_an_name_stat */
    strmap name_map;
    vec recs[K_KINDS];
    vec ids;       /* uint32 request indices */
    vec strings;   /* char: interned request ids */
    vec requests;  /* mst_an_request */
    strmap req_map;
    /* trace id -> span count (low 2 bits saturate at 3) */
    uint8_t (*trace_keys)[16];
    uint8_t *trace_counts;
    size_t trace_mask, n_traces;
    bool traces_capped;
    uint64_t spans;
    uint64_t bad_times;
    /* built by finish */
    vec steps;     /* mst_an_step */
    uint64_t negative_gaps, unjoined, with_span, steps_without_ids, short_traces;
    size_t n_engines;
    bool have_worker;
    bool finished;
};

/* ------------------------------------------------------------ tables */

static bool map_init(strmap *m, size_t slots) {
    m->slots = calloc(slots, sizeof *m->slots);
    m->mask = slots - 1;
    m->count = 0;
    return m->slots != NULL;
}

/* Looks up (or inserts with value `insert_val` when != UINT32_MAX) a key;
 * `eq` compares a stored value's key. Returns the value or UINT32_MAX. */
typedef bool (*eq_fn)(const mst_an_model *mm, uint32_t val, const void *key, size_t n);

static uint32_t map_find(const strmap *m, const mst_an_model *mm, eq_fn eq, uint64_t h,
                         const void *key, size_t n, size_t *slot_out) {
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t pos = h & m->mask;; pos = (pos + 1) & m->mask) {
        uint64_t s = m->slots[pos];
        if (!s) {
            *slot_out = pos;
            return UINT32_MAX;
        }
        if ((uint32_t)(s >> 32) == tag && eq(mm, (uint32_t)s - 1, key, n)) return (uint32_t)s - 1;
    }
}

static bool map_rehash(strmap *m, const mst_an_model *mm,
                       uint64_t (*key_hash)(const mst_an_model *, uint32_t)) {
    size_t nslots = (m->mask + 1) * 2;
    uint64_t *ns = calloc(nslots, sizeof *ns);
    if (!ns) return false;
    for (size_t i = 0; i <= m->mask; i++) {
        uint64_t s = m->slots[i];
        if (!s) continue;
        uint64_t h = key_hash(mm, (uint32_t)s - 1);
        size_t pos = h & (nslots - 1);
        while (ns[pos]) pos = (pos + 1) & (nslots - 1);
        ns[pos] = s;
    }
    free(m->slots);
    m->slots = ns;
    m->mask = nslots - 1;
    return true;
}

/* requests */
static bool req_eq(const mst_an_model *mm, uint32_t val, const void *key, size_t n) {
    const mst_an_request *r = (const mst_an_request *)mm->requests.p + val;
    return r->id_len == n && memcmp((const char *)mm->strings.p + r->id_off, key, n) == 0;
}
static uint64_t req_hash(const mst_an_model *mm, uint32_t val) {
    const mst_an_request *r = (const mst_an_request *)mm->requests.p + val;
    return hash_bytes((const char *)mm->strings.p + r->id_off, r->id_len);
}

static void request_init(mst_an_request *r) {
    memset(r, 0, sizeof *r);
    r->arrival_ns = r->finish_ns = NONE;
    r->first_step_ns = r->first_step_done_ns = r->last_step_done_ns = NONE;
    r->first_out_ns = r->last_out_ns = NONE;
    r->queue_ms = r->ttft_ms = r->tpot_ms = r->e2e_ms = NAN;
}

/* Index of request `id` (interned on first sight); UINT32_MAX on OOM. */
static uint32_t request_index(mst_an_model *m, const char *id, size_t n) {
    if (!id) id = "", n = 0;
    if (n > 4096) n = 4096;
    uint64_t h = hash_bytes(id, n);
    size_t slot = 0;
    uint32_t v = map_find(&m->req_map, m, req_eq, h, id, n, &slot);
    if (v != UINT32_MAX) return v;
    if ((m->req_map.count + 1) * 2 > m->req_map.mask + 1) {
        if (!map_rehash(&m->req_map, m, req_hash)) return UINT32_MAX;
        map_find(&m->req_map, m, req_eq, h, id, n, &slot);
    }
    mst_an_request r;
    request_init(&r);
    r.id_off = (uint32_t)m->strings.n;
    r.id_len = (uint32_t)n;
    if (!vec_append(&m->strings, id, n)) return UINT32_MAX;
    char z = 0;
    if (!vec_push(&m->strings, &z, 1)) return UINT32_MAX;
    v = (uint32_t)m->requests.n;
    if (!vec_push(&m->requests, &r, sizeof r)) return UINT32_MAX;
    m->req_map.slots[slot] = (h & 0xFFFFFFFF00000000ull) | ((uint64_t)v + 1);
    m->req_map.count++;
    return v;
}

/* names */
static bool name_eq(const mst_an_model *mm, uint32_t val, const void *key, size_t n) {
    const mst_an_name_stat *s = (const mst_an_name_stat *)mm->names.p + val;
    return strlen(s->name) == n && memcmp(s->name, key, n) == 0;
}
static uint64_t name_hash(const mst_an_model *mm, uint32_t val) {
    const mst_an_name_stat *s = (const mst_an_name_stat *)mm->names.p + val;
    return hash_bytes(s->name, strlen(s->name));
}

static mst_an_name_stat *name_stat(mst_an_model *m, const char *name, size_t n) {
    if (!name) name = "", n = 0;
    if (n > 256) n = 256;
    if (memchr(name, 0, n)) n = strlen(name);
    uint64_t h = hash_bytes(name, n);
    size_t slot = 0;
    uint32_t v = map_find(&m->name_map, m, name_eq, h, name, n, &slot);
    if (v != UINT32_MAX) return (mst_an_name_stat *)m->names.p + v;
    if (m->names.n >= MAX_NAMES) {
        static const char other[] = "(other names)";
        h = hash_bytes(other, sizeof other - 1);
        v = map_find(&m->name_map, m, name_eq, h, other, sizeof other - 1, &slot);
        if (v != UINT32_MAX) return (mst_an_name_stat *)m->names.p + v;
        name = other;
        n = sizeof other - 1;
    }
    if ((m->name_map.count + 1) * 2 > m->name_map.mask + 1) {
        if (!map_rehash(&m->name_map, m, name_hash)) return NULL;
        map_find(&m->name_map, m, name_eq, h, name, n, &slot);
    }
    mst_an_name_stat s = {0};
    s.name = malloc(n + 1);
    s.hist = calloc(1, sizeof *s.hist);
    if (!s.name || !s.hist) {
        free(s.name);
        free(s.hist);
        return NULL;
    }
    memcpy(s.name, name, n);
    s.name[n] = 0;
    v = (uint32_t)m->names.n;
    if (!vec_push(&m->names, &s, sizeof s)) {
        free(s.name);
        free(s.hist);
        return NULL;
    }
    m->name_map.slots[slot] = (h & 0xFFFFFFFF00000000ull) | ((uint64_t)v + 1);
    m->name_map.count++;
    return (mst_an_name_stat *)m->names.p + v;
}

/* processes: few, looked up linearly with a one-entry cache */
static uint32_t proc_index(mst_an_model *m, const mst_an_span *s) {
    mst_an_proc *ps = m->procs.p;
    if (m->last_proc < m->procs.n && ps[m->last_proc].pid == s->pid &&
        ps[m->last_proc].source == s->source)
        return (uint32_t)m->last_proc;
    for (size_t i = 0; i < m->procs.n; i++)
        if (ps[i].pid == s->pid && ps[i].source == s->source) {
            m->last_proc = i;
            if (!ps[i].role[0] && s->role.len) {
                char *r = malloc(s->role.len + 1);
                if (r) {
                    memcpy(r, s->role.ptr, s->role.len);
                    r[s->role.len] = 0;
                    free(ps[i].role);
                    ps[i].role = r;
                }
            }
            return (uint32_t)i;
        }
    mst_an_proc p = {s->source, s->pid, malloc(s->role.len + 1), 0};
    if (!p.role) return UINT32_MAX;
    if (s->role.len) memcpy(p.role, s->role.ptr, s->role.len);
    p.role[s->role.len] = 0;
    if (!vec_push(&m->procs, &p, sizeof p)) {
        free(p.role);
        return UINT32_MAX;
    }
    m->last_proc = m->procs.n - 1;
    return (uint32_t)m->last_proc;
}

/* trace sizes */
static void count_trace(mst_an_model *m, const uint8_t tid[16]) {
    static const uint8_t zero[16];
    if (memcmp(tid, zero, 16) == 0 || m->traces_capped) return;
    if ((m->n_traces + 1) * 2 > m->trace_mask + 1) {
        size_t nslots = m->trace_mask ? (m->trace_mask + 1) * 2 : 1024;
        if (m->n_traces >= MAX_TRACES) {
            m->traces_capped = true;
            return;
        }
        uint8_t(*nk)[16] = calloc(nslots, 16);
        uint8_t *nc = calloc(nslots, 1);
        if (!nk || !nc) {
            free(nk);
            free(nc);
            m->traces_capped = true;
            return;
        }
        for (size_t i = 0; m->trace_mask && i <= m->trace_mask; i++) {
            if (!m->trace_counts[i]) continue;
            size_t pos = hash_bytes(m->trace_keys[i], 16) & (nslots - 1);
            while (nc[pos]) pos = (pos + 1) & (nslots - 1);
            memcpy(nk[pos], m->trace_keys[i], 16);
            nc[pos] = m->trace_counts[i];
        }
        free(m->trace_keys);
        free(m->trace_counts);
        m->trace_keys = nk;
        m->trace_counts = nc;
        m->trace_mask = nslots - 1;
    }
    for (size_t pos = hash_bytes(tid, 16) & m->trace_mask;; pos = (pos + 1) & m->trace_mask) {
        if (!m->trace_counts[pos]) {
            memcpy(m->trace_keys[pos], tid, 16);
            m->trace_counts[pos] = 1;
            m->n_traces++;
            return;
        }
        if (memcmp(m->trace_keys[pos], tid, 16) == 0) {
            if (m->trace_counts[pos] < 3) m->trace_counts[pos]++;
            return;
        }
    }
}

/* ------------------------------------------------------------ collect */

static bool name_is(const mst_an_str *n, const char *lit, size_t len) {
    return n->len == len && memcmp(n->ptr, lit, len) == 0;
}
#define NAME_IS(n, lit) name_is((n), (lit), sizeof(lit) - 1)

static int kind_of(const mst_an_str *n) {
    if (n->len < 8) return -1;
    if (NAME_IS(n, "vllm.scheduler.schedule")) return K_SCHEDULE;
    if (NAME_IS(n, "vllm.scheduler.update_from_output")) return K_UPDATE;
    if (NAME_IS(n, "vllm.model.execute")) return K_EXEC;
    if (NAME_IS(n, "vllm.model.sample_tokens")) return K_SAMPLE;
    if (NAME_IS(n, "vllm.worker.execute_model")) return K_WORKER;
    if (NAME_IS(n, "vllm.model_runner.execute") || NAME_IS(n, "vllm_ascend.model_runner.execute"))
        return K_RUNNER;
    if (NAME_IS(n, "vllm.output.process")) return K_OUTPUT;
    return -1;
}

static bool attr_int(const mst_an_span *s, const char *key, size_t kl, int64_t *out) {
    const mst_an_attr *a = mst_an_span_attr(s, key, kl);
    if (!a) return false;
    if (a->type == MST_AN_VAL_INT) *out = a->i;
    else if (a->type == MST_AN_VAL_DOUBLE && a->d > -1e15 && a->d < 1e15) *out = (int64_t)a->d;
    else if (a->type == MST_AN_VAL_STR && a->s.len && a->s.len < 20) {
        char tmp[24];
        memcpy(tmp, a->s.ptr, a->s.len);
        tmp[a->s.len] = 0;
        char *e;
        long long v = strtoll(tmp, &e, 10);
        if (*e) return false;
        *out = v;
    } else return false;
    return true;
}

/* request.ids (a list of strings; also a JSON-array string as Jaeger
 * stores it, or a single request.id) into model->ids. */
static bool collect_ids(mst_an_model *m, const mst_an_span *s, rec *r) {
    r->ids_off = (uint32_t)m->ids.n;
    r->ids_n = 0;
    const mst_an_attr *a = mst_an_span_attr(s, "request.ids", 11);
    if (a && a->type == MST_AN_VAL_STR_LIST) {
        for (size_t i = 0; i < a->n_items; i++) {
            uint32_t q = request_index(m, a->items[i].ptr, a->items[i].len);
            if (q == UINT32_MAX || !vec_push(&m->ids, &q, sizeof q)) return false;
            r->ids_n++;
        }
        return true;
    }
    if (a && a->type == MST_AN_VAL_STR && a->s.len >= 2 && a->s.ptr[0] == '[') {
        /* ["a","b"] as text: ids never hold quotes or escapes in vLLM. */
        const char *p = a->s.ptr, *e = a->s.ptr + a->s.len;
        while (p < e) {
            const char *q0 = memchr(p, '"', (size_t)(e - p));
            if (!q0) break;
            const char *q1 = memchr(q0 + 1, '"', (size_t)(e - q0 - 1));
            if (!q1) break;
            uint32_t q = request_index(m, q0 + 1, (size_t)(q1 - q0 - 1));
            if (q == UINT32_MAX || !vec_push(&m->ids, &q, sizeof q)) return false;
            r->ids_n++;
            p = q1 + 1;
        }
    }
    return true;
}

static mst_status add_request_span(mst_an_model *m, const mst_an_span *s, uint32_t proc) {
    const mst_an_attr *a = mst_an_span_attr(s, "request.id", 10);
    if (!a || a->type != MST_AN_VAL_STR) a = mst_an_span_attr(s, "gen_ai.request.id", 17);
    if (!a || a->type != MST_AN_VAL_STR) return MST_OK;
    uint32_t q = request_index(m, a->s.ptr, a->s.len);
    if (q == UINT32_MAX) return MST_ERR_NOMEM;
    mst_an_request *r = (mst_an_request *)m->requests.p + q;
    if (!r->has_span) m->with_span++;
    r->has_span = true;
    r->span_proc = proc;
    if (r->arrival_ns == NONE || s->start_ns < r->arrival_ns) r->arrival_ns = s->start_ns;
    if (r->finish_ns == NONE || s->end_ns > r->finish_ns) r->finish_ns = s->end_ns;
    return MST_OK;
}

mst_status mst_an_model_add_span(void *model, const mst_an_span *s) {
    mst_an_model *m = model;
    if (!m || !s || m->finished) return MST_ERR_INVALID_ARG;
    if (s->start_ns < -TIME_LIMIT || s->start_ns > TIME_LIMIT || s->end_ns < -TIME_LIMIT ||
        s->end_ns > TIME_LIMIT) {
        m->bad_times++;
        return MST_OK;
    }
    m->spans++;
    uint32_t proc = proc_index(m, s);
    if (proc == UINT32_MAX) return MST_ERR_NOMEM;
    ((mst_an_proc *)m->procs.p)[proc].spans++;
    int64_t dur = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
    mst_an_name_stat *ns = name_stat(m, s->name.ptr, s->name.len);
    if (!ns) return MST_ERR_NOMEM;
    ns->count++;
    ns->total_ms += (double)dur / 1e6;
    if ((double)dur / 1e6 > ns->max_ms) ns->max_ms = (double)dur / 1e6;
    mst_an_hist_add(ns->hist, dur);
    count_trace(m, s->trace_id);

    if (NAME_IS(&s->name, "vllm.request") || NAME_IS(&s->name, "llm_request"))
        return add_request_span(m, s, proc);
    int k = kind_of(&s->name);
    if (k < 0) return MST_OK;
    rec r = {s->start_ns, s->start_ns + dur, proc, 0, 0, -1, -1, (uint8_t)k};
    if (k == K_SCHEDULE || k == K_OUTPUT || k == K_EXEC || k == K_WORKER) {
        int64_t v;
        if (attr_int(s, "batch.request_count", 19, &v) && v >= 0 && v < INT32_MAX) r.batch = (int32_t)v;
        if (attr_int(s, "batch.scheduled_tokens", 22, &v) && v >= 0 && v < INT32_MAX)
            r.tokens = (int32_t)v;
    }
    if ((k == K_SCHEDULE || k == K_OUTPUT) && !collect_ids(m, s, &r)) return MST_ERR_NOMEM;
    if (!vec_push(&m->recs[k], &r, sizeof r)) return MST_ERR_NOMEM;
    return MST_OK;
}

mst_status mst_an_model_add_input(mst_an_model *m, mst_an_input_info *info) {
    if (!vec_push(&m->inputs, info, sizeof *info)) return MST_ERR_NOMEM;
    memset(info, 0, sizeof *info);
    return MST_OK;
}

/* ------------------------------------------------------------ finish */

static int cmp_rec(const void *a, const void *b) {
    const rec *x = a, *y = b;
    if (x->proc != y->proc) return x->proc < y->proc ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

typedef struct engine {
    uint32_t proc, source;
    size_t lo, hi; /* its steps */
} engine;

/* The step of `proc`'s engine whose window holds time t: the last step
 * with start <= t; SIZE_MAX when t is before its first step. */
static size_t step_at(const mst_an_step *st, const engine *e, int64_t t) {
    if (e->lo == e->hi || st[e->lo].start_ns > t) return SIZE_MAX;
    size_t lo = e->lo, hi = e->hi; /* invariant: st[lo].start <= t */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (st[mid].start_ns <= t) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* For a span of process `proc` at time t: the step whose start is the
 * latest <= t among the engines of the same input (any input when that
 * one has no engine). */
static size_t step_for(const mst_an_model *m, const engine *eng, size_t n_eng, uint32_t proc,
                       int64_t t) {
    const mst_an_step *st = m->steps.p;
    uint32_t source = ((const mst_an_proc *)m->procs.p)[proc].source;
    bool same_source = false;
    for (size_t e = 0; e < n_eng; e++)
        if (eng[e].source == source) same_source = true;
    size_t best = SIZE_MAX;
    for (size_t e = 0; e < n_eng; e++) {
        if (same_source && eng[e].source != source) continue;
        if (eng[e].proc == proc) return step_at(st, &eng[e], t); /* its own engine */
        size_t k = step_at(st, &eng[e], t);
        if (k != SIZE_MAX && (best == SIZE_MAX || st[k].start_ns > st[best].start_ns)) best = k;
    }
    return best;
}

typedef struct cover {
    size_t step;
    int64_t start, end;
} cover;

static int cmp_cover(const void *a, const void *b) {
    const cover *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

typedef struct fwd {
    size_t step;
    uint32_t proc;
    int64_t start, end;
} fwd;

static int cmp_fwd(const void *a, const void *b) {
    const fwd *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    if (x->proc != y->proc) return x->proc < y->proc ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

mst_status mst_an_model_finish(mst_an_model *m) {
    if (m->finished) return MST_OK;
    m->finished = true;
    for (int k = 0; k < K_KINDS; k++)
        if (m->recs[k].n > 1) qsort(m->recs[k].p, m->recs[k].n, sizeof(rec), cmp_rec);
    for (size_t i = 0; m->trace_mask && i <= m->trace_mask; i++)
        if (m->trace_counts[i] && m->trace_counts[i] <= 2) m->short_traces++;

    /* Steps, grouped by engine process, in time order. */
    const rec *sched = m->recs[K_SCHEDULE].p;
    size_t ns = m->recs[K_SCHEDULE].n;
    engine *eng = calloc(ns ? ns : 1, sizeof *eng);
    if (!eng) return MST_ERR_NOMEM;
    size_t n_eng = 0;
    for (size_t i = 0; i < ns; i++) {
        const rec *r = &sched[i];
        if (n_eng == 0 || eng[n_eng - 1].proc != r->proc) {
            eng[n_eng].proc = r->proc;
            eng[n_eng].source = ((mst_an_proc *)m->procs.p)[r->proc].source;
            eng[n_eng].lo = eng[n_eng].hi = m->steps.n;
            n_eng++;
        }
        mst_an_step s;
        memset(&s, 0, sizeof s);
        s.proc = s.model_proc = s.output_proc = r->proc;
        s.start_ns = r->start;
        s.end_ns = r->end;
        s.model_start_ns = s.model_end_ns = s.output_start_ns = s.output_end_ns = NONE;
        s.stage_ms[MST_AN_SCHEDULE] = ms(r->end - r->start);
        s.batch_size = r->batch >= 0 ? r->batch : (int32_t)r->ids_n;
        s.scheduled_tokens = r->tokens;
        s.busy = s.batch_size > 0;
        s.ids_off = r->ids_off;
        s.ids_n = r->ids_n;
        if (s.scheduled_tokens < 0 || s.scheduled_tokens <= s.batch_size) s.kind = MST_AN_DECODE;
        else if (s.batch_size <= 1 || s.scheduled_tokens >= 16 * s.batch_size) s.kind = MST_AN_PREFILL;
        else s.kind = MST_AN_MIXED;
        if (s.busy && s.ids_n == 0) m->steps_without_ids++;
        if (eng[n_eng - 1].hi > eng[n_eng - 1].lo) {
            const mst_an_step *prev = (const mst_an_step *)m->steps.p + m->steps.n - 1;
            if (s.start_ns < prev->start_ns + (int64_t)(prev->stage_ms[MST_AN_SCHEDULE] * 1e6) - 1000)
                m->negative_gaps++;
        }
        if (!vec_push(&m->steps, &s, sizeof s)) {
            free(eng);
            return MST_ERR_NOMEM;
        }
        eng[n_eng - 1].hi = m->steps.n;
    }
    m->n_engines = n_eng;
    mst_an_step *st = m->steps.p;
    size_t n_steps = m->steps.n;
    int64_t *exec_lo = malloc((n_steps ? n_steps : 1) * sizeof *exec_lo);
    int64_t *exec_hi = malloc((n_steps ? n_steps : 1) * sizeof *exec_hi);
    vec covers = {0}, fwds = {0};
    if (!exec_lo || !exec_hi) goto oom;
    for (size_t i = 0; i < n_steps; i++) {
        exec_lo[i] = exec_hi[i] = NONE;
        cover c = {i, st[i].start_ns, st[i].end_ns};
        if (!vec_push(&covers, &c, sizeof c)) goto oom;
    }

    /* Engine-side spans. */
    static const int eng_kinds[] = {K_UPDATE, K_EXEC, K_SAMPLE};
    for (size_t ki = 0; ki < 3; ki++) {
        int k = eng_kinds[ki];
        const rec *rs = m->recs[k].p;
        for (size_t i = 0; i < m->recs[k].n; i++) {
            size_t s = step_for(m, eng, n_eng, rs[i].proc, rs[i].start);
            if (s == SIZE_MAX) continue;
            if (k == K_UPDATE) st[s].stage_ms[MST_AN_SCHEDULE] += ms(rs[i].end - rs[i].start);
            else {
                if (exec_lo[s] == NONE || rs[i].start < exec_lo[s]) exec_lo[s] = rs[i].start;
                if (exec_hi[s] == NONE || rs[i].end > exec_hi[s]) exec_hi[s] = rs[i].end;
            }
            if (rs[i].end > st[s].end_ns) st[s].end_ns = rs[i].end;
            cover c = {s, rs[i].start, rs[i].end};
            if (!vec_push(&covers, &c, sizeof c)) goto oom;
        }
    }

    /* The forward: worker spans, else runner spans. */
    int fk = m->recs[K_WORKER].n ? K_WORKER : m->recs[K_RUNNER].n ? K_RUNNER : -1;
    m->have_worker = fk >= 0;
    if (fk >= 0) {
        const rec *rs = m->recs[fk].p;
        for (size_t i = 0; i < m->recs[fk].n; i++) {
            size_t s = step_for(m, eng, n_eng, rs[i].proc, rs[i].start);
            if (s == SIZE_MAX) continue;
            fwd f = {s, rs[i].proc, rs[i].start, rs[i].end};
            cover c = {s, rs[i].start, rs[i].end};
            if (!vec_push(&fwds, &f, sizeof f) || !vec_push(&covers, &c, sizeof c)) goto oom;
        }
        if (fwds.n > 1) qsort(fwds.p, fwds.n, sizeof(fwd), cmp_fwd);
        const fwd *f = fwds.p;
        for (size_t i = 0; i < fwds.n;) {
            /* Per step: the longest per-worker sum (tensor-parallel workers
             * run side by side). */
            size_t s = f[i].step;
            double best = 0;
            uint32_t best_proc = st[s].proc;
            int64_t lo = NONE, hi = NONE;
            while (i < fwds.n && f[i].step == s) {
                uint32_t p = f[i].proc;
                double sum = 0;
                int64_t plo = f[i].start, phi = f[i].end;
                while (i < fwds.n && f[i].step == s && f[i].proc == p) {
                    sum += ms(f[i].end - f[i].start);
                    if (f[i].end > phi) phi = f[i].end;
                    i++;
                }
                if (sum > best) {
                    best = sum;
                    best_proc = p;
                    lo = plo;
                    hi = phi;
                }
            }
            st[s].stage_ms[MST_AN_MODEL] = best;
            st[s].model_proc = best_proc;
            st[s].model_start_ns = lo;
            st[s].model_end_ns = hi;
            if (hi > st[s].end_ns) st[s].end_ns = hi;
        }
    }
    for (size_t s = 0; s < n_steps; s++) {
        if (exec_lo[s] == NONE) continue;
        double window = ms(exec_hi[s] - exec_lo[s]);
        if (fk < 0) {
            st[s].stage_ms[MST_AN_MODEL] = window;
            st[s].model_start_ns = exec_lo[s];
            st[s].model_end_ns = exec_hi[s];
        } else {
            double gap = window - st[s].stage_ms[MST_AN_MODEL];
            st[s].stage_ms[MST_AN_IPC] = gap > 0 ? gap : 0;
        }
    }

    /* Output batches: to the step whose window they start in. */
    const rec *outs = m->recs[K_OUTPUT].p;
    mst_an_request *rq = m->requests.p;
    const uint32_t *ids = m->ids.p;
    for (size_t i = 0; i < m->recs[K_OUTPUT].n; i++) {
        const rec *o = &outs[i];
        size_t s = step_for(m, eng, n_eng, o->proc, o->start);
        /* An output loop that lags starts spans while the engine is idle
         * (or after its last step): that is still the work of the busy
         * steps before, so it counts for the last busy step of the engine. */
        if (s != SIZE_MAX && !st[s].busy) {
            size_t k = s;
            while (k > 0 && st[k - 1].proc == st[s].proc && !st[k].busy) k--;
            if (st[k].busy) s = k;
        }
        if (s != SIZE_MAX) {
            st[s].stage_ms[MST_AN_OUTPUT] += ms(o->end - o->start);
            st[s].output_proc = o->proc;
            if (st[s].output_start_ns == NONE || o->start < st[s].output_start_ns) st[s].output_start_ns = o->start;
            if (st[s].output_end_ns == NONE || o->end > st[s].output_end_ns) st[s].output_end_ns = o->end;
        }
        for (uint32_t k = 0; k < o->ids_n; k++) {
            mst_an_request *r = &rq[ids[o->ids_off + k]];
            r->n_outputs++;
            if (r->first_out_ns == NONE || o->end < r->first_out_ns) r->first_out_ns = o->end;
            if (r->last_out_ns == NONE || o->end > r->last_out_ns) r->last_out_ns = o->end;
            if (s != SIZE_MAX) r->stage_ms[MST_AN_OUTPUT] += ms(o->end - o->start);
        }
    }

    /* Waiting: window time covered by no hook span, for back-to-back busy
     * steps of one engine. */
    if (covers.n > 1) qsort(covers.p, covers.n, sizeof(cover), cmp_cover);
    const cover *cv = covers.p;
    size_t ci = 0;
    for (size_t e = 0; e < n_eng; e++) {
        for (size_t s = eng[e].lo; s < eng[e].hi; s++) {
            bool paired = s + 1 < eng[e].hi && st[s].busy && st[s + 1].busy;
            st[s].paired = paired;
            int64_t lo = st[s].start_ns;
            int64_t hi = paired ? st[s + 1].start_ns : st[s].end_ns;
            int64_t covered = 0, reach = lo;
            while (ci < covers.n && cv[ci].step < s) ci++;
            for (; ci < covers.n && cv[ci].step == s; ci++) {
                int64_t a = cv[ci].start > reach ? cv[ci].start : reach;
                int64_t b = cv[ci].end < hi ? cv[ci].end : hi;
                if (b > a) {
                    covered += b - a;
                    reach = b;
                }
            }
            st[s].wall_ms = ms(hi - lo);
            if (paired) {
                double w = ms(hi - lo - covered);
                st[s].stage_ms[MST_AN_WAITING] = w > 0 ? w : 0;
            }
        }
    }

    /* Requests: the steps that scheduled them. */
    for (size_t s = 0; s < n_steps; s++) {
        int64_t done = st[s].model_end_ns != NONE ? st[s].model_end_ns : st[s].end_ns;
        for (uint32_t k = 0; k < st[s].ids_n; k++) {
            mst_an_request *r = &rq[ids[st[s].ids_off + k]];
            r->n_steps++;
            r->shared_sum += (uint64_t)st[s].ids_n;
            if ((uint32_t)st[s].batch_size > r->max_shared) r->max_shared = (uint32_t)st[s].batch_size;
            if (r->first_step_ns == NONE || st[s].start_ns < r->first_step_ns) {
                r->first_step_ns = st[s].start_ns;
                r->first_step_done_ns = done;
            }
            if (r->last_step_done_ns == NONE || done > r->last_step_done_ns) r->last_step_done_ns = done;
            for (int g = 0; g < MST_AN_STAGES; g++)
                if (g != MST_AN_OUTPUT) r->stage_ms[g] += st[s].stage_ms[g];
        }
    }
    for (size_t i = 0; i < m->requests.n; i++) {
        mst_an_request *r = &rq[i];
        if (r->has_span && r->n_steps == 0) m->unjoined++;
        int64_t first_tok = r->first_out_ns != NONE ? r->first_out_ns : r->first_step_done_ns;
        int64_t end = r->finish_ns != NONE ? r->finish_ns
                      : r->last_out_ns != NONE ? r->last_out_ns : r->last_step_done_ns;
        if (r->arrival_ns != NONE) {
            if (r->first_step_ns != NONE) {
                r->queue_ms = ms(r->first_step_ns - r->arrival_ns);
                if (r->queue_ms < -1.0) m->negative_gaps++;
                if (r->queue_ms < 0) r->queue_ms = 0;
            }
            if (first_tok != NONE) r->ttft_ms = ms(first_tok - r->arrival_ns);
            if (end != NONE) r->e2e_ms = ms(end - r->arrival_ns);
        }
        if (r->n_outputs >= 2) r->tpot_ms = ms(r->last_out_ns - r->first_out_ns) / (r->n_outputs - 1);
        else if (r->n_steps >= 2 && r->last_step_done_ns != NONE)
            r->tpot_ms = ms(r->last_step_done_ns - r->first_step_done_ns) / (r->n_steps - 1);
    }
    free(exec_lo);
    free(exec_hi);
    free(covers.p);
    free(fwds.p);
    free(eng);
    return MST_OK;
oom:
    free(exec_lo);
    free(exec_hi);
    free(covers.p);
    free(fwds.p);
    free(eng);
    return MST_ERR_NOMEM;
}

/* ------------------------------------------------------------ life */

mst_an_model *mst_an_model_new(void) {
    mst_an_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    if (!map_init(&m->req_map, 1024) || !map_init(&m->name_map, 64)) {
        mst_an_model_free(m);
        return NULL;
    }
    return m;
}

void mst_an_model_free(mst_an_model *m) {
    if (!m) return;
    mst_an_input_info *in = m->inputs.p;
    for (size_t i = 0; i < m->inputs.n; i++) mst_an_input_info_free(&in[i]);
    free(m->inputs.p);
    mst_an_proc *ps = m->procs.p;
    for (size_t i = 0; i < m->procs.n; i++) free(ps[i].role);
    free(m->procs.p);
    mst_an_name_stat *nm = m->names.p;
    for (size_t i = 0; i < m->names.n; i++) {
        free(nm[i].name);
        free(nm[i].hist);
    }
    free(m->names.p);
    free(m->name_map.slots);
    for (int k = 0; k < K_KINDS; k++) free(m->recs[k].p);
    free(m->ids.p);
    free(m->strings.p);
    free(m->requests.p);
    free(m->req_map.slots);
    free(m->trace_keys);
    free(m->trace_counts);
    free(m->steps.p);
    free(m);
}

void mst_an_model_view(const mst_an_model *m, mst_an_view *v) {
    memset(v, 0, sizeof *v);
    v->inputs = m->inputs.p;
    v->n_inputs = m->inputs.n;
    v->procs = m->procs.p;
    v->n_procs = m->procs.n;
    v->names = m->names.p;
    v->n_names = m->names.n;
    v->steps = m->steps.p;
    v->n_steps = m->steps.n;
    v->requests = m->requests.p;
    v->n_requests = m->requests.n;
    v->ids = m->ids.p;
    v->strings = m->strings.p;
    v->spans = m->spans;
    v->traces = m->n_traces;
    v->short_traces = m->short_traces;
    v->negative_gaps = m->negative_gaps;
    v->bad_times = m->bad_times;
    v->requests_with_span = m->with_span;
    v->unjoined = m->unjoined;
    v->steps_without_ids = m->steps_without_ids;
    v->n_engines = m->n_engines;
    v->have_worker_spans = m->have_worker;
}
