"""Perfetto's own trace processor, for the tests: loads a trace file into the
WebAssembly build that a published Perfetto UI package ships (pinned and
fetched by scripts/deps.sh into ~/.cache/mstrace/perfetto-ui-<version>/) and
answers SQL queries on it, through trace_processor_wasm.js under Node.

Owns: finding Node and the unpacked package (skip, with the reason printed,
only where Node is missing; a missing package is a failure: deps.sh fetches
it), running one load + queries, and turning the answers into row dicts.
Why: what Perfetto shows a user is what its trace processor imports; decoding
our files with the protos alone cannot tell whether Perfetto reads them as
intended.
"""

import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "trace_processor_wasm.js"
# A whole load + queries takes about a second; this only stops a hang.
HANG_GUARD_S = 600


def pinned_package() -> tuple[str, str]:
    """(npm package@version, integrity) as scripts/deps.sh pins them."""
    text = (REPO / "scripts" / "deps.sh").read_text(encoding="utf-8")
    pkg = re.search(r"^PERFETTO_UI_PACKAGE=(\S+)$", text, re.M)
    integrity = re.search(r"^PERFETTO_UI_INTEGRITY=(\S+)$", text, re.M)
    assert pkg and integrity, "scripts/deps.sh no longer pins PERFETTO_UI_PACKAGE/INTEGRITY"
    return pkg.group(1), integrity.group(1)


def package_dir() -> Path:
    """$MSTRACE_PERFETTO_UI, else where scripts/deps.sh unpacks the pin."""
    if os.environ.get("MSTRACE_PERFETTO_UI"):
        return Path(os.environ["MSTRACE_PERFETTO_UI"])
    pkg, _ = pinned_package()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mstrace"
    return cache / f"perfetto-ui-{pkg.rsplit('@', 1)[1]}" / "package"


def require() -> tuple[str, Path]:
    """(node binary, package dir), or a skip naming why (no Node), or a
    failure (Node is there but the package is not: run scripts/deps.sh)."""
    node = shutil.which("node")
    if node is None:
        reason = ("Perfetto trace processor checks skipped: no `node` on PATH "
                  "(scripts/deps.sh test installs Debian's nodejs and npm)")
        warnings.warn(reason)
        pytest.skip(reason)
    pkg = package_dir()
    for name in ("engine_bundle.js", "trace_processor.wasm"):
        if not (pkg / name).is_file():
            pytest.fail(f"{pkg / name} missing: run `bash scripts/deps.sh test` "
                        f"(fetches {pinned_package()[0]}) or set MSTRACE_PERFETTO_UI")
    return node, pkg


class Loaded:
    """One trace as Perfetto's trace processor imported it."""

    def __init__(self, version, append_error, results, log):
        self.version = version
        self.append_error = append_error
        self.results = results
        self.log = log

    def rows(self, name):
        r = self.results[name]
        assert r["error"] is None, f"query {name!r} failed in trace processor: {r['error']}"
        return [dict(zip(r["columns"], row)) for row in r["rows"]]


def load(trace: Path, queries: dict) -> Loaded:
    """Loads `trace` into the trace processor and runs `queries` (name ->
    SQL) on it."""
    node, pkg = require()
    proc = subprocess.run([node, str(DRIVER), str(pkg), str(Path(trace).resolve())],
                          input=json.dumps(queries).encode(), capture_output=True,
                          timeout=HANG_GUARD_S)
    log = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, f"trace processor driver failed ({proc.returncode}):\n{log[-4000:]}"
    out = json.loads(proc.stdout)
    return Loaded(out["version"], out["append_error"], out["results"], log)
