/*
 * test_pftrace_origin.c — the `.pftrace` writer reusing what the forwarder
 * knows of a rebuilt request.ids list (mst_pf_span.ids_origin,
 * pftrace_id_lists.h mst_pft_id_chain_base_is): the base check itself
 * (connection, stream, sequence, length; forgotten on a reset, a forget,
 * any record without an origin), and whole files: the same steps written
 * once from whole lists and once through the daemon's path (ids_sender.h
 * deciding keyframes and changes, span_batch.h with id_streams.h
 * rebuilding them) must be the same bytes after the clock snapshot — with
 * ids leaving and joining, ids rejoining, reordered and duplicated lists,
 * escaped ids, two connections feeding one writer stream, spans lost
 * between the daemon's stream state and the writer, keyframes of both
 * cadences and interning restarts; each branch of the writer's by-origin
 * split on its own (runs leaving, none, all, joined ids already listed,
 * texts that do not match the origin), and the chain's change told by
 * places alone. And the traced process's sender
 * remembering a change's list by its kept runs (ids_change.h
 * mst_ids_list_set_change): the same list as item by item.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "forward/id_streams.h"
#include "forward/pftrace_id_lists.h"
#include "forward/pftrace_writer.h"
#include "forward/span_batch.h"
#include "testlib.h"
#include "wire/buf.h"
#include "wire/ids_change.h"
#include "wire/ids_sender.h"
#include "wire/perfetto_packet.h"

static void test_base_is(void) {
    mst_pft_id_chains *c = mst_pft_id_chains_new();
    CHECK(c != NULL);
    uint64_t iids[3] = {1, 2, 3};
    uint32_t refs[3] = {0, 1, 2};
    mst_pft_id_delta d;
    CHECK(mst_pft_id_chain_step(c, 7, iids, refs, 3, &d));
    mst_pf_ids_origin kf = {.valid = true, .conn = 4, .stream = 2, .seq = 10};
    mst_pf_ids_origin ch = {true, true, 4, 2, 11, 3, 1, 2, (const uint32_t[]){1}};
    CHECK(!mst_pft_id_chain_base_is(c, 7, &ch)); /* recorded without an origin */
    mst_pft_id_chain_set_origin(c, 7, &kf);
    CHECK(mst_pft_id_chain_base_is(c, 7, &ch));
    CHECK(!mst_pft_id_chain_base_is(c, 9, &ch)); /* another writer stream */
    mst_pf_ids_origin other = ch;
    other.conn = 5;
    CHECK(!mst_pft_id_chain_base_is(c, 7, &other));
    other = ch;
    other.stream = 3;
    CHECK(!mst_pft_id_chain_base_is(c, 7, &other));
    other = ch;
    other.seq = 12; /* list 11 never reached this writer */
    CHECK(!mst_pft_id_chain_base_is(c, 7, &other));
    other = ch;
    other.n_base = 4;
    other.joined_from = 3;
    CHECK(!mst_pft_id_chain_base_is(c, 7, &other));
    other = ch;
    other.joined_from = 1; /* does not add up */
    CHECK(!mst_pft_id_chain_base_is(c, 7, &other));
    CHECK(!mst_pft_id_chain_base_is(c, 7, &kf)); /* a keyframe has no base */
    /* a list recorded later without an origin forgets it */
    CHECK(mst_pft_id_chain_step(c, 7, iids, refs, 3, &d));
    CHECK(!mst_pft_id_chain_base_is(c, 7, &ch));
    mst_pft_id_chain_set_origin(c, 7, &kf);
    CHECK(mst_pft_id_chain_base_is(c, 7, &ch));
    mst_pft_id_chain_forget(c, 7);
    CHECK(!mst_pft_id_chain_base_is(c, 7, &ch));
    CHECK(mst_pft_id_chain_step(c, 7, iids, refs, 3, &d));
    mst_pft_id_chain_set_origin(c, 7, &kf);
    mst_pft_id_chains_reset(c); /* interning restarted */
    CHECK(!mst_pft_id_chain_base_is(c, 7, &ch));
    mst_pft_id_chains_free(c);
}

