"""The litellm role and the real LiteLLM proxy (PyPI, the role's pinned version) in front of stand-in upstreams.

What is real: the role (playbooks/gateway.yml on this machine, connection local), the config.yaml it renders,
LiteLLM 1.108.7 from .venv-litellm started on 127.0.0.1 with exactly that config and the role's secrets file.
Test doubles, because they cannot run here: vLLM (tools/fake_vllm.py: vLLM's OpenAI API shapes, SSE at a fixed
cadence, bearer key) and LiteLLM's DB tier (prisma's engines cannot be downloaded here): the proxy runs without
DATABASE_URL, and the key tier is tools/fake_litellm_keys.py, which follows LiteLLM's documented /key/* shapes.
The real DB tier (keys, budgets, spend in PostgreSQL) is NOT verified here.

The GPU VMs of the test inventory are this machine too; their inference addresses are loopback addresses
(127.0.20.20, 127.0.20.21), so the stand-in upstreams listen exactly where the rendered api_base points.
"""

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
import yaml
from conftest import ROOT, parse_json_report, playbook

pytestmark = pytest.mark.slow
LITELLM = os.path.join(ROOT, ".venv-litellm", "bin", "litellm")
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)
import fake_litellm_keys  # noqa: E402
import llm_load  # noqa: E402

sys.path.pop(0)

GPU_A, GPU_B = "127.0.20.20", "127.0.20.21"
CLIENTS = [  # seed 000's table
    {"alias": "openclaw-agent", "models": ["fast", "balanced", "reasoning"], "max_budget": 50, "budget_duration": "30d",
     "max_parallel_requests": 5, "tpm_limit": 100000, "rpm_limit": 60},
    {"alias": "webapp-chatbot", "models": ["fast"], "max_budget": 10, "budget_duration": "30d",
     "max_parallel_requests": 10, "tpm_limit": 50000, "rpm_limit": 100},
]
PRICES = {"input_cost_per_token": 0.0000001, "output_cost_per_token": 0.0000002}


def free_port(host="127.0.0.1"):
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_http(host, port, path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


CADENCE_MS = 25  # fake_vllm's gap between content chunks; wide enough that a busy CI core does not bunch them


class Upstream:
    """One tools/fake_vllm.py process (a stand-in for one vLLM model server)."""

    def __init__(self, host, port, served, name, key):
        self.args = [sys.executable, os.path.join(TOOLS, "fake_vllm.py"), "--host", host, "--port", str(port),
                     "--served-model", served, "--name", name, "--api-key", key, "--cadence-ms", str(CADENCE_MS)]
        self.host, self.port, self.proc = host, port, None

    def start(self):
        self.proc = subprocess.Popen(self.args)
        assert wait_http(self.host, self.port, "/health", 20), "upstream %s did not start" % self.args
        return self

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def completions(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=5)
        conn.request("GET", "/stats")
        return json.loads(conn.getresponse().read())["completions"]


def write_inventory(base, ports, key_api_port, **gateway_vars):
    vllm_dirs = {}
    for host in ("gpu-a", "gpu-b"):
        path = base / host / "llm-inference"
        (path / "secrets").mkdir(parents=True, exist_ok=True)
        (path / "secrets" / "api_key").write_text("vllm-key-%s\n" % host)
        vllm_dirs[host] = str(path)
    data = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "inventory_check_publish_facts": False,
                 # Every host is this machine: its loopback addresses stand in for the VMs' (topology).
                 "llmstack_loopback_shared": True,
                 "llmstack_vlans": {"mgmt": {"id": 10, "cidr": "10.99.10.0/24", "gateway": "10.99.10.1"},
                                    "inference": {"id": 20, "cidr": "127.0.20.0/24"}}},
        "children": {
            "gpu_vms": {"hosts": {
                "gpu-a": {"vllm_dir": vllm_dirs["gpu-a"],
                          "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.20"},
                                                  {"vlan": "inference", "address": GPU_A}],
                          "vllm_models": [
                              {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "float16",
                               "max_model_len": 4096, "port": ports["fast"]},
                              {"name": "balanced", "model": "Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4", "dtype": "float16",
                               "quantization": "gptq", "max_model_len": 8192, "port": ports["balanced"]}]},
                "gpu-b": {"vllm_dir": vllm_dirs["gpu-b"],
                          "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.21"},
                                                  {"vlan": "inference", "address": GPU_B}],
                          "vllm_models": [
                              {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "float16",
                               "max_model_len": 8192, "port": ports["fast"]},
                              {"name": "reasoning", "model": "hugging-quants/Meta-Llama-3.1-70B-Instruct-GPTQ-INT4",
                               "dtype": "float16", "quantization": "gptq", "max_model_len": 8192,
                               "port": ports["reasoning"]}]}}},
            "llm_gateways": {"hosts": {"gw": dict({
                "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.12"},
                                        {"vlan": "inference", "address": "127.0.20.12"}],
                "litellm_dir": str(base / "llm-gateway"),
                "llmstack_start_services": False,
                "litellm_manage_keys": True,
                "litellm_key_api_url": "http://127.0.0.1:%d" % key_api_port,
                "litellm_fallbacks": {"reasoning": ["balanced", "fast"], "balanced": ["fast"]},
                "litellm_model_settings": {"fast": PRICES, "balanced": PRICES, "reasoning": PRICES},
                # 1 s: the sparse-traffic test below meets the dead deployment out of its cooldown on every request
                "litellm_cooldown_time": 1,
                "litellm_health_checks": False,
                "litellm_clients": CLIENTS}, **gateway_vars)}}}}}
    path = base / "hosts.yml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def run_gateway(inventory, *extra):
    # The test inventory has no PVE hosts, so inventory_check (which needs the whole chain) is skipped.
    rc, out, err = playbook("playbooks/gateway.yml", "-i", inventory, "--skip-tags", "tls_proxy,inventory_check",
                            *extra, json_output=True)
    assert rc == 0, out[-4000:] + err[-2000:]
    return parse_json_report(out)


