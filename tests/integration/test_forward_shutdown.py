"""A traced process's shutdown while the real `mstrace forward` is stopped.

Owns: the Perfetto forwarder client's cancel at tracer shutdown, end to end.
The driver ($MSTRACE_BUILD_DIR/test_forward_shutdown, tests/unit/
test_forward_shutdown.c) sends 10 warm-up spans to a real daemon; the test
then SIGSTOPs the daemon (waiting until every thread of it is stopped), and
the driver ends 20,000 more spans, far more than the socket buffer holds,
and shuts its tracer down with a 200 ms timeout. The client's send budget
is 10 minutes, so only the cancel can end the send in flight: the daemon is
resumed only after the driver has exited, and an old client without the
cancel never exits (the 60 s guard fails the test; nothing is asserted on
time). Then the daemon is resumed and stopped, and the file must hold
exactly the spans the client counted as exported, the rest counted failed.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import build_path, x_events

SPANS = 20000
WARMUP = 10
MST_ERR_TIMEOUT = -9
MST_ERR_CLOSED = -6


@pytest.fixture(scope="module")
def driver():
    path = build_path("test_forward_shutdown")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found; build it or set MSTRACE_BUILD_DIR")
    return path


def wait_all_threads_stopped(pid, timeout=30.0):
    """Until every thread of `pid` is in state T (stopped), so the daemon
    reads nothing more; bounded, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except FileNotFoundError:
                continue
            states.append(stat.rsplit(")", 1)[1].split()[0])
        if states and all(s in ("T", "t") for s in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"daemon {pid} did not stop: thread states {states}")


def test_shutdown_returns_while_the_forwarder_is_stopped(daemon, driver):
    proc = subprocess.Popen([str(driver), "--socket", daemon.socket_name, "--spans", str(SPANS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    stopped = False
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        daemon.wait_for_spans(WARMUP)  # the daemon read the warm-up spans
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        stopped = True
        wait_all_threads_stopped(daemon.proc.pid)
        try:
            out, err = proc.communicate("go\n", timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("tracer shutdown did not return while the forwarder was stopped "
                        "(the send in flight was not cancelled)")
    finally:
        if stopped:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    r = json.loads(out.strip().splitlines()[-1])
    assert r["shutdown"] == MST_ERR_TIMEOUT, r
    assert r["cancels"] == 1, r
    assert r["last_status"] == MST_ERR_CLOSED, r  # cancelled, not timed out
    assert "tracer shutdown cancelled the send in flight" in err, err
    # The client: every span handed to it is exported or failed, once.
    assert r["exported"] + r["failed"] == r["handed"], r
    assert r["skipped"] == 0 and r["failed"] > 0, r
    # The tracer: every span started is exported, failed or dropped, once.
    assert r["tracer_started"] == SPANS + WARMUP, r
    assert (r["tracer_exported"] + r["tracer_failed"] + r["tracer_dropped"]
            + r["tracer_filtered"]) == r["tracer_started"], r

    # Resumed, the daemon reads what the kernel holds and writes it: exactly
    # the spans the client counted as exported (a frame cut by the cancel is
    # dropped at EOF, and was counted failed).
    assert daemon.stop() == 0, daemon.log()[-4000:]
    spans = x_events(daemon.events())
    assert len(spans) == r["exported"], (len(spans), r)
    assert sum(1 for e in spans if e["name"] == "warmup") == WARMUP
    assert daemon.stats()["received"] == r["exported"], daemon.stats()
