/*
 * hook_capture.h — test-only mirror of recorded hook spans into the list
 * `_native._capture(True)` returned (hook_capture.c).
 */
#ifndef MST_NATIVE_HOOK_CAPTURE_H
#define MST_NATIVE_HOOK_CAPTURE_H

#include "native_types.h"

/* Appends one dict describing the recorded, not yet ended `span` to
 * mstn_g.capture (which must be set): `parent` NULL for a root, `msg` the
 * status message; attributes and links read from the span itself. Any
 * failure is swallowed (the exception cleared): the capture never changes
 * what the hook does. */
void mstn_capture_span(const mst_span *span, const char *name, const char *scope_name, mst_span_kind kind,
                       const mstn_ctx *ctx, const mstn_ctx *parent, uint64_t t0, uint64_t t1, bool error,
                       const char *msg);

/* _native._capture(on): _capture(True) starts mirroring every recorded hook
 * span into a new list and returns it; _capture(False) stops and returns
 * the list (or None). */
PyObject *mstn_py_capture(PyObject *m, PyObject *on);

#endif /* MST_NATIVE_HOOK_CAPTURE_H */
