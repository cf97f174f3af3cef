"""test_docs_zh.py — the Chinese docs cannot drift from the English ones silently.

Owns one check: every environment variable and every long command-line flag
named in an English page (docs/user-guide.md, docs/configuration.md,
docs/forwarder.md, and any other docs/<page>.md that has a docs/zh/<page>.md)
is also named in the matching Chinese page. Prose is free to differ; the
names users type must not. Reads files only: no build, no services.

What counts as a name:
  * an environment variable: an upper-case identifier with an underscore whose
    first part is one of ENV_PREFIXES (MS_TRACE_ENABLE, OTEL_BSP_..., ...).
    The bracket spelling of the OTel docs, OTEL_EXPORTER_OTLP_[TRACES_]HEADERS,
    is one name; an expanded name (OTEL_EXPORTER_OTLP_TRACES_HEADERS) is also
    satisfied by a bracket spelling on the Chinese page that covers it;
  * a flag: a long option `--word[-word...]`, or a family such as `--relay-*`.
Shell variables of examples (MODEL_NAME, TRACE_DIR) and constants such as
SO_PEERCRED are not environment variables of the product and are not checked.
"""

import os
import re

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCS = os.path.join(REPO, "docs")
ZH = os.path.join(DOCS, "zh")

# Pages that must have a Chinese counterpart.
REQUIRED_PAGES = ("user-guide.md", "configuration.md", "forwarder.md", "performance.md")

# First part of the environment variables users set or read about.
ENV_PREFIXES = ("MS", "MSTRACE", "MST", "OTEL", "PROFILING", "VLLM", "HF", "TRANSFORMERS", "ASCEND")

_ENV_RE = re.compile(r"(?<![A-Za-z0-9_])([A-Z][A-Z0-9]*_[A-Z0-9_]*(?:\[[A-Z0-9_]+\][A-Z0-9_]*)*)")
_FLAG_RE = re.compile(r"(?<![A-Za-z0-9_\-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:-\*)?)")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def env_names(text):
    """Environment variable names in `text`, spelled as written."""
    names = set()
    for m in _ENV_RE.finditer(text):
        name = m.group(1)
        if name.split("_", 1)[0] not in ENV_PREFIXES:
            continue
        if name.endswith("_") and not name.endswith("]"):
            continue  # a prefix in prose ("the MS_PROFILER_ variables"), not a name
        names.add(name)
    return names


def flag_names(text):
    return set(m.group(1) for m in _FLAG_RE.finditer(text))


def _expansions(name):
    """OTEL_X_[TRACES_]Y -> {OTEL_X_Y, OTEL_X_TRACES_Y}; a plain name -> {name}."""
    m = re.search(r"\[([A-Z0-9_]+)\]", name)
    if not m:
        return {name}
    head, tail = name[: m.start()], name[m.end():]
    out = set()
    for rest in _expansions(tail):
        out.add(head + rest)
        out.add(head + m.group(1) + rest)
    return out


def env_missing(english, chinese):
    """Names of `english` that `chinese` does not name, sorted."""
    zh_names = env_names(chinese)
    zh_covered = set()
    for n in zh_names:
        zh_covered |= _expansions(n)
    missing = []
    for name in sorted(env_names(english)):
        if name in zh_names:
            continue
        if "[" in name:
            if _expansions(name) <= zh_covered:
                continue  # every expansion is named on the Chinese page
        elif name in zh_covered:
            continue
        missing.append(name)
    return missing


def flags_missing(english, chinese):
    return sorted(flag_names(english) - flag_names(chinese))


def _page_pairs():
    """The required pages, then every other page that has a Chinese version."""
    pages = list(REQUIRED_PAGES)
    if os.path.isdir(ZH):
        for name in sorted(os.listdir(ZH)):
            if name.endswith(".md") and name not in pages and os.path.isfile(os.path.join(DOCS, name)):
                pages.append(name)
    return pages


@pytest.mark.parametrize("page", _page_pairs())
def test_chinese_page_names_every_variable_and_flag_of_the_english_page(page):
    en_path = os.path.join(DOCS, page)
    zh_path = os.path.join(ZH, page)
    assert os.path.isfile(en_path), "docs/%s is missing" % page
    assert os.path.isfile(zh_path), "docs/zh/%s is missing: the Chinese version of docs/%s" % (page, page)
    english, chinese = _read(en_path), _read(zh_path)
    env = env_missing(english, chinese)
    flags = flags_missing(english, chinese)
    problems = []
    if env:
        problems.append("environment variables: " + ", ".join(env))
    if flags:
        problems.append("flags: " + ", ".join(flags))
    assert not problems, (
        "docs/zh/%s does not name what docs/%s names (%s). Add a Chinese sentence naming each to docs/zh/%s."
        % (page, page, "; ".join(problems), page)
    )


# The rules above decide what the check can see; pin them on small inputs.

def test_env_names_take_product_variables_and_skip_example_shell_variables():
    text = ("export MS_TRACE_ENABLE=1 MODEL_NAME=x; `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, SO_PEERCRED, "
            "TRACE_DIR, the `TRACES_` variable, MSTRACE_PERFETTO_SOCKET, @MSP_PERFETTO_SOCKET")
    assert env_names(text) == {"MS_TRACE_ENABLE", "OTEL_EXPORTER_OTLP_[TRACES_]HEADERS", "MSTRACE_PERFETTO_SOCKET"}


def test_flag_names_take_long_options_and_families_only():
    text = "mstrace forward --log-level=debug --perfetto-output PATH --relay-* -h; see #10-when-something; a --> b"
    assert flag_names(text) == {"--log-level", "--perfetto-output", "--relay-*"}


def test_bracket_spelling_and_expanded_names_satisfy_each_other():
    assert env_missing("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL") == []
    assert env_missing("OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL",
                       "OTEL_EXPORTER_OTLP_PROTOCOL 与 OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") == []
    assert env_missing("OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL") == [
        "OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL"]
    assert flags_missing("--socket-name NAME", "`--socket-name`") == []
    assert flags_missing("--socket-name NAME", "--socket") == ["--socket-name"]
