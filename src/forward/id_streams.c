/*
 * id_streams.c — per-connection request id streams of the forwarder (see
 * id_streams.h for the rules).
 *
 * Layout: connections in a chained hash by id (a daemon has tens to a few
 * thousand); each holds up to MST_IDS_MAX_STREAMS streams, allocated on a
 * stream's first keyframe. A stream keeps one list and applies each change
 * to it in place (the items before the first that left stay, each later
 * run of kept items moves down once), so a steady stream allocates
 * nothing and copies little. Items are kept as their
 * JSON string text with '[' before and ',' between them, so the rebuilt
 * list is that text and a ']': the bytes a whole list would have had, where
 * they are (the span batch copies them next to its span, once).
 */
#include "forward/id_streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/ids_change.h"
#include "wire/ids_sender.h" /* MST_IDS_MAX_STREAMS */
#include "wire/json_reader.h"

#define N_BUCKETS 256u

typedef struct stream {
    int64_t seq;           /* the base's sequence number           */
    bool valid;            /* `cur` is the base                    */
    size_t bytes;          /* charged to the table's budget        */
    mst_ids_list cur;
} stream;

typedef struct mst_id_conn {
    mst_id_streams *table;
    uint64_t id;
    struct mst_id_conn *next;
    stream *streams[MST_IDS_MAX_STREAMS];
} mst_id_conn;

struct mst_id_streams {
    size_t budget;
    mst_id_conn *buckets[N_BUCKETS];
    mst_id_streams_stats st;
};

mst_id_streams *mst_id_streams_new(size_t budget) {
    mst_id_streams *t = calloc(1, sizeof *t);
    if (t) t->budget = budget ? budget : MST_ID_STREAMS_DEFAULT_BUDGET;
    return t;
}

static void free_conn(mst_id_streams *t, mst_id_conn *c) {
    for (uint32_t i = 0; i < MST_IDS_MAX_STREAMS; i++) {
        stream *s = c->streams[i];
        if (!s) continue;
        t->st.bytes -= s->bytes;
        mst_ids_list_free(&s->cur);
        free(s);
    }
    free(c);
}

void mst_id_streams_free(mst_id_streams *t) {
    if (!t) return;
    for (uint32_t b = 0; b < N_BUCKETS; b++)
        for (mst_id_conn *c = t->buckets[b], *next; c; c = next) {
            next = c->next;
            free_conn(t, c);
        }
    free(t);
}

/* The state of connection conn_id; made when `create` (NULL when out of
 * memory or not made). */
static mst_id_conn *conn_of(mst_id_streams *t, uint64_t conn_id, bool create) {
    if (!t) return NULL;
    mst_id_conn **head = &t->buckets[conn_id % N_BUCKETS];
    for (mst_id_conn *c = *head; c; c = c->next)
        if (c->id == conn_id) return c;
    if (!create) return NULL;
    mst_id_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->table = t;
    c->id = conn_id;
    c->next = *head;
    *head = c;
    return c;
}

void mst_id_streams_drop_conn(mst_id_streams *t, uint64_t conn_id) {
    for (mst_id_conn **pp = &t->buckets[conn_id % N_BUCKETS]; *pp; pp = &(*pp)->next)
        if ((*pp)->id == conn_id) {
            mst_id_conn *c = *pp;
            *pp = c->next;
            free_conn(t, c);
            return;
        }
}

void mst_id_streams_get_stats(const mst_id_streams *t, mst_id_streams_stats *out) { *out = t->st; }

/* Re-charges a stream's memory after its lists changed; false (the lists
 * freed, the base lost) when the table is then over its budget. */
static bool charge(mst_id_streams *t, stream *s) {
    size_t now = mst_ids_list_bytes(&s->cur);
    t->st.bytes = t->st.bytes - s->bytes + now;
    s->bytes = now;
    if (t->st.bytes <= t->budget) return true;
    t->st.bytes -= s->bytes;
    s->bytes = 0;
    mst_ids_list_free(&s->cur);
    s->valid = false;
    return false;
}

/* The keyframe's items (JSON strings) into s->cur; false when the list
 * cannot be a base (an item that is not a string, past the limits, out of
 * memory). The packet decoder already validated the value. */
static bool keep_list(stream *s, const mst_json_slice *v) {
    mst_ids_list_clear(&s->cur);
    mst_json_reader r;
    mst_json_reader_init(&r, v->ptr, v->len, 2);
    if (!mst_json_array_begin(&r)) return false;
    for (;;) {
        int more = mst_json_array_next(&r);
        if (more <= 0) return more == 0;
        mst_json_slice item;
        if (mst_json_peek(&r) != MST_JSON_STRING || !mst_json_read_raw(&r, &item)) return false;
        if (!mst_ids_list_push(&s->cur, item.ptr, item.len)) return false;
    }
}

