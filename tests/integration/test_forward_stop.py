"""The forwarder's start and stop against the real daemon and real sockets.

Owns: "nothing the kernel accepted is lost uncounted" at SIGTERM under load
(clients count the bytes each send() handed to the kernel and the file must
hold exactly the complete frames among them), connections that were still in
the listen queue at the stop, and readiness (the socket only listens once the
output is open, so a failed open never leaves a listening socket).
"""

import os
import shutil
import signal
import socket
import subprocess
import threading

import pytest

from conftest import frame, numbered_packet, unique_socket_name, x_events


class CountingClient:
    """Sends numbered frames until the daemon cuts the connection (or, with
    `reconnect`, one batch per connection until connect() is refused).
    Per connection it keeps the frames in the order sent and `accepted`, the
    bytes the kernel took (the sum of send() returns), so the complete
    frames the kernel accepted can be computed exactly."""

    def __init__(self, daemon, prefix, batch=3000, reconnect=False):
        self.daemon = daemon
        self.prefix = prefix
        self.batch = batch
        self.reconnect = reconnect
        self.streams = []            # per connection: [[(span_id, frame bytes)], accepted]
        self.next_n = 0
        self.thread = threading.Thread(target=self.run)

    def _one_connection(self):
        try:
            s = self.daemon.connect()
        except OSError:
            return False             # refused: the daemon stopped accepting
        stream = [[], 0]
        self.streams.append(stream)
        try:
            with s:
                while not self.stop.is_set():
                    for i in range(self.batch):
                        n = self.next_n + i
                        stream[0].append((f"{self.prefix:04x}{n:012x}",
                                          frame(numbered_packet(n, self.prefix))))
                    data = memoryview(b"".join(f for _, f in stream[0][-self.batch:]))
                    self.next_n += self.batch
                    while data:
                        k = s.send(data)
                        stream[1] += k
                        data = data[k:]
                    if self.reconnect:
                        return True
        except OSError:
            return False             # EPIPE / reset: the daemon cut us
        return True

    def run(self):
        while self._one_connection() and self.reconnect and not self.stop.is_set():
            pass

    def start(self, stop):
        self.stop = stop
        self.thread.start()

    def complete_frames(self):
        """(span ids of the complete frames the kernel accepted, number of
        connections whose accepted bytes end inside a frame)."""
        ids, cut = [], 0
        for frames, accepted in self.streams:
            off = 0
            for span_id, f in frames:
                if off + len(f) > accepted:
                    cut += off < accepted
                    break
                ids.append(span_id)
                off += len(f)
        return ids, cut


def _stop_under_load(daemon):
    # Big send() calls (~600 KB): the writers wait inside the kernel for
    # room, so they refill a connection the moment the daemon reads from it.
    stop = threading.Event()
    clients = [CountingClient(daemon, p, batch=1500) for p in range(1, 9)]
    # short connections too: some are still in the listen queue at the stop
    clients += [CountingClient(daemon, p, batch=5, reconnect=True) for p in range(9, 12)]
    for c in clients:
        c.start(stop)
    try:
        # Wait for traffic by the clients' own counters (not by re-reading a
        # growing file): every long-lived client has had 2 MB accepted.
        while not all(sum(a for _, a in c.streams) >= 2_000_000 for c in clients[:8]):
            if daemon.proc.poll() is not None:
                raise AssertionError(daemon.log()[-3000:])
            threading.Event().wait(0.01)
        assert daemon.stop(signal.SIGTERM) == 0, daemon.log()[-3000:]
    finally:
        stop.set()
        for c in clients:
            c.thread.join()
    sent_ids, cut = [], 0
    for c in clients:
        ids, k = c.complete_frames()
        sent_ids += ids
        cut += k
    spans = x_events(daemon.events())             # strict JSON
    got = [e["args"]["span_id"] for e in spans]
    assert len(got) == len(set(got))
    stats = daemon.stats()
    accepted_bytes = sum(a for c in clients for _, a in c.streams)
    assert stats["bytes_in"] == accepted_bytes, (stats, accepted_bytes)
    assert stats["received"] == len(sent_ids)
    assert stats["received"] == stats["written"] + stats["rejected"] + stats["dropped"]
    assert stats["rejected"] == 0 and stats["dropped"] == 0
    missing = set(sent_ids) - set(got)
    assert not missing, f"{len(missing)} spans the kernel accepted are missing: {stats}"
    assert set(got) == set(sent_ids)
    assert stats["truncated"] == cut
    return len(got)


def test_sigterm_under_load_loses_nothing_the_kernel_accepted(daemon_factory, tmp_path):
    # The loss this guards against is a race (bytes arriving while the stop
    # drains), so three rounds, each a fresh daemon.
    for r in range(3):
        d = daemon_factory(output=tmp_path / f"stop{r}.json").start()
        assert _stop_under_load(d) > 0


# --------------------------------------------------------------- readiness

def _strace_or_skip():
    path = shutil.which("strace")
    if not path:
        pytest.skip("strace is not installed (scripts/deps.sh installs it)")
    probe = subprocess.run([path, "-f", "-e", "trace=none", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.decode(errors='replace')[:200]}")
    return path


def _traced_start(mstrace_bin, tmp_path, output):
    strace = _strace_or_skip()
    trace = tmp_path / "strace.txt"
    name = unique_socket_name()
    p = subprocess.Popen([strace, "-f", "-o", str(trace), "-e", "trace=bind,listen,openat",
                          str(mstrace_bin), "forward", "--perfetto-output", str(output),
                          "--socket-name", name],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return p, trace, name


def test_failed_output_open_never_listens(mstrace_bin, tmp_path):
    (tmp_path / "a_file").write_text("x")
    p, trace, name = _traced_start(mstrace_bin, tmp_path, tmp_path / "a_file" / "t.json")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    calls = trace.read_text()
    assert f'bind(' in calls and name in calls            # the name was claimed
    assert "listen(" not in calls, calls                  # but nobody could ever connect


def test_socket_listens_only_after_the_output_is_open(mstrace_bin, tmp_path):
    out = tmp_path / "ready.json"
    p, trace, name = _traced_start(mstrace_bin, tmp_path, out)
    try:
        s = None
        for _ in range(3000):                             # bounded: the daemon starts
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect("\0" + name)
                break
            except OSError:
                s.close()
                s = None
                if p.poll() is not None:
                    break
                threading.Event().wait(0.01)
        assert s is not None, p.stderr.read().decode(errors="replace")
        # Connected: the output must already exist and be valid.
        assert out.read_text() == "[]"
        s.close()
    finally:
        # strace does not pass signals on: stop the traced daemon itself
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            for child in f.read().split():
                os.kill(int(child), signal.SIGTERM)
        p.communicate(timeout=60)
    lines = trace.read_text().splitlines()
    opened = next(i for i, l in enumerate(lines) if "openat(" in l and f'"{out.name}"' in l
                  or f'/{out.name}"' in l)
    listened = next(i for i, l in enumerate(lines) if "listen(" in l)
    bound = next(i for i, l in enumerate(lines) if "bind(" in l and name in l)
    assert bound < opened < listened, "\n".join(lines)
