/*
 * ids_sender.c — per-connection stream table and keyframe-or-change
 * decision of the traced process (see ids_sender.h).
 *
 * A stream is found by a linear scan: a process has a handful (one per
 * span name with a list, per thread), and the table is bounded. A stream's
 * name is kept up to STREAM_NAME_MAX bytes; a longer name gets no stream
 * (its lists go whole), so two names never share one by being cut alike.
 */
#include "wire/ids_sender.h"

#include <stdlib.h>
#include <string.h>

#include "wire/ids_change.h"

#define STREAM_NAME_MAX 96u

typedef struct stream {
    char name[STREAM_NAME_MAX];
    size_t name_len;
    int64_t tid;
    uint64_t seq;          /* last sequence number sent            */
    uint64_t since_key;    /* lists sent since the last keyframe    */
    bool have_list;        /* `list` is what the forwarder holds    */
    mst_ids_list list;
} stream;

struct mst_ids_sender {
    stream streams[MST_IDS_MAX_STREAMS];
    uint32_t n_streams;
    uint32_t left[MST_IDS_MAX_ITEMS];
};

mst_ids_sender *mst_ids_sender_new(void) {
    return calloc(1, sizeof(mst_ids_sender));
}

void mst_ids_sender_free(mst_ids_sender *s) {
    if (!s) return;
    for (uint32_t i = 0; i < s->n_streams; i++) mst_ids_list_free(&s->streams[i].list);
    free(s);
}

void mst_ids_sender_reset(mst_ids_sender *s) {
    for (uint32_t i = 0; i < s->n_streams; i++) s->streams[i].have_list = false;
}

static stream *find_stream(mst_ids_sender *s, const char *name, size_t name_len, int64_t tid) {
    for (uint32_t i = 0; i < s->n_streams; i++) {
        stream *st = &s->streams[i];
        if (st->tid == tid && st->name_len == name_len && memcmp(st->name, name, name_len) == 0) return st;
    }
    if (s->n_streams == MST_IDS_MAX_STREAMS || name_len > STREAM_NAME_MAX) return NULL;
    stream *st = &s->streams[s->n_streams++];
    memcpy(st->name, name, name_len);
    st->name_len = name_len;
    st->tid = tid;
    mst_ids_list_init(&st->list, 0, 0);
    return st;
}

/* Remembers items as the stream's list; false when it cannot be kept
 * (too long, out of memory): then the forwarder must not be told to keep
 * it either (and the stream's list is gone). */
static bool remember(stream *st, const mst_str *items, uint32_t n, const mst_ids_send *change) {
    /* A change found: the list is edited in place (the kept items' bytes
     * stay where they are) instead of copied item by item (the same list). */
    return change ? mst_ids_list_edit(&st->list, change->left, change->n_left, items + change->joined_from,
                                      n - change->joined_from)
                  : mst_ids_list_set(&st->list, items, n);
}

void mst_ids_sender_next(mst_ids_sender *s, const char *name, size_t name_len, int64_t tid,
                         const mst_str *items, uint32_t n, mst_ids_send *out) {
    memset(out, 0, sizeof *out);
    if (n < MST_IDS_MIN_ITEMS) return; /* whole, outside any stream; the stream's base stays */
    stream *st = find_stream(s, name, name_len, tid);
    if (!st || n > MST_IDS_MAX_ITEMS) {
        if (st) st->have_list = false;
        return; /* whole, outside any stream */
    }
    bool key = !st->have_list || st->since_key + 1 >= MST_IDS_KEYFRAME_EVERY;
    if (!key) {
        out->joined_from = mst_ids_change_find(&st->list, items, n, s->left, &out->n_left);
        uint32_t size = out->n_left + (n - out->joined_from);
        key = size > n / 2; /* then the whole list is about as small */
    }
    out->left = s->left;
    if (!remember(st, items, n, key ? NULL : out)) {
        st->have_list = false;
        memset(out, 0, sizeof *out);
        return;
    }
    st->have_list = true;
    st->since_key = key ? 0 : st->since_key + 1;
    out->in_stream = true;
    out->change = !key;
    out->stream = (uint32_t)(st - s->streams);
    out->seq = ++st->seq;
    out->left = key ? NULL : s->left;
    if (key) out->n_left = out->joined_from = 0;
}
