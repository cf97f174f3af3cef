"""Tests of the request-aware adapters of `mstrace._native` (adapters.c,
context.c, reqtable.c) against real Python objects shaped like vLLM's v1
engine (docs/reference/vllm-internals.md), and of the whole path into a real `mstrace forward`
daemon (Perfetto JSON), including a fork()ed child.

Owns: request / request_context registration, schedule / model / output
spans (request ids, batch attributes, links with request.id, the lone-request
parent rule), finished requests dropped, per-span and table limits, the
internal/external request id join, the traceparent / MS_PROFILER_AUTO_TRACE /
MS_PROFILER_SAMPLE_RATE rules, and spans from a forked child reaching the
daemon. In-process checks read spans through `_native._capture`; env-rule
and daemon checks run a child Python (the tracer is process-global).
"""

import collections
import collections.abc
import enum
import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from typing import Optional

import pytest


# ------------------------------------------------------- vLLM-shaped objects


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list = field(default_factory=list)


@dataclass
class CachedRequestData:
    req_ids: list = field(default_factory=list)


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    finished_req_ids: set = field(default_factory=set)
    preempted_req_ids: set = field(default_factory=set)


@dataclass
class Request:
    request_id: str
    prompt_token_ids: list = field(default_factory=list)
    trace_headers: Optional[dict] = None


@dataclass
class EngineCoreOutput:
    request_id: str
    new_token_ids: list = field(default_factory=list)
    finish_reason: Optional[str] = None
    events: Optional[list] = None
    trace_headers: Optional[dict] = None


@dataclass
class EngineCoreOutputs:
    outputs: list = field(default_factory=list)


def tp(trace_id, span_id, flags="01"):
    return {"traceparent": "00-%s-%s-%s" % (trace_id, span_id, flags)}


T1, S1 = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
T2, S2 = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def scheduler_output(counts):
    return SchedulerOutput(
        scheduled_new_reqs=[NewRequestData(r) for r in counts],
        scheduled_cached_reqs=CachedRequestData([]),
        num_scheduled_tokens=dict(counts),
        total_num_scheduled_tokens=sum(counts.values()),
    )


@pytest.fixture
def cap(native):
    native._reset_requests()
    spans = native._capture(True)
    yield spans
    native._capture(False)
    native._reset_requests()


def only(spans, name):
    found = [s for s in spans if s["name"] == name]
    assert len(found) == 1, [s["name"] for s in spans]
    return found[0]


class Scheduler:
    def __init__(self, so=None):
        self.so = so
        self.added = []

    def add_request(self, request):
        self.added.append(request.request_id)

    def schedule(self):
        self.inside = time.time_ns()
        return self.so


@pytest.fixture
def hooked(native):
    saved = dict(Scheduler.__dict__)
    Scheduler.add_request = native.Hook(saved["add_request"], name="add", adapter="request")
    Scheduler.schedule = native.Hook(saved["schedule"], name="vllm.scheduler.schedule", domain="Schedule",
                                     adapter="schedule")
    yield Scheduler
    Scheduler.add_request = saved["add_request"]
    Scheduler.schedule = saved["schedule"]


# ---------------------------------------------------------------- request


def test_request_adapter_registers_without_a_span(native, cap, hooked):
    s = Scheduler()
    s.add_request(Request("r1", trace_headers=tp(T1, S1)))
    s.add_request(Request("r2", trace_headers={"traceparent": "garbage"}))
    s.add_request(Request("r3"))
    assert s.added == ["r1", "r2", "r3"]
    assert native.lookup_request("r1") == (T1, S1, True)
    assert native.lookup_request("r2") is None
    assert native.lookup_request("r3") is None
    assert cap == []


def test_request_adapter_kwargs_and_request_context(native, cap):
    def add_request(request_id, prompt, params, trace_headers=None):
        return request_id

    h = native.Hook(add_request, name="api.add", adapter="request")
    assert h(request_id="cmpl-1", prompt="p", params=None, trace_headers=tp(T2, S2)) == "cmpl-1"
    assert native.lookup_request("cmpl-1") == (T2, S2, True)

    def ctx_only(request):
        return request.request_id

    hc = native.Hook(ctx_only, name="ctx", adapter="request_context")
    assert hc(Request("r9", trace_headers=tp(T1, S1, "00"))) == "r9"
    assert native.lookup_request("r9") == (T1, S1, False)  # unsampled, still known
    assert cap == []


class HeaderBag(object):
    """A read-only Mapping that is not a dict (vLLM types trace_headers as Mapping[str, str])."""

    def __init__(self, d):
        self._d = d

    def __getitem__(self, k):
        return self._d[k]

    def __len__(self):
        return len(self._d)

    def __iter__(self):
        return iter(self._d)


collections.abc.Mapping.register(HeaderBag)

MALFORMED_HEADERS = ["00-%s-%s-01" % (T1, S1), b"traceparent", ["traceparent"], ("traceparent",), 42, 3.5,
                     {"traceparent"}, bytearray(b"x")]


@pytest.mark.parametrize("adapter", ["request", "request_context"])
def test_malformed_trace_headers_never_switch_the_hook_off(native, cap, adapter):
    """trace_headers that is not a mapping means "no headers"; a non-str
    traceparent value is ignored. Neither is an internal failure, so a run of
    malformed requests cannot switch the hook off for the requests after them."""
    def add_request(request):
        return request.request_id

    h = native.Hook(add_request, name="add." + adapter, adapter=adapter)
    before = native.stats()
    n = 0
    for _ in range(2):  # 16 malformed requests, well past the 5-failure switch-off
        for bad in MALFORMED_HEADERS:
            n += 1
            assert h(Request("bad-%d" % n, trace_headers=bad)) == "bad-%d" % n
            assert native.lookup_request("bad-%d" % n) is None
    for value in (b"00-%s-%s-01" % (T1.encode(), S1.encode()), None, 7, ["00-%s-%s-01" % (T1, S1)],
                  "00-%s-%s-01\udcff" % (T1, S1)):
        n += 1
        h(Request("val-%d" % n, trace_headers={"traceparent": value}))
        assert native.lookup_request("val-%d" % n) is None
    after = native.stats()
    assert after["hook_failures"] == before["hook_failures"]
    assert after["hooks_disabled"] == before["hooks_disabled"]
    assert h._mstrace_hook["disabled"] is False and h._mstrace_hook["failures"] == 0
    # the hook still registers well-formed requests, dict or other Mapping
    h(Request("good-1", trace_headers=tp(T1, S1)))
    h(Request("good-2", trace_headers=HeaderBag(tp(T2, S2))))
    assert native.lookup_request("good-1") == (T1, S1, True)
    assert native.lookup_request("good-2") == (T2, S2, True)


