"""The HTML report of `mstrace analyze` (-o report.html) in a real headless
Chromium (tests/integration/chromium_page.py).

Owns: traces made by the C example (examples/request_pipeline.c, libmstrace)
through the real `mstrace forward` daemon, analysed by the real `mstrace
analyze` with both --json and -o; then, in the browser: the page renders
with no console error and no request but its own file, the JSON embedded in
the page equals the --json file, every number printed (each carries the
JSON path it was read from) equals the JSON value at that path to the
digits shown, every section and table row is there (verdict and data
quality before the charts), hovering a chart shows its values, and the
compare view appears exactly when the analysis has "compare". A span name
that tries to end the script element (`</script>`, U+2028) arrives through
the daemon and is shown verbatim. Full-page screenshots are kept under
$MSTRACE_BUILD_DIR/test-artifacts/analyze-report/. No wall-clock assertions
(the browser's timeouts only guard against a hang).
"""

import json
import os
import re
import subprocess

import pytest

from chromium_page import ChromiumPage, chromium_binary
from conftest import build_path, make_packet

SECTION_ORDER = ["verdict", "data-quality", "findings", "stages", "step-split", "engine-lanes", "token-mix",
                 "scheduler-state", "model-fit", "latency", "waterfall", "span-names", "profile"]
CDFS = ("queue_ms", "ttft_ms", "tpot_ms", "itl_ms", "prefill_ms", "decode_ms", "e2e_ms")


@pytest.fixture(scope="module")
def artifacts():
    d = build_path("test-artifacts") / "analyze-report"
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture
def browser(tmp_path):
    if chromium_binary() is None:
        pytest.fail("chromium is not installed (scripts/deps.sh installs Debian's chromium)")
    page = ChromiumPage(tmp_path / "browser")
    yield page
    page.close()


