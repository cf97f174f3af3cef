"""A real vLLM (CPU) run's processes told apart in the real Jaeger.

Owns the check that an offline LLM.generate() on the tiny random-weight Llama
of test_real_vllm_e2e.py (nothing downloaded), traced with MS_TRACE_ENABLE=1,
MS_PROFILER_AUTO_TRACE=1 and mstrace's OTLP exporter with
MSTRACE_SERVICE_PER_ROLE=1, reaches Jaeger with the main process's spans under
OTEL_SERVICE_NAME, EngineCore's under NAME.engine_core and the worker's under
NAME.worker, each process with its process.role, service.namespace NAME and a
service.instance.id of its own; and that `mstrace analyze --jaeger --service
NAME` reads the spans of all three. Skipped, with the reason, without a vLLM
interpreter, the extension or the `mstrace` binary.
"""

import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "integration"))  # after tests/python: its conftest is the one imported
import vllm_serve  # noqa: E402
from test_real_vllm_e2e import RUN  # noqa: E402


def test_roles_are_services_in_jaeger(tmp_path):
    python, binary = vllm_serve.traced_setup()
    from jaeger_fixture import running_jaeger
    base = "mst-vllm-roles-" + uuid.uuid4().hex[:8]
    with running_jaeger() as jaeger:
        # Jaeger only (no forwarder); a short batch delay: EngineCore and the worker are stopped soon
        # after generate() returns.
        env = vllm_serve.traced_env(None, MSTRACE_PERFETTO="off", MSTRACE_PERFETTO_SOCKET=None,
                                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=jaeger.traces_endpoint,
                                    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf", OTEL_SERVICE_NAME=base,
                                    OTEL_BSP_SCHEDULE_DELAY="100", MSTRACE_SERVICE_PER_ROLE="1")
        start_us = int(time.time() * 1e6) - 60 * 10**6
        vllm_serve.run_offline(python, tmp_path, RUN, env)
        services = {base: "vllm.output.process", base + ".engine_core": "vllm.scheduler.schedule",
                    base + ".worker": "vllm.worker.execute_model"}
        tags = {}
        for service, op in services.items():
            spans = jaeger.wait_for_spans(service, 1, timeout_s=60)
            own = [s for s in spans if s["process"].get("serviceName") == service]
            assert any(s["operationName"] == op for s in own), (service, sorted({s["operationName"] for s in own}))
            tags[service] = {t["key"]: t["value"] for t in own[0]["process"]["tags"]}
        print({s: (t.get("process.role"), t.get("service.instance.id")) for s, t in tags.items()})
        assert tags[base]["process.role"] == "main"
        assert tags[base + ".engine_core"]["process.role"] == "engine_core"
        assert tags[base + ".worker"]["process.role"] == "worker_0"
        assert tags[base + ".worker"]["vllm.worker.rank"] == 0
        assert all(t["service.namespace"] == base for t in tags.values())
        assert len({t["service.instance.id"] for t in tags.values()}) == 3
        assert len({t["process.pid"] for t in tags.values()}) == 3
        # A request's trace joins the main process and EngineCore (its phases).
        requests = [t for t in jaeger.traces(base) if any(s["operationName"] == "vllm.request.decode"
                                                          for s in t["spans"])]
        assert requests, "no request trace with its phases"
        assert {p["serviceName"] for p in requests[0]["processes"].values()} >= {base, base + ".engine_core"}
        # analyze reads the whole run by the name the user set: as many spans
        # as Jaeger holds in the traces of the three services (read before and
        # after it; the last exports may still be landing, so until they agree).
        end_us = int(time.time() * 1e6) + 60 * 10**6
        for _ in range(5):
            before = total_spans(jaeger, services)
            r = subprocess.run([binary, "analyze", "--jaeger", jaeger.query_url, "--service", base,
                                "--start", str(start_us / 1e6), "--end", str(end_us / 1e6), "--json", "-"],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-3000:]
            if total_spans(jaeger, services) == before:
                break
        assert json.loads(r.stdout)["inputs"][0]["spans"] == before


def total_spans(jaeger, services):
    """Distinct spans of every trace that holds a span of one of `services`."""
    return len({s["spanID"] for service in services for s in jaeger.spans(service)})
