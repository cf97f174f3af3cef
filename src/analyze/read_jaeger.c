/*
 * read_jaeger.c — Jaeger query API reader (see read_jaeger.h for paging and
 * the span mapping). Two halves: the page parser (strict pull JSON from
 * wire/json_reader.h over one answer, spans delivered per trace, trace ids
 * remembered in an open-addressing set) and the pager (libcurl GETs of
 * /api/traces over time windows split until no page is full, per service
 * and per role service of it: NAME, NAME.engine_core, NAME.worker).
 */
#include "analyze/read_jaeger.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/grow.h"
#include "core/arena.h"
#include "core/err_text.h"
#include "core/resource.h"
#include "otlp/otlp_curl.h"
#include "wire/json_reader.h"

#define JSON_DEPTH 32                          /* answer > data > trace > spans > span > tags > tag > value */
#define MAX_ANSWER_BYTES ((size_t)1 << 30)     /* one HTTP answer */
#define DEFAULT_LIMIT 500u
#define DEFAULT_TIMEOUT_MS 60000L
#define MAX_WINDOWS 256                        /* pending windows; splits are binary, depth <= 64 */
#define DEFAULT_DEADLINE_MS 600000L            /* the whole read */
#define DEFAULT_MAX_REQUESTS 100000u

typedef struct proc_info {
    mst_str id;        /* "p1" */
    mst_str service;
    mst_str role;      /* process.role tag, may be empty */
    int64_t pid;
    bool has_pid;
} proc_info;

struct mst_an_jaeger_pages {
    uint32_t source;
    mst_an_span_fn fn;
    void *ctx;
    mst_an_input_info *info;
    /* Trace ids delivered so far (open addressing; used[] marks a slot). */
    uint8_t (*seen)[16];
    bool *used;
    size_t seen_cap, seen_n;
    /* Per-trace scratch, reused. */
    mst_arena arena;
    proc_info *procs;
    size_t n_procs, procs_cap;
    mst_an_attr *attrs;
    size_t n_attrs, attrs_cap;
    size_t *item_start;        /* per attr: first item index (string lists) */
    size_t item_start_cap;
    mst_an_str *items;
    size_t n_items, items_cap;
    mst_an_link *links;
    size_t n_links, links_cap;
    /* The answer being parsed, and where a nested reader failed in it. */
    const char *body;
    const char *sub_err;
    size_t sub_err_off;
};

static bool str_is(const mst_str *s, const char *lit) {
    size_t n = strlen(lit);
    return s->len == n && memcmp(s->ptr, lit, n) == 0;
}

/* ------------------------------------------------------------ trace-id set */

static size_t id_hash(const uint8_t id[16]) {
    uint64_t a, b;
    memcpy(&a, id, 8);
    memcpy(&b, id + 8, 8);
    uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    return (size_t)(h ^ (h >> 31));
}

/* True when `id` was new (and is now remembered); *nomem on failure. */
static bool seen_insert(mst_an_jaeger_pages *p, const uint8_t id[16], bool *nomem) {
    if ((p->seen_n + 1) * 4 > p->seen_cap * 3) {
        size_t cap = p->seen_cap ? p->seen_cap * 2 : 1024;
        uint8_t(*seen)[16] = calloc(cap, 16);
        bool *used = calloc(cap, sizeof *used);
        if (!seen || !used) {
            free(seen);
            free(used);
            *nomem = true;
            return false;
        }
        for (size_t i = 0; i < p->seen_cap; i++) {
            if (!p->used[i]) continue;
            size_t j = id_hash(p->seen[i]) & (cap - 1);
            while (used[j]) j = (j + 1) & (cap - 1);
            memcpy(seen[j], p->seen[i], 16);
            used[j] = true;
        }
        free(p->seen);
        free(p->used);
        p->seen = seen;
        p->used = used;
        p->seen_cap = cap;
    }
    size_t j = id_hash(id) & (p->seen_cap - 1);
    while (p->used[j]) {
        if (memcmp(p->seen[j], id, 16) == 0) return false;
        j = (j + 1) & (p->seen_cap - 1);
    }
    memcpy(p->seen[j], id, 16);
    p->used[j] = true;
    p->seen_n++;
    return true;
}

/* ------------------------------------------------------------ small parsers */

/* Hex id right-aligned into `out` (Jaeger drops a zero high half of a
 * trace id). False for an empty, too long or non-hex string. */
static bool parse_hex_id(const mst_str *s, uint8_t *out, size_t out_len) {
    if (s->len == 0 || s->len > out_len * 2) return false;
    memset(out, 0, out_len);
    for (size_t i = 0; i < s->len; i++) {
        char c = s->ptr[s->len - 1 - i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) return false;
        out[out_len - 1 - i / 2] |= (uint8_t)(i % 2 ? v << 4 : v);
    }
    return true;
}

/* A JSON number (already validated raw text) as a double. */
static double raw_to_double(const mst_json_slice *v) {
    char buf[64];
    size_t n = v->len < sizeof buf - 1 ? v->len : sizeof buf - 1;
    memcpy(buf, v->ptr, n);
    buf[n] = 0;
    return strtod(buf, NULL);
}

/* A value of the wrong JSON type where the Jaeger schema names one: the
 * reader fails (it is not a Jaeger answer). */
static bool wrong_type(mst_json_reader *jr, const char *what) {
    if (!jr->err) {
        jr->err = what;
        jr->err_off = (size_t)(jr->p - jr->start);
    }
    return false;
}

/* Reads a number that should be integral (microseconds); a fraction is
 * truncated. */
