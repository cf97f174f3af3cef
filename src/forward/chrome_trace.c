/*
 * chrome_trace.c — the forwarder's Chrome Trace Event JSON writer
 * (chrome_trace.h, docs/forwarder.md "Output format"). Owns the output
 * file, the event buffer and the event layout; request tracks and
 * counters come from the shared timeline model (timeline.h), laid out here
 * as JSON.
 *
 * Output: events are formatted here, on the caller's (the epoll) thread,
 * into the current chunk of an out_queue (out_queue.h), whose own thread
 * writes them: each write puts "<events>]" over the previous closing ']'
 * (each event is preceded by ','; the file starts as "[]"), so the file is
 * valid JSON after every write, and the page-cache copy of the output runs
 * on another core while the next events are decoded. Chunks are handed
 * over at the end of every batch (mst_chrome_writer_handoff) and when full.
 * A slow disk (or a writeback stall) makes unwritten events pile up; at
 * MAX_UNWRITTEN_BYTES the caller waits for the writer thread, exactly as
 * the single-threaded writer waited in pwrite: the epoll loop stops
 * reading, the clients' socket buffers fill and their exporters (100 ms
 * budget per batch on their own thread) count what does not fit. Why wait
 * rather than drop here: a stall of a few hundred ms is common on a busy
 * box (seen in the benchmark), and waiting loses nothing that the clients
 * could still deliver, while the traced processes never wait either way.
 * Only when the writer cannot progress (writes failing) is a span dropped
 * and counted (spans_dropped).
 *
 * Tables: span positions (trace_id, span_id) -> (pid, tid, start), an
 * "already named" set for M events and the links waiting for their source
 * span live in link_tables.h; the number and string fast paths in
 * chrome_json.h; the argument rules shared with the protobuf writer in
 * span_args.h.
 */
#include "forward/chrome_trace.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "forward/chrome_json.h"
#include "forward/hash_mix.h"
#include "forward/link_tables.h"
#include "forward/out_queue.h"
#include "forward/output_path.h"
#include "forward/span_args.h"
#include "forward/timeline.h"
#include "wire/hex8.h"

/* Unwritten output (queued + being formatted) at which add_span waits for
 * the writer thread: about 0.2 s of output at the forwarder's full speed. */
#define MAX_UNWRITTEN_BYTES (64u << 20)
#define DEFAULT_SERVICE_NAME "ms_service_profiler"
/* Links whose table lines are prefetched (the rest are simply looked up). */
#define PREFETCH_LINKS 4

/* ------------------------------------------------------------ writer */

struct mst_chrome_writer {
    int fd;
    int64_t default_pid;
    mst_outq *out;            /* the writer thread and its chunks */
    mst_buf *buf;             /* out's current chunk, during add_span */
    uint64_t full_dropped;    /* spans refused at MAX_UNWRITTEN_BYTES */
    mst_buf scratch;          /* building "resource.<key>", process names */
    uint64_t buffered_spans, buffered_flows; /* events of the span being added */
    mst_track_table pos, names;
    mst_pend_table pend;
    mst_timeline *tl;         /* request tracks and counters (timeline.h) */
    mst_arena arena;          /* scratch for the timeline, reset per span */
    mst_chrome_stats st;
};


static void append_key(mst_buf *b, const char *k, size_t n) {
    put_str(b, k, n);
    mst_buf_append_byte(b, ':');
}

static void append_str_member(mst_buf *b, const char *k, const char *v, size_t vn) {
    append_key(b, k, strlen(k));
    put_str(b, v, vn);
}

static void append_int_member(mst_buf *b, const char *k, int64_t v) {
    append_key(b, k, strlen(k));
    put_i64(b, v);
}


static bool is_string(const mst_json_slice *v) { return v && v->len >= 2 && v->ptr[0] == '"'; }

/* An "M" event naming a process (tid < 0) or a thread; `name` is a raw,
 * already validated JSON string. */
static void emit_name(mst_chrome_writer *w, int64_t pid, int64_t tid, bool thread,
                      const mst_json_slice *name) {
    mst_buf *b = w->buf;
    LIT(b, ",{");
    append_str_member(b, "name", thread ? "thread_name" : "process_name", thread ? 11 : 12);
    LIT(b, ",\"ph\":\"M\",\"ts\":0,");
    append_int_member(b, "pid", pid);
    mst_buf_append_byte(b, ',');
    append_int_member(b, "tid", thread ? tid : 0);
    LIT(b, ",\"args\":{\"name\":");
    mst_buf_append(b, name->ptr, name->len);
    LIT(b, "}}");
}

/* The "already named" key of a process (thread false) or a thread. */
static void name_key(int64_t pid, int64_t tid, bool thread, uint8_t key[24]) {
    memset(key, 0, 24);
    key[0] = thread ? 2 : 1;
    memcpy(key + 8, &pid, 8);
    if (thread) memcpy(key + 16, &tid, 8);
}

static bool thread_named(const mst_chrome_writer *w, int64_t pid, int64_t tid) {
    uint8_t key[24];
    name_key(pid, tid, true, key);
    return mst_track_table_find(&w->names, key) != 0;
}

/* Emits the M event once per process / thread (bounded set, oldest out). */
static void maybe_name(mst_chrome_writer *w, int64_t pid, int64_t tid, bool thread,
                       const mst_json_slice *name) {
    if (!is_string(name)) return;
    uint8_t key[24];
    name_key(pid, tid, thread, key);
    if (mst_track_table_find(&w->names, key)) return;
    bool ev;
    mst_track_table_insert(&w->names, key, &ev);
    emit_name(w, pid, tid, thread, name);
}

