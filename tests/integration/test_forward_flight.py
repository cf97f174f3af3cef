"""`mstrace forward --flight-recorder`: the real daemon on its real socket,
fed a vLLM-shaped span stream (flight_traffic.py) framed as the tracer's
forwarder client sends it.

Owns: a trigger fires for exactly the request over its threshold (and for
no other); its dump holds that request's spans and every span of every
engine step that carried it (schedule, its child execute span, worker,
output) and nothing of the other requests beyond those steps, plus counter
samples and the recorder's own counter tracks, and `mstrace analyze` reads
it; a run without a slow request writes nothing; the disk budget holds
under a storm of dumps; SIGKILL during a dump leaves no partial file under
a dump's name and SIGTERM lets the dump finish; bad flags exit 2 with one
line; a full disk fails the dump (counted) and keeps the ring for the next.
Every wait is for a log line or a process, bounded by the daemon staying
alive.
"""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import frame, unique_socket_name
from flight_traffic import engine_traffic
from forward_helpers import small_disk, wait_log  # noqa: F401  (small_disk: a fixture)


def _dumps(directory, stem="run", ext=".pftrace"):
    return sorted(p for p in directory.iterdir()
                  if p.name.startswith(stem + ".") and p.name.endswith(ext)
                  and re.match(re.escape(stem) + r"\.\d{8}T\d{6}Z-\d{6}" + re.escape(ext) + "$", p.name))


def _flight(daemon_factory, out, *flags):
    d = daemon_factory(output=out)
    base = d.argv
    d.argv = lambda: base() + ["--flight-recorder", "64MiB", *flags]
    return d.start()


def _send(d, packets, chunk=2000):
    with d.connect() as s:
        for i in range(0, len(packets), chunk):
            s.sendall(b"".join(frame(p) for p in packets[i:i + chunk]))


def _wait_received(d, n):
    """Until the daemon has taken n spans into the ring (SIGUSR1 stats)."""
    for _ in range(12000):
        d.proc.send_signal(signal.SIGUSR1)
        time.sleep(0.01)
        seen = re.findall(r"stats \(requested\).* seen=(\d+)", d.log())
        if seen and int(seen[-1]) >= n:
            return
        if d.proc.poll() is not None:
            raise AssertionError(d.log()[-3000:])
    raise AssertionError(d.log()[-3000:])


def _read(path):
    from pftrace_model import read_chrome_json, read_pftrace
    return read_pftrace(path) if path.suffix == ".pftrace" else read_chrome_json(path)


@pytest.mark.parametrize("ext", [".pftrace", ".json"])
def test_only_the_slow_request_triggers_with_every_step_that_carried_it(
        daemon_factory, tmp_path, mstrace_bin, ext):
    traffic = engine_traffic(30, slow=[7], slow_steps=150)
    slow = traffic.requests[7]
    d = _flight(daemon_factory, tmp_path / f"run{ext}", "--trigger", "e2e>1s", "--trigger", "error")
    _send(d, traffic.packets)
    assert d.stop() == 0, d.log()[-3000:]
    dumps = _dumps(tmp_path, ext=ext)
    assert len(dumps) == 1, d.log()[-3000:]
    log = d.log()
    lines = [l for l in log.splitlines() if "flight recorder: dump " in l]
    assert len(lines) == 1 and f"request {slow.rid}" in lines[0] and "e2e=1.5s>1s" in lines[0]
    assert str(dumps[0]) in lines[0] and f"{dumps[0].stat().st_size} bytes" in lines[0]
    m = _read(dumps[0])
    got = {s["args"]["span_id"] for s in m.slices if s["name"] != "mstrace.flight_recorder.trigger"}
    want = traffic.steps_of(slow.rid) | {slow.span_id}
    assert len(traffic.steps_of(slow.rid)) == 4 * 150
    assert got == want
    trig = [s for s in m.slices if s["name"] == "mstrace.flight_recorder.trigger"]
    assert len(trig) == 1 and trig[0]["args"]["flight.request_ids"] == [slow.rid]
    names = {c[1] for c in m.counters}
    assert {"running (requests)", "KV cache usage (%)", "flight.spans_seen", "flight.dumps_written"} <= names
    # The request's own track, from its vllm.request span.
    assert any(r[0] == slow.rid and r[1] == "request" for r in m.requests)
    stats = d.stats()
    assert stats["seen"] == len(traffic.packets) == stats["held"]
    assert stats["triggers_fired"] == 1 and stats["dumps"] == 1
    assert f"flight recorder: seen={len(traffic.packets)} = held={len(traffic.packets)}" in log
    a = subprocess.run([str(mstrace_bin), "analyze", str(dumps[0])], capture_output=True, text=True)
    assert a.returncode == 0, a.stderr
    assert f"request {slow.rid}" in a.stdout and "slowest request" in a.stdout


