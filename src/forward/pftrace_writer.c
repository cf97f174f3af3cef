/*
 * pftrace_writer.c — native Perfetto output (pftrace_writer.h). Owns the
 * output file, the interning state of the one packet sequence and the set
 * of track descriptors already written.
 *
 * Interning: span names, categories and annotation names get sequence-
 * scoped ids (iids); a packet that uses a new one carries its definition in
 * its own InternedData, so the definition always precedes every use in the
 * file. The table is bounded (INTERN_MAX): when a packet could overflow it,
 * the table is emptied and that packet says SEQ_INCREMENTAL_STATE_CLEARED,
 * which restarts interning in the reader too. The same restart happens when
 * the output queue dropped data after failing writes (a lost definition
 * must not leave later ids dangling) — checked at every hand-off.
 *
 * Tracks: a descriptor is written before the first event on its track; the
 * set of written ones is bounded too (cleared when full; a descriptor
 * written twice is harmless).
 */
#include "forward/pftrace_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/log.h"
#include "forward/out_queue.h"
#include "forward/hash_mix.h"
#include "forward/output_path.h"
#include "forward/span_args.h"
#include "forward/timeline.h"
#include "wire/json_reader.h"
#include "wire/perfetto_trace_encode.h"

#define MAX_UNWRITTEN_BYTES (64u << 20)
#define DEFAULT_SERVICE_NAME "ms_service_profiler"
#define DEFAULT_CATEGORY "Tracing"
#define INTERN_MAX 8192u                 /* entries before a restart */
#define INTERN_SLOTS (INTERN_MAX * 2u)
#define TRACKS_MAX 65536u
/* String values are interned from their second sighting (a direct-mapped
 * table of value hashes), so repeated values (module, class, model names)
 * are written once while unique ones (ids) never fill the intern table. */
#define VSEEN_SLOTS 4096u
#define VALUE_INTERN_MAX_LEN 128u
#define TRACK_SLOTS (TRACKS_MAX * 2u)
/* Annotations a span adds besides its attributes: ids, kind, status, service. */
#define FIXED_ANNOTATIONS 6
#define ARENA_KEEP_BYTES (16u * 1024u)
#define REQUESTS_TRACK_NAME "Requests"
#define FORWARDER_PROCESS_NAME "mstrace forward"

/* Packets follow each other with nothing between or after them. */
static const mst_outq_layout k_packet_stream = {.tail = "", .tail_len = 0, .first_skip = 0};

typedef struct intern_entry {
    uint32_t off, len;     /* into blob */
    uint32_t hash;
    uint8_t kind;
    uint64_t iid;
} intern_entry;

/* A definition the packet being built must carry; the text is at blob+off
 * (an offset: blob may grow while the packet's names are interned). */
typedef struct pending_intern {
    unsigned kind;
    uint32_t off, len;
    uint64_t iid;
} pending_intern;

struct mst_pftrace_writer {
    int fd;
    int64_t default_pid;
    mst_outq *out;
    mst_buf *buf;
    uint64_t full_dropped;
    uint64_t seen_out_drops;      /* outq spans_dropped at the last check */
    uint64_t buffered_spans, buffered_flows;
    /* interning */
    uint64_t *islots;             /* hash << 32 | index + 1 */
    intern_entry *ie;
    uint32_t icount;
    uint64_t next_iid[MST_PFT_INTERN_KINDS];
    uint32_t *vseen;              /* value hashes seen once (VSEEN_SLOTS) */
    uint64_t *val_iids;           /* per attribute: interned string value or 0 */
    mst_buf blob;
    bool clear_pending;           /* next interning packet restarts the state */
    uint64_t intern_gen;          /* bumped by every restart */
    uint64_t fixed_gen;           /* intern_gen when fixed_iid was filled (0: never) */
    uint64_t fixed_iid[6];        /* the fixed annotation names (FIXED_ANNOTATIONS) */
    pending_intern *pend;         /* new definitions for the packet being built */
    size_t n_pend;
    uint64_t *ann_iids;           /* per attribute of the span being written */
    /* tracks: uuid | 1 bit "named" kept in a parallel array */
    uint64_t *tslots;
    uint8_t *tnamed;
    uint32_t tcount;
    struct thread_lanes *lanes;   /* LANE_THREADS slots (see pick_lane) */
    mst_timeline *tl;
    mst_arena arena;
    mst_buf scratch;
    mst_chrome_stats st;
};

/* ------------------------------------------------------------ ids */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x ? x : 1;
}


