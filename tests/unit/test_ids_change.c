/*
 * test_ids_change.c — request id lists sent as changes to their stream's
 * previous list (docs/forwarder.md "Request id lists as changes"): the
 * traced process's sender (wire/ids_sender.h) and encoder, both packet
 * decoders, and the forwarder's stream state (forward/id_streams.h) behind
 * its span batches, in-process:
 *   - over hundreds of steps of a rolling batch in vLLM's order (plus
 *     reorders, a request resumed in the middle, duplicates, a batch that
 *     empties and refills), every span decoded from its change is the span
 *     decoded from its whole list, attribute bytes and order included, and
 *     the decoders' fast path and general decoder agree on every packet;
 *   - keyframes come at a stream's first list, every 64th, after a reset
 *     and for a large change; changes are much smaller than whole lists;
 *   - a change whose base is missing (a packet lost in between) leaves
 *     its span without request.ids, counted, until the next keyframe;
 *   - malformed change data rejects that packet with a clear reason and
 *     costs its stream the base; stream and memory limits are kept.
 * With --socket NAME it is instead the driver of
 * tests/integration/test_forward_ids_change.py: the real forwarder client
 * sends a rolling batch to a real daemon (see driver_main).
 */
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/span.h"
#include "export/forward_client.h"
#include "forward/id_streams.h"
#include "forward/span_batch.h"
#include "pf_span_compare.h"
#include "testlib.h"
#include "wire/buf.h"
#include "wire/ids_change.h"
#include "wire/ids_sender.h"
#include "wire/perfetto_packet.h"

static mst_str S(const char *s) { return (mst_str){s, (uint32_t)strlen(s)}; }

/* ---- a rolling batch of request ids (deterministic) ---- */

#define MAX_BATCH 300
#define ID_CAP 48

typedef struct batch {
    int n;
    uint64_t rng, next_req;
    char ids[MAX_BATCH][ID_CAP];
    mst_str items[MAX_BATCH];
} batch;

static uint64_t rnd(batch *b) {
    b->rng ^= b->rng << 13;
    b->rng ^= b->rng >> 7;
    b->rng ^= b->rng << 17;
    return b->rng;
}

static void put_new(batch *b, int slot) {
    /* One id in 16 has a quote and a non-ASCII byte, so escaping is covered. */
    uint64_t r = b->next_req++;
    snprintf(b->ids[slot], ID_CAP, r % 16 == 5 ? "cmpl-\"%llx\"-\xc3\xa9-%04llx" : "cmpl-%016llx-%08llx",
             (unsigned long long)(r * 0x9E3779B97F4A7C15ull), (unsigned long long)r);
}

static void batch_init(batch *b, int n, uint64_t seed) {
    memset(b, 0, sizeof *b);
    b->rng = seed | 1;
    b->n = n;
    for (int i = 0; i < n; i++) put_new(b, i);
}

static void batch_items(batch *b) {
    for (int i = 0; i < b->n; i++) b->items[i] = S(b->ids[i]);
}

/* The next step: vLLM's order (some finish, the rest keep their order, new
 * ones at the end), and now and then something else. */
static void batch_step(batch *b, int step, int target) {
    char keep[MAX_BATCH][ID_CAP];
    int k = 0;
    for (int i = 0; i < b->n; i++)
        if (rnd(b) % 64 != 0) memcpy(keep[k++], b->ids[i], ID_CAP);
    memcpy(b->ids, keep, sizeof keep[0] * (size_t)k);
    b->n = k;
    while (b->n < target) put_new(b, b->n++);
    if (step % 37 == 0 && b->n > 3) { /* a reorder: two swapped */
        char t[ID_CAP];
        memcpy(t, b->ids[1], ID_CAP);
        memcpy(b->ids[1], b->ids[b->n - 2], ID_CAP);
        memcpy(b->ids[b->n - 2], t, ID_CAP);
    }
    if (step % 53 == 0 && b->n > 4 && b->n < MAX_BATCH) { /* resumed: put back in the middle */
        memmove(b->ids[3], b->ids[2], ID_CAP * (size_t)(b->n - 2));
        put_new(b, 2);
        b->n++;
    }
    if (step % 71 == 0 && b->n > 2) memcpy(b->ids[b->n - 1], b->ids[0], ID_CAP); /* listed twice */
}

/* ---- spans as the schedule adapter makes them ---- */

static void make_span(mst_span *s, batch *b, int step, int tid) {
    memset(s, 0, sizeof *s);
    mst_arena_init(&s->arena);
    for (int i = 0; i < 16; i++) s->trace_id.bytes[i] = (uint8_t)(i + 1);
    for (int i = 0; i < 8; i++) s->span_id.bytes[i] = (uint8_t)(step + i + 1);
    s->name = S("vllm.scheduler.schedule");
    s->kind = MST_SPAN_KIND_INTERNAL;
    s->start_ns = 1000000 + (uint64_t)step * 1000;
    s->end_ns = s->start_ns + 500;
    batch_items(b);
    s->attrs[0] = (mst_attr){.key = S("process.pid"), .type = MST_ATTR_INT, .v.i = 10};
    s->attrs[1] = (mst_attr){.key = S("thread.id"), .type = MST_ATTR_INT, .v.i = tid};
    s->attrs[2] = (mst_attr){.key = S("step.index"), .type = MST_ATTR_INT, .v.i = step};
    s->attrs[3] = (mst_attr){.key = S("request.ids"), .type = MST_ATTR_STRING_LIST};
    s->attrs[3].v.list.items = b->items;
    s->attrs[3].v.list.count = (uint32_t)b->n;
    s->attrs[4] = (mst_attr){.key = S("batch.request_count"), .type = MST_ATTR_INT, .v.i = b->n};
    s->n_attrs = b->n ? 5 : 3; /* empty lists are not written */
    if (!b->n) s->attrs[3] = s->attrs[4];
}

