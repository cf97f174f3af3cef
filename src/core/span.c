/*
 * span.c — recording one span on the caller's thread (mstrace.h "spans").
 *
 * Owns: starting a span (ids, parent, trace state, name), the setters with
 * the limits of docs/reference/spans.md (32 attributes, keys <= 128 bytes, strings <= 1024 bytes
 * cut on a UTF-8 boundary, 1024 links and list items, 128 events, dropped
 * counts), links (one by one, or a block expanded on the exporter thread)
 * and events with their own attributes, status, ending (hand-off to
 * the tracer's queue); a batch block's list and links read in place, the
 * span holding a reference (batch_block.c). The read-out functions are
 * span_readout.c.
 *
 * Sampling (sampler.h) is decided first: a dropped span is NULL, costs no
 * allocation and no clock read, and is only counted.
 *
 * Hot-path rules: the record comes from the tracer's pool (no malloc in
 * steady state) and only its header is initialised — never the whole
 * ~2 KB record; strings are copied into the span's arena; no locks.
 * Every setter accepts a NULL span and does nothing.
 *
 * Memory bound: replacing a value reuses its storage when the new one fits;
 * otherwise the new value takes fresh arena space, and once a span's arena
 * holds more than SPAN_REPLACE_BUDGET bytes further growing replacements are
 * dropped (counted), so a span cannot grow without bound.
 */
#include "core/span.h"

#include "core/batch_block.h"
#include "core/tracer.h"

#include <string.h>

#define SPAN_REPLACE_BUDGET (1u << 20)
#define LINK_EVENT_INITIAL_CAP 4u

static const char k_empty[] = "";

/* ------------------------------------------------------------- helpers */

static size_t arena_bytes(const mst_arena *a) {
    size_t n = a->inline_used;
    for (const mst_arena_chunk *c = a->chunks; c; c = c->next) n += c->cap;
    return n;
}

/* Copies s[0..len) (cut to max) into a fresh arena string. */
static bool str_copy(mst_arena *a, mst_str *dst, const char *s, size_t len, size_t max) {
    size_t n;
    char *p = mst_arena_strndup(a, s, len, max, &n);
    if (!p) return false;
    dst->ptr = p;
    dst->len = (uint32_t)n;
    return true;
}

/* Replaces an arena-owned string: in place when it fits, else fresh space
 * within the replacement budget. */
static bool str_replace(mst_arena *a, mst_str *dst, const char *s, size_t len, size_t max) {
    len = mst_utf8_cut(s, len, max);
    if (dst->ptr && dst->ptr != k_empty && len <= dst->len) {
        char *p = (char *)dst->ptr;
        memmove(p, s, len);
        p[len] = '\0';
        dst->len = (uint32_t)len;
        return true;
    }
    if (arena_bytes(a) > SPAN_REPLACE_BUDGET) return false;
    return str_copy(a, dst, s, len, max);
}

/* Copies a string list (count >= 1 items, each cut to MST_MAX_VALUE_LEN)
 * into the arena as one block: the item array, then every item's bytes and
 * NUL back to back. Why one block: a step's lists hold hundreds of request
 * ids, and one arena allocation per item was most of their cost. Lengths
 * are measured first (stored in the items, whose pointers still name the
 * source), then the bytes are copied in one pass. */
static mst_str *list_copy(mst_arena *a, const char *const *src, const size_t *lens, size_t count) {
    if (lens) { /* the usual case (a batch's ids): sized in one tight pass, copied in one */
        size_t total = 0, longest = 0;
        bool all_present = true;
        for (size_t i = 0; i < count; i++) {
            total += lens[i];
            longest = lens[i] > longest ? lens[i] : longest;
            all_present &= src[i] != NULL;
        }
        if (all_present && longest <= MST_MAX_VALUE_LEN) { /* nothing to cut */
            mst_str *items = mst_arena_alloc(a, sizeof(mst_str) * count + total + count);
            if (!items) return NULL;
            char *p = (char *)(items + count);
            for (size_t i = 0; i < count; i++) {
                size_t n = lens[i];
                memcpy(p, src[i], n);
                p[n] = '\0';
                items[i].ptr = p;
                items[i].len = (uint32_t)n;
                p += n + 1;
            }
            return items;
        }
    }
    mst_str *items = mst_arena_alloc(a, sizeof(mst_str) * count);
    if (!items) return NULL;
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        const char *s = src[i] ? src[i] : k_empty;
        size_t n = mst_utf8_cut(s, lens && src[i] ? lens[i] : strlen(s), MST_MAX_VALUE_LEN);
        items[i].ptr = s;
        items[i].len = (uint32_t)n;
        total += n + 1;
    }
    char *p = mst_arena_alloc(a, total);
    if (!p) return NULL;
    for (size_t i = 0; i < count; i++) {
        size_t n = items[i].len;
        memcpy(p, items[i].ptr, n);
        p[n] = '\0';
        items[i].ptr = p;
        p += n + 1;
    }
    return items;
}

