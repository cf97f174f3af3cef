/*
 * pyattr.c — the interned attribute names (mstn_n) and the optional
 * attribute lookup every reader of vLLM objects uses: a missing attribute
 * is "nothing to record", only an exception raised while reading is an
 * error. See pyattr.h.
 */
#include "pyattr.h"

mstn_names mstn_n;

int mstn_getattr_opt(PyObject *obj, PyObject *name, PyObject **out) {
    *out = PyObject_GetAttr(obj, name);
    if (*out)
        return 1;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

int mstn_names_init(void) {
#define N(f, s) if (!(mstn_n.f = PyUnicode_InternFromString(s))) return -1
    N(request_id, "request_id");
    N(trace_headers, "trace_headers");
    N(traceparent, "traceparent");
    N(tracestate, "tracestate");
    N(num_scheduled_tokens, "num_scheduled_tokens");
    N(total_num_scheduled_tokens, "total_num_scheduled_tokens");
    N(outputs, "outputs");
    N(finish_reason, "finish_reason");
    N(iscoroutinefunction, "iscoroutinefunction");
    N(func, "__func__");
    N(get, "__get__");
    N(scheduler_output, "scheduler_output");
    N(arrival_time, "arrival_time");
    N(external_req_id, "external_req_id");
    N(waiting, "waiting");
    N(running, "running");
    N(kv_cache_manager, "kv_cache_manager");
    N(usage, "usage");
    /* the step record (step_record.c) */
    N(requests, "requests");
    N(is_prefill_chunk, "is_prefill_chunk");
    N(num_computed_tokens, "num_computed_tokens");
    N(num_prompt_tokens, "num_prompt_tokens");
    N(num_tokens, "num_tokens");
    N(num_output_placeholders, "num_output_placeholders");
    N(num_preemptions, "num_preemptions");
    N(scheduled_new_reqs, "scheduled_new_reqs");
    N(req_id, "req_id");
    N(scheduled_cached_reqs, "scheduled_cached_reqs");
    N(resumed_req_ids, "resumed_req_ids");
    N(resumed_from_preemption, "resumed_from_preemption");
    N(req_ids, "req_ids");
    N(preempted_req_ids, "preempted_req_ids");
    N(finished_req_ids, "finished_req_ids");
    N(max_num_running_reqs, "max_num_running_reqs");
    N(max_num_scheduled_tokens, "max_num_scheduled_tokens");
#undef N
    return 0;
}

int mstn_dict_put_u64(PyObject *d, const char *k, uint64_t v) {
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    int r = o ? PyDict_SetItemString(d, k, o) : -1;
    Py_XDECREF(o);
    return r;
}
