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
 *
 * Request-id lists (`request.ids`, `*_ids`) are written as arrays of
 * interned string values, `request.ids` as a keyframe or a delta of its
 * stream (annotate_id_list; the delta rule is pftrace_id_lists.h's). Each
 * list is split once: its items go to the timeline too
 * (mst_timeline_add_span_split), each with its intern entry's word where
 * the timeline keeps its lookup of that request; `request.ids` is split
 * against the stream's previous list — by runs of its kept text, else item
 * by item against its ids (pftrace_id_lists.h) — so a kept id is neither
 * scanned for nor hashed, and its delta is read off the list's shape when
 * the ids kept come first and the new ones after (annotate_id_list). When
 * the forwarder rebuilt the list from a change to exactly the list this
 * writer recorded last for the stream (mst_pf_span.ids_origin), the kept
 * ids are neither scanned for nor hashed: their iids and refs are copied
 * from the stream's last list a run at a time and their items placed by
 * the entries' lengths, only each closing quote checked (split_by_origin).
 *
 * Per span (the hot path, see bench/RESULTS.md): the annotations and new
 * definitions are encoded into scratch buffers as the attributes are met,
 * then the packet is laid out around them in one pass; ids come from the
 * span-shape memo (below) when the span looks like the last one of its
 * name, else from the intern table. Memos are bounded, and a hit is always
 * what interning would return, so they never change the file.
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
#include "forward/pftrace_id_lists.h"
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
/* Id lists of one span handed to the timeline split (the rest it reads
 * as JSON), and the items they and any other list take. */
#define SPLIT_LISTS 8u
#define ITEMS_CAP (3u * MST_PFT_ID_LIST_MAX)
#define REQUESTS_TRACK_NAME "Requests"
#define FORWARDER_PROCESS_NAME "mstrace forward"

/* Packets follow each other with nothing between or after them. */
static const mst_outq_layout k_packet_stream = {.tail = "", .tail_len = 0, .first_skip = 0};

typedef struct intern_entry {
    uint32_t off, len;     /* into blob */
    uint32_t hash;
    uint8_t kind;
    uint16_t mark;         /* annotate_id_list's (list_mark) */
    uint64_t iid;
    uint64_t tl_hint;      /* a request id's: the timeline's (mst_tl_id_item.hint) */
} intern_entry;


#define COUNTER_MEMO 16u
#define NAME_MEMO 16u
typedef struct name_memo {
    uint64_t gen;
    uint32_t off, len;
    uint64_t iid;
} name_memo;
struct shape;
/* An iid remembered for one generation (intern_memo). */
typedef struct iid_memo {
    uint64_t gen, iid;
} iid_memo;
typedef struct counter_memo {
    const char *name;
    int64_t pid;
    uint64_t uuid;
    mst_pft_varint track;  /* uuid, encoded */
} counter_memo;

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
    mst_buf blob;
    bool clear_pending;           /* next interning packet restarts the state */
    uint64_t intern_gen;          /* bumped by every restart */
    uint16_t mark;                /* the last list_mark */
    uint64_t fixed_gen;           /* intern_gen when fixed_iid was filled (0: never) */
    uint64_t fixed_iid[6];        /* the fixed annotation names (FIXED_ANNOTATIONS) */
    uint64_t delta_gen;           /* intern_gen when delta_iid was filled */
    uint64_t delta_iid[3];        /* request.ids.delta / .left / .joined */
    iid_memo step_names[3];       /* sink_step's annotation names */
    mst_pft_id_chains *chains;    /* request.ids of each stream (pftrace_id_lists.h) */
    uint64_t lists_by_origin;     /* split_by_origin's, so far */
    /* The span's id lists' items (ITEMS_CAP): lists the timeline reads
     * too from [0, 2 * MST_PFT_ID_LIST_MAX), each at items_used, then the
     * last MST_PFT_ID_LIST_MAX for any that no longer fits there. */
    mst_pft_id_item *items;
    size_t items_used;
    mst_tl_split_list split[SPLIT_LISTS]; /* ... the lists there, for the timeline */
    size_t n_split;
    uint64_t *item_iids;          /* a list's interned ids (MST_PFT_ID_LIST_MAX) */
    uint32_t *item_refs;          /* ... their intern entries (request.ids' chain refs) */
    mst_pft_id_item *guess;       /* the texts of a stream's previous list (MST_PFT_ID_LIST_MAX) */
    uint32_t *guessed;            /* the guess each item was (MST_PFT_ID_LIST_MAX) */
    mst_buf defs;                 /* InternedData entries of the packet being built */
    mst_buf ann;                  /* its debug annotations */
    uint64_t *res_iids;           /* its resource entries' name and value iids */
    uint64_t *flows;              /* its flow ids */
    counter_memo cmemo[COUNTER_MEMO];
    uint64_t counter_ts;          /* the last counter sample's timestamp ... */
    mst_pft_varint counter_ts_v;  /* ... encoded (len 0: none yet) */
    name_memo names[NAME_MEMO];   /* event names (see name_iid) */
    struct shape *shapes;         /* SHAPE_SLOTS span-shape memos */
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


static inline uint64_t load64(const char *s) {
    uint64_t v;
    memcpy(&v, s, 8);
    return v;
}

/* The n (< 8) bytes at s as a little-endian number, as memcpy into a zeroed
 * word gives, from at most two loads (no libc call for short keys). */
static inline uint64_t load_small(const char *s, size_t n) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    uint64_t v = 0;
    memcpy(&v, s, n);
    return v;
#endif
    const uint8_t *p = (const uint8_t *)s;
    if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        return lo | ((uint64_t)hi << (8 * (n - 4)));
    }
    if (!n) return 0;
    return p[0] | ((uint64_t)p[n / 2] << (8 * (n / 2))) | ((uint64_t)p[n - 1] << (8 * (n - 1)));
}

/* Hash of n bytes from the first and last 8 (and n): constant time for
 * the names and keys of every span. Strings sharing both ends and length
 * collide and are told apart by the table's compare. Not seeded: the table
 * it indexes is bounded and restarts when full, so crafted collisions cost
 * at most longer probes in a table of INTERN_SLOTS. (The value-seen table
 * keys on it too, so it decides which values are interned: changing it
 * changes the file.) */
static inline uint64_t bytes_hash(const char *s, size_t n) {
    uint64_t a, b = 0;
    if (n >= 8) {
        a = load64(s);
        b = load64(s + n - 8);
    } else {
        a = load_small(s, n);
    }
    return mst_mum(a ^ 0xe7037ed1a0b428dbull ^ n, b ^ 0x8ebc6af09c88c6e3ull);
}

/* a[0..n) == b[0..n), a word at a time (names and keys are short):
 * overlapping first and last words cover 8..16 and 17..32 bytes. */
static inline __attribute__((always_inline)) bool bytes_eq(const char *a, const char *b, size_t n) {
    if (n < 8) return load_small(a, n) == load_small(b, n);
    uint64_t d = (load64(a) ^ load64(b)) | (load64(a + n - 8) ^ load64(b + n - 8));
    if (n <= 16) return !d;
    if (n <= 32)
        return !(d | (load64(a + 8) ^ load64(b + 8)) | (load64(a + n - 16) ^ load64(b + n - 16)));
    return !d && memcmp(a, b, n) == 0;
}

