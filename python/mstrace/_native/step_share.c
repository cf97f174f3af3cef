/*
 * step_share.c — the batch of the last scheduling step, for the model spans
 * of that step (step_share.h).
 *
 * Why: with the single-process executor the executor's, the worker's and
 * the model runner's execute_model run on EngineCore's thread right after
 * schedule(), each given the same SchedulerOutput. Reading it again in each
 * (a walk of num_scheduled_tokens, a request-table lookup and a link per
 * request) cost more than the schedule span itself at batch 256. A model
 * span handed the step's own SchedulerOutput (the same object: identity,
 * kept alive by the share so that a new object cannot take its address)
 * takes the step's ids and request links from here instead (the step's
 * batch block, mstrace.h: read by its span, not copied), and links the
 * step's span too
 * (docs/architecture.md "1a"). A worker in another
 * process has no share and reads the SchedulerOutput as before.
 *
 * Ownership: a share is reference-counted, so a model span whose call runs
 * while the next step is scheduled (another thread) keeps its batch
 * alive; the spans hold their own block references, dropped when they are
 * exported. All under the GIL. One share is recycled rather than freed: a
 * steady engine allocates nothing per step.
 */
#include "step_share.h"

#include <stdlib.h>

static mstn_step_share *g_current;
static mstn_step_share *g_spare; /* one released share, for the next step */

mstn_step_share *mstn_share_new(void) {
    mstn_step_share *sh = g_spare;
    if (sh)
        g_spare = NULL;
    else if (!(sh = malloc(sizeof *sh)))
        return NULL;
    sh->refs = 1;
    sh->so = NULL;
    sh->block = NULL;
    sh->n_ids = sh->n_ids_dropped = sh->n_unsampled = sh->n_links = 0;
    sh->request_count = sh->scheduled_tokens = -1;
    sh->step_index = -1;
    sh->have_step_ctx = false;
    return sh;
}

void mstn_share_release(mstn_step_share *sh) {
    if (!sh || --sh->refs)
        return;
    mst_batch_block_release(sh->block); /* the spans given it hold their own */
    sh->block = NULL;
    sh->n_ids = 0;
    Py_CLEAR(sh->so);
    if (!g_spare)
        g_spare = sh;
    else
        free(sh);
}

void mstn_share_publish(mstn_step_share *sh) {
    mstn_step_share *old = g_current;
    g_current = sh;
    mstn_share_release(old);
}

mstn_step_share *mstn_share_find(PyObject *so) {
    mstn_step_share *sh = g_current;
    if (!sh || !so || sh->so != so)
        return NULL;
    sh->refs++;
    return sh;
}

void mstn_share_forget(void) { mstn_share_publish(NULL); }
