/*
 * hook_sync.c — a synchronous hooked call: the `call` adapter (span around
 * the call, current while it runs) and the batch adapters `schedule`,
 * `model` and `output` (the batch read before or after the call, applied to
 * the span at its end; finished outputs' request contexts dropped). See
 * hook_sync.h.
 */
#include "hook_sync.h"
#include "hook_invoke.h"
#include "hook_span.h"
#include "context.h"
#include "state.h"

static PyObject *call_adapter(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
    mstn_span_run sr;
    if (!mstn_hook_span_begin(r, &sr, NULL, mst_clock_now_ns()))
        return mstn_hook_invoke(h, r, args, nargs, kwnames);
    mstn_push(&sr.ctx);
    PyObject *res = mstn_hook_invoke(h, r, args, nargs, kwnames);
    mstn_pop();
    mstn_hook_span_finish(r, &sr, NULL, res != NULL);
    return res;
}

/* schedule/model/output: the batch is read before (model, output) or after
 * (schedule) the call; the schedule span is started after the call with the
 * start time taken before it, so it is not current during the call. */
static PyObject *batch_adapter(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    mstn_batch b;
    mstn_span_run sr;
    PyObject *outputs = NULL, *res;
    bool started = false;
    uint64_t t0 = mst_clock_now_ns();
    mstn_batch_init(&b);
    if (r->adapter == MSTN_AD_SCHEDULE) {
        res = mstn_hook_invoke(h, r, args, nargs, kwnames);
        PyObject *t = NULL, *v = NULL, *tb = NULL;
        if (!res)
            PyErr_Fetch(&t, &v, &tb);
        else if (mstn_batch_from_schedule(&b, res, nargs > 0 ? args[0] : NULL) < 0)
            mstn_hook_failed(r);
        else if (nargs > 0)
            mstn_batch_from_scheduler(&b, args[0]); /* self: the Scheduler */
        if (!res)
            PyErr_Restore(t, v, tb);
        bool sharing = res && mstn_g.tracer && b.step && b.step->is_step;
        if (sharing) /* one copy of the ids and links for the step's spans */
            mstn_batch_make_block(&b);
        bool recorded = mstn_hook_span_begin(r, &sr, &b, t0);
        if (recorded)
            mstn_hook_span_finish(r, &sr, &b, res != NULL);
        if (sharing) /* for this step's model spans */
            mstn_batch_share_step(&b, res, recorded ? &sr.ctx : NULL);
        mstn_batch_release(&b);
        return res;
    }
    int rc = r->adapter == MSTN_AD_MODEL
                 ? mstn_batch_from_model_args(&b, args, nargs, kwnames)
                 : mstn_batch_from_output_args(&b, args, nargs, kwnames, &outputs);
    if (rc < 0)
        mstn_hook_failed(r);
    started = mstn_hook_span_begin(r, &sr, &b, t0);
    if (started)
        mstn_push(&sr.ctx);
    res = mstn_hook_invoke(h, r, args, nargs, kwnames);
    if (started) {
        mstn_pop();
        mstn_hook_span_finish(r, &sr, &b, res != NULL);
    }
    if (outputs) {
        if (res && mstn_finish_outputs(outputs) < 0)
            mstn_hook_failed(r);
        Py_DECREF(outputs);
    }
    mstn_batch_release(&b);
    return res;
}

PyObject *mstn_hook_call_sync(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
    if (r->adapter == MSTN_AD_CALL)
        return call_adapter(h, r, args, nargs, kwnames);
    return batch_adapter(h, r, args, nargs, kwnames);
}
