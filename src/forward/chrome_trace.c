/*
 * chrome_trace.c — the forwarder's Chrome Trace Event JSON writer
 * (chrome_trace.h, docs/forwarder.md "Output format"). Owns the output
 * file, the event buffer and the two bounded link tables; request tracks and
 * counters come from the shared timeline model (timeline.h), laid out here
 * as JSON.
 *
 * Output: events are formatted here, on the caller's (the epoll) thread,
 * into the current chunk of an out_queue (out_queue.h), whose own thread
 * writes them: each write puts "<events>]" over the previous closing ']'
 * (each event is preceded by ','; the file starts as "[]"), so the file is
 * valid JSON after every write, and the page-cache copy of the output runs
 * on another core while the next events are decoded. Chunks are handed
 * over at the end of every batch (mst_chrome_writer_handoff) and when full.
 * A slow disk (or a writeback stall) makes unwritten events pile up; at
 * MAX_UNWRITTEN_BYTES the caller waits for the writer thread, exactly as
 * the single-threaded writer waited in pwrite: the epoll loop stops
 * reading, the clients' socket buffers fill and their exporters (100 ms
 * budget per batch on their own thread) count what does not fit. Why wait
 * rather than drop here: a stall of a few hundred ms is common on a busy
 * box (seen in the benchmark), and waiting loses nothing that the clients
 * could still deliver, while the traced processes never wait either way.
 * Only when the writer cannot progress (writes failing) is a span dropped
 * and counted (spans_dropped).
 *
 * Tables: span positions (trace_id, span_id) -> (pid, tid, start), and
 * an "already named" set for M events: each an open-addressing hash index
 * (seeded hash, linear probing, backward-shift deletion; see track_table)
 * over a fixed pool with an intrusive FIFO list, so find/insert/remove are
 * O(1) on average and the oldest entry is evicted (and counted) when the
 * table holds MST_CHROME_MAX_TRACKED entries. Pending links are two-level,
 * because many spans may link to one source that never arrives (every
 * schedule span links to a long-lived request): a hash table of distinct
 * source keys ("groups"), each owning a doubly linked list of waiting
 * destinations (pid, tid, start, span_id) kept in a pool with its own
 * global FIFO; so a long list under one key never lengthens a hash chain
 * and evicting the oldest destination is O(1). The pools are calloc'd, so
 * untouched pages cost no memory.
 */
#include "forward/chrome_trace.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "forward/out_queue.h"
#include "forward/output_path.h"
#include "forward/timeline.h"

/* Unwritten output (queued + being formatted) at which add_span waits for
 * the writer thread: about 0.2 s of output at the forwarder's full speed. */
#define MAX_UNWRITTEN_BYTES (64u << 20)
#define DEFAULT_SERVICE_NAME "ms_service_profiler"
/* Links whose table lines are prefetched (the rest are simply looked up). */
#define PREFETCH_LINKS 4

/* ------------------------------------------------------------ tables */

typedef struct track_entry {
    uint8_t key[24];   /* trace_id(16) + span_id(8), or a names key */
    uint32_t older;    /* FIFO neighbours, index + 1; `older` doubles as free list */
    uint32_t newer;
    int64_t pid, tid, ts_ns;
    uint32_t first, last; /* pending groups: their destinations, index + 1 */
} track_entry;             /* 64 bytes: one cache line in the aligned pool */

/* Open addressing over a power-of-two slot array (load <= 0.5), linear
 * probing, backward-shift deletion (no tombstones, so probe sequences never
 * lengthen with churn). A slot holds (32-bit hash << 32) | (index + 1), 0 =
 * empty: the stored hash gives the slot's home for the backward shift and
 * filters almost every non-matching slot without touching its entry, so a
 * lookup of an absent key (the common case for the pending-link groups and
 * for a new span's position) costs one cache line. */
typedef struct track_table {
    track_entry *e;     /* pool, 64-byte aligned; untouched pages stay unbacked */
    uint64_t *slots;
    uint64_t seed;
    uint32_t mask;
    uint32_t cap;
    uint32_t count;
    uint32_t used;      /* pool slots ever handed out */
    uint32_t free_head; /* index + 1, chained through `older` */
    uint32_t oldest, newest;
} track_table;