static size_t encode(const mst_span *s, const mst_ids_send *how, mst_buf *out) {
    mst_buf_reset(out);
    mst_perfetto_packet_encode_ids(s, NULL, how, out);
    CHECK(!out->failed);
    return out->len;
}

/* Whether two decoded spans carry the same bytes everywhere a writer looks. */
static const char *spans_differ(const mst_pf_span *a, const mst_pf_span *b) {
    if (!pf_str_same(&a->name, &b->name) || strcmp(a->span_id, b->span_id) || a->start_ns != b->start_ns ||
        a->end_ns != b->end_ns || a->pid != b->pid || a->tid != b->tid || a->plain_text != b->plain_text)
        return "a span field";
    if (a->n_attrs != b->n_attrs) return "number of attributes";
    for (size_t i = 0; i < a->n_attrs; i++)
        if (!pf_str_same(&a->attrs[i].key, &b->attrs[i].key) || a->attrs[i].value.len != b->attrs[i].value.len ||
            memcmp(a->attrs[i].value.ptr, b->attrs[i].value.ptr, a->attrs[i].value.len) != 0)
            return "an attribute";
    return NULL;
}

/* Fast path and general decoder agree on this packet. */
static void check_decoders_agree(const uint8_t *pkt, size_t len) {
    mst_arena a1, a2;
    mst_arena_init(&a1);
    mst_arena_init(&a2);
    mst_pf_span s1, s2;
    char e1[200], e2[200];
    mst_status st1 = mst_perfetto_packet_decode(pkt, len, &a1, &s1, e1, sizeof e1);
    mst_status st2 = mst_perfetto_packet_decode_general(pkt, len, &a2, &s2, e2, sizeof e2);
    CHECK_EQ_INT(st1, st2);
    if (st1 == MST_OK) {
        const char *d = pf_spans_differ(&s1, &s2, pkt, len);
        if (d) fprintf(stderr, "  fast and general differ in %s\n", d);
        CHECK(d == NULL);
    } else {
        CHECK_EQ_STR(e1, e2);
    }
    mst_arena_release(&a1);
    mst_arena_release(&a2);
}

/* ---- tests ---- */

static void test_rolling_batch_decodes_as_whole_lists(void) {
    static batch b;
    batch_init(&b, 256, 7);
    mst_ids_sender *snd = mst_ids_sender_new();
    mst_id_streams *table = mst_id_streams_new(0);
    mst_span_batch *whole = mst_span_batch_new(), *changed = mst_span_batch_new();
    CHECK(snd && table && whole && changed);
    mst_buf bw, bc;
    mst_buf_init(&bw, 0);
    mst_buf_init(&bc, 0);
    size_t bytes_whole = 0, bytes_changed = 0;
    int keyframes = 0, changes = 0, since_key = 0;
    for (int step = 0; step < 700; step++) {
        int target = step >= 400 && step < 410 ? 0 : step >= 410 && step < 420 ? 40 : 256;
        if (step) batch_step(&b, step, target);
        if (step == 300) mst_ids_sender_reset(snd); /* a reconnect: a keyframe next */
        mst_span s;
        make_span(&s, &b, step, 77);
        mst_ids_send how = {0};
        if (b.n) mst_ids_sender_next(snd, s.name.ptr, s.name.len, 77, b.items, (uint32_t)b.n, &how);
        size_t nw = encode(&s, NULL, &bw), nc = encode(&s, b.n ? &how : NULL, &bc);
        bytes_whole += nw;
        bytes_changed += nc;
        if (b.n) {
            CHECK(how.in_stream == (b.n >= (int)MST_IDS_MIN_ITEMS));
            if (!how.change) { /* at most every 64th list of the stream */
                keyframes++;
                since_key = 0;
            } else {
                changes++;
                CHECK(++since_key < (int)MST_IDS_KEYFRAME_EVERY);
                CHECK(memcmp(bc.data, MST_PERFETTO_CHANGE_MAGIC, MST_PERFETTO_MAGIC_LEN) == 0);
            }
            CHECK(step != 0 && step != 300 ? 1 : !how.change);
        }
        check_decoders_agree(bc.data, nc);
        char err[200] = "";
        mst_ids_outcome out;
        CHECK_EQ_INT(mst_span_batch_add(whole, NULL, 0, bw.data, nw, NULL, err, sizeof err), MST_OK);
        mst_status st = mst_span_batch_add(changed, table, 5, bc.data, nc, &out, err, sizeof err);
        if (st != MST_OK) fprintf(stderr, "  step %d: %s\n", step, err);
        CHECK_EQ_INT(st, MST_OK);
        CHECK_EQ_INT(out, !how.in_stream ? MST_IDS_NONE : how.change ? MST_IDS_CHANGE : MST_IDS_KEYFRAME);
        const char *d = spans_differ(mst_span_batch_span(whole, 0), mst_span_batch_span(changed, 0));
        if (d) fprintf(stderr, "  step %d differs in %s\n", step, d);
        CHECK(d == NULL);
        mst_span_batch_reset(whole);
        mst_span_batch_reset(changed);
        mst_arena_release(&s.arena);
    }
    /* Most steps are small changes; the 256-id lists go whole now and then. */
    CHECK(changes > 500);
    CHECK(keyframes >= 700 / (int)MST_IDS_KEYFRAME_EVERY);
    CHECK(bytes_changed * 4 < bytes_whole);
    mst_id_streams_stats st;
    mst_id_streams_get_stats(table, &st);
    CHECK_EQ_INT(st.changes, changes);
    CHECK_EQ_INT(st.keyframes, keyframes);
    CHECK_EQ_INT(st.no_base + st.not_kept + st.bad_changes, 0);
    mst_buf_free(&bw);
    mst_buf_free(&bc);
    mst_span_batch_free(whole);
    mst_span_batch_free(changed);
    mst_id_streams_drop_conn(table, 5);
    mst_id_streams_get_stats(table, &st);
    CHECK_EQ_INT(st.bytes, 0);
    mst_id_streams_free(table);
    mst_ids_sender_free(snd);
}

