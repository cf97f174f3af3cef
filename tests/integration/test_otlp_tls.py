"""test_otlp_tls.py — TLS and mutual TLS against the real Jaeger, with a
private CA the test makes (docs/configuration.md "TLS", docs/relay.md).

Owns: a throw-away PKI made with the openssl command (a CA, a second CA
nobody trusts, a server certificate for 127.0.0.1, client certificates from
either CA); two Jaegers of this module's own (tests/harness/jaeger.sh with
MST_JAEGER_TLS_DIR): one with server TLS on its OTLP receivers and query
API, one that also requires a client certificate; and the matrix over the
three mstrace HTTP clients:

  - the in-process OTLP exporter (test_otlp_transport_driver: config from
    OTEL_EXPORTER_OTLP_*, the real transport) over grpc, http/protobuf and
    http/json, server TLS and mutual TLS, spans found through the https
    query API; the TRACES_ variable winning over the generic one; gRPC over
    TLS keeping one connection for several exports (h2_count_proxy.py);
  - the relay (`mstrace forward`), grpc and http/protobuf over mutual TLS;
  - `mstrace analyze --jaeger https://...` with --jaeger-ca/-cert/-key;

and the failures that are configuration, not outage: a wrong CA and a
missing or foreign client certificate each end with one line naming the
variable (or flag) to fix, the batch counted failed and never retried.
"""
import json
import os
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jaeger_fixture import running_jaeger  # noqa: E402
from otlp_driver import clean_env, driver  # noqa: E402,F401  (driver: a fixture)
from h2_count_proxy import H2CountProxy  # noqa: E402
from test_otlp_relay import FAST, make_request, relay_env, relay_factory, send_mindie  # noqa: E402,F401

if os.environ.get("MST_SKIP_JAEGER") == "1":
    pytest.skip("MST_SKIP_JAEGER=1", allow_module_level=True)

N = 6
PROTOCOLS = ["grpc", "http/protobuf", "http/json"]


# ------------------------------------------------------------------ PKI

def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(d: Path, name: str):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=mstrace test {name}",
             cwd=d)


