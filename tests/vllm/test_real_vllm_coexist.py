"""mstrace beside the real msServiceProfiler plugin in a real vLLM (CPU).

Owns the check of the coexistence rule (python/mstrace/coexist.py,
docs/user-guide.md "Beside msServiceProfiler") with PyPI's
`msserviceprofiler` 1.2.3 wheel: installed once with pip --target into
~/.cache/mstrace/msserviceprofiler-1.2.3 (never into the shared vLLM venv;
reused by later runs, made again when absent) and put on PYTHONPATH, so
vLLM's plugin loader finds both general plugins. With
MS_TRACE_ENABLE=1, SERVICE_PROF_CONFIG_PATH set and one symbols YAML (the
packaged default plus a counting profiling handler on
OutputProcessor.process_outputs), an offline LLM.generate() must:

  * find both plugins; load mstrace's, and msServiceProfiler's when its
    profiler library (`ms_service_profiler`, from CANN) is there. The 1.2.3
    wheel imports that library when vLLM loads it, so on a host without CANN
    (this CPU one) vLLM's loader reports exactly that one failure (`Failed to
    load plugin msserviceprofiler`, `No module named 'ms_service_profiler'`)
    and inference goes on, traced;
  * hook each traced symbol once (exactly one mstrace hook on the wrapper
    chain of process_outputs);
  * say which rule applies: without the profiler library msServiceProfiler
    cannot profile, so mstrace runs the handler: once per call, as many
    handler calls as `vllm.output.process` spans in the Perfetto file.

Skipped, with the reason, without a vLLM interpreter, the extension or the
`mstrace` binary, or when pip cannot fetch the wheel.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllm_serve  # noqa: E402
from test_real_vllm_e2e import RUN as E2E_RUN  # noqa: E402

WHEEL = "msserviceprofiler==1.2.3"
OUTPUT_SYMBOL = "vllm.v1.engine.output_processor:OutputProcessor.process_outputs"

HANDLER = '''
import os

def count(original, *args, **kwargs):
    """A profiling handler: one line per call, then the original once."""
    with open(os.environ["MST_COEXIST_COUNT"], "a") as f:
        f.write("%d\\n" % os.getpid())
    return original(*args, **kwargs)
'''

# After the e2e run: what vLLM's loader loads, and the wrapper chain.
PROBE = r'''
from importlib.metadata import entry_points
from vllm.plugins import load_plugins_by_group
from vllm.v1.engine.output_processor import OutputProcessor
from mstrace import _native, patcher
hook_types = patcher.native_hook_types(_native)
f, chain = OutputProcessor.__dict__["process_outputs"], []
while f is not None:
    chain.append(isinstance(f, hook_types))
    f = getattr(f, "__wrapped__", None)
import importlib.util
print("PROBE", json.dumps({
    "profiler_library": importlib.util.find_spec("ms_service_profiler") is not None,
    "declared": sorted(ep.name for ep in entry_points(group="vllm.general_plugins")),
    "loaded": sorted(load_plugins_by_group("vllm.general_plugins")),
    "mstrace_hooks_on_chain": sum(chain)}), flush=True)
'''


def _yaml_with_counting_handler(dst):
    src = vllm_serve.DEFAULT_SYMBOLS
    out, hit = [], False
    for line in open(src, encoding="utf-8"):
        out.append(line)
        if line.strip() == "- symbol: " + OUTPUT_SYMBOL:
            out.append("  handler: coexist_handler:count\n")
            hit = True
    assert hit, "no %s entry in %s" % (OUTPUT_SYMBOL, src)
    dst.write_text("".join(out))


CACHE_DIR = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                         "mstrace", "msserviceprofiler-" + WHEEL.split("==")[1])
COMPLETE = ".mstrace-complete"  # written last: a directory without it is an interrupted install


def _cached_wheel_target(python):
    """The wheel's --target directory, installed on first use. The install
    goes into a fresh sibling directory renamed into place, so two runs at
    once never see half an install (the loser of the rename uses the
    winner's)."""
    if os.path.exists(os.path.join(CACHE_DIR, COMPLETE)):
        return CACHE_DIR
    os.makedirs(os.path.dirname(CACHE_DIR), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=os.path.basename(CACHE_DIR) + ".", dir=os.path.dirname(CACHE_DIR))
    try:
        p = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            "--target", staging, WHEEL], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            pytest.skip("pip cannot install %s: %s" % (WHEEL, (p.stderr or p.stdout)[-500:]))
        open(os.path.join(staging, COMPLETE), "w").close()
        if os.path.isdir(CACHE_DIR) and not os.path.exists(os.path.join(CACHE_DIR, COMPLETE)):
            shutil.rmtree(CACHE_DIR, ignore_errors=True)  # an interrupted install of an earlier run
        try:
            os.rename(staging, CACHE_DIR)
        except OSError:  # another run installed it first
            if not os.path.exists(os.path.join(CACHE_DIR, COMPLETE)):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CACHE_DIR


