"""The tls_proxy role with the real nginx and Caddy from Debian, in front of a stand-in SSE upstream.

What is real: the role (run on this machine, connection local, config and PKI under a temp dir), the
certificates community.crypto made, the nginx site / Caddyfile it rendered and tested, and nginx 1.22 / Caddy 2.6
themselves, run in the foreground on 127.0.0.1 from exactly those files (nginx inside a small main config with
temp paths, as HARNESS.md says; Caddy from the rendered Caddyfile as is, admin API off).
The test double: the upstream. LiteLLM itself streams through the proxy in tests/integration/test_litellm.py's
bench (make bench); here a small SSE server sends its events in lock-step with the client (both live in this
process): after each event it waits until the client has decoded that event before it sends the next. A proxy
that passes events on as they come keeps the stream moving; one that holds them back (buffering, gzip, a flush
interval) leaves the upstream waiting, and after HOLD seconds the upstream gives up on that event and sends the
rest without waiting, so the stream still ends and the check names the first event that was held back. This is a
causal check, not a timing one: the latency figures (first chunk, gaps) are measured by make bench
(tools/bench_litellm.py), never asserted here, where the cores are shared with the rest of the suite.

Loopback SSE arrives as sent even through a buffering nginx, so the lock-step test alone cannot prove that
buffering is off: the control (the same site with proxy_buffering on and gzip on text/event-stream) must fail
the same check, and `nginx -T` must show proxy_buffering off on every API location.
"""

import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import pytest
import yaml
from conftest import parse_json_report, playbook
from cryptography import x509

pytestmark = pytest.mark.slow

EVENTS = 8
HOLD = 2.0   # seconds the upstream waits for the client to decode an event before it calls it held back
# token -> one threading.Event per event of that stream, set by the client when it has decoded the event
ACKS = {}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


class SseUpstream:
    """Stand-in for LiteLLM: SSE events in lock-step with the client; counts the requests it saw and records, per
    stream token, which events the client had decoded before the upstream sent anything more."""

    def __init__(self):
        self.requests = []
        self.delivered = {}
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body, content_type="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                upstream.requests.append(self.path)
                self._send(200, b'{"status": "ok"}')

            def do_POST(self):  # noqa: N802
                upstream.requests.append(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                token = json.loads(self.rfile.read(length) or b"{}").get("token")
                acks = ACKS.get(token) or [threading.Event() for _seq in range(EVENTS)]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                delivered, waiting = [], True
                for seq in range(EVENTS):
                    self._chunk(b"data: " + json.dumps({"seq": seq, "sent": time.time()}).encode() + b"\n\n")
                    # Once one event was held back, the rest go out without waiting: the stream still ends.
                    waiting = waiting and acks[seq].wait(HOLD)
                    delivered.append(waiting)
                upstream.delivered[token] = delivered
                self._chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def client_context(ca=None, cert=None, key=None):
    context = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    if cert:
        context.load_cert_chain(cert, key)
    return context


def stream(port, context, server_hostname="127.0.0.1"):
    """POST a streaming request through the proxy; (token, [(arrival time, event)]) as the events become readable.

    Tells the upstream (through ACKS) each event it has decoded, so the upstream sends the next one only then.
    Asks for gzip like a browser does; a gzip-encoded stream is inflated incrementally, so an event counts as
    arrived when its bytes can be decoded."""
    token = os.urandom(8).hex()
    ACKS[token] = [threading.Event() for _seq in range(EVENTS)]
    conn = http.client.HTTPSConnection(server_hostname, port, context=context, timeout=30)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps({"stream": True, "token": token}).encode(),
                     headers={"Content-Type": "application/json", "Accept-Encoding": "gzip"})
        response = conn.getresponse()
        assert response.status == 200, response.read()[:300]
        inflate = zlib.decompressobj(31) if response.getheader("Content-Encoding") == "gzip" else None
        buffer, events = b"", []
        while True:
            data = response.read1(65536)
            if not data:
                break
            buffer += inflate.decompress(data) if inflate else data
            now = time.time()
            while b"\n\n" in buffer:
                raw, buffer = buffer.split(b"\n\n", 1)
                payload = raw[len(b"data: "):]
                if payload != b"[DONE]":
                    event = json.loads(payload)
                    events.append((now, event))
                    ACKS[token][event["seq"]].set()
    finally:
        conn.close()
        ACKS.pop(token, None)
    return token, events


