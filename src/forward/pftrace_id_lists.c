/*
 * pftrace_id_lists.c — the `.pftrace` writer's request-id lists
 * (pftrace_id_lists.h): the JSON list splitter (plain, guided by the
 * items a list probably has, or by runs of the stream's last list's text)
 * and the per-stream delta table.
 *
 * The delta is exact: a reader rebuilds the list as the previous list
 * without the ids that left, then the ids that joined. That holds only
 * when the ids kept appear first and in their old order, and when no id is
 * listed twice — checked here with a set of the list's ids, or told by
 * the caller (mst_pft_id_chain_step_shaped); any other list is a keyframe.
 * A delta as long as half the list is not worth its dependence on the
 * previous span and is a keyframe too.
 */
#include "forward/pftrace_id_lists.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "forward/hash_mix.h"
#include "wire/json_scan.h"

#define SET_SLOTS (2u * MST_PFT_ID_LIST_MAX)

typedef struct id_stream {
    uint64_t key;            /* 0: free */
    uint32_t pos;            /* of the last list since its keyframe */
    size_t n, cap;
    uint64_t *iids;          /* the last list */
    uint32_t *refs;          /* ... its caller's refs (cap of them) */
    bool has_refs;
    /* The last list's JSON text and its items' places in it, when kept
     * (mst_pft_id_chain_keep_text): text_items == n then. */
    char *text;
    size_t text_len, text_cap, text_items;
    uint32_t *item_off, *item_n; /* cap of them */
    /* The last list's place in a forwarder stream (mst_pft_id_chain_set_origin):
     * list origin_seq of stream origin_stream on connection origin_conn. */
    bool has_origin;
    uint64_t origin_conn;
    int64_t origin_stream, origin_seq;
} id_stream;

struct mst_pft_id_chains {
    id_stream streams[MST_PFT_ID_STREAMS];
    uint64_t left[MST_PFT_ID_LIST_MAX];
    /* the current list's ids: slot = iid, valid when stamp matches */
    uint64_t set_iid[SET_SLOTS];
    uint32_t set_stamp[SET_SLOTS];
    uint32_t stamp;
};

bool mst_pft_is_id_list_key(const char *key, size_t n) {
    if (n < 4 || key[n - 1] != 's' || key[n - 2] != 'd') return false; /* most keys: one look */
    if (memcmp(key + n - 4, "_ids", 4) == 0) return true;
    return n == 11 && memcmp(key, "request.ids", 11) == 0;
}

static inline bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* What follows an item's closing quote (*p just past it): the next item
 * (*p at its opening quote), the list's end (*p at ']'), or bad JSON. */
enum { ITEM_NEXT, ITEM_LAST, ITEM_BAD };
static inline int after_item(const char **pp, const char *end) {
    const char *p = *pp;
    if (p < end && *p == ',') { /* the usual "a","b" */
        p++;
    } else {
        while (p < end && is_blank(*p)) p++;
        if (p == end) return ITEM_BAD;
        if (*p == ']') return *pp = p, ITEM_LAST;
        if (*p++ != ',') return ITEM_BAD;
    }
    while (p < end && is_blank(*p)) p++;
    *pp = p;
    return ITEM_NEXT;
}

/* After a list's ']' at p: nothing but blanks. */
static inline bool only_blanks_after(const char *p, const char *end) {
    for (p++; p < end; p++)
        if (!is_blank(*p)) return false;
    return true;
}

/* The first '"' or '\\' in [s, end), else end: 8 bytes a step (a batch of
 * 256 ids is ~8 KB of text per span). */
static const char *quote_or_backslash(const char *s, const char *end) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (end - s >= 8) {
        uint64_t w, a, b;
        memcpy(&w, s, 8);
        a = w ^ ('"' * ones);
        b = w ^ ('\\' * ones);
        uint64_t hit = ((a - ones) & ~a & highs) | ((b - ones) & ~b & highs);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* the lowest flagged byte is exact (only bytes above a match can be
         * flagged falsely) */
        if (hit) return s + (__builtin_ctzll(hit) >> 3);
#else
        if (hit) break;
#endif
        s += 8;
    }
    while (s < end && *s != '"' && *s != '\\') s++;
    return s;
}

/* quote_or_backslash, 16 bytes a step through the JSON scanner's plain
 * runs (which also stop at control bytes and bytes >= 0x80: from such a
 * byte on, the word loop finishes the search). */
