"""`mstrace analyze` on a hostile trace, and where its reports may go.

A trace file is outside input (any process of the same user can put spans
into it), and its reports are opened by people, terminals and spreadsheets.
The attack inputs are made here: request ids that a spreadsheet would run
(=, +, -, @, TAB, CR), ids with a NUL byte, ids carrying terminal control
sequences, bidirectional overrides and C1 controls; a fifo nobody writes;
events nested deeper than the reader goes; output paths through symbolic
links; umask 000; a disk too small for the report.

Owns: inputs that are not regular files (a fifo with no writer, a device)
are refused at once with one line, and a file whose events were all
skipped says what was skipped and why; request.csv cells never start a formula (OWASP: a leading single
quote, the cell quoted) and keep every id whole and distinct; nothing from
the trace reaches the terminal as a control character; -o, --json and
--csv DIR follow no link, get 0640 files and 0750 directories under umask
000, and replace a report only whole (a failed write leaves the old file
and no temporary file).
"""

import csv
import io
import json
import os
import subprocess

import pytest

from conftest import mstrace_binary

FORMULAS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(1,2)", "\tx", "\rx"]
TERMINAL = "\x1b]0;owned\x07\x1b[2J\nverdict: forged\u202e\u009b"


def request_span(i, request_id, dur_us):
    return {"name": "vllm.request", "ph": "X", "ts": 1000 + i, "dur": dur_us, "pid": 1, "tid": 1,
            "cat": "x", "args": {"request.id": request_id, "trace_id": f"{i + 1:032x}",
                                 "span_id": f"{i + 1:016x}"}}


def write_trace(path, ids):
    """A Chrome Trace JSON file of request spans, the first id the slowest."""
    path.write_text(json.dumps([request_span(i, rid, 9000 - i) for i, rid in enumerate(ids)]))
    return path


def analyze(*args, umask=None):
    return subprocess.run([str(mstrace_binary()), "analyze"] + [str(a) for a in args],
                          capture_output=True, timeout=120,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def test_csv_cells_cannot_start_a_formula_and_ids_stay_whole(tmp_path):
    ids = FORMULAS + ["a\x00b", "a", "a\x00", "plain", "x" * 3000 + "y"]
    trace = write_trace(tmp_path / "t.json", ids)
    r = analyze(trace, "--csv", tmp_path / "csv", "--quiet")
    assert r.returncode == 0, r.stderr
    raw = (tmp_path / "csv" / "request.csv").read_bytes()
    rows = list(csv.reader(io.StringIO(raw.decode(), newline="")))[1:]
    cells = [row[0] for row in rows]
    assert len(cells) == len(ids) == len(set(cells))            # none merged, none lost
    for rid in FORMULAS:
        assert "'" + rid in cells, rid                            # made inert, kept whole
        assert ('"\'' + rid.replace('"', '""') + '"').encode() in raw   # and quoted
    assert set(cells) - {"'" + f for f in FORMULAS} == {"a\x00b", "a", "a\x00", "plain", "x" * 3000 + "y"}
    for c in cells:
        assert c[:1] not in ("=", "+", "-", "@", "\t", "\r")


def test_long_ids_are_cut_with_a_marker_that_keeps_them_apart(tmp_path):
    """Two 1 MB ids with the same first 4,096 bytes stay two requests; a cut id never equals a whole one."""
    prefix = "p" * 4096
    long_a, long_b = prefix + "a" * (1 << 20), prefix + "b" * (1 << 20)
    trace = write_trace(tmp_path / "t.json", [long_a, long_b, prefix])
    r = analyze(trace, "--csv", tmp_path / "csv", "--quiet")
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO((tmp_path / "csv" / "request.csv").read_text(), newline="")))[1:]
    cells = sorted(row[0] for row in rows)
    assert len(cells) == 3 and len(set(cells)) == 3
    assert prefix in cells  # kept whole: at the limit, not beyond it
    cut = [c for c in cells if c != prefix]
    for c, whole in zip(sorted(cut), sorted([long_a, long_b])):
        assert c.startswith(prefix) and len(c) > 4096 and len(c) < 4096 + 64
        assert f"...[cut: {len(whole)} bytes, #" in c


