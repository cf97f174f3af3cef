/*
 * read_chrome.c — streamed Chrome Trace Event JSON reader (read_chrome.h).
 * Owns the chunk buffer's growth for one large event, the event-extent
 * scanner and the mapping of one event onto mst_an_span; opening, reading
 * and progress are input_file.h's.
 *
 * How: the file is read in MST_AN_INPUT_CHUNK-byte pieces. A cheap scanner finds where
 * the next array element ends (bracket depth, skipping strings); the
 * element is then parsed by the strict pull reader (wire/json_reader.h),
 * which validates syntax and UTF-8 and bounds every read. Why two steps:
 * the strict reader needs the whole value in memory, and finding its end
 * first lets an element that straddles two chunks be completed by one
 * refill instead of re-parsing. An element is at most MAX_EVENT bytes (the
 * forwarder's frames are at most 4 MiB, its events a little more).
 */
#include "analyze/read_chrome.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/grow.h"
#include "analyze/input_file.h"
#include "analyze/pid_roles.h"
#include "core/arena.h"
#include "wire/json_reader.h"

#define MAX_EVENT (64u << 20)
#define MAX_DEPTH 64


typedef struct reader {
    mst_an_input *in;
    /* output */
    uint32_t source;
    mst_an_span_fn fn;
    void *ctx;
    mst_an_input_info *info; /* in->info */
    /* per event scratch */
    mst_arena arena;
    mst_an_attr *attrs;
    size_t attrs_cap;
    mst_an_str *items;
    size_t items_cap;
    size_t items_used;      /* items taken by this event's lists */
    size_t *item_start;     /* per attr: first item index (lists) */
    size_t item_start_cap;
    mst_an_pid_roles roles; /* from process_name events */
    uint64_t bad_ids;
    /* Skipped events by reason (their sum is info->skipped), for a message
     * that says what was skipped and why. */
    uint64_t skip_not_object, skip_invalid, skip_no_name_ts;
    const char *first_invalid;  /* the reader's reason for the first invalid one */
    uint64_t first_invalid_at;  /* its byte offset in the file */
} reader;

/* ------------------------------------------------------------ input */

/* Makes at least one more byte available after buf[len] unless at EOF,
 * keeping buf[pos..len) (moved to the front). False on a read error. */
static bool refill(reader *r, char *err, size_t err_size) {
    mst_an_input *in = r->in;
    size_t have = in->len - in->pos;
    if (in->fd >= 0 && !in->eof && have == in->cap && in->cap >= MAX_EVENT + MST_AN_INPUT_CHUNK) {
        snprintf(err, err_size, "%s: an event larger than %u MiB at byte %llu", r->info->name,
                 MAX_EVENT >> 20, (unsigned long long)(in->base + in->pos));
        return false;
    }
    return mst_an_input_more(in, have + 1, err, err_size);
}

static bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* Skips whitespace; returns the next byte or -1 at EOF, -2 on read error. */
static int next_byte(reader *r, char *err, size_t err_size) {
    mst_an_input *in = r->in;
    for (;;) {
        while (in->pos < in->len && is_ws(in->buf[in->pos])) in->pos++;
        if (in->pos < in->len) return in->buf[in->pos];
        if (in->eof) return -1;
        if (!refill(r, err, err_size)) return -2;
    }
}

/* End (exclusive) of the JSON value starting at p[0] within n bytes, or 0
 * when it does not end within them. Containers by bracket depth (strings
 * skipped, escapes honoured); scalars end at the next ',', ']', '}' or
 * whitespace. Validation is left to the strict reader. */
static size_t scan_value_end(const uint8_t *p, size_t n) {
    size_t i = 0;
    if (n == 0) return 0;
    if (p[0] == '"') {
        for (i = 1; i < n; i++) {
            if (p[i] == '\\') i++;
            else if (p[i] == '"') return i + 1;
        }
        return 0;
    }
    if (p[0] != '{' && p[0] != '[') {
        for (i = 0; i < n; i++)
            if (p[i] == ',' || p[i] == ']' || p[i] == '}' || is_ws(p[i])) return i;
        return 0;
    }
    unsigned depth = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c == '"') {
            const uint8_t *q = p + i + 1;
            const uint8_t *e = p + n;
            for (;;) {
                const uint8_t *h = memchr(q, '"', (size_t)(e - q));
                if (!h) return 0;
                /* Count the backslashes right before the quote. */
                const uint8_t *b = h;
                while (b > q && b[-1] == '\\') b--;
                if (((h - b) & 1) == 0) {
                    i = (size_t)(h - p) + 1;
                    break;
                }
                q = h + 1;
            }
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
        i++;
    }
    return 0;
}