static inline const char *first_quote_or_backslash(const char *s, const char *end) {
    const char *q = (const char *)mst_json_plain_run((const uint8_t *)s, (const uint8_t *)end);
    if (q < end && *q != '"' && *q != '\\') q = quote_or_backslash(q + 1, end);
    return q;
}

bool mst_pft_split_id_list(const char *v, size_t len, mst_pft_id_item *out, size_t cap, size_t *n) {
    return mst_pft_split_id_list_guided(v, len, out, cap, n, NULL, 0, NULL);
}

/* The guess among guess[*j .. *j + MST_PFT_ID_GUESS_AHEAD) whose text is at
 * s, followed by a quote (the item's end, as the guesses hold neither
 * quotes nor backslashes); its index, *j moved past it. */
static inline size_t match_guess(const char *s, const char *end, const mst_pft_id_item *guess,
                                 size_t n_guess, size_t *j) {
    size_t left = (size_t)(end - s);
    for (size_t k = *j; k < n_guess && k < *j + MST_PFT_ID_GUESS_AHEAD; k++) {
        size_t gn = guess[k].n;
        if (gn < left && s[gn] == '"' && mst_same_bytes(s, guess[k].s, gn)) {
            *j = k + 1;
            return k;
        }
    }
    return MST_PFT_ID_NO_GUESS;
}

/* The items of a list from p (where an item is due) to its closing ']'
 * and the end: into out[count ..), *n then the list's count. */
static bool split_rest(const char *p, const char *end, mst_pft_id_item *out, size_t cap,
                       size_t count, size_t *n, const mst_pft_id_item *guess, size_t n_guess,
                       uint32_t *which) {
    size_t j = 0; /* count is local: stores to out cannot change it */
    unsigned misses = 0;
    for (;;) {
        if (p == end || *p != '"' || count == cap) return false;
        const char *s = p + 1, *q;
        size_t g = MST_PFT_ID_NO_GUESS;
        if (j < n_guess) {
            /* the next guess first (the usual: the id kept in its place) */
            size_t gn = guess[j].n;
            if (gn < (size_t)(end - s) && s[gn] == '"' && mst_same_bytes(s, guess[j].s, gn)) g = j++;
            else g = match_guess(s, end, guess, n_guess, &j);
        }
        if (g != MST_PFT_ID_NO_GUESS) {
            q = s + guess[g].n;
        } else {
            if (n_guess && ++misses == MST_PFT_ID_GUESS_MISSES) n_guess = 0; /* another list */
            q = first_quote_or_backslash(s, end);
            if (q == end || *q != '"') return false;
        }
        if (which) which[count] = (uint32_t)g;
        out[count++] = (mst_pft_id_item){s, (size_t)(q - s), NULL};
        p = q + 1;
        int next = after_item(&p, end);
        if (next == ITEM_NEXT) continue;
        if (next == ITEM_BAD) return false;
        if (next == ITEM_LAST) break;
    }
    *n = count;
    return only_blanks_after(p, end);
}

bool mst_pft_split_id_list_guided(const char *v, size_t len, mst_pft_id_item *out, size_t cap,
                                  size_t *n, const mst_pft_id_item *guess, size_t n_guess,
                                  uint32_t *which) {
    const char *p = v, *end = v + len;
    *n = 0;
    while (p < end && is_blank(*p)) p++;
    if (p == end || *p++ != '[') return false;
    while (p < end && is_blank(*p)) p++;
    if (p < end && *p == ']') return false; /* empty: nothing to intern, JSON says it */
    return split_rest(p, end, out, cap, 0, n, guess, n_guess, which);
}

bool mst_pft_split_id_list_rest(const char *v, size_t len, size_t from, mst_pft_id_item *out,
                                size_t cap, size_t *n) {
    size_t count = *n;
    if (from >= len || from == 0 || (v[from - 1] != '[' && v[from - 1] != ',')) return false;
    return split_rest(v + from, v + len, out, cap, count, n, NULL, 0, NULL);
}

mst_pft_id_chains *mst_pft_id_chains_new(void) { return calloc(1, sizeof(mst_pft_id_chains)); }

void mst_pft_id_chains_free(mst_pft_id_chains *c) {
    if (!c) return;
    for (unsigned i = 0; i < MST_PFT_ID_STREAMS; i++) {
        free(c->streams[i].iids);
        free(c->streams[i].refs);
        free(c->streams[i].text);
        free(c->streams[i].item_off);
        free(c->streams[i].item_n);
    }
    free(c);
}

void mst_pft_id_chains_reset(mst_pft_id_chains *c) {
    for (unsigned i = 0; i < MST_PFT_ID_STREAMS; i++) {
        c->streams[i].key = 0;
        c->streams[i].n = 0;
    }
}

