/*
 * fuzz_id_streams.c — libFuzzer target for the forwarder's request id
 * streams (forward/id_streams.c, wire/ids_change.c): a sequence of packets
 * from a few connections, decoded into a span batch with the stream state
 * as the daemon does (span_batch.h), checked against a plain model of the
 * rules (id_streams.h):
 *   - a status other than OK is PARSE, TOO_LARGE or NOMEM with a message,
 *     and the batch is as before;
 *   - a keyframe's list is passed on as sent; a change applied gives the
 *     model's list exactly (the previous list as the model holds it, the
 *     positions removed, the joined ids appended), and only when the model
 *     holds the base with the sequence number before it; no base, no list;
 *   - the memory the table counts stays within its budget, and dropping
 *     every connection brings it back to 0 (ASan: nothing leaks);
 *   - a kept list's origin (mst_pf_span.ids_origin) says what was applied,
 *     and never changes the `.pftrace`: every span kept goes to one writer
 *     as it is and to another without its origin, and the two files get
 *     the same bytes after each input (connection ids are never reused,
 *     as the daemon's are not).
 * Input: records. Byte 0: bit 7 raw (else built), bits 0-1 connection,
 * bits 2-6 stream (0..31; 31 stands for one past the cap). Raw: byte 1 V2
 * when odd, then a 2-byte length and that much packet JSON. Built: byte 1
 * the sequence number: the model's last for that stream + byte - 1 (1:
 * the next one), byte 2 kind (even: keyframe, odd: change), then
 * n = byte 3 % 16 items, each one byte (an id "i<byte>", or for a change:
 * even bytes are left positions, odd ones joined ids).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "forward/id_streams.h"
#include "forward/pftrace_writer.h"
#include "forward/span_batch.h"
#include "wire/buf.h"
#include "wire/ids_change.h"
#include "wire/ids_sender.h"
#include "wire/json_reader.h"
#include "wire/perfetto_packet.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

#define CONNS 4
#define STREAMS 32
#define BUDGET (64u * 1024u)

/* The model: per connection and stream, the base's text ("[...]") and seq. */
typedef struct model {
    char *list[CONNS][STREAMS];
    int64_t seq[CONNS][STREAMS];
} model;

static uint32_t stream_no(unsigned bits) { return bits == 31 ? MST_IDS_MAX_STREAMS : bits; }

static const mst_pf_kv *find_ids(const mst_pf_span *sp) {
    for (size_t i = 0; i < sp->n_attrs; i++)
        if (sp->attrs[i].key.len == 11 && memcmp(sp->attrs[i].key.ptr, "request.ids", 11) == 0) return &sp->attrs[i];
    return NULL;
}

static void set_model(model *m, int c, int s, const char *p, size_t n, int64_t seq) {
    free(m->list[c][s]);
    m->list[c][s] = NULL;
    if (!p) return;
    m->list[c][s] = malloc(n + 1);
    memcpy(m->list[c][s], p, n);
    m->list[c][s][n] = 0;
    m->seq[c][s] = seq;
}

/* The model's rebuild: base items (JSON strings) without `left`, then
 * `joined`, rendered compact. NULL when the change does not apply. */
static char *model_apply(const char *base, const mst_ids_change *ch) {
    mst_json_reader r;
    mst_json_reader_init(&r, base, strlen(base), 4);
    mst_buf out;
    mst_buf_init(&out, 0);
    mst_buf_append_byte(&out, '[');
    REQUIRE(mst_json_array_begin(&r));
    uint32_t i = 0, k = 0, n = 0;
    for (;; i++) {
        int more = mst_json_array_next(&r);
        REQUIRE(more >= 0);
        if (!more) break;
        mst_json_slice item;
        REQUIRE(mst_json_read_raw(&r, &item));
        if (k < ch->n_left && ch->left[k] == i) {
            k++;
            continue;
        }
        if (n++) mst_buf_append_byte(&out, ',');
        mst_buf_append(&out, item.ptr, item.len);
    }
    if (k < ch->n_left) { /* a position past the list */
        mst_buf_free(&out);
        return NULL;
    }
    for (uint32_t j = 0; j < ch->n_joined; j++) {
        if (n++) mst_buf_append_byte(&out, ',');
        mst_buf_append(&out, ch->joined[j].ptr, ch->joined[j].len);
    }
    mst_buf_append_byte(&out, ']');
    mst_buf_append_byte(&out, 0);
    return (char *)out.data;
}