/* The process_name M event, once per pid: "<process.role> (<service.name>)"
 * when the span carries a `process.role` attribute (the mstrace plugin sets
 * it: api_server, engine_core, worker_0, ...; otherwise every vLLM process
 * would be named just "vllm"), else service.name. Both are raw, validated
 * JSON strings, so joining their escaped contents gives a valid one. The
 * attribute is looked up only for a pid not named yet. */
static void maybe_name_process(mst_chrome_writer *w, int64_t pid, const mst_pf_span *s,
                               const mst_json_slice *service) {
    uint8_t key[24] = {0};
    key[0] = 1;
    memcpy(key + 8, &pid, 8);
    if (mst_track_table_find(&w->names, key)) return;
    const mst_json_slice *role = mst_span_find_kv(s->attrs, s->n_attrs, "process.role");
    if (!is_string(role) || role->len <= 2) {
        maybe_name(w, pid, 0, false, service);
        return;
    }
    mst_buf_reset(&w->scratch);
    mst_buf_append(&w->scratch, role->ptr, role->len - 1); /* '"role' */
    if (is_string(service)) {
        LIT(&w->scratch, " (");
        mst_buf_append(&w->scratch, service->ptr + 1, service->len - 2);
        mst_buf_append_byte(&w->scratch, ')');
    }
    mst_buf_append_byte(&w->scratch, '"');
    if (w->scratch.failed) {
        w->buf->failed = true;
        return;
    }
    bool ev;
    mst_track_table_insert(&w->names, key, &ev);
    mst_json_slice name = {(const char *)w->scratch.data, w->scratch.len};
    emit_name(w, pid, 0, false, &name);
}

/* The table key of ids as a span or link carries them (33 / 17-byte
 * arrays): mst_link_key's bytes, decoded ids (32 + 16 hex digits) 16
 * digits at a time (mst_hex16_value) instead of a table lookup per digit;
 * anything else through mst_link_key. */
static void table_key(const char trace_hex[33], const char span_hex[17], uint8_t key[24]) {
#ifdef MST_HEX8_SWAR
    uint64_t v[3];
    if (mst_hex16_value(trace_hex, &v[0]) && mst_hex16_value(trace_hex + 16, &v[1]) &&
        mst_hex16_value(span_hex, &v[2])) {
        for (int i = 0; i < 3; i++) {
            uint64_t be = __builtin_bswap64(v[i]); /* first digit pair first */
            memcpy(key + 8 * i, &be, 8);
        }
        return;
    }
#endif
    mst_link_key(trace_hex, span_hex, key);
}

/* Room for one s/f flow pair: the literals (~220 bytes), four numbers
 * with their copy slack, the id (18 bytes) twice and the link text (66
 * bytes) twice: ~600 bytes. */
#define FLOW_NEED 768

/* The flow id of one link: 64 bits mixed from (source trace, source span,
 * linking span). Why a number and not the readable triple: Perfetto's JSON
 * importer reads a string flow id only as a hexadecimal number and drops
 * every flow event whose id is not one (docs/forwarder.md "Output format");
 * the triple goes into the start event's args instead. */
static uint64_t flow_id64(const uint8_t src_key[24], const uint8_t dest_span[8]) {
    uint64_t w[4];
    memcpy(w, src_key, 24);
    memcpy(&w[3], dest_span, 8);
    uint64_t h = mst_mum(w[0] ^ 0xa0761d6478bd642full, w[1] ^ 0xe7037ed1a0b428dbull);
    h = mst_mum(h ^ w[2] ^ 0x8ebc6af09c88c6e3ull, w[3] ^ 0x589965cc75374cc3ull);
    h = mst_mum(h ^ 0x1d8e4e27c47d124full, h ^ w[3] ^ 0xeb44accab455d165ull);
    return h ? h : 1; /* 0 reads as "no id" in some viewers */
}

/* One s/f flow pair: source = the linked span, dest = the linking span.
 * Room is reserved once; everything written is plain ASCII. The id and
 * the link text ("<srcTrace>:<srcSpan>:<destSpan>") are written into the
 * first event and copied from there into the second. */
/* The common head of a request.link flow event, up to the opening quote
 * of its "id" value: `ph` is 's' (start) or 'f' (finish). */
static char *flow_event_head(char *o, char ph, int64_t ts, int64_t pid, int64_t tid) {
    o = CLIT(o, ",{\"name\":\"request.link\",\"cat\":\"Tracing.Flow\",\"ph\":\"");
    *o++ = ph;
    o = CLIT(o, "\",\"ts\":");
    o = cur_ts(o, ts);
    o = CLIT(o, ",\"pid\":");
    o = cur_i64(o, pid);
    o = CLIT(o, ",\"tid\":");
    o = cur_i64(o, tid);
    return CLIT(o, ",\"id\":\"");
}