def test_register_request_and_kwargs_treat_non_mappings_as_no_headers(native, cap):
    for bad in MALFORMED_HEADERS:
        assert native.register_request("direct", bad) is False
        assert native.register_request("direct", {"traceparent": b"00-" + T1.encode()}) is False
    assert native.lookup_request("direct") is None

    def add_request(request_id, prompt, trace_headers=None):
        return request_id

    h = native.Hook(add_request, name="api.add", adapter="request")
    before = native.stats()["hook_failures"]
    for i, bad in enumerate(MALFORMED_HEADERS):
        h(request_id="kw-%d" % i, prompt="p", trace_headers=bad)
    assert native.stats()["hook_failures"] == before
    h(request_id="kw-ok", prompt="p", trace_headers=HeaderBag(tp(T2, S2)))
    assert native.lookup_request("kw-ok") == (T2, S2, True)
    # the output adapter learns contexts through the same rules
    ho = native.Hook(lambda outs: None, name="api.out", adapter="output")
    ho([EngineCoreOutput("out-1", trace_headers="00-%s-%s-01" % (T1, S1)),
        EngineCoreOutput("out-2", trace_headers=tp(T2, S2))])
    assert native.stats()["hook_failures"] == before
    assert native.lookup_request("out-1") is None
    assert native.lookup_request("out-2") == (T2, S2, True)


# --------------------------------------------------------------- schedule


def test_schedule_adapter_links_and_batch_attributes(native, cap, hooked):
    native.register_request("a", tp(T1, S1))
    native.register_request("b", tp(T2, S2))
    sched = Scheduler(scheduler_output({"a": 5, "b": 7, "c": 1}))
    before = time.time_ns()
    assert sched.schedule() is sched.so
    s = only(cap, "vllm.scheduler.schedule")
    assert s["scope"] == "ms_service_profiler.hook.Schedule"
    assert before <= s["start_ns"] <= sched.inside <= s["end_ns"]  # start taken before the call
    a = s["attributes"]
    assert a["request.ids"] == ["a", "b", "c"]
    assert a["batch.request_count"] == 3
    assert a["batch.scheduled_tokens"] == 13
    assert sorted((l["trace_id"], l["span_id"], l["request.id"]) for l in s["links"]) == sorted(
        [(T1, S1, "a"), (T2, S2, "b")])
    assert s["parent_span_id"] == ""  # two known contexts: a root with links
    assert s["trace_id"] not in (T1, T2)


def test_lone_known_request_becomes_the_parent(native, cap, hooked):
    native.register_request("only", tp(T1, S1))
    Scheduler(scheduler_output({"only": 3, "untraced": 2})).schedule()
    s = only(cap, "vllm.scheduler.schedule")
    assert s["trace_id"] == T1 and s["parent_span_id"] == S1
    assert [l["request.id"] for l in s["links"]] == ["only"]


def test_unsampled_requests_are_left_out(native, cap, hooked):
    native.register_request("quiet", tp(T1, S1, "00"))
    native.register_request("loud", tp(T2, S2))
    Scheduler(scheduler_output({"quiet": 1, "loud": 1})).schedule()
    s = only(cap, "vllm.scheduler.schedule")
    assert s["attributes"]["request.ids"] == ["loud"]
    assert [l["request.id"] for l in s["links"]] == ["loud"]
    cap.clear()
    Scheduler(scheduler_output({"quiet": 1})).schedule()
    assert cap == []  # every request of the batch is unsampled: nothing recorded


class KVCacheManager:
    """vLLM's KVCacheManager.usage: a property over BlockPool.get_usage()."""
    def __init__(self, usage):
        self._usage = usage

    @property
    def usage(self):
        if isinstance(self._usage, Exception):
            raise self._usage
        return self._usage


class VllmLikeScheduler(Scheduler):
    """The attributes vLLM v1's Scheduler holds: waiting (a request queue
    with __len__), running (a list), kv_cache_manager."""
    def __init__(self, so, waiting, running, usage):
        super().__init__(so)
        self.waiting = collections.deque(waiting)
        self.running = list(running)
        self.kv_cache_manager = KVCacheManager(usage)


def test_schedule_adapter_reads_queue_lengths_and_kv_cache_usage(native, cap, hooked):
    sched = VllmLikeScheduler(scheduler_output({"a": 5}), waiting=["w1", "w2", "w3"],
                              running=["a", "r2"], usage=0.4375)
    sched.schedule()
    a = only(cap, "vllm.scheduler.schedule")["attributes"]
    assert a["scheduler.waiting"] == 3
    assert a["scheduler.running"] == 2
    assert a["kv_cache.usage"] == 0.4375
    # a scheduler without them (or whose usage raises) records the rest, never fails the hook
    before = native.stats()["hook_failures"]
    cap.clear()
    bad = VllmLikeScheduler(scheduler_output({"a": 5}), waiting=[], running=[],
                            usage=RuntimeError("no blocks"))
    bad.schedule()
    a = only(cap, "vllm.scheduler.schedule")["attributes"]
    assert a["scheduler.waiting"] == 0 and "kv_cache.usage" not in a
    cap.clear()
    Scheduler(scheduler_output({"a": 5})).schedule()
    a = only(cap, "vllm.scheduler.schedule")["attributes"]
    assert "scheduler.waiting" not in a and "kv_cache.usage" not in a
    assert a["batch.request_count"] == 1
    assert native.stats()["hook_failures"] == before


