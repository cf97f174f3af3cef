/*
 * hook.c — the `Hook` type: a transparent C wrapper around a function,
 * method, staticmethod, classmethod or async function that records one span
 * per call through an adapter (docs/reference/spans.md "Adapters"), in the style of wrapt's C proxy.
 * This file owns the type itself (construction, binding, the attribute
 * proxy, pickling, repr), the per-call dispatch to a call path, and the
 * registration of the extension's hook types.
 *
 * Shapes:
 *   - `Hook` (root or bound) wraps a plain function. It is a method
 *     descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR), so `obj.method(...)` calls
 *     it unbound with `obj` first and no bound object is built per call;
 *     `__get__` still returns a bound Hook for `m = obj.method`.
 *   - `_DescrHook` (a subtype) wraps anything else (staticmethod,
 *     classmethod, builtins, callables): `__get__` delegates to the wrapped
 *     object's own `__get__` and wraps what it returns, so each kind binds
 *     exactly as it would unwrapped.
 * A bound hook shares its root's configuration and failure counter
 * (hook_state.h).
 *
 * Per call: adapter pre-step, span start (parent: the thread's current hook
 * span, or the batch's single known request context), push as current, the
 * business call (directly or through the profiling handler), pop, adapter
 * post-step, status, end. The business exception is never touched: it is
 * only read (for the status text) and left pending, so the same object and
 * traceback propagate. Internal failures (exceptions raised by the hook's own
 * reads) are cleared and counted; the fifth switches the hook off.
 *
 * The call paths live in their own files:
 *   - hook_sync.c: synchronous calls (`call` and the batch adapters);
 *   - async_run.c: async functions, generator and async generator functions,
 *     whose span covers the coroutine's life / the generator's iteration;
 *   - hook_invoke.c: the business call, through the profiling handler if any;
 *   - hook_span.c: the span's start and end (hook_capture.c: the test-only
 *     capture of what was recorded);
 *   - trace_helpers.c: the Python helpers (_trace_coro, _trace_gen,
 *     _trace_agen) an async / generator call returns.
 */
#include "hook.h"
#include "async_run.h"
#include "hook_invoke.h"
#include "hook_sync.h"
#include "trace_helpers.h"
#include "pyattr.h"

#include <string.h>

/* ------------------------------------------------------ dispatch */

static PyObject *dispatch(MstnHook *h, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    MstnHook *r = mstn_hook_root(h);
    if (r->disabled)
        return mstn_hook_invoke(h, r, args, nargs, kwnames);
    switch (r->adapter) {
    case MSTN_AD_REQUEST:
    case MSTN_AD_REQUEST_CONTEXT:
        if (mstn_register_from_args(args, nargs, kwnames, false, r->adapter == MSTN_AD_REQUEST,
                                    r->adapter == MSTN_AD_REQUEST && mstn_g.auto_trace && mstn_g.tracer
                                        ? mstn_hook_scope(r) : NULL) < 0)
            mstn_hook_failed(r);
        return mstn_hook_invoke(h, r, args, nargs, kwnames);
    default:
        break;
    }
    if (!mstn_g.tracer)
        return mstn_hook_invoke(h, r, args, nargs, kwnames);
    if (r->is_async || r->gen_kind)
        return mstn_hook_call_async(h, r, args, nargs, kwnames);
    return mstn_hook_call_sync(h, r, args, nargs, kwnames);
}

static PyObject *hook_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    MstnHook *h = (MstnHook *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!h->self_obj)
        return dispatch(h, args, nargs, kwnames);
    /* Bound plain function: self goes first. Borrow the slot before args
     * when the caller allows it (PY_VECTORCALL_ARGUMENTS_OFFSET). */
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
        PyObject **a = (PyObject **)args - 1;
        PyObject *saved = a[0];
        a[0] = h->self_obj;
        PyObject *res = dispatch(h, a, nargs + 1, kwnames);
        a[0] = saved;
        return res;
    }
    PyObject *small[16];
    PyObject **a = mstn_args_prepend(small, sizeof small / sizeof small[0], 0, h->self_obj, args, nargs, kwnames);
    if (!a)
        return NULL;
    PyObject *res = dispatch(h, a, nargs + 1, kwnames);
    mstn_args_release(a, small);
    return res;
}

/* ---------------------------------------------------------- the type */