def test_no_slow_request_writes_no_dump(daemon_factory, tmp_path):
    traffic = engine_traffic(40)
    d = _flight(daemon_factory, tmp_path / "run.pftrace", "--trigger", "e2e>1s",
                "--trigger", "queue>100ms", "--trigger", "error")
    _send(d, traffic.packets)
    assert d.stop() == 0, d.log()[-3000:]
    assert _dumps(tmp_path) == []
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".pftrace"] == []
    stats = d.stats()
    assert stats["seen"] == len(traffic.packets) and stats["triggers_fired"] == 0
    assert stats["dumps"] == 0


def test_error_span_fires_for_the_requests_it_names(daemon_factory, tmp_path):
    traffic = engine_traffic(12, error=[4])
    d = _flight(daemon_factory, tmp_path / "run.pftrace", "--trigger", "error")
    _send(d, traffic.packets)
    assert d.stop() == 0, d.log()[-3000:]
    dumps = _dumps(tmp_path)
    assert len(dumps) == 1
    # Every request that shared the failing steps is named by them.
    failing = {rid for sid, (name, ids) in traffic.spans.items()
               if name == "vllm.worker.execute_model" and traffic.requests[4].rid in ids for rid in ids}
    line = [l for l in d.log().splitlines() if "flight recorder: dump " in l][0]
    assert all(f"request {rid}" in line for rid in failing) and line.count("error request") == len(failing)
    got = {s["args"].get("span_id") for s in _read(dumps[0]).slices}
    assert traffic.requests[4].span_id in got


def test_disk_budget_holds_in_a_storm_of_dumps(daemon_factory, tmp_path, mstrace_bin):
    traffic = engine_traffic(20, slow=[3], slow_steps=100)
    budget = 200_000
    d = _flight(daemon_factory, tmp_path / "run.pftrace", "--dump-disk-budget", f"{budget}B")
    _send(d, traffic.packets)
    _wait_received(d, len(traffic.packets))
    sizes = []
    for k in range(1, 13):
        if k % 2:
            d.proc.send_signal(signal.SIGUSR2)
        else:
            r = subprocess.run([str(mstrace_bin), "trigger", "--socket-name", d.socket_name],
                               capture_output=True, text=True)
            assert r.returncode == 0 and f"pid {d.proc.pid}" in r.stdout, r.stderr
        wait_log(d, "flight recorder: dump ", k)
        on_disk = _dumps(tmp_path)
        assert sum(p.stat().st_size for p in on_disk) <= budget
        sizes.append(len(on_disk))
    assert d.stop() == 0, d.log()[-3000:]
    stats = d.stats()
    assert stats["dumps"] == 12 and stats["dumps_deleted"] > 0
    assert stats["dumps_deleted"] + len(_dumps(tmp_path)) == 12
    # The newest are kept: names sort by time, then number.
    assert _dumps(tmp_path)[-1].name.endswith("-000012.pftrace")


def _dump_under_way(daemon_factory, tmp_path):
    """(daemon, traffic): a flight recorder holding a large ring of that
    traffic, told to dump it (SIGUSR2) and known to have taken the signal."""
    traffic = engine_traffic(200, steps_per_request=60)
    d = _flight(daemon_factory, tmp_path / "run.pftrace")
    _send(d, traffic.packets)
    _wait_received(d, len(traffic.packets))
    d.proc.send_signal(signal.SIGUSR2)
    wait_log(d, "Received SIGUSR2")
    return d, traffic


def test_sigkill_during_a_dump_leaves_no_partial_dump(daemon_factory, tmp_path):
    d, _ = _dump_under_way(daemon_factory, tmp_path)
    d.proc.kill()
    d.proc.wait()
    from pftrace_model import iter_packets
    for p in _dumps(tmp_path):                       # a dump under its name is whole
        assert sum(1 for _ in iter_packets(p.read_bytes(), whole=True)) > 0
    # A new run with the same template removes the dead run's temporary file.
    d2 = _flight(daemon_factory, tmp_path / "run.pftrace")
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    assert d2.stop() == 0


