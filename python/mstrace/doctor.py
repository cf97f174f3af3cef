"""`mstrace doctor` / `python -m mstrace.doctor`: why does a vLLM run show no spans?

This module owns the diagnosis, run in the serving environment (the Python,
user, container and environment variables of `vllm serve`). It reports, in
this order:
  1. the install: this Python, the mstrace package, PyYAML, the C extension,
     and whether vLLM will load the plugin (the `vllm.general_plugins` entry
     point);
  2. vLLM: importable here, its version, and whether VLLM_PLUGINS (read by
     vLLM's own envs module) lets the plugin load;
  3. MS_TRACE_ENABLE and the sampling settings, as the plugin reads them:
     the values come from the same code (the C extension's init() and the
     libmstrace environment readers inside it), never from a second parser;
  4. each entry of the active symbols YAML (PROFILING_SYMBOLS_PATH or the
     packaged default): hooked (resolved and wrapped by the plugin's own
     patcher with the extension's Hook), missing (with the reason), gated off
     by its version range, or not needed here (vllm_ascend without Ascend);
  5. where spans go: the Perfetto forwarder's abstract socket (does a
     forwarder answer?) and the OTLP endpoint (resolves, connects, TLS when
     https, and answers in its protocol: an empty export for HTTP, the HTTP/2
     connection preface for gRPC).
It ends with one summary line; the exit status is 1 when a required part is
missing (a problem line, marked FAIL), else 0; 2 for a usage error.

What is required: everything in 1-2, MS_TRACE_ENABLE=1, no sampler setting
that drops every span, every traced YAML entry in its version gate resolving,
an OTLP endpoint that answers when one is set, and at least one destination:
the forwarder is required when no OTLP/otel export is configured (it is then
the only place spans can go); with an endpoint set, a forwarder that does not
answer is a warning (Perfetto output is optional).

The probes send no span anywhere: the forwarder gets a connection that is
closed at once, the collector an empty export request. Importing the hooked
vLLM modules is part of the check (the patcher resolves real classes), so the
doctor takes as long as importing vLLM's engine modules.
"""

import argparse
import ctypes
import http.client
import importlib.util
import logging
import os
import socket
import ssl
import sys
import urllib.parse

from mstrace import plugin, symbols

OK, WARN, FAIL, OFF = "ok", "warn", "FAIL", "--"

# libmstrace's environment readers, called inside the loaded C extension
# (the very code init() runs). The structures mirror include/mstrace.h and
# include/mstrace_otlp.h field for field; tests/python/test_doctor.py checks
# the mirror against known settings.
SAMPLERS = ("parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
            "always_on", "always_off", "traceidratio")
OTLP_PROTOCOLS = ("grpc", "http/protobuf", "http/json")
MST_OK, MST_ERR_UNAVAILABLE = 0, -12


class TracerOptions(ctypes.Structure):
    """mst_tracer_options (include/mstrace.h)."""

    _fields_ = [("max_queue_size", ctypes.c_uint32), ("max_export_batch_size", ctypes.c_uint32),
                ("schedule_delay_ms", ctypes.c_uint32), ("export_timeout_ms", ctypes.c_uint32),
                ("export_errors_only", ctypes.c_bool), ("sampler", ctypes.c_int),
                ("sampler_ratio", ctypes.c_double), ("sdk_disabled", ctypes.c_bool)]


class OtlpTls(ctypes.Structure):
    """mst_otlp_tls (include/mstrace_otlp.h)."""

    _fields_ = [("ca_file", ctypes.c_char * 1024), ("cert_file", ctypes.c_char * 1024),
                ("key_file", ctypes.c_char * 1024), ("ca_from", ctypes.c_char * 96),
                ("cert_from", ctypes.c_char * 96), ("key_from", ctypes.c_char * 96)]


class OtlpConfig(ctypes.Structure):
    """mst_otlp_config (include/mstrace_otlp.h)."""

    _fields_ = [("endpoint", ctypes.c_char * 1024), ("protocol", ctypes.c_int),
                ("headers", ctypes.c_char * 4096), ("timeout_ms", ctypes.c_uint32), ("gzip", ctypes.c_bool),
                ("tls", OtlpTls), ("endpoint_from", ctypes.c_char * 96)]