/* The two writers (opened once): [0] gets the spans as kept, [1] without
 * their origin; fds read what each appended. */
static mst_pftrace_writer *g_pw[2];
static int g_pw_fd[2] = {-1, -1};
static off_t g_pw_off[2];
static uint64_t g_conn_base; /* connection ids of this input: g_conn_base + 1 .. + CONNS */

static void writers_open(void) {
    if (g_pw[0]) return;
    for (int k = 0; k < 2; k++) {
        char path[64], err[256];
        snprintf(path, sizeof path, "/tmp/fuzz_id_streams_%d_%d.pftrace", (int)getpid(), k);
        REQUIRE(mst_pftrace_writer_open(path, 1, &g_pw[k], err, sizeof err) == MST_OK);
        REQUIRE(mst_pftrace_writer_flush(g_pw[k], false) == MST_OK);
        g_pw_fd[k] = open(path, O_RDONLY);
        REQUIRE(g_pw_fd[k] >= 0);
        unlink(path);
        g_pw_off[k] = lseek(g_pw_fd[k], 0, SEEK_END); /* past the clock snapshot (its time differs) */
    }
}

/* What the two writers appended since the last call: the same bytes. */
static void writers_compare(void) {
    static uint8_t a[1 << 16], b[1 << 16];
    for (int k = 0; k < 2; k++) REQUIRE(mst_pftrace_writer_flush(g_pw[k], false) == MST_OK);
    off_t end0 = lseek(g_pw_fd[0], 0, SEEK_END), end1 = lseek(g_pw_fd[1], 0, SEEK_END);
    REQUIRE(end0 - g_pw_off[0] == end1 - g_pw_off[1]);
    while (g_pw_off[0] < end0) {
        size_t n = (size_t)(end0 - g_pw_off[0]) < sizeof a ? (size_t)(end0 - g_pw_off[0]) : sizeof a;
        REQUIRE(pread(g_pw_fd[0], a, n, g_pw_off[0]) == (ssize_t)n);
        REQUIRE(pread(g_pw_fd[1], b, n, g_pw_off[1]) == (ssize_t)n);
        REQUIRE(memcmp(a, b, n) == 0);
        g_pw_off[0] += (off_t)n;
        g_pw_off[1] += (off_t)n;
    }
}

