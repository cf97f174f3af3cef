/*
 * read_pftrace.c — streamed reader of native Perfetto traces (see
 * read_pftrace.h for what it reads and skips). Owns the packet framing and
 * its buffer, the per-sequence interning tables, the track table, the
 * slices still open and the mapping of one slice onto mst_an_span.
 *
 * How: Trace.packet fields are framed by their tag and length, so the
 * reader only needs the bytes of one whole packet at a time (refilled in
 * MST_AN_INPUT_CHUNK pieces through input_file.h). A packet is decoded
 * with the bounds-checked pb_reader in two passes: first its sequence
 * fields, InternedData and descriptor (a packet's definitions may follow
 * its event on the wire), then its event.
 * A SLICE_BEGIN's name, annotations and ids are resolved at once (a later
 * packet may restart the interning) and copied into one block that lives
 * until the matching SLICE_END, the latest open begin on the same track,
 * as Perfetto pairs them. A delta-coded `request.ids` is rebuilt there
 * too (resolve_id_list, with pftrace_id_streams.h). Field numbers: wire/perfetto_trace_fields.h,
 * shared with the encoder.
 */
#include "analyze/read_pftrace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/grow.h"
#include "analyze/input_file.h"
#include "analyze/pftrace_id_streams.h"
#include "analyze/pid_roles.h"
#include "core/arena.h"
#include "wire/json_reader.h"
#include "wire/pb_reader.h"
#include "wire/perfetto_trace_fields.h"

#define MAX_PACKET (64u << 20)
#define MAX_SEQUENCES 16       /* packet sequences with interning state */
#define MAX_INTERNED (1u << 20) /* entries per sequence generation */
#define MAX_TRACKS (1u << 20)   /* process/thread/lane/counter tracks kept */
#define MAX_OPEN 65536u         /* slices begun and not yet ended */
#define JSON_DEPTH 16

#define DROPPED_COUNTER "forwarder.spans_dropped"

/* ------------------------------------------------------------ tables */

typedef struct intern_slot {
    uint64_t iid;            /* 0 = empty (iids start at 1) */
    uint32_t kind, len;
    size_t off;              /* into the sequence's blob */
} intern_slot;

typedef struct sequence {
    uint64_t id;
    intern_slot *slots;
    size_t cap, count;       /* cap: power of two */
    char *blob;
    size_t blob_len, blob_cap;
    mst_an_id_streams id_streams; /* request.ids written as deltas */
} sequence;

typedef enum track_kind { TK_THREAD = 1, TK_LANE, TK_DROPPED_COUNTER } track_kind;

typedef struct track_slot {
    uint64_t uuid;           /* 0 = empty */
    int64_t pid, tid;
    uint8_t kind;
} track_slot;


/* A begun slice: its span, with every pointer into the same block. */
typedef struct open_slice {
    uint64_t track;
    mst_an_span span;
} open_slice;

typedef struct reader {
    mst_an_input *in;
    uint64_t packets;
    /* output */
    uint32_t source;
    mst_an_span_fn fn;
    void *ctx;
    mst_an_input_info *info; /* in->info */
    /* state */
    sequence seqs[MAX_SEQUENCES];
    size_t n_seqs;
    track_slot *tracks;
    size_t tracks_cap, tracks_count;
    mst_an_pid_roles roles; /* from process track descriptors */
    open_slice **open;
    size_t n_open, open_cap;
    /* per slice scratch */
    mst_arena arena;
    mst_an_attr *attrs;
    size_t attrs_cap;
    mst_an_str *items;
    size_t items_cap, items_used;
    size_t *item_start;
    size_t item_start_cap;
    /* findings for the warnings */
    uint64_t bad_ids, unpaired_ends, open_dropped, unknown_sequences, intern_full;
    uint64_t tracks_full, lists_lost;
    uint64_t ids_lost;       /* interned trace/parent ids whose definition the file lacks */
    bool ids_unreadable;     /* this slice's request.ids annotations: one unresolved */
} reader;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

/* ---- interning */

static sequence *sequence_of(reader *r, uint64_t id) {
    for (size_t i = 0; i < r->n_seqs; i++)
        if (r->seqs[i].id == id) return &r->seqs[i];
    if (r->n_seqs == MAX_SEQUENCES) {
        r->unknown_sequences++;
        return NULL;
    }
    sequence *s = &r->seqs[r->n_seqs++];
    memset(s, 0, sizeof *s);
    s->id = id;
    return s;
}

static void sequence_clear(sequence *s) {
    if (s->slots) memset(s->slots, 0, s->cap * sizeof *s->slots);
    s->count = 0;
    s->blob_len = 0;
    mst_an_id_streams_clear(&s->id_streams);
}

static size_t intern_pos(const sequence *s, uint32_t kind, uint64_t iid) {
    return (size_t)mix64(iid * 64 + kind) & (s->cap - 1);
}

