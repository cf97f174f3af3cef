/*
 * trace_helpers.c — the Python-level helpers that drive an `_AsyncRun`
 * (async_run.c): `_trace_gen` and `_trace_agen`, the forwarding wrappers of
 * hooked generators and async generators, compiled here from Python source
 * once at import; and `_trace_coro`, the coroutine an async hook returns.
 * See trace_helpers.h.
 */
#include "trace_helpers.h"

PyObject *mstn_trace_coro;
PyObject *mstn_trace_gen, *mstn_trace_agen;


/* The wrappers of hooked generators / async generators (see the header
 * comment); compiled once in mstn_hook_module_init. They forward as PEP 380's
 * `yield from` does: close (GeneratorExit thrown in) closes the business
 * generator, anything else thrown in is thrown into it, outside the except
 * block so its own exceptions do not gain a __context__. */
static const char trace_gen_src[] =
    "from sys import get_asyncgen_hooks as _get_hooks, set_asyncgen_hooks as _set_hooks\n"
    "\n"
    "def _trace_gen(gen, run):\n"
    "    run._begin()\n"
    "    send, value, thrown = gen.send, None, None\n"
    "    while True:\n"
    "        try:\n"
    "            try:\n"
    "                run._enter()\n"
    "                if thrown is None:\n"
    "                    item = send(value)\n"
    "                elif isinstance(thrown, GeneratorExit):\n"
    "                    gen.close()\n"
    "                else:\n"
    "                    item = gen.throw(thrown)\n"
    "            finally:\n"
    "                run._leave()\n"
    "        except StopIteration as stop:\n"
    "            run._end(None, stop.value)\n"
    "            return stop.value\n"
    "        except BaseException as exc:\n"
    "            run._end(exc, None)\n"
    "            raise\n"
    "        if thrown is not None:\n"
    "            if isinstance(thrown, GeneratorExit):\n"
    "                run._end(None, None)\n"
    "                raise thrown\n"
    "            thrown = None\n"
    "        try:\n"
    "            value = yield item\n"
    "        except BaseException as exc:\n"
    "            thrown = exc\n"
    "\n"
    "async def _trace_agen(agen, run):\n"
    "    run._begin()\n"
    "    hooks = _get_hooks()\n"
    "    _set_hooks(firstiter=None, finalizer=None)\n"
    "    try:\n"
    "        step = agen.asend(None)\n"
    "    finally:\n"
    "        _set_hooks(*hooks)\n"
    "    thrown = None\n"
    "    while True:\n"
    "        try:\n"
    "            try:\n"
    "                run._enter()\n"
    "                if thrown is None:\n"
    "                    item = await step\n"
    "                elif isinstance(thrown, GeneratorExit):\n"
    "                    await agen.aclose()\n"
    "                else:\n"
    "                    item = await agen.athrow(thrown)\n"
    "            finally:\n"
    "                run._leave()\n"
    "        except StopAsyncIteration:\n"
    "            run._end(None, None)\n"
    "            return\n"
    "        except BaseException as exc:\n"
    "            run._end(exc, None)\n"
    "            raise\n"
    "        if thrown is not None:\n"
    "            if isinstance(thrown, GeneratorExit):\n"
    "                run._end(None, None)\n"
    "                raise thrown\n"
    "            thrown = None\n"
    "        step = None\n"
    "        try:\n"
    "            step = agen.asend((yield item))\n"
    "        except BaseException as exc:\n"
    "            thrown = exc\n";

int mstn_trace_helpers_init(void) {
    PyObject *g = PyDict_New();
    if (!g)
        return -1;
    PyObject *name = PyUnicode_InternFromString("mstrace._native");
    int rc = -1;
    if (name && PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) == 0 &&
        PyDict_SetItemString(g, "__name__", name) == 0) {
        PyObject *rv = PyRun_String(trace_gen_src, Py_file_input, g, g);
        if (rv) {
            Py_DECREF(rv);
            mstn_trace_gen = Py_XNewRef(PyDict_GetItemString(g, "_trace_gen"));
            mstn_trace_agen = Py_XNewRef(PyDict_GetItemString(g, "_trace_agen"));
            rc = mstn_trace_gen && mstn_trace_agen ? 0 : -1;
        }
    }
    Py_XDECREF(name);
    Py_DECREF(g);
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "mstrace._native: generator wrappers missing");
    return rc;
}

/* `_trace_coro`: the coroutine an async hook returns (see hook.c). */
static const char trace_coro_src[] =
    "async def _trace_coro(coro, run):\n"
    "    run._begin()\n"
    "    try:\n"
    "        result = await coro\n"
    "    except BaseException as exc:\n"
    "        run._end(exc, None)\n"
    "        raise\n"
    "    run._end(None, result)\n"
    "    return result\n";

int mstn_trace_coro_init(PyObject *module) {
    PyObject *g = PyDict_New();
    if (!g)
        return -1;
    if (PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) < 0 ||
        PyDict_SetItemString(g, "__name__", PyUnicode_InternFromString("mstrace._native")) < 0) {
        Py_DECREF(g);
        return -1;
    }
    PyObject *r = PyRun_String(trace_coro_src, Py_file_input, g, g);
    if (!r) {
        Py_DECREF(g);
        return -1;
    }
    Py_DECREF(r);
    mstn_trace_coro = Py_XNewRef(PyDict_GetItemString(g, "_trace_coro"));
    Py_DECREF(g);
    if (!mstn_trace_coro)
        return -1;
    return PyModule_AddObject(module, "_trace_coro", Py_NewRef(mstn_trace_coro));
}