class Report(object):
    """The findings, in the order found; prints them as they come when `out` is given."""

    def __init__(self, out=None):
        self.findings = []  # (status, topic, text)
        self._out = out
        self._topic = None

    def add(self, status, topic, text):
        self.findings.append((status, topic, text))
        if self._out is not None:
            if topic != self._topic:
                self._out.write("%s\n" % topic)
                self._topic = topic
            self._out.write("  [%-4s] %s\n" % (status, text))
            self._out.flush()

    def count(self, status):
        return sum(1 for f in self.findings if f[0] == status)

    def problems(self):
        return [f for f in self.findings if f[0] == FAIL]

    def summary(self):
        problems = self.problems()
        head = "mstrace doctor: %d ok, %d warning(s), %d problem(s)" % (
            self.count(OK), self.count(WARN), len(problems))
        if not problems:
            return head + ": tracing is set up; spans appear once real requests are served"
        first = problems[0]
        return "%s; first: %s: %s" % (head, first[1], first[2])

    def exit_code(self):
        return 1 if self.problems() else 0


# ------------------------------------------------------------------ install


def plugin_entry_point():
    """The `mstrace` entry point of the `vllm.general_plugins` group ("module:attr"), or None."""
    from importlib import metadata

    try:
        eps = metadata.entry_points()
        group = eps.select(group="vllm.general_plugins") if hasattr(eps, "select") \
            else eps.get("vllm.general_plugins", ())
    except Exception:  # broken metadata of some other package
        return None
    for ep in group:
        if ep.name == "mstrace":
            return ep.value
    return None


def check_install(report):
    """The install; returns the C extension module or None."""
    topic = "install"
    report.add(OK, topic, "Python %s (%s)" % (sys.version.split()[0], sys.executable))
    report.add(OK, topic, "mstrace package %s" % os.path.dirname(os.path.abspath(__file__)))
    ep = plugin_entry_point()
    if ep is None:
        report.add(FAIL, topic, "no 'mstrace' entry point in vllm.general_plugins: vLLM will not load the plugin; "
                                "install mstrace into this Python ('pip install .' from the source tree)")
    else:
        report.add(OK, topic, "vLLM plugin entry point mstrace = %s" % ep)
    if importlib.util.find_spec("yaml") is None:
        report.add(FAIL, topic, "PyYAML is not installed: the plugin turns hook tracing off ('pip install PyYAML')")
    else:
        report.add(OK, topic, "PyYAML importable")
    try:
        from mstrace import _native
    except ImportError as exc:
        report.add(FAIL, topic, "the C extension mstrace._native cannot be imported (%s): the plugin turns hook "
                                "tracing off; reinstall mstrace for this Python" % exc)
        return None
    report.add(OK, topic, "C extension %s (libmstrace %s)" % (_native.__file__, _native.core_version))
    return _native


def check_vllm(report):
    """vLLM's version string, or None when vLLM is not importable here."""
    topic = "vLLM"
    spec = importlib.util.find_spec("vllm")
    if spec is None:
        report.add(FAIL, topic, "vLLM is not installed in this Python (%s): run the doctor with the Python that "
                                "runs vLLM" % sys.executable)
        return None
    version = symbols.installed_vllm_version()
    where = os.path.dirname(spec.origin) if spec.origin else "?"
    if version is None:
        report.add(WARN, topic, "vLLM at %s, version unknown: every version gate of the YAML is admitted" % where)
    else:
        report.add(OK, topic, "vLLM %s at %s" % (version, where))
    check_plugin_filter(report)
    return version


