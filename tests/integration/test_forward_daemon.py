"""Integration tests of `mstrace forward --perfetto-output` (docs/forwarder.md)
against the real daemon over the real abstract socket.

Owns: the seed's forwarder expectations (X events, flows for links that
arrive before their source), rejection of bad payloads without harm to the
output or other clients, the output path rules, valid JSON after SIGTERM
under load, a Perfetto-loadable file after SIGKILL, the SO_PEERCRED door,
1,000 concurrent clients, and the CLI surface (help, version, log levels,
exit codes).
"""

import json
import os
import random
import re
import resource
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import (FRAME_MAX, MAGIC, frame, load_tolerant, make_packet, numbered_packet,
                      unique_socket_name, x_events)


# ------------------------------------------------------------ seed checks

def test_schedule_span_links_request_that_arrives_later(daemon):
    request = ("1" * 32, "2" * 16)
    schedule = ("3" * 32, "4" * 16)
    daemon.send(
        make_packet("vllm.scheduler.schedule", schedule[0], schedule[1], 2_000_000, 3_000_000,
                    link=request),
        make_packet("vllm.request", request[0], request[1], 1_000_000, 4_000_000),
    )
    daemon.wait_for_spans(2)
    assert daemon.stop() == 0
    events = daemon.events()
    complete = x_events(events)
    flow = [e for e in events if e["ph"] in ("s", "f")]
    assert [e["name"] for e in complete] == ["vllm.scheduler.schedule", "vllm.request"]
    assert complete[0]["pid"] == 100
    assert complete[0]["tid"] == 200
    assert complete[0]["dur"] == 1000
    assert complete[0]["ts"] == 2000
    assert complete[0]["args"]["trace_id"] == schedule[0]
    assert complete[0]["args"]["request.id"] == "request-1"
    assert "process.pid" not in complete[0]["args"]
    assert len(flow) == 2
    assert sorted(e["ph"] for e in flow) == ["f", "s"]
    # The id is a hexadecimal number (Perfetto's JSON importer drops any
    # other string); the readable link is in the args of both ends.
    assert flow[0]["id"] == flow[1]["id"]
    assert re.fullmatch(r"0x[0-9a-f]{16}", flow[0]["id"])
    assert flow[0]["args"]["link"] == flow[1]["args"]["link"] == f"{request[0]}:{request[1]}:{schedule[1]}"
    stats = daemon.stats()
    assert stats["received"] == 2 and stats["written"] == 2 and stats["rejected"] == 0


def test_payload_without_magic_is_rejected_and_file_stays_empty(daemon):
    daemon.send(b"binary-otlp")
    assert daemon.stop() == 0
    assert daemon.events() == []
    assert daemon.stats()["rejected"] == 1
    assert "rejected" in daemon.log()


def test_daemon_keeps_serving_after_a_rejected_payload(daemon):
    with daemon.connect() as a:
        a.sendall(frame(b"binary-otlp") + frame(numbered_packet(1)))
        daemon.wait_for_spans(1)
        daemon.send(numbered_packet(2))          # another connection
        a.sendall(frame(numbered_packet(3)))     # the same connection still works
        daemon.wait_for_spans(3)
    assert daemon.stop() == 0
    assert len(x_events(daemon.events())) == 3
    stats = daemon.stats()
    assert stats["rejected"] == 1 and stats["written"] == 3


# -------------------------------------------------------------- path rules

def run_forward_expect_failure(daemon_factory, output):
    d = daemon_factory(output=output)
    d.start(wait=False)
    try:
        rc = d.proc.wait(timeout=30)
    finally:
        d._err.close()
    return rc, d.log()


@pytest.mark.parametrize("name,rule", [("trace.txt", ".json"), ("trace.json;", "")])
def test_bad_output_names_are_refused(daemon_factory, tmp_path, name, rule):
    rc, log = run_forward_expect_failure(daemon_factory, tmp_path / name)
    assert rc == 1, log
    assert "perfetto-output" in log or "output" in log, log
    if rule:
        assert rule in log, log
    assert not (tmp_path / name).exists()


