"""A real Prometheus (Debian's 2.42, on 127.0.0.1) with the prometheus.yml that module_utils/monitoring.py renders
from an inventory, and the monitoring role's alert rules, scraping recorded exporter output.

Doubles: the exporters. A local HTTP server serves recorded dcgm-exporter (Tesla T4) and vLLM /metrics text
(tests/fixtures/metrics/SOURCE) where the inventory says the GPU VM's exporters are (127.0.0.1 here); the test
changes the served GPU temperature and XID value to cross the alert thresholds. Intervals are 1 s instead of the
role's 5 s/15 s so the test is quick; the rules are the shipped files, unchanged."""

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from conftest import ROOT

sys.path.insert(0, ROOT)
from plugins.module_utils import monitoring  # noqa: E402 (plain Python, importable from the checkout)

sys.path.pop(0)

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "metrics")
RULES = os.path.join(ROOT, "roles", "monitoring", "files", "rules")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Exporter:
    """Serves one recorded /metrics text; ``set(metric, value)`` changes a sample's value as a GPU would."""

    def __init__(self, fixture):
        with open(os.path.join(FIXTURES, fixture)) as handle:
            self.text = handle.read()
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                body = exporter.text.encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set(self, metric, value):
        lines = []
        for line in self.text.splitlines():
            if line.startswith(metric + "{"):
                line = line.rsplit(" ", 1)[0] + " " + str(value)
            lines.append(line)
        self.text = "\n".join(lines) + "\n"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is missing: make setup installs Debian's prometheus package")
    base = tmp_path_factory.mktemp("prometheus")
    dcgm, vllm = Exporter("dcgm-exporter-tesla-t4.prom"), Exporter("vllm-llama-3.1-8b.prom")
    hosts = {"gpu-a": {"interfaces": [{"vlan": "mgmt", "address": "127.0.0.1"},
                                      {"vlan": "inference", "address": "127.0.0.1"}],
                       "models": [{"name": "fast", "port": vllm.port}]}}
    settings = {"dcgm_port": dcgm.port, "gpu_interval": "1s", "interval": "1s", "evaluation_interval": "1s",
                "node_groups": [], "rule_files": [os.path.join(RULES, name) for name in sorted(os.listdir(RULES))]}
    jobs = monitoring.jobs_from_inventory(hosts, {"gpu_vms": ["gpu-a"]}, settings)
    config_path = base / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(monitoring.prometheus_config(jobs, settings)))
    check = subprocess.run(["promtool", "check", "config", str(config_path)], capture_output=True, text=True,
                           check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    proc = subprocess.Popen([binary, "--config.file", str(config_path), "--storage.tsdb.path", str(base / "data"),
                             "--web.listen-address", "127.0.0.1:%d" % port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api = "http://127.0.0.1:%d" % port
    try:
        wait(lambda: urllib.request.urlopen(api + "/-/ready", timeout=2).status == 200, "Prometheus ready")
        yield {"api": api, "dcgm": dcgm, "vllm": vllm, "config": yaml.safe_load(config_path.read_text())}
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        dcgm.close()
        vllm.close()


def wait(condition, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (OSError, ValueError, KeyError, IndexError) as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError("timed out waiting for %s (%s)" % (what, last))


def query(api, expr):
    url = api + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())["data"]["result"]


def test_the_inventory_targets_are_scraped_with_their_labels(prometheus):
    api = prometheus["api"]

    def both_up():
        with urllib.request.urlopen(api + "/api/v1/targets", timeout=5) as response:
            active = json.loads(response.read())["data"]["activeTargets"]
        return sorted((t["labels"]["job"], t["health"]) for t in active) == [("dcgm", "up"), ("vllm", "up")]

    wait(both_up, "the dcgm and vllm targets to be up")
    temperature = query(api, 'DCGM_FI_DEV_GPU_TEMP{job="dcgm"}')
    assert len(temperature) == 1
    labels = temperature[0]["metric"]
    assert (labels["host"], labels["gpu"], labels["modelName"]) == ("gpu-a", "0", "Tesla T4")
    assert temperature[0]["value"][1] == "25"
    tokens = query(api, 'vllm:generation_tokens_total{job="vllm", host="gpu-a", model="fast"}')
    assert [t["value"][1] for t in tokens] == ["27453"]
    jobs = {c["job_name"]: c for c in prometheus["config"]["scrape_configs"]}
    assert jobs["vllm"]["static_configs"][0]["labels"] == {"host": "gpu-a", "model": "fast"}


def test_crossing_the_thresholds_raises_the_alerts(prometheus):
    api, dcgm = prometheus["api"], prometheus["dcgm"]
    wait(lambda: query(api, 'DCGM_FI_DEV_GPU_TEMP{host="gpu-a"}'), "the temperature series")
    assert query(api, 'ALERTS{alertname=~"GpuTemperatureHigh|GpuXidError"}') == []
    dcgm.set("DCGM_FI_DEV_GPU_TEMP", 86)
    dcgm.set("DCGM_FI_DEV_XID_ERRORS", 79)

    def alert_states():
        return {(a["metric"]["alertname"], a["metric"]["alertstate"])
                for a in query(api, 'ALERTS{alertname=~"GpuTemperatureHigh|GpuXidError", host="gpu-a", gpu="0"}')}

    # GpuTemperatureHigh waits 5 minutes before firing (promtool tests that part); here it must go pending.
    wait(lambda: alert_states() == {("GpuTemperatureHigh", "pending"), ("GpuXidError", "firing")}, "the alerts")
    dcgm.set("DCGM_FI_DEV_GPU_TEMP", 25)
    dcgm.set("DCGM_FI_DEV_XID_ERRORS", 0)
    wait(lambda: alert_states() == set(), "the alerts to clear")


def test_a_temperature_at_the_fail_line_fires_the_critical_alert_after_its_minute(prometheus):
    """90 °C (seed 000's fail line) fires GpuTemperatureCritical once it has held for its 1 minute; 89 °C never."""
    api, dcgm = prometheus["api"], prometheus["dcgm"]

    def critical():
        return [a["metric"]["alertstate"] for a in query(api, 'ALERTS{alertname="GpuTemperatureCritical"}')]

    dcgm.set("DCGM_FI_DEV_GPU_TEMP", 89)
    wait(lambda: query(api, 'DCGM_FI_DEV_GPU_TEMP{host="gpu-a"} == 89'), "89 °C to be scraped")
    time.sleep(3)
    assert critical() == []
    dcgm.set("DCGM_FI_DEV_GPU_TEMP", 90)
    wait(lambda: critical() == ["pending"], "the critical alert to be pending")
    started = time.monotonic()
    wait(lambda: critical() == ["firing"], "the critical alert to fire", timeout=90)
    assert time.monotonic() - started > 50, "fired before its minute was up"
    dcgm.set("DCGM_FI_DEV_GPU_TEMP", 25)
    wait(lambda: critical() == [], "the critical alert to clear")


def test_every_dashboard_query_is_valid_promql_and_the_gpu_panels_find_their_series(prometheus):
    """The Grafana dashboards of the monitoring role (files/dashboards): Prometheus parses every panel's query
    (template variables set to match all), and the GPU and vLLM panels that read recorded fields return data."""
    api = prometheus["api"]
    wait(lambda: query(api, "DCGM_FI_DEV_GPU_TEMP") and query(api, "vllm:num_requests_running"), "the series")
    folder = os.path.join(ROOT, "roles", "monitoring", "files", "dashboards")
    answered = set()
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as handle:
            dashboard = json.load(handle)
        assert dashboard["uid"].startswith("llmstack-") and dashboard["editable"] is False
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}", (name, panel["title"])
            for target in panel["targets"]:
                expr = target["expr"].replace("$host", ".*").replace("$gpu", ".*").replace("$model", ".*")
                url = api + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
                with urllib.request.urlopen(url, timeout=5) as response:
                    body = json.loads(response.read())
                assert body["status"] == "success", (name, panel["title"], expr)
                if body["data"]["result"]:
                    answered.add((name, panel["title"]))
    for title in ("GPU temperature", "GPU utilisation", "Power draw", "SM clock", "Framebuffer memory used",
                  "Last XID"):
        assert ("gpu.json", title) in answered, title
    assert ("vllm.json", "Requests running and waiting") in answered