def check_plugin_filter(report):
    """VLLM_PLUGINS, read by vLLM's own envs module: does it let the mstrace plugin load?"""
    try:
        from vllm import envs
        allowed = envs.VLLM_PLUGINS
    except Exception as exc:  # an old vLLM without the variable, or a broken import
        report.add(WARN, "vLLM", "VLLM_PLUGINS not checked: %s: %s" % (type(exc).__name__, exc))
        return
    if allowed is None:
        report.add(OK, "vLLM", "VLLM_PLUGINS is unset: vLLM loads every plugin, mstrace included")
    elif "mstrace" in allowed:
        report.add(OK, "vLLM", "VLLM_PLUGINS=%r lists mstrace" % os.environ.get("VLLM_PLUGINS"))
    else:
        report.add(FAIL, "vLLM", "VLLM_PLUGINS=%r does not list mstrace: vLLM will not load the plugin "
                                 "(unset it, or add mstrace)" % os.environ.get("VLLM_PLUGINS"))


# ------------------------------------------------------------- environment


def _raw(name):
    value = os.environ.get(name)  # what libmstrace's readers saw: the process environment
    return "unset" if value is None else "%s=%r" % (name, value)


def check_enable(report, env=None):
    env = os.environ if env is None else env
    if plugin._enabled(env):
        report.add(OK, "environment", "MS_TRACE_ENABLE=1: the plugin turns hook tracing on in every vLLM process")
        return
    value = env.get(plugin.ENV_ENABLE)
    shown = "MS_TRACE_ENABLE is unset" if value is None else "MS_TRACE_ENABLE=%r" % value
    report.add(FAIL, "environment", "%s: hook tracing is off; the plugin acts only on exactly MS_TRACE_ENABLE=1"
               % shown)


def env_readers(native):
    """(TracerOptions, OtlpConfig, OTLP status, OTLP error text) from libmstrace's own readers."""
    lib = ctypes.CDLL(native.__file__)
    lib.mst_tracer_options_from_env.argtypes = [ctypes.POINTER(TracerOptions)]
    lib.mst_tracer_options_from_env.restype = None
    lib.mst_otlp_config_from_env.argtypes = [ctypes.POINTER(OtlpConfig), ctypes.c_char_p, ctypes.c_size_t]
    lib.mst_otlp_config_from_env.restype = ctypes.c_int
    opts, cfg = TracerOptions(), OtlpConfig()
    lib.mst_tracer_options_from_env(ctypes.byref(opts))
    err = ctypes.create_string_buffer(512)
    status = lib.mst_otlp_config_from_env(ctypes.byref(cfg), err, len(err))
    return opts, cfg, status, err.value.decode("utf-8", "replace")


def check_sampling(report, info, opts):
    """MS_PROFILER_* and OTEL_* sampling: the parsed values and what they mean for spans."""
    topic = "sampling"
    kind = SAMPLERS[opts.sampler] if 0 <= opts.sampler < len(SAMPLERS) else "?%d" % opts.sampler
    auto, rate = info.get("auto_trace"), info.get("sample_rate") or 0
    report.add(OK, topic, "MS_PROFILER_AUTO_TRACE (%s): %s" % (
        _raw("MS_PROFILER_AUTO_TRACE"), "on: requests without a traceparent get a generated context" if auto
        else "off: only requests that carry a traceparent are joined to their hook spans"))
    if rate > 1:
        report.add(OK, topic, "MS_PROFILER_SAMPLE_RATE (%s): 1 in %d generated contexts is traced%s" % (
            _raw("MS_PROFILER_SAMPLE_RATE"), rate, "" if auto else " (no effect: auto-trace is off)"))
    else:
        report.add(OK, topic, "MS_PROFILER_SAMPLE_RATE (%s): no 1-in-N sampling" % _raw("MS_PROFILER_SAMPLE_RATE"))
    sampler = "OTEL_TRACES_SAMPLER (%s): %s" % (_raw("OTEL_TRACES_SAMPLER"), kind)
    if kind.endswith("traceidratio"):
        sampler += ", OTEL_TRACES_SAMPLER_ARG (%s): ratio %g" % (_raw("OTEL_TRACES_SAMPLER_ARG"), opts.sampler_ratio)
    if opts.sdk_disabled:
        report.add(FAIL, topic, "OTEL_SDK_DISABLED (%s): no span is ever recorded" % _raw("OTEL_SDK_DISABLED"))
    if kind == "always_off" or (kind == "traceidratio" and opts.sampler_ratio <= 0.0):
        report.add(FAIL, topic, sampler + ": every span is dropped")
    elif kind == "parentbased_always_off" or (kind == "parentbased_traceidratio" and opts.sampler_ratio <= 0.0):
        report.add(WARN, topic, sampler + ": only spans under a sampled parent (a client's traceparent) are kept")
    elif kind.endswith("traceidratio") and opts.sampler_ratio < 1.0:
        report.add(WARN, topic, sampler + ": about %.3g%% of traces are kept" % (100.0 * opts.sampler_ratio))
    else:
        report.add(OK, topic, sampler)
    if opts.export_errors_only:
        report.add(WARN, topic, "MS_PROFILER_SAMPLE_ERROR (%s): only spans with status ERROR are exported; a healthy "
                                "run exports none" % _raw("MS_PROFILER_SAMPLE_ERROR"))


