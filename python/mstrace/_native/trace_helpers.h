/*
 * trace_helpers.h — the Python functions an async / generator hook call
 * returns, each driving an `_AsyncRun` (async_run.h) through the business
 * object: `_trace_coro(coro, run)`, `_trace_gen(gen, run)` and
 * `_trace_agen(agen, run)`, compiled here from Python source at import.
 */
#ifndef MST_NATIVE_TRACE_HELPERS_H
#define MST_NATIVE_TRACE_HELPERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* mstrace._native._trace_coro: awaits the business coroutine between
 * run._begin() and run._end(). NULL before mstn_trace_coro_init. */
extern PyObject *mstn_trace_coro;
/* The forwarding wrappers of a hooked generator / async generator: pass
 * next/send/throw/close (asend/athrow/aclose), the return value and
 * exceptions through as `yield from` does. NULL before
 * mstn_trace_helpers_init. */
extern PyObject *mstn_trace_gen, *mstn_trace_agen;

/* Compiles _trace_gen and _trace_agen (once, at import). -1 with a Python
 * exception. */
int mstn_trace_helpers_init(void);
/* Compiles _trace_coro and adds it to `module` (once, at import). -1 with a
 * Python exception. */
int mstn_trace_coro_init(PyObject *module);

#endif /* MST_NATIVE_TRACE_HELPERS_H */
