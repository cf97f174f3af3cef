"""Soak test of `mstrace forward`, bounded in work: 1,000 clients x 200
spans from 4 worker processes (non-blocking sockets, poll), with stalled
clients (half a frame, then silence) and garbage clients (well-framed
payloads without the magic, oversize frame headers) mixed in, and SIGTERM
at a seeded random point of the traffic (a number of bytes accepted by the
kernel, not a time).

Asserted, from the clients' own counts of what the kernel accepted:
bytes_in equals it; received = written + rejected + dropped; the file is
strict JSON and holds exactly the complete good frames the kernel accepted;
rejected = the complete garbage frames; oversize, truncated and stalled
account for every oversize, stalled and mid-frame-cut connection.
"""

import json
import multiprocessing
import os
import random
import select
import signal
import socket
import struct

from conftest import MAGIC

CLIENTS = 1000
SPANS = 200
STALLED = 20
GARBAGE = 20
OVERSIZE = 10
WORKERS = 4
SEED = int(os.environ.get("MSTRACE_SOAK_SEED", "20261130"))
PLACEHOLDER = b"@@SPAN_ID_HERE@@"                 # 16 bytes, like a span id


def span_frame_template(prefix):
    payload = {"name": "soak", "category": "soak", "trace_id": f"{prefix + 1:032x}",
               "span_id": PLACEHOLDER.decode(), "start_time_ns": 1_000_000,
               "end_time_ns": 2_000_000, "attributes": {"process.pid": 7, "thread.id": prefix}}
    body = MAGIC + json.dumps(payload, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def span_id(prefix, n):
    return f"{prefix:06x}{n:010x}"


def client_bytes(kind, prefix):
    """What a client sends: (bytes, frame length or 0)."""
    if kind == "good":
        t = span_frame_template(prefix)
        head, tail = t.split(PLACEHOLDER)
        return b"".join(head + span_id(prefix, n).encode() + tail for n in range(SPANS)), len(t)
    if kind == "stalled":
        t = span_frame_template(prefix).replace(PLACEHOLDER, span_id(prefix, 0).encode())
        return t[:len(t) // 2], len(t)
    if kind == "garbage":
        body = b"not a span packet " + bytes([prefix % 256]) * 40
        return (struct.pack(">I", len(body)) + body) * 5, 4 + len(body)
    return b"\xff\xff\xff\xff", 0                   # oversize header


def worker(sock_name, clients, progress, results, release):
    """Drives `clients` [(kind, prefix)] on non-blocking sockets; reports
    [(kind, prefix, frame_len, accepted, refused)]."""
    state = []                                       # [kind, prefix, data, flen, sock, sent, refused]
    pending = list(clients)
    poller = select.poll()
    by_fd = {}
    live = 0
    while pending or live:
        for kind, prefix in pending[:25]:            # connect gradually
            data, flen = client_bytes(kind, prefix)
            st = [kind, prefix, data, flen, None, 0, False]
            state.append(st)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # A small send buffer keeps each client only a few KB ahead of
            # the daemon, so the SIGTERM lands in the middle of the streams.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
            try:
                s.connect("\0" + sock_name)
            except OSError:
                st[6] = True                         # refused: the daemon stopped accepting
                s.close()
                continue
            s.setblocking(False)
            st[4] = s
            by_fd[s.fileno()] = st
            poller.register(s, select.POLLOUT)
            live += 1
        del pending[:25]
        for fd, _ in poller.poll(50 if not pending else 0):
            st = by_fd[fd]
            s = st[4]
            try:
                st[5] += s.send(st[2][st[5]:st[5] + 262144])
                done = st[5] == len(st[2])
            except BlockingIOError:
                continue
            except OSError:
                done = True                          # EPIPE / reset: the daemon cut us
            if done:
                poller.unregister(fd)
                live -= 1
                if st[0] != "stalled":
                    s.close()
        progress.value = sum(st[5] for st in state if st[0] == "good")
    results.put([(st[0], st[1], st[3], st[5], st[6]) for st in state])
    release.wait()
    for st in state:
        if st[4] is not None and st[0] == "stalled":
            st[4].close()


def test_soak_thousand_clients_sigterm_at_random_point(daemon):
    rnd = random.Random(SEED)
    kinds = (["good"] * CLIENTS + ["stalled"] * STALLED + ["garbage"] * GARBAGE +
             ["oversize"] * OVERSIZE)
    rnd.shuffle(kinds)
    clients = [(k, i + 1) for i, k in enumerate(kinds)]
    good_total = sum(len(client_bytes("good", p)[0]) for k, p in clients if k == "good")
    stop_at = int(good_total * rnd.uniform(0.1, 0.9))

    ctx = multiprocessing.get_context("fork")
    results, release = ctx.Queue(), ctx.Event()
    progress = [ctx.Value("q", 0, lock=False) for _ in range(WORKERS)]
    procs = [ctx.Process(target=worker, args=(daemon.socket_name, clients[w::WORKERS],
                                              progress[w], results, release))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    try:
        while sum(v.value for v in progress) < stop_at:
            if daemon.proc.poll() is not None:
                raise AssertionError(daemon.log()[-3000:])
            if not any(p.is_alive() for p in procs):
                break
            select.select([], [], [], 0.005)
        sent_at_signal = sum(v.value for v in progress)
        assert daemon.stop(signal.SIGTERM, timeout=120) == 0, daemon.log()[-3000:]
        reports = [r for _ in procs for r in results.get(timeout=120)]
    finally:
        release.set()
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()

    stats = daemon.stats()
    want, cut, garbage_frames, stalled, oversize, refused = set(), 0, 0, 0, 0, 0
    accepted_total = 0
    for kind, prefix, flen, accepted, was_refused in reports:
        refused += was_refused
        accepted_total += accepted
        if kind == "good":
            full = accepted // flen
            want.update(span_id(prefix, n) for n in range(full))
            cut += accepted % flen != 0
        elif kind == "garbage":
            garbage_frames += accepted // flen
            cut += accepted % flen != 0
        elif kind == "stalled":
            stalled += accepted > 0
        elif kind == "oversize":
            oversize += accepted == 4
    text = daemon.output.read_text(encoding="utf-8")
    events = json.loads(text)                        # strict: the file is valid JSON
    got = [e["args"]["span_id"] for e in events if e.get("ph") == "X"]
    summary = (f"seed={SEED} SIGTERM after {sent_at_signal} of {good_total} good bytes; "
               f"spans in file {len(got)} of {CLIENTS * SPANS}; connects refused {refused}; "
               f"stats {stats}")
    print(summary)
    assert stats["bytes_in"] == accepted_total, summary
    assert len(got) == len(set(got)), summary
    assert set(got) == want, summary
    assert stats["written"] == len(want), summary
    assert stats["rejected"] == garbage_frames, summary
    assert stats["dropped"] == 0, summary
    assert stats["received"] == stats["written"] + stats["rejected"] + stats["dropped"], summary
    assert stats["oversize"] == oversize, summary
    assert stats["truncated"] + stats["stalled"] == stalled + cut, summary
    assert f"accounting: received={stats['received']}" in daemon.log()
