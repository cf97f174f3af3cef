"""Every field of a vLLM object that the adapters read (python/mstrace/_native/adapters.c, context.c).

This module owns one list, `FIELDS`: which attribute of which vLLM class a
request-aware adapter (docs/reference/spans.md "Adapters") reads, and for
which record. It is data only, imported by nothing on the hot path; the
suite's check of the vLLM releases (tests/vllm/test_vllm_release_source.py)
verifies that each field exists on its class in every supported vLLM, and
tests/python/test_adapter_fields.py that every attribute name the extension
interns (pyattr.c) is either listed here or named in `NOT_VLLM_FIELDS`.

The adapters are duck-typed (they read attributes by name and record
nothing when one is missing), so a field that vLLM renames does not break
inference; it silently empties a span attribute. This list is what turns
that silence into a failing check.

A row: the class as "module:Class", the field, the adapters that read it,
what it feeds, and an optional version gate (min_version / max_version,
same meaning as in the symbols YAML) for a field that exists only in some
vLLM versions.
"""

from collections import namedtuple

AdapterField = namedtuple("AdapterField", "cls field adapters feeds min_version max_version")
AdapterField.__new__.__defaults__ = (None, None)

_OUT = "vllm.v1.core.sched.output"
_SCHED = "vllm.v1.core.sched.scheduler:Scheduler"
_REQ = "vllm.v1.request:Request"
_ENG = "vllm.v1.engine"

FIELDS = (
    # SchedulerOutput: what schedule() returned, the argument of execute_model.
    AdapterField(_OUT + ":SchedulerOutput", "num_scheduled_tokens", ("schedule", "model"),
                 "request.ids, step.tokens, batch.request_count"),
    AdapterField(_OUT + ":SchedulerOutput", "total_num_scheduled_tokens", ("schedule", "model"),
                 "batch.scheduled_tokens"),
    AdapterField(_OUT + ":SchedulerOutput", "scheduled_new_reqs", ("schedule",), "step.new_ids"),
    AdapterField(_OUT + ":SchedulerOutput", "scheduled_cached_reqs", ("schedule",), "step.resumed_ids"),
    AdapterField(_OUT + ":SchedulerOutput", "preempted_req_ids", ("schedule",), "step.preempted_ids"),
    AdapterField(_OUT + ":SchedulerOutput", "finished_req_ids", ("schedule",), "step.finished_ids"),
    AdapterField(_OUT + ":NewRequestData", "req_id", ("schedule",), "step.new_ids"),
    AdapterField(_OUT + ":NewRequestData", "num_computed_tokens", ("schedule",), "step.prefix_hit_tokens"),
    AdapterField(_OUT + ":CachedRequestData", "resumed_req_ids", ("schedule",), "step.resumed_ids"),
    AdapterField(_OUT + ":CachedRequestData", "req_ids", ("schedule",),
                 "step.resumed_ids (with resumed_from_preemption)"),
    # Before resumed_req_ids (vLLM 0.11.1): a list[bool] parallel to req_ids.
    AdapterField(_OUT + ":CachedRequestData", "resumed_from_preemption", ("schedule",), "step.resumed_ids",
                 None, "0.11.0"),
    # The Scheduler itself (self of schedule()): its state after the step.
    AdapterField(_SCHED, "waiting", ("schedule",), "scheduler.waiting"),
    AdapterField(_SCHED, "running", ("schedule",), "scheduler.running"),
    AdapterField(_SCHED, "kv_cache_manager", ("schedule",), "kv_cache.usage"),
    AdapterField(_SCHED, "requests", ("schedule",), "step.phase (the scheduled requests)"),
    AdapterField(_SCHED, "max_num_running_reqs", ("schedule",), "scheduler.max_num_seqs"),
    AdapterField(_SCHED, "max_num_scheduled_tokens", ("schedule",), "scheduler.max_num_batched_tokens"),
    AdapterField("vllm.v1.core.kv_cache_manager:KVCacheManager", "usage", ("schedule",), "kv_cache.usage"),
    # Request (EngineCore): registered by request_context, read for step.phase.
    AdapterField(_REQ, "request_id", ("request_context",), "the request table's key"),
    AdapterField(_REQ, "trace_headers", ("request_context",), "the request's trace context"),
    AdapterField(_REQ, "num_computed_tokens", ("schedule",), "step.phase"),
    AdapterField(_REQ, "num_prompt_tokens", ("schedule",), "step.phase"),
    AdapterField(_REQ, "num_tokens", ("schedule",), "step.phase of a request resumed after preemption"),
    AdapterField(_REQ, "is_prefill_chunk", ("schedule",), "step.phase (p: more to compute before a token)"),
    AdapterField(_REQ, "num_output_placeholders", ("schedule",), "step.phase where is_prefill_chunk is missing"),
    AdapterField(_REQ, "num_preemptions", ("schedule",),
                 "step.resumed_ids (resumed requests the V2 model runner sends as new)"),
    # EngineCoreRequest (API server): OutputProcessor.add_request's argument.
    AdapterField(_ENG + ":EngineCoreRequest", "request_id", ("request",), "the request table's key"),
    AdapterField(_ENG + ":EngineCoreRequest", "trace_headers", ("request",),
                 "the request's trace context (written back when auto-tracing)"),
    AdapterField(_ENG + ":EngineCoreRequest", "arrival_time", ("request",), "start of the vllm.request span"),
    AdapterField(_ENG + ":EngineCoreRequest", "external_req_id", ("request",), "request.external_id"),
    # EngineCoreOutputs / EngineCoreOutput: OutputProcessor.process_outputs.
    AdapterField(_ENG + ":EngineCoreOutputs", "outputs", ("output",), "the output list"),
    AdapterField(_ENG + ":EngineCoreOutput", "request_id", ("output",), "request.ids, links"),
    AdapterField(_ENG + ":EngineCoreOutput", "trace_headers", ("output",), "contexts learnt in the API server"),
    AdapterField(_ENG + ":EngineCoreOutput", "finish_reason", ("output",),
                 "dropping finished requests, output.finish_reasons"),
)

# Names the extension interns (pyattr.c) that are not fields of a vLLM
# object: dict keys of trace_headers, a keyword argument name, and Python's
# own attributes.
NOT_VLLM_FIELDS = {
    "traceparent": "a key of trace_headers",
    "tracestate": "a key of trace_headers",
    "scheduler_output": "the keyword argument name of execute_model",
    "iscoroutinefunction": "inspect.iscoroutinefunction",
    "__func__": "a bound method's function",
    "__get__": "the descriptor protocol",
}


def field_names():
    """Every field name in FIELDS (a set)."""
    return {f.field for f in FIELDS}