/* One packet through the batch, checked against the model. */
static void feed(mst_span_batch *sb, mst_id_streams *t, model *m, int c, const char *pkt, size_t len) {
    size_t before = mst_span_batch_count(sb);
    char err[256] = "";
    mst_ids_outcome out;
    /* What the model expects, from the packet as decoded on its own. */
    mst_arena a;
    mst_arena_init(&a);
    mst_pf_span dec;
    char derr[256];
    bool decoded = mst_perfetto_packet_decode((const uint8_t *)pkt, len, &a, &dec, derr, sizeof derr) == MST_OK;
    int s = decoded && dec.ids_fields && dec.ids_stream < STREAMS ? (int)dec.ids_stream : -1;
    bool in_cap = decoded && dec.ids_fields && dec.ids_stream < (int64_t)MST_IDS_MAX_STREAMS;
    char *expect = NULL;
    bool change_ok = false;
    if (decoded && dec.ids_change) {
        mst_ids_change ch;
        const mst_pf_kv *kv = &dec.attrs[dec.ids_attr];
        change_ok = mst_ids_change_parse(kv->value.ptr, kv->value.len, &a, &ch, NULL, 0) == MST_OK;
        if (change_ok && s >= 0 && in_cap && m->list[c][s] && m->seq[c][s] == dec.ids_seq - 1)
            expect = model_apply(m->list[c][s], &ch);
    }
    mst_status st = mst_span_batch_add(sb, t, g_conn_base + (uint64_t)c + 1, (const uint8_t *)pkt, len, &out, err,
                                       sizeof err);
    if (st != MST_OK) {
        REQUIRE(st == MST_ERR_PARSE || st == MST_ERR_TOO_LARGE || st == MST_ERR_NOMEM);
        REQUIRE(err[0] != '\0');
        REQUIRE(mst_span_batch_count(sb) == before);
        /* A change refused past the decoder (malformed, too large) costs the base. */
        if (decoded && dec.ids_change && s >= 0) set_model(m, c, s, NULL, 0, 0);
        free(expect);
        mst_arena_release(&a);
        return;
    }
    REQUIRE(decoded);
    const mst_pf_span *sp = mst_span_batch_span(sb, before);
    const mst_pf_kv *kv = find_ids(sp);
    const mst_pf_ids_origin *o = &sp->ids_origin;
    REQUIRE(o->valid == (out == MST_IDS_KEYFRAME || out == MST_IDS_CHANGE));
    if (o->valid)
        REQUIRE(o->conn == g_conn_base + (uint64_t)c + 1 && o->stream == dec.ids_stream && o->seq == dec.ids_seq &&
                o->change == (out == MST_IDS_CHANGE));
    if (o->valid && o->change) {
        REQUIRE(o->joined_from + o->n_left == o->n_base);
        for (uint32_t k = 0; k < o->n_left; k++) REQUIRE(o->left[k] < o->n_base && (!k || o->left[k - 1] < o->left[k]));
    }
    mst_pf_span plain = *sp;
    plain.ids_origin.valid = false;
    REQUIRE(mst_pftrace_writer_add_span(g_pw[0], sp) == MST_OK);
    REQUIRE(mst_pftrace_writer_add_span(g_pw[1], &plain) == MST_OK);
    switch (out) {
    case MST_IDS_NONE: REQUIRE(!dec.ids_fields); break;
    case MST_IDS_KEYFRAME:
        REQUIRE(!dec.ids_change && in_cap && kv);
        if (s >= 0) set_model(m, c, s, kv->value.ptr, kv->value.len, dec.ids_seq);
        break;
    case MST_IDS_NOT_KEPT:
        REQUIRE(!dec.ids_change && kv);
        if (s >= 0) set_model(m, c, s, NULL, 0, 0);
        break;
    case MST_IDS_CHANGE:
        REQUIRE(dec.ids_change && expect && kv);
        REQUIRE(kv->value.len == strlen(expect) && memcmp(kv->value.ptr, expect, kv->value.len) == 0);
        REQUIRE(mst_json_validate(kv->value.ptr, kv->value.len, 4, NULL, NULL));
        set_model(m, c, s, kv->value.ptr, kv->value.len, dec.ids_seq);
        break;
    case MST_IDS_NO_BASE:
        /* Without a base here — or the rebuilt list did not fit the budget. */
        REQUIRE(dec.ids_change && !kv && sp->n_attrs + 1 == dec.n_attrs);
        if (s >= 0) set_model(m, c, s, NULL, 0, 0);
        break;
    }
    free(expect);
    mst_id_streams_stats stt;
    mst_id_streams_get_stats(t, &stt);
    REQUIRE(stt.bytes <= BUDGET);
    mst_arena_release(&a);
}