static bool table_init(track_table *t, uint32_t cap) {
    memset(t, 0, sizeof *t);
    uint32_t nb = 16;
    while (nb < cap * 2u && nb < (1u << 30)) nb <<= 1;
    /* Entries are fully written when handed out, so the pool needs no
     * zeroing (and big allocations come from mmap: lazily backed). */
    t->e = aligned_alloc(64, ((size_t)cap * sizeof *t->e + 63) & ~(size_t)63);
    t->slots = calloc(nb, sizeof *t->slots);
    if (!t->e || !t->slots) {
        free(t->e);
        free(t->slots);
        memset(t, 0, sizeof *t);
        return false;
    }
    t->mask = nb - 1;
    t->cap = cap;
    /* Per-table random seed: ids come from other processes, so a fixed hash
     * would let a client craft colliding keys and long probe runs. */
    uint64_t seed = (uint64_t)(uintptr_t)t->e ^ ((uint64_t)getpid() << 32);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t->seed = seed ^ (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull;
    return true;
}

static void table_free(track_table *t) {
    free(t->e);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* 64x64->128 multiply folded to 64 bits (the wyhash mixing step). */
static inline uint64_t mum(uint64_t a, uint64_t b) {
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Seeded hash of the 24 key bytes; 32 bits are kept in the slot. */
static inline uint32_t key_hash(const track_table *t, const uint8_t key[24]) {
    uint64_t h = mum(load64(key) ^ t->seed, load64(key + 8) ^ 0xe7037ed1a0b428dbull);
    h = mum(h ^ load64(key + 16), 0x8ebc6af09c88c6e3ull ^ t->seed);
    return (uint32_t)(h ^ (h >> 32));
}

static uint32_t table_find(const track_table *t, const uint8_t key[24]) {
    uint32_t h = key_hash(t, key);
    for (uint32_t pos = h & t->mask;; pos = (pos + 1) & t->mask) {
        uint64_t sl = t->slots[pos];
        if (!sl) return 0;
        uint32_t i = (uint32_t)sl;
        if ((uint32_t)(sl >> 32) == h && memcmp(t->e[i - 1].key, key, 24) == 0) return i;
    }
}

/* Starts loading the cache lines a later find/insert of `key` will touch
 * (its home slot and, when the table is full, the entry that insert would
 * evict), so those misses overlap the event formatting done meanwhile. */
static inline void table_prefetch(const track_table *t, const uint8_t key[24]) {
    __builtin_prefetch(&t->slots[key_hash(t, key) & t->mask]);
    if (t->count == t->cap) __builtin_prefetch(&t->e[t->oldest - 1]);
}

/* Empties slot `hole` and shifts later members of its probe run back so
 * every entry stays reachable from its home slot (Knuth's algorithm R). */
static void slots_delete(track_table *t, uint32_t hole) {
    uint32_t j = hole;
    for (;;) {
        j = (j + 1) & t->mask;
        uint64_t sl = t->slots[j];
        if (!sl) break;
        uint32_t home = (uint32_t)(sl >> 32) & t->mask;
        /* The entry at j may fill the hole unless its home lies cyclically
         * in (hole, j]. */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays) continue;
        t->slots[hole] = sl;
        hole = j;
    }
    t->slots[hole] = 0;
}

/* Removes entry `i` (index + 1) from the slots and the FIFO list. */
static void table_remove(track_table *t, uint32_t i) {
    track_entry *x = &t->e[i - 1];
    uint32_t pos = key_hash(t, x->key) & t->mask;
    while ((uint32_t)t->slots[pos] != i) pos = (pos + 1) & t->mask;
    slots_delete(t, pos);
    if (x->older) t->e[x->older - 1].newer = x->newer; else t->oldest = x->newer;
    if (x->newer) t->e[x->newer - 1].older = x->older; else t->newest = x->older;
    x->older = t->free_head;
    t->free_head = i;
    t->count--;
}

/* Adds a new entry for key (the caller checked it is absent); evicts the
 * oldest first when full. Returns index + 1. */
static uint32_t table_insert(track_table *t, const uint8_t key[24], bool *evicted) {
    *evicted = false;
    if (t->count == t->cap) {
        table_remove(t, t->oldest);
        *evicted = true;
    }
    uint32_t i;
    if (t->free_head) {
        i = t->free_head;
        t->free_head = t->e[i - 1].older;
    } else {
        i = ++t->used;
    }
    track_entry *x = &t->e[i - 1];
    memcpy(x->key, key, 24);
    uint32_t h = key_hash(t, key);
    uint32_t pos = h & t->mask;
    while (t->slots[pos]) pos = (pos + 1) & t->mask;
    t->slots[pos] = ((uint64_t)h << 32) | i;
    x->older = t->newest;
    x->newer = 0;
    x->first = x->last = 0;
    if (t->newest) t->e[t->newest - 1].newer = i; else t->oldest = i;
    t->newest = i;
    t->count++;
    return i;
}

/* A link waiting for its source span: the linking span's position. */
typedef struct pend_dest {
    uint32_t group;         /* index + 1 into the groups table */
    uint32_t g_prev, g_next; /* within the group's list, index + 1 */
    uint32_t older, newer;  /* global FIFO, index + 1; `older` doubles as free list */
    int64_t pid, tid, ts_ns;
    uint8_t span[8];
} pend_dest;

typedef struct pend_table {
    track_table groups;     /* distinct source keys; first/last = list */
    pend_dest *d;
    uint32_t cap, count, used, free_head, oldest, newest;
} pend_table;

static bool pend_init(pend_table *p, uint32_t cap) {
    memset(p, 0, sizeof *p);
    p->d = calloc(cap, sizeof *p->d);
    if (!p->d || !table_init(&p->groups, cap)) {
        free(p->d);
        p->d = NULL;
        return false;
    }
    p->cap = cap;
    return true;
}

static void pend_free(pend_table *p) {
    table_free(&p->groups);
    free(p->d);
    memset(p, 0, sizeof *p);
}

/* Unlinks destination i (index + 1) from its group (dropping an emptied
 * group) and from the FIFO, and frees it. */
static void pend_remove(pend_table *p, uint32_t i) {
    pend_dest *x = &p->d[i - 1];
    track_entry *g = &p->groups.e[x->group - 1];
    if (x->g_prev) p->d[x->g_prev - 1].g_next = x->g_next; else g->first = x->g_next;
    if (x->g_next) p->d[x->g_next - 1].g_prev = x->g_prev; else g->last = x->g_prev;
    if (!g->first) table_remove(&p->groups, x->group);
    if (x->older) p->d[x->older - 1].newer = x->newer; else p->oldest = x->newer;
    if (x->newer) p->d[x->newer - 1].older = x->older; else p->newest = x->older;
    x->older = p->free_head;
    p->free_head = i;
    p->count--;
}

/* Queues a destination under source `key`; evicts the oldest first when
 * full (*evicted). Returns the new destination. */
static pend_dest *pend_add(pend_table *p, const uint8_t key[24], bool *evicted) {
    *evicted = false;
    if (p->count == p->cap) {
        pend_remove(p, p->oldest);
        *evicted = true;
    }
    uint32_t g = table_find(&p->groups, key);
    if (!g) {
        bool unused; /* groups <= destinations < cap: never evicts */
        g = table_insert(&p->groups, key, &unused);
        p->groups.e[g - 1].first = p->groups.e[g - 1].last = 0;
    }
    uint32_t i;
    if (p->free_head) {
        i = p->free_head;
        p->free_head = p->d[i - 1].older;
    } else {
        i = ++p->used;
    }
    pend_dest *x = &p->d[i - 1];
    track_entry *ge = &p->groups.e[g - 1];
    x->group = g;
    x->g_next = 0;
    x->g_prev = ge->last;
    if (ge->last) p->d[ge->last - 1].g_next = i; else ge->first = i;
    ge->last = i;
    x->newer = 0;
    x->older = p->newest;
    if (p->newest) p->d[p->newest - 1].newer = i; else p->oldest = i;
    p->newest = i;
    p->count++;
    return x;
}

/* ------------------------------------------------------------ writer */

struct mst_chrome_writer {
    int fd;
    int64_t default_pid;
    mst_outq *out;            /* the writer thread and its chunks */
    mst_buf *buf;             /* out's current chunk, during add_span */
    uint64_t full_dropped;    /* spans refused at MAX_UNWRITTEN_BYTES */
    mst_buf scratch;          /* building "resource.<key>", process names */
    uint64_t buffered_spans, buffered_flows; /* events of the span being added */
    track_table pos, names;
    pend_table pend;
    mst_timeline *tl;         /* request tracks and counters (timeline.h) */
    mst_arena arena;          /* scratch for the timeline, reset per span */
    mst_chrome_stats st;
};

/* Hex digit values (any case; every other byte 0, as before). */
static const uint8_t hexval_tbl[256] = {
    ['0'] = 0, ['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 5, ['6'] = 6, ['7'] = 7,
    ['8'] = 8, ['9'] = 9, ['a'] = 10, ['b'] = 11, ['c'] = 12, ['d'] = 13, ['e'] = 14,
    ['f'] = 15, ['A'] = 10, ['B'] = 11, ['C'] = 12, ['D'] = 13, ['E'] = 14, ['F'] = 15};

/* Up to 2n hex digits (stopping at a NUL; missing digits count as 0). */
static void hex_to_bytes(const char *hex, uint8_t *out, size_t n) {
    const uint8_t *h = (const uint8_t *)hex;
    size_t i = 0;
    for (; i < n && h[0] && h[1]; i++, h += 2)
        out[i] = (uint8_t)((hexval_tbl[h[0]] << 4) | hexval_tbl[h[1]]);
    if (i < n && h[0]) out[i++] = (uint8_t)(hexval_tbl[h[0]] << 4);
    for (; i < n; i++) out[i] = 0;
}

static void make_key(const char *trace_hex, const char *span_hex, uint8_t key[24]) {
    hex_to_bytes(trace_hex, key, 16);
    hex_to_bytes(span_hex, key + 16, 8);
}

/* ---- formatting fast paths (every event has several numbers and short
 * strings; the generic appenders were ~15% of the forwarder's time) ---- */

static const char digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Eight decimal digits of x (< 10^8) at p, two per table lookup. */
static inline void put8_digits(char *p, uint32_t x) {
    uint32_t hi = x / 10000, lo = x % 10000;
    memcpy(p, digits2 + 2 * (hi / 100), 2);
    memcpy(p + 2, digits2 + 2 * (hi % 100), 2);
    memcpy(p + 4, digits2 + 2 * (lo / 100), 2);
    memcpy(p + 6, digits2 + 2 * (lo % 100), 2);
}

/* Decimal digits of v written to end at `end`; returns the first digit.
 * At most 20 bytes before `end`. Eight digits per 64-bit division, then
 * 32-bit arithmetic (timestamps in us have 16 digits). */
static inline char *u64_digits(char *end, uint64_t v) {
    while (v >= 100000000u) {
        uint32_t lo = (uint32_t)(v % 100000000u);
        v /= 100000000u;
        end -= 8;
        put8_digits(end, lo);
    }
    uint32_t x = (uint32_t)v;
    while (x >= 100) {
        unsigned r = x % 100;
        x /= 100;
        end -= 2;
        memcpy(end, digits2 + 2 * r, 2);
    }
    if (x >= 10) {
        end -= 2;
        memcpy(end, digits2 + 2 * x, 2);
    } else {
        *--end = (char)('0' + x);
    }
    return end;
}

/* Number text is built in a 64-byte scratch, right-aligned at NUM_END, and
 * copied out as a fixed NUM_COPY bytes (two vector moves, no length-
 * dependent memcpy call); only its real length is kept, so the event's
 * reserved room includes NUM_COPY of slack per number (EV_NUM). */
#define NUM_END 28
#define NUM_COPY 32
#define EV_NUM (NUM_COPY + 8)

static inline void raw_num(mst_buf *b, const char *p, const char *end) {
    memcpy(b->data + b->len, p, NUM_COPY);
    b->len += (size_t)(end - p);
}

/* Unchecked signed decimal (same text as mst_buf_append_i64); the caller
 * reserved EV_NUM bytes. */
static inline void raw_i64(mst_buf *b, int64_t v) {
    char tmp[64];
    char *end = tmp + NUM_END;
    bool neg = v < 0;
    char *p = u64_digits(end, neg ? 0u - (uint64_t)v : (uint64_t)v);
    if (neg) *--p = '-';
    raw_num(b, p, end);
}

/* Unchecked nanoseconds as exact decimal microseconds ("1000", "1.5",
 * "-0.001"); the caller reserved EV_NUM bytes. */
static inline void raw_us(mst_buf *b, bool neg, uint64_t ns) {
    char tmp[64];
    char *end = tmp + NUM_END - 4; /* the fraction goes after it */
    char *p = u64_digits(end, ns / 1000);
    if (neg && ns) *--p = '-';
    unsigned frac = (unsigned)(ns % 1000);
    if (frac) {
        end[0] = '.';
        end[1] = (char)('0' + frac / 100);
        memcpy(end + 2, digits2 + 2 * (frac % 100), 2);
        end += 4;
        while (end[-1] == '0') end--;
    }
    raw_num(b, p, end);
}

static inline void raw_ts(mst_buf *b, int64_t ns) {
    bool neg = ns < 0;
    raw_us(b, neg, neg ? 0u - (uint64_t)ns : (uint64_t)ns);
}

/* Checked signed decimal (M events). */
static inline void put_i64(mst_buf *b, int64_t v) {
    if (mst_buf_reserve(b, EV_NUM)) raw_i64(b, v);
}

/* Unchecked bytes / literal into reserved room. */
static inline void raw(mst_buf *b, const void *p, size_t n) {
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
#define RLIT(b, s) raw((b), (s), sizeof(s) - 1)

/* A JSON string into room reserved for `need` bytes (n + 2 of them for
 * this string): plain text is copied between quotes; anything else goes to
 * the escaper in buf.c (which owns the escaping rules, reserves for itself
 * and may write up to 6n + 2 bytes), after which `need` is reserved again
 * for the rest of the event. False when out of memory (b->failed). */
static inline bool raw_str(mst_buf *b, const char *s, size_t n, size_t need) {
    if (mst_json_plain_prefix((const uint8_t *)s, n) == n) {
        uint8_t *d = b->data + b->len;
        d[0] = '"';
        memcpy(d + 1, s, n);
        d[n + 1] = '"';
        b->len += n + 2;
        return true;
    }
    mst_buf_append_json_str(b, s, n);
    return mst_buf_reserve(b, need);
}

/* A lowercase-hex id (as the decoder leaves it) of at most `max` digits,
 * quoted; the usual full length is copied as a fixed-size block. False
 * when out of memory. */
static inline bool raw_id(mst_buf *b, const char *id, size_t max, size_t need) {
    size_t n = strnlen(id, max);
    if (n == max && mst_json_plain_prefix((const uint8_t *)id, n) == n) {
        uint8_t *d = b->data + b->len;
        d[0] = '"';
        if (max == 32) memcpy(d + 1, id, 32);
        else memcpy(d + 1, id, 16);
        d[max + 1] = '"';
        b->len += max + 2;
        return true;
    }
    return raw_str(b, id, n, need);
}

/* A JSON string: short plain-ASCII text (the usual name, key, id) is
 * copied between quotes in place; anything else goes to the escaper in
 * buf.c, which owns the escaping rules (mst_json_plain_prefix decides what
 * is plain for both). */
static inline void put_str(mst_buf *b, const char *s, size_t n) {
    if (n <= 256 && mst_json_plain_prefix((const uint8_t *)s, n) == n &&
        mst_buf_reserve(b, n + 2)) {
        uint8_t *d = b->data + b->len;
        d[0] = '"';
        memcpy(d + 1, s, n);
        d[n + 1] = '"';
        b->len += n + 2;
        return;
    }
    mst_buf_append_json_str(b, s, n);
}

#define LIT(b, s) mst_buf_append((b), (s), sizeof(s) - 1)

static void append_key(mst_buf *b, const char *k, size_t n) {
    put_str(b, k, n);
    mst_buf_append_byte(b, ':');
}

static void append_str_member(mst_buf *b, const char *k, const char *v, size_t vn) {
    append_key(b, k, strlen(k));
    put_str(b, v, vn);
}

static void append_int_member(mst_buf *b, const char *k, int64_t v) {
    append_key(b, k, strlen(k));
    put_i64(b, v);
}

static const mst_json_slice *find_kv(const mst_pf_kv *kv, size_t n, const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 0; i < n; i++)
        if (kv[i].key.len == kl && memcmp(kv[i].key.ptr, key, kl) == 0) return &kv[i].value;
    return NULL;
}

static bool is_string(const mst_json_slice *v) { return v && v->len >= 2 && v->ptr[0] == '"'; }

/* An "M" event naming a process (tid < 0) or a thread; `name` is a raw,
 * already validated JSON string. */
static void emit_name(mst_chrome_writer *w, int64_t pid, int64_t tid, bool thread,
                      const mst_json_slice *name) {
    mst_buf *b = w->buf;
    LIT(b, ",{");
    append_str_member(b, "name", thread ? "thread_name" : "process_name", thread ? 11 : 12);
    LIT(b, ",\"ph\":\"M\",\"ts\":0,");
    append_int_member(b, "pid", pid);
    mst_buf_append_byte(b, ',');
    append_int_member(b, "tid", thread ? tid : 0);
    LIT(b, ",\"args\":{\"name\":");
    mst_buf_append(b, name->ptr, name->len);
    LIT(b, "}}");
}

/* Emits the M event once per process / thread (bounded set, oldest out). */
static void maybe_name(mst_chrome_writer *w, int64_t pid, int64_t tid, bool thread,
                       const mst_json_slice *name) {
    if (!is_string(name)) return;
    uint8_t key[24] = {0};
    key[0] = thread ? 2 : 1;
    memcpy(key + 8, &pid, 8);
    if (thread) memcpy(key + 16, &tid, 8);
    if (table_find(&w->names, key)) return;
    bool ev;
    table_insert(&w->names, key, &ev);
    emit_name(w, pid, tid, thread, name);
}

/* The process_name M event, once per pid: "<process.role> (<service.name>)"
 * when the span carries a `process.role` attribute (the mstrace plugin sets
 * it: api_server, engine_core, worker_0, ...; otherwise every vLLM process
 * would be named just "vllm"), else service.name. Both are raw, validated
 * JSON strings, so joining their escaped contents gives a valid one. The
 * attribute is looked up only for a pid not named yet. */
static void maybe_name_process(mst_chrome_writer *w, int64_t pid, const mst_pf_span *s,
                               const mst_json_slice *service) {
    uint8_t key[24] = {0};
    key[0] = 1;
    memcpy(key + 8, &pid, 8);
    if (table_find(&w->names, key)) return;
    const mst_json_slice *role = find_kv(s->attrs, s->n_attrs, "process.role");
    if (!is_string(role) || role->len <= 2) {
        maybe_name(w, pid, 0, false, service);
        return;
    }
    mst_buf_reset(&w->scratch);
    mst_buf_append(&w->scratch, role->ptr, role->len - 1); /* '"role' */
    if (is_string(service)) {
        LIT(&w->scratch, " (");
        mst_buf_append(&w->scratch, service->ptr + 1, service->len - 2);
        mst_buf_append_byte(&w->scratch, ')');
    }
    mst_buf_append_byte(&w->scratch, '"');
    if (w->scratch.failed) {
        w->buf->failed = true;
        return;
    }
    bool ev;
    table_insert(&w->names, key, &ev);
    mst_json_slice name = {(const char *)w->scratch.data, w->scratch.len};
    emit_name(w, pid, 0, false, &name);
}

/* Room for one s/f flow pair: the literals (~190 bytes), four numbers
 * with their copy slack and the id (~66 bytes) twice: ~590 bytes. */
#define FLOW_NEED 768

/* One s/f flow pair: source = the linked span, dest = the linking span.
 * Room is reserved once; everything written is plain ASCII. */
static void emit_flow(mst_chrome_writer *w, const uint8_t src_key[24], int64_t spid, int64_t stid,
                      int64_t sts, const uint8_t dest_span[8], int64_t dpid, int64_t dtid,
                      int64_t dts) {
    static const char hx[] = "0123456789abcdef";
    char id[32 + 1 + 16 + 1 + 16];
    size_t n = 0;
    for (int i = 0; i < 16; i++) { id[n++] = hx[src_key[i] >> 4]; id[n++] = hx[src_key[i] & 15]; }
    id[n++] = ':';
    for (int i = 16; i < 24; i++) { id[n++] = hx[src_key[i] >> 4]; id[n++] = hx[src_key[i] & 15]; }
    id[n++] = ':';
    for (int i = 0; i < 8; i++) { id[n++] = hx[dest_span[i] >> 4]; id[n++] = hx[dest_span[i] & 15]; }
    mst_buf *b = w->buf;
    if (!mst_buf_reserve(b, FLOW_NEED)) return;
    RLIT(b, ",{\"name\":\"request.link\",\"cat\":\"Tracing.Flow\",\"ph\":\"s\",\"ts\":");
    raw_ts(b, sts);
    RLIT(b, ",\"pid\":");
    raw_i64(b, spid);
    RLIT(b, ",\"tid\":");
    raw_i64(b, stid);
    RLIT(b, ",\"id\":\"");
    raw(b, id, sizeof id);
    RLIT(b, "\",\"args\":{\"source.span_id\":\"");
    raw(b, id + 33, 16);
    RLIT(b, "\"}}");
    RLIT(b, ",{\"name\":\"request.link\",\"cat\":\"Tracing.Flow\",\"ph\":\"f\",\"ts\":");
    raw_ts(b, dts);
    RLIT(b, ",\"pid\":");
    raw_i64(b, dpid);
    RLIT(b, ",\"tid\":");
    raw_i64(b, dtid);
    RLIT(b, ",\"id\":\"");
    raw(b, id, sizeof id);
    RLIT(b, "\",\"bp\":\"e\"}");
    w->buffered_flows++;
}

/* True for attribute keys the fixed args replace (upstream: fixed win).
 * Dispatch on the length first: this runs for every attribute. */
static bool fixed_arg(const mst_str *k) {
    switch (k->len) {
    case 7: return memcmp(k->ptr, "span_id", 7) == 0;
    case 8: return memcmp(k->ptr, "trace_id", 8) == 0;
    case 9: return memcmp(k->ptr, "span.kind", 9) == 0;
    case 11: return memcmp(k->ptr, "span.status", 11) == 0;
    case 12: return memcmp(k->ptr, "service.name", 12) == 0;
    case 14: return memcmp(k->ptr, "parent_span_id", 14) == 0;
    default: return false;
    }
}

/* Does an attribute named "resource.<rkey>" exist (attributes win)? */
static bool attr_shadows(const mst_pf_span *s, const mst_str *rkey) {
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_str *k = &s->attrs[i].key;
        if (k->len == 9 + rkey->len && memcmp(k->ptr, "resource.", 9) == 0 &&
            memcmp(k->ptr + 9, rkey->ptr, rkey->len) == 0)
            return true;
    }
    return false;
}

/* Room a span event needs besides its strings: literals (~230 bytes),
 * six numbers with their copy slack, three ids, the default service name. */
#define SPAN_FIXED 768
/* Per attribute: quotes, ':' and ','; per resource entry also "resource.". */
#define ATTR_EXTRA 4
#define RES_EXTRA 13

/* Room for the whole event, assuming plain strings (raw_str re-reserves
 * after escaping one); values are validated raw JSON copied verbatim. */
static size_t span_need(const mst_pf_span *s, const mst_json_slice *service) {
    size_t need = SPAN_FIXED + (s->name.ptr ? s->name.len : 0) +
                  (s->category.ptr ? s->category.len : 0) + (service ? service->len : 0);
    for (size_t i = 0; i < s->n_attrs; i++)
        need += s->attrs[i].key.len + s->attrs[i].value.len + ATTR_EXTRA;
    for (size_t i = 0; i < s->n_resource; i++)
        need += s->resource[i].key.len + s->resource[i].value.len + RES_EXTRA;
    return need;
}

/* ,"resource.<key>":<value> — the rare escaped key is joined in scratch
 * and escaped whole, as before (the prefix is plain, so the text is the
 * same either way). */
static bool emit_resource_kv(mst_chrome_writer *w, const mst_pf_kv *kv, size_t need) {
    mst_buf *b = w->buf;
    if (mst_json_plain_prefix((const uint8_t *)kv->key.ptr, kv->key.len) == kv->key.len) {
        RLIT(b, ",\"resource.");
        raw(b, kv->key.ptr, kv->key.len);
        RLIT(b, "\":");
    } else {
        mst_buf_reset(&w->scratch);
        LIT(&w->scratch, "resource.");
        mst_buf_append(&w->scratch, kv->key.ptr, kv->key.len);
        if (w->scratch.failed) {
            b->failed = true;
            return false;
        }
        RLIT(b, ",");
        if (!raw_str(b, (const char *)w->scratch.data, w->scratch.len, need)) return false;
        RLIT(b, ":");
    }
    raw(b, kv->value.ptr, kv->value.len);
    return true;
}

static void emit_span(mst_chrome_writer *w, const mst_pf_span *s, int64_t pid, int64_t tid,
                      const mst_json_slice *service) {
    mst_buf *b = w->buf;
    size_t need = span_need(s, service);
    if (!mst_buf_reserve(b, need)) return;
    /* Fixed keys are literals (nothing to escape); strings go through
     * raw_str (plain ones are one copy); room was reserved above. */
    RLIT(b, ",{\"name\":");
    if (!raw_str(b, s->name.ptr ? s->name.ptr : "", s->name.ptr ? s->name.len : 0, need)) return;
    RLIT(b, ",\"cat\":");
    if (s->category.ptr) {
        if (!raw_str(b, s->category.ptr, s->category.len, need)) return;
    } else {
        RLIT(b, "\"Tracing\"");
    }
    RLIT(b, ",\"ph\":\"X\",\"ts\":");
    raw_ts(b, s->start_ns);
    RLIT(b, ",\"dur\":");
    raw_us(b, false, s->end_ns > s->start_ns ? (uint64_t)s->end_ns - (uint64_t)s->start_ns : 0);
    RLIT(b, ",\"pid\":");
    raw_i64(b, pid);
    RLIT(b, ",\"tid\":");
    raw_i64(b, tid);
    RLIT(b, ",\"args\":{");
    bool any_resource_prefixed = false;
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_pf_kv *kv = &s->attrs[i];
        if (kv->key.len > 9 && memcmp(kv->key.ptr, "resource.", 9) == 0)
            any_resource_prefixed = true;
        if (fixed_arg(&kv->key)) continue;
        if (!raw_str(b, kv->key.ptr, kv->key.len, need)) return;
        RLIT(b, ":");
        raw(b, kv->value.ptr, kv->value.len);
        RLIT(b, ",");
    }
    RLIT(b, "\"trace_id\":");
    if (!raw_id(b, s->trace_id, 32, need)) return;
    RLIT(b, ",\"span_id\":");
    if (!raw_id(b, s->span_id, 16, need)) return;
    RLIT(b, ",\"parent_span_id\":");
    if (!raw_id(b, s->parent_span_id, 16, need)) return;
    RLIT(b, ",\"span.kind\":");
    raw_i64(b, s->kind);
    RLIT(b, ",\"span.status\":");
    raw_i64(b, s->status);
    RLIT(b, ",\"service.name\":");
    if (service) raw(b, service->ptr, service->len);
    else RLIT(b, "\"" DEFAULT_SERVICE_NAME "\"");
    for (size_t i = 0; i < s->n_resource; i++) {
        const mst_pf_kv *kv = &s->resource[i];
        if (any_resource_prefixed && attr_shadows(s, &kv->key)) continue;
        if (!emit_resource_kv(w, kv, need)) return;
    }
    RLIT(b, "}}");
    w->buffered_spans++;
}

/* ---- timeline events (timeline.h): request tracks as async b/e events
 * keyed by the request id, counters as C events. Added alongside the X/M/
 * s/f events, which stay as they were. ---- */

static void async_event(mst_buf *b, char ph, const char *name, const mst_tl_request *r,
                        int64_t ts, bool with_args) {
    LIT(b, ",{\"name\":");
    put_str(b, name, strlen(name));
    LIT(b, ",\"cat\":\"request\",\"ph\":\"");
    mst_buf_append_byte(b, (uint8_t)ph);
    LIT(b, "\",\"ts\":");
    if (mst_buf_reserve(b, EV_NUM)) raw_ts(b, ts);
    LIT(b, ",");
    append_int_member(b, "pid", r->pid);
    LIT(b, ",\"tid\":0,\"id\":");
    put_str(b, r->id, r->id_len);
    if (with_args) {
        LIT(b, ",\"args\":{");
        append_str_member(b, "request.id", r->id, r->id_len);
        LIT(b, ",");
        append_int_member(b, "request.steps", r->steps);
        LIT(b, "}");
    }
    LIT(b, "}");
}

static void tl_request(void *self, const mst_tl_request *r) {
    mst_chrome_writer *w = self;
    async_event(w->buf, 'b', "request", r, r->start_ns, true);
    for (unsigned i = 0; i < r->n_phases; i++) {
        async_event(w->buf, 'b', r->phases[i].name, r, r->phases[i].start_ns, false);
        async_event(w->buf, 'e', r->phases[i].name, r, r->phases[i].end_ns, false);
    }
    async_event(w->buf, 'e', "request", r, r->end_ns, false);
}

static void tl_counter(void *self, const mst_tl_counter *c) {
    mst_chrome_writer *w = self;
    mst_buf *b = w->buf;
    LIT(b, ",{\"name\":");
    put_str(b, c->name, strlen(c->name));
    LIT(b, ",\"ph\":\"C\",\"ts\":");
    if (mst_buf_reserve(b, EV_NUM)) raw_ts(b, c->ts_ns);
    LIT(b, ",");
    append_int_member(b, "pid", c->pid);
    LIT(b, ",\"tid\":0,\"args\":{\"value\":");
    if (c->raw_len) mst_buf_append(b, c->raw, c->raw_len); /* validated JSON number text */
    else if (c->is_double) mst_buf_append_double(b, c->d);
    else put_i64(b, c->i);
    LIT(b, "}}");
}

static mst_tl_sink tl_sink(mst_chrome_writer *w) {
    return (mst_tl_sink){w, tl_request, tl_counter};
}

mst_status mst_chrome_writer_add_span(mst_chrome_writer *w, const mst_pf_span *s) {
    if (!w || !s) return MST_ERR_INVALID_ARG;
    if (mst_outq_unwritten(w->out) >= MAX_UNWRITTEN_BYTES &&
        !mst_outq_wait_room(w->out, MAX_UNWRITTEN_BYTES)) {
        w->full_dropped++; /* before any table change: as if never received */
        return MST_ERR_QUEUE_FULL;
    }
    if (!(w->buf = mst_outq_buf(w->out))) {
        MST_WARN("perfetto output: out of memory buffering a span; span dropped");
        return MST_ERR_NOMEM;
    }
    size_t mark = w->buf->len;
    w->buffered_spans = w->buffered_flows = 0;
    int64_t pid = s->has_pid ? s->pid : w->default_pid;
    int64_t tid = s->has_tid ? s->tid : 0;
    const mst_json_slice *service = find_kv(s->resource, s->n_resource, "service.name");

    /* Table keys first, with prefetches: the position/pending tables are
     * megabytes of random accesses, mostly cache misses, which then overlap
     * the formatting of the span's events below. */
    uint8_t key[24];
    make_key(s->trace_id, s->span_id, key);
    table_prefetch(&w->pos, key);
    table_prefetch(&w->pend.groups, key);
    uint8_t link_keys[PREFETCH_LINKS][24];
    size_t n_pre = s->n_links < PREFETCH_LINKS ? s->n_links : PREFETCH_LINKS;
    for (size_t l = 0; l < n_pre; l++) {
        make_key(s->links[l].trace_id, s->links[l].span_id, link_keys[l]);
        table_prefetch(&w->pos, link_keys[l]);
        table_prefetch(&w->pend.groups, link_keys[l]);
    }

    maybe_name_process(w, pid, s, service);
    maybe_name(w, pid, tid, true, find_kv(s->attrs, s->n_attrs, "thread.name"));
    emit_span(w, s, pid, tid, service);

    bool ev;
    uint32_t i = table_find(&w->pos, key);
    if (!i) {
        i = table_insert(&w->pos, key, &ev);
        if (ev) w->st.positions_evicted++;
    }
    track_entry *p = &w->pos.e[i - 1];
    p->pid = pid;
    p->tid = tid;
    p->ts_ns = s->start_ns;

    /* Links that were waiting for this span, oldest first. */
    uint32_t g = table_find(&w->pend.groups, key);
    while (g) {
        uint32_t j = w->pend.groups.e[g - 1].first;
        const pend_dest *x = &w->pend.d[j - 1];
        emit_flow(w, key, pid, tid, s->start_ns, x->span, x->pid, x->tid, x->ts_ns);
        bool last = w->pend.groups.e[g - 1].last == j;
        pend_remove(&w->pend, j); /* removes the group with its last entry */
        if (last) break;
    }

    uint8_t self_span[8];
    memcpy(self_span, key + 16, 8);
    for (size_t l = 0; l < s->n_links; l++) {
        uint8_t src[24];
        if (l < n_pre) memcpy(src, link_keys[l], 24);
        else make_key(s->links[l].trace_id, s->links[l].span_id, src);
        uint32_t k = table_find(&w->pos, src);
        if (k) {
            const track_entry *sp = &w->pos.e[k - 1];
            emit_flow(w, src, sp->pid, sp->tid, sp->ts_ns, self_span, pid, tid, s->start_ns);
            continue;
        }
        pend_dest *x = pend_add(&w->pend, src, &ev);
        if (ev) w->st.pending_evicted++;
        x->pid = pid;
        x->tid = tid;
        x->ts_ns = s->start_ns;
        memcpy(x->span, self_span, 8);
    }
    w->st.flows_pending = w->pend.count;

    mst_tl_sink sink = tl_sink(w);
    mst_timeline_add_span(w->tl, s, pid, &w->arena, &sink);
    mst_arena_reset_keep(&w->arena, 16u * 1024u);

    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
        MST_WARN("perfetto output: out of memory buffering a span; span dropped");
        return MST_ERR_NOMEM;
    }
    mst_outq_added(w->out, w->buffered_spans, w->buffered_flows);
    return MST_OK;
}