def streaming_problems(upstream, result):
    """Empty when every event reached the client while the upstream held the stream open waiting for it, i.e. the
    proxy passed each event on before the upstream had sent anything more (issue #8: no buffering)."""
    token, events = result
    if [event["seq"] for _arrived, event in events] != list(range(EVENTS)):
        return ["events %s arrived, 0..%d were sent" % ([event["seq"] for _arrived, event in events], EVENTS - 1)]
    delivered = upstream.delivered.get(token)
    if delivered is None:
        return ["the upstream never saw stream %s" % token]
    if False in delivered:
        held = delivered.index(False)
        return ["event %d did not reach the client within %.0f s of the upstream sending it, and nothing more "
                "was sent meanwhile: the proxy held it back" % (held, HOLD)]
    return []


def streaming_problems_best_of_three(upstream, port, context):
    """[] when one of three streams went through in lock-step, else every stream's problems. A held-back event
    means HOLD seconds without progress; on two cores shared with molecule the scheduler has delayed a stream by
    ~150 ms, never seconds, yet one retry is cheap. A proxy that buffers fails all three (the control below
    shows it fails even one)."""
    found = []
    for _attempt in range(3):
        problems = streaming_problems(upstream, stream(port, context))
        if not problems:
            return []
        found.append(problems)
    return found


NGINX_MAIN = """worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    include {site};
}}
"""