static void test_split_rest(void) {
    const char *v = "[\"a\",\"bc\",\"d\\\"e\"]";
    mst_pft_id_item items[8];
    size_t n = 1;
    CHECK(mst_pft_split_id_list_rest(v, strlen(v), 5, items, 8, &n) == false); /* an escape */
    const char *w = "[\"a\",\"bc\",\"def\"]";
    n = 1;
    CHECK(mst_pft_split_id_list_rest(w, strlen(w), 5, items, 8, &n));
    CHECK_EQ_INT(n, 3);
    CHECK(items[1].n == 2 && memcmp(items[1].s, "bc", 2) == 0);
    CHECK(items[2].n == 3 && memcmp(items[2].s, "def", 3) == 0);
    n = 0;
    CHECK(!mst_pft_split_id_list_rest(w, strlen(w), 6, items, 8, &n)); /* not after a separator */
    n = 0;
    CHECK(mst_pft_split_id_list_rest(w, strlen(w), 1, items, 8, &n) && n == 3);
    n = 0;
    CHECK(!mst_pft_split_id_list_rest("[]", 2, 1, items, 8, &n));
}

/* The traced process's sender remembers a list found as a change by
 * copying the kept runs (mst_ids_list_set_change): the same list as
 * copying its items. */
static void test_list_set_change_is_list_set(void) {
    mst_ids_list prev, by_items, by_runs;
    mst_ids_list_init(&prev, 0, 0);
    mst_ids_list_init(&by_items, 0, 0);
    mst_ids_list_init(&by_runs, 0, 0);
    char text[64][24];
    mst_str items[64];
    uint32_t left[64];
    uint64_t rng = 12345;
    for (int round = 0; round < 200; round++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < prev.n; i++) items[n++] = (mst_str){prev.text + prev.off[i], prev.len[i]};
        if (round == 0 || round % 50 == 0) n = 0; /* a new batch */
        uint32_t n_items = 0;
        for (uint32_t i = 0; i < n; i++) { /* some leave */
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            if ((rng >> 60) != 0) items[n_items++] = items[i];
        }
        for (int j = 0; j < 1 + round % 4 && n_items < 64; j++) { /* some join, of many lengths */
            int k = snprintf(text[n_items], sizeof text[0], "r%d-%.*s", round, (round + j) % 12, "abcdefghijkl");
            items[n_items] = (mst_str){text[n_items], (size_t)k};
            n_items++;
        }
        /* the joined texts live in text[]: copy the kept ones there too */
        char keep[64][24];
        for (uint32_t i = 0; i < n_items; i++) {
            memcpy(keep[i], items[i].ptr, items[i].len);
            items[i].ptr = keep[i];
        }
        uint32_t n_left;
        uint32_t from = mst_ids_change_find(&prev, items, n_items, left, &n_left);
        CHECK(mst_ids_list_set(&by_items, items, n_items));
        CHECK(mst_ids_list_set_change(&by_runs, &prev, left, n_left, items + from, n_items - from));
        CHECK_EQ_INT(by_runs.n, by_items.n);
        CHECK_EQ_INT(by_runs.text_len, by_items.text_len);
        CHECK(by_items.text_len == 0 || memcmp(by_runs.text, by_items.text, by_items.text_len) == 0);
        for (uint32_t i = 0; i < by_items.n; i++) {
            CHECK_EQ_INT(by_runs.off[i], by_items.off[i]);
            CHECK_EQ_INT(by_runs.len[i], by_items.len[i]);
            CHECK(mst_ids_list_item_is(&by_runs, i, items[i].ptr, items[i].len));
        }
        mst_ids_list tmp = prev;
        prev = by_runs;
        by_runs = tmp;
    }
    mst_ids_list_free(&prev);
    mst_ids_list_free(&by_items);
    mst_ids_list_free(&by_runs);
}

/* ------------------------------------------------------------ whole files */

#define CONNS 2
#define STEPS 5000
#define MAX_IDS 48

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static unsigned rnd(unsigned n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (unsigned)(g_rng % n);
}

typedef struct client {
    char ids[MAX_IDS][40];
    unsigned n, next;
    char gone[40];  /* an id that left, to bring back */
    mst_ids_sender *sender;
} client;

/* The client's next batch: a few leave, a few join at the end, now and
 * then one comes back, two swap, one is listed twice or needs escaping. */
