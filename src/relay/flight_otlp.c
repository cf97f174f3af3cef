/*
 * flight_otlp.c — kept requests' spans as OTLP to a collector
 * (flight_otlp.h). A decoded span's attribute values are validated JSON
 * text; each becomes an OTLP AnyValue: strings, integers, doubles and
 * booleans typed, arrays as ArrayValue, objects as KeyValueList, null as an
 * empty AnyValue. The payload goes through the relay's strict decoder on
 * the way into its queue, so a malformed encoding is rejected and counted,
 * never sent.
 */
#include "relay/flight_otlp.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relay/otlp_relay.h"
#include "forward/timeline.h"
#include "wire/json_reader.h"
#include "wire/pb_writer.h"

/* opentelemetry-proto field numbers (trace.proto, common.proto, resource.proto). */
enum {
    REQ_RESOURCE_SPANS = 1,
    RS_RESOURCE = 1, RS_SCOPE_SPANS = 2,
    RES_ATTRIBUTES = 1,
    SS_SCOPE = 1, SS_SPANS = 2,
    SCOPE_NAME = 1,
    SPAN_TRACE_ID = 1, SPAN_SPAN_ID = 2, SPAN_PARENT = 4, SPAN_NAME = 5, SPAN_KIND = 6,
    SPAN_START = 7, SPAN_END = 8, SPAN_ATTRIBUTES = 9, SPAN_LINKS = 13, SPAN_STATUS = 15,
    LINK_TRACE_ID = 1, LINK_SPAN_ID = 2,
    STATUS_CODE = 3,
    KV_KEY = 1, KV_VALUE = 2,
    AV_STRING = 1, AV_BOOL = 2, AV_INT = 3, AV_DOUBLE = 4, AV_ARRAY = 5, AV_KVLIST = 6,
    LIST_VALUES = 1
};

static bool put_value(mst_buf *b, mst_json_reader *r, mst_arena *arena);

/* The members of a JSON object as KeyValue fields `field`. */
static bool put_members(mst_buf *b, uint32_t field, mst_json_reader *r, mst_arena *arena) {
    if (!mst_json_object_begin(r)) return false;
    int more;
    while ((more = mst_json_object_next(r)) == 1) {
        mst_str key;
        if (!mst_json_read_key_slice(r, arena, &key)) return false;
        mst_pb_mark kv = mst_pb_begin(b, field, 1);
        mst_pb_field_string(b, KV_KEY, key.ptr, key.len);
        mst_pb_mark v = mst_pb_begin(b, KV_VALUE, 1);
        bool ok = put_value(b, r, arena);
        mst_pb_end(b, v);
        mst_pb_end(b, kv);
        if (!ok) return false;
    }
    return more == 0;
}

/* One JSON value as the fields of an AnyValue (the caller opened it). */
static bool put_value(mst_buf *b, mst_json_reader *r, mst_arena *arena) {
    mst_json_slice raw;
    switch (mst_json_peek(r)) {
    case MST_JSON_STRING: {
        mst_str s;
        if (!mst_json_read_str_slice(r, arena, &s)) return false;
        mst_pb_field_string(b, AV_STRING, s.ptr, s.len);
        return true;
    }
    case MST_JSON_NUMBER: {
        if (!mst_json_read_raw(r, &raw)) return false;
        bool is_double = false;
        int64_t i = 0;
        double d = 0;
        if (!mst_tl_json_number(&raw, &is_double, &i, &d)) {
            mst_pb_field_string(b, AV_STRING, raw.ptr, raw.len); /* out of range: its text */
        } else if (is_double) {
            mst_pb_field_double(b, AV_DOUBLE, d);
        } else {
            mst_pb_field_varint(b, AV_INT, (uint64_t)i);
        }
        return true;
    }
    case MST_JSON_TRUE:
    case MST_JSON_FALSE:
        if (!mst_json_read_raw(r, &raw)) return false;
        mst_pb_field_varint(b, AV_BOOL, raw.ptr[0] == 't');
        return true;
    case MST_JSON_NULL:
        return mst_json_read_raw(r, &raw);
    case MST_JSON_ARRAY: {
        if (!mst_json_array_begin(r)) return false;
        mst_pb_mark list = mst_pb_begin(b, AV_ARRAY, 2);
        int more;
        bool ok = true;
        while (ok && (more = mst_json_array_next(r)) == 1) {
            mst_pb_mark v = mst_pb_begin(b, LIST_VALUES, 1);
            ok = put_value(b, r, arena);
            mst_pb_end(b, v);
        }
        mst_pb_end(b, list);
        return ok && more == 0;
    }
    case MST_JSON_OBJECT: {
        mst_pb_mark list = mst_pb_begin(b, AV_KVLIST, 2);
        bool ok = put_members(b, LIST_VALUES, r, arena);
        mst_pb_end(b, list);
        return ok;
    }
    default:
        return false;
    }
}

