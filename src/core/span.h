/*
 * span.h — the in-memory span record shared by the core (which fills it on
 * the caller's thread) and the encoders/exporters (which read it on the
 * exporter thread). Public code only sees the opaque `mst_span`.
 *
 * Layout rule: a span is one heap block holding fixed-size arrays for the
 * common case plus a bump arena for strings, links and events. Every size is
 * bounded by the limits in mstrace.h, so a span never grows without bound.
 * Strings inside a span are NUL-terminated and also carry their length.
 * The element types (mst_str, mst_attr, mst_link, mst_event) are public in
 * mstrace.h, so exporters outside the library read them without copying;
 * the record itself stays opaque (read through the mst_span_get_* calls,
 * span_readout.c).
 */
#ifndef MST_CORE_SPAN_H
#define MST_CORE_SPAN_H

#include "mstrace.h"
#include "core/arena.h"

struct mst_scope {
    mst_str name;
    mst_str version;
    struct mst_scope *next; /* the tracer's interned list */
};

struct mst_span {
    mst_trace_id trace_id;
    mst_span_id span_id;
    mst_span_id parent_span_id;   /* all zero: a root span */
    uint8_t trace_flags;
    bool parent_is_remote;
    bool has_parent;
    mst_str trace_state;          /* "" when none */
    const mst_scope *scope;
    mst_str name;
    mst_span_kind kind;
    uint64_t start_ns;
    uint64_t end_ns;
    mst_status_code status_code;
    mst_str status_message;
    uint32_t n_attrs;
    uint32_t dropped_attrs;
    uint64_t attr_key_lens;       /* span.c key_bit: one bit per attribute key set */
    mst_attr attrs[MST_MAX_ATTRIBUTES];
    mst_link *links;              /* arena array with link_cap slots */
    uint32_t n_links;
    uint32_t link_cap;
    uint32_t dropped_links;
    /* mst_span_add_link_block: copied refs, expanded into `links` on the
     * exporter thread (mst_span_expand_links) */
    const mst_link_ref *link_block;
    uint32_t n_link_block;
    mst_str link_block_key;       /* the attribute each link gets          */
    const mst_attr *link_block_list; /* the list naming them, or NULL      */
    struct mst_batch_block *block; /* the batch block its list/links read, or NULL
                                      (batch_block.h; released with the record) */
    mst_event *events;
    uint32_t n_events;
    uint32_t event_cap;
    uint32_t dropped_events;
    struct mst_tracer *tracer;
    uint32_t fork_epoch;          /* tracer.c: forks seen when it started  */
    uint32_t fork_lineage;        /* tracer.c: fork() children above it     */
    mst_arena arena;              /* last: owns strings/links/events */
};

#endif /* MST_CORE_SPAN_H */