static void next_batch(client *c, int conn) {
    unsigned leave = rnd(5);
    for (unsigned k = 0; k < leave && c->n > 20; k++) {
        unsigned at = rnd(c->n);
        memcpy(c->gone, c->ids[at], sizeof c->gone);
        memmove(c->ids[at], c->ids[at + 1], (c->n - at - 1) * sizeof c->ids[0]);
        c->n--;
    }
    unsigned join = rnd(5);
    for (unsigned k = 0; k < join && c->n < MAX_IDS; k++) {
        unsigned r = rnd(1000);
        if (r < 20 && c->gone[0]) memcpy(c->ids[c->n], c->gone, 40); /* back (rejoined) */
        else if (r < 23) snprintf(c->ids[c->n], 40, "cmpl-%d-\"%u", conn, c->next++); /* escaped */
        else if (r < 26 && c->n) memcpy(c->ids[c->n], c->ids[rnd(c->n)], 40); /* twice */
        else snprintf(c->ids[c->n], 40, "cmpl-%d-%u-%s", conn, c->next++, r & 1 ? "abcdefgh" : "x");
        c->n++;
    }
    if (rnd(100) < 3 && c->n > 2) { /* reordered */
        char t[40];
        memcpy(t, c->ids[0], 40);
        memcpy(c->ids[0], c->ids[c->n - 1], 40);
        memcpy(c->ids[c->n - 1], t, 40);
    }
}

static void put_json_str(mst_buf *b, const char *s) {
    mst_buf_append(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"') mst_buf_append(b, "\\\"", 2);
        else mst_buf_append(b, s, 1);
    }
    mst_buf_append(b, "\"", 1);
}

/* The step's packet: the whole list (ref, or a keyframe / a list outside
 * any stream as `send` says) or its change. */
static void make_packet(mst_buf *b, const client *c, const char *name, int step, bool whole,
                        const mst_ids_send *send) {
    mst_buf_reset(b);
    bool change = !whole && send->change;
    const char *magic = change ? MST_PERFETTO_CHANGE_MAGIC : MST_PERFETTO_MAGIC;
    mst_buf_append(b, magic, strlen(magic));
    char head[400];
    snprintf(head, sizeof head,
             "{\"name\":\"%s\",\"category\":\"step\",\"trace_id\":\"%032x\",\"span_id\":\"%016x\","
             "\"start_time_ns\":%d,\"end_time_ns\":%d,\"kind\":1,\"status\":1,"
             "\"attributes\":{\"process.pid\":5,\"thread.id\":3,\"batch.size\":%u,\"request.ids\":",
             name, step + 1, 2 * step + 1, 1000 + 10 * step, 1005 + 10 * step, c->n);
    mst_buf_append(b, head, strlen(head));
    if (change) {
        mst_buf_append(b, "{\"left\":[", 9);
        for (uint32_t i = 0; i < send->n_left; i++) {
            char num[16];
            int k = snprintf(num, sizeof num, "%s%u", i ? "," : "", send->left[i]);
            mst_buf_append(b, num, (size_t)k);
        }
        mst_buf_append(b, "],\"joined\":[", 12);
        for (uint32_t i = send->joined_from; i < c->n; i++) {
            if (i > send->joined_from) mst_buf_append(b, ",", 1);
            put_json_str(b, c->ids[i]);
        }
        mst_buf_append(b, "]}", 2);
    } else {
        mst_buf_append(b, "[", 1);
        for (uint32_t i = 0; i < c->n; i++) {
            /* blanks too, in lists sent whole (a rebuilt one has none) */
            bool blank = step % 7 == 0 && !send->change;
            if (i) mst_buf_append(b, blank ? ", " : ",", blank ? 2 : 1);
            put_json_str(b, c->ids[i]);
        }
        mst_buf_append(b, "]", 1);
    }
    mst_buf_append(b, "}", 1);
    if (!whole && send->in_stream) {
        char tail[80];
        int k = snprintf(tail, sizeof tail, ",\"ids_stream\":%u,\"ids_seq\":%llu", send->stream,
                         (unsigned long long)send->seq);
        mst_buf_append(b, tail, (size_t)k);
    }
    mst_buf_append(b, ",\"links\":[]}", 12);
}