/* Two threads' steps are two streams; a third stream of another name too. */
static void test_streams_are_per_name_and_thread(void) {
    mst_ids_sender *snd = mst_ids_sender_new();
    static char names[40][8];
    mst_str a[16], b2[17], c1[16], tiny[15];
    for (int i = 0; i < 40; i++) snprintf(names[i], sizeof names[i], "r%d", i);
    for (int i = 0; i < 17; i++) b2[i] = S(names[i]);
    memcpy(a, b2, sizeof a);
    for (int i = 0; i < 16; i++) c1[i] = S(names[20 + i]);
    memcpy(tiny, c1, sizeof tiny);
    mst_ids_send h1, h2, h3;
    mst_ids_sender_next(snd, "x", 1, 1, a, 16, &h1);
    mst_ids_sender_next(snd, "x", 1, 2, a, 16, &h2);
    mst_ids_sender_next(snd, "y", 1, 1, a, 16, &h3);
    CHECK(h1.in_stream && h2.in_stream && h3.in_stream);
    CHECK(h1.stream != h2.stream && h1.stream != h3.stream && h2.stream != h3.stream);
    CHECK(!h1.change && !h2.change && !h3.change);
    /* r16 joining is a change of 1 in 17 */
    mst_ids_sender_next(snd, "x", 1, 1, b2, 17, &h1);
    CHECK(h1.change && h1.n_left == 0 && h1.joined_from == 16 && h1.seq == 2);
    /* a short list goes whole, outside the stream, and leaves its base alone */
    mst_ids_sender_next(snd, "x", 1, 1, tiny, 15, &h1);
    CHECK(!h1.in_stream);
    mst_ids_sender_next(snd, "x", 1, 1, b2, 17, &h1);
    CHECK(h1.change && h1.n_left == 0 && h1.joined_from == 17 && h1.seq == 3);
    /* a whole new batch is more than half: whole */
    mst_ids_sender_next(snd, "x", 1, 1, c1, 16, &h1);
    CHECK(!h1.change && h1.seq == 4);
    /* the same list again: a change of nothing */
    mst_ids_sender_next(snd, "x", 1, 1, c1, 16, &h1);
    CHECK(h1.change && h1.n_left == 0 && h1.joined_from == 16 && h1.seq == 5);
    /* the other streams were not touched */
    mst_ids_sender_next(snd, "x", 1, 2, a, 16, &h2);
    CHECK(h2.change && h2.seq == 2);
    /* a request resumed into the middle of the list: not "previous without
     * some, then new at the end", so the list goes whole (a keyframe) */
    mst_str resumed[17];
    memcpy(resumed, a, sizeof a[0] * 2);
    resumed[2] = S(names[39]);
    memcpy(resumed + 3, a + 2, sizeof a[0] * 14);
    mst_ids_sender_next(snd, "x", 1, 2, resumed, 17, &h2);
    CHECK(h2.in_stream && !h2.change && h2.seq == 3);
    /* two swapped in the middle: the same */
    mst_ids_sender_next(snd, "x", 1, 2, a, 16, &h2);
    mst_str swapped[16];
    memcpy(swapped, a, sizeof swapped);
    swapped[1] = a[9];
    swapped[9] = a[1];
    mst_ids_sender_next(snd, "x", 1, 2, swapped, 16, &h2);
    CHECK(h2.in_stream && !h2.change && h2.seq == 5);
    mst_ids_sender_free(snd);
}

