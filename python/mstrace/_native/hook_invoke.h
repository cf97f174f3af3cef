/*
 * hook_invoke.h — the business call of a hooked function: straight to the
 * wrapped callable, or through the hook's profiling handler, which receives
 * the original as an `_Original` object (MstnOnce_Type) that runs it at most
 * once. Whatever the handler does, the caller gets the business result or
 * the business exception, unchanged.
 */
#ifndef MST_NATIVE_HOOK_INVOKE_H
#define MST_NATIVE_HOOK_INVOKE_H

#include "hook_state.h"

/* mstrace._native._Original: the original callable as a profiling handler
 * sees it. Made ready by mstn_hook_module_init (hook.c). */
extern PyTypeObject MstnOnce_Type;

/* The business call of hook `h` (root `r`) through r's profiling handler:
 * the result / exception of the business is what comes out; handler
 * failures are hook failures (mstn_hook_failed), and a handler that never
 * ran the business has it run here. */
PyObject *mstn_hook_invoke_handler(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames);

/* The business call of hook `h` (root `r`), through the handler if any. */
static inline PyObject *mstn_hook_invoke(MstnHook *h, MstnHook *r, PyObject *const *args,
                                         Py_ssize_t nargs, PyObject *kwnames) {
    if (r->handler)
        return mstn_hook_invoke_handler(h, r, args, nargs, kwnames);
    return PyObject_Vectorcall(h->target, args, (size_t)nargs, kwnames);
}

#endif /* MST_NATIVE_HOOK_INVOKE_H */
