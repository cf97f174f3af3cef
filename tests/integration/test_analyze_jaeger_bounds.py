"""`mstrace analyze --jaeger` against servers that never let it finish, all
started here on loopback (a stub of the /api/traces answer format).

Owns: a server whose every page is full is read down to the 1 ms window
floor and no further (the number of requests is bounded by the window, and
counted by the server); `{}` elements and traces without spans do not make
a page full; --jaeger-max-requests and --jaeger-deadline stop the read with
exit 2 and one line saying which bound, how many requests, spans and traces
were read and how far the windows got; a Jaeger error message never reaches
the terminal as control characters. Bounded by work (requests counted), not
by a clock: the deadline case uses a server that never answers, so only the
deadline can end it.
"""

import http.server
import itertools
import json
import subprocess
import threading
import urllib.parse

import pytest

from conftest import mstrace_binary

WINDOW_START_US = 1_764_525_600_000_000
WINDOW_US = 64_000                         # 64 ms: 6 halvings down to the 1 ms floor


class _Stub(http.server.BaseHTTPRequestHandler):
    """/full: `limit` new real traces in every answer; /hollow: `limit` `{}`
    elements and `limit` traces without spans; /stall: no answer until the
    test ends; /errors: only an errors list with terminal controls."""
    ids = itertools.count(1)

    def do_GET(self):  # noqa: N802
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        if q["service"][0] != "svc":
            # The role services the reader also asks for (svc.engine_core,
            # svc.worker): absent here, answered as Jaeger answers an
            # unknown service, and kept out of the counts below.
            self.server.role_requests.append(q["service"][0])
            self._send({"data": [], "total": 0, "limit": 0, "offset": 0, "errors": None})
            return
        self.server.requests.append((int(q["start"][0]), int(q["end"][0])))
        limit, start = int(q["limit"][0]), int(q["start"][0])
        if url.path.startswith("/stall"):
            self.server.release.wait()
            return
        if url.path.startswith("/full"):
            data = []
            for _ in range(limit):
                n = next(self.ids)
                tid = f"{n:032x}"
                data.append({"traceID": tid, "processes": {"p1": {"serviceName": "svc", "tags": []}},
                             "spans": [{"traceID": tid, "spanID": f"{n:016x}", "operationName": "op",
                                        "references": [], "startTime": start, "duration": 10,
                                        "tags": [], "processID": "p1"}]})
            body = {"data": data, "errors": None}
        elif url.path.startswith("/hollow"):
            body = {"data": [{}] * limit + [{"traceID": f"{i + 1:032x}", "spans": [], "processes": {}}
                                            for i in range(limit)], "errors": None}
        else:
            body = {"data": [], "errors": [{"code": 500, "msg": "bad \x1b]0;owned\x07\x1b[2J day"}]}
        self._send(body)

    def _send(self, body):
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *a):
        pass


@pytest.fixture
def stub():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    srv.daemon_threads = True
    srv.requests = []
    srv.role_requests = []
    srv.release = threading.Event()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def analyze(url, *extra):
    args = [str(mstrace_binary()), "analyze", "--jaeger", url, "--service", "svc",
            "--start", str(WINDOW_START_US / 1e6), "--end", str((WINDOW_START_US + WINDOW_US) / 1e6),
            "--jaeger-limit", "3", "--json", "-", *extra]
    # The timeout is a hang guard (a hang fails the test), not a measure.
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def error_line(r):
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = [l for l in r.stderr.splitlines() if "error:" in l]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_always_full_pages_stop_at_the_window_floor(stub):
    r = analyze(stub.url + "/full")
    assert r.returncode == 0, r.stderr
    # Binary splits of 64 ms down to windows under 2 ms: at most 2 * 64 - 1 requests.
    assert 32 <= len(stub.requests) <= 2 * 64 - 1, len(stub.requests)
    assert min(end - start + 1 for start, end in stub.requests) >= 1000
    a = json.loads(r.stdout)
    assert a["inputs"][0]["spans"] == 3 * len(stub.requests)   # every answer's new traces, once
    assert a["inputs"][0]["truncated"] is True
    assert "the shortest window read; some of them may be missing" in r.stderr


def test_hollow_elements_do_not_make_a_page_full(stub):
    r = analyze(stub.url + "/hollow")
    assert len(stub.requests) == 1, stub.requests       # nothing to split
    assert stub.role_requests == ["svc.engine_core", "svc.worker"]   # each role service once
    assert "no spans of service svc" in error_line(r)


def test_request_limit_stops_with_what_was_read(stub):
    r = analyze(stub.url + "/full", "--jaeger-max-requests", "10")
    line = error_line(r)
    assert len(stub.requests) == 10
    assert "stopped, the --jaeger-max-requests limit of 10 was reached after 10 requests: " \
           "read 30 spans of 30 traces; service svc is complete before" in line, line
    assert r.stdout == ""                                 # no analysis of a partial read


def test_deadline_stops_a_server_that_never_answers(stub):
    r = analyze(stub.url + "/stall", "--jaeger-deadline", "2s")
    line = error_line(r)
    assert "stopped, the --jaeger-deadline of 2 s passed after 1 requests: read 0 spans of 0 traces" in line
    assert len(stub.requests) == 1


def test_jaeger_error_message_is_escaped(stub):
    r = analyze(stub.url + "/errors")
    line = error_line(r)
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "bad \\e]0;owned\\x07\\e[2J day" in line, line