/* Builds a packet by hand: magic + a small span with `tail` fields. */
static size_t hand_packet(char *out, size_t cap, const char *magic, const char *ids_value, const char *tail) {
    int n = snprintf(out, cap,
                     "%s{\"name\":\"vllm.scheduler.schedule\",\"trace_id\":\"0102030405060708090a0b0c0d0e0f10\","
                     "\"span_id\":\"a1a2a3a4a5a6a7a8\",\"attributes\":{\"thread.id\":3,\"request.ids\":%s,"
                     "\"after\":1}%s}",
                     magic, ids_value, tail);
    CHECK(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

static mst_status add_hand(mst_span_batch *sb, mst_id_streams *t, const char *magic, const char *v, const char *tail,
                           mst_ids_outcome *out, char *err, size_t err_size) {
    char pkt[1024];
    size_t n = hand_packet(pkt, sizeof pkt, magic, v, tail);
    check_decoders_agree((const uint8_t *)pkt, n);
    mst_status st = mst_span_batch_add(sb, t, 9, (const uint8_t *)pkt, n, out, err, err_size);
    return st;
}

static const mst_pf_kv *last_ids(mst_span_batch *sb) {
    const mst_pf_span *sp = mst_span_batch_span(sb, mst_span_batch_count(sb) - 1);
    for (size_t i = 0; i < sp->n_attrs; i++)
        if (sp->attrs[i].key.len == 11 && !memcmp(sp->attrs[i].key.ptr, "request.ids", 11)) return &sp->attrs[i];
    return NULL;
}

#define V1 MST_PERFETTO_MAGIC
#define V2 MST_PERFETTO_CHANGE_MAGIC

static void test_gap_gives_no_list_until_keyframe(void) {
    mst_id_streams *t = mst_id_streams_new(0);
    mst_span_batch *sb = mst_span_batch_new();
    char err[200];
    mst_ids_outcome out;
    CHECK_EQ_INT(add_hand(sb, t, V1, "[\"a\",\"b\",\"c\"]", ",\"ids_stream\":0,\"ids_seq\":1", &out, err, sizeof err),
                 MST_OK);
    CHECK_EQ_INT(out, MST_IDS_KEYFRAME);
    CHECK_EQ_INT(add_hand(sb, t, V2, "{\"left\":[1],\"joined\":[\"d\"]}", ",\"ids_stream\":0,\"ids_seq\":2", &out,
                          err, sizeof err),
                 MST_OK);
    CHECK_EQ_INT(out, MST_IDS_CHANGE);
    const mst_pf_kv *kv = last_ids(sb);
    CHECK(kv && kv->value.len == 13 && !memcmp(kv->value.ptr, "[\"a\",\"c\",\"d\"]", 13));
    /* seq 3 never arrives: 4 has no base, neither has 5 (the stream lost it). */
    CHECK_EQ_INT(add_hand(sb, t, V2, "{\"left\":[],\"joined\":[\"e\"]}", ",\"ids_stream\":0,\"ids_seq\":4", &out, err,
                          sizeof err),
                 MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NO_BASE);
    CHECK(last_ids(sb) == NULL);
    const mst_pf_span *sp = mst_span_batch_span(sb, mst_span_batch_count(sb) - 1);
    CHECK_EQ_INT(sp->n_attrs, 1); /* "after" kept, in its place */
    CHECK(sp->attrs[0].key.len == 5 && sp->has_tid);
    CHECK_EQ_INT(add_hand(sb, t, V2, "{\"left\":[0],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":5", &out, err,
                          sizeof err),
                 MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NO_BASE);
    /* A change on another connection or an unknown stream: no base either. */
    char pkt[512];
    size_t n = hand_packet(pkt, sizeof pkt, V2, "{\"left\":[],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2");
    CHECK_EQ_INT(mst_span_batch_add(sb, t, 10, (const uint8_t *)pkt, n, &out, err, sizeof err), MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NO_BASE);
    CHECK_EQ_INT(mst_span_batch_add(sb, NULL, 9, (const uint8_t *)pkt, n, &out, err, sizeof err), MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NO_BASE);
    /* The next keyframe brings the list back. */
    CHECK_EQ_INT(add_hand(sb, t, V1, "[\"x\"]", ",\"ids_stream\":0,\"ids_seq\":6", &out, err, sizeof err), MST_OK);
    CHECK_EQ_INT(add_hand(sb, t, V2, "{\"left\":[],\"joined\":[\"y\"]}", ",\"ids_stream\":0,\"ids_seq\":7", &out, err,
                          sizeof err),
                 MST_OK);
    CHECK_EQ_INT(out, MST_IDS_CHANGE);
    kv = last_ids(sb);
    CHECK(kv && kv->value.len == 9 && !memcmp(kv->value.ptr, "[\"x\",\"y\"]", 9));
    mst_id_streams_stats st;
    mst_id_streams_get_stats(t, &st);
    CHECK_EQ_INT(st.no_base, 3); /* the NULL-table one is not this table's */
    CHECK_EQ_INT(st.changes, 2);
    mst_span_batch_free(sb);
    mst_id_streams_free(t);
}

static void test_bad_change_data_is_rejected(void) {
    static const struct {
        const char *magic, *value, *tail, *why;
    } bad[] = {
        {V2, "{\"left\":[2,1],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", "strictly increasing"},
        {V2, "{\"left\":[5],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", "past the previous list"},
        {V2, "{\"left\":[-1],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", "out of range"},
        {V2, "{\"left\":[0.5],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", "integers"},
        {V2, "{\"left\":[],\"joined\":[1]}", ",\"ids_stream\":0,\"ids_seq\":2", "strings"},
        {V2, "{\"left\":[],\"joined\":[],\"x\":1}", ",\"ids_stream\":0,\"ids_seq\":2", "only the keys"},
        {V2, "{\"left\":[],\"left\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", "only the keys"},
        {V2, "{\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", "needs both"},
        {V2, "{\"left\":[],\"joined\":[]}", ",\"ids_seq\":2", "needs 'ids_stream' and 'ids_seq'"},
        {V2, "[\"a\"]", ",\"ids_stream\":0,\"ids_seq\":2", "must be a change object"},
        {V1, "{\"left\":[],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", "must be a list"},
        {V1, "[\"a\"]", ",\"ids_stream\":0", "go together"},
        {V1, "[\"a\"]", ",\"ids_stream\":-1,\"ids_seq\":1", "'ids_stream' is out of range"},
        {V1, "[\"a\"]", ",\"ids_stream\":0,\"ids_seq\":0", "'ids_seq' is out of range"},
        {V1, "[\"a\"]", ",\"ids_stream\":\"0\",\"ids_seq\":1", "must be an integer"},
        {V1, "[\"a\"]", ",\"ids_stream\":0,\"ids_seq\":1,\"ids_seq\":2", "duplicate key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mst_id_streams *t = mst_id_streams_new(0);
        mst_span_batch *sb = mst_span_batch_new();
        char err[200] = "";
        mst_ids_outcome out;
        CHECK_EQ_INT(add_hand(sb, t, V1, "[\"a\",\"b\"]", ",\"ids_stream\":0,\"ids_seq\":1", &out, err, sizeof err),
                     MST_OK);
        mst_status st = add_hand(sb, t, bad[i].magic, bad[i].value, bad[i].tail, &out, err, sizeof err);
        if (st == MST_OK || !strstr(err, bad[i].why))
            fprintf(stderr, "  case %zu: status %d, message '%s', wanted '%s'\n", i, (int)st, err, bad[i].why);
        CHECK(st == MST_ERR_PARSE && strstr(err, bad[i].why));
        CHECK_EQ_INT(mst_span_batch_count(sb), 1); /* that packet only */
        /* After a malformed change the stream has no base: the next change gets no list. */
        if (bad[i].magic[15] == '2' && strstr(bad[i].tail, "ids_stream")) {
            CHECK_EQ_INT(add_hand(sb, t, V2, "{\"left\":[],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":3", &out,
                                  err, sizeof err),
                         MST_OK);
            CHECK_EQ_INT(out, MST_IDS_NO_BASE);
        }
        mst_span_batch_free(sb);
        mst_id_streams_free(t);
    }
}

static void test_limits(void) {
    char err[200];
    mst_ids_outcome out;
    mst_span_batch *sb = mst_span_batch_new();
    /* Stream numbers past the cap: the list passes whole, is not kept. */
    mst_id_streams *t = mst_id_streams_new(0);
    char tail[64];
    snprintf(tail, sizeof tail, ",\"ids_stream\":%u,\"ids_seq\":1", MST_IDS_MAX_STREAMS);
    CHECK_EQ_INT(add_hand(sb, t, V1, "[\"a\"]", tail, &out, err, sizeof err), MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NOT_KEPT);
    CHECK(last_ids(sb) != NULL);
    snprintf(tail, sizeof tail, ",\"ids_stream\":%u,\"ids_seq\":2", MST_IDS_MAX_STREAMS);
    CHECK_EQ_INT(add_hand(sb, t, V2, "{\"left\":[],\"joined\":[]}", tail, &out, err, sizeof err), MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NO_BASE);
    /* A keyframe with an item that is not a string cannot be a base. */
    CHECK_EQ_INT(add_hand(sb, t, V1, "[\"a\",7]", ",\"ids_stream\":1,\"ids_seq\":1", &out, err, sizeof err), MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NOT_KEPT);
    mst_id_streams_free(t);
    /* A budget too small for one list: not kept, its changes get no list. */
    t = mst_id_streams_new(64);
    CHECK_EQ_INT(add_hand(sb, t, V1, "[\"a\",\"b\"]", ",\"ids_stream\":0,\"ids_seq\":1", &out, err, sizeof err),
                 MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NOT_KEPT);
    CHECK_EQ_INT(add_hand(sb, t, V2, "{\"left\":[],\"joined\":[]}", ",\"ids_stream\":0,\"ids_seq\":2", &out, err,
                          sizeof err),
                 MST_OK);
    CHECK_EQ_INT(out, MST_IDS_NO_BASE);
    mst_id_streams_stats st;
    mst_id_streams_get_stats(t, &st);
    CHECK_EQ_INT(st.bytes, 0);
    CHECK_EQ_INT(st.not_kept, 1);
    mst_id_streams_free(t);
    /* The list itself is bounded: a change past MST_IDS_MAX_ITEMS is refused. */
    t = mst_id_streams_new(0);
    mst_buf v;
    mst_buf_init(&v, 0);
    mst_buf_append_cstr(&v, "{\"left\":[],\"joined\":[");
    for (unsigned i = 0; i < MST_IDS_MAX_ITEMS; i++) mst_buf_append_cstr(&v, i ? ",\"z\"" : "\"z\"");
    mst_buf_append_cstr(&v, "]}");
    mst_buf_append_byte(&v, 0);
    CHECK_EQ_INT(add_hand(sb, t, V1, "[\"a\"]", ",\"ids_stream\":0,\"ids_seq\":1", &out, err, sizeof err), MST_OK);
    char *pkt = malloc(v.len + 512);
    int n = snprintf(pkt, v.len + 512,
                     V2 "{\"trace_id\":\"0102030405060708090a0b0c0d0e0f10\",\"span_id\":\"a1a2a3a4a5a6a7a8\","
                        "\"attributes\":{\"request.ids\":%s},\"ids_stream\":0,\"ids_seq\":2}",
                     (char *)v.data);
    CHECK_EQ_INT(mst_span_batch_add(sb, t, 9, (const uint8_t *)pkt, (size_t)n, &out, err, sizeof err),
                 MST_ERR_TOO_LARGE);
    CHECK(strstr(err, "would pass") != NULL);
    free(pkt);
    mst_buf_free(&v);
    mst_id_streams_free(t);
    mst_span_batch_free(sb);
}

/* The client's side of a list too long for a stream, or too many streams:
 * whole, outside any stream. */
static void test_sender_limits(void) {
    mst_ids_sender *snd = mst_ids_sender_new();
    static mst_str many[MST_IDS_MAX_ITEMS + 1];
    for (unsigned i = 0; i <= MST_IDS_MAX_ITEMS; i++) many[i] = S("id");
    mst_ids_send h;
    mst_ids_sender_next(snd, "x", 1, 1, many, MST_IDS_MAX_ITEMS + 1, &h);
    CHECK(!h.in_stream);
    for (unsigned i = 0; i < MST_IDS_MAX_STREAMS + 3; i++) {
        mst_ids_sender_next(snd, "y", 1, (int64_t)i, many, MST_IDS_MIN_ITEMS, &h);
        CHECK(h.in_stream == (i + 1 < MST_IDS_MAX_STREAMS)); /* "x" took one */
    }
    mst_ids_sender_free(snd);
}

/* ---- driver mode for tests/integration/test_forward_ids_change.py ---- */

/* --socket NAME --steps N --ids K --expect FILE [--reconnect-at S]: the
 * real forwarder client sends N schedule steps of a rolling batch of K ids
 * to the daemon on @NAME, in batches of 8 spans, waiting (bounded) for the
 * daemon's capability line before its second batch so that changes are
 * used; at step S its connection is dropped as if it broke (the client
 * reconnects at once, its streams start again with whole lists).
 * Each step's list is written to FILE as one JSON line
 * {"step": i, "ids": [...]}. Exit 0 when every span was exported. */
static void write_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int driver_main(int argc, char **argv) {
    const char *sock = NULL, *expect = NULL;
    int steps = 200, ids = 64, reconnect_at = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--socket")) sock = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ids")) ids = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect")) expect = argv[i + 1];
        else if (!strcmp(argv[i], "--reconnect-at")) reconnect_at = atoi(argv[i + 1]);
    }
    if (!sock || !expect || ids < 1 || ids > 256) {
        fprintf(stderr, "usage: test_ids_change --socket NAME --expect FILE [--steps N] [--ids K<=256]\n");
        return 2;
    }
    FILE *f = fopen(expect, "w");
    if (!f) return 1;
    static batch b;
    batch_init(&b, ids, 11);
    mst_exporter *e = NULL;
    if (mst_forward_exporter_create(sock, &e) != MST_OK) return 1;
    enum { PER_BATCH = 8 };
    static mst_span spans[PER_BATCH];
    static batch copies[PER_BATCH];
    const mst_span *ptrs[PER_BATCH];
    for (int step = 0; step < steps;) {
        int n = 0;
        bool drop = false;
        for (; n < PER_BATCH && step < steps; n++, step++) {
            if (step) batch_step(&b, step, ids);
            copies[n] = b;
            make_span(&spans[n], &copies[n], step, 4242);
            ptrs[n] = &spans[n];
            fprintf(f, "{\"step\": %d, \"ids\": [", step);
            for (int i = 0; i < b.n; i++) {
                if (i) fputc(',', f);
                write_json_str(f, b.ids[i]);
            }
            fputs("]}\n", f);
            if (step == reconnect_at) { /* the batch ends here; then the connection breaks */
                drop = true;
                step++, n++;
                break;
            }
        }
        e->ops->export_batch(e, ptrs, (size_t)n);
        for (int i = 0; i < n; i++) mst_arena_release(&spans[i].arena);
        if (drop) {
            mst_forward_exporter_drop_connection(e); /* as if it broke: reconnect, whole lists again */
            continue;
        }
        /* The capability line arrives once the daemon accepted: after a
         * connection's first batch, wait for it (bounded), so the rest of
         * the steps go as changes. */
        if (!mst_forward_exporter_wait_changes(e, 0) && !mst_forward_exporter_wait_changes(e, 30000)) {
            fprintf(stderr, "the forwarder did not say it takes request.ids changes\n");
            return 1;
        }
    }
    mst_exporter_stats st;
    e->ops->get_stats(e, &st);
    e->ops->destroy(e);
    fclose(f);
    fprintf(stderr, "exported %llu of %d, %llu reconnect(s)\n", (unsigned long long)st.spans_exported, steps,
            (unsigned long long)st.retries);
    return st.spans_exported == (uint64_t)steps && st.retries == (reconnect_at >= 0 ? 1u : 0u) ? 0 : 1;
}

