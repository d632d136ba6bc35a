"""The monitoring role on this machine (connection local, monitoring_dir under a temp dir), for a GPU VM and an
observability host of a small inventory. No GPU, no Docker engine and no registry here: llmstack_start_services
is false, so nothing starts; what the role wrote is checked with the real tools: Debian's docker-compose validates
both compose projects, promtool checks prometheus.yml with the installed rules (tests/integration/
test_prometheus_scrape.py runs a real Prometheus on the same kind of config). Not verified here: the images
themselves, dcgm-exporter on a GPU, Alertmanager delivering to a receiver.

Basic auth of Prometheus and Alertmanager (issue #31 item 6): Debian's Prometheus (2.42, installed here) is started
with the web.yml the role wrote and answers 401 without the password and 200 with it, scrapes itself with the
rendered basic_auth and password file, and the rendered compose health check passes against it. molecule/monitoring
runs Prometheus and Alertmanager together on the written files."""

import base64
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml
from conftest import parse_json_report, playbook, tasks_run

pytestmark = pytest.mark.slow
WEBHOOK = "https://hooks.example.invalid/services/T0K3N-%s" % os.getpid()


def write_inventory(base, second_observability_host=False, **obs_vars):
    obs = {"monitoring_dir": str(base / "obs"), "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.14"}],
           "monitoring_alert_webhook_url": WEBHOOK,
           "monitoring_alert_email": {"to": "ops@llmstack.test", "from": "alerts@llmstack.test",
                                      "smarthost": "smtp.llmstack.test:587", "username": "alerts",
                                      "password": "smtp-%s" % os.getpid()}}
    obs.update(obs_vars)
    data = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "llmstack_start_services": False,
                 "llmstack_vlans": {"mgmt": {"id": 10, "cidr": "10.99.10.0/24", "gateway": "10.99.10.1"},
                                    "inference": {"id": 20, "cidr": "10.99.20.0/24", "gateway": "10.99.20.1"}}},
        "children": {
            "gpu_vms": {"hosts": {"gpu-a": {
                "monitoring_dir": str(base / "gpu"),
                "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.20"},
                                        {"vlan": "inference", "address": "10.99.20.20"}],
                "vllm_models": [{"name": "fast", "port": 8001}, {"name": "balanced", "port": 8002}]}}},
            "llm_gateways": {"hosts": {"gw": {"llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.12"}]}}},
            "observability": {"hosts": {"obs": obs}}}}}
    if second_observability_host:
        data["all"]["children"]["observability"]["hosts"]["obs2"] = {
            "monitoring_dir": str(base / "obs2"), "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.15"}]}
    path = base / "hosts.yml"
    path.write_text(yaml.safe_dump(data))
    play = base / "play.yml"
    play.write_text("- hosts: observability:gpu_vms\n  gather_facts: false\n  roles: [pvegpu.llmstack.monitoring]\n")
    return str(path), str(play)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    base = tmp_path_factory.mktemp("monitoring")
    inventory, play = write_inventory(base)
    rc, out, err = playbook("-i", inventory, play, json_output=True)
    assert rc == 0, out[-4000:] + err[-2000:]
    first = parse_json_report(out)
    password = (base / "obs" / "secrets" / "grafana_password").read_text().strip()
    web_password = (base / "obs" / "secrets" / "web_password").read_text().strip()
    web_yml = [(base / "obs" / name / "web.yml").read_text() for name in ("prometheus", "alertmanager")]
    rc, out, err = playbook("-i", inventory, play, json_output=True)
    assert rc == 0, out[-4000:]
    return {"base": base, "first": first, "second": parse_json_report(out), "password": password, "output": out,
            "web_password": web_password, "web_yml": web_yml}


def test_a_rerun_changes_nothing_and_keeps_the_grafana_password(deployed):
    assert deployed["first"]["stats"]["obs"]["changed"] > 0
    for host in ("obs", "gpu-a"):
        assert deployed["second"]["stats"][host]["changed"] == 0, deployed["second"]["stats"]
    assert (deployed["base"] / "obs" / "secrets" / "grafana_password").read_text().strip() == deployed["password"]
    assert len(deployed["password"]) >= 24