static bool read_int_number(mst_json_reader *jr, int64_t *out) {
    mst_json_slice raw;
    if (mst_json_peek(jr) != MST_JSON_NUMBER) return wrong_type(jr, "expected a number");
    if (!mst_json_read_raw(jr, &raw)) return false;
    if (mst_json_slice_to_i64(&raw, out)) return true;
    double d = raw_to_double(&raw);
    if (!(d > -9.2e18 && d < 9.2e18)) return wrong_type(jr, "number out of range");
    *out = (int64_t)d;
    return true;
}

static bool read_string(mst_json_reader *jr, mst_arena *a, mst_str *out) {
    if (mst_json_peek(jr) != MST_JSON_STRING) return wrong_type(jr, "expected a string");
    return mst_json_read_str_slice(jr, a, out);
}

/* A string that is itself a JSON array of strings (OTLP string-array
 * attributes as Jaeger stores them) into p->items; false when it is not. */
static bool unpack_string_list(mst_an_jaeger_pages *p, const mst_str *s) {
    if (s->len < 2 || s->ptr[0] != '[') return false;
    mst_json_reader jr;
    mst_json_reader_init(&jr, s->ptr, s->len, 2);
    size_t first = p->n_items;
    if (!mst_json_array_begin(&jr)) return false;
    int more;
    while ((more = mst_json_array_next(&jr)) == 1) {
        mst_str item;
        if (!read_string(&jr, &p->arena, &item) ||
            !mst_an_grow((void **)&p->items, &p->items_cap, p->n_items + 1, sizeof *p->items)) {
            p->n_items = first;
            return false;
        }
        p->items[p->n_items++] = (mst_an_str){item.ptr, item.len};
    }
    if (more < 0 || !mst_json_finish(&jr)) {
        p->n_items = first;
        return false;
    }
    return true;
}

/* One tag object {"key", "type", "value"} appended to p->attrs. */
static bool read_tag(mst_an_jaeger_pages *p, mst_json_reader *jr) {
    mst_str key = {0}, type = {0};
    mst_json_slice raw = {0};
    mst_json_type vtype = MST_JSON_INVALID;
    bool has_key = false, has_value = false;
    if (!mst_json_object_begin(jr)) return false;
    int more;
    while ((more = mst_json_object_next(jr)) == 1) {
        mst_str k;
        if (!mst_json_read_key_slice(jr, &p->arena, &k)) return false;
        if (str_is(&k, "key")) {
            if (!read_string(jr, &p->arena, &key)) return false;
            has_key = true;
        } else if (str_is(&k, "type")) {
            if (!read_string(jr, &p->arena, &type)) return false;
        } else if (str_is(&k, "value")) {
            vtype = mst_json_peek(jr);
            if (!mst_json_read_raw(jr, &raw)) return false;
            has_value = true;
        } else if (!mst_json_read_raw(jr, &(mst_json_slice){0})) {
            return false;
        }
    }
    if (more < 0) return false;
    if (!has_key || !has_value) return true; /* not a usable tag: ignored */
    if (!mst_an_grow((void **)&p->attrs, &p->attrs_cap, p->n_attrs + 1, sizeof *p->attrs) ||
        !mst_an_grow((void **)&p->item_start, &p->item_start_cap, p->n_attrs + 1, sizeof *p->item_start))
        return false;
    mst_an_attr *a = &p->attrs[p->n_attrs];
    memset(a, 0, sizeof *a);
    a->key = (mst_an_str){key.ptr, key.len};
    p->item_start[p->n_attrs] = p->n_items;
    switch (vtype) {
    case MST_JSON_STRING: {
        mst_json_reader sub;
        mst_str s;
        mst_json_reader_init(&sub, raw.ptr, raw.len, 1);
        if (!mst_json_read_str_slice(&sub, &p->arena, &s)) return false;
        if (unpack_string_list(p, &s)) {
            a->type = MST_AN_VAL_STR_LIST;
            a->n_items = p->n_items - p->item_start[p->n_attrs];
        } else {
            a->type = MST_AN_VAL_STR;
            a->s = (mst_an_str){s.ptr, s.len};
        }
        break;
    }
    case MST_JSON_NUMBER:
        if (!str_is(&type, "float64") && mst_json_slice_to_i64(&raw, &a->i)) {
            a->type = MST_AN_VAL_INT;
        } else {
            a->type = MST_AN_VAL_DOUBLE;
            a->d = raw_to_double(&raw);
        }
        break;
    case MST_JSON_TRUE:
    case MST_JSON_FALSE:
        a->type = MST_AN_VAL_BOOL;
        a->i = vtype == MST_JSON_TRUE;
        break;
    default:
        a->type = MST_AN_VAL_OTHER;
        a->s = (mst_an_str){raw.ptr, raw.len};
        break;
    }
    p->n_attrs++;
    return true;
}

static bool read_tags(mst_an_jaeger_pages *p, mst_json_reader *jr) {
    if (mst_json_peek(jr) == MST_JSON_NULL) return mst_json_read_raw(jr, &(mst_json_slice){0});
    if (!mst_json_array_begin(jr)) return false;
    int more;
    while ((more = mst_json_array_next(jr)) == 1)
        if (!read_tag(p, jr)) return false; /* a non-object fails in object_begin */
    return more == 0;
}

static const mst_an_attr *find_attr(const mst_an_attr *attrs, size_t n, const char *key) {
    size_t klen = strlen(key);
    for (size_t i = 0; i < n; i++)
        if (attrs[i].key.len == klen && memcmp(attrs[i].key.ptr, key, klen) == 0) return &attrs[i];
    return NULL;
}

/* ------------------------------------------------------------ processes */

