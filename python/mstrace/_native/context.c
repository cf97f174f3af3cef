/*
 * context.c — where trace contexts come from and which one is current:
 *   - the per-thread stack of hook spans (nested hook spans are children),
 *     plus a contextvar for async hooks, whose steps interleave on a thread;
 *   - the cached native thread id (reset in a fork()ed child);
 *   - the context rules of docs/reference/spans.md for a request's trace headers:
 *     traceparent (sampled flag respected), else MS_PROFILER_AUTO_TRACE with
 *     MS_PROFILER_SAMPLE_RATE's deterministic 1-in-N counter.
 * Runs with the GIL held.
 */
#include "context.h"
#include "pyattr.h"
#include "reqtable.h"
#include "state.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* One TLS block per thread, touched once per hooked call. */
typedef struct mstn_tls {
    long tid;
    int depth;                          /* may exceed MSTN_STACK_DEPTH    */
    mstn_ctx stack[MSTN_STACK_DEPTH];
} mstn_tls;

static _Thread_local mstn_tls t_tls;

/* This thread's block. In a dlopen'ed module every reach of a thread-local
 * is a __tls_get_addr call, and the compiler would rather call it again than
 * keep the address in a register; the empty asm makes the address an opaque
 * value it must keep, so each function below makes one call. */
static inline mstn_tls *tls(void) {
    mstn_tls *t = &t_tls;
    __asm__("" : "+r"(t));
    return t;
}

static long thread_id_of(mstn_tls *t) {
    if (t->tid == 0)
        t->tid = (long)syscall(SYS_gettid);
    return t->tid;
}

long mstn_thread_id(void) { return thread_id_of(tls()); }

/* pthread_atfork child handler: the forking thread is the child's only
 * thread and has a new tid; the stack stays (its spans are the parent's, a
 * valid parent for the child's spans). When the hooked call that forked
 * returns in both processes, both end that span: the core exports it once,
 * from whichever process ends it first (src/core/tracer.c, fork claims). */
void mstn_after_fork_child(void) {
    tls()->tid = 0;
    mstn_g.pid = (long)getpid();
    mstn_req_after_fork_child();
}

void mstn_ctx_to_public(const mstn_ctx *c, mst_span_context *out) {
    out->trace_id = c->trace_id;
    out->span_id = c->span_id;
    out->trace_flags = c->flags;
    out->is_remote = c->remote;
    out->trace_state_len = 0;
    out->trace_state[0] = '\0';
}

void mstn_push(const mstn_ctx *ctx) {
    mstn_tls *t = tls();
    if (t->depth < MSTN_STACK_DEPTH)
        t->stack[t->depth] = *ctx;
    t->depth++;
}

void mstn_pop(void) {
    mstn_tls *t = tls();
    if (t->depth > 0)
        t->depth--;
}

/* The async hooks' current span lives in a contextvar as a bytes object:
 * trace id (16), span id (8), flags (1), then the native thread id (8) and
 * this thread's stack depth (4) when the async span began. The depth orders
 * it against the thread stack: a sync hook that runs an event loop
 * (asyncio.run) stays on the stack below the async spans started inside the
 * loop, so those (and their sync children) must win over it. */
#define CTXVAR_LEN 37

PyObject *mstn_ctxvar_value(const mstn_ctx *c) {
    char raw[CTXVAR_LEN];
    mstn_tls *t = tls();
    int64_t tid = thread_id_of(t);
    int32_t depth = t->depth;
    memcpy(raw, c->trace_id.bytes, 16);
    memcpy(raw + 16, c->span_id.bytes, 8);
    raw[24] = (char)c->flags;
    memcpy(raw + 25, &tid, 8);
    memcpy(raw + 33, &depth, 4);
    return PyBytes_FromStringAndSize(raw, CTXVAR_LEN);
}

