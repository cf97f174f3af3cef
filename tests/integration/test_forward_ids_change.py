"""Request id lists sent as changes to their stream's previous list
(docs/forwarder.md "Request id lists as changes"), end to end: the real
forwarder client (driven by $MSTRACE_BUILD_DIR/test_ids_change) and raw
socket clients against a real `mstrace forward`.

- Every step span in the outputs carries exactly the list the traced
  process had, over hundreds of steps of a rolling batch with reorders, a
  request resumed in the middle and a reconnect, and most steps went as
  changes (the daemon's debug line counts them).
- A change whose base the daemon does not hold (a gap in the sequence)
  leaves that span without request.ids, with a warning, until the next whole
  list; a malformed change is rejected with its reason, nothing else lost.
- Older producers keep working: a client that never reads the daemon's
  capability line and closes has every frame counted and no warning (Linux
  reports ECONNRESET to the daemon after such a close; it must read the data
  first and take the reset as the end), and a plain V1 client sees nothing but
  that one line.
"""

import json
import re
import select
import socket
import struct
import subprocess

from conftest import MAGIC, build_path, frame, make_packet, numbered_packet, x_events

CHANGE_MAGIC = b"MSPF_PERFETTO_V2\n"
HELLO = b"MSPF_HELLO_V1 ids-change\n"


def step_lists(events):
    """{step.index: request.ids or None} of the schedule spans in a JSON output."""
    out = {}
    for e in x_events(events):
        if e.get("name") == "vllm.scheduler.schedule":
            out[e["args"]["step.index"]] = e["args"].get("request.ids")
    return out


def run_driver(d, tmp_path, steps, ids, reconnect_at=None):
    expect = tmp_path / f"expect-{ids}.jsonl"
    argv = [str(build_path("test_ids_change")), "--socket", d.socket_name, "--steps", str(steps),
            "--ids", str(ids), "--expect", str(expect)]
    if reconnect_at is not None:
        argv += ["--reconnect-at", str(reconnect_at)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return {row["step"]: row["ids"] for row in map(json.loads, expect.read_text().splitlines())}


def test_changes_rebuild_every_list(daemon_factory, tmp_path):
    d = daemon_factory().start()
    expected = run_driver(d, tmp_path, steps=400, ids=200, reconnect_at=230)
    assert d.stop() == 0
    got = step_lists(d.events())
    assert set(got) == set(expected)
    for step, ids in expected.items():
        assert got[step] == (ids or None), f"step {step}"
    log = d.log()
    line = next(l for l in log.splitlines() if "request.ids streams:" in l)
    kept, changes = (int(v) for v in re.search(r"(\d+) whole list\(s\) kept as a base, (\d+) change", line).groups())
    assert changes > 300 and kept >= 400 // 64, line
    assert not [l for l in log.splitlines() if "WARNING" in l and "root privileges" not in l], log
    assert "0 malformed change(s) rejected" in line and d.stats()["rejected"] == 0


def _ids_packet(step, value, stream=0, seq=None, change=False):
    body = make_packet("vllm.scheduler.schedule", "7" * 32, f"{step + 1:016x}", 1_000_000 + step * 1000,
                       1_000_500 + step * 1000, attrs={"step.index": step, "request.ids": value})
    obj = json.loads(body[len(MAGIC):])
    if seq is not None:
        obj["ids_stream"], obj["ids_seq"] = stream, seq
    return (CHANGE_MAGIC if change else MAGIC) + json.dumps(obj, separators=(",", ":")).encode()


def _read_hello(s):
    s.settimeout(60)
    got = b""
    while not got.endswith(b"\n"):
        chunk = s.recv(64)
        assert chunk, got
        got += chunk
    return got


def test_gap_gives_no_list_until_the_next_whole_one(daemon):
    with daemon.connect() as s:
        assert _read_hello(s) == HELLO
        s.sendall(b"".join(frame(p) for p in [
            _ids_packet(0, ["a", "b", "c"], seq=1),
            _ids_packet(1, {"left": [0], "joined": ["d"]}, seq=2, change=True),
            # seq 3 never sent: the next change has no base here
            _ids_packet(3, {"left": [], "joined": ["e"]}, seq=4, change=True),
            _ids_packet(4, {"left": [0], "joined": []}, seq=5, change=True),
            _ids_packet(5, ["x", "y"], seq=6),
            _ids_packet(6, {"left": [1], "joined": ["z"]}, seq=7, change=True),
            _ids_packet(7, {"left": [9], "joined": []}, seq=8, change=True),   # past the list: rejected
            _ids_packet(8, {"left": [], "joined": []}, seq=9, change=True),    # base lost with it
        ]))
    assert daemon.stop() == 0
    got = step_lists(daemon.events())
    assert got == {0: ["a", "b", "c"], 1: ["b", "c", "d"], 3: None, 4: None, 5: ["x", "y"], 6: ["x", "z"], 8: None}
    log = daemon.log()
    assert "previous list this forwarder does not hold" in log
    assert "position 9 in 'left' is past the previous list (2 ids)" in log
    assert "3 span(s) arrived as request.ids changes without their previous list" in log
    assert daemon.stats()["rejected"] == 1


def wait_readable(s):
    """Waits (bounded) until bytes are queued for s, without reading them."""
    p = select.poll()
    p.register(s, select.POLLIN)
    assert p.poll(60_000), "the daemon never accepted the connection"


def test_producer_that_never_reads_loses_nothing(daemon_factory):
    d = daemon_factory().start()
    n = 0
    for c in range(5):
        s = d.connect()
        s.sendall(b"".join(frame(numbered_packet(n + i, prefix=0xB)) for i in range(40)))
        n += 40
        wait_readable(s)  # the daemon accepted it: its line is queued here, and stays unread
        s.close()
    cut = d.connect()
    whole = frame(numbered_packet(n, prefix=0xB))
    cut.sendall(whole[: len(whole) // 2])
    wait_readable(cut)
    cut.close()
    assert d.stop() == 0
    st = d.stats()
    assert st["received"] == n and st["rejected"] == 0
    log = d.log()
    assert "ended in the middle of a frame" in log      # the cut one, as before
    assert "read from connection" not in log             # the resets are ends, not errors
    assert "capability line not sent" not in log
    warnings = [l for l in log.splitlines() if "WARNING" in l and "root privileges" not in l]
    assert len(warnings) == 1, log
    assert len(x_events(d.events())) == n


def test_v1_client_sees_only_the_capability_line(daemon):
    with daemon.connect() as s:
        s.sendall(frame(numbered_packet(1)))
        s.shutdown(socket.SHUT_WR)
        got = b""
        s.settimeout(60)
        daemon.stop()
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    assert got == HELLO
    assert len(x_events(daemon.events())) == 1
