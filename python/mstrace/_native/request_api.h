/*
 * request_api.h — the request-context functions of `mstrace._native` and
 * their env rules (request_api.c).
 */
#ifndef MST_NATIVE_REQUEST_API_H
#define MST_NATIVE_REQUEST_API_H

#include "native_types.h"

/* Reads MS_PROFILER_AUTO_TRACE and MS_PROFILER_SAMPLE_RATE into mstn_g
 * (a bad value warns once and counts as unset). */
void mstn_read_env_rules(void);

/* current_context() -> (trace_id_hex, span_id_hex) | None */
PyObject *mstn_py_current_context(PyObject *m, PyObject *unused);
/* register_request(request_id, trace_headers=None) -> bool */
PyObject *mstn_py_register_request(PyObject *m, PyObject *args, PyObject *kw);
/* finish_request(request_id) -> bool */
PyObject *mstn_py_finish_request(PyObject *m, PyObject *rid);
/* lookup_request(id) -> (trace_id_hex, span_id_hex, sampled) | None (tests) */
PyObject *mstn_py_lookup_request(PyObject *m, PyObject *rid);
/* _reset_requests(): tests: clear the request table, re-read the env rules */
PyObject *mstn_py_reset_requests(PyObject *m, PyObject *unused);

#endif /* MST_NATIVE_REQUEST_API_H */
