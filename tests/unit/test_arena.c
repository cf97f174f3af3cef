/*
 * test_arena.c — the bump allocator (core/arena.h): inline buffer first,
 * chunks after, alignment, release, and mst_arena_reset_keep (the reused
 * per-packet arena of the forwarder: its first chunk survives a reset,
 * bigger or later chunks do not).
 */
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "testlib.h"

static size_t n_chunks(const mst_arena *a) {
    size_t n = 0;
    for (const mst_arena_chunk *c = a->chunks; c; c = c->next) n++;
    return n;
}

static void test_inline_then_chunks(void) {
    mst_arena a;
    mst_arena_init(&a);
    char *p = mst_arena_alloc(&a, 100);
    CHECK(p && (uintptr_t)p % 8 == 0);
    CHECK_EQ_INT(n_chunks(&a), 0);
    char *q = mst_arena_alloc(&a, MST_ARENA_INLINE_BYTES);
    CHECK(q && (uintptr_t)q % 8 == 0);
    CHECK_EQ_INT(n_chunks(&a), 1);
    memset(q, 0xab, MST_ARENA_INLINE_BYTES);
    mst_arena_release(&a);
    CHECK_EQ_INT(n_chunks(&a), 0);
    CHECK_EQ_INT(a.inline_used, 0);
}

static void test_reset_keep_reuses_first_chunk(void) {
    mst_arena a;
    mst_arena_init(&a);
    for (int round = 0; round < 100; round++) {
        (void)mst_arena_alloc(&a, 400);            /* inline */
        char *c = mst_arena_alloc(&a, 1000);       /* first chunk */
        CHECK(c != NULL);
        memset(c, round, 1000);
        mst_arena_chunk *first = a.chunks;
        mst_arena_reset_keep(&a, 64 * 1024);
        CHECK_EQ_INT(n_chunks(&a), 1);
        CHECK(a.chunks == first);                  /* no free/malloc */
        CHECK_EQ_INT(a.chunks->used, 0);
        CHECK_EQ_INT(a.inline_used, 0);
    }
    /* Fill the kept chunk past its end: a second chunk appears, and the
     * reset drops it again, keeping the oldest. */
    mst_arena_chunk *first = a.chunks;
    (void)mst_arena_alloc(&a, MST_ARENA_INLINE_BYTES);
    for (int i = 0; i < 20; i++) CHECK(mst_arena_alloc(&a, 1000) != NULL);
    CHECK(n_chunks(&a) > 1);
    mst_arena_reset_keep(&a, 64 * 1024);
    CHECK_EQ_INT(n_chunks(&a), 1);
    CHECK(a.chunks == first);
    mst_arena_release(&a);
}

static void test_reset_keep_frees_big_chunk(void) {
    mst_arena a;
    mst_arena_init(&a);
    (void)mst_arena_alloc(&a, MST_ARENA_INLINE_BYTES);
    CHECK(mst_arena_alloc(&a, 1 << 20) != NULL); /* a chunk of its own size */
    mst_arena_reset_keep(&a, 64 * 1024);
    CHECK_EQ_INT(n_chunks(&a), 0);
    char *s = mst_arena_strndup(&a, "hello", 5, 100, NULL);
    CHECK_EQ_STR(s, "hello");
    mst_arena_reset_keep(&a, 0);                 /* keep nothing */
    CHECK_EQ_INT(n_chunks(&a), 0);
    mst_arena_release(&a);
}

static const mst_test_case TESTS[] = {
    {"inline_then_chunks", test_inline_then_chunks},
    {"reset_keep_reuses_first_chunk", test_reset_keep_reuses_first_chunk},
    {"reset_keep_frees_big_chunk", test_reset_keep_frees_big_chunk},
};
MST_TEST_MAIN(TESTS)
