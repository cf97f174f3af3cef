/*
 * ids_change.h — a step's `request.ids` sent as a change to its stream's
 * previous list (docs/forwarder.md "Request id lists as changes"): the
 * list is the previous one without the items at the positions `left`, then
 * the items `joined` appended — vLLM's order, where finished requests leave
 * and new ones join at the end. On the wire the attribute's value is then
 *   {"left":[3,17],"joined":["cmpl-a","cmpl-b"]}
 * instead of the whole list.
 *
 * This file owns the format and the list arithmetic both ends share: a
 * remembered list (mst_ids_list: items as byte strings, the traced process
 * keeps raw ids, the forwarder each item's JSON text), finding the change
 * between two lists (traced process), and parsing a change strictly and
 * applying it (forwarder, on untrusted input). Which list a change refers
 * to (streams, sequence numbers, keyframes) is the callers' business:
 * ids_sender.h in the traced process, forward/id_streams.h in the forwarder.
 */
#ifndef MST_WIRE_IDS_CHANGE_H
#define MST_WIRE_IDS_CHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "mstrace.h"
#include "wire/json_reader.h"

/* A list longer than this (the span model's own list bound, a whole batch
 * at vLLM's largest default max_num_seqs) or with more item bytes than
 * MST_IDS_MAX_TEXT is never remembered: it goes whole. */
#define MST_IDS_MAX_ITEMS 1024u
#define MST_IDS_MAX_TEXT (128u * 1024u)

typedef struct mst_ids_list {
    char *text;          /* the items' bytes, back to back (sep between) */
    size_t text_len, text_cap;
    size_t items_len;    /* the items' bytes alone (no separators, no
                          * bytes left unused by mst_ids_list_edit)      */
    uint32_t *off, *len; /* item i is text[off[i] .. off[i] + len[i]),
                          * off[] increasing                             */
    uint32_t n, cap;
    /* A byte written between items and one before the first (0: none).
     * The forwarder keeps ',' and '[', so its text is the JSON array but
     * for the closing ']' (mst_ids_list_json). */
    char sep, lead;
} mst_ids_list;

/* A parsed change (mst_ids_change_parse): positions into the previous
 * list, strictly increasing, and the appended items as their JSON string
 * text (quotes included), pointing into the parsed text. */
typedef struct mst_ids_change {
    uint32_t *left;
    uint32_t n_left;
    mst_json_slice *joined;
    uint32_t n_joined;
} mst_ids_change;

/* An empty list with `sep` between items and `lead` before them (0: none). */
void mst_ids_list_init(mst_ids_list *l, char sep, char lead);
void mst_ids_list_free(mst_ids_list *l);
/* Empties the list, keeping its memory (the lead byte is written again
 * before the next item). */
static inline void mst_ids_list_clear(mst_ids_list *l) {
    l->n = 0;
    l->text_len = 0;
    l->items_len = 0;
}
/* Appends one item; false (list unchanged) when out of memory or past the
 * limits above. */
bool mst_ids_list_push(mst_ids_list *l, const char *p, size_t n);
/* The list becomes `items` (n of them), copied with one allocation check;
 * false (the list then empty) when out of memory or past the limits. */
bool mst_ids_list_set(mst_ids_list *l, const mst_str *items, uint32_t n);
/* The list becomes `prev` without the items at the positions left[0 ..
 * n_left) (strictly increasing, each < prev->n), then joined[0 ..
 * n_joined) — what a change found by mst_ids_change_find makes of prev,
 * into another list (prev copied whole, then the runs of items kept
 * moved down). False (the list then empty) when out of memory or past the
 * limits. `l` must not be `prev`. */
bool mst_ids_list_set_change(mst_ids_list *l, const mst_ids_list *prev, const uint32_t *left,
                             uint32_t n_left, const mst_str *joined, uint32_t n_joined);
/* The list (one without separator and lead byte: the traced process's,
 * whose text is only read item by item) becomes itself without the items
 * at the positions left[0 .. n_left) (strictly increasing, each < l->n),
 * then joined[0 .. n_joined) appended: the list mst_ids_list_set_change
 * would make, in place. Why in place: the items kept (nearly all of a
 * step's) stay where their bytes are; only the off/len entries after a
 * position that left move down, and the bytes of the items that left stay
 * unused until they pass the live bytes (then the text is compacted, once
 * in many calls). False (the list then empty) when out of memory or past
 * the limits, as mst_ids_list_set_change. */
bool mst_ids_list_edit(mst_ids_list *l, const uint32_t *left, uint32_t n_left, const mst_str *joined,
                       uint32_t n_joined);