def _make_leaf(d: Path, name: str, ca: str, ext: str):
    (d / f"{name}.ext").write_text(ext)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN=mstrace test {name}", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """ca (trusted), otherca (trusted by nobody), server (127.0.0.1, by ca),
    client (by ca), foreign (a client certificate by otherca)."""
    d = tmp_path_factory.mktemp("pki")
    _make_ca(d, "ca")
    _make_ca(d, "otherca")
    _make_leaf(d, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _make_leaf(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
    _make_leaf(d, "foreign", "otherca", "extendedKeyUsage=clientAuth\n")
    return d


def _tls_dir(pki: Path, name: str, mutual: bool) -> Path:
    """The layout jaeger.sh reads (MST_JAEGER_TLS_DIR)."""
    d = pki / name
    d.mkdir()
    for f in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key"):
        (d / f).write_bytes((pki / f).read_bytes())
    if mutual:
        (d / "client-ca.pem").write_bytes((pki / "ca.pem").read_bytes())
    return d


def _query_context(pki: Path, mutual: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if mutual:
        ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    return ctx


@pytest.fixture(scope="module")
def jaeger_tls(pki):
    with running_jaeger(_tls_dir(pki, "tls", False), _query_context(pki, False)) as j:
        yield j


@pytest.fixture(scope="module")
def jaeger_mtls(pki):
    with running_jaeger(_tls_dir(pki, "mtls", True), _query_context(pki, True)) as j:
        yield j


# ------------------------------------------------------------- helpers

def _endpoint(jaeger, protocol: str) -> str:
    return f"https://{jaeger.otlp_grpc_addr}" if protocol == "grpc" else jaeger.traces_endpoint


def _tls_env(pki: Path, ca="ca", client=None, traces=False) -> dict:
    prefix = "OTEL_EXPORTER_OTLP_TRACES_" if traces else "OTEL_EXPORTER_OTLP_"
    env = {prefix + "CERTIFICATE": str(pki / f"{ca}.pem")}
    if client:
        env[prefix + "CLIENT_CERTIFICATE"] = str(pki / f"{client}.pem")
        env[prefix + "CLIENT_KEY"] = str(pki / f"{client}.key")
    return env


def _export(driver, url, protocol, env, batches=None):  # noqa: F811
    """One driver run; its JSON counters plus "stderr" and "service"."""
    service = f"mstrace-tls-{protocol.replace('/', '-')}-{uuid.uuid4().hex[:8]}"
    argv = [str(driver), "--url", url, "--protocol", protocol, "--spans", str(N), "--timeout-ms", "10000",
            "--backoff-scale", "0.01"]
    if batches:
        argv += ["--batches", str(batches)]
    p = subprocess.run(argv, env=clean_env(dict(env, OTEL_SERVICE_NAME=service)), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["stderr"], out["service"] = p.stderr, service
    return out


def _config_error_lines(log: str) -> list:
    return [line for line in log.splitlines() if "configuration error" in line]


def _assert_config_error(out, words):
    """All spans failed at the first attempt, with one line holding `words`."""
    assert out["spans_exported"] == 0 and out["spans_failed"] == N, out
    assert out["retries"] == 0, out
    lines = _config_error_lines(out["stderr"])
    assert len(lines) == 1, out["stderr"]
    for w in words:
        assert w in lines[0], lines[0]


# --------------------------------------------------------- the exporter

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exporter_server_tls(driver, jaeger_tls, pki, protocol):  # noqa: F811
    out = _export(driver, _endpoint(jaeger_tls, protocol), protocol, _tls_env(pki))
    assert out["spans_exported"] == N and out["spans_failed"] == 0, out["stderr"]
    assert len(jaeger_tls.wait_for_spans(out["service"], N)) == N


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exporter_mutual_tls(driver, jaeger_mtls, pki, protocol):  # noqa: F811
    out = _export(driver, _endpoint(jaeger_mtls, protocol), protocol, _tls_env(pki, client="client", traces=True))
    assert out["spans_exported"] == N and out["spans_failed"] == 0, out["stderr"]
    assert len(jaeger_mtls.wait_for_spans(out["service"], N)) == N


def test_grpc_over_tls_keeps_one_connection(driver, jaeger_tls, pki):  # noqa: F811
    """gRPC over TLS (HTTP/2 by ALPN) reuses its connection for every export,
    on libcurl < 8 too: a TCP proxy in front of the receiver accepts one."""
    k = N
    with H2CountProxy(jaeger_tls.otlp_grpc_addr, tls=True) as proxy:
        out = _export(driver, f"https://{proxy.addr}", "grpc", _tls_env(pki), batches=k)
        accepted = proxy.accepted
    assert out["batches_ok"] == k and out["spans_exported"] == N and out["retries"] == 0, out["stderr"]
    assert accepted == 1
    assert len(jaeger_tls.wait_for_spans(out["service"], N)) == N


def test_traces_variables_win(driver, jaeger_mtls, pki):  # noqa: F811
    """Each TRACES_ variable wins over its generic one (the generic ones
    here name an untrusted CA and a foreign client certificate)."""
    env = _tls_env(pki, ca="otherca", client="foreign")
    env.update(_tls_env(pki, client="client", traces=True))
    out = _export(driver, _endpoint(jaeger_mtls, "http/protobuf"), "http/protobuf", env)
    assert out["spans_exported"] == N, out["stderr"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exporter_wrong_ca_is_a_configuration_error(driver, jaeger_tls, pki, protocol):  # noqa: F811
    out = _export(driver, _endpoint(jaeger_tls, protocol), protocol, _tls_env(pki, ca="otherca", traces=True),
                  batches=3)
    # three batches, one line: logged once, every batch failed at once
    assert out["batches_failed"] == 3, out
    _assert_config_error(out, ["OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "not signed by the CA"])


def test_exporter_system_cas_name_the_variable(driver, jaeger_tls):  # noqa: F811
    out = _export(driver, _endpoint(jaeger_tls, "http/protobuf"), "http/protobuf", {})
    _assert_config_error(out, ["set OTEL_EXPORTER_OTLP_CERTIFICATE"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exporter_missing_client_certificate(driver, jaeger_mtls, pki, protocol):  # noqa: F811
    out = _export(driver, _endpoint(jaeger_mtls, protocol), protocol, _tls_env(pki))
    _assert_config_error(out, ["requires a client certificate", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                               "OTEL_EXPORTER_OTLP_CLIENT_KEY"])


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_exporter_foreign_client_certificate(driver, jaeger_mtls, pki, protocol):  # noqa: F811
    out = _export(driver, _endpoint(jaeger_mtls, protocol), protocol, _tls_env(pki, client="foreign"))
    _assert_config_error(out, ["refused the client certificate", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"])


def test_unreadable_certificate_fails_at_start(driver, pki):  # noqa: F811
    env = clean_env({"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki / "missing.pem")})
    p = subprocess.run([str(driver), "--url", "https://127.0.0.1:1/v1/traces", "--protocol", "http/protobuf",
                        "--spans", "1"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert 'OTEL_EXPORTER_OTLP_CERTIFICATE="' in p.stderr and "not a readable file" in p.stderr, p.stderr


# ------------------------------------------------------------- the relay

@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_relay_mutual_tls(relay_factory, jaeger_mtls, pki, protocol):  # noqa: F811
    trace_id = uuid.uuid4().bytes
    env = relay_env(_endpoint(jaeger_mtls, protocol), protocol, **_tls_env(pki, client="client"))
    d = relay_factory(env, FAST).start()
    for i in range(N):
        send_mindie(d.socket_name, make_request(i, service="mstrace-tls-relay", trace_id=trace_id))
    deadline = time.monotonic() + 60
    trace = None
    while time.monotonic() < deadline and not (trace and len(trace["spans"]) >= N):
        trace = jaeger_mtls.trace(trace_id.hex())
        time.sleep(0.2)
    assert d.stop() == 0
    assert trace and len(trace["spans"]) == N, d.log()[-3000:]
    assert d.summary()["spans_forwarded"] == N


def test_relay_missing_client_certificate_not_retried(relay_factory, jaeger_mtls, pki):  # noqa: F811
    env = relay_env(_endpoint(jaeger_mtls, "http/protobuf"), "http/protobuf", **_tls_env(pki))
    d = relay_factory(env, FAST).start()
    for i in range(N):
        send_mindie(d.socket_name, make_request(i))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and d.log().count("configuration error") == 0:
        time.sleep(0.05)
    assert d.stop() == 0
    s = d.summary()
    assert s["failed"] == N and s["forwarded"] == 0 and s["lost_at_exit"] == 0, d.log()
    lines = _config_error_lines(d.log())
    assert len(lines) == 1 and "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE" in lines[0], d.log()
    assert "retrying in" not in d.log()


# ------------------------------------------------------------ analyze

def _analyze(mstrace_bin, jaeger, service, *flags):
    return subprocess.run([str(mstrace_bin), "analyze", "-q", "--json", "-", "--jaeger", jaeger.query_url,
                           "--service", service, *flags], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("mutual", [False, True])
def test_analyze_reads_https_jaeger(mstrace_bin, driver, jaeger_tls, jaeger_mtls, pki, mutual):  # noqa: F811
    j = jaeger_mtls if mutual else jaeger_tls
    client = "client" if mutual else None
    out = _export(driver, _endpoint(j, "http/protobuf"), "http/protobuf", _tls_env(pki, client=client))
    assert len(j.wait_for_spans(out["service"], N)) == N
    flags = ["--jaeger-ca", str(pki / "ca.pem")]
    if mutual:
        flags += ["--jaeger-cert", str(pki / "client.pem"), "--jaeger-key", str(pki / "client.key")]
    p = _analyze(mstrace_bin, j, out["service"], *flags)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["inputs"][0]["kind"] == "jaeger" and out["data_quality"]["spans"] == N


@pytest.mark.parametrize("case,flags,words", [
    ("wrong-ca", ["--jaeger-ca", "otherca.pem"], ["not signed by the CA", "fix --jaeger-ca"]),
    ("no-client-cert", ["--jaeger-ca", "ca.pem"], ["requires a client certificate", "--jaeger-cert"]),
])
def test_analyze_tls_errors_name_the_flag(mstrace_bin, jaeger_mtls, pki, case, flags, words):
    flags = [f if f.startswith("--") else str(pki / f) for f in flags]
    p = _analyze(mstrace_bin, jaeger_mtls, "any", *flags)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_https_to_a_plain_http_server_is_a_configuration_error(driver):  # noqa: F811
    from otlp_test_server import OTLPTestServer
    with OTLPTestServer() as srv:
        out = _export(driver, srv.url().replace("http://", "https://"), "http/protobuf", {})
        requests = len(srv.requests)
    assert requests == 0
    _assert_config_error(out, ["does not speak TLS", "http://"])


@pytest.mark.parametrize("insecure", [None, "false"])
def test_grpc_endpoint_without_scheme_means_tls(driver, jaeger_tls, pki, insecure):  # noqa: F811
    """As the specification says for gRPC: host:port without a scheme is TLS
    unless OTEL_EXPORTER_OTLP_INSECURE=true."""
    env = _tls_env(pki)
    if insecure is not None:
        env["OTEL_EXPORTER_OTLP_INSECURE"] = insecure
    out = _export(driver, jaeger_tls.otlp_grpc_addr, "grpc", env)
    assert out["spans_exported"] == N and out["spans_failed"] == 0, out["stderr"]
    assert len(jaeger_tls.wait_for_spans(out["service"], N)) == N