def test_schedule_of_nothing_and_errors(native, cap, hooked):
    Scheduler(None).schedule()  # no SchedulerOutput: a plain span
    s = only(cap, "vllm.scheduler.schedule")
    assert "request.ids" not in s["attributes"] and s["links"] == []


# ------------------------------------------------------- the step record
#
# Stand-ins with the fields of vLLM 0.32's classes (vllm/v1/core/sched/output.py
# NewRequestData, CachedRequestData, SchedulerOutput; vllm/v1/request.py Request;
# vllm/v1/engine/__init__.py FinishReason), driven the way scheduler.py drives
# them: schedule() advances num_computed_tokens and sets is_prefill_chunk
# (_update_after_schedule) before it returns; update_from_output appends the
# sampled token of every request that is not mid-prefill.


class FinishReason(enum.IntEnum):
    STOP = 0
    LENGTH = 1
    ABORT = 2


@dataclass
class VNewRequestData:
    req_id: str
    prompt_token_ids: list
    mm_features: list
    sampling_params: object
    pooling_params: object
    block_ids: tuple
    num_computed_tokens: int
    lora_request: object = None


@dataclass
class VCachedRequestData:
    req_ids: list
    resumed_req_ids: set
    new_token_ids: list
    all_token_ids: dict
    new_block_ids: list
    num_computed_tokens: list
    num_output_tokens: list


@dataclass
class VSchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: VCachedRequestData
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict
    scheduled_encoder_inputs: dict
    finished_req_ids: set
    free_encoder_mm_hashes: list
    preempted_req_ids: set = None


class VRequest:
    """vllm.v1.request.Request: the fields the step record reads."""
    def __init__(self, request_id, prompt):
        self.request_id = request_id
        self.prompt_token_ids = list(range(prompt))
        self.num_prompt_tokens = prompt
        self._output_token_ids = []
        self._all_token_ids = list(self.prompt_token_ids)
        self.num_computed_tokens = 0
        self.is_prefill_chunk = False
        self.num_preemptions = 0
        self.num_output_placeholders = 0
        self.trace_headers = None

    @property
    def num_tokens(self):
        return len(self._all_token_ids)


class VScheduler:
    """vllm.v1.core.sched.scheduler.Scheduler, reduced to what a step is made
    of; each schedule() call is planned by the test with plan()."""
    def __init__(self, max_num_seqs=4, max_tokens=64):
        self.requests = {}
        self.waiting = collections.deque()
        self.running = []
        self.max_num_running_reqs = max_num_seqs
        self.max_num_scheduled_tokens = max_tokens
        self.kv_cache_manager = KVCacheManager(0.5)
        self.finished_req_ids = set()
        self.preempted = set()
        self._plan = None

    def add_request(self, request):
        self.waiting.append(request)
        self.requests[request.request_id] = request

    def plan(self, tokens, new=(), hits=None, resumed=(), spec=None):
        self._plan = (tokens, list(new), hits or {}, set(resumed), spec or {})

    def preempt(self, rid):
        r = self.requests[rid]
        r.num_computed_tokens = 0
        r.num_preemptions += 1
        self.running.remove(r)
        self.waiting.appendleft(r)
        self.preempted.add(rid)

    def schedule(self):
        tokens, new, hits, resumed, spec = self._plan
        for rid in new + sorted(resumed):
            r = self.requests[rid]
            self.waiting.remove(r)
            self.running.append(r)
            r.num_computed_tokens = hits.get(rid, 0)
        new_data = [VNewRequestData(rid, self.requests[rid].prompt_token_ids, [], None, None, ([],),
                                    self.requests[rid].num_computed_tokens) for rid in new]
        cached_ids = [rid for rid in tokens if rid not in new]
        cached = VCachedRequestData(cached_ids, set(resumed), [], {}, [],
                                    [self.requests[r].num_computed_tokens for r in cached_ids],
                                    [len(self.requests[r]._output_token_ids) for r in cached_ids])
        so = VSchedulerOutput(new_data, cached, dict(tokens), sum(tokens.values()), dict(spec), {},
                              self.finished_req_ids, [], self.preempted)
        for rid, n in tokens.items():  # _update_after_schedule
            r = self.requests[rid]
            r.num_computed_tokens += n
            r.is_prefill_chunk = r.num_computed_tokens < r.num_tokens + r.num_output_placeholders
        self.finished_req_ids, self.preempted = set(), set()
        return so

    def update_from_output(self, so, finished=()):
        for rid in so.num_scheduled_tokens:
            r = self.requests[rid]
            if not r.is_prefill_chunk:
                r._output_token_ids.append(7)
                r._all_token_ids.append(7)
        for rid in finished:
            r = self.requests.pop(rid)
            self.running.remove(r)
            self.finished_req_ids.add(rid)


@pytest.fixture
def vsched(native):
    saved = dict(VScheduler.__dict__)
    VScheduler.add_request = native.Hook(saved["add_request"], name="vllm.scheduler.add_request",
                                         domain="Schedule", adapter="request_context")
    VScheduler.schedule = native.Hook(saved["schedule"], name="vllm.scheduler.schedule", domain="Schedule",
                                      adapter="schedule")
    yield VScheduler
    VScheduler.add_request = saved["add_request"]
    VScheduler.schedule = saved["schedule"]


def step_attrs(cap):
    s = [x for x in cap if x["name"] == "vllm.scheduler.schedule"]
    cap.clear()
    assert len(s) == 1
    return s[0]["attributes"]


