/*
 * flight_ring.c — the flight recorder's ring of compact span and counter
 * records and its intern table (flight_ring.h).
 *
 * Layout: one byte buffer of `cap` bytes; records are contiguous and
 * 8-aligned. Live data is [head, tail) or, once the writer has wrapped,
 * [head, wrap_end) followed by [0, tail). A record that does not fit before
 * the end starts again at 0; the records in its way are evicted oldest
 * first. The buffer is reserved at start but pages are touched only as
 * records are written, so resident memory grows up to `cap` and stays.
 *
 * Span record: mst_flight_rec (the fields a dump selects on), then
 * span_body, then per attribute {key id, value length}, the value texts,
 * and the links (binary ids). Interned strings are numbered from 1.
 */
#include "forward/flight_ring.h"

#include <stdlib.h>
#include <string.h>

#include "forward/hash_mix.h"

#define ALIGN8(n) (((n) + 7u) & ~(size_t)7u)

typedef struct span_body {
    uint8_t span_id[8], parent_id[8];
    int64_t kind, status, pid, tid;
    uint32_t name_iid, cat_iid, res_iid; /* res_iid 0: no resource attributes */
    uint32_t n_attrs;
    uint8_t has_parent, has_pid, has_tid, pad;
    uint16_t request_links; /* mst_pf_span.request_links (≤ n_links ≤ UINT16_MAX) */
    uint8_t pad2[2];
} span_body;

typedef struct counter_body {
    const char *name;   /* static */
    int64_t pid, i;
    double d;
    uint8_t is_double, pad[7];
} counter_body;

typedef struct attr_ref {
    uint32_t key_iid, vlen;
} attr_ref;

typedef struct intern_entry {
    uint32_t off, len;
} intern_entry;

/* The keys of the last span of one name, by position: spans of a name
 * repeat their keys in the same order, so a key is usually found by one
 * compare with what this position held last time, without hashing. */
#define SHAPES 64
#define SHAPE_KEYS 32
typedef struct shape {
    uint32_t name_iid;
    uint32_t n;
    uint32_t key_iid[SHAPE_KEYS];
} shape;

/* The last resource blob of a process, compared in place. */
#define RES_MEMO 16
typedef struct res_memo {
    int64_t pid;
    uint32_t iid;
} res_memo;

struct mst_flight_ring {
    uint8_t *buf;
    uint64_t cap;
    uint64_t head, tail, wrap_end;
    bool wrapped;
    uint64_t max_age_ms;
    uint64_t next_seq;
    mst_flight_ring_stats st;
    /* Intern table: entries numbered from 1; slots hold entry numbers. */
    char *blob;
    size_t blob_len, blob_cap;
    intern_entry *entries;
    size_t n_entries, entries_cap;
    uint32_t *slots;
    uint64_t *slot_hash;
    size_t slot_mask;
    shape shapes[SHAPES];
    res_memo res[RES_MEMO];
    /* Scratch for a process's resource blob (grows to the largest seen). */
    uint8_t *scratch;
    size_t scratch_cap;
};

/* 8 bytes a step, mixed with the wyhash step (hash_mix.h). */
static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (; n >= 8; n -= 8, s += 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mst_mum(h ^ w, 0xa0761d6478bd642full);
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return mst_mum(h ^ w, 0xe7037ed1a0b428dbull);
}

static bool slots_grow(mst_flight_ring *r) {
    size_t n = r->slot_mask ? (r->slot_mask + 1) * 2 : 4096;
    uint32_t *slots = calloc(n, sizeof *slots);
    uint64_t *hashes = calloc(n, sizeof *hashes);
    if (!slots || !hashes) {
        free(slots);
        free(hashes);
        return false;
    }
    for (size_t i = 0; r->slots && i <= r->slot_mask; i++) {
        if (!r->slots[i]) continue;
        size_t j = r->slot_hash[i] & (n - 1);
        while (slots[j]) j = (j + 1) & (n - 1);
        slots[j] = r->slots[i];
        hashes[j] = r->slot_hash[i];
    }
    free(r->slots);
    free(r->slot_hash);
    r->slots = slots;
    r->slot_hash = hashes;
    r->slot_mask = n - 1;
    return true;
}

/* The number of the interned copy of [p, p + n); 0 when the table is full
 * or out of memory. */