# ------------------------------------------------------------------ symbols


def active_symbols_path(env=None):
    """(path the plugin would load, note) without writing anything.

    The plugin writes the packaged default to a PROFILING_SYMBOLS_PATH that
    does not exist yet; the doctor only says so and checks the default."""
    env = os.environ if env is None else env
    configured = env.get(symbols.ENV_SYMBOLS_PATH, "").strip()
    if not configured:
        return symbols.DEFAULT_SYMBOLS_PATH, "the packaged default, PROFILING_SYMBOLS_PATH is unset"
    path = os.path.abspath(os.path.expanduser(configured))
    if path.lower().endswith((".yaml", ".yml")) and not os.path.exists(path):
        return symbols.DEFAULT_SYMBOLS_PATH, ("PROFILING_SYMBOLS_PATH=%s does not exist yet: the plugin writes the "
                                              "packaged default there at start; checking that default" % configured)
    chosen, problems = symbols.resolve_symbols_path(env)
    if problems:
        return chosen, "; ".join(problems)
    return chosen, "PROFILING_SYMBOLS_PATH"


def _entry_status(entry, records):
    """(status, text) of one traced entry from the patcher's records about it."""
    trace = entry.trace
    what = "%s (%s, %s)" % (trace.name or "<method name>", trace.domain, trace.adapter)
    applied = [r for r in records if r.status in ("applied", "present")]
    if applied:
        where = " as " + ", ".join(sorted({r.target for r in applied})) if entry.is_pattern else ""
        return OK, "hooked%s -> span %s" % (where, what)
    absent = [r for r in records if r.status == "skipped" and r.reason.startswith("package ")]
    if absent:
        if entry.module.partition(".")[0] == "vllm":
            return FAIL, "missing: %s" % absent[0].reason
        return OFF, "not needed here: %s" % absent[0].reason
    missing = [r for r in records if r.status == "skipped" and (
        " has no attribute " in r.reason or "does not exist" in r.reason)]
    if missing:
        return FAIL, "missing: %s: %s" % (missing[0].target, missing[0].reason)
    unimportable = [r for r in records if r.status == "skipped" and r.reason.startswith("module cannot be imported")]
    if unimportable:
        return WARN, ("%s here; hooked when vLLM imports it" % unimportable[0].reason)
    duplicates = [r for r in records if r.status == "duplicate"]
    if duplicates:
        return WARN, "not hooked: %s" % duplicates[0].reason
    skipped = [r for r in records if r.status == "skipped"]
    if skipped:
        return FAIL, "not hooked: %s: %s" % (skipped[0].target, skipped[0].reason)
    if entry.is_pattern:
        return WARN, "pattern matched nothing among the modules imported now; hooked when a module it matches is imported"
    return FAIL, "never resolved"


