"""`mstrace analyze` on the forwarder's native Perfetto output (.pftrace; docs/analyze.md "Inputs").

One span stream — the analysis tests' generator (test_analyze_tracegen: a vLLM-like run with a
planted bottleneck, recorded with libmstrace) — is captured once as the bytes its forwarder
client sends, then replayed byte for byte into two real `mstrace forward` daemons, one writing
Chrome Trace JSON and one writing .pftrace. `mstrace analyze --json` of the two files must agree:
steps, requests, stage totals, findings and verdict, up to the formats' time resolution (the JSON
carries microseconds with three decimals). Also: the format is told by content, not extension; a
.pftrace cut mid-packet (as a SIGKILL leaves it) is analysed up to the cut with a warning; bad
inputs exit 2 with one line.
"""

import json
import os
import select
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import Daemon, mstrace_binary, unique_socket_name
from test_analyze import analysis, analyze, assert_bad_input_exits_2, tracegen

REQUESTS = 200


def capture_stream(scenario: str, seed: int, requests: int):
    """Runs the generator against a listener that only records what each connection sends
    (the forwarder protocol is one-way length-prefixed frames); returns (counts, [bytes])."""
    name = unique_socket_name()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("\0" + name)
    srv.listen(16)
    streams, conns, done = [], {}, threading.Event()

    def pump():
        while True:
            r, _, _ = select.select([srv] + list(conns), [], [], 0.05)
            for s in r:
                if s is srv:
                    c, _ = srv.accept()
                    conns[c] = bytearray()
                    continue
                data = s.recv(1 << 20)
                if data:
                    conns[s] += data
                else:
                    streams.append(bytes(conns.pop(s)))
                    s.close()
            if done.is_set() and not r and not conns:
                return

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        gen = subprocess.run([str(tracegen()), "--socket", name, "--scenario", scenario,
                              "--requests", str(requests), "--seed", str(seed)],
                             capture_output=True, text=True, timeout=300)
        assert gen.returncode == 0, gen.stderr
    finally:
        done.set()
        t.join(timeout=60)
        srv.close()
    counts = json.loads(gen.stdout.strip().splitlines()[-1])
    assert counts["failed"] == 0 and counts["dropped"] == 0, counts
    assert streams and sum(len(s) for s in streams) > 0
    return counts, streams


def replay(streams, out: Path, spans: int) -> Path:
    """The captured bytes into a real daemon writing `out` (format by extension)."""
    d = Daemon(mstrace_binary(), out, log_level="info", socket_name=unique_socket_name())
    d.start()
    try:
        for data in streams:
            with d.connect() as s:
                s.sendall(data)
        if out.suffix == ".json":
            d.wait_for_spans(spans, timeout=120)
        # .pftrace: the stop drains every connection already accepted or queued (docs/forwarder.md);
        # the analysis then checks that every span is in the file.
    finally:
        assert d.stop() == 0, d.log()
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("analyze_pftrace")
    counts, streams = capture_stream("tail", seed=5, requests=REQUESTS)
    js = replay(streams, d / "run.json", counts["spans"])
    pf = replay(streams, d / "run.pftrace", counts["spans"])
    return {"counts": counts, "json": js, "pftrace": pf, "dir": d}


def close(a, b, tol, path="", diffs=None):
    """Structural equality, numbers equal within tol (relative, with an absolute floor)."""
    diffs = [] if diffs is None else diffs
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            diffs.append(f"{path}: keys {sorted(set(a) ^ set(b))}")
        for k in set(a) & set(b):
            close(a[k], b[k], tol, f"{path}.{k}", diffs)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{path}: {len(a)} vs {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, tol, f"{path}[{i}]", diffs)
    elif isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str):
        if a != b:
            diffs.append(f"{path}: {a!r} vs {b!r}")
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if abs(a - b) > max(tol["abs"], tol["rel"] * max(abs(a), abs(b))):
            diffs.append(f"{path}: {a} vs {b}")
    elif a != b:
        diffs.append(f"{path}: {a!r} vs {b!r}")
    return diffs


