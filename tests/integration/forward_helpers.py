"""What several forwarder tests share: a small tmpfs of a size the test
picks (the `small_disk` fixture: mounted under tmp_path, root only, the test
skipped with the reason otherwise; unmounted after the test), waiting for a
line in the daemon's log, and asking the daemon for its stats (SIGUSR1) until
they say something.

Why one module: the disk-full, flight-recorder, memory and values tests had
copies of the same code.
"""

import os
import signal
import subprocess
import time

import pytest


@pytest.fixture
def small_disk(tmp_path):
    """mount(size) -> a directory on a fresh tmpfs of `size` (mount's
    syntax: "256k", "2m"); each call mounts tmp_path/disk again."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = []

    def mount(size):
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs for the disk-full test needs root")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mnt)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (no CAP_SYS_ADMIN?): {r.stderr.strip()}")
        mounted.append(mnt)
        return mnt

    yield mount
    for m in reversed(mounted):
        subprocess.run(["umount", "-l", str(m)], capture_output=True)


def wait_log(daemon, needle, count=1):
    """Waits until `needle` appears `count` times in the daemon's log; fails
    with the log's tail when the daemon exits first (bounded by polls, 2 min
    at most, not asserted as a time)."""
    for _ in range(12000):
        if daemon.log().count(needle) >= count:
            return
        if daemon.proc.poll() is not None:
            raise AssertionError(daemon.log()[-3000:])
        time.sleep(0.01)
    raise AssertionError(f"{needle!r} never logged {count}x: {daemon.log()[-3000:]}")


def requested_stats(daemon, until, what="the condition"):
    """Asks for a stats line (SIGUSR1) until `until(stats)` holds and returns
    those stats (Daemon.stats("requested")); bounded by rounds of work, not
    by a clock; fails naming `what` and the last stats otherwise."""
    st = {}
    for _ in range(3000):
        n = daemon.log().count("stats (requested)")
        daemon.proc.send_signal(signal.SIGUSR1)
        while daemon.log().count("stats (requested)") <= n:
            if daemon.proc.poll() is not None:
                raise AssertionError(daemon.log()[-3000:])
            time.sleep(0.005)
        st = daemon.stats("requested")
        if until(st):
            return st
        time.sleep(0.01)
    raise AssertionError(f"never reached: {what}: {st}")