/* Appends timeline events produced outside add_span (forwarder counters,
 * requests completed at the end). */
static void add_timeline_events(mst_chrome_writer *w, bool finish, int64_t pid, int64_t ts,
                                const uint64_t own[3]) {
    if (!(w->buf = mst_outq_buf(w->out))) return;
    size_t mark = w->buf->len;
    mst_tl_sink sink = tl_sink(w);
    if (finish) mst_timeline_finish_all(w->tl, &sink);
    if (own) {
        uint8_t key[24] = {0};
        key[0] = 1;
        memcpy(key + 8, &pid, 8);
        if (!table_find(&w->names, key)) {
            bool ev;
            table_insert(&w->names, key, &ev);
            static const char fwd_name[] = "\"mstrace forward\"";
            mst_json_slice name = {fwd_name, sizeof fwd_name - 1};
            emit_name(w, pid, 0, false, &name);
        }
        mst_timeline_forwarder_counters(w->tl, pid, ts, own[0], own[1], own[2], &sink);
    }
    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
        return;
    }
    mst_outq_added(w->out, 0, 0);
}

int mst_chrome_writer_tick(mst_chrome_writer *w, uint64_t now_ms) {
    if (!w || !(w->buf = mst_outq_buf(w->out))) return 0;
    size_t mark = w->buf->len;
    mst_tl_sink sink = tl_sink(w);
    mst_timeline_tick(w->tl, now_ms, &sink);
    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
    } else if (w->buf->len != mark) {
        mst_outq_added(w->out, 0, 0);
    }
    return mst_timeline_open_requests(w->tl) ? 1 : 0;
}