class Proxy:
    """The role applied to this machine under a temp dir, and the server it configured, run in the foreground."""

    def __init__(self, base, server, upstream):
        self.base, self.server, self.upstream = base, server, upstream
        self.port = free_port()
        self.pki = base / "pki"
        self.site = base / ("Caddyfile" if server == "caddy" else "site.conf")
        self.main = base / "nginx.conf"
        self.main.write_text(NGINX_MAIN.format(d=base, site=base / "site.conf"))
        self.expiry_dir = tempfile.mkdtemp(prefix="llmstack-tls-expiry-")
        self.proc = None

    def inventory(self, **extra):
        host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "llmstack_start_services": False,
                "tls_proxy_server": self.server,
                # nginx and caddy come from make setup's apt packages; the role's apt task is not run here.
                "tls_proxy_install_packages": False,
                "tls_proxy_nginx_remove_default_site": False,
                "tls_proxy_listen_addresses": ["127.0.0.1"],
                "tls_proxy_server_names": ["gw.llmstack.test"],
                "tls_proxy_port": self.port,
                "tls_proxy_upstream_host": "127.0.0.1",
                "tls_proxy_upstream_port": self.upstream.port,
                "tls_proxy_pki_dir": str(self.pki),
                "tls_proxy_nginx_site_path": str(self.base / "site.conf"),
                "tls_proxy_nginx_main_config": str(self.main),
                "tls_proxy_caddyfile_path": str(self.base / "Caddyfile"),
                "tls_proxy_caddy_admin": "off",
                "tls_proxy_state_dir": str(self.base / "state"),
                # A directory the server's workers may read (nginx's run as nobody; the temp dir is root's only).
                "tls_proxy_metrics_file": os.path.join(self.expiry_dir, "tls.prom"),
                "tls_proxy_client_certificates": ["agent"]}
        host.update(extra)
        path = self.base / "hosts.yml"
        path.write_text(yaml.safe_dump({"all": {"hosts": {"gw": host}}}))
        play = self.base / "play.yml"
        play.write_text("- hosts: gw\n  gather_facts: false\n  roles: [pvegpu.llmstack.tls_proxy]\n")
        return str(path), str(play)

    def apply(self, **extra):
        inventory, play = self.inventory(**extra)
        rc, out, err = playbook("-i", inventory, play, json_output=True)
        assert rc == 0, out[-3000:] + err[-2000:]
        return parse_json_report(out)["stats"]["gw"]

    def start(self, config=None):
        self.stop()
        if self.server == "nginx":
            args = ["nginx", "-c", str(config or self.main), "-g", "daemon off;"]
            env = None
        else:
            args = ["caddy", "run", "--adapter", "caddyfile", "--config", str(config or self.site)]
            env = dict(os.environ, HOME=str(self.base), XDG_DATA_HOME=str(self.base / "data"),
                       XDG_CONFIG_HOME=str(self.base / "config"))
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert wait_port(self.port), "%s did not listen on %d" % (self.server, self.port)
        return self

    def close(self):
        self.stop()
        shutil.rmtree(self.expiry_dir, ignore_errors=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.proc = None
        # The port is reused by the next start; wait until it is free again.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and wait_port(self.port, timeout=0.2):
            time.sleep(0.1)

    def ca(self):
        return str(self.pki / "ca.crt")

    def client(self, name="agent"):
        return str(self.pki / "clients" / (name + ".crt")), str(self.pki / "clients" / (name + ".key"))


@pytest.fixture(scope="module")
def upstream():
    server = SseUpstream()
    yield server
    server.close()


@pytest.fixture(scope="module", params=["nginx", "caddy"])
def proxy(request, tmp_path_factory, upstream):
    if shutil.which(request.param) is None:
        pytest.fail("%s is not installed: run make setup" % request.param)
    proxy = Proxy(tmp_path_factory.mktemp(request.param), request.param, upstream)
    try:
        proxy.first_stats = proxy.apply()
        proxy.start()
        yield proxy
    finally:
        proxy.close()


def test_first_run_made_the_pki_with_private_keys_0600(proxy):
    assert proxy.first_stats["changed"] > 0 and proxy.first_stats["failures"] == 0
    for key in ("ca.key", "server.key", "clients/agent.key"):
        mode = stat.S_IMODE((proxy.pki / key).stat().st_mode)
        assert mode == 0o600, "%s is %o" % (key, mode)
    owner = "caddy" if proxy.server == "caddy" else "root"
    import pwd
    assert pwd.getpwuid((proxy.pki / "server.key").stat().st_uid).pw_name == owner
    assert "BEGIN" in (proxy.pki / "server.crt").read_text()


def test_chunks_reach_the_client_as_the_upstream_sends_them(proxy, upstream):
    assert streaming_problems_best_of_three(upstream, proxy.port, client_context(proxy.ca())) == []


def test_a_client_trusting_the_internal_ca_connects_by_address_and_by_name(proxy):
    conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=client_context(proxy.ca()), timeout=10)
    conn.request("GET", "/health/liveliness")
    assert conn.getresponse().status == 200
    # By name: the certificate carries tls_proxy_server_names (the connection still goes to 127.0.0.1).
    context = client_context(proxy.ca())
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="gw.llmstack.test") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_a_client_that_does_not_trust_the_ca_is_refused(proxy):
    conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=client_context(), timeout=10)
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/health/liveliness")
    # A name the certificate does not carry is refused as well.
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as raw, \
            pytest.raises(ssl.SSLCertVerificationError):
        client_context(proxy.ca()).wrap_socket(raw, server_hostname="other.llmstack.test")


def test_only_the_api_is_proxied(proxy, upstream):
    before = len(upstream.requests)
    for path, expected in (("/metrics/", 404), ("/ui/", 404), ("/key/generate", 404), ("/", 404),
                           ("/v1/models", 200), ("/models", 200)):
        conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=client_context(proxy.ca()), timeout=10)
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status == expected, path
    assert upstream.requests[before:] == ["/v1/models", "/models"]