/* The bytes after the first packet (the clock snapshot, whose time is now). */
static size_t after_clock(const uint8_t *d, size_t len) {
    CHECK(len > 2 && d[0] == 0x0a);
    size_t i = 1, n = 0;
    for (unsigned sh = 0; i < len; sh += 7) {
        uint8_t c = d[i++];
        n |= (size_t)(c & 0x7f) << sh;
        if (c < 0x80) break;
    }
    CHECK(i + n <= len);
    return i + n;
}

/* The two files hold the same bytes after their clock snapshots. */
static void check_same_after_clock(const char *ref_path, const char *got_path) {
    size_t ref_len, got_len;
    uint8_t *a = (uint8_t *)mst_test_read_file(ref_path, &ref_len);
    uint8_t *b = (uint8_t *)mst_test_read_file(got_path, &got_len);
    CHECK(a != NULL && b != NULL);
    size_t ra = after_clock(a, ref_len), rb = after_clock(b, got_len);
    CHECK_EQ_INT(ref_len - ra, got_len - rb);
    CHECK(memcmp(a + ra, b + rb, ref_len - ra) == 0);
    free(a);
    free(b);
}

static void test_file_same_through_changes(void) {
    char dir[] = "/tmp/mst_pft_origin_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char ref_path[64], got_path[64];
    snprintf(ref_path, sizeof ref_path, "%s/ref.pftrace", dir);
    snprintf(got_path, sizeof got_path, "%s/got.pftrace", dir);
    mst_pftrace_writer *ref, *got;
    char err[256];
    CHECK_EQ_INT(mst_pftrace_writer_open(ref_path, 1, &ref, err, sizeof err), MST_OK);
    CHECK_EQ_INT(mst_pftrace_writer_open(got_path, 1, &got, err, sizeof err), MST_OK);
    mst_id_streams *streams = mst_id_streams_new(0);
    mst_span_batch *batch = mst_span_batch_new();
    client cl[CONNS];
    memset(cl, 0, sizeof cl);
    for (int c = 0; c < CONNS; c++) {
        cl[c].sender = mst_ids_sender_new();
        CHECK(cl[c].sender != NULL);
        for (; cl[c].n < 30; cl[c].n++) snprintf(cl[c].ids[cl[c].n], 40, "cmpl-%d-%u", c, cl[c].next++);
    }
    static const char *const names[2] = {"vllm.scheduler.schedule", "vllm.model.execute"};
    mst_buf pkt, whole;
    mst_buf_init(&pkt, 0);
    mst_buf_init(&whole, 0);
    mst_arena arena;
    mst_arena_init(&arena);
    unsigned changes = 0, lost = 0;
    for (int step = 0; step < STEPS; step++) {
        /* Mostly one connection for a while, then the other, sometimes
         * interleaved: the writer's stream (pid, tid, name) is fed by both. */
        int c = (step / 200) % CONNS;
        if (rnd(10) == 0) c = 1 - c;
        next_batch(&cl[c], c);
        mst_str items[MAX_IDS];
        for (unsigned i = 0; i < cl[c].n; i++) items[i] = (mst_str){cl[c].ids[i], strlen(cl[c].ids[i])};
        for (int nm = 0; nm < 2; nm++) {
            if (step % 300 == 299) mst_ids_sender_reset(cl[c].sender); /* a reconnect */
            mst_ids_send send;
            mst_ids_sender_next(cl[c].sender, names[nm], strlen(names[nm]), 3, items, cl[c].n, &send);
            make_packet(&pkt, &cl[c], names[nm], 2 * step + nm, false, &send);
            make_packet(&whole, &cl[c], names[nm], 2 * step + nm, true, &send);
            CHECK(!pkt.failed && !whole.failed);
            mst_ids_outcome outcome;
            mst_status st = mst_span_batch_add(batch, streams, (uint64_t)c + 1, pkt.data, pkt.len, &outcome, err,
                                               sizeof err);
            if (st != MST_OK) fprintf(stderr, "%.*s: %s\n", (int)pkt.len, (const char *)pkt.data, err);
            CHECK_EQ_INT(st, MST_OK);
            CHECK(outcome != MST_IDS_NO_BASE && outcome != MST_IDS_NOT_KEPT);
            /* now and then a span the daemon applied never reaches the writer */
            if (rnd(40) == 0) {
                lost++;
                mst_span_batch_reset(batch);
                continue;
            }
            changes += outcome == MST_IDS_CHANGE;
            const mst_pf_span *sp = mst_span_batch_span(batch, 0);
            CHECK(sp->ids_origin.valid == (outcome == MST_IDS_CHANGE || outcome == MST_IDS_KEYFRAME));
            CHECK_EQ_INT(mst_pftrace_writer_add_span(got, sp), MST_OK);
            mst_span_batch_reset(batch);
            mst_pf_span rs;
            CHECK_EQ_INT(mst_perfetto_packet_decode(whole.data, whole.len, &arena, &rs, err, sizeof err), MST_OK);
            CHECK(!rs.ids_origin.valid);
            CHECK_EQ_INT(mst_pftrace_writer_add_span(ref, &rs), MST_OK);
            mst_arena_reset_keep(&arena, 64u << 10);
        }
    }
    uint64_t reused = mst_pftrace_writer_lists_by_origin(got);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(ref), 0);
    /* The known shape was used for most changes, not for all (the lost
     * spans, the other connection's, the lists that are not a change of
     * the writer's previous one). */
    CHECK(changes > STEPS && lost > 10);
    CHECK(reused > changes / 2 && reused < changes);
    unsigned distinct = 0;
    for (int c = 0; c < CONNS; c++) distinct += cl[c].next;
    CHECK(distinct > 8192); /* the writer's intern table (8,192 entries) restarted */
    CHECK_EQ_INT(mst_pftrace_writer_close(ref), MST_OK);
    CHECK_EQ_INT(mst_pftrace_writer_close(got), MST_OK);
    check_same_after_clock(ref_path, got_path);
    unlink(ref_path);
    unlink(got_path);
    rmdir(dir);
    for (int c = 0; c < CONNS; c++) mst_ids_sender_free(cl[c].sender);
    mst_buf_free(&pkt);
    mst_buf_free(&whole);
    mst_arena_release(&arena);
    mst_span_batch_free(batch);
    mst_id_streams_free(streams);
}

