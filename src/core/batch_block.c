/*
 * batch_block.c — batch blocks (batch_block.h, mstrace.h "batch blocks"):
 * a step's request ids and its links to the requests, copied once on the
 * hooked thread and read by every span of that step.
 *
 * Why: with vLLM's single-process executor one engine step makes a
 * schedule span and three model spans that carry the same `request.ids`
 * (up to 1,024 strings) and the same request links; copying them into each
 * span was most of the engine thread's cost at batch 256.
 *
 * Ownership: an atomic reference count, no lock. The creator holds one
 * reference, each span given the block another (span.c), dropped when the
 * span's record is freed, normally on the exporter thread (tracer.c). The
 * block is immutable once made, so any holder reads it without
 * synchronising; the last release returns it to a process-wide pool.
 *
 * Memory bound: a block holds at most MST_MAX_LIST_ITEMS items, each cut to
 * MST_MAX_VALUE_LEN, and MST_MAX_LINKS links; the pool keeps at most
 * POOL_BLOCKS blocks of at most POOL_KEPT_BYTES each (bigger ones are freed),
 * so a steady engine allocates nothing per step.
 *
 * fork(): the pool is a lock-free queue; in a child it is emptied and
 * re-initialised (mst_queue_reset_after_fork), as the tracer does with its
 * span pool. Blocks referenced by spans the child inherits are released
 * with those spans (their copies are the child's own memory).
 */
#include "core/batch_block.h"

#include "core/arena.h"
#include "core/queue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define POOL_BLOCKS 32u
#define POOL_KEPT_BYTES (128u * 1024u)

static const char k_empty[] = "";

static mst_queue g_pool;
static bool g_pool_ok;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;

static void drop_block(void *item, void *ctx) {
    (void)ctx;
    free(item);
}

static void pool_after_fork_child(void) {
    if (g_pool_ok) mst_queue_reset_after_fork(&g_pool, drop_block, NULL);
}

static void pool_init(void) {
    g_pool_ok = mst_queue_init(&g_pool, POOL_BLOCKS);
    pthread_atfork(NULL, NULL, pool_after_fork_child);
}

/* A block with at least `need` data bytes: a pooled one when it is big
 * enough (else it is freed), or a fresh one. Sizes are powers of two from
 * 4 KiB, so a batch that grows by a few requests still fits the blocks it
 * released before. */
static mst_batch_block *block_get(size_t need) {
    pthread_once(&g_pool_once, pool_init);
    mst_batch_block *b = g_pool_ok ? mst_queue_pop(&g_pool) : NULL;
    if (b && b->cap >= need) return b;
    free(b);
    size_t cap = 4096;
    while (cap < need) cap *= 2;
    b = malloc(sizeof *b + cap);
    if (b) b->cap = cap;
    return b;
}

mst_batch_block *mst_batch_block_new(const char *const *items, const size_t *lens, size_t count,
                                     const mst_link_ref *links, size_t n_links) {
    if (!items) count = 0;
    if (!links) n_links = 0;
    if (count > MST_MAX_LIST_ITEMS) count = MST_MAX_LIST_ITEMS;
    if (n_links > MST_MAX_LINKS) n_links = MST_MAX_LINKS;
    /* Sized first (the cut of each item, as the span's list setters cut) */
    size_t text = 0;
    size_t cut[MST_MAX_LIST_ITEMS];
    for (size_t i = 0; i < count; i++) {
        const char *s = items[i] ? items[i] : k_empty;
        size_t n = lens && items[i] ? lens[i] : strlen(s);
        cut[i] = n <= MST_MAX_VALUE_LEN ? n : mst_utf8_cut(s, n, MST_MAX_VALUE_LEN);
        text += cut[i] + 1;
    }
    size_t at_links = sizeof(mst_str) * count;
    size_t at_text = at_links + sizeof(mst_link_ref) * n_links;
    mst_batch_block *b = block_get(at_text + text);
    if (!b) return NULL;
    atomic_init(&b->refs, 1);
    b->n_items = (uint32_t)count;
    b->n_links = (uint32_t)n_links;
    mst_str *dst = (mst_str *)b->data;
    char *p = (char *)b->data + at_text;
    for (size_t i = 0; i < count; i++) {
        memcpy(p, items[i] ? items[i] : k_empty, cut[i]);
        p[cut[i]] = '\0';
        dst[i].ptr = p;
        dst[i].len = (uint32_t)cut[i];
        p += cut[i] + 1;
    }
    mst_link_ref *l = (mst_link_ref *)(b->data + at_links);
    if (n_links) memcpy(l, links, sizeof *l * n_links);
    b->items = count ? dst : NULL;
    b->links = n_links ? l : NULL;
    return b;
}

void mst_batch_block_hold(mst_batch_block *block) {
    atomic_fetch_add_explicit(&block->refs, 1, memory_order_relaxed);
}

void mst_batch_block_release(mst_batch_block *block) {
    if (!block || atomic_fetch_sub_explicit(&block->refs, 1, memory_order_acq_rel) != 1) return;
    if (block->cap > POOL_KEPT_BYTES || !g_pool_ok || !mst_queue_push(&g_pool, block, NULL)) free(block);
}

const mst_str *mst_batch_block_items(const mst_batch_block *block, size_t *n) {
    if (n) *n = block ? block->n_items : 0;
    return block ? block->items : NULL;
}

const mst_link_ref *mst_batch_block_links(const mst_batch_block *block, size_t *n) {
    if (n) *n = block ? block->n_links : 0;
    return block ? block->links : NULL;
}
