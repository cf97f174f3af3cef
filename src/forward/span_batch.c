/*
 * span_batch.c — decoded span batches that own their bytes (span_batch.h).
 *
 * Memory: a list of blocks with a bump pointer. Standard blocks are
 * BLOCK_BYTES; a packet that does not fit one gets a block of its own
 * size. Reset keeps up to KEEP_BLOCKS standard blocks for the next batch
 * and frees the rest, so a burst of huge packets is returned at once.
 * Pointers into a block never move (blocks are never realloc'd), which is
 * what lets the decoded spans point into them.
 */
#include "forward/span_batch.h"

#include <stdlib.h>
#include <string.h>

#include "core/arena.h"

#define BLOCK_BYTES (256u * 1024u)
#define KEEP_BLOCKS 5u
/* The decoder's scratch arena keeps a chunk this big between packets. */
#define SCRATCH_KEEP_BYTES (64u * 1024u)

typedef struct block {
    struct block *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} block;

struct mst_span_batch {
    block *blocks;      /* newest (the one being filled) first */
    block *spare;       /* kept standard blocks, empty */
    size_t bytes;       /* bytes taken from blocks in this batch */
    size_t count;
    mst_arena scratch;  /* the decoder's temporaries, emptied per packet */
    mst_pf_span spans[MST_SPAN_BATCH_MAX_SPANS];
};

mst_span_batch *mst_span_batch_new(void) {
    mst_span_batch *b = calloc(1, sizeof *b);
    if (b) mst_arena_init(&b->scratch);
    return b;
}

static void free_blocks(block *k) {
    while (k) {
        block *next = k->next;
        free(k);
        k = next;
    }
}

void mst_span_batch_free(mst_span_batch *b) {
    if (!b) return;
    free_blocks(b->blocks);
    free_blocks(b->spare);
    mst_arena_release(&b->scratch);
    free(b);
}

/* n bytes, 8-byte aligned, that stay where they are until the reset. */
static void *take(mst_span_batch *b, size_t n) {
    n = (n + 7u) & ~(size_t)7u;
    block *k = b->blocks;
    if (!k || k->cap - k->used < n) {
        if (n <= BLOCK_BYTES && b->spare) {
            k = b->spare;
            b->spare = k->next;
            k->used = 0;
        } else {
            size_t cap = n > BLOCK_BYTES ? n : BLOCK_BYTES;
            k = malloc(sizeof *k + cap);
            if (!k) return NULL;
            k->cap = cap;
            k->used = 0;
        }
        k->next = b->blocks;
        b->blocks = k;
    }
    void *p = k->data + k->used;
    k->used += n;
    b->bytes += n;
    return p;
}

/* Where a block list stood before a packet, to undo a failed one. */
typedef struct mark {
    block *head;
    size_t used, bytes;
} mark;

static mark mark_of(const mst_span_batch *b) {
    mark m = {b->blocks, b->blocks ? b->blocks->used : 0, b->bytes};
    return m;
}

static void undo_to(mst_span_batch *b, mark m) {
    while (b->blocks != m.head) { /* blocks added for the failed packet */
        block *k = b->blocks;
        b->blocks = k->next;
        if (k->cap == BLOCK_BYTES) {
            k->next = b->spare;
            b->spare = k;
        } else {
            free(k);
        }
    }
    if (b->blocks) b->blocks->used = m.used;
    b->bytes = m.bytes;
}

static bool inside(const void *p, const uint8_t *base, size_t len) {
    const uint8_t *q = p;
    return q >= base && q < base + len;
}

/* Strings the decoder unescaped into its arena move into the batch (with
 * their NUL: name and category are NUL-terminated); slices of the packet
 * already are in it. */
static bool keep_str(mst_span_batch *b, mst_str *s, const uint8_t *pkt, size_t len) {
    if (!s->ptr || inside(s->ptr, pkt, len)) return true;
    char *p = take(b, (size_t)s->len + 1);
    if (!p) return false;
    memcpy(p, s->ptr, s->len);
    p[s->len] = '\0';
    s->ptr = p;
    return true;
}