static bool intern_put(reader *r, sequence *s, uint32_t kind, uint64_t iid, const uint8_t *str,
                       size_t n) {
    if (iid == 0) return true;
    if (s->count >= MAX_INTERNED) {
        r->intern_full++;
        return true;
    }
    if ((s->count + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        intern_slot *ns = calloc(nc, sizeof *ns);
        if (!ns) return false;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slots[i].iid) continue;
            size_t p = (size_t)mix64(s->slots[i].iid * 64 + s->slots[i].kind) & (nc - 1);
            while (ns[p].iid) p = (p + 1) & (nc - 1);
            ns[p] = s->slots[i];
        }
        free(s->slots);
        s->slots = ns;
        s->cap = nc;
    }
    if (!mst_an_grow((void **)&s->blob, &s->blob_cap, s->blob_len + n + 1, 1)) return false;
    size_t p = intern_pos(s, kind, iid);
    while (s->slots[p].iid && !(s->slots[p].iid == iid && s->slots[p].kind == kind))
        p = (p + 1) & (s->cap - 1);
    if (!s->slots[p].iid) s->count++;
    if (n) memcpy(s->blob + s->blob_len, str, n);
    s->slots[p] = (intern_slot){iid, kind, (uint32_t)n, s->blob_len};
    s->blob_len += n;
    return true;
}

static bool intern_get(const sequence *s, uint32_t kind, uint64_t iid, mst_an_str *out) {
    if (!s || !s->cap || !iid) return false;
    for (size_t p = intern_pos(s, kind, iid);; p = (p + 1) & (s->cap - 1)) {
        const intern_slot *e = &s->slots[p];
        if (!e->iid) return false;
        if (e->iid == iid && e->kind == kind) {
            *out = (mst_an_str){s->blob + e->off, e->len};
            return true;
        }
    }
}

/* InternedData: the kinds a span slice uses. False only when out of memory. */
static bool read_interned(reader *r, sequence *s, const uint8_t *p, size_t n) {
    mst_pb_reader pr;
    mst_pb_reader_init(&pr, p, n);
    mst_pb_field f;
    while (mst_pb_next(&pr, &f) == MST_OK) {
        if (f.wire_type != 2 || (f.number != IN_EVENT_NAMES && f.number != IN_ANNOTATION_NAMES &&
                                 f.number != IN_STRING_VALUES))
            continue;
        mst_pb_reader er;
        mst_pb_reader_init(&er, f.data, f.len);
        mst_pb_field g;
        uint64_t iid = 0;
        const uint8_t *str = NULL;
        size_t len = 0;
        while (mst_pb_next(&er, &g) == MST_OK) {
            if (g.number == 1 && g.wire_type == 0) iid = g.u;
            else if (g.number == 2 && g.wire_type == 2) {
                str = g.data;
                len = g.len;
            }
        }
        if (str && !intern_put(r, s, f.number, iid, str, len)) return false;
    }
    return true;
}

/* ---- tracks */

static track_slot *track_find(reader *r, uint64_t uuid) {
    if (!r->tracks_cap || !uuid) return NULL;
    for (size_t p = (size_t)mix64(uuid) & (r->tracks_cap - 1);; p = (p + 1) & (r->tracks_cap - 1)) {
        if (r->tracks[p].uuid == uuid) return &r->tracks[p];
        if (!r->tracks[p].uuid) return NULL;
    }
}

static bool track_put(reader *r, uint64_t uuid, track_kind kind, int64_t pid, int64_t tid) {
    if (!uuid) return true;
    track_slot *t = track_find(r, uuid);
    if (t) {
        *t = (track_slot){uuid, pid, tid, (uint8_t)kind};
        return true;
    }
    if (r->tracks_count >= MAX_TRACKS) {
        r->tracks_full++;
        return true;
    }
    if ((r->tracks_count + 1) * 2 > r->tracks_cap) {
        size_t nc = r->tracks_cap ? r->tracks_cap * 2 : 256;
        track_slot *ns = calloc(nc, sizeof *ns);
        if (!ns) return false;
        for (size_t i = 0; i < r->tracks_cap; i++) {
            if (!r->tracks[i].uuid) continue;
            size_t p = (size_t)mix64(r->tracks[i].uuid) & (nc - 1);
            while (ns[p].uuid) p = (p + 1) & (nc - 1);
            ns[p] = r->tracks[i];
        }
        free(r->tracks);
        r->tracks = ns;
        r->tracks_cap = nc;
    }
    size_t p = (size_t)mix64(uuid) & (r->tracks_cap - 1);
    while (r->tracks[p].uuid) p = (p + 1) & (r->tracks_cap - 1);
    r->tracks[p] = (track_slot){uuid, pid, tid, (uint8_t)kind};
    r->tracks_count++;
    return true;
}