/* The chain's side of a by-origin list: the last list's iids to copy
 * kept runs from (mst_pft_id_chain_last_iids), and a change told by its
 * places that left, which may be none (no `which`, no positions): the
 * same delta and record as told by `which`. */
static void test_chain_change_without_which(void) {
    mst_pft_id_chains *c = mst_pft_id_chains_new();
    CHECK(c != NULL);
    CHECK(mst_pft_id_chain_last_iids(c, 7) == NULL);
    uint64_t iids[4] = {11, 12, 13, 14};
    uint32_t refs[4] = {1, 2, 3, 4};
    mst_pft_id_delta d;
    CHECK(mst_pft_id_chain_step(c, 7, iids, NULL, 3, &d)); /* without refs: none to copy */
    CHECK(mst_pft_id_chain_last_iids(c, 7) == NULL);
    CHECK(mst_pft_id_chain_step(c, 7, iids, refs, 3, &d));
    const uint64_t *last = mst_pft_id_chain_last_iids(c, 7);
    CHECK(last != NULL && last[0] == 11 && last[2] == 13);
    CHECK(mst_pft_id_chain_last_iids(c, 8) == NULL);
    /* none left, one joined: no places read at all */
    CHECK(mst_pft_id_chain_step_change(c, 7, iids, refs, 4, NULL, 3, 3, NULL, 0, &d));
    CHECK(d.pos == 2 && d.n_left == 0 && d.n_joined == 1 && d.joined[0] == 14);
    /* the first left (place 0), by places and by which: the same */
    uint64_t next[3] = {12, 13, 14};
    uint32_t next_refs[3] = {2, 3, 4}, which[3] = {1, 2, 3};
    mst_pft_id_chains *c2 = mst_pft_id_chains_new();
    CHECK(c2 != NULL);
    CHECK(mst_pft_id_chain_step(c2, 7, iids, refs, 3, &d));
    CHECK(mst_pft_id_chain_step(c2, 7, iids, refs, 3, &d));
    CHECK(mst_pft_id_chain_step(c2, 7, iids, refs, 4, &d)); /* c2 where c is */
    mst_pft_id_delta by_left, by_which;
    CHECK(mst_pft_id_chain_step_change(c, 7, next, next_refs, 3, NULL, 3, 4, (const uint32_t[]){0}, 1,
                                       &by_left));
    CHECK(mst_pft_id_chain_step_shaped(c2, 7, next, next_refs, 3, which, 3, 4, &by_which));
    CHECK(by_left.pos == 3 && by_which.pos == 3);
    CHECK(by_left.n_left == 1 && by_which.n_left == 1 && by_left.left[0] == 11 && by_which.left[0] == 11);
    CHECK(by_left.n_joined == 0 && by_which.n_joined == 0);
    last = mst_pft_id_chain_last_iids(c, 7);
    CHECK(last != NULL && last[0] == 12 && last[2] == 14);
    mst_pft_id_chains_free(c);
    mst_pft_id_chains_free(c2);
}