static inline uint32_t slot_of(uint64_t iid) {
    uint64_t h = iid * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & (SET_SLOTS - 1);
}

/* Adds every id of the list to the set; false when one is listed twice. */
static bool set_fill(mst_pft_id_chains *c, const uint64_t *iids, size_t n) {
    if (++c->stamp == 0) {
        memset(c->set_stamp, 0, sizeof c->set_stamp);
        c->stamp = 1;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t s = slot_of(iids[i]);
        while (c->set_stamp[s] == c->stamp) {
            if (c->set_iid[s] == iids[i]) return false;
            s = (s + 1) & (SET_SLOTS - 1);
        }
        c->set_stamp[s] = c->stamp;
        c->set_iid[s] = iids[i];
    }
    return true;
}

static bool set_has(const mst_pft_id_chains *c, uint64_t iid) {
    for (uint32_t s = slot_of(iid); c->set_stamp[s] == c->stamp; s = (s + 1) & (SET_SLOTS - 1))
        if (c->set_iid[s] == iid) return true;
    return false;
}

/* The delta of iids against the stream's last list; false when the list
 * must be a keyframe. */
static bool delta_of(mst_pft_id_chains *c, const id_stream *st, const uint64_t *iids, size_t n,
                     mst_pft_id_delta *out) {
    size_t kept = 0, n_left = 0;
    for (size_t i = 0; i < st->n; i++) {
        uint64_t p = st->iids[i];
        if (!set_has(c, p)) {
            c->left[n_left++] = p;
        } else if (kept < n && iids[kept] == p) {
            kept++;
        } else {
            return false; /* reordered */
        }
    }
    size_t n_joined = n - kept;
    if (n_left + n_joined > n / 2 + 1) return false;
    *out = (mst_pft_id_delta){st->pos + 1, c->left, iids + kept, n_left, n_joined};
    return true;
}

static id_stream *stream_slot(mst_pft_id_chains *c, uint64_t key) {
    return &c->streams[(key ^ (key >> 29)) & (MST_PFT_ID_STREAMS - 1)];
}

size_t mst_pft_id_chain_last(const mst_pft_id_chains *c, uint64_t key, const uint32_t **refs) {
    key |= 1;
    const id_stream *st = &c->streams[(key ^ (key >> 29)) & (MST_PFT_ID_STREAMS - 1)];
    if (st->key != key || !st->has_refs) return 0;
    *refs = st->refs;
    return st->n;
}

const uint64_t *mst_pft_id_chain_last_iids(const mst_pft_id_chains *c, uint64_t key) {
    key |= 1;
    const id_stream *st = &c->streams[(key ^ (key >> 29)) & (MST_PFT_ID_STREAMS - 1)];
    return st->key == key && st->has_refs && st->n ? st->iids : NULL;
}

void mst_pft_id_chain_forget(mst_pft_id_chains *c, uint64_t key) {
    id_stream *st = stream_slot(c, key | 1);
    if (st->key == (key | 1)) st->key = 0;
}

/* Records iids[0..n) (unique) and refs as stream st's latest list, at
 * place `pos` since its keyframe. False when out of memory (the stream is
 * then forgotten). */
static bool record_list(id_stream *st, uint64_t key, uint32_t pos, const uint64_t *iids,
                        const uint32_t *refs, size_t n) {
    st->key = key;
    st->pos = pos;
    st->n = 0;
    st->text_items = 0;
    st->has_origin = false;
    if (n > st->cap) {
        size_t cap = n < 64 ? 64 : n;
        uint64_t *grown = realloc(st->iids, cap * sizeof *grown);
        if (grown) st->iids = grown;
        uint32_t *grown_refs = grown ? realloc(st->refs, cap * sizeof *grown_refs) : NULL;
        if (grown_refs) st->refs = grown_refs;
        uint32_t *grown_off = grown_refs ? realloc(st->item_off, cap * sizeof *grown_off) : NULL;
        if (grown_off) st->item_off = grown_off;
        uint32_t *grown_n = grown_off ? realloc(st->item_n, cap * sizeof *grown_n) : NULL;
        if (grown_n) st->item_n = grown_n;
        if (!grown_n) {
            st->key = 0;
            return false;
        }
        st->cap = cap;
    }
    memcpy(st->iids, iids, n * sizeof *iids);
    st->has_refs = refs != NULL;
    if (refs) memcpy(st->refs, refs, n * sizeof *refs);
    st->n = n;
    return true;
}

