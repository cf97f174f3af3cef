/*
 * hook.h — the `Hook` type (mstrace._native.Hook) and its subtype
 * `_DescrHook`, defined in hook.c, and the registration of every type of the
 * hook (Hook, _DescrHook, _Original, _AsyncRun) at import.
 */
#ifndef MST_NATIVE_HOOK_H
#define MST_NATIVE_HOOK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyTypeObject MstnHook_Type;
extern PyTypeObject MstnDescrHook_Type;

/* At import: compiles the generator helpers (trace_helpers.c), readies the
 * hook types and adds `Hook` to `module`. -1 with a Python exception. */
int mstn_hook_module_init(PyObject *module);

#endif /* MST_NATIVE_HOOK_H */