static bool read_process(mst_an_jaeger_pages *p, mst_json_reader *jr, proc_info *pi) {
    size_t attrs_before = p->n_attrs, items_before = p->n_items;
    if (!mst_json_object_begin(jr)) return false;
    int more;
    while ((more = mst_json_object_next(jr)) == 1) {
        mst_str k;
        if (!mst_json_read_key_slice(jr, &p->arena, &k)) return false;
        if (str_is(&k, "serviceName")) {
            if (!read_string(jr, &p->arena, &pi->service)) return false;
        } else if (str_is(&k, "tags")) {
            if (!read_tags(p, jr)) return false;
        } else if (!mst_json_read_raw(jr, &(mst_json_slice){0})) {
            return false;
        }
    }
    if (more < 0) return false;
    const mst_an_attr *tags = p->n_attrs > attrs_before ? p->attrs + attrs_before : NULL;
    const mst_an_attr *pid = find_attr(tags, p->n_attrs - attrs_before, "process.pid");
    if (pid && pid->type == MST_AN_VAL_INT) {
        pi->pid = pid->i;
        pi->has_pid = true;
    }
    const mst_an_attr *role = find_attr(tags, p->n_attrs - attrs_before, "process.role");
    if (role && role->type == MST_AN_VAL_STR) pi->role = (mst_str){role->s.ptr, (uint32_t)role->s.len};
    p->n_attrs = attrs_before; /* process tags are not span attributes */
    p->n_items = items_before;
    return true;
}

static bool read_processes(mst_an_jaeger_pages *p, mst_json_reader *jr) {
    if (mst_json_peek(jr) == MST_JSON_NULL) return mst_json_read_raw(jr, &(mst_json_slice){0});
    if (!mst_json_object_begin(jr)) return false;
    int more;
    while ((more = mst_json_object_next(jr)) == 1) {
        proc_info pi = {0};
        if (!mst_json_read_key_slice(jr, &p->arena, &pi.id)) return false;
        if (!read_process(p, jr, &pi)) return false;
        if (!mst_an_grow((void **)&p->procs, &p->procs_cap, p->n_procs + 1, sizeof *p->procs)) return false;
        p->procs[p->n_procs++] = pi;
    }
    return more == 0;
}

static const proc_info *find_proc(const mst_an_jaeger_pages *p, const mst_str *id) {
    for (size_t i = 0; i < p->n_procs; i++)
        if (p->procs[i].id.len == id->len && memcmp(p->procs[i].id.ptr, id->ptr, id->len) == 0)
            return &p->procs[i];
    return NULL;
}

/* ------------------------------------------------------------ spans */

typedef struct span_fields {
    mst_str name, trace_id, span_id, process_id;
    int64_t start_us, duration_us;
    bool has_name, has_start, has_duration, has_span_id;
} span_fields;

static bool read_reference(mst_an_jaeger_pages *p, mst_json_reader *jr, const span_fields *f,
                           mst_an_span *s, bool *has_parent) {
    mst_str type = {0}, tid = {0}, sid = {0};
    if (!mst_json_object_begin(jr)) return false;
    int more;
    while ((more = mst_json_object_next(jr)) == 1) {
        mst_str k;
        if (!mst_json_read_key_slice(jr, &p->arena, &k)) return false;
        mst_str *dst = str_is(&k, "refType") ? &type : str_is(&k, "traceID") ? &tid
                     : str_is(&k, "spanID") ? &sid : NULL;
        if (dst ? !read_string(jr, &p->arena, dst) : !mst_json_read_raw(jr, &(mst_json_slice){0})) return false;
    }
    if (more < 0) return false;
    mst_an_link l;
    if (!parse_hex_id(&tid, l.trace_id, 16) || !parse_hex_id(&sid, l.span_id, 8)) return true; /* ignored */
    bool same_trace = f->trace_id.len && tid.len == f->trace_id.len &&
                      memcmp(tid.ptr, f->trace_id.ptr, tid.len) == 0;
    if (!*has_parent && same_trace && str_is(&type, "CHILD_OF")) {
        memcpy(s->parent_span_id, l.span_id, 8);
        *has_parent = true;
        return true;
    }
    if (!mst_an_grow((void **)&p->links, &p->links_cap, p->n_links + 1, sizeof *p->links)) return false;
    p->links[p->n_links++] = l;
    return true;
}

