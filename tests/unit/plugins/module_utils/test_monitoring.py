"""monitoring: scrape targets from the inventory and prometheus.yml (promtool and a real Prometheus check the
rendered file in tests/integration/test_prometheus_scrape.py)."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import monitoring


def inventory():
    hosts = {
        "gpu-a": {"interfaces": [{"vlan": "mgmt", "address": "10.0.10.20"},
                                 {"vlan": "inference", "address": "10.0.20.20"}],
                  "models": [{"name": "fast", "port": 8001}, {"name": "balanced", "port": 8002}]},
        "gpu-b": {"interfaces": [{"vlan": "mgmt", "address": "10.0.10.21"},
                                 {"vlan": "inference", "address": "10.0.20.21"}],
                  "models": [{"name": "reasoning", "port": 8003}], "vllm_address": "10.0.20.99"},
        "gw": {"interfaces": [{"vlan": "mgmt", "address": "10.0.10.12"}], "litellm_metrics_address": "10.0.10.12",
               "litellm_metrics_port": 9402},
        "mon": {"interfaces": [{"vlan": "mgmt", "address": "fd00:10::14"}]},
    }
    groups = {"gpu_vms": ["gpu-a", "gpu-b"], "llm_gateways": ["gw"], "observability": ["mon"]}
    return hosts, groups


def by_name(jobs):
    return {job["name"]: job for job in jobs}


def test_jobs_come_from_the_groups_and_the_management_vlan():
    jobs = by_name(monitoring.jobs_from_inventory(*inventory(), {}))
    assert [t["address"] for t in jobs["dcgm"]["targets"]] == ["10.0.10.20:9400", "10.0.10.21:9400"]
    assert jobs["dcgm"]["interval"] == "5s" and jobs["node"]["interval"] == "15s"
    assert [(t["address"], t["labels"]) for t in jobs["vllm"]["targets"]] == [
        ("10.0.20.20:8001", {"host": "gpu-a", "model": "fast"}),
        ("10.0.20.20:8002", {"host": "gpu-a", "model": "balanced"}),
        ("10.0.20.99:8003", {"host": "gpu-b", "model": "reasoning"})]
    assert [t["address"] for t in jobs["node"]["targets"]] == ["10.0.10.20:9100", "10.0.10.21:9100",
                                                               "[fd00:10::14]:9100"]
    assert jobs["litellm"]["path"] == "/metrics/" and jobs["litellm"]["targets"][0]["address"] == "10.0.10.12:9402"
    assert jobs["prometheus"]["targets"][0] == {"address": "[fd00:10::14]:9090", "labels": {"host": "mon"}}


def test_a_service_the_observability_host_does_not_start_is_not_scraped():
    hosts, groups = inventory()
    hosts["mon"]["not_started"] = ["monitoring/grafana", "langfuse"]
    jobs = by_name(monitoring.jobs_from_inventory(hosts, groups, {}))
    assert "grafana" not in jobs and jobs["alertmanager"]["targets"][0]["address"] == "[fd00:10::14]:9093"
    hosts["mon"]["not_started"] = ["monitoring"]
    assert not {"prometheus", "alertmanager", "grafana"} & set(by_name(
        monitoring.jobs_from_inventory(hosts, groups, {})))
    topology = {"hosts": {"mon": {"addresses": {"mgmt": "10.0.10.14"}, "not_started": ["monitoring/grafana"]}},
                "endpoints": []}
    assert monitoring.hosts_from_topology(topology)["mon"]["not_started"] == ["monitoring/grafana"]


def test_group_names_are_mappable():
    hosts, groups = inventory()
    renamed = {"gpu": groups["gpu_vms"], "llm_gateways": ["gw"], "observability": ["mon"]}
    jobs = by_name(monitoring.jobs_from_inventory(hosts, renamed, {"groups": {"gpu_vms": "gpu"},
                                                                   "node_groups": ["gpu"]}))
    assert len(jobs["dcgm"]["targets"]) == 2 and len(jobs["node"]["targets"]) == 2


def test_missing_addresses_and_ports_are_named():
    hosts, groups = inventory()
    hosts["gpu-a"]["interfaces"] = [{"vlan": "inference", "address": "10.0.20.20"}]
    hosts["gpu-b"]["models"] = [{"name": "reasoning"}]
    with pytest.raises(monitoring.MonitoringError) as raised:
        monitoring.jobs_from_inventory(hosts, groups, {})
    errors = raised.value.errors
    assert any(e.startswith("host gpu-a: no address on VLAN mgmt") and "dcgm-exporter" in e for e in errors)
    assert any(e.startswith("host gpu-b: vllm_models entry") for e in errors)


@pytest.mark.parametrize("settings, fragment", [
    ({"gpu_interval": "5 seconds"}, "monitoring_gpu_interval: '5 seconds' is not a Prometheus duration"),
    ({"dcgm_port": 0}, "monitoring_dcgm_port: 0 is not a TCP port"),
    ({"groups": {"gpu_vms": ["a"]}}, "monitoring_groups.gpu_vms: must be a group name"),
])
def test_bad_settings_are_named(settings, fragment):
    with pytest.raises(monitoring.MonitoringError) as raised:
        monitoring.jobs_from_inventory(*inventory(), settings)
    assert any(fragment in e for e in raised.value.errors), raised.value.errors


def test_prometheus_config_groups_targets_by_labels_and_caps_timeouts():
    jobs = monitoring.jobs_from_inventory(*inventory(), {})
    config = monitoring.prometheus_config(jobs, {"rule_files": ["/etc/prometheus/rules/*.yml"],
                                                 "external_labels": {"site": "lab"}})
    scrape = {c["job_name"]: c for c in config["scrape_configs"]}
    assert scrape["dcgm"]["scrape_interval"] == "5s" and scrape["dcgm"]["scrape_timeout"] == "5s"
    assert scrape["node"]["scrape_timeout"] == "10s"
    assert scrape["vllm"]["static_configs"][0] == {"targets": ["10.0.20.20:8001"],
                                                   "labels": {"host": "gpu-a", "model": "fast"}}
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["[fd00:10::14]:9093"]
    assert config["global"]["external_labels"] == {"site": "lab"}
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]


def test_duplicate_job_names_are_refused():
    job = {"name": "dcgm", "interval": "5s", "targets": []}
    with pytest.raises(monitoring.MonitoringError, match="used twice: dcgm"):
        monitoring.prometheus_config([job, dict(job)], {})


def test_seconds():
    assert monitoring.seconds("1m30s") == 90 and monitoring.seconds("5s") == 5


def test_alertmanager_refers_to_secrets_by_file_and_inhibits_warnings_of_a_critical_gpu():
    config = monitoring.alertmanager_config({
        "webhook": {"url_file": "/etc/alertmanager/secrets/webhook_url"},
        "email": {"to": "ops@example.org", "from": "alerts@example.org", "smarthost": "smtp.example.org:587",
                  "auth_username": "alerts", "auth_password_file": "/etc/alertmanager/secrets/smtp_password"}})
    receiver = config["receivers"][0]
    assert receiver["webhook_configs"] == [{"url_file": "/etc/alertmanager/secrets/webhook_url",
                                            "send_resolved": True}]
    assert receiver["email_configs"][0]["auth_password_file"] == "/etc/alertmanager/secrets/smtp_password"
    assert "auth_password" not in receiver["email_configs"][0]
    gpu_rule = config["inhibit_rules"][0]
    assert gpu_rule["equal"] == ["host", "gpu"] and 'severity="critical"' in gpu_rule["source_matchers"]
    assert config["route"]["group_by"] == ["alertname", "host"]


def test_alertmanager_without_receivers_is_valid_and_silent():
    config = monitoring.alertmanager_config({})
    assert config["receivers"] == [{"name": "default"}]


@pytest.mark.parametrize("settings, fragment", [
    ({"webhook": {"url_file": "webhook_url"}}, "url_file 'webhook_url' is not an absolute path"),
    ({"email": {"to": "ops", "from": "a@b", "smarthost": "smtp:25"}}, "monitoring_alert_email.to: 'ops'"),
    ({"email": {"to": "o@b", "from": "a@b", "smarthost": "smtp"}}, "monitoring_alert_email.smarthost: 'smtp'"),
    ({"email": {"to": "o@b", "from": "a@b", "smarthost": "smtp:25", "auth_username": "u"}},
     "a user name needs auth_password_file"),
    ({"repeat_interval": "daily"}, "monitoring_alert_repeat_interval: 'daily'"),
])
def test_bad_alertmanager_settings_are_named(settings, fragment):
    with pytest.raises(monitoring.MonitoringError) as raised:
        monitoring.alertmanager_config(settings)
    assert any(fragment in e for e in raised.value.errors), raised.value.errors


def test_vllm_bound_to_every_address_is_scraped_at_its_inference_address():
    hosts, groups = inventory()
    hosts["gpu-b"]["vllm_address"] = "0.0.0.0"
    jobs = by_name(monitoring.jobs_from_inventory(hosts, groups, {}))
    assert jobs["vllm"]["targets"][-1]["address"] == "10.0.20.21:8003"


# Issue 20: `1m30s` is a valid Prometheus duration and must be accepted and rendered as such; what Prometheus
# refuses must be refused here, naming the variable. promtool (Debian's Prometheus) is the judge.
DURATIONS = ["1m30s", "15s", "500ms", "1h", "2w", "1d12h", "30s1m", "5s5s", "1.5m", "90 seconds", "1M", "5"]


def promtool_accepts(duration, tmp_path):
    import shutil
    import subprocess
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed: run make setup")
    config = tmp_path / ("p-%d.yml" % DURATIONS.index(duration))
    config.write_text("global:\n  scrape_interval: '%s'\n  evaluation_interval: 15s\n" % duration)
    result = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, check=False)
    return result.returncode == 0


@pytest.mark.parametrize("duration", DURATIONS)
def test_intervals_are_checked_as_prometheus_checks_them(duration, tmp_path):
    problems = monitoring.validate_settings({"interval": duration, "gpu_interval": duration})
    assert (problems == []) is promtool_accepts(duration, tmp_path), problems
    for problem in problems:
        assert problem.startswith(("monitoring_interval: %r" % duration, "monitoring_gpu_interval: %r" % duration))


def test_a_gpu_interval_of_1m30s_is_rendered_as_given_and_dcgm_collects_every_90_seconds():
    hosts, groups = inventory()
    settings = {"gpu_interval": "1m30s", "interval": "1m30s"}
    jobs = by_name(monitoring.jobs_from_inventory(hosts, groups, settings))
    assert jobs["dcgm"]["interval"] == "1m30s"
    config = monitoring.prometheus_config(list(jobs.values()), settings)
    scrape = [c for c in config["scrape_configs"] if c["job_name"] == "dcgm"][0]
    assert scrape["scrape_interval"] == "1m30s" and config["global"]["scrape_interval"] == "1m30s"
    project = monitoring.compose({"services": ["dcgm-exporter"], "address": "10.0.10.20",
                                  "images": {"dcgm-exporter": "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.0-4.5.0"},
                                  "gpu_interval": "1m30s"})
    command = project["services"]["dcgm-exporter"]["command"]
    assert command[command.index("-c") + 1] == str(90 * 1000)


@pytest.mark.parametrize("settings, fragment", [
    ({"gpu_interval": "0s"}, "monitoring_gpu_interval: '0s' is not a Prometheus duration above 0"),
    ({"retention_size": "50 gigs"}, "monitoring_retention_size: '50 gigs'"),
    ({"ports": {"prometheus": "lots"}}, "monitoring_prometheus_port: 'lots' is not a TCP port"),
    ({"ports": {"grafana": 70000}}, "monitoring_grafana_port: 70000 is not a TCP port"),
])
def test_bad_compose_settings_are_named(settings, fragment):
    base = {"services": ["prometheus"], "address": "10.0.10.14",
            "images": {"prometheus": "docker.io/prom/prometheus:v2.55.1"}}
    with pytest.raises(monitoring.MonitoringError) as raised:
        monitoring.compose(dict(base, **settings))
    assert any(fragment in e for e in raised.value.errors), raised.value.errors


def test_a_port_given_as_digits_is_used_as_that_port():
    project = monitoring.compose({"services": ["prometheus"], "address": "10.0.10.14",
                                  "images": {"prometheus": "docker.io/prom/prometheus:v2.55.1"},
                                  "ports": {"prometheus": "9091"}})
    assert project["services"]["prometheus"]["ports"] == ["10.0.10.14:9091:9090"]
    hosts, groups = inventory()
    hosts["gw"]["litellm_metrics_port"] = "9403"
    jobs = by_name(monitoring.jobs_from_inventory(hosts, groups, {}))
    assert jobs["litellm"]["targets"][0]["address"] == "10.0.10.12:9403"
    hosts["gw"]["litellm_metrics_port"] = 70000
    with pytest.raises(monitoring.MonitoringError, match="host gw: tls_proxy_metrics_port 70000 is not a TCP port"):
        monitoring.jobs_from_inventory(hosts, groups, {})
    # A gateway that serves no metrics to the monitoring hosts is not scraped (nothing would answer there).
    del hosts["gw"]["litellm_metrics_address"]
    assert "litellm" not in by_name(monitoring.jobs_from_inventory(hosts, groups, {}))


# Issue #31 item 6: Prometheus and Alertmanager ask for HTTP basic auth; whatever talks to them authenticates, with the
# password read from a file (or Grafana's environment), never written into what is rendered.
WEB_PASSWORD = "kR7wQ2zX9mN4vB8cT1yL6pF3hJ5dS0gA"


def rendered_text(*parts):
    import json
    return json.dumps(parts, sort_keys=True)


def test_prometheus_scrapes_itself_and_alertmanager_and_sends_alerts_with_the_web_user_and_its_password_file():
    jobs = monitoring.jobs_from_inventory(*inventory(), {})
    config = monitoring.prometheus_config(jobs, {})
    auth = {"username": "llmstack", "password_file": "/etc/prometheus/secrets/web_password"}
    scrape = {c["job_name"]: c for c in config["scrape_configs"]}
    assert scrape["prometheus"]["basic_auth"] == auth and scrape["alertmanager"]["basic_auth"] == auth
    assert [name for name, c in scrape.items() if "basic_auth" in c] == ["prometheus", "alertmanager"]
    assert config["alerting"]["alertmanagers"] == [{"basic_auth": auth,
                                                    "static_configs": [{"targets": ["[fd00:10::14]:9093"]}]}]
    other = monitoring.prometheus_config(monitoring.jobs_from_inventory(*inventory(), {"web_user": "ops"}),
                                         {"web_user": "ops"})
    assert other["alerting"]["alertmanagers"][0]["basic_auth"]["username"] == "ops"
    assert WEB_PASSWORD not in rendered_text(config, other)


def test_promtool_accepts_the_authenticated_prometheus_config(tmp_path):
    import shutil
    import subprocess

    import yaml
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed: run make setup")
    config = monitoring.prometheus_config(monitoring.jobs_from_inventory(*inventory(), {}), {})
    password_file = tmp_path / "web_password"
    password_file.write_text(WEB_PASSWORD + "\n")
    for scrape in config["scrape_configs"] + config["alerting"]["alertmanagers"]:
        if "basic_auth" in scrape:
            scrape["basic_auth"]["password_file"] = str(password_file)
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_serves_prometheus_and_alertmanager_with_their_web_config_and_no_password():
    project = monitoring.compose({"services": ["prometheus", "alertmanager", "grafana"], "address": "10.0.10.14",
                                  "images": {"prometheus": "docker.io/prom/prometheus:v2.55.1",
                                             "alertmanager": "docker.io/prom/alertmanager:v0.28.1",
                                             "grafana": "docker.io/grafana/grafana:11.6.0"}})["services"]
    assert "--web.config.file=/etc/prometheus/web.yml" in project["prometheus"]["command"]
    assert "--web.config.file=/etc/alertmanager/web.yml" in project["alertmanager"]["command"]
    for name, password_file, port in (("prometheus", "/etc/prometheus/secrets/web_password", 9090),
                                      ("alertmanager", "/etc/alertmanager/secrets/web_password", 9093)):
        test = project[name]["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL" and len(test) == 2
        assert "$$(cat %s)" % password_file in test[1] and "http://127.0.0.1:%d/-/ready" % port in test[1]
        assert "'llmstack'" in test[1]
    assert WEB_PASSWORD not in rendered_text(project)


class AuthServer:
    """Answers /-/ready with 200 only for the basic auth header of llmstack:WEB_PASSWORD, else 401 (what the
    exporter toolkit does): the health check's shell must build that header from the password file."""

    def __init__(self):
        import base64
        import http.server
        import threading

        expected = "Basic " + base64.b64encode(("llmstack:" + WEB_PASSWORD).encode()).decode()
        self.seen = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                server.seen.append(self.headers.get("Authorization"))
                ok = self.headers.get("Authorization") == expected and self.path == "/-/ready"
                self.send_response(200 if ok else 401)
                if not ok:
                    self.send_header("WWW-Authenticate", 'Basic realm="test"')
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("stored, healthy", [(WEB_PASSWORD + "\n", True), (WEB_PASSWORD, True), ("wrong\n", False)])
def test_the_health_check_authenticates_with_the_password_file_it_reads(tmp_path, stored, healthy):
    """The rendered CMD-SHELL run by sh, as compose hands it over ($$ -> $), with GNU wget (the lab's images; the
    prom/* images have busybox's, which takes the same options)."""
    import shutil
    import subprocess
    if shutil.which("wget") is None:
        pytest.fail("wget is not installed: run make setup")
    server = AuthServer()
    try:
        password_file = tmp_path / "web_password"
        password_file.write_text(stored)
        command = monitoring.ready_check("prometheus")[1].replace("$$", "$")
        command = command.replace("/etc/prometheus/secrets/web_password", str(password_file))
        command = command.replace("127.0.0.1:9090", "127.0.0.1:%d" % server.port)
        result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False, timeout=30)
        assert (result.returncode == 0) is healthy, (result.stdout, result.stderr, server.seen)
        assert server.seen and all(s and s.startswith("Basic ") for s in server.seen if s)
    finally:
        server.close()


