/*
 * state.c — the extension's process-global state (mstn_g, state.h) and the
 * process role every later hook span carries as process.role (set by
 * init(process_role=...) or set_process_role()), which also names the
 * tracer's resource (service.name per role, resource.h) while the tracer
 * has exported nothing in this process.
 */
#include "state.h"


#include <string.h>

mstn_globals mstn_g;

void mstn_set_process_role(const char *role) {
    size_t n = role ? strlen(role) : 0;
    if (n >= MSTN_ROLE_MAX) {
        n = MSTN_ROLE_MAX - 1;
        while (n > 0 && ((unsigned char)role[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(mstn_g.role, role, n);
    mstn_g.role[n] = '\0';
    mstn_apply_role_to_resource();
}

void mstn_apply_role_to_resource(void) {
    if (!mstn_g.tracer)
        return;
    /* Too late once the exporter thread runs: the spans' process.role
     * still says it, the resource keeps the role it was built with. */
    (void)mst_tracer_set_process_role(mstn_g.tracer, mstn_g.role);
}

PyObject *mstn_py_set_process_role(PyObject *m, PyObject *arg) {
    if (arg != Py_None && !PyUnicode_Check(arg))
        return PyErr_Format(PyExc_TypeError, "process role must be str or None");
    const char *s = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
    if (arg != Py_None && !s)
        return NULL;
    mstn_set_process_role(s);
    Py_RETURN_NONE;
}