static const struct { const char *s; mst_span_kind k; } kinds[] = {
    {"INTERNAL", MST_SPAN_KIND_INTERNAL}, {"SERVER", MST_SPAN_KIND_SERVER},
    {"CLIENT", MST_SPAN_KIND_CLIENT},     {"PRODUCER", MST_SPAN_KIND_PRODUCER},
    {"CONSUMER", MST_SPAN_KIND_CONSUMER},
};
static const struct { const char *s; mstn_adapter a; } adapters[] = {
    {"call", MSTN_AD_CALL},         {"request", MSTN_AD_REQUEST},
    {"request_context", MSTN_AD_REQUEST_CONTEXT}, {"schedule", MSTN_AD_SCHEDULE},
    {"model", MSTN_AD_MODEL},       {"output", MSTN_AD_OUTPUT},
};

static char *dup_cstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = PyMem_Malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* True for objects that bind like a plain function (the fast shape). */
static bool function_like(PyObject *w) {
    return PyFunction_Check(w) || PyType_HasFeature(Py_TYPE(w), Py_TPFLAGS_METHOD_DESCRIPTOR);
}

static int set_async_markers(MstnHook *h) {
    /* So inspect/asyncio.iscoroutinefunction(hook) answer like the wrapped
     * function: asyncio's `_is_coroutine` (3.11) and inspect's marker (3.12+). */
    static const char code[] =
        "def _mark(f):\n"
        "    import asyncio.coroutines as c, inspect as i\n"
        "    m = getattr(c, '_is_coroutine', None)\n"
        "    if m is not None: f.__dict__['_is_coroutine'] = m\n"
        "    k = getattr(i, '_is_coroutine_mark', None)\n"
        "    if k is not None: f.__dict__['_is_coroutine_marker'] = k\n";
    PyObject *g = PyDict_New();
    if (!g)
        return -1;
    if (PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) < 0) {
        Py_DECREF(g);
        return -1;
    }
    PyObject *rv = PyRun_String(code, Py_file_input, g, g);
    PyObject *res = NULL;
    if (rv) {
        PyObject *f = PyDict_GetItemString(g, "_mark");
        res = f ? PyObject_CallOneArg(f, (PyObject *)h) : NULL;
    }
    Py_XDECREF(rv);
    Py_DECREF(g);
    if (!res)
        return -1;
    Py_DECREF(res);
    return 0;
}

/* inspect.<predicate>(w), looking through staticmethod/classmethod; false on
 * any error. */
static bool inspect_says(PyObject *w, const char *predicate) {
    PyObject *f = w, *inner = NULL;
    if (PyObject_TypeCheck(w, &PyStaticMethod_Type) || PyObject_TypeCheck(w, &PyClassMethod_Type)) {
        inner = PyObject_GetAttr(w, mstn_n.func);
        if (!inner) {
            PyErr_Clear();
            return false;
        }
        f = inner;
    }
    PyObject *inspect = PyImport_ImportModule("inspect");
    PyObject *r = inspect ? PyObject_CallMethod(inspect, predicate, "O", f) : NULL;
    bool yes = r && PyObject_IsTrue(r) == 1;
    /* A @types.coroutine generator is awaited, not iterated: not ours to
     * wrap as a generator (CO_ITERABLE_COROUTINE on its code). */
    if (yes && strcmp(predicate, "isgeneratorfunction") == 0) {
        PyObject *unwrapped = PyObject_CallMethod(inspect, "unwrap", "O", f);
        PyObject *code = unwrapped ? PyObject_GetAttrString(unwrapped, "__code__") : NULL;
        if (code && PyCode_Check(code) && (((PyCodeObject *)code)->co_flags & CO_ITERABLE_COROUTINE))
            yes = false;
        Py_XDECREF(code);
        Py_XDECREF(unwrapped);
    }
    Py_XDECREF(r);
    Py_XDECREF(inspect);
    Py_XDECREF(inner);
    PyErr_Clear();
    return yes;
}

static bool is_coroutine_function(PyObject *w) {
    return inspect_says(w, "iscoroutinefunction");
}

/* MSTN_RUN_GEN / MSTN_RUN_ASYNCGEN for a (async) generator function, else 0. */
static uint8_t generator_kind(PyObject *w) {
    if (inspect_says(w, "isasyncgenfunction"))
        return MSTN_RUN_ASYNCGEN;
    return inspect_says(w, "isgeneratorfunction") ? MSTN_RUN_GEN : 0;
}