/* Hash of n bytes from the first and last 8 (and n): constant time for
 * the names and keys of every span. Strings sharing both ends and length
 * collide and are told apart by the table's memcmp. Not seeded: the table
 * it indexes is bounded and restarts when full, so crafted collisions cost
 * at most longer probes in a table of INTERN_SLOTS. */
static uint64_t bytes_hash(const char *s, size_t n) {
    uint64_t a = 0, b = 0;
    if (n >= 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
    } else if (n) {
        memcpy(&a, s, n);
    }
    return mst_mum(a ^ 0xe7037ed1a0b428dbull ^ n, b ^ 0x8ebc6af09c88c6e3ull);
}

/* Exact hash of every byte (track ids, where a collision would merge two
 * tracks). */
static uint64_t bytes_hash_full(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = mst_mum(h ^ w, 0xe7037ed1a0b428dbull);
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i);
        h = mst_mum(h ^ w, 0x8ebc6af09c88c6e3ull);
    }
    return h;
}

/* Track uuids: a kind tag and the identifying values, mixed. */
static uint64_t process_uuid(int64_t pid) { return mix64(0x1ull << 56 ^ (uint64_t)pid); }
static uint64_t thread_uuid(int64_t pid, int64_t tid) {
    return mix64((0x2ull << 56) ^ mix64((uint64_t)pid) ^ (uint64_t)tid);
}
static uint64_t counter_uuid(int64_t pid, const char *name) {
    return mix64((0x3ull << 56) ^ mix64((uint64_t)pid) ^ bytes_hash_full(name, strlen(name)));
}
static uint64_t requests_uuid(void) { return mix64(0x4ull << 56); }
static uint64_t request_uuid(const char *id, size_t n) {
    return mix64((0x5ull << 56) ^ bytes_hash_full(id, n));
}

/* ------------------------------------------------------------ interning */

static void intern_reset(mst_pftrace_writer *w) {
    memset(w->islots, 0, INTERN_SLOTS * sizeof *w->islots);
    w->icount = 0;
    mst_buf_reset(&w->blob);
    for (int k = 0; k < MST_PFT_INTERN_KINDS; k++) w->next_iid[k] = 1;
    w->clear_pending = true;
    w->intern_gen++;
}

/* The iid of (kind, s); a new one is queued in w->pend for the packet. */
static uint64_t intern(mst_pftrace_writer *w, unsigned kind, const char *s, size_t n) {
    uint64_t h64 = bytes_hash(s, n) ^ kind;
    uint32_t h = (uint32_t)(h64 ^ (h64 >> 32));
    uint32_t mask = INTERN_SLOTS - 1;
    uint32_t pos = h & mask;
    for (;; pos = (pos + 1) & mask) {
        uint64_t sl = w->islots[pos];
        if (!sl) break;
        const intern_entry *e = &w->ie[(uint32_t)sl - 1];
        if ((uint32_t)(sl >> 32) == h && e->kind == kind && e->len == n &&
            memcmp(w->blob.data + e->off, s, n) == 0)
            return e->iid;
    }
    uint32_t off = (uint32_t)w->blob.len;
    mst_buf_append(&w->blob, s, n);
    if (w->blob.failed) {
        w->buf->failed = true;
        return 0;
    }
    intern_entry *e = &w->ie[w->icount];
    e->off = off;
    e->len = (uint32_t)n;
    e->hash = h;
    e->kind = (uint8_t)kind;
    e->iid = w->next_iid[kind]++;
    w->islots[pos] = ((uint64_t)h << 32) | ++w->icount;
    w->pend[w->n_pend++] = (pending_intern){kind, off, (uint32_t)n, e->iid};
    return e->iid;
}

/* Makes room for `need` new entries in this packet (restarting if full). */
static void intern_room(mst_pftrace_writer *w, size_t need) {
    w->n_pend = 0;
    if (w->icount + need > INTERN_MAX || w->blob.len > (64u << 20)) intern_reset(w);
}

/* Opens an event packet and writes the pending definitions into it. */
static void open_event(mst_pftrace_writer *w, mst_pft_event *e, int64_t ts, bool uses_iids) {
    uint32_t flags = 0;
    if (uses_iids) {
        flags = MST_PFT_SEQ_NEEDS_INCREMENTAL_STATE;
        if (w->clear_pending) {
            flags |= MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED;
            w->clear_pending = false;
        }
    }
    mst_pft_event_open(w->buf, e, (uint64_t)ts, flags);
    for (size_t i = 0; i < w->n_pend; i++) {
        const pending_intern *p = &w->pend[i];
        mst_pft_event_intern(w->buf, e, p->kind, p->iid, (const char *)w->blob.data + p->off,
                             p->len);
    }
    w->n_pend = 0;
}