bool mst_pft_id_chain_step(mst_pft_id_chains *c, uint64_t key, const uint64_t *iids,
                           const uint32_t *refs, size_t n, mst_pft_id_delta *out) {
    key |= 1; /* 0 marks a free slot */
    id_stream *st = stream_slot(c, key);
    *out = (mst_pft_id_delta){0, NULL, iids, 0, 0};
    bool unique = n <= MST_PFT_ID_LIST_MAX && set_fill(c, iids, n);
    bool chained = unique && st->key == key && st->n && st->pos + 1 < MST_PFT_ID_KEYFRAME_EVERY &&
                   delta_of(c, st, iids, n, out);
    if (!chained) *out = (mst_pft_id_delta){0, NULL, iids, 0, 0};
    if (!unique) { /* an id listed twice: no delta against this list */
        st->key = key;
        st->pos = out->pos;
        st->n = 0;
        st->text_items = 0;
        st->has_origin = false;
        return true;
    }
    return record_list(st, key, out->pos, iids, refs, n);
}

/* mst_pft_id_chain_step_shaped, and with have_left the places of the
 * last list's ids that left (left_pos[0 .. n_left_pos)), read from there
 * instead of from which. */
static bool step_known(mst_pft_id_chains *c, uint64_t key, const uint64_t *iids, const uint32_t *refs,
                       size_t n, const uint32_t *which, size_t kept, size_t n_last, bool have_left,
                       const uint32_t *left_pos, size_t n_left_pos, mst_pft_id_delta *out) {
    key |= 1;
    id_stream *st = stream_slot(c, key);
    /* Not the list the caller matched against (nor none): the general way. */
    if (st->key == key && st->n != n_last)
        return mst_pft_id_chain_step(c, key, iids, refs, n, out);
    *out = (mst_pft_id_delta){0, NULL, iids, 0, 0};
    if (n > MST_PFT_ID_LIST_MAX) { /* as mst_pft_id_chain_step: not recorded */
        st->key = key;
        st->pos = 0;
        st->n = 0;
        st->text_items = 0;
        st->has_origin = false;
        return true;
    }
    if (st->key == key && st->n && st->pos + 1 < MST_PFT_ID_KEYFRAME_EVERY) {
        /* delta_of's result for this shape: the last list's ids not kept
         * left, in its order; the rest joined */
        size_t n_left = 0, j = 0;
        if (have_left) {
            for (; n_left < n_left_pos; n_left++) c->left[n_left] = st->iids[left_pos[n_left]];
        } else {
            for (size_t g = 0; g < st->n; g++) {
                if (j < kept && which[j] == g) j++;
                else c->left[n_left++] = st->iids[g];
            }
        }
        size_t n_joined = n - kept;
        if (n_left + n_joined <= n / 2 + 1)
            *out = (mst_pft_id_delta){st->pos + 1, c->left, iids + kept, n_left, n_joined};
    }
    return record_list(st, key, out->pos, iids, refs, n);
}

void mst_pft_id_chain_set_origin(mst_pft_id_chains *c, uint64_t key, const mst_pf_ids_origin *o) {
    key |= 1;
    id_stream *st = stream_slot(c, key);
    if (st->key != key || !st->n) return;
    st->has_origin = o->valid;
    st->origin_conn = o->conn;
    st->origin_stream = o->stream;
    st->origin_seq = o->seq;
}

bool mst_pft_id_chain_base_is(const mst_pft_id_chains *c, uint64_t key, const mst_pf_ids_origin *o) {
    key |= 1;
    const id_stream *st = &c->streams[(key ^ (key >> 29)) & (MST_PFT_ID_STREAMS - 1)];
    return o->valid && o->change && st->key == key && st->has_refs && st->has_origin &&
           st->n == o->n_base && st->origin_conn == o->conn && st->origin_stream == o->stream &&
           o->seq > INT64_MIN && st->origin_seq == o->seq - 1 && o->joined_from + o->n_left == o->n_base;
}

bool mst_pft_id_chain_step_shaped(mst_pft_id_chains *c, uint64_t key, const uint64_t *iids,
                                  const uint32_t *refs, size_t n, const uint32_t *which,
                                  size_t kept, size_t n_last, mst_pft_id_delta *out) {
    return step_known(c, key, iids, refs, n, which, kept, n_last, false, NULL, 0, out);
}