/* ---------------------------------------------------------- attributes */

typedef struct attr_table {
    mst_attr *arr;
    uint32_t *n;
    uint32_t cap;
    uint32_t *dropped;
    uint64_t *key_lens; /* one bit per key held, or NULL: see key_bit */
} attr_table;

/* A span sets its ~20 attributes one by one, each a search of those already
 * set (a replaced key keeps its slot). Most keys are new, so one bit per key
 * held — of its length and its middle and last bytes, which tell apart keys
 * of one length such as `step.tokens` and `request.ids` — lets the search be
 * skipped. klen >= 1 (empty keys are refused before). */
static uint64_t key_bit(const char *key, size_t klen) {
    size_t h = klen ^ ((size_t)(unsigned char)key[klen - 1] * 5u) ^
               ((size_t)(unsigned char)key[klen / 2] * 11u);
    return (uint64_t)1 << (h & 63u);
}

static mst_attr *attr_find(const attr_table *t, const char *key, size_t klen) {
    for (uint32_t i = 0; i < *t->n; i++) {
        mst_attr *a = &t->arr[i];
        if (a->key.len == klen && memcmp(a->key.ptr, key, klen) == 0) return a;
    }
    return NULL;
}

/* The length every setter stores a key with (klen bytes given): cut to
 * MST_MAX_KEY_LEN on a UTF-8 boundary; 0 when it cannot be stored (NULL,
 * empty, or nothing left after the cut), and the attribute is ignored. */
static inline size_t key_len_checked(const char *key, size_t klen) {
    if (!key || klen == 0) return 0;
    return klen <= MST_MAX_KEY_LEN ? klen : mst_utf8_cut(key, klen, MST_MAX_KEY_LEN);
}

/* The slot for `key` (klen >= 1, its key_bit `bit`): the one holding it
 * (*is_new false), else the next free one (*is_new true; not yet counted:
 * the caller fills its key and calls slot_commit), or NULL when the table is
 * full (counted as dropped). */
static inline mst_attr *attr_slot(const attr_table *t, const char *key, size_t klen, uint64_t bit, bool *is_new) {
    if (!t->key_lens || (*t->key_lens & bit)) {
        mst_attr *held = attr_find(t, key, klen);
        if (held) {
            *is_new = false;
            return held;
        }
    }
    *is_new = true;
    if (*t->n >= t->cap) {
        (*t->dropped)++;
        return NULL;
    }
    return &t->arr[*t->n];
}

/* The key of a new slot: by pointer (a literal that outlives the span,
 * mstrace.h MST_LIT) or copied into the arena. False: out of memory. */
static inline bool slot_key(mst_arena *ar, mst_attr *a, const char *key, size_t klen, bool by_pointer) {
    if (!by_pointer) return str_copy(ar, &a->key, key, klen, MST_MAX_KEY_LEN);
    a->key.ptr = key;
    a->key.len = (uint32_t)klen;
    return true;
}

static inline void slot_commit(const attr_table *t, uint64_t bit) {
    (*t->n)++;
    if (t->key_lens) *t->key_lens |= bit;
}

/* Stores one attribute value into slot `a` (new or replaced). Strings of a
 * replaced string value reuse its storage. `lens`: the lengths of a string
 * list's items, or NULL (measured). Returns false on failure. */