static void emit_flow(mst_chrome_writer *w, const uint8_t src_key[24], int64_t spid, int64_t stid,
                      int64_t sts, const uint8_t dest_span[8], int64_t dpid, int64_t dtid,
                      int64_t dts) {
    mst_buf *b = w->buf;
    if (!mst_buf_reserve(b, FLOW_NEED)) return;
    char *o = cur_of(b);
    o = flow_event_head(o, 's', sts, spid, stid);
    o = CLIT(o, "0x");
    const char *id = o - 2;
    hex16_text(flow_id64(src_key, dest_span), o);
    o += 16;
    o = CLIT(o, "\",\"args\":{\"source.span_id\":\"");
    hex_bytes8(src_key + 16, o);
    o += 16;
    o = CLIT(o, "\",\"link\":\"");
    const char *link = o;
    hex_bytes8(src_key, o);
    hex_bytes8(src_key + 8, o + 16);
    o[32] = ':';
    memcpy(o + 33, link - 26, 16); /* the source span id, just written */
    o[49] = ':';
    hex_bytes8(dest_span, o + 50);
    o += 66;
    o = CLIT(o, "\"}}");
    o = flow_event_head(o, 'f', dts, dpid, dtid);
    o = cur_mem(o, id, 18);
    o = CLIT(o, "\",\"bp\":\"e\",\"args\":{\"link\":\"");
    o = cur_mem(o, link, 66);
    o = CLIT(o, "\"}}");
    cur_done(b, o);
    w->buffered_flows++;
}

/* Room a span event needs besides its strings: literals (~230 bytes),
 * six numbers with their copy slack, three ids, the default service name. */
#define SPAN_FIXED 768
/* Per attribute: quotes, ':' and ','; per resource entry also "resource.". */
#define ATTR_EXTRA 4
#define RES_EXTRA 13

/* Room for the whole event, assuming plain strings (raw_str re-reserves
 * after escaping one); values are validated raw JSON copied verbatim. */
static size_t span_need(const mst_pf_span *s, const mst_json_slice *service) {
    size_t need = SPAN_FIXED + (s->name.ptr ? s->name.len : 0) +
                  (s->category.ptr ? s->category.len : 0) + (service ? service->len : 0);
    for (size_t i = 0; i < s->n_attrs; i++)
        need += s->attrs[i].key.len + s->attrs[i].value.len + ATTR_EXTRA;
    for (size_t i = 0; i < s->n_resource; i++)
        need += s->resource[i].key.len + s->resource[i].value.len + RES_EXTRA;
    return need;
}

/* ,"resource.<key>":<value> — the rare escaped key is joined in scratch
 * and escaped whole, as before (the prefix is plain, so the text is the
 * same either way). */
static bool emit_resource_kv(mst_chrome_writer *w, const mst_pf_kv *kv, size_t need) {
    mst_buf *b = w->buf;
    if (mst_json_plain_prefix((const uint8_t *)kv->key.ptr, kv->key.len) == kv->key.len) {
        RLIT(b, ",\"resource.");
        raw(b, kv->key.ptr, kv->key.len);
        RLIT(b, "\":");
    } else {
        mst_buf_reset(&w->scratch);
        LIT(&w->scratch, "resource.");
        mst_buf_append(&w->scratch, kv->key.ptr, kv->key.len);
        if (w->scratch.failed) {
            b->failed = true;
            return false;
        }
        RLIT(b, ",");
        if (!raw_str(b, (const char *)w->scratch.data, w->scratch.len, need)) return false;
        RLIT(b, ":");
    }
    raw(b, kv->value.ptr, kv->value.len);
    return true;
}

/* ,"bind_id":"0x<16 hex>","flow_in"|"flow_out":true — a flow (version 2
 * of the format: ids on the slices themselves) joining a step slice to a
 * span's slice. Why not an s/f pair: a reader counting "f" events counts
 * the span links (mstrace analyze's `flows`); and the span's end of it
 * must be written with the span, before its step may be known. */
static char *cur_bind_flow(char *o, uint64_t id, bool out) {
    o = CLIT(o, ",\"bind_id\":\"0x");
    hex16_text(id, o);
    o += 16;
    if (out) return CLIT(o, "\",\"flow_out\":true");
    return CLIT(o, "\",\"flow_in\":true");
}

/* Room for a bind: the literals and the id, with the hex writer's slack. */
#define BIND_NEED 64

static void bind_flow(mst_buf *b, uint64_t id, bool out) {
    if (mst_buf_reserve(b, BIND_NEED)) cur_done(b, cur_bind_flow(cur_of(b), id, out));
}

/* The span's X event through the checked appenders (any span: strings
 * escaped where needed). `bind`: the flow joining the span to its engine
 * step (0: none). */
