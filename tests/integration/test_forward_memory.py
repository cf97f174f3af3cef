"""The forwarder's memory and descriptors under hostile or unlucky clients,
through the real daemon and real sockets.

Owns: the global cap on bytes held in unfinished frames
(--frame-buffer-limit: a connection whose frame would pass it is closed and
counted), the stall timeout (--frame-stall-timeout-ms: a connection silent
in the middle of a frame is closed and counted, an idle one between frames
is not), memory given back once such connections close (RSS), and running
out of descriptors (a shed connection's queued frames are still written and
the shedding is counted). No wall-clock assertion: a tiny configured timeout
and waiting for the event (stats asked for with SIGUSR1, log lines).
"""

import socket
import struct

from conftest import frame, numbered_packet, x_events
from forward_helpers import requested_stats

MIB = 1024 * 1024


def with_args(daemon, *extra, prefix=()):
    base = daemon.argv

    def argv():
        return [*prefix, *base(), *extra]

    daemon.argv = argv
    return daemon


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_unfinished_frames_are_capped_and_memory_returns(daemon_factory):
    cap = 48 * MIB
    d = with_args(daemon_factory(), "--frame-buffer-limit", str(cap)).start()
    n_clients = 24                                  # 24 x 4 MiB asked, 48 MiB allowed
    flen = 4 * MIB
    # One complete large frame first: once glibc has freed a large mmap'd
    # block it raises its mmap threshold, and heap buffers allocated after
    # that stayed resident when the connections closed (103 MB kept here
    # before the fix, 1 GB with 300 connections).
    with d.connect() as s:
        s.sendall(frame(b"z" * flen))
    requested_stats(d, lambda st: st["received"] == 1, "the large frame read")
    base = rss_kib(d.proc.pid)
    body = struct.pack(">I", flen) + b"x" * (flen - 1)  # all but the last byte
    socks, refused = [], 0
    for _ in range(n_clients):
        s = d.connect()
        socks.append(s)
        try:
            s.sendall(body)
        except OSError:                             # closed for memory mid-send
            refused += 1
    st = requested_stats(d, lambda st: st["mid_frame"] + st["memory_closed"] == n_clients,
                         "every connection held or closed")
    assert st["memory_closed"] >= n_clients - cap // flen
    assert st["partial_peak"] <= cap
    assert rss_kib(d.proc.pid) <= base + (cap + 16 * MIB) // 1024
    held = st["mid_frame"]
    assert held >= 1
    for s in socks:
        s.close()
    st = requested_stats(d, lambda st: st["active"] == 0, "all connections closed")
    assert st["partial_bytes"] == 0 and st["mid_frame"] == 0
    assert st["truncated"] == held
    # The buffers were unmapped: the memory is back (the old heap buffers
    # kept ~all of it resident after the connections closed).
    assert rss_kib(d.proc.pid) <= base + 8 * 1024, (base, rss_kib(d.proc.pid))
    # And the daemon still works, with the whole budget available again.
    d.send(numbered_packet(1))
    with d.connect() as s:                          # a full-size frame fits again
        s.sendall(frame(b"y" * (flen - 8)))
    assert d.stop() == 0
    st = d.stats()
    assert st["received"] == 3 and st["written"] == 1 and st["rejected"] == 2


def test_connection_stalled_mid_frame_is_closed(daemon_factory):
    d = with_args(daemon_factory(), "--frame-stall-timeout-ms", "50").start()
    idle = d.connect()                              # between frames: never timed out
    idle.sendall(frame(numbered_packet(1)))
    stalled = d.connect()
    pkt = frame(numbered_packet(2))
    stalled.sendall(pkt[:len(pkt) // 2])
    # The daemon closes it: recv() returns EOF (the wait is on the event),
    # after the capability line the daemon writes on accept.
    stalled.settimeout(120)
    got = b""
    while chunk := stalled.recv(64):
        got += chunk
    assert got == b"MSPF_HELLO_V1 ids-change\n"
    stalled.close()
    assert "stalled for" in d.log()
    idle.sendall(frame(numbered_packet(3)))         # the idle one still works
    idle.close()
    d.wait_for_spans(2)
    assert d.stop() == 0
    st = d.stats()
    assert st["stalled"] == 1 and st["truncated"] == 0
    assert st["written"] == 2
    assert sorted(e["args"]["span_id"] for e in x_events(d.events())) == \
        [f"{0xA:04x}{1:012x}", f"{0xA:04x}{3:012x}"]


def test_out_of_descriptors_sheds_without_losing_queued_spans(daemon_factory):
    # 64 descriptors for the daemon: about 50 connections fit, the rest are
    # shed. Each client sends its frames, then waits for the daemon to close
    # it or for the stop.
    d = with_args(daemon_factory(), prefix=("prlimit", "--nofile=64:64", "--")).start()
    socks, sent = [], {}
    for i in range(90):
        s = d.connect()
        socks.append(s)
        data = b"".join(frame(numbered_packet(k, 0x100 + i)) for k in range(3))
        try:
            s.sendall(data)
            sent[i] = 3
        except OSError:
            sent[i] = None                          # shed before it wrote: nothing accepted
    st = requested_stats(d, lambda st: st["shed"] + st["active"] == 90 and
                         st["received"] == sum(v for v in sent.values() if v),
                         "every connection served or shed")
    assert st["shed"] > 0 and st["accept_errors"] > 0
    assert "shed so far" in d.log()
    for s in socks:
        s.close()
    assert d.stop() == 0, d.log()[-2000:]
    want = {f"{0x100 + i:04x}{k:012x}" for i, v in sent.items() if v for k in range(3)}
    got = {e["args"]["span_id"] for e in x_events(d.events())}
    assert got == want
    st = d.stats()
    assert st["written"] == len(want) and st["dropped"] == 0