def test_step_record_through_prefill_preemption_resume_and_finish(native, cap, vsched):
    failures = native.stats()["hook_failures"]
    sched = VScheduler(max_num_seqs=4, max_tokens=10)
    t0 = time.time_ns()
    sched.add_request(VRequest("a", 12))
    t1 = time.time_ns()
    sched.add_request(VRequest("b", 6))
    t2 = time.time_ns()
    cap.clear()

    # step 0: a's first chunk (4 of its 12 prompt tokens from the prefix cache), b's whole prompt
    sched.plan({"a": 4, "b": 6}, new=["a", "b"], hits={"a": 4})
    so = sched.schedule()
    a0 = step_attrs(cap)
    assert a0["request.ids"] == ["a", "b"] and a0["step.tokens"] == ["4", "6"]
    assert a0["step.phase"] == "pP"
    assert a0["step.new_ids"] == ["a", "b"] and a0["step.prefix_hit_tokens"] == ["4", "0"]
    qa, qb = (int(x) for x in a0["step.queued_ns"])
    assert t0 <= qa <= t1 <= qb <= t2  # when Scheduler.add_request ran
    assert a0["scheduler.max_num_seqs"] == 4 and a0["scheduler.max_num_batched_tokens"] == 10
    for k in ("step.resumed_ids", "step.preempted_ids", "step.finished_ids"):
        assert k not in a0  # empty lists are not written
    first = a0["step.index"]
    sched.update_from_output(so)

    # step 1: a's last chunk (samples its first token), b decodes
    sched.plan({"b": 1, "a": 4})
    so = sched.schedule()
    a1 = step_attrs(cap)
    assert a1["step.index"] == first + 1
    assert a1["request.ids"] == ["b", "a"] and a1["step.phase"] == "dP" and a1["step.tokens"] == ["1", "4"]
    assert "step.new_ids" not in a1 and "step.queued_ns" not in a1
    sched.update_from_output(so)

    # step 2: a is preempted (the KV cache is full), b decodes
    sched.preempt("a")
    sched.plan({"b": 1})
    so = sched.schedule()
    a2 = step_attrs(cap)
    assert a2["step.preempted_ids"] == ["a"] and a2["step.phase"] == "d"
    sched.update_from_output(so)

    # step 3: a resumes and recomputes its 12 + 1 tokens in two chunks; b decodes
    sched.plan({"b": 1, "a": 9}, resumed={"a"})
    so = sched.schedule()
    a3 = step_attrs(cap)
    assert a3["step.resumed_ids"] == ["a"] and a3["step.phase"] == "dp"  # not decoding any more
    sched.update_from_output(so)
    sched.plan({"b": 1, "a": 4})  # 9 + 4 = 13: the chunk that samples again, past the prompt
    so = sched.schedule()
    a4 = step_attrs(cap)
    assert a4["step.phase"] == "dP" and "step.resumed_ids" not in a4
    sched.update_from_output(so, finished=["b"])

    # step 5: b finished since the last step; a decodes with 2 speculative tokens
    sched.plan({"a": 3}, spec={"a": [-1, -1]})
    so = sched.schedule()
    a5 = step_attrs(cap)
    assert a5["step.finished_ids"] == ["b"] and a5["step.phase"] == "d" and a5["step.tokens"] == ["3"]
    assert a5["step.index"] == first + 5
    assert native.stats()["hook_failures"] == failures


def test_step_record_resumed_forms_of_other_vllm_versions(native, cap, vsched):
    sched = VScheduler()
    for rid in ("x", "y"):
        sched.add_request(VRequest(rid, 4))
    sched.plan({"x": 4, "y": 4}, new=["x", "y"])
    sched.update_from_output(sched.schedule())
    sched.preempt("x")
    sched.preempt("y")
    cap.clear()
    # The V2 model runner sends resumed requests as new ones (scheduler.py:
    # scheduled_new_reqs.extend(scheduled_resumed_reqs)): told apart by num_preemptions.
    sched.plan({"x": 5}, new=["x"])
    sched.schedule()
    a = step_attrs(cap)
    assert a["step.resumed_ids"] == ["x"] and "step.new_ids" not in a and a["step.phase"] == "P"
    # vLLM before resumed_req_ids: CachedRequestData.resumed_from_preemption, parallel to req_ids
    sched.plan({"x": 1, "y": 5}, resumed={"y"})
    so = sched.schedule()
    del so  # (built by schedule(); rebuilt below in the old shape)
    cap.clear()

    @dataclass
    class OldCached:
        req_ids: list
        resumed_from_preemption: list

    old = VSchedulerOutput([], OldCached(["x", "y"], [False, True]), {"x": 1, "y": 1}, 2, {}, {}, set(), [])
    hook = native.Hook(lambda self: old, name="vllm.scheduler.schedule", adapter="schedule")
    hook(sched)
    a = step_attrs(cap)
    assert a["step.resumed_ids"] == ["y"] and "step.preempted_ids" not in a


class RaisingRequest(VRequest):
    @property
    def num_prompt_tokens(self):
        raise RuntimeError("torn")

    @num_prompt_tokens.setter
    def num_prompt_tokens(self, v):
        pass


def test_step_record_missing_or_raising_fields_are_not_recorded(native, cap, hooked):
    failures = native.stats()["hook_failures"]
    # a SchedulerOutput with only the batch (older or foreign shapes)
    Scheduler(scheduler_output({"m": 3})).schedule()
    a = step_attrs(cap)
    assert a["step.tokens"] == ["3"] and "step.phase" not in a and "scheduler.max_num_seqs" not in a
    assert a["step.new_ids"] == ["m"] and "step.prefix_hit_tokens" not in a  # NewRequestData without it
    # a Request whose field raises: no step.phase, the rest recorded
    sched = VScheduler()
    sched.requests["r"] = RaisingRequest("r", 4)
    sched.waiting.append(sched.requests["r"])
    hook = native.Hook(VScheduler.schedule, name="vllm.scheduler.schedule", adapter="schedule")
    sched.plan({"r": 4}, new=["r"])
    hook(sched)
    a = step_attrs(cap)
    assert "step.phase" not in a and a["step.tokens"] == ["4"] and a["step.new_ids"] == ["r"]
    assert native.stats()["hook_failures"] == failures


