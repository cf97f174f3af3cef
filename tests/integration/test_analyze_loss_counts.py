"""`mstrace analyze`'s data_quality.spans_dropped and spans_failed over files
the real forwarder wrote.

Owns: a file of a run that lost nothing says so for both counts: 0, not null
(its forwarder.spans_dropped counter is 0, and that counter counts every span
lost before the file, the failed sends the traced processes reported included),
in both output formats; a trace without the forwarder's counter (a Chrome JSON
written by another tool) cannot say: null for both. A file whose counter is
not 0 gives that count as spans_dropped and null as spans_failed, since it does
not split the failed sends out (tests/integration/test_forward_loss.py makes
one with a real stall).
"""

import json
import subprocess

import pytest

from conftest import mstrace_binary, numbered_packet


def _quality(path):
    p = subprocess.run([str(mstrace_binary()), "analyze", str(path), "--json", "-"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["data_quality"]


@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_a_run_without_loss_says_none_dropped_and_none_failed(daemon_factory, tmp_path, suffix):
    d = daemon_factory(output=tmp_path / ("trace" + suffix)).start()
    d.send(*(numbered_packet(i) for i in range(20)))
    assert d.stop() == 0, d.log()[-3000:]
    stats = d.stats()
    assert stats["received"] == stats["written"] == 20 and stats["upstream_failed"] == 0, stats
    quality = _quality(d.output)
    assert quality["spans"] == 20, quality
    assert quality["spans_dropped"] == 0 and quality["spans_failed"] == 0, quality
    assert quality["lossy"] is False, quality


def test_a_trace_without_the_forwarders_counter_cannot_say(tmp_path):
    trace = tmp_path / "other_tool.json"
    trace.write_text(json.dumps([
        {"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 1000 + 10 * i, "dur": 5,
         "args": {"trace_id": "%032x" % (i + 1), "span_id": "%016x" % (i + 1)}} for i in range(5)]))
    quality = _quality(trace)
    assert quality["spans"] == 5, quality
    assert quality["spans_dropped"] is None and quality["spans_failed"] is None, quality