/* A value outside the packet (a request.ids list the stream state rebuilt,
 * in its own memory until the connection's next packet) moves into the
 * batch too. */
static bool keep_value(mst_span_batch *b, mst_json_slice *v, const uint8_t *pkt, size_t len) {
    if (!v->len || inside(v->ptr, pkt, len)) return true;
    char *p = take(b, v->len);
    if (!p) return false;
    memcpy(p, v->ptr, v->len);
    v->ptr = p;
    return true;
}

static bool keep_kvs(mst_span_batch *b, mst_pf_kv **kvs, size_t n, const uint8_t *pkt,
                     size_t len) {
    if (!n) return true;
    mst_pf_kv *copy = take(b, n * sizeof *copy);
    if (!copy) return false;
    memcpy(copy, *kvs, n * sizeof *copy);
    for (size_t i = 0; i < n; i++)
        if (!keep_str(b, &copy[i].key, pkt, len) || !keep_value(b, &copy[i].value, pkt, len)) return false;
    *kvs = copy;
    return true;
}

mst_status mst_span_batch_add(mst_span_batch *b, mst_id_streams *ids, uint64_t conn_id, const uint8_t *payload,
                              size_t len, mst_ids_outcome *outcome, char *err, size_t err_size) {
    mst_ids_outcome ignored;
    if (!outcome) outcome = &ignored;
    *outcome = MST_IDS_NONE;
    if (b->count == MST_SPAN_BATCH_MAX_SPANS) return MST_ERR_QUEUE_FULL;
    mark m = mark_of(b);
    uint8_t *pkt = take(b, len ? len : 1);
    if (!pkt) return MST_ERR_NOMEM;
    if (len) memcpy(pkt, payload, len);
    mst_pf_span *sp = &b->spans[b->count];
    mst_status st = mst_perfetto_packet_decode(pkt, len, &b->scratch, sp, err, err_size);
    if (st == MST_OK) st = mst_id_streams_apply(ids, conn_id, sp, &b->scratch, outcome, err, err_size);
    if (st == MST_OK) {
        bool ok = keep_str(b, &sp->name, pkt, len) && keep_str(b, &sp->category, pkt, len) &&
                  keep_kvs(b, &sp->attrs, sp->n_attrs, pkt, len) &&
                  keep_kvs(b, &sp->resource, sp->n_resource, pkt, len);
        if (ok && sp->ids_origin.n_left) { /* the parsed change's positions are in the scratch */
            uint32_t *left = take(b, sp->ids_origin.n_left * sizeof *left);
            if (left) memcpy(left, sp->ids_origin.left, sp->ids_origin.n_left * sizeof *left);
            sp->ids_origin.left = left;
            ok = left != NULL;
        }
        if (ok && sp->n_links) {
            mst_pf_link *links = take(b, sp->n_links * sizeof *links);
            if (links) memcpy(links, sp->links, sp->n_links * sizeof *links);
            sp->links = links;
            ok = links != NULL;
        }
        if (!ok) st = MST_ERR_NOMEM;
    }
    mst_arena_reset_keep(&b->scratch, SCRATCH_KEEP_BYTES);
    if (st != MST_OK) {
        undo_to(b, m);
        return st;
    }
    b->count++;
    return MST_OK;
}

bool mst_span_batch_full(const mst_span_batch *b) {
    return b->count == MST_SPAN_BATCH_MAX_SPANS || b->bytes >= MST_SPAN_BATCH_FULL_BYTES;
}

size_t mst_span_batch_count(const mst_span_batch *b) { return b->count; }

const mst_pf_span *mst_span_batch_span(const mst_span_batch *b, size_t i) { return &b->spans[i]; }

void mst_span_batch_reset(mst_span_batch *b) {
    size_t kept = 0;
    for (block *k = b->spare; k; k = k->next) kept++;
    block *k = b->blocks;
    while (k) {
        block *next = k->next;
        if (k->cap == BLOCK_BYTES && kept < KEEP_BLOCKS) {
            k->next = b->spare;
            b->spare = k;
            kept++;
        } else {
            free(k);
        }
        k = next;
    }
    b->blocks = NULL;
    b->bytes = 0;
    b->count = 0;
}