/* ------------------------------------------------------------ tracks */

/* Returns 0 when uuid is new (now added), 1 when known unnamed, 2 named. */
static int track_seen(mst_pftrace_writer *w, uint64_t uuid, bool named_now) {
    uint32_t mask = TRACK_SLOTS - 1;
    if (w->tcount >= TRACKS_MAX) {
        memset(w->tslots, 0, TRACK_SLOTS * sizeof *w->tslots);
        memset(w->tnamed, 0, TRACK_SLOTS);
        w->tcount = 0;
    }
    uint32_t pos = (uint32_t)(uuid ^ (uuid >> 32)) & mask;
    for (;; pos = (pos + 1) & mask) {
        if (w->tslots[pos] == uuid) {
            int r = w->tnamed[pos] ? 2 : 1;
            if (named_now) w->tnamed[pos] = 1;
            return r;
        }
        if (!w->tslots[pos]) break;
    }
    w->tslots[pos] = uuid;
    w->tnamed[pos] = named_now;
    w->tcount++;
    return 0;
}

/* The text of a raw JSON string value (unescaped into the arena when it
 * has escapes). False when v is not a string. */
static bool json_string_text(mst_pftrace_writer *w, const mst_json_slice *v, const char **s,
                             size_t *n) {
    if (!v || v->len < 2 || v->ptr[0] != '"') return false;
    if (!memchr(v->ptr, '\\', v->len)) {
        *s = v->ptr + 1;
        *n = v->len - 2;
        return true;
    }
    mst_json_reader r;
    mst_json_reader_init(&r, v->ptr, v->len, 1);
    mst_str out;
    if (!mst_json_read_str_slice(&r, &w->arena, &out)) return false;
    *s = out.ptr;
    *n = out.len;
    return true;
}


/* Process track named "<role> (<service>)", or the service, as the JSON. */
static void ensure_process(mst_pftrace_writer *w, int64_t pid, const mst_pf_span *s) {
    uint64_t uuid = process_uuid(pid);
    if (track_seen(w, uuid, true)) return;
    const char *role = NULL, *svc = NULL;
    size_t rn = 0, sn = 0;
    if (s) {
        json_string_text(w, mst_span_find_kv(s->attrs, s->n_attrs, "process.role"), &role, &rn);
        json_string_text(w, mst_span_find_kv(s->resource, s->n_resource, "service.name"), &svc, &sn);
    } else {
        svc = FORWARDER_PROCESS_NAME;
        sn = strlen(svc);
    }
    mst_buf_reset(&w->scratch);
    if (role && rn) {
        mst_buf_append(&w->scratch, role, rn);
        if (svc) {
            mst_buf_append(&w->scratch, " (", 2);
            mst_buf_append(&w->scratch, svc, sn);
            mst_buf_append_byte(&w->scratch, ')');
        }
    } else if (svc) {
        mst_buf_append(&w->scratch, svc, sn);
    }
    if (w->scratch.failed) {
        w->buf->failed = true;
        return;
    }
    mst_pft_process_track(w->buf, uuid, (int32_t)pid, (const char *)w->scratch.data,
                          w->scratch.len);
}

static uint64_t ensure_thread(mst_pftrace_writer *w, int64_t pid, int64_t tid,
                              const mst_pf_span *s) {
    uint64_t uuid = thread_uuid(pid, tid);
    const char *name = NULL;
    size_t n = 0;
    const mst_json_slice *tn = mst_span_find_kv(s->attrs, s->n_attrs, "thread.name");
    bool has_name = tn && json_string_text(w, tn, &name, &n);
    int seen = track_seen(w, uuid, has_name);
    if (seen == 2 || (seen == 1 && !has_name)) return uuid;
    mst_pft_thread_track(w->buf, uuid, (int32_t)pid, (int32_t)tid, name, n);
    return uuid;
}

/* ------------------------------------------------------------ lanes
 *
 * A track's slices must nest: a reader pairs each SLICE_END with the latest
 * open SLICE_BEGIN on that track. Spans of one thread need not nest (async
 * code: the API server's concurrent vllm.request spans overlap each other),
 * so a span that partly overlaps a recent slice of its thread track goes to
 * the first "lane" of that thread where it does not: a child track of the
 * thread track (`overlapping spans N`). Each lane remembers its LANE_KEEP
 * latest-ending slices (bounded memory; a partial overlap with an older one
 * is not seen). The JSON's X events carry their duration, so they need no
 * lanes; both files hold the same slices on the same (pid, tid). */