def test_a_rerun_changes_nothing_and_keeps_the_keys(proxy):
    keys = {name: (proxy.pki / name).read_bytes() for name in ("ca.key", "server.key", "server.crt")}
    stats = proxy.apply()
    assert stats["changed"] == 0, stats
    assert {name: (proxy.pki / name).read_bytes() for name in keys} == keys


def test_mtls_refuses_clients_without_a_ca_signed_certificate(proxy, upstream, tmp_path):
    stats = proxy.apply(tls_proxy_mtls=True)
    assert stats["changed"] > 0
    proxy.start()
    try:
        before = len(upstream.requests)
        # Without a certificate: nginx answers 400 ("No required SSL certificate was sent"), Caddy ends the
        # handshake; either way the upstream never sees the request.
        conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=client_context(proxy.ca()), timeout=10)
        try:
            conn.request("GET", "/health/liveliness")
            assert conn.getresponse().status == 400
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            pass
        # With a certificate from another CA: refused the same way.
        other = tmp_path / "other"
        other.mkdir()
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(other / "k"), "-out", str(other / "c"), "-subj", "/CN=intruder", "-days", "2",
                        "-addext", "extendedKeyUsage=clientAuth"], check=True, capture_output=True)
        conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, timeout=10,
                                           context=client_context(proxy.ca(), str(other / "c"), str(other / "k")))
        try:
            conn.request("GET", "/health/liveliness")
            assert conn.getresponse().status == 400
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            pass
        assert upstream.requests[before:] == []
        # With the certificate the internal CA issued: through, and still streaming as sent.
        conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=client_context(proxy.ca(), *proxy.client()),
                                           timeout=10)
        conn.request("GET", "/health/liveliness")
        assert conn.getresponse().status == 200
        assert streaming_problems_best_of_three(upstream, proxy.port,
                                                client_context(proxy.ca(), *proxy.client())) == []
    finally:
        proxy.apply(tls_proxy_mtls=False)
        proxy.start()


def test_litellm_metrics_are_served_in_plain_http_to_the_monitoring_hosts_only(proxy, upstream):
    """Issue #21: Prometheus must read LiteLLM's /metrics/ while LiteLLM stays on loopback. The metrics listener
    serves /metrics/ and nothing else, only to tls_proxy_metrics_allow (here 127.0.0.2 as the observability host;
    the tests connect from 127.0.0.2 or 127.0.0.3 by binding the source address)."""
    metrics_port = free_port()
    proxy.apply(tls_proxy_metrics_listen_address="127.0.0.1", tls_proxy_metrics_port=metrics_port,
                tls_proxy_metrics_allow=["127.0.0.2"])
    proxy.start()
    try:
        assert wait_port(metrics_port)

        def get(path, source):
            conn = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10, source_address=(source, 0))
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            return response.status

        # Issue #34 item 6: the certificates' expiry, as Prometheus reads it (job "tls"), equal to each file's
        # notAfter as the cryptography library reads it (not the role's parser).
        conn = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10, source_address=("127.0.0.2", 0))
        conn.request("GET", "/llmstack/tls-metrics")
        response = conn.getresponse()
        body = response.read().decode()
        assert response.status == 200 and response.getheader("Content-Type").startswith("text/plain"), body
        served = {}
        for line in body.splitlines():
            if line and not line.startswith("#"):
                labels, value = line.rsplit(" ", 1)
                served[labels[labels.index('certificate="') + 13:].split('"')[0]] = int(value)
        wanted = {name: int(x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc.timestamp())
                  for name, path in (("server", proxy.pki / "server.crt"), ("ca", proxy.pki / "ca.crt"),
                                     ("client/agent", proxy.pki / "clients" / "agent.crt"))}
        assert served == wanted
        assert get("/llmstack/tls-metrics", "127.0.0.3") in (403, 404)

        before = len(upstream.requests)
        assert get("/metrics/", "127.0.0.2") == 200
        assert get("/metrics", "127.0.0.2") == 200
        # Not the monitoring host, or not the metrics: refused, and the upstream never sees it.
        assert get("/metrics/", "127.0.0.3") in (403, 404)
        for path in ("/key/generate", "/ui/", "/v1/models", "/"):
            assert get(path, "127.0.0.2") == 404, path
        assert upstream.requests[before:] == ["/metrics/", "/metrics"]
    finally:
        proxy.apply()
        proxy.start()


