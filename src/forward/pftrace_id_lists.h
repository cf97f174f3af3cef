/*
 * pftrace_id_lists.h — the `.pftrace` writer's request-id lists
 * (docs/architecture.md 1a "In the .pftrace"): splitting a span's JSON
 * string list into its items, and the per-stream delta of `request.ids`
 * against the previous span of the same stream.
 *
 * A stream is the spans of one name on one thread (pid, tid, name): an
 * engine's schedule steps, its model steps. Their batches change by a few
 * requests a step, so the writer sends a list whole only at a keyframe —
 * the first of a stream, every MST_PFT_ID_KEYFRAME_EVERY-th, after the
 * interning restarts (a new file, a dump, a lost packet all start one) and
 * whenever the list is not "the previous list without some ids, then new
 * ids at the end" (vLLM's order: running requests first, new ones after) —
 * and otherwise only the ids that left and joined, with the span's place
 * since the keyframe so a reader can tell that it missed none.
 * The same recurrence makes splitting cheap: a stream keeps its last list's
 * refs (the writer's intern entries) and its JSON text, so the next list's
 * text is compared with that text in runs (mst_pft_split_id_list_runs), or
 * its items with those ids (mst_pft_split_id_list_guided), before any scan;
 * and a stream remembers which forwarder list its last one was, so that a
 * list the forwarder rebuilt from exactly that one is known without its
 * text (mst_pft_id_chain_base_is) and its kept runs' iids and refs are
 * copied from the stream's (mst_pft_id_chain_last_iids, _last).
 * Memory: a fixed table of MST_PFT_ID_STREAMS streams, each with its last
 * list, refs and text (grown to the longest list seen). Used from one
 * thread.
 */
#ifndef MST_FORWARD_PFTRACE_ID_LISTS_H
#define MST_FORWARD_PFTRACE_ID_LISTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forward/timeline.h"
#include "wire/perfetto_packet_types.h" /* mst_pf_ids_origin */

#define MST_PFT_ID_KEYFRAME_EVERY 32u
#define MST_PFT_ID_STREAMS 256u
/* Longest list written as items; a longer one is written as JSON text. */
#define MST_PFT_ID_LIST_MAX 4096u
/* Longest list text a stream keeps for the next list's runs (1,024 ids of
 * 60 characters; a longer one's next list is split item by item): at most
 * MST_PFT_ID_STREAMS of them. */
#define MST_PFT_ID_TEXT_MAX (64u << 10)

/* An item: its text (s, n) and a lookup hint for the timeline
 * (timeline.h mst_tl_id_item; the splitter leaves it NULL). */
typedef mst_tl_id_item mst_pft_id_item;

/* True for the attribute keys whose string lists are request ids:
 * `request.ids` and keys ending in `_ids` (step.new_ids, ...). */
bool mst_pft_is_id_list_key(const char *key, size_t n);

/* Splits raw JSON text v[0..len) that is an array of strings without
 * escapes into out[0..*n) (pointing into v). False for anything else
 * (another type, an escape, more than `cap` items): write it as JSON. */
bool mst_pft_split_id_list(const char *v, size_t len, mst_pft_id_item *out, size_t cap, size_t *n);

/* Guesses: an item is looked for first among the next
 * MST_PFT_ID_GUESS_AHEAD guesses (from the one after the last matched),
 * until MST_PFT_ID_GUESS_MISSES items were none of them. */
#define MST_PFT_ID_GUESS_AHEAD 4u
#define MST_PFT_ID_GUESS_MISSES 8u
#define MST_PFT_ID_NO_GUESS UINT32_MAX

/* mst_pft_split_id_list told what the items probably are (a stream's list
 * is mostly its previous one without a few ids): guess[0..n_guess), texts
 * without quotes or backslashes, in their likely order. An item found
 * equal to a guess is not scanned; which[i] (may be NULL) gets the index
 * of the guess item i is, or MST_PFT_ID_NO_GUESS. The same result as
 * mst_pft_split_id_list whatever the guesses. */
bool mst_pft_split_id_list_guided(const char *v, size_t len, mst_pft_id_item *out, size_t cap,
                                  size_t *n, const mst_pft_id_item *guess, size_t n_guess,
                                  uint32_t *which);

typedef struct mst_pft_id_chains mst_pft_id_chains;

/* How to write one list: pos 0 = a keyframe (the whole list), else its
 * place since the keyframe, the ids that left (in the previous list's
 * order) and those that joined (appended, in order; points into the
 * caller's list). */
typedef struct mst_pft_id_delta {
    uint32_t pos;
    const uint64_t *left, *joined;
    size_t n_left, n_joined;
} mst_pft_id_delta;

mst_pft_id_chains *mst_pft_id_chains_new(void);
void mst_pft_id_chains_free(mst_pft_id_chains *c);
/* Forgets every stream: the next list of each is a keyframe (called when
 * the interned ids restart). */
void mst_pft_id_chains_reset(mst_pft_id_chains *c);
/* Forgets stream `key`: its next list is a keyframe (called when a list
 * of it was written another way, as JSON text). */
