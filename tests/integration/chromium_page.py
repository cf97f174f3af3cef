"""chromium_page.py — a real headless Chromium driven over the DevTools
protocol, for tests of pages a person opens in a browser (the `mstrace
analyze` HTML report).

Owns: starting Debian's `chromium` with its own profile directory and an
ephemeral DevTools port (read from the DevToolsActivePort file, so no fixed
port can collide), one websocket to the page target (websocket-client from
PyPI), recording what the page logs (console errors, uncaught exceptions,
Log entries) and every network request it makes, loading a file, evaluating
JavaScript, dispatching mouse moves, full-page screenshots, and stopping the
browser. Why the DevTools protocol and not --dump-dom: only it sees console
errors and network requests, which the tests assert on.

Timeouts here only guard against a hung browser (generous, for a loaded
2-core machine); no test asserts on how long anything takes.
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import websocket  # websocket-client

HANG_GUARD_S = 180


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class ChromiumPage:
    def __init__(self, workdir: Path, width=1280, height=900):
        self.workdir = Path(workdir)
        self.profile = self.workdir / "chromium-profile"
        self.profile.mkdir(parents=True, exist_ok=True)
        # A port file left by an earlier browser on this profile would name a dead port.
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)
        self.log_path = self.workdir / "chromium.log"
        self.width, self.height = width, height
        self.events = []
        self.errors = []      # console errors, exceptions, error log entries
        self.requests = []    # every URL the page asked for
        self._next_id = 0
        binary = chromium_binary()
        if binary is None:
            raise RuntimeError("chromium not found; scripts/deps.sh installs Debian's chromium")
        args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps",
                "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars",
                f"--window-size={width},{height}", f"--user-data-dir={self.profile}",
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.ws = websocket.create_connection(self._page_ws_url(), timeout=HANG_GUARD_S,
                                                  suppress_origin=True)
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _page_ws_url(self):
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + HANG_GUARD_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}; see {self.log_path}")
            if port_file.exists():
                lines = port_file.read_text().split("\n")
                if len(lines) >= 2 and lines[0].strip():
                    port = int(lines[0])
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
                            targets = json.load(r)
                    except OSError:  # written before the socket listens: ask again
                        time.sleep(0.1)
                        continue
                    pages = [t for t in targets if t.get("type") == "page"]
                    if pages:
                        return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise RuntimeError(f"chromium gave no DevTools endpoint; see {self.log_path}")

    # ------------------------------------------------------------ protocol

    def _record(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        self.events.append(method)
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                      for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: " + str(d.get("exception", {}).get("description", d.get("text"))))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + p["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(p.get("request", {}).get("url", ""))

    def call(self, method, **params):
        self._next_id += 1
        my_id = self._next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._record(msg)

    def wait_event(self, method):
        while True:
            msg = json.loads(self.ws.recv())
            self._record(msg)
            if msg.get("method") == method:
                return msg.get("params", {})

    # ------------------------------------------------------------ actions

    def load(self, path: Path):
        self.call("Page.navigate", url=Path(path).resolve().as_uri())
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate failed: {r['exceptionDetails']}")
        return r.get("result", {}).get("value")

    def mouse_move(self, x, y):
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def screenshot(self, out: Path):
        """A full-page PNG (the page's whole height at the window's width)."""
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        height = int(min(max(size["height"], self.height), 16000))
        self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=height,
                  deviceScaleFactor=1, mobile=False)
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        self.call("Emulation.clearDeviceMetricsOverride")
        Path(out).write_bytes(base64.b64decode(shot["data"]))
        return Path(out)

    def close(self):
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
            self._log.close()