def test_same_analysis_from_json_and_pftrace(pair):
    aj = analysis(pair["json"])
    ap = analysis(pair["pftrace"])
    c = pair["counts"]
    assert ap["inputs"][0]["kind"] == "pftrace" and aj["inputs"][0]["kind"] == "chrome-json"
    # The pftrace file is the smaller one (the forwarder's point in writing it).
    assert ap["inputs"][0]["bytes"] < aj["inputs"][0]["bytes"]
    for a in (aj, ap):
        assert a["data_quality"]["spans"] == c["spans"]
        assert a["steps"]["count"] == c["steps"]
        assert a["requests"]["count"] == a["requests"]["joined"] == REQUESTS
        assert a["data_quality"]["lossy"] is False and a["inputs"][0]["truncated"] is False
    # Exactly equal: what is counted, and what the rules decide.
    for key in ("verdict",):
        assert aj[key]["bottleneck"] == ap[key]["bottleneck"] == "model"
    assert [(f["rule"], f["fired"], f["severity"]) for f in aj["findings"]] == \
           [(f["rule"], f["fired"], f["severity"]) for f in ap["findings"]]
    assert aj["data_quality"]["processes"] == ap["data_quality"]["processes"]
    for sec in ("steps", "requests", "stages", "span_names", "findings", "verdict", "profile_targets"):
        # Times: 1 ns per endpoint in the JSON's microseconds with three decimals is exact; the
        # percentiles and fits are computed from the same values, so allow float noise only.
        diffs = close(aj[sec], ap[sec], {"rel": 1e-6, "abs": 2e-6 if sec != "profile_targets" else 2})
        assert not diffs, f"{sec}: {diffs[:10]}"
    assert aj["inputs"][0]["flows"] == ap["inputs"][0]["flows"]


def test_step_record_reads_the_same_from_json_and_pftrace(tmp_path):
    """A KV-full run (queueing, preemptions, chunked phases in every step record): the same
    requests, preemptions, latency metrics and findings from both formats."""
    counts, streams = capture_stream("kvfull", seed=3, requests=120)
    aj = analysis(replay(streams, tmp_path / "kv.json", counts["spans"]))
    ap = analysis(replay(streams, tmp_path / "kv.pftrace", counts["spans"]))
    assert aj["requests"]["preemptions"] == ap["requests"]["preemptions"] == counts["preemptions"] > 0
    assert aj["data_quality"]["steps_with_record"] == ap["data_quality"]["steps_with_record"] == counts["steps"]
    assert aj["verdict"]["bottleneck"] == ap["verdict"]["bottleneck"] == "capacity"
    for sec in ("requests", "findings", "stages"):
        diffs = close(aj[sec], ap[sec], {"rel": 1e-6, "abs": 2e-6})
        assert not diffs, f"{sec}: {diffs[:10]}"


def test_format_is_told_by_content_not_extension(pair, tmp_path):
    renamed = tmp_path / "native_output.json"
    renamed.write_bytes(pair["pftrace"].read_bytes())
    a = analysis(renamed)
    assert a["inputs"][0]["kind"] == "pftrace"
    assert a["steps"]["count"] == pair["counts"]["steps"]
    # Both formats in one call: merged as two inputs, pids kept apart by input.
    both = analysis(pair["json"], pair["pftrace"])
    assert [i["kind"] for i in both["inputs"]] == ["chrome-json", "pftrace"]
    assert both["steps"]["count"] == 2 * pair["counts"]["steps"]


def varint(data: bytes, pos: int):
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return n, pos


def packet_ends(data: bytes):
    """Offsets where each Trace.packet field ends (tag 0x0a, varint length, payload)."""
    ends, pos = [], 0
    while pos < len(data):
        assert data[pos] == 0x0A
        n, pos = varint(data, pos + 1)
        pos += n
        ends.append(pos)
    assert pos == len(data)
    return ends


def interning_restarts(data: bytes) -> int:
    """Packets whose sequence_flags (TracePacket field 13) say SEQ_INCREMENTAL_STATE_CLEARED."""
    count, start = 0, 0
    for end in packet_ends(data):
        n, i = varint(data, start + 1)
        while i < end:
            tag, i = varint(data, i)
            wt = tag & 7
            if wt == 0:
                v, i = varint(data, i)
                count += (tag >> 3) == 13 and (v & 1)
            elif wt == 2:
                ln, i = varint(data, i)
                i += ln
            else:
                i += 8 if wt == 1 else 4
        start = end
    return count


def test_cut_pftrace_is_analysed_up_to_the_cut(pair, tmp_path):
    data = pair["pftrace"].read_bytes()
    ends = packet_ends(data)
    # Cut in the middle of a packet past 60 % of the file, as a SIGKILL mid-write leaves it.
    at = next(e for e in ends if e > len(data) * 0.6) - 3
    cut = tmp_path / "cut.pftrace"
    cut.write_bytes(data[:at])
    proc = analyze(cut, "--json", tmp_path / "cut_out.json")
    assert "warning" in proc.stderr and "cut" in proc.stderr, proc.stderr
    a = json.loads((tmp_path / "cut_out.json").read_text())
    assert a["inputs"][0]["truncated"] is True and a["data_quality"]["lossy"] is True
    assert 0 < a["data_quality"]["spans"] < pair["counts"]["spans"]
    assert a["steps"]["count"] > 0
    # Cut exactly at a packet boundary: a whole file as far as framing goes, every span read
    # up to there (the spans after it simply are not in it).
    whole = tmp_path / "boundary.pftrace"
    whole.write_bytes(data[: next(e for e in ends if e > len(data) * 0.6)])
    b = analysis(whole)
    assert b["inputs"][0]["truncated"] is False
    assert a["data_quality"]["spans"] <= b["data_quality"]["spans"] < pair["counts"]["spans"]


