"""otlp_test_server.py — a scriptable OTLP/HTTP collector for tests.

Owns the fake-collector side of the OTLP retry/timeout/partial-success tests:
a threaded HTTP/1.1 (keep-alive) server on loopback that answers each POST
with the next entry of a script ([429 + Retry-After, 200], [503, 503, 200],
[400], a partial success, a slow reply, ...) and records every request
(headers, raw and gunzipped body, the decoded ExportTraceServiceRequest via
opentelemetry-proto, or the parsed OTLP/JSON).

Use from pytest:

    with OTLPTestServer([status(503), status(503), ok()]) as srv:
        run_driver(srv.url, ...)
        assert len(srv.requests) == 3

or standalone: python otlp_test_server.py --script '[{"status": 503}, {"status": 200}]'
(prints the URL, serves until interrupted). After the script runs out every
request gets a plain 200.
"""
from __future__ import annotations

import argparse
import gzip
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

try:  # opentelemetry-proto is optional: without it bodies are recorded raw
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as _svc
except ImportError:  # pragma: no cover
    _svc = None


# ----------------------------------------------------------- script entries

def ok(body: bytes = b"", content_type: str = "application/x-protobuf") -> dict:
    return {"status": 200, "body": body, "content_type": content_type}


def status(code: int, retry_after: Optional[str] = None, body: bytes = b"") -> dict:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return {"status": code, "headers": headers, "body": body}


def partial_proto(rejected: int, message: str) -> dict:
    """200 with ExportTraceServiceResponse.partial_success (binary)."""
    if _svc is None:
        raise RuntimeError("opentelemetry-proto is required for partial_proto")
    resp = _svc.ExportTraceServiceResponse()
    resp.partial_success.rejected_spans = rejected
    resp.partial_success.error_message = message
    return ok(resp.SerializeToString())


def partial_json(rejected: int, message: str) -> dict:
    """200 with {"partialSuccess": {...}} (OTLP/JSON: int64 as a string)."""
    body = json.dumps({"partialSuccess": {"rejectedSpans": str(rejected),
                                          "errorMessage": message}}).encode()
    return ok(body, "application/json")


def slow(seconds: float, code: int = 200) -> dict:
    """Answer only after `seconds` (longer than the client's timeout)."""
    return {"status": code, "sleep": seconds}


# ---------------------------------------------------------------- recording

@dataclass
class Recorded:
    method: str
    path: str
    headers: dict            # lower-cased names
    raw: bytes               # as received
    body: bytes              # gunzipped when Content-Encoding: gzip
    received_at: float       # time.monotonic()
    decoded: Any = None      # ExportTraceServiceRequest or dict (JSON)
    decode_error: Optional[str] = None
    answered: Optional[int] = None

    @property
    def span_count(self) -> int:
        if self.decoded is None:
            return 0
        if isinstance(self.decoded, dict):
            return sum(len(ss.get("spans", []))
                       for rs in self.decoded.get("resourceSpans", [])
                       for ss in rs.get("scopeSpans", []))
        return sum(len(ss.spans) for rs in self.decoded.resource_spans for ss in rs.scope_spans)


def _decode(rec: Recorded) -> None:
    ctype = rec.headers.get("content-type", "")
    try:
        if "json" in ctype:
            rec.decoded = json.loads(rec.body.decode("utf-8"))
        elif _svc is not None:
            msg = _svc.ExportTraceServiceRequest()
            msg.ParseFromString(rec.body)
            rec.decoded = msg
    except Exception as exc:  # recorded, the test decides
        rec.decode_error = repr(exc)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real collector
    server: "_Server"

    def log_message(self, fmt, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = raw
        if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
            body = gzip.decompress(raw)
        rec = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                       raw, body, time.monotonic())
        _decode(rec)
        owner = self.server.owner
        entry = owner._next(rec)
        if entry.get("sleep"):
            time.sleep(entry["sleep"])
        rec.answered = entry.get("status", 200)
        payload = entry.get("body", b"") or b""
        try:
            self.send_response(rec.answered)
            self.send_header("Content-Type", entry.get("content_type", "application/x-protobuf"))
            for k, v in (entry.get("headers") or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (slow mode)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "OTLPTestServer"


class OTLPTestServer:
    """A loopback OTLP/HTTP collector answering from a script."""

    def __init__(self, script: Optional[list] = None, host: str = "127.0.0.1", port: int = 0):
        self._lock = threading.Lock()
        self._script = list(script or [])
        self.requests: list[Recorded] = []
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread: Optional[threading.Thread] = None

    # script / records
    def set_script(self, script: list) -> None:
        with self._lock:
            self._script = list(script)

    def _next(self, rec: Recorded) -> dict:
        with self._lock:
            self.requests.append(rec)
            return self._script.pop(0) if self._script else ok()

    def wait_requests(self, n: int, timeout: float = 10.0) -> list:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if len(self.requests) >= n:
                    return list(self.requests)
            time.sleep(0.01)
        with self._lock:
            return list(self.requests)

    # lifecycle
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def url(self, path: str = "/v1/traces") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> "OTLPTestServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(5)

    def __enter__(self) -> "OTLPTestServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--script", default="[]",
                    help='JSON list of {"status":N,"headers":{},"sleep":S}')
    args = ap.parse_args()
    srv = OTLPTestServer(json.loads(args.script), port=args.port).start()
    print(srv.url(), flush=True)
    try:
        while True:
            time.sleep(1)
            for i, r in enumerate(srv.requests):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        print(json.dumps([{"path": r.path, "answered": r.answered, "spans": r.span_count,
                           "headers": r.headers} for r in srv.requests]), flush=True)
        srv.stop()


if __name__ == "__main__":
    main()
