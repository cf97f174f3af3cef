/*
 * adapters.c — what the request-aware adapters (docs/reference/spans.md "Adapters") read from vLLM's
 * business objects, in C: request ids of a batch (SchedulerOutput's
 * num_scheduled_tokens keys, EngineCoreOutput.request_id), batch sizes, the
 * span links to the requests' known contexts, registration of a request's
 * context (request / request_context) and dropping it when it finishes
 * (output), and after a scheduling step the scheduler's waiting/running
 * queue lengths and KV-cache usage (the forwarder plots them as counters).
 * It drives the step record (step_record.c: per scheduled request, in the
 * same pass over num_scheduled_tokens; finished outputs' reasons) and notes
 * when the scheduler received each request (queued_times.c). Objects are
 * duck-typed by attribute name only, so the same code serves vLLM's
 * dataclasses/msgspec structs and test doubles.
 *
 * Error rule: a missing attribute or an unexpected shape means "nothing to
 * record" (return 0); only a Python exception raised while reading (a
 * property that throws, out of memory) is an internal failure (return -1),
 * which the Hook counts towards switching itself off.
 */
#include "adapters.h"
#include "context.h"
#include "pyattr.h"
#include "queued_times.h"
#include "reqtable.h"
#include "state.h"

#include <string.h>

/* Objects that cannot be a request / SchedulerOutput: skip without getattr. */
static bool plain_value(PyObject *o) {
    return o == Py_None || PyUnicode_Check(o) || PyLong_Check(o) || PyFloat_Check(o) ||
           PyBytes_Check(o) || PyDict_Check(o) || PyTuple_Check(o) || PyBool_Check(o);
}

void mstn_batch_init(mstn_batch *b) {
    b->n_ids = 0;
    b->n_ids_dropped = 0;
    b->n_links = 0;
    b->n_unsampled = 0;
    b->request_count = -1;
    b->scheduled_tokens = -1;
    b->waiting = b->running = -1;
    b->kv_usage = -1.0;
    b->step = NULL;
    b->shared = NULL;
    b->block = NULL;
    b->link_at = b->links;
    b->synthetic_at = b->link_synthetic;
    b->step_index = -1;
    b->have_step_link = false;
}

void mstn_batch_release(mstn_batch *b) {
    if (b->shared) { /* the ids and the block are the share's */
        mstn_share_release(b->shared);
        b->shared = NULL;
    } else {
        for (size_t i = 0; i < b->n_ids; i++)
            Py_DECREF(b->owned[i]);
        mst_batch_block_release(b->block);
    }
    b->block = NULL;
    b->n_ids = 0;
    mstn_step_release(b->step);
    b->step = NULL;
}

/* Adds one request id: stored (with a link when its context is known and
 * sampled); a request whose context is known but unsampled is left out
 * entirely ("nothing recorded for that request"). 1 stored, 0 left out,
 * -1 error. */
static int batch_add_id(mstn_batch *b, PyObject *key) {
    if (b->n_ids >= MSTN_MAX_IDS) {
        b->n_ids_dropped++;
        return 0;
    }
    const char *u;
    Py_ssize_t n;
    PyObject *s = mstn_id_utf8(key, &u, &n);
    if (!s)
        return -1;
    mstn_ctx ctx;
    bool known = mstn_req_get(u, (size_t)n, &ctx);
    if (known && !mstn_ctx_sampled(&ctx)) {
        Py_DECREF(s);
        b->n_unsampled++;
        return 0;
    }
    size_t i = b->n_ids++;
    b->owned[i] = s;
    b->ids[i] = u;
    b->id_lens[i] = (size_t)n;
    if (known && b->n_links < MSTN_MAX_LINKS) {
        mst_link_ref *l = &b->links[b->n_links];
        l->trace_id = ctx.trace_id;
        l->span_id = ctx.span_id;
        l->trace_flags = ctx.flags;
        l->is_remote = ctx.remote;
        l->item = (uint16_t)i;
        b->link_synthetic[b->n_links] = ctx.synthetic;
        b->n_links++;
    }
    return 1;
}