void mst_chrome_writer_add_forwarder_counters(mst_chrome_writer *w, int64_t ts_ns,
                                              uint64_t received, uint64_t written,
                                              uint64_t dropped) {
    if (!w) return;
    const uint64_t own[3] = {received, written, dropped};
    add_timeline_events(w, false, (int64_t)getpid(), ts_ns, own);
}

mst_status mst_chrome_writer_flush_final(mst_chrome_writer *w) {
    if (!w) return MST_ERR_INVALID_ARG;
    add_timeline_events(w, true, 0, 0, NULL);
    return mst_outq_flush(w->out);
}

int mst_chrome_writer_handoff(mst_chrome_writer *w) {
    return w ? mst_outq_handoff(w->out) : 0;
}

mst_status mst_chrome_writer_flush(mst_chrome_writer *w) {
    if (!w) return MST_ERR_INVALID_ARG;
    return mst_outq_flush(w->out);
}

/* Adds the output queue's counters (written, write errors, drops) to st. */
static void merge_out_stats(const mst_chrome_writer *w, const mst_outq_stats *os,
                            mst_chrome_stats *out) {
    out->bytes_written = os->bytes_written;
    out->spans_written = os->spans_written;
    out->flows_written = os->flows_written;
    out->write_errors = os->write_errors;
    out->spans_dropped = w->full_dropped + os->spans_dropped;
    out->write_waits = os->waits;
}

