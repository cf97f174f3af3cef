"""A profiling handler that makes vLLM's output processing slow on purpose, for the e2e case
`slowout` (scripts/e2e_vllm.sh): a planted bottleneck whose verdict `mstrace analyze` must name.

The symbols YAML of that case gives OutputProcessor.process_outputs `handler:
slow_output:process_outputs` (this directory is on PYTHONPATH), so mstrace calls
process_outputs(original, *args, **kwargs) inside the `vllm.output.process` span: it sleeps
MST_E2E_SLOW_OUTPUT_MS (default 20) milliseconds, then runs the original exactly once.
"""
import os
import time

_DELAY_S = float(os.environ.get("MST_E2E_SLOW_OUTPUT_MS", "20")) / 1000.0


def process_outputs(original, *args, **kwargs):
    time.sleep(_DELAY_S)
    return original(*args, **kwargs)