/* One span object: parsed, mapped and delivered (or skipped and counted). */
static mst_status read_span(mst_an_jaeger_pages *p, mst_json_reader *jr, const mst_str *trace_id) {
    span_fields f = {0};
    f.trace_id = *trace_id;
    mst_an_span s;
    memset(&s, 0, sizeof s);
    bool has_parent = false;
    p->n_attrs = p->n_items = p->n_links = 0;
    /* References are read when met; they need the span's trace id, which
     * Jaeger writes first. A span without one uses the trace's. */
    if (!mst_json_object_begin(jr)) return MST_ERR_PARSE;
    int more;
    while ((more = mst_json_object_next(jr)) == 1) {
        mst_str k;
        bool ok;
        if (!mst_json_read_key_slice(jr, &p->arena, &k)) return MST_ERR_PARSE;
        if (str_is(&k, "traceID")) {
            ok = read_string(jr, &p->arena, &f.trace_id);
        } else if (str_is(&k, "spanID")) {
            ok = f.has_span_id = read_string(jr, &p->arena, &f.span_id);
        } else if (str_is(&k, "operationName")) {
            ok = f.has_name = read_string(jr, &p->arena, &f.name);
        } else if (str_is(&k, "startTime")) {
            ok = f.has_start = read_int_number(jr, &f.start_us);
        } else if (str_is(&k, "duration")) {
            ok = f.has_duration = read_int_number(jr, &f.duration_us);
        } else if (str_is(&k, "processID")) {
            ok = read_string(jr, &p->arena, &f.process_id);
        } else if (str_is(&k, "tags")) {
            ok = read_tags(p, jr);
        } else if (str_is(&k, "references") && mst_json_peek(jr) == MST_JSON_ARRAY) {
            ok = mst_json_array_begin(jr);
            int m = -1;
            while (ok && (m = mst_json_array_next(jr)) == 1)
                ok = read_reference(p, jr, &f, &s, &has_parent);
            ok = ok && m == 0;
        } else {
            ok = mst_json_read_raw(jr, &(mst_json_slice){0});
        }
        if (!ok) return jr->nomem ? MST_ERR_NOMEM : jr->err ? MST_ERR_PARSE : MST_ERR_NOMEM;
    }
    if (more < 0) return MST_ERR_PARSE;

    if (!f.has_name || !f.has_start || !f.has_span_id || !parse_hex_id(&f.span_id, s.span_id, 8) ||
        !parse_hex_id(&f.trace_id, s.trace_id, 16) || f.start_us < 0 || f.duration_us < 0 ||
        f.start_us > INT64_MAX / 1000 - f.duration_us) {
        if (p->info) p->info->skipped++;
        return MST_OK;
    }
    for (size_t i = 0; i < p->n_attrs; i++)
        if (p->attrs[i].type == MST_AN_VAL_STR_LIST) p->attrs[i].items = p->items ? p->items + p->item_start[i] : NULL;
    s.name = (mst_an_str){f.name.ptr, f.name.len};
    s.start_ns = f.start_us * 1000;
    s.end_ns = (f.start_us + f.duration_us) * 1000;
    s.source = p->source;
    s.attrs = p->attrs;
    s.n_attrs = p->n_attrs;
    s.links = p->links;
    s.n_links = p->n_links;
    const proc_info *pi = f.process_id.len ? find_proc(p, &f.process_id) : NULL;
    const mst_an_attr *a = find_attr(p->attrs, p->n_attrs, "process.pid");
    if (a && a->type == MST_AN_VAL_INT) s.pid = a->i;
    else if (pi && pi->has_pid) s.pid = pi->pid;
    a = find_attr(p->attrs, p->n_attrs, "thread.id");
    if (a && a->type == MST_AN_VAL_INT) s.tid = a->i;
    a = find_attr(p->attrs, p->n_attrs, "process.role");
    if (a && a->type == MST_AN_VAL_STR) s.role = a->s;
    else if (pi && pi->role.len) s.role = (mst_an_str){pi->role.ptr, pi->role.len};
    else if (pi) s.role = (mst_an_str){pi->service.ptr, pi->service.len};
    a = find_attr(p->attrs, p->n_attrs, "otel.status_code");
    if (a && a->type == MST_AN_VAL_STR)
        s.status = a->s.len == 5 && memcmp(a->s.ptr, "ERROR", 5) == 0 ? 2 : a->s.len == 2 ? 1 : 0;
    a = find_attr(p->attrs, p->n_attrs, "error");
    if (a && a->type == MST_AN_VAL_BOOL && a->i) s.status = 2;
    if (p->info) p->info->spans++;
    return p->fn ? p->fn(p->ctx, &s) : MST_OK;
}

static mst_status read_spans(mst_an_jaeger_pages *p, const mst_json_slice *spans, const mst_str *trace_id) {
    mst_json_reader jr;
    mst_json_reader_init(&jr, spans->ptr, spans->len, JSON_DEPTH);
    mst_status st = MST_OK;
    if (mst_json_peek(&jr) == MST_JSON_NULL) return MST_OK;
    if (!mst_json_array_begin(&jr)) {
        st = MST_ERR_PARSE;
    } else {
        int more;
        while ((more = mst_json_array_next(&jr)) == 1) {
            st = read_span(p, &jr, trace_id);
            if (st != MST_OK) break;
        }
        if (st == MST_OK && more < 0) st = MST_ERR_PARSE;
    }
    if (st == MST_ERR_PARSE) { /* report the place in the whole answer */
        p->sub_err = jr.err ? jr.err : "unexpected structure";
        p->sub_err_off = (size_t)(spans->ptr - p->body) + (jr.err ? jr.err_off : (size_t)(jr.p - jr.start));
    }
    return st;
}

/* ------------------------------------------------------------ traces, page */

/* A trace counts toward a full page only when it is one: a valid trace id
 * and a first element of "spans" that is an object (not `{}` as a trace,
 * not an empty or scalar list), so a server answering `limit` empty
 * elements does not look full and make the pager split forever. */
static bool is_real_trace(const mst_str *trace_id, const mst_json_slice *spans) {
    uint8_t id[16];
    if (!parse_hex_id(trace_id, id, 16)) return false;
    mst_json_reader r;
    mst_json_reader_init(&r, spans->ptr, spans->len, JSON_DEPTH);
    return mst_json_array_begin(&r) && mst_json_array_next(&r) == 1 &&
           mst_json_peek(&r) == MST_JSON_OBJECT;
}

static mst_status read_trace(mst_an_jaeger_pages *p, mst_json_reader *jr, bool *real) {
    mst_str trace_id = {0};
    mst_json_slice spans = {0};
    bool has_spans = false;
    p->n_procs = 0;
    p->n_attrs = p->n_items = 0;
    if (!mst_json_object_begin(jr)) return MST_ERR_PARSE;
    int more;
    while ((more = mst_json_object_next(jr)) == 1) {
        mst_str k;
        bool ok;
        if (!mst_json_read_key_slice(jr, &p->arena, &k)) return MST_ERR_PARSE;
        if (str_is(&k, "traceID")) ok = read_string(jr, &p->arena, &trace_id);
        else if (str_is(&k, "spans")) ok = has_spans = mst_json_read_raw(jr, &spans);
        else if (str_is(&k, "processes")) ok = read_processes(p, jr);
        else ok = mst_json_read_raw(jr, &(mst_json_slice){0});
        if (!ok) return jr->nomem ? MST_ERR_NOMEM : jr->err ? MST_ERR_PARSE : MST_ERR_NOMEM;
    }
    if (more < 0) return MST_ERR_PARSE;
    if (!has_spans) return MST_OK;
    *real = is_real_trace(&trace_id, &spans);
    uint8_t id[16];
    if (parse_hex_id(&trace_id, id, 16)) {
        bool nomem = false;
        if (!seen_insert(p, id, &nomem)) return nomem ? MST_ERR_NOMEM : MST_OK; /* delivered before */
    }
    return read_spans(p, &spans, &trace_id);
}