/* ------------------------------------------------------------ values */

/* Microseconds as written by the forwarder ("123", "123.456", "-0.5") to
 * exact nanoseconds; other number forms through strtod. */
static bool parse_us(const char *s, size_t n, int64_t *ns) {
    size_t i = 0;
    bool neg = false;
    if (i < n && s[i] == '-') {
        neg = true;
        i++;
    }
    uint64_t ip = 0;
    size_t d0 = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (ip > 900000000000000000ull / 10) goto slow;
        ip = ip * 10 + (uint64_t)(s[i] - '0');
        i++;
    }
    if (i == d0) return false;
    uint64_t frac = 0;
    if (i < n && s[i] == '.') {
        i++;
        size_t f0 = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (i - f0 < 3) frac = frac * 10 + (uint64_t)(s[i] - '0');
            i++;
        }
        if (i == f0) return false;
        for (size_t k = i - f0; k < 3; k++) frac *= 10;
    }
    if (i != n) goto slow;
    if (ip > (uint64_t)INT64_MAX / 1000 - 1) goto slow;
    uint64_t v = ip * 1000 + frac;
    *ns = neg ? -(int64_t)v : (int64_t)v;
    return true;
slow: {
    char tmp[64];
    if (n >= sizeof tmp) return false;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    double d = strtod(tmp, &end);
    if (end != tmp + n || !(d > -9.2e15 && d < 9.2e15)) return false;
    *ns = (int64_t)(d * 1000.0);
    return true;
}
}

/* A raw JSON number to int64 (integers) or double. */
static bool parse_number(const mst_json_slice *v, int64_t *i, double *d, bool *is_int) {
    if (mst_json_slice_to_i64(v, i)) {
        *is_int = true;
        *d = (double)*i;
        return true;
    }
    char tmp[64];
    if (v->len >= sizeof tmp) return false;
    memcpy(tmp, v->ptr, v->len);
    tmp[v->len] = 0;
    char *end;
    *d = strtod(tmp, &end);
    *is_int = false;
    return end == tmp + v->len;
}

/* Hex digit values, -1 for anything else (ids are parsed for every span). */
static const int8_t HEX[256] = {
    ['0'] = 0 + 1, ['1'] = 1 + 1, ['2'] = 2 + 1, ['3'] = 3 + 1, ['4'] = 4 + 1, ['5'] = 5 + 1,
    ['6'] = 6 + 1, ['7'] = 7 + 1, ['8'] = 8 + 1, ['9'] = 9 + 1, ['a'] = 10 + 1, ['b'] = 11 + 1,
    ['c'] = 12 + 1, ['d'] = 13 + 1, ['e'] = 14 + 1, ['f'] = 15 + 1, ['A'] = 10 + 1, ['B'] = 11 + 1,
    ['C'] = 12 + 1, ['D'] = 13 + 1, ['E'] = 14 + 1, ['F'] = 15 + 1};

/* Hex id of exactly 2n digits to bytes; "" leaves zeros. */
static bool parse_id(const mst_str *s, uint8_t *out, size_t n) {
    memset(out, 0, n);
    if (s->len == 0) return true;
    if (s->len != 2 * n) return false;
    const uint8_t *p = (const uint8_t *)s->ptr;
    for (size_t k = 0; k < n; k++) {
        int a = HEX[p[2 * k]] - 1, b = HEX[p[2 * k + 1]] - 1;
        if (a < 0 || b < 0) {
            memset(out, 0, n);
            return false;
        }
        out[k] = (uint8_t)(a << 4 | b);
    }
    return true;
}

static bool key_is(const mst_str *k, const char *lit, size_t n) {
    return k->len == n && memcmp(k->ptr, lit, n) == 0;
}
#define KEY_IS(k, lit) key_is((k), (lit), sizeof(lit) - 1)

/* ------------------------------------------------------------ roles */

/* ------------------------------------------------------------ events */