static void emit_span_checked(mst_chrome_writer *w, const mst_pf_span *s, int64_t pid,
                              int64_t tid, const mst_json_slice *service, uint64_t bind) {
    mst_buf *b = w->buf;
    size_t need = span_need(s, service);
    if (!mst_buf_reserve(b, need)) return;
    /* Fixed keys are literals (nothing to escape); strings go through
     * raw_str (plain ones are one copy); room was reserved above. */
    RLIT(b, ",{\"name\":");
    if (!raw_str(b, s->name.ptr ? s->name.ptr : "", s->name.ptr ? s->name.len : 0, need)) return;
    RLIT(b, ",\"cat\":");
    if (s->category.ptr) {
        if (!raw_str(b, s->category.ptr, s->category.len, need)) return;
    } else {
        RLIT(b, "\"Tracing\"");
    }
    RLIT(b, ",\"ph\":\"X\",\"ts\":");
    raw_ts(b, s->start_ns);
    RLIT(b, ",\"dur\":");
    raw_us(b, false, s->end_ns > s->start_ns ? (uint64_t)s->end_ns - (uint64_t)s->start_ns : 0);
    RLIT(b, ",\"pid\":");
    raw_i64(b, pid);
    RLIT(b, ",\"tid\":");
    raw_i64(b, tid);
    RLIT(b, ",\"args\":{");
    bool any_resource_prefixed = false;
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_pf_kv *kv = &s->attrs[i];
        if (kv->key.len > 9 && memcmp(kv->key.ptr, "resource.", 9) == 0)
            any_resource_prefixed = true;
        if (mst_span_arg_is_fixed(&kv->key)) continue;
        if (!raw_str(b, kv->key.ptr, kv->key.len, need)) return;
        RLIT(b, ":");
        raw(b, kv->value.ptr, kv->value.len);
        RLIT(b, ",");
    }
    RLIT(b, "\"trace_id\":");
    if (!raw_id(b, s->trace_id, 32, need)) return;
    RLIT(b, ",\"span_id\":");
    if (!raw_id(b, s->span_id, 16, need)) return;
    RLIT(b, ",\"parent_span_id\":");
    if (!raw_id(b, s->parent_span_id, 16, need)) return;
    RLIT(b, ",\"span.kind\":");
    raw_i64(b, s->kind);
    RLIT(b, ",\"span.status\":");
    raw_i64(b, s->status);
    RLIT(b, ",\"service.name\":");
    if (service) raw(b, service->ptr, service->len);
    else RLIT(b, "\"" DEFAULT_SERVICE_NAME "\"");
    for (size_t i = 0; i < s->n_resource; i++) {
        const mst_pf_kv *kv = &s->resource[i];
        if (any_resource_prefixed && mst_span_attr_shadows(s, &kv->key)) continue;
        if (!emit_resource_kv(w, kv, need)) return;
    }
    RLIT(b, "}");
    if (bind) bind_flow(b, bind, false);
    LIT(b, "}");
    w->buffered_spans++;
}

/* '"', the run of attributes [run, end) (from a key's content to a
 * value's end, cur_plain_attrs) and ','. */
static char *cur_plain_run(char *o, const char *run, const char *end) {
    size_t n = (size_t)(end - run);
    o[0] = '"';
    memcpy(o + 1, run, n);
    o[n + 1] = ',';
    return o + n + 2;
}

/* The args of a span whose keys are plain (mst_pf_span.plain_text), each
 * "<key>":<value>, then ','; *any_resource_prefixed tells whether an
 * attribute key starts with "resource." (mst_span_attr_shadows then
 * applies). Attributes that lie back to back in the packet ("k1":v1,"k2":v2
 * — the key's content 2 bytes before its value and 2 after the previous
 * value: only the quote and ':' or ',' and the quote fit in between, so
 * the bytes are exactly those of the output) are copied as one run. Why:
 * a key is ~12 bytes and a value ~8, so three copies and a check per
 * attribute were most of an attribute's cost. */
static char *cur_plain_attrs(char *o, const mst_pf_span *s, bool *any_resource_prefixed) {
    const char *run = NULL, *run_end = NULL; /* pending run: its text from the first key */
    for (size_t i = 0; i < s->n_attrs; i++) {
        const mst_pf_kv *kv = &s->attrs[i];
        if (kv->key.len > 9 && memcmp(kv->key.ptr, "resource.", 9) == 0)
            *any_resource_prefixed = true;
        if (mst_span_arg_is_fixed(&kv->key)) continue;
        const char *k = kv->key.ptr, *v = kv->value.ptr;
        bool own = v == k + kv->key.len + 2; /* "<key>":<value> in place */
        if (run && own && k == run_end + 2) {
            run_end = v + kv->value.len;
            continue;
        }
        if (run) {
            o = cur_plain_run(o, run, run_end);
            run = NULL;
        }
        if (own) {
            run = k;
            run_end = v + kv->value.len;
            continue;
        }
        o = cur_plain_str(o, k, kv->key.len);
        *o++ = ':';
        o = cur_mem(o, v, kv->value.len);
        *o++ = ',';
    }
    return run ? cur_plain_run(o, run, run_end) : o;
}

/* The X event of a span the decoder marked plain_text (the usual one):
 * the same bytes as emit_span_checked, with no string checked again and
 * every piece written through one cursor. */
static void emit_span_plain(mst_chrome_writer *w, const mst_pf_span *s, int64_t pid, int64_t tid,
                            const mst_json_slice *service, uint64_t bind) {
    mst_buf *b = w->buf;
    if (!mst_buf_reserve(b, span_need(s, service))) return;
    char *o = cur_of(b);
    o = CLIT(o, ",{\"name\":");
    o = cur_plain_str(o, s->name.ptr, s->name.len);
    o = CLIT(o, ",\"cat\":");
    o = cur_plain_str(o, s->category.ptr, s->category.len);
    o = CLIT(o, ",\"ph\":\"X\",\"ts\":");
    o = cur_ts(o, s->start_ns);
    o = CLIT(o, ",\"dur\":");
    o = cur_us(o, false, s->end_ns > s->start_ns ? (uint64_t)s->end_ns - (uint64_t)s->start_ns : 0);
    o = CLIT(o, ",\"pid\":");
    o = cur_i64(o, pid);
    o = CLIT(o, ",\"tid\":");
    o = cur_i64(o, tid);
    o = CLIT(o, ",\"args\":{");
    bool any_resource_prefixed = false;
    o = cur_plain_attrs(o, s, &any_resource_prefixed);
    o = CLIT(o, "\"trace_id\":");
    o = cur_decoded_id(o, s->trace_id, 32);
    o = CLIT(o, ",\"span_id\":");
    o = cur_decoded_id(o, s->span_id, 16);
    o = CLIT(o, ",\"parent_span_id\":");
    o = cur_decoded_id(o, s->parent_span_id, 16);
    o = CLIT(o, ",\"span.kind\":");
    o = cur_i64(o, s->kind);
    o = CLIT(o, ",\"span.status\":");
    o = cur_i64(o, s->status);
    o = CLIT(o, ",\"service.name\":");
    if (service) o = cur_mem(o, service->ptr, service->len);
    else o = CLIT(o, "\"" DEFAULT_SERVICE_NAME "\"");
    for (size_t i = 0; i < s->n_resource; i++) {
        const mst_pf_kv *kv = &s->resource[i];
        if (any_resource_prefixed && mst_span_attr_shadows(s, &kv->key)) continue;
        o = CLIT(o, ",\"resource.");
        o = cur_mem(o, kv->key.ptr, kv->key.len);
        o = CLIT(o, "\":");
        o = cur_mem(o, kv->value.ptr, kv->value.len);
    }
    *o++ = '}';
    if (bind) o = cur_bind_flow(o, bind, false);
    *o++ = '}';
    cur_done(b, o);
    w->buffered_spans++;
}

