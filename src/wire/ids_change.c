/*
 * ids_change.c — request id lists as changes to the previous list: the
 * remembered list, finding a change, parsing and applying one (see
 * ids_change.h for the format and who calls what).
 *
 * Why greedy matching finds the change: a list in vLLM's order is the
 * previous one with some items removed (order kept) and new ones appended,
 * so walking both lists and dropping each previous item that does not
 * match the next new one recovers exactly the removed positions; whatever
 * is left of the new list joined at the end. Any other reordering still
 * yields a correct (only larger) change, which the caller then sends whole.
 */
#include "wire/ids_change.h"

#include "core/err_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mst_ids_list_init(mst_ids_list *l, char sep, char lead) {
    memset(l, 0, sizeof *l);
    l->sep = sep;
    l->lead = lead;
}

void mst_ids_list_free(mst_ids_list *l) {
    free(l->text);
    free(l->off);
    free(l->len);
    mst_ids_list_init(l, l->sep, l->lead);
}

size_t mst_ids_list_bytes(const mst_ids_list *l) {
    return l->text_cap + (size_t)l->cap * 2 * sizeof(uint32_t);
}

/* Room for `items` items and `text` bytes in all; false when out of
 * memory (the callers keep the limits). */
static bool reserve(mst_ids_list *l, uint32_t items, size_t text) {
    if (items > l->cap) {
        uint32_t cap = l->cap ? l->cap : 64;
        while (cap < items) cap *= 2;
        uint32_t *off = realloc(l->off, cap * sizeof *off);
        if (!off) return false;
        l->off = off;
        uint32_t *len = realloc(l->len, cap * sizeof *len);
        if (!len) return false;
        l->len = len;
        l->cap = cap;
    }
    if (text > l->text_cap) {
        size_t cap = l->text_cap ? l->text_cap : 2048;
        while (cap < text) cap *= 2;
        char *t = realloc(l->text, cap);
        if (!t) return false;
        l->text = t;
        l->text_cap = cap;
    }
    return true;
}

/* Bytes the separator (or the lead byte) before the next item takes. */
static size_t sep_bytes(const mst_ids_list *l) {
    return (l->n && l->sep) || (l->lead && l->text_len == 0) ? 1 : 0;
}

/* Writes the separator, or the lead byte into a list still without it;
 * the room is reserved. */
static void put_sep(mst_ids_list *l) {
    if (l->lead && l->text_len == 0) l->text[l->text_len++] = l->lead;
    else if (l->n && l->sep) l->text[l->text_len++] = l->sep;
}

bool mst_ids_list_push(mst_ids_list *l, const char *p, size_t n) {
    size_t s = sep_bytes(l);
    if (l->n >= MST_IDS_MAX_ITEMS || n + s > MST_IDS_MAX_TEXT - l->text_len) return false;
    if (!reserve(l, l->n + 1, l->text_len + s + n)) return false;
    put_sep(l);
    if (n) memcpy(l->text + l->text_len, p, n);
    l->off[l->n] = (uint32_t)l->text_len;
    l->len[l->n] = (uint32_t)n;
    l->text_len += n;
    l->items_len += n;
    l->n++;
    return true;
}

bool mst_ids_list_set(mst_ids_list *l, const mst_str *items, uint32_t n) {
    mst_ids_list_clear(l);
    size_t text = 0;
    for (uint32_t i = 0; i < n; i++) text += items[i].len;
    size_t seps = n ? (l->sep ? n - 1 : 0) + (l->lead ? 1 : 0) : 0;
    if (n > MST_IDS_MAX_ITEMS || text + seps > MST_IDS_MAX_TEXT || !reserve(l, n, text + seps)) return false;
    for (uint32_t i = 0; i < n; i++) {
        put_sep(l);
        if (items[i].len) memcpy(l->text + l->text_len, items[i].ptr, items[i].len);
        l->off[i] = (uint32_t)l->text_len;
        l->len[i] = items[i].len;
        l->text_len += items[i].len;
        l->n = i + 1;
    }
    l->items_len = text;
    return true;
}

