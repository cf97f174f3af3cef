"""Reads the forwarder's two output formats into one comparable model.

`read_pftrace` decodes a native Perfetto trace with the official protos of
the PyPI `perfetto` package (perfetto_trace_pb2): packet by packet (so a
file cut mid-packet reads up to the cut), resolving interned names the way
Perfetto does (state restarts on SEQ_INCREMENTAL_STATE_CLEARED), pairing
slice begin/end per track in timestamp order. `read_chrome_json` reads the
Chrome Trace JSON of the same spans. Both return a `Model`; tests compare
them field by field.
"""

import json
from dataclasses import dataclass, field
from decimal import Decimal

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

SEQ_CLEARED = 1
SEQ_NEEDS = 2
TYPE_BEGIN, TYPE_END, TYPE_COUNTER = 1, 2, 4


@dataclass
class Model:
    processes: dict = field(default_factory=dict)      # pid -> name
    threads: dict = field(default_factory=dict)        # (pid, tid) -> name
    slices: list = field(default_factory=list)         # dicts: pid tid name cat ts dur args
    links: set = field(default_factory=set)            # (source span_id, dest span_id)
    requests: list = field(default_factory=list)       # (request id, name, start, end, parent)
    counters: list = field(default_factory=list)       # (pid, name, ts, value)
    dangling_flows: list = field(default_factory=list)
    steps: list = field(default_factory=list)          # dicts: pid name ts dur args ("step N" slices)
    step_flows: int = 0                                # flows joining a step to a span


def iter_packets(data: bytes, whole: bool = False):
    """Yields (offset, TracePacket) for each whole Trace.packet field; stops
    at a truncated one (a file cut by SIGKILL), or with whole=True fails
    there (a file that must be a whole number of packets)."""
    i, n = 0, len(data)
    while i < n:
        if data[i] != 0x0A:
            raise AssertionError(f"unexpected field tag {data[i]:#x} at {i}")
        j, length, shift = i + 1, 0, 0
        while True:
            if j >= n:
                assert not whole, f"cut in a length at {i} of {n}"
                return
            b = data[j]
            j += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if j + length > n:
            assert not whole, f"packet cut at {i} of {n}"
            return
        yield i, pb.TracePacket.FromString(data[j:j + length])
        i = j + length


def _annotation_value(a, resolve):
    if a.array_values:
        return [_annotation_value(x, resolve) for x in a.array_values]
    kind = a.WhichOneof("value")
    if kind == "string_value_iid":
        return resolve(29, a.string_value_iid).decode("utf-8")
    if kind == "legacy_json_value":
        return json.loads(a.legacy_json_value, parse_float=Decimal)
    v = getattr(a, kind)
    return Decimal(repr(v)) if kind == "double_value" else v


def rebuild_request_ids(streams, key, args, strict=True):
    """`request.ids` as the span carried it (docs/architecture.md 1a): a
    keyframe list is remembered for its stream (one span name on one
    thread); a delta (`request.ids.delta` = place since the keyframe,
    `.left`, `.joined`) applies to the stream's last list."""
    if "request.ids.delta" in args:
        pos = args.pop("request.ids.delta")
        left = set(args.pop("request.ids.left", []))
        joined = args.pop("request.ids.joined", [])
        prev = streams.get(key)
        if prev is None or prev[0] + 1 != pos:
            assert not strict, f"delta {pos} of {key} does not follow {prev and prev[0]}"
            streams.pop(key, None)
            return
        ids = [i for i in prev[1] if i not in left] + joined
        streams[key] = (pos, ids)
        args["request.ids"] = ids
    elif isinstance(args.get("request.ids"), list):
        streams[key] = (0, list(args["request.ids"]))


def thread_of(tracks, uuid):
    """(pid, tid) of a thread track or of its lane, else None."""
    td = tracks.get(uuid)
    if td is not None and not td.HasField("thread") and td.parent_uuid:
        td = tracks.get(td.parent_uuid)
    return (td.thread.pid, td.thread.tid) if td is not None and td.HasField("thread") else None


