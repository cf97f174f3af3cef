"""--perfetto-output path rules that need the real daemon: no symbolic link
is followed in any directory of the path (the attack: another user plants
/tmp/traces -> a directory of the daemon's user), a hard-linked output is
refused, and an existing file's mode is narrowed to 0640.
"""

import os
import stat



def run_forward_expect_failure(daemon_factory, output):
    d = daemon_factory(output=output, stderr_path=output.parent.parent / "daemon.log")
    d.start(wait=False)
    try:
        rc = d.proc.wait(timeout=60)
    finally:
        d._err.close()
    return rc, d.log()


def test_symlinked_parent_directory_is_refused(daemon_factory, tmp_path):
    victim = tmp_path / "root-only"
    victim.mkdir(mode=0o700)
    (victim / "run.json").write_text("precious")
    (tmp_path / "traces").symlink_to(victim)
    rc, log = run_forward_expect_failure(daemon_factory, tmp_path / "traces" / "run.json")
    assert rc == 1, log
    assert "symbolic link" in log and "traces" in log, log
    assert (victim / "run.json").read_text() == "precious"
    rc, log = run_forward_expect_failure(daemon_factory,
                                         tmp_path / "traces" / "deeper" / "run.json")
    assert rc == 1, log
    assert not (victim / "deeper").exists()


def test_hard_linked_output_is_refused(daemon_factory, tmp_path):
    out = tmp_path / "out.json"
    out.write_text("precious")
    os.link(out, tmp_path / "elsewhere.json")
    rc, log = run_forward_expect_failure(daemon_factory, out)
    assert rc == 1, log
    assert "hard link" in log, log
    assert (tmp_path / "elsewhere.json").read_text() == "precious"


def test_existing_world_writable_output_gets_mode_0640(daemon_factory, tmp_path):
    out = tmp_path / "wide.json"
    out.write_text("old")
    os.chmod(out, 0o666)
    d = daemon_factory(output=out).start()
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    assert d.stop() == 0
    assert out.read_text() == "[]"