static bool read_descriptor(reader *r, const uint8_t *p, size_t n) {
    mst_pb_reader pr;
    mst_pb_reader_init(&pr, p, n);
    mst_pb_field f;
    uint64_t uuid = 0, parent = 0;
    const uint8_t *name = NULL, *proc = NULL, *thread = NULL;
    size_t name_len = 0, proc_len = 0, thread_len = 0;
    bool counter = false;
    while (mst_pb_next(&pr, &f) == MST_OK) {
        if (f.number == TD_UUID && f.wire_type == 0) uuid = f.u;
        else if (f.number == TD_PARENT_UUID && f.wire_type == 0) parent = f.u;
        else if (f.wire_type != 2) continue;
        else if (f.number == TD_NAME) name = f.data, name_len = f.len;
        else if (f.number == TD_PROCESS) proc = f.data, proc_len = f.len;
        else if (f.number == TD_THREAD) thread = f.data, thread_len = f.len;
        else if (f.number == TD_COUNTER) counter = true;
    }
    if (thread) {
        int64_t pid = 0, tid = 0;
        mst_pb_reader_init(&pr, thread, thread_len);
        while (mst_pb_next(&pr, &f) == MST_OK) {
            if (f.wire_type != 0) continue;
            if (f.number == THD_PID) pid = (int32_t)f.u;
            else if (f.number == THD_TID) tid = (int32_t)f.u;
        }
        return track_put(r, uuid, TK_THREAD, pid, tid);
    }
    if (proc) {
        int64_t pid = 0;
        const uint8_t *pname = NULL;
        size_t pname_len = 0;
        mst_pb_reader_init(&pr, proc, proc_len);
        while (mst_pb_next(&pr, &f) == MST_OK) {
            if (f.number == PD_PID && f.wire_type == 0) pid = (int32_t)f.u;
            else if (f.number == PD_PROCESS_NAME && f.wire_type == 2) pname = f.data, pname_len = f.len;
        }
        if (!pname) pname = name, pname_len = name_len;
        return pname ? mst_an_pid_roles_set(&r->roles, pid, (const char *)pname, pname_len) : true;
    }
    if (counter) {
        if (name && name_len == strlen(DROPPED_COUNTER) && memcmp(name, DROPPED_COUNTER, name_len) == 0)
            return track_put(r, uuid, TK_DROPPED_COUNTER, 0, 0);
        return true;
    }
    /* A child of a thread track: its "overlapping spans N" lanes. */
    const track_slot *pt = track_find(r, parent);
    if (pt && (pt->kind == TK_THREAD || pt->kind == TK_LANE))
        return track_put(r, uuid, TK_LANE, pt->pid, pt->tid);
    return true;
}

/* ------------------------------------------------------------ slices */

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Hex text to n bytes; "" is all zero (absent). */
static bool parse_id(const mst_an_str *s, uint8_t *out, size_t n) {
    memset(out, 0, n);
    if (s->len == 0) return true;
    if (s->len != 2 * n) return false;
    for (size_t k = 0; k < n; k++) {
        int a = hexval((uint8_t)s->ptr[2 * k]), b = hexval((uint8_t)s->ptr[2 * k + 1]);
        if (a < 0 || b < 0) {
            memset(out, 0, n);
            return false;
        }
        out[k] = (uint8_t)(a << 4 | b);
    }
    return true;
}

static bool str_is(const mst_an_str *s, const char *lit) {
    size_t n = strlen(lit);
    return s->len == n && memcmp(s->ptr, lit, n) == 0;
}

/* A legacy JSON value (how the forwarder writes arrays, objects and null):
 * an array of strings becomes a list (request.ids), as in the JSON reader;
 * anything else stays raw text. False only when out of memory. */
static bool json_value(reader *r, size_t idx, const uint8_t *p, size_t n) {
    mst_an_attr *a = &r->attrs[idx];
    a->type = MST_AN_VAL_OTHER;
    a->s = (mst_an_str){(const char *)p, n};
    mst_json_reader jr;
    mst_json_reader_init(&jr, p, n, JSON_DEPTH);
    if (mst_json_peek(&jr) != MST_JSON_ARRAY || !mst_json_array_begin(&jr)) return true;
    size_t first = r->items_used, k = 0;
    int more;
    while ((more = mst_json_array_next(&jr)) == 1) {
        mst_str s;
        if (mst_json_peek(&jr) != MST_JSON_STRING || !mst_json_read_str_slice(&jr, &r->arena, &s))
            return !jr.nomem;
        if (!mst_an_grow((void **)&r->items, &r->items_cap, first + k + 1, sizeof *r->items)) return false;
        r->items[first + k++] = (mst_an_str){s.ptr, s.len};
    }
    if (more < 0 || !mst_json_finish(&jr)) return !jr.nomem;
    a->type = MST_AN_VAL_STR_LIST;
    a->s = (mst_an_str){NULL, 0};
    a->n_items = k;
    r->item_start[idx] = first;
    r->items_used += k;
    return true;
}

/* An annotation's array_values that are all strings (inline or interned):
 * a list in attrs[idx] (request.ids and the other id lists the forwarder
 * writes this way). 1, 0 when an item is anything else, -1 out of memory. */