static MstnHook *hook_alloc(PyTypeObject *type) {
    MstnHook *h = (MstnHook *)type->tp_alloc(type, 0);
    if (!h)
        return NULL;
    h->vectorcall = hook_vectorcall;
    return h;
}

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"wrapped", "name", "domain", "kind", "adapter", "handler", NULL};
    PyObject *wrapped, *name, *domain = NULL, *handler = Py_None;
    const char *kind = "INTERNAL", *adapter = "call";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$UUssO:Hook", kwlist, &wrapped, &name, &domain,
                                     &kind, &adapter, &handler))
        return NULL;
    if (!kw || !PyDict_GetItemString(kw, "name")) {
        PyErr_SetString(PyExc_TypeError, "Hook() missing required keyword argument 'name'");
        return NULL;
    }
    int ki = -1, ai = -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcasecmp(kind, kinds[i].s) == 0)
            ki = (int)i;
    for (size_t i = 0; i < sizeof adapters / sizeof adapters[0]; i++)
        if (strcmp(adapter, adapters[i].s) == 0)
            ai = (int)i;
    if (ki < 0)
        return PyErr_Format(PyExc_ValueError, "unknown span kind '%s' (INTERNAL, SERVER, CLIENT, "
                                              "PRODUCER, CONSUMER)", kind);
    if (ai < 0)
        return PyErr_Format(PyExc_ValueError, "unknown adapter '%s' (call, request, request_context, "
                                              "schedule, model, output)", adapter);
    if (handler != Py_None && !PyCallable_Check(handler))
        return PyErr_Format(PyExc_TypeError, "handler must be callable");

    bool fn = function_like(wrapped);
    MstnHook *h = hook_alloc(fn ? &MstnHook_Type : &MstnDescrHook_Type);
    if (!h)
        return NULL;
    h->wrapped = Py_NewRef(wrapped);
    if (PyObject_TypeCheck(wrapped, &PyStaticMethod_Type)) {
        h->target = PyObject_GetAttr(wrapped, mstn_n.func);
        if (!h->target)
            goto fail;
    } else {
        h->target = Py_NewRef(wrapped);
    }
    h->handler = handler == Py_None ? NULL : Py_NewRef(handler);
    h->name_obj = Py_NewRef(name);
    h->domain_obj = domain ? Py_NewRef(domain) : PyUnicode_FromString("Tracing");
    if (!h->domain_obj)
        goto fail;
    const char *n = PyUnicode_AsUTF8(name), *d = PyUnicode_AsUTF8(h->domain_obj);
    if (!n || !d)
        goto fail;
    h->name = dup_cstr(n);
    PyObject *sc = PyUnicode_FromFormat("ms_service_profiler.hook.%s", d);
    if (!sc)
        goto fail;
    h->scope_name = dup_cstr(PyUnicode_AsUTF8(sc));
    Py_DECREF(sc);
    if (!h->name || !h->scope_name) {
        PyErr_NoMemory();
        goto fail;
    }
    h->kind = kinds[ki].k;
    h->adapter = adapters[ai].a;
    h->is_async = is_coroutine_function(wrapped);
    h->gen_kind = h->is_async ? 0 : generator_kind(wrapped);
    if (h->is_async) {
        mstn_g.async_used = true;
        if (set_async_markers(h) < 0)
            PyErr_Clear(); /* cosmetic only */
    }
    if (h->gen_kind == MSTN_RUN_ASYNCGEN)
        mstn_g.async_used = true; /* its steps are current through the contextvar */
    return (PyObject *)h;
fail:
    Py_DECREF(h);
    return NULL;
}

/* A bound hook sharing root `r`'s configuration. */
static PyObject *make_bound(MstnHook *r, PyTypeObject *type, PyObject *target, PyObject *self_obj) {
    MstnHook *b = hook_alloc(type);
    if (!b)
        return NULL;
    b->root = (MstnHook *)Py_NewRef(r);
    b->wrapped = Py_NewRef(r->wrapped);
    b->target = Py_NewRef(target);
    b->self_obj = Py_XNewRef(self_obj);
    b->handler = Py_XNewRef(r->handler);
    b->name_obj = Py_NewRef(r->name_obj);
    b->domain_obj = Py_NewRef(r->domain_obj);
    return (PyObject *)b;
}

static PyObject *hook_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    MstnHook *h = (MstnHook *)self;
    if (obj == NULL || obj == Py_None || h->self_obj || h->root)
        return Py_NewRef(self);
    return make_bound(mstn_hook_root(h), &MstnHook_Type, h->target, obj);
}

static PyObject *descr_hook_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    MstnHook *h = (MstnHook *)self;
    descrgetfunc get = Py_TYPE(h->wrapped)->tp_descr_get;
    if (!get || h->root)
        return Py_NewRef(self);
    PyObject *res = get(h->wrapped, obj, type);
    if (!res)
        return NULL;
    if (res == h->wrapped) {
        Py_DECREF(res);
        return Py_NewRef(self);
    }
    PyObject *b = make_bound(mstn_hook_root(h), &MstnDescrHook_Type, res, NULL);
    Py_DECREF(res);
    return b;
}