static bool current_from_ctxvar(mstn_ctx *out, int64_t *tid, int32_t *depth) {
    PyObject *v = NULL;
    if (!mstn_g.ctxvar || PyContextVar_Get(mstn_g.ctxvar, NULL, &v) < 0) {
        PyErr_Clear();
        return false;
    }
    bool ok = false;
    if (v && PyBytes_Check(v) && PyBytes_GET_SIZE(v) == CTXVAR_LEN) {
        const char *b = PyBytes_AS_STRING(v);
        memcpy(out->trace_id.bytes, b, 16);
        memcpy(out->span_id.bytes, b + 16, 8);
        out->flags = (uint8_t)b[24];
        memcpy(tid, b + 25, 8);
        memcpy(depth, b + 33, 4);
        out->remote = false;
        out->synthetic = false;
        ok = true;
    }
    Py_XDECREF(v);
    return ok;
}

bool mstn_current(mstn_ctx *out) {
    mstn_tls *t = tls();
    if (mstn_g.async_used) {
        int64_t tid;
        int32_t depth;
        /* The async span is the current one unless a sync hook span was
         * pushed on this thread after it began (deeper than its depth then);
         * a context copied to another thread (to_thread) yields to that
         * thread's own sync spans. */
        if (current_from_ctxvar(out, &tid, &depth) &&
            (t->depth == 0 || (tid == thread_id_of(t) && t->depth <= depth)))
            return true;
    }
    if (t->depth > 0) {
        int top = t->depth <= MSTN_STACK_DEPTH ? t->depth - 1 : MSTN_STACK_DEPTH - 1;
        *out = t->stack[top];
        return true;
    }
    return false;
}

/* ------------------------------------------------------- context rules */

/* Is `o` a mapping in the collections.abc sense? A str, bytes, list or tuple
 * also has __getitem__ (PyMapping_Check says yes) but indexing it with
 * "traceparent" raises TypeError, which would count as an internal failure
 * of the hook and, after five malformed requests, switch registration off
 * for every later request. dict (the usual case) never gets here. An error
 * of the check itself (a broken __instancecheck__) means "not a mapping". */
static bool is_mapping(PyObject *o) {
    static PyObject *mapping_abc; /* collections.abc.Mapping, kept for the process */
    if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || PyList_Check(o) ||
        PyTuple_Check(o) || !PyMapping_Check(o))
        return false;
    if (!mapping_abc) {
        PyObject *m = PyImport_ImportModule("collections.abc");
        mapping_abc = m ? PyObject_GetAttrString(m, "Mapping") : NULL;
        Py_XDECREF(m);
        if (!mapping_abc) {
            PyErr_Clear();
            return false;
        }
    }
    int r = PyObject_IsInstance(o, mapping_abc);
    if (r < 0)
        PyErr_Clear();
    return r == 1;
}

/* headers[key] as a new reference; 1 found, 0 not (or `headers` is not a
 * mapping: treated as no headers), -1 error from a mapping's own lookup. */
