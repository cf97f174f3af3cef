/*
 * span_links.c — expanding a span's link block into ordinary links
 * (span_links.h). The block is what mst_span_add_link_block copied on the
 * hooked thread, or a batch block's links the span holds (span.c); here, on the exporter thread, each entry becomes
 * an mst_link with one attribute, so every reader (the encoders, the
 * read-out API) sees links of one kind.
 */
#include "core/span_links.h"

#include <string.h>

static const char k_empty[] = "";

/* Why here and not in mst_span_add_link_block: a link is ~50 bytes and an
 * attribute, and a step span at batch 256 carries 256 of them; built on the
 * exporter thread, the hooked thread pays one copy of 28 bytes per link. The
 * attribute's value is the list item itself (no copy). */
void mst_span_expand_links(mst_span *span) {
    if (!span || !span->n_link_block) return;
    uint32_t nb = span->n_link_block;
    span->n_link_block = 0;
    const mst_attr *list = span->link_block_list;
    const mst_str *items = list && list->type == MST_ATTR_STRING_LIST ? list->v.list.items : NULL;
    uint32_t n_items = items ? list->v.list.count : 0;
    uint32_t total = span->n_links + nb;
    mst_link *links = mst_arena_alloc(&span->arena, sizeof *links * total);
    mst_attr *attrs = mst_arena_alloc(&span->arena, sizeof *attrs * nb);
    if (!links || !attrs) {
        span->dropped_links += nb;
        return;
    }
    if (span->n_links) memcpy(links, span->links, sizeof *links * span->n_links);
    uint32_t at = span->n_links;
    for (uint32_t i = 0; i < nb; i++) {
        const mst_link_ref *r = &span->link_block[i];
        if (!mst_trace_id_is_valid(&r->trace_id) || !mst_span_id_is_valid(&r->span_id)) continue;
        mst_link *l = &links[at++];
        l->trace_id = r->trace_id;
        l->span_id = r->span_id;
        l->trace_flags = r->trace_flags;
        l->is_remote = r->is_remote;
        l->trace_state.ptr = k_empty;
        l->trace_state.len = 0;
        l->dropped_attrs = 0;
        if (r->item < n_items) {
            attrs[i].key = span->link_block_key;
            attrs[i].type = MST_ATTR_STRING;
            attrs[i].v.s = items[r->item];
            l->attrs = &attrs[i];
            l->n_attrs = 1;
        } else {
            l->attrs = NULL;
            l->n_attrs = 0;
        }
    }
    span->links = links;
    span->n_links = span->link_cap = at;
}