def test_a_rerun_keeps_the_web_password_and_its_bcrypt_hash(deployed):
    """The hash is computed on the controller with a random salt; the rerun keeps the one that verifies."""
    base = deployed["base"] / "obs"
    assert (base / "secrets" / "web_password").read_text().strip() == deployed["web_password"]
    assert len(deployed["web_password"]) >= 24 and deployed["web_password"] != deployed["password"]
    assert [(base / name / "web.yml").read_text() for name in ("prometheus", "alertmanager")] == deployed["web_yml"]


def test_both_compose_projects_are_valid_and_publish_on_the_management_address_only(deployed):
    for host, address, services in (("gpu", "10.99.10.20", ["dcgm-exporter", "node-exporter"]),
                                    ("obs", "10.99.10.14", ["alertmanager", "grafana", "node-exporter",
                                                            "prometheus"])):
        path = deployed["base"] / host / "docker-compose.yml"
        result = subprocess.run(["docker-compose", "-f", str(path), "config", "-q"], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 0, result.stderr
        compose = yaml.safe_load(path.read_text())
        assert sorted(compose["services"]) == services
        for name, service in compose["services"].items():
            assert not re.search(r":(latest|[0-9]+)$", service["image"]), service["image"]
            for port in service.get("ports", []):
                assert port.startswith(address + ":"), (name, port)
    gpu = yaml.safe_load((deployed["base"] / "gpu" / "docker-compose.yml").read_text())["services"]
    assert gpu["dcgm-exporter"]["command"] == ["-f", "/etc/dcgm-exporter/llmstack-counters.csv", "-c", "5000"]
    assert gpu["dcgm-exporter"]["cap_add"] == ["SYS_ADMIN"]
    assert "--path.rootfs=/host" in gpu["node-exporter"]["command"] and gpu["node-exporter"]["pid"] == "host"
    obs = yaml.safe_load((deployed["base"] / "obs" / "docker-compose.yml").read_text())["services"]
    # The lifecycle API stays off (anyone reaching :9090 could shut Prometheus down); the role reloads with SIGHUP.
    assert not [a for a in obs["prometheus"]["command"] if "lifecycle" in a]
    assert obs["prometheus"]["user"] == "65534:65534" and obs["grafana"]["user"] == "472:472"
    assert obs["grafana"]["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


def test_promtool_accepts_the_written_prometheus_config_and_rules(deployed, tmp_path):
    obs = deployed["base"] / "obs" / "prometheus"
    config = yaml.safe_load((obs / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    # The path inside the container; point it at the written rules to check them together.
    config["rule_files"] = [str(obs / "rules" / "*.yml")]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") >= 5
    jobs = {c["job_name"]: c for c in config["scrape_configs"]}
    assert jobs["dcgm"]["scrape_interval"] == "5s" and jobs["node"]["scrape_interval"] == "15s"
    assert [sc["targets"] for sc in jobs["vllm"]["static_configs"]] == [["10.99.20.20:8001"], ["10.99.20.20:8002"]]
    # LiteLLM listens on loopback; Prometheus reads its /metrics/ from the gateway's TLS proxy metrics listener.
    assert jobs["litellm"]["static_configs"][0]["targets"] == ["10.99.10.12:9402"]
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["10.99.10.14:9093"]


def test_every_scrape_target_is_an_endpoint_of_the_topology_that_the_observability_host_reaches(deployed):
    """Issue #21: no alert may fire for a target the collection itself configured where nothing answers (the
    gateway used to be scraped on its management address while LiteLLM listened on loopback)."""
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology

    facts = [result["ansible_facts"]["llmstack_topology"] for run in tasks_run(deployed["first"])
             for result in run["hosts"].values() if "llmstack_topology" in result.get("ansible_facts", {})]
    assert len(facts) == 1
    topo = facts[0]
    by_address = dict(("%s:%d" % (e["address"], e["port"]), e) for e in topo["endpoints"])
    config = yaml.safe_load((deployed["base"] / "obs" / "prometheus" / "prometheus.yml").read_text())
    targets = [(job["job_name"], target) for job in config["scrape_configs"]
               for static in job["static_configs"] for target in static["targets"]]
    assert len(targets) >= 8
    for job, target in targets:
        assert target in by_address, (job, target, sorted(by_address))
        endpoint = by_address[target]
        assert "obs" in endpoint["consumers"], (job, endpoint)
        assert topology.reachable(endpoint, "obs", topo["hosts"]["obs"]["addresses"], {
            "mgmt": {"gateway": "10.99.10.1"}, "inference": {"gateway": "10.99.20.1"}}), (job, endpoint)
    # LiteLLM's own port (loopback) is in the topology, and no target points at it.
    litellm = topology.endpoint(topo, "litellm", "litellm", "gw")
    assert litellm and litellm[0]["address"] == "127.0.0.1" and litellm[0]["consumers"] == ["gw"]
    assert not [t for _job, t in targets if t.endswith(":4000")]


def test_no_default_credentials_and_secrets_only_in_their_files(deployed):
    base = deployed["base"]
    rendered = []
    for root, _dirs, files in os.walk(base):
        for name in files:
            if name not in ("hosts.yml", "play.yml"):
                rendered.append(os.path.join(root, name))
    texts = {}
    for path in rendered:
        with open(path) as handle:
            texts[path] = handle.read()
    for path, text in texts.items():
        assert "GF_SECURITY_ADMIN_PASSWORD=admin" not in text, path
        for literal in ("admin", "changeme", "password"):
            assert not re.search(r"[:=]\s*['\"]?%s['\"]?\s*$" % literal, text, re.M), (path, literal)
    secrets = {os.path.join(str(base), "obs", "secrets", "grafana_password"),
               os.path.join(str(base), "obs", "secrets", "grafana.env")}
    for path, text in texts.items():
        if path not in secrets:
            assert deployed["password"] not in text, path
    env = (base / "obs" / "secrets" / "grafana.env").read_text()
    assert "GF_SECURITY_ADMIN_PASSWORD=%s\n" % deployed["password"] in env
    assert "GF_SECURITY_ADMIN_USER=llmstack" in env
    assert WEBHOOK not in deployed["output"] and deployed["password"] not in deployed["output"]
    # The web password: in secrets/, the services' own copies and Grafana's env file, nowhere else (not in
    # prometheus.yml, the compose project, web.yml or Grafana's provisioning), and never in the output.
    web_copies = [base / "obs" / "secrets" / "web_password", base / "obs" / "prometheus" / "secrets" / "web_password",
                  base / "obs" / "alertmanager" / "secrets" / "web_password"]
    assert sorted(p for p, t in texts.items() if deployed["web_password"] in t) == sorted(
        [str(p) for p in web_copies] + [str(base / "obs" / "secrets" / "grafana.env")])
    assert "LLMSTACK_WEB_PASSWORD=%s\n" % deployed["web_password"] in env
    assert deployed["web_password"] not in deployed["output"]
    webhook_file = base / "obs" / "alertmanager" / "secrets" / "webhook_url"
    assert webhook_file.read_text().strip() == WEBHOOK
    assert [p for p, t in texts.items() if WEBHOOK in t] == [str(webhook_file)]
    for path in (webhook_file, base / "obs" / "alertmanager" / "secrets" / "smtp_password",
                 base / "obs" / "secrets" / "grafana_password", base / "obs" / "secrets" / "grafana.env"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert webhook_file.stat().st_uid == 65534   # Alertmanager runs as nobody
    alertmanager = yaml.safe_load((base / "obs" / "alertmanager" / "alertmanager.yml").read_text())
    email = alertmanager["receivers"][0]["email_configs"][0]
    assert email["auth_password_file"] == "/etc/alertmanager/secrets/smtp_password" and "auth_password" not in email


def test_data_directories_belong_to_the_services_users(deployed):
    data = deployed["base"] / "obs" / "data"
    assert {name: (data / name).stat().st_uid for name in ("prometheus", "alertmanager", "grafana")} == {
        "prometheus": 65534, "alertmanager": 65534, "grafana": 472}


def test_dashboards_and_provisioning_are_installed(deployed):
    grafana = deployed["base"] / "obs" / "grafana"
    assert sorted(os.listdir(grafana / "dashboards")) == ["gateway.json", "gpu.json", "hosts.json", "vllm.json"]
    datasource = yaml.safe_load((grafana / "provisioning" / "datasources" / "llmstack.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    assert (deployed["base"] / "gpu" / "dcgm-counters.csv").read_text().count("DCGM_FI_DEV_") >= 15


def test_a_host_without_a_management_address_is_named_before_anything_is_written(tmp_path):
    inventory, play = write_inventory(tmp_path, llmstack_interfaces=[{"vlan": "apps", "address": "10.99.30.14"}])
    rc, out, err = playbook("-i", inventory, play)
    assert rc != 0
    # The validate step's topology (computed by the role when run on its own) names it first.
    assert "host obs: monitoring_bind_address: no address for monitoring prometheus" in out, out[-3000:]
    assert not (tmp_path / "obs").exists()


def test_the_web_password_is_stored_once_for_root_and_copied_for_each_service(deployed):
    obs = deployed["base"] / "obs"
    canonical = obs / "secrets" / "web_password"
    assert (stat.S_IMODE(canonical.stat().st_mode), canonical.stat().st_uid) == (0o600, 0)
    for service in ("prometheus", "alertmanager"):
        copy = obs / service / "secrets" / "web_password"
        assert copy.read_text().strip() == deployed["web_password"]
        # Prometheus and Alertmanager run as nobody (65534): their copies are theirs, 0600, in a 0700 directory.
        assert (stat.S_IMODE(copy.stat().st_mode), copy.stat().st_uid) == (0o600, 65534), service
        assert (stat.S_IMODE(copy.parent.stat().st_mode), copy.parent.stat().st_uid) == (0o700, 65534), service
        web = obs / service / "web.yml"
        assert (stat.S_IMODE(web.stat().st_mode), web.stat().st_uid, web.stat().st_gid) == (0o640, 0, 65534)


def test_web_yml_holds_the_user_and_a_bcrypt_hash_of_the_password_that_promtool_accepts(deployed):
    import bcrypt

    for service in ("prometheus", "alertmanager"):
        path = deployed["base"] / "obs" / service / "web.yml"
        users = yaml.safe_load(path.read_text())["basic_auth_users"]
        assert list(users) == ["llmstack"]
        assert users["llmstack"].startswith("$2b$12$")
        assert bcrypt.checkpw(deployed["web_password"].encode(), users["llmstack"].encode())
        result = subprocess.run(["promtool", "check", "web-config", str(path)], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 0, result.stdout + result.stderr


def test_everything_that_talks_to_prometheus_and_alertmanager_authenticates(deployed):
    obs = deployed["base"] / "obs"
    config = yaml.safe_load((obs / "prometheus" / "prometheus.yml").read_text())
    auth = {"username": "llmstack", "password_file": "/etc/prometheus/secrets/web_password"}
    jobs = {c["job_name"]: c for c in config["scrape_configs"]}
    assert jobs["prometheus"]["basic_auth"] == auth and jobs["alertmanager"]["basic_auth"] == auth
    assert "basic_auth" not in jobs["node"] and "basic_auth" not in jobs["dcgm"]
    assert config["alerting"]["alertmanagers"][0]["basic_auth"] == auth
    services = yaml.safe_load((obs / "docker-compose.yml").read_text())["services"]
    assert "--web.config.file=/etc/prometheus/web.yml" in services["prometheus"]["command"]
    assert "--web.config.file=/etc/alertmanager/web.yml" in services["alertmanager"]["command"]
    for name in ("prometheus", "alertmanager"):
        test = services[name]["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL" and "/etc/%s/secrets/web_password" % name in test[1], test
    datasource = yaml.safe_load((obs / "grafana" / "provisioning" / "datasources" / "llmstack.yml").read_text())
    source = datasource["datasources"][0]
    assert (source["basicAuth"], source["basicAuthUser"]) == (True, "llmstack")
    assert source["secureJsonData"] == {"basicAuthPassword": "$LLMSTACK_WEB_PASSWORD"}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url, user=None, password=None):
    request = urllib.request.Request(url)
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_real_prometheus_with_the_written_web_yml_wants_the_password_and_scrapes_itself_with_it(deployed, tmp_path):
    """Debian's Prometheus with the written web.yml, and the written prometheus.yml reduced to its self-scrape job
    (target moved to where this Prometheus listens, password_file to the written copy)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is missing: make setup installs Debian's prometheus package")
    obs = deployed["base"] / "obs"
    port = free_port()
    config = yaml.safe_load((obs / "prometheus" / "prometheus.yml").read_text())
    job = [c for c in config["scrape_configs"] if c["job_name"] == "prometheus"][0]
    job["static_configs"][0]["targets"] = ["127.0.0.1:%d" % port]
    job["basic_auth"]["password_file"] = str(obs / "prometheus" / "secrets" / "web_password")
    job["scrape_interval"] = job["scrape_timeout"] = "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"},
                                                             "scrape_configs": [job]}))
    proc = subprocess.Popen([binary, "--config.file", str(tmp_path / "prometheus.yml"),
                             "--web.config.file", str(obs / "prometheus" / "web.yml"),
                             "--storage.tsdb.path", str(tmp_path / "data"),
                             "--web.listen-address", "127.0.0.1:%d" % port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api = "http://127.0.0.1:%d" % port
    password = deployed["web_password"]
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, _body = get(api + "/-/ready", "llmstack", password)
                if status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not get ready"
            time.sleep(0.3)
        for path in ("/-/ready", "/-/healthy", "/metrics", "/api/v1/query?query=up", "/graph"):
            assert get(api + path)[0] == 401, path
        assert get(api + "/-/ready", "llmstack", password + "x")[0] == 401
        assert get(api + "/-/ready", "admin", password)[0] == 401
        up = None
        while time.monotonic() < deadline + 30:
            status, body = get(api + "/api/v1/query?query=up%7Bjob%3D%22prometheus%22%7D", "llmstack", password)
            assert status == 200
            result = json.loads(body)["data"]["result"]
            up = result[0]["value"][1] if result else None
            if up == "1":
                break
            time.sleep(0.5)
        assert up == "1", "the self-scrape with the rendered basic_auth failed"
        # The compose health check, as the container's shell runs it ($$ is compose's escape for $).
        test = yaml.safe_load((obs / "docker-compose.yml").read_text())["services"]["prometheus"]["healthcheck"]["test"]
        command = test[1].replace("$$", "$").replace("/etc/prometheus/secrets/web_password",
                                                     str(obs / "prometheus" / "secrets" / "web_password"))
        command = command.replace("127.0.0.1:9090", "127.0.0.1:%d" % port)
        result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False, timeout=30)
        assert result.returncode == 0, result.stderr
        result = subprocess.run(["sh", "-c", command.replace(str(obs / "prometheus" / "secrets" / "web_password"),
                                                             str(obs / "secrets" / "grafana_password"))],
                                capture_output=True, text=True, check=False, timeout=30)
        assert result.returncode != 0, "the health check passed with the wrong password"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_several_observability_hosts_share_the_first_ones_web_password(tmp_path):
    """They scrape each other's Prometheus and Alertmanager and send alerts to every Alertmanager with one
    password file: the first observability host's password is theirs."""
    inventory, play = write_inventory(tmp_path, second_observability_host=True)
    rc, out, err = playbook("-i", inventory, play, "--limit", "observability")
    assert rc == 0, out[-4000:] + err[-2000:]
    first = (tmp_path / "obs" / "secrets" / "web_password").read_text().strip()
    for host in ("obs", "obs2"):
        for path in ("secrets/web_password", "prometheus/secrets/web_password", "alertmanager/secrets/web_password"):
            assert (tmp_path / host / path).read_text().strip() == first, (host, path)
        config = yaml.safe_load((tmp_path / host / "prometheus" / "prometheus.yml").read_text())
        alerting = config["alerting"]["alertmanagers"][0]
        assert alerting["static_configs"][0]["targets"] == ["10.99.10.14:9093", "10.99.10.15:9093"]
        assert alerting["basic_auth"]["password_file"] == "/etc/prometheus/secrets/web_password"
    assert first not in out
    # A host that already has another password keeps it and stops, naming where the shared one comes from.
    (tmp_path / "obs2" / "secrets" / "web_password").write_text("a-different-password-0123456789\n")
    rc, out, err = playbook("-i", inventory, play, "--limit", "obs2")
    assert rc != 0 and "/secrets/web_password (the first observability host)" in out, out[-3000:]
    assert first not in out and "a-different-password" not in out