/* key = the validated JSON text v, as a KeyValue field `field`. */
static bool put_kv(mst_buf *b, uint32_t field, const mst_pf_kv *kv, mst_arena *arena) {
    mst_json_reader r;
    mst_json_reader_init(&r, kv->value.ptr, kv->value.len, MST_PF_MAX_DEPTH + 1);
    mst_pb_mark m = mst_pb_begin(b, field, 2);
    mst_pb_field_string(b, KV_KEY, kv->key.ptr, kv->key.len);
    mst_pb_mark v = mst_pb_begin(b, KV_VALUE, 1);
    bool ok = put_value(b, &r, arena);
    mst_pb_end(b, v);
    mst_pb_end(b, m);
    return ok;
}

/* An integer span attribute (KeyValue field of the span). */
static void put_int_attr(mst_buf *b, const char *key, int64_t value) {
    mst_pb_mark kv = mst_pb_begin(b, SPAN_ATTRIBUTES, 1);
    mst_pb_field_string(b, KV_KEY, key, strlen(key));
    mst_pb_mark v = mst_pb_begin(b, KV_VALUE, 1);
    mst_pb_field_varint(b, AV_INT, (uint64_t)value);
    mst_pb_end(b, v);
    mst_pb_end(b, kv);
}

static void hex_bytes(const char *hex, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = hex[2 * i + k];
            v = v << 4 | (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        out[i] = (uint8_t)v;
    }
}

mst_status mst_flight_otlp_encode(const mst_pf_span *s, mst_arena *arena, mst_buf *out) {
    bool ok = true;
    mst_pb_mark rs = mst_pb_begin(out, REQ_RESOURCE_SPANS, 3);
    mst_pb_mark res = mst_pb_begin(out, RS_RESOURCE, 2);
    for (size_t i = 0; i < s->n_resource && ok; i++) ok = put_kv(out, RES_ATTRIBUTES, &s->resource[i], arena);
    mst_pb_end(out, res);
    mst_pb_mark ss = mst_pb_begin(out, RS_SCOPE_SPANS, 3);
    mst_pb_mark scope = mst_pb_begin(out, SS_SCOPE, 1);
    mst_pb_field_string(out, SCOPE_NAME, s->category.ptr, s->category.len);
    mst_pb_end(out, scope);
    mst_pb_mark sp = mst_pb_begin(out, SS_SPANS, 3);
    uint8_t id[16];
    hex_bytes(s->trace_id, id, 16);
    mst_pb_field_id(out, SPAN_TRACE_ID, id, 16);
    hex_bytes(s->span_id, id, 8);
    mst_pb_field_id(out, SPAN_SPAN_ID, id, 8);
    if (s->parent_span_id[0]) {
        hex_bytes(s->parent_span_id, id, 8);
        mst_pb_field_id(out, SPAN_PARENT, id, 8);
    }
    mst_pb_field_string(out, SPAN_NAME, s->name.ptr, s->name.len);
    if (s->kind > 0 && s->kind <= 5) mst_pb_field_varint(out, SPAN_KIND, (uint64_t)s->kind);
    mst_pb_field_fixed64(out, SPAN_START, (uint64_t)s->start_ns);
    mst_pb_field_fixed64(out, SPAN_END, (uint64_t)s->end_ns);
    /* process.pid / thread.id were taken out of the attributes by the
     * decoder; Jaeger shows them as tags, as the traced process sent them. */
    if (s->has_pid) put_int_attr(out, "process.pid", s->pid);
    if (s->has_tid) put_int_attr(out, "thread.id", s->tid);
    for (size_t i = 0; i < s->n_attrs && ok; i++) ok = put_kv(out, SPAN_ATTRIBUTES, &s->attrs[i], arena);
    for (size_t i = 0; i < s->n_links; i++) {
        mst_pb_mark l = mst_pb_begin(out, SPAN_LINKS, 1);
        hex_bytes(s->links[i].trace_id, id, 16);
        mst_pb_field_id(out, LINK_TRACE_ID, id, 16);
        hex_bytes(s->links[i].span_id, id, 8);
        mst_pb_field_id(out, LINK_SPAN_ID, id, 8);
        mst_pb_end(out, l);
    }
    if (s->status > 0 && s->status <= 2) {
        mst_pb_mark st = mst_pb_begin(out, SPAN_STATUS, 1);
        mst_pb_field_varint(out, STATUS_CODE, (uint64_t)s->status);
        mst_pb_end(out, st);
    }
    mst_pb_end(out, sp);
    mst_pb_end(out, ss);
    mst_pb_end(out, rs);
    if (out->failed) return MST_ERR_NOMEM;
    return ok ? MST_OK : MST_ERR_PARSE;
}

