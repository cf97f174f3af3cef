"""The vLLM general plugin: `mstrace = mstrace.plugin:register`.

This module owns turning tracing on inside a vLLM process. vLLM calls every
general plugin in every process it starts (API server, one EngineCore per
data-parallel rank, and the workers of the `mp` executor), sometimes more
than once per process, so `register()`:
  * does nothing at all unless MS_TRACE_ENABLE is exactly "1" (no import,
    no log line, no finder);
  * is re-entrant: the second call in a process (or in a fork()ed child
    that inherited the first call's work) returns at once;
  * imports PyYAML and the C extension only then; if either is missing it
    logs one warning and returns, and inference goes on untraced;
  * initialises the native tracer, loads the symbols YAML, installs the
    import hook, and logs which exporters are active;
  * beside msServiceProfiler, leaves the YAML's profiling handlers to it
    when it profiles in the process (coexist.py has the rule);
  * arranges a short flush before the process ends (see _arm_exit_flush):
    vLLM's EngineCore and worker processes end through multiprocessing's
    os._exit(), which skips the extension's Py_AtExit shutdown.
Nothing raised in here may reach vLLM: a tracing problem must never stop an
inference server from starting.
"""

import functools
import logging
import os
import re
import signal
import sys
import threading

ENV_ENABLE = "MS_TRACE_ENABLE"

logger = logging.getLogger("mstrace")

_lock = threading.Lock()
_state = {"pid": None, "patcher": None, "init": None, "disabled": None, "otlp_rearmed": False,
          "exit_flush_pid": None, "sigterm": None}

# Flush timeout at process end: short, because vLLM escalates to SIGKILL a
# few seconds after SIGTERM and a slow collector must not hold shutdown up.
EXIT_FLUSH_TIMEOUT_MS = 1000

# Modules whose global `init_tracer` vLLM calls when --otlp-traces-endpoint is
# given (AsyncLLM in the API server, LLMEngine offline).
_TRACER_INIT_MODULES = ("vllm.v1.engine.async_llm", "vllm.v1.engine.llm_engine")


def _enabled(env=None):
    env = os.environ if env is None else env
    return env.get(ENV_ENABLE) == "1"


def _ensure_log_handler():
    # vLLM configures only its own "vllm" logger; without a handler ours
    # would print nothing below WARNING. Level: vLLM's VLLM_LOGGING_LEVEL.
    if logger.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [mstrace pid=%(process)d] %(message)s",
                                           "%m-%d %H:%M:%S"))
    logger.addHandler(handler)
    level = os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper()
    logger.setLevel(level if level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "INFO")
    logger.propagate = False


def register():
    """Entry point called by vLLM's plugin loader. Never raises."""
    if not _enabled():
        return None
    with _lock:
        if _state["patcher"] is not None or _state["disabled"] is not None:
            if _state["pid"] != os.getpid():
                # fork()ed child: the hooks and finder came along with the
                # memory; the native side re-arms its exporters after fork.
                _state["pid"] = os.getpid()
                if _state["patcher"] is not None:
                    _set_role()
                    _arm_exit_flush()
            return _state["patcher"]
        try:
            _ensure_log_handler()
            return _register_locked()
        except Exception as exc:  # pragma: no cover - defensive: never break vLLM
            _state["disabled"] = "error: %s" % exc
            logger.warning("mstrace: hook tracing disabled after an internal error: %s: %s", type(exc).__name__, exc)
            return None


