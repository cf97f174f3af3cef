"""Shared setup for the Python unit tests (tests/python).

Owns one thing: giving the tests an importable `mstrace` package that is the
code of this work tree plus, when it can be built, the C extension
`mstrace._native` and the C `mstrace` binary.

  * At configure time the package's Python files are copied into a staging
    directory ($MSTRACE_PY_BUILD/staging/mstrace), which goes first on
    sys.path. This is cheap, needs no compiler, and is all that the
    symbols/patcher tests need (they use a pure-Python stand-in hook too).
  * The extension is built once per session, on first use of the `native`
    fixture: cmake -S <repo> -B $MSTRACE_PY_BUILD -DMST_BUILD_PYTHON=ON
    -DMST_BUILD_TESTS=OFF -G Ninja, then ninja. The built _native module and
    the `mstrace` binary are copied into the staging package (as a wheel
    would lay them out: mstrace/_native*.so, mstrace/bin/mstrace).
    If the extension target does not exist yet, or the build fails, tests
    that need it are skipped with the reason; others still run.
$MSTRACE_PY_BUILD defaults to <repo>/build-py.
"""

import functools
import glob
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import uuid

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PKG_SRC = os.path.join(REPO, "python", "mstrace")
BUILD_DIR = os.path.abspath(os.environ.get("MSTRACE_PY_BUILD") or os.path.join(REPO, "build-py"))
STAGING = os.path.join(BUILD_DIR, "staging")
STAGED_PKG = os.path.join(STAGING, "mstrace")


def _stage_python_files():
    os.makedirs(STAGED_PKG, exist_ok=True)
    for name in os.listdir(PKG_SRC):
        src = os.path.join(PKG_SRC, name)
        if os.path.isfile(src) and name.endswith((".py", ".yaml", ".yml")):
            shutil.copy2(src, os.path.join(STAGED_PKG, name))
    shutil.rmtree(os.path.join(STAGED_PKG, "__pycache__"), ignore_errors=True)


def pytest_configure(config):
    _stage_python_files()
    if STAGING not in sys.path:
        sys.path.insert(0, STAGING)
    importlib.invalidate_caches()


class BuildResult(object):
    def __init__(self, native=None, binary=None, reason=""):
        self.native = native  # path of the staged extension module, or None
        self.binary = binary  # path of the staged mstrace binary, or None
        self.reason = reason  # why something is missing


def _run(cmd, log):
    with open(log, "ab") as fh:
        fh.write(("\n$ %s\n" % " ".join(cmd)).encode())
        fh.flush()
        return subprocess.run(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT).returncode


def _tail(path, n=15):
    try:
        with open(path, "r", errors="replace") as fh:
            return "".join(fh.readlines()[-n:])
    except OSError:
        return ""


@functools.lru_cache(maxsize=None)
def build_native():
    """Build once per session; a BuildResult (never raises)."""
    if not os.path.isfile(os.path.join(REPO, "python", "CMakeLists.txt")):
        return BuildResult(reason="the extension target does not exist yet (no python/CMakeLists.txt)")
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        return BuildResult(reason="cmake and ninja are needed to build mstrace._native")
    os.makedirs(BUILD_DIR, exist_ok=True)
    log = os.path.join(BUILD_DIR, "pytest-build.log")
    open(log, "w").close()
    configure = [
        "cmake", "-S", REPO, "-B", BUILD_DIR, "-G", "Ninja", "-DMST_BUILD_PYTHON=ON", "-DMST_BUILD_TESTS=OFF",
        "-DMST_BUILD_BENCH=OFF", "-DPython_EXECUTABLE=%s" % sys.executable,
        "-DPython3_EXECUTABLE=%s" % sys.executable,
    ]
    if _run(configure, log) != 0:
        return BuildResult(reason="cmake configure failed (see %s):\n%s" % (log, _tail(log)))
    # -k 0: a broken file elsewhere must not hide an extension that builds.
    rc = _run(["ninja", "-C", BUILD_DIR, "-k", "0"], log)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    found = [p for p in glob.glob(os.path.join(BUILD_DIR, "**", "_native*" + suffix), recursive=True)
             if STAGING not in p]
    result = BuildResult()
    if found:
        found.sort(key=os.path.getmtime, reverse=True)
        dest = os.path.join(STAGED_PKG, os.path.basename(found[0]))
        for old in glob.glob(os.path.join(STAGED_PKG, "_native*")):
            os.unlink(old)
        shutil.copy2(found[0], dest)
        result.native = dest
    else:
        result.reason = "mstrace._native was not built (ninja exit %d, see %s):\n%s" % (rc, log, _tail(log))
    binary = os.path.join(BUILD_DIR, "mstrace")
    if os.path.isfile(binary) and os.access(binary, os.X_OK):
        os.makedirs(os.path.join(STAGED_PKG, "bin"), exist_ok=True)
        staged_bin = os.path.join(STAGED_PKG, "bin", "mstrace")
        shutil.copy2(binary, staged_bin)
        result.binary = staged_bin
    elif not result.reason:
        result.reason = "the mstrace binary was not built (ninja exit %d, see %s)" % (rc, log)
    importlib.invalidate_caches()
    return result