/* One attribute value into attrs[idx] (key already set). */
static bool read_attr_value(reader *r, mst_json_reader *jr, size_t idx) {
    mst_an_attr *a = &r->attrs[idx];
    a->type = MST_AN_VAL_OTHER;
    a->i = 0;
    a->d = 0;
    a->s = (mst_an_str){NULL, 0};
    a->items = NULL;
    a->n_items = 0;
    r->item_start[idx] = (size_t)-1;
    switch (mst_json_peek(jr)) {
    case MST_JSON_STRING: {
        mst_str s;
        if (!mst_json_read_str_slice(jr, &r->arena, &s)) return false;
        a->type = MST_AN_VAL_STR;
        a->s = (mst_an_str){s.ptr, s.len};
        return true;
    }
    case MST_JSON_NUMBER: {
        mst_json_slice v;
        if (!mst_json_read_raw(jr, &v)) return false;
        bool is_int;
        if (!parse_number(&v, &a->i, &a->d, &is_int)) {
            a->s = (mst_an_str){v.ptr, v.len};
            return true;
        }
        a->type = is_int ? MST_AN_VAL_INT : MST_AN_VAL_DOUBLE;
        return true;
    }
    case MST_JSON_TRUE:
    case MST_JSON_FALSE: {
        mst_json_slice v;
        if (!mst_json_read_raw(jr, &v)) return false;
        a->type = MST_AN_VAL_BOOL;
        a->i = v.ptr[0] == 't';
        a->d = (double)a->i;
        return true;
    }
    case MST_JSON_ARRAY: {
        /* A list of strings (request.ids) is unpacked; anything else raw. */
        mst_json_reader save = *jr;
        size_t first = r->items_used;
        size_t n = 0;
        bool strings = mst_json_array_begin(jr);
        int more;
        while (strings && (more = mst_json_array_next(jr)) == 1) {
            if (mst_json_peek(jr) != MST_JSON_STRING) {
                strings = false;
                break;
            }
            mst_str s;
            if (!mst_json_read_str_slice(jr, &r->arena, &s)) return false;
            if (!mst_an_grow((void **)&r->items, &r->items_cap, first + n + 1, sizeof *r->items))
                return false;
            r->items[first + n++] = (mst_an_str){s.ptr, s.len};
        }
        if (jr->err) {
            if (jr->nomem) return false;
            strings = false;
        }
        if (strings) {
            a->type = MST_AN_VAL_STR_LIST;
            a->n_items = n;
            r->item_start[idx] = first;
            r->items_used += n;
            return true;
        }
        *jr = save;
        mst_json_slice v;
        if (!mst_json_read_raw(jr, &v)) return false;
        a->s = (mst_an_str){v.ptr, v.len};
        return true;
    }
    default: {
        mst_json_slice v;
        if (!mst_json_read_raw(jr, &v)) return false;
        a->s = (mst_an_str){v.ptr, v.len};
        return true;
    }
    }
}

typedef struct event {
    mst_str name;
    char ph;
    bool has_ts, has_dur, has_pid, has_tid;
    int64_t ts_ns, dur_ns, pid, tid;
    mst_an_span span;
    mst_str role_attr;
    mst_str m_name; /* M events: args.name */
} event;

