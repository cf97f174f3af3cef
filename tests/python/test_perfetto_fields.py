"""The Perfetto field numbers of src/wire/perfetto_trace_fields.h, checked
against Perfetto's official protos (PyPI `perfetto`: perfetto_trace_pb2).

Owns: every `#define NAME NUMBER /* Path */` line of the header names, in its
comment, the proto field (`Message.field`) or enum value
(`Message.Enum.VALUE`) it stands for, and the number is the one the protos
give; a #define without such a comment fails. Both the native .pftrace
encoder and the `mstrace analyze` .pftrace reader take their numbers from
this one header, so a wrong number here would make them agree with each
other and still write and read files Perfetto does not.
"""

import re
from pathlib import Path

import pytest

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

HEADER = Path(__file__).resolve().parents[2] / "src" / "wire" / "perfetto_trace_fields.h"
DEFINE = re.compile(r"^#define\s+(\w+)\s+(\d+)\s*/\*\s*([\w.]+)\s*\*/\s*$")


def header_lines():
    """(name, number, proto path) for each numbered #define; the include
    guard is the only #define allowed without a number."""
    out = []
    for line in HEADER.read_text().splitlines():
        if not line.startswith("#define"):
            continue
        if line.split()[1] == "MST_WIRE_PERFETTO_TRACE_FIELDS_H":
            continue
        m = DEFINE.match(line)
        assert m, f"not `#define NAME NUMBER /* Message.field */`: {line!r}"
        out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def proto_number(path):
    """The number of `Message.field` or `Message.Enum.VALUE` (messages may
    be nested) in package perfetto.protos, or an AssertionError."""
    pool = pb.DESCRIPTOR.pool
    owner, _, leaf = path.rpartition(".")
    full = f"{pb.DESCRIPTOR.package}.{owner}"
    try:
        message = pool.FindMessageTypeByName(full)
    except KeyError:
        message = None
    if message is not None:
        assert leaf in message.fields_by_name, f"{owner} has no field {leaf}"
        return message.fields_by_name[leaf].number
    enum = pool.FindEnumTypeByName(full)  # KeyError: neither message nor enum
    assert leaf in enum.values_by_name, f"{owner} has no value {leaf}"
    return enum.values_by_name[leaf].number


def test_every_number_is_the_protos():
    lines = header_lines()
    assert len(lines) > 50, "the header lost its field numbers"
    wrong = [(name, number, path, proto_number(path)) for name, number, path in lines
             if proto_number(path) != number]
    assert not wrong, "numbers that differ from perfetto_trace_pb2 (name, header, path, proto): " \
        f"{wrong}"


def test_names_are_unique():
    names = [name for name, _, _ in header_lines()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("message", ["EventCategory", "EventName", "DebugAnnotationName",
                                     "InternedString"])
def test_every_interned_entry_numbers_iid_and_text_alike(message):
    """IE_IID / IE_NAME serve every interned table the encoder and reader use."""
    numbers = dict((name, number) for name, number, _ in header_lines())
    text = "str" if message == "InternedString" else "name"
    assert proto_number(f"{message}.iid") == numbers["IE_IID"]
    assert proto_number(f"{message}.{text}") == numbers["IE_NAME"]
