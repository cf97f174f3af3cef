"""Fixtures for the integration tests of `mstrace forward` (the C daemon).

Owns: locating the built binary ($MSTRACE_BUILD_DIR/mstrace, default
build/mstrace), starting one daemon per test on a unique abstract socket name
(--socket-name) with its output under tmp_path, stopping it afterwards, and
small helpers to frame/send hook span packets (docs/forwarder.md "Packets") and read the
Chrome Trace output (strictly, or array-tolerantly as Perfetto does after a
SIGKILL). Why: every test talks to the real daemon over the real socket.
"""

import json
import os
import re
import signal
import socket
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAGIC = b"MSPF_PERFETTO_V1\n"
FRAME_MAX = 4 * 1024 * 1024


def build_path(name: str) -> Path:
    """$MSTRACE_BUILD_DIR/<name> (default build/; a relative dir is under the repo)."""
    build = Path(os.environ.get("MSTRACE_BUILD_DIR", "build"))
    if not build.is_absolute():
        build = REPO / build
    return build / name


def mstrace_binary() -> Path:
    return build_path("mstrace")


@pytest.fixture(scope="session")
def mstrace_bin() -> Path:
    path = mstrace_binary()
    if not os.access(path, os.X_OK):
        pytest.fail(f"mstrace binary not found at {path}; build it or set MSTRACE_BUILD_DIR")
    return path


@pytest.fixture(scope="session")
def example_bin() -> Path:
    """The C example engine (examples/request_pipeline.c) the analysis tests
    trace end to end."""
    path = build_path("example_request_pipeline")
    if not os.access(path, os.X_OK):
        pytest.fail(f"example not found at {path}; build it or set MSTRACE_BUILD_DIR")
    return path


def unique_socket_name() -> str:
    return f"mstrace-test-{os.getpid()}-{uuid.uuid4().hex[:12]}"


# ---------------------------------------------------------------- packets

def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def make_packet(name, trace_id, span_id, start_ns, end_ns, link=None, attrs=None,
                pid=100, tid=200, category="ms_service_profiler.hook.Tracing"):
    attributes = {"process.pid": pid, "thread.id": tid, "request.id": "request-1"}
    if attrs:
        attributes.update(attrs)
    payload = {
        "name": name,
        "category": category,
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": "",
        "start_time_ns": start_ns,
        "end_time_ns": end_ns,
        "kind": 1,
        "status": 1,
        "attributes": attributes,
        "resource_attributes": {"service.name": "vllm"},
        "links": [{"trace_id": link[0], "span_id": link[1]}] if link else [],
    }
    return MAGIC + json.dumps(payload, separators=(",", ":")).encode("utf-8")


def numbered_packet(n: int, prefix: int = 0xA, name="test.span") -> bytes:
    """A valid packet whose span id encodes (prefix, n) so tests can count."""
    span_id = f"{prefix:04x}{n:012x}"
    return make_packet(name, "5" * 32, span_id, 1_000_000 + n * 1000, 1_001_000 + n * 1000)


# ----------------------------------------------------------------- output

def load_tolerant(text: str):
    """Reads a Chrome Trace array the way Perfetto's importer does after a
    crash: the closing ']' may be missing and a truncated last event is
    dropped. Returns the list of complete events."""
    decoder = json.JSONDecoder()
    i = text.find("[")
    if i < 0:
        return []
    i += 1
    events = []
    n = len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            break
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            break  # a truncated last event
        events.append(obj)
    return events


def x_events(events):
    return [e for e in events if e.get("ph") == "X"]


# ----------------------------------------------------------------- daemon

class Daemon:
    def __init__(self, binary: Path, output: Path, log_level="debug", socket_name=None,
                 stderr_path=None):
        self.binary = binary
        self.output = Path(output)
        self.socket_name = socket_name or unique_socket_name()
        self.log_level = log_level
        self.stderr_path = Path(stderr_path or (self.output.parent / f"{self.socket_name}.log"))
        self.proc = None
        self.returncode = None
        self.env = None  # None: the daemon inherits this process's environment

    def argv(self):
        return [str(self.binary), "forward", "--log-level", self.log_level,
                "--perfetto-output", str(self.output), "--socket-name", self.socket_name]

    def start(self, wait=True):
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._err, env=self.env)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited early ({self.proc.returncode}): {self.log()}")
            if "listening on" in self.log():
                return
            time.sleep(0.02)
        raise AssertionError(f"daemon not ready in {timeout}s: {self.log()}")

    def wait_connectable(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited early ({self.proc.returncode}): {self.log()}")
            try:
                self.connect().close()
                return
            except OSError:
                time.sleep(0.02)
        raise AssertionError(f"daemon socket not connectable in {timeout}s: {self.log()}")

    def connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\0" + self.socket_name)
        return s

    def send(self, *payloads: bytes):
        with self.connect() as s:
            s.sendall(b"".join(frame(p) for p in payloads))

    def log(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=60.0) -> int:
        if self.proc is None or self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.returncode = self.proc.wait()
            raise AssertionError(f"daemon did not stop within {timeout}s after {sig}")
        finally:
            self._err.close()
        return self.returncode

    def stats(self, which="final"):
        """Counters of the last 'stats (<which>)' debug line as a dict."""
        lines = [l for l in self.log().splitlines() if f"stats ({which})" in l]
        assert lines, f"no stats ({which}) line in the daemon log:\n{self.log()}"
        return {k: int(v) for k, v in re.findall(r"([a-z_]+)=(\d+)", lines[-1])}

    def events(self):
        return json.loads(self.output.read_text(encoding="utf-8"))

    def wait_for_spans(self, count, timeout=60.0):
        """Waits until the output holds at least `count` X events."""
        deadline = time.monotonic() + timeout
        got = []
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon died ({self.proc.returncode}): {self.log()[-4000:]}")
            try:
                got = x_events(load_tolerant(self.output.read_text(encoding="utf-8")))
            except FileNotFoundError:
                got = []
            if len(got) >= count:
                return got
            time.sleep(0.02)
        raise AssertionError(f"only {len(got)} of {count} spans arrived: {self.log()[-4000:]}")


def tracked_daemons(build):
    """Body of a daemon factory fixture (`yield from` it): yields a factory
    that calls build(*args, **kw) and remembers each daemon; at teardown,
    kills the ones still running."""
    started = []

    def make(*args, **kw):
        d = build(*args, **kw)
        started.append(d)
        return d

    yield make
    for d in started:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


@pytest.fixture
def daemon_factory(mstrace_bin, tmp_path):
    def build(output=None, **kw):
        return Daemon(mstrace_bin, output or (tmp_path / "hook_trace.json"), **kw)

    yield from tracked_daemons(build)


@pytest.fixture
def daemon(daemon_factory):
    return daemon_factory().start()