def test_step_record_of_a_256_request_batch_is_whole(native, cap, vsched):
    sched = VScheduler(max_num_seqs=256, max_tokens=8192)
    ids = ["cmpl-%032x-0-%08x" % (i, i) for i in range(256)]
    for rid in ids:
        sched.add_request(VRequest(rid, 8))
        native.register_request(rid, tp(T1, "%016x" % (len(rid) + ids.index(rid) + 1)))
    sched.plan({r: 8 for r in ids}, new=ids)
    sched.update_from_output(sched.schedule())
    cap.clear()
    sched.plan({r: 1 for r in ids})
    sched.schedule()
    a = step_attrs(cap)
    assert a["request.ids"] == ids and a["batch.request_count"] == 256
    assert a["step.tokens"] == ["1"] * 256 and a["step.phase"] == "d" * 256


def test_output_adapter_records_finish_reasons(native, cap):
    for r, (t, sid) in {"o1": (T1, S1), "o2": (T2, S2)}.items():
        native.register_request(r, tp(t, sid))
    h = native.Hook(lambda outs: None, name="vllm.output.process", adapter="output")
    h([EngineCoreOutput("o1", finish_reason=FinishReason.LENGTH), EngineCoreOutput("o2"),
       EngineCoreOutput("o3", finish_reason=FinishReason.STOP), EngineCoreOutput("o4", finish_reason="abort")])
    a = only(cap, "vllm.output.process")["attributes"]
    assert a["output.finished_ids"] == ["o1", "o3", "o4"]
    assert a["output.finish_reasons"] == ["length", "stop", "abort"]
    cap.clear()
    h([EngineCoreOutput("o2")])
    assert "output.finished_ids" not in only(cap, "vllm.output.process")["attributes"]


# ------------------------------------------------------------------ model


def test_model_adapter_reads_the_scheduler_output_argument(native, cap):
    native.register_request("cmpl-x", tp(T1, S1))
    seen = {}

    class Executor:
        def execute_model(self, scheduler_output, non_block=False):
            seen["ctx"] = native.current_context()
            return "out"

    Executor.execute_model = native.Hook(Executor.__dict__["execute_model"], name="vllm.model.execute",
                                         domain="Execute", adapter="model")
    so = scheduler_output({"cmpl-x-0123abcd": 4, "cmpl-y-89abcdef": 4})
    assert Executor().execute_model(so) == "out"
    assert Executor().execute_model(scheduler_output=so, non_block=True) == "out"
    spans = [s for s in cap if s["name"] == "vllm.model.execute"]
    assert len(spans) == 2
    for s in spans:
        assert s["attributes"]["request.ids"] == ["cmpl-x-0123abcd", "cmpl-y-89abcdef"]
        assert s["attributes"]["batch.scheduled_tokens"] == 8
        # internal id joined to the external registration; lone context → parent
        assert s["links"] == [{"trace_id": T1, "span_id": S1, "request.id": "cmpl-x-0123abcd"}]
        assert s["trace_id"] == T1 and s["parent_span_id"] == S1
    assert seen["ctx"] == (spans[1]["trace_id"], spans[1]["span_id"])  # current during the call


class CpuGpuBuffer(object):
    """vLLM's pinned-CPU/GPU buffer pair (vllm/v1/utils.py), as far as shape goes."""

    def __init__(self, n):
        self.cpu = [0] * n
        self.np = self.cpu
        self.gpu = self.cpu