/* The "errors" list of an answer, as one sentence (first message). */
static bool read_errors(mst_an_jaeger_pages *p, mst_json_reader *jr, char *msg, size_t msg_size, size_t *n) {
    *n = 0;
    if (mst_json_peek(jr) != MST_JSON_ARRAY) return mst_json_read_raw(jr, &(mst_json_slice){0});
    if (!mst_json_array_begin(jr)) return false;
    int more;
    while ((more = mst_json_array_next(jr)) == 1) {
        if (mst_json_peek(jr) != MST_JSON_OBJECT) {
            if (!mst_json_read_raw(jr, &(mst_json_slice){0})) return false;
            continue;
        }
        if (!mst_json_object_begin(jr)) return false;
        int m;
        while ((m = mst_json_object_next(jr)) == 1) {
            mst_str k, v;
            if (!mst_json_read_key_slice(jr, &p->arena, &k)) return false;
            if (str_is(&k, "msg") && mst_json_peek(jr) == MST_JSON_STRING) {
                if (!mst_json_read_str_slice(jr, &p->arena, &v)) return false;
                if (*n == 0) snprintf(msg, msg_size, "%.*s", (int)(v.len > 300 ? 300 : v.len), v.ptr);
            } else if (!mst_json_read_raw(jr, &(mst_json_slice){0})) {
                return false;
            }
        }
        if (m < 0) return false;
        (*n)++;
    }
    return more == 0;
}

mst_status mst_an_jaeger_pages_parse(mst_an_jaeger_pages *p, const char *body, size_t len,
                                     size_t *traces, char *err, size_t err_size) {
    *traces = 0;
    p->body = body;
    p->sub_err = NULL;
    mst_json_reader jr;
    mst_json_reader_init(&jr, body, len, JSON_DEPTH);
    bool has_data = false;
    size_t n_errors = 0;
    char first_error[320] = "";
    mst_status st = MST_OK;
    if (mst_json_peek(&jr) != MST_JSON_OBJECT || !mst_json_object_begin(&jr)) {
        mst_err_set(err, err_size, "not a Jaeger query API answer (expected a JSON object with \"data\")");
        return MST_ERR_PARSE;
    }
    int more;
    while (st == MST_OK && (more = mst_json_object_next(&jr)) == 1) {
        mst_str k;
        if (!mst_json_read_key_slice(&jr, &p->arena, &k)) break;
        if (str_is(&k, "data")) {
            has_data = true;
            if (mst_json_peek(&jr) == MST_JSON_NULL) {
                if (!mst_json_read_raw(&jr, &(mst_json_slice){0})) break;
                continue;
            }
            if (!mst_json_array_begin(&jr)) {
                st = MST_ERR_PARSE;
                break;
            }
            int m;
            while (st == MST_OK && (m = mst_json_array_next(&jr)) == 1) {
                bool real = false;
                st = read_trace(p, &jr, &real);
                mst_arena_reset_keep(&p->arena, (size_t)1 << 20);
                if (real) (*traces)++;
            }
            if (st == MST_OK && m < 0) st = MST_ERR_PARSE;
        } else if (str_is(&k, "errors")) {
            if (!read_errors(p, &jr, first_error, sizeof first_error, &n_errors)) break;
        } else if (!mst_json_read_raw(&jr, &(mst_json_slice){0})) {
            break;
        }
    }
    mst_arena_reset_keep(&p->arena, (size_t)1 << 20);
    if (st == MST_ERR_PARSE || (st == MST_OK && (jr.err || !mst_json_finish(&jr)))) {
        if (p->sub_err)
            mst_err_set(err, err_size, "not a Jaeger query API answer: %s at byte %zu", p->sub_err, p->sub_err_off);
        else
            mst_err_set(err, err_size, "not a Jaeger query API answer: %s at byte %zu",
                    jr.err ? jr.err : "unexpected structure", jr.err ? jr.err_off : (size_t)(jr.p - jr.start));
        return jr.nomem ? MST_ERR_NOMEM : MST_ERR_PARSE;
    }
    if (st == MST_ERR_NOMEM) {
        mst_err_set(err, err_size, "out of memory reading the Jaeger answer");
        return st;
    }
    if (st != MST_OK) {
        mst_err_set(err, err_size, "stopped by the analysis (%s)", mst_strerror(st));
        return st;
    }
    if (!has_data) {
        mst_err_set(err, err_size, "not a Jaeger query API answer (no \"data\" member)");
        return MST_ERR_PARSE;
    }
    if (n_errors && *traces == 0) {
        mst_err_set(err, err_size, "Jaeger answered with an error: %s", first_error[0] ? first_error : "(no message)");
        return MST_ERR_REJECTED;
    }
    if (n_errors && p->info)
        mst_an_input_warn(p->info, "Jaeger reported %zu error(s) with its answer: %s", n_errors, first_error);
    return MST_OK;
}

