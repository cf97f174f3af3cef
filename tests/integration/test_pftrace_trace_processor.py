"""What Perfetto itself makes of the forwarder's traces: one span stream,
written by the real daemon as `.pftrace` and `.json` in the same run, loaded
into Perfetto's own trace processor (the WebAssembly build of Perfetto v20.1
that the UI package pinned in scripts/deps.sh ships; perfetto_wasm.py) and
checked with SQL on the tables the UI draws from.

Owns: the .pftrace imports with no error or data-loss stats; processes and
threads carry our names; every span is a slice with its name, timestamp and
duration on its thread; request tracks exist with their phase slices; the
counters have the values sent; attributes appear as args; flows join the
linked slices; the .json of the same stream gives Perfetto the same
slices, counters, args and linked slices; names and values still resolve
after the writer restarts interning; a request's phases from step records
(queued, prefill chunks, decode, preempted, markers) and the preemptions
counter, the same in both encodings.

v20 predates six fields of the current trace protos that the .pftrace
uses (docs/forwarder.md "Native Perfetto"): TrackEvent.flow_ids (field 47,
since v28), DebugAnnotation.string_value_iid with
InternedData.debug_annotation_string_values (since v33), and, harmless,
TracePacket.first_packet_on_sequence (v29) and TrackDescriptor
child_ordering/sibling_order_rank (v49). It ignores them silently: the raw
file loads without flows and without the string values interned from their
second use. The flow and args checks therefore also run on a copy re-encoded
with the older equivalents (flow_ids_old = 36, inline string_value), which
the current trace processor reads through the same code path
(track_event_event_importer.h takes flow_ids or else flow_ids_old); the test
pins that those are the only differences between the two loads. v20 also
keeps no parent for global tracks (no track.parent_id), so "request tracks
under Requests" is checked as far as it can: the tracks and the Requests
track exist. Nor does v20's JSON importer read async `b`/`e` events, so the
JSON's request tracks are compared with nothing there.
"""

import json
from collections import Counter
from decimal import Decimal

import pytest

import perfetto_wasm
from conftest import MAGIC, make_packet
from pftrace_model import iter_packets
from test_pftrace import REQ, seed_scenario, wait_received

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

SEQ_INCREMENTAL_STATE_CLEARED = 1
SPAN_ID_KEYS = "('debug.span_id', 'args.span_id')"

QUERIES = {
    "stats": "SELECT name, idx, severity, source, value FROM stats WHERE value > 0 ORDER BY name",
    "processes": "SELECT pid, name FROM process WHERE pid != 0",
    "threads": "SELECT p.pid, t.tid, t.name FROM thread t JOIN process p USING(upid) "
               "WHERE t.name IS NOT NULL",
    # slices on a thread's tracks (its own, or a lane for spans that overlap)
    "spans": "SELECT s.id, s.ts, s.dur, s.name, s.category, p.pid, t.tid, "
             f"(SELECT string_value FROM args a WHERE a.arg_set_id = s.arg_set_id AND a.key IN {SPAN_ID_KEYS}) "
             "AS span_id FROM slice s JOIN thread_track tt ON s.track_id = tt.id "
             "JOIN thread t USING(utid) JOIN process p USING(upid)",
    "lanes": "SELECT tt.name, t.tid, COUNT(s.id) AS slices FROM thread_track tt JOIN thread t USING(utid) "
             "JOIN slice s ON s.track_id = tt.id WHERE tt.name GLOB 'overlapping spans*' GROUP BY tt.id",
    "global_tracks": "SELECT id, name FROM track WHERE type = 'track'",
    "request_slices": "SELECT tr.name AS track, s.name, s.ts, s.dur, s.depth FROM slice s "
                      "JOIN track tr ON s.track_id = tr.id WHERE tr.type = 'track'",
    "flows": "SELECT "
             f"(SELECT string_value FROM args a WHERE a.arg_set_id = so.arg_set_id AND a.key IN {SPAN_ID_KEYS}) AS out_span, "
             f"(SELECT string_value FROM args a WHERE a.arg_set_id = si.arg_set_id AND a.key IN {SPAN_ID_KEYS}) AS in_span "
             "FROM flow f JOIN slice so ON so.id = f.slice_out JOIN slice si ON si.id = f.slice_in",
    "counters": "SELECT p.pid, t.name, c.ts, c.value FROM counter c "
                "JOIN process_counter_track t ON c.track_id = t.id JOIN process p USING(upid)",
    "args": "SELECT sp.string_value AS span_id, a.key, a.int_value, a.string_value, a.real_value "
            "FROM slice s JOIN args sp ON sp.arg_set_id = s.arg_set_id AND sp.key IN "
            f"{SPAN_ID_KEYS} JOIN args a ON a.arg_set_id = s.arg_set_id",
}


