"""End to end on a real vLLM (CPU): the plugin in every vLLM process, hook
spans through the real forwarder into a Chrome Trace file.

Owns the check that with MS_TRACE_ENABLE=1 an offline LLM.generate() on a
tiny random-weight Llama (config written here, --load-format dummy, no
tokenizer, nothing downloaded) yields, in the Perfetto JSON, the scheduler,
executor, worker/model-runner and output spans from their own processes
(main, EngineCore, worker), with real durations and the batch's request ids.
Skipped, with the reason, without a vLLM interpreter (see
test_real_vllm_symbols.py), the extension or the `mstrace` binary.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import conftest as pyconf  # noqa: E402
from test_real_vllm_symbols import _vllm_python  # noqa: E402

RUN = r'''
import json, os, sys, time

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
              enforce_eager=True, max_num_seqs=4)
    outs = llm.generate([TokensPrompt(prompt_token_ids=[5, 6, 7, 8 + i]) for i in range(3)],
                        SamplingParams(max_tokens=4, ignore_eos=True, detokenize=False))
    print("E2E", json.dumps([list(o.outputs[0].token_ids) for o in outs]), flush=True)

if __name__ == "__main__":
    main()
'''


def test_hook_spans_from_every_vllm_process(tmp_path):
    python, why = _vllm_python()
    if python is None:
        pytest.skip(why)
    pyconf.pytest_configure(None)
    build = pyconf.build_native()
    if build.native is None or build.binary is None:
        pytest.skip("mstrace._native or the mstrace binary unavailable: %s" % build.reason)
    sock = "mst_e2e_" + uuid.uuid4().hex[:8]
    out_json = tmp_path / "hook_tracing.json"
    fwd = subprocess.Popen([build.binary, "forward", "--socket-name", sock, "--perfetto-output", str(out_json)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)
        assert fwd.poll() is None, fwd.stdout.read()
        script = tmp_path / "run.py"
        script.write_text(RUN)
        env = dict(os.environ, MS_TRACE_ENABLE="1", MSTRACE_PERFETTO_SOCKET=sock, VLLM_TARGET_DEVICE="cpu",
                   HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1", PYTHONPATH=pyconf.STAGING)
        for key in list(env):
            if key.startswith(("OTEL_", "PROFILING_SYMBOLS", "VLLM_PLUGINS")):
                del env[key]
        proc = subprocess.run([python, str(script), str(tmp_path / "tiny")], env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0 and "E2E" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-6000:]
        assert proc.stderr.count("mstrace: hook tracing on") >= 3, proc.stderr[-6000:]  # main, EngineCore, worker
    finally:
        fwd.send_signal(signal.SIGINT)
        try:
            fwd.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fwd.kill()
    events = json.loads(out_json.read_text())
    spans = [e for e in events if e.get("ph") == "X"]
    pids = {}
    for e in spans:
        pids.setdefault(e["name"], set()).add(e["pid"])
    print({k: sorted(v) for k, v in pids.items()})
    expected = {"vllm.scheduler.schedule", "vllm.model.execute", "vllm.output.process",
                "vllm.worker.execute_model", "vllm.model_runner.execute"}
    assert expected <= set(pids), sorted(pids)
    assert pids["vllm.scheduler.schedule"] == pids["vllm.model.execute"]          # EngineCore
    assert pids["vllm.output.process"].isdisjoint(pids["vllm.scheduler.schedule"])  # front end
    assert len(set().union(*pids.values())) >= 3
    busy = [e for e in spans if e["name"] == "vllm.scheduler.schedule" and e["args"].get("request.ids")]
    assert busy and all(e["dur"] > 0 for e in busy)
    assert max(e["args"].get("batch.request_count", 0) for e in busy) == 3
    model = [e for e in spans if e["name"] == "vllm.model.execute" and e["args"].get("request.ids")]
    assert {i for e in model for i in e["args"]["request.ids"]} == {i for e in busy for i in e["args"]["request.ids"]}
