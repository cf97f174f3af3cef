"""`mstrace analyze --jaeger URL --service NAME`: the Jaeger query API
reader (src/analyze/read_jaeger.c) against the real Jaeger
(tests/harness/jaeger.sh).

Owns: one span set sent both ways at once — the C example
(examples/request_pipeline.c) exports through the library's OTLP exporter
to Jaeger and through the forwarder client to a real `mstrace forward`
daemon writing Chrome Trace JSON — then analysed from each source; the two
analyses agree (span, step and request counts, joined requests, the
verdict's bottleneck, per-span-name counts, stage totals within the
microsecond rounding of Jaeger's times), and --compare FILE JAEGER_URL finds no significant
difference. The pager is checked by a tiny page size (the time window
is split until no page is full; every trace is still read exactly once).
Errors: Jaeger unreachable, an HTTP error, an answer that is not Jaeger
JSON, a service with no spans, and missing --service each give one clear
line and exit 2. No wall-clock assertions: the test waits on conditions
(every span stored in Jaeger), with generous hang guards.
"""

import http.server
import json
import os
import subprocess
import threading
import time
import uuid

import pytest

from conftest import load_tolerant, x_events
from jaeger_fixture import jaeger  # noqa: F401  (the fixture)

US = 1_000_000


def analyze(mstrace_bin, *args, expect_rc=0):
    p = subprocess.run([str(mstrace_bin), "analyze", *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == expect_rc, (p.returncode, p.stdout, p.stderr)
    return p


@pytest.fixture(scope="module")
def one_run(jaeger, mstrace_bin, example_bin, tmp_path_factory):  # noqa: F811
    """The example traced to Jaeger and to the daemon's file at once."""
    from conftest import Daemon

    tmp = tmp_path_factory.mktemp("analyze-jaeger")
    service = f"mstrace-analyze-{uuid.uuid4().hex[:10]}"
    d = Daemon(mstrace_bin, tmp / "trace.json").start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update({"MSTRACE_PERFETTO_SOCKET": d.socket_name, "OTEL_SERVICE_NAME": service,
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": jaeger.traces_endpoint,
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        t0_us = int(time.time() * US) - 60 * US
        p = subprocess.run([str(example_bin), "--requests", "40"], env=env, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        assert "OTLP export to" in p.stdout, p.stdout
        t1_us = int(time.time() * US) + 60 * US
    finally:
        assert d.stop() == 0
    spans = x_events(load_tolerant((tmp / "trace.json").read_text(encoding="utf-8")))
    stored = jaeger.wait_for_spans(service, len(spans), timeout_s=120, start_us=t0_us, end_us=t1_us)
    assert len(stored) == len(spans), f"Jaeger holds {len(stored)} of the {len(spans)} spans"
    return {"tmp": tmp, "service": service, "file": tmp / "trace.json", "spans": len(spans),
            "start_us": t0_us, "end_us": t1_us}


def jaeger_args(jaeger, run, *extra):  # noqa: F811
    return ["--jaeger", jaeger.query_url, "--service", run["service"], "--start", str(run["start_us"] / US),
            "--end", str(run["end_us"] / US), *extra]


def same_analysis(a, b, steps):
    assert a["data_quality"]["spans"] == b["data_quality"]["spans"]
    assert a["steps"]["count"] == b["steps"]["count"] > 0
    assert a["requests"]["count"] == b["requests"]["count"] > 0
    assert a["requests"]["joined"] == b["requests"]["joined"]
    assert a["verdict"]["bottleneck"] == b["verdict"]["bottleneck"]
    assert {s["name"]: s["count"] for s in a["span_names"]} == {s["name"]: s["count"] for s in b["span_names"]}
    # (Which rules fire is not compared: a rule's statistic sitting within a
    # microsecond's worth of its threshold could flip on Jaeger's rounding.)
    for stage, v in a["stages"].items():
        w = b["stages"][stage]
        assert v["count"] == w["count"], stage
        # Jaeger keeps microseconds: each span start/end may round by 1 us,
        # a stage of one step is made of a few spans and gaps.
        assert abs(v["total_ms"] - w["total_ms"]) <= 0.006 * steps, (stage, v, w)


def test_jaeger_and_file_give_the_same_analysis(jaeger, mstrace_bin, one_run):  # noqa: F811
    tmp = one_run["tmp"]
    analyze(mstrace_bin, one_run["file"], "--json", tmp / "file.json", "--quiet")
    analyze(mstrace_bin, *jaeger_args(jaeger, one_run), "--json", tmp / "jaeger.json", "--quiet")
    from_file = json.loads((tmp / "file.json").read_text())
    from_jaeger = json.loads((tmp / "jaeger.json").read_text())
    assert from_jaeger["inputs"][0]["kind"] == "jaeger"
    assert from_jaeger["data_quality"]["spans"] == one_run["spans"]
    same_analysis(from_file, from_jaeger, from_file["steps"]["count"])


def test_small_pages_split_the_window_and_read_each_trace_once(jaeger, mstrace_bin, one_run):  # noqa: F811
    tmp = one_run["tmp"]
    analyze(mstrace_bin, *jaeger_args(jaeger, one_run), "--json", tmp / "all.json", "--quiet")
    analyze(mstrace_bin, *jaeger_args(jaeger, one_run, "--jaeger-limit", "3", "--jaeger-min-window", "1us"),
            "--json", tmp / "paged.json", "--quiet")
    whole = json.loads((tmp / "all.json").read_text())
    paged = json.loads((tmp / "paged.json").read_text())
    assert paged["data_quality"]["spans"] == whole["data_quality"]["spans"] == one_run["spans"]
    same_analysis(whole, paged, whole["steps"]["count"])
    assert paged["inputs"][0]["bytes"] > whole["inputs"][0]["bytes"]  # more, overlapping pages


def test_compare_file_against_jaeger_finds_no_difference(jaeger, mstrace_bin, one_run):  # noqa: F811
    """A --compare side can be a Jaeger URL; the same run read both ways is
    "no significant difference" on every metric."""
    tmp = one_run["tmp"]
    args = jaeger_args(jaeger, one_run)[2:]  # --service and the window; the URL is the AFTER side
    analyze(mstrace_bin, "--compare", one_run["file"], jaeger.query_url, *args, "--json", tmp / "cmp.json",
            "-o", tmp / "cmp.html", "--quiet")
    cmp = json.loads((tmp / "cmp.json").read_text())["compare"]
    assert cmp["metrics"], cmp
    assert not [m for m in cmp["metrics"] if m["significant"]], cmp["metrics"]
    for m in cmp["metrics"]:
        assert m["before"]["n"] == m["after"]["n"], m


class _NotJaeger(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path.startswith("/broken/"):
            body, code = b"<html>internal error</html>", 500
        else:
            body, code = b"<html>hello, this is not Jaeger</html>", 200
        self.send_response(code)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def not_jaeger():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotJaeger)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_errors_are_one_clear_line(jaeger, mstrace_bin, not_jaeger):  # noqa: F811
    def one_error(*args):
        p = analyze(mstrace_bin, *args, expect_rc=2)
        errors = [l for l in p.stderr.splitlines() if "error:" in l]
        assert len(errors) == 1, p.stderr
        return errors[0]

    assert "cannot reach Jaeger at http://127.0.0.1:1" in one_error("--jaeger", "http://127.0.0.1:1",
                                                                     "--service", "x", "--since", "1h")
    assert "answered HTTP 500" in one_error("--jaeger", not_jaeger + "/broken", "--service", "x")
    assert "not a Jaeger query API answer" in one_error("--jaeger", not_jaeger, "--service", "x")
    missing = f"no-such-service-{uuid.uuid4().hex[:8]}"
    assert f"no spans of service {missing}" in one_error("--jaeger", jaeger.query_url, "--service", missing,
                                                         "--since", "10m")
    assert "--service" in one_error("--jaeger", jaeger.query_url)
    assert "--since" in one_error("--jaeger", jaeger.query_url, "--service", "x", "--since", "soon")


def _post_otlp_json(url: str, service: str, spans: list) -> None:
    """Spans [(trace id hex, span id hex, start ns, end ns)] of `service`
    as one OTLP/JSON request to Jaeger's OTLP HTTP receiver."""
    import urllib.request

    body = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": [
            {"traceId": t, "spanId": s, "name": "vllm.scheduler.schedule", "kind": 1,
             "startTimeUnixNano": str(a), "endTimeUnixNano": str(b)} for t, s, a, b in spans]}]}]}
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200


