/*
 * pyattr.h — reading attributes of Python objects the way every file of
 * the extension does (pyattr.c): interned attribute names (mstn_n, filled
 * at import), an optional-attribute lookup that tells "missing"
 * from "raised", a request id as a UTF-8 key, and a dict setter for
 * counters.
 */
#ifndef MST_NATIVE_PYATTR_H
#define MST_NATIVE_PYATTR_H

#include "native_types.h"

/* Optional attribute lookup: 1 found (*out new ref), 0 missing, -1 error. */
int mstn_getattr_opt(PyObject *obj, PyObject *name, PyObject **out);

/* A request id as the request table's key: str(id) (id itself when it is a
 * str) in UTF-8. Returns the new reference that owns *u, or NULL with an
 * exception set. */
static inline PyObject *mstn_id_utf8(PyObject *id, const char **u, Py_ssize_t *n) {
    /* vLLM's ids are ASCII str: their bytes are the UTF-8, read in place
     * (no call; this runs for every request of every batch span). */
    if (PyUnicode_CheckExact(id) && PyUnicode_IS_COMPACT_ASCII(id)) {
        *u = (const char *)PyUnicode_DATA(id);
        *n = PyUnicode_GET_LENGTH(id);
        return Py_NewRef(id);
    }
    PyObject *s = PyUnicode_Check(id) ? Py_NewRef(id) : PyObject_Str(id);
    if (!s)
        return NULL;
    *n = 0;
    *u = PyUnicode_AsUTF8AndSize(s, n);
    if (!*u) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

/* Interned attribute names. */
typedef struct mstn_names {
    PyObject *request_id, *trace_headers, *traceparent, *tracestate,
        *num_scheduled_tokens, *total_num_scheduled_tokens, *outputs,
        *finish_reason, *iscoroutinefunction, *func, *get, *scheduler_output,
        *arrival_time, *external_req_id, *waiting, *running, *kv_cache_manager, *usage,
        /* the step record (step_record.c) */
        *requests, *is_prefill_chunk, *num_computed_tokens, *num_prompt_tokens, *num_tokens, *num_output_placeholders,
        *num_preemptions, *scheduled_new_reqs, *req_id, *scheduled_cached_reqs, *resumed_req_ids, *resumed_from_preemption,
        *req_ids, *preempted_req_ids, *finished_req_ids, *max_num_running_reqs, *max_num_scheduled_tokens;
} mstn_names;
extern mstn_names mstn_n;
/* Interns the names into mstn_n (once, at import). -1 with an exception. */
int mstn_names_init(void);

/* d[k] = int(v). 0, or -1 with an exception. */
int mstn_dict_put_u64(PyObject *d, const char *k, uint64_t v);

#endif /* MST_NATIVE_PYATTR_H */