#define LANE_KEEP 64
#define MAX_LANES 32
#define LANE_THREADS 4096   /* threads with lanes; beyond: lane 0 only */

typedef struct lane {
    int64_t start[LANE_KEEP], end[LANE_KEEP];
    int64_t max_end;         /* of the kept slices: sequential spans skip the scan */
    unsigned n;
} lane;

typedef struct thread_lanes {
    uint64_t thread;         /* thread track uuid; 0 = free slot */
    unsigned n_lanes;
    lane *lanes;             /* MAX_LANES, allocated on first use */
} thread_lanes;

static bool partial_overlap(int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
    return (s1 < s2 && s2 < e1 && e1 < e2) || (s2 < s1 && s1 < e2 && e2 < e1);
}

static bool lane_fits(const lane *l, int64_t s, int64_t e) {
    if (!l->n || l->max_end <= s) return true; /* everything kept ended before s */
    for (unsigned i = 0; i < l->n; i++)
        if (partial_overlap(l->start[i], l->end[i], s, e)) return false;
    return true;
}

/* Remembers [s, e] in the lane, dropping its earliest-ending slice if full. */
static void lane_add(lane *l, int64_t s, int64_t e) {
    unsigned i = l->n;
    if (l->n == LANE_KEEP) {
        i = 0;
        for (unsigned k = 1; k < LANE_KEEP; k++)
            if (l->end[k] < l->end[i]) i = k;
    } else {
        l->n++;
    }
    l->start[i] = s;
    l->end[i] = e;
    if (l->n == 1 || e > l->max_end) l->max_end = e;
}

static thread_lanes *lanes_of(mst_pftrace_writer *w, uint64_t thread) {
    uint32_t mask = LANE_THREADS - 1;
    uint32_t pos = (uint32_t)(thread ^ (thread >> 32)) & mask;
    for (uint32_t k = 0; k < LANE_THREADS; k++, pos = (pos + 1) & mask) {
        thread_lanes *t = &w->lanes[pos];
        if (t->thread == thread) return t;
        if (!t->thread) {
            if (!(t->lanes = calloc(MAX_LANES, sizeof *t->lanes))) return NULL;
            t->thread = thread;
            t->n_lanes = 1;
            return t;
        }
    }
    return NULL;
}

static uint64_t lane_uuid(uint64_t thread, unsigned k) {
    return k ? mix64(thread ^ ((uint64_t)k << 48) ^ 0x6c616e65ull) : thread;
}

/* The track for a slice [s, e] of thread track `thread`: the thread track
 * itself or the first lane it fits in (descriptor written on first use). */
static uint64_t pick_lane(mst_pftrace_writer *w, uint64_t thread, int64_t s, int64_t e) {
    thread_lanes *t = lanes_of(w, thread);
    if (!t) return thread;
    unsigned k = 0;
    while (k < t->n_lanes && !lane_fits(&t->lanes[k], s, e)) k++;
    if (k == MAX_LANES) k = MAX_LANES - 1; /* out of lanes: the last one */
    if (k == t->n_lanes) t->n_lanes++;
    lane_add(&t->lanes[k], s, e);
    uint64_t uuid = lane_uuid(thread, k);
    if (k && !track_seen(w, uuid, true)) {
        char name[40];
        int n = snprintf(name, sizeof name, "overlapping spans %u", k);
        mst_pft_named_track(w->buf, uuid, thread, name, (size_t)n, (int32_t)k);
    }
    return uuid;
}

/* ------------------------------------------------------------ slices */



/* The interned id for a plain (no escapes) JSON string value seen before,
 * else 0 (written inline; remembered for next time). */
static uint64_t value_iid(mst_pftrace_writer *w, const mst_json_slice *v) {
    if (v->len < 4 || v->len > VALUE_INTERN_MAX_LEN + 2 || v->ptr[0] != '"' ||
        memchr(v->ptr, '\\', v->len))
        return 0;
    const char *s = v->ptr + 1;
    size_t n = v->len - 2;
    uint64_t h = bytes_hash(s, n);
    uint32_t tag = (uint32_t)(h >> 32) | 1u;
    uint32_t *slot = &w->vseen[h & (VSEEN_SLOTS - 1)];
    if (*slot != tag) {
        *slot = tag;
        return 0;
    }
    return intern(w, MST_PFT_INTERN_STRING_VALUE, s, n);
}

/* One annotation from a raw JSON value: strings, numbers and booleans as
 * typed values, anything else (arrays, objects, null) as JSON text. */