/* Bytes of memory the list holds (the forwarder's budget counts them). */
size_t mst_ids_list_bytes(const mst_ids_list *l);

/* 16 bytes as two words (GCC / Clang vector: one SSE2 / NEON register). */
typedef uint64_t mst_ids_block __attribute__((vector_size(16)));

static inline mst_ids_block mst_ids_block_diff(const char *a, const char *b) {
    mst_ids_block x, y;
    __builtin_memcpy(&x, a, 16);
    __builtin_memcpy(&y, b, 16);
    return x ^ y;
}

/* a[0 .. n) == b[0 .. n), inline: request ids are tens of bytes and
 * nearly all equal to the previous list's at their position, where a
 * memcmp call per id was most of finding a change. 16-byte blocks (the
 * last ones overlapping: no loop up to 64 bytes), differences or-ed, one
 * branch at the end; 8 and 4-byte words below 16 bytes. */
static inline bool mst_ids_bytes_equal(const char *a, const char *b, size_t n) {
    if (n >= 16) { /* the first and last 16, then 32; more through a loop */
        mst_ids_block d = mst_ids_block_diff(a, b) | mst_ids_block_diff(a + n - 16, b + n - 16);
        if (n > 32) {
            d |= mst_ids_block_diff(a + 16, b + 16) | mst_ids_block_diff(a + n - 32, b + n - 32);
            for (size_t i = 32; i + 32 < n; i += 16) d |= mst_ids_block_diff(a + i, b + i);
        }
        return (d[0] | d[1]) == 0;
    }
    if (n >= 8) {
        uint64_t x0, y0, x1, y1;
        __builtin_memcpy(&x0, a, 8);
        __builtin_memcpy(&y0, b, 8);
        __builtin_memcpy(&x1, a + n - 8, 8);
        __builtin_memcpy(&y1, b + n - 8, 8);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    if (n >= 4) {
        uint32_t x0, y0, x1, y1;
        __builtin_memcpy(&x0, a, 4);
        __builtin_memcpy(&y0, b, 4);
        __builtin_memcpy(&x1, a + n - 4, 4);
        __builtin_memcpy(&y1, b + n - 4, 4);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    /* 0..3 bytes: the first, middle and last cover them all */
    return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

static inline bool mst_ids_list_item_is(const mst_ids_list *l, uint32_t i, const char *p, size_t n) {
    return l->len[i] == n && mst_ids_bytes_equal(l->text + l->off[i], p, n);
}

/* The change from `prev` to `items` (n of them): fills left[] (room for
 * prev->n) and returns joined_from, so that `items` is prev without the
 * positions left[0 .. *n_left), then items[joined_from .. n). Always
 * exists (at worst every item leaves and every item joins); the caller
 * decides whether it is small enough to send. */
uint32_t mst_ids_change_find(const mst_ids_list *prev, const mst_str *items, uint32_t n, uint32_t *left,
                             uint32_t *n_left);

/* Parses a change value (the JSON text of the attribute, already validated
 * as one JSON value by the packet decoder): an object with exactly the keys
 * "left" (an array of integers, strictly increasing, 0 .. MST_IDS_MAX_ITEMS
 * - 1) and "joined" (an array of strings), each at most MST_IDS_MAX_ITEMS
 * long. Arrays come from `arena`. MST_ERR_PARSE / MST_ERR_TOO_LARGE /
 * MST_ERR_NOMEM with a one-line reason in err. */
mst_status mst_ids_change_parse(const char *json, size_t len, mst_arena *arena, mst_ids_change *out,
                                char *err, size_t err_size);

/* The list becomes itself without the positions of c->left, then
 * c->joined's items (their JSON text) appended, with its separator, in
 * place: the text stays one run (what mst_ids_list_json returns), the
 * items before the first position that left stay where they are and each
 * later run of kept items moves down once. MST_ERR_PARSE when a position
 * is not in the list, MST_ERR_TOO_LARGE past the list limits (both found
 * before anything changes: the list is then as it was), MST_ERR_NOMEM (the
 * list then empty); a reason in err. */
mst_status mst_ids_change_apply(mst_ids_list *l, const mst_ids_change *c, char *err, size_t err_size);

/* The list as a compact JSON array of its items' text ("[a,b,...]", the
 * bytes a whole list has on the wire when each item is a JSON string), in
 * the list's own memory (its separator ',' and lead '['): valid until the
 * list changes. False when out of memory. */
bool mst_ids_list_json(mst_ids_list *l, mst_json_slice *out);

#endif /* MST_WIRE_IDS_CHANGE_H */
