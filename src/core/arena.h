/*
 * arena.h — a bump allocator owned by one span. Strings, links and events of
 * a span are carved from an inline buffer first, then from malloc'd chunks;
 * the whole arena is released in one go when the span is freed. Why: one
 * span = (usually) one malloc, and no per-attribute frees on the exporter
 * thread. The span limits (mstrace.h) bound how much an arena can hold.
 */
#ifndef MST_CORE_ARENA_H
#define MST_CORE_ARENA_H

#include <stddef.h>

#define MST_ARENA_INLINE_BYTES 512

typedef struct mst_arena_chunk {
    struct mst_arena_chunk *next;
    size_t cap;
    size_t used;
    _Alignas(16) char data[];
} mst_arena_chunk;

typedef struct mst_arena {
    size_t inline_used;
    mst_arena_chunk *chunks;      /* newest first */
    _Alignas(16) char inline_buf[MST_ARENA_INLINE_BYTES];
} mst_arena;

/* Largest cut <= max_len of s[0..len) that does not split a UTF-8 sequence:
 * step back over continuation bytes (10xxxxxx) so s[cut] starts a character.
 * The cut mst_arena_strndup applies; span.c uses it for strings it sizes
 * itself. Inline: it runs for every string a span copies. */
static inline size_t mst_utf8_cut(const char *s, size_t len, size_t max_len) {
    if (len <= max_len) return len;
    size_t cut = max_len;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0u) == 0x80u) cut--;
    return cut;
}

void mst_arena_init(mst_arena *arena);
/* 8-byte aligned memory of n bytes, or NULL when malloc fails. */
void *mst_arena_alloc(mst_arena *arena, size_t n);
/* Copies at most max_len bytes of s (cut on a UTF-8 boundary) plus NUL;
 * stores the copied length in *out_len. NULL when malloc fails. */
char *mst_arena_strndup(mst_arena *arena, const char *s, size_t len, size_t max_len,
                        size_t *out_len);
/* Frees every chunk; the arena may be reused after mst_arena_init. */
void mst_arena_release(mst_arena *arena);
/* Empties the arena for reuse but keeps its oldest chunk (the first one
 * malloc'd) when that chunk's capacity is at most keep_max bytes; every
 * other chunk is freed. Why: a long-lived arena emptied after every unit of
 * work (the forwarder's per-packet decode) then needs no malloc/free per
 * unit, while one huge unit's memory is still returned at once. */
void mst_arena_reset_keep(mst_arena *arena, size_t keep_max);

#endif /* MST_CORE_ARENA_H */