static void annotate_json(mst_pftrace_writer *w, uint64_t iid, const mst_json_slice *v,
                          uint64_t viid) {
    const char *s;
    if (viid) {
        mst_pft_annotation_string_iid(w->buf, iid, viid);
        return;
    }
    size_t n;
    bool dbl;
    int64_t i;
    double d;
    if (v->len && v->ptr[0] == '"' && json_string_text(w, v, &s, &n))
        mst_pft_annotation_string(w->buf, iid, s, n);
    else if (v->len == 4 && memcmp(v->ptr, "true", 4) == 0)
        mst_pft_annotation_bool(w->buf, iid, true);
    else if (v->len == 5 && memcmp(v->ptr, "false", 5) == 0)
        mst_pft_annotation_bool(w->buf, iid, false);
    else if (mst_tl_json_number(v, &dbl, &i, &d)) {
        if (dbl) mst_pft_annotation_double(w->buf, iid, d);
        else mst_pft_annotation_int(w->buf, iid, i);
    } else {
        mst_pft_annotation_json(w->buf, iid, v->ptr, v->len);
    }
}

static void emit_span(mst_pftrace_writer *w, const mst_pf_span *s, uint64_t track) {
    size_t need = 2 + 2 * (s->n_attrs + s->n_resource) + FIXED_ANNOTATIONS + 1;
    intern_room(w, need);
    const char *cat = s->category.ptr ? s->category.ptr : DEFAULT_CATEGORY;
    size_t cat_n = s->category.ptr ? s->category.len : strlen(DEFAULT_CATEGORY);
    uint64_t name_iid = intern(w, MST_PFT_INTERN_EVENT_NAME, s->name.ptr ? s->name.ptr : "",
                               s->name.ptr ? s->name.len : 0);
    uint64_t cat_iid = intern(w, MST_PFT_INTERN_CATEGORY, cat, cat_n);
    bool any_resource_prefixed = false;
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_str *k = &s->attrs[i].key;
        if (k->len > 9 && memcmp(k->ptr, "resource.", 9) == 0) any_resource_prefixed = true;
        w->ann_iids[i] = mst_span_arg_is_fixed(k) ? 0 : intern(w, MST_PFT_INTERN_ANNOTATION_NAME, k->ptr, k->len);
        w->val_iids[i] = w->ann_iids[i] ? value_iid(w, &s->attrs[i].value) : 0;
    }
    static const char *const fixed[FIXED_ANNOTATIONS] = {
        "trace_id", "span_id", "parent_span_id", "span.kind", "span.status", "service.name"};
    /* The same six names on every span: interned once per generation. */
    if (w->fixed_gen != w->intern_gen) {
        for (int f = 0; f < FIXED_ANNOTATIONS; f++)
            w->fixed_iid[f] = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, fixed[f], strlen(fixed[f]));
        w->fixed_gen = w->intern_gen;
    }
    const uint64_t *fixed_iid = w->fixed_iid;
    uint64_t *res_iid = w->ann_iids + s->n_attrs;
    for (size_t i = 0; i < s->n_resource; i++) {
        const mst_str *k = &s->resource[i].key;
        res_iid[i] = 0;
        if (any_resource_prefixed && mst_span_attr_shadows(s, k)) continue;
        mst_buf_reset(&w->scratch);
        mst_buf_append(&w->scratch, "resource.", 9);
        mst_buf_append(&w->scratch, k->ptr, k->len);
        if (w->scratch.failed) {
            w->buf->failed = true;
            return;
        }
        res_iid[i] = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, (const char *)w->scratch.data,
                            w->scratch.len);
        w->val_iids[s->n_attrs + i] = value_iid(w, &s->resource[i].value);
    }
    const mst_json_slice *svc = mst_span_find_kv(s->resource, s->n_resource, "service.name");
    uint64_t svc_viid = svc ? value_iid(w, svc) : 0;

    mst_pft_event e;
    open_event(w, &e, s->start_ns, true);
    mst_buf *b = w->buf;
    mst_pft_event_track(b, &e, MST_PFT_SLICE_BEGIN, track);
    mst_pft_event_name_iid(b, name_iid);
    mst_pft_event_category_iid(b, cat_iid);
    for (size_t i = 0; i < s->n_attrs; i++)
        if (w->ann_iids[i]) annotate_json(w, w->ann_iids[i], &s->attrs[i].value, w->val_iids[i]);
    mst_pft_annotation_string(b, fixed_iid[0], s->trace_id, strlen(s->trace_id));
    mst_pft_annotation_string(b, fixed_iid[1], s->span_id, strlen(s->span_id));
    mst_pft_annotation_string(b, fixed_iid[2], s->parent_span_id, strlen(s->parent_span_id));
    mst_pft_annotation_int(b, fixed_iid[3], s->kind);
    mst_pft_annotation_int(b, fixed_iid[4], s->status);
    if (svc) annotate_json(w, fixed_iid[5], svc, svc_viid);
    else mst_pft_annotation_string(b, fixed_iid[5], DEFAULT_SERVICE_NAME, strlen(DEFAULT_SERVICE_NAME));
    for (size_t i = 0; i < s->n_resource; i++)
        if (res_iid[i])
            annotate_json(w, res_iid[i], &s->resource[i].value, w->val_iids[s->n_attrs + i]);
    /* Flows: this span's own id (a later span linking here joins it), then
     * one per link (joining the linked span, written before or after). */
    mst_pft_event_flow_id(b, mst_tl_flow_id(s->trace_id, s->span_id));
    for (size_t l = 0; l < s->n_links; l++)
        mst_pft_event_flow_id(b, mst_tl_flow_id(s->links[l].trace_id, s->links[l].span_id));
    mst_pft_event_close(b, &e);

    int64_t end = s->end_ns > s->start_ns ? s->end_ns : s->start_ns;
    open_event(w, &e, end, false);
    mst_pft_event_track(b, &e, MST_PFT_SLICE_END, track);
    mst_pft_event_close(b, &e);
    w->buffered_spans++;
    w->buffered_flows += s->n_links;
}