@pytest.fixture(scope="module")
def msp_target():
    python, binary = vllm_serve.traced_setup()
    return python, binary, _cached_wheel_target(python)


def test_both_plugins_each_symbol_hooked_once_handler_once(msp_target, tmp_path):
    python, binary, target = msp_target
    (tmp_path / "coexist_handler.py").write_text(HANDLER)
    symbols_yaml = tmp_path / "symbols.yaml"
    _yaml_with_counting_handler(symbols_yaml)
    counts = tmp_path / "handler_calls.txt"
    prof_cfg = tmp_path / "prof_config"
    prof_cfg.mkdir()
    out_json = tmp_path / "hook_tracing.json"
    with vllm_serve.Forwarder(binary, ["--perfetto-output", out_json], tmp_path / "forward.log",
                              prefix="mst_coexist") as fwd:
        script = E2E_RUN.replace('if __name__ == "__main__":\n    main()',
                                 'if __name__ == "__main__":\n    main()\n' +
                                 "\n".join("    " + line for line in PROBE.strip().splitlines()))
        env = vllm_serve.traced_env(fwd.sock, [target, tmp_path], MS_PROFILER_AUTO_TRACE=None,
                                    SERVICE_PROF_CONFIG_PATH=str(prof_cfg), PROFILING_SYMBOLS_PATH=str(symbols_yaml),
                                    MST_COEXIST_COUNT=str(counts))
        proc = vllm_serve.run_offline(python, tmp_path, script, env)
        log = proc.stdout[-3000:] + proc.stderr[-8000:]
    probe = json.loads(proc.stdout.split("PROBE ", 1)[1].splitlines()[0])
    assert {"mstrace", "msserviceprofiler"} <= set(probe["declared"]), probe
    vllm_log = proc.stdout + proc.stderr  # vLLM's logger writes to stdout
    failed = [line for line in vllm_log.splitlines() if "Failed to load plugin" in line]
    if probe["profiler_library"]:
        assert {"mstrace", "msserviceprofiler"} <= set(probe["loaded"]) and not failed, probe
    else:
        assert "mstrace" in probe["loaded"] and "msserviceprofiler" not in probe["loaded"], probe
        assert failed and all("msserviceprofiler" in line for line in failed), failed
        assert "No module named 'ms_service_profiler'" in vllm_log
    assert probe["mstrace_hooks_on_chain"] == 1, probe
    assert proc.stderr.count("mstrace: hook tracing on") >= 3, log  # main, EngineCore, worker
    assert "msServiceProfiler cannot profile here" in proc.stderr, log
    events = json.loads(out_json.read_text())
    outputs = [e for e in events if e.get("ph") == "X" and e["name"] == "vllm.output.process"]
    calls = counts.read_text().split() if counts.exists() else []
    assert outputs and len(calls) == len(outputs), (len(calls), len(outputs))