uint32_t mst_ids_change_find(const mst_ids_list *prev, const mst_str *items, uint32_t n, uint32_t *left,
                             uint32_t *n_left) {
    /* locals: the stores to left[] cannot change them */
    const char *text = prev->text;
    const uint32_t *off = prev->off, *len = prev->len;
    uint32_t n_prev = prev->n, i = 0, j = 0, k = 0;
    while (i < n_prev && j < n) {
        if (len[i] == items[j].len && mst_ids_bytes_equal(text + off[i], items[j].ptr, items[j].len)) j++;
        else left[k++] = i;
        i++;
    }
    while (i < n_prev) left[k++] = i++;
    *n_left = k;
    return j;
}

/* Grows an arena array of `elem`-byte entries (count used) to twice. */
static void *grow(mst_arena *a, void *old, uint32_t count, uint32_t *cap, size_t elem) {
    uint32_t ncap = *cap ? *cap * 2 : 16;
    void *p = mst_arena_alloc(a, (size_t)ncap * elem);
    if (!p) return NULL;
    if (count) memcpy(p, old, (size_t)count * elem);
    *cap = ncap;
    return p;
}

static mst_status read_left(mst_json_reader *r, mst_arena *a, mst_ids_change *out, char *err,
                            size_t err_size) {
    if (mst_json_peek(r) != MST_JSON_ARRAY || !mst_json_array_begin(r))
        return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: 'left' must be an array of positions");
    uint32_t cap = 0;
    for (;;) {
        int more = mst_json_array_next(r);
        if (more < 0) return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: 'left': %s", r->err);
        if (!more) return MST_OK;
        int64_t v;
        if (mst_json_peek(r) != MST_JSON_NUMBER || !mst_json_read_i64(r, &v))
            return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: 'left' must hold integers");
        if (v < 0 || v >= (int64_t)MST_IDS_MAX_ITEMS)
            return mst_err_fail(err, err_size, MST_ERR_PARSE,
                        "request.ids change: position %lld in 'left' is out of range (0..%u)", (long long)v,
                        MST_IDS_MAX_ITEMS - 1);
        if (out->n_left && (uint32_t)v <= out->left[out->n_left - 1])
            return mst_err_fail(err, err_size, MST_ERR_PARSE,
                        "request.ids change: 'left' must be strictly increasing (%lld after %u)", (long long)v,
                        out->left[out->n_left - 1]);
        if (out->n_left == cap && !(out->left = grow(a, out->left, out->n_left, &cap, sizeof *out->left)))
            return mst_err_fail(err, err_size, MST_ERR_NOMEM, "out of memory reading a request.ids change");
        out->left[out->n_left++] = (uint32_t)v;
    }
}

static mst_status read_joined(mst_json_reader *r, mst_arena *a, mst_ids_change *out, char *err,
                              size_t err_size) {
    if (mst_json_peek(r) != MST_JSON_ARRAY || !mst_json_array_begin(r))
        return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: 'joined' must be an array of strings");
    uint32_t cap = 0;
    for (;;) {
        int more = mst_json_array_next(r);
        if (more < 0) return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: 'joined': %s", r->err);
        if (!more) return MST_OK;
        if (out->n_joined == MST_IDS_MAX_ITEMS)
            return mst_err_fail(err, err_size, MST_ERR_TOO_LARGE, "request.ids change: more than %u ids in 'joined'",
                        MST_IDS_MAX_ITEMS);
        mst_json_slice item;
        if (mst_json_peek(r) != MST_JSON_STRING || !mst_json_read_raw(r, &item))
            return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: 'joined' must hold strings");
        if (out->n_joined == cap &&
            !(out->joined = grow(a, out->joined, out->n_joined, &cap, sizeof *out->joined)))
            return mst_err_fail(err, err_size, MST_ERR_NOMEM, "out of memory reading a request.ids change");
        out->joined[out->n_joined++] = item;
    }
}