static int string_array(reader *r, const sequence *seq, size_t idx, const uint8_t *p, size_t len) {
    mst_pb_reader pr, ir;
    mst_pb_reader_init(&pr, p, len);
    mst_pb_field f, g;
    size_t first = r->items_used, k = 0;
    while (mst_pb_next(&pr, &f) == MST_OK) {
        if (f.number != DA_ARRAY_VALUES || f.wire_type != 2) continue;
        mst_an_str item;
        bool have = false;
        mst_pb_reader_init(&ir, f.data, f.len);
        while (mst_pb_next(&ir, &g) == MST_OK) {
            if (g.number == DA_STRING && g.wire_type == 2) {
                item = (mst_an_str){(const char *)g.data, g.len};
                have = true;
            } else if (g.number == DA_STRING_IID && g.wire_type == 0) {
                have = intern_get(seq, IN_STRING_VALUES, g.u, &item);
                if (!have) return 0;
            } else if (g.number != DA_NAME_IID && g.number != DA_NAME) {
                return 0;
            }
        }
        if (!have) return 0;
        if (!mst_an_grow((void **)&r->items, &r->items_cap, first + k + 1, sizeof *r->items)) return -1;
        r->items[first + k++] = item;
    }
    mst_an_attr *a = &r->attrs[idx];
    a->type = MST_AN_VAL_STR_LIST;
    a->s = (mst_an_str){NULL, 0};
    a->n_items = k;
    r->item_start[idx] = first;
    r->items_used += k;
    return 1;
}

/* One DebugAnnotation into span (ids, status) or attrs[*n]. Annotations
 * whose name or value cannot be resolved are left out. False only when out
 * of memory. */
static bool read_annotation(reader *r, const sequence *seq, const uint8_t *p, size_t len,
                            mst_an_span *span, size_t *n) {
    mst_pb_reader pr;
    mst_pb_reader_init(&pr, p, len);
    mst_pb_field f, val = {0};
    mst_an_str key = {NULL, 0};
    bool have_key = false, have_val = false;
    while (mst_pb_next(&pr, &f) == MST_OK) {
        if (f.number == DA_ARRAY_VALUES && f.wire_type == 2) {
            val = f; /* the items are read again below */
            have_val = true;
        } else if (f.number == DA_NAME_IID && f.wire_type == 0)
            have_key = intern_get(seq, IN_ANNOTATION_NAMES, f.u, &key);
        else if (f.number == DA_NAME && f.wire_type == 2) {
            key = (mst_an_str){(const char *)f.data, f.len};
            have_key = true;
        } else if (((f.number == DA_BOOL || f.number == DA_UINT || f.number == DA_INT ||
                     f.number == DA_STRING_IID) && f.wire_type == 0) ||
                   (f.number == DA_DOUBLE && f.wire_type == 1) ||
                   ((f.number == DA_STRING || f.number == DA_LEGACY_JSON) && f.wire_type == 2)) {
            val = f;
            have_val = true;
        }
    }
    if (!have_key || !have_val) return true;
    mst_an_str sv = {NULL, 0};
    bool resolved = true; /* an interned value is defined */
    if (val.number == DA_STRING) sv = (mst_an_str){(const char *)val.data, val.len};
    else if (val.number == DA_STRING_IID) resolved = intern_get(seq, IN_STRING_VALUES, val.u, &sv);
    bool is_str = val.number == DA_STRING || val.number == DA_STRING_IID;
    /* Ids are hex text, inline or (the trace id and the parent where they
     * recur) interned: docs/architecture.md "Trace and span ids". */
    if (str_is(&key, "trace_id") || str_is(&key, "span_id") || str_is(&key, "parent_span_id")) {
        if (!is_str) return true;
        if (!resolved) { /* its definition was in a packet the file lacks: absent, counted */
            r->ids_lost++;
            return true;
        }
        bool ok = key.len == 8   ? parse_id(&sv, span->trace_id, 16)
                  : key.len == 7 ? parse_id(&sv, span->span_id, 8)
                                 : parse_id(&sv, span->parent_span_id, 8);
        if (!ok) r->bad_ids++;
        return true;
    }
    if (!resolved) return true;
    if (str_is(&key, "span.status") || str_is(&key, "span.kind")) {
        if (key.len == 11 && (val.number == DA_INT || val.number == DA_UINT))
            span->status = (int)(int64_t)val.u;
        return true;
    }
    if (!mst_an_grow((void **)&r->attrs, &r->attrs_cap, *n + 1, sizeof *r->attrs) ||
        !mst_an_grow((void **)&r->item_start, &r->item_start_cap, *n + 1, sizeof *r->item_start))
        return false;
    mst_an_attr *a = &r->attrs[*n];
    memset(a, 0, sizeof *a);
    a->key = key;
    r->item_start[*n] = (size_t)-1;
    switch (val.number) {
    case DA_BOOL:
        a->type = MST_AN_VAL_BOOL;
        a->i = val.u != 0;
        a->d = (double)a->i;
        break;
    case DA_UINT:
        if (val.u > (uint64_t)INT64_MAX) {
            a->type = MST_AN_VAL_DOUBLE;
            a->d = (double)val.u;
        } else {
            a->type = MST_AN_VAL_INT;
            a->i = (int64_t)val.u;
            a->d = (double)a->i;
        }
        break;
    case DA_INT:
        a->type = MST_AN_VAL_INT;
        a->i = (int64_t)val.u;
        a->d = (double)a->i;
        break;
    case DA_DOUBLE: {
        double d;
        memcpy(&d, &val.u, sizeof d);
        a->type = MST_AN_VAL_DOUBLE;
        a->d = d;
        break;
    }
    case DA_LEGACY_JSON:
        if (!json_value(r, *n, val.data, val.len)) return false;
        break;
    case DA_ARRAY_VALUES: {
        int ok = string_array(r, seq, *n, p, len);
        if (ok < 0) return false;
        if (!ok) { /* not a list of strings (or an item's definition is missing): left out */
            if (key.len >= 11 && memcmp(key.ptr, "request.ids", 11) == 0) r->ids_unreadable = true;
            return true;
        }
        break;
    }
    default:
        a->type = MST_AN_VAL_STR;
        a->s = sv;
        break;
    }
    (*n)++;
    return true;
}