static bool attr_store(mst_arena *ar, mst_attr *a, bool is_new, const mst_attr_in *in, size_t slen,
                       const size_t *lens) {
    switch (in->type) {
    case MST_ATTR_STRING: {
        const char *s = in->v.s ? in->v.s : k_empty;
        if (!is_new && a->type == MST_ATTR_STRING) return str_replace(ar, &a->v.s, s, slen, MST_MAX_VALUE_LEN);
        if (!is_new && arena_bytes(ar) > SPAN_REPLACE_BUDGET) return false;
        if (!str_copy(ar, &a->v.s, s, slen, MST_MAX_VALUE_LEN)) return false;
        break;
    }
    case MST_ATTR_INT: a->v.i = in->v.i; break;
    case MST_ATTR_DOUBLE: a->v.d = in->v.d; break;
    case MST_ATTR_BOOL: a->v.b = in->v.b; break;
    case MST_ATTR_STRING_LIST: {
        size_t count = in->v.list.count;
        if (!in->v.list.items) count = 0;
        if (count > MST_MAX_LIST_ITEMS) count = MST_MAX_LIST_ITEMS;
        if (!is_new && arena_bytes(ar) > SPAN_REPLACE_BUDGET) return false;
        mst_str *items = NULL;
        if (count && !(items = list_copy(ar, in->v.list.items, lens, count))) return false;
        a->v.list.items = items;
        a->v.list.count = (uint32_t)count;
        break;
    }
    default: return false;
    }
    a->type = in->type;
    return true;
}

/* Sets (adds or replaces) one attribute in a table under `key` (klen bytes,
 * 1..MST_MAX_KEY_LEN). A new key is copied into the arena, or stored by
 * pointer when `key_lit` (a literal that outlives the span: mstrace.h
 * MST_LIT). `slen` is the string length for MST_ATTR_STRING.
 * Over-limit or failed: counted as dropped. */
static void attr_set_key(mst_arena *ar, const attr_table *t, const char *key, size_t klen, bool key_lit,
                         const mst_attr_in *in, size_t slen, const size_t *lens) {
    uint64_t bit = key_bit(key, klen);
    bool is_new;
    mst_attr *a = attr_slot(t, key, klen, bit, &is_new);
    if (!a) return;
    if (is_new && !slot_key(ar, a, key, klen, key_lit)) {
        (*t->dropped)++;
        return;
    }
    if (!attr_store(ar, a, is_new, in, slen, lens)) {
        (*t->dropped)++;
        return;
    }
    if (is_new) slot_commit(t, bit);
}

/* attr_set_key for a borrowed key of any lifetime (copied). */
static void attr_set(mst_arena *ar, const attr_table *t, const mst_attr_in *in, size_t slen,
                     const size_t *lens) {
    size_t klen = key_len_checked(in->key, in->key ? strlen(in->key) : 0);
    if (!klen) return;
    attr_set_key(ar, t, in->key, klen, false, in, slen, lens);
}

static size_t in_strlen(const mst_attr_in *in) {
    return (in->type == MST_ATTR_STRING && in->v.s) ? strlen(in->v.s) : 0;
}

/* One attribute that is not a list, in one arena block (the attribute, then
 * its key unless `prev_key` has the same bytes and is shared, then a string
 * value). Why: a step span links up to 128 requests, each link with one
 * `request.id` attribute; three allocations and a copy of the same key per
 * link were most of a link's cost. Keys and values of a link are never
 * replaced, so sharing the previous link's key copy is safe. False (nothing
 * allocated) when this is not the simple case (an empty key, a list, an
 * unknown type): the caller takes the general path. */