def test_symlink_output_is_refused(daemon_factory, tmp_path):
    target = tmp_path / "target.json"
    target.write_text("precious")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    rc, log = run_forward_expect_failure(daemon_factory, link)
    assert rc == 1, log
    assert "link" in log.lower(), log
    assert target.read_text() == "precious"


def test_directory_output_is_refused(daemon_factory, tmp_path):
    (tmp_path / "dir.json").mkdir()
    rc, log = run_forward_expect_failure(daemon_factory, tmp_path / "dir.json")
    assert rc == 1, log
    assert "regular file" in log, log


def test_output_owned_by_another_user_is_refused(daemon_factory, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to chown a file to another user")
    path = tmp_path / "other.json"
    path.write_text("theirs")
    os.chown(path, 65534, 65534)
    rc, log = run_forward_expect_failure(daemon_factory, path)
    assert rc == 1, log
    assert "owned" in log, log
    assert path.read_text() == "theirs"


# ---------------------------------------------------------------- signals

def _sender(daemon, prefix, stop, sent):
    """Sends numbered packets until `stop` or the daemon goes away; records
    how many frames were fully handed to the kernel."""
    n = 0
    try:
        with daemon.connect() as s:
            while not stop.is_set():
                batch = b"".join(frame(numbered_packet(n + i, prefix)) for i in range(50))
                s.sendall(batch)
                n += 50
    except OSError:
        pass
    sent[prefix] = n


def test_sigterm_under_load_leaves_valid_json(daemon):
    stop = threading.Event()
    sent = {}
    threads = [threading.Thread(target=_sender, args=(daemon, p, stop, sent)) for p in range(1, 5)]
    for t in threads:
        t.start()
    try:
        daemon.wait_for_spans(2000)
        assert daemon.stop(signal.SIGTERM) == 0, daemon.log()[-3000:]
    finally:
        stop.set()
        for t in threads:
            t.join()
    events = daemon.events()                      # strict JSON: must parse
    spans = x_events(events)
    ids = [e["args"]["span_id"] for e in spans]
    assert len(ids) == len(set(ids))
    stats = daemon.stats()
    assert stats["written"] == len(spans)
    assert stats["rejected"] == 0
    assert "Stop Perfetto forwarder success" in daemon.log()
    # Per connection, what was written is a prefix of what was sent (in order).
    for prefix in range(1, 5):
        mine = [int(i[4:], 16) for i in ids if int(i[:4], 16) == prefix]
        assert mine == list(range(len(mine)))


def test_sigint_stops_cleanly(daemon):
    daemon.send(numbered_packet(7))
    daemon.wait_for_spans(1)
    assert daemon.stop(signal.SIGINT) == 0
    assert len(x_events(daemon.events())) == 1


def test_after_sigkill_flushed_events_load_tolerantly(daemon):
    daemon.send(*[numbered_packet(i, 1) for i in range(500)])
    flushed = daemon.wait_for_spans(500)
    stop = threading.Event()
    sent = {}
    t = threading.Thread(target=_sender, args=(daemon, 2, stop, sent))
    t.start()
    try:
        daemon.wait_for_spans(1000)
        daemon.stop(signal.SIGKILL)
    finally:
        stop.set()
        t.join()
    text = daemon.output.read_text(encoding="utf-8")
    events = load_tolerant(text)
    spans = x_events(events)
    assert len(spans) >= len(flushed)
    got = {e["args"]["span_id"] for e in spans}
    assert {e["args"]["span_id"] for e in flushed} <= got
    for e in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= set(e)


# ---------------------------------------------------------------- garbage

def _bad_payloads():
    rnd = random.Random(1234)
    good = json.loads(numbered_packet(0, 9)[len(MAGIC):])

    def variant(**changes):
        p = dict(good)
        p.update(changes)
        return MAGIC + json.dumps(p).encode()

    yield bytes(rnd.getrandbits(8) for _ in range(300))                      # random bytes
    yield MAGIC                                                              # magic only
    yield MAGIC + b"{" * 5000                                                # deep nesting
    yield MAGIC + b'{"name":"\xff\xfe bad utf-8"}'                           # invalid UTF-8
    yield MAGIC + numbered_packet(1, 9)[len(MAGIC):].replace(b"test.span", b"te\xc3(st")
    yield variant(name=5)
    yield variant(start_time_ns="x")
    yield variant(attributes=[1, 2])
    yield variant(links={"trace_id": "1" * 32})
    yield variant(trace_id="nothex")
    yield variant(span_id=None)
    yield variant(attributes={f"k{i}": i for i in range(20000)})              # huge attribute list
    yield variant(links=[{"trace_id": "1" * 32, "span_id": "2" * 16}] * 5000)
    yield numbered_packet(2, 9)[:-1]                                         # cut JSON
    yield numbered_packet(3, 9) + b"trailing"


def _send_raw(daemon, data, shut=True):
    try:
        with daemon.connect() as s:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
            s.settimeout(10)
            try:
                s.recv(1)
            except OSError:
                pass
    except OSError:
        pass


def test_garbage_is_counted_and_never_harms_good_clients(daemon):
    stop = threading.Event()
    sent = {}
    good = threading.Thread(target=_sender, args=(daemon, 1, stop, sent))
    good.start()
    bad = list(_bad_payloads())
    try:
        rnd = random.Random(99)
        for p in bad:                                     # each valid-length, bad content
            _send_raw(daemon, frame(p))
        _send_raw(daemon, struct.pack(">I", 0xFFFFFFFF) + b"x" * 100)        # oversize length
        _send_raw(daemon, struct.pack(">I", FRAME_MAX + 1))                  # just over the cap
        _send_raw(daemon, struct.pack(">I", 0))                              # zero length
        _send_raw(daemon, struct.pack(">I", 1000) + b"y" * 500)              # truncated frame
        _send_raw(daemon, b"\x00\x00")                                        # truncated header
        for _ in range(20):                                                  # random streams
            _send_raw(daemon, bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 2000))))
        # A frame at exactly the cap is accepted by the framing, then rejected.
        _send_raw(daemon, frame(MAGIC + b"x" * (FRAME_MAX - len(MAGIC))))
        daemon.send(numbered_packet(1, 7))                                   # marker
        marker = f"{7:04x}{1:012x}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            spans = x_events(load_tolerant(daemon.output.read_text()))
            if any(e["args"]["span_id"] == marker for e in spans):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("marker span never arrived")
        assert daemon.proc.poll() is None
    finally:
        stop.set()
        good.join()
    assert daemon.stop() == 0, daemon.log()[-3000:]
    spans = x_events(daemon.events())
    stats = daemon.stats()
    # Every span of the good client that reached the daemon was written, in order.
    mine = [int(e["args"]["span_id"][4:], 16) for e in spans
            if e["args"]["span_id"].startswith("0001")]
    assert mine == list(range(len(mine)))
    assert len(mine) >= 1
    assert not any(e["args"]["span_id"].startswith("0009") for e in spans)
    assert stats["rejected"] >= len(bad) + 1
    assert stats["oversize"] >= 3
    assert stats["truncated"] >= 2
    assert stats["written"] == len(spans)


