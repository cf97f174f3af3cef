"""grpc_test_server.py — a scriptable OTLP/gRPC collector for tests.

Owns the fake-collector side of the gRPC failure-path tests: a real grpcio
server (insecure, loopback, port 0) serving
/opentelemetry.proto.collector.trace.v1.TraceService/Export through a generic
method handler (no generated service stubs needed: the request is parsed with
ExportTraceServiceRequest.FromString). Each call is answered with the next
script entry: OK, OK with partial_success, an error status (optionally with a
google.rpc.RetryInfo in grpc-status-details-bin), or a slow reply; after the
script runs out every call gets a plain OK. Every call is recorded (decoded
request, span count, client metadata, peer address, arrival time).

Why grpcio and not a hand-made HTTP/2 server: the transport speaks gRPC over
libcurl by hand, so only a real gRPC implementation shows that its framing,
compression flag, trailers and status handling interoperate.

Use from pytest:

    with GrpcTestServer([unavailable(), ok()]) as srv:
        run_driver(srv.url, ...)
        assert len(srv.calls) == 2
"""
from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Optional

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as svc

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
METHOD = "Export"


# ----------------------------------------------------------- script entries

def ok() -> dict:
    return {"code": grpc.StatusCode.OK}


def partial(rejected: int, message: str) -> dict:
    """OK with ExportTraceServiceResponse.partial_success."""
    return {"code": grpc.StatusCode.OK, "partial": (rejected, message)}


def error(code: grpc.StatusCode, details: str = "scripted failure",
          retry_delay_s: Optional[float] = None) -> dict:
    """A failing status; retry_delay_s adds google.rpc.RetryInfo{retry_delay}
    in grpc-status-details-bin (what makes RESOURCE_EXHAUSTED retryable)."""
    return {"code": code, "details": details, "retry_delay_s": retry_delay_s}


def unavailable() -> dict:
    return error(grpc.StatusCode.UNAVAILABLE, "collector busy")


def slow(seconds: float) -> dict:
    """Answer OK only after `seconds` (longer than the client's timeout)."""
    return {"code": grpc.StatusCode.OK, "sleep": seconds}


def status_details_bin(code: grpc.StatusCode, message: str, retry_delay_s: float) -> bytes:
    """google.rpc.Status{code, message, details=[Any(RetryInfo{retry_delay})]}
    serialized: the value of the grpc-status-details-bin trailer (grpcio
    base64-encodes -bin metadata on the wire)."""
    if isinstance(retry_delay_s, tuple):  # exact (seconds, nanos), e.g. out-of-range values
        delay = duration_pb2.Duration(seconds=retry_delay_s[0], nanos=retry_delay_s[1])
    else:
        seconds = int(retry_delay_s)
        delay = duration_pb2.Duration(seconds=seconds, nanos=int(round((retry_delay_s - seconds) * 1e9)))
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    st = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    assert st.code == getattr(code_pb2, code.name)  # grpc and google.rpc agree on numbers
    return st.SerializeToString()


# ---------------------------------------------------------------- recording

@dataclass
class Call:
    request: svc.ExportTraceServiceRequest
    metadata: dict           # client metadata (lower-cased keys)
    peer: str                # "ipv4:127.0.0.1:PORT": one per TCP connection
    received_at: float       # time.monotonic()
    answered: Optional[grpc.StatusCode] = None

    @property
    def span_count(self) -> int:
        return sum(len(ss.spans) for rs in self.request.resource_spans for ss in rs.scope_spans)

    @property
    def spans(self) -> list:
        return [s for rs in self.request.resource_spans for ss in rs.scope_spans for s in ss.spans]


class GrpcTestServer:
    """A loopback OTLP/gRPC collector answering from a script."""

    def __init__(self, script: Optional[list] = None, max_workers: int = 8):
        self._lock = threading.Lock()
        self._script = list(script or [])
        self._stopping = threading.Event()  # ends slow replies at stop()
        self.calls: list[Call] = []
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            METHOD: grpc.unary_unary_rpc_method_handler(
                self._export,
                request_deserializer=svc.ExportTraceServiceRequest.FromString,
                response_serializer=svc.ExportTraceServiceResponse.SerializeToString),
        })
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        if not self.port:
            raise RuntimeError("grpc: cannot bind a loopback port")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_script(self, script: list) -> None:
        with self._lock:
            self._script = list(script)

    def _next(self, call: Call) -> dict:
        with self._lock:
            self.calls.append(call)
            return self._script.pop(0) if self._script else ok()

    def _export(self, request, context):
        call = Call(request, {k.lower(): v for k, v in context.invocation_metadata()},
                    context.peer(), time.monotonic())
        entry = self._next(call)
        if entry.get("sleep"):
            self._stopping.wait(entry["sleep"])
        code = entry["code"]
        call.answered = code
        if code != grpc.StatusCode.OK:
            details = entry.get("details", "")
            if entry.get("retry_delay_s") is not None:
                context.set_trailing_metadata((
                    ("grpc-status-details-bin",
                     status_details_bin(code, details, entry["retry_delay_s"])),))
            context.abort(code, details)
        resp = svc.ExportTraceServiceResponse()
        if entry.get("partial"):
            resp.partial_success.rejected_spans, resp.partial_success.error_message = entry["partial"]
        return resp

    def wait_calls(self, n: int, timeout: float = 10.0) -> list:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if len(self.calls) >= n:
                    return list(self.calls)
            time.sleep(0.01)
        with self._lock:
            return list(self.calls)

    def start(self) -> "GrpcTestServer":
        self._server.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.stop(grace=None).wait(5)

    def __enter__(self) -> "GrpcTestServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