static mst_status keyframe(mst_id_conn *c, mst_pf_span *sp, mst_ids_outcome *outcome) {
    *outcome = MST_IDS_NOT_KEPT;
    if (!c) return MST_OK;
    mst_id_streams *t = c->table;
    stream *s = NULL;
    if (sp->ids_stream < (int64_t)MST_IDS_MAX_STREAMS) {
        s = c->streams[sp->ids_stream];
        if (!s && (s = c->streams[sp->ids_stream] = calloc(1, sizeof *s))) mst_ids_list_init(&s->cur, ',', '[');
    }
    if (s) { /* charged whatever keep_list did to the memory */
        bool kept = keep_list(s, &sp->attrs[sp->ids_attr].value);
        s->valid = charge(t, s) && kept;
    }
    if (!s || !s->valid) {
        t->st.not_kept++;
        return MST_OK;
    }
    s->seq = sp->ids_seq;
    t->st.keyframes++;
    *outcome = MST_IDS_KEYFRAME;
    sp->ids_origin = (mst_pf_ids_origin){.valid = true, .conn = c->id, .stream = sp->ids_stream,
                                         .seq = sp->ids_seq};
    return MST_OK;
}

/* The span keeps no list: its request.ids attribute is taken out. */
static void remove_list(mst_pf_span *sp) {
    memmove(&sp->attrs[sp->ids_attr], &sp->attrs[sp->ids_attr + 1],
            (sp->n_attrs - sp->ids_attr - 1) * sizeof *sp->attrs);
    sp->n_attrs--;
}

static mst_status change(mst_id_streams *t, mst_id_conn *c, mst_pf_span *sp, mst_arena *arena,
                         mst_ids_outcome *outcome, char *err, size_t err_size) {
    stream *s = c && sp->ids_stream < (int64_t)MST_IDS_MAX_STREAMS ? c->streams[sp->ids_stream] : NULL;
    mst_pf_kv *kv = &sp->attrs[sp->ids_attr];
    mst_ids_change ch;
    mst_status st = mst_ids_change_parse(kv->value.ptr, kv->value.len, arena, &ch, err, err_size);
    if (st == MST_OK && s && s->valid && s->seq == sp->ids_seq - 1) {
        uint32_t n_base = s->cur.n;
        st = mst_ids_change_apply(&s->cur, &ch, err, err_size);
        bool json_ok = false;
        if (st == MST_OK) {
            s->seq = sp->ids_seq;
            json_ok = mst_ids_list_json(&s->cur, &kv->value);
        }
        bool fits = charge(t, s); /* whatever the apply did to the memory */
        if (st == MST_OK) {
            if (!fits) {
                s = NULL; /* the list is lost to the budget: this span's too */
            } else if (!json_ok) {
                s->valid = false;
                snprintf(err, err_size, "out of memory rebuilding a request.ids list");
                return MST_ERR_NOMEM;
            } else {
                t->st.changes++;
                *outcome = MST_IDS_CHANGE;
                /* what was kept and what joined, for the outputs */
                sp->ids_origin = (mst_pf_ids_origin){true,       true,          c->id,
                                                     sp->ids_stream, sp->ids_seq, n_base,
                                                     ch.n_left,  s->cur.n - ch.n_joined, ch.left};
                return MST_OK;
            }
        }
    }
    if (st != MST_OK) { /* malformed: rejected, and the client's base is gone here */
        if (s) s->valid = false;
        if (t) t->st.bad_changes++;
        return st;
    }
    if (s) s->valid = false;
    if (t) t->st.no_base++;
    remove_list(sp);
    *outcome = MST_IDS_NO_BASE;
    return MST_OK;
}

mst_status mst_id_streams_apply(mst_id_streams *t, uint64_t conn_id, mst_pf_span *sp, mst_arena *arena,
                                mst_ids_outcome *outcome, char *err, size_t err_size) {
    *outcome = MST_IDS_NONE;
    if (!sp->ids_fields) return MST_OK;
    mst_id_conn *c = conn_of(t, conn_id, !sp->ids_change);
    if (!c && t && !sp->ids_change) t->st.not_kept++; /* out of memory */
    return sp->ids_change ? change(t, c, sp, arena, outcome, err, err_size) : keyframe(c, sp, outcome);
}