def changed_tasks(report):
    return [task["task"]["name"] for play in report["plays"] for task in play["tasks"]
            if any(h.get("changed") for h in task["hosts"].values())]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """The role run once against this machine; the key tier is the documented-shape double."""
    base = tmp_path_factory.mktemp("gateway")
    ports = {"fast": free_port(GPU_A), "balanced": free_port(GPU_A), "reasoning": free_port(GPU_B)}
    secrets_dir = base / "llm-gateway" / "secrets"

    def master_key():
        path = secrets_dir / "master_key"
        return path.read_text().strip() if path.exists() else None

    key_port = free_port()
    server, store, calls = fake_litellm_keys.serve(key_port, master_key)
    inventory = write_inventory(base, ports, key_port)
    report = run_gateway(inventory)
    yield {"base": base, "dir": base / "llm-gateway", "ports": ports, "inventory": inventory, "report": report,
           "store": store, "calls": calls, "key_port": key_port}
    server.shutdown()


def test_config_routes_every_group_to_its_vms_with_in_group_fallbacks_and_no_secret(gateway):
    text = (gateway["dir"] / "config.yaml").read_text()
    config = yaml.safe_load(text)
    ports = gateway["ports"]
    own = [(d["model_name"], d["litellm_params"]["api_base"], d["litellm_params"]["order"])
           for d in config["model_list"]]
    # Each group's own deployments first (order 1), then its fallbacks' in the fallback order.
    assert own == [
        ("fast", "http://%s:%d/v1" % (GPU_A, ports["fast"]), 1),
        ("fast", "http://%s:%d/v1" % (GPU_B, ports["fast"]), 1),
        ("balanced", "http://%s:%d/v1" % (GPU_A, ports["balanced"]), 1),
        ("balanced", "http://%s:%d/v1" % (GPU_A, ports["fast"]), 2),
        ("balanced", "http://%s:%d/v1" % (GPU_B, ports["fast"]), 2),
        ("reasoning", "http://%s:%d/v1" % (GPU_B, ports["reasoning"]), 1),
        ("reasoning", "http://%s:%d/v1" % (GPU_A, ports["balanced"]), 2),
        ("reasoning", "http://%s:%d/v1" % (GPU_A, ports["fast"]), 3),
        ("reasoning", "http://%s:%d/v1" % (GPU_B, ports["fast"]), 3),
    ]
    assert {d["litellm_params"]["api_key"] for d in config["model_list"]} == {
        "os.environ/VLLM_API_KEY_GPU_A", "os.environ/VLLM_API_KEY_GPU_B"}
    assert sorted(config["router_settings"]["fallbacks"], key=str) == [
        {"balanced": ["fast"]}, {"reasoning": ["balanced", "fast"]}]
    assert config["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    assert "sk-" not in text and "vllm-key-" not in text and "database_url" not in text
    assert all(d["model_info"]["input_cost_per_token"] == PRICES["input_cost_per_token"]
               for d in config["model_list"])


def test_secrets_are_generated_0600_and_the_env_file_carries_them(gateway):
    secrets_dir = gateway["dir"] / "secrets"
    assert stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700
    for name in ("master_key", "salt_key", "postgres_password", "litellm.env", "postgres.env"):
        assert stat.S_IMODE((secrets_dir / name).stat().st_mode) == 0o600, name
    master = (secrets_dir / "master_key").read_text().strip()
    salt = (secrets_dir / "salt_key").read_text().strip()
    assert master.startswith("sk-") and len(master) >= 40 and salt.startswith("sk-") and salt != master
    env = dict(line.split("=", 1) for line in (secrets_dir / "litellm.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert env["LITELLM_MASTER_KEY"] == master
    assert env["VLLM_API_KEY_GPU_A"] == "vllm-key-gpu-a" and env["VLLM_API_KEY_GPU_B"] == "vllm-key-gpu-b"
    password = (secrets_dir / "postgres_password").read_text().strip()
    assert env["DATABASE_URL"] == "postgresql://litellm:%s@postgres:5432/litellm" % password
    compose = yaml.safe_load((gateway["dir"] / "docker-compose.yml").read_text())
    assert master not in json.dumps(compose) and password not in json.dumps(compose)
    assert compose["services"]["litellm"]["image"] == "ghcr.io/berriai/litellm:main-v1.108.7"


def test_the_compose_project_is_valid_for_a_real_compose_implementation(gateway):
    """Debian's docker-compose parses and validates the file (the env files must exist: they do, 0600)."""
    result = subprocess.run(["docker-compose", "-f", str(gateway["dir"] / "docker-compose.yml"), "config", "-q"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_the_seed_clients_keys_are_created_and_a_rerun_changes_nothing(gateway):
    store = gateway["store"]
    by_alias = {v["key_alias"]: v for v in store.values()}
    assert set(by_alias) == {"openclaw-agent", "webapp-chatbot"}
    agent = by_alias["openclaw-agent"]
    assert (sorted(agent["models"]), agent["max_budget"], agent["budget_duration"], agent["max_parallel_requests"],
            agent["tpm_limit"], agent["rpm_limit"]) == (["balanced", "fast", "reasoning"], 50.0, "30d", 5, 100000, 60)
    assert by_alias["webapp-chatbot"]["models"] == ["fast"]
    for alias in by_alias:
        path = gateway["dir"] / "secrets" / "clients" / ("%s.key" % alias)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        import hashlib
        assert hashlib.sha256(path.read_text().strip().encode()).hexdigest() == by_alias[alias]["token"]
    master = (gateway["dir"] / "secrets" / "master_key").read_text()
    report = run_gateway(gateway["inventory"])
    assert changed_tasks(report) == []
    assert (gateway["dir"] / "secrets" / "master_key").read_text() == master
    assert len(store) == 2
    # No key value anywhere in the playbook output.
    for alias in by_alias:
        key = (gateway["dir"] / "secrets" / "clients" / ("%s.key" % alias)).read_text().strip()
        assert key not in json.dumps(gateway["report"]) and key not in json.dumps(report)


def test_check_mode_predicts_a_changed_client_without_calling_a_changing_endpoint(gateway, tmp_path):
    calls_before = len(gateway["calls"])
    with open(gateway["inventory"]) as handle:
        data = yaml.safe_load(handle)
    gw = data["all"]["children"]["llm_gateways"]["hosts"]["gw"]
    gw["litellm_clients"] = [dict(CLIENTS[0], rpm_limit=120), CLIENTS[1]]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump(data))
    report = run_gateway(str(inventory), "--check", "--diff")
    key_task = [t for p in report["plays"] for t in p["tasks"]
                if "Create or update the client keys" in t["task"]["name"]]
    results = key_task[0]["hosts"]["gw"]["results"]
    assert [(r["item"]["alias"], r["changed"], r["operation"]) for r in results] == [
        ("openclaw-agent", True, "update"), ("webapp-chatbot", False, "none")]
    assert results[0]["changes"] == {"rpm_limit": [60, 120]}
    assert [c for c in gateway["calls"][calls_before:] if c[0] == "POST"] == []


def test_a_bad_fallback_and_an_unpriced_budget_are_refused_before_anything_is_written(tmp_path):
    ports = {"fast": 18001, "balanced": 18002, "reasoning": 18003}
    inventory = write_inventory(tmp_path, ports, 1, litellm_fallbacks={"reasoning": ["gpt-5"]},
                                litellm_model_settings={})
    rc, out, err = playbook("playbooks/gateway.yml", "-i", inventory, "--skip-tags", "tls_proxy,inventory_check")
    assert rc != 0
    assert "litellm_fallbacks.reasoning: fallback gpt-5 is not a model group" in out
    assert "litellm_clients[0] (openclaw-agent): has max_budget 50 but fast, balanced, reasoning has no price" in out
    assert not (tmp_path / "llm-gateway").exists()


def test_a_master_key_from_the_vault_is_used_and_a_weak_one_refused(tmp_path):
    master = "sk-" + os.urandom(16).hex()
    external_key = "ext-" + os.urandom(16).hex()
    inventory = write_inventory(tmp_path, {"fast": 18001, "balanced": 18002, "reasoning": 18003}, 1,
                                litellm_master_key=master, litellm_manage_keys=False,
                                litellm_external_models=[{"name": "claude", "model": "anthropic/claude-sonnet-4-5",
                                                          "api_key": external_key}],
                                litellm_fallbacks={"reasoning": ["fast", "claude"]})
    run_gateway(inventory)
    config_text = (tmp_path / "llm-gateway" / "config.yaml").read_text()
    assert external_key not in config_text and "os.environ/LITELLM_EXTERNAL_API_KEY_CLAUDE" in config_text
    assert (tmp_path / "llm-gateway" / "secrets" / "master_key").read_text().strip() == master
    env = (tmp_path / "llm-gateway" / "secrets" / "litellm.env").read_text()
    assert ("LITELLM_MASTER_KEY=%s" % master) in env.splitlines()
    assert ("LITELLM_EXTERNAL_API_KEY_CLAUDE=%s" % external_key) in env.splitlines()
    salt = (tmp_path / "llm-gateway" / "secrets" / "salt_key").read_text().strip()
    assert salt.startswith("sk-") and salt != master
    weak = write_inventory(tmp_path / "weak", {"fast": 18001, "balanced": 18002, "reasoning": 18003}, 1,
                           litellm_master_key="changeme-please", litellm_manage_keys=False)
    rc, out, err = playbook("playbooks/gateway.yml", "-i", weak, "--skip-tags", "tls_proxy,inventory_check")
    assert rc != 0 and "must start with sk-" in out and "changeme-please" not in out
    assert not (tmp_path / "weak" / "llm-gateway").exists()


# ------------------------------------------------------------------ the real LiteLLM proxy


@pytest.fixture(scope="module")
def proxy(gateway):
    """LiteLLM (PyPI, the pinned version) on 127.0.0.1 with the role's config and secrets file, minus
    DATABASE_URL (its DB tier cannot run here), in front of four stand-in upstreams."""
    if not os.path.exists(LITELLM):
        pytest.fail("%s is missing: run make setup (venv-litellm)" % LITELLM)
    ports = gateway["ports"]
    upstreams = {
        "a-fast": Upstream(GPU_A, ports["fast"], "fast", "a-fast", "vllm-key-gpu-a").start(),
        "a-balanced": Upstream(GPU_A, ports["balanced"], "balanced", "a-balanced", "vllm-key-gpu-a").start(),
        "b-fast": Upstream(GPU_B, ports["fast"], "fast", "b-fast", "vllm-key-gpu-b").start(),
        "b-reasoning": Upstream(GPU_B, ports["reasoning"], "reasoning", "b-reasoning", "vllm-key-gpu-b").start(),
    }
    env = dict(os.environ)
    for line in (gateway["dir"] / "secrets" / "litellm.env").read_text().splitlines():
        if line and not line.startswith("#"):
            name, value = line.split("=", 1)
            env[name] = value
    env.pop("DATABASE_URL")
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"})
    port = free_port()
    log = open(gateway["base"] / "litellm.log", "w")  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen([LITELLM, "--config", str(gateway["dir"] / "config.yaml"), "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        if not wait_http("127.0.0.1", port, "/health/liveliness", 120):
            pytest.fail("LiteLLM did not start:\n" + (gateway["base"] / "litellm.log").read_text()[-3000:])
        yield {"port": port, "url": "http://127.0.0.1:%d" % port, "master": env["LITELLM_MASTER_KEY"],
               "upstreams": upstreams}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        for upstream in upstreams.values():
            if upstream.proc.poll() is None:
                upstream.kill()


def chat(proxy, model, key=None, stream=False):
    conn = http.client.HTTPConnection("127.0.0.1", proxy["port"], timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(
        {"model": model, "stream": stream, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}),
        headers={"Authorization": "Bearer %s" % (key or proxy["master"]), "Content-Type": "application/json"})
    response = conn.getresponse()
    body = response.read().decode()
    return response.status, body


def upstream_of(body):
    return json.loads(body)["choices"][0]["message"]["content"].split()[0]


def test_requests_reach_the_upstream_of_their_group_with_its_vllm_key(proxy):
    status, body = chat(proxy, "reasoning")
    assert status == 200 and upstream_of(body) == "b-reasoning"
    status, body = chat(proxy, "balanced")
    assert status == 200 and upstream_of(body) == "a-balanced"
    seen = {upstream_of(chat(proxy, "fast")[1]) for _request in range(16)}
    assert seen == {"a-fast", "b-fast"}  # two deployments of one group: both serve


def test_streaming_through_the_proxy_keeps_the_upstream_cadence(proxy):
    # fake_vllm sends 8 content chunks CADENCE_MS apart: they arrive as 8 chunks, spaced, not as one burst.
    # A busy machine (the tests run two at a time on two cores) may delay LiteLLM's first-chunk work so that the
    # first chunks arrive together (CI saw 4 of 7 gaps at ~1 ms, then the cadence), so the check is: most gaps
    # keep at least 40 % of the cadence and the chunks span at least half the upstream's span, best of three
    # requests. A buffering proxy delivers all 8 chunks in one burst and fails all three.
    cadence = CADENCE_MS / 1000.0
    results = []
    for _attempt in range(3):
        result = llm_load.stream_once(proxy["url"], proxy["master"], "reasoning")
        assert result["error"] is None and result["upstream"] == "b-reasoning"
        results.append(result)
        spaced = [gap for gap in result["gaps"] if gap >= 0.4 * cadence]
        if result["chunks"] == 8 and len(spaced) >= 4 and sum(result["gaps"]) >= 0.5 * 7 * cadence:
            return
    raise AssertionError("no request kept the cadence: %s" % [r["gaps"] for r in results])


def test_an_unknown_model_and_a_wrong_key_are_refused_and_the_master_key_is_accepted(proxy):
    status, body = chat(proxy, "gpt-4o")
    assert status == 400 and "Invalid model name" in body
    status, body = chat(proxy, "fast", key="sk-" + os.urandom(16).hex())  # well-formed, but not the master key
    assert status in (400, 401) and "choices" not in body
    status, _body = chat(proxy, "fast")
    assert status == 200


def test_metrics_are_exported_without_a_key(proxy):
    conn = http.client.HTTPConnection("127.0.0.1", proxy["port"], timeout=10)
    conn.request("GET", "/metrics/")
    response = conn.getresponse()
    body = response.read().decode()
    assert response.status == 200 and "litellm_" in body


def steady_load(proxy, model, seconds, streams=6):
    """Non-streaming requests back to back from ``streams`` threads; [(t, status, upstream or error, start, end)]
    with ``start``/``end`` on time.monotonic()'s clock."""
    results, lock, begin = [], threading.Lock(), time.monotonic()

    def worker():
        while time.monotonic() - begin < seconds:
            start = time.monotonic()
            status, body = chat(proxy, model)
            with lock:
                results.append((start - begin, status, upstream_of(body) if status == 200 else body[:300], start,
                                time.monotonic()))

    threads = [threading.Thread(target=worker) for _thread in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_failover_without_client_errors_and_traffic_returns_after_the_cooldown(proxy):
    """Kill the only reasoning upstream, then one of the two fast upstreams, under steady load: every request
    still succeeds (the in-group lower-priority deployments and the second deployment take over). Streams
    already in flight on a killed upstream cannot be saved by any proxy. Sparse traffic, where LiteLLM's retries
    used to land on the dead deployment again, is the next test's."""
    upstreams = proxy["upstreams"]
    killed = []

    def kill(name):
        killed.append(time.monotonic())
        upstreams[name].kill()

    def failed_after_the_kill(results):
        # A request in flight on the upstream when it died (CI once: sent 0.1 s before the kill, 500 "Cannot
        # connect") cannot be saved by any proxy; every request sent after the kill must succeed.
        return [r[:3] for r in results if r[1] != 200 and not r[3] <= killed[-1] <= r[4]]

    killer = threading.Timer(1.5, kill, ["b-reasoning"])
    killer.start()
    results = steady_load(proxy, "reasoning", 6)
    killer.join()
    errors = failed_after_the_kill(results)
    assert errors == [], errors[:3]
    after = [r[2] for r in results if r[0] > 3]
    assert after and "b-reasoning" not in after and set(after) <= {"a-balanced", "a-fast", "b-fast"}

    killer = threading.Timer(1.5, kill, ["a-fast"])
    killer.start()
    results = steady_load(proxy, "fast", 6)
    killer.join()
    errors = failed_after_the_kill(results)
    assert errors == [], errors[:3]
    assert {r[2] for r in results if r[0] > 3} == {"b-fast"}

    upstreams["a-fast"].start()
    time.sleep(2)  # litellm_cooldown_time: 1
    before = upstreams["a-fast"].completions()
    seen = {upstream_of(chat(proxy, "fast")[1]) for _request in range(20)}
    assert "a-fast" in seen and upstreams["a-fast"].completions() > before


def test_sparse_requests_with_one_upstream_dead_never_fail(proxy):
    """One of `fast`'s two upstreams dead and requests one at a time, each after the deployment's cooldown has
    ended (litellm_cooldown_time 1 here): every request is answered by the live one, streamed or not.

    LiteLLM 1.108.7 re-picks a deployment at random on every retry, the one that just failed included, and counts
    only a request's first failure against `allowed_fails`: with the earlier default 1 a request could spend its
    three attempts on the dead server (1 in 8 of these requests failed with 500 "Cannot connect to host" in a
    probe; CI failed on it in the lab). `litellm_allowed_fails: 0` cools the dead deployment down at its first
    failure, so the retry goes to the other. Under steady load the failures of concurrent requests hid this."""
    upstreams = proxy["upstreams"]
    upstreams["b-fast"].kill()
    try:
        results = []
        for request in range(32):
            time.sleep(1.2)
            status, body = chat(proxy, "fast", stream=bool(request % 2))
            results.append((request, status, body[:200]))
        failed = [r for r in results if r[1] != 200 or "a-fast" not in r[2]]
        assert failed == [], failed[:3]
    finally:
        upstreams["b-fast"].start()


def verify_probe(proxy, model):
    """The role's verify probe, its body read from roles/litellm/tasks/verify.yml (not copied here)."""
    with open(os.path.join(ROOT, "roles", "litellm", "tasks", "verify.yml")) as handle:
        tasks = yaml.safe_load(handle)
    task = [t for t in tasks if t["name"].startswith("Wait until every GPU VM deployment completes")][0]
    body = dict(task["ansible.builtin.uri"]["body"], model=model)
    conn = http.client.HTTPConnection("127.0.0.1", proxy["port"], timeout=60)
    conn.request(task["ansible.builtin.uri"]["method"], task["ansible.builtin.uri"]["url"].split("}}", 2)[-1],
                 body=json.dumps(body), headers={"Authorization": "Bearer %s" % proxy["master"],
                                                 "Content-Type": "application/json"})
    response = conn.getresponse()
    text = response.read().decode()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return {"status": response.status, "json": parsed, "item": {"id": model}}


def test_the_verify_probe_reaches_each_deployment_and_names_a_dead_one_that_its_group_would_hide(proxy, gateway):
    """The gateway's verify probes every GPU VM deployment by its id through the real proxy: with b-reasoning dead
    the group `reasoning` still answers (its in-group fallbacks to balanced and fast), but the probe of the
    deployment reasoning-gpu-b fails and probe_failures names it; the live deployments answer 200, each from its
    own upstream."""
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import litellm_config, service_start
    config = yaml.safe_load((gateway["dir"] / "config.yaml").read_text())
    ids = litellm_config.vm_deployment_ids(config)
    assert sorted(ids) == ["balanced-gpu-a", "fast-gpu-a", "fast-gpu-b", "reasoning-gpu-b"]
    upstreams = proxy["upstreams"]
    for upstream in upstreams.values():  # the failover test above leaves b-reasoning killed
        if upstream.proc.poll() is not None:
            upstream.start()
    before = {name: u.completions() for name, u in upstreams.items()}
    results = [verify_probe(proxy, i) for i in ids]
    assert [r["status"] for r in results] == [200] * len(ids), results
    after = {name: u.completions() for name, u in upstreams.items()}
    assert {name: after[name] - before[name] for name in after} == {
        "a-fast": 1, "a-balanced": 1, "b-fast": 1, "b-reasoning": 1}
    upstreams["b-reasoning"].kill()
    try:
        assert chat(proxy, "reasoning")[0] == 200  # what a client sees: the group answers through its fallbacks
        results = [verify_probe(proxy, i) for i in ids]
        failures = service_start.probe_failures(results, "{id}", "no token")
        assert len(failures) == 1 and failures[0].startswith("reasoning-gpu-b: no token: HTTP "), failures
    finally:
        upstreams["b-reasoning"].start()


# ------------------------------------------------------------------ litellm_key against the key-tier double


def key_module(port, master, check=False, **args):
    """Run pvegpu.llmstack.litellm_key once (ad hoc, on this machine); returns the result dict."""
    from conftest import BIN, ansible_env

    args = dict(args, api_url="http://127.0.0.1:%d" % port, master_key=master)
    command = [os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-m", "pvegpu.llmstack.litellm_key",
               "-a", json.dumps(args), "-e", "ansible_python_interpreter=%s" % sys.executable]
    if check:
        command += ["--check", "--diff"]
    env = ansible_env(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    report = parse_json_report(result.stdout)
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]


def read(path):
    with open(path) as handle:
        return handle.read().strip()


def test_litellm_key_create_noop_update_delete_check_and_errors(tmp_path):
    master = "sk-test-" + os.urandom(8).hex()
    port = free_port()
    server, store, calls = fake_litellm_keys.serve(port, master)
    try:
        key_path = str(tmp_path / "keys" / "web.key")
        spec = {"key_alias": "web", "models": ["fast"], "max_budget": 10, "budget_duration": "30d",
                "rpm_limit": 100, "tpm_limit": 50000, "max_parallel_requests": 10, "key_path": key_path}
        predicted = key_module(port, master, check=True, **spec)
        assert predicted["changed"] and predicted["operation"] == "create" and store == {}
        created = key_module(port, master, **spec)
        assert created["changed"] and created["operation"] == "create" and "key" not in created
        key = read(key_path)
        assert key.startswith("sk-") and stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
        assert key not in json.dumps(created)
        again = key_module(port, master, **spec)
        assert not again["changed"] and again["operation"] == "none"
        posts = len([c for c in calls if c[0] == "POST"])
        spec_200 = dict(spec)
        spec_200["rpm_limit"] = 200
        predicted = key_module(port, master, check=True, **spec_200)
        assert predicted["changed"] and predicted["changes"] == {"rpm_limit": [100, 200]}
        assert predicted["diff"]["after"]["rpm_limit"] == 200
        assert len([c for c in calls if c[0] == "POST"]) == posts  # check mode called no changing endpoint
        updated = key_module(port, master, **spec_200)
        assert updated["operation"] == "update" and list(store.values())[0]["rpm_limit"] == 200
        assert calls[-1][1] == "/key/update" and set(calls[-1][2]) == {"key", "rpm_limit"}
        assert read(key_path) == key  # an update keeps the key
        refused = key_module(port, "sk-" + os.urandom(16).hex(), **spec)
        assert refused.get("failed") and "401" in refused["msg"] and "Authentication Error" in refused["msg"]
        os.unlink(key_path)
        lost = key_module(port, master, **spec)
        assert lost.get("failed") and "replace_lost_key" in lost["msg"]
        replaced = key_module(port, master, **dict(spec, replace_lost_key=True))
        assert replaced["operation"] == "replace" and read(key_path) != key and len(store) == 1
        deleted = key_module(port, master, key_alias="web", state="absent")
        assert deleted["changed"] and store == {}
        assert not key_module(port, master, key_alias="web", state="absent")["changed"]
    finally:
        server.shutdown()
