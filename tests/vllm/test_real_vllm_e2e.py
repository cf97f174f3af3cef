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
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_serve  # noqa: E402

RUN = vllm_serve.offline_script(4, """
    outs = llm.generate([TokensPrompt(prompt_token_ids=[5, 6, 7, 8 + i]) for i in range(3)],
                        SamplingParams(max_tokens=4, ignore_eos=True, detokenize=False))
    print("E2E", json.dumps([list(o.outputs[0].token_ids) for o in outs]), flush=True)
""")


def test_hook_spans_from_every_vllm_process(tmp_path):
    python, binary = vllm_serve.traced_setup()
    out_json = tmp_path / "hook_tracing.json"
    with vllm_serve.Forwarder(binary, ["--perfetto-output", out_json], tmp_path / "forward.log",
                              prefix="mst_e2e") as fwd:
        env = vllm_serve.traced_env(fwd.sock, MS_PROFILER_AUTO_TRACE=None)
        proc = vllm_serve.run_offline(python, tmp_path, RUN, env)
        assert proc.stderr.count("mstrace: hook tracing on") >= 3, proc.stderr[-6000:]  # main, EngineCore, worker
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