# ---------------------------------------------------------------- peer check

_CHILD_CLIENT = """
import os, socket, struct, sys
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect("\\0" + sys.argv[1])
    p = bytes.fromhex(sys.argv[2])
    s.sendall(struct.pack(">I", len(p)) + p)
    data = s.recv(1)
    sys.exit(0 if data == b"" else 3)
except (ConnectionResetError, BrokenPipeError, ConnectionRefusedError):
    sys.exit(0)
except socket.timeout:
    sys.exit(4)
"""


def test_client_of_another_uid_is_refused(daemon):
    if os.geteuid() != 0:
        pytest.skip("needs root to run a client as uid 65534")
    pid = os.fork()
    if pid == 0:  # child: become nobody, connect, send, expect to be dropped
        code = 1
        try:
            import sys
            sys.argv = ["child", daemon.socket_name, numbered_packet(1, 6).hex()]
            exec(compile(_CHILD_CLIENT, "child", "exec"), {"__name__": "child"})
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    daemon.send(numbered_packet(1, 5))
    spans = daemon.wait_for_spans(1)
    assert daemon.stop() == 0
    spans = x_events(daemon.events())
    assert [e["args"]["span_id"] for e in spans] == [f"{5:04x}{1:012x}"]
    stats = daemon.stats()
    assert stats["refused"] == 1
    log = daemon.log()
    assert "refused a connection from pid" in log and "uid 65534" in log


