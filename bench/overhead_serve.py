"""overhead_serve.py — the serve A/B of docs/performance.md, built to resist a
loaded machine: what tracing costs a real `vllm serve` (CPU build, the tiny
dummy-weight model of tests/e2e/make_tiny_model.py), measured as throughput
and latency *and* as CPU time per request of every process involved.

Why CPU time: on a shared 2-CPU box the other load moves throughput by tens
of percent from minute to minute, while the CPU time a process spends on a
request barely moves. So each load records, for every vLLM process (API
server, EngineCore, a worker if separate), utime + stime (/proc/PID/stat)
before and after, divided by the requests completed; the same for the
forwarder and Jaeger; and the on-CPU time of each process's `mstrace-export`
thread (/proc/PID/task/TID/schedstat, nanoseconds).

How (one server per case, all up at once, so loads can alternate without a
server restart between them):
  cases     off (no tracing), perfetto (MS_TRACE_ENABLE=1, MS_PROFILER_AUTO_TRACE=1,
            spans to a real `mstrace forward` writing JSON), grpc / http (the
            same plus OTLP to a real Jaeger, tests/harness/jaeger.sh, over gRPC
            or http/protobuf; mstrace's OTLP endpoint only, via
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT — vLLM's own OpenTelemetry
            tracing stays off, so the figure is mstrace's).
  rounds    every round runs one load per case, the order reversed every other
            round (ABBA...), the same prompts (seed = round) for every case of
            a round; paired differences case − off per round.
  layouts   pinned: every vLLM process on CPU 0 (started under taskset, so vLLM
            sizes its threads for one CPU); forwarders, Jaeger and this client
            on CPU 1; one load at a time. together: pinned, every case's load
            at once, so all cases meet the same contention at the same moment
            (the layout that resolves small differences on a loaded box; Jaeger
            serves two cases then, so its CPU is not charged). unpinned:
            afterwards every thread of the same processes is allowed both CPUs
            (sched_setaffinity), and the box's contention between them counts
            as cost — an upper bound, not mstrace's own (vLLM's EngineCore and
            worker also busy-wait on their shared-memory queue then).
  load      this process is the client (aiohttp, streaming /v1/completions):
            N prompts of 64 random token ids, 16 output tokens (ignore_eos), C
            at a time; req/s, TTFT, TPOT and E2E as `vllm bench serve` defines
            them. The CPU snapshots sit right around the load, so a client
            start-up does not land in the window. Engine steps per load come
            from vLLM's own counter (vllm:iteration_tokens_total_count).
  lifetime  at the end, each process's exporter thread CPU over its life and
            the spans it exported (the "spans at exit" accounting line each
            traced process logs): CPU per span exported in the real serve.

Writes OUT/records.jsonl (one line per load), OUT/lifetime.json, the servers'
and forwarders' logs; then prints bench/overhead_ab.py's tables. Run with the
vLLM venv's Python. Nothing is asserted: this measures.

Usage: python bench/overhead_serve.py --build DIR [--out OUT] [--quick]
         [--rounds N] [--together-rounds N] [--unpinned-rounds N] [--prompts N]
         [--concurrency N] [--cases off,perfetto,grpc,http]
"""
import argparse
import asyncio
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import aiohttp

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
E2E = os.path.join(REPO, "tests", "e2e")
JAEGER_SH = os.path.join(REPO, "tests", "harness", "jaeger.sh")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead_ab  # noqa: E402  (the summary of these records)

TICK = os.sysconf("SC_CLK_TCK")
EXPORT_THREAD = "mstrace-export"
ENGINE_CPU, SIDE_CPU = {0}, {1}
BOTH_CPUS = {0, 1}
PROMPT_LEN, OUTPUT_LEN, VOCAB = 64, 16, 2048