void mst_pft_id_chain_forget(mst_pft_id_chains *c, uint64_t key);
/* Records iids[0..n) (interned ids of the items, n >= 1) as the latest list
 * of stream `key` and fills *out with how to write it; refs[0..n) (may be
 * NULL: none) are the caller's words for the same ids, kept with them for
 * mst_pft_id_chain_last. False when out of memory (*out is then a keyframe
 * and the stream forgotten). */
bool mst_pft_id_chain_step(mst_pft_id_chains *c, uint64_t key, const uint64_t *iids,
                           const uint32_t *refs, size_t n, mst_pft_id_delta *out);
/* mst_pft_id_chain_step, to the same result, for a list whose shape the
 * caller knows: items [0, kept) are ids of the stream's latest list (of
 * n_last ids, as mst_pft_id_chain_last gave), which[i] their places in it
 * (ascending), and items [kept, n) ids not in it, each listed once (so the
 * whole list is too). The delta is read off that shape instead of from a
 * set of the list's ids. */
bool mst_pft_id_chain_step_shaped(mst_pft_id_chains *c, uint64_t key, const uint64_t *iids,
                                  const uint32_t *refs, size_t n, const uint32_t *which,
                                  size_t kept, size_t n_last, mst_pft_id_delta *out);
/* mst_pft_id_chain_step_shaped, to the same result, when the caller also
 * knows the places in the latest list of the ids that left (left[0 ..
 * n_left), ascending: every place not among the kept ones); `which` is
 * then not read (may be NULL). */
bool mst_pft_id_chain_step_change(mst_pft_id_chains *c, uint64_t key, const uint64_t *iids,
                                  const uint32_t *refs, size_t n, const uint32_t *which,
                                  size_t kept, size_t n_last, const uint32_t *left,
                                  size_t n_left, mst_pft_id_delta *out);
/* A stream's latest list as text: its JSON (text[0..len)) and its items'
 * places in it (item i: text + off[i], n[i] bytes), in the list's order. */
typedef struct mst_pft_id_text {
    const char *text;
    size_t len;
    const uint32_t *off, *n;
    size_t items;
} mst_pft_id_text;

/* Keeps v[0..len) with its items[0..n) (split from it) as the text of
 * stream `key`'s latest list, which must be the list just recorded
 * (mst_pft_id_chain_step*, the same n ids); nothing otherwise, for a text
 * longer than MST_PFT_ID_TEXT_MAX, or when out of memory. */
void mst_pft_id_chain_keep_text(mst_pft_id_chains *c, uint64_t key, const char *v, size_t len,
                                const mst_pft_id_item *items, size_t n);
/* The text of stream `key`'s latest list, when kept with it (its items are
 * those mst_pft_id_chain_last's refs stand for, in order); false if not.
 * Valid until the next call changing `c`. */
bool mst_pft_id_chain_last_text(const mst_pft_id_chains *c, uint64_t key, mst_pft_id_text *out);

/* mst_pft_split_id_list, to the same result, for a list that is probably
 * the stream's latest one (`prev`) without a few ids and with new ones at
 * the end: where an item is one of the next MST_PFT_ID_GUESS_AHEAD items of
 * `prev`, the run of text that agrees with prev's from there is taken
 * whole, its items where prev has them (no item is scanned for). which[i]
 * (may be NULL) gets the index in prev of item i, or MST_PFT_ID_NO_GUESS. */
bool mst_pft_split_id_list_runs(const char *v, size_t len, mst_pft_id_item *out, size_t cap,
                                size_t *n, const mst_pft_id_text *prev, uint32_t *which);

/* Where stream `key`'s latest list (just recorded by mst_pft_id_chain_step*)
 * came from on the forwarder's wire (o->valid false: nowhere known). Any
 * later record forgets it. */
void mst_pft_id_chain_set_origin(mst_pft_id_chains *c, uint64_t key, const mst_pf_ids_origin *o);
/* True when the list `o` describes was rebuilt from exactly stream `key`'s
 * latest list: a change whose base is the list of its forwarder stream
 * that was recorded here last (same connection, stream, the sequence
 * number just before, the same length) and whose shape adds up. Then its
 * kept items are that list's, in order, without the positions o->left. */
bool mst_pft_id_chain_base_is(const mst_pft_id_chains *c, uint64_t key, const mst_pf_ids_origin *o);

/* mst_pft_split_id_list for the rest of list v[0..len) from v[from] (an
 * item's opening quote after the '[' or a ','): its items go to out[*n ..)
 * and *n becomes the whole count. False as mst_pft_split_id_list. */
bool mst_pft_split_id_list_rest(const char *v, size_t len, size_t from, mst_pft_id_item *out,
                                size_t cap, size_t *n);

/* The refs of stream `key`'s latest list (*refs, its length returned),
 * or 0 when it has none (forgotten, reset, or recorded without refs): what
 * a writer predicts the next list's items from. Valid until the next call
 * changing `c`. */
size_t mst_pft_id_chain_last(const mst_pft_id_chains *c, uint64_t key, const uint32_t **refs);
/* The interned ids of the list mst_pft_id_chain_last gives the refs of
 * (as many as it returned), e.g. to copy a run of kept ids whole; NULL
 * when it would return 0. Valid as its refs. */
const uint64_t *mst_pft_id_chain_last_iids(const mst_pft_id_chains *c, uint64_t key);

#endif /* MST_FORWARD_PFTRACE_ID_LISTS_H */
