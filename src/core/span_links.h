/*
 * span_links.h — a span's link block (mst_span_add_link_block) made into
 * ordinary links on the exporter thread (span_links.c).
 */
#ifndef MST_CORE_SPAN_LINKS_H
#define MST_CORE_SPAN_LINKS_H

#include "core/span.h"

/* Turns the span's link block (mst_span_add_link_block) into ordinary
 * links at the end of `links`, allocated in its arena. Called once per span
 * by the exporter thread before any exporter reads it (tracer.c); the
 * reader is then the span's only user. Links that find no room are counted
 * as dropped. */
void mst_span_expand_links(mst_span *span);

#endif /* MST_CORE_SPAN_LINKS_H */