static int header_get(PyObject *headers, PyObject *key, PyObject **out) {
    *out = NULL;
    if (PyDict_Check(headers)) {
        PyObject *v = PyDict_GetItemWithError(headers, key);
        if (!v)
            return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(v);
        *out = v;
        return 1;
    }
    if (!is_mapping(headers))
        return 0;
    PyObject *v = PyObject_GetItem(headers, key);
    if (!v) {
        if (PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    *out = v;
    return 1;
}

/* A generated context; unsampled (flags 0) when the 1-in-N counter says so. */
static void auto_context(mstn_ctx *out) {
    out->trace_id = mst_trace_id_random();
    out->span_id = mst_span_id_random();
    out->remote = false;
    out->synthetic = true;
    uint64_t n = mstn_g.auto_counter++;
    bool sampled = mstn_g.sample_rate <= 1 || n % mstn_g.sample_rate == 0;
    out->flags = sampled ? MST_TRACE_FLAG_SAMPLED : 0;
    mstn_g.auto_contexts++;
    if (!sampled)
        mstn_g.auto_unsampled++;
}

int mstn_ctx_from_headers(PyObject *headers, mstn_ctx *out, bool allow_auto) {
    if (headers && headers != Py_None) {
        PyObject *tp = NULL;
        int r = header_get(headers, mstn_n.traceparent, &tp);
        if (r < 0)
            return -1;
        /* Only a str value can be a traceparent; bytes, None, numbers are ignored. */
        if (r > 0 && PyUnicode_Check(tp)) {
            Py_ssize_t n = 0;
            const char *s = PyUnicode_AsUTF8AndSize(tp, &n);
            mst_span_context pc;
            if (!s) /* lone surrogates: not UTF-8, so not a valid traceparent */
                PyErr_Clear();
            if (s && mst_ctx_parse_traceparent(s, (size_t)n, &pc) == MST_OK) {
                Py_DECREF(tp);
                out->trace_id = pc.trace_id;
                out->span_id = pc.span_id;
                out->flags = pc.trace_flags;
                out->remote = true;
                out->synthetic = false;
                return 1;
            }
        }
        Py_XDECREF(tp);
    }
    if (!allow_auto || !mstn_g.auto_trace)
        return 0;
    auto_context(out);
    return 1;
}

/* ------------------------------------------------ request spans (auto) */

/* May the generated context be written into `obj.trace_headers` (whose value
 * is `headers`, NULL when the attribute is missing)? Only when it is None or
 * a dict without a "traceparent" key: a client's header (even an invalid
 * one) is never replaced, and other mappings are left alone. */
static bool can_inject(PyObject *headers) {
    if (!headers)
        return false;
    if (headers == Py_None)
        return true;
    if (!PyDict_Check(headers))
        return false;
    int has = PyDict_Contains(headers, mstn_n.traceparent);
    if (has < 0)
        PyErr_Clear();
    return has == 0;
}

/* obj.trace_headers = {**headers, "traceparent": "00-<trace>-<span>-01"}:
 * a new dict, so a dict shared with other requests (n > 1 children) is not
 * changed under them. False (exception cleared) when the attribute is
 * read-only or anything fails: the request is then traced as before. */
static bool inject_traceparent(PyObject *obj, PyObject *headers, const mstn_ctx *c) {
    char tp[56]; /* 00-<32>-<16>-<2> + NUL */
    char t[33], sp[17];
    mst_trace_id_to_hex(&c->trace_id, t);
    mst_span_id_to_hex(&c->span_id, sp);
    snprintf(tp, sizeof tp, "00-%s-%s-%02x", t, sp, (unsigned)c->flags);
    PyObject *d = headers != Py_None ? PyDict_Copy(headers) : PyDict_New();
    PyObject *v = d ? PyUnicode_FromString(tp) : NULL;
    bool ok = v && PyDict_SetItem(d, mstn_n.traceparent, v) == 0 &&
              PyObject_SetAttr(obj, mstn_n.trace_headers, d) == 0;
    if (!ok)
        PyErr_Clear();
    Py_XDECREF(v);
    Py_XDECREF(d);
    return ok;
}

/* Start time of a request span: obj.arrival_time (epoch seconds, vLLM's
 * EngineCoreRequest) when it is a number within the last day and not in the
 * future, else now. */
static uint64_t arrival_ns(PyObject *obj) {
    uint64_t now = mst_clock_now_ns();
    PyObject *a = NULL;
    if (mstn_getattr_opt(obj, mstn_n.arrival_time, &a) <= 0) {
        PyErr_Clear();
        return now;
    }
    double sec = PyFloat_Check(a) ? PyFloat_AS_DOUBLE(a) : PyLong_Check(a) ? PyLong_AsDouble(a) : -1.0;
    Py_DECREF(a);
    if (sec == -1.0 && PyErr_Occurred())
        PyErr_Clear();
    if (!(sec > 0.0))
        return now;
    uint64_t ns = (uint64_t)(sec * 1e9);
    if (ns > now || now - ns > 86400ull * 1000000000ull)
        return now;
    return ns;
}

/* Starts `vllm.request` with the ids of the generated context `c`; carries
 * the hook span attributes plus request.id (the id registered) and
 * request.external_id (obj.external_req_id when it is another str). */
static mst_span *start_request_span(const mstn_ctx *c, PyObject *obj, const mst_scope *scope,
                                    const char *id, size_t id_len) {
    mst_span *sp = mst_span_start_with_ids(mstn_g.tracer, scope, "vllm.request",
                                           MST_SPAN_KIND_INTERNAL, NULL, &c->trace_id,
                                           &c->span_id, arrival_ns(obj));
    if (!sp)
        return NULL;
    mst_span_set_int_lit(sp, MST_LIT("process.pid"), mstn_g.pid);
    mst_span_set_int_lit(sp, MST_LIT("thread.id"), mstn_thread_id());
    if (mstn_g.role[0])
        mst_span_set_strn_lit(sp, MST_LIT("process.role"), mstn_g.role, strlen(mstn_g.role));
    mst_span_set_strn_lit(sp, MST_LIT("request.id"), id, id_len);
    const char *ids[1] = {id};
    if (id[id_len] == '\0')
        mst_span_set_str_list_lit(sp, MST_LIT("request.ids"), ids, NULL, 1);
    PyObject *ext = NULL;
    if (mstn_getattr_opt(obj, mstn_n.external_req_id, &ext) > 0 && PyUnicode_Check(ext)) {
        Py_ssize_t n = 0;
        const char *u = PyUnicode_AsUTF8AndSize(ext, &n);
        if (u && ((size_t)n != id_len || memcmp(u, id, id_len) != 0))
            mst_span_set_strn_lit(sp, MST_LIT("request.external_id"), u, (size_t)n);
    }
    Py_XDECREF(ext);
    PyErr_Clear();
    return sp;
}

int mstn_register(PyObject *request_id, PyObject *headers, bool allow_auto) {
    return mstn_register_ex(request_id, headers, allow_auto, NULL, NULL);
}

int mstn_register_ex(PyObject *request_id, PyObject *headers, bool allow_auto, PyObject *obj,
                     const mst_scope *scope) {
    mstn_ctx ctx;
    int r = mstn_ctx_from_headers(headers, &ctx, false);
    if (r < 0)
        return -1;
    if (r == 0 && !(allow_auto && mstn_g.auto_trace))
        return 0;
    const char *s;
    Py_ssize_t n;
    PyObject *sid = mstn_id_utf8(request_id, &s, &n);
    if (!sid)
        return -1;
    bool ok = true;
    if (r > 0) {
        ok = mstn_req_put(s, (size_t)n, &ctx);
    } else {
        /* Auto-trace: a request seen twice keeps its first context. */
        mstn_ctx old;
        if (!mstn_req_get(s, (size_t)n, &old)) {
            auto_context(&ctx);
            mst_span *span = NULL;
            /* The request adapter on the request object that goes to
             * EngineCore: a real span named by the context, and the
             * context written into obj.trace_headers (CONTRACT.md). */
            if (obj && scope && mstn_g.tracer && mstn_ctx_sampled(&ctx) && can_inject(headers)) {
                span = start_request_span(&ctx, obj, scope, s, (size_t)n);
                if (span && !inject_traceparent(obj, headers, &ctx)) {
                    mst_span_discard(span);
                    span = NULL;
                }
                if (span) {
                    ctx.synthetic = false;
                    mstn_g.inflight++;
                    mstn_req_span_started();
                }
            }
            ok = mstn_req_put_span(s, (size_t)n, &ctx, span);
            if (!ok && span) { /* out of memory: nothing owns it */
                mst_span_end(span, 0);
                mstn_g.inflight--;
            }
        }
    }
    Py_DECREF(sid);
    if (!ok) {
        PyErr_NoMemory();
        return -1;
    }
    return 1;
}