def inference_mode(fn):
    """Like @torch.inference_mode(): a functools.wraps'd wrapper around the method."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


class GPUModelRunner(object):
    """Shaped like vLLM 0.32/0.33's v1 GPUModelRunner: it has its own
    `num_scheduled_tokens` attribute (a CpuGpuBuffer made in __init__), and
    Worker.execute_model calls `execute_model(scheduler_output,
    intermediate_tensors)` positionally."""

    def __init__(self):
        self.num_scheduled_tokens = CpuGpuBuffer(8)
        self.seen = None

    @inference_mode
    def execute_model(self, scheduler_output, intermediate_tensors=None):
        self.seen = len(scheduler_output.num_scheduled_tokens)
        return None


class CPUModelRunner(GPUModelRunner):
    pass


def test_model_adapter_on_a_model_runner_with_its_own_num_scheduled_tokens(native, cap):
    """The runner's own buffer attribute must not be taken for the
    SchedulerOutput (vllm.model_runner.execute spans had no request.ids)."""
    native.register_request("cmpl-m", tp(T1, S1))
    saved = GPUModelRunner.__dict__["execute_model"]
    GPUModelRunner.execute_model = native.Hook(saved, name="vllm.model_runner.execute", domain="Execute",
                                               adapter="model")
    try:
        runner = CPUModelRunner()
        so = scheduler_output({"cmpl-m-0123abcd": 5, "cmpl-n-0123abcd": 2})
        runner.execute_model(so, None)                                      # Worker.execute_model's call
        runner.execute_model(so)
        runner.execute_model(scheduler_output=so, intermediate_tensors=None)
        runner.execute_model(intermediate_tensors=None, scheduler_output=so)
        assert runner.seen == 2
    finally:
        GPUModelRunner.execute_model = saved
    spans = [s for s in cap if s["name"] == "vllm.model_runner.execute"]
    assert len(spans) == 4
    for s in spans:
        assert s["attributes"]["request.ids"] == ["cmpl-m-0123abcd", "cmpl-n-0123abcd"], s["attributes"]
        assert s["attributes"]["batch.request_count"] == 2
        assert s["attributes"]["batch.scheduled_tokens"] == 7
        assert s["links"] == [{"trace_id": T1, "span_id": S1, "request.id": "cmpl-m-0123abcd"}]


def test_model_adapter_prefers_the_scheduler_output_keyword(native, cap):
    """`scheduler_output=` wins over any other argument with num_scheduled_tokens."""
    def execute(other, scheduler_output=None):
        return None

    h = native.Hook(execute, name="m", adapter="model")
    h(scheduler_output({"decoy": 1}), scheduler_output=scheduler_output({"real": 3}))
    h(scheduler_output({"pos": 2}))                                  # no keyword: the positional one
    h(CpuGpuBuffer(2), scheduler_output=None)                        # neither: a plain span
    spans = [s for s in cap if s["name"] == "m"]
    assert [s["attributes"].get("request.ids") for s in spans] == [["real"], ["pos"], None]


# ----------------------------------------------------------------- output


def test_output_adapter_and_finished_requests(native, cap):
    for r, (t, sid) in {"r1": (T1, S1), "r2": (T2, S2)}.items():
        native.register_request(r, tp(t, sid))

    def process_outputs(engine_core_outputs, engine_core_timestamp=None):
        return len(engine_core_outputs)

    h = native.Hook(process_outputs, name="vllm.output.process", domain="Request", adapter="output")
    assert h([EngineCoreOutput("r1"), EngineCoreOutput("r2", finish_reason="stop")]) == 2
    s = only(cap, "vllm.output.process")
    assert s["attributes"]["request.ids"] == ["r1", "r2"]
    assert s["attributes"]["batch.request_count"] == 2
    assert len(s["links"]) == 2
    assert native.lookup_request("r1") is not None
    assert native.lookup_request("r2") is None  # finished: context dropped

    def update(outputs_obj):
        return outputs_obj

    hu = native.Hook(update, name="upd", adapter="output")
    hu(EngineCoreOutputs([EngineCoreOutput("r1", finish_reason="length")]))
    assert native.lookup_request("r1") is None


def test_output_learns_contexts_from_trace_headers(native, cap):
    """The API server sees trace_headers on EngineCoreOutput (vLLM tracing on)."""
    h = native.Hook(lambda outs: None, name="api.out", adapter="output")
    h([EngineCoreOutput("cmpl-q-0000abcd", trace_headers=tp(T2, S2))])
    s = only(cap, "api.out")
    assert s["links"] == [{"trace_id": T2, "span_id": S2, "request.id": "cmpl-q-0000abcd"}]


# ----------------------------------------------------------------- limits


def test_per_span_limits(native, cap, hooked):
    ids = {"req-%04d" % i: 1 for i in range(1100)}
    for r in ids:
        native.register_request(r, tp(T1, "%016x" % (int(r[4:]) + 1)))
    Scheduler(scheduler_output(ids)).schedule()
    s = only(cap, "vllm.scheduler.schedule")
    a = s["attributes"]
    assert len(a["request.ids"]) == 1024  # list items per span (docs/reference/spans.md "Limits")
    assert a["request.ids"] == list(ids)[:1024]
    assert a["step.tokens"] == ["1"] * 1024  # parallel lists are cut alike
    # every listed request is linked (links per span: 1024), each naming its id
    assert [l["request.id"] for l in s["links"]] == list(ids)[:1024]
    assert [l["span_id"] for l in s["links"]] == ["%016x" % (i + 1) for i in range(1024)]
    assert a["batch.request_count"] == 1100  # the truth, whatever the lists hold


def test_request_table_evicts_the_oldest(native, cap):
    st0 = native.stats()
    for i in range(10050):
        native.register_request("q%d" % i, tp(T1, S1))
    st = native.stats()
    assert st["requests_tracked"] == 10000
    assert st["requests_evicted"] - st0["requests_evicted"] == 50
    assert native.lookup_request("q49") is None
    assert native.lookup_request("q50") is not None
    assert native.finish_request("q10049") is True
    assert native.finish_request("q10049") is False


def test_id_join_rules(native, cap):
    native.register_request("cmpl-abc", tp(T1, S1))
    assert native.lookup_request("cmpl-abc-0123abcd") == (T1, S1, True)   # internal → external
    assert native.lookup_request("cmpl-abc-0123ABCD") is None            # only lowercase hex
    assert native.lookup_request("cmpl-abc-0123abc") is None             # only 8 hex
    native.register_request("int-1-deadbeef", tp(T2, S2))
    assert native.lookup_request("int-1") is None                        # never the other way
    native.register_request("cmpl-abc-0123abcd", tp(T2, S2))             # exact id wins
    assert native.lookup_request("cmpl-abc-0123abcd") == (T2, S2, True)
    assert native.finish_request("cmpl-abc-ffffffff") is True            # drops the external entry
    assert native.lookup_request("cmpl-abc") is None


# --------------------------------------------------- env rules (subprocess)


CHILD_PRELUDE = """
import json, os, sys, logging
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from mstrace import _native as n
"""


def run_child(subprocess_env, code, env=None, timeout=120):
    e = dict(subprocess_env)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(code)], env=e,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return p


SAMPLING = """
n.init(null_exporter=True)
ok = [n.register_request("auto-%%d" %% i, None) for i in range(9)]
got = [n.lookup_request("auto-%%d" %% i) for i in range(9)]
n.register_request("carried", {"traceparent": "00-%s-%s-01"})
print(json.dumps({"ok": ok, "sampled": [g[2] if g else None for g in got],
                  "carried": n.lookup_request("carried"), "stats": n.stats()}))