static uint32_t intern(mst_flight_ring *r, const void *p, size_t n) {
    uint64_t h = hash_bytes(p, n);
    size_t j = h & r->slot_mask;
    for (; r->slots[j]; j = (j + 1) & r->slot_mask) {
        const intern_entry *e = &r->entries[r->slots[j] - 1];
        if (r->slot_hash[j] == h && e->len == n && memcmp(r->blob + e->off, p, n) == 0)
            return r->slots[j];
    }
    if (r->n_entries >= MST_FLIGHT_INTERN_MAX_ENTRIES || r->blob_len + n > MST_FLIGHT_INTERN_MAX_BYTES)
        return 0;
    if (r->blob_len + n > r->blob_cap) {
        size_t c = r->blob_cap * 2;
        while (c < r->blob_len + n) c *= 2;
        char *b = realloc(r->blob, c);
        if (!b) return 0;
        r->blob = b;
        r->blob_cap = c;
    }
    if (r->n_entries == r->entries_cap) {
        intern_entry *e = realloc(r->entries, r->entries_cap * 2 * sizeof *e);
        if (!e) return 0;
        r->entries = e;
        r->entries_cap *= 2;
    }
    memcpy(r->blob + r->blob_len, p, n);
    r->entries[r->n_entries] = (intern_entry){(uint32_t)r->blob_len, (uint32_t)n};
    r->blob_len += n;
    uint32_t id = (uint32_t)++r->n_entries;
    r->slots[j] = id;
    r->slot_hash[j] = h;
    if (r->n_entries * 2 > r->slot_mask + 1 && !slots_grow(r)) {
        /* The table still works (more probing); growth is retried next time. */
    }
    return id;
}

static const char *interned(const mst_flight_ring *r, uint32_t id, uint32_t *len) {
    const intern_entry *e = &r->entries[id - 1];
    *len = e->len;
    return r->blob + e->off;
}

mst_flight_ring *mst_flight_ring_new(uint64_t bytes, uint64_t max_age_ms) {
    if (bytes < MST_FLIGHT_RING_MIN_BYTES) bytes = MST_FLIGHT_RING_MIN_BYTES;
    bytes &= ~(uint64_t)7;
    mst_flight_ring *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->cap = bytes;
    r->max_age_ms = max_age_ms;
    r->next_seq = 1;
    r->blob_cap = 64 * 1024;
    r->entries_cap = 1024;
    /* calloc of a large block maps fresh zero pages: nothing is resident
     * until written. */
    r->buf = calloc(1, (size_t)bytes);
    r->blob = malloc(r->blob_cap);
    r->entries = malloc(r->entries_cap * sizeof *r->entries);
    if (!r->buf || !r->blob || !r->entries || !slots_grow(r)) {
        mst_flight_ring_free(r);
        return NULL;
    }
    r->st.bytes_cap = bytes;
    return r;
}

void mst_flight_ring_free(mst_flight_ring *r) {
    if (!r) return;
    free(r->buf);
    free(r->blob);
    free(r->entries);
    free(r->slots);
    free(r->slot_hash);
    free(r->scratch);
    free(r);
}

static mst_flight_rec *rec_at(const mst_flight_ring *r, uint64_t off) {
    return (mst_flight_rec *)(void *)(r->buf + off);
}

static uint64_t live_count(const mst_flight_ring *r) {
    return r->st.spans_held + r->st.counters_held;
}

static void evict_oldest(mst_flight_ring *r) {
    mst_flight_rec *rec = rec_at(r, r->head);
    if (rec->type == MST_FLIGHT_REC_SPAN) {
        r->st.spans_held--;
        r->st.spans_evicted++;
    } else {
        r->st.counters_held--;
        r->st.counters_evicted++;
    }
    r->st.bytes_used -= rec->size;
    r->head += rec->size;
    if (r->wrapped && r->head == r->wrap_end) {
        r->head = 0;
        r->wrapped = false;
    }
    if (!live_count(r)) r->head = r->tail = 0, r->wrapped = false;
}

/* Room for n contiguous bytes at the tail (n <= cap / 4), evicting. */
static uint8_t *reserve(mst_flight_ring *r, size_t n) {
    for (;;) {
        if (!live_count(r)) r->head = r->tail = 0, r->wrapped = false;
        if (!r->wrapped) {
            if (r->cap - r->tail >= n) return r->buf + r->tail;
            if (!live_count(r)) return NULL; /* not reached: n <= cap */
            r->wrapped = true;
            r->wrap_end = r->tail;
            r->tail = 0;
            continue;
        }
        if (r->head - r->tail >= n) return r->buf + r->tail;
        evict_oldest(r);
    }
}

static void commit(mst_flight_ring *r, mst_flight_rec *rec) {
    r->tail += rec->size;
    r->st.bytes_used += rec->size;
}