@pytest.fixture(scope="module")
def nginx_proxy(tmp_path_factory, upstream):
    proxy = Proxy(tmp_path_factory.mktemp("nginx-control"), "nginx", upstream)
    proxy.apply()
    yield proxy
    proxy.close()


def locations(dump):
    """{path: block text} of every location in `nginx -T` output."""
    found, current, depth, lines = {}, None, 0, []
    for line in dump.splitlines():
        stripped = line.strip()
        if current is None and stripped.startswith("location ") and stripped.endswith("{"):
            current, depth, lines = stripped.split()[1], 1, []
            continue
        if current is not None:
            depth += stripped.count("{") - stripped.count("}")
            if depth == 0:
                found[current] = "\n".join(lines)
                current = None
            else:
                lines.append(stripped)
    return found


def test_nginx_T_shows_buffering_off_on_every_api_location(nginx_proxy):
    dump = subprocess.run(["nginx", "-T", "-c", str(nginx_proxy.main)], capture_output=True, text=True, check=True)
    blocks = locations(dump.stdout)
    api = [path for path in blocks if path != "/"]
    assert sorted(api) == sorted(["/v1/", "/chat/completions", "/completions", "/embeddings", "/models",
                                  "/health/liveliness", "/health/readiness"])
    for path in api:
        for directive in ("proxy_buffering off;", "proxy_cache off;", "proxy_http_version 1.1;",
                          'proxy_set_header Connection "";', "gzip off;", "proxy_read_timeout 600s;",
                          "proxy_send_timeout 600s;"):
            assert directive in blocks[path].splitlines(), (path, directive)
    assert "return 404;" in blocks["/"]


def test_a_buffering_nginx_fails_the_same_streaming_check(nginx_proxy, upstream, tmp_path):
    """The control: the role's site with buffering on and gzip on event-stream. If this passed the lock-step
    check, the check could not tell a buffering proxy from ours."""
    site = (nginx_proxy.base / "site.conf").read_text()
    assert site.count("proxy_buffering off;") == 7
    control_site = tmp_path / "control-site.conf"
    control_site.write_text(site.replace("proxy_buffering off;", "proxy_buffering on;").replace(
        "gzip off;", "gzip on; gzip_types text/event-stream; gzip_min_length 1;"))
    control_main = tmp_path / "control.conf"
    control_main.write_text(NGINX_MAIN.format(d=tmp_path, site=control_site))
    nginx_proxy.start(control_main)
    try:
        problems = streaming_problems(upstream, stream(nginx_proxy.port, client_context(nginx_proxy.ca())))
    finally:
        nginx_proxy.stop()
    # gzip holds the first event back until the stream ends.
    assert len(problems) == 1 and problems[0].startswith("event 0 did not reach the client"), problems
    # And the role's own site, on the same port with the same client, passes.
    nginx_proxy.start()
    assert streaming_problems_best_of_three(upstream, nginx_proxy.port, client_context(nginx_proxy.ca())) == []


