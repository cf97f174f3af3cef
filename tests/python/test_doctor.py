"""mstrace.doctor's parts that need no vLLM, against real sockets, servers and the built extension.

  * the settings come from libmstrace's own readers inside the extension:
    the ctypes mirror of their structures reads back what the environment
    says (a child Python per environment, as the readers see the process
    environment);
  * what each sampling setting means (drops everything, drops some, fine);
  * the forwarder probe against a real `mstrace forward` and against a name
    nobody listens on;
  * the OTLP probe against the OTLP/HTTP and OTLP/gRPC test collectors of
    tests/integration (real HTTP/1.1 and grpcio servers on loopback), a
    closed port, the wrong protocol for a port, and TLS against plain text;
  * the symbols check with a real package written to tmp_path and the
    extension's Hook: hooked, missing method, missing module, a package not
    installed, gated off;
  * the whole command, as `python -m mstrace.doctor` and as `mstrace doctor`
    (the C binary execs the module): usage errors exit 2, a missing part
    exits 1 and the summary names it.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid

import pytest

from mstrace import doctor, symbols

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.append(os.path.join(REPO, "tests", "integration"))  # the test collectors


def _statuses(report, topic=None):
    return [(s, text) for s, t, text in report.findings if topic is None or t == topic]


def _child(subprocess_env, code, extra_env):
    env = dict(subprocess_env)
    env.update(extra_env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


READ_ENV = textwrap.dedent('''
    import json
    from mstrace import _native, doctor
    opts, cfg, status, err = doctor.env_readers(_native)
    print(json.dumps({
        "sampler": doctor.SAMPLERS[opts.sampler], "ratio": opts.sampler_ratio, "sdk_disabled": opts.sdk_disabled,
        "errors_only": opts.export_errors_only, "queue": opts.max_queue_size, "batch": opts.max_export_batch_size,
        "delay": opts.schedule_delay_ms, "export_timeout": opts.export_timeout_ms,
        "status": status, "err": err, "endpoint": cfg.endpoint.decode(),
        "protocol": doctor.OTLP_PROTOCOLS[cfg.protocol], "headers": cfg.headers.decode(),
        "timeout": cfg.timeout_ms, "gzip": cfg.gzip}))
''')


def test_env_readers_read_what_the_environment_says(native, subprocess_env):
    got = _child(subprocess_env, READ_ENV, {
        "OTEL_TRACES_SAMPLER": "TraceIdRatio", "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_SDK_DISABLED": "true",
        "MS_PROFILER_SAMPLE_ERROR": "1", "OTEL_BSP_MAX_QUEUE_SIZE": "123", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "45",
        "OTEL_BSP_SCHEDULE_DELAY": "678", "OTEL_BSP_EXPORT_TIMEOUT": "9012",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.example:4318/", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "777", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc"})
    assert got == {
        "sampler": "traceidratio", "ratio": 0.25, "sdk_disabled": True, "errors_only": True, "queue": 123,
        "batch": 45, "delay": 678, "export_timeout": 9012, "status": 0, "err": "",
        "endpoint": "http://collector.example:4318/v1/traces", "protocol": "http/json", "headers": "api-key=abc",
        "timeout": 777, "gzip": True}


def test_env_readers_defaults_and_errors(native, subprocess_env):
    got = _child(subprocess_env, READ_ENV, {})
    assert (got["sampler"], got["ratio"], got["sdk_disabled"], got["errors_only"]) == (
        "parentbased_always_on", 1.0, False, False)
    assert got["status"] == doctor.MST_ERR_UNAVAILABLE and "no OTLP endpoint" in got["err"]
    bad = _child(subprocess_env, READ_ENV, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:1/v1/traces",
                                            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"})
    assert bad["status"] not in (0, doctor.MST_ERR_UNAVAILABLE)
    assert "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" in bad["err"] and "thrift" in bad["err"]


def _sampling(kind, ratio=1.0, sdk_disabled=False, errors_only=False, info=None):
    opts = doctor.TracerOptions(sampler=doctor.SAMPLERS.index(kind), sampler_ratio=ratio,
                                sdk_disabled=sdk_disabled, export_errors_only=errors_only)
    report = doctor.Report()
    doctor.check_sampling(report, info or {"auto_trace": False, "sample_rate": 0}, opts)
    return report


def test_sampling_meanings():
    assert _sampling("parentbased_always_on").problems() == []
    assert _sampling("parentbased_always_on").count(doctor.WARN) == 0
    assert "every span is dropped" in _sampling("always_off").problems()[0][2]
    assert "every span is dropped" in _sampling("traceidratio", 0.0).problems()[0][2]
    parent_only = _sampling("parentbased_traceidratio", 0.0)
    assert parent_only.problems() == [] and any("only spans under a sampled parent" in t
                                                for s, t in _statuses(parent_only) if s == doctor.WARN)
    half = _sampling("parentbased_traceidratio", 0.5)
    assert half.problems() == [] and any("about 50% of traces" in t for s, t in _statuses(half) if s == doctor.WARN)
    assert "no span is ever recorded" in _sampling("always_on", sdk_disabled=True).problems()[0][2]
    errors = _sampling("always_on", errors_only=True)
    assert any("only spans with status ERROR" in t for s, t in _statuses(errors) if s == doctor.WARN)
    rated = _sampling("always_on", info={"auto_trace": True, "sample_rate": 10})
    assert any("1 in 10 generated contexts" in t for _, t in _statuses(rated))


def test_enable_is_exactly_one():
    for value, ok in (("1", True), ("true", False), ("", False), (None, False)):
        report = doctor.Report()
        doctor.check_enable(report, {} if value is None else {"MS_TRACE_ENABLE": value})
        assert (report.problems() == []) is ok, (value, report.findings)


# ------------------------------------------------------------------ forwarder


def test_forwarder_probe_against_a_real_forwarder(daemon):
    ok, detail = doctor.probe_forwarder(daemon.socket_name, 5.0)
    assert ok and daemon.socket_name in detail
    daemon.events(0)  # stops it (SIGTERM, exit 0): a probe connection loses nothing
    ok, detail = doctor.probe_forwarder(daemon.socket_name, 5.0)
    assert not ok and "nothing listens on @" + daemon.socket_name in detail


# ----------------------------------------------------------------------- OTLP


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_otlp_http_probe_posts_an_empty_export():
    from otlp_test_server import OTLPTestServer, status

    with OTLPTestServer() as srv:
        ok, detail = doctor.probe_otlp(srv.url(), "http/protobuf", 5.0)
        assert ok and "HTTP 200" in detail, detail
        rec = srv.wait_requests(1)[0]
        assert rec.path == "/v1/traces" and rec.body == b""
        srv.set_script([status(404)])
        ok, detail = doctor.probe_otlp(srv.url("/wrong"), "http/json", 5.0)
        assert not ok and "HTTP 404" in detail, detail
        ok, detail = doctor.probe_otlp(srv.url().replace("http:", "https:"), "http/protobuf", 5.0)
        assert not ok and "TLS handshake failed" in detail, detail
        ok, detail = doctor.probe_otlp(srv.url(), "grpc", 5.0)
        assert not ok and "HTTP/1.x" in detail, detail


def test_otlp_grpc_probe_sees_http2():
    pytest.importorskip("grpc")
    from grpc_test_server import GrpcTestServer

    with GrpcTestServer() as srv:
        ok, detail = doctor.probe_otlp(srv.url, "grpc", 5.0)
        assert ok and "HTTP/2" in detail, detail
        ok, detail = doctor.probe_otlp(srv.url + "/v1/traces", "http/protobuf", 5.0)
        assert not ok, detail
        assert srv.calls == []  # the preface alone is no export call


def test_otlp_probe_closed_port():
    port = _closed_port()
    for protocol in ("grpc", "http/protobuf"):
        ok, detail = doctor.probe_otlp("http://127.0.0.1:%d/v1/traces" % port, protocol, 5.0)
        assert not ok and "cannot connect to 127.0.0.1:%d" % port in detail, detail


# -------------------------------------------------------------------- symbols


def test_active_symbols_path_never_writes(tmp_path):
    assert doctor.active_symbols_path({})[0] == symbols.DEFAULT_SYMBOLS_PATH
    missing = tmp_path / "mine.yaml"
    path, note = doctor.active_symbols_path({"PROFILING_SYMBOLS_PATH": str(missing)})
    assert path == symbols.DEFAULT_SYMBOLS_PATH and "does not exist yet" in note
    assert not missing.exists()
    missing.write_text("[]\n")
    assert doctor.active_symbols_path({"PROFILING_SYMBOLS_PATH": str(missing)})[0] == str(missing)


def test_symbols_hooked_missing_and_gated(native, tmp_path, monkeypatch):
    pkg = "mstdoc_%s" % uuid.uuid4().hex[:8]
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "engine.py").write_text("class Base:\n    def step(self):\n        return 1\n\n"
                                              "class Engine(Base):\n    def run(self):\n        return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yaml_path = tmp_path / "symbols.yaml"
    yaml_path.write_text(textwrap.dedent('''
        - symbol: {p}.engine:Engine.run
          trace: {{name: t.run}}
        - symbol: {p}.engine:Engine.step
          trace: {{name: t.step}}
        - symbol: {p}.engine:Engine.missing_method
          trace: {{name: t.gone}}
        - symbol: {p}.no_such_module:Engine.run
          trace: {{name: t.nomod}}
        - symbol: mstdoc_absent_pkg.mod:Thing.run
          trace: {{name: t.absent}}
        - symbol: {p}.engine:Engine.run
          min_version: "99.0"
          trace: {{name: t.future}}
        - symbol: {p}.engine:Engine.run
          handler: {p}.engine:Base.step
        - symbol: 42
    ''').format(p=pkg))
    report = doctor.Report()
    try:
        doctor.check_symbols(report, native, "1.0", str(yaml_path))
    finally:
        for name in [m for m in sys.modules if m.startswith(pkg)]:
            del sys.modules[name]
    by_index = {int(text.split()[0][1:]): (s, text) for s, t, text in report.findings if text.startswith("#")}
    assert by_index[0] == (doctor.OK, "#0 %s.engine:Engine.run: hooked -> span t.run (Tracing, call)" % pkg), \
        report.findings
    assert by_index[1][0] == doctor.OK and "Engine.step: hooked" in by_index[1][1]  # inherited from Base
    assert by_index[2][0] == doctor.FAIL and "has no attribute 'missing_method'" in by_index[2][1]
    assert by_index[3][0] == doctor.FAIL and "does not exist" in by_index[3][1]
    assert by_index[4][0] == doctor.OFF and "mstdoc_absent_pkg is not installed" in by_index[4][1]
    assert by_index[5][0] == doctor.OFF and "gated off: vLLM 1.0 is outside [99.0, -]" in by_index[5][1]
    assert by_index[6][0] == doctor.OFF and "profiling-only" in by_index[6][1]
    invalid = [text for s, t, text in report.findings if s == doctor.FAIL and "entry #7" in text]
    assert invalid, report.findings
    # The check leaves the module as it found it: the hooks were undone.
    mod = __import__(pkg + ".engine", fromlist=["Engine"])
    assert type(vars(mod.Engine)["run"]).__name__ == "function"


# ------------------------------------------------------------ the whole command


def _doctor(subprocess_env, args, extra_env=None, binary=None):
    env = dict(subprocess_env)
    env.update(extra_env or {})
    cmd = [binary, "doctor"] + args if binary else [sys.executable, "-m", "mstrace.doctor"] + args
    env["MSTRACE_PYTHON"] = sys.executable
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_usage_errors_exit_2(native, subprocess_env):
    for args in (["--timeout", "0"], ["--symbols", "/nonexistent/symbols.yaml"], ["--bogus"]):
        proc = _doctor(subprocess_env, args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "usage: mstrace doctor" in proc.stderr


def test_missing_parts_exit_1_with_a_summary(native, subprocess_env):
    proc = _doctor(subprocess_env, ["--timeout", "2"], {"MS_TRACE_ENABLE": "yes"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("mstrace doctor: ") and "problem(s); first: " in last
    assert "MS_TRACE_ENABLE='yes': hook tracing is off" in proc.stdout
    assert "nothing listens on @" + subprocess_env["MSTRACE_PERFETTO_SOCKET"] in proc.stdout


def test_the_c_binary_execs_the_module(build, native, subprocess_env):
    if build.binary is None:
        pytest.skip("mstrace binary unavailable: %s" % build.reason)
    proc = _doctor(subprocess_env, ["--help"], binary=build.binary)
    assert proc.returncode == 0 and "usage: mstrace doctor" in proc.stdout, proc.stderr
    env = dict(subprocess_env, MSTRACE_PYTHON="/nonexistent/python3")
    proc = subprocess.run([build.binary, "doctor"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 127 and "cannot run /nonexistent/python3" in proc.stderr