/* Copies a span (all it points at) into one block: an open_slice. */
static open_slice *clone_span(reader *r, uint64_t track, const mst_an_span *s) {
    size_t chars = s->name.len, n_items = 0;
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_an_attr *a = &s->attrs[i];
        chars += a->key.len + a->s.len;
        if (a->type == MST_AN_VAL_STR_LIST) {
            n_items += a->n_items;
            for (size_t k = 0; k < a->n_items; k++) chars += r->items[r->item_start[i] + k].len;
        }
    }
    size_t size = sizeof(open_slice) + s->n_attrs * sizeof(mst_an_attr) + n_items * sizeof(mst_an_str) + chars;
    open_slice *o = malloc(size);
    if (!o) return NULL;
    mst_an_attr *attrs = (mst_an_attr *)(o + 1);
    mst_an_str *items = (mst_an_str *)(attrs + s->n_attrs);
    char *c = (char *)(items + n_items);
    o->track = track;
    o->span = *s;
#define COPY_STR(dst, src)                                   \
    do {                                                     \
        (dst).len = (src).len;                               \
        (dst).ptr = c;                                       \
        if ((src).len) memcpy(c, (src).ptr, (src).len);      \
        c += (src).len;                                      \
    } while (0)
    COPY_STR(o->span.name, s->name);
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_an_attr *a = &s->attrs[i];
        attrs[i] = *a;
        COPY_STR(attrs[i].key, a->key);
        COPY_STR(attrs[i].s, a->s);
        if (a->type == MST_AN_VAL_STR_LIST) {
            attrs[i].items = items;
            for (size_t k = 0; k < a->n_items; k++) COPY_STR(items[k], r->items[r->item_start[i] + k]);
            items += a->n_items;
        } else {
            attrs[i].items = NULL;
            attrs[i].n_items = 0;
        }
    }
#undef COPY_STR
    o->span.attrs = attrs;
    o->span.role = (mst_an_str){NULL, 0};
    o->span.links = NULL;
    o->span.n_links = 0;
    return o;
}

static bool is_delta_part(const mst_an_str *k) {
    return str_is(k, "request.ids.delta") || str_is(k, "request.ids.left") || str_is(k, "request.ids.joined");
}

/* Drops a delta's annotations from attrs[0..*n). */
static void remove_delta(reader *r, size_t *n) {
    size_t w = 0;
    for (size_t i = 0; i < *n; i++) {
        if (is_delta_part(&r->attrs[i].key)) continue;
        r->attrs[w] = r->attrs[i];
        r->item_start[w++] = r->item_start[i];
    }
    *n = w;
}

static ptrdiff_t attr_index(const reader *r, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (str_is(&r->attrs[i].key, key)) return (ptrdiff_t)i;
    return -1;
}

static const mst_an_str *list_items(const reader *r, ptrdiff_t i, size_t *n) {
    *n = 0;
    if (i < 0 || r->attrs[i].type != MST_AN_VAL_STR_LIST) return NULL;
    *n = r->attrs[i].n_items;
    return r->items + r->item_start[i];
}

/* request.ids as the forwarder writes it (docs/architecture.md 1a): a
 * keyframe (`request.ids`, remembered for its stream) or a delta
 * (`request.ids.delta` = its place since the keyframe, `request.ids.left`,
 * `request.ids.joined`), rebuilt into `request.ids` as the span carried it.
 * A delta that does not follow its stream's last list gives no list
 * (counted). False only when out of memory. */
static bool resolve_id_list(reader *r, sequence *seq, const track_slot *t, mst_an_str name, size_t *n) {
    ptrdiff_t full = attr_index(r, *n, "request.ids"), pos = attr_index(r, *n, "request.ids.delta");
    if (!seq || (full < 0 && pos < 0 && !r->ids_unreadable)) return true;
    size_t k;
    const mst_an_str *items = list_items(r, full, &k);
    if (r->ids_unreadable || (pos < 0 && !items)) {
        /* A list this stream's next delta would follow cannot be read: wait for a keyframe. */
        mst_an_id_streams_forget(&seq->id_streams, t->pid, t->tid, name);
        if (pos >= 0) {
            r->lists_lost++;
            remove_delta(r, n);
        }
        return true;
    }
    if (pos < 0) return mst_an_id_streams_keyframe(&seq->id_streams, t->pid, t->tid, name, items, k);
    size_t n_left, n_joined, n_out = 0;
    const mst_an_str *left = list_items(r, attr_index(r, *n, "request.ids.left"), &n_left);
    const mst_an_str *joined = list_items(r, attr_index(r, *n, "request.ids.joined"), &n_joined);
    const mst_an_str *out = NULL;
    int got = r->attrs[pos].type == MST_AN_VAL_INT
                  ? mst_an_id_streams_delta(&seq->id_streams, t->pid, t->tid, name, r->attrs[pos].i,
                                            left, n_left, joined, n_joined, &out, &n_out)
                  : 0;
    if (got < 0) return false;
    if (!got) r->lists_lost++;
    /* The delta's three annotations go; the list takes the first's place. */
    size_t w = 0;
    for (size_t i = 0; i < *n; i++) {
        bool part = is_delta_part(&r->attrs[i].key);
        if (part && (size_t)pos == i && got) {
            if (!mst_an_grow((void **)&r->items, &r->items_cap, r->items_used + n_out, sizeof *r->items))
                return false;
            memcpy(r->items + r->items_used, out, n_out * sizeof *out);
            r->attrs[w] = (mst_an_attr){.key = {"request.ids", 11}, .type = MST_AN_VAL_STR_LIST,
                                        .n_items = n_out};
            r->item_start[w++] = r->items_used;
            r->items_used += n_out;
        } else if (!part) {
            r->attrs[w] = r->attrs[i];
            r->item_start[w++] = r->item_start[i];
        }
    }
    *n = w;
    return true;
}

