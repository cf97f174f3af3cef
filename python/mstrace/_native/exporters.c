/*
 * exporters.c — which exporters the process-global tracer gets at init():
 * the Perfetto forwarder client (MSTRACE_PERFETTO: auto/on/off), the C OTLP
 * exporter or, with MS_TRACE_EXPORTER=otel, the bridge to the process's
 * OpenTelemetry TracerProvider, or the null exporter; and their counters for
 * stats(). See exporters.h.
 */
#include "exporters.h"
#include "log.h"
#include "otel_bridge.h"
#include "pyattr.h"
#include "state.h"
#include "mstrace_otlp.h"

#include <string.h>
#include <strings.h>

/* What init() built: exporters kept for their counters (the tracer owns them). */
#define MAX_EXPORTERS 4
static struct {
    mst_exporter *exp;
    const char *name;
} g_exporters[MAX_EXPORTERS];
static size_t g_n_exporters;

static const char *protocol_name(mst_otlp_protocol p) {
    switch (p) {
    case MST_OTLP_GRPC: return "grpc";
    case MST_OTLP_HTTP_PROTOBUF: return "http/protobuf";
    case MST_OTLP_HTTP_JSON: return "http/json";
    }
    return "?";
}

static bool add_exporter(mst_exporter *e, const char *name) {
    mst_status st = mst_tracer_add_exporter(mstn_g.tracer, e);
    if (st != MST_OK) {
        mstn_log("warning", "mstrace: %s exporter not added: %s", name, mst_strerror(st));
        return false;
    }
    if (g_n_exporters < MAX_EXPORTERS) {
        g_exporters[g_n_exporters].exp = e;
        g_exporters[g_n_exporters].name = name;
        g_n_exporters++;
    }
    return true;
}

/* MS_TRACE_EXPORTER: unset/"native" = the C OTLP exporter, "otel" = the
 * process's global OpenTelemetry TracerProvider (otel_bridge.c); anything
 * else warns once and means native. */
static bool exporter_mode_otel(void) {
    static bool warned;
    const char *v = getenv("MS_TRACE_EXPORTER");
    if (!v || !*v || strcasecmp(v, "native") == 0)
        return false;
    if (strcasecmp(v, "otel") == 0)
        return true;
    if (!warned) {
        warned = true;
        mstn_log("warning", "mstrace: MS_TRACE_EXPORTER=%.64s is not 'native' or 'otel'; using native", v);
    }
    return false;
}

/* MSTRACE_PERFETTO: how the Perfetto forwarder client is used.
 *   unset/"auto": created and optional (mst_forward_exporter_set_optional):
 *                 a Jaeger-only run without a forwarder gets one INFO line
 *                 and no failed counts; a forwarder started later is used.
 *   "on":         required: an absent forwarder is a warning, its spans fail.
 *   "off":        no Perfetto client at all.
 * Anything else warns once and means auto. */
typedef enum perfetto_mode { PERFETTO_AUTO, PERFETTO_ON, PERFETTO_OFF } perfetto_mode;

static perfetto_mode perfetto_mode_from_env(void) {
    static bool warned;
    const char *v = getenv("MSTRACE_PERFETTO");
    if (!v || !*v || strcasecmp(v, "auto") == 0)
        return PERFETTO_AUTO;
    if (strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0)
        return PERFETTO_ON;
    if (strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0)
        return PERFETTO_OFF;
    if (!warned) {
        warned = true;
        mstn_log("warning", "mstrace: MSTRACE_PERFETTO=%.64s is not 'auto', 'on' or 'off'; using auto", v);
    }
    return PERFETTO_AUTO;
}