static void emit_span(mst_chrome_writer *w, const mst_pf_span *s, int64_t pid, int64_t tid,
                      const mst_json_slice *service, uint64_t bind) {
    if (s->plain_text) emit_span_plain(w, s, pid, tid, service, bind);
    else emit_span_checked(w, s, pid, tid, service, bind);
}

/* ---- timeline events (timeline.h): each request on a thread of its own
 * (REQUEST_TID + its lane) holding its vllm.request X event and its phases
 * as B/E events nested inside, markers as thread-scoped instants; each
 * engine step a "step N" B/E slice on the engine's STEPS_TID thread, with
 * flows to the worker's forward and the step's output processing;
 * counters as C events. B/E/i events are what `mstrace analyze` skips:
 * they derive from the spans, which stay X events. ---- */

#define STEPS_TID MST_TL_STEPS_TID

static int64_t request_tid(uint32_t lane) { return mst_tl_request_tid(lane); }

/* A B, E or instant event `name` on (pid, tid). */
static void thread_event(mst_buf *b, char ph, const char *name, size_t name_len, const char *cat,
                         int64_t pid, int64_t tid, int64_t ts) {
    LIT(b, ",{\"name\":");
    put_str(b, name, name_len);
    LIT(b, ",\"cat\":");
    put_str(b, cat, strlen(cat));
    LIT(b, ",\"ph\":\"");
    mst_buf_append_byte(b, (uint8_t)ph);
    LIT(b, "\",\"ts\":");
    if (mst_buf_reserve(b, EV_NUM)) raw_ts(b, ts);
    LIT(b, ",");
    append_int_member(b, "pid", pid);
    LIT(b, ",");
    append_int_member(b, "tid", tid);
    if (ph == 'i') LIT(b, ",\"s\":\"t\"");
}

/* thread_name (text escaped here) and thread_sort_index M events. */
static void name_thread(mst_buf *b, int64_t pid, int64_t tid, const char *name, size_t n,
                        int64_t sort_index) {
    LIT(b, ",{\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,");
    append_int_member(b, "pid", pid);
    LIT(b, ",");
    append_int_member(b, "tid", tid);
    LIT(b, ",\"args\":{\"name\":");
    put_str(b, name, n);
    LIT(b, "}},{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"ts\":0,");
    append_int_member(b, "pid", pid);
    LIT(b, ",");
    append_int_member(b, "tid", tid);
    LIT(b, ",\"args\":{\"sort_index\":");
    put_i64(b, sort_index);
    LIT(b, "}}");
}

#define REQUEST_CAT "mstrace.request"
#define STEP_CAT "mstrace.step"

static void tl_request(void *self, const mst_tl_request *r) {
    mst_chrome_writer *w = self;
    mst_buf *b = w->buf;
    int64_t tid = request_tid(r->lane);
    int64_t rank = mst_timeline_arrival_rank(w->tl, r->start_ns);
    name_thread(b, r->pid, tid, r->id, r->id_len, rank);
    if (!r->has_request_span) {
        /* no vllm.request span: an outer slice stands for the request */
        thread_event(b, 'B', "request", 7, REQUEST_CAT, r->pid, tid, r->start_ns);
        LIT(b, ",\"args\":{");
        append_str_member(b, "request.id", r->id, r->id_len);
        LIT(b, "}}");
    }
    for (unsigned i = 0; i < r->n_phases; i++) {
        const mst_tl_phase *ph = &r->phases[i];
        size_t n = strlen(ph->name);
        if (ph->start_ns == ph->end_ns &&
            (strcmp(ph->name, "preemption") == 0 || strcmp(ph->name, "resume") == 0)) {
            thread_event(b, 'i', ph->name, n, REQUEST_CAT, r->pid, tid, ph->start_ns);
            LIT(b, "}");
            continue;
        }
        thread_event(b, 'B', ph->name, n, REQUEST_CAT, r->pid, tid, ph->start_ns);
        LIT(b, "}");
        thread_event(b, 'E', ph->name, n, REQUEST_CAT, r->pid, tid, ph->end_ns);
        LIT(b, "}");
    }
    if (!r->has_request_span) {
        thread_event(b, 'E', "request", 7, REQUEST_CAT, r->pid, tid, r->end_ns);
        LIT(b, ",\"args\":{");
        append_int_member(b, "request.steps", r->steps);
        if (r->preemptions) {
            LIT(b, ",");
            append_int_member(b, "request.preemptions", r->preemptions);
        }
        LIT(b, "}}");
    }
}