static bool attr_copy_one(mst_arena *ar, const mst_attr_in *in, const mst_str *prev_key,
                          mst_attr **out) {
    if (!in->key || !in->key[0]) return false;
    if (in->type != MST_ATTR_STRING && in->type != MST_ATTR_INT && in->type != MST_ATTR_DOUBLE &&
        in->type != MST_ATTR_BOOL)
        return false;
    /* the previous link's key, byte for byte and no longer: shared, no strlen */
    bool share = prev_key && strncmp(prev_key->ptr, in->key, prev_key->len) == 0 &&
                 in->key[prev_key->len] == '\0';
    size_t klen = share ? prev_key->len : mst_utf8_cut(in->key, strlen(in->key), MST_MAX_KEY_LEN);
    const char *v = NULL;
    size_t vlen = 0;
    if (in->type == MST_ATTR_STRING) {
        v = in->v.s ? in->v.s : k_empty;
        vlen = mst_utf8_cut(v, strlen(v), MST_MAX_VALUE_LEN);
    }
    size_t bytes = sizeof(mst_attr) + (share ? 0 : klen + 1) + (v ? vlen + 1 : 0);
    mst_attr *a = mst_arena_alloc(ar, bytes);
    if (!a) return false;
    char *p = (char *)(a + 1);
    if (share) {
        a->key = *prev_key;
    } else {
        memcpy(p, in->key, klen);
        p[klen] = '\0';
        a->key.ptr = p;
        a->key.len = (uint32_t)klen;
        p += klen + 1;
    }
    a->type = in->type;
    switch (in->type) {
    case MST_ATTR_STRING:
        memcpy(p, v, vlen);
        p[vlen] = '\0';
        a->v.s.ptr = p;
        a->v.s.len = (uint32_t)vlen;
        break;
    case MST_ATTR_INT: a->v.i = in->v.i; break;
    case MST_ATTR_DOUBLE: a->v.d = in->v.d; break;
    default: a->v.b = in->v.b; break; /* MST_ATTR_BOOL */
    }
    *out = a;
    return true;
}

/* Copies borrowed attributes into a fresh arena table of at most 32.
 * `prev` (or NULL): the attributes of the previous link/event, whose first
 * key a lone attribute may share. */
static mst_attr *attrs_copy(mst_arena *ar, const mst_attr_in *attrs, size_t n, uint32_t *n_out,
                            uint32_t *dropped, const mst_attr *prev, uint32_t n_prev) {
    *n_out = 0;
    *dropped = 0;
    if (!attrs || n == 0) return NULL;
    mst_attr *one;
    if (n == 1 && attr_copy_one(ar, attrs, n_prev ? &prev[0].key : NULL, &one)) {
        *n_out = 1;
        return one;
    }
    uint32_t cap = n > MST_MAX_ATTRIBUTES ? MST_MAX_ATTRIBUTES : (uint32_t)n;
    mst_attr *arr = mst_arena_alloc(ar, sizeof(mst_attr) * cap);
    if (!arr) {
        *dropped = (uint32_t)n;
        return NULL;
    }
    attr_table t = {arr, n_out, cap, dropped, NULL};
    for (size_t i = 0; i < n; i++) attr_set(ar, &t, &attrs[i], in_strlen(&attrs[i]), NULL);
    return arr;
}

/* ---------------------------------------------------------------- start */