int mstn_build_tracer(const char *forward_socket, bool otlp, bool perfetto, bool null_exp,
                      PyObject *info) {
    mst_tracer_options opts;
    memset(&opts, 0, sizeof opts);
    mst_tracer_options_from_env(&opts);
    /* otel mode takes the OTLP exporter's place. Without a usable SDK hook
     * tracing is a no-op (docs/reference/behaviour.md): no span is ever started. */
    bool otel = otlp && !null_exp && exporter_mode_otel();
    mst_exporter *bridge = otel ? mstn_otel_bridge_create() : NULL;
    if (otel && !bridge)
        opts.sdk_disabled = true;
    PyObject *mode = PyUnicode_FromString(otel ? "otel" : "native");
    int mode_rc = mode ? PyDict_SetItemString(info, "exporter_mode", mode) : -1;
    Py_XDECREF(mode);
    mst_tracer *t = NULL;
    mst_status st = mode_rc < 0 ? MST_ERR_NOMEM : mst_tracer_create(&opts, &t);
    if (st != MST_OK) {
        if (bridge)
            bridge->ops->destroy(bridge);
        if (mode_rc == 0)
            PyErr_Format(PyExc_RuntimeError, "mstrace: tracer not created: %s", mst_strerror(st));
        return -1;
    }
    mstn_g.tracer = t;
    mstn_g.tracer_gen++;
    g_n_exporters = 0;
    PyObject *names = PyList_New(0);
    if (!names)
        return -1;
    PyObject *endpoint = Py_NewRef(Py_None), *protocol = Py_NewRef(Py_None);
    int rc = 0;
    /* Names are appended through one helper to keep refcounts obvious. */
#define APPEND_NAME(s)                                                           \
    do {                                                                         \
        PyObject *n_ = PyUnicode_FromString(s);                                  \
        if (!n_ || PyList_Append(names, n_) < 0)                                 \
            rc = -1;                                                             \
        Py_XDECREF(n_);                                                          \
    } while (0)
    if (null_exp) {
        mst_exporter *e = mst_null_exporter_create();
        if (e && add_exporter(e, "null"))
            APPEND_NAME("null");
    }
    perfetto_mode pmode = perfetto && !null_exp ? perfetto_mode_from_env() : PERFETTO_OFF;
    if (pmode != PERFETTO_OFF) {
        mst_exporter *e = NULL;
        st = mst_forward_exporter_create(forward_socket, &e);
        if (st == MST_OK)
            mst_forward_exporter_set_optional(e, pmode == PERFETTO_AUTO);
        if (st == MST_OK && add_exporter(e, "perfetto"))
            APPEND_NAME("perfetto");
        else if (st != MST_OK)
            mstn_log("warning", "mstrace: Perfetto forwarder client not created: %s", mst_strerror(st));
    }
    mstn_g.story_wanted = false;
    if (bridge) {
        if (add_exporter(bridge, "otel")) {
            APPEND_NAME("otel");
            mstn_g.story_wanted = true;
        }
    } else if (otel) {
        /* no SDK: warned by mstn_otel_bridge_create; spans are not started */
    } else if (otlp && !null_exp) {
        mst_otlp_config cfg;
        char err[256] = "";
        memset(&cfg, 0, sizeof cfg);
        st = mst_otlp_config_from_env(&cfg, err, sizeof err);
        if (st == MST_ERR_UNAVAILABLE) {
            mstn_log("info", "mstrace: Jaeger/OTLP export is off: no OTLP endpoint is set. Start vLLM with "
                             "--otlp-traces-endpoint URL (or export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=URL) "
                             "to send hook spans where vLLM's spans go.");
        } else if (st != MST_OK) {
            mstn_log("warning", "mstrace: OTLP export is off: %s (%s)", err[0] ? err : "bad OTLP settings",
                     mst_strerror(st));
        } else {
            mst_exporter *e = NULL;
            st = mst_otlp_exporter_create(&cfg, &e);
            if (st == MST_OK && add_exporter(e, "otlp")) {
                APPEND_NAME("otlp");
                mstn_g.story_wanted = true;
                Py_SETREF(endpoint, PyUnicode_FromString(cfg.endpoint));
                Py_SETREF(protocol, PyUnicode_FromString(protocol_name(cfg.protocol)));
                if (!endpoint || !protocol)
                    rc = -1;
            } else if (st != MST_OK) {
                mstn_log("warning", "mstrace: OTLP exporter not created: %s", mst_strerror(st));
            }
        }
    }
#undef APPEND_NAME
    if (rc == 0 && (PyDict_SetItemString(info, "exporters", names) < 0 ||
                    PyDict_SetItemString(info, "endpoint", endpoint ? endpoint : Py_None) < 0 ||
                    PyDict_SetItemString(info, "protocol", protocol ? protocol : Py_None) < 0))
        rc = -1;
    Py_DECREF(names);
    Py_XDECREF(endpoint);
    Py_XDECREF(protocol);
    return rc;
}

bool mstn_perfetto_client_wanted(void) {
    return perfetto_mode_from_env() != PERFETTO_OFF;
}

int mstn_exporters_stats(PyObject *ex) {
    for (size_t i = 0; i < g_n_exporters; i++) {
        mst_exporter_stats es;
        memset(&es, 0, sizeof es);
        mst_exporter_get_stats(g_exporters[i].exp, &es);
        PyObject *e = PyDict_New();
        if (!e || PyDict_SetItemString(ex, g_exporters[i].name, e) < 0 ||
            mstn_dict_put_u64(e, "spans_exported", es.spans_exported) < 0 || mstn_dict_put_u64(e, "spans_failed", es.spans_failed) < 0 ||
            mstn_dict_put_u64(e, "spans_rejected", es.spans_rejected) < 0 || mstn_dict_put_u64(e, "batches_ok", es.batches_ok) < 0 ||
            mstn_dict_put_u64(e, "batches_failed", es.batches_failed) < 0 || mstn_dict_put_u64(e, "retries", es.retries) < 0 ||
            mstn_dict_put_u64(e, "spans_skipped", es.spans_skipped) < 0) {
            Py_XDECREF(e);
            return -1;
        }
        Py_DECREF(e);
    }
    return 0;
}

void mstn_exporters_forget(void) { g_n_exporters = 0; }