def traced_run(daemon_factory, example_bin, out, requests):
    """One run of the example through a real daemon; returns the trace file."""
    d = daemon_factory(output=out).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["MSTRACE_PERFETTO_SOCKET"] = d.socket_name
    p = subprocess.run([str(example_bin), "--requests", str(requests)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert d.stop() == 0
    return out


def analyze(mstrace_bin, tmp_path, name, *inputs):
    js, html = tmp_path / f"{name}.json", tmp_path / f"{name}.html"
    p = subprocess.run([str(mstrace_bin), "analyze", *map(str, inputs), "--json", str(js), "-o", str(html),
                        "--quiet"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(js.read_text(encoding="utf-8")), html


def resolve(doc, path):
    for k in path:
        doc = doc[k]
    return doc


NUMBER_RE = re.compile(r"^\+?(-?\d+(?:\.(\d+))?(?:e([+-]?\d+))?)")


def check_number(path, text, scale, value):
    """`text` is `value` (times `scale`) printed to the digits it shows."""
    if value is None:
        assert text == "\u2014", (path, text)
        return
    m = NUMBER_RE.match(text)
    assert m, f"{path}: {text!r} is not a number"
    shown, decimals, exp = float(m.group(1)), len(m.group(2) or ""), m.group(3)
    want = value * scale
    if exp is not None:  # toExponential(1): two significant digits
        tol = 0.05 * 10 ** int(exp) * 1.0000001
    else:
        tol = 0.5 * 10 ** -decimals * 1.0000001 + 1e-12
    assert abs(shown - want) <= tol, f"{path}: page shows {text!r}, JSON has {value!r}"


def open_report(browser, html, analysis, artifacts, shot_name):
    browser.load(html)
    assert browser.evaluate("document.body.getAttribute('data-rendered')") == "1", browser.errors
    shot = browser.screenshot(artifacts / shot_name)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.errors == [], browser.errors
    assert browser.requests == [html.resolve().as_uri()], browser.requests
    embedded = browser.evaluate("document.getElementById('mst-data').textContent")
    assert json.loads(embedded) == analysis


def check_numbers(browser, analysis):
    items = browser.evaluate("""Array.from(document.querySelectorAll('[data-path]')).map(function (e) {
        return [e.getAttribute('data-path'), e.textContent, e.getAttribute('data-scale')]; })""")
    for path_s, text, scale in items:
        path = json.loads(path_s)
        check_number(path, text, float(scale or 1), resolve(analysis, path))
    return {tuple(json.loads(p)) for p, _, _ in items}


def count(browser, selector):
    return browser.evaluate(f"document.querySelectorAll({json.dumps(selector)}).length")


def test_report_renders_the_analysis(mstrace_bin, daemon_factory, example_bin, tmp_path, browser, artifacts):
    trace = traced_run(daemon_factory, example_bin, tmp_path / "run.json", 40)
    analysis, html = analyze(mstrace_bin, tmp_path, "report", trace)
    assert analysis["steps"]["count"] > 0 and analysis["requests"]["joined"] > 0, analysis["data_quality"]
    open_report(browser, html, analysis, artifacts, "report.png")
    shown = check_numbers(browser, analysis)

    # Every number of the tables is on the page.
    for stage in analysis["stages"]:
        for k in ("total_ms", "share", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "count"):
            assert ("stages", stage, k) in shown
    for i, _ in enumerate(analysis["span_names"]):
        for k in ("count", "total_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"):
            assert ("span_names", i, k) in shown
    for i, _ in enumerate(analysis["requests"]["slowest"]):
        for k in ("queue_ms", "ttft_ms", "tpot_ms", "e2e_ms", "steps", "max_shared"):
            assert ("requests", "slowest", i, k) in shown
    for key in ("queue_ms", "ttft_ms", "tpot_ms", "e2e_ms"):
        for q in ("p50", "p90", "p99", "mean"):
            assert ("requests", key, q) in shown
    assert ("verdict", "share") in shown and ("data_quality", "spans") in shown
    for i, _ in enumerate(analysis["inputs"]):
        assert ("inputs", i, "spans") in shown and ("inputs", i, "bytes") in shown

    # Sections in the order a reader needs them; no compare view without compare.
    ids = browser.evaluate("Array.from(document.querySelectorAll('main > section')).map(function (s) { return s.id; })")
    assert [i for i in ids if i in SECTION_ORDER] == SECTION_ORDER, ids
    assert analysis.get("compare") is None and "compare" not in ids
    verdict_text = browser.evaluate("document.getElementById('verdict').textContent")
    assert analysis["verdict"]["sentence"] in verdict_text

    # Rows and marks: one per item of the JSON.
    assert count(browser, "#span-names tbody tr") == len(analysis["span_names"])
    assert count(browser, "#waterfall tbody tr") == len(analysis["requests"]["slowest"])
    assert count(browser, "#profile tbody tr") == len(analysis["profile_targets"])
    assert count(browser, ".finding") == len(analysis["findings"])
    fit_x = analysis["steps"]["model_fit"]["x"]
    with_x = [s for s in analysis["steps"]["series"] if s.get(fit_x) is not None and s.get("model_ms") is not None]
    assert count(browser, "#model-fit circle[data-tip]") == len(with_x)
    windows = sum(len(r["step_windows"]) for r in analysis["requests"]["slowest"])
    assert count(browser, "#waterfall rect[data-tip]") >= windows
    for key in CDFS:
        assert count(browser, f"#cdf-{key} svg path") == (1 if analysis["requests"]["cdf"][key] else 0), key

    # Hover: the slowest request's bar shows its values.
    first = analysis["requests"]["slowest"][0]
    box = browser.evaluate("""(function () { var r = document.querySelector('#waterfall rect[data-tip]');
        r.scrollIntoView({block: 'center'}); var b = r.getBoundingClientRect();
        return [b.left + b.width / 2, b.top + b.height / 2]; })()""")
    browser.mouse_move(box[0], box[1])
    tip = browser.evaluate("[document.getElementById('tip').style.display, document.getElementById('tip').textContent]")
    assert tip[0] == "block" and f"request {first['id']}" in tip[1], tip
    # Hover on the step chart: the step under the mouse, its stages in ms.
    box = browser.evaluate("""(function () { var s = document.querySelector('#step-split svg');
        s.scrollIntoView({block: 'center'}); var b = s.getBoundingClientRect();
        return [b.left + b.width / 2, b.top + b.height / 2]; })()""")
    browser.mouse_move(box[0], box[1])
    tip = browser.evaluate("document.getElementById('tip').textContent")
    m = re.match(r"step (\d+) \(pid (\d+)", tip)
    assert m, tip
    step = next(s for s in analysis["steps"]["series"] if s["index"] == int(m.group(1)))
    shown_model = re.search(r"model \(forward\): (\S+ ms)", tip)
    assert shown_model, tip
    check_number(["hover", "model_ms"], shown_model.group(1), 1, step["model_ms"])
    assert f"batch {step['batch_size']} req, {step['scheduled_tokens']} tokens" in tip, tip
    assert browser.errors == []


def generated(daemon_factory, tmp_path, scenario, name=None, extra=()):
    """A run of the analysis tests' generator (three processes, a vLLM-v1-like scheduler, the
    step record; the size and seed the analysis tests use) through a real daemon."""
    gen = build_path("test_analyze_tracegen")
    if not os.access(gen, os.X_OK):
        pytest.fail(f"trace generator not built at {gen}")
    out = tmp_path / f"{name or scenario}.json"
    d = daemon_factory(output=out, log_level="info").start()
    p = subprocess.run([str(gen), "--socket", d.socket_name, "--scenario", scenario, "--requests", "300",
                        "--seed", "1", *extra], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    counts = json.loads(p.stdout.strip().splitlines()[-1])
    d.wait_for_spans(counts["spans"], timeout=120)
    assert d.stop() == 0
    return out


@pytest.mark.parametrize("scenario,stage", [("output", "output"), ("executor", "ipc"), ("kvfull", "capacity")])
def test_planted_bottleneck_report(mstrace_bin, daemon_factory, tmp_path, browser, artifacts, scenario, stage):
    """A larger vLLM-like run with a planted bottleneck: the page names it first and every
    number still equals the JSON; the scheduler's charts draw every time bin."""
    trace = generated(daemon_factory, tmp_path, scenario)
    analysis, html = analyze(mstrace_bin, tmp_path, scenario, trace)
    assert analysis["verdict"]["bottleneck"] == stage, analysis["verdict"]
    open_report(browser, html, analysis, artifacts, f"planted-{scenario}.png")
    check_numbers(browser, analysis)
    headline = browser.evaluate("document.querySelector('#verdict .headline').textContent")
    assert headline.startswith("Bottleneck:"), headline
    fired = [f["rule"] for f in analysis["findings"] if f["fired"]]
    shown = browser.evaluate("Array.from(document.querySelectorAll('#findings > div:not(.caption) .finding'))"
                             ".map(function (e) { return e.getAttribute('data-rule'); })")
    assert sorted(shown) == sorted(fired), (shown, fired)  # fired rules shown up front, the rest folded
    assert count(browser, "#model-fit circle[data-tip]") == len(analysis["steps"]["series"])
    # The scheduler's state and token mix: one mark per time bin of the JSON that has one.
    bins = analysis["steps"]["timeline"]["bins"]
    assert count(browser, '#token-mix rect[data-kind="decode"]') == sum(1 for b in bins if (b["decode_tokens"] or 0) > 0)
    assert count(browser, '#token-mix rect[data-kind="prefill"]') == sum(1 for b in bins if (b["prefill_tokens"] or 0) > 0)
    dots = browser.evaluate("Array.from(document.querySelectorAll('#scheduler-state circle[data-preemptions]'))"
                            ".map(function (c) { return +c.getAttribute('data-preemptions'); })")
    assert sum(dots) == analysis["requests"]["preemptions"] == sum(b["preemptions"] for b in bins)
    assert (scenario == "kvfull") == (analysis["requests"]["preemptions"] > 0)
    for key in ("waiting_max", "running_max", "kv_usage_max"):
        assert count(browser, f'#scheduler-state path[data-series="{key}"]') == 1
    assert count(browser, "#cdf-itl_ms svg path") == 1
    shown = check_numbers(browser, analysis)
    assert ("requests", "preemptions") in shown


def test_engines_are_lanes_on_one_time_axis(mstrace_bin, daemon_factory, tmp_path, browser, artifacts):
    """Four engines in four files, one slower: one lane each, every sampled step in its lane,
    the engines table equal to the JSON, and the step chart in time order."""
    traces = [generated(daemon_factory, tmp_path, "balanced", name=f"rank{k}",
                        extra=["--pid-base", str(41000 + 1000 * k), "--model-scale", "3" if k == 2 else "1"])
              for k in range(4)]
    analysis, html = analyze(mstrace_bin, tmp_path, "ranks", *traces)
    assert len(analysis["engines"]) == 4
    open_report(browser, html, analysis, artifacts, "engine-lanes.png")
    shown = check_numbers(browser, analysis)
    for i in range(4):
        assert ("engines", i, "wall_p50_ms") in shown and ("engines", i, "pid") in shown
    lanes = browser.evaluate("Array.from(document.querySelectorAll('#engine-lanes rect[data-lane]'))"
                             ".map(function (r) { return +r.getAttribute('data-lane'); })")
    pids = [e["pid"] for e in analysis["engines"]]
    assert sorted(lanes) == sorted(pids.index(s["pid"]) for s in analysis["steps"]["series"])
    # The lanes share one axis: every rect lies inside the plot, left to right in time.
    xs = browser.evaluate("Array.from(document.querySelectorAll('#engine-lanes rect[data-lane]'))"
                          ".map(function (r) { return +r.getAttribute('x'); })")
    assert min(xs) >= 190 - 1e-6 and max(xs) <= 1040
    fired = [f["rule"] for f in analysis["findings"] if f["fired"]]
    assert "rank_imbalance" in fired


def test_compare_view(mstrace_bin, daemon_factory, example_bin, tmp_path, browser, artifacts):
    before = traced_run(daemon_factory, example_bin, tmp_path / "before.json", 30)
    after = traced_run(daemon_factory, example_bin, tmp_path / "after.json", 30)
    analysis, html = analyze(mstrace_bin, tmp_path, "compare", "--compare", before, after)
    assert analysis["compare"] and analysis["compare"]["metrics"], analysis.get("compare")
    open_report(browser, html, analysis, artifacts, "compare.png")
    shown = check_numbers(browser, analysis)
    metrics = analysis["compare"]["metrics"]
    assert count(browser, "#compare tbody tr") == len(metrics)
    for i, m in enumerate(metrics):
        for side in ("before", "after"):
            for q in ("p50", "p90", "p99"):
                if m[side].get(q) is not None:
                    assert ("compare", "metrics", i, side, q) in shown
        assert ("compare", "metrics", i, "p_value") in shown
    text = browser.evaluate("document.getElementById('compare').textContent")
    assert analysis["compare"]["verdict"] in text
    ids = browser.evaluate("Array.from(document.querySelectorAll('main > section')).map(function (s) { return s.id; })")
    assert ids.index("compare") < ids.index("step-split")


def test_hostile_span_name_is_shown_verbatim(mstrace_bin, daemon_factory, tmp_path, browser, artifacts):
    """A span name is user data: one that closes the script element and
    carries U+2028 goes through the daemon and the analysis, and the page
    still renders and shows it as text."""
    name = "evil</script><script>document.title='pwned'</script>\u2028<!--"
    d = daemon_factory(output=tmp_path / "hostile.json").start()
    d.send(*[make_packet(name, f"{i + 1:032x}", f"{i + 1:016x}", 1_000_000_000 + i * 1000,
                         1_000_000_500 + i * 1000) for i in range(3)])
    d.wait_for_spans(3)
    assert d.stop() == 0
    analysis, html = analyze(mstrace_bin, tmp_path, "hostile", tmp_path / "hostile.json")
    assert any(s["name"] == name for s in analysis["span_names"]), analysis["span_names"]
    open_report(browser, html, analysis, artifacts, "hostile.png")
    check_numbers(browser, analysis)
    names = browser.evaluate("Array.from(document.querySelectorAll('#span-names tbody code')).map(function (e) { return e.textContent; })")
    assert name in names
    assert browser.evaluate("document.title") == "mstrace analyze report"