/* No backslash in s[0..n): the JSON string needs no unescaping. */
static inline bool no_backslash(const char *s, size_t n) {
    if (n > 256) return !memchr(s, '\\', n);
    const uint64_t k = 0x0101010101010101ull;
    uint64_t hit = 0, z;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        z = load64(s + i) ^ ('\\' * k);
        hit |= (z - k) & ~z;
    }
    if (i < n) {
        z = load_small(s + i, n - i) ^ ('\\' * k); /* zero fill: never a '\\' */
        hit |= (z - k) & ~z;
    }
    return !(hit & (0x80 * k));
}

/* Exact hash of every byte (track ids, where a collision would merge two
 * tracks). */
static uint64_t bytes_hash_full(const char *s, size_t n) {
    return mst_mum_bytes(0x9E3779B97F4A7C15ull ^ n, s, n);
}

/* Track uuids: a kind tag and the identifying values, mixed. */
static uint64_t process_uuid(int64_t pid) { return mix64(0x1ull << 56 ^ (uint64_t)pid); }
static uint64_t thread_uuid(int64_t pid, int64_t tid) {
    return mix64((0x2ull << 56) ^ mix64((uint64_t)pid) ^ (uint64_t)tid);
}
/* Counter names are the timeline's static strings and the same few come
 * with every schedule span: their uuids are remembered by (name pointer,
 * pid) in a small direct-mapped memo. */
static const counter_memo *counter_track(mst_pftrace_writer *w, int64_t pid, const char *name) {
    counter_memo *m = &w->cmemo[((uintptr_t)name >> 3 ^ (uint64_t)pid) & (COUNTER_MEMO - 1)];
    if (m->name == name && m->pid == pid) return m;
    m->name = name;
    m->pid = pid;
    m->uuid = mix64((0x3ull << 56) ^ mix64((uint64_t)pid) ^ bytes_hash_full(name, strlen(name)));
    mst_pft_varint_set(&m->track, m->uuid);
    return m;
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
    /* A delta names ids by the previous list's iids: keyframes from here. */
    if (w->chains) mst_pft_id_chains_reset(w->chains);
}

/* Adds (kind, s) at free slot `pos` of the probe for hash h. NULL when
 * out of memory. */
static intern_entry *intern_add(mst_pftrace_writer *w, unsigned kind, const char *s,
                                      size_t n, uint32_t h, uint32_t pos) {
    uint32_t off = (uint32_t)w->blob.len;
    mst_buf_append(&w->blob, s, n);
    if (w->blob.failed) {
        w->buf->failed = true;
        return NULL;
    }
    intern_entry *e = &w->ie[w->icount];
    e->off = off;
    e->len = (uint32_t)n;
    e->hash = h;
    e->kind = (uint8_t)kind;
    e->iid = w->next_iid[kind]++;
    e->tl_hint = 0;
    e->mark = 0;
    w->islots[pos] = ((uint64_t)h << 32) | ++w->icount;
    mst_pft_interned_entry(&w->defs, kind, e->iid, s, n);
    return e;
}

/* The entry of (kind, s), whose bytes_hash is `hash` (callers that hashed
 * the text already pass it); a new one is added to the packet's w->defs.
 * NULL when out of memory. */
static inline intern_entry *intern_hashed(mst_pftrace_writer *w, unsigned kind,
                                                const char *s, size_t n, uint64_t hash) {
    uint64_t h64 = hash ^ kind;
    uint32_t h = (uint32_t)(h64 ^ (h64 >> 32));
    uint32_t mask = INTERN_SLOTS - 1;
    uint32_t pos = h & mask;
    for (;; pos = (pos + 1) & mask) {
        uint64_t sl = w->islots[pos];
        if (!sl) break;
        intern_entry *e = &w->ie[(uint32_t)sl - 1];
        if ((uint32_t)(sl >> 32) == h && e->kind == kind && e->len == n &&
            bytes_eq((const char *)w->blob.data + e->off, s, n))
            return e;
    }
    return intern_add(w, kind, s, n, h, pos);
}

static inline intern_entry *intern_e(mst_pftrace_writer *w, unsigned kind, const char *s,
                                           size_t n) {
    return intern_hashed(w, kind, s, n, bytes_hash(s, n));
}

/* The iid of (kind, s); 0 when out of memory. */
static uint64_t intern(mst_pftrace_writer *w, unsigned kind, const char *s, size_t n) {
    const intern_entry *e = intern_e(w, kind, s, n);
    return e ? e->iid : 0;
}

/* intern of an annotation name the writer uses for every span of a kind,
 * remembered in *m for the rest of the generation (what intern returns
 * for it until the next restart). */
static uint64_t intern_memo(mst_pftrace_writer *w, iid_memo *m, const char *s, size_t n) {
    if (m->gen != w->intern_gen || !m->iid) {
        m->iid = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, s, n);
        m->gen = w->intern_gen;
    }
    return m->iid;
}

/* ------------------------------------------------------------ span shapes
 *
 * Spans of one name carry the same attribute keys in the same order, most
 * with the same few string values (module, class, model): a memo per
 * event name remembers, per annotation position, the key's interned text
 * and id and the last interned string value there, so the usual span finds
 * its ids by comparing the texts instead of hashing and probing. A memo is
 * only a shortcut: a hit is exactly what interning returns (same text,
 * same generation; a value also needs its value-seen slot unchanged, as
 * value_iid checks), a miss interns as usual and refills the position. */

#define SHAPE_SLOTS 64u      /* memos, by event-name iid */
#define SHAPE_KEYS 32u       /* annotation positions remembered per memo */

typedef struct shape_key {
    uint32_t off, len;       /* the annotation name's text in the blob */
    uint64_t iid;
    uint32_t voff, vlen;     /* the last interned string value here */
    uint32_t vslot, vtag;    /* ... its value-seen slot and tag */
    uint64_t viid;           /* 0: none */
} shape_key;

typedef struct shape {
    uint64_t gen;            /* intern_gen it belongs to (0: empty) */
    uint64_t name_iid;
    uint32_t cat_off, cat_len;
    uint64_t cat_iid;        /* 0: none */
    uint32_t valid;          /* positions [0, valid) are filled */
    shape_key k[SHAPE_KEYS];
    shape_key svc;           /* the service.name annotation's value */
} shape;

static shape *shape_of(mst_pftrace_writer *w, uint64_t name_iid) {
    shape *sh = &w->shapes[name_iid & (SHAPE_SLOTS - 1)];
    if (sh->gen != w->intern_gen || sh->name_iid != name_iid) {
        sh->gen = w->intern_gen;
        sh->name_iid = name_iid;
        sh->cat_iid = 0;
        sh->valid = 0;
        sh->svc.viid = 0;
    }
    return sh;
}

static inline __attribute__((always_inline)) bool blob_eq(const mst_pftrace_writer *w, uint32_t off, uint32_t len, const char *s,
                           size_t n) {
    return len == n && bytes_eq((const char *)w->blob.data + off, s, n);
}

/* The position `p` memo entry to refill, or NULL (beyond SHAPE_KEYS). */
static shape_key *shape_slot(shape *sh, size_t p) {
    if (p >= SHAPE_KEYS) return NULL;
    if (p >= sh->valid) {
        sh->valid = (uint32_t)p + 1;
        sh->k[p].viid = 0;
    }
    return &sh->k[p];
}