static mst_span *span_begin(mst_tracer *tracer, const mst_scope *scope, const char *name,
                            mst_span_kind kind, const mst_span_context *parent,
                            const mst_trace_id *trace_id, const mst_span_id *span_id,
                            uint64_t start_ns) {
    if (!tracer || mst_tracer_is_closed(tracer)) return NULL;
    bool has_parent = parent && mst_ctx_is_valid(parent);
    /* The span's trace id: given, inherited, or (for a root) drawn here only
     * when the ratio rule must read it before deciding. */
    mst_trace_id tid = {{0}};
    bool have_tid = true;
    if (trace_id) tid = *trace_id;
    else if (has_parent) tid = parent->trace_id;
    else if (tracer->sampler.root == MST_ROOT_RATIO) tid = mst_trace_id_random();
    else have_tid = false;
    /* Decide before any allocation or clock read: a dropped span is NULL. */
    if (!mst_sampler_decide(&tracer->sampler, has_parent, has_parent ? parent->trace_flags : 0, &tid)) {
        mst_tracer_count_unsampled(tracer);
        return NULL;
    }
    if (!mst_tracer_span_enter(tracer)) return NULL;
    mst_span *s = mst_tracer_span_alloc(tracer);
    if (!s) {
        mst_tracer_span_enter_failed(tracer);
        return NULL;
    }
    /* s->arena comes empty from the pool (mst_tracer_span_alloc), maybe
     * with a chunk kept for reuse: not re-initialised here. */
    s->tracer = tracer;
    s->trace_id = have_tid ? tid : mst_trace_id_random();
    s->span_id = span_id ? *span_id : mst_span_id_random();
    s->has_parent = has_parent;
    if (has_parent) {
        s->parent_span_id = parent->span_id;
        s->parent_is_remote = parent->is_remote;
        /* Other W3C flag bits pass through; the sampled bit says what we
         * decided (always_on/traceidratio may keep an unsampled parent's
         * child). */
        s->trace_flags = parent->trace_flags | MST_TRACE_FLAG_SAMPLED;
    } else {
        memset(&s->parent_span_id, 0, sizeof s->parent_span_id);
        s->parent_is_remote = false;
        s->trace_flags = MST_TRACE_FLAG_SAMPLED;
    }
    s->trace_state.ptr = k_empty;
    s->trace_state.len = 0;
    if (has_parent && parent->trace_state_len)
        str_copy(&s->arena, &s->trace_state, parent->trace_state,
                 strnlen(parent->trace_state, parent->trace_state_len), MST_TRACESTATE_MAX);
    s->scope = scope;
    s->name.ptr = k_empty;
    s->name.len = 0;
    if (name) str_copy(&s->arena, &s->name, name, strlen(name), MST_MAX_VALUE_LEN);
    s->kind = kind;
    s->start_ns = start_ns ? start_ns : mst_clock_now_ns();
    s->end_ns = 0;
    s->status_code = MST_STATUS_UNSET;
    s->status_message.ptr = k_empty;
    s->status_message.len = 0;
    s->n_attrs = 0;
    s->dropped_attrs = 0;
    s->attr_key_lens = 0;
    s->links = NULL;
    s->n_links = s->link_cap = s->dropped_links = 0;
    s->link_block = NULL;
    s->n_link_block = 0;
    s->link_block_list = NULL;
    s->block = NULL;
    s->events = NULL;
    s->n_events = s->event_cap = s->dropped_events = 0;
    mst_tracer_span_started(tracer);
    return s;
}

mst_span *mst_span_start(mst_tracer *tracer, const mst_scope *scope, const char *name,
                         mst_span_kind kind, const mst_span_context *parent, uint64_t start_ns) {
    return span_begin(tracer, scope, name, kind, parent, NULL, NULL, start_ns);
}

mst_span *mst_span_start_with_ids(mst_tracer *tracer, const mst_scope *scope, const char *name,
                                  mst_span_kind kind, const mst_span_context *parent,
                                  const mst_trace_id *trace_id, const mst_span_id *span_id,
                                  uint64_t start_ns) {
    if (!mst_trace_id_is_valid(trace_id) || !mst_span_id_is_valid(span_id)) return NULL;
    return span_begin(tracer, scope, name, kind, parent, trace_id, span_id, start_ns);
}

/* -------------------------------------------------------------- setters */

static void span_set(mst_span *s, const mst_attr_in *in, size_t slen, const size_t *lens) {
    attr_table t = {s->attrs, &s->n_attrs, MST_MAX_ATTRIBUTES, &s->dropped_attrs, &s->attr_key_lens};
    attr_set(&s->arena, &t, in, slen, lens);
}

void mst_span_set_strn(mst_span *span, const char *key, const char *value, size_t len) {
    if (!span || !value) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_STRING, .v.s = value};
    span_set(span, &in, len, NULL);
}

void mst_span_set_str(mst_span *span, const char *key, const char *value) {
    if (!span || !value) return;
    mst_span_set_strn(span, key, value, strlen(value));
}

void mst_span_set_int(mst_span *span, const char *key, int64_t value) {
    if (!span) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_INT, .v.i = value};
    span_set(span, &in, 0, NULL);
}

void mst_span_set_double(mst_span *span, const char *key, double value) {
    if (!span) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_DOUBLE, .v.d = value};
    span_set(span, &in, 0, NULL);
}

void mst_span_set_bool(mst_span *span, const char *key, bool value) {
    if (!span) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_BOOL, .v.b = value};
    span_set(span, &in, 0, NULL);
}

void mst_span_set_str_list(mst_span *span, const char *key, const char *const *items, size_t count) {
    if (!span) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_STRING_LIST};
    in.v.list.items = items;
    in.v.list.count = count;
    span_set(span, &in, 0, NULL);
}

