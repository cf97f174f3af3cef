/*
 * perfetto_packet_encode.c — owns the traced-process side of the upstream
 * "Hook span packet" (docs/forwarder.md "Packets"): one finished span becomes the 17-byte magic
 * "MSPF_PERFETTO_V1\n" followed by compact JSON with exactly the fields the
 * forwarder reads, in a fixed order:
 *   name, category, trace_id, span_id, parent_span_id, start_time_ns,
 *   end_time_ns, kind, status, attributes, resource_attributes, links,
 *   then request_links when it is not 0, then ids_stream and ids_seq for a
 *   request.ids list in a stream (ids_sender.h). A list sent as a change
 *   (ids_change.h) replaces the attribute's value with the change object and
 *   the magic with "MSPF_PERFETTO_V2\n", which a forwarder that cannot apply
 *   it rejects loudly instead of keeping a span without its list.
 *
 * Why hand-written: this runs on the exporter thread for every span, so it
 * appends straight into the caller's mst_buf with the buf.h appenders (no
 * printf, no intermediate tree); JSON escaping lives only in buf.c.
 * Errors: OOM or the buffer's max is reported through out->failed.
 */
#include "wire/perfetto_packet.h"

#include <string.h>

/* A fixed ASCII token (key, punctuation); its length is known at compile time. */
#define APPEND_LIT(b, lit) mst_buf_append((b), (lit), sizeof(lit) - 1)

/* Category used when a span has no (or an empty) instrumentation scope;
 * the forwarder's own default is the same word. */
static const char k_default_category[] = "Tracing";

static void append_str(mst_buf *b, const mst_str *s) {
    mst_buf_append_json_str(b, s->ptr ? s->ptr : "", s->ptr ? s->len : 0);
}

static void append_string_list(mst_buf *b, const mst_attr *a) {
    mst_buf_append_byte(b, '[');
    for (uint32_t i = 0; i < a->v.list.count; i++) {
        if (i) mst_buf_append_byte(b, ',');
        append_str(b, &a->v.list.items[i]);
    }
    mst_buf_append_byte(b, ']');
}

/* One attribute value as JSON; an unknown type (a bug upstream) becomes
 * null rather than breaking the packet. */
static void append_attr_value(mst_buf *b, const mst_attr *a) {
    switch (a->type) {
    case MST_ATTR_STRING: append_str(b, &a->v.s); return;
    case MST_ATTR_INT: mst_buf_append_i64(b, a->v.i); return;
    case MST_ATTR_DOUBLE: mst_buf_append_double(b, a->v.d); return;
    case MST_ATTR_BOOL:
        if (a->v.b) APPEND_LIT(b, "true");
        else APPEND_LIT(b, "false");
        return;
    case MST_ATTR_STRING_LIST: append_string_list(b, a); return;
    }
    APPEND_LIT(b, "null");
}

static bool is_request_ids(const mst_attr *a) {
    return a->type == MST_ATTR_STRING_LIST && a->key.len == 11 && memcmp(a->key.ptr, "request.ids", 11) == 0;
}

/* {"left":[positions],"joined":[ids]}: the list as a change (ids_change.h). */
static void append_ids_change(mst_buf *b, const mst_attr *a, const mst_ids_send *ids) {
    APPEND_LIT(b, "{\"left\":[");
    for (uint32_t i = 0; i < ids->n_left; i++) {
        if (i) mst_buf_append_byte(b, ',');
        mst_buf_append_u64(b, ids->left[i]);
    }
    APPEND_LIT(b, "],\"joined\":[");
    for (uint32_t i = ids->joined_from; i < a->v.list.count; i++) {
        if (i > ids->joined_from) mst_buf_append_byte(b, ',');
        append_str(b, &a->v.list.items[i]);
    }
    APPEND_LIT(b, "]}");
}

/* {"k":v,...} for an attribute array (span or resource); `ids` (NULL:
 * none) sends the first request.ids list as a change. */
static void append_attr_object(mst_buf *b, const mst_attr *attrs, uint32_t n, const mst_ids_send *ids) {
    mst_buf_append_byte(b, '{');
    for (uint32_t i = 0; i < n; i++) {
        if (i) mst_buf_append_byte(b, ',');
        append_str(b, &attrs[i].key);
        mst_buf_append_byte(b, ':');
        if (ids && is_request_ids(&attrs[i])) {
            append_ids_change(b, &attrs[i], ids);
            ids = NULL;
        } else {
            append_attr_value(b, &attrs[i]);
        }
    }
    mst_buf_append_byte(b, '}');
}

/* Ids are raw bytes, so their hex needs no escaping: quote + hex + quote. */
static void append_hex_id(mst_buf *b, const uint8_t *bytes, size_t n) {
    mst_buf_append_byte(b, '"');
    mst_buf_append_hex(b, bytes, n);
    mst_buf_append_byte(b, '"');
}

