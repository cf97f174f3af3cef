"""The forwarder's peer check (docs/forwarder.md "Socket and peer check"),
branch by branch, against the real daemon and real clients in other
credentials and namespaces (test_forward_daemon.py covers another uid).

  - same uid, another gid                  -> refused: uid/gid differ
  - a client in another pid namespace      -> refused: another pid namespace
  - a client in another user namespace     -> refused: another user namespace
    (root mapped to root, so uid and gid alone would pass)
  - the daemon in a child pid namespace    -> a client outside is refused: its
    pid is not visible there (SO_PEERCRED reports pid 0); one inside is
    accepted, or, when the daemon kept the host's /proc (so /proc/<pid>
    names another process), refused with that reason

Every case then has a client of the daemon's own kind deliver a span, so a
refusal is the branch's doing and not a broken daemon. The namespace cases
need root and util-linux's `unshare`; where the kernel refuses to make the
namespace they are skipped with the kernel's reason.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import Daemon, numbered_packet

# Connects to @NAME, sends one frame and waits for the daemon to close the
# connection: exit 0 when it was closed (refused), 3 when the daemon kept it.
CLIENT = r"""
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
try:
    s.connect("\0" + sys.argv[1])
    p = bytes.fromhex(sys.argv[2])
    s.sendall(struct.pack(">I", len(p)) + p)
    sys.exit(0 if s.recv(1) == b"" else 3)
except (ConnectionResetError, BrokenPipeError):
    sys.exit(0)
except socket.timeout:
    sys.exit(4)
"""

# Sends one frame and closes (a refusal may close the connection first: the
# test reads the outcome from the daemon, not from this client).
SEND = r"""
import socket, struct, sys
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.connect("\0" + sys.argv[1])
    p = bytes.fromhex(sys.argv[2])
    try:
        s.sendall(struct.pack(">I", len(p)) + p)
    except (BrokenPipeError, ConnectionResetError):
        pass
"""

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (other gids, namespaces)")


def unshare_or_skip(*flags):
    """The unshare command line with `flags`, or a skip saying why the
    kernel (or the machine) cannot make such a namespace here."""
    exe = shutil.which("unshare")
    if not exe:
        pytest.skip("util-linux `unshare` is not installed")
    probe = subprocess.run([exe, *flags, "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("the kernel refused `unshare %s`: %s" % (" ".join(flags), probe.stderr.strip()))
    return [exe, *flags]


def run_client(daemon, prefix=(), **popen):
    packet = numbered_packet(1, 7).hex()
    p = subprocess.run([*prefix, sys.executable, "-c", CLIENT, daemon.socket_name, packet],
                       capture_output=True, text=True, timeout=120, **popen)
    return p


def wait_for_log(daemon, text, timeout=60.0):
    """Polls the daemon's log for `text` (bounded: a hang becomes a failure)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in daemon.log():
            return True
        time.sleep(0.02)
    return False


def assert_refused_then_own_kind_accepted(daemon, client, reason):
    assert client.returncode == 0, (client.returncode, client.stderr)
    assert wait_for_log(daemon, reason), daemon.log()
    assert daemon.log().count("refused a connection from pid") == 1, daemon.log()
    daemon.send(numbered_packet(1, 5))
    spans = daemon.wait_for_spans(1)
    assert [e["args"]["span_id"] for e in spans] == [f"{5:04x}{1:012x}"]


@needs_root
def test_same_uid_other_gid_is_refused(daemon):
    client = run_client(daemon, group=65534, extra_groups=[])
    assert_refused_then_own_kind_accepted(daemon, client, "uid/gid differ")
    assert "gid 65534" in daemon.log()
    assert daemon.stop() == 0
    assert daemon.stats()["refused"] == 1


@needs_root
def test_client_in_another_pid_namespace_is_refused(daemon):
    prefix = unshare_or_skip("--pid", "--fork")
    client = run_client(daemon, prefix)
    assert_refused_then_own_kind_accepted(daemon, client, "the peer is in another pid namespace")
    assert daemon.stop() == 0
    assert daemon.stats()["refused"] == 1


@needs_root
def test_client_in_another_user_namespace_is_refused(daemon):
    # --map-root-user: root inside is root outside, so SO_PEERCRED shows the
    # daemon's own uid and gid and only the namespace check can refuse it.
    prefix = unshare_or_skip("--user", "--map-root-user")
    client = run_client(daemon, prefix)
    assert_refused_then_own_kind_accepted(daemon, client, "the peer is in another user namespace")
    assert "uid 0 gid 0" in daemon.log()
    assert daemon.stop() == 0
    assert daemon.stats()["refused"] == 1


class DaemonInChildPidNamespace(Daemon):
    """The daemon under `unshare --pid --fork [--mount-proc]`: a client
    outside has no pid in its namespace."""

    prefix = ()

    def argv(self):
        return [*self.prefix, *super().argv()]


@needs_root
@pytest.mark.parametrize("own_proc", [True, False], ids=["own-proc", "host-proc"])
def test_daemon_in_a_child_pid_namespace(mstrace_bin, tmp_path, own_proc):
    """A client outside the daemon's pid namespace is refused (its pid is 0
    there). One inside it is accepted when the daemon has its own /proc;
    with the host's /proc the daemon cannot check it (/proc/<pid> would be
    another process), says so at start, and refuses it with that reason."""
    flags = ["--pid", "--fork", "--kill-child=SIGTERM"] + (["--mount-proc"] if own_proc else [])
    d = DaemonInChildPidNamespace(mstrace_bin, tmp_path / "hook_trace.json")
    d.prefix = unshare_or_skip(*flags)
    d.start()
    # The daemon itself, a child of unshare (which does not pass SIGTERM on).
    with open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)) as fh:
        inner = int(fh.read().split()[0])
    try:
        assert ("/proc belongs to another pid namespace" in d.log()) == (not own_proc), d.log()
        client = run_client(d)
        assert client.returncode == 0, (client.returncode, client.stderr)
        assert wait_for_log(d, "the peer's pid is not visible in our pid namespace"), d.log()
        assert "refused a connection from pid 0" in d.log()
        nsenter = shutil.which("nsenter")
        if not nsenter:
            pytest.skip("util-linux `nsenter` is not installed (the same-namespace half)")
        packet = numbered_packet(1, 5).hex()
        own = subprocess.run([nsenter, "--target", str(inner), "--pid", "--", sys.executable, "-c", SEND,
                              d.socket_name, packet], capture_output=True, text=True, timeout=120)
        assert own.returncode == 0, own.stderr
        if own_proc:
            spans = d.wait_for_spans(1)
            assert [e["args"]["span_id"] for e in spans] == [f"{5:04x}{1:012x}"]
            assert d.log().count("refused a connection from pid") == 1, d.log()
        else:
            assert wait_for_log(d, "namespaces cannot be checked"), d.log()
            assert d.log().count("refused a connection from pid") == 2, d.log()
    finally:
        os.kill(inner, signal.SIGTERM)
        assert d.stop(sig=signal.SIGCONT) == 0  # unshare exits with the daemon's status
