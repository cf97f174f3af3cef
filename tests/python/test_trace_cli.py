"""Tests of `python -m mstrace.trace`: it must exec the C binary
`mstrace forward` with exactly the arguments it was given, find the binary in
the package, else in $MSTRACE_BUILD_DIR, else on PATH, and say clearly what it
looked at when there is none. A stand-in binary (a shell script that prints
its argv) checks the pass-through without the C code; the real binary, when
built, checks --help end to end."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

FAKE = """#!/bin/sh
echo "pid=$$"
for a in "$@"; do echo "arg=[$a]"; done
exit 7
"""


def _package_only(tmp_path):
    """A copy of the Python package without bin/ (as a source checkout)."""
    dest = tmp_path / "pkg" / "mstrace"
    dest.mkdir(parents=True)
    src = os.path.join(REPO, "python", "mstrace")
    for name in os.listdir(src):
        if name.endswith((".py", ".yaml")):
            shutil.copy2(os.path.join(src, name), str(dest / name))
    return str(dest.parent)


def _fake_binary(directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "mstrace")
    with open(path, "w") as fh:
        fh.write(FAKE)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def run_trace(env, *args):
    return subprocess.run([sys.executable, "-m", "mstrace.trace"] + list(args), env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def base_env(subprocess_env, tmp_path):
    env = dict(subprocess_env, PYTHONPATH=_package_only(tmp_path), PATH="/usr/bin:/bin")
    env.pop("MSTRACE_BUILD_DIR", None)
    return env


def test_args_pass_through_exactly(base_env, tmp_path):
    _fake_binary(str(tmp_path / "build"))
    env = dict(base_env, MSTRACE_BUILD_DIR=str(tmp_path / "build"))
    args = ["--log-level", "debug", "--perfetto-output", str(tmp_path / "out dir" / "hook tracing.json"), "--help",
            "", "x;y"]
    proc = run_trace(env, *args)
    assert proc.returncode == 7  # the binary's own exit status
    lines = proc.stdout.splitlines()
    assert lines[1:] == ["arg=[%s]" % a for a in ["forward"] + args]


def test_exec_replaces_python_process(base_env, tmp_path):
    _fake_binary(str(tmp_path / "build"))
    env = dict(base_env, MSTRACE_BUILD_DIR=str(tmp_path / "build"))
    proc = subprocess.Popen([sys.executable, "-m", "mstrace.trace"], env=env, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    # exec, not a child: signals and exit codes are the binary's own
    assert out.splitlines()[0] == "pid=%d" % proc.pid


def test_build_dir_subpaths_and_path(base_env, tmp_path):
    _fake_binary(str(tmp_path / "b2" / "src" / "cli"))
    proc = run_trace(dict(base_env, MSTRACE_BUILD_DIR=str(tmp_path / "b2")), "--log-level", "info")
    assert proc.returncode == 7 and "arg=[forward]" in proc.stdout
    _fake_binary(str(tmp_path / "onpath"))
    proc = run_trace(dict(base_env, PATH=str(tmp_path / "onpath") + ":/usr/bin:/bin"))
    assert proc.returncode == 7 and "arg=[forward]" in proc.stdout


def test_packaged_binary_wins(base_env, tmp_path):
    pkg = base_env["PYTHONPATH"]
    _fake_binary(os.path.join(pkg, "mstrace", "bin"))
    other = tmp_path / "other"
    other.mkdir()
    (other / "mstrace").write_text("#!/bin/sh\necho WRONG\n")
    (other / "mstrace").chmod(0o755)
    proc = run_trace(dict(base_env, MSTRACE_BUILD_DIR=str(other)), "--help")
    assert proc.returncode == 7 and "WRONG" not in proc.stdout


def test_missing_binary_clear_error(base_env, tmp_path):
    env = dict(base_env, MSTRACE_BUILD_DIR=str(tmp_path / "nothing-here"))
    proc = run_trace(env, "--help")
    assert proc.returncode == 127
    assert "mstrace forwarder binary was not found" in proc.stderr
    assert "MSTRACE_BUILD_DIR" in proc.stderr and "nothing-here" in proc.stderr
    assert "pip install ." in proc.stderr
    assert "Traceback" not in proc.stderr


def test_real_binary_help_passes_through(build, subprocess_env):
    if build.binary is None:
        pytest.skip("the mstrace binary is not built: %s" % build.reason)
    env = dict(subprocess_env)
    env.pop("MSTRACE_BUILD_DIR", None)
    via_python = run_trace(env, "--help")
    direct = subprocess.run([build.binary, "forward", "--help"], capture_output=True, text=True, timeout=60)
    assert via_python.returncode == direct.returncode == 0, via_python.stderr
    assert via_python.stdout == direct.stdout and via_python.stderr == direct.stderr
    text = via_python.stdout + via_python.stderr
    assert "--log-level" in text and "--perfetto-output" in text


def test_real_binary_rejects_bad_log_level(build, subprocess_env):
    if build.binary is None:
        pytest.skip("the mstrace binary is not built: %s" % build.reason)
    env = dict(subprocess_env)
    proc = run_trace(env, "--log-level", "loud")
    direct = subprocess.run([build.binary, "forward", "--log-level", "loud"], capture_output=True, text=True,
                            timeout=60)
    assert proc.returncode == direct.returncode != 0