def log(msg):
    sys.stderr.write("[overhead %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def input_error(msg):
    """A bad argument or missing input: one line, exit status 2."""
    sys.stderr.write("overhead_serve.py: %s\n" % msg)
    sys.exit(2)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ------------------------------------------------------------ /proc readings

def _stat_fields(path):
    text = open(path).read()
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()


def process_cpu_s(pid):
    """On-CPU time of the whole process (every thread, live or ended), s: the
    kernel's process CPU clock (clock_getcpuclockid(pid), nanoseconds), the
    same count /proc/PID/stat rounds to 10 ms ticks as utime + stime."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except OSError:
        return None


def process_ticks_s(pid):
    """utime + stime of the whole process from /proc/PID/stat (10 ms ticks), s."""
    try:
        _, f = _stat_fields("/proc/%d/stat" % pid)
    except (OSError, ValueError):
        return None
    return (int(f[11]) + int(f[12])) / TICK


def thread_cpu_s(pid, name):
    """On-CPU time (schedstat, ns resolution) of the threads of pid named name, s."""
    total = 0
    for task in glob.glob("/proc/%d/task/*" % pid):
        try:
            comm = open(task + "/comm").read().strip()
            if comm == name:
                total += int(open(task + "/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def group_pids(pgid):
    """The live processes of a process group (a server started with setsid)."""
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            _, f = _stat_fields(d + "/stat")
            if int(f[2]) == pgid:
                pids.append(int(os.path.basename(d)))
        except (OSError, ValueError):
            continue
    return sorted(pids)


def role_of(pid, leader):
    """api_server for the leader; EngineCore / Worker from vLLM's process titles."""
    if pid == leader:
        return "api_server"
    try:
        comm = open("/proc/%d/comm" % pid).read().strip()
        cmd = open("/proc/%d/cmdline" % pid).read().replace("\0", " ")
    except OSError:
        return None
    title = comm + " " + cmd
    if "EngineCore" in title:
        return "engine_core"
    if "Worker" in title or "VllmWorker" in title:
        return "worker"
    return None  # helpers of multiprocessing (its resource tracker) are not vLLM's work


def set_affinity(pid, cpus):
    """Every thread of pid may run on cpus (threads started later inherit it)."""
    for task in glob.glob("/proc/%d/task/*" % pid):
        try:
            os.sched_setaffinity(int(os.path.basename(task)), cpus)
        except OSError:
            pass


# ------------------------------------------------------------ the cases

class Side(object):
    """A helper process (forwarder, Jaeger) whose CPU is counted per load."""

    def __init__(self, name, pid):
        self.name, self.pid = name, pid


class Server(object):
    """One `vllm serve` of one case (its own port, forwarder and log dir), its processes and their CPU."""

    def __init__(self, case, out, stage, model_dir, jaeger):
        self.case, self.dir = case, os.path.join(out, case)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.forwarder = None
        self.procs = {}  # pid -> role
        env = dict(os.environ, PYTHONPATH=stage, VLLM_CPU_KVCACHE_SPACE="1", OTEL_SERVICE_NAME="mstrace-ovh-" + case)
        if case != "off":
            sock = "mst_ovh_%d_%s" % (os.getpid(), case)
            env.update(MS_TRACE_ENABLE="1", MS_PROFILER_AUTO_TRACE="1", MSTRACE_PERFETTO_SOCKET=sock)
            fwd = subprocess.Popen(
                ["taskset", "-c", ",".join(map(str, SIDE_CPU)), os.path.join(stage, "mstrace", "bin", "mstrace"),
                 "forward", "--socket-name", sock, "--perfetto-output", os.path.join(self.dir, "hook_tracing.json")],
                stdout=open(os.path.join(self.dir, "forwarder.log"), "w"), stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
            self.forwarder = Side("forwarder", fwd.pid)
            self._fwd = fwd
        if case == "grpc":
            env.update(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://" + jaeger["grpc"],
                       OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc")
        elif case == "http":
            env.update(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://%s/v1/traces" % jaeger["http"],
                       OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf")
        cmd = ["taskset", "-c", ",".join(map(str, ENGINE_CPU)), sys.executable, os.path.join(E2E, "vllm_cli.py"),
               "serve", model_dir, "--served-model-name", "tiny-llama", "--host", "127.0.0.1", "--port",
               str(self.port), "--load-format", "dummy", "--dtype", "float32", "--max-model-len", "512",
               "--max-num-seqs", "16", "--enforce-eager",
               # drain at SIGINT instead of killing EngineCore and the worker at once, so
               # that every process logs its "spans at exit" accounting line
               "--shutdown-timeout", "30"]
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, start_new_session=True,
                                     stdout=open(os.path.join(self.dir, "vllm.log"), "w"), stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.url = "http://127.0.0.1:%d" % self.port

    def discover(self):
        self.procs = {}
        for pid in group_pids(self.pid):
            role = role_of(pid, self.pid)
            if role:
                self.procs[pid] = role

    def snapshot(self):
        snap = {"proc": {}, "export": {}, "ticks": 0.0}
        for pid, role in self.procs.items():
            cpu = process_cpu_s(pid)
            if cpu is not None:
                snap["proc"][role] = snap["proc"].get(role, 0.0) + cpu
                snap["export"][role] = snap["export"].get(role, 0.0) + thread_cpu_s(pid, EXPORT_THREAD)
                snap["ticks"] += process_ticks_s(pid) or 0.0
        if self.forwarder:
            snap["proc"]["forwarder"] = process_cpu_s(self.forwarder.pid) or 0.0
        return snap

    def all_pids(self):
        return list(self.procs) + ([self.forwarder.pid] if self.forwarder else [])

    def interrupt(self):
        """vLLM's own shutdown (drain, then each process's exit flush and accounting line)."""
        try:
            os.kill(self.pid, signal.SIGINT)
        except OSError:
            pass

    def wait_stopped(self):
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        time.sleep(2)
        try:
            os.killpg(self.pid, signal.SIGTERM)  # children that outlived the API server
        except OSError:
            pass

    def stop_forwarder(self):
        if self.forwarder:
            self._fwd.terminate()
            self._fwd.wait(timeout=30)


# ------------------------------------------------------------ the load

async def one_request(session, url, prompt, lat):
    body = {"model": "tiny-llama", "prompt": prompt, "max_tokens": OUTPUT_LEN, "ignore_eos": True,
            "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft, tokens = None, 0
    async with session.post(url + "/v1/completions", json=body) as resp:
        if resp.status != 200:
            lat.append(None)
            return
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("choices") and ttft is None:
                ttft = time.perf_counter() - t0
            if chunk.get("usage"):
                tokens = chunk["usage"].get("completion_tokens", 0)
    e2e = time.perf_counter() - t0
    lat.append((ttft, e2e, tokens))


async def run_load(url, prompts, conc):
    lat, queue = [], list(prompts)

    async def worker(session):
        while queue:
            await one_request(session, url, queue.pop(), lat)

    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(conc)))
        return lat, time.perf_counter() - t0


def load_figures(lat, wall):
    ok = [x for x in lat if x and x[0] is not None and x[2] > 1]
    n = len(ok)
    return {"completed": n, "failed": len(lat) - n, "wall_s": wall,
            "req_s": n / wall if wall else 0.0,
            "ttft_ms": 1e3 * sum(x[0] for x in ok) / n if n else None,
            "tpot_ms": 1e3 * sum((x[1] - x[0]) / (x[2] - 1) for x in ok) / n if n else None,
            "e2e_ms": 1e3 * sum(x[1] for x in ok) / n if n else None}


def engine_steps(url):
    """vLLM's count of engine steps (observations of vllm:iteration_tokens_total)."""
    import urllib.request
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    return sum(float(m.group(1)) for m in re.finditer(r"^vllm:iteration_tokens_total_count\{[^}]*\} (\S+)$", text,
                                                      re.M))


def prompts_for(seed, n):
    rng = random.Random(seed)
    return [[rng.randrange(10, VOCAB - 10) for _ in range(PROMPT_LEN)] for _ in range(n)]


def measure(group, sides, prompts, conc):
    """One load on each server of group, all at once (usually a group of one);
    a record per server. sides: helper processes whose CPU the load is charged
    (only meaningful with one server loaded)."""
    steps0 = [engine_steps(srv.url) for srv in group]
    s0 = [srv.snapshot() for srv in group]
    j0 = {s.name: process_cpu_s(s.pid) or 0.0 for s in sides}
    load = os.getloadavg()[0]

    async def all_loads():
        return await asyncio.gather(*(run_load(srv.url, prompts, conc) for srv in group))

    results = asyncio.run(all_loads())
    s1 = [srv.snapshot() for srv in group]
    j1 = {s.name: process_cpu_s(s.pid) or 0.0 for s in sides}
    recs = []
    for i, srv in enumerate(group):
        rec = load_figures(*results[i])
        n = max(rec["completed"], 1)
        a, b = s0[i], s1[i]
        rec.update(case=srv.case, load=load, steps=engine_steps(srv.url) - steps0[i],
                   vllm_ticks_ms_per_req=1e3 * (b["ticks"] - a["ticks"]) / n,
                   cpu_ms_per_req={k: 1e3 * (b["proc"][k] - a["proc"][k]) / n for k in b["proc"] if k in a["proc"]},
                   export_ms_per_req={k: 1e3 * (b["export"][k] - a["export"][k]) / n for k in b["export"]
                                      if k in a["export"]})
        for name in j1:
            rec["cpu_ms_per_req"][name] = 1e3 * (j1[name] - j0[name]) / n
        recs.append(rec)
    return recs


# ------------------------------------------------------------ setup

def stage_package(build, out):
    """The package under test, laid out as a wheel lays it out."""
    stage = os.path.join(out, "stage")
    pkg = os.path.join(stage, "mstrace")
    os.makedirs(os.path.join(pkg, "bin"))
    for f in glob.glob(os.path.join(REPO, "python", "mstrace", "*.py")) + \
            glob.glob(os.path.join(REPO, "python", "mstrace", "*.yaml")):
        shutil.copy2(f, pkg)
    so = [p for p in glob.glob(os.path.join(build, "**", "_native*.so"), recursive=True) if "staging" not in p]
    if not so:
        input_error("no _native module under %s (build with -DMST_BUILD_PYTHON=ON)" % build)
    shutil.copy2(so[0], pkg)
    binary = os.path.join(build, "mstrace")
    if not os.access(binary, os.X_OK):
        input_error("no mstrace binary in %s" % build)
    shutil.copy2(binary, os.path.join(pkg, "bin", "mstrace"))
    return stage


def start_jaeger(out):
    ports = {k: "127.0.0.1:%d" % free_port() for k in ("query", "grpc", "http", "qgrpc", "health")}
    env = dict(os.environ, MST_JAEGER_RUN_DIR=os.path.join(out, "jaeger"), MST_JAEGER_QUERY_HTTP=ports["query"],
               MST_JAEGER_OTLP_GRPC=ports["grpc"], MST_JAEGER_OTLP_HTTP=ports["http"],
               MST_JAEGER_QUERY_GRPC=ports["qgrpc"], MST_JAEGER_HEALTH=ports["health"])
    subprocess.run(["taskset", "-c", ",".join(map(str, SIDE_CPU)), JAEGER_SH, "start"], env=env, check=True)
    pid = int(open(os.path.join(out, "jaeger", "jaeger.pid")).read())
    return ports, env, Side("jaeger", pid)


def wait_healthy(servers, limit_s=900):
    import urllib.request
    pending, t0 = list(servers), time.time()
    while pending:
        for s in list(pending):
            if s.proc.poll() is not None:
                sys.exit("vLLM (%s) exited during start-up; see %s/vllm.log" % (s.case, s.dir))
            try:
                urllib.request.urlopen(s.url + "/health", timeout=5)
                pending.remove(s)
            except OSError:
                pass
        if time.time() - t0 > limit_s:
            sys.exit("vLLM did not become healthy in %d s" % limit_s)
        time.sleep(1)


EXIT_LINE = re.compile(r"pid=(\d+)\].*spans at exit: started=(\d+) exported=(\d+) dropped=(\d+) failed=(\d+)")


def lifetime_export(servers, export_before_stop):
    """Per case and process role: exporter thread CPU over the process's life, spans it exported."""
    res = {}
    for s in servers:
        if s.case == "off":
            continue
        lines = {int(m.group(1)): m for m in EXIT_LINE.finditer(open(os.path.join(s.dir, "vllm.log")).read())}
        for pid, role in s.procs.items():
            m = lines.get(pid)
            cpu = export_before_stop.get(pid)
            row = {"export_cpu_s": cpu, "spans_exported": int(m.group(3)) if m else None,
                   "spans_dropped": int(m.group(4)) if m else None, "spans_failed": int(m.group(5)) if m else None}
            res.setdefault(s.case, {})[role] = row
    return res


def stop_servers(servers):
    """vLLM's own shutdown of every server at once, then their forwarders."""
    for s in servers:
        s.interrupt()
    for s in servers:
        s.wait_stopped()
    for s in servers:
        s.stop_forwarder()


def add_common_args(ap, out_default):
    """--build, --out and --model, shared with bench/overhead_serve_threads.py."""
    ap.add_argument("--build", required=True, help="a build with -DMST_BUILD_PYTHON=ON (the _native module, mstrace)")
    ap.add_argument("--out", default=out_default)
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/mstrace/tiny-llama"))


def clean_environment():
    """No outside tracing or symbol settings leak into the servers; vLLM's CPU build, offline."""
    for v in [k for k in os.environ if k.startswith("OTEL_")] + ["VLLM_PLUGINS", "PROFILING_SYMBOLS_PATH",
                                                                 "MS_PROFILER_SAMPLE_RATE"]:
        os.environ.pop(v, None)
    os.environ.update(VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                      VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, "/tmp/mstrace-overhead-%d" % os.getuid())
    ap.add_argument("--cases", default="off,perfetto,grpc,http")
    ap.add_argument("--rounds", type=int, default=8, help="pinned rounds (one load per case each)")
    ap.add_argument("--together-rounds", type=int, default=4,
                    help="pinned, every case's load at once (the same contention for all at the same moment)")
    ap.add_argument("--unpinned-rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=300, help="requests per load")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=32, help="requests per server before the first load")
    ap.add_argument("--settle", type=float, default=1.5,
                    help="seconds idle before each load (vLLM's queue readers stop busy-waiting 1 s after a message)")
    ap.add_argument("--quick", action="store_true", help="3 pinned, 2 together, 1 unpinned rounds of 150 requests")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.together_rounds, a.unpinned_rounds, a.prompts = 3, 2, 1, 150
    if len(os.sched_getaffinity(0) & BOTH_CPUS) < 2:
        input_error("the pinned layout needs CPUs 0 and 1")
    cases = a.cases.split(",")
    if cases[0] != "off" or any(c not in ("off", "perfetto", "grpc", "http") for c in cases):
        ap.error("--cases: off first, then any of perfetto, grpc, http")
    clean_environment()
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    stage = stage_package(os.path.abspath(a.build), a.out)
    subprocess.run([sys.executable, os.path.join(E2E, "make_tiny_model.py"), a.model], check=True,
                   stdout=subprocess.DEVNULL)
    os.sched_setaffinity(0, SIDE_CPU)  # the client
    servers, jaeger, sides = [], None, []
    try:
        if "grpc" in cases or "http" in cases:
            ports, jaeger_env, jaeger = start_jaeger(a.out)
            sides.append(jaeger)
        for c in cases:
            servers.append(Server(c, a.out, stage, a.model, ports if jaeger else None))
        log("%d servers starting (%s)" % (len(servers), ", ".join(cases)))
        wait_healthy(servers)
        for s in servers:
            s.discover()
            asyncio.run(run_load(s.url, prompts_for(10 ** 6, a.warmup), a.concurrency))
            log("%s: processes %s" % (s.case, ", ".join("%s=%d" % (r, p) for p, r in sorted(s.procs.items()))))
        records = open(os.path.join(a.out, "records.jsonl"), "w")
        layouts = [("pinned", a.rounds), ("together", a.together_rounds), ("unpinned", a.unpinned_rounds)]
        for layout, rounds in layouts:
            if layout == "unpinned":
                for pid in [p for s in servers for p in s.all_pids()] + [s.pid for s in sides] + [os.getpid()]:
                    set_affinity(pid, BOTH_CPUS)
            for r in range(1, rounds + 1):
                order = cases if r % 2 else cases[::-1]
                prompts = prompts_for(r, a.prompts)
                if layout == "together":  # Jaeger serves two of them: its CPU is not charged
                    groups = [([servers[cases.index(c)] for c in order], [])]
                else:
                    groups = [([servers[cases.index(c)]], sides) for c in order]
                for group, charged in groups:
                    time.sleep(a.settle)  # the previous server's busy-waiting readers go idle
                    for rec in measure(group, charged, prompts, a.concurrency):
                        rec.update(layout=layout, round=r)
                        records.write(json.dumps(rec) + "\n")
                        log("%s r%d %-8s %6.1f req/s  TPOT %.2f ms  EngineCore %.2f ms/req  load %.1f" % (
                            layout, r, rec["case"], rec["req_s"], rec["tpot_ms"] or 0,
                            rec["cpu_ms_per_req"].get("engine_core", 0), rec["load"]))
                    records.flush()
        records.close()
        export_before = {pid: thread_cpu_s(pid, EXPORT_THREAD) for s in servers for pid in s.procs}
    finally:
        stop_servers(servers)
        if jaeger:
            subprocess.run([JAEGER_SH, "stop"], env=jaeger_env)
    with open(os.path.join(a.out, "lifetime.json"), "w") as fh:
        json.dump(lifetime_export(servers, export_before), fh, indent=1)
    return overhead_ab.report(a.out)


if __name__ == "__main__":
    sys.exit(main())