static void append_links(mst_buf *b, const mst_span *span) {
    mst_buf_append_byte(b, '[');
    for (uint32_t i = 0; i < span->n_links; i++) {
        const mst_link *l = &span->links[i];
        if (i) mst_buf_append_byte(b, ',');
        APPEND_LIT(b, "{\"trace_id\":");
        append_hex_id(b, l->trace_id.bytes, sizeof l->trace_id.bytes);
        APPEND_LIT(b, ",\"span_id\":");
        append_hex_id(b, l->span_id.bytes, sizeof l->span_id.bytes);
        mst_buf_append_byte(b, '}');
    }
    mst_buf_append_byte(b, ']');
}

/* How many of the span's links, at their end, are request links: each
 * with one attribute `request.id`, on a span carrying `request.ids` (what
 * mst_span_add_link_block makes). The forwarder draws no flow for them. */
static uint32_t request_link_count(const mst_span *span) {
    bool has_ids = false;
    for (uint32_t i = 0; i < span->n_attrs && !has_ids; i++)
        has_ids = span->attrs[i].key.len == 11 && memcmp(span->attrs[i].key.ptr, "request.ids", 11) == 0;
    if (!has_ids) return 0;
    uint32_t n = 0;
    while (n < span->n_links) {
        const mst_link *l = &span->links[span->n_links - 1 - n];
        if (l->n_attrs != 1 || l->attrs[0].key.len != 10 || memcmp(l->attrs[0].key.ptr, "request.id", 10) != 0)
            break;
        n++;
    }
    return n;
}

static void append_category(mst_buf *b, const mst_span *span) {
    const mst_scope *scope = span->scope;
    if (scope && scope->name.ptr && scope->name.len) append_str(b, &scope->name);
    else mst_buf_append_json_str(b, k_default_category, sizeof k_default_category - 1);
}

/* A root span carries "" (the forwarder and the upstream Python exporter
 * both treat the empty string as "no parent"). */
static void append_parent(mst_buf *b, const mst_span *span) {
    static const mst_span_id zero;
    if (span->has_parent && memcmp(&span->parent_span_id, &zero, sizeof zero) != 0)
        append_hex_id(b, span->parent_span_id.bytes, sizeof span->parent_span_id.bytes);
    else
        APPEND_LIT(b, "\"\"");
}

void mst_perfetto_packet_encode(const mst_span *span, const mst_resource *res, mst_buf *out) {
    mst_perfetto_packet_encode_ids(span, res, NULL, out);
}

void mst_perfetto_packet_encode_ids(const mst_span *span, const mst_resource *res, const mst_ids_send *ids,
                                    mst_buf *out) {
    if (ids && !ids->in_stream) ids = NULL;
    bool change = ids && ids->change;
    /* Typical packet: ~400 bytes of fixed fields + attributes; one reserve
     * up front avoids most regrowth on a reused buffer. */
    mst_buf_reserve(out, 512);
    mst_buf_append(out, change ? MST_PERFETTO_CHANGE_MAGIC : MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
    APPEND_LIT(out, "{\"name\":");
    append_str(out, &span->name);
    APPEND_LIT(out, ",\"category\":");
    append_category(out, span);
    APPEND_LIT(out, ",\"trace_id\":");
    append_hex_id(out, span->trace_id.bytes, sizeof span->trace_id.bytes);
    APPEND_LIT(out, ",\"span_id\":");
    append_hex_id(out, span->span_id.bytes, sizeof span->span_id.bytes);
    APPEND_LIT(out, ",\"parent_span_id\":");
    append_parent(out, span);
    APPEND_LIT(out, ",\"start_time_ns\":");
    mst_buf_append_u64(out, span->start_ns);
    APPEND_LIT(out, ",\"end_time_ns\":");
    mst_buf_append_u64(out, span->end_ns);
    APPEND_LIT(out, ",\"kind\":");
    mst_buf_append_i64(out, (int64_t)span->kind);
    APPEND_LIT(out, ",\"status\":");
    mst_buf_append_i64(out, (int64_t)span->status_code);
    APPEND_LIT(out, ",\"attributes\":");
    append_attr_object(out, span->attrs, span->n_attrs, change ? ids : NULL);
    APPEND_LIT(out, ",\"resource_attributes\":");
    if (res) append_attr_object(out, res->attrs, res->n_attrs, NULL);
    else APPEND_LIT(out, "{}");
    APPEND_LIT(out, ",\"links\":");
    append_links(out, span);
    uint32_t request_links = request_link_count(span);
    if (request_links) {
        APPEND_LIT(out, ",\"request_links\":");
        mst_buf_append_u64(out, request_links);
    }
    if (ids) {
        APPEND_LIT(out, ",\"ids_stream\":");
        mst_buf_append_u64(out, ids->stream);
        APPEND_LIT(out, ",\"ids_seq\":");
        mst_buf_append_u64(out, ids->seq);
    }
    mst_buf_append_byte(out, '}');
}