def _register_locked():
    try:
        import yaml  # noqa: F401  (the symbols file needs it; fail early and once)
    except ImportError as exc:
        return _disable("PyYAML is not installed (%s); hook tracing is off, inference continues. "
                        "Install it with 'pip install PyYAML'." % exc)
    try:
        from mstrace import _native
    except ImportError as exc:
        return _disable("the mstrace C extension cannot be loaded (%s); hook tracing is off, "
                        "inference continues. Reinstall mstrace ('pip install .') for this Python." % exc)

    from mstrace import coexist
    from mstrace import patcher as patcher_mod
    from mstrace import symbols

    info = _native.init(**_init_kwargs())
    _state["init"] = info
    _log_exporters(info)

    result = symbols.load_symbols()
    traced = [e for e in result.entries if e.trace is not None]
    runs_handlers, beside = coexist.handler_owner()
    if beside:
        logger.info("%s", beside)
    if not runs_handlers:
        for e in traced:  # msServiceProfiler runs them (mstrace/coexist.py)
            e.handler = None
    p = patcher_mod.Patcher(traced, hook_factory=_native.Hook, hook_types=patcher_mod.native_hook_types(_native))
    p.install()
    try:
        missing = p.report_missing_modules()  # INFO lines (docs/reference/behaviour.md); imports nothing
    except Exception as exc:  # pragma: no cover - diagnostics only
        missing = {}
        logger.debug("mstrace: missing-module check failed: %s: %s", type(exc).__name__, exc)
    _state["patcher"] = p
    _state["pid"] = os.getpid()
    _arm_exit_flush()
    if isinstance(info, dict) and "otlp" not in (info.get("exporters") or ()):
        _arm_otlp_rearm(p, _native)

    applied = sum(1 for r in p.records if r.status == "applied")
    waiting = [m for m in p.pending_modules if m not in missing]
    logger.info(
        "mstrace: hook tracing on: %d entries from %s (%d skipped as invalid, %d outside the vLLM version range), "
        "%d hooks applied now, %d module(s) hooked when imported, %d module(s) not installed; process role %s",
        len(traced), result.source, len(result.errors), len(result.gated), applied, len(waiting), len(missing),
        process_role(),
    )
    if waiting:
        logger.debug("mstrace: waiting for import: %s", ", ".join(waiting))
    return p


# ------------------------------------------------------------ process end

class _ForkToken(object):
    """Kept alive for multiprocessing's after-fork registry (a weak mapping)."""


_FORK_TOKEN = _ForkToken()
_after_fork_registered = [False]


def exit_accounting(stats):
    """The one line a process logs about its spans as it exits, and whether any was lost.

    Every span the tracer started is exported, dropped (its queue was full), failed (an
    exporter could not deliver it), filtered or still queued; each exporter says what it
    delivered, failed or skipped. Lost = dropped + failed (+ an exporter's failures).
    """
    parts = ["started=%d" % stats.get("spans_started", 0)]
    for key in ("exported", "dropped", "failed", "filtered"):
        parts.append("%s=%d" % (key, stats.get("spans_" + key, 0)))
    # spans_queued counts every ended span kept for export, exported or not.
    waiting = stats.get("spans_queued", 0) - stats.get("spans_exported", 0) - stats.get("spans_failed", 0)
    parts.append("not_exported_yet=%d" % max(waiting, 0))
    lost = stats.get("spans_dropped", 0) + stats.get("spans_failed", 0)
    for name, ex in sorted((stats.get("exporters") or {}).items()):
        parts.append("%s: exported=%d failed=%d skipped=%d" % (
            name, ex.get("spans_exported", 0), ex.get("spans_failed", 0), ex.get("spans_skipped", 0)))
        lost = max(lost, stats.get("spans_dropped", 0) + ex.get("spans_failed", 0))
    return "spans at exit: " + " ".join(parts), lost


def _exit_flush():
    try:
        from mstrace import _native
        _native.end_stories()  # the requests still open end their last phase here
        _native.flush(timeout_ms=EXIT_FLUSH_TIMEOUT_MS)
        line, lost = exit_accounting(_native.stats())
        if lost:
            logger.warning("mstrace: %s; %d span(s) lost in this process", line, lost)
        else:
            logger.info("mstrace: %s", line)
    except Exception:  # pragma: no cover - never in the way of an exit
        pass