def extra_stream():
    """Beside the seed: links chained n-1 <- n every third span, attribute
    values of every kind, non-ASCII and quoted names, three processes, and
    four spans on one thread that overlap without nesting (lanes), at
    real-clock timestamps."""
    out = []
    for n in range(60):
        link = ("9" * 32, f"00b0{n - 1:012x}") if n % 3 == 0 and n else None
        out.append(make_packet(
            "test.step" if n % 2 else "tést \"quoted\"", "9" * 32, f"00b0{n:012x}",
            20_000_000 + n * 10_000, 20_000_000 + n * 10_000 + 7_000, link=link,
            attrs={"f": 1.5 + n, "b": n % 2 == 0, "s": f"v{n % 4}", "i": -n, "l": [n, "x"],
                   "big": -(2 ** 62), "o": {"k": n, "m": {"z": "q"}}, "nul": None},
            pid=400 + n % 3, tid=410 + n % 2))
    # [1+i, 6+i] ms on one thread, each overlapping the next, at Unix-epoch
    # nanoseconds with odd digits (timestamps must survive exactly)
    epoch = 1_796_083_000_123_456_789
    for i in range(4):
        out.append(make_packet("overlap", "a" * 32, f"00c0{i:012x}", epoch + i * 1_000_003,
                               epoch + 5_000_001 + i * 1_000_007, pid=50, tid=51))
    return out


def spans_of(packets):
    return [json.loads(p[len(MAGIC):]) for p in packets]


def write_both(mstrace_bin, tmp, stem, packets):
    """One daemon writes the packets as <stem>.json and <stem>.pftrace."""
    from conftest import Daemon
    d = Daemon(mstrace_bin, tmp / f"{stem}.json")
    base = d.argv
    d.argv = lambda: base() + ["--perfetto-output", str(tmp / f"{stem}.pftrace")]
    d.start()
    try:
        d.send(*packets)
        wait_received(d, len(packets))
        assert d.stop() == 0
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
    return d


@pytest.fixture(scope="module")
def written(mstrace_bin, tmp_path_factory):
    """The stream, written once by one daemon as .json and .pftrace."""
    perfetto_wasm.require()   # skip before starting anything when Node is missing
    tmp = tmp_path_factory.mktemp("tp")
    packets = seed_scenario() + extra_stream()
    d = write_both(mstrace_bin, tmp, "run", packets)
    old = tmp / "run.v20.pftrace"
    old.write_bytes(older_encoding((tmp / "run.pftrace").read_bytes()))
    return dict(spans=spans_of(packets), daemon_pid=d.proc.pid, json=tmp / "run.json",
                pftrace=tmp / "run.pftrace", pftrace_v20=old)