/* ---- the output ---- */

typedef struct flight_otlp {
    mst_otlp_relay *relay;
    mst_daemon_service svc;
    mst_buf buf;
    mst_arena arena;
    uint64_t spans, encode_errors;
} flight_otlp;

static mst_status o_add_span(void *self, const mst_pf_span *s) {
    flight_otlp *o = self;
    mst_buf_reset(&o->buf);
    mst_status st = mst_flight_otlp_encode(s, &o->arena, &o->buf);
    mst_arena_reset_keep(&o->arena, 1 << 16);
    if (st != MST_OK) {
        o->encode_errors++;
        return st;
    }
    o->spans++;
    mst_otlp_relay_on_frame(o->relay, o->buf.data, o->buf.len, 0);
    return MST_OK;
}

static void o_add_counter(void *self, const mst_tl_counter *c) {
    (void)self;
    (void)c;
}
static void o_own_counters(void *self, int64_t ts, uint64_t a, uint64_t b, uint64_t c) {
    (void)self;
    (void)ts;
    (void)a;
    (void)b;
    (void)c;
}
static int o_tick(void *self, uint64_t now_ms) {
    (void)self;
    (void)now_ms;
    return 0;
}
static int o_handoff(void *self) {
    (void)self;
    return 0;
}
static mst_status o_finish(void *self) {
    (void)self;
    return MST_OK;
}

static void o_stats(const void *self, mst_chrome_stats *out) {
    const flight_otlp *o = self;
    mst_otlp_relay_stats rs;
    mst_otlp_relay_get_stats(o->relay, &rs);
    memset(out, 0, sizeof *out);
    out->spans_written = rs.spans_forwarded;
    out->spans_dropped = rs.spans_dropped + rs.spans_failed;
    out->write_errors = rs.send_errors;
}

static void o_describe(const void *self, char *buf, size_t size) {
    const flight_otlp *o = self;
    mst_otlp_relay_stats rs;
    mst_otlp_relay_get_stats(o->relay, &rs);
    size_t n = strlen(buf);
    snprintf(buf + n, size - n,
             " otlp: sent=%llu forwarded=%llu rejected=%llu dropped_full=%llu failed=%llu "
             "queued=%llu send_errors=%llu",
             (unsigned long long)o->spans, (unsigned long long)rs.spans_forwarded,
             (unsigned long long)(rs.rejected + o->encode_errors),
             (unsigned long long)rs.dropped_full, (unsigned long long)rs.failed,
             (unsigned long long)rs.queued, (unsigned long long)rs.send_errors);
}

static mst_status o_close(void *self, mst_chrome_stats *final) {
    flight_otlp *o = self;
    mst_status st = o->svc.close(o->svc.self); /* flushes the queue, bounded */
    if (final) o_stats(o, final);
    mst_otlp_relay_destroy(o->relay);
    mst_buf_free(&o->buf);
    mst_arena_release(&o->arena);
    free(o);
    return st;
}

static const mst_output_sink_ops OTLP_OPS = {
    .add_span = o_add_span,
    .add_counter = o_add_counter,
    .add_forwarder_counters = o_own_counters,
    .tick = o_tick,
    .handoff = o_handoff,
    .finish = o_finish,
    .get_stats = o_stats,
    .describe = o_describe,
    .close = o_close,
};

mst_status mst_flight_otlp_open(mst_output_sink *out, char *err, size_t err_size) {
    mst_otlp_config cfg;
    mst_status st = mst_otlp_relay_config_from_env(&cfg, err, err_size);
    if (st != MST_OK) return st;
    flight_otlp *o = calloc(1, sizeof *o);
    if (!o) return MST_ERR_NOMEM;
    mst_buf_init(&o->buf, 0);
    mst_arena_init(&o->arena);
    st = mst_otlp_relay_create(&cfg, NULL, &o->relay);
    if (st == MST_OK) {
        mst_otlp_relay_service(o->relay, &o->svc);
        /* The sender thread starts before the daemon blocks its signals
         * (they are read from a signalfd): it must not take them. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        st = o->svc.open(o->svc.self, err, err_size);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (st != MST_OK) o->svc.close(o->svc.self);
    }
    if (st != MST_OK) {
        mst_otlp_relay_destroy(o->relay);
        mst_buf_free(&o->buf);
        mst_arena_release(&o->arena);
        free(o);
        return st;
    }
    *out = (mst_output_sink){&OTLP_OPS, o};
    return MST_OK;
}