static int hook_traverse(PyObject *self, visitproc visit, void *arg) {
    MstnHook *h = (MstnHook *)self;
    Py_VISIT(h->wrapped);
    Py_VISIT(h->target);
    Py_VISIT(h->self_obj);
    Py_VISIT(h->handler);
    Py_VISIT(h->root);
    Py_VISIT(h->dict);
    Py_VISIT(h->name_obj);
    Py_VISIT(h->domain_obj);
    return 0;
}

static int hook_clear(PyObject *self) {
    MstnHook *h = (MstnHook *)self;
    Py_CLEAR(h->wrapped);
    Py_CLEAR(h->target);
    Py_CLEAR(h->self_obj);
    Py_CLEAR(h->handler);
    Py_CLEAR(h->root);
    Py_CLEAR(h->dict);
    Py_CLEAR(h->name_obj);
    Py_CLEAR(h->domain_obj);
    return 0;
}

static void hook_dealloc(PyObject *self) {
    MstnHook *h = (MstnHook *)self;
    PyObject_GC_UnTrack(self);
    if (h->weakreflist)
        PyObject_ClearWeakRefs(self);
    hook_clear(self);
    PyMem_Free(h->name);
    PyMem_Free(h->scope_name);
    Py_TYPE(self)->tp_free(self);
}

/* Unknown attributes come from the wrapped object (wrapt-style proxy). A
 * bound hook looks in its root's __dict__ first (the async markers and any
 * attribute set on the hook, as a bound method forwards to __func__), then
 * in what binding produced (`target`: the function under a staticmethod,
 * the bound method of a classmethod), which carries `__code__` and friends
 * that inspect.iscoroutinefunction reads; the staticmethod/classmethod
 * object itself has neither, so an async one looked synchronous. */