void mstn_batch_link_ctx(const mstn_batch *b, size_t k, mstn_ctx *out) {
    const mst_link_ref *l = &b->link_at[k];
    out->trace_id = l->trace_id;
    out->span_id = l->span_id;
    out->flags = l->trace_flags;
    out->remote = l->is_remote;
    out->synthetic = b->synthetic_at[k];
}

static int as_int64(PyObject *v, int64_t *out) {
    if (!PyLong_Check(v))
        return 0;
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* out of range: not worth failing the hook */
        return 0;
    }
    *out = (int64_t)x;
    return 1;
}

/* The batch of a SchedulerOutput; with b->step set, each stored request's
 * tokens and phase go into the step record too. */
static int batch_from_nst(mstn_batch *b, PyObject *so) {
    PyObject *nst = NULL, *total = NULL;
    int r = mstn_getattr_opt(so, mstn_n.num_scheduled_tokens, &nst);
    if (r <= 0)
        return r;
    int rc = 0;
    if (PyDict_Check(nst)) {
        PyObject *key, *val;
        Py_ssize_t pos = 0;
        b->request_count = PyDict_GET_SIZE(nst);
        while (PyDict_Next(nst, &pos, &key, &val)) {
            Py_INCREF(key);
            Py_INCREF(val);
            rc = batch_add_id(b, key);
            if (rc > 0 && b->step)
                mstn_step_scheduled(b->step, key, val);
            Py_DECREF(val);
            Py_DECREF(key);
            if (rc < 0)
                break;
        }
    }
    Py_DECREF(nst);
    if (rc < 0)
        return -1;
    r = mstn_getattr_opt(so, mstn_n.total_num_scheduled_tokens, &total);
    if (r < 0)
        return -1;
    if (r > 0) {
        as_int64(total, &b->scheduled_tokens);
        Py_DECREF(total);
    }
    return 0;
}

int mstn_batch_from_schedule(mstn_batch *b, PyObject *so, PyObject *sched) {
    if (sched && plain_value(sched))
        sched = NULL;
    if (plain_value(so))
        so = NULL;
    b->step = mstn_step_acquire();
    if (b->step)
        mstn_step_begin(b->step, so, sched);
    if (!so)
        return 0;
    if (batch_from_nst(b, so) < 0)
        return -1;
    if (b->step)
        mstn_step_finish(b->step, so, sched);
    return 0;
}

void mstn_batch_make_block(mstn_batch *b) {
    if (!b->block && !b->shared)
        b->block = mst_batch_block_new(b->ids, b->id_lens, b->n_ids, b->links, b->n_links);
}

void mstn_batch_share_step(mstn_batch *b, PyObject *so, const mstn_ctx *step_ctx) {
    if (!so || plain_value(so) || b->shared || !b->block)
        return;
    mstn_step_share *sh = mstn_share_new();
    if (!sh)
        return;
    sh->so = Py_NewRef(so);
    sh->block = b->block;
    b->block = NULL; /* the reference is the share's now */
    sh->n_ids = b->n_ids;
    sh->n_ids_dropped = b->n_ids_dropped;
    sh->n_unsampled = b->n_unsampled;
    sh->request_count = b->request_count;
    sh->scheduled_tokens = b->scheduled_tokens;
    memcpy(sh->link_synthetic, b->link_synthetic, b->n_links * sizeof *b->link_synthetic);
    sh->n_links = b->n_links;
    sh->step_index = b->step && b->step->is_step ? b->step->index : -1;
    sh->have_step_ctx = step_ctx != NULL;
    if (step_ctx)
        sh->step_ctx = *step_ctx;
    mstn_share_publish(sh);
}

/* A model call given the step's own SchedulerOutput: its batch, without
 * reading the object again (step_share.c): the same ids and request links
 * (the step's batch block, which its span reads without copying; b->ids is
 * left empty), plus a link to the step's span. */