""" % (T1, S1)


def test_auto_trace_with_sample_rate(native, subprocess_env):
    p = run_child(subprocess_env, SAMPLING, {"MS_PROFILER_AUTO_TRACE": "1", "MS_PROFILER_SAMPLE_RATE": "3"})
    out = json.loads(p.stdout)
    assert out["ok"] == [True] * 9
    assert out["sampled"] == [True, False, False] * 3   # deterministic 1 in 3
    assert out["carried"] == [T1, S1, True]              # never sampled away
    assert out["stats"]["auto_contexts"] == 9 and out["stats"]["auto_contexts_unsampled"] == 6


def test_no_auto_trace_means_no_context(native, subprocess_env):
    out = json.loads(run_child(subprocess_env, SAMPLING, {"MS_PROFILER_AUTO_TRACE": "0"}).stdout)
    assert out["ok"] == [False] * 9 and out["sampled"] == [None] * 9
    assert out["carried"] == [T1, S1, True]


@pytest.mark.parametrize("auto,rate", [("yes", "3"), ("1", "0"), ("1", "3x"), ("1", "99999999999")])
def test_invalid_env_values_warn_once_and_act_as_unset(native, subprocess_env, auto, rate):
    p = run_child(subprocess_env, SAMPLING + "n.shutdown(); n.init(null_exporter=True)\n",
                  {"MS_PROFILER_AUTO_TRACE": auto, "MS_PROFILER_SAMPLE_RATE": rate})
    out = json.loads(p.stdout.splitlines()[0])
    if auto != "1":
        assert "MS_PROFILER_AUTO_TRACE" in p.stderr and p.stderr.count("MS_PROFILER_AUTO_TRACE") == 1
        assert out["sampled"] == [None] * 9
    else:
        assert p.stderr.count("MS_PROFILER_SAMPLE_RATE") == 1
        assert out["sampled"] == [True] * 9  # no sampling


def test_init_reports_jaeger_off_once(native, subprocess_env):
    p = run_child(subprocess_env, "print(json.dumps(n.init(perfetto=False)))\nprint(json.dumps(n.init()))\n")
    first, second = (json.loads(l) for l in p.stdout.splitlines())
    assert first == second and first["exporters"] == [] and first["endpoint"] is None
    assert p.stderr.count("--otlp-traces-endpoint") == 1


COLLECTOR_DOWN_THEN_BACK = """
import http.server, socket, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(1)  # a collector that never accepts nor answers
port = srv.getsockname()[1]
os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:%d/v1/traces" % port
info = n.init(perfetto=False)

class Engine(object):
    def step(self, x):
        return x + 1

Engine.step = n.Hook(Engine.__dict__["step"], name="vllm.engine.step")
e = Engine()
total = sum(e.step(i) for i in range(20000))
down = n.stats()
srv.close()
posts = []

class Collector(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        posts.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

http.server.HTTPServer.allow_reuse_address = True
back = http.server.HTTPServer(("127.0.0.1", port), Collector)
threading.Thread(target=back.serve_forever, daemon=True).start()
for i in range(10):
    e.step(i)
flushed = n.flush(timeout_ms=60000)
up = n.stats()
print(json.dumps({"exporters": info["exporters"], "total": total, "down": down, "flushed": flushed,
                  "posts": len(posts), "up": up}))
"""


def test_collector_down_never_blocks_hooks_drops_are_counted_and_export_resumes(native, subprocess_env):
    # docs/reference/behaviour.md: Jaeger/collector down or slow -> hooked calls run on,
    # spans are dropped with counters, export resumes when it is back.
    p = run_child(subprocess_env, COLLECTOR_DOWN_THEN_BACK, {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "300",
        "OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "16", "OTEL_BSP_SCHEDULE_DELAY": "10"})
    out = json.loads(p.stdout)
    assert out["exporters"] == ["otlp"]
    assert out["total"] == sum(range(1, 20001))  # every hooked call ran and returned
    down = out["down"]
    assert down["spans_started"] == 20000 and down["spans_exported"] == 0
    assert down["spans_dropped"] >= 10000  # a 64-span queue: the excess is counted and dropped, not held
    assert out["flushed"] is True and out["posts"] >= 1
    assert out["up"]["exporters"]["otlp"]["spans_exported"] >= 10


FLUSH_DURING_SHUTDOWN = """
import socket, threading, time
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)  # accepts the connection into the backlog, never answers
os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:%d/v1/traces" % srv.getsockname()[1]
n.init(perfetto=False)
h = n.Hook(lambda: 1, name="x")
for _ in range(20):  # two export batches of 16
    h()
res = []
flusher = threading.Thread(target=lambda: res.append(n.flush(timeout_ms=60000)))
flusher.start()
while n.stats()["queue_depth"] and flusher.is_alive():
    time.sleep(0.01)
time.sleep(0.2)  # the flusher now waits inside the core with the GIL released
n.shutdown()     # its own flush gives up after 5 s, inside the first export (5.5 s)
flusher.join()
print(json.dumps(res))
"""


def test_shutdown_while_another_thread_flushes_keeps_the_tracer(native, subprocess_env):
    # flush() releases the GIL and waits on the tracer's condition variable;
    # shutdown() on another thread used to free the tracer under it (the
    # flusher then slept on a destroyed condvar until its own timeout and read
    # freed memory, the second batch abandoned). Now the tracer is retired, and
    # the flush completes when both export attempts have ended.
    p = run_child(subprocess_env, FLUSH_DURING_SHUTDOWN, {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "5500",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "16", "OTEL_BSP_SCHEDULE_DELAY": "600000"})
    assert json.loads(p.stdout) == [True], p.stderr
    # the core's shutdown (which frees the tracer) did not run under the
    # waiting flush: it would have logged that its own flush timed out
    assert "tracer shutdown" not in p.stderr, p.stderr


def test_uninitialised_hooks_pass_through(native, subprocess_env):
    code = """
    cap = n._capture(True)
    h = n.Hook(lambda a: a + 1, name="x")
    assert h(1) == 2 and cap == []
    print("ok")
    """
    assert run_child(subprocess_env, code).stdout.strip() == "ok"


# ------------------------------------------------- the real Perfetto path


PIPELINE = """
import os, time
from dataclasses import dataclass, field
info = n.init(forward_socket=%(sock)r, otlp=False)
assert info["exporters"] == ["perfetto"], info

@dataclass
class SO:
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int

@dataclass
class Out:
    request_id: str
    finish_reason: object = None

@dataclass
class Req:
    request_id: str
    trace_headers: dict = None