/* ------------------------------------------------------------ by-origin branches */

typedef struct origin_pair {
    mst_pftrace_writer *ref, *got; /* without / with the origins */
    char dir[32], ref_path[64], got_path[64];
    mst_buf pkt;
    mst_arena arena;
    int step;
    int64_t seq;
    const char *ids[64];  /* the writer stream's current list (what it recorded) */
    unsigned n;
} origin_pair;

static void pair_open(origin_pair *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "/tmp/mst_pft_orig_XXXXXX");
    CHECK(mkdtemp(p->dir) != NULL);
    snprintf(p->ref_path, sizeof p->ref_path, "%s/ref.pftrace", p->dir);
    snprintf(p->got_path, sizeof p->got_path, "%s/got.pftrace", p->dir);
    char err[256];
    CHECK_EQ_INT(mst_pftrace_writer_open(p->ref_path, 1, &p->ref, err, sizeof err), MST_OK);
    CHECK_EQ_INT(mst_pftrace_writer_open(p->got_path, 1, &p->got, err, sizeof err), MST_OK);
    mst_buf_init(&p->pkt, 0);
    mst_arena_init(&p->arena);
}

/* One step whose request.ids text is `ids[0..n)` written compactly (as the
 * forwarder rebuilds a list), to `ref` as it is and to `got` with origin
 * `o` (its conn, stream and seq filled in here: the next of the stream). */
static void pair_step_text(origin_pair *p, const char *const *ids, unsigned n, mst_pf_ids_origin o,
                           const char *raw);
static void pair_step(origin_pair *p, const char *const *ids, unsigned n, mst_pf_ids_origin o) {
    pair_step_text(p, ids, n, o, NULL);
}

/* pair_step, with the request.ids value replaced by `raw` (not NULL) after
 * decoding: a text the packet decoder would not pass, as both writers see it. */
static void pair_step_text(origin_pair *p, const char *const *ids, unsigned n, mst_pf_ids_origin o,
                           const char *raw) {
    mst_buf_reset(&p->pkt);
    mst_buf_append(&p->pkt, MST_PERFETTO_MAGIC, strlen(MST_PERFETTO_MAGIC));
    char head[400];
    int step = p->step++;
    snprintf(head, sizeof head,
             "{\"name\":\"vllm.scheduler.schedule\",\"category\":\"step\",\"trace_id\":\"%032x\","
             "\"span_id\":\"%016x\",\"start_time_ns\":%d,\"end_time_ns\":%d,\"kind\":1,\"status\":1,"
             "\"attributes\":{\"process.pid\":5,\"thread.id\":3,\"request.ids\":[",
             step + 1, step + 1, 1000 + 10 * step, 1005 + 10 * step);
    mst_buf_append(&p->pkt, head, strlen(head));
    for (unsigned i = 0; i < n; i++) {
        if (i) mst_buf_append(&p->pkt, ",", 1);
        put_json_str(&p->pkt, ids[i]);
    }
    mst_buf_append(&p->pkt, "]},\"links\":[]}", 14);
    CHECK(!p->pkt.failed);
    mst_pf_span sp;
    char err[256];
    CHECK_EQ_INT(mst_perfetto_packet_decode(p->pkt.data, p->pkt.len, &p->arena, &sp, err, sizeof err), MST_OK);
    CHECK(!sp.ids_origin.valid);
    size_t attr = sp.n_attrs;
    for (size_t i = 0; i < sp.n_attrs; i++)
        if (sp.attrs[i].key.len == 11 && memcmp(sp.attrs[i].key.ptr, "request.ids", 11) == 0) attr = i;
    CHECK(attr < sp.n_attrs);
    if (raw) sp.attrs[attr].value = (mst_json_slice){raw, strlen(raw)};
    CHECK_EQ_INT(mst_pftrace_writer_add_span(p->ref, &sp), MST_OK);
    o.valid = true;
    o.conn = 9;
    o.stream = 1;
    o.seq = ++p->seq;
    sp.ids_origin = o;
    sp.ids_attr = attr;
    CHECK_EQ_INT(mst_pftrace_writer_add_span(p->got, &sp), MST_OK);
    mst_arena_reset_keep(&p->arena, 64u << 10);
    memcpy(p->ids, ids, n * sizeof *ids);
    p->n = n;
}