static void batch_from_share(mstn_batch *b, mstn_step_share *sh) {
    b->shared = sh;
    b->block = sh->block;
    b->n_ids = sh->n_ids;
    b->n_ids_dropped = sh->n_ids_dropped;
    b->n_unsampled = sh->n_unsampled;
    b->request_count = sh->request_count;
    b->scheduled_tokens = sh->scheduled_tokens;
    b->step_index = sh->step_index;
    b->link_at = mst_batch_block_links(sh->block, NULL);
    b->synthetic_at = sh->link_synthetic;
    b->n_links = sh->n_links;
    if (sh->have_step_ctx) {
        b->have_step_link = true;
        b->step_link = sh->step_ctx;
    }
}

/* len(getattr(obj, name)) or -1 when that cannot be read. */
static int64_t attr_len(PyObject *obj, PyObject *name) {
    PyObject *v = NULL;
    if (mstn_getattr_opt(obj, name, &v) <= 0) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t n = PyList_Check(v) ? PyList_GET_SIZE(v) : PyObject_Length(v);
    Py_DECREF(v);
    if (n < 0) {
        PyErr_Clear();
        return -1;
    }
    return (int64_t)n;
}

/* vLLM v1 (vllm/v1/core/sched/scheduler.py): Scheduler.waiting is a request
 * queue (a deque for FCFS, a heap for priority; both have __len__),
 * Scheduler.running a list, and KVCacheManager.usage a property returning
 * BlockPool.get_usage(): 1 - free blocks / (blocks - 1). These are read once
 * per scheduling step (a few attribute loads and len calls), so they are
 * cheap next to schedule() itself. A failure here only means "not
 * recorded": these statistics are never worth disabling the hook for. */
void mstn_batch_from_scheduler(mstn_batch *b, PyObject *sched) {
    if (plain_value(sched))
        return;
    b->waiting = attr_len(sched, mstn_n.waiting);
    b->running = attr_len(sched, mstn_n.running);
    PyObject *kv = NULL, *u = NULL;
    if (mstn_getattr_opt(sched, mstn_n.kv_cache_manager, &kv) > 0 &&
        mstn_getattr_opt(kv, mstn_n.usage, &u) > 0 && PyFloat_Check(u)) {
        double d = PyFloat_AS_DOUBLE(u);
        if (d >= 0.0 && d <= 1.0)
            b->kv_usage = d;
    } else if (u && PyLong_Check(u)) {
        long long x = PyLong_AsLongLong(u); /* get_usage returns int 0 with no blocks */
        if (x == 0 || x == 1)
            b->kv_usage = (double)x;
    }
    Py_XDECREF(u);
    Py_XDECREF(kv);
    PyErr_Clear();
}

/* Calls fn(arg) for each positional argument, then each keyword value, until
 * fn returns non-zero (its value is returned). */
typedef int (*arg_visitor)(PyObject *arg, void *state);
static int visit_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      arg_visitor fn, void *state) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) {
        int r = fn(args[i], state);
        if (r)
            return r;
    }
    return 0;
}

/* Is `arg` a SchedulerOutput? It must have num_scheduled_tokens *as a
 * dict*: the model runner itself (self, the first argument of
 * GPUModelRunner.execute_model) has a `num_scheduled_tokens` attribute too,
 * a CpuGpuBuffer, and taking it for the batch recorded nothing.
 * 1 yes (read into the batch), 0 no, -1 error. */
static int visit_scheduler_output(PyObject *arg, void *state) {
    if (plain_value(arg) || PyList_Check(arg))
        return 0;
    mstn_batch *b = state;
    PyObject *nst = NULL;
    int r = mstn_getattr_opt(arg, mstn_n.num_scheduled_tokens, &nst);
    if (r <= 0)
        return r;
    bool is_dict = PyDict_Check(nst);
    Py_DECREF(nst);
    if (!is_dict)
        return 0;
    return batch_from_nst(b, arg) < 0 ? -1 : 1;
}

static PyObject *kwarg(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                       PyObject *name);

/* The `scheduler_output=` keyword first (vLLM's parameter name everywhere),
 * then any positional or keyword argument that is a SchedulerOutput. */
