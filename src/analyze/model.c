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

#include "analyze/request_life.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mst_an_stage_names[MST_AN_STAGES] = {"schedule", "model", "ipc", "output",
                                                       "waiting"};

#define MAX_NAMES 1024
#define MAX_TRACES (4u << 20)
#define MAX_ID_BYTES 4096     /* a request id is kept whole up to this many bytes (cut_long_id) */
#define MAX_REASON_BYTES 4096 /* a trigger's reason too (the forwarder writes < 1 KiB) */
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
    uint32_t extra;  /* schedule spans: index into srecs (the step record) */
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
    strmap proc_map; /* (input, pid) -> procs index */
    size_t last_proc;
    vec names;     /* mst_an_name_stat */
    strmap name_map;
    vec recs[K_KINDS];
    vec ids;       /* uint32 request indices */
    vec id_tokens; /* int32, parallel to ids */
    vec id_phase;  /* uint8, parallel to ids */
    vec srecs;     /* mst_an_step_record, one per schedule span */
    vec queued;    /* int64 step.queued_ns values */
    vec scratch;   /* int64, one span's int list while it is parsed */
    vec itls;      /* mst_an_itl, built by finish */
    vec strings;   /* char: interned request ids */
    vec requests;  /* mst_an_request */
    strmap req_map;
    mst_an_trigger triggers[MST_AN_TRIGGERS_KEPT];
    size_t n_triggers;
    uint64_t triggers_dropped;
    /* trace id -> span count (low 2 bits saturate at 3) */
    uint8_t (*trace_keys)[16];
    uint8_t *trace_counts;
    size_t trace_mask, n_traces;
    bool traces_capped;
    uint64_t spans;
    uint64_t bad_times;
    int64_t first_start; /* earliest span start (NONE before the first) */
    int64_t win_lo, win_hi;
    bool win_set, win_relative, skip_warmup;
    /* built by finish */
    vec steps;     /* mst_an_step */
    uint64_t negative_gaps, unjoined, with_span, steps_without_ids, short_traces;
    uint64_t queue_over_ttft, clock_skew, negative_itl, outside_window, preemptions, missing_steps;
    size_t steps_with_record, steps_with_queue_info;
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
    r->engine_proc = UINT32_MAX;
    r->arrival_ns = r->finish_ns = NONE;
    r->first_step_ns = r->first_step_done_ns = r->last_step_done_ns = NONE;
    r->first_out_ns = r->last_out_ns = NONE;
    r->queued_ns = r->scheduled_ns = r->first_token_ns = r->last_token_ns = NONE;
    r->preempted_at_ns = r->first_out_start_ns = r->last_out_start_ns = NONE;
    r->queue_ms = r->ttft_ms = r->tpot_ms = r->e2e_ms = NAN;
    r->prefill_ms = r->decode_ms = r->inference_ms = r->handoff_ms = NAN;
}

/* Index of request `id` (interned on first sight); UINT32_MAX on OOM. */
/* An id longer than MAX_ID_BYTES is kept as its first MAX_ID_BYTES bytes
 * followed by a marker with its true length and a 64-bit hash of all of it.
 * The cut form is longer than MAX_ID_BYTES, so it never equals an id that
 * was kept whole, and two long ids with the same first bytes stay two
 * requests (unless their whole bytes hash alike). */
static const char *cut_long_id(const char *id, size_t *n, char *out, size_t out_size) {
    if (*n <= MAX_ID_BYTES) return id;
    memcpy(out, id, MAX_ID_BYTES);
    int k = snprintf(out + MAX_ID_BYTES, out_size - MAX_ID_BYTES, "...[cut: %zu bytes, #%016llx]", *n,
                     (unsigned long long)hash_bytes(id, *n));
    *n = MAX_ID_BYTES + (size_t)(k > 0 ? k : 0);
    return out;
}