bool mst_pft_id_chain_step_change(mst_pft_id_chains *c, uint64_t key, const uint64_t *iids,
                                  const uint32_t *refs, size_t n, const uint32_t *which,
                                  size_t kept, size_t n_last, const uint32_t *left,
                                  size_t n_left, mst_pft_id_delta *out) {
    return step_known(c, key, iids, refs, n, which, kept, n_last, true, left, n_left, out);
}

void mst_pft_id_chain_keep_text(mst_pft_id_chains *c, uint64_t key, const char *v, size_t len,
                                const mst_pft_id_item *items, size_t n) {
    key |= 1;
    id_stream *st = stream_slot(c, key);
    if (st->key != key || st->n != n || !n || len > MST_PFT_ID_TEXT_MAX) return;
    st->text_items = 0;
    if (len > st->text_cap) {
        char *grown = realloc(st->text, len);
        if (!grown) return;
        st->text = grown;
        st->text_cap = len;
    }
    memcpy(st->text, v, len);
    st->text_len = len;
    for (size_t i = 0; i < n; i++) {
        st->item_off[i] = (uint32_t)(items[i].s - v);
        st->item_n[i] = (uint32_t)items[i].n;
    }
    st->text_items = n;
}

bool mst_pft_id_chain_last_text(const mst_pft_id_chains *c, uint64_t key, mst_pft_id_text *out) {
    key |= 1;
    const id_stream *st = &c->streams[(key ^ (key >> 29)) & (MST_PFT_ID_STREAMS - 1)];
    if (st->key != key || !st->has_refs || !st->n || st->text_items != st->n) return false;
    *out = (mst_pft_id_text){st->text, st->text_len, st->item_off, st->item_n, st->n};
    return true;
}

/* How many bytes a[0..na) and b[0..nb) have in common from their start,
 * 16 at a time. */
static size_t common_prefix(const char *a, size_t na, const char *b, size_t nb) {
    size_t n = na < nb ? na : nb, i = 0;
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16) {
        unsigned eq = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(a + i)),
                           _mm_loadu_si128((const __m128i *)(const void *)(b + i))));
        if (eq != 0xffff) return i + (size_t)__builtin_ctz(~eq);
    }
#endif
    while (i < n && a[i] == b[i]) i++;
    return i;
}

bool mst_pft_split_id_list_runs(const char *v, size_t len, mst_pft_id_item *out, size_t cap,
                                size_t *n, const mst_pft_id_text *prev, uint32_t *which) {
    const char *p = v, *end = v + len;
    const char *pt = prev->text;
    const uint32_t *off = prev->off, *on = prev->n;
    size_t k = 0, count = 0;
    *n = 0;
    while (p < end && is_blank(*p)) p++;
    if (p == end || *p++ != '[') return false;
    while (p < end && is_blank(*p)) p++;
    if (p < end && *p == ']') return false;
    for (;;) {
        if (p == end || *p != '"' || count == cap) return false;
        const char *s = p + 1;
        size_t left = (size_t)(end - s), t = k;
        /* the previous list's item here: the next one, or one of the few
         * after it (the ones between left) */
        for (; t < prev->items && t < k + MST_PFT_ID_GUESS_AHEAD; t++)
            if (on[t] < left && s[on[t]] == '"' && mst_same_bytes(s, pt + off[t], on[t])) break;
        if (t < prev->items && t < k + MST_PFT_ID_GUESS_AHEAD) {
            /* A run: from item t on, the text is the previous one's as far
             * as they agree, and so are its items whose closing quote is
             * within that (the bytes between them too: their separators). */
            size_t base = off[t];
            /* prev's items ending (closing quote) before `limit` */
            size_t limit = base + common_prefix(s, left, pt + base, prev->len - base);
            size_t t_end = prev->items - t < cap - count ? prev->items : t + (cap - count);
            do {
                out[count] = (mst_pft_id_item){s + (off[t] - base), on[t], NULL};
                if (which) which[count] = (uint32_t)t;
                count++;
            } while (++t < t_end && off[t] + on[t] < limit);
            k = t;
            p = s + (off[t - 1] - base) + on[t - 1] + 1;
        } else {
            const char *q = first_quote_or_backslash(s, end);
            if (q == end || *q != '"') return false;
            if (which) which[count] = MST_PFT_ID_NO_GUESS;
            out[count++] = (mst_pft_id_item){s, (size_t)(q - s), NULL};
            p = q + 1;
        }
        int next = after_item(&p, end);
        if (next == ITEM_NEXT) continue;
        if (next == ITEM_BAD) return false;
        if (next == ITEM_LAST) break;
    }
    *n = count;
    return only_blanks_after(p, end);
}