int mstn_batch_from_model_args(mstn_batch *b, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    PyObject *so = kwarg(args, nargs, kwnames, mstn_n.scheduler_output);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    mstn_step_share *sh = mstn_share_find(so);
    for (Py_ssize_t i = 0; !sh && i < nargs + nkw; i++)
        sh = mstn_share_find(args[i]);
    if (sh) {
        batch_from_share(b, sh);
        return 0;
    }
    if (so) {
        int r = visit_scheduler_output(so, b);
        if (r)
            return r < 0 ? -1 : 0;
    }
    return visit_args(args, nargs, kwnames, visit_scheduler_output, b) < 0 ? -1 : 0;
}

/* ----------------------------------------------------------- outputs */

/* True when `list` is a non-empty list whose first item has .request_id. */
static int is_output_list(PyObject *list) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) == 0)
        return 0;
    PyObject *first = PyList_GET_ITEM(list, 0), *rid = NULL;
    if (plain_value(first))
        return 0;
    Py_INCREF(first);
    int r = mstn_getattr_opt(first, mstn_n.request_id, &rid);
    Py_DECREF(first);
    Py_XDECREF(rid);
    return r;
}

static int visit_outputs(PyObject *arg, void *state) {
    PyObject **found = state;
    int r = is_output_list(arg);
    if (r < 0)
        return -1;
    if (r > 0) {
        *found = Py_NewRef(arg);
        return 1;
    }
    if (plain_value(arg) || PyList_Check(arg))
        return 0;
    PyObject *outs = NULL;
    r = mstn_getattr_opt(arg, mstn_n.outputs, &outs);
    if (r <= 0)
        return r;
    r = is_output_list(outs);
    if (r > 0) {
        *found = outs;
        return 1;
    }
    Py_DECREF(outs);
    return r < 0 ? -1 : 0;
}

/* For an output whose request is unknown here but carries trace_headers
 * (the API server sees them on EngineCoreOutput): register that context, so
 * output spans link to the request in this process too. Never auto-traces. */
static int learn_from_output(PyObject *o, PyObject *rid) {
    PyObject *th = NULL;
    int r = mstn_getattr_opt(o, mstn_n.trace_headers, &th);
    if (r <= 0)
        return r;
    r = 0;
    if (th != Py_None) {
        Py_ssize_t n = 0;
        const char *u = PyUnicode_AsUTF8AndSize(rid, &n);
        mstn_ctx old;
        if (!u)
            r = -1;
        else if (!mstn_req_get(u, (size_t)n, &old))
            r = mstn_register(rid, th, false) < 0 ? -1 : 0;
    }
    Py_DECREF(th);
    return r;
}

/* An output with finish_reason set goes into output.finished_ids /
 * finish_reasons (b->step, taken on the first). 0, or -1 on error. */
static int note_finished(mstn_batch *b, PyObject *o, const char *id) {
    PyObject *fr = NULL;
    int r = mstn_getattr_opt(o, mstn_n.finish_reason, &fr);
    if (r <= 0)
        return r;
    if (fr != Py_None && (b->step || (b->step = mstn_step_acquire())))
        mstn_step_output_finished(b->step, id, fr);
    Py_DECREF(fr);
    return 0;
}

int mstn_batch_from_output_args(mstn_batch *b, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames, PyObject **outputs_list) {
    PyObject *list = NULL;
    *outputs_list = NULL;
    if (visit_args(args, nargs, kwnames, visit_outputs, &list) < 0)
        return -1;
    if (!list)
        return 0;
    b->request_count = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *o = PyList_GET_ITEM(list, i), *rid = NULL;
        Py_INCREF(o);
        int r = plain_value(o) ? 0 : mstn_getattr_opt(o, mstn_n.request_id, &rid);
        if (r > 0 && PyUnicode_Check(rid))
            r = learn_from_output(o, rid);
        /* request_id None names no request (as in the request adapter), not
         * the request whose id is the string "None". */
        if (r >= 0 && rid && rid != Py_None) {
            size_t at = b->n_ids;
            r = batch_add_id(b, rid);
            if (r > 0)
                r = note_finished(b, o, b->ids[at]);
        }
        Py_XDECREF(rid);
        Py_DECREF(o);
        if (r < 0) {
            Py_DECREF(list);
            return -1;
        }
    }
    *outputs_list = list;
    return 0;
}

