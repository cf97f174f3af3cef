/*
 * pftrace_id_streams.c — the `.pftrace` reader's per-stream request-id
 * lists (pftrace_id_streams.h). Each stream owns a copy of its last list
 * (one block of strings); a delta is applied through a hash set of the ids
 * that left, so a hostile file with long lists costs linear time.
 */
#include "analyze/pftrace_id_streams.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/grow.h"

struct mst_an_id_stream {
    int64_t pid, tid;
    char *name;
    size_t name_len;
    int64_t pos;             /* place of the last list; -1: waits for a keyframe */
    mst_an_str *items;
    size_t n;
    char *blob;              /* the items' bytes */
};

static void stream_drop_list(mst_an_id_stream *st) {
    free(st->items);
    free(st->blob);
    st->items = NULL;
    st->blob = NULL;
    st->n = 0;
}

void mst_an_id_streams_clear(mst_an_id_streams *s) {
    for (size_t i = 0; i < s->n; i++) {
        stream_drop_list(&s->v[i]);
        free(s->v[i].name);
    }
    s->n = 0;
}

void mst_an_id_streams_free(mst_an_id_streams *s) {
    mst_an_id_streams_clear(s);
    free(s->v);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

/* The stream (pid, tid, name), added when `add`; NULL when absent (or the
 * table is full, or out of memory: *nomem). */
static mst_an_id_stream *stream_of(mst_an_id_streams *s, int64_t pid, int64_t tid, mst_an_str name,
                                   bool add, bool *nomem) {
    for (size_t i = 0; i < s->n; i++) {
        mst_an_id_stream *st = &s->v[i];
        if (st->pid == pid && st->tid == tid && st->name_len == name.len &&
            (!name.len || memcmp(st->name, name.ptr, name.len) == 0))
            return st;
    }
    if (!add || s->n >= MST_AN_ID_STREAMS) return NULL;
    if (!mst_an_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) {
        *nomem = true;
        return NULL;
    }
    mst_an_id_stream *st = &s->v[s->n];
    memset(st, 0, sizeof *st);
    st->name = malloc(name.len + 1);
    if (!st->name) {
        *nomem = true;
        return NULL;
    }
    if (name.len) memcpy(st->name, name.ptr, name.len);
    st->pid = pid;
    st->tid = tid;
    st->name_len = name.len;
    st->pos = -1;
    s->n++;
    return st;
}

/* Makes items[0..n) the stream's own list (copied). False when out of memory. */
static bool stream_store(mst_an_id_stream *st, const mst_an_str *items, size_t n) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += items[i].len;
    mst_an_str *ni = malloc((n ? n : 1) * sizeof *ni);
    char *nb = malloc(bytes ? bytes : 1);
    if (!ni || !nb) {
        free(ni);
        free(nb);
        return false;
    }
    char *c = nb;
    for (size_t i = 0; i < n; i++) {
        if (items[i].len) memcpy(c, items[i].ptr, items[i].len);
        ni[i] = (mst_an_str){c, items[i].len};
        c += items[i].len;
    }
    stream_drop_list(st);
    st->items = ni;
    st->blob = nb;
    st->n = n;
    return true;
}

bool mst_an_id_streams_keyframe(mst_an_id_streams *s, int64_t pid, int64_t tid, mst_an_str name,
                                const mst_an_str *items, size_t n) {
    bool nomem = false;
    mst_an_id_stream *st = stream_of(s, pid, tid, name, true, &nomem);
    if (!st) return !nomem;
    if (!stream_store(st, items, n)) {
        st->pos = -1;
        return false;
    }
    st->pos = 0;
    return true;
}

void mst_an_id_streams_forget(mst_an_id_streams *s, int64_t pid, int64_t tid, mst_an_str name) {
    bool nomem = false;
    mst_an_id_stream *st = stream_of(s, pid, tid, name, false, &nomem);
    if (st) st->pos = -1;
}

static uint64_t str_hash(const mst_an_str *x) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < x->len; i++) h = (h ^ (uint8_t)x->ptr[i]) * 0x100000001b3ull;
    return h ^ (h >> 31);
}

static bool str_eq(const mst_an_str *a, const mst_an_str *b) {
    return a->len == b->len && (!a->len || memcmp(a->ptr, b->ptr, a->len) == 0);
}

int mst_an_id_streams_delta(mst_an_id_streams *s, int64_t pid, int64_t tid, mst_an_str name,
                            int64_t pos, const mst_an_str *left, size_t n_left,
                            const mst_an_str *joined, size_t n_joined, const mst_an_str **out,
                            size_t *n_out) {
    bool nomem = false;
    mst_an_id_stream *st = stream_of(s, pid, tid, name, false, &nomem);
    if (!st) return 0;
    if (st->pos < 0 || pos != st->pos + 1) {
        st->pos = -1; /* what came between is lost: wait for a keyframe */
        return 0;
    }
    /* The set of left ids: slots hold index + 1 into left, in the scratch
     * block after the list being built. */
    size_t slots = 16;
    while (slots < 2 * n_left) slots *= 2;
    size_t need = st->n + n_joined + (slots * sizeof(size_t) + sizeof(mst_an_str) - 1) / sizeof(mst_an_str);
    if (!mst_an_grow((void **)&s->scratch, &s->scratch_cap, need, sizeof *s->scratch)) return -1;
    mst_an_str *list = s->scratch;
    size_t *set = (size_t *)(void *)(s->scratch + st->n + n_joined);
    memset(set, 0, slots * sizeof *set);
    for (size_t i = 0; i < n_left; i++) {
        size_t p = (size_t)str_hash(&left[i]) & (slots - 1);
        while (set[p]) p = (p + 1) & (slots - 1);
        set[p] = i + 1;
    }
    size_t n = 0;
    for (size_t i = 0; i < st->n; i++) {
        bool gone = false;
        for (size_t p = (size_t)str_hash(&st->items[i]) & (slots - 1); set[p]; p = (p + 1) & (slots - 1))
            if (str_eq(&left[set[p] - 1], &st->items[i])) {
                gone = true;
                break;
            }
        if (!gone) list[n++] = st->items[i];
    }
    for (size_t i = 0; i < n_joined; i++) list[n++] = joined[i];
    if (!stream_store(st, list, n)) {
        st->pos = -1;
        return -1;
    }
    st->pos = pos;
    *out = st->items;
    *n_out = st->n;
    return 1;
}
