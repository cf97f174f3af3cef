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

#include <string.h>

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

/* A vectorcall argument array holding `first` and then args (nargs
 * positional values followed by one value per name in kwnames), with
 * `lead` free slots before `first` (1 lets the callee use
 * PY_VECTORCALL_ARGUMENTS_OFFSET). Built in `small` (small_n slots) when
 * it fits, else in PyMem_Malloc'd memory; NULL with MemoryError set when
 * that fails. Give it back with mstn_args_release. On the call path of
 * every hooked call: inline, no allocation for the usual few arguments. */
static inline PyObject **mstn_args_prepend(PyObject **small, size_t small_n, size_t lead, PyObject *first,
                                           PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    size_t total = (size_t)nargs + (kwnames ? (size_t)PyTuple_GET_SIZE(kwnames) : 0);
    PyObject **a = small;
    if (lead + 1 + total > small_n) {
        a = PyMem_Malloc((lead + 1 + total) * sizeof(PyObject *));
        if (!a) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    a[lead] = first;
    if (total)
        memcpy(a + lead + 1, args, total * sizeof(PyObject *));
    return a;
}

/* Frees what mstn_args_prepend allocated (nothing when it used `small`). */
static inline void mstn_args_release(PyObject **a, PyObject **small) {
    if (a != small)
        PyMem_Free(a);
}

#endif /* MST_NATIVE_HOOK_INVOKE_H */
