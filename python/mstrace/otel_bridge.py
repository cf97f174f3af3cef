"""The Python half of MS_TRACE_EXPORTER=otel: hook spans into the process's
global OpenTelemetry TracerProvider (as upstream msServiceProfiler does).

Owns two things the C bridge (`_native/otel_bridge.c`) cannot do cheaply in C:
  * `sdk_types()`: imports the OpenTelemetry SDK classes a finished hook span
    is turned into (ReadableSpan, SpanContext, ...). Called once by
    `_native.init()` in otel mode; an ImportError there makes hook tracing a
    no-op with one warning (docs/reference/behaviour.md: dependency missing).
  * `resolve()`: finds the global *SDK* TracerProvider and returns
    `(processor, resource)`. vLLM installs its provider after plugins load
    (its `init_tracer`), so the C exporter thread calls this once per batch
    (GIL held) until it returns something, then keeps the result. The
    plugin also calls it right after vLLM's `init_tracer` returns.

The hand-off relies on `TracerProvider._active_span_processor` (the object
every SDK span calls `on_end` on when it ends; it fans out to vLLM's
BatchSpanProcessor and any other processor). It is private API: if a future
SDK drops it, hook spans are dropped with one warning rather than broken.

At interpreter exit `close()` (registered with `atexit`, after the provider
exists so it runs *before* the SDK's own shutdown, atexit being LIFO)
flushes the queued hook spans into the provider and then stops the C side
from ever touching Python again (no GIL take-over during finalization).
"""

import atexit
import logging
import threading

logger = logging.getLogger("mstrace")

_lock = threading.Lock()
_state = {"resolved": None, "warned_missing": False, "warned_api": False}


def sdk_types():
    """The SDK classes the C bridge builds spans from. Raises ImportError."""
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider  # noqa: F401
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace.status import Status, StatusCode

    kinds = trace_api.SpanKind
    return {
        "ReadableSpan": ReadableSpan,
        "SpanContext": trace_api.SpanContext,
        "TraceFlags": trace_api.TraceFlags,
        "TraceState": trace_api.TraceState,
        "empty_trace_state": trace_api.TraceState(),
        "Link": trace_api.Link,
        "Event": Event,
        "InstrumentationScope": InstrumentationScope,
        "Status": Status,
        "status_unset": Status(StatusCode.UNSET),
        "status_ok": Status(StatusCode.OK),
        "status_error": StatusCode.ERROR,
        # indexed by the OTLP kind number (mstrace.h): 0 unspecified -> INTERNAL
        "kinds": (kinds.INTERNAL, kinds.INTERNAL, kinds.SERVER, kinds.CLIENT, kinds.PRODUCER, kinds.CONSUMER),
    }


def _close():
    try:
        from mstrace import _native
        _native._otel_bridge_close()
    except Exception:  # pragma: no cover - never fail interpreter exit
        pass


def _arm_close():
    # Registered at most twice: once at init (so a process whose provider
    # never appears still stops the C side before finalization) and once when
    # the provider is found (so it runs before the provider's own atexit
    # shutdown). close() is idempotent.
    atexit.register(_close)


def resolve():
    """(processor, resource) of the global SDK TracerProvider, or None."""
    with _lock:
        if _state["resolved"] is not None:
            return _state["resolved"]
        try:
            from opentelemetry import trace as trace_api
            from opentelemetry.sdk.trace import TracerProvider
        except ImportError:  # checked at init already; be safe
            return None
        provider = trace_api.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            if not _state["warned_missing"]:
                _state["warned_missing"] = True
                logger.warning(
                    "mstrace: MS_TRACE_EXPORTER=otel but no OpenTelemetry SDK TracerProvider is installed in this "
                    "process (the global provider is %s); hook spans are dropped until one is (vLLM installs it "
                    "when started with --otlp-traces-endpoint). Unset MS_TRACE_EXPORTER for mstrace's own "
                    "exporter.", type(provider).__name__)
            return None
        processor = getattr(provider, "_active_span_processor", None)
        if processor is None or not callable(getattr(processor, "on_end", None)):
            if not _state["warned_api"]:
                _state["warned_api"] = True
                logger.warning(
                    "mstrace: MS_TRACE_EXPORTER=otel: this opentelemetry-sdk's TracerProvider has no "
                    "_active_span_processor.on_end (the SDK changed); hook spans are dropped. Unset "
                    "MS_TRACE_EXPORTER to use mstrace's own exporter.")
            return None
        _state["resolved"] = (processor, provider.resource)
        _arm_close()
        if _state["warned_missing"]:
            logger.info("mstrace: an OpenTelemetry TracerProvider is now installed; hook spans go to it")
        else:
            logger.debug("mstrace: hook spans go to the global TracerProvider (%s)", type(provider).__name__)
        return _state["resolved"]


def _reset_for_tests():
    with _lock:
        _state.update(resolved=None, warned_missing=False, warned_api=False)