def test_grafana_logs_in_to_prometheus_with_the_password_from_its_environment():
    provisioning = monitoring.grafana_provisioning("http://prometheus:9090")
    source = provisioning["datasources"]["datasources"][0]
    assert source["basicAuth"] is True and source["basicAuthUser"] == "llmstack"
    assert source["secureJsonData"] == {"basicAuthPassword": "$LLMSTACK_WEB_PASSWORD"}
    assert monitoring.GRAFANA_WEB_PASSWORD_ENV == "LLMSTACK_WEB_PASSWORD"
    assert monitoring.grafana_provisioning("http://p:9090", "ops")["datasources"]["datasources"][0][
        "basicAuthUser"] == "ops"
    assert WEB_PASSWORD not in rendered_text(provisioning)


def test_web_config_holds_a_bcrypt_hash_that_verifies_and_stays_the_same_on_a_rerun():
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import bcrypt_hash
    first = monitoring.web_config("llmstack", WEB_PASSWORD)
    assert list(first) == ["basic_auth_users"] and list(first["basic_auth_users"]) == ["llmstack"]
    hashed = first["basic_auth_users"]["llmstack"]
    assert hashed.startswith("$2b$") and bcrypt_hash.verifies(WEB_PASSWORD, hashed)
    assert WEB_PASSWORD not in rendered_text(first)
    # The same input (with what the earlier run wrote) gives the same file; a new password a new hash.
    assert monitoring.web_config("llmstack", WEB_PASSWORD, [hashed]) == first
    again = monitoring.web_config("llmstack", "0therPassw0rd0therPassw0rd", [hashed])["basic_auth_users"]["llmstack"]
    assert again != hashed and bcrypt_hash.verifies("0therPassw0rd0therPassw0rd", again)