static uint32_t request_index(mst_an_model *m, const char *id, size_t n) {
    if (!id) id = "", n = 0;
    char cut[MAX_ID_BYTES + 64];
    id = cut_long_id(id, &n, cut, sizeof cut);
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
/* A NUL-terminated copy of p[0..n). */
static char *str_copy(const char *p, size_t n) {
    char *c = malloc(n + 1);
    if (!c) return NULL;
    if (n) memcpy(c, p, n);
    c[n] = 0;
    return c;
}

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
    s.name = str_copy(name, n);
    s.hist = calloc(1, sizeof *s.hist);
    if (!s.name || !s.hist) {
        free(s.name);
        free(s.hist);
        return NULL;
    }
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

/* processes: keyed by (input, pid) in a hash (a trace may hold any number
 * of pids), with a one-entry cache for runs of spans of one process */
typedef struct proc_key {
    uint32_t source;
    int64_t pid;
} proc_key;

static bool proc_eq(const mst_an_model *mm, uint32_t val, const void *key, size_t n) {
    const mst_an_proc *p = (const mst_an_proc *)mm->procs.p + val;
    const proc_key *k = key;
    (void)n;
    return p->pid == k->pid && p->source == k->source;
}
static uint64_t proc_key_hash(uint32_t source, int64_t pid) {
    uint8_t b[12];
    memcpy(b, &source, 4);
    memcpy(b + 4, &pid, 8);
    return hash_bytes(b, sizeof b);
}
static uint64_t proc_hash(const mst_an_model *mm, uint32_t val) {
    const mst_an_proc *p = (const mst_an_proc *)mm->procs.p + val;
    return proc_key_hash(p->source, p->pid);
}

/* A copy of the span's role as a C string; NULL when out of memory. */
static char *role_copy(const mst_an_span *s) { return str_copy(s->role.ptr, s->role.len); }

static uint32_t proc_index(mst_an_model *m, const mst_an_span *s) {
    mst_an_proc *ps = m->procs.p;
    if (m->last_proc < m->procs.n && ps[m->last_proc].pid == s->pid &&
        ps[m->last_proc].source == s->source)
        return (uint32_t)m->last_proc;
    proc_key k = {s->source, s->pid};
    uint64_t h = proc_key_hash(s->source, s->pid);
    size_t slot = 0;
    uint32_t v = map_find(&m->proc_map, m, proc_eq, h, &k, sizeof k, &slot);
    if (v != UINT32_MAX) {
        m->last_proc = v;
        if (!ps[v].role[0] && s->role.len) {
            char *r = role_copy(s);
            if (r) {
                free(ps[v].role);
                ps[v].role = r;
            }
        }
        return v;
    }
    if ((m->proc_map.count + 1) * 2 > m->proc_map.mask + 1) {
        if (!map_rehash(&m->proc_map, m, proc_hash)) return UINT32_MAX;
        map_find(&m->proc_map, m, proc_eq, h, &k, sizeof k, &slot);
    }
    mst_an_proc p = {s->source, s->pid, role_copy(s), 0};
    if (!p.role) return UINT32_MAX;
    if (!vec_push(&m->procs, &p, sizeof p)) {
        free(p.role);
        return UINT32_MAX;
    }
    v = (uint32_t)(m->procs.n - 1);
    m->proc_map.slots[slot] = (h & 0xFFFFFFFF00000000ull) | ((uint64_t)v + 1);
    m->proc_map.count++;
    m->last_proc = v;
    return v;
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

/* One request id entry (with its tokens and phase when a step record
 * gives them) into the parallel id vectors. */
static bool push_id(mst_an_model *m, const char *id, size_t n, uint32_t *count) {
    uint32_t q = request_index(m, id, n);
    int32_t tok = -1;
    uint8_t phase = 0;
    if (q == UINT32_MAX || !vec_push(&m->ids, &q, sizeof q) ||
        !vec_push(&m->id_tokens, &tok, sizeof tok) || !vec_push(&m->id_phase, &phase, 1))
        return false;
    (*count)++;
    return true;
}

/* A list of request ids under `key` (a list of strings; also a JSON-array
 * string as Jaeger stores it) appended to the id vectors: *off, *n. */
static bool collect_list(mst_an_model *m, const mst_an_span *s, const char *key, size_t kl,
                         uint32_t *off, uint32_t *n) {
    *off = (uint32_t)m->ids.n;
    *n = 0;
    const mst_an_attr *a = mst_an_span_attr(s, key, kl);
    if (a && a->type == MST_AN_VAL_STR_LIST) {
        for (size_t i = 0; i < a->n_items; i++)
            if (!push_id(m, a->items[i].ptr, a->items[i].len, n)) return false;
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
            if (!push_id(m, q0 + 1, (size_t)(q1 - q0 - 1), n)) return false;
            p = q1 + 1;
        }
    }
    return true;
}

static bool collect_ids(mst_an_model *m, const mst_an_span *s, rec *r) {
    return collect_list(m, s, "request.ids", 11, &r->ids_off, &r->ids_n);
}

/* The integers of an int-list attribute into m->scratch: a list of decimal
 * strings (how libmstrace carries lists), or JSON text "[1,2]" / "1,2" (a
 * reader that keeps a numeric array raw). Items that are not integers
 * stop the list. Returns the count (0 when absent). */
static size_t int_list(mst_an_model *m, const mst_an_span *s, const char *key, size_t kl) {
    m->scratch.n = 0;
    const mst_an_attr *a = mst_an_span_attr(s, key, kl);
    if (!a) return 0;
    if (a->type == MST_AN_VAL_INT) {
        vec_push(&m->scratch, &a->i, sizeof a->i);
        return m->scratch.n;
    }
    const mst_an_str *items = a->items;
    size_t n_items = a->type == MST_AN_VAL_STR_LIST ? a->n_items : 0;
    const char *text = NULL, *text_end = NULL;
    if (a->type == MST_AN_VAL_STR || a->type == MST_AN_VAL_OTHER) {
        text = a->s.ptr;
        text_end = a->s.ptr + a->s.len;
    }
    for (size_t i = 0;; i++) {
        const char *p, *e;
        if (items) {
            if (i >= n_items) break;
            p = items[i].ptr;
            e = p + items[i].len;
        } else if (text) {
            while (text < text_end && (*text == '[' || *text == ' ' || *text == ',' || *text == '"'))
                text++;
            if (text >= text_end || *text == ']') break;
            p = text;
            while (text < text_end && *text != ',' && *text != ']' && *text != '"' && *text != ' ')
                text++;
            e = text;
        } else break;
        char tmp[24];
        size_t len = (size_t)(e - p);
        if (len == 0 || len >= sizeof tmp) break;
        memcpy(tmp, p, len);
        tmp[len] = 0;
        char *end;
        long long v = strtoll(tmp, &end, 10);
        if (*end || !vec_push(&m->scratch, &v, sizeof(int64_t))) break;
    }
    return m->scratch.n;
}

static int32_t clamp32(int64_t v) { return v < 0 ? -1 : v > INT32_MAX ? INT32_MAX : (int32_t)v; }

/* The step record of a schedule span (docs/architecture.md "1a"); r's
 * request.ids are already collected. */
static bool collect_step_record(mst_an_model *m, const mst_an_span *s, rec *r) {
    mst_an_step_record x;
    memset(&x, 0, sizeof x);
    int64_t v;
    x.index = attr_int(s, "step.index", 10, &v) ? v : -1;
    x.waiting = attr_int(s, "scheduler.waiting", 17, &v) ? clamp32(v) : -1;
    x.running = attr_int(s, "scheduler.running", 17, &v) ? clamp32(v) : -1;
    x.max_num_seqs = attr_int(s, "scheduler.max_num_seqs", 22, &v) ? clamp32(v) : -1;
    x.max_num_batched_tokens = attr_int(s, "scheduler.max_num_batched_tokens", 32, &v) ? clamp32(v) : -1;
    const mst_an_attr *kv = mst_an_span_attr(s, "kv_cache.usage", 14);
    x.kv_usage = !kv ? NAN : kv->type == MST_AN_VAL_DOUBLE ? kv->d : kv->type == MST_AN_VAL_INT ? (double)kv->i : NAN;
    if (!(x.kv_usage >= 0 && x.kv_usage <= 1.5)) x.kv_usage = NAN;
    x.prefill_tokens = x.decode_tokens = -1;
    if (x.waiting >= 0) m->steps_with_queue_info++;
    /* Per scheduled request: tokens and phase. */
    const mst_an_attr *ph = mst_an_span_attr(s, "step.phase", 10);
    size_t nt = int_list(m, s, "step.tokens", 11);
    if (ph && ph->type == MST_AN_VAL_STR && r->ids_n) {
        x.has_phase = true;
        x.prefill_tokens = x.decode_tokens = 0;
        m->steps_with_record++;
        const int64_t *tok = m->scratch.p;
        for (uint32_t k = 0; k < r->ids_n; k++) {
            uint8_t c = k < ph->s.len ? (uint8_t)ph->s.ptr[k] : 0;
            if (c != 'p' && c != 'P' && c != 'd') c = 0;
            int32_t t = k < nt ? clamp32(tok[k]) : -1;
            ((uint8_t *)m->id_phase.p)[r->ids_off + k] = c;
            ((int32_t *)m->id_tokens.p)[r->ids_off + k] = t;
            if (t > 0) {
                if (c == 'd') x.decode_tokens += t;
                else if (c) x.prefill_tokens += t;
            }
        }
    }
    /* Who came, who went. */
    nt = int_list(m, s, "step.queued_ns", 14);
    x.queued_off = (uint32_t)m->queued.n;
    x.queued_n = (uint32_t)nt;
    for (size_t k = 0; k < nt; k++)
        if (!vec_push(&m->queued, (const int64_t *)m->scratch.p + k, sizeof(int64_t))) return false;
    if (!collect_list(m, s, "step.new_ids", 12, &x.new_off, &x.new_n) ||
        !collect_list(m, s, "step.resumed_ids", 16, &x.resumed_off, &x.resumed_n) ||
        !collect_list(m, s, "step.preempted_ids", 18, &x.preempted_off, &x.preempted_n))
        return false;
    r->extra = (uint32_t)m->srecs.n;
    return vec_push(&m->srecs, &x, sizeof x);
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

static bool keep_trigger_id(mst_an_trigger *t, const mst_an_str *id) {
    size_t n = id->len;
    char cut[MAX_ID_BYTES + 64];
    const char *p = cut_long_id(id->ptr, &n, cut, sizeof cut); /* the same key as its request's */
    if (!(t->ids[t->n_ids_kept] = str_copy(p, n))) return false;
    t->id_len[t->n_ids_kept++] = (uint32_t)n;
    return true;
}

/* Keeps a flight-recorder trigger span (bounded; the rest counted). */
static mst_status add_trigger_span(mst_an_model *m, const mst_an_span *s) {
    if (m->n_triggers == MST_AN_TRIGGERS_KEPT) {
        m->triggers_dropped++;
        return MST_OK;
    }
    mst_an_trigger *t = &m->triggers[m->n_triggers];
    memset(t, 0, sizeof *t);
    const mst_an_attr *a = mst_an_span_attr(s, "flight.trigger", 14);
    bool str = a && a->type == MST_AN_VAL_STR;
    t->reason = str_copy(str ? a->s.ptr : "", !str ? 0 : a->s.len > MAX_REASON_BYTES ? MAX_REASON_BYTES : a->s.len);
    if (!t->reason) return MST_ERR_NOMEM;
    m->n_triggers++; /* from here on freed with the model */
    a = mst_an_span_attr(s, "flight.request_ids", 18);
    if (a && a->type == MST_AN_VAL_STR_LIST) {
        t->n_ids = a->n_items;
        for (size_t i = 0; i < a->n_items && i < MST_AN_TRIGGER_IDS_KEPT; i++)
            if (!keep_trigger_id(t, &a->items[i])) return MST_ERR_NOMEM;
    } else if (a && a->type == MST_AN_VAL_STR) { /* one id, as a reader may give a one-item list */
        t->n_ids = 1;
        if (!keep_trigger_id(t, &a->s)) return MST_ERR_NOMEM;
    }
    a = mst_an_span_attr(s, "flight.on_demand", 16);
    t->on_demand = a && (a->type == MST_AN_VAL_BOOL || a->type == MST_AN_VAL_INT) && a->i != 0;
    t->start_ns = s->start_ns;
    t->end_ns = s->end_ns;
    t->pid = s->pid;
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
    if (m->first_start == NONE || s->start_ns < m->first_start) m->first_start = s->start_ns;
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
    if (NAME_IS(&s->name, "mstrace.flight_recorder.trigger")) return add_trigger_span(m, s);
    int k = kind_of(&s->name);
    if (k < 0) return MST_OK;
    rec r = {s->start_ns, s->start_ns + dur, proc, 0, 0, -1, -1, UINT32_MAX, (uint8_t)k};
    if (k == K_SCHEDULE || k == K_OUTPUT || k == K_EXEC || k == K_WORKER) {
        int64_t v;
        if (attr_int(s, "batch.request_count", 19, &v) && v >= 0 && v < INT32_MAX) r.batch = (int32_t)v;
        if (attr_int(s, "batch.scheduled_tokens", 22, &v) && v >= 0 && v < INT32_MAX)
            r.tokens = (int32_t)v;
    }
    if ((k == K_SCHEDULE || k == K_OUTPUT) && !collect_ids(m, s, &r)) return MST_ERR_NOMEM;
    if (k == K_SCHEDULE && !collect_step_record(m, s, &r)) return MST_ERR_NOMEM;
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

void mst_an_model_set_window(mst_an_model *m, int64_t start_ns, int64_t end_ns, bool relative) {
    m->win_set = true;
    m->win_lo = start_ns;
    m->win_hi = end_ns;
    m->win_relative = relative;
}

void mst_an_model_skip_warmup(mst_an_model *m) { m->skip_warmup = true; }

/* The window in absolute ns ([lo, hi)), or false when none is set. */
static bool window_bounds(mst_an_model *m, int64_t *lo, int64_t *hi) {
    if (!m->win_set && !m->skip_warmup) return false;
    *lo = INT64_MIN;
    *hi = INT64_MAX;
    if (m->win_set) {
        int64_t base = m->win_relative && m->first_start != NONE ? m->first_start : 0;
        *lo = m->win_lo == INT64_MIN ? INT64_MIN : m->win_lo + base;
        *hi = m->win_hi == INT64_MAX ? INT64_MAX : m->win_hi + base;
    }
    if (m->skip_warmup) {
        /* Each engine's first busy step is cold (compilation, graph capture,
         * first allocations): the run starts when the last engine's ended,
         * i.e. when its next step started. */
        const rec *sr = m->recs[K_SCHEDULE].p;
        size_t n = m->recs[K_SCHEDULE].n;
        int64_t cut = INT64_MIN;
        for (size_t i = 0; i < n;) {
            size_t end = i, b = i;
            while (end < n && sr[end].proc == sr[i].proc) end++;
            while (b < end && !(sr[b].batch > 0 || (sr[b].batch < 0 && sr[b].ids_n > 0))) b++;
            if (b + 1 < end && sr[b + 1].start > cut) cut = sr[b + 1].start;
            i = end;
        }
        if (cut > *lo) *lo = cut;
    }
    return true;
}

/* Leaves out the records that start outside the window. */
static void apply_window(mst_an_model *m, int64_t lo, int64_t hi) {
    for (int k = 0; k < K_KINDS; k++) {
        rec *r = m->recs[k].p;
        size_t w = 0;
        for (size_t i = 0; i < m->recs[k].n; i++) {
            if (r[i].start >= lo && r[i].start < hi) r[w++] = r[i];
            else if (k == K_SCHEDULE) m->outside_window++;
        }
        m->recs[k].n = w;
    }
}

typedef struct engine {
    uint32_t proc, source;
    size_t lo, hi; /* its steps */
} engine;

/* Where a span is given to a step: each process's engine, and per input
 * the steps of all its engines sorted by start (for spans of processes
 * that are no engine: workers, API servers). */
typedef struct step_index {
    uint32_t *engine_of_proc;  /* UINT32_MAX: not an engine */
    uint32_t *by_start;        /* step indices sorted by (source, start) */
    size_t *src_lo, *src_hi;   /* per source: range in by_start */
    uint32_t n_sources;
    bool *source_has_engine;
} step_index;

/* The step of engine e whose window holds time t: the last step with
 * start <= t; SIZE_MAX when t is before its first step. */
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

/* The latest step with start <= t among by_start[lo, hi). */
static size_t latest_in(const mst_an_step *st, const uint32_t *idx, size_t lo, size_t hi, int64_t t) {
    if (lo == hi || st[idx[lo]].start_ns > t) return SIZE_MAX;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (st[idx[mid]].start_ns <= t) lo = mid;
        else hi = mid;
    }
    return idx[lo];
}

/* For a span of process `proc` at time t: its own engine's step, else the
 * step whose start is the latest <= t among the engines of the same input
 * (any input when that one has no engine). */
static size_t step_for(const mst_an_model *m, const engine *eng, const step_index *x, uint32_t proc,
                       int64_t t) {
    const mst_an_step *st = m->steps.p;
    if (x->engine_of_proc[proc] != UINT32_MAX) return step_at(st, &eng[x->engine_of_proc[proc]], t);
    uint32_t source = ((const mst_an_proc *)m->procs.p)[proc].source;
    if (source < x->n_sources && x->source_has_engine[source])
        return latest_in(st, x->by_start, x->src_lo[source], x->src_hi[source], t);
    /* No engine in this input: the latest step of any input. */
    size_t best = SIZE_MAX;
    for (uint32_t src = 0; src < x->n_sources; src++) {
        size_t k = latest_in(st, x->by_start, x->src_lo[src], x->src_hi[src], t);
        if (k != SIZE_MAX && (best == SIZE_MAX || st[k].start_ns > st[best].start_ns)) best = k;
    }
    return best;
}

static const mst_an_model *g_sort_model; /* qsort has no context argument */
static int cmp_by_start(const void *a, const void *b) {
    const mst_an_step *st = g_sort_model->steps.p;
    const mst_an_proc *ps = g_sort_model->procs.p;
    const mst_an_step *x = &st[*(const uint32_t *)a], *y = &st[*(const uint32_t *)b];
    uint32_t sx = ps[x->proc].source, sy = ps[y->proc].source;
    if (sx != sy) return sx < sy ? -1 : 1;
    return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

static void index_free(step_index *x) {
    free(x->engine_of_proc);
    free(x->by_start);
    free(x->src_lo);
    free(x->src_hi);
    free(x->source_has_engine);
    memset(x, 0, sizeof *x);
}

static bool index_build(const mst_an_model *m, const engine *eng, size_t n_eng, step_index *x) {
    memset(x, 0, sizeof *x);
    const mst_an_proc *ps = m->procs.p;
    size_t n_procs = m->procs.n, n_steps = m->steps.n;
    uint32_t max_src = 0;
    for (size_t i = 0; i < n_procs; i++)
        if (ps[i].source > max_src) max_src = ps[i].source;
    x->n_sources = max_src + 1;
    x->engine_of_proc = malloc((n_procs ? n_procs : 1) * sizeof *x->engine_of_proc);
    x->by_start = malloc((n_steps ? n_steps : 1) * sizeof *x->by_start);
    x->src_lo = calloc(x->n_sources, sizeof *x->src_lo);
    x->src_hi = calloc(x->n_sources, sizeof *x->src_hi);
    x->source_has_engine = calloc(x->n_sources, sizeof *x->source_has_engine);
    if (!x->engine_of_proc || !x->by_start || !x->src_lo || !x->src_hi || !x->source_has_engine) {
        index_free(x);
        return false;
    }
    for (size_t i = 0; i < n_procs; i++) x->engine_of_proc[i] = UINT32_MAX;
    for (size_t e = 0; e < n_eng; e++) {
        x->engine_of_proc[eng[e].proc] = (uint32_t)e;
        x->source_has_engine[eng[e].source] = true;
    }
    for (size_t i = 0; i < n_steps; i++) x->by_start[i] = (uint32_t)i;
    g_sort_model = m;
    if (n_steps > 1) qsort(x->by_start, n_steps, sizeof *x->by_start, cmp_by_start);
    const mst_an_step *st = m->steps.p;
    for (size_t i = 0; i < n_steps;) {
        uint32_t src = ps[st[x->by_start[i]].proc].source;
        x->src_lo[src] = i;
        while (i < n_steps && ps[st[x->by_start[i]].proc].source == src) i++;
        x->src_hi[src] = i;
    }
    return true;
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

/* The API servers' output work as disjoint busy intervals per input. */
typedef struct busy {
    uint32_t source;
    int64_t start, end;
} busy;

static int cmp_busy(const void *a, const void *b) {
    const busy *x = a, *y = b;
    if (x->source != y->source) return x->source < y->source ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

/* Time of [lo, hi) covered by the merged intervals bs[0..n) of `source`. */
static int64_t busy_overlap(const busy *bs, size_t n, uint32_t source, int64_t lo, int64_t hi) {
    if (hi <= lo) return 0;
    /* first interval of the source with end > lo */
    size_t a = 0, b = n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (bs[mid].source < source || (bs[mid].source == source && bs[mid].end <= lo)) a = mid + 1;
        else b = mid;
    }
    int64_t sum = 0;
    for (size_t i = a; i < n && bs[i].source == source && bs[i].start < hi; i++) {
        int64_t s = bs[i].start > lo ? bs[i].start : lo, e = bs[i].end < hi ? bs[i].end : hi;
        if (e > s) sum += e - s;
    }
    return sum;
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

/* The steps, one per schedule span, grouped by engine in time order. */
static bool build_steps(mst_an_model *m, engine *eng, size_t *n_eng_out) {
    const rec *sched = m->recs[K_SCHEDULE].p;
    size_t ns = m->recs[K_SCHEDULE].n, n_eng = 0;
    const mst_an_step_record *xs = m->srecs.p;
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
        s.token_ns = NONE;
        s.stage_ms[MST_AN_SCHEDULE] = ms(r->end - r->start);
        s.batch_size = r->batch >= 0 ? r->batch : (int32_t)r->ids_n;
        s.scheduled_tokens = r->tokens;
        s.busy = s.batch_size > 0;
        s.ids_off = r->ids_off;
        s.ids_n = r->ids_n;
        s.ordinal = (uint32_t)(m->steps.n - eng[n_eng - 1].lo);
        if (r->extra != UINT32_MAX) s.rec = xs[r->extra];
        if (s.rec.has_phase) {
            /* The step record says which tokens are prefill. */
            if (s.rec.prefill_tokens == 0) s.kind = MST_AN_DECODE;
            else if (s.rec.decode_tokens == 0) s.kind = MST_AN_PREFILL;
            else s.kind = MST_AN_MIXED;
        } else if (s.scheduled_tokens < 0 || s.scheduled_tokens <= s.batch_size) s.kind = MST_AN_DECODE;
        else if (s.batch_size <= 1 || s.scheduled_tokens >= 16 * s.batch_size) s.kind = MST_AN_PREFILL;
        else s.kind = MST_AN_MIXED;
        if (s.busy && s.ids_n == 0) m->steps_without_ids++;
        if (eng[n_eng - 1].hi > eng[n_eng - 1].lo) {
            const mst_an_step *prev = (const mst_an_step *)m->steps.p + m->steps.n - 1;
            /* step.index counts every schedule() call of the engine: a jump
             * means steps whose spans were lost before the trace. */
            if (prev->rec.index >= 0 && s.rec.index > prev->rec.index && s.rec.index - prev->rec.index > 1)
                m->missing_steps += (uint64_t)(s.rec.index - prev->rec.index - 1);
            if (s.start_ns < prev->start_ns + (int64_t)(prev->stage_ms[MST_AN_SCHEDULE] * 1e6) - 1000)
                m->negative_gaps++;
        }
        if (!vec_push(&m->steps, &s, sizeof s)) return false;
        eng[n_eng - 1].hi = m->steps.n;
    }
    *n_eng_out = n_eng;
    return true;
}

/* The step's wall split into parts that sum to it: schedule, the forward,
 * the executor around it, and the rest (the host gap), each clipped to
 * what is left so overlapping spans never count twice. */
static void split_wall(mst_an_step *s) {
    double left = s->wall_ms > 0 ? s->wall_ms : 0;
    static const int order[] = {MST_AN_SCHEDULE, MST_AN_MODEL, MST_AN_IPC};
    for (size_t i = 0; i < 3; i++) {
        double *v = &s->stage_ms[order[i]];
        if (*v > left) *v = left;
        if (*v < 0) *v = 0;
        left -= *v;
    }
    s->stage_ms[MST_AN_WAITING] = left;
}

mst_status mst_an_model_finish(mst_an_model *m) {
    if (m->finished) return MST_OK;
    m->finished = true;
    for (int k = 0; k < K_KINDS; k++)
        if (m->recs[k].n > 1) qsort(m->recs[k].p, m->recs[k].n, sizeof(rec), cmp_rec);
    for (size_t i = 0; m->trace_mask && i <= m->trace_mask; i++)
        if (m->trace_counts[i] && m->trace_counts[i] <= 2) m->short_traces++;
    int64_t win_lo = INT64_MIN, win_hi = INT64_MAX;
    bool windowed = window_bounds(m, &win_lo, &win_hi);
    if (windowed) apply_window(m, win_lo, win_hi);

    size_t ns = m->recs[K_SCHEDULE].n, n_eng = 0;
    engine *eng = calloc(ns ? ns : 1, sizeof *eng);
    step_index sx;
    memset(&sx, 0, sizeof sx);
    int64_t *exec_lo = NULL, *exec_hi = NULL;
    vec fwds = {0}, busys = {0};
    if (!eng || !build_steps(m, eng, &n_eng)) goto oom;
    m->n_engines = n_eng;
    mst_an_step *st = m->steps.p;
    size_t n_steps = m->steps.n;
    if (!index_build(m, eng, n_eng, &sx)) goto oom;
    exec_lo = malloc((n_steps ? n_steps : 1) * sizeof *exec_lo);
    exec_hi = malloc((n_steps ? n_steps : 1) * sizeof *exec_hi);
    if (!exec_lo || !exec_hi) goto oom;
    for (size_t i = 0; i < n_steps; i++) exec_lo[i] = exec_hi[i] = NONE;

    /* Engine-side spans. */
    static const int eng_kinds[] = {K_UPDATE, K_EXEC, K_SAMPLE};
    for (size_t ki = 0; ki < 3; ki++) {
        int k = eng_kinds[ki];
        const rec *rs = m->recs[k].p;
        for (size_t i = 0; i < m->recs[k].n; i++) {
            size_t s = step_for(m, eng, &sx, rs[i].proc, rs[i].start);
            if (s == SIZE_MAX) continue;
            if (k == K_UPDATE) {
                st[s].stage_ms[MST_AN_SCHEDULE] += ms(rs[i].end - rs[i].start);
                /* vLLM stamps a step's outputs when update_from_output builds them. */
                if (st[s].token_ns == NONE || rs[i].end > st[s].token_ns) st[s].token_ns = rs[i].end;
            } else {
                if (exec_lo[s] == NONE || rs[i].start < exec_lo[s]) exec_lo[s] = rs[i].start;
                if (exec_hi[s] == NONE || rs[i].end > exec_hi[s]) exec_hi[s] = rs[i].end;
            }
            if (rs[i].end > st[s].end_ns) st[s].end_ns = rs[i].end;
        }
    }

    /* The forward: worker spans, else runner spans. */
    int fk = m->recs[K_WORKER].n ? K_WORKER : m->recs[K_RUNNER].n ? K_RUNNER : -1;
    m->have_worker = fk >= 0;
    if (fk >= 0) {
        const rec *rs = m->recs[fk].p;
        for (size_t i = 0; i < m->recs[fk].n; i++) {
            size_t s = step_for(m, eng, &sx, rs[i].proc, rs[i].start);
            if (s == SIZE_MAX) continue;
            fwd f = {s, rs[i].proc, rs[i].start, rs[i].end};
            if (!vec_push(&fwds, &f, sizeof f)) goto oom;
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

    /* Output batches: to the step whose window they start in; their busy
     * time per input, merged. */
    const rec *outs = m->recs[K_OUTPUT].p;
    mst_an_request *rq = m->requests.p;
    const uint32_t *ids = m->ids.p;
    for (size_t i = 0; i < m->recs[K_OUTPUT].n; i++) {
        const rec *o = &outs[i];
        busy b = {((const mst_an_proc *)m->procs.p)[o->proc].source, o->start, o->end};
        if (!vec_push(&busys, &b, sizeof b)) goto oom;
        size_t s = step_for(m, eng, &sx, o->proc, o->start);
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
            if (r->first_out_start_ns == NONE || o->start < r->first_out_start_ns) r->first_out_start_ns = o->start;
            if (r->last_out_start_ns == NONE || o->start > r->last_out_start_ns) r->last_out_start_ns = o->start;
            if (s != SIZE_MAX) r->stage_ms[MST_AN_OUTPUT] += ms(o->end - o->start);
        }
    }
    busy *bs = busys.p;
    size_t n_busy = 0;
    if (busys.n > 1) qsort(busys.p, busys.n, sizeof(busy), cmp_busy);
    for (size_t i = 0; i < busys.n; i++) {
        if (n_busy && bs[n_busy - 1].source == bs[i].source && bs[i].start <= bs[n_busy - 1].end) {
            if (bs[i].end > bs[n_busy - 1].end) bs[n_busy - 1].end = bs[i].end;
        } else bs[n_busy++] = bs[i];
    }

    /* Walls: the window to the next step when both are busy (the host gap
     * between them belongs to this one), else to the end of its spans;
     * split into parts that sum to it. */
    for (size_t e = 0; e < n_eng; e++) {
        for (size_t s = eng[e].lo; s < eng[e].hi; s++) {
            bool paired = s + 1 < eng[e].hi && st[s].busy && st[s + 1].busy;
            st[s].paired = paired;
            st[s].engine_end_ns = st[s].end_ns;
            if (st[s].token_ns == NONE) st[s].token_ns = st[s].end_ns;
            int64_t lo = st[s].start_ns;
            int64_t hi = paired ? st[s + 1].start_ns : st[s].end_ns;
            if (hi < lo) hi = lo;
            st[s].wall_ms = ms(hi - lo);
            split_wall(&st[s]);
            uint32_t src = eng[e].source;
            st[s].output_overlap_ms = ms(busy_overlap(bs, n_busy, src, lo, hi));
            if (paired && st[s].end_ns < hi)
                st[s].gap_output_ms = ms(busy_overlap(bs, n_busy, src, st[s].end_ns, hi));
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
                r->engine_proc = st[s].proc;
                r->first_step_done_ns = done;
            }
            if (r->last_step_done_ns == NONE || done > r->last_step_done_ns) r->last_step_done_ns = done;
            for (int g = 0; g < MST_AN_STAGES; g++)
                if (g != MST_AN_OUTPUT) r->stage_ms[g] += st[s].stage_ms[g];
        }
    }
    mst_an_life_in life = {st, n_steps, ids, m->id_tokens.p, m->id_phase.p, m->queued.p,
                           m->steps_with_record > 0};
    mst_an_life_counts lc;
    mst_an_itl *itls = NULL;
    size_t n_itls = 0;
    if (mst_an_life_build(&life, rq, m->requests.n, &itls, &n_itls, &lc) != MST_OK) goto oom;
    m->itls.p = itls;
    m->itls.n = m->itls.cap = n_itls;
    m->negative_gaps += lc.negative_queue;
    m->queue_over_ttft = lc.queue_over_ttft;
    m->clock_skew = lc.clock_skew;
    m->negative_itl = lc.negative_itl;
    m->preemptions = lc.preemptions;
    for (size_t i = 0; i < m->requests.n; i++) {
        mst_an_request *r = &rq[i];
        if (windowed) {
            int64_t t = r->arrival_ns != NONE ? r->arrival_ns : r->first_step_ns;
            r->excluded = t == NONE || t < win_lo || t >= win_hi;
            if (r->excluded) {
                m->outside_window++;
                if (r->has_span) m->with_span--;
                continue;
            }
        }
        if (r->has_span && r->n_steps == 0) m->unjoined++;
    }
    free(exec_lo);
    free(exec_hi);
    free(fwds.p);
    free(busys.p);
    index_free(&sx);
    free(eng);
    return MST_OK;
oom:
    free(exec_lo);
    free(exec_hi);
    free(fwds.p);
    free(busys.p);
    index_free(&sx);
    free(eng);
    return MST_ERR_NOMEM;
}

/* ------------------------------------------------------------ life */

mst_an_model *mst_an_model_new(void) {
    mst_an_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->first_start = NONE;
    if (!map_init(&m->req_map, 1024) || !map_init(&m->name_map, 64) || !map_init(&m->proc_map, 64)) {
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
    free(m->proc_map.slots);
    free(m->id_tokens.p);
    free(m->id_phase.p);
    free(m->srecs.p);
    free(m->queued.p);
    free(m->scratch.p);
    free(m->itls.p);
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
    for (size_t i = 0; i < m->n_triggers; i++) {
        free(m->triggers[i].reason);
        for (uint32_t k = 0; k < m->triggers[i].n_ids_kept; k++) free(m->triggers[i].ids[k]);
    }
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
    v->id_tokens = m->id_tokens.p;
    v->id_phase = m->id_phase.p;
    v->new_queued_ns = m->queued.p;
    v->itls = m->itls.p;
    v->n_itls = m->itls.n;
    v->queue_over_ttft = m->queue_over_ttft;
    v->clock_skew = m->clock_skew;
    v->negative_itl = m->negative_itl;
    v->outside_window = m->outside_window;
    v->preemptions = m->preemptions;
    v->missing_steps = m->missing_steps;
    v->steps_with_record = m->steps_with_record;
    v->steps_with_queue_info = m->steps_with_queue_info;
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
    v->triggers = m->triggers;
    v->n_triggers = m->n_triggers;
    v->triggers_dropped = m->triggers_dropped;
}