def read_pftrace(path, strict=True) -> Model:
    data = open(path, "rb").read()
    m = Model()
    interned = {}
    tracks = {}
    events = []   # (ts, order, track_uuid, type, name, cat, args, flow_ids, counter)
    ending = set()  # terminating flow ids
    saw_clock = False
    streams = {}  # (thread, span name) -> (place, request ids): the lists deltas apply to
    for order, (_, p) in enumerate(iter_packets(data)):
        if p.HasField("clock_snapshot"):
            saw_clock = True
        if p.sequence_flags & SEQ_CLEARED:
            interned = {1: {}, 2: {}, 3: {}, 29: {}}
            streams = {}
        if p.HasField("interned_data"):
            for kind, entries in ((1, p.interned_data.event_categories),
                                  (2, p.interned_data.event_names),
                                  (3, p.interned_data.debug_annotation_names),
                                  (29, p.interned_data.debug_annotation_string_values)):
                for e in entries:
                    interned[kind][e.iid] = e.str if kind == 29 else e.name
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            tracks[td.uuid] = td
        if not p.HasField("track_event"):
            continue
        te = p.track_event

        def resolve(kind, iid):
            assert iid in interned[kind], f"unresolved iid {iid} (kind {kind}) in packet {order}"
            return interned[kind][iid]

        name = resolve(2, te.name_iid) if te.HasField("name_iid") else te.name
        cats = [resolve(1, c) for c in te.category_iids]
        args = {resolve(3, a.name_iid): _annotation_value(a, resolve) for a in te.debug_annotations}
        if te.type == TYPE_BEGIN and thread_of(tracks, te.track_uuid) is not None:
            rebuild_request_ids(streams, (thread_of(tracks, te.track_uuid), name), args, strict)
        counter = None
        if te.type == TYPE_COUNTER:
            counter = (te.double_counter_value if te.HasField("double_counter_value")
                       else te.counter_value)
        events.append((p.timestamp, order, te.track_uuid, te.type, name, cats, args,
                       list(te.flow_ids), counter))
        ending.update(te.terminating_flow_ids)  # a step's flow ending at a span (none are links)
    assert saw_clock or not strict, "no clock snapshot"

    for td in tracks.values():
        if td.HasField("process"):
            m.processes[td.process.pid] = td.process.process_name
        elif td.HasField("thread"):
            if td.thread.thread_name:
                m.threads[(td.thread.pid, td.thread.tid)] = td.thread.thread_name

    def where(uuid):
        td = tracks.get(uuid)
        assert td is not None, f"track {uuid} has no descriptor"
        return td

    stacks = {}
    step_ids = set()
    self_ids = {}
    pending_links = []
    for ts, _, uuid, typ, name, cats, args, flows, counter in sorted(events, key=lambda e: (e[0], e[1])):
        td = where(uuid)
        if typ == TYPE_COUNTER:
            parent = tracks.get(td.parent_uuid)
            pid = parent.process.pid if parent is not None and parent.HasField("process") else None
            m.counters.append((pid, td.name, ts, counter))
            continue
        if typ == TYPE_BEGIN:
            stacks.setdefault(uuid, []).append((ts, name, cats, args, flows))
            continue
        assert typ == TYPE_END and stacks.get(uuid), f"unmatched end on track {uuid}"
        start, name, cats, args, flows = stacks[uuid].pop()
        # A span's slice is on its thread track or on an "overlapping spans"
        # lane: a child track of the thread track (spans that do not nest).
        parent = tracks.get(td.parent_uuid) if td.parent_uuid else None
        thread = td.thread if td.HasField("thread") else (
            parent.thread if parent is not None and parent.HasField("thread") else None)
        if thread is not None:
            sl = dict(pid=thread.pid, tid=thread.tid, name=name,
                      cat=cats[0] if cats else None, ts=start, dur=ts - start, args=args)
            m.slices.append(sl)
            if flows:
                self_ids[flows[0]] = args.get("span_id")
                pending_links.extend((f, args.get("span_id")) for f in flows[1:])
        elif parent is not None and parent.HasField("process"):
            # an engine's "engine steps" track
            m.steps.append(dict(pid=parent.process.pid, name=name, ts=start, dur=ts - start, args=args))
            step_ids.update(flows)
        else:
            parent = tracks.get(td.parent_uuid)
            pname = parent.name if parent is not None else None
            depth = len(stacks[uuid])
            m.requests.append((td.name, name, start, ts, pname, depth))
    for uuid, st in stacks.items():
        assert not st or not strict, f"unclosed slices on track {uuid}"
    for f in step_ids:
        if f in self_ids or f in ending:
            m.step_flows += 1
    for f, dest in pending_links:
        if f in self_ids:
            m.links.add((self_ids[f], dest))
        else:
            m.dangling_flows.append((f, dest))
    return m


def _ns(us) -> int:
    return int(Decimal(us) * 1000)