mst_an_jaeger_pages *mst_an_jaeger_pages_new(uint32_t source, mst_an_span_fn fn, void *ctx,
                                             mst_an_input_info *info) {
    mst_an_jaeger_pages *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->source = source;
    p->fn = fn;
    p->ctx = ctx;
    p->info = info;
    mst_arena_init(&p->arena);
    return p;
}

void mst_an_jaeger_pages_free(mst_an_jaeger_pages *p) {
    if (!p) return;
    mst_arena_release(&p->arena);
    free(p->seen);
    free(p->used);
    free(p->procs);
    free(p->attrs);
    free(p->item_start);
    free(p->items);
    free(p->links);
    free(p);
}

/* ------------------------------------------------------------ time values */

/* A non-negative decimal number with an optional fraction; *end after it. */
static bool parse_decimal(const char *s, double *out, const char **end) {
    char *e;
    if (!s || *s < '0' || *s > '9') return false;
    double v = strtod(s, &e);
    if (e == s || !(v >= 0 && v < 1e12)) return false;
    *out = v;
    *end = e;
    return true;
}

bool mst_an_jaeger_parse_duration(const char *s, int64_t *us) {
    double v;
    const char *end;
    if (!parse_decimal(s, &v, &end)) return false;
    double unit = 1e6;
    if (end[0] == 'm' && end[1] == 's') unit = 1e3, end += 2;
    else if (end[0] == 'u' && end[1] == 's') unit = 1, end += 2;
    else if (*end == 's') end++;
    else if (*end == 'm') unit = 60e6, end++;
    else if (*end == 'h') unit = 3600e6, end++;
    else if (*end == 'd') unit = 86400e6, end++;
    if (*end || v * unit > 3.2e17) return false; /* about ten thousand years */
    *us = (int64_t)(v * unit);
    return true;
}

bool mst_an_jaeger_parse_time(const char *s, int64_t *us) {
    double v;
    const char *end;
    if (!s) return false;
    if (strlen(s) > 10 && s[4] == '-') { /* RFC 3339 */
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *p = strptime(s, "%Y-%m-%d", &tm);
        if (!p || (*p != 'T' && *p != 't' && *p != ' ')) return false;
        p = strptime(p + 1, "%H:%M:%S", &tm);
        if (!p) return false;
        double frac = 0;
        if (*p == '.') {
            char *e;
            frac = strtod(p, &e); /* ".123" parses as 0.123 */
            p = e;
        }
        int64_t offset_s = 0;
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int hh, mm, n = 0;
            if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5) return false;
            offset_s = (int64_t)(hh * 3600 + mm * 60) * (*p == '-' ? -1 : 1);
            p += 6;
        } else {
            return false;
        }
        if (*p) return false;
        time_t t = timegm(&tm);
        if (t == (time_t)-1) return false;
        *us = ((int64_t)t - offset_s) * 1000000 + (int64_t)(frac * 1e6);
        return true;
    }
    if (!parse_decimal(s, &v, &end) || *end) return false;
    *us = (int64_t)(v * 1e6);
    return true;
}

/* ------------------------------------------------------------ HTTP pager */

typedef struct answer {
    char *data;
    size_t len, cap;
    bool too_large;
} answer;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    answer *a = ud;
    size_t n = size * nmemb;
    if (a->len + n > MAX_ANSWER_BYTES) {
        a->too_large = true;
        return 0;
    }
    if (!mst_an_grow((void **)&a->data, &a->cap, a->len + n + 1, 1)) return 0;
    memcpy(a->data + a->len, ptr, n);
    a->len += n;
    a->data[a->len] = 0;
    return n;
}

/* GET `url` into `a`. A TLS failure is told as what to fix (`tls` names
 * the --jaeger-* flags) and is MST_ERR_INVALID_ARG, not "cannot reach". */
static mst_status http_get(CURL *c, const char *url, long timeout_ms, answer *a, const char *base,
                           const mst_otlp_tls *tls, char *err, size_t err_size) {
    char curl_err[CURL_ERROR_SIZE] = "";
    a->len = 0;
    a->too_large = false;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* gzip if offered */
    CURLcode rc = curl_easy_perform(c);
    if (a->too_large) {
        mst_err_set(err, err_size, "Jaeger at %s: one answer is over %zu bytes", base, MAX_ANSWER_BYTES);
        return MST_ERR_TOO_LARGE;
    }
    char tls_msg[1024];
    if (rc != CURLE_OK && mst_otlp_curl_tls_problem(rc, curl_err[0] ? curl_err : curl_easy_strerror(rc), url, tls,
                                                    timeout_ms, tls_msg, sizeof tls_msg)) {
        mst_err_set(err, err_size, "Jaeger at %s: %s", base, tls_msg);
        return MST_ERR_INVALID_ARG;
    }
    if (rc != CURLE_OK) {
        mst_err_set(err, err_size, "cannot reach Jaeger at %s: %s", base, curl_err[0] ? curl_err : curl_easy_strerror(rc));
        return rc == CURLE_OUT_OF_MEMORY || rc == CURLE_WRITE_ERROR ? MST_ERR_NOMEM : MST_ERR_UNAVAILABLE;
    }
    long http = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    if (http != 200) {
        /* The start of the body, printable bytes only, says why. */
        char why[201];
        size_t n = 0;
        for (size_t i = 0; i < a->len && n < sizeof why - 1; i++)
            why[n++] = a->data[i] >= 0x20 && a->data[i] < 0x7f ? a->data[i] : ' ';
        why[n] = 0;
        mst_err_set(err, err_size, "Jaeger at %s answered HTTP %ld to %s%s%s", base, http, url,
                n ? ": " : "", why);
        return MST_ERR_REJECTED;
    }
    return MST_OK;
}

typedef struct window {
    int64_t start_us, end_us;
} window;

