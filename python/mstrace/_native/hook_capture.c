/*
 * hook_capture.c — test-only: while `_native._capture(True)` is on
 * (mstn_g.capture is a list), every recorded hook span is mirrored into a
 * dict appended to that list (name, scope, kind, ids, parent, times, status,
 * attributes, links), so the Python tests can check what a hook recorded
 * without an exporter. Costs one branch per span when off. See
 * hook_capture.h.
 */
#include "hook_capture.h"
#include "context.h"
#include "state.h"

static void hex_ids(const mstn_ctx *c, char tid[33], char sid[17]) {
    mst_trace_id_to_hex(&c->trace_id, tid);
    mst_span_id_to_hex(&c->span_id, sid);
}

void mstn_capture_span(const char *name, const char *scope_name, mst_span_kind kind, const mstn_ctx *ctx,
                       const mstn_ctx *parent, uint64_t t0, uint64_t t1, const mstn_batch *b, bool error,
                       const char *msg) {
    char tid[33], sid[17], ptid[33], psid[17];
    hex_ids(ctx, tid, sid);
    PyObject *attrs = PyDict_New(), *links = PyList_New(0), *d = NULL;
    if (!attrs || !links)
        goto fail;
    PyObject *v = PyLong_FromLong(mstn_g.pid);
    if (!v || PyDict_SetItemString(attrs, "process.pid", v) < 0) { Py_XDECREF(v); goto fail; }
    Py_DECREF(v);
    v = PyLong_FromLong(mstn_thread_id());
    if (!v || PyDict_SetItemString(attrs, "thread.id", v) < 0) { Py_XDECREF(v); goto fail; }
    Py_DECREF(v);
    if (mstn_g.role[0]) {
        v = PyUnicode_FromString(mstn_g.role);
        if (!v || PyDict_SetItemString(attrs, "process.role", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->n_ids) {
        PyObject *ids = PyList_New((Py_ssize_t)b->n_ids);
        if (!ids)
            goto fail;
        for (size_t i = 0; i < b->n_ids; i++)
            PyList_SET_ITEM(ids, (Py_ssize_t)i, Py_NewRef(b->owned[i]));
        int rc = PyDict_SetItemString(attrs, "request.ids", ids);
        Py_DECREF(ids);
        if (rc < 0)
            goto fail;
    }
    if (b && b->request_count >= 0) {
        v = PyLong_FromLongLong(b->request_count);
        if (!v || PyDict_SetItemString(attrs, "batch.request_count", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->scheduled_tokens >= 0) {
        v = PyLong_FromLongLong(b->scheduled_tokens);
        if (!v || PyDict_SetItemString(attrs, "batch.scheduled_tokens", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->waiting >= 0) {
        v = PyLong_FromLongLong(b->waiting);
        if (!v || PyDict_SetItemString(attrs, "scheduler.waiting", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->running >= 0) {
        v = PyLong_FromLongLong(b->running);
        if (!v || PyDict_SetItemString(attrs, "scheduler.running", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    if (b && b->kv_usage >= 0.0) {
        v = PyFloat_FromDouble(b->kv_usage);
        if (!v || PyDict_SetItemString(attrs, "kv_cache.usage", v) < 0) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
    }
    for (size_t i = 0; b && i < b->n_links; i++) {
        char lt[33], ls[17];
        hex_ids(&b->link_ctx[i], lt, ls);
        PyObject *l = Py_BuildValue("{s:s,s:s,s:O}", "trace_id", lt, "span_id", ls, "request.id",
                                    b->owned[b->link_idx[i]]);
        if (!l || PyList_Append(links, l) < 0) { Py_XDECREF(l); goto fail; }
        Py_DECREF(l);
    }
    ptid[0] = psid[0] = '\0';
    if (parent)
        hex_ids(parent, ptid, psid);
    d = Py_BuildValue("{s:s,s:s,s:i,s:s,s:s,s:s,s:K,s:K,s:s,s:s,s:O,s:O}", "name", name, "scope",
                      scope_name, "kind", (int)kind, "trace_id", tid, "span_id", sid,
                      "parent_span_id", psid, "start_ns", (unsigned long long)t0, "end_ns",
                      (unsigned long long)t1, "status", error ? "ERROR" : "OK", "status_message",
                      msg ? msg : "", "attributes", attrs, "links", links);
    if (!d || PyList_Append(mstn_g.capture, d) < 0)
        goto fail;
    Py_DECREF(d);
    Py_DECREF(attrs);
    Py_DECREF(links);
    return;
fail:
    PyErr_Clear();
    Py_XDECREF(d);
    Py_XDECREF(attrs);
    Py_XDECREF(links);
}

/* _capture(True) starts mirroring every recorded hook span into a list of
 * dicts and returns it; _capture(False) stops and returns the list. */
PyObject *mstn_py_capture(PyObject *m, PyObject *on) {
    int yes = PyObject_IsTrue(on);
    if (yes < 0)
        return NULL;
    PyObject *prev = mstn_g.capture;
    if (yes) {
        PyObject *l = PyList_New(0);
        if (!l)
            return NULL;
        mstn_g.capture = l;
        Py_XDECREF(prev);
        return Py_NewRef(l);
    }
    mstn_g.capture = NULL;
    return prev ? prev : Py_NewRef(Py_None);
}