/* ------------------------------------------------------------ timeline sink */

/* Begins a slice `name` on `track` (with the request's annotations when
 * r is given); the caller ends it with slice_end. */
static void named_slice(mst_pftrace_writer *w, uint64_t track, const char *name, int64_t start,
                        const mst_tl_request *r) {
    intern_room(w, 3);
    uint64_t iid = intern(w, MST_PFT_INTERN_EVENT_NAME, name, strlen(name));
    uint64_t id_iid = 0, steps_iid = 0;
    if (r) {
        id_iid = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, "request.id", 10);
        steps_iid = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, "request.steps", 13);
    }
    mst_pft_event e;
    open_event(w, &e, start, true);
    mst_pft_event_track(w->buf, &e, MST_PFT_SLICE_BEGIN, track);
    mst_pft_event_name_iid(w->buf, iid);
    if (r) {
        mst_pft_annotation_string(w->buf, id_iid, r->id, r->id_len);
        mst_pft_annotation_int(w->buf, steps_iid, r->steps);
    }
    mst_pft_event_close(w->buf, &e);
}

static void slice_end(mst_pftrace_writer *w, uint64_t track, int64_t ts) {
    mst_pft_event e;
    open_event(w, &e, ts, false);
    mst_pft_event_track(w->buf, &e, MST_PFT_SLICE_END, track);
    mst_pft_event_close(w->buf, &e);
}

/* A request track: the request slice with its phases nested inside, in an
 * order that keeps the nesting when readers sort by time (ties keep file
 * order): request begin, each phase begin/end, request end. */
static void sink_request(void *self, const mst_tl_request *r) {
    mst_pftrace_writer *w = self;
    uint64_t parent = requests_uuid();
    if (!track_seen(w, parent, true))
        mst_pft_named_track(w->buf, parent, 0, REQUESTS_TRACK_NAME, strlen(REQUESTS_TRACK_NAME), 0);
    uint64_t track = request_uuid(r->id, r->id_len);
    track_seen(w, track, true);
    /* Written with its request (a request completes once). */
    mst_pft_named_track(w->buf, track, parent, r->id, r->id_len, 0);
    named_slice(w, track, "request", r->start_ns, r);
    for (unsigned i = 0; i < r->n_phases; i++) {
        named_slice(w, track, r->phases[i].name, r->phases[i].start_ns, NULL);
        slice_end(w, track, r->phases[i].end_ns);
    }
    slice_end(w, track, r->end_ns);
}

static void sink_counter(void *self, const mst_tl_counter *c) {
    mst_pftrace_writer *w = self;
    uint64_t uuid = counter_uuid(c->pid, c->name);
    if (!track_seen(w, uuid, true))
        mst_pft_counter_track(w->buf, uuid, process_uuid(c->pid), c->name, strlen(c->name));
    mst_pft_event e;
    open_event(w, &e, c->ts_ns, false);
    mst_pft_event_track(w->buf, &e, MST_PFT_COUNTER, uuid);
    if (c->is_double) mst_pft_event_counter_double(w->buf, c->d);
    else mst_pft_event_counter_int(w->buf, c->i);
    mst_pft_event_close(w->buf, &e);
}

