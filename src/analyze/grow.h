/*
 * grow.h — mst_an_grow: the one way the analyze readers make a growable
 * array large enough, doubling its capacity (from 16) so appends stay
 * amortised O(1). Inline: it is tiny and on the readers' per-event path.
 */
#ifndef MST_ANALYZE_GROW_H
#define MST_ANALYZE_GROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Make *p hold at least `need` elements of `elem` bytes; *cap counts
 * elements. False (and *p, *cap untouched) when out of memory or when the
 * doubled capacity or its size in bytes would overflow size_t. */
static inline bool mst_an_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    if (elem == 0) return false;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return false;
        nc *= 2;
    }
    if (nc > SIZE_MAX / elem) return false;
    void *np = realloc(*p, nc * elem);
    if (!np) return false;
    *p = np;
    *cap = nc;
    return true;
}

#endif /* MST_ANALYZE_GROW_H */