def read_chrome_json(path) -> Model:
    events = json.loads(open(path, encoding="utf-8").read(), parse_float=Decimal)
    m = Model()
    flows = {}
    asyncs = {}
    phases = {}
    steps_open = {}
    for e in events:
        ph = e["ph"]
        if ph == "M":
            if e["name"] == "process_name":
                m.processes[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                m.threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif ph == "X":
            m.slices.append(dict(pid=e["pid"], tid=e["tid"], name=e["name"], cat=e["cat"],
                                 ts=_ns(e["ts"]), dur=_ns(e["dur"]), args=e["args"]))
        elif ph in ("s", "f"):
            flows.setdefault(e["id"], []).append(e)
        elif ph == "C":
            # a viewer names it "<name> <arg key>": the key is the unit, or
            # "value" (the forwarder's own, named as in the .pftrace)
            (key, value), = e["args"].items()
            m.counters.append((e["pid"], e["name"] if key == "value" else e["name"] + " " + key,
                               _ns(e["ts"]), value))
        elif ph == "b":
            asyncs.setdefault(e["id"], []).append((e["name"], _ns(e["ts"])))
        elif ph == "e":
            st = asyncs[e["id"]]
            name, start = st.pop()
            assert name == e["name"], f"async e {e['name']} closes {name}"
            m.requests.append((e["id"], name, start, _ns(e["ts"]), "Requests", len(st)))
        elif ph in ("B", "E", "i") and e.get("cat") == "mstrace.request":
            # a request's phases on its own thread (named by its id)
            key = (e["pid"], e["tid"])
            if ph == "i":
                m.requests.append((key, e["name"], _ns(e["ts"]), _ns(e["ts"]), "Requests", len(phases.get(key, []))))
            elif ph == "B":
                phases.setdefault(key, []).append((e["name"], _ns(e["ts"])))
            else:
                name, start = phases[key].pop()
                assert name == e["name"], f"E {e['name']} closes {name}"
                m.requests.append((key, name, start, _ns(e["ts"]), "Requests", len(phases[key])))
        elif ph in ("B", "E") and e.get("cat") == "mstrace.step":
            key = (e["pid"], e["tid"])
            if ph == "B":
                steps_open.setdefault(key, []).append((e["name"], _ns(e["ts"]), e.get("args", {})))
            else:
                name, start, args = steps_open[key].pop()
                m.steps.append(dict(pid=e["pid"], name=name, ts=start, dur=_ns(e["ts"]) - start, args=args))
    # Threads the forwarder adds (tid >= 2^30): a request's holds its
    # vllm.request span (a thread in both files) and its phases; one that
    # holds phases only is a track under "Requests" in the .pftrace.
    names = dict(m.threads)
    with_spans = {(sl["pid"], sl["tid"]) for sl in m.slices}
    m.threads = {k: v for k, v in m.threads.items() if k[1] < 0x40000000 or k in with_spans}
    # In the JSON a request's vllm.request X event is its track's outer
    # slice (the .pftrace has a "request" slice there): as one.
    spans = {(sl["pid"], sl["tid"]): sl for sl in m.slices if sl["name"] == "vllm.request"}
    for key, sl in spans.items():
        if key in names:
            m.requests.append((key, "request", sl["ts"], sl["ts"] + sl["dur"], "Requests", -1))
    m.requests = [(names.get(r[0], r[0]) if isinstance(r[0], tuple) else r[0],) + tuple(r[1:-1]) +
                  (r[-1] + 1 if isinstance(r[0], tuple) and r[0] in spans else r[-1],)
                  for r in m.requests]
    # a step's flows: its slices' bind_id (flow_out) ending on a span's X event (flow_in)
    outs = {e["bind_id"] for e in events if e.get("flow_out") and e.get("cat") == "mstrace.step"}
    m.step_flows = sum(1 for e in events if e.get("ph") == "X" and e.get("flow_in") and e.get("bind_id") in outs)
    for fid, pair in flows.items():
        assert sorted(x["ph"] for x in pair) == ["f", "s"], f"flow {fid} lacks an end"
        src_trace, src_span, dest_span = pair[0]["args"]["link"].split(":")
        m.links.add((src_span, dest_span))
    return m


def normalized(m: Model) -> dict:
    """The comparable content of a model: slices (with args), links, request
    tracks, span counters, the names of the forwarder's own counters, process
    and thread names (the daemon's own pid replaced by "forwarder")."""
    def arg(v):
        return float(v) if isinstance(v, Decimal) else v
    slices = sorted((s["pid"], s["tid"], s["name"], s["cat"], s["ts"], s["dur"],
                     repr(sorted((k, arg(v)) for k, v in s["args"].items())))
                    for s in m.slices)
    counters = sorted((pid, n, ts, float(v)) for pid, n, ts, v in m.counters
                      if not n.startswith("forwarder."))
    own = sorted({n for _, n, _, _ in m.counters if n.startswith("forwarder.")})
    processes = {("forwarder" if name == "mstrace forward" else pid): name
                 for pid, name in m.processes.items()}
    return dict(slices=slices, links=sorted(m.links), requests=sorted(m.requests),
                counters=counters, own=own, processes=processes, threads=m.threads)