/* ---- the list arithmetic itself ---- */

/* mst_ids_bytes_equal against memcmp: every length 0..80 (each branch:
 * bytes, 4 and 8-byte words, 16-byte blocks with and without the 32-byte
 * loop), equal, and one byte differing at every position (the first, the
 * middle and the last among them). */
static void test_bytes_equal(void) {
    char a[88] = {0}, b[88] = {0};
    for (size_t n = 0; n <= 80; n++) {
        for (size_t i = 0; i < n; i++) a[i] = b[i] = (char)('a' + (i * 7) % 26);
        CHECK(mst_ids_bytes_equal(a, b, n));
        for (size_t at = 0; at < n; at++) { /* every position, first, middle and last among them */
            b[at] ^= 0x20;
            CHECK(!mst_ids_bytes_equal(a, b, n));
            CHECK(memcmp(a, b, n) != 0);
            b[at] ^= 0x20;
        }
        if (n) { /* differing only past n: still equal */
            b[n] = 'X';
            a[n] = 'Y';
            CHECK(mst_ids_bytes_equal(a, b, n));
        }
    }
}

/* The change between two lists: applying it (left, then joined) gives the
 * new list back; equal lists have an empty change, empty lists too. */
static void check_find(const char *const *prev, uint32_t n_prev, const char *const *next, uint32_t n_next,
                       uint32_t want_left, uint32_t want_joined) {
    mst_ids_list l;
    mst_ids_list_init(&l, 0, 0);
    mst_str p[16], q[16];
    for (uint32_t i = 0; i < n_prev; i++) p[i] = S(prev[i]);
    for (uint32_t i = 0; i < n_next; i++) q[i] = S(next[i]);
    CHECK(mst_ids_list_set(&l, p, n_prev));
    uint32_t left[16], n_left = 99;
    uint32_t from = mst_ids_change_find(&l, q, n_next, left, &n_left);
    CHECK_EQ_INT(n_left, want_left);
    CHECK_EQ_INT(n_next - from, want_joined);
    CHECK(mst_ids_list_edit(&l, left, n_left, q + from, n_next - from));
    CHECK_EQ_INT(l.n, n_next);
    for (uint32_t i = 0; i < n_next && i < l.n; i++) CHECK(mst_ids_list_item_is(&l, i, q[i].ptr, q[i].len));
    mst_ids_list_free(&l);
}