def older_encoding(data: bytes) -> bytes:
    """The same trace with the fields v20 lacks in their older form: flow ids
    as flow_ids_old (36) instead of flow_ids (47); interned debug annotation
    string values inline (string_value) instead of string_value_iid. Interned
    values are resolved per sequence as Perfetto does (the table restarts on
    SEQ_INCREMENTAL_STATE_CLEARED)."""
    out = pb.Trace()
    values = {}

    def inline(a):
        if a.HasField("string_value_iid"):
            a.string_value = values[a.string_value_iid]
        for sub in list(a.dict_entries) + list(a.array_values):
            inline(sub)

    for _, p in iter_packets(data, whole=True):
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED:
            values.clear()
        for e in p.interned_data.debug_annotation_string_values:
            values[e.iid] = e.str.decode("utf-8")
        p.interned_data.ClearField("debug_annotation_string_values")
        if p.HasField("track_event"):
            te = p.track_event
            ids = list(te.flow_ids)
            te.ClearField("flow_ids")
            te.flow_ids_old.extend(ids)
            for a in te.debug_annotations:
                inline(a)
        out.packet.append(p)
    return out.SerializeToString()


_loaded = {}


def loaded(written, which):
    if which not in _loaded:
        _loaded[which] = perfetto_wasm.load(written[which], QUERIES)
    return _loaded[which]


def import_errors(tp):
    return {r["name"]: r["value"] for r in tp.rows("stats") if r["severity"] in ("error", "data_loss")}


REQUEST_THREAD = "a request's own thread"  # tids from 2^30: threads the forwarder adds


def span_slices(tp):
    """The spans' slices (the forwarder's own B/E slices on its request
    threads carry no span id and are left out)."""
    return Counter((r["span_id"], r["name"], r["ts"], r["dur"], r["pid"],
                    REQUEST_THREAD if r["tid"] >= 1 << 30 else r["tid"])
                   for r in tp.rows("spans") if r["span_id"] is not None)


def expected_span_slices(written):
    """Every span on its thread; a vllm.request span on its request's own."""
    return Counter((s["span_id"], s["name"], s["start_time_ns"], s["end_time_ns"] - s["start_time_ns"],
                    s["attributes"]["process.pid"],
                    REQUEST_THREAD if s["name"] == "vllm.request" else s["attributes"]["thread.id"])
                   for s in written["spans"])


def linked_groups(written):
    """span id of each linked span -> the spans linking to it, by start."""
    start = {s["span_id"]: s["start_time_ns"] for s in written["spans"]}
    groups = {}
    for s in written["spans"]:
        for link in s["links"]:
            groups.setdefault(link["span_id"], []).append(s["span_id"])
    return {src: sorted(dests, key=start.get) for src, dests in groups.items()}, start


def components(edges):
    """The sets of slices flows join (by span id)."""
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for a, b in edges:
        parent[find(a)] = find(b)
    groups = {}
    for x in parent:
        groups.setdefault(find(x), set()).add(x)
    return sorted(sorted(g) for g in groups.values())


def normalized_args(tp, prefix):
    """span id -> {key without the importer's prefix: value}."""
    out = {}
    for r in tp.rows("args"):
        if not r["key"].startswith(prefix):
            continue
        v = r["int_value"] if r["int_value"] is not None else (
            r["real_value"] if r["real_value"] is not None else r["string_value"])
        out.setdefault(r["span_id"], {})[r["key"][len(prefix):]] = v
    return out


def items_of(a, key):
    """The list Perfetto flattened into key[0], key[1], ... (removed from a)."""
    out, i = [], 0
    while f"{key}[{i}]" in a:
        out.append(a.pop(f"{key}[{i}]"))
        i += 1
    return out