static void tl_step(void *self, const mst_tl_step *st) {
    mst_chrome_writer *w = self;
    mst_buf *b = w->buf;
    uint8_t key[24] = {0};
    key[0] = 3;
    memcpy(key + 8, &st->pid, 8);
    if (!mst_track_table_find(&w->names, key)) {
        bool ev;
        mst_track_table_insert(&w->names, key, &ev);
        name_thread(b, st->pid, STEPS_TID, "engine steps", 12, -1);
    }
    char name[32];
    int n = snprintf(name, sizeof name, "step %lld", (long long)st->index);
    thread_event(b, 'B', name, (size_t)n, STEP_CAT, st->pid, STEPS_TID, st->start_ns);
    LIT(b, ",\"args\":{");
    append_int_member(b, "step.index", st->index);
    if (st->requests >= 0) {
        LIT(b, ",");
        append_int_member(b, "batch.request_count", st->requests);
    }
    if (st->tokens >= 0) {
        LIT(b, ",");
        append_int_member(b, "batch.scheduled_tokens", st->tokens);
    }
    LIT(b, "}");
    bind_flow(b, st->worker_flow, true); /* to its worker forward */
    LIT(b, "}");
    /* its outputs, handed to the API server at its end: a zero-length
     * slice inside it (one flow per slice in this format) */
    thread_event(b, 'B', "outputs", 7, STEP_CAT, st->pid, STEPS_TID, st->end_ns);
    bind_flow(b, st->output_flow, true);
    LIT(b, "}");
    thread_event(b, 'E', "outputs", 7, STEP_CAT, st->pid, STEPS_TID, st->end_ns);
    LIT(b, "}");
    thread_event(b, 'E', name, (size_t)n, STEP_CAT, st->pid, STEPS_TID, st->end_ns);
    LIT(b, "}");
    w->buffered_flows += st->n_joined;
}

static void tl_counter(void *self, const mst_tl_counter *c) {
    mst_chrome_writer *w = self;
    mst_buf *b = w->buf;
    LIT(b, ",{\"name\":");
    const char *name = c->json_name ? c->json_name : c->name, *key = c->json_key ? c->json_key : "value";
    put_str(b, name, strlen(name));
    LIT(b, ",\"ph\":\"C\",\"ts\":");
    if (mst_buf_reserve(b, EV_NUM)) raw_ts(b, c->ts_ns);
    LIT(b, ",");
    append_int_member(b, "pid", c->pid);
    LIT(b, ",\"tid\":0,\"args\":{");
    put_str(b, key, strlen(key));
    LIT(b, ":");
    if (c->raw_len) mst_buf_append(b, c->raw, c->raw_len); /* validated JSON number text */
    else if (c->is_double) mst_buf_append_double(b, c->d);
    else put_i64(b, c->i);
    LIT(b, "}}");
}

static mst_tl_sink tl_sink(mst_chrome_writer *w) {
    return (mst_tl_sink){w, tl_request, tl_counter, tl_step};
}