int mstn_finish_outputs(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(list); i++) {
        PyObject *o = PyList_GET_ITEM(list, i), *fr = NULL, *rid = NULL;
        if (plain_value(o))
            continue;
        Py_INCREF(o);
        int r = mstn_getattr_opt(o, mstn_n.finish_reason, &fr);
        if (r > 0 && fr != Py_None) /* FinishReason is an IntEnum: STOP == 0 is set */
            r = mstn_getattr_opt(o, mstn_n.request_id, &rid);
        else
            r = r < 0 ? -1 : 0;
        /* request_id None names no request: finishing str(None) would drop
         * an unrelated request registered as "None" (fuzz_trace_headers). */
        if (r > 0 && rid != Py_None) {
            const char *u;
            Py_ssize_t len;
            PyObject *s = mstn_id_utf8(rid, &u, &len);
            if (s)
                mstn_req_drop(u, (size_t)len);
            else
                r = -1;
            Py_XDECREF(s);
        }
        Py_XDECREF(fr);
        Py_XDECREF(rid);
        Py_DECREF(o);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------ request registration */

/* kwargs[name] from a vectorcall's kwnames, borrowed, or NULL. */
static PyObject *kwarg(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                       PyObject *name) {
    if (!kwnames)
        return NULL;
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (k == name || PyUnicode_Compare(k, name) == 0)
            return args[nargs + i];
    }
    return NULL;
}

int mstn_register_from_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                            bool skip_self, bool kw_allowed, const mst_scope *span_scope) {
    PyObject *rid = NULL, *headers = NULL; /* new references */
    PyObject *obj = NULL;                  /* borrowed: the request object  */
    bool headers_from_obj = false;
    int rc = 0;
    if (kw_allowed) {
        PyObject *k = kwarg(args, nargs, kwnames, mstn_n.request_id);
        if (k)
            rid = Py_NewRef(k);
        k = kwarg(args, nargs, kwnames, mstn_n.trace_headers);
        if (k)
            headers = Py_NewRef(k);
    }
    /* The request object: the first positional argument that has
     * .request_id (self, a Scheduler or EngineCore, has none). */
    for (Py_ssize_t i = skip_self ? 1 : 0; i < nargs && !rid; i++) {
        PyObject *a = args[i], *v = NULL;
        if (plain_value(a) || PyList_Check(a))
            continue;
        int r = mstn_getattr_opt(a, mstn_n.request_id, &v);
        if (r < 0) {
            rc = -1;
            goto done;
        }
        if (r == 0)
            continue;
        rid = v;
        obj = a;
        if (!headers) {
            r = mstn_getattr_opt(a, mstn_n.trace_headers, &headers);
            if (r < 0) {
                rc = -1;
                goto done;
            }
            headers_from_obj = true;
        }
    }
    /* request_context (EngineCore.add_request, then Scheduler.add_request:
     * the later wins): when the scheduler received it, for step.queued_ns. */
    if (!kw_allowed && mstn_g.tracer && rid && PyUnicode_Check(rid)) {
        Py_ssize_t n = 0;
        const char *u = PyUnicode_AsUTF8AndSize(rid, &n);
        if (u)
            mstn_queued_put(u, (size_t)n, mst_clock_now_ns());
        else
            PyErr_Clear();
    }
    /* Only the request adapter (kw_allowed) may auto-generate: it runs in
     * the front-end process and writes the decision into trace_headers
     * for EngineCore; request_context (EngineCore) only reads, so the 1-in-N
     * counter of MS_PROFILER_SAMPLE_RATE is applied once per request. The
     * span + injection need the headers read from the object itself. */
    if (rid && rid != Py_None)
        rc = mstn_register_ex(rid, headers, kw_allowed, headers_from_obj ? obj : NULL,
                              span_scope) < 0 ? -1 : 0;
done:
    Py_XDECREF(rid);
    Py_XDECREF(headers);
    return rc;
}