/* A SLICE_BEGIN on a thread (or lane) track: resolved and kept open. */
static mst_status slice_begin(reader *r, sequence *seq, const track_slot *t, int64_t ts,
                              const uint8_t *ev, size_t ev_len) {
    mst_arena_reset_keep(&r->arena, 1u << 20);
    r->items_used = 0;
    r->ids_unreadable = false;
    mst_an_span span;
    memset(&span, 0, sizeof span);
    bool has_name = false;
    size_t n = 0;
    uint64_t flows = 0;
    mst_pb_reader pr;
    mst_pb_reader_init(&pr, ev, ev_len);
    mst_pb_field f;
    while (mst_pb_next(&pr, &f) == MST_OK) {
        if (f.number == TE_NAME_IID && f.wire_type == 0) {
            has_name = intern_get(seq, IN_EVENT_NAMES, f.u, &span.name);
        } else if (f.number == TE_NAME && f.wire_type == 2) {
            span.name = (mst_an_str){(const char *)f.data, f.len};
            has_name = true;
        } else if (f.number == TE_DEBUG_ANNOTATIONS && f.wire_type == 2) {
            if (!read_annotation(r, seq, f.data, f.len, &span, &n)) return MST_ERR_NOMEM;
        } else if ((f.number == TE_FLOW_IDS && f.wire_type == 1) ||
                   (f.number == TE_FLOW_IDS_OLD && f.wire_type == 0)) {
            flows++;
        }
    }
    if (!has_name) {
        r->info->skipped++;
        return MST_OK;
    }
    if (!resolve_id_list(r, seq, t, span.name, &n)) return MST_ERR_NOMEM;
    /* The slice's first flow id is its own (a later span linking here);
     * each further one is a link, an 'f' event in the JSON. */
    if (flows > 1) r->info->flows += flows - 1;
    span.attrs = r->attrs;
    span.n_attrs = n;
    span.start_ns = ts;
    span.pid = t->pid;
    span.tid = t->tid;
    span.source = r->source;
    if (r->n_open >= MAX_OPEN) {
        /* Begins never ended (not the forwarder's layout): the oldest go. */
        free(r->open[0]);
        memmove(r->open, r->open + 1, (r->n_open - 1) * sizeof *r->open);
        r->n_open--;
        r->open_dropped++;
    }
    if (!mst_an_grow((void **)&r->open, &r->open_cap, r->n_open + 1, sizeof *r->open)) return MST_ERR_NOMEM;
    open_slice *o = clone_span(r, t->uuid, &span);
    if (!o) return MST_ERR_NOMEM;
    r->open[r->n_open++] = o;
    return MST_OK;
}

/* A SLICE_END: closes the latest open begin on the track; the span goes
 * to the sink. */
static mst_status slice_end(reader *r, uint64_t track, int64_t ts) {
    size_t i = r->n_open;
    while (i > 0 && r->open[i - 1]->track != track) i--;
    if (i == 0) {
        r->unpaired_ends++;
        return MST_OK;
    }
    open_slice *o = r->open[i - 1];
    memmove(r->open + i - 1, r->open + i, (r->n_open - i) * sizeof *r->open);
    r->n_open--;
    mst_an_span *s = &o->span;
    s->end_ns = ts > s->start_ns ? ts : s->start_ns;
    const mst_an_attr *ra = mst_an_span_attr(s, "process.role", 12);
    if (ra && ra->type == MST_AN_VAL_STR) {
        s->role = ra->s;
    } else {
        const mst_an_pid_role *re = mst_an_pid_roles_get(&r->roles, s->pid);
        if (re) s->role = (mst_an_str){re->role, re->len};
    }
    r->info->spans++;
    mst_status st = r->fn(r->ctx, s);
    free(o);
    return st;
}