void mst_span_set_str_list_n(mst_span *span, const char *key, const char *const *items, const size_t *lens,
                             size_t count) {
    if (!span) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_STRING_LIST};
    in.v.list.items = items;
    in.v.list.count = count;
    span_set(span, &in, 0, lens);
}

void mst_span_set_attr(mst_span *span, const mst_attr_in *attr) {
    if (!span || !attr) return;
    span_set(span, attr, in_strlen(attr), NULL);
}

/* The literal-key setters (mstrace.h): the key is neither measured nor copied. */
static void span_set_lit(mst_span *s, const char *key, size_t klen, const mst_attr_in *in, size_t slen,
                         const size_t *lens) {
    bool by_pointer = klen <= MST_MAX_KEY_LEN; /* a cut key is copied, with its NUL */
    if (!(klen = key_len_checked(key, klen))) return;
    attr_table t = {s->attrs, &s->n_attrs, MST_MAX_ATTRIBUTES, &s->dropped_attrs, &s->attr_key_lens};
    attr_set_key(&s->arena, &t, key, klen, by_pointer, in, slen, lens);
}

/* The slot of a value needing no arena space under a literal key: the one
 * holding the key, else the next free one, taken (nothing can fail after
 * this). NULL: no span, a bad key, or the table is full (counted). Why not
 * span_set_lit: most of a step's attributes are numbers, and this path skips
 * the value switch and the store's failure handling. */
static inline mst_attr *number_slot_lit(mst_span *s, const char *key, size_t klen) {
    if (!s) return NULL;
    bool by_pointer = klen <= MST_MAX_KEY_LEN; /* a cut key is copied, with its NUL */
    if (!(klen = key_len_checked(key, klen))) return NULL;
    attr_table t = {s->attrs, &s->n_attrs, MST_MAX_ATTRIBUTES, &s->dropped_attrs, &s->attr_key_lens};
    uint64_t bit = key_bit(key, klen);
    bool is_new;
    mst_attr *a = attr_slot(&t, key, klen, bit, &is_new);
    if (a && is_new) {
        if (!slot_key(&s->arena, a, key, klen, by_pointer)) {
            s->dropped_attrs++;
            return NULL;
        }
        slot_commit(&t, bit);
    }
    return a;
}

void mst_span_set_int_lit(mst_span *span, const char *key, size_t key_len, int64_t value) {
    mst_attr *a = number_slot_lit(span, key, key_len);
    if (!a) return;
    a->type = MST_ATTR_INT;
    a->v.i = value;
}

void mst_span_set_double_lit(mst_span *span, const char *key, size_t key_len, double value) {
    mst_attr *a = number_slot_lit(span, key, key_len);
    if (!a) return;
    a->type = MST_ATTR_DOUBLE;
    a->v.d = value;
}

void mst_span_set_strn_lit(mst_span *span, const char *key, size_t key_len, const char *value, size_t len) {
    if (!span || !value) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_STRING, .v.s = value};
    span_set_lit(span, key, key_len, &in, len, NULL);
}

void mst_span_set_str_list_lit(mst_span *span, const char *key, size_t key_len, const char *const *items,
                               const size_t *lens, size_t count) {
    if (!span) return;
    mst_attr_in in = {.key = key, .type = MST_ATTR_STRING_LIST};
    in.v.list.items = items;
    in.v.list.count = count;
    span_set_lit(span, key, key_len, &in, 0, lens);
}

/* Takes the span's one batch-block reference on `block`: true when the span
 * holds it now (taken here or before), false when it holds another one
 * (then the caller copies what it needs). */
static bool span_hold_block(mst_span *span, mst_batch_block *block) {
    if (span->block == block) return true;
    if (span->block) return false;
    mst_batch_block_hold(block);
    span->block = block;
    return true;
}

/* Copies a block's items (already cut) into the arena as one block, as
 * list_copy does. */
static mst_str *list_copy_strs(mst_arena *a, const mst_str *src, size_t count) {
    size_t total = 0;
    for (size_t i = 0; i < count; i++) total += src[i].len + 1u;
    mst_str *items = mst_arena_alloc(a, sizeof(mst_str) * count + total);
    if (!items) return NULL;
    char *p = (char *)(items + count);
    for (size_t i = 0; i < count; i++) {
        memcpy(p, src[i].ptr, src[i].len + 1u);
        items[i].ptr = p;
        items[i].len = src[i].len;
        p += src[i].len + 1u;
    }
    return items;
}