/* shape_key_iid when the memo missed: interns and refills position p. */
static uint64_t shape_key_miss(mst_pftrace_writer *w, shape *sh, size_t p, const char *s,
                               size_t n) {
    const intern_entry *e = intern_e(w, MST_PFT_INTERN_ANNOTATION_NAME, s, n);
    if (!e) return 0;
    shape_key *k = shape_slot(sh, p);
    if (k) {
        k->off = e->off;
        k->len = e->len;
        k->iid = e->iid;
    }
    return e->iid;
}

/* Annotation-name iid of attribute key (s, n) at position p. */
static inline __attribute__((always_inline)) uint64_t
shape_key_iid(mst_pftrace_writer *w, shape *sh, size_t p, const char *s, size_t n) {
    if (p < sh->valid && blob_eq(w, sh->k[p].off, sh->k[p].len, s, n)) return sh->k[p].iid;
    return shape_key_miss(w, sh, p, s, n);
}

/* Makes room for `need` new entries in this packet (restarting if full). */
static void intern_room(mst_pftrace_writer *w, size_t need) {
    mst_buf_reset(&w->defs);
    if (w->icount + need > INTERN_MAX || w->blob.len > (64u << 20)) intern_reset(w);
}

/* Sequence flags of a packet: one that uses interned ids needs the
 * incremental state, and the first after a restart says it was cleared. */
static uint32_t packet_flags(mst_pftrace_writer *w, bool uses_iids) {
    if (!uses_iids) return 0;
    uint32_t flags = MST_PFT_SEQ_NEEDS_INCREMENTAL_STATE;
    if (w->clear_pending) {
        flags |= MST_PFT_SEQ_INCREMENTAL_STATE_CLEARED;
        w->clear_pending = false;
    }
    return flags;
}

/* Hands the packet's definitions and annotations to slice `sl`. */
static void take_parts(mst_pftrace_writer *w, mst_pft_slice *sl) {
    if (w->defs.failed || w->ann.failed) w->buf->failed = true;
    sl->interned = w->defs.data;
    sl->interned_len = w->defs.len;
    sl->annotations = w->ann.data;
    sl->annotations_len = w->ann.len;
}

/* ------------------------------------------------------------ tracks */

/* The set of written descriptors is bounded: full, it starts over. */
static void tracks_room(mst_pftrace_writer *w) {
    if (w->tcount >= TRACKS_MAX) {
        memset(w->tslots, 0, TRACK_SLOTS * sizeof *w->tslots);
        memset(w->tnamed, 0, TRACK_SLOTS);
        w->tcount = 0;
    }
}

