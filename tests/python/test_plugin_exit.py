"""Spans queued just before a process ends must reach the real `mstrace
forward` daemon, in the ways vLLM's processes end (plugin._arm_exit_flush).

Owns: a multiprocessing child (fork and spawn) that returns and is ended by
os._exit() in Process._bootstrap; the same child ended by SIGTERM through a
handler that raises SystemExit (vLLM's WorkerProc) or through a flag the
busy loop turns into SystemExit (vLLM's EngineCore); a plain process with
the default SIGTERM action; and a process whose SIGTERM handler was
installed after the plugin (left alone). OTEL_BSP_SCHEDULE_DELAY is one
minute, so without the exit flush nothing would be exported before the end.
Also the process role: vLLM-named multiprocessing children (EngineCore,
VllmWorker-<rank>) get their own Perfetto process track name through the
`process.role` span attribute.
Every case runs in a child Python (process state, signals).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

TARGET = '''
def work(tag):
    return tag
'''

SYMBOLS = '''
- symbol: mst_exit_target:work
  trace: {name: exit.work, domain: Test}
'''

PRELUDE = textwrap.dedent('''
    import multiprocessing, os, signal, sys, time
    import mstrace.plugin as plugin
    import mst_exit_target
''')


@pytest.fixture
def exit_env(subprocess_env, tmp_path, daemon, native):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "mst_exit_target.py").write_text(TARGET)
    yml = tmp_path / "symbols.yaml"
    yml.write_text(SYMBOLS)
    return dict(subprocess_env, MS_TRACE_ENABLE="1", PROFILING_SYMBOLS_PATH=str(yml),
                MSTRACE_PERFETTO_SOCKET=daemon.socket_name, OTEL_BSP_SCHEDULE_DELAY="60000",
                PYTHONPATH=subprocess_env["PYTHONPATH"] + os.pathsep + str(mods))


def run(env, code, timeout=120):
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def work_spans(daemon, expect):
    return [e for e in daemon.events(expect) if e.get("ph") == "X" and e["name"] == "exit.work"]


# ------------------------------------------------------------ multiprocessing

MP_RETURN = '''
def child(reregister):
    if reregister:            # vLLM loads its general plugins again in the child
        plugin.register()
    mst_exit_target.work("child")

if __name__ == "__main__":
    plugin.register()
    ctx = multiprocessing.get_context(%(method)r)
    p = ctx.Process(target=child, args=(%(reregister)r,), name="EngineCore")
    p.start()
    p.join(60)
    assert p.exitcode == 0, p.exitcode
    print("child", p.pid)
'''


@pytest.mark.parametrize("method,reregister", [("fork", False), ("fork", True), ("spawn", True)])
def test_multiprocessing_child_spans_are_flushed_before_os_exit(exit_env, daemon, tmp_path, method,
                                                                 reregister):
    script = tmp_path / "mp_return.py"   # spawn needs an importable __main__
    script.write_text(PRELUDE + textwrap.dedent(MP_RETURN % {"method": method, "reregister": reregister}))
    p = subprocess.run([sys.executable, str(script)], env=exit_env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    child_pid = int(p.stdout.split()[-1])
    xs = work_spans(daemon, 1)
    assert [e["pid"] for e in xs] == [child_pid], p.stderr


# vLLM's two ways of turning SIGTERM into SystemExit in its children.
MP_SIGTERM = '''
def worker_like(ready):
    # WorkerProc.worker_main: the handler raises SystemExit; finally -> shutdown
    def handler(signum, frame):
        raise SystemExit()
    signal.signal(signal.SIGTERM, handler)
    try:
        mst_exit_target.work("worker")
        ready.set()
        while True:
            time.sleep(0.05)
    finally:
        pass

def engine_core_like(ready):
    # run_engine_core: the handler only sets a flag; the busy loop sees it
    # and raises SystemExit; finally -> engine_core.shutdown()
    stop = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
    try:
        mst_exit_target.work("engine_core")
        ready.set()
        while not stop:
            time.sleep(0.05)
        raise SystemExit
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

if __name__ == "__main__":
    plugin.register()
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=%(target)s, args=(ready,), daemon=True)
    p.start()
    assert ready.wait(60)
    p.terminate()                       # SIGTERM, as vLLM's shutdown sends it
    p.join(60)
    assert p.exitcode == 0, p.exitcode  # SystemExit() -> 0: the handler's path ran
    print("child", p.pid)
'''


@pytest.mark.parametrize("target", ["worker_like", "engine_core_like"])
def test_sigterm_through_systemexit_flushes(exit_env, daemon, tmp_path, target):
    script = tmp_path / "mp_sigterm.py"
    script.write_text(PRELUDE + textwrap.dedent(MP_SIGTERM % {"target": target}))
    p = subprocess.run([sys.executable, str(script)], env=exit_env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    child_pid = int(p.stdout.split()[-1])
    xs = work_spans(daemon, 1)
    assert [e["pid"] for e in xs] == [child_pid], p.stderr


# ------------------------------------------------------------ plain SIGTERM

PLAIN = '''
plugin.register()
assert plugin.state()["sigterm"] == "flush, then default", plugin.state()
mst_exit_target.work("plain")
print("ready", flush=True)
while True:
    time.sleep(0.05)
'''


def test_default_sigterm_flushes_then_dies_by_sigterm(exit_env, daemon):
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(PLAIN)], env=exit_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == -signal.SIGTERM  # still the default outcome
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    xs = work_spans(daemon, 1)
    assert [e["pid"] for e in xs] == [proc.pid]


def test_a_later_sigterm_handler_is_left_alone(exit_env, daemon):
    code = '''
    def mine(signum, frame):
        print("mine", flush=True)
        os._exit(7)
    plugin.register()
    signal.signal(signal.SIGTERM, mine)      # installed after the plugin: it wins
    plugin.register()                        # re-entrant: does not take SIGTERM back
    assert signal.getsignal(signal.SIGTERM) is mine
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
    '''
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], env=exit_env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 7 and p.stdout.strip() == "mine", p.stderr
    code2 = '''
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # someone's choice before the plugin
    plugin.register()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    assert plugin.state()["sigterm"].startswith("left alone"), plugin.state()
    '''
    run(exit_env, code2)
    daemon.events(0)


# ------------------------------------------------------------ process roles

ROLES = '''
def child():
    mst_exit_target.work(multiprocessing.current_process().name)

if __name__ == "__main__":
    plugin.register()
    mst_exit_target.work("main")
    ctx = multiprocessing.get_context("fork")
    pids = {"main": os.getpid()}
    for name in ("EngineCore", "EngineCore_DP1", "VllmWorker-0", "VllmWorker-1"):
        p = ctx.Process(target=child, name=name)
        p.start()
        p.join(60)
        assert p.exitcode == 0, (name, p.exitcode)
        pids[name] = p.pid
    print("PIDS" + __import__("json").dumps(pids))
'''


def test_each_vllm_process_gets_its_own_perfetto_process_name(exit_env, daemon, tmp_path):
    script = tmp_path / "roles.py"
    script.write_text(PRELUDE + textwrap.dedent(ROLES))
    env = dict(exit_env, OTEL_SERVICE_NAME="mst-roles")
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    import json
    pids = json.loads([l for l in p.stdout.splitlines() if l.startswith("PIDS")][0][4:])
    events = daemon.events(5)
    # (the forwarder names its own process for its counters: not a vLLM process)
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
             and e["args"]["name"] != "mstrace forward"}
    assert names == {pids["main"]: "main (mst-roles)", pids["EngineCore"]: "engine_core (mst-roles)",
                     pids["EngineCore_DP1"]: "engine_core_dp1 (mst-roles)",
                     pids["VllmWorker-0"]: "worker_0 (mst-roles)", pids["VllmWorker-1"]: "worker_1 (mst-roles)"}
    roles = {e["pid"]: e["args"]["process.role"] for e in events if e.get("ph") == "X"}
    assert roles[pids["VllmWorker-1"]] == "worker_1" and roles[pids["main"]] == "main"
    assert "process role main" in p.stderr


@pytest.mark.parametrize("name,argv,role", [
    ("EngineCore", None, "engine_core"),
    ("EngineCore_DP3", None, "engine_core_dp3"),
    ("VllmWorker-7", None, "worker_7"),
    ("ApiServer_2", None, "api_server_2"),
    ("MainProcess", ["/venv/bin/vllm", "serve", "model"], "api_server"),
    ("MainProcess", ["/x/vllm/entrypoints/openai/api_server.py", "--model", "m"], "api_server"),
    ("MainProcess", ["bench.py"], "main"),
    ("MainProcess", [], "main"),
    ("SpawnProcess-3", None, "SpawnProcess-3"),
    ("EngineCoreX", None, "EngineCoreX"),
])
def test_process_role_names(name, argv, role):
    from mstrace import plugin
    assert plugin.process_role(name, argv) == role


def test_native_process_role_on_every_span(native):
    spans = native._capture(True)
    try:
        h = native.Hook(lambda: 1, name="role.span")
        native.set_process_role("worker_3")
        h()
        native.init(process_role="engine_core")  # repeated init still sets the role
        h()
        native.set_process_role(None)
        h()
        with pytest.raises(TypeError):
            native.set_process_role(b"x")
        native.set_process_role("\u00e9" * 100)       # 200 bytes: cut on a character boundary
        h()
    finally:
        native._capture(False)
        native.set_process_role(None)
    roles = [s["attributes"].get("process.role") for s in spans]
    assert roles == ["worker_3", "engine_core", None, "\u00e9" * 63]