mst_status mst_chrome_writer_add_span(mst_chrome_writer *w, const mst_pf_span *s) {
    if (!w || !s) return MST_ERR_INVALID_ARG;
    if (mst_tl_is_story_span(s)) {
        /* A request's story for Jaeger: its phases are drawn from the step
         * record instead. Counted as written (handled, nothing to add). */
        if (!mst_outq_buf(w->out)) return MST_ERR_NOMEM;
        mst_outq_added(w->out, 1, 0);
        return MST_OK;
    }
    if (mst_outq_unwritten(w->out) >= MAX_UNWRITTEN_BYTES &&
        !mst_outq_wait_room(w->out, MAX_UNWRITTEN_BYTES)) {
        w->full_dropped++; /* before any table change: as if never received */
        return MST_ERR_QUEUE_FULL;
    }
    if (!(w->buf = mst_outq_buf(w->out))) {
        MST_WARN("perfetto output: out of memory buffering a span; span dropped");
        return MST_ERR_NOMEM;
    }
    size_t mark = w->buf->len;
    w->buffered_spans = w->buffered_flows = 0;
    int64_t pid = s->has_pid ? s->pid : w->default_pid;
    int64_t tid = s->has_tid ? s->tid : 0;
    const mst_json_slice *service = mst_span_find_kv(s->resource, s->n_resource, "service.name");

    /* Table keys first, with prefetches: the position/pending tables are
     * megabytes of random accesses, mostly cache misses, which then overlap
     * the formatting of the span's events below. */
    uint8_t key[24];
    table_key(s->trace_id, s->span_id, key);
    mst_track_table_prefetch(&w->pos, key);
    mst_track_table_prefetch(&w->pend.groups, key);
    uint8_t link_keys[PREFETCH_LINKS][24];
    size_t n_drawn = mst_span_drawn_links(s); /* request links get no flow */
    size_t n_pre = n_drawn < PREFETCH_LINKS ? n_drawn : PREFETCH_LINKS;
    for (size_t l = 0; l < n_pre; l++) {
        table_key(s->links[l].trace_id, s->links[l].span_id, link_keys[l]);
        mst_track_table_prefetch(&w->pos, link_keys[l]);
        mst_track_table_prefetch(&w->pend.groups, link_keys[l]);
    }
    /* ... and those of the evictions the inserts below make (full tables) */
    mst_track_table_prefetch_victim(&w->pos);
    mst_pend_table_prefetch_victim(&w->pend, false);

    mst_tl_sink sink = tl_sink(w);
    /* A vllm.request span goes on its request's own thread (tl_request),
     * never beside the concurrent ones on the API server's thread. */
    uint32_t lane = mst_timeline_request_lane(w->tl, s, pid, &w->arena, &sink);
    if (lane) tid = request_tid(lane);
    maybe_name_process(w, pid, s, service);
    if (!lane && !thread_named(w, pid, tid)) {
        /* Threads are named by the span's thread.name, else by the role
         * (looked up only for a thread not named yet). */
        const mst_json_slice *tn = mst_span_find_kv(s->attrs, s->n_attrs, "thread.name");
        maybe_name(w, pid, tid, true,
                   is_string(tn) ? tn : mst_span_find_kv(s->attrs, s->n_attrs, "process.role"));
    }
    /* A worker forward or output processing ends its step's flow: the id
     * the step took or will take (mst_tl_step.worker_flow / output_flow). */
    mst_tl_pos at = {pid, tid, s->start_ns, mst_tl_span_flow_id(s->trace_id, s->span_id)}, step;
    uint64_t bind = mst_timeline_join_step(w->tl, s, &at, &step) ? step.flow
                    : mst_timeline_joins_step(s)                  ? at.flow
                                                                  : 0;
    emit_span(w, s, pid, tid, service, bind);
    mst_pend_table_prefetch_victim(&w->pend, true);

    bool ev;
    uint32_t i = mst_track_table_find(&w->pos, key);
    if (!i) {
        i = mst_track_table_insert(&w->pos, key, &ev);
        if (ev) w->st.positions_evicted++;
    }
    mst_track_entry *p = &w->pos.e[i - 1];
    p->pid = pid;
    p->tid = tid;
    p->ts_ns = s->start_ns;

    /* Links that were waiting for this span, oldest first. */
    uint32_t g = mst_track_table_find(&w->pend.groups, key);
    while (g) {
        uint32_t j = w->pend.groups.e[g - 1].first;
        const mst_pend_dest *x = &w->pend.d[j - 1];
        emit_flow(w, key, pid, tid, s->start_ns, x->span, x->pid, x->tid, x->ts_ns);
        bool last = w->pend.groups.e[g - 1].last == j;
        mst_pend_table_remove(&w->pend, j); /* removes the group with its last entry */
        if (last) break;
    }

    uint8_t self_span[8];
    memcpy(self_span, key + 16, 8);
    for (size_t l = 0; l < n_drawn; l++) {
        uint8_t src[24];
        if (l < n_pre) memcpy(src, link_keys[l], 24);
        else table_key(s->links[l].trace_id, s->links[l].span_id, src);
        uint32_t k = mst_track_table_find(&w->pos, src);
        if (k) {
            const mst_track_entry *sp = &w->pos.e[k - 1];
            emit_flow(w, src, sp->pid, sp->tid, sp->ts_ns, self_span, pid, tid, s->start_ns);
            continue;
        }
        mst_pend_dest *x = mst_pend_table_add(&w->pend, src, &ev);
        if (ev) w->st.pending_evicted++;
        x->pid = pid;
        x->tid = tid;
        x->ts_ns = s->start_ns;
        memcpy(x->span, self_span, 8);
    }
    w->st.flows_pending = w->pend.count;

    mst_timeline_add_span(w->tl, s, pid, &w->arena, &sink);
    mst_arena_reset_keep(&w->arena, 16u * 1024u);

    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
        MST_WARN("perfetto output: out of memory buffering a span; span dropped");
        return MST_ERR_NOMEM;
    }
    mst_outq_added(w->out, w->buffered_spans, w->buffered_flows);
    return MST_OK;
}

/* Appends timeline events produced outside add_span (forwarder counters,
 * requests completed at the end). */
static void add_timeline_events(mst_chrome_writer *w, bool finish, int64_t pid, int64_t ts,
                                const uint64_t own[3]) {
    if (!(w->buf = mst_outq_buf(w->out))) return;
    size_t mark = w->buf->len;
    mst_tl_sink sink = tl_sink(w);
    if (finish) mst_timeline_finish_all(w->tl, &sink);
    if (own) {
        uint8_t key[24] = {0};
        key[0] = 1;
        memcpy(key + 8, &pid, 8);
        if (!mst_track_table_find(&w->names, key)) {
            bool ev;
            mst_track_table_insert(&w->names, key, &ev);
            static const char fwd_name[] = "\"mstrace forward\"";
            mst_json_slice name = {fwd_name, sizeof fwd_name - 1};
            emit_name(w, pid, 0, false, &name);
        }
        mst_timeline_forwarder_counters(w->tl, pid, ts, own[0], own[1], own[2], &sink);
    }
    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
        return;
    }
    mst_outq_added(w->out, 0, 0);
}

int mst_chrome_writer_tick(mst_chrome_writer *w, uint64_t now_ms) {
    if (!w || !(w->buf = mst_outq_buf(w->out))) return 0;
    size_t mark = w->buf->len;
    mst_tl_sink sink = tl_sink(w);
    mst_timeline_tick(w->tl, now_ms, &sink);
    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
    } else if (w->buf->len != mark) {
        mst_outq_added(w->out, 0, 0);
    }
    return mst_timeline_open_requests(w->tl) ? 1 : 0;
}