@pytest.mark.parametrize("user", ["", "ll:mstack", "a b", "x'y", "$(id)", "-dash", "u" * 65, 7])
def test_a_web_user_basic_auth_or_the_shell_would_misread_is_refused(user):
    with pytest.raises(monitoring.MonitoringError, match="monitoring_web_user"):
        monitoring.web_config(user, WEB_PASSWORD)
    with pytest.raises(monitoring.MonitoringError, match="monitoring_web_user"):
        monitoring.jobs_from_inventory(*inventory(), {"web_user": user})
    with pytest.raises(monitoring.MonitoringError, match="monitoring_web_user"):
        monitoring.compose({"services": ["prometheus"], "address": "10.0.10.14", "web_user": user,
                            "images": {"prometheus": "docker.io/prom/prometheus:v2.55.1"}})


def test_a_web_password_bcrypt_cannot_hash_is_named():
    with pytest.raises(monitoring.MonitoringError, match="monitoring web password: .*longer than 72 bytes"):
        monitoring.web_config("llmstack", "x" * 80)


def test_the_tls_job_scrapes_the_certificates_expiry_where_the_gateway_serves_it():
    hosts, groups = inventory()
    hosts["gw"]["tls_expiry"] = True
    jobs = by_name(monitoring.jobs_from_inventory(hosts, groups, {}))
    assert jobs["tls"]["path"] == "/llmstack/tls-metrics"
    wanted = [{"address": "10.0.10.12:9402", "labels": {"host": "gw"}}]
    assert jobs["tls"]["targets"] == jobs["litellm"]["targets"] == wanted
    hosts["gw"]["tls_expiry"] = False
    assert "tls" not in by_name(monitoring.jobs_from_inventory(hosts, groups, {}))


