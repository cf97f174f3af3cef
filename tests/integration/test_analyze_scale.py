"""`mstrace analyze` on a trace whose keys are all distinct (tests/integration/analyze_scale_trace.py):
400 000 processes, each named by a process_name event and with its own request id, joined to one
engine's steps. Every table keyed by outside values is a hash or a sorted index; the test is bounded by
work — a fixed number of distinct pids and ids — and checks that each one is counted and keeps its
role. The subprocess timeout is a hang guard sized for the work, not a speed assertion: a linear scan
per span (how processes used to be found) needs about 80 s for this input (12.5 s at 160 000 pids,
quadratic), the hashes about 1-3 s on a loaded 2-core machine, so the guard is 20 times what the work
needs (bench/bench_analyze_scale.sh measures it: bench/RESULTS.md).
"""

import json
import subprocess
import sys
from pathlib import Path

from conftest import mstrace_binary

N = 400_000


def test_distinct_pids_and_request_ids_are_each_counted(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from analyze_scale_trace import write
    trace, out = tmp_path / "scale.json", tmp_path / "scale.out.json"
    write(trace, N)
    p = subprocess.run([str(mstrace_binary()), "analyze", "--quiet", "--json", str(out), str(trace)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    a = json.loads(out.read_text())
    procs = a["data_quality"]["processes"]
    assert len(procs) == N + 1 and len({p["pid"] for p in procs}) == N + 1
    assert sum(p["role"] == "api_server" for p in procs) == N  # every process_name read and kept
    assert a["requests"]["count"] == a["requests"]["joined"] == N
    assert a["steps"]["count"] == N // 1000 and a["data_quality"]["engines"] == 1