def test_sigterm_during_a_dump_lets_it_finish(daemon_factory, tmp_path):
    d, traffic = _dump_under_way(daemon_factory, tmp_path)
    assert d.stop(signal.SIGTERM) == 0, d.log()[-3000:]
    from pftrace_model import iter_packets
    dumps = _dumps(tmp_path)
    assert len(dumps) == 1 and [p for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    assert sum(1 for _ in iter_packets(dumps[0].read_bytes(), whole=True)) > len(traffic.packets)


@pytest.mark.parametrize("flags, message", [
    (["--flight-recorder", "256"], "needs a unit"),
    (["--flight-recorder", "12parsecs"], "unknown unit"),
    (["--flight-recorder", "0MiB"], "more than 0"),
    (["--flight-recorder", "512KiB"], "at least 1MiB"),
    (["--flight-recorder", "1MiB,2MiB"], "two sizes"),
    (["--flight-recorder", "1MiB", "--trigger", "e2e>"], "missing threshold"),
    (["--flight-recorder", "1MiB", "--trigger", "latency>2s"], "unknown metric"),
    (["--flight-recorder", "1MiB", "--trigger", "e2e>p100"], "percentile"),
    (["--flight-recorder", "1MiB", "--trigger", "e2e>p99@90s"], "whole minutes"),
    (["--flight-recorder", "1MiB", "--trigger", "e2e=2s"], "expected METRIC>THRESHOLD"),
    (["--flight-recorder", "1MiB", "--max-dumps-per-minute", "0"], "1..1000"),
    (["--flight-recorder", "1MiB", "--dump-disk-budget", "lots"], "must start with a number"),
    (["--trigger", "e2e>2s"], "only with --flight-recorder"),
    (["--flight-recorder", "1MiB", "--flight-otlp-baseline", "0"], "1..1000000"),
    (["--flight-recorder", "1MiB", "--flight-otlp-baseline", "10"], "only with --flight-otlp"),
])
def test_bad_flight_flags_exit_2_with_one_line(mstrace_bin, tmp_path, flags, message):
    r = subprocess.run([str(mstrace_bin), "forward", "--perfetto-output", str(tmp_path / "x.pftrace"),
                        "--socket-name", unique_socket_name(), *flags],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("mstrace forward: error: argument --") and message in last, r.stderr
    assert not (tmp_path / "x.pftrace").exists()


def test_trigger_without_a_daemon_exits_1(mstrace_bin):
    r = subprocess.run([str(mstrace_bin), "trigger", "--socket-name", unique_socket_name()],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "no mstrace forward listens on @" in r.stderr
    r = subprocess.run([str(mstrace_bin), "trigger", "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2


def test_disk_full_fails_the_dump_and_keeps_the_ring(small_disk, daemon_factory, tmp_path):
    disk = small_disk("2m")
    filler = disk / "filler"
    with open(filler, "wb") as f:                   # leave ~32 KiB free
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        f.write(b"\0" * (free - 32 * 1024))
    traffic = engine_traffic(30, steps_per_request=30)
    d = daemon_factory(output=disk / "run.pftrace", stderr_path=tmp_path / "d.log")
    base = d.argv
    d.argv = lambda: base() + ["--flight-recorder", "64MiB"]
    d.start()
    _send(d, traffic.packets)
    _wait_received(d, len(traffic.packets))
    d.proc.send_signal(signal.SIGUSR2)
    wait_log(d, "the ring is kept (1 failed so far)")
    assert _dumps(disk) == [] and [p.name for p in disk.iterdir() if p.name != "filler"] == []
    filler.unlink()                                 # space is back: the next dump works
    d.proc.send_signal(signal.SIGUSR2)
    wait_log(d, "flight recorder: dump ")
    assert d.stop() == 0, d.log()[-3000:]
    stats = d.stats()
    assert stats["dumps_failed"] == 1 and stats["dumps"] == 1 and stats["write_errors"] == 1
    (dump,) = _dumps(disk)
    spans = [s for s in _read(dump).slices if s["name"] != "mstrace.flight_recorder.trigger"]
    assert len(spans) == len(traffic.packets)


def test_sigusr2_without_a_flight_recorder_is_logged_and_ignored(daemon_factory, tmp_path):
    d = daemon_factory(output=tmp_path / "plain.pftrace").start()
    d.proc.send_signal(signal.SIGUSR2)
    wait_log(d, "Received SIGUSR2: this mode has nothing to dump; ignored")
    assert d.stop() == 0
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".pftrace"] == ["plain.pftrace"]


def test_flight_otlp_without_its_environment_exits_1(mstrace_bin, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    r = subprocess.run([str(mstrace_bin), "forward", "--perfetto-output", str(tmp_path / "x.pftrace"),
                        "--socket-name", unique_socket_name(), "--flight-recorder", "1MiB",
                        "--flight-otlp"], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 1, r.stderr
    assert "Start Perfetto forwarder failed: --flight-otlp: " in r.stderr and "OTEL_EXPORTER_OTLP" in r.stderr
    r = subprocess.run([str(mstrace_bin), "forward", "--perfetto-output", str(tmp_path / "x.pftrace"),
                        "--flight-otlp"], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and "argument --flight-otlp: only with --flight-recorder" in r.stderr