static void test_change_find(void) {
    const char *abc[] = {"cmpl-0123456789abcdef-00000001", "cmpl-0123456789abcdef-00000002",
                         "cmpl-0123456789abcdef-00000003"};
    const char *last_differs[] = {"cmpl-0123456789abcdef-00000001", "cmpl-0123456789abcdef-00000002",
                                  "cmpl-0123456789abcdef-00000004"};
    const char *first_differs[] = {"Xmpl-0123456789abcdef-00000001", "cmpl-0123456789abcdef-00000002",
                                   "cmpl-0123456789abcdef-00000003"};
    const char *middle_differs[] = {"cmpl-0123456789abcdef-00000001", "cmpl-0123456789aXcdef-00000002",
                                    "cmpl-0123456789abcdef-00000003"};
    const char *shorter[] = {"cmpl-0123456789abcdef-0000000", "cmpl-0123456789abcdef-00000002",
                             "cmpl-0123456789abcdef-00000003"};
    const char *empties[] = {"", "", "a"};
    check_find(abc, 3, abc, 3, 0, 0);               /* equal lists */
    check_find(abc, 0, abc, 0, 0, 0);               /* empty lists */
    check_find(abc, 0, abc, 3, 0, 3);               /* all join */
    check_find(abc, 3, abc, 0, 3, 0);               /* all leave */
    check_find(abc, 3, last_differs, 3, 1, 1);      /* the last byte differs */
    check_find(abc, 3, first_differs, 3, 3, 3);     /* the first item's first byte: all after it join */
    check_find(abc, 3, middle_differs, 3, 2, 2);    /* a middle byte of the middle item */
    check_find(abc, 3, shorter, 3, 3, 3);           /* a prefix is not equal */
    check_find(empties, 3, empties, 3, 0, 0);       /* empty items */
    check_find(empties, 3, empties + 1, 2, 1, 0);
}

