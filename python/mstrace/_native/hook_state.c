/*
 * hook_state.c — a hook's failure counting: internal failures (exceptions
 * raised by the hook's own reads, never the business call's) are cleared and
 * counted, and the MSTN_FAILURE_LIMIT-th switches the hook off for good, so a
 * vLLM version whose objects no longer look as expected costs one warning
 * and keeps running untraced. See hook_state.h.
 */
#include "hook_state.h"
#include "log.h"

void mstn_hook_failed(MstnHook *r) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    r->failures++;
    mstn_g.hook_failures++;
    if (r->failures >= MSTN_FAILURE_LIMIT && !r->disabled) {
        r->disabled = true;
        mstn_g.hooks_disabled++;
        PyObject *s = v ? PyObject_Str(v) : NULL;
        const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
        if (!msg)
            PyErr_Clear();
        mstn_log("warning",
                 "mstrace: hook '%s' switched off after %d internal failures "
                 "(last: %s: %s); the wrapped function keeps running untraced",
                 r->name, r->failures, t ? ((PyTypeObject *)t)->tp_name : "?",
                 msg ? msg : "?");
        Py_XDECREF(s);
    }
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
}