/* Hex digit values plus one (any case); 0 for every other byte. */
static const uint8_t HEXVAL1[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15,
    ['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16};

/* The decoder checked the ids: 2n hex digits (false on anything else). */
static bool hex_to_bin(const char *hex, uint8_t *out, size_t n) {
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned hi = HEXVAL1[(uint8_t)hex[2 * i]] - 1u, lo = HEXVAL1[(uint8_t)hex[2 * i + 1]] - 1u;
        bad |= hi | lo;
        out[i] = (uint8_t)(hi << 4 | (lo & 15));
    }
    return bad < 16;
}

static void bin_to_hex(const uint8_t *in, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = 0;
}

static bool key_is(const mst_str *k, const char *lit) {
    size_t n = strlen(lit);
    return k->len == n && memcmp(k->ptr, lit, n) == 0;
}

/* True when the interned blob `iid` holds exactly these resource pairs. */
static bool resource_is(const mst_flight_ring *r, uint32_t iid, const mst_pf_span *s) {
    uint32_t blen;
    const char *blob = interned(r, iid, &blen);
    size_t o = 0;
    for (size_t i = 0; i < s->n_resource; i++) {
        const mst_pf_kv *kv = &s->resource[i];
        attr_ref a;
        if (o + sizeof a > blen) return false;
        memcpy(&a, blob + o, sizeof a);
        uint32_t klen;
        const char *k = interned(r, a.key_iid, &klen);
        if (klen != kv->key.len || memcmp(k, kv->key.ptr, klen) != 0 || a.vlen != kv->value.len ||
            o + sizeof a + a.vlen > blen || memcmp(blob + o + sizeof a, kv->value.ptr, a.vlen) != 0)
            return false;
        o += sizeof a + a.vlen;
    }
    return o == blen;
}

/* The resource attributes as one interned blob ({key id, len, text}...);
 * a process sends the same ones with every span, so the last blob of its
 * pid is compared first. */
static uint32_t intern_resource(mst_flight_ring *r, const mst_pf_span *s, int64_t pid) {
    res_memo *m = &r->res[(uint64_t)pid % RES_MEMO];
    if (m->iid && m->pid == pid && resource_is(r, m->iid, s)) return m->iid;
    size_t need = 0;
    for (size_t i = 0; i < s->n_resource; i++) need += sizeof(attr_ref) + s->resource[i].value.len;
    if (need > r->scratch_cap) {
        uint8_t *p = realloc(r->scratch, need);
        if (!p) return 0;
        r->scratch = p;
        r->scratch_cap = need;
    }
    size_t off = 0;
    for (size_t i = 0; i < s->n_resource; i++) {
        const mst_pf_kv *kv = &s->resource[i];
        attr_ref a = {intern(r, kv->key.ptr, kv->key.len), (uint32_t)kv->value.len};
        if (!a.key_iid) return 0;
        memcpy(r->scratch + off, &a, sizeof a);
        memcpy(r->scratch + off + sizeof a, kv->value.ptr, kv->value.len);
        off += sizeof a + kv->value.len;
    }
    uint32_t iid = intern(r, r->scratch, off);
    if (iid) *m = (res_memo){pid, iid};
    return iid;
}

/* The key's id through the name's shape (see `shape`). */
static uint32_t key_iid(mst_flight_ring *r, shape *sh, size_t p, const mst_str *k) {
    if (sh && p < sh->n) {
        uint32_t len;
        const char *t = interned(r, sh->key_iid[p], &len);
        if (len == k->len && memcmp(t, k->ptr, len) == 0) return sh->key_iid[p];
    }
    uint32_t id = intern(r, k->ptr, k->len);
    if (sh && p < SHAPE_KEYS && id) {
        sh->key_iid[p] = id;
        if (p >= sh->n) sh->n = (uint32_t)p + 1;
    }
    return id;
}

uint64_t mst_flight_ring_add_span(mst_flight_ring *r, const mst_pf_span *s, int64_t pid,
                                  uint64_t now_ms) {
    r->st.spans_seen++;
    size_t size = sizeof(mst_flight_rec) + sizeof(span_body) + s->n_attrs * sizeof(attr_ref) +
                  s->n_links * 24;
    for (size_t i = 0; i < s->n_attrs; i++) size += s->attrs[i].value.len;
    size = ALIGN8(size);
    span_body b;
    memset(&b, 0, sizeof b);
    b.name_iid = intern(r, s->name.ptr, s->name.len);
    b.cat_iid = intern(r, s->category.ptr, s->category.len);
    b.res_iid = s->n_resource ? intern_resource(r, s, pid) : 0;
    if (size > r->cap / 4 || s->n_links > UINT16_MAX || !b.name_iid || !b.cat_iid ||
        (s->n_resource && !b.res_iid)) {
        r->st.spans_not_held++;
        return 0;
    }
    /* Keys first: a full intern table refuses the span before the ring
     * is touched. */
    attr_ref refs_small[64];
    attr_ref *refs = s->n_attrs <= 64 ? refs_small : malloc(s->n_attrs * sizeof *refs);
    if (!refs) {
        r->st.spans_not_held++;
        return 0;
    }
    shape *sh = b.name_iid ? &r->shapes[b.name_iid % SHAPES] : NULL;
    if (sh && sh->name_iid != b.name_iid) {
        sh->name_iid = b.name_iid;
        sh->n = 0;
    }
    for (size_t i = 0; i < s->n_attrs; i++) {
        refs[i] = (attr_ref){key_iid(r, sh, i, &s->attrs[i].key), (uint32_t)s->attrs[i].value.len};
        if (!refs[i].key_iid) {
            if (refs != refs_small) free(refs);
            r->st.spans_not_held++;
            return 0;
        }
    }
    mst_flight_ring_expire(r, now_ms);
    uint8_t *p = reserve(r, size);
    if (!p) { /* not reached: size <= cap / 4 */
        if (refs != refs_small) free(refs);
        r->st.spans_not_held++;
        return 0;
    }
    mst_flight_rec *rec = (mst_flight_rec *)(void *)p;
    memset(rec, 0, sizeof *rec);
    rec->size = (uint32_t)size;
    rec->type = MST_FLIGHT_REC_SPAN;
    rec->status = (uint8_t)(s->status >= 0 && s->status < 256 ? s->status : 255);
    rec->n_links = (uint16_t)s->n_links;
    rec->seq = r->next_seq++;
    rec->arrive_ms = now_ms;
    rec->start_ns = s->start_ns;
    rec->end_ns = s->end_ns;
    hex_to_bin(s->trace_id, rec->trace_id, 16);
    hex_to_bin(s->span_id, b.span_id, 8);
    b.has_parent = s->parent_span_id[0] && hex_to_bin(s->parent_span_id, b.parent_id, 8);
    b.kind = s->kind;
    b.status = s->status;
    b.pid = s->pid;
    b.tid = s->tid;
    b.has_pid = s->has_pid;
    b.has_tid = s->has_tid;
    b.request_links = (uint16_t)s->request_links;
    b.n_attrs = (uint32_t)s->n_attrs;
    size_t off = sizeof *rec;
    memcpy(p + off, &b, sizeof b);
    off += sizeof b;
    memcpy(p + off, refs, s->n_attrs * sizeof *refs);
    off += s->n_attrs * sizeof *refs;
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_pf_kv *kv = &s->attrs[i];
        if (!rec->rid_len && key_is(&kv->key, "request.id")) {
            rec->rid_off = (uint32_t)off;
            rec->rid_len = (uint32_t)kv->value.len;
        } else if (!rec->ids_len && key_is(&kv->key, "request.ids")) {
            rec->ids_off = (uint32_t)off;
            rec->ids_len = (uint32_t)kv->value.len;
        }
        memcpy(p + off, kv->value.ptr, kv->value.len);
        off += kv->value.len;
    }
    for (size_t i = 0; i < s->n_links; i++) {
        hex_to_bin(s->links[i].trace_id, p + off, 16);
        hex_to_bin(s->links[i].span_id, p + off + 16, 8);
        off += 24;
    }
    if (refs != refs_small) free(refs);
    commit(r, rec);
    r->st.spans_held++;
    return rec->seq;
}

