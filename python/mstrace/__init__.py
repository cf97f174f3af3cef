"""mstrace: request tracing for vLLM through hooks listed in a YAML file.

This package file owns only what `import mstrace` must provide, and on
purpose nothing more: vLLM imports every general plugin in every process
(API server, EngineCore, workers), so importing the package has to cost a
few milliseconds. PyYAML and the C extension `mstrace._native` are imported
lazily by `mstrace.plugin.register()`, and only when MS_TRACE_ENABLE=1.

Modules:
  plugin   -- the vLLM general plugin entry point (`mstrace = mstrace.plugin:register`)
  symbols  -- loading and validating the symbols YAML (PROFILING_SYMBOLS_PATH)
  patcher  -- resolving symbols and wrapping them with `_native.Hook`
  trace    -- `python -m mstrace.trace ...`, which execs the C `mstrace forward`
"""

__all__ = ["__version__"]


def __getattr__(name):
    # The version comes from the installed distribution's metadata, read only
    # when asked for: importlib.metadata is not free to import.
    if name == "__version__":
        try:
            from importlib.metadata import PackageNotFoundError, version
        except ImportError:  # pragma: no cover - Python < 3.8
            return "unknown"
        try:
            return version("mstrace")
        except PackageNotFoundError:
            return "0+unknown"
    raise AttributeError("module 'mstrace' has no attribute %r" % (name,))
