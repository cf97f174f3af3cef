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