@pytest.mark.parametrize("content,words", [
    (b"\x0a", "empty file"),                           # one newline: blank, as for JSON
    (b"\x0a\x10\x08\x01", "Perfetto protobuf"),        # first packet cut
    (b"\x0a" + b"\xff" * 10 + b"\x01", "Perfetto protobuf"),  # a length no varint holds
    (b"\x0a\x02\x08\x01\x12\x00", "no spans"),           # one packet, then not a packet field
    (b"\x0a\x00", "no spans"),                         # a valid but empty trace
    (b"\x0a\x02\x50\x01" * 8, "no spans"),             # packets without track events
])
def test_bad_pftrace_exits_2_with_one_line(tmp_path, content, words):
    assert_bad_input_exits_2(tmp_path / "bad.pftrace", content, words)


def analysis_of_both_formats(tmp_path, stem, packets):
    """`packets` sent to a real forwarder once per output format (tmp_path/STEM.json and
    STEM.pftrace): {"json": analysis, "pftrace": analysis}."""
    outs = {}
    for ext in ("json", "pftrace"):
        d = Daemon(mstrace_binary(), tmp_path / f"{stem}.{ext}", log_level="info",
                   socket_name=unique_socket_name()).start()
        try:
            d.send(*packets)
        finally:
            assert d.stop() == 0, d.log()
        outs[ext] = analysis(d.output)
    return outs


def test_links_lists_and_overlapping_spans_read_the_same(tmp_path):
    """The seed's scenario (cross-trace links, request.ids lists, roles) plus 20 request spans
    that overlap without nesting on one thread (the writer puts them on 'overlapping spans N'
    child tracks): the whole analysis, flows included, is the same from both files."""
    from conftest import make_packet
    from test_pftrace import seed_scenario
    packets = seed_scenario()
    for i in range(20):
        t0 = 10_000_000 + i * 1_000_000
        packets.append(make_packet("vllm.request", "%032x" % (0xA00 + i), "%016x" % (0xB00 + i), t0,
                                   t0 + 5_500_000 + (i % 3) * 250_001,
                                   attrs={"request.id": f"ov-{i}", "process.role": "api_server"},
                                   pid=100, tid=101))
    outs = analysis_of_both_formats(tmp_path, "seed", packets)
    aj, ap = outs["json"], outs["pftrace"]
    assert ap["data_quality"]["spans"] == len(packets)
    assert aj["inputs"][0]["flows"] == ap["inputs"][0]["flows"] == 4   # one link per linked span
    for a in (aj, ap):
        del a["inputs"]
        for e in a["engines"]:
            del e["input_name"]  # the file's own name
    diffs = close(aj, ap, {"rel": 1e-9, "abs": 1e-9})
    assert not diffs, diffs[:10]
    names = {n["name"]: n for n in ap["span_names"]}
    assert names["vllm.request"]["count"] == 21
    assert abs(names["vllm.request"]["max_ms"] - 6.000002) < 1e-6


def test_interned_names_after_the_writer_restarts_its_interning(tmp_path):
    """18,000 distinct attribute keys overflow the writer's interning table (it restarts, saying
    SEQ_INCREMENTAL_STATE_CLEARED), while 1,000 span names recur across the restarts: a name
    gets a new id in each generation and ids are reused for other names, so each use must
    resolve to the definition of its own generation for every name to get its 18 spans and
    the right durations."""
    from conftest import make_packet
    n = 18000
    packets = [make_packet(f"custom.step.{i % 1000}", "%032x" % (i + 1), "%016x" % (i + 1),
                           1_700_000_000_000_000_000 + i * 1_000_000,
                           1_700_000_000_000_000_000 + i * 1_000_000 + 1000 + i,
                           attrs={f"custom.key.{i}": i}) for i in range(n)]
    outs = analysis_of_both_formats(tmp_path, "names", packets)
    # The first packet's clear, then one restart per ~8,000 new entries.
    assert interning_restarts((tmp_path / "names.pftrace").read_bytes()) >= 3
    aj, ap = outs["json"], outs["pftrace"]
    names = {x["name"]: x["count"] for x in ap["span_names"]}
    assert len(names) == 1000 and set(names.values()) == {18}
    # custom.step.999's spans last 1000 + i ns for i = 999, 1999, ..., 17999.
    assert abs(next(x for x in ap["span_names"] if x["name"] == "custom.step.999")["max_ms"] - 0.018999) < 1e-9
    for a in (aj, ap):
        del a["inputs"]
        for e in a["engines"]:
            del e["input_name"]  # the file's own name
    diffs = close(aj, ap, {"rel": 1e-9, "abs": 1e-9})
    assert not diffs, diffs[:10]