static mst_status read_event(reader *r, sequence *seq, int64_t ts, const uint8_t *ev,
                             size_t ev_len) {
    mst_pb_reader pr;
    mst_pb_reader_init(&pr, ev, ev_len);
    mst_pb_field f;
    uint64_t type = 0, track = 0;
    int64_t counter = -1;
    while (mst_pb_next(&pr, &f) == MST_OK) {
        if (f.wire_type == 0 && f.number == TE_TYPE) type = f.u;
        else if (f.wire_type == 0 && f.number == TE_TRACK_UUID) track = f.u;
        else if (f.wire_type == 0 && f.number == TE_COUNTER_VALUE) counter = (int64_t)f.u;
        else if (f.wire_type == 1 && f.number == TE_DOUBLE_COUNTER_VALUE) {
            double d;
            memcpy(&d, &f.u, sizeof d);
            if (d >= 0 && d < 9e18) counter = (int64_t)d;
        }
    }
    const track_slot *t = track_find(r, track);
    if (!t) return MST_OK; /* request tracks, engine counters, other producers' tracks */
    if (t->kind == TK_DROPPED_COUNTER) {
        if (type == TYPE_COUNTER && counter > r->info->spans_dropped) r->info->spans_dropped = counter;
        return MST_OK;
    }
    if (type == TYPE_SLICE_BEGIN) return slice_begin(r, seq, t, ts, ev, ev_len);
    if (type == TYPE_SLICE_END) return slice_end(r, track, ts);
    return MST_OK;
}

/* One TracePacket. A packet that is not valid protobuf is counted and
 * skipped; only out of memory or a sink error stop the read. */
static mst_status read_packet(reader *r, const uint8_t *p, size_t n) {
    mst_pb_reader pr;
    mst_pb_reader_init(&pr, p, n);
    mst_pb_field f;
    mst_status st;
    uint64_t ts = 0, seq_id = 0, flags = 0;
    const uint8_t *interned = NULL, *desc = NULL, *ev = NULL;
    size_t interned_len = 0, desc_len = 0, ev_len = 0;
    while ((st = mst_pb_next(&pr, &f)) == MST_OK) {
        if (f.wire_type == 0) {
            if (f.number == PKT_TIMESTAMP) ts = f.u;
            else if (f.number == PKT_SEQUENCE_ID) seq_id = f.u;
            else if (f.number == PKT_SEQUENCE_FLAGS) flags = f.u;
        } else if (f.wire_type == 2) {
            if (f.number == PKT_INTERNED_DATA) interned = f.data, interned_len = f.len;
            else if (f.number == PKT_TRACK_DESCRIPTOR) desc = f.data, desc_len = f.len;
            else if (f.number == PKT_TRACK_EVENT) ev = f.data, ev_len = f.len;
        }
    }
    if (st != MST_ERR_CLOSED) {
        r->info->skipped++;
        return MST_OK;
    }
    sequence *seq = NULL;
    if (interned || ev || (flags & SEQ_INCREMENTAL_STATE_CLEARED)) seq = sequence_of(r, seq_id);
    if (seq && (flags & SEQ_INCREMENTAL_STATE_CLEARED)) sequence_clear(seq);
    if (seq && interned && !read_interned(r, seq, interned, interned_len)) return MST_ERR_NOMEM;
    if (desc && !read_descriptor(r, desc, desc_len)) return MST_ERR_NOMEM;
    if (ev) return read_event(r, seq, ts > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ts, ev, ev_len);
    return MST_OK;
}

/* ------------------------------------------------------------ framing */

/* Makes `need` bytes from pos available unless the input ends first.
 * False on a read error or out of memory (err set). */
static bool ensure(reader *r, size_t need, char *err, size_t err_size) {
    mst_an_input *in = r->in;
    while (in->len - in->pos < need && !in->eof)
        if (!mst_an_input_more(in, need, err, err_size)) return false;
    return true;
}

/* The framing broke (not a Trace.packet field): what was read is
 * analysed, unless nothing was (then it is not a trace). */
static mst_status broken(reader *r, const char *why, char *err, size_t err_size) {
    uint64_t at = r->in->base + r->in->pos;
    if (r->packets == 0) {
        snprintf(err, err_size, "%s: not a Perfetto protobuf trace: %s at byte %llu", r->info->name, why,
                 (unsigned long long)at);
        return MST_ERR_PARSE;
    }
    mst_an_input_broken(r->info, why, at);
    return MST_OK;
}

static mst_status cut(reader *r, char *err, size_t err_size) {
    if (r->packets == 0) {
        snprintf(err, err_size,
                 "%s: not a complete Perfetto protobuf trace: the file ends inside its first "
                 "packet (%llu bytes)",
                 r->info->name, (unsigned long long)(r->in->base + r->in->len));
        return MST_ERR_PARSE;
    }
    mst_an_input_cut(r->info, "inside a packet");
    return MST_OK;
}

