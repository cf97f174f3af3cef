/*
 * otlp_group.c — the scope grouping both OTLP encoders share (otlp.h): a
 * batch's spans grouped by scope pointer, scopes in first-seen order, spans
 * in input order within a scope, in one allocation.
 */
#include "wire/otlp.h"

#include <stdlib.h>
#include <string.h>

mst_status mst_otlp_group_spans(const mst_span *const *spans, size_t n, mst_otlp_groups *g) {
    memset(g, 0, sizeof *g);
    if (n > UINT32_MAX - 1) return MST_ERR_TOO_LARGE;
    /* One block: scopes[n], group-of-span[n], order[n], start[n + 1]. */
    size_t bytes = n * sizeof(const mst_scope *) + (3 * n + 1) * sizeof(uint32_t);
    g->mem = malloc(bytes ? bytes : 1);
    if (!g->mem) return MST_ERR_NOMEM;
    g->scopes = (const mst_scope **)g->mem;
    uint32_t *group_of = (uint32_t *)(g->scopes + n);
    g->order = group_of + n;
    g->start = g->order + n;
    uint32_t last = 0;
    for (size_t i = 0; i < n; i++) {
        const mst_scope *sc = spans[i]->scope;
        uint32_t k;
        if (g->n_scopes && g->scopes[last] == sc) {
            k = last; /* batches are runs of one hook's spans: check last hit */
        } else {
            for (k = 0; k < g->n_scopes && g->scopes[k] != sc; k++) {}
            if (k == g->n_scopes) g->scopes[g->n_scopes++] = sc;
            last = k;
        }
        group_of[i] = k;
    }
    /* Counting sort keeps first-seen scope order and span order within. */
    memset(g->start, 0, (g->n_scopes + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) g->start[group_of[i] + 1]++;
    for (uint32_t k = 0; k < g->n_scopes; k++) g->start[k + 1] += g->start[k];
    /* start[k] is group k's cursor while filling... */
    for (size_t i = 0; i < n; i++) g->order[g->start[group_of[i]]++] = (uint32_t)i;
    /* ...and ends as group k's end = group k+1's start: shift back by one. */
    for (uint32_t k = g->n_scopes; k > 0; k--) g->start[k] = g->start[k - 1];
    g->start[0] = 0;
    return MST_OK;
}

void mst_otlp_groups_free(mst_otlp_groups *g) {
    free(g->mem);
    memset(g, 0, sizeof *g);
}
