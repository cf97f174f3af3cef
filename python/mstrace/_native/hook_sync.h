/*
 * hook_sync.h — a synchronous hooked call with a span (hook_sync.c).
 */
#ifndef MST_NATIVE_HOOK_SYNC_H
#define MST_NATIVE_HOOK_SYNC_H

#include "hook_state.h"

/* Hook `h` (root `r`, adapter call/schedule/model/output, a tracer exists):
 * the business call inside its span. Returns the business result, or NULL
 * with the business exception pending, unchanged. */
PyObject *mstn_hook_call_sync(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);

#endif /* MST_NATIVE_HOOK_SYNC_H */