mst_status mst_ids_change_parse(const char *json, size_t len, mst_arena *arena, mst_ids_change *out,
                                char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    mst_json_reader r;
    mst_json_reader_init(&r, json, len, 4);
    if (mst_json_peek(&r) != MST_JSON_OBJECT || !mst_json_object_begin(&r))
        return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change must be an object {\"left\",\"joined\"}");
    bool have_left = false, have_joined = false;
    for (;;) {
        int more = mst_json_object_next(&r);
        if (more < 0) return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: %s", r.err);
        if (!more) break;
        char key[8];
        size_t kn = 0;
        bool fits = false;
        if (!mst_json_read_key_into(&r, key, sizeof key, &kn, &fits))
            return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: %s", r.err);
        mst_status st;
        if (fits && kn == 4 && memcmp(key, "left", 4) == 0 && !have_left) {
            have_left = true;
            st = read_left(&r, arena, out, err, err_size);
        } else if (fits && kn == 6 && memcmp(key, "joined", 6) == 0 && !have_joined) {
            have_joined = true;
            st = read_joined(&r, arena, out, err, err_size);
        } else {
            return mst_err_fail(err, err_size, MST_ERR_PARSE,
                        "request.ids change: only the keys 'left' and 'joined', once each, are allowed");
        }
        if (st != MST_OK) return st;
    }
    if (!mst_json_finish(&r)) return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change: %s", r.err);
    if (!have_left || !have_joined)
        return mst_err_fail(err, err_size, MST_ERR_PARSE, "request.ids change needs both 'left' and 'joined'");
    return MST_OK;
}

static mst_status too_large(char *err, size_t err_size) {
    return mst_err_fail(err, err_size, MST_ERR_TOO_LARGE, "request.ids change: the list would pass %u ids or %u bytes",
                MST_IDS_MAX_ITEMS, MST_IDS_MAX_TEXT);
}

static mst_status no_memory(char *err, size_t err_size) {
    return mst_err_fail(err, err_size, MST_ERR_NOMEM, "out of memory applying a request.ids change");
}

/* Bytes the items at left[0 .. n_left) take (their separators not
 * counted). */
static size_t bytes_at(const mst_ids_list *l, const uint32_t *left, uint32_t n_left) {
    size_t bytes = 0;
    for (uint32_t k = 0; k < n_left; k++) bytes += l->len[left[k]];
    return bytes;
}

/* Text a list of n items with items_len item bytes takes whole. */
static size_t text_of(const mst_ids_list *l, uint32_t n, size_t items_len) {
    if (!n) return 0;
    return (l->lead ? 1 : 0) + items_len + (l->sep ? n - 1 : 0);
}

/* The positions left[0 .. n_left) taken out of off[] / len[] (the entries
 * after each move down); the text is not touched. */
static void drop_entries(mst_ids_list *l, const uint32_t *left, uint32_t n_left) {
    if (!n_left) return;
    uint32_t w = left[0];
    for (uint32_t k = 0; k < n_left; k++) {
        uint32_t from = left[k] + 1, to = k + 1 < n_left ? left[k + 1] : l->n;
        if (to > from) {
            memmove(l->off + w, l->off + from, (size_t)(to - from) * sizeof *l->off);
            memmove(l->len + w, l->len + from, (size_t)(to - from) * sizeof *l->len);
            w += to - from;
        }
    }
    l->n = w;
}

/* The items' bytes moved down to the start of the text, in order (a list
 * without separator and lead: mst_ids_list_edit's). */
static void compact_text(mst_ids_list *l) {
    size_t w = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        if (l->off[i] != w) memmove(l->text + w, l->text + l->off[i], l->len[i]);
        l->off[i] = (uint32_t)w;
        w += l->len[i];
    }
    l->text_len = w;
}

bool mst_ids_list_edit(mst_ids_list *l, const uint32_t *left, uint32_t n_left, const mst_str *joined,
                       uint32_t n_joined) {
    size_t gone = bytes_at(l, left, n_left), add = 0;
    for (uint32_t j = 0; j < n_joined; j++) add += joined[j].len;
    uint32_t n = l->n - n_left + n_joined;
    size_t live = l->items_len - gone + add;
    if (n > MST_IDS_MAX_ITEMS || live > MST_IDS_MAX_TEXT) goto fail;
    drop_entries(l, left, n_left);
    l->items_len -= gone;
    /* unused bytes at most about the live ones: the text stays within
     * twice the list (and MST_IDS_MAX_TEXT's bound) */
    if (l->text_len + add > 2 * live + 4096) compact_text(l);
    if (!reserve(l, n, l->text_len + add)) goto fail;
    for (uint32_t j = 0; j < n_joined; j++) {
        if (joined[j].len) memcpy(l->text + l->text_len, joined[j].ptr, joined[j].len);
        l->off[l->n] = (uint32_t)l->text_len;
        l->len[l->n] = joined[j].len;
        l->text_len += joined[j].len;
        l->n++;
    }
    l->items_len += add;
    return true;
fail:
    mst_ids_list_clear(l);
    return false;
}