# ------------------------------------------------------------ many clients

def test_thousand_concurrent_clients(daemon):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 1200
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    socks = []
    try:
        for _ in range(1000):
            socks.append(daemon.connect())
        for i, s in enumerate(socks):             # all open at once, each sends one span
            s.sendall(frame(numbered_packet(i, 3)))
        spans = daemon.wait_for_spans(1000)
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert daemon.stop() == 0
    spans = x_events(daemon.events())
    assert len({e["args"]["span_id"] for e in spans}) == 1000
    stats = daemon.stats()
    assert stats["accepted"] == 1000 and stats["refused"] == 0 and stats["written"] == 1000


# ---------------------------------------------------------------------- CLI

def run_cli(binary, *args, timeout=30):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)


def test_help_and_version(mstrace_bin):
    r = run_cli(mstrace_bin, "--help")
    assert r.returncode == 0 and "forward" in r.stdout
    r = run_cli(mstrace_bin, "forward", "--help")
    assert r.returncode == 0
    for opt in ("--log-level", "--perfetto-output", "--socket-name", "testing"):
        assert opt in r.stdout
    r = run_cli(mstrace_bin, "--version")
    assert r.returncode == 0 and r.stdout.startswith("mstrace ")


def test_invalid_log_level_is_a_usage_error(mstrace_bin, tmp_path):
    r = run_cli(mstrace_bin, "forward", "--log-level", "verbose",
                "--perfetto-output", str(tmp_path / "t.json"))
    assert r.returncode == 2
    assert "--log-level" in r.stderr and "verbose" in r.stderr
    assert not (tmp_path / "t.json").exists()


def test_unknown_option_is_a_usage_error(mstrace_bin):
    assert run_cli(mstrace_bin, "forward", "--bogus").returncode == 2
    assert run_cli(mstrace_bin, "frobnicate").returncode == 2


def test_without_perfetto_output_reports_relay_not_built(mstrace_bin):
    r = run_cli(mstrace_bin, "forward", "--socket-name", unique_socket_name())
    assert r.returncode == 1
    assert "OTLP relay" in r.stderr


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error", "critical", "fatal"])
def test_every_log_level_is_accepted(daemon_factory, level):
    d = daemon_factory(log_level=level)
    d.start(wait=False)
    d.wait_connectable()   # quieter levels do not print the "listening" line
    assert d.stop() == 0, d.log()


def test_root_prints_security_warning(daemon):
    if os.geteuid() != 0:
        pytest.skip("only printed when running as root")
    assert "Security Warning" in daemon.log()
    assert "root" in daemon.log()


def test_busy_socket_name_fails_without_touching_the_other_output(daemon, daemon_factory, tmp_path):
    daemon.send(numbered_packet(1))
    daemon.wait_for_spans(1)
    other = daemon_factory(output=tmp_path / "hook_trace.json", socket_name=daemon.socket_name,
                           stderr_path=tmp_path / "second.log")
    other.start(wait=False)
    rc = other.proc.wait(timeout=30)
    other._err.close()
    assert rc == 1
    assert "already in use" in other.log()
    assert len(x_events(load_tolerant(daemon.output.read_text()))) == 1