def _arm_exit_flush():
    """Flush queued spans before this process ends (once per process).

    * multiprocessing.util.Finalize(exitpriority=-100): Process._bootstrap
      runs the finalizers (util._exit_function) after the target returned
      *or raised* - including the SystemExit that vLLM's EngineCore
      (run_engine_core: SIGTERM -> shutdown requested -> busy loop raises
      SystemExit -> finally: engine_core.shutdown()) and WorkerProc
      (worker_main: SIGTERM handler raises SystemExit -> finally:
      worker.shutdown()) end with - and only then calls os._exit(). -100
      runs after the daemon children were joined.
    * A multiprocessing child clears the finalizers it inherited by fork;
      util.register_after_fork re-arms them there (and the process role).
    * SIGTERM while the handler is still SIG_DFL (a process where nobody
      installed one): flush, then die by SIGTERM as before. A handler that
      vLLM (or anyone) installs later simply replaces ours.
    Not covered: SIGKILL, crashes, os._exit() outside multiprocessing's
    bootstrap, and anything a 1 s flush cannot deliver.
    """
    pid = os.getpid()
    if _state["exit_flush_pid"] == pid:
        return
    _state["exit_flush_pid"] = pid
    try:
        from multiprocessing import util as mp_util
        mp_util.Finalize(None, _exit_flush, exitpriority=-100)
        if not _after_fork_registered[0]:  # the registry itself is inherited by fork
            _after_fork_registered[0] = True
            mp_util.register_after_fork(_FORK_TOKEN, _after_mp_fork)
    except Exception as exc:  # pragma: no cover - defensive
        logger.debug("mstrace: exit flush not armed: %s: %s", type(exc).__name__, exc)
    _install_sigterm_flush()


def _after_mp_fork(_token):
    # In a multiprocessing child (Process._bootstrap, after it cleared the
    # finalizer registry); the lock may have been held by another thread at
    # fork time, so it is not taken here.
    if _state["patcher"] is not None:
        _state["pid"] = os.getpid()
        _set_role()
        _arm_exit_flush()


def _on_sigterm(signum, frame):
    _exit_flush()
    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # the default action, as before
    except Exception:  # pragma: no cover
        os._exit(128 + signal.SIGTERM)


def _install_sigterm_flush():
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only there; Finalize still covers the exit
    try:
        current = signal.getsignal(signal.SIGTERM)
        if current is _on_sigterm:
            return
        if current != signal.SIG_DFL:
            _state["sigterm"] = "left alone (a handler is installed)"
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
        _state["sigterm"] = "flush, then default"
    except (ValueError, OSError, RuntimeError) as exc:
        _state["sigterm"] = "not installed: %s" % exc


def _arm_otlp_rearm(p, native):
    """Pick up an OTLP endpoint that vLLM sets after the plugin ran.

    In the API server vLLM loads plugins while it builds its config, and only
    later (AsyncLLM/LLMEngine __init__ -> init_tracer) exports
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT from --otlp-traces-endpoint. Engine
    and worker processes start after that and inherit it; this process must
    re-initialise the native tracer once vLLM's own tracer is up, so hook
    spans go where vLLM's spans go. The modules' `init_tracer` global is
    looked up at call time, so replacing it works even after import.
    """

    def wrap(module):
        original = vars(module).get("init_tracer")
        if original is None or getattr(original, "_mstrace_rearm", False):
            return

        @functools.wraps(original)
        def init_tracer(*args, **kwargs):
            result = original(*args, **kwargs)
            _rearm_native(native)
            return result

        init_tracer._mstrace_rearm = True
        module.init_tracer = init_tracer

    for name in _TRACER_INIT_MODULES:
        p.on_import(name, wrap)