class Core:
    def add_request(self, request): pass
    def schedule(self): return SO({"r1-0123abcd": 3, "r2-0123abcd": 4}, 7)
    def execute_model(self, so): self.inner(); return "x"
    def inner(self): pass
    def process(self, outputs): return len(outputs)

Core.add_request = n.Hook(Core.add_request, name="add", adapter="request")
Core.schedule = n.Hook(Core.schedule, name="vllm.scheduler.schedule", domain="Schedule", adapter="schedule")
Core.execute_model = n.Hook(Core.execute_model, name="vllm.model.execute", domain="Execute", adapter="model")
Core.inner = n.Hook(Core.inner, name="inner.call")
Core.process = n.Hook(Core.process, name="vllm.output.process", domain="Request", adapter="output")

c = Core()
c.add_request(Req("r1", {"traceparent": "00-%(t1)s-%(s1)s-01"}))
c.add_request(Req("r2", {"traceparent": "00-%(t2)s-%(s2)s-01"}))
so = c.schedule()
c.execute_model(so)
c.process([Out("r1-0123abcd"), Out("r2-0123abcd", "stop")])
pid = os.fork()
if pid == 0:
    c.inner()
    n.flush(5000)
    os._exit(0 if n.stats()["exporters"]["perfetto"]["spans_exported"] >= 1 else 3)
_, status = os.waitpid(pid, 0)
assert os.WEXITSTATUS(status) == 0, status
n.flush(5000)
st = n.stats()
assert st["exporters"]["perfetto"]["spans_failed"] == 0, st
print(json.dumps({"pid": os.getpid(), "child": pid, "stats": st}))
"""


def test_spans_reach_the_perfetto_daemon_including_a_forked_child(native, subprocess_env, daemon):
    p = run_child(subprocess_env, PIPELINE % {"sock": daemon.socket_name, "t1": T1, "s1": S1, "t2": T2, "s2": S2})
    out = json.loads(p.stdout)
    events = daemon.events(5)
    xs = [e for e in events if e.get("ph") == "X"]
    names = sorted(e["name"] for e in xs)
    assert names == sorted(["vllm.scheduler.schedule", "vllm.model.execute", "inner.call",
                            "vllm.output.process", "inner.call"]), names
    by = {}
    for e in xs:
        by.setdefault(e["name"], []).append(e)
    sched = by["vllm.scheduler.schedule"][0]
    assert sched["cat"] == "ms_service_profiler.hook.Schedule"
    assert sched["pid"] == out["pid"]
    assert sched["args"]["batch.scheduled_tokens"] == 7
    assert sched["args"]["request.ids"] == ["r1-0123abcd", "r2-0123abcd"]
    model = by["vllm.model.execute"][0]
    inner_parent = [e for e in by["inner.call"] if e["pid"] == out["pid"]]
    assert inner_parent and inner_parent[0]["args"]["parent_span_id"] == model["args"]["span_id"]
    assert inner_parent[0]["args"]["trace_id"] == model["args"]["trace_id"]
    assert [e for e in by["inner.call"] if e["pid"] == out["child"]], "no span from the forked child"
    flows = [e for e in events if e.get("cat") == "Tracing.Flow"]
    # two request links each on schedule, model and output: marked as request
    # links, so no flow is drawn for them; the file must still be valid JSON
    # (json.loads above).
    assert isinstance(flows, list)


def test_a_missing_step_field_is_named_once_per_process(native, subprocess_env):
    p = run_child(subprocess_env, """
        n.init(null_exporter=True)
        class SO:
            num_scheduled_tokens = {"q": 1}
            total_num_scheduled_tokens = 1
        class Sched:
            waiting = running = ()
            def schedule(self):
                return SO()
        Sched.schedule = n.Hook(Sched.schedule, name="vllm.scheduler.schedule", adapter="schedule")
        for _ in range(3):
            Sched().schedule()
        print(json.dumps(n.stats()["hook_failures"]))
    """)
    assert json.loads(p.stdout) == 0
    lines = p.stderr.splitlines()
    for field in ("Scheduler.requests", "SchedulerOutput.scheduled_new_reqs", "SchedulerOutput.preempted_req_ids",
                  "Scheduler.max_num_running_reqs"):
        assert sum(field in l for l in lines) == 1, p.stderr
    assert all("INFO" in l for l in lines if "could not be read" in l), p.stderr


WHOLE_STEP = """
info = n.init(forward_socket=%(sock)r, otlp=False)
assert info["exporters"] == ["perfetto"], info
ids = ["cmpl-%%032x-0-%%08x" %% (i, i) for i in range(1024)]
class SO:
    num_scheduled_tokens = {r: 1 + i %% 3 for i, r in enumerate(ids)}
    total_num_scheduled_tokens = sum(num_scheduled_tokens.values())
    scheduled_new_reqs = []
    preempted_req_ids = set(ids[:600])
    finished_req_ids = set()
class Sched:
    def schedule(self):
        return SO()
Sched.schedule = n.Hook(Sched.schedule, name="vllm.scheduler.schedule", adapter="schedule")
Sched().schedule()
assert n.flush(10000)
print(json.dumps(ids))
"""


def test_a_whole_1024_request_step_reaches_the_daemon(native, subprocess_env, daemon):
    """The lists of a step as big as vLLM's largest default max_num_seqs go
    through the real exporter, wire and forwarder uncut."""
    p = run_child(subprocess_env, WHOLE_STEP % {"sock": daemon.socket_name})
    ids = json.loads(p.stdout)
    (s,) = [e for e in daemon.events(1) if e.get("ph") == "X" and e["name"] == "vllm.scheduler.schedule"]
    a = s["args"]
    assert a["request.ids"] == ids and a["batch.request_count"] == 1024
    assert a["step.tokens"] == [str(1 + i % 3) for i in range(1024)]
    assert sorted(a["step.preempted_ids"]) == sorted(ids[:600])
