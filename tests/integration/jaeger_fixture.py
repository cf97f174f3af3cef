"""A session-scoped pytest fixture running the real Jaeger (docs/reference/jaeger.md).

Owns: starting a Jaeger of this test session's own (or, through
running_jaeger, one with TLS or mutual TLS on its listeners) through
tests/harness/jaeger.sh (which builds it once into ~/.cache/mstrace/jaeger/),
on loopback ports picked free for the session and with a run directory of its
own, so two test runs on one machine never share (or stop) one instance;
stopping it at the end of the session; and small
helpers over its query API: services, traces of a service in a microsecond
window (Jaeger's default lookback is only 2 days, so tests pass explicit
bounds), one trace by id, and polling until spans arrive (export is
asynchronous; tests wait on a condition, never on wall-clock sleeps alone).

Use from a test module or conftest.py:  pytest_plugins = ["jaeger_fixture"]
(or `from jaeger_fixture import jaeger`) and take the `jaeger` fixture.
"""

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import contextlib
import socket
import ssl
import tempfile

import pytest

REPO = Path(__file__).resolve().parents[2]
JAEGER_SH = REPO / "tests" / "harness" / "jaeger.sh"


# The addresses jaeger.sh and jaeger-config.yaml read (host:port each).
_ADDRESS_VARS = ("MST_JAEGER_QUERY_HTTP", "MST_JAEGER_QUERY_GRPC", "MST_JAEGER_OTLP_HTTP",
                 "MST_JAEGER_OTLP_GRPC", "MST_JAEGER_HEALTH")


def _free_loopback_ports(n: int) -> list:
    """n distinct TCP ports that were free on 127.0.0.1 a moment ago (the
    kernel picks them; all sockets are held open until every port is known,
    so the n are distinct)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _session_env(extra: dict = None) -> tuple:
    """(environment, ours) for this session's Jaeger. Addresses and a run
    directory given by the caller (all of them) name an instance the caller
    manages: it is used, and stopped after only if this session started it.
    Otherwise every listener gets a fresh loopback port and the pid/log files
    a fresh directory: an instance of this session's own (ours=True)."""
    env = dict(os.environ)
    env.pop("MST_JAEGER_TLS_DIR", None)
    if extra is None and all(v in env for v in _ADDRESS_VARS) and "MST_JAEGER_RUN_DIR" in env:
        return env, False
    env.update(extra or {})
    ports = _free_loopback_ports(len(_ADDRESS_VARS))
    for var, port in zip(_ADDRESS_VARS, ports):
        env[var] = f"127.0.0.1:{port}"
    env["MST_JAEGER_RUN_DIR"] = tempfile.mkdtemp(prefix="mstrace-jaeger-")
    return env, True


def _run(cmd: str, timeout: float, env: dict = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(JAEGER_SH), cmd], capture_output=True, text=True, timeout=timeout,
                          env=env)


@dataclass
class Jaeger:
    query_url: str       # http://127.0.0.1:16686
    otlp_http_url: str   # http://127.0.0.1:4318 (POST /v1/traces)
    otlp_grpc_addr: str  # 127.0.0.1:4317
    ssl_context: ssl.SSLContext = None  # for an https query API

    @property
    def traces_endpoint(self) -> str:
        """OTEL_EXPORTER_OTLP_TRACES_ENDPOINT for http/protobuf or http/json."""
        return self.otlp_http_url + "/v1/traces"

    # ------------------------------------------------------------ query

    def _get(self, path: str, params=None):
        url = self.query_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10, context=self.ssl_context) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def services(self) -> list:
        return self._get("/api/services").get("data") or []

    def traces(self, service: str, start_us: int = None, end_us: int = None, limit: int = 1000) -> list:
        """Traces of `service` with spans in [start_us, end_us] (microseconds
        since the epoch; default: the last 30 days up to a minute ahead)."""
        now_us = int(time.time() * 1e6)
        params = {
            "service": service,
            "start": start_us if start_us is not None else now_us - 30 * 86400 * 10**6,
            "end": end_us if end_us is not None else now_us + 60 * 10**6,
            "limit": limit,
        }
        return self._get("/api/traces", params).get("data") or []

    def trace(self, trace_id_hex: str):
        """One trace by id (32 hex chars), or None when Jaeger has none."""
        try:
            data = self._get("/api/traces/" + trace_id_hex).get("data") or []
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise
        return data[0] if data else None

    def spans(self, service: str, **kw) -> list:
        """Every span of `service` (flattened over traces), each with its
        trace's `process` resolved into span["process"]."""
        out = []
        for t in self.traces(service, **kw):
            procs = t.get("processes", {})
            for s in t.get("spans", []):
                s = dict(s)
                s["process"] = procs.get(s.get("processID"), {})
                out.append(s)
        return out

    def wait_for_spans(self, service: str, count: int, timeout_s: float = 30.0, **kw) -> list:
        """Polls until at least `count` spans of `service` are stored."""
        deadline = time.monotonic() + timeout_s
        spans = []
        while True:
            try:
                spans = self.spans(service, **kw)
            except (urllib.error.URLError, ConnectionError):
                spans = []
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.2)

    @staticmethod
    def tags(span: dict) -> dict:
        """A span's tags as {key: value}."""
        return {t["key"]: t["value"] for t in span.get("tags", [])}


@contextlib.contextmanager
def running_jaeger(tls_dir: Path = None, ssl_context: ssl.SSLContext = None):
    """A Jaeger on free loopback ports (with TLS from `tls_dir` as
    tests/harness/jaeger.sh describes, its query API then read with
    `ssl_context`), stopped when the block ends. Without tls_dir, an
    instance named by the caller's MST_JAEGER_* variables is used instead
    (see _session_env)."""
    extra = {"MST_JAEGER_TLS_DIR": str(tls_dir)} if tls_dir else None
    scheme = "https" if tls_dir else "http"
    with _started(extra) as env:
        yield Jaeger(f"{scheme}://{env['MST_JAEGER_QUERY_HTTP']}", f"{scheme}://{env['MST_JAEGER_OTLP_HTTP']}",
                     env["MST_JAEGER_OTLP_GRPC"], ssl_context)


@contextlib.contextmanager
def _started(extra: dict = None):
    env, ours = _session_env(extra)
    started = ours or _run("status", 10, env).returncode != 0
    # The first build takes minutes on a small machine.
    res = _run("start", 1800, env) if started else _run("wait", 120, env)
    if res.returncode != 0:
        if started:
            _run("stop", 60, env)
        pytest.fail(f"jaeger.sh start/wait failed:\n{res.stdout}\n{res.stderr}")
    try:
        yield env
    finally:
        if started:
            _run("stop", 60, env)
        if ours:
            shutil.rmtree(env["MST_JAEGER_RUN_DIR"], ignore_errors=True)


@pytest.fixture(scope="session")
def jaeger():
    """This session's own Jaeger, started (and built on first use) for the
    session on free loopback ports, and stopped after it."""
    with running_jaeger() as j:
        yield j
