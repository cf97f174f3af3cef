"""Beside msServiceProfiler: who runs the symbols YAML's profiling handlers.

This module owns one decision of the plugin (docs/user-guide.md, "Beside
msServiceProfiler"). Both mstrace and msServiceProfiler are vLLM general
plugins and both read the YAML named by PROFILING_SYMBOLS_PATH. The rule:

  * tracing is mstrace's: with MS_TRACE_ENABLE=1 mstrace hooks every entry
    that has a `trace` block, once. msServiceProfiler's plugin (PyPI
    `msserviceprofiler`, 1.2.x) records no trace spans and does not react to
    MS_TRACE_ENABLE;
  * profiling is msServiceProfiler's: its plugin hooks the YAML's symbols
    and calls their `handler` when SERVICE_PROF_CONFIG_PATH is set and its
    profiler library (the `ms_service_profiler` module) is there. In that
    case mstrace calls no handler itself, so each handler runs once per call,
    inside msServiceProfiler's hook; mstrace's span still covers the call;
  * otherwise (msServiceProfiler not installed, installed but idle, or
    unable to profile here) mstrace calls an entry's handler inside its span,
    as it does alone.

One INFO line says which case applies whenever msServiceProfiler is
installed. The probes only look for the packages (importlib's find_spec on
top-level names), they import neither.
"""

import importlib.util
import os

ENV_PROFILER_CONFIG = "SERVICE_PROF_CONFIG_PATH"
PROFILER_PLUGIN = "msserviceprofiler"     # the vLLM plugin's distribution/package
PROFILER_LIBRARY = "ms_service_profiler"  # its profiler (CANN), what its hooks call


def _installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def handler_owner(env=None, installed=_installed):
    """(mstrace_runs_handlers, message): message is None when msServiceProfiler
    is not installed (nothing to say), else the INFO line for the log."""
    env = os.environ if env is None else env
    if not installed(PROFILER_PLUGIN):
        return True, None
    if not env.get(ENV_PROFILER_CONFIG):
        return True, ("mstrace: msServiceProfiler's plugin is installed and idle (%s is not set): mstrace traces "
                      "and runs the YAML's profiling handlers" % ENV_PROFILER_CONFIG)
    if not installed(PROFILER_LIBRARY):
        return True, ("mstrace: %s is set but msServiceProfiler cannot profile here (no %s module; its plugin "
                      "reports that itself): mstrace traces and runs the YAML's profiling handlers"
                      % (ENV_PROFILER_CONFIG, PROFILER_LIBRARY))
    return False, ("mstrace: msServiceProfiler profiles in this process (%s is set): it runs the YAML's profiling "
                   "handlers through its own hooks, mstrace only traces, so each handler runs once per call"
                   % ENV_PROFILER_CONFIG)