@pytest.fixture(scope="session")
def build():
    return build_native()


@pytest.fixture(scope="session")
def native(build):
    """The C extension module, initialised with no exporter; skips if unavailable."""
    if build.native is None:
        pytest.skip("mstrace._native unavailable: %s" % build.reason)
    try:
        from mstrace import _native
    except ImportError as exc:
        pytest.skip("mstrace._native built but cannot be imported: %s" % exc)
    try:
        _native.init(otlp=False, perfetto=False, null_exporter=True)
    except Exception as exc:  # the test that needs init will say more
        print("note: _native.init(null_exporter=True) raised %r" % (exc,))
    return _native


@pytest.fixture(scope="session")
def staging():
    """The directory to put on PYTHONPATH for subprocesses."""
    return STAGING


@pytest.fixture
def subprocess_env(staging):
    """Environment for a child Python: staged package first, tracing env cleared."""
    env = dict(os.environ)
    env["PYTHONPATH"] = staging + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for key in list(env):
        if key.startswith(("MS_TRACE", "MS_PROFILER", "OTEL_", "PROFILING_SYMBOLS")):
            del env[key]
    # Never send test spans to a forwarder someone runs on the default socket.
    env["MSTRACE_PERFETTO_SOCKET"] = "mst_pytest_%d_%s" % (os.getpid(), os.urandom(4).hex())
    return env


@pytest.fixture
def daemon(build, tmp_path):
    """A real `mstrace forward` on a unique abstract socket, output under tmp_path.

    daemon.events(expect) polls the output until `expect` X events are there
    (at most 30 s), stops the daemon with SIGTERM and returns every event."""
    if build.binary is None:
        pytest.skip("mstrace binary unavailable: %s" % build.reason)
    name = "mstrace-native-%d-%s" % (os.getpid(), uuid.uuid4().hex[:10])
    out = tmp_path / "hook_tracing.json"
    log = open(tmp_path / "daemon.log", "wb")
    proc = subprocess.Popen([build.binary, "forward", "--log-level", "debug", "--perfetto-output", str(out),
                             "--socket-name", name], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while "listening on" not in (tmp_path / "daemon.log").read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "daemon.log").read_text()
        time.sleep(0.02)

    class D:
        socket_name = name

        @staticmethod
        def events(expect):
            # Wait until the daemon logged receipt of `expect` spans is not
            # portable; poll the file instead, then stop with SIGTERM.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    xs = [e for e in json.loads(out.read_text()) if e.get("ph") == "X"]
                except ValueError:
                    xs = []
                if len(xs) >= expect:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
            return json.loads(out.read_text())

    yield D
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture
def report(request):
    """report(line): a line printed in pytest's terminal summary (measurements)."""
    lines = request.config.__dict__.setdefault("_mstrace_reports", [])
    return lines.append


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = config.__dict__.get("_mstrace_reports")
    if lines:
        terminalreporter.section("mstrace measurements")
        for line in lines:
            terminalreporter.write_line(line)