/* Returns 0 when uuid is new (now added), 1 when known unnamed, 2 named. */
static int track_seen(mst_pftrace_writer *w, uint64_t uuid, bool named_now) {
    uint32_t mask = TRACK_SLOTS - 1;
    tracks_room(w);
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

/* The thread track of (pid, tid), its descriptor written when new or when
 * it gets its name (`tn`: the span's thread.name attribute, or NULL). */
static uint64_t ensure_thread(mst_pftrace_writer *w, int64_t pid, int64_t tid,
                              const mst_json_slice *tn) {
    uint64_t uuid = thread_uuid(pid, tid);
    const char *name = NULL;
    size_t n = 0;
    bool has_name = tn && json_string_text(w, tn, &name, &n);
    int seen = track_seen(w, uuid, has_name);
    if (seen == 2 || (seen == 1 && !has_name)) return uuid;
    mst_pft_thread_track(w->buf, uuid, (int32_t)pid, (int32_t)tid, name, n, 0);
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
    int64_t max_start;       /* >= every kept start (not lowered on eviction) */
    unsigned n;
    unsigned last;           /* slot of the latest slice added */
    /* The kept slots as a binary min-heap on (end, slot): the root is the
     * slice to evict (earliest end, lowest slot among equal ends) without
     * scanning all LANE_KEEP, and its end is the lane's earliest. */
    uint8_t heap[LANE_KEEP];
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
    if (!l->n) return true;
    /* The latest slice is the likeliest to overlap (spans of a busy thread
     * land on lanes in turn): a quick no. */
    if (partial_overlap(l->start[l->last], l->end[l->last], s, e)) return false;
    if (l->max_end <= s) return true; /* everything kept ended before s */
    /* Every kept slice ends at or after e and starts at or before s: each
     * contains [s, e] (or equals it), so none partly overlaps it. Spans
     * repeating an interval (and a lane of one long span) skip the scan. */
    if (l->end[l->heap[0]] >= e && l->max_start <= s) return true;
    for (unsigned i = 0; i < l->n; i++)
        if (partial_overlap(l->start[i], l->end[i], s, e)) return false;
    return true;
}

/* Heap order: slot a goes before slot b. */
static inline bool heap_before(const lane *l, unsigned a, unsigned b) {
    return l->end[a] < l->end[b] || (l->end[a] == l->end[b] && a < b);
}

static void heap_up(lane *l, unsigned i) {
    while (i) {
        unsigned parent = (i - 1) / 2;
        if (!heap_before(l, l->heap[i], l->heap[parent])) break;
        uint8_t t = l->heap[i];
        l->heap[i] = l->heap[parent];
        l->heap[parent] = t;
        i = parent;
    }
}

static void heap_down(lane *l, unsigned i) {
    for (;;) {
        unsigned c = 2 * i + 1, best = i;
        if (c < l->n && heap_before(l, l->heap[c], l->heap[best])) best = c;
        if (c + 1 < l->n && heap_before(l, l->heap[c + 1], l->heap[best])) best = c + 1;
        if (best == i) return;
        uint8_t t = l->heap[i];
        l->heap[i] = l->heap[best];
        l->heap[best] = t;
        i = best;
    }
}

/* Remembers [s, e] in the lane, dropping its earliest-ending slice if full. */
static void lane_add(lane *l, int64_t s, int64_t e) {
    if (l->n == LANE_KEEP) {
        unsigned i = l->heap[0];
        l->start[i] = s;
        l->end[i] = e;
        l->last = i;
        heap_down(l, 0);
    } else {
        unsigned i = l->n++;
        l->start[i] = s;
        l->end[i] = e;
        l->last = i;
        l->heap[i] = (uint8_t)i;
        heap_up(l, i);
    }
    if (l->n == 1 || e > l->max_end) l->max_end = e;
    if (l->n == 1 || s > l->max_start) l->max_start = s;
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



/* The interned id of a plain (no escapes) JSON string value, interned at
 * its second sighting, or at once when `at_once` (either way its
 * value-seen slot is marked); else 0: written inline, remembered for next
 * time. `s` is the text between the quotes. */
static uint64_t value_iid_when(mst_pftrace_writer *w, const char *s, size_t n, shape_key *memo,
                               bool at_once) {
    uint64_t h = bytes_hash(s, n);
    uint32_t tag = (uint32_t)(h >> 32) | 1u;
    uint32_t *slot = &w->vseen[h & (VSEEN_SLOTS - 1)];
    bool seen = *slot == tag;
    *slot = tag;
    if (!seen && !at_once) return 0;
    const intern_entry *e = intern_hashed(w, MST_PFT_INTERN_STRING_VALUE, s, n, h);
    if (!e) return 0;
    if (memo) {
        memo->voff = e->off;
        memo->vlen = e->len;
        memo->vslot = (uint32_t)(slot - w->vseen);
        memo->vtag = tag;
        memo->viid = e->iid;
    }
    return e->iid;
}

/* value_iid_when interning from the second sighting. */
static uint64_t value_iid(mst_pftrace_writer *w, const char *s, size_t n, shape_key *memo) {
    return value_iid_when(w, s, n, memo, false);
}

/* value_iid of a raw JSON value when it is a plain string of 2..128
 * characters, else 0; `memo` (may be NULL) is the value's position in its
 * span's shape memo: a hit skips hashing, a new interned value refills it. */
static inline __attribute__((always_inline)) uint64_t
json_value_iid(mst_pftrace_writer *w, const mst_json_slice *v, shape_key *memo) {
    if (v->len < 4 || v->len > VALUE_INTERN_MAX_LEN + 2 || v->ptr[0] != '"') return 0;
    const char *s = v->ptr + 1;
    size_t n = v->len - 2;
    if (memo && memo->viid && blob_eq(w, memo->voff, memo->vlen, s, n) &&
        w->vseen[memo->vslot] == memo->vtag)
        return memo->viid;
    if (!no_backslash(s, n)) return 0;
    return value_iid(w, s, n, memo);
}

/* Appends annotation `name_iid` of a raw JSON value: by its interned id
 * when json_value_iid gave one (viid), other strings, numbers and booleans
 * as typed values, anything else (arrays, objects, null) as JSON text. */
static inline __attribute__((always_inline)) void annotate_json(mst_pftrace_writer *w, uint64_t name_iid, const mst_json_slice *v,
                          uint64_t viid) {
    mst_buf *b = &w->ann;
    if (viid) {
        mst_pft_annotation_string_iid(b, name_iid, viid);
        return;
    }
    const char *s;
    size_t n;
    bool dbl;
    int64_t i;
    double d;
    if (v->len >= 2 && v->ptr[0] == '"' && json_string_text(w, v, &s, &n))
        mst_pft_annotation_string(b, name_iid, s, n);
    else if (v->len == 4 && memcmp(v->ptr, "true", 4) == 0)
        mst_pft_annotation_bool(b, name_iid, true);
    else if (v->len == 5 && memcmp(v->ptr, "false", 5) == 0)
        mst_pft_annotation_bool(b, name_iid, false);
    else if (mst_tl_json_number(v, &dbl, &i, &d)) {
        if (dbl) mst_pft_annotation_double(b, name_iid, d);
        else mst_pft_annotation_int(b, name_iid, i);
    } else {
        mst_pft_annotation_json(b, name_iid, v->ptr, v->len);
    }
}

/* strnlen of an id array (33 or 17 bytes): decoded ids are full or empty,
 * told by their first and last digit, anything else takes strnlen. */
static inline size_t id_len(const char *id, size_t size) {
    if (!id[0]) return 0;
    if (id[size - 2] && !id[size - 1]) {
        const uint64_t k = 0x0101010101010101ull;
        uint64_t zero = 0;
        size_t i = 0;
        for (; i + 8 <= size - 1; i += 8) {
            uint64_t x = load64(id + i);
            zero |= (x - k) & ~x;
        }
        if (!(zero & (0x80 * k))) return size - 1;
    }
    return strnlen(id, size);
}
#define ID_LEN(arr) id_len(arr, sizeof(arr))

/* The stream a span's request.ids are chained in: its name on its thread. */
static uint64_t stream_key(int64_t pid, int64_t tid, const mst_str *name) {
    uint64_t h = name->ptr ? bytes_hash_full(name->ptr, name->len) : 0;
    return mix64(h ^ mix64((uint64_t)pid * 0x9E3779B97F4A7C15ull ^ (uint64_t)tid));
}

/* A new pair of marks (intern_entry.mark: the even value and the next),
 * none of them on any entry yet; every entry's mark is cleared when they
 * run out. */
static uint16_t list_mark(mst_pftrace_writer *w) {
    if (w->mark < 2 || w->mark >= UINT16_MAX - 3) {
        for (uint32_t i = 0; i < w->icount; i++) w->ie[i].mark = 0;
        w->mark = 2;
    } else {
        w->mark = (uint16_t)(w->mark + 2);
    }
    return w->mark;
}

/* request.ids that the forwarder rebuilt from exactly the stream's
 * previous list (mst_pft_id_chain_base_is): its kept items are the entries
 * prev[0..n_prev) (iids prev_iids) without the positions that left, in
 * order, so their iids and refs are copied a run at a time and their
 * items laid out by their lengths in the compact rebuilt text; the marks
 * (the previous list's `mark`, this one's mark + 1) go on as in any list.
 * Only the joined ones are split (w->guessed NO_GUESS from *kept on; the
 * places of the kept ones are not stored: mst_pft_id_chain_step_change
 * reads the ones that left from o->left). *kept of the *n items are the
 * kept ones. False when the text is not laid out so: the caller then
 * marks and splits it as any list.
 *
 * What is checked, and why it is enough: base_is vouches that the text
 * was rebuilt by this forwarder from the very list prev stands for (same
 * connection, stream, previous sequence number, length, a shape that adds
 * up), so the kept ids' iids — all the file takes from them — are the
 * entries', whatever the text says; the text only places the items (for
 * the timeline) and the joined ones. Its layout is still checked, so that
 * a text not of these entries' lengths takes the general split: the
 * positions that left ascending and in range, and every kept id's closing
 * quote and separator where the entries' lengths put them, as before (now
 * a load, an xor and an or per id, one branch per run). The refs are the
 * writer's own records of
 * this generation's string values (the chains restart with the interning):
 * only their range is checked again, the one thing a wrong one could
 * break beyond the file. */
static bool split_by_origin(mst_pftrace_writer *w, const mst_json_slice *v,
                            const mst_pf_ids_origin *o, const uint32_t *prev,
                            const uint64_t *prev_iids, size_t n_prev, uint16_t mark,
                            mst_pft_id_item *items, size_t *n, size_t *kept) {
    const char *t = v->ptr;
    size_t len = v->len, off = 1, k = 0;
    if (len < 2 || t[0] != '[' || o->joined_from > n_prev) return false;
    intern_entry *ie = w->ie;
    uint32_t icount = w->icount, *refs = w->item_refs;
    uint64_t *iids = w->item_iids;
    uint16_t this_list = (uint16_t)(mark + 1);
    uint32_t g = 0;
    /* Each kept id's closing quote and separator (`",`) against what they
     * should be, or-ed in one id late: the last one's may be `"]`. */
    const uint16_t quote_comma = '"' | ',' << 8;
    uint16_t off_layout = 0, last_pair = quote_comma;
    for (uint32_t li = 0; li <= o->n_left; li++) {
        /* the run of kept ids [g, end) before the next that left */
        uint32_t end = li < o->n_left ? o->left[li] : (uint32_t)n_prev;
        if (end > n_prev || end < g) return false;
        size_t run = end - g;
        memcpy(iids + k, prev_iids + g, run * sizeof *iids);
        memcpy(refs + k, prev + g, run * sizeof *refs);
        for (; g < end; g++) {
            if (prev[g] >= icount) return false;
            intern_entry *e = &ie[prev[g]];
            e->mark = this_list;
            items[k++] = (mst_pft_id_item){t + off + 1, e->len, &e->tl_hint};
            off += (size_t)e->len + 3; /* "id", */
            if (off > len) return false;
            off_layout |= (uint16_t)(last_pair ^ quote_comma);
            memcpy(&last_pair, t + off - 2, 2);
        }
        if (off_layout) return false; /* one branch a run */
        if (g < n_prev) { /* the one that left */
            if (prev[g] >= icount) return false;
            ie[prev[g++]].mark = mark;
        }
    }
    /* the last kept id's: `",` before the joined ones, `"]` when none */
    if (g != n_prev || k != o->joined_from ||
        (k && last_pair != quote_comma && last_pair != (uint16_t)('"' | ']' << 8)))
        return false;
    *n = *kept = k;
    if (k && t[off - 1] == ']') return off == len; /* none joined */
    if (!mst_pft_split_id_list_rest(t, len, off, items, MST_PFT_ID_LIST_MAX, n)) return false;
    for (size_t i = k; i < *n; i++) w->guessed[i] = MST_PFT_ID_NO_GUESS;
    return true;
}

/* A string list of request ids (key k at shape position p) as a list of
 * interned values; `request.ids` as a keyframe or a delta against the
 * previous span of its stream (pftrace_id_lists.h). `origin` (NULL: none)
 * is where the forwarder's stream state got the list from. False when v is
 * not a plain string list: the caller writes it as JSON. */
static bool annotate_id_list(mst_pftrace_writer *w, shape *sh, size_t p, const mst_str *k,
                             const mst_json_slice *v, uint64_t stream,
                             const mst_pf_ids_origin *origin) {
    size_t n;
    bool is_request_ids = k->len == 11 && memcmp(k->ptr, "request.ids", 11) == 0;
    /* Written as JSON instead when not a plain string list, or when its
     * items would not fit in the intern table (emit_span's room is an
     * estimate): then the stream's next list must be a keyframe. */
    bool shared = w->items_used <= MST_PFT_ID_LIST_MAX && w->n_split < SPLIT_LISTS;
    mst_pft_id_item *items = w->items + (shared ? w->items_used : 2 * MST_PFT_ID_LIST_MAX);
    /* A stream's list is mostly its previous one without a few ids: its
     * items are guessed to be the texts of that list's intern entries (an
     * item equal to one is that entry: one per text), the rest interned. */
    const uint32_t *prev = NULL;
    size_t n_prev = is_request_ids ? mst_pft_id_chain_last(w->chains, stream, &prev) : 0, n_guess = 0;
    intern_entry *ie = w->ie;
    const char *blob = (const char *)w->blob.data;
    mst_pft_id_item *guess = w->guess;
    /* With the previous list's text kept, its runs of kept ids are taken
     * whole (mst_pft_split_id_list_runs); else its entries' texts are the
     * guesses. */
    mst_pft_id_text prev_text;
    bool have_text = n_prev && mst_pft_id_chain_last_text(w->chains, stream, &prev_text);
    /* Rebuilt by the forwarder from this very list: its kept ids are known
     * without reading their text (split_by_origin). */
    bool by_origin = n_prev && origin && mst_pft_id_chain_base_is(w->chains, stream, origin);
    /* The previous list's entries get `mark`, this list's mark + 1 (below). */
    uint16_t mark = n_prev ? list_mark(w) : 0;
    size_t kept = 0; /* items [0, kept) are ids of the previous list, in its order */
    bool split;
    if (by_origin && split_by_origin(w, v, origin, prev, mst_pft_id_chain_last_iids(w->chains, stream),
                                     n_prev, mark, items, &n, &kept)) {
        split = true;
        n_guess = n_prev;
        w->lists_by_origin++;
    } else {
        by_origin = false;
        kept = 0;
        for (uint32_t icount = w->icount; n_guess < n_prev; n_guess++) {
            uint32_t r = prev[n_guess];
            if (r >= icount || ie[r].kind != MST_PFT_INTERN_STRING_VALUE) break;
            ie[r].mark = mark;
            if (!have_text) guess[n_guess] = (mst_pft_id_item){blob + ie[r].off, ie[r].len, NULL};
        }
        split = have_text && n_guess == n_prev
                    ? mst_pft_split_id_list_runs(v->ptr, v->len, items, MST_PFT_ID_LIST_MAX, &n,
                                                 &prev_text, w->guessed)
                    : mst_pft_split_id_list_guided(v->ptr, v->len, items, MST_PFT_ID_LIST_MAX, &n,
                                                   guess, have_text ? 0 : n_guess, w->guessed);
    }
    if (!split || w->icount + n + 3 > INTERN_MAX) {
        if (is_request_ids) mst_pft_id_chain_forget(w->chains, stream);
        return false;
    }
    /* The list's shape against the previous one, told on the way: ids of
     * the previous list first (guessed, so in its order), then ids not in
     * it (their entries' mark is neither mark nor mark + 1: not in the
     * previous list, not met before in this one). Then its delta needs no
     * set of its ids (mst_pft_id_chain_step_shaped). */
    bool shaped = n_guess == n_prev;
    const uint32_t *guessed = w->guessed;
    uint64_t *iids = w->item_iids;
    uint32_t *refs = w->item_refs;
    for (size_t i = kept; i < n; i++) {
        intern_entry *e;
        if (guessed[i] != MST_PFT_ID_NO_GUESS) {
            e = &ie[prev[guessed[i]]];
            shaped &= kept++ == i;
        } else {
            e = intern_e(w, MST_PFT_INTERN_STRING_VALUE, items[i].s, items[i].n);
            if (!e) return true; /* out of memory: the add fails and rolls back */
            shaped &= (uint16_t)(e->mark - mark) > 1;
        }
        e->mark = (uint16_t)(mark + 1);
        iids[i] = e->iid;
        refs[i] = (uint32_t)(e - ie);
        items[i].hint = &e->tl_hint;
    }
    if (shared) { /* the timeline reads the list from these items */
        mst_tl_list_change change = {0};
        if (by_origin) /* vouched: the previous list of this stream without o->left, then joined ones */
            change = (mst_tl_list_change){stream, origin->conn, origin->stream, origin->seq,
                                          (uint32_t)n_prev, origin->n_left, origin->left, kept};
        w->split[w->n_split++] = (mst_tl_split_list){v, items, n, change};
        w->items_used += n;
    }
    mst_pft_id_delta d = {0, NULL, w->item_iids, 0, n};
    if (is_request_ids &&
        !(by_origin && shaped ? mst_pft_id_chain_step_change(w->chains, stream, iids, refs, n, guessed, kept,
                                                              n_prev, origin->left, origin->n_left, &d)
          : n_prev && shaped  ? mst_pft_id_chain_step_shaped(w->chains, stream, iids, refs, n, guessed,
                                                             kept, n_prev, &d)
                              : mst_pft_id_chain_step(w->chains, stream, iids, refs, n, &d)))
        w->buf->failed = true;
    else if (is_request_ids) {
        /* The next list's runs are read against this text, unless the
         * forwarder tells what it kept (then a copy of the text is not
         * worth it: a list it sends whole is split by its entries' texts). */
        if (!by_origin) mst_pft_id_chain_keep_text(w->chains, stream, v->ptr, v->len, items, n);
        if (origin) mst_pft_id_chain_set_origin(w->chains, stream, origin);
    }
    if (!d.pos) {
        mst_pft_annotation_iid_array(&w->ann, shape_key_iid(w, sh, p, k->ptr, k->len), w->item_iids, n);
        return true;
    }
    static const char *const names[3] = {"request.ids.delta", "request.ids.left", "request.ids.joined"};
    if (w->delta_gen != w->intern_gen) {
        for (int f = 0; f < 3; f++)
            w->delta_iid[f] = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, names[f], strlen(names[f]));
        w->delta_gen = w->intern_gen;
    }
    mst_pft_annotation_int(&w->ann, w->delta_iid[0], d.pos);
    if (d.n_left) mst_pft_annotation_iid_array(&w->ann, w->delta_iid[1], d.left, d.n_left);
    if (d.n_joined) mst_pft_annotation_iid_array(&w->ann, w->delta_iid[2], d.joined, d.n_joined);
    return true;
}

/* Event-name iid, through a memo of recent names by length. */
static uint64_t name_iid(mst_pftrace_writer *w, const char *s, size_t n) {
    name_memo *m = &w->names[n & (NAME_MEMO - 1)];
    if (m->gen == w->intern_gen && blob_eq(w, m->off, m->len, s, n)) return m->iid;
    const intern_entry *e = intern_e(w, MST_PFT_INTERN_EVENT_NAME, s, n);
    if (!e) return 0;
    *m = (name_memo){w->intern_gen, e->off, e->len, e->iid};
    return e->iid;
}

/* The span's slice begin and end on its thread track (or overlap lane):
 * the thread and lane descriptors, when due, go out after the attribute
 * loop (which finds thread.name on the way) and before the slice. */
/* Writes span s as a slice: on `track` when given (a request's own track),
 * else on its thread track or a lane of it; `own_flow` is its span's flow
 * id, `step_flow` (0: none) joins it to its engine step. */
static void emit_span(mst_pftrace_writer *w, const mst_pf_span *s, int64_t pid, int64_t tid,
                      uint64_t track, uint64_t own_flow, uint64_t step_flow) {
    size_t need = 2 + 2 * (s->n_attrs + s->n_resource) + FIXED_ANNOTATIONS + 1 + 3;
    uint64_t id_lists = 0; /* which of the first 64 attributes are id lists */
    for (size_t i = 0; i < s->n_attrs; i++) /* a list item is at least `"",` */
        if (mst_pft_is_id_list_key(s->attrs[i].key.ptr, s->attrs[i].key.len)) {
            if (i < 64) id_lists |= 1ull << i;
            need += s->attrs[i].value.len / 3 < MST_PFT_ID_LIST_MAX ? s->attrs[i].value.len / 3
                                                                    : MST_PFT_ID_LIST_MAX;
        }
    intern_room(w, need);
    mst_buf_reset(&w->ann);
    w->items_used = w->n_split = 0;
    const char *cat = s->category.ptr ? s->category.ptr : DEFAULT_CATEGORY;
    size_t cat_n = s->category.ptr ? s->category.len : strlen(DEFAULT_CATEGORY);
    mst_pft_slice sl;
    sl.name_iid = name_iid(w, s->name.ptr ? s->name.ptr : "", s->name.ptr ? s->name.len : 0);
    shape *sh = shape_of(w, sl.name_iid);
    if (sh->cat_iid && blob_eq(w, sh->cat_off, sh->cat_len, cat, cat_n)) {
        sl.category_iid = sh->cat_iid;
    } else {
        const intern_entry *e = intern_e(w, MST_PFT_INTERN_CATEGORY, cat, cat_n);
        sl.category_iid = e ? e->iid : 0;
        if (e) {
            sh->cat_off = e->off;
            sh->cat_len = e->len;
            sh->cat_iid = e->iid;
        }
    }
    size_t pos = 0; /* annotation position in the shape memo */
    /* Annotations go out in file order (attributes, the fixed six,
     * resource), ids are assigned in interning order (attributes, fixed
     * names, resource, then the service name's value). */
    bool any_resource_prefixed = false;
    const mst_json_slice *thread_name = NULL; /* the first thread.name */
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_str *k = &s->attrs[i].key;
        if (k->len > 9 && memcmp(k->ptr, "resource.", 9) == 0) any_resource_prefixed = true;
        if (k->len == 11 && !thread_name && memcmp(k->ptr, "thread.name", 11) == 0)
            thread_name = &s->attrs[i].value;
        if (mst_span_arg_is_fixed(k)) continue;
        if ((i < 64 ? id_lists >> i & 1 : mst_pft_is_id_list_key(k->ptr, k->len)) &&
            annotate_id_list(w, sh, pos, k, &s->attrs[i].value, stream_key(pid, tid, &s->name),
                             s->ids_origin.valid && i == s->ids_attr ? &s->ids_origin : NULL)) {
            pos++;
            continue;
        }
        uint64_t iid = shape_key_iid(w, sh, pos, k->ptr, k->len);
        shape_key *memo = pos < sh->valid ? &sh->k[pos] : NULL;
        pos++;
        annotate_json(w, iid, &s->attrs[i].value, json_value_iid(w, &s->attrs[i].value, memo));
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
    /* Ids as the hex text Jaeger shows. The trace id and the parent recur
     * across a trace's spans and are interned from their second sighting,
     * as repeated values are (value_iid); a span with a parent shares its
     * trace with that parent, so its trace id is interned at once. The
     * span id is unique and stays inline. Interned only while the table
     * keeps room for the resource entries still to come
     * (docs/architecture.md "Trace and span ids"). */
    size_t trace_n = ID_LEN(s->trace_id), parent_n = ID_LEN(s->parent_span_id);
    bool ids_room = w->icount + 2 + 2 * s->n_resource + 1 <= INTERN_MAX;
    uint64_t trace_viid =
        ids_room && trace_n ? value_iid_when(w, s->trace_id, trace_n, NULL, parent_n != 0) : 0;
    uint64_t parent_viid = ids_room && parent_n ? value_iid(w, s->parent_span_id, parent_n, NULL) : 0;
    if (trace_viid) mst_pft_annotation_string_iid(&w->ann, fixed_iid[0], trace_viid);
    else mst_pft_annotation_string(&w->ann, fixed_iid[0], s->trace_id, trace_n);
    mst_pft_annotation_string(&w->ann, fixed_iid[1], s->span_id, ID_LEN(s->span_id));
    if (parent_viid) mst_pft_annotation_string_iid(&w->ann, fixed_iid[2], parent_viid);
    else mst_pft_annotation_string(&w->ann, fixed_iid[2], s->parent_span_id, parent_n);
    mst_pft_annotation_int(&w->ann, fixed_iid[3], s->kind);
    mst_pft_annotation_int(&w->ann, fixed_iid[4], s->status);
    /* Resource names and values are interned before the service name's
     * value and written after it. */
    uint64_t *res = w->res_iids;
    const mst_json_slice *svc = NULL; /* the first service.name */
    for (size_t i = 0; i < s->n_resource; i++) {
        const mst_str *k = &s->resource[i].key;
        res[2 * i] = 0;
        if (k->len == 12 && !svc && memcmp(k->ptr, "service.name", 12) == 0)
            svc = &s->resource[i].value;
        if (any_resource_prefixed && mst_span_attr_shadows(s, k)) continue;
        size_t p = pos++;
        if (p < sh->valid && sh->k[p].len == 9 + (size_t)k->len &&
            memcmp(w->blob.data + sh->k[p].off, "resource.", 9) == 0 &&
            bytes_eq((const char *)w->blob.data + sh->k[p].off + 9, k->ptr, k->len)) {
            res[2 * i] = sh->k[p].iid;
            res[2 * i + 1] = json_value_iid(w, &s->resource[i].value, &sh->k[p]);
            continue;
        }
        /* "resource." + key, on the stack when it fits. */
        char name[128];
        const char *nm = name;
        if (9 + (size_t)k->len <= sizeof name) {
            memcpy(name, "resource.", 9);
            memcpy(name + 9, k->ptr, k->len);
        } else {
            mst_buf_reset(&w->scratch);
            mst_buf_append(&w->scratch, "resource.", 9);
            mst_buf_append(&w->scratch, k->ptr, k->len);
            if (w->scratch.failed) {
                w->buf->failed = true;
                return;
            }
            nm = (const char *)w->scratch.data;
        }
        res[2 * i] = shape_key_iid(w, sh, p, nm, 9 + (size_t)k->len);
        res[2 * i + 1] = json_value_iid(w, &s->resource[i].value, p < sh->valid ? &sh->k[p] : NULL);
    }
    if (svc)
        annotate_json(w, fixed_iid[5], svc, json_value_iid(w, svc, &sh->svc));
    else
        mst_pft_annotation_string(&w->ann, fixed_iid[5], DEFAULT_SERVICE_NAME,
                                  strlen(DEFAULT_SERVICE_NAME));
    for (size_t i = 0; i < s->n_resource; i++)
        if (res[2 * i]) annotate_json(w, res[2 * i], &s->resource[i].value, res[2 * i + 1]);
    /* Flows: this span's own id (a later span linking here joins it), then
     * one per drawn link (joining the linked span, written before or after). */
    size_t n_drawn = mst_span_drawn_links(s);
    w->flows[0] = own_flow;
    for (size_t l = 0; l < n_drawn; l++)
        w->flows[1 + l] = mst_tl_span_flow_id(s->links[l].trace_id, s->links[l].span_id);
    size_t n_flows = 1 + n_drawn;

    int64_t end = s->end_ns > s->start_ns ? s->end_ns : s->start_ns;
    /* Threads are named by the span's thread.name, else by the role. */
    uint64_t thread = ensure_thread(w, pid, tid,
                                    thread_name ? thread_name
                                                : mst_span_find_kv(s->attrs, s->n_attrs, "process.role"));
    if (!track) track = pick_lane(w, thread, s->start_ns, end);
    sl.ts_ns = (uint64_t)s->start_ns;
    sl.seq_flags = packet_flags(w, true);
    sl.track_uuid = track;
    take_parts(w, &sl);
    sl.flow_ids = w->flows;
    sl.n_flows = n_flows;
    /* The step this span joins ends its flow here: a terminating id, so a
     * reader counting flow_ids as links (mstrace analyze) counts none. */
    sl.terminating_flow_ids = &step_flow;
    sl.n_terminating = step_flow ? 1 : 0;
    mst_pft_slice_begin(w->buf, &sl);
    mst_pft_slice_end(w->buf, (uint64_t)end, track);
    w->buffered_spans++;
    w->buffered_flows += n_drawn;
}

/* ------------------------------------------------------------ timeline sink */

/* Begins a slice `name` on `track` (with the request's annotations when
 * r is given); the caller ends it with mst_pft_slice_end. */
static void named_slice(mst_pftrace_writer *w, uint64_t track, const char *name, int64_t start,
                        const mst_tl_request *r) {
    intern_room(w, 4); /* name, request.id, request.steps, request.preemptions */
    mst_buf_reset(&w->ann);
    mst_pft_slice sl;
    memset(&sl, 0, sizeof sl);
    sl.name_iid = intern(w, MST_PFT_INTERN_EVENT_NAME, name, strlen(name));
    if (r) {
        uint64_t id_iid = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, "request.id", 10);
        uint64_t steps_iid = intern(w, MST_PFT_INTERN_ANNOTATION_NAME, "request.steps", 13);
        mst_pft_annotation_string(&w->ann, id_iid, r->id, r->id_len);
        mst_pft_annotation_int(&w->ann, steps_iid, r->steps);
        if (r->preemptions)
            mst_pft_annotation_int(&w->ann, intern(w, MST_PFT_INTERN_ANNOTATION_NAME, "request.preemptions", 19),
                                   r->preemptions);
    }
    sl.ts_ns = (uint64_t)start;
    sl.seq_flags = packet_flags(w, true);
    sl.track_uuid = track;
    take_parts(w, &sl);
    mst_pft_slice_begin(w->buf, &sl);
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
    /* The outer slice carries the request's step counts; its vllm.request
     * span, when there is one, is on the request's own thread
     * (request_span_track), which `mstrace analyze` reads. */
    named_slice(w, track, "request", r->start_ns, r);
    for (unsigned i = 0; i < r->n_phases; i++) {
        named_slice(w, track, r->phases[i].name, r->phases[i].start_ns, NULL);
        mst_pft_slice_end(w->buf, (uint64_t)r->phases[i].end_ns, track);
    }
    mst_pft_slice_end(w->buf, (uint64_t)r->end_ns, track);
}

