"""Services per process role, against the real Jaeger (tests/harness/jaeger.sh).

A vLLM run is an API server, an EngineCore and its workers, one process
each. The test builds that shape with the real extension: a parent traced
as `api_server` (its exporter thread running before it forks), a fork()ed
multiprocessing child named as vLLM names its engine ("EngineCore_DP0") and
a grandchild named as a worker ("VllmWorker-1"); each child takes its role
the way the plugin's after-fork hook does (plugin.process_role(), then
_native.set_process_role). Checked in Jaeger's query API: by default every
process's spans under the user's OTEL_SERVICE_NAME, told apart by the
resource (service.namespace NAME, each process's own service.instance.id,
process.role and rank); with MSTRACE_SERVICE_PER_ROLE=1 the API server's
spans under NAME, the engine's under NAME.engine_core, the worker's under
NAME.worker, with the same attributes; and `mstrace analyze --jaeger
--service NAME` reads every process's spans.
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from jaeger_fixture import jaeger  # noqa: E402,F401  (the fixture)
from test_native_adapters import run_child  # noqa: E402

PER_PROCESS = 3  # spans each process exports

CHILD = """
import multiprocessing as mp
from mstrace import plugin

def work():
    pass

def emit(name):
    hook = n.Hook(work, name=name)
    for _ in range(%d):
        hook()
    assert n.flush(20000)

def take_role():  # what the plugin's multiprocessing after-fork hook does
    n.set_process_role(plugin.process_role())

def worker():
    take_role()
    emit("roles.worker")

def engine():
    take_role()
    emit("roles.engine")
    w = mp.get_context("fork").Process(name="VllmWorker-1", target=worker)
    w.start()
    w.join()
    assert w.exitcode == 0, w.exitcode

info = n.init(process_role="api_server")
emit("roles.api")  # the parent's exporter thread runs before the fork
e = mp.get_context("fork").Process(name="EngineCore_DP0", target=engine)
e.start()
e.join()
assert e.exitcode == 0, e.exitcode
print(json.dumps(info))
""" % PER_PROCESS


def run_roles(subprocess_env, jaeger, service, extra=None):  # noqa: F811
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": jaeger.traces_endpoint,
           "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
           "OTEL_SERVICE_NAME": service, "MSTRACE_PERFETTO": "off"}
    env.update(extra or {})
    p = run_child(subprocess_env, CHILD, env)
    return json.loads(p.stdout.strip().splitlines()[-1])


def process_tags(span):
    return {t["key"]: t["value"] for t in span["process"].get("tags", [])}


def spans_named(jaeger, service, name):  # noqa: F811
    spans = jaeger.wait_for_spans(service, PER_PROCESS)
    return [s for s in spans if s["operationName"] == name and s["process"]["serviceName"] == service]


def test_each_role_has_its_service(native, subprocess_env, jaeger):  # noqa: F811
    base = "mst-roles-%s" % uuid.uuid4().hex[:8]
    info = run_roles(subprocess_env, jaeger, base, {"MSTRACE_SERVICE_PER_ROLE": "1"})
    assert info["service_name"] == base  # the API server keeps the user's name
    api = spans_named(jaeger, base, "roles.api")
    engine = spans_named(jaeger, base + ".engine_core", "roles.engine")
    worker = spans_named(jaeger, base + ".worker", "roles.worker")
    assert (len(api), len(engine), len(worker)) == (PER_PROCESS,) * 3
    services = set(jaeger.services())
    assert {base, base + ".engine_core", base + ".worker"} <= services
    assert not any(s.startswith(base) and s not in (base, base + ".engine_core", base + ".worker")
                   for s in services), services
    tags = [process_tags(s[0]) for s in (api, engine, worker)]
    assert [t["process.role"] for t in tags] == ["api_server", "engine_core_dp0", "worker_1"]
    assert all(t["service.namespace"] == base for t in tags)
    assert tags[1]["vllm.dp_rank"] == 0 and "vllm.worker.rank" not in tags[1]
    assert tags[2]["vllm.worker.rank"] == 1 and "vllm.dp_rank" not in tags[2]
    pids = [t["process.pid"] for t in tags]
    assert len(set(pids)) == 3
    for t, pid in zip(tags, pids):
        assert t["service.instance.id"].startswith(t["process.role"] + "@")
        assert t["service.instance.id"].endswith(":%d" % pid)


def test_by_default_one_service_and_the_roles_in_the_resource(native, subprocess_env, jaeger):  # noqa: F811
    base = "mst-roles-one-%s" % uuid.uuid4().hex[:8]
    run_roles(subprocess_env, jaeger, base)
    spans = jaeger.wait_for_spans(base, 3 * PER_PROCESS)
    assert len(spans) == 3 * PER_PROCESS
    roles = {s["operationName"]: process_tags(s)["process.role"] for s in spans}
    assert roles == {"roles.api": "api_server", "roles.engine": "engine_core_dp0", "roles.worker": "worker_1"}
    assert len({process_tags(s)["service.instance.id"] for s in spans}) == 3
    assert all(process_tags(s)["service.namespace"] == base for s in spans)
    ranks = {s["operationName"]: (process_tags(s).get("vllm.dp_rank"), process_tags(s).get("vllm.worker.rank"))
             for s in spans}
    assert ranks == {"roles.api": (None, None), "roles.engine": (0, None), "roles.worker": (None, 1)}
    assert not any(s.startswith(base + ".") for s in jaeger.services())


def test_analyze_reads_every_role_by_the_users_name(native, build, subprocess_env, jaeger):  # noqa: F811
    if not build.binary:
        pytest.skip("the mstrace binary was not built: %s" % build.reason)
    base = "mst-roles-analyze-%s" % uuid.uuid4().hex[:8]
    start_us = int(time.time() * 1e6) - 60 * 10**6
    run_roles(subprocess_env, jaeger, base, {"MSTRACE_SERVICE_PER_ROLE": "1"})
    for service in (base, base + ".engine_core", base + ".worker"):
        assert len(jaeger.wait_for_spans(service, PER_PROCESS)) == PER_PROCESS
    end_us = int(time.time() * 1e6) + 60 * 10**6
    r = subprocess.run([build.binary, "analyze", "--jaeger", jaeger.query_url, "--service", base,
                        "--start", str(start_us / 1e6), "--end", str(end_us / 1e6), "--json", "-"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inputs"][0]["spans"] == 3 * PER_PROCESS
    # A role's own service reads just that role.
    r = subprocess.run([build.binary, "analyze", "--jaeger", jaeger.query_url, "--service", base + ".worker",
                        "--start", str(start_us / 1e6), "--end", str(end_us / 1e6), "--json", "-"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inputs"][0]["spans"] == PER_PROCESS
