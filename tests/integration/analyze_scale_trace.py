"""Writes a Chrome Trace JSON file (the forwarder's format) whose keys are all distinct:
N processes (pids), each named by a process_name event (as the forwarder writes them) and with one
`vllm.request` span of its own request id, and one engine whose steps name those ids in batches of 1000. Used by tests/integration/test_analyze_scale.py
and bench/bench_analyze_scale.sh to show `mstrace analyze` grows linearly with the number of
distinct pids and request ids (every table keyed by outside values is a hash or sorted index).

usage: python3 analyze_scale_trace.py OUT.json N
"""

import sys

T0_US = 1_700_000_000_000_000.0  # microseconds since the epoch
ENGINE_PID = 1
BATCH = 1000


def write(path, n):
    with open(path, "w", encoding="ascii") as f:
        f.write("[")
        sep = ""
        for i in range(n):
            pid = 100 + i
            f.write(f'{sep}{{"name":"process_name","ph":"M","ts":0,"pid":{pid},"tid":0,'
                    f'"args":{{"name":"api_server (vllm)"}}}}')
            sep = ","
            f.write(f'{sep}{{"name":"vllm.request","ph":"X","ts":{T0_US + i * 10:.3f},"dur":5000,"pid":{pid},'
                    f'"tid":{pid},"args":{{"request.id":"r{i}"}}}}')
            sep = ","
        for b in range(0, n, BATCH):
            ids = ",".join(f'"r{i}"' for i in range(b, min(n, b + BATCH)))
            ts = T0_US + b * 10 + 1
            f.write(f',{{"name":"vllm.scheduler.schedule","ph":"X","ts":{ts:.3f},"dur":100,"pid":{ENGINE_PID},'
                    f'"tid":2,"args":{{"request.ids":[{ids}],"batch.request_count":{min(BATCH, n - b)}}}}}')
        f.write("]\n")


if __name__ == "__main__":
    write(sys.argv[1], int(sys.argv[2]))
