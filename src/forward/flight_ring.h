/*
 * flight_ring.h — the flight recorder's memory: the last N bytes (and at
 * most the last T ms) of decoded spans and counter samples as compact
 * records in one preallocated byte ring, oldest evicted and counted.
 *
 * A span record keeps what the writers read of a decoded span (names,
 * category, ids as binary, times, pid/tid, kind, status, every attribute,
 * resource attributes, links) without JSON framing: names, categories and
 * attribute keys are interned (a bounded table of its own, a few bytes per
 * use), the resource attributes of a process are interned as one blob, and
 * attribute values are kept as the validated JSON text they arrived as.
 * A span's counter samples are not stored apart: they are in its record.
 * No allocation per span: a record is written into the ring in place.
 *
 * Reading back (mst_flight_ring_span) rebuilds an mst_pf_span whose strings
 * point into the ring and the intern table, so a dump feeds the same
 * writers as a live run; it is valid until the next add.
 *
 * Threads: one (the formatting thread).
 */
#ifndef MST_FORWARD_FLIGHT_RING_H
#define MST_FORWARD_FLIGHT_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "forward/timeline.h"
#include "wire/perfetto_packet.h"

/* The intern table's bounds (part of the fixed overhead). */
#define MST_FLIGHT_INTERN_MAX_BYTES (16u << 20)
#define MST_FLIGHT_INTERN_MAX_ENTRIES (1u << 18)
/* The smallest ring (a record must fit a quarter of it). */
#define MST_FLIGHT_RING_MIN_BYTES (1u << 20)

typedef struct mst_flight_ring mst_flight_ring;

typedef enum mst_flight_rec_type { MST_FLIGHT_REC_SPAN = 1, MST_FLIGHT_REC_COUNTER = 2 } mst_flight_rec_type;

/* A record as the dump selects it (points into the ring). */
typedef struct mst_flight_rec {
    uint32_t size;           /* bytes, header included, 8-aligned */
    uint8_t type;            /* mst_flight_rec_type */
    uint8_t status;          /* span: its status (2 = ERROR) */
    uint16_t n_links;
    uint32_t mark;           /* the dump's selection (flight_dump.c), 0 otherwise */
    uint32_t exported;       /* the dump's export sent it (flight_dump.c) */
    uint64_t seq;            /* span: its number, from 1; counter: 0 */
    uint64_t arrive_ms;      /* forwarder time it was added */
    int64_t start_ns, end_ns; /* counter: both its timestamp */
    uint8_t trace_id[16];    /* span only */
    uint32_t rid_off, rid_len;   /* span: `request.id` value text, within the record */
    uint32_t ids_off, ids_len;   /* span: `request.ids` value text, within the record */
} mst_flight_rec;

typedef struct mst_flight_ring_stats {
    uint64_t spans_seen;     /* handed to add_span */
    uint64_t spans_held;     /* in the ring now */
    uint64_t spans_evicted;  /* pushed out (space or age) */
    uint64_t spans_not_held; /* larger than a quarter of the ring, or the intern table full */
    uint64_t counters_held, counters_evicted;
    uint64_t bytes_used, bytes_cap;
    uint64_t intern_bytes, intern_entries;
} mst_flight_ring_stats;

/* A ring of `bytes` (at least MST_FLIGHT_RING_MIN_BYTES) that also drops
 * records older than max_age_ms (0: no age bound). NULL on out of memory. */
mst_flight_ring *mst_flight_ring_new(uint64_t bytes, uint64_t max_age_ms);
void mst_flight_ring_free(mst_flight_ring *r);

/* Adds one span (pid already defaulted) at forwarder time now_ms; returns
 * its sequence number (> 0), or 0 when it could not be held (counted in
 * spans_not_held). */
uint64_t mst_flight_ring_add_span(mst_flight_ring *r, const mst_pf_span *s, int64_t pid,
                                  uint64_t now_ms);
/* Adds a counter sample that comes from no span (the forwarder's own:
 * a span's samples are derived from its record). c->name must be a static
 * string. */
void mst_flight_ring_add_counter(mst_flight_ring *r, const mst_tl_counter *c, uint64_t now_ms);
/* Drops the records older than the age bound. */
void mst_flight_ring_expire(mst_flight_ring *r, uint64_t now_ms);

/* Iteration, oldest first: first returns NULL when empty; next NULL at the
 * end. No add in between. Only `mark` may be changed through it. */
mst_flight_rec *mst_flight_ring_first(mst_flight_ring *r);
mst_flight_rec *mst_flight_ring_next(mst_flight_ring *r, const mst_flight_rec *rec);

/* The text of a record's value slice (rid/ids) as a pointer. */
const char *mst_flight_rec_text(const mst_flight_rec *rec, uint32_t off);

/* Rebuilds the span of a span record; arrays come from `arena`. */
bool mst_flight_ring_span(const mst_flight_ring *r, const mst_flight_rec *rec, mst_arena *arena,
                          mst_pf_span *out);
/* The counter sample of a counter record. */
void mst_flight_ring_counter(const mst_flight_rec *rec, mst_tl_counter *out);

void mst_flight_ring_get_stats(const mst_flight_ring *r, mst_flight_ring_stats *out);

#endif /* MST_FORWARD_FLIGHT_RING_H */