static bool read_args(reader *r, mst_json_reader *jr, event *ev) {
    if (mst_json_peek(jr) != MST_JSON_OBJECT) {
        mst_json_slice v;
        return mst_json_read_raw(jr, &v);
    }
    if (!mst_json_object_begin(jr)) return false;
    size_t n = 0;
    int more;
    while ((more = mst_json_object_next(jr)) == 1) {
        mst_str key;
        if (!mst_json_read_key_slice(jr, &r->arena, &key)) return false;
        mst_an_span *s = &ev->span;
        if (KEY_IS(&key, "trace_id") || KEY_IS(&key, "span_id") || KEY_IS(&key, "parent_span_id")) {
            if (mst_json_peek(jr) == MST_JSON_STRING) {
                mst_str v;
                if (!mst_json_read_str_slice(jr, &r->arena, &v)) return false;
                bool ok = key.len == 8    ? parse_id(&v, s->trace_id, 16)
                          : key.len == 7 ? parse_id(&v, s->span_id, 8)
                                         : parse_id(&v, s->parent_span_id, 8);
                if (!ok) r->bad_ids++;
            } else {
                mst_json_slice v;
                if (!mst_json_read_raw(jr, &v)) return false;
            }
            continue;
        }
        if (KEY_IS(&key, "span.status") || KEY_IS(&key, "span.kind")) {
            mst_json_slice v;
            if (!mst_json_read_raw(jr, &v)) return false;
            int64_t x;
            if (key.len == 11 && mst_json_slice_to_i64(&v, &x)) s->status = (int)x;
            continue;
        }
        if (!mst_an_grow((void **)&r->attrs, &r->attrs_cap, n + 1, sizeof *r->attrs) ||
            !mst_an_grow((void **)&r->item_start, &r->item_start_cap, n + 1, sizeof *r->item_start))
            return false;
        r->attrs[n].key = (mst_an_str){key.ptr, key.len};
        if (!read_attr_value(r, jr, n)) return false;
        if (KEY_IS(&key, "process.role") && r->attrs[n].type == MST_AN_VAL_STR)
            ev->role_attr = (mst_str){r->attrs[n].s.ptr, (uint32_t)r->attrs[n].s.len};
        if (KEY_IS(&key, "name") && r->attrs[n].type == MST_AN_VAL_STR)
            ev->m_name = (mst_str){r->attrs[n].s.ptr, (uint32_t)r->attrs[n].s.len};
        n++;
    }
    if (more < 0) return false;
    /* Lists point into `items` only now that it no longer moves. */
    for (size_t k = 0; k < n; k++)
        if (r->attrs[k].type == MST_AN_VAL_STR_LIST)
            r->attrs[k].items = r->items ? r->items + r->item_start[k] : NULL; /* [] before any item */
    ev->span.attrs = r->attrs;
    ev->span.n_attrs = n;
    return true;
}

/* Parses one element (an object) and hands a span to the sink. Returns
 * MST_OK also for a skipped element; a sink error is returned. */
static mst_status handle_event(reader *r, const uint8_t *p, size_t n) {
    mst_arena_reset_keep(&r->arena, 1u << 20);
    r->items_used = 0;
    mst_json_reader jr;
    mst_json_reader_init(&jr, p, n, MAX_DEPTH);
    event ev;
    memset(&ev, 0, sizeof ev);
    bool ok = mst_json_object_begin(&jr);
    int more = 0;
    while (ok && (more = mst_json_object_next(&jr)) == 1) {
        mst_str key;
        if (!mst_json_read_key_slice(&jr, &r->arena, &key)) {
            ok = false;
            break;
        }
        mst_json_slice v;
        if (KEY_IS(&key, "name") && mst_json_peek(&jr) == MST_JSON_STRING) {
            ok = mst_json_read_str_slice(&jr, &r->arena, &ev.name);
        } else if (KEY_IS(&key, "ph") && mst_json_peek(&jr) == MST_JSON_STRING) {
            mst_str ph;
            ok = mst_json_read_str_slice(&jr, &r->arena, &ph);
            ev.ph = ok && ph.len == 1 ? ph.ptr[0] : '?';
        } else if (KEY_IS(&key, "ts") || KEY_IS(&key, "dur")) {
            ok = mst_json_read_raw(&jr, &v);
            int64_t ns;
            if (ok && v.len && (v.ptr[0] == '-' || (v.ptr[0] >= '0' && v.ptr[0] <= '9')) &&
                parse_us(v.ptr, v.len, &ns)) {
                if (key.len == 2) {
                    ev.ts_ns = ns;
                    ev.has_ts = true;
                } else {
                    ev.dur_ns = ns;
                    ev.has_dur = true;
                }
            }
        } else if (KEY_IS(&key, "pid") || KEY_IS(&key, "tid")) {
            ok = mst_json_read_raw(&jr, &v);
            int64_t x;
            if (ok && mst_json_slice_to_i64(&v, &x)) {
                if (key.ptr[0] == 'p') {
                    ev.pid = x;
                    ev.has_pid = true;
                } else {
                    ev.tid = x;
                    ev.has_tid = true;
                }
            }
        } else if (KEY_IS(&key, "args")) {
            ok = read_args(r, &jr, &ev);
        } else {
            ok = mst_json_read_raw(&jr, &v);
        }
    }
    if (!ok || more < 0 || !mst_json_finish(&jr)) {
        if (jr.nomem) return MST_ERR_NOMEM;
        r->info->skipped++;
        if (!r->skip_invalid++) {
            r->first_invalid = jr.err ? jr.err : "invalid JSON";
            r->first_invalid_at = r->in->base + r->in->pos;
        }
        return MST_OK;
    }
    if (ev.ph == 'M') {
        if (ev.has_pid && ev.name.len == 12 && memcmp(ev.name.ptr, "process_name", 12) == 0 &&
            ev.m_name.ptr)
            if (!mst_an_pid_roles_set(&r->roles, ev.pid, ev.m_name.ptr, ev.m_name.len)) return MST_ERR_NOMEM;
        return MST_OK;
    }
    if (ev.ph == 's' || ev.ph == 'f') {
        if (ev.ph == 'f') r->info->flows++;
        return MST_OK;
    }
    if (ev.ph == 'C') {
        /* The forwarder's own counters: the highest value is the total. */
        const mst_an_attr *v = mst_an_span_attr(&ev.span, "value", 5);
        int64_t x = v && v->type == MST_AN_VAL_INT ? v->i : -1;
        if (x >= 0 && ev.name.len == 23 && memcmp(ev.name.ptr, "forwarder.spans_dropped", 23) == 0 &&
            x > r->info->spans_dropped)
            r->info->spans_dropped = x;
        return MST_OK;
    }
    if (ev.ph == 'b' || ev.ph == 'e' || ev.ph == 'n' || ev.ph == 'i' || ev.ph == 'I' ||
        ev.ph == 'B' || ev.ph == 'E')
        return MST_OK; /* derived request tracks, instants: the spans carry the same */
    if (ev.ph != 'X' || !ev.has_ts || !ev.name.ptr) {
        r->info->skipped++;
        r->skip_no_name_ts++;
        return MST_OK;
    }
    mst_an_span *s = &ev.span;
    s->name = (mst_an_str){ev.name.ptr, ev.name.len};
    s->start_ns = ev.ts_ns;
    int64_t dur = ev.has_dur && ev.dur_ns > 0 ? ev.dur_ns : 0;
    s->end_ns = ev.ts_ns > 0 && dur > INT64_MAX - ev.ts_ns ? INT64_MAX : ev.ts_ns + dur;
    s->pid = ev.pid;
    s->tid = ev.tid;
    s->source = r->source;
    if (ev.role_attr.ptr) {
        s->role = (mst_an_str){ev.role_attr.ptr, ev.role_attr.len};
    } else {
        const mst_an_pid_role *re = mst_an_pid_roles_get(&r->roles, ev.pid);
        if (re) s->role = (mst_an_str){re->role, re->len};
    }
    r->info->spans++;
    return r->fn(r->ctx, s);
}