static size_t build(char *out, size_t cap, unsigned stream, int64_t seq, bool change, const uint8_t *items, int n) {
    mst_buf b;
    mst_buf_init(&b, 0);
    mst_buf_append(&b, change ? MST_PERFETTO_CHANGE_MAGIC : MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
    mst_buf_append_cstr(&b, "{\"trace_id\":\"0102030405060708090a0b0c0d0e0f10\",\"span_id\":\"a1a2a3a4a5a6a7a8\","
                            "\"attributes\":{\"thread.id\":1,\"request.ids\":");
    char tmp[16];
    if (!change) {
        mst_buf_append_byte(&b, '[');
        for (int i = 0; i < n; i++) {
            snprintf(tmp, sizeof tmp, "%s\"i%u\"", i ? "," : "", items[i]);
            mst_buf_append_cstr(&b, tmp);
        }
        mst_buf_append_byte(&b, ']');
    } else {
        mst_buf_append_cstr(&b, "{\"left\":[");
        for (int i = 0, k = 0, last = -1; i < n; i++)
            if (!(items[i] & 1) && (int)(items[i] >> 1) > last) {
                last = items[i] >> 1;
                snprintf(tmp, sizeof tmp, "%s%d", k++ ? "," : "", last);
                mst_buf_append_cstr(&b, tmp);
            }
        mst_buf_append_cstr(&b, "],\"joined\":[");
        for (int i = 0, k = 0; i < n; i++)
            if (items[i] & 1) {
                snprintf(tmp, sizeof tmp, "%s\"j%u\"", k++ ? "," : "", items[i]);
                mst_buf_append_cstr(&b, tmp);
            }
        mst_buf_append_cstr(&b, "]}");
    }
    snprintf(tmp, sizeof tmp, ",\"x\":1},");
    mst_buf_append_cstr(&b, tmp);
    char tail[64];
    snprintf(tail, sizeof tail, "\"ids_stream\":%u,\"ids_seq\":%lld}", stream, (long long)seq);
    mst_buf_append_cstr(&b, tail);
    size_t len = b.len < cap ? b.len : cap;
    memcpy(out, b.data, len);
    mst_buf_free(&b);
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static model m;
    writers_open();
    mst_id_streams *t = mst_id_streams_new(BUDGET);
    mst_span_batch *sb = mst_span_batch_new();
    REQUIRE(t && sb);
    static char pkt[70000];
    size_t i = 0;
    while (i + 2 <= size) {
        uint8_t h = data[i];
        int c = h & 3;
        unsigned sbits = (h >> 2) & 31;
        size_t len;
        if (h & 0x80) {
            bool v2 = data[i + 1] & 1;
            if (i + 4 > size) break;
            size_t n = (size_t)data[i + 2] | (size_t)data[i + 3] << 8;
            i += 4;
            if (n > size - i) n = size - i;
            memcpy(pkt, v2 ? MST_PERFETTO_CHANGE_MAGIC : MST_PERFETTO_MAGIC, MST_PERFETTO_MAGIC_LEN);
            memcpy(pkt + MST_PERFETTO_MAGIC_LEN, data + i, n);
            len = MST_PERFETTO_MAGIC_LEN + n;
            i += n;
        } else {
            if (i + 4 > size) break;
            unsigned s = stream_no(sbits);
            int64_t base = s < STREAMS ? m.seq[c][s] : 0;
            int64_t seq = base + data[i + 1] - 1; /* 1: the next one */
            if (seq < 1) seq = 1;
            bool change = data[i + 2] & 1;
            int n = data[i + 3] % 16;
            i += 4;
            if ((size_t)n > size - i) n = (int)(size - i);
            len = build(pkt, sizeof pkt, s, seq, change, data + i, n);
            i += (size_t)n;
        }
        feed(sb, t, &m, c, pkt, len);
        if (mst_span_batch_full(sb)) mst_span_batch_reset(sb);
    }
    writers_compare();
    for (int c = 0; c < CONNS; c++) mst_id_streams_drop_conn(t, g_conn_base + (uint64_t)c + 1);
    g_conn_base += CONNS;
    mst_id_streams_stats st;
    mst_id_streams_get_stats(t, &st);
    REQUIRE(st.bytes == 0);
    mst_id_streams_free(t);
    mst_span_batch_free(sb);
    for (int c = 0; c < CONNS; c++)
        for (int s = 0; s < STREAMS; s++) set_model(&m, c, s, NULL, 0, 0);
    return 0;
}