void mst_flight_ring_add_counter(mst_flight_ring *r, const mst_tl_counter *c, uint64_t now_ms) {
    size_t size = ALIGN8(sizeof(mst_flight_rec) + sizeof(counter_body));
    uint8_t *p = reserve(r, size);
    if (!p) return; /* not reached: a counter record is far below cap / 4 */
    mst_flight_rec *rec = (mst_flight_rec *)(void *)p;
    memset(rec, 0, size);
    rec->size = (uint32_t)size;
    rec->type = MST_FLIGHT_REC_COUNTER;
    rec->arrive_ms = now_ms;
    rec->start_ns = rec->end_ns = c->ts_ns;
    counter_body b = {c->name, c->pid, c->i, c->d, c->is_double, {0}};
    memcpy(p + sizeof *rec, &b, sizeof b);
    commit(r, rec);
    r->st.counters_held++;
}

void mst_flight_ring_expire(mst_flight_ring *r, uint64_t now_ms) {
    if (!r->max_age_ms) return;
    while (live_count(r) && rec_at(r, r->head)->arrive_ms + r->max_age_ms < now_ms)
        evict_oldest(r);
}

mst_flight_rec *mst_flight_ring_first(mst_flight_ring *r) {
    return live_count(r) ? rec_at(r, r->head) : NULL;
}

