"""Tests of mstrace.plugin.register() (the vLLM general plugin) and of the cost
of `import mstrace`. Each case runs in a child Python, because what is
checked is process state: sys.modules, sys.meta_path, log output, fork.

  * MS_TRACE_ENABLE anything but "1": nothing at all happens;
  * "1" with the extension or PyYAML missing: one warning, a no-op;
  * "1" with everything: hooks applied to modules already imported and to
    modules imported afterwards, exporters logged, re-entrant (also in a
    fork()ed child);
  * `import mstrace` does not import PyYAML or the extension (its time is
    measured and reported, not asserted).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PROBE = textwrap.dedent('''
    import json, os, sys
    meta_before = [type(f).__name__ for f in sys.meta_path]
    import mstrace.plugin as plugin
    first = plugin.register()
    second = plugin.register()
    out = {
        "first": first is not None,
        "same": first is second,
        "meta_changed": [type(f).__name__ for f in sys.meta_path] != meta_before,
        "modules": sorted(m for m in ("yaml", "mstrace._native", "mstrace.symbols", "mstrace.patcher")
                          if sys.modules.get(m) is not None),
        "handlers": len(__import__("logging").getLogger("mstrace").handlers),
    }
    print("PROBE" + json.dumps(out))
''')


def run_probe(env, code=PROBE, cwd=None):
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("PROBE")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][5:]), proc.stderr


@pytest.mark.parametrize("value", [None, "", "0", "true", "TRUE", "yes", "on", " 1", "1 ", "01", "2"])
def test_disabled_unless_exactly_one(subprocess_env, value):
    env = dict(subprocess_env)
    if value is not None:
        env["MS_TRACE_ENABLE"] = value
    out, err = run_probe(env)
    assert out == {"first": False, "same": True, "meta_changed": False, "modules": [], "handlers": 0}
    assert err == ""  # not even a log line


def _copy_package_without_native(tmp_path):
    dest = tmp_path / "nonative" / "mstrace"
    src = os.path.join(REPO, "python", "mstrace")
    dest.mkdir(parents=True)
    for name in os.listdir(src):
        if name.endswith((".py", ".yaml")):
            shutil.copy2(os.path.join(src, name), str(dest / name))
    return str(dest.parent)


def test_missing_extension_one_warning_noop(subprocess_env, tmp_path):
    env = dict(subprocess_env, MS_TRACE_ENABLE="1", PYTHONPATH=_copy_package_without_native(tmp_path))
    out, err = run_probe(env)
    assert out["first"] is False and out["meta_changed"] is False
    assert "mstrace._native" not in out["modules"]
    warnings = [l for l in err.splitlines() if "C extension cannot be loaded" in l]
    assert len(warnings) == 1, err
    assert "inference continues" in warnings[0]


def test_missing_pyyaml_one_warning_noop(subprocess_env):
    env = dict(subprocess_env, MS_TRACE_ENABLE="1")
    code = "import sys; sys.modules['yaml'] = None  # as if PyYAML were not installed\n" + PROBE
    out, err = run_probe(env, code)
    assert out["first"] is False and out["meta_changed"] is False
    assert "mstrace._native" not in out["modules"]
    warnings = [l for l in err.splitlines() if "PyYAML is not installed" in l]
    assert len(warnings) == 1, err


TARGET = '''
def now(x):
    return ("now", x)

class Later:
    def step(self, x):
        return ("later", x)
'''

ENABLED_PROBE = textwrap.dedent('''
    import json, os, sys
    import mst_plugin_target_now as early          # imported before the plugin runs
    import mstrace.plugin as plugin
    from mstrace import _native
    p = plugin.register()
    assert plugin.register() is p                   # re-entrant
    import mst_plugin_target_later as late          # imported after: the finder patches it
    hook_types = tuple(t for t in vars(_native).values() if isinstance(t, type) and t.__name__.endswith("Hook"))
    res = {
        "early_hooked": isinstance(vars(early)["now"], hook_types),
        "late_hooked": isinstance(vars(late.Later)["step"], hook_types),
        "calls": [early.now(1), late.Later().step(2)],
        "records": sorted((r.status, r.target) for r in p.records),
    }
    pid = os.fork()
    if pid == 0:
        q = plugin.register()                       # the child inherited the hooks
        ok = q is p and late.Later().step(3) == ("later", 3)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    res["child_status"] = status
    print("PROBE" + json.dumps(res))
''')


def test_enabled_hooks_now_and_later(subprocess_env, tmp_path, native):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "mst_plugin_target_now.py").write_text(TARGET)
    (mods / "mst_plugin_target_later.py").write_text(TARGET)
    yml = tmp_path / "sym.yaml"
    yml.write_text(textwrap.dedent('''
        - symbol: mst_plugin_target_now:now
          trace: {name: t.now, domain: Test}
        - symbol: mst_plugin_target_later:Later.step
          trace: {name: t.step, domain: Test, adapter: call}
        - symbol: mst_plugin_target_later:Missing.step
          trace: true
        - symbol: 42
    '''))
    env = dict(subprocess_env, MS_TRACE_ENABLE="1", PROFILING_SYMBOLS_PATH=str(yml),
               PYTHONPATH=subprocess_env["PYTHONPATH"] + os.pathsep + str(mods))
    out, err = run_probe(env, ENABLED_PROBE)
    assert out["early_hooked"] and out["late_hooked"]
    assert out["calls"] == [["now", 1], ["later", 2]]
    assert ["applied", "mst_plugin_target_now.now"] in out["records"]
    assert ["applied", "mst_plugin_target_later.Later.step"] in out["records"]
    assert ["skipped", "mst_plugin_target_later.Missing"] in out["records"]
    assert out["child_status"] == 0
    # the log says what is on, what was wrong, and how to get Jaeger export
    assert "exporters active" in err or "no exporter is active" in err, err
    assert "hook tracing on" in err and str(yml) in err
    assert "entry #3" in err and "skipped" in err
    assert "hook skipped for entry #2" in err
    assert err.count("hook tracing on") == 1  # once per process, not per call


def test_entry_point_declared():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        pytest.skip("tomllib needs Python 3.11")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        meta = tomllib.load(fh)
    eps = meta["project"]["entry-points"]["vllm.general_plugins"]
    assert eps == {"mstrace": "mstrace.plugin:register"}
    assert "scripts" not in meta["project"]  # the C binary is the CLI
    assert meta["tool"]["scikit-build"]["wheel"]["packages"] == ["python/mstrace"]


def test_import_cost_and_laziness(subprocess_env, report):
    code = textwrap.dedent('''
        import json, sys, time
        t0 = time.perf_counter()
        import mstrace
        dt = time.perf_counter() - t0
        print("PROBE" + json.dumps({"ms": dt * 1000.0,
              "heavy": sorted(m for m in ("yaml", "mstrace._native", "mstrace.symbols", "mstrace.patcher",
                                          "mstrace.plugin", "importlib.metadata") if m in sys.modules)}))
    ''')
    out, _ = run_probe(subprocess_env, code)
    assert out["heavy"] == [], out
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import mstrace"], env=subprocess_env,
                          capture_output=True, text=True, timeout=60)
    m = re.search(r"import time:\s+(\d+) \|\s+(\d+) \|\s+mstrace$", proc.stderr, re.M)
    cumulative = int(m.group(2)) if m else -1
    report("import mstrace: %.2f ms wall in a fresh interpreter; -X importtime cumulative %d us; "
           "yaml/_native not imported" % (out["ms"], cumulative))
    # plugin module itself is cheap too: importing it must not pull yaml/_native
    code2 = "import sys, mstrace.plugin; print('PROBE' + str(sorted(m for m in ('yaml', 'mstrace._native') " \
            "if m in sys.modules)).replace(\"'\", '\"'))"
    out2, _ = run_probe(subprocess_env, code2)
    assert out2 == []


REARM_PROBE = textwrap.dedent('''
    import json, os, sys
    import mstrace.plugin as plugin
    p = plugin.register()
    before = plugin.state()["init"]["exporters"]
    from vllm.v1.engine import async_llm        # a stand-in: sets the env as vLLM's init_tracer does
    async_llm.AsyncLLM()
    after = plugin.state()["init"]
    print("PROBE" + json.dumps({"before": before, "after": after["exporters"], "endpoint": after["endpoint"]}))
''')

FAKE_ASYNC_LLM = '''
import os
def init_tracer(name, endpoint):
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
class AsyncLLM:
    def __init__(self):
        init_tracer("vllm.llm_engine", "http://127.0.0.1:9/v1/traces")
'''


def test_otlp_endpoint_set_later_by_vllm_is_picked_up(subprocess_env, tmp_path, native):
    root = tmp_path / "fakevllm"
    eng = root / "vllm" / "v1" / "engine"
    eng.mkdir(parents=True)
    for d in (root / "vllm", root / "vllm" / "v1", eng):
        (d / "__init__.py").write_text("")
    (eng / "async_llm.py").write_text(FAKE_ASYNC_LLM)
    yml = tmp_path / "empty.yaml"
    yml.write_text("[]\n")
    env = dict(subprocess_env, MS_TRACE_ENABLE="1", PROFILING_SYMBOLS_PATH=str(yml),
               OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
               PYTHONPATH=subprocess_env["PYTHONPATH"] + os.pathsep + str(root))
    out, err = run_probe(env, REARM_PROBE)
    assert "otlp" not in out["before"]
    assert "otlp" in out["after"] and out["endpoint"] == "http://127.0.0.1:9/v1/traces", err
    assert "re-initialised" in err


MISSING_PROBE = textwrap.dedent('''
    import json, sys
    import mstrace.plugin as plugin
    p = plugin.register()
    print("PROBE" + json.dumps({"vllm_imported": sorted(m for m in sys.modules if m.split(".")[0] == "vllm")}))
''')


def test_missing_symbols_of_the_default_yaml_are_named_once_at_info(subprocess_env, tmp_path, native):
    """docs/reference/behaviour.md with the packaged YAML against a vLLM that lacks some
    modules: one INFO line per missing symbol naming it and why, one summary
    line for vllm_ascend (not installed), nothing imported to find out."""
    root = tmp_path / "fakevllm"
    sched = root / "vllm" / "v1" / "core" / "sched"
    sched.mkdir(parents=True)
    for d in (root / "vllm", root / "vllm" / "v1", root / "vllm" / "v1" / "core", sched):
        (d / "__init__.py").write_text("raise RuntimeError('imported!')\n" if d == root / "vllm" else "")
    (sched / "scheduler.py").write_text("class Scheduler:\n    def schedule(self): pass\n")
    (root / "vllm" / "version.py").write_text("__version__ = '0.32.0'\n")
    env = dict(subprocess_env, MS_TRACE_ENABLE="1", VLLM_LOGGING_LEVEL="INFO",
               PYTHONPATH=subprocess_env["PYTHONPATH"] + os.pathsep + str(root))
    out, err = run_probe(env, MISSING_PROBE)
    assert out["vllm_imported"] == []
    lines = [l for l in err.splitlines() if "skipped" in l]
    # a module that exists (the scheduler) is not reported; missing ones are, once each
    assert not [l for l in lines if "vllm.v1.core.sched.scheduler" in l], lines
    gpu = [l for l in lines if "vllm.v1.worker.gpu_model_runner:GPUModelRunner.execute_model" in l]
    assert len(gpu) == 1 and gpu[0].startswith("INFO") and "does not exist" in gpu[0], lines
    ascend = [l for l in lines if "vllm_ascend" in l]
    assert len(ascend) == 1 and ascend[0].startswith("INFO"), lines
    assert "vllm_ascend symbol(s) skipped: vllm_ascend not installed" in ascend[0]
    assert not [l for l in err.splitlines() if l.startswith("WARNING")], err
    assert "module(s) not installed" in err
