"""mstrace.adapter_fields stays the full list of what the extension reads from vLLM objects.

The extension reads vLLM attributes only through the names it interns at
import (python/mstrace/_native/pyattr.c, `N(field, "name")`); every such name
must be a field listed in adapter_fields.FIELDS (so the release check,
tests/vllm/test_vllm_release_source.py, verifies it exists in every supported
vLLM) or be explained in NOT_VLLM_FIELDS. A new read added to the C side
without a row here fails this test with the name.
"""

import os
import re

from mstrace import adapter_fields, symbols

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYATTR = os.path.join(REPO, "python", "mstrace", "_native", "pyattr.c")


def interned_names():
    with open(PYATTR) as fh:
        return re.findall(r'\bN\(\s*\w+\s*,\s*"([^"]+)"\s*\)', fh.read())


def test_pyattr_interns_names():
    names = interned_names()
    assert "num_scheduled_tokens" in names and "request_id" in names, names


def test_every_interned_name_is_listed_or_explained():
    listed = adapter_fields.field_names() | set(adapter_fields.NOT_VLLM_FIELDS)
    unlisted = [n for n in interned_names() if n not in listed]
    assert not unlisted, ("attribute names read by the extension but missing from "
                          "python/mstrace/adapter_fields.py: %s" % ", ".join(unlisted))


def test_rows_are_well_formed():
    seen = set()
    for f in adapter_fields.FIELDS:
        module, sep, cls = f.cls.partition(":")
        assert sep and module.startswith("vllm.") and cls and f.field, f
        assert f.adapters and all(a in symbols.ADAPTERS for a in f.adapters), f
        assert (f.cls, f.field) not in seen, "listed twice: %s.%s" % (f.cls, f.field)
        seen.add((f.cls, f.field))
    assert not set(adapter_fields.NOT_VLLM_FIELDS) & adapter_fields.field_names()