/* ------------------------------------------------------------ driver */

static const char *type_word(int c) {
    switch (c) {
    case '{': return "a JSON object";
    case '"': return "a JSON string";
    case 't': case 'f': return "a JSON boolean";
    case 'n': return "null";
    default: return (c == '-' || (c >= '0' && c <= '9')) ? "a number" : "not JSON";
    }
}

/* Stops at a point that is not a well-formed continuation: analyse what was
 * read, unless nothing was (then it is not a trace). */
static mst_status broken(reader *r, const char *why, char *err, size_t err_size) {
    uint64_t at = r->in->base + r->in->pos;
    if (r->info->spans == 0) {
        snprintf(err, err_size, "%s: not a Chrome Trace JSON file: %s at byte %llu", r->info->name,
                 why, (unsigned long long)at);
        return MST_ERR_PARSE;
    }
    mst_an_input_broken(r->info, why, at);
    return MST_OK;
}

static mst_status run(reader *r, char *err, size_t err_size) {
    mst_an_input *in = r->in;
    if (in->len == 0 && !in->eof) {
        if (!refill(r, err, err_size)) return MST_ERR_IO;
    }
    /* A Perfetto protobuf trace starts with field 1 (packet), tag 0x0a,
     * which JSON would take for a newline. */
    bool proto_start = in->len > 1 && in->buf[0] == 0x0a;
    int c = next_byte(r, err, err_size);
    if (c == -2) return MST_ERR_IO;
    if (c == -1) {
        snprintf(err, err_size, "%s: empty file (no trace events)", r->info->name);
        return MST_ERR_PARSE;
    }
    if (proto_start && c != '[' && c != '{') {
        snprintf(err, err_size,
                 "%s: looks like a native Perfetto protobuf trace (.pftrace), not Chrome Trace "
                 "JSON (mstrace analyze reads it with read_pftrace.h when picked by content)",
                 r->info->name);
        return MST_ERR_UNSUPPORTED;
    }
    if (c != '[') {
        snprintf(err, err_size,
                 "%s: not a Chrome Trace JSON file: the top level is %s, expected the array of "
                 "events the forwarder writes",
                 r->info->name, type_word(c));
        return MST_ERR_PARSE;
    }
    in->pos++;
    bool first = true;
    for (;;) {
        c = next_byte(r, err, err_size);
        if (c == -2) return MST_ERR_IO;
        if (c == -1) {
            if (r->info->spans == 0 && first) {
                snprintf(err, err_size, "%s: not a Chrome Trace JSON file: the array never "
                         "closes and holds no events", r->info->name);
                return MST_ERR_PARSE;
            }
            mst_an_input_cut(r->info, "without its closing ']'");
            return MST_OK;
        }
        if (c == ']') {
            in->pos++;
            c = next_byte(r, err, err_size);
            if (c == -2) return MST_ERR_IO;
            if (c != -1) mst_an_input_warn(r->info, "data after the closing ']' ignored");
            return MST_OK;
        }
        if (!first) {
            if (c != ',') return broken(r, "expected ',' between events", err, err_size);
            in->pos++;
            c = next_byte(r, err, err_size);
            if (c == -2) return MST_ERR_IO;
            if (c == -1) continue; /* reported as a cut above */
        }
        first = false;
        /* Find the element's end, refilling as needed. */
        size_t end;
        for (;;) {
            end = scan_value_end(in->buf + in->pos, in->len - in->pos);
            if (end || in->eof) break;
            if (!refill(r, err, err_size)) return MST_ERR_IO;
        }
        if (!end) {
            /* The last event was cut: the file ends inside it. */
            mst_an_input_cut(r->info, "inside an event");
            return MST_OK;
        }
        if (c == '{') {
            mst_status st = handle_event(r, in->buf + in->pos, end);
            if (st != MST_OK) return mst_an_input_stopped(in, st, err, err_size);
        } else {
            r->info->skipped++;
            r->skip_not_object++;
        }
        in->pos += end;
    }
}

