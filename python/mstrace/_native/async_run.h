/*
 * async_run.h — hooked async functions, generator functions and async
 * generator functions (async_run.c): the `_AsyncRun` type that carries one
 * such call's span from its first step to its end.
 */
#ifndef MST_NATIVE_ASYNC_RUN_H
#define MST_NATIVE_ASYNC_RUN_H

#include "hook_state.h"

/* mstrace._native._AsyncRun. Made ready by mstn_hook_module_init (hook.c). */
extern PyTypeObject MstnAsyncRun_Type;

/* Hook `h` (root `r`, async or generator kind, a tracer exists): runs the
 * business call, which returns the coroutine / generator, and returns it
 * wrapped in its driving helper (trace_helpers.h). The business object is
 * returned unwrapped when it is not what the function's code promised or
 * wrapping failed; NULL with the business exception when the call raised. */
PyObject *mstn_hook_call_async(MstnHook *h, MstnHook *r, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);

#endif /* MST_NATIVE_ASYNC_RUN_H */