/* The bounds of one whole read (all services), how far it got, and the
 * floor of window splitting. */
typedef struct read_budget {
    struct timespec deadline;  /* CLOCK_MONOTONIC */
    long deadline_ms;
    unsigned max_requests;
    unsigned requests;
    int64_t min_window_us;     /* windows are not split below this */
} read_budget;

/* Milliseconds left before the deadline (<= 0: passed). */
static long budget_left_ms(const read_budget *b) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)((b->deadline.tv_sec - now.tv_sec) * 1000 + (b->deadline.tv_nsec - now.tv_nsec) / 1000000);
}

/* The message of a read stopped by its bounds: which bound, and what was
 * read up to then (the windows are read in time order, so everything
 * before `w` is complete). */
static mst_status budget_stop(const read_budget *b, mst_status st, const mst_an_jaeger_pages *p,
                              const char *base, const char *service, const window *w, char *err,
                              size_t err_size) {
    char bound[120];
    if (st == MST_ERR_TIMEOUT)
        snprintf(bound, sizeof bound, "the --jaeger-deadline of %ld s passed", b->deadline_ms / 1000);
    else
        snprintf(bound, sizeof bound, "the --jaeger-max-requests limit of %u was reached", b->max_requests);
    mst_err_set(err, err_size,
                "Jaeger at %s: stopped, %s after %u requests: read %llu spans of %zu traces; service %s "
                "is complete before %" PRId64 " us (Unix time), later windows were not read "
                "(narrow the window with --start/--end or --since, or raise --jaeger-limit)",
                base, bound, b->requests, (unsigned long long)(p->info ? p->info->spans : 0),
                p->seen_n, service, w->start_us);
    return st;
}

/* Every trace of one service in [start, end], splitting full pages. */
static mst_status query_service(CURL *c, mst_an_jaeger_pages *p, const mst_an_jaeger_query *q,
                                const char *base, size_t base_len, const char *service, unsigned limit,
                                long timeout_ms, read_budget *b, const mst_otlp_tls *tls, answer *a,
                                char *err, size_t err_size) {
    char *esc = curl_easy_escape(c, service, 0);
    if (!esc) return MST_ERR_NOMEM;
    window stack[MAX_WINDOWS];
    size_t depth = 0;
    stack[depth++] = (window){q->start_us, q->end_us};
    mst_status st = MST_OK;
    bool warned = false;
    while (st == MST_OK && depth) {
        window w = stack[--depth];
        long left = budget_left_ms(b);
        if (left <= 0 || b->requests >= b->max_requests) {
            st = budget_stop(b, left <= 0 ? MST_ERR_TIMEOUT : MST_ERR_TOO_LARGE, p, base, service, &w,
                             err, err_size);
            break;
        }
        /* Jaeger compares a span's start (ns) with the window's ends (whole
         * us, both inclusive), so a span starting between mid and mid + 1 us
         * would be in neither half of a split window. Each window but the
         * last is therefore asked up to the next window's first us: the
         * traces starting at that instant come twice and are read once. */
        int64_t ask_end = w.end_us < q->end_us ? w.end_us + 1 : w.end_us;
        char url[4096];
        int n = snprintf(url, sizeof url, "%.*s/api/traces?service=%s&start=%" PRId64 "&end=%" PRId64 "&limit=%u",
                         (int)base_len, base, esc, w.start_us, ask_end, limit);
        if (n < 0 || (size_t)n >= sizeof url) {
            mst_err_set(err, err_size, "the Jaeger URL or service name is too long");
            st = MST_ERR_INVALID_ARG;
            break;
        }
        b->requests++;
        /* No request outlives the deadline: one given only the time left
         * that fails at (about) the deadline ran out of it. */
        bool capped = left <= timeout_ms;
        st = http_get(c, url, capped ? left : timeout_ms, a, base, tls, err, err_size);
        if (st == MST_ERR_UNAVAILABLE && capped && budget_left_ms(b) <= 100) {
            st = budget_stop(b, MST_ERR_TIMEOUT, p, base, service, &w, err, err_size);
            break;
        }
        if (st != MST_OK) break;
        if (p->info) {
            p->info->bytes += a->len;
            if (q->progress) q->progress(q->progress_ctx, p->info->bytes, 0);
            if (q->progress_pages)
                q->progress_pages(q->progress_ctx, b->requests, p->info->spans, p->seen_n, w.start_us);
        }
        size_t traces = 0;
        char perr[400] = "";
        st = mst_an_jaeger_pages_parse(p, a->data ? a->data : "", a->len, &traces, perr, sizeof perr);
        if (st != MST_OK) {
            mst_err_set(err, err_size, "Jaeger at %s, %s: %s", base, url + base_len, perr);
            break;
        }
        if (traces < limit) continue;
        if (w.end_us - w.start_us + 1 >= 2 * b->min_window_us && depth + 2 <= MAX_WINDOWS) {
            int64_t mid = w.start_us + (w.end_us - w.start_us) / 2;
            stack[depth++] = (window){mid + 1, w.end_us}; /* later half second: time order */
            stack[depth++] = (window){w.start_us, mid};
        } else if (!warned && p->info) {
            mst_an_input_warn(p->info, "service %s: %u or more traces start within %" PRId64 " us "
                                       "(from %" PRId64 "), the shortest window read; some of them may be missing",
                              service, limit, w.end_us - w.start_us + 1, w.start_us);
            p->info->truncated = true;
            warned = true;
        }
    }
    curl_free(esc);
    return st;
}

/* Whether `service` already names one role's service ("vllm.worker"). */
static bool has_role_suffix(const char *service) {
    size_t n = strlen(service);
    for (size_t i = 0; mst_resource_role_suffixes[i]; i++) {
        size_t sl = strlen(mst_resource_role_suffixes[i]);
        if (n > sl && strcmp(service + n - sl, mst_resource_role_suffixes[i]) == 0) return true;
    }
    return false;
}