static mst_status run(reader *r, char *err, size_t err_size) {
    mst_an_input *in = r->in;
    if (!ensure(r, 1, err, err_size)) return MST_ERR_IO;
    if (in->len == 0) {
        snprintf(err, err_size, "%s: empty file (no trace packets)", r->info->name);
        return MST_ERR_PARSE;
    }
    for (;;) {
        if (!ensure(r, 16, err, err_size)) return MST_ERR_IO;
        size_t avail = in->len - in->pos;
        if (avail == 0) return MST_OK;
        mst_pb_reader pr;
        mst_pb_reader_init(&pr, in->buf + in->pos, avail);
        uint64_t tag, len;
        if (mst_pb_read_varint(&pr, &tag) != MST_OK)
            return avail < 11 && in->eof ? cut(r, err, err_size) : broken(r, "a bad field tag", err, err_size);
        if (tag != (TRACE_PACKET << 3 | 2))
            return broken(r, "not a Trace.packet field", err, err_size);
        if (mst_pb_read_varint(&pr, &len) != MST_OK)
            return avail < 16 && in->eof ? cut(r, err, err_size) : broken(r, "a bad packet length", err, err_size);
        if (len > MAX_PACKET) return broken(r, "a packet larger than 64 MiB", err, err_size);
        size_t hdr = (size_t)(pr.p - (in->buf + in->pos));
        if (!ensure(r, hdr + (size_t)len, err, err_size)) return MST_ERR_IO;
        if (in->len - in->pos < hdr + (size_t)len) return cut(r, err, err_size);
        mst_status st = read_packet(r, in->buf + in->pos + hdr, (size_t)len);
        if (st != MST_OK) return mst_an_input_stopped(in, st, err, err_size);
        r->packets++;
        in->pos += hdr + (size_t)len;
    }
}

static mst_status run_checked(reader *r, char *err, size_t err_size) {
    mst_status st = run(r, err, err_size);
    if (st != MST_OK) return st;
    mst_an_input_info *in = r->info;
    if (r->n_open)
        mst_an_input_warn(in, "%zu slices begun but never ended (the file was cut between a span's "
                          "begin and end) left out", r->n_open);
    if (r->open_dropped || r->unpaired_ends)
        mst_an_input_warn(in, "%llu slice begins and %llu ends without a partner left out",
                          (unsigned long long)r->open_dropped, (unsigned long long)r->unpaired_ends);
    if (r->bad_ids)
        mst_an_input_warn(in, "%llu malformed trace/span ids (read as absent)",
                          (unsigned long long)r->bad_ids);
    if (in->skipped)
        mst_an_input_warn(in, "%llu packets or slices skipped (not valid TracePackets, or slices "
                          "without a name)", (unsigned long long)in->skipped);
    if (r->unknown_sequences)
        mst_an_input_warn(in, "more than %d packet sequences: %llu packets of the others ignored",
                          MAX_SEQUENCES, (unsigned long long)r->unknown_sequences);
    if (r->lists_lost)
        mst_an_input_warn(in, "%llu request-id lists left out: written as a change to a list the "
                          "file does not hold (a packet lost, or a file read from the middle)",
                          (unsigned long long)r->lists_lost);
    if (r->ids_lost)
        mst_an_input_warn(in, "%llu trace/span ids read as absent: interned in a packet the file "
                          "does not hold (a packet lost, or a file read from the middle)",
                          (unsigned long long)r->ids_lost);
    if (r->intern_full || r->tracks_full)
        mst_an_input_warn(in, "interning or track table full: %llu names and %llu tracks ignored",
                          (unsigned long long)r->intern_full, (unsigned long long)r->tracks_full);
    return st;
}

static void reader_init(reader *r, mst_an_input *in, uint32_t source, mst_an_span_fn fn, void *ctx) {
    memset(r, 0, sizeof *r);
    r->in = in;
    r->source = source;
    r->fn = fn;
    r->ctx = ctx;
    r->info = in->info;
    mst_arena_init(&r->arena);
}

static void reader_free(reader *r) {
    for (size_t i = 0; i < r->n_seqs; i++) {
        free(r->seqs[i].slots);
        free(r->seqs[i].blob);
        mst_an_id_streams_free(&r->seqs[i].id_streams);
    }
    free(r->tracks);
    mst_an_pid_roles_free(&r->roles);
    for (size_t i = 0; i < r->n_open; i++) free(r->open[i]);
    free(r->open);
    mst_arena_release(&r->arena);
    free(r->attrs);
    free(r->items);
    free(r->item_start);
}

bool mst_an_pftrace_sniff(const void *head, size_t n) {
    const uint8_t *p = head;
    if (n == 0 || p[0] != 0x0a) return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
        return c != '[' && c != '{';
    }
    return false; /* only blanks: the JSON reader says "empty" */
}

bool mst_an_pftrace_file_sniff(const char *path) {
    char ignored[8];
    int fd = mst_an_input_open(path, NULL, ignored, sizeof ignored); /* the reader says why */
    if (fd < 0) return false;
    uint8_t head[64];
    size_t n = 0;
    while (n < sizeof head) {
        ssize_t k = read(fd, head + n, sizeof head - n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
    return mst_an_pftrace_sniff(head, n);
}

static mst_status parse(mst_an_input *in, uint32_t source, mst_an_span_fn fn, void *ctx, char *err,
                        size_t err_size) {
    reader r;
    reader_init(&r, in, source, fn, ctx);
    mst_status st = run_checked(&r, err, err_size);
    reader_free(&r);
    return st;
}

const mst_an_format mst_an_pftrace_format = {"pftrace", parse};