def test_nothing_from_the_trace_reaches_the_terminal_raw(tmp_path):
    trace = write_trace(tmp_path / "t.json", [TERMINAL, "b"])
    r = analyze(trace)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    for bad in ("\x1b", "\x07", "\r", "\u202e", "\u009b"):
        assert bad not in out, repr(bad)
    assert "verdict: forged" not in out.splitlines()[1:] and \
        not any(line.startswith("verdict: forged") for line in out.splitlines())
    assert "request \\e]0;owned\\x07\\e[2J\\nverdict: forged\\u202e\\u009b pid 1" in out


def test_outputs_follow_no_symbolic_link(tmp_path):
    trace = write_trace(tmp_path / "t.json", ["r1", "r2"])
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    (tmp_path / "dirlink").symlink_to(real_dir)
    for name in ("link.html", "link.json"):
        (tmp_path / name).symlink_to(victim)
    cases = [("-o", tmp_path / "link.html"), ("--json", tmp_path / "link.json"),
             ("--csv", tmp_path / "dirlink"), ("--json", tmp_path / "dirlink" / "a.json"),
             ("-o", tmp_path / "dirlink" / "sub" / "a.html")]
    for flag, path in cases:
        r = analyze(trace, flag, path, "--quiet")
        assert r.returncode == 1, (flag, path, r.stderr)
        lines = r.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "symbolic link" in lines[0], (flag, lines)
    assert victim.read_text() == "keep me"
    assert list(real_dir.iterdir()) == []


def test_modes_are_0640_and_0750_under_umask_000(tmp_path):
    trace = write_trace(tmp_path / "t.json", ["r1", "r2"])
    out = tmp_path / "new" / "deeper"
    r = analyze(trace, "-o", out / "r.html", "--json", out / "r.json", "--csv", out / "csv",
                "--quiet", umask=0)
    assert r.returncode == 0, r.stderr
    mode = lambda p: os.stat(p).st_mode & 0o7777
    for d in (tmp_path / "new", out, out / "csv"):
        assert mode(d) == 0o750, d
    for f in (out / "r.html", out / "r.json", out / "csv" / "request.csv", out / "csv" / "step.csv"):
        assert mode(f) == 0o640, f
    assert sorted(p.name for p in out.iterdir()) == ["csv", "r.html", "r.json"]   # no temporaries
    # Replacing a report never widens what its owner narrowed it to.
    os.chmod(out / "r.json", 0o600)
    r = analyze(trace, "--json", out / "r.json", "--quiet", umask=0)
    assert r.returncode == 0, r.stderr
    assert mode(out / "r.json") == 0o600


def test_a_failed_write_leaves_the_old_report_whole(tmp_path):
    """A disk too small for the report (a tmpfs mounted here, root only): the
    write fails, the old report stays as it was, no temporary file is left."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        old = mnt / "report.json"
        old.write_text('{"old": true}')
        trace = write_trace(tmp_path / "t.json", [f"request-{i:06d}-" + "x" * 200 for i in range(2000)])
        r = analyze(trace, "--json", old, "--top", "2000", "--quiet")
        assert r.returncode == 1, r.stderr
        err = r.stderr.decode()
        assert "--json: cannot write" in err and "No space left on device" in err, err
        assert old.read_text() == '{"old": true}'
        assert [p.name for p in mnt.iterdir()] == ["report.json"]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def one_error_line(r):
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, lines)
    assert lines[0].startswith("mstrace analyze: error: "), lines
    return lines[0]


def test_inputs_that_are_not_regular_files_are_refused(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)                      # nobody ever opens it for writing
    # (the timeout is a hang guard: a blocked open fails the test, it is not a measure)
    line = one_error_line(analyze(fifo))
    assert line.endswith("is a fifo (named pipe), not a trace file: only regular files are read"), line
    line = one_error_line(analyze("/dev/null"))
    assert "/dev/null is a character device, not a trace file" in line


def test_all_events_skipped_says_what_and_why(tmp_path):
    deep = 0
    for _ in range(70):                   # deeper than the reader's 64 levels
        deep = [deep]
    events = [{"name": "x", "ph": "X", "ts": i, "dur": 1, "pid": 1, "tid": 1, "args": {"a": deep}}
              for i in range(3)]
    events += [{"ph": "X", "ts": 5}, 7]   # no name; not an object
    trace = tmp_path / "deep.json"
    trace.write_text(json.dumps(events))
    line = one_error_line(analyze(trace))
    assert "no X events" not in line
    assert line.endswith(": no spans, 5 events skipped: 1 not JSON objects, 3 not valid JSON (the first "
                         "at byte 1: nesting too deep, more than 64 levels), 1 X events without name/ts"), line