void mst_span_set_str_list_block_lit(mst_span *span, const char *key, size_t key_len, mst_batch_block *block) {
    if (!span || !block) return;
    bool held = span_hold_block(span, block);
    if (!held && arena_bytes(&span->arena) > SPAN_REPLACE_BUDGET) {
        span->dropped_attrs++;
        return;
    }
    mst_str *items = block->n_items ? block->items : NULL;
    if (!held && items && !(items = list_copy_strs(&span->arena, items, block->n_items))) {
        span->dropped_attrs++;
        return;
    }
    mst_attr *a = number_slot_lit(span, key, key_len);
    if (!a) return;
    a->type = MST_ATTR_STRING_LIST;
    a->v.list.items = items;
    a->v.list.count = items ? block->n_items : 0;
}

/* Makes room for one more element of a growable arena array (links or
 * events): doubles the capacity up to `limit`. */
static void *grow(mst_arena *a, void *arr, uint32_t n, uint32_t *cap, size_t elem, uint32_t limit) {
    if (n < *cap) return arr;
    uint32_t nc = *cap ? *cap * 2 : LINK_EVENT_INITIAL_CAP;
    if (nc > limit) nc = limit;
    void *p = mst_arena_alloc(a, elem * nc);
    if (!p) return NULL;
    if (n) memcpy(p, arr, elem * n);
    *cap = nc;
    return p;
}

void mst_span_add_link(mst_span *span, const mst_span_context *linked, const mst_attr_in *attrs,
                       size_t n_attrs) {
    if (!span || !mst_ctx_is_valid(linked)) return;
    if (span->n_links + span->n_link_block >= MST_MAX_LINKS) { /* a pending block counts */
        span->dropped_links++;
        return;
    }
    mst_link *links = grow(&span->arena, span->links, span->n_links, &span->link_cap, sizeof(mst_link),
                           MST_MAX_LINKS);
    if (!links) {
        span->dropped_links++;
        return;
    }
    span->links = links;
    mst_link *l = &links[span->n_links];
    l->trace_id = linked->trace_id;
    l->span_id = linked->span_id;
    l->trace_flags = linked->trace_flags;
    l->is_remote = linked->is_remote;
    l->trace_state.ptr = k_empty;
    l->trace_state.len = 0;
    if (linked->trace_state_len)
        str_copy(&span->arena, &l->trace_state, linked->trace_state,
                 strnlen(linked->trace_state, linked->trace_state_len), MST_TRACESTATE_MAX);
    const mst_link *prev = span->n_links ? &links[span->n_links - 1] : NULL;
    l->attrs = attrs_copy(&span->arena, attrs, n_attrs, &l->n_attrs, &l->dropped_attrs,
                          prev ? prev->attrs : NULL, prev ? prev->n_attrs : 0);
    span->n_links++;
}

/* The attribute `key` of the span, or NULL. */
static const mst_attr *attr_named(const mst_span *span, const char *key) {
    size_t n = strlen(key);
    for (uint32_t i = 0; i < span->n_attrs; i++)
        if (span->attrs[i].key.len == n && memcmp(span->attrs[i].key.ptr, key, n) == 0) return &span->attrs[i];
    return NULL;
}

/* mst_span_add_link_block: the refs copied into the arena, or (`shared`)
 * read in place from the batch block the span holds. */
static void link_block_set(mst_span *span, const mst_link_ref *refs, size_t n, const char *key,
                           const char *list_key, bool shared) {
    if (!span || !refs || n == 0) return;
    size_t room = span->n_links < MST_MAX_LINKS ? MST_MAX_LINKS - span->n_links : 0;
    if (span->link_block || !key || !key[0]) room = 0;
    size_t take = n < room ? n : room;
    mst_link_ref *copy = take && !shared ? mst_arena_alloc(&span->arena, sizeof *copy * take) : NULL;
    if (!take || (!shared && !copy) ||
        !str_copy(&span->arena, &span->link_block_key, key, strlen(key), MST_MAX_KEY_LEN)) {
        span->dropped_links += (uint32_t)n;
        return;
    }
    if (copy) memcpy(copy, refs, sizeof *copy * take);
    span->link_block = copy ? copy : refs;
    span->n_link_block = (uint32_t)take;
    span->dropped_links += (uint32_t)(n - take);
    span->link_block_list = list_key ? attr_named(span, list_key) : NULL;
}