def with_request_ids(written, args):
    """The args with request.ids as each span carried it: the forwarder writes
    it whole at a stream's keyframe, and between keyframes only as the change
    to the previous span of the stream (the same name on the same thread):
    request.ids.delta (its place since the keyframe), .left and .joined
    (docs/architecture.md 1a). Replayed here in file order — the order the
    spans were sent — from what Perfetto shows."""
    streams, out = {}, {}
    for s in written["spans"]:
        a = dict(args[s["span_id"]])
        key = (s["attributes"]["process.pid"], s["attributes"]["thread.id"], s["name"])
        if "request_ids_delta" in a:
            pos = a.pop("request_ids_delta")
            left, joined = set(items_of(a, "request_ids_left")), items_of(a, "request_ids_joined")
            assert streams[key][0] + 1 == pos, (key, pos)
            ids = [i for i in streams[key][1] if i not in left] + joined
            streams[key] = (pos, ids)
            a.update({f"request_ids[{i}]": v for i, v in enumerate(ids)})
        elif "request_ids[0]" in a:
            streams[key] = (0, items_of(dict(a), "request_ids"))
        out[s["span_id"]] = a
    return out


def flatten(key, value, out):
    """An attribute as Perfetto's args: arrays key[i], objects key.sub,
    booleans 0/1, null absent."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            flatten(f"{key}[{i}]", v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{key}.{k}", v, out)
    elif value is not None:
        out[key] = int(value) if isinstance(value, bool) else value


# ---------------------------------------------------------------- .pftrace

@pytest.mark.parametrize("which", ["pftrace", "pftrace_v20"])
def test_pftrace_imports_without_errors(written, which):
    tp = loaded(written, which)
    print(f"{tp.version}: {which} stats {[(r['name'], r['severity'], r['value']) for r in tp.rows('stats')]}")
    assert tp.version.startswith("Perfetto v20.1"), tp.version
    assert tp.append_error is None
    assert import_errors(tp) == {}


def test_pftrace_processes_threads_and_spans(written):
    tp = loaded(written, "pftrace")
    procs = {r["pid"]: r["name"] for r in tp.rows("processes")}
    assert procs[300] == "engine_core (vllm)"
    assert procs[100] == "api_server (vllm)"
    assert procs[written["daemon_pid"]] == "mstrace forward"
    assert {(r["pid"], r["tid"]): r["name"] for r in tp.rows("threads")}[(300, 301)] == "EngineCore"
    # every span is one slice with its name, start and duration on its thread
    assert span_slices(tp) == expected_span_slices(written)
    # spans of one thread that overlap without nesting sit on lanes under it
    lanes = tp.rows("lanes")
    assert lanes and {r["tid"] for r in lanes} == {51}
    assert sum(r["slices"] for r in lanes) >= 2
    cats = {r["category"] for r in tp.rows("spans")}
    assert cats == {"ms_service_profiler.hook.Tracing"}


def test_pftrace_request_tracks_and_phases(written):
    tp = loaded(written, "pftrace")
    # (v20 also lists the root descriptor, uuid 0, as a track without a name:
    # it only asks for the threads' order; today's importer makes no track of it)
    names = Counter(r["name"] for r in tp.rows("global_tracks") if r["name"] is not None)
    assert names == Counter({"Requests": 1, "req-A": 1, "req-B": 1})
    threads = {(r["pid"], r["tid"]): r["name"] for r in tp.rows("threads")}
    assert [n for (pid, tid), n in threads.items() if tid >= 1 << 30] == ["req-A"]  # its vllm.request
    got = sorted((r["track"], r["name"], r["ts"], r["dur"], r["depth"]) for r in tp.rows("request_slices"))
    assert got == sorted([
        ("req-A", "request", 1_000_000, 6_000_000, 0),
        ("req-A", "queued", 1_000_000, 1_000_000, 1),
        ("req-A", "prefill", 2_000_000, 3_500_000, 1),
        ("req-A", "decode", 5_500_000, 1_500_000, 1),
        ("req-B", "request", 2_000_000, 3_000_000, 0),
        ("req-B", "prefill", 2_000_000, 3_000_000, 1),
    ])


def test_pftrace_counters_have_the_values_sent(written):
    tp = loaded(written, "pftrace")
    c = {(r["pid"], r["name"], r["ts"]): r["value"] for r in tp.rows("counters")}
    engine = {k: v for k, v in c.items() if k[0] == 300}
    assert engine == {
        (300, "batch size (requests)", 3_000_000): 2, (300, "batch size (requests)", 5_600_000): 1,
        (300, "scheduled tokens (tokens)", 3_000_000): 37, (300, "scheduled tokens (tokens)", 5_600_000): 1,
        (300, "waiting (requests)", 3_000_000): 3, (300, "waiting (requests)", 5_600_000): 3,
        (300, "running (requests)", 3_000_000): 2, (300, "running (requests)", 5_600_000): 2,
        (300, "KV cache usage (%)", 3_000_000): 43.75, (300, "KV cache usage (%)", 5_600_000): 50,
    }
    own = sorted((ts, name, v) for (pid, name, ts), v in c.items() if pid == written["daemon_pid"])
    last = {name: v for _, name, v in own}
    n = len(written["spans"])
    assert last == {"forwarder.spans_received": n, "forwarder.spans_written": n,
                    "forwarder.spans_dropped": 0}


def test_pftrace_flows_join_the_linked_slices(written):
    """Perfetto's flow_ids are one flow per id through every event that
    carries it, in time order: a span linked by several spans is joined to
    all of them as a chain (source -> 1st linker -> 2nd ...), not a fan."""
    assert loaded(written, "pftrace").rows("flows") == []   # v20 ignores field 47
    tp = loaded(written, "pftrace_v20")
    groups, _ = linked_groups(written)
    want = set()
    for src, dests in groups.items():
        chain = [src] + dests
        want |= set(zip(chain, chain[1:]))
    got = [(r["out_span"], r["in_span"]) for r in tp.rows("flows")]
    assert len(got) == len(set(got))
    assert set(got) == want
    assert (REQ[1], "4" * 16) in want   # the seed's request -> its first schedule step


def test_pftrace_args_are_the_attributes(written):
    tp = loaded(written, "pftrace_v20")
    args = with_request_ids(written, normalized_args(tp, "debug."))
    # the stream's second schedule span carries its list as a delta
    assert "request_ids_delta" in normalized_args(tp, "debug.")["8" * 16]
    for s in written["spans"]:
        a = args[s["span_id"]]
        assert a["trace_id"] == s["trace_id"] and a["span_id"] == s["span_id"]
        want = {}
        for key, value in s["attributes"].items():
            if key not in ("process.pid", "thread.id"):
                flatten(key.replace(".", "_"), value, want)
        assert {k: v for k, v in a.items() if k in want} == want, s["span_id"]
        assert "nul" not in a   # a null attribute is no arg, as in the JSON importer


def test_v20_loses_only_flows_and_interned_strings(written):
    """Pins the v20 limits: the raw file and its older-encoding copy load to
    the same tables except the flows and the args whose string value was
    interned (string_value_iid)."""
    raw, old = loaded(written, "pftrace"), loaded(written, "pftrace_v20")
    for q in ("processes", "threads", "spans", "lanes", "global_tracks", "request_slices", "counters"):
        assert sorted(map(repr, raw.rows(q))) == sorted(map(repr, old.rows(q))), q
    ra, oa = normalized_args(raw, "debug."), normalized_args(old, "debug.")
    lost = {(span, k): v for span, kv in oa.items() for k, v in kv.items() if k not in ra.get(span, {})}
    assert lost and all(isinstance(v, str) for v in lost.values())
    assert all(ra[span][k] == oa[span][k] for span in ra for k in ra[span])


# ------------------------------------------------------------------- .json

def test_json_gives_perfetto_the_same_spans_counters_and_args(written):
    tj, tp = loaded(written, "json"), loaded(written, "pftrace_v20")
    print(f"{tj.version}: json stats {[(r['name'], r['severity'], r['value']) for r in tj.rows('stats')]}")
    assert tj.append_error is None
    assert span_slices(tj) == span_slices(tp) == expected_span_slices(written)
    # v20's JSON importer has no async b/e events (today's does): the JSON's
    # request tracks are skipped without a stats row
    assert tj.rows("request_slices") == [] and tp.rows("request_slices")
    assert sorted(map(repr, tj.rows("processes"))) == sorted(map(repr, tp.rows("processes")))
    # the traced threads, and the request threads holding a vllm.request span,
    # have the same names (the JSON has a thread for every request: its
    # phases; the .pftrace draws a request without a span under "Requests")
    spans = {(r["pid"], r["tid"]) for r in tp.rows("spans")}
    tjt = sorted(repr(r) for r in tj.rows("threads") if r["tid"] < 1 << 30 or (r["pid"], r["tid"]) in spans)
    assert tjt == sorted(map(repr, tp.rows("threads")))
    # the JSON importer names a counter "<name> <arg>": the arg is the unit
    # ("KV cache usage" "(%)"), or "value" for the forwarder's own
    cj = sorted((r["pid"], r["name"].removesuffix(" value"), r["ts"], r["value"]) for r in tj.rows("counters"))
    cp = sorted((r["pid"], r["name"], r["ts"], r["value"]) for r in tp.rows("counters"))
    assert cj == cp and len(cp) >= 10
    # same args per span; Perfetto keys proto debug annotations "debug.<name
    # with dots as _>" and JSON args "args.<name>"
    aj, ap = normalized_args(tj, "args."), with_request_ids(written, normalized_args(tp, "debug."))
    assert set(aj) == set(ap) == {s["span_id"] for s in written["spans"]}
    for span in ap:
        assert ({k.replace(".", "_"): v for k, v in aj[span].items()} ==
                {k.replace(".", "_"): v for k, v in ap[span].items()}), span


# The JSON's flow ids are hexadecimal numbers: Perfetto's JSON importer (v20
# and today's json_trace_parser.cc alike) reads a string "id" of an s/t/f
# event only as one, and refused the readable "<srcTrace>:<srcSpan>:<destSpan>"
# ids the forwarder wrote before (stats flow_invalid_id = 2 per link, no
# arrows). That text is now the events' args.link.

def test_json_flows_join_the_same_slices(written):
    tj, tp = loaded(written, "json"), loaded(written, "pftrace_v20")
    links = sum(len(s["links"]) for s in written["spans"])
    j = [(r["out_span"], r["in_span"]) for r in tj.rows("flows")]
    p = [(r["out_span"], r["in_span"]) for r in tp.rows("flows")]
    assert len(j) == links  # one arrow per link, from the linked span
    assert components(j) == components(p)


def test_json_imports_without_errors(written):
    tj = loaded(written, "json")
    assert import_errors(tj) == {}


# ------------------------------------------------------- interning restarts

def test_names_and_values_resolve_across_interning_restarts(daemon_factory, tmp_path):
    """9,000 distinct span names and 3,000 annotation names overflow the
    writer's intern table (8,192 entries), so the file restarts interning
    (SEQ_INCREMENTAL_STATE_CLEARED) mid-stream: Perfetto must still give
    every slice its own name and every arg its own key and value."""
    perfetto_wasm.require()
    n = 9000
    packets = [make_packet(f"name-{i}", "b" * 32, f"00d0{i:012x}", 1_000_000 + i * 1000,
                           1_000_500 + i * 1000, attrs={f"k{i % 3000}": f"val-{i % 5000}"},
                           pid=60, tid=61) for i in range(n)]
    d = daemon_factory(output=tmp_path / "intern.pftrace").start()
    d.send(*packets)
    wait_received(d, n)
    assert d.stop() == 0
    data = d.output.read_bytes()
    restarts = sum(1 for _, p in iter_packets(data, whole=True)
                   if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED)
    assert restarts >= 2   # the first packet, then at least one restart
    old = tmp_path / "intern.v20.pftrace"
    old.write_bytes(older_encoding(data))
    q = {"stats": QUERIES["stats"], "names": "SELECT ts, name FROM slice",
         "args": "SELECT s.ts, s.name, a.key, a.string_value FROM slice s "
                 "JOIN args a ON a.arg_set_id = s.arg_set_id AND a.key GLOB 'debug.k*'"}
    want = [(1_000_000 + i * 1000, f"name-{i}") for i in range(n)]
    for path in (d.output, old):
        tp = perfetto_wasm.load(path, q)
        assert import_errors(tp) == {}
        assert sorted((r["ts"], r["name"]) for r in tp.rows("names")) == want
    # the args in full from the copy v20 reads whole (string values inline)
    got = sorted((r["ts"], r["name"], r["key"], r["string_value"]) for r in tp.rows("args"))
    assert got == [(1_000_000 + i * 1000, f"name-{i}", f"debug.k{i % 3000}", f"val-{i % 5000}")
                   for i in range(n)]


# ------------------------------------------------- phases from step records

STEP_T0 = 1_796_083_100_000_000_000


def step_stream():
    """A request's life told by step records (docs/architecture.md "1a"):
    queued, two prefill chunks, decode, preempted by another request's step,
    resumed with one chunk that samples, decode to the end."""
    t = lambda us: STEP_T0 + us * 1000  # noqa: E731
    base = {"scheduler.waiting": 1, "scheduler.running": 1, "process.role": "engine_core"}
    steps = [
        (300, {"request.ids": ["r1"], "step.phase": "p", "step.new_ids": ["r1"],
               "step.queued_ns": [str(t(200))], "step.tokens": ["64"], "step.index": 0}),
        (400, {"request.ids": ["r1"], "step.phase": "P", "step.tokens": ["32"], "step.index": 1}),
        (500, {"request.ids": ["r1"], "step.phase": "d", "step.tokens": ["1"], "step.index": 2}),
        (600, {"request.ids": ["r1"], "step.phase": "d", "step.tokens": ["1"], "step.index": 3}),
        (700, {"request.ids": ["r2"], "step.phase": "P", "step.tokens": ["50"], "step.new_ids": ["r2"],
               "step.queued_ns": ["0"], "step.preempted_ids": ["r1"], "step.index": 4}),
        (900, {"request.ids": ["r2", "r1"], "step.phase": "dP", "step.tokens": ["1", "98"],
               "step.resumed_ids": ["r1"], "step.index": 5}),
        (1000, {"request.ids": ["r1"], "step.phase": "d", "step.tokens": ["1"], "step.index": 6}),
    ]
    out = [make_packet("vllm.scheduler.schedule", "e" * 32, f"00e0{i:012x}", t(us), t(us + 10),
                       attrs=dict(base, **a), pid=300, tid=301) for i, (us, a) in enumerate(steps)]
    out.append(make_packet("vllm.request", "f" * 32, "00f0000000000001", t(100), t(2000),
                           attrs={"request.id": "r1", "process.role": "api_server"}, pid=100, tid=101))
    out.append(make_packet("vllm.request", "f" * 32, "00f0000000000002", t(650), t(950),
                           attrs={"request.id": "r2", "process.role": "api_server"}, pid=100, tid=101))
    return out


R1_PHASES = [  # (name, start us, end us) relative to STEP_T0, nested in the request slice
    ("queued", 200, 300), ("prefill chunk 1", 300, 400), ("prefill chunk 2", 400, 500),
    ("decode", 500, 700), ("preemption", 700, 700), ("preempted", 700, 900), ("resume", 900, 900),
    ("prefill chunk 1", 900, 1000), ("decode", 1000, 2000),
]


@pytest.fixture(scope="module")
def step_written(mstrace_bin, tmp_path_factory):
    perfetto_wasm.require()
    tmp = tmp_path_factory.mktemp("steps")
    write_both(mstrace_bin, tmp, "steps", step_stream())
    q = {"stats": QUERIES["stats"], "request_slices": QUERIES["request_slices"],
         "counters": QUERIES["counters"],
         "request_args": "SELECT tr.name AS track, a.key, a.int_value FROM slice s JOIN track tr "
                         "ON s.track_id = tr.id JOIN args a ON a.arg_set_id = s.arg_set_id "
                         "WHERE tr.type = 'track' AND s.name = 'request' AND a.int_value IS NOT NULL"}
    return dict(pftrace=perfetto_wasm.load(tmp / "steps.pftrace", q), json=tmp / "steps.json",
                json_tp=perfetto_wasm.load(tmp / "steps.json", q))


def json_request_slices(path):
    """The JSON's request tracks as (track, name, ts, dur, depth) in ns: a
    request's thread (named by its id) holds its vllm.request X event (the
    outer "request" slice of the .pftrace's request track) and its phases as
    B/E events nested in it, paired as Perfetto pairs them (an E ends the
    innermost open B of its thread), its markers as instants."""
    events = json.loads(path.read_text(), parse_float=Decimal)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    ns = lambda us: int(Decimal(us) * 1000)  # µs with 3 decimals: exact ns
    outer = {(e["pid"], e["tid"]): e for e in events if e.get("ph") == "X" and e["name"] == "vllm.request"}
    out = [(names[k], "request", ns(e["ts"]), ns(e["dur"]), 0) for k, e in outer.items()]
    open_ = {}
    for e in events:  # file order: ties keep it, as the importer sorts stably
        if e.get("cat") != "mstrace.request" or e.get("ph") not in "BEi":
            continue
        key = (e["pid"], e["tid"])
        stack = open_.setdefault(key, [])
        if e["ph"] == "i":  # a marker: a zero-length slice in the .pftrace
            out.append((names[key], e["name"], ns(e["ts"]), 0, len(stack) + (key in outer)))
        elif e["ph"] == "B":
            stack.append((e["name"], ns(e["ts"])))
        else:
            name, start = stack.pop()
            assert name == e["name"]
            out.append((names[key], name, start, ns(e["ts"]) - start, len(stack) + (key in outer)))
    assert all(not s for s in open_.values())
    return sorted(out)


def test_step_record_phases_on_request_tracks(step_written):
    tp = step_written["pftrace"]
    assert import_errors(tp) == {}
    got = sorted((r["track"], r["name"], r["ts"], r["dur"], r["depth"]) for r in tp.rows("request_slices"))
    want = [("r1", "request", STEP_T0 + 100_000, 1_900_000, 0)] + [
        ("r1", n, STEP_T0 + a * 1000, (b - a) * 1000, 1) for n, a, b in R1_PHASES]
    # r2: arrival 650, first scheduled 700 (queued_ns unknown: from arrival), done at 950
    want += [("r2", "request", STEP_T0 + 650_000, 300_000, 0), ("r2", "queued", STEP_T0 + 650_000, 50_000, 1),
             ("r2", "prefill chunk 1", STEP_T0 + 700_000, 200_000, 1),
             ("r2", "decode", STEP_T0 + 900_000, 50_000, 1)]
    assert got == sorted(want)
    args = {(r["track"], r["key"]): r["int_value"] for r in tp.rows("request_args")}
    assert args[("r1", "debug.request_preemptions")] == 1 and ("r2", "debug.request_preemptions") not in args


def test_step_record_phases_agree_in_json(step_written):
    """Both encodings draw the same request tracks (v20's JSON importer reads
    no async events, so the JSON's are paired here as Perfetto pairs them)."""
    tp = step_written["pftrace"]
    got = sorted((r["track"], r["name"], r["ts"], r["dur"], r["depth"]) for r in tp.rows("request_slices"))
    assert json_request_slices(step_written["json"]) == got


def test_preemptions_counter_per_engine(step_written):
    for tp in (step_written["pftrace"], step_written["json_tp"]):
        c = sorted((r["ts"], r["value"]) for r in tp.rows("counters")
                   if r["pid"] == 300 and r["name"] == "preemptions (total)")
        assert c == [(STEP_T0 + 310_000, 0), (STEP_T0 + 710_000, 1)]