mst_flight_rec *mst_flight_ring_next(mst_flight_ring *r, const mst_flight_rec *rec) {
    uint64_t off = (uint64_t)((const uint8_t *)rec - r->buf) + rec->size;
    if (r->wrapped && off == r->wrap_end) off = 0;
    if (off == r->tail) return NULL;
    return rec_at(r, off);
}

const char *mst_flight_rec_text(const mst_flight_rec *rec, uint32_t off) {
    return (const char *)rec + off;
}

bool mst_flight_ring_span(const mst_flight_ring *r, const mst_flight_rec *rec, mst_arena *arena,
                          mst_pf_span *out) {
    if (rec->type != MST_FLIGHT_REC_SPAN) return false;
    const uint8_t *p = (const uint8_t *)rec;
    span_body b;
    memcpy(&b, p + sizeof *rec, sizeof b);
    mst_pf_span_defaults(out);
    uint32_t n;
    out->name.ptr = interned(r, b.name_iid, &n);
    out->name.len = n;
    out->category.ptr = interned(r, b.cat_iid, &n);
    out->category.len = n;
    bin_to_hex(rec->trace_id, 16, out->trace_id);
    bin_to_hex(b.span_id, 8, out->span_id);
    if (b.has_parent) bin_to_hex(b.parent_id, 8, out->parent_span_id);
    out->start_ns = rec->start_ns;
    out->end_ns = rec->end_ns;
    out->kind = b.kind;
    out->status = b.status;
    out->has_pid = b.has_pid;
    out->has_tid = b.has_tid;
    out->request_links = b.request_links;
    out->pid = b.pid;
    out->tid = b.tid;
    size_t off = sizeof *rec + sizeof b;
    const attr_ref *refs = (const attr_ref *)(const void *)(p + off);
    off += b.n_attrs * sizeof(attr_ref);
    out->n_attrs = b.n_attrs;
    out->attrs = b.n_attrs ? mst_arena_alloc(arena, b.n_attrs * sizeof *out->attrs) : NULL;
    if (b.n_attrs && !out->attrs) return false;
    for (uint32_t i = 0; i < b.n_attrs; i++) {
        attr_ref a;
        memcpy(&a, &refs[i], sizeof a);
        out->attrs[i].key.ptr = interned(r, a.key_iid, &n);
        out->attrs[i].key.len = n;
        out->attrs[i].value.ptr = (const char *)p + off;
        out->attrs[i].value.len = a.vlen;
        off += a.vlen;
    }
    out->n_links = rec->n_links;
    out->links = rec->n_links ? mst_arena_alloc(arena, rec->n_links * sizeof *out->links) : NULL;
    if (rec->n_links && !out->links) return false;
    for (uint32_t i = 0; i < rec->n_links; i++, off += 24) {
        bin_to_hex(p + off, 16, out->links[i].trace_id);
        bin_to_hex(p + off + 16, 8, out->links[i].span_id);
    }
    if (b.res_iid) {
        uint32_t blen;
        const char *blob = interned(r, b.res_iid, &blen);
        size_t count = 0;
        for (size_t o = 0; o < blen; count++) {
            attr_ref a;
            memcpy(&a, blob + o, sizeof a);
            o += sizeof a + a.vlen;
        }
        out->resource = mst_arena_alloc(arena, count * sizeof *out->resource);
        if (!out->resource) return false;
        out->n_resource = count;
        size_t o = 0;
        for (size_t i = 0; i < count; i++) {
            attr_ref a;
            memcpy(&a, blob + o, sizeof a);
            out->resource[i].key.ptr = interned(r, a.key_iid, &n);
            out->resource[i].key.len = n;
            out->resource[i].value.ptr = blob + o + sizeof a;
            out->resource[i].value.len = a.vlen;
            o += sizeof a + a.vlen;
        }
    }
    return true;
}

void mst_flight_ring_counter(const mst_flight_rec *rec, mst_tl_counter *out) {
    counter_body b;
    memcpy(&b, (const uint8_t *)rec + sizeof *rec, sizeof b);
    memset(out, 0, sizeof *out);
    out->name = b.name;
    out->pid = b.pid;
    out->ts_ns = rec->start_ns;
    out->is_double = b.is_double;
    out->i = b.i;
    out->d = b.d;
}

void mst_flight_ring_get_stats(const mst_flight_ring *r, mst_flight_ring_stats *out) {
    *out = r->st;
    out->intern_bytes = r->blob_len;
    out->intern_entries = r->n_entries;
}
