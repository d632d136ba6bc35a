"""stream_check (the seeds' `curl -N` after deploying) run by Ansible against a model server that streams - the vLLM
stand-in tools/fake_vllm.py (vLLM's OpenAI API shapes, one content event every 25 ms; no GPU here) - and against a
server that buffers: the same events written in one piece at the end, as a proxy with buffering on delivers them.
The lab runs the module through Caddy and LiteLLM in tls_proxy's verify step (tests/integration/test_lab.py)."""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT, ansible_env, parse_json_report

KEY = "sk-stream-check-test-0123"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_module(args):
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m",
           "pvegpu.llmstack.stream_check", "-a", json.dumps(args)]
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    result = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=120)
    return list(parse_json_report(result.stdout)["plays"][0]["tasks"][0]["hosts"].values())[0]


@pytest.fixture(scope="module")
def streaming():
    port = free_port()
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "fake_vllm.py"), "--port", str(port),
                             "--served-model", "fast", "--api-key", KEY, "--cadence-ms", "25"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    yield "http://127.0.0.1:%d" % port
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def buffering():
    events = "".join("data: %s\n\n" % json.dumps({"model": "fast", "choices": [{"delta": {"content": w}}]})
                     for w in ("One", " two", " three")) + "data: [DONE]\n\n"

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            time.sleep(0.3)          # the model generates; a buffering proxy holds the events back until the end
            body = events.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def test_a_streamed_answer_passes_and_says_how_it_arrived(streaming):
    result = run_module({"url": streaming, "api_key": KEY})
    assert not result.get("failed"), result
    assert result["model"] == {"asked": "fast", "answered": "fast"}
    assert result["content_events"] >= 2 and result["reads"] >= 2 and result["spread_s"] > 0
    assert KEY not in json.dumps(result)


def test_a_wrong_key_fails_naming_the_status(streaming):
    result = run_module({"url": streaming, "api_key": "sk-wrong-key-000000", "model": "fast"})
    assert result.get("failed") and "HTTP status 401" in result["msg"], result


def test_an_answer_delivered_at_once_fails_as_buffered(buffering):
    result = run_module({"url": buffering, "api_key": KEY, "model": "fast"})
    assert result.get("failed"), result
    assert "something between the client and the model buffers the stream" in result["msg"], result
    assert result["content_events"] == 3 and result["reads"] == 1
