/*
 * request_api.c — the request-context functions of `mstrace._native`
 * (current_context, register_request, finish_request, lookup_request,
 * _reset_requests) and the env rules of docs/configuration.md they apply
 * (MS_PROFILER_AUTO_TRACE, MS_PROFILER_SAMPLE_RATE), read at init() and
 * _reset_requests(). See request_api.h.
 */
#include "request_api.h"
#include "context.h"
#include "request_story.h"
#include "log.h"
#include "pyattr.h"
#include "queued_times.h"
#include "reqtable.h"
#include "state.h"
#include "step_record.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void mstn_read_env_rules(void) {
    static bool warned_auto, warned_rate;
    const char *a = getenv("MS_PROFILER_AUTO_TRACE");
    mstn_g.auto_trace = false;
    if (a && strcmp(a, "1") == 0) {
        mstn_g.auto_trace = true;
    } else if (a && strcmp(a, "0") != 0 && *a && !warned_auto) {
        warned_auto = true;
        mstn_log("warning", "mstrace: MS_PROFILER_AUTO_TRACE=%.64s is not 0 or 1; treated as unset", a);
    }
    const char *r = getenv("MS_PROFILER_SAMPLE_RATE");
    mstn_g.sample_rate = 0;
    if (r && *r) {
        bool digits = true;
        for (const char *p = r; *p; p++)
            if (*p < '0' || *p > '9')
                digits = false;
        errno = 0;
        unsigned long long n = digits ? strtoull(r, NULL, 10) : 0;
        if (digits && errno == 0 && n >= 1 && n <= INT_MAX) {
            mstn_g.sample_rate = (uint32_t)n;
        } else if (!warned_rate) {
            warned_rate = true;
            mstn_log("warning", "mstrace: MS_PROFILER_SAMPLE_RATE=%.64s is not a positive integer "
                                "(digits only, <= %d); no sampling", r, INT_MAX);
        }
    }
}

PyObject *mstn_py_current_context(PyObject *m, PyObject *unused) {
    mstn_ctx c;
    if (!mstn_current(&c))
        Py_RETURN_NONE;
    char t[33], s[17];
    mst_trace_id_to_hex(&c.trace_id, t);
    mst_span_id_to_hex(&c.span_id, s);
    return Py_BuildValue("(ss)", t, s);
}

PyObject *mstn_py_register_request(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"request_id", "trace_headers", NULL};
    PyObject *rid, *headers = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:register_request", kwlist, &rid, &headers))
        return NULL;
    int r = mstn_register(rid, headers, true);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

PyObject *mstn_py_finish_request(PyObject *m, PyObject *rid) {
    const char *u;
    Py_ssize_t n;
    PyObject *s = mstn_id_utf8(rid, &u, &n);
    if (!s)
        return NULL;
    PyObject *res = PyBool_FromLong(mstn_req_drop(u, (size_t)n));
    Py_DECREF(s);
    return res;
}

/* lookup_request(id) -> (trace_id_hex, span_id_hex, sampled) | None (tests). */
PyObject *mstn_py_lookup_request(PyObject *m, PyObject *rid) {
    if (!PyUnicode_Check(rid))
        return PyErr_Format(PyExc_TypeError, "request id must be str");
    Py_ssize_t n = 0;
    const char *u = PyUnicode_AsUTF8AndSize(rid, &n);
    mstn_ctx c;
    if (!u)
        return NULL;
    if (!mstn_req_get(u, (size_t)n, &c))
        Py_RETURN_NONE;
    char t[33], s[17];
    mst_trace_id_to_hex(&c.trace_id, t);
    mst_span_id_to_hex(&c.span_id, s);
    return Py_BuildValue("(ssO)", t, s, mstn_ctx_sampled(&c) ? Py_True : Py_False);
}

PyObject *mstn_py_reset_requests(PyObject *m, PyObject *unused) {
    mstn_req_clear();
    mstn_story_clear();
    mstn_queued_clear();
    mstn_step_forget_all();
    mstn_g.auto_counter = 0;
    mstn_read_env_rules();
    Py_RETURN_NONE;
}
