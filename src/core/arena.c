/*
 * arena.c — the per-span bump allocator declared in arena.h.
 *
 * Owns: carving 8-byte aligned blocks from the span's inline buffer, then
 * from malloc'd chunks (newest first), and releasing those chunks in one go
 * (or all but the first, for arenas reused many times: reset_keep).
 * Why: a span with a few short attributes needs no allocation beyond the span
 * itself, and the exporter thread frees a span with one walk of its chunks.
 * mst_arena_init deliberately does not touch inline_buf: zeroing 512 bytes
 * per span would be most of the hot-path cost.
 */
#include "core/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A chunk is at least this big so a span with many links/events makes few
 * mallocs; bigger requests get a chunk of their own size. Each new chunk is
 * twice the newest one, up to MST_ARENA_CHUNK_GROW_MAX: a step span of 256
 * requests (~50 KB of ids, counts and links) then takes a handful of
 * mallocs instead of one per 4 KB, while a span that needs little never
 * holds more than twice what it used. */
#define MST_ARENA_CHUNK_MIN 4096
#define MST_ARENA_CHUNK_GROW_MAX (64 * 1024)

void mst_arena_init(mst_arena *arena) {
    arena->inline_used = 0;
    arena->chunks = NULL;
}

static size_t align8(size_t n) { return (n + 7u) & ~(size_t)7u; }

static void *chunk_alloc(mst_arena *arena, size_t n) {
    mst_arena_chunk *c = arena->chunks;
    if (c && c->cap - c->used >= n) {
        void *p = c->data + c->used;
        c->used += n;
        return p;
    }
    size_t cap = MST_ARENA_CHUNK_MIN;
    if (c) cap = c->cap >= MST_ARENA_CHUNK_GROW_MAX / 2 ? MST_ARENA_CHUNK_GROW_MAX : c->cap * 2;
    if (cap < MST_ARENA_CHUNK_MIN) cap = MST_ARENA_CHUNK_MIN;
    if (n > cap) cap = n;
    c = malloc(sizeof(*c) + cap);
    if (!c) return NULL;
    c->cap = cap;
    c->used = n;
    c->next = arena->chunks;
    arena->chunks = c;
    return c->data;
}

void *mst_arena_alloc(mst_arena *arena, size_t n) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX / 2) return NULL;
    n = align8(n);
    if (MST_ARENA_INLINE_BYTES - arena->inline_used >= n) {
        void *p = arena->inline_buf + arena->inline_used;
        arena->inline_used += n;
        return p;
    }
    return chunk_alloc(arena, n);
}

char *mst_arena_strndup(mst_arena *arena, const char *s, size_t len, size_t max_len,
                        size_t *out_len) {
    size_t n = s ? mst_utf8_cut(s, len, max_len) : 0;
    char *p = mst_arena_alloc(arena, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    if (out_len) *out_len = n;
    return p;
}

void mst_arena_release(mst_arena *arena) {
    mst_arena_chunk *c = arena->chunks;
    while (c) {
        mst_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    arena->chunks = NULL;
    arena->inline_used = 0;
}

void mst_arena_reset_keep(mst_arena *arena, size_t keep_max) {
    mst_arena_chunk *c = arena->chunks, *keep = NULL;
    while (c) {
        mst_arena_chunk *next = c->next;
        if (!next && c->cap <= keep_max) keep = c; /* the oldest chunk */
        else free(c);
        c = next;
    }
    if (keep) {
        keep->used = 0;
        keep->next = NULL;
    }
    arena->chunks = keep;
    arena->inline_used = 0;
}