/* The positions left[0 .. n_left) taken out of a list whose text is one
 * run (separators and lead byte kept right): from the first position that
 * left, each run of kept items moves down once, with its separator. */
static void drop_compact(mst_ids_list *l, const uint32_t *left, uint32_t n_left) {
    if (!n_left) return;
    size_t sep = l->sep ? 1 : 0;
    uint32_t w = left[0]; /* entries before it stay */
    size_t wt = w ? (size_t)l->off[w - 1] + l->len[w - 1] : (l->lead ? 1 : 0);
    for (uint32_t k = 0; k < n_left; k++) {
        uint32_t from = left[k] + 1, to = k + 1 < n_left ? left[k + 1] : l->n;
        if (to <= from) continue;
        /* the removed item and its separator lie between wt and src, so the
         * separator written at wt is not in the run */
        size_t s = w ? sep : 0, src = l->off[from];
        size_t bytes = (size_t)l->off[to - 1] + l->len[to - 1] - src;
        if (s) l->text[wt] = l->sep;
        memmove(l->text + wt + s, l->text + src, bytes);
        uint32_t shift = (uint32_t)(src - (wt + s));
        for (uint32_t i = from; i < to; i++, w++) {
            l->off[w] = l->off[i] - shift;
            l->len[w] = l->len[i];
        }
        wt += s + bytes;
    }
    l->n = w;
    l->text_len = w ? wt : 0; /* an empty list writes its lead again */
}

bool mst_ids_list_set_change(mst_ids_list *l, const mst_ids_list *prev, const uint32_t *left,
                             uint32_t n_left, const mst_str *joined, uint32_t n_joined) {
    /* prev copied whole (three copies), then edited in place as a change */
    mst_ids_list_clear(l);
    l->sep = prev->sep;
    l->lead = prev->lead;
    if (!reserve(l, prev->n, prev->text_len)) return false;
    if (prev->text_len) memcpy(l->text, prev->text, prev->text_len);
    if (prev->n) {
        memcpy(l->off, prev->off, prev->n * sizeof *l->off);
        memcpy(l->len, prev->len, prev->n * sizeof *l->len);
    }
    l->n = prev->n;
    l->text_len = prev->text_len;
    l->items_len = prev->items_len;
    drop_compact(l, left, n_left);
    l->items_len -= bytes_at(prev, left, n_left);
    for (uint32_t j = 0; j < n_joined; j++)
        if (!mst_ids_list_push(l, joined[j].ptr, joined[j].len)) {
            mst_ids_list_clear(l);
            return false;
        }
    return true;
}

mst_status mst_ids_change_apply(mst_ids_list *l, const mst_ids_change *c, char *err, size_t err_size) {
    if (c->n_left && c->left[c->n_left - 1] >= l->n)
        return mst_err_fail(err, err_size, MST_ERR_PARSE,
                    "request.ids change: position %u in 'left' is past the previous list (%u ids)",
                    c->left[c->n_left - 1], l->n);
    size_t gone = bytes_at(l, c->left, c->n_left), add = 0;
    for (uint32_t j = 0; j < c->n_joined; j++) add += c->joined[j].len;
    uint32_t n = l->n - c->n_left + c->n_joined;
    size_t items_len = l->items_len - gone + add;
    if (n > MST_IDS_MAX_ITEMS || items_len > MST_IDS_MAX_TEXT || text_of(l, n, items_len) > MST_IDS_MAX_TEXT)
        return too_large(err, err_size);
    drop_compact(l, c->left, c->n_left);
    l->items_len -= gone;
    if (!reserve(l, n, text_of(l, n, items_len))) {
        mst_ids_list_clear(l);
        return no_memory(err, err_size);
    }
    for (uint32_t j = 0; j < c->n_joined; j++) /* room reserved, within the limits */
        if (!mst_ids_list_push(l, c->joined[j].ptr, c->joined[j].len)) {
            mst_ids_list_clear(l);
            return no_memory(err, err_size);
        }
    return MST_OK;
}

bool mst_ids_list_json(mst_ids_list *l, mst_json_slice *out) {
    if (!reserve(l, l->n, l->text_len + 2)) return false; /* an empty list's lead, and the ']' */
    if (l->text_len == 0) l->text[l->text_len++] = l->lead;
    l->text[l->text_len] = ']'; /* past the end: the next item's bytes overwrite it */
    out->ptr = l->text;
    out->len = l->text_len + 1;
    return true;
}
