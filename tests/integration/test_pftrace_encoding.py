"""The `.pftrace` encoding of request-id lists (docs/architecture.md 1a "In the .pftrace"): ids as
interned string values, `request.ids` per stream as keyframes and deltas.

Owns: a file written before this encoding (tests/integration/data/steps_before_delta.pftrace, made
by pftrace_fixture.py with the forwarder of that time) and one the current forwarder writes from
the same stream give `mstrace analyze` the same analysis; the new file holds keyframes and deltas
and every span's request.ids rebuilds from them exactly (decoded with Perfetto's own protos); a
file missing a packet in the middle of a stream is analysed with a warning, without that stream's
lists until its next keyframe, and everything else the same.
"""

import json
import re
from pathlib import Path

from conftest import MAGIC, mstrace_binary
from pftrace_fixture import packets, write
from pftrace_model import iter_packets, read_pftrace
from test_analyze import analysis, analyze
from test_analyze_pftrace import close

OLD = Path(__file__).resolve().parent / "data" / "steps_before_delta.pftrace"


def comparable(a):
    del a["inputs"]
    for e in a["engines"]:
        del e["input_name"]  # the file's own name
    return a


def annotation_names(data):
    names = {}
    for _, p in iter_packets(data, whole=True):
        for e in p.interned_data.debug_annotation_names:
            names[e.name] = names.get(e.name, 0) + 1
    return names


def test_old_and_new_encoding_analyse_the_same(tmp_path):
    new = write(mstrace_binary(), tmp_path / "steps.pftrace")
    names = annotation_names(new.read_bytes())
    assert "request.ids.delta" in names and "request.ids" in names
    assert "request.ids.delta" not in annotation_names(OLD.read_bytes())
    assert new.stat().st_size < OLD.stat().st_size
    old_a, new_a = comparable(analysis(OLD)), comparable(analysis(new))
    assert new_a["data_quality"]["spans"] == len(packets())
    assert new_a["requests"]["preemptions"] == 2 and new_a["data_quality"]["steps_with_record"] == 72
    assert old_a == new_a, close(old_a, new_a, {"rel": 0, "abs": 0})[:10]


def test_request_ids_rebuild_exactly_from_keyframes_and_deltas(tmp_path):
    new = write(mstrace_binary(), tmp_path / "steps.pftrace")
    sent = {}
    for p in packets():
        s = json.loads(p[len(MAGIC):])
        if "request.ids" in s["attributes"]:
            sent[s["span_id"]] = s["attributes"]["request.ids"]
    got = {sl["args"]["span_id"]: sl["args"]["request.ids"]
           for sl in read_pftrace(new).slices if "request.ids" in sl["args"]}
    assert got == sent
    # how they were written: per stream (a span name on a thread) a keyframe,
    # then deltas, a keyframe again after 31 deltas or when a list is no delta
    counts = {"request.ids": 0, "request.ids.delta": 0}
    names = {}
    for _, p in iter_packets(new.read_bytes(), whole=True):
        names.update({e.iid: e.name for e in p.interned_data.debug_annotation_names})
        for a in p.track_event.debug_annotations:
            if names.get(a.name_iid) in counts:
                counts[names[a.name_iid]] += 1
    assert sum(counts.values()) == len(sent) == 3 * 2 * 36
    # each engine's schedule and model streams (36 spans): about 3 keyframes,
    # deltas the rest; the output spans of both engines share one thread, so
    # that stream alternates between two batches: keyframes
    assert counts["request.ids.delta"] >= 4 * 32


def drop_a_delta(data: bytes, span="vllm.model.execute", with_definitions=False):
    """The file without one span (its begin and end packets) whose request.ids is a delta, on the
    first engine's model stream (one whose packet defines no interned strings: a lost definition
    would cost more than the list), and (its span id, the span ids of that stream that follow it
    up to the stream's next keyframe)."""
    names, events, threads = {}, {}, {}
    pkts = list(iter_packets(data, whole=True))
    ends = [o for o, _ in pkts[1:]] + [len(data)]
    out, dropped, after, skip_next = bytearray(), None, [], False
    for (o, p), end in zip(pkts, ends):
        if p.sequence_flags & 1:
            names, events = {}, {}
        names.update({e.iid: e.name for e in p.interned_data.debug_annotation_names})
        events.update({e.iid: e.name for e in p.interned_data.event_names})
        if p.track_descriptor.HasField("thread"):
            threads[p.track_descriptor.uuid] = p.track_descriptor.thread.pid
        if skip_next:          # the dropped span's end: the packet after its begin
            skip_next = False
            continue
        te = p.track_event
        args = {names.get(a.name_iid): a for a in te.debug_annotations}
        if events.get(te.name_iid) == span and threads.get(te.track_uuid) == 300:
            delta = "request.ids.delta" in args
            if dropped is None and delta and args["request.ids.delta"].int_value >= 3 and \
                    p.HasField("interned_data") == with_definitions:
                dropped, skip_next = args["span_id"].string_value, True
                continue
            if dropped and delta and not after or (after and after[-1] is not None):
                after.append(args["span_id"].string_value if delta else None)
        out += data[o:end]
    assert dropped and after and after[-1] is None  # the stream's next keyframe came
    return bytes(out), dropped, after[:-1]


def test_a_lost_packet_costs_the_lists_up_to_the_next_keyframe(tmp_path):
    new = write(mstrace_binary(), tmp_path / "steps.pftrace")
    cut, dropped, after = drop_a_delta(new.read_bytes())
    broken = tmp_path / "lost.pftrace"
    broken.write_bytes(cut)
    proc = analyze(broken, "--json", str(tmp_path / "lost.json"))
    assert f"{len(after)} request-id lists left out" in proc.stderr + proc.stdout
    model = read_pftrace(broken, strict=False)
    by_id = {sl["args"]["span_id"]: sl["args"] for sl in model.slices}
    assert dropped not in by_id
    # the stream's spans after the hole have no list (the test model waits
    # for the keyframe as the reader does); the other engine is untouched
    assert all("request.ids" not in by_id[s] for s in after)
    full = {sl["args"]["span_id"]: sl["args"].get("request.ids") for sl in read_pftrace(new).slices}
    assert all(by_id[s].get("request.ids") == full[s] for s in by_id if s not in after)


def test_a_lost_definition_is_no_wrong_list(tmp_path):
    """The lost packet defined the ids its delta added (a schedule step's new requests): the next
    deltas name those ids by numbers the file no longer defines, so they give no list either —
    never a list missing the ids (the reader waits for the stream's keyframe)."""
    new = write(mstrace_binary(), tmp_path / "steps.pftrace")
    cut, dropped, after = drop_a_delta(new.read_bytes(), "vllm.scheduler.schedule", with_definitions=True)
    broken = tmp_path / "lost.pftrace"
    broken.write_bytes(cut)
    proc = analyze(broken, "--json", str(tmp_path / "lost.json"))
    # the schedule stream's lists up to its keyframe, and those of the model and output streams
    # that name the ids whose definitions were lost
    lost = re.search(r"(\d+) request-id lists left out", proc.stderr)
    assert lost and int(lost.group(1)) > len(after)