/* A rolling batch remembered by editing one list in place (the sender's
 * way, with its text compacted now and then) and by copying the kept runs
 * into a new list each step (mst_ids_list_set_change): the same items
 * every step; the edited list's text stays bounded. Then the limits. */
static void test_list_edit(void) {
    batch b;
    batch_init(&b, 256, 7);
    batch_items(&b);
    mst_ids_list ed, cp, tmp;
    mst_ids_list_init(&ed, 0, 0);
    mst_ids_list_init(&cp, 0, 0);
    mst_ids_list_init(&tmp, 0, 0);
    CHECK(mst_ids_list_set(&ed, b.items, (uint32_t)b.n));
    CHECK(mst_ids_list_set(&cp, b.items, (uint32_t)b.n));
    static uint32_t left[MST_IDS_MAX_ITEMS];
    size_t most_text = 0;
    for (int step = 1; step <= 600; step++) {
        batch_step(&b, step, step % 200 < 100 ? 256 : 40 + step % 7); /* shrinks and grows again */
        if (step % 150 == 0) b.n = 0;                                   /* empties */
        batch_items(&b);
        uint32_t n_left;
        uint32_t from = mst_ids_change_find(&ed, b.items, (uint32_t)b.n, left, &n_left);
        CHECK(mst_ids_list_set_change(&tmp, &cp, left, n_left, b.items + from, (uint32_t)b.n - from));
        mst_ids_list t = cp;
        cp = tmp;
        tmp = t;
        CHECK(mst_ids_list_edit(&ed, left, n_left, b.items + from, (uint32_t)b.n - from));
        CHECK_EQ_INT(ed.n, (uint32_t)b.n);
        CHECK_EQ_INT(cp.n, (uint32_t)b.n);
        size_t live = 0;
        for (int i = 0; i < b.n && i < (int)ed.n; i++) {
            CHECK(mst_ids_list_item_is(&ed, (uint32_t)i, b.items[i].ptr, b.items[i].len));
            CHECK(mst_ids_list_item_is(&cp, (uint32_t)i, b.items[i].ptr, b.items[i].len));
            live += b.items[i].len;
        }
        CHECK_EQ_INT(ed.items_len, live);
        CHECK(ed.text_len <= 2 * live + 4096);
        if (ed.text_len > most_text) most_text = ed.text_len;
    }
    CHECK(most_text > ed.items_len); /* bytes were left unused, then compacted */
    /* Past the item limit or the text limit: false, the list empty. */
    static mst_str many[MST_IDS_MAX_ITEMS + 1];
    for (uint32_t i = 0; i <= MST_IDS_MAX_ITEMS; i++) many[i] = S("x");
    CHECK(mst_ids_list_set(&ed, many, 1));
    CHECK(!mst_ids_list_edit(&ed, NULL, 0, many, MST_IDS_MAX_ITEMS));
    CHECK_EQ_INT(ed.n, 0);
    CHECK(mst_ids_list_edit(&ed, NULL, 0, many, MST_IDS_MAX_ITEMS)); /* exactly at the limit */
    CHECK_EQ_INT(ed.n, MST_IDS_MAX_ITEMS);
    char *big = malloc(MST_IDS_MAX_TEXT);
    memset(big, 'y', MST_IDS_MAX_TEXT);
    mst_str half = {big, MST_IDS_MAX_TEXT / 2};
    CHECK(mst_ids_list_set(&ed, &half, 1));
    CHECK(mst_ids_list_edit(&ed, NULL, 0, &half, 1)); /* exactly MST_IDS_MAX_TEXT */
    uint32_t first = 0;
    CHECK(mst_ids_list_edit(&ed, &first, 1, &half, 1)); /* one leaves, one joins: still at it */
    mst_str one = {big, 1};
    CHECK(!mst_ids_list_edit(&ed, NULL, 0, &one, 1)); /* one byte more */
    CHECK_EQ_INT(ed.n, 0);
    free(big);
    mst_ids_list_free(&ed);
    mst_ids_list_free(&cp);
    mst_ids_list_free(&tmp);
}

/* The forwarder's list: the text as a JSON array of the items. */
static void build_json(mst_buf *out, const mst_ids_list *l) {
    mst_buf_reset(out);
    mst_buf_append_byte(out, '[');
    for (uint32_t i = 0; i < l->n; i++) {
        if (i) mst_buf_append_byte(out, ',');
        mst_buf_append(out, l->text + l->off[i], l->len[i]);
    }
    mst_buf_append_byte(out, ']');
}

/* Changes applied in place to a forwarder list (',' between items, '['
 * before) give the list made whole from its items, and its JSON text is
 * the items' JSON array, over a rolling batch with first, last, all and
 * no items leaving, an empty base and a base whose JSON was taken. Bad
 * changes leave the list as it was. */
