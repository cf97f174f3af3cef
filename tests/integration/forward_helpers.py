"""What the forwarder's disk-full and flight-recorder tests share: a small
tmpfs of a size the test picks (the `small_disk` fixture: mounted under
tmp_path, root only, the test skipped with the reason otherwise; unmounted
after the test) and waiting for a line in the daemon's log.

Why one module: both tests mounted their tmpfs and polled the log with
copies of the same code.
"""

import os
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
