"""Trace and span ids in the `.pftrace` (docs/architecture.md "Trace and span ids in the `.pftrace`"):
hex text as Jaeger shows it, the trace id and the parent span id interned (`string_value_iid`) where
they recur, the span id inline.

Owns: a file written while every id was an inline string (tests/integration/data/ids_before_interning.pftrace,
made by pftrace_ids_fixture.py with the forwarder of that time) and one the current forwarder writes
from the same stream give `mstrace analyze` the same analysis; in the new file each recurring
trace id and parent is interned, every id decodes (with Perfetto's own protos) to the one sent;
Perfetto's trace processor shows every id as that text: the span id as a string arg in the raw
file, the interned ones once their values are inline (the v20.1 build the suite pins predates
`string_value_iid`, test_pftrace_trace_processor.py's older_encoding; current Perfetto resolves
them to the same string args), and the raw file's interned ids are exactly the ones v20 leaves out;
a file missing the packet that defined an interned id is analysed with a warning counting the ids
read as absent, every other span read.
"""

import json
from pathlib import Path

import perfetto_wasm
from conftest import MAGIC, mstrace_binary
from pftrace_ids_fixture import packets, write
from pftrace_model import iter_packets, read_pftrace
from test_analyze import analysis, analyze
from test_analyze_pftrace import close
from test_pftrace_encoding import comparable
from test_pftrace_trace_processor import older_encoding

OLD = Path(__file__).resolve().parent / "data" / "ids_before_interning.pftrace"
ID_KEYS = ("trace_id", "span_id", "parent_span_id")


def sent_ids():
    """span id -> (trace id, span id, parent span id) as sent."""
    out = {}
    for p in packets():
        s = json.loads(p[len(MAGIC):])
        out[s["span_id"]] = (s["trace_id"], s["span_id"], s["parent_span_id"])
    return out


def id_kinds(data):
    """(annotation name, value field) -> count, for the three id annotations."""
    names, kinds = {}, {}
    for _, p in iter_packets(data, whole=True):
        if p.sequence_flags & 1:
            names = {}
        names.update({e.iid: e.name for e in p.interned_data.debug_annotation_names})
        for a in p.track_event.debug_annotations:
            name = names.get(a.name_iid)
            if name in ID_KEYS:
                key = (name, a.WhichOneof("value"))
                kinds[key] = kinds.get(key, 0) + 1
    return kinds


def test_old_and_new_id_encoding_analyse_the_same(tmp_path):
    new = write(mstrace_binary(), tmp_path / "ids.pftrace")
    n = len(packets())
    old_kinds, new_kinds = id_kinds(OLD.read_bytes()), id_kinds(new.read_bytes())
    assert old_kinds == {(k, "string_value"): n for k in ID_KEYS}
    # the span id stays inline; trace ids recur in every trace (a step's four spans, a request's
    # two) and parents in a step's three children: most of them are interned
    assert new_kinds[("span_id", "string_value")] == n and ("span_id", "string_value_iid") not in new_kinds
    assert new_kinds[("trace_id", "string_value_iid")] >= n // 2
    assert new_kinds[("parent_span_id", "string_value_iid")] >= 72
    assert sum(v for (k, _), v in new_kinds.items() if k == "trace_id") == n
    assert new.stat().st_size < OLD.stat().st_size
    old_a, new_a = comparable(analysis(OLD)), comparable(analysis(new))
    assert new_a["data_quality"]["spans"] == n and new_a["data_quality"]["traces"] == 72 + 144
    assert old_a == new_a, close(old_a, new_a, {"rel": 0, "abs": 0})[:10]


def test_every_id_decodes_to_the_one_sent(tmp_path):
    new = write(mstrace_binary(), tmp_path / "ids.pftrace")
    sent = sent_ids()
    for path in (OLD, new):
        got = {sl["args"]["span_id"]: tuple(sl["args"][k] for k in ID_KEYS)
               for sl in read_pftrace(path).slices if "span_id" in sl["args"]}
        assert got == sent, path


