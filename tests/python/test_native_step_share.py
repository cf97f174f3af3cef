"""The model spans of a step reuse the schedule adapter's batch
(python/mstrace/_native/step_share.c): with the single-process executor the
executor's, the worker's and the model runner's execute_model run on the
engine thread after schedule(), each given the same SchedulerOutput, and
none of them reads it again.

Owns: a model span given the step's own SchedulerOutput carries the step's
request.ids, batch sizes and step.index, the step's request links (every
request, more than the 128 a span used to carry) and one more to the step's
span; a lone request stays its parent; nested model spans all reuse it; a
SchedulerOutput that is not the step's (a worker in another process sees a
copy) is read in full as before; a batch of unsampled requests records no
model span; the ids stay valid while the next step is scheduled during a
model call. Spans are read through `_native._capture`.
"""

import copy

import pytest


# vLLM-shaped stand-ins, the same as the adapters' tests use
from test_native_adapters import CachedRequestData, NewRequestData, SchedulerOutput  # noqa: E402
from test_native_robust import cap  # noqa: E402,F401  (the span-capture fixture)


def scheduler_output(counts):
    return SchedulerOutput([NewRequestData(r) for r in counts], CachedRequestData([]), dict(counts),
                           sum(counts.values()))


T1 = "0af7651916cd43dd8448eb211c80319c"


def register(native, n, flags="01", prefix="req"):
    ids = ["%s-%04d" % (prefix, i) for i in range(n)]
    for i, r in enumerate(ids):
        native.register_request(r, {"traceparent": "00-%s-%016x-%s" % (T1, i + 1, flags)})
    return ids


class Engine:
    """schedule() then the executor, which calls the worker, which calls the
    model runner: vLLM's single-process executor on one thread."""

    def __init__(self, so):
        self.so = so
        self.during_worker = None

    def schedule(self):
        return self.so

    def execute_model(self, scheduler_output):
        return self.worker(scheduler_output)

    def worker(self, scheduler_output):
        if self.during_worker:
            self.during_worker()
        return self.runner(scheduler_output, None)

    def runner(self, scheduler_output, intermediate_tensors):
        return "out"


@pytest.fixture
def engine(native):
    saved = dict(Engine.__dict__)
    Engine.schedule = native.Hook(saved["schedule"], name="vllm.scheduler.schedule", domain="Schedule",
                                  adapter="schedule")
    for attr, name in (("execute_model", "vllm.model.execute"), ("worker", "vllm.worker.execute_model"),
                       ("runner", "vllm.model_runner.execute")):
        setattr(Engine, attr, native.Hook(saved[attr], name=name, domain="Execute", adapter="model"))
    yield Engine
    for attr in ("schedule", "execute_model", "worker", "runner"):
        setattr(Engine, attr, saved[attr])


MODEL_SPANS = ("vllm.model.execute", "vllm.worker.execute_model", "vllm.model_runner.execute")


def by_name(cap):
    out = {}
    for s in cap:
        out.setdefault(s["name"], []).append(s)
    return out


def test_model_spans_of_the_step_reuse_its_batch_and_link_its_span(native, cap, engine):
    ids = register(native, 300)
    e = engine(scheduler_output({r: 1 for r in ids}))
    so = e.schedule()
    assert e.execute_model(so) == "out"
    spans = by_name(cap)
    step = spans["vllm.scheduler.schedule"][0]
    # the step span links every request it carried (more than the old 128)
    assert [l["request.id"] for l in step["links"]] == ids
    for name in MODEL_SPANS:
        (m,) = spans[name]
        a = m["attributes"]
        assert a["request.ids"] == ids
        assert a["batch.request_count"] == 300 and a["batch.scheduled_tokens"] == 300
        assert a["step.index"] == step["attributes"]["step.index"]
        # the step's span first (a link of its own), then the request links (a block)
        assert m["links"] == [{"trace_id": step["trace_id"], "span_id": step["span_id"]}] + step["links"]
    ex, wk, rn = (spans[n][0] for n in MODEL_SPANS)
    assert wk["parent_span_id"] == ex["span_id"] and rn["parent_span_id"] == wk["span_id"]


def test_a_lone_request_stays_parent(native, cap, engine):
    (rid,) = register(native, 1)
    e = engine(scheduler_output({rid: 5}))
    e.execute_model(e.schedule())
    spans = by_name(cap)
    ex, step = spans["vllm.model.execute"][0], spans["vllm.scheduler.schedule"][0]
    assert ex["trace_id"] == T1 and ex["parent_span_id"] == "%016x" % 1
    assert ex["links"] == [{"trace_id": step["trace_id"], "span_id": step["span_id"]},
                           {"trace_id": T1, "span_id": "%016x" % 1, "request.id": rid}]
    assert ex["attributes"]["request.ids"] == [rid]


def test_another_scheduler_output_is_read_in_full(native, cap, engine):
    ids = register(native, 3)
    e = engine(scheduler_output({r: 2 for r in ids}))
    so = e.schedule()
    e.runner(copy.copy(so), None)  # the same content, not the step's object: a worker elsewhere
    rn = by_name(cap)["vllm.model_runner.execute"][0]
    assert "step.index" not in rn["attributes"]
    assert [l["request.id"] for l in rn["links"]] == ids
    assert rn["attributes"]["request.ids"] == ids


def test_unsampled_requests_record_no_model_span(native, cap, engine):
    ids = register(native, 4, flags="00")
    e = engine(scheduler_output({r: 1 for r in ids}))
    e.execute_model(e.schedule())
    assert cap == []


def test_the_ids_outlive_the_next_step(native, cap, engine):
    ids = register(native, 8)
    e = engine(scheduler_output({r.encode().decode(): 1 for r in ids}))  # id strings of its own
    so = e.schedule()
    e.so = None
    others = register(native, 2, prefix="next")

    def next_step():  # the next step is scheduled while this one's model spans are open
        e.so = scheduler_output({r: 1 for r in others})
        e.schedule()

    e.during_worker = next_step
    so.num_scheduled_tokens = {}  # only the step share still holds the id strings
    so.scheduled_new_reqs = []
    e.execute_model(so)
    spans = by_name(cap)
    for name in ("vllm.model.execute", "vllm.worker.execute_model"):
        assert spans[name][0]["attributes"]["request.ids"] == ids
    # the runner is called after the next step was scheduled: not that step's object, read in full
    assert "request.ids" not in spans["vllm.model_runner.execute"][0]["attributes"]
