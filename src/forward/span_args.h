/*
 * span_args.h — the argument rules both forwarder outputs apply to a
 * decoded span (docs/forwarder.md "Output format"): which attribute keys
 * the fixed args replace, when an attribute shadows a resource entry, and
 * the lookup of one key in a span's attributes or resource. Shared by the
 * Chrome Trace JSON writer (chrome_trace.c) and the Perfetto protobuf
 * writer (pftrace_writer.c) so both outputs carry the same args. Inline:
 * these run for every attribute of every span.
 */
#ifndef MST_FORWARD_SPAN_ARGS_H
#define MST_FORWARD_SPAN_ARGS_H

#include <stdbool.h>
#include <string.h>

#include "wire/perfetto_packet.h"

/* True for attribute keys the fixed args replace (upstream: fixed win).
 * Dispatch on the length first: this runs for every attribute. */
static inline bool mst_span_arg_is_fixed(const mst_str *k) {
    switch (k->len) {
    case 7: return memcmp(k->ptr, "span_id", 7) == 0;
    case 8: return memcmp(k->ptr, "trace_id", 8) == 0;
    case 9: return memcmp(k->ptr, "span.kind", 9) == 0;
    case 11: return memcmp(k->ptr, "span.status", 11) == 0;
    case 12: return memcmp(k->ptr, "service.name", 12) == 0;
    case 14: return memcmp(k->ptr, "parent_span_id", 14) == 0;
    default: return false;
    }
}

/* Does an attribute named "resource.<rkey>" exist (attributes win)? */
static inline bool mst_span_attr_shadows(const mst_pf_span *s, const mst_str *rkey) {
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_str *k = &s->attrs[i].key;
        if (k->len == 9 + rkey->len && memcmp(k->ptr, "resource.", 9) == 0 &&
            memcmp(k->ptr + 9, rkey->ptr, rkey->len) == 0)
            return true;
    }
    return false;
}

/* The value of `key` among n key/value pairs, or NULL. */
static inline const mst_json_slice *mst_span_find_kv(const mst_pf_kv *kv, size_t n,
                                                     const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 0; i < n; i++)
        if (kv[i].key.len == kl && memcmp(kv[i].key.ptr, key, kl) == 0) return &kv[i].value;
    return NULL;
}

/* How many of s's links, from the first, both outputs draw as flows: all
 * but its request links (mst_pf_span.request_links, the last ones). Why:
 * a step links each request it carried (256 at batch 256), and its
 * request.ids already joins them on the requests' tracks; 256 arrows per
 * step would bury the rest. */
static inline size_t mst_span_drawn_links(const mst_pf_span *s) {
    size_t r = s->request_links > 0 ? (size_t)s->request_links : 0;
    return r < s->n_links ? s->n_links - r : 0;
}

#endif /* MST_FORWARD_SPAN_ARGS_H */
