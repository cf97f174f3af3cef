/*
 * perfetto_packet_decode.c — the forwarder's strict decoder of upstream
 * "Hook span packets" (docs/forwarder.md "Packets"): 17-byte magic + one compact JSON object.
 * The input comes from any process of the same user over an abstract
 * socket, so it is treated as hostile: every byte is validated by the
 * strict reader (json_reader.h) and every field is type-checked.
 * mst_perfetto_packet_decode first tries the one-pass fast path
 * (perfetto_packet_fast.c), which declines anything unusual and every
 * error; this file's general decoder then decodes the packet and owns
 * every error code and message. Both follow the decisions below.
 *
 * Decisions (documented contract of this decoder):
 *   - Duplicate keys are REJECTED (MST_ERR_PARSE), for the known top-level
 *     fields, inside "attributes", inside "resource_attributes" and for
 *     trace_id/span_id inside a link. Why: "last wins" would silently drop
 *     data and the Chrome Trace args must have unique keys; no encoder we
 *     know of emits duplicates. Unknown top-level keys (and unknown keys in
 *     a link object) are validated and ignored, duplicates among them too.
 *   - trace_id and span_id are required: exactly 32 / 16 hex digits (any
 *     case, normalised to lowercase), not all zero (W3C invalid id).
 *     parent_span_id is optional: missing, null, "" or an all-zero id mean
 *     a root span (""); otherwise 16 hex digits. Link ids follow trace_id/
 *     span_id rules.
 *   - Optional fields default as upstream does: name "", category "Tracing",
 *     times/kind/status 0. name/category must be strings when present;
 *     start_time_ns/end_time_ns/kind/status must be JSON integers (integer
 *     syntax, int64 range: no fraction, no exponent, no strings).
 *   - attributes/resource_attributes: an object (null = empty). Values may
 *     be any JSON value and are kept as validated raw text. process.pid /
 *     thread.id are taken out of the attributes when they are integers;
 *     otherwise they stay as ordinary attributes.
 *   - links: an array (null = empty) of objects with trace_id/span_id.
 *   - More than MST_PF_MAX_ATTRS attributes (each object; every key
 *     counts, process.pid / thread.id taken out included) or
 *     MST_PF_MAX_LINKS links: MST_ERR_TOO_LARGE.
 *   - Value ranges (mst_pf_span_check_ranges), so the JSON and the
 *     .pftrace output can hold every value alike and nothing wraps:
 *     start_time_ns / end_time_ns must not be negative (ns since the Unix
 *     epoch; .pftrace timestamps are unsigned, and with both in 0..INT64_MAX
 *     a duration end - start cannot overflow), and an integer process.pid /
 *     thread.id must be 0..INT32_MAX (a .pftrace process/thread descriptor
 *     holds an int32; Linux pids and tids are far below). Outside:
 *     MST_ERR_PARSE with the value in the message (the forwarder counts the
 *     packet as rejected and logs the reason).
 *   - Arena exhaustion: MST_ERR_NOMEM.
 */
#include "wire/perfetto_packet.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wire/buf.h" /* mst_json_plain_prefix */
#include "wire/hex8.h"
#include "wire/json_reader.h"
#include "wire/perfetto_packet_fast.h"
#include "wire/perfetto_span_ranges.h"

enum {
    F_NAME = 1u << 0,
    F_CATEGORY = 1u << 1,
    F_TRACE_ID = 1u << 2,
    F_SPAN_ID = 1u << 3,
    F_PARENT = 1u << 4,
    F_START = 1u << 5,
    F_END = 1u << 6,
    F_KIND = 1u << 7,
    F_STATUS = 1u << 8,
    F_ATTRS = 1u << 9,
    F_RESOURCE = 1u << 10,
    F_LINKS = 1u << 11,
    F_REQUEST_LINKS = 1u << 12,
    F_IDS_STREAM = 1u << 13,
    F_IDS_SEQ = 1u << 14
};

typedef struct decoder {
    mst_json_reader r;
    mst_arena *arena;
    const uint8_t *json; /* start of the JSON text, for error offsets */
    char *err;
    size_t err_size;
} decoder;

