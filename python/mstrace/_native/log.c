/*
 * log.c — the extension's log lines go through logging.getLogger("mstrace")
 * (so the plugin's handler and level apply), falling back to stderr when
 * logging itself fails; a pending Python exception is kept intact. See
 * log.h.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void mstn_log(const char *level, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *logging = PyImport_ImportModule("logging");
    PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "mstrace") : NULL;
    PyObject *r = logger ? PyObject_CallMethod(logger, level, "s", buf) : NULL;
    if (!r) { /* logging itself is broken: stderr, never an exception */
        PyErr_Clear();
        fprintf(stderr, "mstrace %s: %s\n", level, buf);
    }
    Py_XDECREF(r);
    Py_XDECREF(logger);
    Py_XDECREF(logging);
    PyErr_Restore(t, v, tb);
}
