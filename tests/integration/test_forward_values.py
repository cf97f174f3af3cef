"""Values at and beyond the edges of what both forwarder outputs can hold,
against the real daemon writing JSON and .pftrace from one run.

Owns: a process.pid of 2^40, a negative pid, a thread.id past int32 and
negative start/end times are rejected (counted in `rejected`, each with its
reason in the log) rather than wrapped in one encoding and kept in the
other; the edges that fit (pid 2^31-1, times 0 and 2^63-1) are kept and say
the same thing in both files, with no duration beyond int64; and a stats
line asked for with SIGUSR1 counts what is in the file, not what was
handed to the writer thread one batch before.
"""

import json

from conftest import MAGIC, frame
from forward_helpers import requested_stats
from pftrace_model import normalized, read_chrome_json, read_pftrace

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


def packet(span_no, start, end, pid=100, tid=200, attrs=None):
    """A hook span packet with no request id (no request track stays open,
    so nothing but traffic or a stats request makes the daemon look at its
    counters again)."""
    attributes = {"process.pid": pid, "thread.id": tid}
    attributes.update(attrs or {})
    return MAGIC + json.dumps({
        "name": f"edge{span_no}", "trace_id": "9" * 32, "span_id": f"{span_no + 1:016x}",
        "start_time_ns": start, "end_time_ns": end, "attributes": attributes,
        "resource_attributes": {"service.name": "vllm"},
    }, separators=(",", ":")).encode()


def test_out_of_range_values_are_rejected_and_both_outputs_agree(daemon_factory, tmp_path):
    d = daemon_factory(output=tmp_path / "edges.json")
    base = d.argv
    d.argv = lambda: base() + ["--perfetto-output", str(tmp_path / "edges.pftrace")]
    d.start()
    good = [packet(0, 0, INT64_MAX), packet(1, 5_000, 7_000, pid=INT32_MAX, tid=INT32_MAX),
            packet(2, 9_000, 1_000, pid=0, tid=0)]           # end before start: duration 0
    bad = {
        "attribute 'process.pid' is out of range (1099511627776; allowed 0..2147483647)":
            packet(10, 1_000, 2_000, pid=2**40),
        "attribute 'process.pid' is out of range (-1; allowed 0..2147483647)":
            packet(11, 1_000, 2_000, pid=-1),
        "attribute 'thread.id' is out of range (2147483648; allowed 0..2147483647)":
            packet(12, 1_000, 2_000, tid=2**31),
        "field 'start_time_ns' is negative (-9223372036854775808)":
            packet(13, -2**63, INT64_MAX),
        "field 'end_time_ns' is negative (-1)": packet(14, 1_000, -1),
    }
    d.send(*good, *bad.values())
    assert d.stop() == 0, d.log()[-3000:]
    stats = d.stats()
    log = d.log()
    assert stats["received"] == 8 and stats["rejected"] == 5 and stats["written"] == 3
    for reason in bad:
        assert reason in log, reason
    mj = normalized(read_chrome_json(tmp_path / "edges.json"))
    mp = normalized(read_pftrace(tmp_path / "edges.pftrace"))
    for key in mj:
        assert mj[key] == mp[key], key
    slices = {s[2]: s for s in mj["slices"]}        # name -> (pid, tid, name, cat, ts, dur, args)
    assert sorted(slices) == ["edge0", "edge1", "edge2"]
    assert slices["edge0"][4:6] == (0, INT64_MAX)
    assert slices["edge1"][:2] == (INT32_MAX, INT32_MAX)
    assert slices["edge2"][:2] == (0, 0) and slices["edge2"][5] == 0
    assert all(0 <= s[5] <= INT64_MAX for s in mj["slices"])


def test_requested_stats_count_what_is_in_the_file(daemon_factory):
    d = daemon_factory().start()
    with d.connect() as s:
        s.sendall(b"".join(frame(packet(i, 1_000 + i, 2_000 + i)) for i in range(500)))
    d.wait_for_spans(500)                   # all 500 are in the file ...
    st = requested_stats(d, lambda st: st["written"] == 500, "all 500 written")
    assert st["written"] == 500, st         # ... and the stats line says so, with no more traffic
    assert st["received"] == 500
    assert d.stop() == 0