def test_the_topology_says_whether_the_gateway_serves_its_certificates_expiry():
    topo = {"hosts": {"gw": {"addresses": {"mgmt": "10.0.10.12"}}},
            "endpoints": [{"role": "tls_proxy", "service": "litellm-metrics", "host": "gw", "address": "10.0.10.12",
                           "port": 9402, "expiry": True}]}
    assert monitoring.hosts_from_topology(topo)["gw"]["tls_expiry"] is True
    topo["endpoints"][0]["expiry"] = False
    assert monitoring.hosts_from_topology(topo)["gw"]["tls_expiry"] is False


def test_the_ports_a_caller_leaves_out_are_the_roles_defaults_for_the_scrape_jobs_and_the_compose_project():
    """One table (DEFAULT_PORTS) for both: the scrape job of Grafana once defaulted to 3000 while the compose project
    published it on 3001 (the role's default), so a caller that left the port out scraped a port nothing served."""
    import os

    import yaml

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))))))
    with open(os.path.join(root, "roles", "monitoring", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    role = dict((name, defaults["monitoring_%s_port" % name.replace("-", "_")]) for name in monitoring.SERVICES)
    assert role == monitoring.DEFAULT_PORTS
    jobs = by_name(monitoring.jobs_from_inventory(*inventory(), {}))
    scraped = dict((name, int(jobs[name]["targets"][0]["address"].rsplit(":", 1)[1]))
                   for name in ("prometheus", "alertmanager", "grafana"))
    project = monitoring.compose({"services": ["prometheus", "alertmanager", "grafana"], "address": "10.0.10.14",
                                  "images": {"prometheus": "docker.io/prom/prometheus:v2.55.1",
                                             "alertmanager": "docker.io/prom/alertmanager:v0.28.1",
                                             "grafana": "docker.io/grafana/grafana:11.6.0"}})["services"]
    published = dict((name, int(project[name]["ports"][0].split(":")[1])) for name in scraped)
    assert scraped == published == dict((name, role[name]) for name in scraped)
