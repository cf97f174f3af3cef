"""otlp_driver.py — running $MSTRACE_BUILD_DIR/test_otlp_transport_driver (the
real OTLP exporter: config from env, encoder, libcurl transport) from the
integration tests.

Owns: finding the driver binary, the `driver` fixture, an environment without
the caller's OTEL_* variables, and one run that returns the exporter counters
the driver prints as its last stdout line (plus its stderr). Shared by
test_otlp_retry.py (HTTP) and test_otlp_grpc.py (gRPC) so both drive the
exporter the same way.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import build_path

N = 12  # spans per run unless a test asks for more


def driver_path() -> Path:
    return build_path("test_otlp_transport_driver")


@pytest.fixture(scope="module")
def driver():
    path = driver_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found; build it or set MSTRACE_BUILD_DIR")
    return path


def clean_env(extra=None):
    """os.environ without OTEL_* (the exporter reads them), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(extra or {})
    return env


def run_driver(driver, url, protocol="http/protobuf", spans=N, timeout_ms=10000,
               backoff_scale=0.01, gzip=False, batches=None, env=None):
    """One driver run that must exit 0; its JSON counters, with "stderr"."""
    argv = [str(driver), "--url", url, "--protocol", protocol, "--spans", str(spans),
            "--timeout-ms", str(timeout_ms), "--backoff-scale", str(backoff_scale)]
    if gzip:
        argv.append("--gzip")
    if batches:
        argv += ["--batches", str(batches)]
    p = subprocess.run(argv, env=clean_env(env), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["stderr"] = p.stderr
    return out
