/*
 * hook_capture.c — test-only: while `_native._capture(True)` is on
 * (mstn_g.capture is a list), every recorded hook span is mirrored into a
 * dict appended to that list (name, scope, kind, ids, parent, times, status,
 * and the attributes and links as the span stores them, after its limits),
 * so the Python tests can check what a hook recorded without an exporter. Costs one branch per span when off. See
 * hook_capture.h.
 */
#include "hook_capture.h"
#include "context.h"
#include "state.h"

static void hex_ids(const mstn_ctx *c, char tid[33], char sid[17]) {
    mst_trace_id_to_hex(&c->trace_id, tid);
    mst_span_id_to_hex(&c->span_id, sid);
}

/* One stored attribute value as a Python object (a list of str for a
 * string list), or NULL with an exception. */
static PyObject *attr_value(const mst_attr *a) {
    switch (a->type) {
    case MST_ATTR_STRING:
        return PyUnicode_FromStringAndSize(a->v.s.ptr, a->v.s.len);
    case MST_ATTR_INT:
        return PyLong_FromLongLong(a->v.i);
    case MST_ATTR_DOUBLE:
        return PyFloat_FromDouble(a->v.d);
    case MST_ATTR_BOOL:
        return PyBool_FromLong(a->v.b);
    case MST_ATTR_STRING_LIST: {
        PyObject *l = PyList_New(a->v.list.count);
        for (uint32_t i = 0; l && i < a->v.list.count; i++) {
            PyObject *it = PyUnicode_FromStringAndSize(a->v.list.items[i].ptr, a->v.list.items[i].len);
            if (!it) {
                Py_CLEAR(l);
                break;
            }
            PyList_SET_ITEM(l, i, it);
        }
        return l;
    }
    }
    return Py_NewRef(Py_None);
}

/* attrs[0..n) into dict d. 0, or -1 with an exception. */
static int put_attrs(PyObject *d, const mst_attr *attrs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        PyObject *v = attr_value(&attrs[i]);
        if (!v || PyDict_SetItemString(d, attrs[i].key.ptr, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

/* The span's links as dicts: trace_id, span_id and the link's attributes. */
static PyObject *links_of(const mst_span *span) {
    size_t n = 0;
    const mst_link *ls = mst_span_get_links(span, &n);
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < n; i++) {
        char lt[33], lsid[17];
        mst_trace_id_to_hex(&ls[i].trace_id, lt);
        mst_span_id_to_hex(&ls[i].span_id, lsid);
        PyObject *l = Py_BuildValue("{s:s,s:s}", "trace_id", lt, "span_id", lsid);
        if (!l || put_attrs(l, ls[i].attrs, ls[i].n_attrs) < 0 || PyList_Append(out, l) < 0)
            Py_CLEAR(out);
        Py_XDECREF(l);
    }
    return out;
}

void mstn_capture_span(const mst_span *span, const char *name, const char *scope_name, mst_span_kind kind,
                       const mstn_ctx *ctx, const mstn_ctx *parent, uint64_t t0, uint64_t t1, bool error,
                       const char *msg) {
    char tid[33], sid[17], ptid[33], psid[17];
    hex_ids(ctx, tid, sid);
    size_t n_attrs = 0;
    const mst_attr *attrs = mst_span_get_attrs(span, &n_attrs);
    PyObject *ad = PyDict_New(), *links = links_of(span), *d = NULL;
    if (!ad || !links || put_attrs(ad, attrs, n_attrs) < 0)
        goto fail;
    ptid[0] = psid[0] = '\0';
    if (parent)
        hex_ids(parent, ptid, psid);
    d = Py_BuildValue("{s:s,s:s,s:i,s:s,s:s,s:s,s:K,s:K,s:s,s:s,s:O,s:O}", "name", name, "scope",
                      scope_name, "kind", (int)kind, "trace_id", tid, "span_id", sid,
                      "parent_span_id", psid, "start_ns", (unsigned long long)t0, "end_ns",
                      (unsigned long long)t1, "status", error ? "ERROR" : "OK", "status_message",
                      msg ? msg : "", "attributes", ad, "links", links);
    if (!d || PyList_Append(mstn_g.capture, d) < 0)
        goto fail;
    Py_DECREF(d);
    Py_DECREF(ad);
    Py_DECREF(links);
    return;
fail:
    PyErr_Clear();
    Py_XDECREF(d);
    Py_XDECREF(ad);
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