def check_symbols(report, native, vllm_version, path=None, env=None):
    """Resolve every entry of the YAML with the plugin's patcher and the extension's Hook."""
    from mstrace import patcher as patcher_mod

    topic = "symbols"
    if path is None:
        path, note = active_symbols_path(env)
    else:
        note = "given with --symbols"
    report.add(OK, topic, "%s: %s" % (path, note))
    result = symbols.load_symbols(path, vllm_version=vllm_version, detect_version=False)
    for line in result.errors:
        report.add(FAIL, topic, line)
    traced = [e for e in result.entries if e.trace is not None]
    p = patcher_mod.Patcher(traced, hook_factory=native.Hook, hook_types=patcher_mod.native_hook_types(native))
    p.install()
    try:
        p.report_missing_modules()
        p.import_and_apply()
    finally:
        p.uninstall(restore=True)
    by_entry = {}
    for rec in p.records:
        by_entry.setdefault(rec.entry_index, []).append(rec)
    lines = []  # (index, status, text), reported in file order
    for entry in result.entries:
        if entry.trace is None:
            lines.append((entry.index, OFF, "no trace (a profiling-only entry): not hooked by mstrace"))
        else:
            lines.append((entry.index,) + _entry_status(entry, by_entry.get(entry.index, [])))
    for entry in result.gated:
        lines.append((entry.index, OFF, "gated off: vLLM %s is outside [%s, %s]" % (
            vllm_version, entry.min_version or "-", entry.max_version or "-")))
    symbol_of = {e.index: e.symbol for e in result.entries + result.gated}
    for index, status, text in sorted(lines, key=lambda line: line[0]):
        report.add(status, topic, "#%d %s: %s" % (index, symbol_of[index], text))


# -------------------------------------------------------------- destinations


def probe_forwarder(name, timeout):
    """(True, detail) when a process listens on the abstract Unix socket @name."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect("\0" + name)
    except OSError as exc:
        if isinstance(exc, ConnectionRefusedError):
            return False, "nothing listens on @%s" % name
        return False, "connect to @%s failed: %s" % (name, exc.strerror or exc)
    finally:
        sock.close()
    return True, "a forwarder answers on @%s" % name


def _connect(url, timeout, alpn=None):
    """A connected socket to the URL's authority, TLS-wrapped for https; raises OSError/ssl.SSLError."""
    host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    raw = socket.create_connection((host, port), timeout=timeout)
    if url.scheme != "https":
        return raw, "TCP %s:%d, plain" % (host, port)
    ctx = ssl.create_default_context()
    if alpn:
        ctx.set_alpn_protocols(alpn)
    try:
        tls = ctx.wrap_socket(raw, server_hostname=host)
    except Exception:
        raw.close()
        raise
    return tls, "TCP %s:%d, %s" % (host, port, tls.version())


def _probe_http(url, sock, protocol, timeout):
    """POST an empty export (a valid ExportTraceServiceRequest with no spans)."""
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    conn.sock = sock
    body, ctype = (b"{}", "application/json") if protocol == "http/json" else (b"", "application/x-protobuf")
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        resp.read()
    except (http.client.HTTPException, OSError) as exc:
        return False, "no HTTP answer to an OTLP export (%s: %s); is this the %s port?" % (
            type(exc).__name__, exc, protocol)
    finally:
        conn.close()
    if 200 <= resp.status < 300:
        return True, "HTTP %d to an empty export" % resp.status
    if resp.status in (401, 403):
        return True, ("HTTP %d: reachable; the probe sends no OTEL_EXPORTER_OTLP_HEADERS, check them if the "
                      "collector needs credentials" % resp.status)
    return False, "HTTP %d %s to an OTLP export at %s (wrong path or port?)" % (resp.status, resp.reason, path)


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _probe_grpc(sock, timeout):
    """Send the HTTP/2 connection preface; a gRPC server answers with a SETTINGS frame."""
    if isinstance(sock, ssl.SSLSocket) and sock.selected_alpn_protocol() != "h2":
        return False, "TLS peer did not agree to HTTP/2 (ALPN %s): not a gRPC endpoint" % sock.selected_alpn_protocol()
    sock.settimeout(timeout)
    try:
        sock.sendall(_H2_PREFACE)
        head = b""
        while len(head) < 9:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                break
            head += chunk
    except OSError as exc:
        return False, "no HTTP/2 answer (%s)" % (exc.strerror or exc)
    if len(head) == 9 and head[3] == 0x4:
        return True, "HTTP/2 (gRPC) server"
    try:
        head += sock.recv(256)
    except OSError:
        pass
    if b"HTTP/1" in head or head.lstrip()[:1] == b"<":  # a status line, or an HTTP/0.9-style error page
        return False, ("it answers HTTP/1.x, not HTTP/2: an OTLP/HTTP port? set "
                       "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf, or use the gRPC port (4317)")
    return False, "not an HTTP/2 answer (%r): not a gRPC endpoint" % head[:16]