void mst_chrome_writer_get_stats(const mst_chrome_writer *w, mst_chrome_stats *out) {
    if (!out) return;
    if (!w) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = w->st;
    out->flows_pending = w->pend.count;
    mst_outq_stats os;
    mst_outq_get_stats(w->out, &os);
    merge_out_stats(w, &os, out);
}

static void writer_free(mst_chrome_writer *w) {
    table_free(&w->pos);
    pend_free(&w->pend);
    table_free(&w->names);
    mst_buf_free(&w->scratch);
    mst_timeline_free(w->tl);
    mst_arena_release(&w->arena);
    free(w);
}

/* pwrite of all n bytes at off, retrying EINTR and short writes. */
static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off) {
    while (n) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (k == 0) return EIO;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* The table bound of writers opened from now on; only tests lower it. */
static _Atomic uint32_t g_max_tracked = MST_CHROME_MAX_TRACKED;

void mst_chrome_writer_set_max_tracked(uint32_t n) {
    atomic_store(&g_max_tracked, n ? n : MST_CHROME_MAX_TRACKED);
}

mst_status mst_chrome_writer_open(const char *path, int64_t default_pid,
                                  mst_chrome_writer **out, char *err, size_t err_size) {
    if (!out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    int fd;
    mst_status st = mst_output_path_open(path, &fd, err, err_size);
    if (st != MST_OK) return st;
    mst_chrome_writer *w = calloc(1, sizeof *w);
    uint32_t bound = atomic_load(&g_max_tracked);
    if (w) mst_arena_init(&w->arena);
    if (!w || !table_init(&w->pos, bound) || !pend_init(&w->pend, bound) ||
        !table_init(&w->names, bound) || !(w->tl = mst_timeline_new(MST_TL_MAX_REQUESTS))) {
        if (w) writer_free(w);
        close(fd);
        if (err && err_size) snprintf(err, err_size, "out of memory opening the Chrome Trace writer");
        return MST_ERR_NOMEM;
    }
    w->fd = fd;
    w->default_pid = default_pid;
    mst_buf_init(&w->scratch, 0);
    int e = pwrite_all(fd, (const uint8_t *)"[]", 2, 0);
    if (e) {
        if (err && err_size) snprintf(err, err_size, "cannot write %s: %s", path, strerror(e));
        close(fd);
        writer_free(w);
        return MST_ERR_IO;
    }
    if (mst_outq_start(fd, 1, 2, &w->out) != MST_OK) {
        if (err && err_size) snprintf(err, err_size, "cannot start the Chrome Trace writer thread");
        close(fd);
        writer_free(w);
        return MST_ERR_NOMEM;
    }
    *out = w;
    return MST_OK;
}

mst_status mst_chrome_writer_close_final(mst_chrome_writer *w, mst_chrome_stats *final) {
    if (!w) return MST_ERR_INVALID_ARG;
    add_timeline_events(w, true, 0, 0, NULL);
    mst_outq_stats os;
    mst_status st = mst_outq_stop(w->out, &os);
    if (final) {
        *final = w->st;
        final->flows_pending = w->pend.count;
        merge_out_stats(w, &os, final);
    }
    if (close(w->fd) != 0 && st == MST_OK) st = MST_ERR_IO;
    writer_free(w);
    return st;
}

mst_status mst_chrome_writer_close(mst_chrome_writer *w) {
    return mst_chrome_writer_close_final(w, NULL);
}