void mst_span_add_link_block(mst_span *span, const mst_link_ref *refs, size_t n, const char *key,
                             const char *list_key) {
    link_block_set(span, refs, n, key, list_key, false);
}

void mst_span_add_link_block_shared(mst_span *span, mst_batch_block *block, const char *key,
                                    const char *list_key) {
    if (!span || !block || !block->n_links) return;
    /* a span already holding another block copies this one's links */
    bool shared = !span->link_block && key && key[0] && span_hold_block(span, block);
    link_block_set(span, block->links, block->n_links, key, list_key, shared);
}

void mst_span_add_event(mst_span *span, const char *name, uint64_t time_ns, const mst_attr_in *attrs,
                        size_t n_attrs) {
    if (!span) return;
    if (span->n_events >= MST_MAX_EVENTS) {
        span->dropped_events++;
        return;
    }
    mst_event *events = grow(&span->arena, span->events, span->n_events, &span->event_cap,
                             sizeof(mst_event), MST_MAX_EVENTS);
    if (!events) {
        span->dropped_events++;
        return;
    }
    span->events = events;
    mst_event *e = &events[span->n_events];
    e->name.ptr = k_empty;
    e->name.len = 0;
    if (name) str_copy(&span->arena, &e->name, name, strlen(name), MST_MAX_VALUE_LEN);
    e->time_ns = time_ns ? time_ns : mst_clock_now_ns();
    const mst_event *prev = span->n_events ? &events[span->n_events - 1] : NULL;
    e->attrs = attrs_copy(&span->arena, attrs, n_attrs, &e->n_attrs, &e->dropped_attrs,
                          prev ? prev->attrs : NULL, prev ? prev->n_attrs : 0);
    span->n_events++;
}

/* OTel status rules: UNSET is ignored, OK is final, a message is kept only
 * with ERROR. */
void mst_span_set_status(mst_span *span, mst_status_code code, const char *message) {
    if (!span || code == MST_STATUS_UNSET || span->status_code == MST_STATUS_OK) return;
    if (code != MST_STATUS_OK && code != MST_STATUS_ERROR) return;
    span->status_code = code;
    if (code == MST_STATUS_OK || !message) {
        span->status_message.ptr = k_empty;
        span->status_message.len = 0;
        return;
    }
    if (!str_replace(&span->arena, &span->status_message, message, strlen(message),
                     MST_MAX_STATUS_MESSAGE_LEN)) {
        span->status_message.ptr = k_empty;
        span->status_message.len = 0;
    }
}

void mst_span_set_name(mst_span *span, const char *name) {
    if (!span || !name) return;
    str_replace(&span->arena, &span->name, name, strlen(name), MST_MAX_VALUE_LEN);
}

bool mst_span_get_context(const mst_span *span, mst_span_context *out) {
    if (!span || !out) return false;
    out->trace_id = span->trace_id;
    out->span_id = span->span_id;
    out->trace_flags = span->trace_flags;
    out->is_remote = false;
    size_t n = span->trace_state.len > MST_TRACESTATE_MAX ? MST_TRACESTATE_MAX : span->trace_state.len;
    memcpy(out->trace_state, span->trace_state.ptr, n);
    out->trace_state[n] = '\0';
    out->trace_state_len = (uint16_t)n;
    return true;
}

/* ------------------------------------------------------------------ end */

void mst_span_end(mst_span *span, uint64_t end_ns) {
    if (!span) return;
    uint64_t end = end_ns ? end_ns : mst_clock_now_ns();
    span->end_ns = end < span->start_ns ? span->start_ns : end;
    mst_tracer_submit(span->tracer, span);
}

void mst_span_discard(mst_span *span) {
    if (!span) return;
    mst_tracer_discard(span->tracer, span);
}