def test_a_site_nginx_rejects_is_put_back_and_the_run_fails(nginx_proxy):
    before = (nginx_proxy.base / "site.conf").read_text()
    inventory, play = nginx_proxy.inventory(tls_proxy_certificate_file=str(nginx_proxy.base / "missing.crt"),
                                            tls_proxy_certificate_source="files")
    rc, out, err = playbook("-i", inventory, play)
    assert rc != 0
    assert "does not exist on gw" in out and "missing.crt" in out
    assert (nginx_proxy.base / "site.conf").read_text() == before
    # An upstream nginx cannot resolve gets past the renderer, so nginx -t is what stops it; the old site returns.
    inventory, play = nginx_proxy.inventory(tls_proxy_upstream_host="no-such-host.invalid")
    rc, out, err = playbook("-i", inventory, play)
    assert rc != 0 and "nginx -t rejected the rendered site" in out, out[-3000:]
    assert (nginx_proxy.base / "site.conf").read_text() == before


NGINX_SPY = """#!/bin/sh
# Stand-in on PATH: record what the live site holds whenever nginx -t runs, then run the real nginx.
case " $* " in *" -t "*) cat {site} > {record}.$$ 2>/dev/null || echo MISSING > {record}.$$ ;; esac
exec {nginx} "$@"
"""


def test_the_working_site_stays_in_place_while_nginx_tests_a_new_one(nginx_proxy, tmp_path, monkeypatch):
    """Issue 20: a failed write of the site never removes the working one. nginx -t must test the new site from
    a separate file; the live site is replaced only after the test passed (atomic rename), and no backup or
    temporary file is left where nginx would read it."""
    site = nginx_proxy.base / "site.conf"
    before = site.read_text()
    inode = site.stat().st_ino
    spy = tmp_path / "bin"
    spy.mkdir()
    record = tmp_path / "live-site-during-test"  # one file per nginx -t run (.PID)
    (spy / "nginx").write_text(NGINX_SPY.format(site=site, record=record, nginx=shutil.which("nginx")))
    (spy / "nginx").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (spy, os.environ["PATH"]))
    listing = sorted(p.name for p in nginx_proxy.base.iterdir())
    # An upstream nginx cannot resolve gets past the renderer: nginx -t is what rejects it.
    inventory, play = nginx_proxy.inventory(tls_proxy_upstream_host="no-such-host.invalid")
    rc, out, err = playbook("-i", inventory, play)
    assert rc != 0 and "nginx -t rejected the rendered site" in out, out[-3000:]
    assert "no-such-host.invalid" in out
    seen = [p.read_text() for p in tmp_path.glob("live-site-during-test.*")]
    assert seen, "nginx -t was not run"
    assert all(text == before for text in seen), "the live site held the rejected version while nginx -t ran"
    assert site.read_text() == before and site.stat().st_ino == inode
    assert sorted(p.name for p in nginx_proxy.base.iterdir()) == listing
    # (The runs above and the fixture's first run wrote the site through the same module: tested first, then
    # one rename. tests/unit/.../test_tls_proxy.py checks the test config it builds.)


def test_bad_settings_are_named_before_anything_changes(tmp_path, upstream):
    proxy = Proxy(tmp_path, "nginx", upstream)
    inventory, play = proxy.inventory(tls_proxy_paths=["/", "/v1/"], tls_proxy_certificate_source="acme",
                                      tls_proxy_listen_addresses=["gw.local"],
                                      tls_proxy_acme_email="ops@example.org\n}\nimport evil")
    rc, out, err = playbook("-i", inventory, play)
    assert rc != 0
    for fragment in ("tls_proxy_paths: '/' would expose everything",
                     "tls_proxy_certificate_source: acme needs tls_proxy_server: caddy",
                     "tls_proxy_listen_addresses: 'gw.local' is not an IP address",
                     "tls_proxy_acme_email: 'ops@example.org\\n}\\nimport evil' is not an e-mail address"):
        assert fragment in out, out[-3000:]
    assert not proxy.pki.exists() and not (tmp_path / "site.conf").exists()
    assert os.listdir(proxy.expiry_dir) == [] and not (tmp_path / "state").exists()
    proxy.close()