/* The query's TLS files as the shared TLS settings, named by their flags,
 * checked (readable, a key only with its certificate). */
static mst_status tls_from_query(const mst_an_jaeger_query *q, mst_otlp_tls *tls, char *err, size_t err_size) {
    memset(tls, 0, sizeof *tls);
    snprintf(tls->ca_from, sizeof tls->ca_from, "--jaeger-ca");
    snprintf(tls->cert_from, sizeof tls->cert_from, "--jaeger-cert");
    snprintf(tls->key_from, sizeof tls->key_from, "--jaeger-key");
    const char *files[3] = {q->ca_file, q->cert_file, q->key_file};
    char *into[3] = {tls->ca_file, tls->cert_file, tls->key_file};
    const char *flags[3] = {tls->ca_from, tls->cert_from, tls->key_from};
    for (int i = 0; i < 3; i++) {
        if (!files[i]) continue;
        if (strlen(files[i]) >= sizeof tls->ca_file) {
            mst_err_set(err, err_size, "%s: the path is longer than %zu bytes", flags[i], sizeof tls->ca_file - 1);
            return MST_ERR_INVALID_ARG;
        }
        snprintf(into[i], sizeof tls->ca_file, "%s", files[i]);
    }
    return mst_otlp_tls_check(tls, err, err_size) == MST_OK ? MST_OK : MST_ERR_INVALID_ARG;
}

mst_status mst_an_read_jaeger(const mst_an_jaeger_query *q, uint32_t source, mst_an_span_fn fn,
                              void *ctx, mst_an_input_info *info, char *err, size_t err_size) {
    if (!q || !q->base_url || !q->service || !info) {
        mst_err_set(err, err_size, "Jaeger query: URL and service are required");
        return MST_ERR_INVALID_ARG;
    }
    char name[1024];
    snprintf(name, sizeof name, "%s service=%s", q->base_url, q->service);
    if (!mst_an_input_info_init(info, "jaeger", name)) return MST_ERR_NOMEM;
    size_t base_len = strlen(q->base_url);
    while (base_len && q->base_url[base_len - 1] == '/') base_len--;
    if (strncmp(q->base_url, "http://", 7) != 0 && strncmp(q->base_url, "https://", 8) != 0) {
        mst_err_set(err, err_size, "Jaeger URL must start with http:// or https:// (got %s)", q->base_url);
        return MST_ERR_INVALID_ARG;
    }
    if (q->service[0] == 0 || q->end_us < q->start_us) {
        mst_err_set(err, err_size, "Jaeger query: %s", q->service[0] ? "the window ends before it starts"
                                                                  : "the service name is empty");
        return MST_ERR_INVALID_ARG;
    }
    mst_otlp_tls tls;
    mst_status st = tls_from_query(q, &tls, err, err_size);
    if (st != MST_OK) return st;
    if (mst_otlp_curl_init(err, err_size) != MST_OK) return MST_ERR_UNAVAILABLE;
    char *base = strndup(q->base_url, base_len);
    char *services = strdup(q->service);
    CURL *c = curl_easy_init();
    mst_an_jaeger_pages *p = mst_an_jaeger_pages_new(source, fn, ctx, info);
    answer a = {0};
    if (!base || !services || !c || !p || mst_otlp_curl_set_tls(c, &tls) != CURLE_OK) {
        mst_err_set(err, err_size, "out of memory starting the Jaeger query");
        st = MST_ERR_NOMEM;
    }
    unsigned limit = q->limit ? q->limit : DEFAULT_LIMIT;
    long timeout_ms = q->timeout_ms > 0 ? q->timeout_ms : DEFAULT_TIMEOUT_MS;
    read_budget b = {.deadline_ms = q->deadline_ms > 0 ? q->deadline_ms : DEFAULT_DEADLINE_MS,
                     .max_requests = q->max_requests ? q->max_requests : DEFAULT_MAX_REQUESTS,
                     .min_window_us = q->min_window_us > 0 ? q->min_window_us : MST_AN_JAEGER_MIN_WINDOW_US};
    clock_gettime(CLOCK_MONOTONIC, &b.deadline);
    b.deadline.tv_sec += b.deadline_ms / 1000;
    b.deadline.tv_nsec += (b.deadline_ms % 1000) * 1000000L;
    if (b.deadline.tv_nsec >= 1000000000L) {
        b.deadline.tv_sec++;
        b.deadline.tv_nsec -= 1000000000L;
    }
    char *save = NULL;
    for (char *svc = st == MST_OK ? strtok_r(services, ",", &save) : NULL; svc && st == MST_OK;
         svc = strtok_r(NULL, ",", &save)) {
        if (!*svc) continue;
        st = query_service(c, p, q, base, base_len, svc, limit, timeout_ms, &b, &tls, &a, err, err_size);
        /* The run's other processes, under their role services (an absent
         * service answers no traces; a trace already read is not read again). */
        for (size_t i = 0; st == MST_OK && !has_role_suffix(svc) && mst_resource_role_suffixes[i]; i++) {
            char role_svc[1024];
            if ((size_t)snprintf(role_svc, sizeof role_svc, "%s%s", svc, mst_resource_role_suffixes[i]) >= sizeof role_svc)
                continue; /* longer than any service name Jaeger answers for */
            st = query_service(c, p, q, base, base_len, role_svc, limit, timeout_ms, &b, &tls, &a, err, err_size);
        }
    }
    free(a.data);
    mst_an_jaeger_pages_free(p);
    if (c) curl_easy_cleanup(c);
    free(services);
    free(base);
    return st;
}
