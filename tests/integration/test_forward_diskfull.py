"""The forwarder on a full disk: a small tmpfs mounted by the test (root
only; skipped with the reason otherwise) holds the output.

Owns: the file stays valid JSON while writes fail (a failed partial write is
undone at once), the counters count spans and not attempts (space coming
back means nothing was dropped, whatever the number of failed writes), and
the final stats line is taken after the last drop, so
received = written + rejected + dropped holds and agrees with the log. The
same rules hold for the native .pftrace output: there "valid" means the file
is a whole number of TracePackets. Space freed in part takes that part of
the backlog (whole spans, to within a page), with no new traffic (the
writer retries on its own), and a stop writes as much as still fits.
"""

import json
import os
import re
import signal
import time

import pytest

from conftest import frame, numbered_packet, x_events
from forward_helpers import small_disk, wait_log  # noqa: F401  (small_disk: a fixture)


def _send_spans(daemon, n, prefix):
    with daemon.connect() as s:
        s.sendall(b"".join(frame(numbered_packet(i, prefix)) for i in range(n)))


def _strict_spans(path):
    return x_events(json.loads(path.read_text(encoding="utf-8")))


def _whole_packets(path):
    """Number of TracePackets in a .pftrace; fails unless the file is a
    whole number of them (each a field-1 length-delimited record that
    decodes with Perfetto's own protos)."""
    from pftrace_model import iter_packets  # Perfetto's protos: only for .pftrace
    return sum(1 for _ in iter_packets(path.read_bytes(), whole=True))


@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_stop_while_disk_full_counts_every_dropped_span(small_disk, daemon_factory, suffix):
    disk = small_disk("256k")
    d = daemon_factory(output=disk / f"trace{suffix}").start()
    _send_spans(d, 2000, 1)                 # ~1 MB of events for 256 KiB of disk
    wait_log(d, "write failed")
    # While writes fail the file is valid, each time we look.
    for _ in range(5):
        if suffix == ".json":
            assert len(_strict_spans(d.output)) < 2000
        else:
            _whole_packets(d.output)
        _send_spans(d, 10, 2)               # more hand-offs, more failing retries
    rc = d.stop(signal.SIGTERM)
    assert rc == 1, d.log()[-2000:]          # the output could not be completed
    log = d.log()
    stats = d.stats()
    if suffix == ".pftrace":
        _whole_packets(d.output)
        assert stats["spans_dropped"] > 0 and stats["dropped"] == stats["spans_dropped"]
        assert stats["received"] == stats["written"] + stats["rejected"] + stats["dropped"]
        assert f"accounting: received={stats['received']}" in log
        return
    spans = _strict_spans(d.output)
    dropped_logged = sum(int(n) for n in re.findall(r"dropping (\d+) buffered spans", log))
    assert stats["received"] == 2050
    assert stats["written"] == len(spans)
    assert stats["spans_dropped"] == dropped_logged > 0
    assert stats["dropped"] == stats["spans_dropped"]
    assert stats["received"] == stats["written"] + stats["rejected"] + stats["dropped"]
    assert stats["write_errors"] >= 1
    assert "accounting: received=2050" in log
    assert f"+ dropped={stats['dropped']} (write_failed={stats['spans_dropped']} out_of_memory=0)" \
        in log


def test_space_coming_back_means_nothing_dropped(small_disk, daemon_factory):
    disk = small_disk("2m")
    filler = disk / "filler"
    with open(filler, "wb") as f:          # leave ~64 KiB free
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        f.write(b"\0" * (free - 64 * 1024))
    d = daemon_factory(output=disk / "trace.json").start()
    _send_spans(d, 500, 1)
    wait_log(d, "write failed")
    assert len(_strict_spans(d.output)) < 500
    filler.unlink()                          # space is back: the stop's flush retries
    assert d.stop(signal.SIGTERM) == 0, d.log()[-2000:]
    stats = d.stats()
    spans = _strict_spans(d.output)
    assert len(spans) == 500 == stats["written"] == stats["received"]
    assert stats["write_errors"] >= 1
    assert stats["dropped"] == 0 and stats["spans_dropped"] == 0
    assert sorted(e["args"]["span_id"] for e in spans) == \
        sorted(f"{1:04x}{i:012x}" for i in range(500))


def _wait_size(path, at_least, daemon):
    """Waits (bounded by polls, no traffic sent) until `path` holds at least
    `at_least` bytes; returns its size."""
    size = 0
    for _ in range(6000):
        size = path.stat().st_size
        if size >= at_least:
            return size
        if daemon.proc.poll() is not None:
            raise AssertionError(daemon.log()[-3000:])
        time.sleep(0.01)
    raise AssertionError(f"{path} stayed at {size} bytes (< {at_least}): {daemon.log()[-3000:]}")


@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_partly_freed_space_takes_part_of_the_backlog(small_disk, daemon_factory, suffix):
    disk = small_disk("4m")
    filler = disk / "filler"
    with open(filler, "wb") as f:          # leave ~64 KiB free
        st = os.statvfs(disk)
        f.write(b"\0" * (st.f_bavail * st.f_frsize - 64 * 1024))
    d = daemon_factory(output=disk / f"trace{suffix}").start()
    _send_spans(d, 8000, 1)                  # a few MB of backlog
    wait_log(d, "write failed")
    before = d.output.stat().st_size
    page = 4096
    # 512 KiB back, nothing sent: the writer's own retry writes what fits.
    freed = 512 * 1024
    os.truncate(filler, filler.stat().st_size - freed)
    # Slack: the last piece (a page and an element), the page the file ends
    # in, and the daemon log, which is on the same tmpfs.
    slack = 8 * page
    mid = _wait_size(d.output, before + freed - slack, d)
    # Valid as it stands (a look can meet the writer's retry mid-write when
    # one more piece fits: then look again, a bounded number of times).
    for attempt in range(50):
        try:
            if suffix == ".json":
                assert 0 < len(_strict_spans(d.output)) < 8000
            else:
                _whole_packets(d.output)
            break
        except (ValueError, AssertionError):
            if attempt == 49:
                raise
            time.sleep(0.01)
    # 256 KiB more, then the stop at once: it writes what still fits.
    os.truncate(filler, filler.stat().st_size - 256 * 1024)
    assert d.stop(signal.SIGTERM) == 1, d.log()[-2000:]   # the rest could not be written
    assert d.output.stat().st_size >= mid + 256 * 1024 - slack
    stats = d.stats()
    log = d.log()
    assert stats["received"] == 8000
    assert stats["received"] == stats["written"] + stats["rejected"] + stats["dropped"]
    assert stats["dropped"] == stats["spans_dropped"] > 0
    assert f"accounting: received={stats['received']}" in log
    if suffix == ".pftrace":
        _whole_packets(d.output)
        return
    spans = _strict_spans(d.output)
    assert stats["written"] == len(spans)
    # Whole spans in the order sent, none twice: the prefix of what was sent.
    assert [e["args"]["span_id"] for e in spans] == [f"{1:04x}{i:012x}" for i in range(len(spans))]