/* A span's counter samples share its end time: the timestamp and each
 * track's uuid are encoded once and copied into the packets (the same
 * bytes; neither depends on interning). */
static void sink_counter(void *self, const mst_tl_counter *c) {
    mst_pftrace_writer *w = self;
    const counter_memo *m = counter_track(w, c->pid, c->name);
    if (!track_seen(w, m->uuid, true))
        mst_pft_counter_track(w->buf, m->uuid, process_uuid(c->pid), c->name, strlen(c->name));
    if (!w->counter_ts_v.len || w->counter_ts != (uint64_t)c->ts_ns) {
        w->counter_ts = (uint64_t)c->ts_ns;
        mst_pft_varint_set(&w->counter_ts_v, w->counter_ts);
    }
    if (c->is_double) mst_pft_counter_double_at(w->buf, &w->counter_ts_v, &m->track, c->d);
    else mst_pft_counter_int_at(w->buf, &w->counter_ts_v, &m->track, c->i);
}

/* The own track of the vllm.request span of lane `req_lane`: a thread of
 * its own in the request's process (the same (pid, tid) as in the JSON,
 * mst_tl_request_tid), named by the request id and ranked by arrival. It
 * is what `mstrace analyze` reads as a thread's spans; the phases are on the
 * request's track under "Requests" (sink_request), which it skips. */