def test_a_span_starting_between_two_microseconds_at_a_split_is_read(jaeger, mstrace_bin, tmp_path):  # noqa: F811
    """Jaeger compares a span's start (ns) with the window's ends (whole us,
    inclusive): a span starting 500 ns into microsecond 150 is in neither
    [0, 150] nor [151, 300]. Window [0, 300] (three traces, pages of two)
    comes back full with the two later traces, so the pager splits it at
    150; the early trace must still be read, and no window is left full."""
    service = f"mstrace-split-{uuid.uuid4().hex[:10]}"
    t_us = (int(time.time()) - 30) * US

    def span(at_us, at_ns=0):
        return (uuid.uuid4().hex, uuid.uuid4().hex[:16], (t_us + at_us) * 1000 + at_ns, (t_us + at_us + 10) * 1000)

    _post_otlp_json(jaeger.traces_endpoint, service, [span(150, 500)])
    assert len(jaeger.wait_for_spans(service, 1, timeout_s=60, start_us=t_us, end_us=t_us + 300)) == 1
    _post_otlp_json(jaeger.traces_endpoint, service, [span(250), span(260)])  # stored after it
    assert len(jaeger.wait_for_spans(service, 3, timeout_s=60, start_us=t_us, end_us=t_us + 300)) == 3
    p = analyze(mstrace_bin, "--jaeger", jaeger.query_url, "--service", service, "--start", t_us / US,
                "--end", (t_us + 300) / US, "--jaeger-limit", "2", "--jaeger-min-window", "1us",
                "--json", tmp_path / "a.json", "--quiet")
    got = json.loads((tmp_path / "a.json").read_text())
    assert got["data_quality"]["spans"] == 3, (got["data_quality"], p.stderr)
    assert "may be missing" not in p.stderr + json.dumps(got)