def probe_otlp(endpoint, protocol, timeout):
    """(True, detail) when the OTLP endpoint answers in `protocol`; (False, why) otherwise."""
    url = urllib.parse.urlsplit(endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        return False, "not an http(s) URL with a host: %s" % endpoint
    try:
        sock, how = _connect(url, timeout, alpn=["h2"] if protocol == "grpc" else None)
    except socket.gaierror as exc:
        return False, "host %s does not resolve (%s)" % (url.hostname, exc.strerror or exc)
    except ssl.SSLCertVerificationError as exc:
        return False, "TLS certificate not accepted: %s" % (exc.verify_message or exc)
    except ssl.SSLError as exc:
        return False, "TLS handshake failed (%s); a plain-text collector needs http://" % (exc.reason or exc)
    except socket.timeout:
        return False, "no answer from %s:%s within %g s" % (url.hostname, url.port, timeout)
    except OSError as exc:
        return False, "cannot connect to %s:%s: %s" % (url.hostname, url.port, exc.strerror or exc)
    try:
        ok, detail = _probe_grpc(sock, timeout) if protocol == "grpc" else _probe_http(url, sock, protocol, timeout)
    finally:
        sock.close()
    return ok, "%s: %s" % (how, detail)


def check_destinations(report, info, cfg, otlp_status, otlp_error, timeout):
    topic = "destinations"
    exporters = info.get("exporters") or []
    otel_mode = info.get("exporter_mode") == "otel"
    otlp_configured = False  # spans have somewhere to go besides the forwarder
    if otel_mode:
        if "otel" in exporters:
            report.add(OK, topic, "MS_TRACE_EXPORTER=otel: hook spans go to the process's OpenTelemetry "
                                  "TracerProvider (vLLM's, from --otlp-traces-endpoint)")
            otlp_configured = True
        else:
            report.add(FAIL, topic, "MS_TRACE_EXPORTER=otel but the OpenTelemetry SDK cannot be used: no hook span "
                                    "is recorded (install opentelemetry-sdk, or unset MS_TRACE_EXPORTER)")
    if otlp_status == MST_ERR_UNAVAILABLE:
        report.add(OFF, topic, "OTLP: no endpoint set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, vLLM's "
                               "--otlp-traces-endpoint): Jaeger export is off")
    elif otlp_status != MST_OK:
        report.add(FAIL, topic, "OTLP settings are invalid, export is off: %s" % otlp_error)
    else:
        endpoint = cfg.endpoint.decode("utf-8", "replace")
        protocol = OTLP_PROTOCOLS[cfg.protocol] if 0 <= cfg.protocol < len(OTLP_PROTOCOLS) else "?"
        extra = "%s%s" % (", gzip" if cfg.gzip else "", ", with OTEL_EXPORTER_OTLP_HEADERS" if cfg.headers else "")
        ok, detail = probe_otlp(endpoint, protocol, timeout)
        report.add(OK if ok else FAIL, topic, "OTLP %s -> %s%s: %s" % (protocol, endpoint, extra, detail))
        otlp_configured = True
        if not otel_mode and "otlp" not in exporters:
            report.add(FAIL, topic, "the OTLP exporter was not created (see the plugin log lines)")
    name = info.get("perfetto_socket")
    if not name:
        report.add(OFF, topic, "Perfetto forwarder client off (MSTRACE_PERFETTO=off)")
        perfetto_ok = False
    else:
        perfetto_ok, detail = probe_forwarder(name, timeout)
        if perfetto_ok:
            report.add(OK, topic, "Perfetto: " + detail)
        elif otlp_configured:
            report.add(WARN, topic, "Perfetto: %s: no Perfetto file until 'mstrace forward --perfetto-output PATH' "
                                    "runs here (same user); OTLP export is unaffected" % detail)
        else:
            report.add(FAIL, topic, "Perfetto: %s, and no OTLP endpoint is set: spans go nowhere. Start "
                                    "'mstrace forward --perfetto-output trace.pftrace%s' as this user, or set an "
                                    "OTLP endpoint" % (detail, "" if name == "MSP_PERFETTO_SOCKET"
                                                       else " --socket-name " + name))


# --------------------------------------------------------------------- main


class _Collect(logging.Handler):
    """The warnings the plugin's code logs during the checks (logger "mstrace", not per-entry ones)."""

    def __init__(self):
        logging.Handler.__init__(self, logging.WARNING)
        self.lines = []

    def emit(self, record):
        if not record.name.startswith(("mstrace.patcher", "mstrace.symbols")):
            self.lines.append(record.getMessage())

    def report_to(self, report):
        """Each line collected so far becomes a warning of the report, once."""
        for line in self.lines:
            report.add(WARN, "plugin log (each vLLM process would print this)", line)
        del self.lines[:]


def run(report, symbols_path=None, timeout=3.0, env=None):
    """Every check, into `report`; returns it."""
    env = os.environ if env is None else env
    logger = logging.getLogger("mstrace")
    collect = _Collect()
    saved = logger.propagate
    logger.addHandler(collect)
    logger.propagate = False  # the report says it once; no duplicate on stderr
    try:
        native = check_install(report)
        version = check_vllm(report)
        check_enable(report, env)
        if native is None:
            return report
        info = native.init(**plugin._init_kwargs()) or {}  # the plugin's own start-up, exporters included
        collect.report_to(report)
        opts, cfg, otlp_status, otlp_error = env_readers(native)
        check_sampling(report, info, opts)
        if importlib.util.find_spec("vllm") is not None:  # also a vLLM of unknown version
            check_symbols(report, native, version, symbols_path, env)
        check_destinations(report, info, cfg, otlp_status, otlp_error, timeout)
        collect.report_to(report)
    finally:
        logger.removeHandler(collect)
        logger.propagate = saved
    return report


def build_parser():
    p = argparse.ArgumentParser(
        prog="mstrace doctor",
        description="Check, in the environment vLLM is served from, why hook spans might not appear: the install, "
                    "the vLLM version, MS_TRACE_ENABLE and the sampling settings as the plugin reads them, each "
                    "symbol of the active YAML (hooked, missing, or gated off by version), the Perfetto forwarder "
                    "socket and the OTLP endpoint. Run it as the user, in the container and with the environment "
                    "of 'vllm serve'.",
        epilog="Exit status: 0 nothing required is missing, 1 a problem (FAIL lines; the last line names the "
               "first), 2 usage error.")
    p.add_argument("--symbols", metavar="PATH",
                   help="check this symbols YAML instead of the active one (PROFILING_SYMBOLS_PATH or the "
                        "packaged default)")
    p.add_argument("--otlp-traces-endpoint", metavar="URL",
                   help="the URL given to 'vllm serve --otlp-traces-endpoint' (vLLM exports it as "
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT only inside its own processes)")
    p.add_argument("--timeout", metavar="SECONDS", type=float, default=3.0,
                   help="time allowed to each network probe [3]")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        parser.error("argument --timeout: expected a positive number of seconds")
    if args.symbols is not None and not os.path.isfile(args.symbols):
        parser.error("argument --symbols: no such file: %s" % args.symbols)
    if args.otlp_traces_endpoint:
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = args.otlp_traces_endpoint  # as vLLM does
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's import-time INFO lines are noise here
    report = run(Report(sys.stdout), symbols_path=args.symbols, timeout=args.timeout)
    print(report.summary())
    return report.exit_code()


if __name__ == "__main__":
    sys.exit(main())