static mst_tl_sink make_sink(mst_pftrace_writer *w) {
    return (mst_tl_sink){w, sink_request, sink_counter};
}

/* ------------------------------------------------------------ API */

/* Chunk for the next packets; restarts interning when the queue dropped
 * data since the last look. NULL when out of memory. */
static mst_buf *begin_add(mst_pftrace_writer *w) {
    w->buf = mst_outq_buf(w->out);
    w->buffered_spans = w->buffered_flows = 0;
    return w->buf;
}

/* Rolls back a failed (out of memory) add; returns the status to report. */
static mst_status end_add(mst_pftrace_writer *w, size_t mark) {
    mst_arena_reset_keep(&w->arena, ARENA_KEEP_BYTES);
    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
        /* Definitions made for the lost packets are gone: restart. */
        intern_reset(w);
        memset(w->tslots, 0, TRACK_SLOTS * sizeof *w->tslots);
        w->tcount = 0;
        MST_WARN("perfetto output: out of memory buffering a span; span dropped");
        return MST_ERR_NOMEM;
    }
    mst_outq_added(w->out, w->buffered_spans, w->buffered_flows);
    return MST_OK;
}

mst_status mst_pftrace_writer_add_span(mst_pftrace_writer *w, const mst_pf_span *s) {
    if (!w || !s) return MST_ERR_INVALID_ARG;
    if (mst_outq_unwritten(w->out) >= MAX_UNWRITTEN_BYTES &&
        !mst_outq_wait_room(w->out, MAX_UNWRITTEN_BYTES)) {
        w->full_dropped++;
        return MST_ERR_QUEUE_FULL;
    }
    if (!begin_add(w)) {
        MST_WARN("perfetto output: out of memory buffering a span; span dropped");
        return MST_ERR_NOMEM;
    }
    size_t mark = w->buf->len;
    int64_t pid = s->has_pid ? s->pid : w->default_pid;
    int64_t tid = s->has_tid ? s->tid : 0;
    ensure_process(w, pid, s);
    uint64_t track = ensure_thread(w, pid, tid, s);
    int64_t end = s->end_ns > s->start_ns ? s->end_ns : s->start_ns;
    emit_span(w, s, pick_lane(w, track, s->start_ns, end));
    mst_tl_sink sink = make_sink(w);
    mst_timeline_add_span(w->tl, s, pid, &w->arena, &sink);
    return end_add(w, mark);
}

void mst_pftrace_writer_add_forwarder_counters(mst_pftrace_writer *w, int64_t ts_ns,
                                               uint64_t received, uint64_t written,
                                               uint64_t dropped) {
    if (!w || !begin_add(w)) return;
    size_t mark = w->buf->len;
    int64_t pid = (int64_t)getpid();
    ensure_process(w, pid, NULL);
    mst_tl_sink sink = make_sink(w);
    mst_timeline_forwarder_counters(w->tl, pid, ts_ns, received, written, dropped, &sink);
    (void)end_add(w, mark);
}

int mst_pftrace_writer_tick(mst_pftrace_writer *w, uint64_t now_ms) {
    if (!w || !begin_add(w)) return 0;
    size_t mark = w->buf->len;
    mst_tl_sink sink = make_sink(w);
    mst_timeline_tick(w->tl, now_ms, &sink);
    if (w->buf->len != mark || w->buf->failed) (void)end_add(w, mark);
    return mst_timeline_open_requests(w->tl) ? 1 : 0;
}

/* After the queue dropped data (failing writes), definitions and track
 * descriptors may be lost: write them again from the next packet on. */
static void check_out_drops(mst_pftrace_writer *w) {
    mst_outq_stats os;
    mst_outq_get_stats(w->out, &os);
    if (os.spans_dropped != w->seen_out_drops) {
        w->seen_out_drops = os.spans_dropped;
        intern_reset(w);
        memset(w->tslots, 0, TRACK_SLOTS * sizeof *w->tslots);
        w->tcount = 0;
    }
}

int mst_pftrace_writer_handoff(mst_pftrace_writer *w) {
    if (!w) return 0;
    int r = mst_outq_handoff(w->out);
    check_out_drops(w);
    return r;
}

mst_status mst_pftrace_writer_flush(mst_pftrace_writer *w, bool final) {
    if (!w) return MST_ERR_INVALID_ARG;
    if (final && begin_add(w)) {
        size_t mark = w->buf->len;
        mst_tl_sink sink = make_sink(w);
        mst_timeline_finish_all(w->tl, &sink);
        (void)end_add(w, mark);
    }
    mst_status st = mst_outq_flush(w->out);
    check_out_drops(w);
    return st;
}

