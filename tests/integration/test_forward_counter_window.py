"""The forwarder's own counters stay inside the traced window, in both
encodings, against the real daemon over the real socket.

Owns: `forwarder.spans_received` / `spans_written` / `spans_dropped` are
never sampled after the latest end of a span the daemon received (spans
reach it seconds after they end: exporters batch, and the daemon samples on
its own clock), their samples are in time order, and the last sample still
holds the final counts. The spans here are stamped a few milliseconds after
the epoch, so a sample on the daemon's clock would be decades past them.
"""

import pytest

from conftest import make_packet
from pftrace_model import read_chrome_json, read_pftrace
from test_pftrace import wait_received

TRACE = "9" * 32


def _batch(first, n, start_ns, step_ns):
    return [make_packet("test.span", TRACE, f"{first + k:016x}", start_ns + k * step_ns,
                        start_ns + k * step_ns + step_ns // 2, pid=100, tid=101)
            for k in range(n)]


@pytest.mark.parametrize("ext", ["json", "pftrace"])
def test_own_counters_end_at_the_last_span(daemon_factory, tmp_path, ext):
    d = daemon_factory(output=tmp_path / f"window.{ext}").start()
    early = _batch(1, 20, 1_000_000, 100_000)            # ends at 2.95 ms
    late = _batch(100, 10, 5_000_000, 200_000)           # ends at 6.9 ms, the latest end
    stale = _batch(200, 5, 3_000_000, 100_000)           # arrives last, ends earlier
    d.send(*early)
    wait_received(d, len(early))
    d.send(*late)
    wait_received(d, len(early) + len(late))
    d.send(*stale)
    wait_received(d, len(early) + len(late) + len(stale))
    assert d.stop() == 0
    m = (read_pftrace if ext == "pftrace" else read_chrome_json)(d.output)
    spans = [s for s in m.slices if s["name"] == "test.span"]
    assert len(spans) == len(early) + len(late) + len(stale)
    last_end = max(s["ts"] + s["dur"] for s in spans)
    assert last_end == 6_900_000
    own = [(ts, n, v) for pid, n, ts, v in m.counters if n.startswith("forwarder.")]
    assert own, "no forwarder counters"
    assert all(ts <= last_end for ts, _, _ in own), sorted(own)[-3:]
    assert [ts for ts, _, _ in own] == sorted(ts for ts, _, _ in own)
    # the last sample has the final counts
    final = {n: v for _, n, v in own}
    total = len(early) + len(late) + len(stale)
    assert final == {"forwarder.spans_received": total, "forwarder.spans_written": total,
                     "forwarder.spans_dropped": 0}
    # nothing in the file lies after the last span (the viewer's default view is the traced work)
    assert max(ts for _, _, ts, _ in m.counters) <= last_end