void mst_chrome_writer_add_forwarder_counters(mst_chrome_writer *w, int64_t ts_ns,
                                              uint64_t received, uint64_t written,
                                              uint64_t dropped) {
    if (!w) return;
    const uint64_t own[3] = {received, written, dropped};
    add_timeline_events(w, false, (int64_t)getpid(), ts_ns, own);
}

void mst_chrome_writer_add_counter(mst_chrome_writer *w, const mst_tl_counter *c) {
    if (!w || !c || !(w->buf = mst_outq_buf(w->out))) return;
    size_t mark = w->buf->len;
    tl_counter(w, c);
    if (w->buf->failed) {
        w->buf->len = mark;
        w->buf->failed = false;
        return;
    }
    mst_outq_added(w->out, 0, 0);
}

mst_status mst_chrome_writer_flush_final(mst_chrome_writer *w) {
    if (!w) return MST_ERR_INVALID_ARG;
    add_timeline_events(w, true, 0, 0, NULL);
    return mst_outq_flush(w->out);
}

int mst_chrome_writer_handoff(mst_chrome_writer *w) {
    return w ? mst_outq_handoff(w->out) : 0;
}

mst_status mst_chrome_writer_flush(mst_chrome_writer *w) {
    if (!w) return MST_ERR_INVALID_ARG;
    return mst_outq_flush(w->out);
}

void mst_chrome_stats_add_outq(mst_chrome_stats *out, const struct mst_outq_stats *os,
                               uint64_t full_dropped) {
    out->bytes_written = os->bytes_written;
    out->spans_written = os->spans_written;
    out->flows_written = os->flows_written;
    out->write_errors = os->write_errors;
    out->spans_dropped = full_dropped + os->spans_dropped;
    out->write_waits = os->waits;
}

void mst_chrome_writer_get_stats(const mst_chrome_writer *w, mst_chrome_stats *out) {
    if (!out) return;
    if (!w) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = w->st;
    out->flows_pending = w->pend.count;
    mst_outq_stats os;
    mst_outq_get_stats(w->out, &os);
    mst_chrome_stats_add_outq(out, &os, w->full_dropped);
}

void mst_chrome_writer_get_disk_stats(const mst_chrome_writer *w, mst_outq_stats *out) {
    mst_outq_get_stats(w->out, out);
}

static void writer_free(mst_chrome_writer *w) {
    mst_track_table_free(&w->pos);
    mst_pend_table_free(&w->pend);
    mst_track_table_free(&w->names);
    mst_buf_free(&w->scratch);
    mst_timeline_free(w->tl);
    mst_arena_release(&w->arena);
    free(w);
}

/* pwrite of all n bytes at off, retrying EINTR and short writes. */
static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off) {
    while (n) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (k == 0) return EIO;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* The table bound of writers opened from now on; only tests lower it. */
static _Atomic uint32_t g_max_tracked = MST_CHROME_MAX_TRACKED;

void mst_chrome_writer_set_max_tracked(uint32_t n) {
    atomic_store(&g_max_tracked, n ? n : MST_CHROME_MAX_TRACKED);
}

mst_status mst_chrome_writer_open(const char *path, int64_t default_pid,
                                  mst_chrome_writer **out, char *err, size_t err_size) {
    if (!out) return MST_ERR_INVALID_ARG;
    *out = NULL;
    int fd;
    mst_status st = mst_output_path_open(path, &fd, err, err_size);
    if (st != MST_OK) return st;
    mst_chrome_writer *w = calloc(1, sizeof *w);
    uint32_t bound = atomic_load(&g_max_tracked);
    if (w) mst_arena_init(&w->arena);
    if (!w || !mst_track_table_init(&w->pos, bound) || !mst_pend_table_init(&w->pend, bound) ||
        !mst_track_table_init(&w->names, bound) || !(w->tl = mst_timeline_new(MST_TL_MAX_REQUESTS))) {
        if (w) writer_free(w);
        close(fd);
        if (err && err_size) snprintf(err, err_size, "out of memory opening the Chrome Trace writer");
        return MST_ERR_NOMEM;
    }
    w->fd = fd;
    w->default_pid = default_pid;
    mst_buf_init(&w->scratch, 0);
    int e = pwrite_all(fd, (const uint8_t *)"[]", 2, 0);
    if (e) {
        if (err && err_size) snprintf(err, err_size, "cannot write %s: %s", path, strerror(e));
        close(fd);
        writer_free(w);
        return MST_ERR_IO;
    }
    if (mst_outq_start(fd, 1, 2, &w->out) != MST_OK) {
        if (err && err_size) snprintf(err, err_size, "cannot start the Chrome Trace writer thread");
        close(fd);
        writer_free(w);
        return MST_ERR_NOMEM;
    }
    *out = w;
    return MST_OK;
}

mst_status mst_chrome_writer_close_final(mst_chrome_writer *w, mst_chrome_stats *final) {
    if (!w) return MST_ERR_INVALID_ARG;
    add_timeline_events(w, true, 0, 0, NULL);
    mst_outq_stats os;
    mst_status st = mst_outq_stop(w->out, &os);
    if (final) {
        *final = w->st;
        final->flows_pending = w->pend.count;
        mst_chrome_stats_add_outq(final, &os, w->full_dropped);
    }
    if (close(w->fd) != 0 && st == MST_OK) st = MST_ERR_IO;
    writer_free(w);
    return st;
}

mst_status mst_chrome_writer_close(mst_chrome_writer *w) {
    return mst_chrome_writer_close_final(w, NULL);
}