void mst_pftrace_writer_get_stats(const mst_pftrace_writer *w, mst_chrome_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!w) return;
    mst_outq_stats os;
    mst_outq_get_stats(w->out, &os);
    *out = w->st;
    mst_chrome_stats_add_outq(out, &os, w->full_dropped);
}

static void writer_free(mst_pftrace_writer *w) {
    free(w->islots);
    free(w->ie);
    free(w->pend);
    free(w->ann_iids);
    free(w->val_iids);
    free(w->vseen);
    free(w->tslots);
    free(w->tnamed);
    if (w->lanes)
        for (uint32_t i = 0; i < LANE_THREADS; i++) free(w->lanes[i].lanes);
    free(w->lanes);
    mst_buf_free(&w->blob);
    mst_buf_free(&w->scratch);
    mst_arena_release(&w->arena);
    mst_timeline_free(w->tl);
    free(w);
}

mst_status mst_pftrace_writer_open(const char *path, int64_t default_pid,
                                   mst_pftrace_writer **out, char *err, size_t err_size) {
    if (!out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    int fd;
    mst_status st = mst_output_path_open(path, &fd, err, err_size);
    if (st != MST_OK) return st;
    mst_pftrace_writer *w = calloc(1, sizeof *w);
    size_t max_ann = MST_PF_MAX_ATTRS * 2u + FIXED_ANNOTATIONS + 4;
    if (w) {
        w->islots = calloc(INTERN_SLOTS, sizeof *w->islots);
        w->ie = calloc(INTERN_MAX, sizeof *w->ie);
        w->pend = calloc(INTERN_MAX, sizeof *w->pend);
        w->ann_iids = calloc(max_ann, sizeof *w->ann_iids);
        w->val_iids = calloc(max_ann, sizeof *w->val_iids);
        w->vseen = calloc(VSEEN_SLOTS, sizeof *w->vseen);
        w->tslots = calloc(TRACK_SLOTS, sizeof *w->tslots);
        w->tnamed = calloc(TRACK_SLOTS, 1);
        w->lanes = calloc(LANE_THREADS, sizeof *w->lanes);
        w->tl = mst_timeline_new(MST_TL_MAX_REQUESTS);
        mst_buf_init(&w->blob, 0);
        mst_buf_init(&w->scratch, 0);
        mst_arena_init(&w->arena);
    }
    if (!w || !w->islots || !w->ie || !w->pend || !w->ann_iids || !w->val_iids || !w->vseen ||
        !w->tslots || !w->tnamed || !w->lanes || !w->tl) {
        if (w) writer_free(w);
        close(fd);
        if (err && err_size) snprintf(err, err_size, "out of memory opening the Perfetto writer");
        return MST_ERR_NOMEM;
    }
    w->fd = fd;
    w->default_pid = default_pid;
    intern_reset(w);
    w->clear_pending = false; /* the clock snapshot below clears the state */
    if (mst_outq_start_layout(fd, &k_packet_stream, 0, 0, &w->out) != MST_OK) {
        if (err && err_size) snprintf(err, err_size, "cannot start the Perfetto writer thread");
        close(fd);
        writer_free(w);
        return MST_ERR_NOMEM;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    mst_buf *b = mst_outq_buf(w->out);
    if (b) {
        mst_pft_clock_snapshot(b, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
        mst_outq_added(w->out, 0, 0);
    }
    if (!b || b->failed || mst_outq_flush(w->out) != MST_OK) {
        if (err && err_size) snprintf(err, err_size, "cannot write %s", path);
        mst_outq_stop(w->out, NULL);
        close(fd);
        writer_free(w);
        return MST_ERR_IO;
    }
    *out = w;
    return MST_OK;
}

mst_status mst_pftrace_writer_close(mst_pftrace_writer *w) {
    return mst_pftrace_writer_close_final(w, NULL);
}

mst_status mst_pftrace_writer_close_final(mst_pftrace_writer *w, mst_chrome_stats *final) {
    if (!w) return MST_ERR_INVALID_ARG;
    mst_status fst = mst_pftrace_writer_flush(w, true);
    mst_outq_stats os;
    mst_status st = mst_outq_stop(w->out, &os);
    if (st == MST_OK) st = fst;
    if (final) {
        *final = w->st;
        mst_chrome_stats_add_outq(final, &os, w->full_dropped);
    }
    if (close(w->fd) != 0 && st == MST_OK) st = MST_ERR_IO;
    writer_free(w);
    return st;
}