static void test_change_apply_in_place(void) {
    batch b;
    batch_init(&b, 64, 11);
    mst_ids_list l, whole;
    mst_ids_list_init(&l, ',', '[');
    mst_ids_list_init(&whole, ',', '[');
    mst_buf want;
    mst_buf_init(&want, 0);
    static char quoted[MAX_BATCH][ID_CAP + 2];
    static mst_json_slice joined[MAX_BATCH];
    static uint32_t left[MAX_BATCH];
    uint32_t prev_n;
    static char prev_ids[MAX_BATCH][ID_CAP];
    char err[200];
    for (int step = 0; step < 400; step++) {
        memcpy(prev_ids, b.ids, sizeof prev_ids);
        prev_n = step ? (uint32_t)b.n : 0; /* the list starts empty: all join */
        if (step) batch_step(&b, step, 64);
        int mode = step % 11;
        if (mode == 3 && b.n) memmove(b.ids[0], b.ids[1], ID_CAP * (size_t)--b.n); /* the first leaves */
        if (mode == 5 && b.n) b.n--;                                                    /* the last leaves */
        if (mode == 7) b.n = 0;                                                         /* all leave */
        /* greedy change from prev_ids to b.ids, as the sender finds it */
        uint32_t k = 0, j = 0, i = 0;
        for (; i < prev_n && j < (uint32_t)b.n; i++) {
            if (!strcmp(prev_ids[i], b.ids[j])) j++;
            else left[k++] = i;
        }
        for (; i < prev_n; i++) left[k++] = i;
        uint32_t nj = 0;
        for (uint32_t x = j; x < (uint32_t)b.n; x++, nj++) {
            int len = snprintf(quoted[nj], sizeof quoted[nj], "\"%s\"", b.ids[x]);
            joined[nj] = (mst_json_slice){quoted[nj], (size_t)len};
        }
        mst_ids_change c = {left, k, joined, nj};
        if (step % 3 == 0) { /* the JSON view was taken of the base (a ']' written past it) */
            mst_json_slice js;
            CHECK(mst_ids_list_json(&l, &js));
        }
        CHECK_EQ_INT(mst_ids_change_apply(&l, &c, err, sizeof err), MST_OK);
        mst_ids_list_clear(&whole);
        for (int x = 0; x < b.n; x++) {
            char q[ID_CAP + 2];
            int len = snprintf(q, sizeof q, "\"%s\"", b.ids[x]);
            CHECK(mst_ids_list_push(&whole, q, (size_t)len));
        }
        CHECK_EQ_INT(l.n, whole.n);
        CHECK_EQ_INT(l.items_len, whole.items_len);
        for (uint32_t x = 0; x < l.n && x < whole.n; x++)
            CHECK(mst_ids_list_item_is(&l, x, whole.text + whole.off[x], whole.len[x]));
        build_json(&want, &whole);
        mst_json_slice js;
        CHECK(mst_ids_list_json(&l, &js));
        CHECK_EQ_INT(js.len, want.len);
        CHECK(js.len == want.len && memcmp(js.ptr, want.data, want.len) == 0);
    }
    /* a position past the list, and a list past the limits: refused, the
     * list as it was */
    uint32_t n_before = l.n;
    size_t text_before = l.text_len;
    uint32_t past[1] = {l.n};
    mst_ids_change bad = {past, 1, NULL, 0};
    CHECK_EQ_INT(mst_ids_change_apply(&l, &bad, err, sizeof err), MST_ERR_PARSE);
    CHECK(strstr(err, "past the previous list") != NULL);
    static mst_json_slice many[MST_IDS_MAX_ITEMS];
    for (uint32_t x = 0; x < MST_IDS_MAX_ITEMS; x++) many[x] = (mst_json_slice){"\"z\"", 3};
    mst_ids_change too_many = {NULL, 0, many, MST_IDS_MAX_ITEMS};
    CHECK_EQ_INT(mst_ids_change_apply(&l, &too_many, err, sizeof err), n_before ? MST_ERR_TOO_LARGE : MST_OK);
    CHECK_EQ_INT(l.n, n_before);
    CHECK_EQ_INT(l.text_len, text_before);
    /* the text limit counts the separators and the lead byte: exactly at it
     * is kept, one byte more is not */
    mst_ids_list_clear(&l);
    char *big = malloc(MST_IDS_MAX_TEXT);
    memset(big, 'y', MST_IDS_MAX_TEXT);
    mst_json_slice two[2] = {{big, MST_IDS_MAX_TEXT / 2}, {big, MST_IDS_MAX_TEXT / 2 - 2}};
    mst_ids_change fits = {NULL, 0, two, 2}; /* '[' a ',' b: MST_IDS_MAX_TEXT bytes */
    CHECK_EQ_INT(mst_ids_change_apply(&l, &fits, err, sizeof err), MST_OK);
    CHECK_EQ_INT(l.text_len, MST_IDS_MAX_TEXT);
    mst_ids_list_clear(&l);
    two[1].len++;
    CHECK_EQ_INT(mst_ids_change_apply(&l, &fits, err, sizeof err), MST_ERR_TOO_LARGE);
    CHECK(strstr(err, "would pass") != NULL);
    CHECK_EQ_INT(l.n, 0);
    free(big);
    mst_buf_free(&want);
    mst_ids_list_free(&l);
    mst_ids_list_free(&whole);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--socket")) return driver_main(argc, argv);
    static const mst_test_case tests[] = {
        {"rolling_batch_decodes_as_whole_lists", test_rolling_batch_decodes_as_whole_lists},
        {"streams_are_per_name_and_thread", test_streams_are_per_name_and_thread},
        {"gap_gives_no_list_until_keyframe", test_gap_gives_no_list_until_keyframe},
        {"bad_change_data_is_rejected", test_bad_change_data_is_rejected},
        {"limits", test_limits},
        {"sender_limits", test_sender_limits},
        {"bytes_equal", test_bytes_equal},
        {"change_find", test_change_find},
        {"list_edit", test_list_edit},
        {"change_apply_in_place", test_change_apply_in_place},
    };
    return mst_test_run_all(tests, sizeof tests / sizeof tests[0], argc, argv);
}