/* The change of the pair's current list: the places left[0..n_left)
 * (ascending) taken out, joined[0..n_joined) appended. */
static void pair_change(origin_pair *p, const uint32_t *left, unsigned n_left, const char *const *joined,
                        unsigned n_joined) {
    const char *next[64];
    unsigned n = 0, l = 0;
    for (unsigned i = 0; i < p->n; i++) {
        if (l < n_left && left[l] == i) l++;
        else next[n++] = p->ids[i];
    }
    unsigned from = n;
    for (unsigned j = 0; j < n_joined; j++) next[n++] = joined[j];
    mst_pf_ids_origin o = {.change = true, .n_base = p->n, .n_left = n_left, .joined_from = from, .left = left};
    pair_step(p, next, n, o);
}

/* Closes both writers; the files must be the same after the clock. */
static void pair_close_same(origin_pair *p) {
    CHECK_EQ_INT(mst_pftrace_writer_close(p->ref), MST_OK);
    CHECK_EQ_INT(mst_pftrace_writer_close(p->got), MST_OK);
    check_same_after_clock(p->ref_path, p->got_path);
    unlink(p->ref_path);
    unlink(p->got_path);
    rmdir(p->dir);
    mst_buf_free(&p->pkt);
    mst_arena_release(&p->arena);
}

/* Each branch of the by-origin split (pftrace_writer.c split_by_origin):
 * kept runs cut at the start, in the middle and at the end, none leaving,
 * all leaving, joined ids already in the list, that just left or listed
 * twice (split by origin, but not of the delta's shape), and origins the
 * text does not match (a kept id of another length; lengths that add up
 * over the run but not per id; another separator inside a run or after
 * it; positions that left out of order): those take the general split. Every list is written as
 * the writer without origins writes it. */
