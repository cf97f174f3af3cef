"""test_coexist.py — the rule of mstrace/coexist.py: who runs the symbols
YAML's profiling handlers when msServiceProfiler's vLLM plugin is installed
too (docs/user-guide.md, "Beside msServiceProfiler").

Owns the four cases of handler_owner, decided from the environment and from
which of the two packages (the plugin `msserviceprofiler`, its profiler
library `ms_service_profiler`) can be found; the real wheel next to a real
vLLM is tests/vllm/test_real_vllm_coexist.py.
"""

from mstrace import coexist


def owner(env, *present):
    return coexist.handler_owner(env=env, installed=lambda name: name in present)


def test_without_msserviceprofiler_mstrace_runs_handlers_silently():
    assert owner({"SERVICE_PROF_CONFIG_PATH": "/x"}, "ms_service_profiler") == (True, None)


def test_idle_profiler_plugin_leaves_handlers_to_mstrace():
    runs, msg = owner({}, "msserviceprofiler", "ms_service_profiler")
    assert runs is True and "idle" in msg and "SERVICE_PROF_CONFIG_PATH is not set" in msg


def test_profiler_plugin_without_its_library_cannot_profile():
    runs, msg = owner({"SERVICE_PROF_CONFIG_PATH": "/etc/prof"}, "msserviceprofiler")
    assert runs is True and "cannot profile here" in msg and "ms_service_profiler" in msg


def test_profiling_profiler_runs_the_handlers_mstrace_only_traces():
    runs, msg = owner({"SERVICE_PROF_CONFIG_PATH": "/etc/prof"}, "msserviceprofiler", "ms_service_profiler")
    assert runs is False and "only traces" in msg and "once per call" in msg


def test_empty_config_variable_counts_as_unset():
    runs, msg = owner({"SERVICE_PROF_CONFIG_PATH": ""}, "msserviceprofiler", "ms_service_profiler")
    assert runs is True and "idle" in msg


def test_default_probe_finds_real_packages_only():
    assert coexist._installed("mstrace") is True
    assert coexist._installed("no_such_package_mstrace_test") is False