static void reader_free(reader *r) {
    mst_arena_release(&r->arena);
    free(r->attrs);
    free(r->items);
    free(r->item_start);
    mst_an_pid_roles_free(&r->roles);
}

static mst_status run_checked(reader *r, char *err, size_t err_size) {
    mst_status st = run(r, err, err_size);
    if (r->bad_ids)
        mst_an_input_warn(r->info, "%llu malformed trace/span ids (read as absent)",
                          (unsigned long long)r->bad_ids);
    if (r->info->skipped) {
        /* What was skipped and why, by reason (the first invalid event's
         * reason and place: e.g. nesting deeper than MAX_DEPTH). */
        char invalid[200] = "", deep[40] = "";
        if (r->skip_invalid && strcmp(r->first_invalid, "nesting too deep") == 0)
            snprintf(deep, sizeof deep, ", more than %d levels", MAX_DEPTH);
        if (r->skip_invalid)
            snprintf(invalid, sizeof invalid, ", %llu not valid JSON (the first at byte %llu: %s%s)",
                     (unsigned long long)r->skip_invalid, (unsigned long long)r->first_invalid_at,
                     r->first_invalid, deep);
        mst_an_input_warn(r->info, "%llu events skipped: %llu not JSON objects%s, %llu X events "
                          "without name/ts", (unsigned long long)r->info->skipped,
                          (unsigned long long)r->skip_not_object, invalid,
                          (unsigned long long)r->skip_no_name_ts);
    }
    return st;
}

static bool reader_init(reader *r, mst_an_input *in, uint32_t source, mst_an_span_fn fn, void *ctx) {
    memset(r, 0, sizeof *r);
    r->in = in;
    r->source = source;
    r->fn = fn;
    r->ctx = ctx;
    r->info = in->info;
    mst_arena_init(&r->arena);
    r->attrs_cap = r->item_start_cap = 64;
    r->attrs = calloc(r->attrs_cap, sizeof *r->attrs);
    r->item_start = calloc(r->item_start_cap, sizeof *r->item_start);
    return r->attrs && r->item_start;
}

static mst_status parse(mst_an_input *in, uint32_t source, mst_an_span_fn fn, void *ctx, char *err,
                        size_t err_size) {
    reader r;
    mst_status st = reader_init(&r, in, source, fn, ctx) ? run_checked(&r, err, err_size) : MST_ERR_NOMEM;
    reader_free(&r);
    return st;
}

const mst_an_format mst_an_chrome_format = {"chrome-json", parse};