static void test_by_origin_branches(void) {
    origin_pair p;
    pair_open(&p);
    static const char *const base[10] = {"a",        "bb",    "cmpl-ccc", "d",      "eeeee-1",
                                         "ffffff-22", "g",     "hh",       "i-9999", "jjj"};
    pair_step(&p, base, 10, (mst_pf_ids_origin){0}); /* the keyframe */
    uint64_t by_origin = 0;
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), by_origin);
    /* leaving at the start, one joining */
    pair_change(&p, (const uint32_t[]){0, 1}, 2, (const char *const[]){"k-new"}, 1);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    /* in the middle, none joining */
    pair_change(&p, (const uint32_t[]){2, 4}, 2, NULL, 0);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    /* at the end (the last two), two joining */
    pair_change(&p, (const uint32_t[]){4, 5}, 2, (const char *const[]){"l-1", "mm-2"}, 2);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    /* none leaving (no positions at all), one joining */
    pair_change(&p, NULL, 0, (const char *const[]){"n"}, 1);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    /* none leaving, none joining: the same list */
    pair_change(&p, NULL, 0, NULL, 0);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    /* a joined id that just left */
    pair_change(&p, (const uint32_t[]){1}, 1, (const char *const[]){p.ids[1]}, 1);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    /* a joined id already kept in the list (which then has an id twice:
     * no base for a change, the next list is a keyframe) */
    pair_change(&p, (const uint32_t[]){0}, 1, (const char *const[]){"o", p.ids[2]}, 2);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    pair_step(&p, base, 10, (mst_pf_ids_origin){0});
    /* one joined twice */
    pair_change(&p, NULL, 0, (const char *const[]){"q-twice", "q-twice"}, 2);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    pair_step(&p, base, 10, (mst_pf_ids_origin){0});
    /* all leaving, three joining */
    uint32_t all[10];
    for (uint32_t i = 0; i < 10; i++) all[i] = i;
    pair_change(&p, all, 10, (const char *const[]){"r-1", "s-22", "t-333"}, 3);
    CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), ++by_origin);
    /* the origin's base but kept ids of other lengths in the text: split
     * from the text (ref writes what the text says) */
    {
        static const char *const other[3] = {"r-1", "t-333-longer", "u"};
        mst_pf_ids_origin o = {.change = true, .n_base = 3, .n_left = 1, .joined_from = 2,
                               .left = (const uint32_t[]){1}};
        pair_step(&p, other, 3, o);
        CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), by_origin);
    }
    /* lengths that add up per run but not per id */
    {
        static const char *const start[4] = {"ab", "c", "dd", "e"};
        pair_step(&p, start, 4, (mst_pf_ids_origin){0});
        static const char *const shifted[4] = {"ab", "c", "d", "de"};
        mst_pf_ids_origin o = {.change = true, .n_base = 4, .n_left = 0, .joined_from = 4};
        uint64_t before = mst_pftrace_writer_lists_by_origin(p.got);
        pair_step(&p, shifted, 4, o);
        CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), before);
    }
    /* every closing quote where the lengths put it, but another separator
     * inside the run, or after the last kept id: neither is the entries'
     * layout (ref writes them as JSON text), the general split says so */
    {
        static const char *const start[3] = {"ab", "c", "dd"};
        pair_step(&p, start, 3, (mst_pf_ids_origin){0});
        uint64_t before = mst_pftrace_writer_lists_by_origin(p.got);
        mst_pf_ids_origin o = {.change = true, .n_base = 3, .n_left = 0, .joined_from = 3};
        pair_step_text(&p, start, 3, o, "[\"ab\";\"c\",\"dd\"]");
        CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), before);
        pair_step(&p, start, 3, (mst_pf_ids_origin){0});
        pair_step_text(&p, start, 3, o, "[\"ab\",\"c\",\"dd\"}");
        CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), before);
        pair_step(&p, start, 3, (mst_pf_ids_origin){0});
        pair_step_text(&p, start, 3, o, "[\"ab\",\"c\"]\"dd\"]");
        CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), before);
        /* the last kept id's closing quote off its place, a joined id after */
        pair_step(&p, start, 3, (mst_pf_ids_origin){0});
        pair_step_text(&p, start, 3, o, "[\"ab\",\"c\",\"dxy,\"e\"]");
        CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), before);
    }
    /* positions that left out of order (the forwarder never makes them):
     * the general split */
    {
        static const char *const start[5] = {"v0", "v1", "v2", "v3", "v4"};
        pair_step(&p, start, 5, (mst_pf_ids_origin){0});
        uint64_t before = mst_pftrace_writer_lists_by_origin(p.got);
        static const char *const next[3] = {"v0", "v2", "v4"};
        mst_pf_ids_origin o = {.change = true, .n_base = 5, .n_left = 2, .joined_from = 3,
                               .left = (const uint32_t[]){3, 1}};
        pair_step(&p, next, 3, o);
        CHECK_EQ_INT(mst_pftrace_writer_lists_by_origin(p.got), before);
    }
    pair_close_same(&p);
}

static const mst_test_case TESTS[] = {
    {"base_is", test_base_is},
    {"split_rest", test_split_rest},
    {"list_set_change_is_list_set", test_list_set_change_is_list_set},
    {"file_same_through_changes", test_file_same_through_changes},
    {"by_origin_branches", test_by_origin_branches},
    {"chain_change_without_which", test_chain_change_without_which},
};

MST_TEST_MAIN(TESTS)