IDS_QUERY = ("SELECT a.key, a.value_type, a.string_value, a.int_value, "
             "(SELECT string_value FROM args b WHERE b.arg_set_id = s.arg_set_id AND b.key = 'debug.span_id') AS span "
             "FROM slice s JOIN args a ON a.arg_set_id = s.arg_set_id "
             "WHERE a.key IN ('debug.trace_id', 'debug.span_id', 'debug.parent_span_id')")


def trace_processor_ids(path):
    """span id -> {id key: (value type, string value)} as Perfetto's trace processor shows them."""
    out = {}
    for r in perfetto_wasm.load(path, {"ids": IDS_QUERY}).rows("ids"):
        assert r["int_value"] is None, r
        out.setdefault(r["span"], {})[r["key"][len("debug."):]] = (r["value_type"], r["string_value"])
    return out


def test_trace_processor_shows_the_ids_as_sent(tmp_path):
    perfetto_wasm.require()
    new = write(mstrace_binary(), tmp_path / "ids.pftrace")
    inline = tmp_path / "ids.v20.pftrace"
    inline.write_bytes(older_encoding(new.read_bytes()))
    sent = sent_ids()
    # every id a string arg with the text sent (the text Jaeger shows for the span)
    want = {sid: {k: ("string", v) for k, v in zip(ID_KEYS, ids)} for sid, ids in sent.items()}
    assert trace_processor_ids(inline) == want
    # the raw file: v20 has no string_value_iid, so it shows the ids written inline and leaves
    # out exactly the interned ones
    interned = {}
    names = {}
    for _, p in iter_packets(new.read_bytes(), whole=True):
        if p.sequence_flags & 1:
            names = {}
        names.update({e.iid: e.name for e in p.interned_data.debug_annotation_names})
        args = {names.get(a.name_iid): a for a in p.track_event.debug_annotations}
        if "span_id" in args:
            interned[args["span_id"].string_value] = {k for k in ID_KEYS if args[k].HasField("string_value_iid")}
    raw = trace_processor_ids(new)
    assert raw == {sid: {k: v for k, v in ids.items() if k not in interned[sid]} for sid, ids in want.items()}
    assert sum(len(v) for v in interned.values()) > len(sent)


def drop_an_id_definition(data: bytes):
    """The file without one span (its begin and end packets) whose packet defines nothing but one
    interned id that later spans use, and how many id annotations use it after it (up to the next
    restart of the interning)."""
    names, pkts = {}, list(iter_packets(data, whole=True))
    ends = [o for o, _ in pkts[1:]] + [len(data)]
    dropped, uses = None, 0
    for i, (o, p) in enumerate(pkts):
        if p.sequence_flags & 1:
            if dropped is not None:
                break
            names = {}
        names.update({e.iid: e.name for e in p.interned_data.debug_annotation_names})
        ids = {names.get(a.name_iid): a for a in p.track_event.debug_annotations}
        if dropped is None:
            d = p.interned_data
            if i > len(pkts) // 4 and len(d.debug_annotation_string_values) == 1 and not (
                    d.debug_annotation_names or d.event_names or d.event_categories) and \
                    ids["trace_id"].string_value_iid == d.debug_annotation_string_values[0].iid:
                dropped = (i, d.debug_annotation_string_values[0].iid)
            continue
        uses += sum(1 for k in ID_KEYS if k in ids and ids[k].string_value_iid == dropped[1])
    assert dropped and uses
    i = dropped[0]
    assert pkts[i + 1][1].track_event.type == 2  # its end follows its begin
    return data[:pkts[i][0]] + data[ends[i + 1]:], uses


def test_a_lost_id_definition_is_counted_and_the_rest_reads_the_same(tmp_path):
    new = write(mstrace_binary(), tmp_path / "ids.pftrace")
    cut, uses = drop_an_id_definition(new.read_bytes())
    broken = tmp_path / "lost.pftrace"
    broken.write_bytes(cut)
    proc = analyze(broken, "--json", str(tmp_path / "lost.json"))
    assert f"{uses} trace/span ids read as absent" in proc.stderr + proc.stdout
    assert "malformed" not in proc.stderr + proc.stdout
    a = json.loads((tmp_path / "lost.json").read_text())
    assert a["data_quality"]["spans"] == len(packets()) - 1