static mst_status set_err(decoder *d, mst_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static mst_status set_err(decoder *d, mst_status st, const char *fmt, ...) {
    if (d->err && d->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->err, d->err_size, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Maps a reader failure to a status and a message naming the field. */
static mst_status reader_err(decoder *d, const char *field) {
    if (d->r.nomem) return set_err(d, MST_ERR_NOMEM, "out of memory decoding '%s'", field);
    return set_err(d, MST_ERR_PARSE, "invalid JSON in '%s' at byte %zu: %s", field,
                   d->r.err_off + MST_PERFETTO_MAGIC_LEN, d->r.err ? d->r.err : "error");
}

/* ------------------------------------------------------------ ids */

/* Hex digit -> its lowercase form; 0 for any other byte. */
static const char hex_lower[256] = {
    ['0'] = '0', ['1'] = '1', ['2'] = '2', ['3'] = '3', ['4'] = '4', ['5'] = '5', ['6'] = '6',
    ['7'] = '7', ['8'] = '8', ['9'] = '9', ['a'] = 'a', ['b'] = 'b', ['c'] = 'c', ['d'] = 'd',
    ['e'] = 'e', ['f'] = 'f', ['A'] = 'a', ['B'] = 'b', ['C'] = 'c', ['D'] = 'd', ['E'] = 'e',
    ['F'] = 'f'};

/* Ids are checked and lowercased eight bytes at once (mst_hex8_lower):
 * the byte loop was a visible share of decoding. */

/* Reads a string of exactly `n` hex digits into out (lowercase + NUL).
 * Returns 1 ok, 0 wrong shape (message set), -1 reader error. */
static int read_hex_id(decoder *d, const char *field, size_t n, char *out, bool allow_empty) {
    mst_str str; /* the digits in the packet (or unescaped in the arena) */
    if (mst_json_peek(&d->r) != MST_JSON_STRING) {
        if (d->r.err) return -1;
        set_err(d, MST_ERR_PARSE, "field '%s' must be a string of %zu hex digits", field, n);
        return 0;
    }
    if (!mst_json_read_str_slice(&d->r, d->arena, &str)) return -1;
    const char *buf = str.ptr;
    size_t len = str.len;
    if (allow_empty && len == 0) {
        out[0] = '\0';
        return 1;
    }
    if (len != n) {
        set_err(d, MST_ERR_PARSE, "field '%s' must be %zu hex digits (got %zu characters)", field,
                n, len);
        return 0;
    }
    unsigned bad = 0, nonzero = 0;
    size_t i = 0;
    for (; n - i >= 8; i += 8) { /* ids are 16/32 digits: whole words */
        uint64_t w, low;
        memcpy(&w, buf + i, 8);
        bad |= !mst_hex8_lower(w, &low);
        nonzero |= low != 0x3030303030303030ull;
        memcpy(out + i, &low, 8);
    }
    /* A table maps each byte to its lowercase hex digit, 0 for non-hex;
     * OR-ing the non-'0' flags tells whether the id is all zero. */
    for (; i < n; i++) {
        char c = hex_lower[(uint8_t)buf[i]];
        bad |= c == 0;
        nonzero |= c != '0';
        out[i] = c;
    }
    if (bad) {
        set_err(d, MST_ERR_PARSE, "field '%s' must be %zu hex digits", field, n);
        return 0;
    }
    out[n] = '\0';
    if (!nonzero) {
        if (allow_empty) {
            out[0] = '\0'; /* an all-zero parent id means "no parent" */
            return 1;
        }
        set_err(d, MST_ERR_PARSE, "field '%s' is the all-zero (invalid) id", field);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------ helpers */

/* Keys are length-carrying slices (not NUL-terminated): messages print at
 * most 64 bytes of them (stopping at a NUL byte, as before). */
static int key_shown(const mst_str *k) { return k->len < 64 ? (int)k->len : 64; }

static bool key_is(const char *k, size_t len, const char *lit) {
    size_t n = strlen(lit);
    return len == n && memcmp(k, lit, n) == 0;
}

/* Hash used to make the duplicate-key check cheap: 8 bytes per step (a
 * byte-serial hash was a visible share of decoding), the tail as one
 * overlapping load (a byte loop over it was too). Quality only affects
 * speed: equal hashes are confirmed with memcmp. */
static uint64_t hash_key(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    if (n >= 8) {
        for (; n > 8; s += 8, n -= 8) {
            memcpy(&w, s, 8);
            h = (h ^ w) * 0xff51afd7ed558ccdull;
            h ^= h >> 29;
        }
        memcpy(&w, s + n - 8, 8); /* the last 8 bytes, overlapping the previous word */
    } else if (n >= 4) { /* two 4-byte loads, overlapping: no byte loop */
        uint32_t lo, hi;
        memcpy(&lo, s, 4);
        memcpy(&hi, s + n - 4, 4);
        w = (uint64_t)hi << 32 | lo;
    } else {
        w = n ? (uint64_t)(uint8_t)s[0] | (uint64_t)(uint8_t)s[n / 2] << 8 |
                    (uint64_t)(uint8_t)s[n - 1] << 16
              : 0;
    }
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

static int64_t *pick_target(mst_pf_span *out, const mst_str *key, bool take_pid_tid,
                            bool **flag) {
    if (!take_pid_tid) return NULL;
    if (key_is(key->ptr, key->len, "process.pid")) {
        *flag = &out->has_pid;
        return &out->pid;
    }
    if (key_is(key->ptr, key->len, "thread.id")) {
        *flag = &out->has_tid;
        return &out->tid;
    }
    return NULL;
}

/* Decodes "attributes" / "resource_attributes": an object of any values.
 * With take_pid_tid, integer process.pid / thread.id go to out->pid/tid. */
static mst_status decode_kv_object(decoder *d, const char *field, bool take_pid_tid,
                                   mst_pf_span *out, mst_pf_kv **kvs_out, size_t *n_out) {
    mst_json_type t = mst_json_peek(&d->r);
    if (t == MST_JSON_NULL) {
        mst_json_slice raw;
        return mst_json_read_raw(&d->r, &raw) ? MST_OK : reader_err(d, field);
    }
    if (t != MST_JSON_OBJECT) {
        if (d->r.err) return reader_err(d, field);
        return set_err(d, MST_ERR_PARSE, "field '%s' must be an object", field);
    }
    if (!mst_json_object_begin(&d->r)) return reader_err(d, field);
    mst_pf_kv *kvs = NULL;
    uint64_t *hashes = NULL;
    size_t n = 0, cap = 0, hcap = 0;
    uint64_t bits = 0; /* hash bits of the stored keys */
    bool pid_seen[2] = {false, false}; /* duplicate check for taken-out keys */
    size_t taken = 0; /* keys taken out as pid/tid: they count toward the limit too */
    for (;;) {
        int more = mst_json_object_next(&d->r);
        if (more < 0) return reader_err(d, field);
        if (more == 0) break;
        mst_str key;
        mst_json_slice val;
        if (!mst_json_read_key_slice(&d->r, d->arena, &key) || !mst_json_read_raw(&d->r, &val))
            return reader_err(d, field);
        uint64_t h = hash_key(key.ptr, key.len);
        /* One bit per stored key's hash: a key whose bit is clear cannot be a
         * duplicate, so the scan below runs only on a (rare) bit match. */
        uint64_t bit = (uint64_t)1 << (h >> 58);
        for (size_t i = 0; (bits & bit) && i < n; i++)
            if (hashes[i] == h && kvs[i].key.len == key.len &&
                memcmp(kvs[i].key.ptr, key.ptr, key.len) == 0)
                return set_err(d, MST_ERR_PARSE, "duplicate key '%.*s' in '%s'", key_shown(&key),
                               key.ptr, field);
        bool *flag = NULL;
        int64_t *target = pick_target(out, &key, take_pid_tid, &flag);
        if (target) {
            int slot = target == &out->pid ? 0 : 1;
            if (pid_seen[slot])
                return set_err(d, MST_ERR_PARSE, "duplicate key '%.*s' in '%s'", key_shown(&key),
                               key.ptr, field);
            pid_seen[slot] = true;
            int64_t v;
            if (mst_json_slice_to_i64(&val, &v)) {
                if (n + taken == MST_PF_MAX_ATTRS)
                    return set_err(d, MST_ERR_TOO_LARGE, "more than %d entries in '%s'",
                                   MST_PF_MAX_ATTRS, field);
                taken++;
                *target = v;
                *flag = true;
                continue;
            }
        }
        if (n + taken == MST_PF_MAX_ATTRS)
            return set_err(d, MST_ERR_TOO_LARGE, "more than %d entries in '%s'", MST_PF_MAX_ATTRS,
                           field);
        if (n == cap) {
            kvs = mst_pf_arena_grow(d->arena, kvs, n, &cap, sizeof *kvs);
            hashes = kvs ? mst_pf_arena_grow(d->arena, hashes, n, &hcap, sizeof *hashes) : NULL;
            if (!kvs || !hashes) return set_err(d, MST_ERR_NOMEM, "out of memory decoding '%s'", field);
        }
        kvs[n].key = key;
        kvs[n].value = val;
        hashes[n] = h;
        bits |= bit;
        n++;
    }
    *kvs_out = kvs;
    *n_out = n;
    return MST_OK;
}

static mst_status decode_links(decoder *d, mst_pf_span *out) {
    mst_json_type t = mst_json_peek(&d->r);
    if (t == MST_JSON_NULL) {
        mst_json_slice raw;
        return mst_json_read_raw(&d->r, &raw) ? MST_OK : reader_err(d, "links");
    }
    if (t != MST_JSON_ARRAY) {
        if (d->r.err) return reader_err(d, "links");
        return set_err(d, MST_ERR_PARSE, "field 'links' must be an array of objects");
    }
    if (!mst_json_array_begin(&d->r)) return reader_err(d, "links");
    mst_pf_link *links = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        int more = mst_json_array_next(&d->r);
        if (more < 0) return reader_err(d, "links");
        if (more == 0) break;
        if (n == MST_PF_MAX_LINKS)
            return set_err(d, MST_ERR_TOO_LARGE, "more than %d links", MST_PF_MAX_LINKS);
        if (mst_json_peek(&d->r) != MST_JSON_OBJECT) {
            if (d->r.err) return reader_err(d, "links");
            return set_err(d, MST_ERR_PARSE, "field 'links' must be an array of objects");
        }
        if (n == cap) {
            links = mst_pf_arena_grow(d->arena, links, n, &cap, sizeof *links);
            if (!links) return set_err(d, MST_ERR_NOMEM, "out of memory decoding 'links'");
        }
        mst_pf_link *l = &links[n];
        bool have_trace = false, have_span = false;
        if (!mst_json_object_begin(&d->r)) return reader_err(d, "links");
        for (;;) {
            int m = mst_json_object_next(&d->r);
            if (m < 0) return reader_err(d, "links");
            if (m == 0) break;
            mst_str key;
            if (!mst_json_read_key_slice(&d->r, d->arena, &key)) return reader_err(d, "links");
            int rc;
            if (key_is(key.ptr, key.len, "trace_id")) {
                if (have_trace) return set_err(d, MST_ERR_PARSE, "duplicate key 'trace_id' in a link");
                have_trace = true;
                rc = read_hex_id(d, "links[].trace_id", 32, l->trace_id, false);
            } else if (key_is(key.ptr, key.len, "span_id")) {
                if (have_span) return set_err(d, MST_ERR_PARSE, "duplicate key 'span_id' in a link");
                have_span = true;
                rc = read_hex_id(d, "links[].span_id", 16, l->span_id, false);
            } else {
                mst_json_slice raw;
                rc = mst_json_read_raw(&d->r, &raw) ? 1 : -1;
            }
            if (rc < 0) return reader_err(d, "links");
            if (rc == 0) return MST_ERR_PARSE;
        }
        if (!have_trace || !have_span)
            return set_err(d, MST_ERR_PARSE, "a link needs both 'trace_id' and 'span_id'");
        n++;
    }
    out->links = links;
    out->n_links = n;
    return MST_OK;
}

static mst_status read_int_field(decoder *d, const char *field, int64_t *out) {
    if (mst_json_peek(&d->r) != MST_JSON_NUMBER) {
        if (d->r.err) return reader_err(d, field);
        return set_err(d, MST_ERR_PARSE, "field '%s' must be an integer", field);
    }
    if (!mst_json_read_i64(&d->r, out)) {
        if (d->r.err && strcmp(d->r.err, "integer out of int64 range") == 0)
            return set_err(d, MST_ERR_PARSE, "field '%s' is out of the int64 range", field);
        return set_err(d, MST_ERR_PARSE, "field '%s' must be an integer (no fraction/exponent)",
                       field);
    }
    return MST_OK;
}

static mst_status read_str_field(decoder *d, const char *field, mst_str *out) {
    if (mst_json_peek(&d->r) != MST_JSON_STRING) {
        if (d->r.err) return reader_err(d, field);
        return set_err(d, MST_ERR_PARSE, "field '%s' must be a string", field);
    }
    return mst_json_read_str(&d->r, d->arena, out) ? MST_OK : reader_err(d, field);
}

/* Which known field a top-level key names (0 = unknown). */
static unsigned field_of(const char *k, size_t n) {
    switch (n) {
    case 4: return key_is(k, n, "name") ? F_NAME : key_is(k, n, "kind") ? F_KIND : 0;
    case 5: return key_is(k, n, "links") ? F_LINKS : 0;
    case 6: return key_is(k, n, "status") ? F_STATUS : 0;
    case 7: return key_is(k, n, "span_id") ? F_SPAN_ID : key_is(k, n, "ids_seq") ? F_IDS_SEQ : 0;
    case 8: return key_is(k, n, "category") ? F_CATEGORY : key_is(k, n, "trace_id") ? F_TRACE_ID : 0;
    case 10: return key_is(k, n, "attributes") ? F_ATTRS : key_is(k, n, "ids_stream") ? F_IDS_STREAM : 0;
    case 11: return key_is(k, n, "end_time_ns") ? F_END : 0;
    case 13: return key_is(k, n, "start_time_ns") ? F_START : key_is(k, n, "request_links") ? F_REQUEST_LINKS : 0;
    case 14: return key_is(k, n, "parent_span_id") ? F_PARENT : 0;
    case 19: return key_is(k, n, "resource_attributes") ? F_RESOURCE : 0;
    default: return 0;
    }
}

static mst_status decode_field(decoder *d, unsigned f, const mst_str *key, mst_pf_span *out) {
    int rc;
    switch (f) {
    case F_NAME: return read_str_field(d, "name", &out->name);
    case F_CATEGORY: return read_str_field(d, "category", &out->category);
    case F_TRACE_ID:
        rc = read_hex_id(d, "trace_id", 32, out->trace_id, false);
        return rc > 0 ? MST_OK : rc < 0 ? reader_err(d, "trace_id") : MST_ERR_PARSE;
    case F_SPAN_ID:
        rc = read_hex_id(d, "span_id", 16, out->span_id, false);
        return rc > 0 ? MST_OK : rc < 0 ? reader_err(d, "span_id") : MST_ERR_PARSE;
    case F_PARENT:
        if (mst_json_peek(&d->r) == MST_JSON_NULL) {
            mst_json_slice raw;
            out->parent_span_id[0] = '\0';
            return mst_json_read_raw(&d->r, &raw) ? MST_OK : reader_err(d, "parent_span_id");
        }
        rc = read_hex_id(d, "parent_span_id", 16, out->parent_span_id, true);
        return rc > 0 ? MST_OK : rc < 0 ? reader_err(d, "parent_span_id") : MST_ERR_PARSE;
    case F_START: return read_int_field(d, "start_time_ns", &out->start_ns);
    case F_END: return read_int_field(d, "end_time_ns", &out->end_ns);
    case F_KIND: return read_int_field(d, "kind", &out->kind);
    case F_STATUS: return read_int_field(d, "status", &out->status);
    case F_ATTRS:
        return decode_kv_object(d, "attributes", true, out, &out->attrs, &out->n_attrs);
    case F_RESOURCE:
        return decode_kv_object(d, "resource_attributes", false, out, &out->resource,
                                &out->n_resource);
    case F_LINKS: return decode_links(d, out);
    case F_REQUEST_LINKS: return read_int_field(d, "request_links", &out->request_links);
    case F_IDS_STREAM: out->ids_fields |= 1u; return read_int_field(d, "ids_stream", &out->ids_stream);
    case F_IDS_SEQ: out->ids_fields |= 2u; return read_int_field(d, "ids_seq", &out->ids_seq);
    default: {
        mst_json_slice raw;
        if (mst_json_read_raw(&d->r, &raw)) return MST_OK;
        /* The message names a key of up to 23 bytes (up to a NUL byte). */
        char name[24];
        if (key->len < sizeof name) {
            memcpy(name, key->ptr, key->len);
            name[key->len] = '\0';
        } else {
            memcpy(name, "(long key)", 11);
        }
        return reader_err(d, name);
    }
    }
}

static bool str_plain(const char *s, size_t n) {
    return mst_json_plain_prefix((const uint8_t *)s, n) == n;
}

static bool keys_plain(const mst_pf_kv *kv, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!str_plain(kv[i].key.ptr, kv[i].key.len)) return false;
    return true;
}

/* mst_pf_span.plain_text of a decoded span (its ids are the decoder's). */
static bool strings_plain(const mst_pf_span *s) {
    return str_plain(s->name.ptr, s->name.len) && str_plain(s->category.ptr, s->category.len) &&
           keys_plain(s->attrs, s->n_attrs) && keys_plain(s->resource, s->n_resource);
}

mst_status mst_perfetto_packet_decode_general(const uint8_t *data, size_t len, mst_arena *arena,
                                              mst_pf_span *out, char *err, size_t err_size) {
    decoder d;
    memset(&d, 0, sizeof d);
    d.arena = arena;
    d.err = err;
    d.err_size = err_size;
    if (err && err_size) err[0] = '\0';
    if (!out || !arena || (!data && len)) return set_err(&d, MST_ERR_INVALID_ARG, "NULL argument");
    mst_pf_span_defaults(out);
    if (len < MST_PERFETTO_MAGIC_LEN || (memcmp(data, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN) != 0 &&
                                         memcmp(data, MST_PERFETTO_CHANGE_MAGIC, MST_PERFETTO_MAGIC_LEN) != 0))
        return set_err(&d, MST_ERR_PARSE, "missing MSPF_PERFETTO_V1 magic");
    out->ids_change = data[MST_PERFETTO_MAGIC_LEN - 2] == '2';
    d.json = data + MST_PERFETTO_MAGIC_LEN;
    mst_json_reader_init(&d.r, d.json, len - MST_PERFETTO_MAGIC_LEN, MST_PF_MAX_DEPTH);
    if (mst_json_peek(&d.r) != MST_JSON_OBJECT) {
        if (d.r.err) return reader_err(&d, "packet");
        return set_err(&d, MST_ERR_PARSE, "packet JSON must be an object");
    }
    if (!mst_json_object_begin(&d.r)) return reader_err(&d, "packet");
    unsigned seen = 0;
    for (;;) {
        int more = mst_json_object_next(&d.r);
        if (more < 0) return reader_err(&d, "packet");
        if (more == 0) break;
        mst_str key; /* in the packet unless escaped */
        if (!mst_json_read_key_slice(&d.r, arena, &key)) return reader_err(&d, "packet");
        unsigned f = field_of(key.ptr, key.len);
        if (f & seen) /* f != 0: a known field, so the key is its name */
            return set_err(&d, MST_ERR_PARSE, "duplicate key '%.*s'", key_shown(&key), key.ptr);
        seen |= f;
        mst_status st = decode_field(&d, f, &key, out);
        if (st != MST_OK) return st;
    }
    if (!mst_json_finish(&d.r)) return reader_err(&d, "packet");
    if (!(seen & F_TRACE_ID)) return set_err(&d, MST_ERR_PARSE, "missing field 'trace_id'");
    if (!(seen & F_SPAN_ID)) return set_err(&d, MST_ERR_PARSE, "missing field 'span_id'");
    if (!mst_pf_span_check_ranges(out, err, err_size)) return MST_ERR_PARSE;
    if (!mst_pf_span_check_ids(out, err, err_size)) return MST_ERR_PARSE;
    out->plain_text = strings_plain(out);
    return MST_OK;
}

/* The fast path first (perfetto_packet_fast.h); when it declines (an
 * error, or a shape it does not handle) the general decoder above decodes
 * the packet from scratch and reports any error. */
mst_status mst_perfetto_packet_decode(const uint8_t *data, size_t len, mst_arena *arena,
                                      mst_pf_span *out, char *err, size_t err_size) {
    bool v1 = len >= MST_PERFETTO_MAGIC_LEN && data && memcmp(data, MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN) == 0;
    bool v2 = !v1 && len >= MST_PERFETTO_MAGIC_LEN && data &&
              memcmp(data, MST_PERFETTO_CHANGE_MAGIC, MST_PERFETTO_MAGIC_LEN) == 0;
    if (out && arena && (v1 || v2)) {
        mst_pf_span_defaults(out);
        out->ids_change = v2;
        if (mst_pf_decode_fast(data + MST_PERFETTO_MAGIC_LEN, len - MST_PERFETTO_MAGIC_LEN, arena,
                               out)) {
            if (err && err_size) err[0] = '\0';
            return MST_OK;
        }
    }
    return mst_perfetto_packet_decode_general(data, len, arena, out, err, err_size);
}
