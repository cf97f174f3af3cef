"""Spans lost while the real `mstrace forward` stops reading show in its output.

Owns: the Perfetto forwarder client's behaviour across a forwarder stall longer
than its send budget, end to end. The driver ($MSTRACE_BUILD_DIR/test_forward_loss,
tests/unit/test_forward_loss.c; send budget 100 ms, reconnect interval 10 minutes)
sends warm-up spans; the test SIGSTOPs the daemon (every thread stopped); the
driver sends ~2 KB spans until its client has failed a batch (counted work, not
a time), and the test resumes the daemon; the driver sends 300 later spans and
shuts down. Then:
  * every later span is in the file (a client that cut the connection in the
    stall reconnects at once instead of waiting out its reconnect interval);
  * the spans the client failed are reported to the daemon: the final stats line's
    upstream_failed, the output's `forwarder.spans_dropped` counter and
    `mstrace analyze`'s data_quality.spans_dropped all equal the client's own
    spans_failed — the loss is visible in the output, not only in the process.
Nothing is asserted on time.
"""

import json
import os
import signal
import subprocess

import pytest

from conftest import build_path, mstrace_binary, x_events
from test_forward_shutdown import wait_all_threads_stopped


@pytest.fixture(scope="module")
def driver():
    path = build_path("test_forward_loss")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found; build it or set MSTRACE_BUILD_DIR")
    return path


def _counter_max(events, name):
    values = [e["args"]["value"] for e in events if e.get("ph") == "C" and e.get("name") == name]
    return max(values) if values else None


def test_spans_after_a_stall_arrive_and_the_loss_shows_in_the_output(daemon, driver, tmp_path):
    proc = subprocess.Popen([str(driver), "--socket", daemon.socket_name], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = False
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        daemon.wait_for_spans(10)
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        stopped = True
        wait_all_threads_stopped(daemon.proc.pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "stalled", proc.stderr.read()
        os.kill(daemon.proc.pid, signal.SIGCONT)
        stopped = False
        out, err = proc.communicate("go\n", timeout=300)
    finally:
        if stopped:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    r = json.loads(out.strip().splitlines()[-1])
    assert r["failed"] > 0 and r["exported"] + r["failed"] == r["handed"], r
    assert r["tracer_dropped"] == 0, r

    assert daemon.stop() == 0, daemon.log()[-4000:]
    events = daemon.events()
    spans = x_events(events)
    names = [e["name"] for e in spans]
    assert names.count("warmup") == r["warmup"]
    assert names.count("after") == r["after"], (names.count("after"), r)
    assert len(spans) == r["exported"], (len(spans), r)
    stats = daemon.stats()
    assert stats["upstream_failed"] == r["failed"], stats
    assert stats["upstream_dropped"] == 0, stats
    assert "reported %d span(s) lost before they reached this forwarder" % r["failed"] in daemon.log()
    # The file's own counter, which mstrace analyze reads, carries the loss.
    assert _counter_max(events, "forwarder.spans_dropped") == r["failed"]
    report = tmp_path / "analysis.json"
    p = subprocess.run([str(mstrace_binary()), "analyze", str(daemon.output), "--json", str(report)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    quality = json.loads(report.read_text())["data_quality"]
    assert quality["spans_dropped"] == r["failed"], quality
    # The counter does not say how many of its losses were failed sends: not a guess.
    assert quality["spans_failed"] is None, quality
    assert quality["lossy"] is True, quality
