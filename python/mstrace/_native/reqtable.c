/*
 * reqtable.c — the request table of the extension: request id → trace
 * context for the requests in flight in this process (docs/reference/spans.md: at most
 * 10,000, oldest evicted). A chained hash (word-wise multiply/xor, power-of-two buckets)
 * over a fixed pool of entries threaded on a FIFO list, so put, get, drop
 * and eviction are all O(1). Entries come from a pool allocated on first use
 * and never freed (1.3 MB), so the hot path does not malloc except for ids
 * longer than the inline key. A lookup first tries the entry the same id
 * buffer found last time (g_recent), which is what a batch's ids hit.
 *
 * Id join (docs/reference/vllm-internals.md "Request ids"): vLLM's internal ids are "<external>-<8 hex>"; a lookup
 * tries the exact id, then the id with such a suffix stripped, so a context
 * registered under the external id in one process is found under the
 * internal id in another. Contexts are stored under the id given.
 *
 * Request spans (MS_PROFILER_AUTO_TRACE=1, see context.c): an entry may own
 * the open `vllm.request` span whose span id is the entry's context. The
 * table ends it: finish (drop) → status OK; eviction, clearing or a
 * replacing context → status UNSET with `mstrace.evicted=true` /
 * `mstrace.replaced=true`. A fork()ed child forgets (never ends) the spans
 * it inherited: the parent ends and exports them.
 *
 * Protected by the GIL (see native.h).
 */
#include "reqtable.h"
#include "state.h"

#include <stdlib.h>
#include <string.h>

#define REQ_CAPACITY 10000u
#define REQ_BUCKETS 16384u /* power of two, > capacity */
#define REQ_INLINE_KEY 80u

typedef struct req_entry {
    struct req_entry *hnext;            /* bucket chain                   */
    struct req_entry *prev, *next;      /* FIFO (oldest at head) or free  */
    uint64_t hash;
    char *key;                          /* inline_key or malloc'd         */
    size_t key_len;
    mstn_ctx ctx;
    mst_span *span;                     /* open vllm.request span or NULL */
    char inline_key[REQ_INLINE_KEY];
} req_entry;

/* The entry each id buffer last found, direct-mapped by the buffer's
 * address. Why: a batch adapter looks up every scheduled request each step,
 * and its id is the same str object every step (vLLM keys the step's dicts by
 * Request.request_id), so the UTF-8 buffer PyUnicode_AsUTF8AndSize hands
 * out is at the same address too. A hit costs one compare of the key's bytes
 * instead of hashing them and walking a bucket; the compare (and a live
 * entry's non-NULL key) makes a stale or colliding slot a plain miss, so the
 * cache never needs clearing. Only exact matches are kept. */
#define REQ_RECENT_SLOTS 4096u
static req_entry *g_recent[REQ_RECENT_SLOTS];

static req_entry *g_pool;
static req_entry *g_buckets[REQ_BUCKETS];
static req_entry *g_free;
static req_entry *g_head, *g_tail;
static mstn_req_stats g_stats;

/* 8 bytes per step (ids are 20-60 chars: this is ~5x fewer rounds than a
 * byte-wise FNV-1a), finished with a 64-bit avalanche. */