static uint64_t request_span_track(mst_pftrace_writer *w, const mst_pf_span *s, int64_t pid,
                                   uint32_t req_lane) {
    int64_t tid = mst_tl_request_tid(req_lane);
    uint64_t track = thread_uuid(pid, tid);
    const char *id = NULL;
    size_t n = 0;
    if (!track_seen(w, track, true) &&
        json_string_text(w, mst_span_find_kv(s->attrs, s->n_attrs, "request.id"), &id, &n))
        mst_pft_thread_track(w->buf, track, (int32_t)pid, (int32_t)tid, id, n,
                             mst_timeline_arrival_rank(w->tl, s->start_ns));
    return track;
}

/* "step <index>" into name (32 bytes); its length. */
static size_t step_name(char *name, int64_t index) {
    char digits[24];
    size_t k = 0, n = 0;
    uint64_t v = index < 0 ? 0 - (uint64_t)index : (uint64_t)index;
    do {
        digits[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(name, "step ", 5);
    n = 5;
    if (index < 0) name[n++] = '-';
    while (k) name[n++] = digits[--k];
    return n;
}

/* An engine step: "step N" on the engine's "engine steps" track (a child
 * of its process track, beside its threads), with the flows joining it to
 * its worker forward and output processing. */
static void sink_step(void *self, const mst_tl_step *st) {
    mst_pftrace_writer *w = self;
    uint64_t track = mix64(process_uuid(st->pid) ^ 0x7374657073ull);
    if (!track_seen(w, track, true))
        mst_pft_named_track(w->buf, track, process_uuid(st->pid), "engine steps", 12, -1);
    char name[32];
    size_t n = step_name(name, st->index);
    intern_room(w, 4);
    mst_buf_reset(&w->ann);
    mst_pft_slice sl;
    memset(&sl, 0, sizeof sl);
    sl.name_iid = intern(w, MST_PFT_INTERN_EVENT_NAME, name, n);
    mst_pft_annotation_int(&w->ann, intern_memo(w, &w->step_names[0], "step.index", 10), st->index);
    if (st->requests >= 0)
        mst_pft_annotation_int(&w->ann, intern_memo(w, &w->step_names[1], "batch.request_count", 19),
                               st->requests);
    if (st->tokens >= 0)
        mst_pft_annotation_int(&w->ann, intern_memo(w, &w->step_names[2], "batch.scheduled_tokens", 22),
                               st->tokens);
    uint64_t flows[2] = {st->worker_flow, st->output_flow};
    size_t nf = 2;
    sl.ts_ns = (uint64_t)st->start_ns;
    sl.seq_flags = packet_flags(w, true);
    sl.track_uuid = track;
    take_parts(w, &sl);
    sl.flow_ids = flows;
    sl.n_flows = nf;
    mst_pft_slice_begin(w->buf, &sl);
    mst_pft_slice_end(w->buf, (uint64_t)st->end_ns, track);
    w->buffered_flows += st->n_joined;
}

static mst_tl_sink make_sink(mst_pftrace_writer *w) {
    return (mst_tl_sink){w, sink_request, sink_counter, sink_step};
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
    if (mst_tl_is_story_span(s)) {
        /* A request's story for Jaeger: its phases are drawn from the step
         * record instead. Counted as written (handled, nothing to add). */
        if (!mst_outq_buf(w->out)) return MST_ERR_NOMEM;
        mst_outq_added(w->out, 1, 0);
        return MST_OK;
    }
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
    mst_tl_sink sink = make_sink(w);
    uint32_t req_lane = mst_timeline_request_lane(w->tl, s, pid, &w->arena, &sink);
    uint64_t track = req_lane ? request_span_track(w, s, pid, req_lane) : 0;
    if (req_lane) tid = mst_tl_request_tid(req_lane);
    mst_tl_pos at = {pid, tid, s->start_ns, mst_tl_span_flow_id(s->trace_id, s->span_id)}, step;
    emit_span(w, s, pid, tid, track, at.flow,
              mst_timeline_join_step(w->tl, s, &at, &step) ? step.flow : 0);
    /* The timeline keeps its lookups of the split ids in their intern
     * entries (mst_tl_id_item.hint). A sink call that restarted interning
     * meanwhile gave entries to other texts, some perhaps since written a
     * hint meant for the old one: every hint is dropped then (rare: once
     * per INTERN_MAX new strings). */
    uint64_t gen = w->intern_gen;
    mst_timeline_add_span_split(w->tl, s, pid, &w->arena, &sink, w->split, w->n_split);
    if (w->intern_gen != gen)
        for (uint32_t i = 0; i < INTERN_MAX; i++) w->ie[i].tl_hint = 0;
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

void mst_pftrace_writer_add_counter(mst_pftrace_writer *w, const mst_tl_counter *c) {
    if (!w || !c || !begin_add(w)) return;
    size_t mark = w->buf->len;
    ensure_process(w, c->pid, NULL);
    sink_counter(w, c);
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

uint64_t mst_pftrace_writer_lists_by_origin(const mst_pftrace_writer *w) { return w->lists_by_origin; }

void mst_pftrace_writer_get_stats(const mst_pftrace_writer *w, mst_chrome_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!w) return;
    mst_outq_stats os;
    mst_outq_get_stats(w->out, &os);
    *out = w->st;
    mst_chrome_stats_add_outq(out, &os, w->full_dropped);
}

void mst_pftrace_writer_get_disk_stats(const mst_pftrace_writer *w, mst_outq_stats *out) {
    mst_outq_get_stats(w->out, out);
}

static void writer_free(mst_pftrace_writer *w) {
    free(w->islots);
    free(w->ie);
    free(w->shapes);
    mst_buf_free(&w->defs);
    mst_buf_free(&w->ann);
    free(w->res_iids);
    free(w->flows);
    free(w->vseen);
    mst_pft_id_chains_free(w->chains);
    free(w->items);
    free(w->item_iids);
    free(w->item_refs);
    free(w->guess);
    free(w->guessed);
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
    if (w) {
        w->islots = calloc(INTERN_SLOTS, sizeof *w->islots);
        w->ie = calloc(INTERN_MAX, sizeof *w->ie);
        mst_buf_init(&w->defs, 0);
        mst_buf_init(&w->ann, 0);
        w->res_iids = calloc(2u * MST_PF_MAX_ATTRS, sizeof *w->res_iids);
        w->shapes = calloc(SHAPE_SLOTS, sizeof *w->shapes);
        w->flows = calloc(MST_PF_MAX_LINKS + 1u, sizeof *w->flows);
        w->vseen = calloc(VSEEN_SLOTS, sizeof *w->vseen);
        w->chains = mst_pft_id_chains_new();
        w->items = calloc(ITEMS_CAP, sizeof *w->items);
        w->item_iids = calloc(MST_PFT_ID_LIST_MAX, sizeof *w->item_iids);
        w->item_refs = calloc(MST_PFT_ID_LIST_MAX, sizeof *w->item_refs);
        w->guess = calloc(MST_PFT_ID_LIST_MAX, sizeof *w->guess);
        w->guessed = calloc(MST_PFT_ID_LIST_MAX, sizeof *w->guessed);
        w->tslots = calloc(TRACK_SLOTS, sizeof *w->tslots);
        w->tnamed = calloc(TRACK_SLOTS, 1);
        w->lanes = calloc(LANE_THREADS, sizeof *w->lanes);
        w->tl = mst_timeline_new(MST_TL_MAX_REQUESTS);
        mst_buf_init(&w->blob, 0);
        mst_buf_init(&w->scratch, 0);
        mst_arena_init(&w->arena);
    }
    if (!w || !w->islots || !w->ie || !w->res_iids || !w->flows || !w->shapes || !w->vseen ||
        !w->chains || !w->items || !w->item_iids || !w->item_refs ||
        !w->guess || !w->guessed ||
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
        mst_pft_thread_ordering_explicit(b); /* request threads by arrival */
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