static PyObject *hook_getattro(PyObject *self, PyObject *name) {
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    MstnHook *h = (MstnHook *)self;
    if (!h->root)
        return PyObject_GetAttr(h->wrapped, name);
    if (h->root->dict) {
        PyObject *v = PyDict_GetItemWithError(h->root->dict, name);
        if (v)
            return Py_NewRef(v);
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_GetAttr(h->target, name);
}

static PyObject *fwd(PyObject *self, const char *attr) {
    return PyObject_GetAttrString(((MstnHook *)self)->wrapped, attr);
}
static PyObject *get_name(PyObject *s, void *c) { return fwd(s, "__name__"); }
static PyObject *get_qualname(PyObject *s, void *c) { return fwd(s, "__qualname__"); }
static PyObject *get_doc(PyObject *s, void *c) { return fwd(s, "__doc__"); }
static PyObject *get_module(PyObject *s, void *c) { return fwd(s, "__module__"); }

static PyObject *get_wrapped(PyObject *self, void *c) {
    MstnHook *h = (MstnHook *)self;
    if (h->self_obj) /* bound: what the plain function bound to self is */
        return PyMethod_New(h->target, h->self_obj);
    if (h->root)
        return Py_NewRef(h->target);
    return Py_NewRef(h->wrapped);
}

static PyObject *get_self(PyObject *self, void *c) {
    MstnHook *h = (MstnHook *)self;
    return Py_NewRef(h->self_obj ? h->self_obj : Py_None);
}

static PyObject *get_hook_info(PyObject *self, void *c) {
    MstnHook *h = (MstnHook *)self, *r = mstn_hook_root(h);
    const char *gen = r->gen_kind == MSTN_RUN_GEN        ? "generator"
                      : r->gen_kind == MSTN_RUN_ASYNCGEN ? "async_generator"
                                                         : NULL;
    return Py_BuildValue("{s:O,s:O,s:i,s:s,s:O,s:z,s:O,s:i,s:s}", "name", r->name_obj, "domain",
                         r->domain_obj, "kind", (int)r->kind, "adapter",
                         adapters[r->adapter].s, "async", r->is_async ? Py_True : Py_False,
                         "generator", gen, "disabled", r->disabled ? Py_True : Py_False,
                         "failures", r->failures, "scope", r->scope_name);
}

static PyGetSetDef hook_getset[] = {
    {"__wrapped__", get_wrapped, NULL, "the wrapped callable", NULL},
    {"__name__", get_name, NULL, NULL, NULL},
    {"__qualname__", get_qualname, NULL, NULL, NULL},
    {"__doc__", get_doc, NULL, NULL, NULL},
    {"__module__", get_module, NULL, NULL, NULL},
    {"__self__", get_self, NULL, "the bound instance, or None", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"_mstrace_hook", get_hook_info, NULL, "this hook's configuration and state", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Pickled and copied by reference, as the function it stands for: a root
 * hook (module function, Class.method) by its qualified name, which pickle
 * resolves back to the hook installed there and copy/deepcopy return as is;
 * a bound one as getattr(instance or class, name), like a bound method. Without
 * it, pickling or deep-copying anything that holds a hooked function raised
 * TypeError ("cannot pickle 'Hook' object"): a hook changed user-visible
 * behaviour. */
static PyObject *hook_reduce(PyObject *self, PyObject *unused) {
    MstnHook *h = (MstnHook *)self;
    PyObject *owner = NULL;
    if (h->self_obj) {
        owner = Py_NewRef(h->self_obj);
    } else if (h->root && PyMethod_Check(h->target)) {
        owner = Py_NewRef(PyMethod_GET_SELF(h->target));
    }
    if (!owner)
        return fwd(self, "__qualname__");
    PyObject *name = fwd(self, "__name__");
    PyObject *builtins = name ? PyImport_ImportModule("builtins") : NULL;
    PyObject *getattr = builtins ? PyObject_GetAttrString(builtins, "getattr") : NULL;
    PyObject *res = getattr ? Py_BuildValue("(O(OO))", getattr, owner, name) : NULL;
    Py_XDECREF(getattr);
    Py_XDECREF(builtins);
    Py_XDECREF(name);
    Py_DECREF(owner);
    return res;
}

static PyMethodDef hook_methods[] = {
    {"__reduce__", hook_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject *hook_repr(PyObject *self) {
    MstnHook *h = (MstnHook *)self, *r = mstn_hook_root(h);
    return PyUnicode_FromFormat("<mstrace hook %R (%s, %s) of %R%s>", r->name_obj,
                                adapters[r->adapter].s, r->scope_name, h->wrapped,
                                h->self_obj || h->root ? " bound" : "");
}

PyTypeObject MstnHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mstrace._native.Hook",
    .tp_basicsize = sizeof(MstnHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Hook(wrapped, *, name, domain='Tracing', kind='INTERNAL', adapter='call', handler=None)\n"
              "A transparent wrapper that records one span per call (see CONTRACT.md).",
    .tp_vectorcall_offset = offsetof(MstnHook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = hook_new,
    .tp_dealloc = hook_dealloc,
    .tp_traverse = hook_traverse,
    .tp_clear = hook_clear,
    .tp_getattro = hook_getattro,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_getset = hook_getset,
    .tp_methods = hook_methods,
    .tp_descr_get = hook_descr_get,
    .tp_dictoffset = offsetof(MstnHook, dict),
    .tp_weaklistoffset = offsetof(MstnHook, weakreflist),
    .tp_repr = hook_repr,
};

PyTypeObject MstnDescrHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mstrace._native._DescrHook",
    .tp_basicsize = sizeof(MstnHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A Hook around a non-function (staticmethod, classmethod, other descriptor).",
    .tp_vectorcall_offset = offsetof(MstnHook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = hook_dealloc,
    .tp_traverse = hook_traverse,
    .tp_clear = hook_clear,
    .tp_getattro = hook_getattro,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_descr_get = descr_hook_descr_get,
    .tp_dictoffset = offsetof(MstnHook, dict),
    .tp_weaklistoffset = offsetof(MstnHook, weakreflist),
    .tp_repr = hook_repr,
};


int mstn_hook_module_init(PyObject *module) {
    if (mstn_trace_helpers_init() < 0)
        return -1;
    MstnDescrHook_Type.tp_base = &MstnHook_Type;
    if (PyType_Ready(&MstnHook_Type) < 0 || PyType_Ready(&MstnDescrHook_Type) < 0 ||
        PyType_Ready(&MstnOnce_Type) < 0 || PyType_Ready(&MstnAsyncRun_Type) < 0)
        return -1;
    /* Subtypes of a method descriptor type inherit the flag only if they
     * inherit tp_descr_get; ours has its own, so this must stay clear. */
    MstnDescrHook_Type.tp_flags &= ~Py_TPFLAGS_METHOD_DESCRIPTOR;
    Py_INCREF(&MstnHook_Type);
    if (PyModule_AddObject(module, "Hook", (PyObject *)&MstnHook_Type) < 0) {
        Py_DECREF(&MstnHook_Type);
        return -1;
    }
    return 0;
}