uint64_t mstn_id_hash(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ (w * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ (w * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

static bool pool_ready(void) {
    if (g_pool)
        return true;
    g_pool = calloc(REQ_CAPACITY, sizeof(req_entry));
    if (!g_pool)
        return false;
    for (size_t i = 0; i < REQ_CAPACITY; i++) {
        g_pool[i].next = g_free;
        g_free = &g_pool[i];
    }
    return true;
}

static req_entry **bucket_of(uint64_t h) { return &g_buckets[h & (REQ_BUCKETS - 1)]; }

static req_entry *find(const char *id, size_t len, uint64_t h) {
    for (req_entry *e = *bucket_of(h); e; e = e->hnext)
        if (e->hash == h && e->key_len == len && memcmp(e->key, id, len) == 0)
            return e;
    return NULL;
}

static void fifo_unlink(req_entry *e) {
    if (e->prev) e->prev->next = e->next; else g_head = e->next;
    if (e->next) e->next->prev = e->prev; else g_tail = e->prev;
    e->prev = e->next = NULL;
}

static void fifo_append(req_entry *e) {
    e->prev = g_tail;
    e->next = NULL;
    if (g_tail) g_tail->next = e; else g_head = e;
    g_tail = e;
}

/* Ends the entry's request span, if any: `ok` → status OK (finished),
 * else UNSET with the boolean attribute `why` set (evicted, replaced). */
static void end_span(req_entry *e, bool ok, const char *why) {
    mst_span *sp = e->span;
    if (!sp)
        return;
    e->span = NULL;
    if (ok)
        mst_span_set_status(sp, MST_STATUS_OK, NULL);
    else if (why)
        mst_span_set_bool(sp, why, true);
    mst_span_end(sp, 0);
    mstn_g.inflight--;
    g_stats.spans_open--;
    if (ok)
        g_stats.spans_finished++;
    else
        g_stats.spans_evicted++;
}

/* Unlinks `e` from its bucket and the FIFO and returns it to the free list. */
static void release(req_entry *e) {
    req_entry **pp = bucket_of(e->hash);
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    fifo_unlink(e);
    if (e->key != e->inline_key)
        free(e->key);
    e->key = NULL;
    e->next = g_free;
    g_free = e;
    g_stats.tracked--;
}

/* Length of `id` without a trailing "-<8 lowercase hex>", or 0 if it has none. */
static size_t stripped_len(const char *id, size_t len) {
    if (len < 10 || id[len - 9] != '-')
        return 0;
    for (size_t i = len - 8; i < len; i++) {
        char c = id[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return len - 9;
}

/* g_recent's slot for an id buffer's address. */
static size_t recent_slot(const char *id) {
    uint64_t x = (uint64_t)(uintptr_t)id;
    x = (x ^ (x >> 29)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 52) & (REQ_RECENT_SLOTS - 1);
}

/* The entry for `id`, or for `id` without its "-<8 hex>" suffix; NULL when
 * neither is tracked (or the table was never set up). */

static req_entry *lookup(const char *id, size_t len) {
    if (!g_pool || g_stats.tracked == 0)
        return NULL;
    req_entry **slot = &g_recent[recent_slot(id)];
    req_entry *e = *slot;
    if (e && e->key && e->key_len == len && memcmp(e->key, id, len) == 0)
        return e;
    e = find(id, len, mstn_id_hash(id, len));
    if (e) {
        *slot = e;
    } else {
        size_t s = stripped_len(id, len);
        if (s)
            e = find(id, s, mstn_id_hash(id, s));
    }
    return e;
}

bool mstn_req_put(const char *id, size_t len, const mstn_ctx *ctx) {
    return mstn_req_put_span(id, len, ctx, NULL);
}

bool mstn_req_put_span(const char *id, size_t len, const mstn_ctx *ctx, mst_span *span) {
    if (!pool_ready())
        return false;
    uint64_t h = mstn_id_hash(id, len);
    req_entry *e = find(id, len, h);
    if (e) { /* refresh: newest context wins, and it is young again */
        /* The same context seen again (EngineCore in this process reads
         * the traceparent we injected) keeps its span; another one ends it. */
        if (e->span && (span || memcmp(&e->ctx.span_id, &ctx->span_id, sizeof ctx->span_id) != 0))
            end_span(e, false, "mstrace.replaced");
        e->ctx = *ctx;
        if (e->span)
            e->ctx.synthetic = false;
        if (span) {
            e->span = span;
            g_stats.spans_open++;
        }
        fifo_unlink(e);
        fifo_append(e);
        g_stats.registered++;
        return true;
    }
    if (!g_free) { /* full: the oldest request in flight goes */
        end_span(g_head, false, "mstrace.evicted");
        release(g_head);
        g_stats.evicted++;
    }
    e = g_free;
    char *key = e->inline_key;
    if (len >= REQ_INLINE_KEY) {
        key = malloc(len + 1);
        if (!key)
            return false;
    }
    g_free = e->next;
    memcpy(key, id, len);
    key[len] = '\0';
    e->key = key;
    e->key_len = len;
    e->hash = h;
    e->ctx = *ctx;
    e->span = span;
    if (span)
        g_stats.spans_open++;
    e->hnext = *bucket_of(h);
    *bucket_of(h) = e;
    fifo_append(e);
    g_stats.tracked++;
    g_stats.registered++;
    return true;
}

bool mstn_req_get(const char *id, size_t len, mstn_ctx *out) {
    req_entry *e = lookup(id, len);
    if (!e)
        return false;
    *out = e->ctx;
    return true;
}

bool mstn_req_drop(const char *id, size_t len) {
    req_entry *e = lookup(id, len);
    if (!e)
        return false;
    end_span(e, true, NULL);
    release(e);
    g_stats.finished++;
    return true;
}

void mstn_req_stats_get(mstn_req_stats *out) { *out = g_stats; }

void mstn_req_clear(void) {
    while (g_head) {
        end_span(g_head, false, "mstrace.evicted");
        release(g_head);
    }
}

/* pthread_atfork child: the inherited open spans are the parent's to end;
 * the child only forgets them (their contexts stay registered). */
void mstn_req_after_fork_child(void) {
    for (req_entry *e = g_head; e; e = e->next)
        if (e->span) {
            e->span = NULL;
            mstn_g.inflight--;
            g_stats.spans_open--;
        }
}

void mstn_req_span_started(void) { g_stats.spans_started++; }
