"""The readiness probes of the vllm and litellm roles' verify, as the roles have them (the two tasks read from
roles/<role>/tasks/verify.yml, run in a local play), against a server that never answers 200: the run must fail
with the role's own message naming the model or deployment and what the server said (the probe itself is no_log and
must not fail the run with its censored result), and the key must not be printed. Only the success path runs in the
lab. The servers here are a closed port and a stand-in answering 503 with vLLM's error shape (a test double for a
failing server: the real one cannot be made to fail on purpose here)."""

import http.server
import os
import socket
import sys
import threading

import pytest
import yaml
from conftest import ROOT, playbook

pytestmark = pytest.mark.slow


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Failing(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = b'{"error": {"message": "EngineDeadError: the engine is draining", "code": 503}}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def failing_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def role_tasks(role, *names):
    with open(os.path.join(ROOT, "roles", role, "tasks", "verify.yml")) as handle:
        tasks = yaml.safe_load(handle)
    found = [t for t in tasks if any(t["name"].startswith(n) for n in names)]
    assert len(found) == len(names), [t["name"] for t in tasks]
    return found


def run_play(tmp_path, tasks, variables):
    play = [{"name": "readiness probes", "hosts": "localhost", "gather_facts": False, "vars": variables,
             "tasks": tasks}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play, sort_keys=False))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    return playbook(str(path), "-i", str(inventory), timeout=300)


def test_the_gateways_probe_names_each_deployment_that_did_not_answer(tmp_path, failing_server):
    closed = free_port()
    tasks = role_tasks("litellm", "Wait until every GPU VM deployment completes", "Stop when a deployment did not")
    rc, out, err = run_play(tmp_path, tasks, {
        "litellm_rendered": {"vm_deployments": ["fast-gpu-a"]}, "litellm_bind_address": "127.0.0.1",
        "litellm_port": failing_server, "litellm_secrets": {"master_key": "sk-probe-test-key"},
        "litellm_verify_models": True, "litellm_verify_timeout": 10,
        "service_compose_started": {"litellm": ["litellm"]}})
    assert rc != 0
    assert ("fast-gpu-a: did not complete a token through the gateway on localhost within 10 s "
            "(litellm_verify_models): HTTP 503 EngineDeadError: the engine is draining") in out, out[-3000:]
    assert "sk-probe-test-key" not in out + err
    # Nothing listens: the connection error is named the same way.
    tasks = role_tasks("litellm", "Wait until every GPU VM deployment completes", "Stop when a deployment did not")
    rc, out, err = run_play(tmp_path, tasks, {
        "litellm_rendered": {"vm_deployments": ["fast-gpu-b"]}, "litellm_bind_address": "127.0.0.1",
        "litellm_port": closed, "litellm_secrets": {"master_key": "sk-probe-test-key"},
        "litellm_verify_models": True, "litellm_verify_timeout": 5,
        "service_compose_started": {"litellm": ["litellm"]}})
    assert rc != 0 and "fast-gpu-b: did not complete a token through the gateway" in out, out[-3000:]
    assert "sk-probe-test-key" not in out + err


def test_the_vllm_probe_names_each_model_that_did_not_complete_a_token(tmp_path, failing_server):
    tasks = role_tasks("vllm", "Wait until every model completes one token", "Stop when a model did not complete")
    rc, out, err = run_play(tmp_path, tasks, {
        "vllm_rendered": {"ports": {"fast": failing_server}}, "vllm_bind_address": "127.0.0.1",
        "vllm_api_key": "vllm-probe-test-key", "vllm_api_key_enabled": True, "vllm_health_timeout": 10,
        "llmstack_start_services": True})
    assert rc != 0
    assert ("fast on 127.0.0.1:%d: answers /health but did not complete a token under its served name within 10 s: "
            "HTTP 503 EngineDeadError: the engine is draining" % failing_server) in out, out[-3000:]
    assert "vllm-probe-test-key" not in out + err
