"""The line a traced process logs about its spans at exit (plugin.exit_accounting).

Owns: that the line names every outcome of the tracer's counters and each exporter's, and that
"lost" is what was dropped or failed — the numbers tests/vllm/test_real_vllm_long_load.py reads.
Pure function on a stats dict shaped like _native.stats(); no extension needed.
"""

from mstrace import plugin


def _stats(**kw):
    s = {"spans_started": 10, "spans_exported": 10, "spans_dropped": 0, "spans_failed": 0,
         "spans_filtered": 0, "spans_queued": 10,
         "exporters": {"perfetto": {"spans_exported": 10, "spans_failed": 0, "spans_skipped": 0}}}
    s.update(kw)
    return s


def test_nothing_lost():
    line, lost = plugin.exit_accounting(_stats())
    assert lost == 0
    assert line == ("spans at exit: started=10 exported=10 dropped=0 failed=0 filtered=0 not_exported_yet=0 "
                    "perfetto: exported=10 failed=0 skipped=0")


def test_dropped_and_failed_are_lost():
    stats = _stats(spans_started=20, spans_exported=12, spans_dropped=5, spans_failed=3, spans_queued=15,
                   exporters={"perfetto": {"spans_exported": 14, "spans_failed": 1, "spans_skipped": 0}})
    line, lost = plugin.exit_accounting(stats)
    assert lost == 8
    assert "started=20 exported=12 dropped=5 failed=3" in line and "not_exported_yet=0" in line


def test_an_exporter_failing_part_of_a_batch_counts_its_own_failures():
    # The tracer counts a batch exported when any exporter delivered it; the
    # exporter's own count is the truth for its sink.
    stats = _stats(exporters={"perfetto": {"spans_exported": 6, "spans_failed": 4, "spans_skipped": 0}})
    line, lost = plugin.exit_accounting(stats)
    assert lost == 4 and "perfetto: exported=6 failed=4" in line