def _rearm_native(native):
    with _lock:
        if _state["otlp_rearmed"]:
            return
        info = _state["init"]
        if isinstance(info, dict) and info.get("exporter_mode") == "otel":
            # MS_TRACE_EXPORTER=otel: vLLM's provider now exists; hook spans
            # go to it (the exporter thread would also find it by itself).
            _state["otlp_rearmed"] = True
            if "otel" in (info.get("exporters") or ()):
                from mstrace import otel_bridge
                if otel_bridge.resolve() is not None:
                    logger.info("mstrace: vLLM installed its TracerProvider; hook spans go to it")
            return
        if not (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
            return
        _state["otlp_rearmed"] = True
        try:
            native.shutdown()
            info = native.init(**_init_kwargs())
        except Exception as exc:
            logger.warning("mstrace: could not switch on OTLP export after vLLM enabled tracing: %s: %s",
                           type(exc).__name__, exc)
            return
        _state["init"] = info
        logger.info("mstrace: vLLM enabled its OTLP tracing; hook tracer re-initialised")
        _log_exporters(info)


def _init_kwargs():
    # MSTRACE_PERFETTO_SOCKET: a non-default forwarder socket name (matching
    # `mstrace forward --socket-name`), so tests and side-by-side runs do not
    # share the well-known @MSP_PERFETTO_SOCKET.
    return {
        "service_name": os.environ.get("OTEL_SERVICE_NAME") or None,
        "forward_socket": os.environ.get("MSTRACE_PERFETTO_SOCKET") or None,
        "process_role": process_role(),
    }


# ---------------------------------------------------------- process role

_ROLE_PATTERNS = (
    (re.compile(r"EngineCore(?:_DP(\d+))?$"), lambda m: "engine_core" + ("_dp" + m.group(1) if m.group(1) else "")),
    (re.compile(r"VllmWorker-(\d+)$"), lambda m: "worker_" + m.group(1)),
    (re.compile(r"ApiServer_(\d+)$"), lambda m: "api_server_" + m.group(1)),
)


def process_role(name=None, argv=None):
    """What this vLLM process is, for the `process.role` span attribute and
    the resource's role attributes (the Perfetto process track is named
    "<role> (<service.name>)"; with MSTRACE_SERVICE_PER_ROLE=1 EngineCore
    exports under "<OTEL_SERVICE_NAME>.engine_core", workers under
    ".worker", see docs/configuration.md). From the multiprocessing process name
    vLLM gives its children (vllm/v1/engine/utils.py, multiproc_executor.py,
    v1/utils.py): EngineCore[_DP<n>] -> engine_core[_dp<n>], VllmWorker-<r>
    -> worker_<r>, ApiServer_<i> -> api_server_<i>; the main process is
    api_server under `vllm serve` / the OpenAI api_server module, else main;
    any other name is used as it is."""
    if name is None:
        try:
            import multiprocessing
            name = multiprocessing.current_process().name
        except Exception:  # pragma: no cover
            name = "MainProcess"
    for pattern, role in _ROLE_PATTERNS:
        m = pattern.match(name)
        if m:
            return role(m)
    if name != "MainProcess":
        return name
    argv = sys.argv if argv is None else argv
    prog = os.path.basename(argv[0]) if argv else ""
    if (prog == "vllm" and len(argv) > 1 and argv[1] == "serve") or prog.startswith("api_server"):
        return "api_server"
    return "main"


def _set_role():
    try:
        from mstrace import _native
        _native.set_process_role(process_role())
    except Exception as exc:  # pragma: no cover - a label only
        logger.debug("mstrace: process role not set: %s: %s", type(exc).__name__, exc)


def _disable(message):
    _state["disabled"] = message
    _state["pid"] = os.getpid()
    logger.warning("mstrace: %s", message)
    return None


def _log_exporters(info):
    """One line naming the active exporters, from what _native.init() returned."""
    if not isinstance(info, dict):
        logger.info("mstrace: native tracer initialised")
        return
    exporters = info.get("exporters")
    if isinstance(exporters, (list, tuple)):
        parts = []
        for name in exporters:
            if name == "otel":
                parts.append("otel (the process's global OpenTelemetry TracerProvider)")
            elif name == "otlp":
                parts.append("otlp (%s -> %s)" % (info.get("protocol") or "?", info.get("endpoint") or "?"))
            elif name == "perfetto":
                parts.append("perfetto (abstract socket @%s)" % (info.get("perfetto_socket") or "?"))
            else:
                parts.append(str(name))
        if parts:
            logger.info("mstrace: exporters active: %s; service.name=%s", ", ".join(parts),
                        info.get("service_name") or "(default)")
        else:
            logger.info("mstrace: no exporter is active: hook spans are counted and dropped")
        return
    details = "; ".join("%s=%s" % (k, info[k]) for k in sorted(info))
    logger.info("mstrace: native tracer initialised: %s", details or "(no details)")


def state():
    """What register() did in this process (diagnostics and tests)."""
    return dict(_state)
