# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus scrape targets from the inventory, and prometheus.yml (plain Python, no Ansible imports).

Targets come from inventory groups (names mappable) and each host's ``llmstack_interfaces``: no address is
hard-coded. Every target carries ``host`` (the inventory name), which the alert rules join on (a GPU's memory and
its VM's vLLM ``up``); vLLM targets also carry ``model`` (the served name).

Jobs (seed 000: GPU metrics every 5 s, the rest every 15 s):
- ``dcgm``: dcgm-exporter on each GPU VM, management address, 5 s;
- ``vllm``: each model server of each GPU VM, where vLLM listens (its inference-VLAN address), 5 s;
- ``node``: node-exporter on the hosts of ``node_groups``, management address;
- ``litellm``: each gateway's ``/metrics/`` (LiteLLM's prometheus callback) where the gateway's TLS proxy serves
  it to the observability hosts (the topology's ``tls_proxy``/``litellm-metrics`` endpoint);
- ``prometheus``, ``alertmanager``, ``grafana``: the observability hosts themselves.

Prometheus and Alertmanager ask for HTTP basic auth on every path (``--web.config.file``, the exporter toolkit's
``web.yml``: :func:`web_config`); whatever talks to them authenticates with the user ``web_user`` (default
``llmstack``) and the password from a file (:data:`WEB_FILES`) or, for Grafana, from its environment. No password
is ever written into prometheus.yml, the compose project or Grafana's provisioning.
"""

import ipaddress
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import bcrypt_hash, service_start, tls_proxy, value_checks

# Prometheus' --storage.tsdb.retention.size: a number and a byte unit (alecthomas/units Base2Bytes).
SIZE_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(B|KB|MB|GB|TB|PB|EB|KiB|MiB|GiB|TiB|PiB|EiB)$")
NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
GROUP_ROLES = ("gpu_vms", "llm_gateways", "observability")
# The services' ports when the caller gives none: the role's defaults (roles/monitoring/defaults/main.yml
# monitoring_<service>_port; test_monitoring checks they agree), one table for the scrape jobs and the compose project.
# Grafana is on 3001, not its own 3000: Langfuse's web UI takes 3000 when both run on one host.
DEFAULT_PORTS = {"dcgm-exporter": 9400, "node-exporter": 9100, "prometheus": 9090, "alertmanager": 9093,
                 "grafana": 3001}
# The basic auth user of Prometheus and Alertmanager: letters, digits, '.', '_', '-' (no ':', which ends a user name
# in basic auth, and nothing a shell would read: the health checks name it).
WEB_USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_WEB_USER = "llmstack"
# Inside the containers: the compose project mounts the deployment directory's prometheus/ at /etc/prometheus and
# alertmanager/ at /etc/alertmanager (read only); each service reads its own copy of the password (its user, 0600).
WEB_FILES = {
    "prometheus": {"config": "/etc/prometheus/web.yml", "password": "/etc/prometheus/secrets/web_password",
                   "port": 9090},
    "alertmanager": {"config": "/etc/alertmanager/web.yml", "password": "/etc/alertmanager/secrets/web_password",
                     "port": 9093},
}
# Grafana's datasource reads the password from this variable of its env file (secrets/grafana.env).
GRAFANA_WEB_PASSWORD_ENV = "LLMSTACK_WEB_PASSWORD"


class MonitoringError(value_checks.SettingsProblems):
    """Bad input; ``errors`` lists every problem, each naming the host and variable."""


def seconds(duration):
    """``1m30s`` -> 90.0 (Prometheus duration syntax); ValueError when it is not one."""
    value = value_checks.prometheus_seconds(duration)
    if value is None:
        raise ValueError("%r is not a Prometheus duration" % (duration,))
    return value


def _duration_problem(variable, value):
    """None for a Prometheus duration above zero (``15s``, ``1m30s``, ``500ms``, ``30d``), else the message."""
    number = value_checks.prometheus_seconds(value)
    if number is None or number <= 0:
        return ("%s: %r is not a Prometheus duration above 0: a number and a unit (ms, s, m, h, d, w, y), units "
                "largest first and each at most once, e.g. 15s, 1m30s, 30d" % (variable, value))
    return None


def _address(host, hostvars, vlan):
    for interface in hostvars.get("interfaces") or []:
        if isinstance(interface, dict) and interface.get("vlan") == vlan and interface.get("address"):
            return str(interface["address"])
    return None


def _hostport(address, port):
    try:
        if ipaddress.ip_address(address).version == 6:
            return "[%s]:%s" % (address, port)
    except ValueError:
        pass
    return "%s:%s" % (address, port)


def _port(value):
    """A TCP port from a number or a string of digits (the collection's rule), else None."""
    return value_checks.as_port(value)


def hosts_from_topology(topology):
    """The ``hosts`` of :func:`jobs_from_inventory` from ``llmstack_topology``: each host's addresses, the vLLM
    endpoints (address, model, port) and the gateway's LiteLLM metrics endpoint. Nothing is read twice: the
    topology holds each role's own settings."""
    hosts = {}
    for host, data in sorted(((topology or {}).get("hosts") or {}).items()):
        hosts[host] = {"interfaces": [{"vlan": vlan, "address": address}
                                      for vlan, address in sorted((data.get("addresses") or {}).items())],
                       "models": [], "not_started": list(data.get("not_started") or [])}
    for endpoint in (topology or {}).get("endpoints") or []:
        entry = hosts.setdefault(endpoint["host"], {"interfaces": [], "models": []})
        if endpoint["role"] == "vllm":
            entry["vllm_address"] = endpoint["address"]
            entry["models"].append({"name": endpoint.get("model") or endpoint["service"], "port": endpoint["port"]})
        elif endpoint["role"] == "tls_proxy" and endpoint["service"] == "litellm-metrics":
            entry["litellm_metrics_address"] = endpoint["address"]
            entry["litellm_metrics_port"] = endpoint["port"]
            # The same listener serves the proxy certificates' expiry (tls_proxy_metrics_file).
            entry["tls_expiry"] = bool(endpoint.get("expiry"))
    return hosts


def _web_user_problem(user):
    if isinstance(user, str) and WEB_USER_RE.match(user):
        return None
    return ("monitoring_web_user: %r is not a user name for HTTP basic auth: 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit" % (user,))


def web_user(settings):
    """The basic auth user of Prometheus and Alertmanager (``settings["web_user"]``, default ``llmstack``)."""
    user = settings.get("web_user")
    return DEFAULT_WEB_USER if user is None else user


def validate_settings(settings):
    errors = []
    problem = _web_user_problem(web_user(settings))
    if problem:
        errors.append(problem)
    for key in ("gpu_interval", "interval", "evaluation_interval", "retention_time"):
        value = settings.get(key)
        if value is not None:
            problem = _duration_problem("monitoring_%s" % key, value)
            if problem:
                errors.append(problem)
    for key in ("dcgm_port", "node_port", "prometheus_port", "alertmanager_port", "grafana_port"):
        if key in settings and _port(settings[key]) is None:
            errors.append("monitoring_%s: %r is not a TCP port" % (key, settings[key]))
    groups = settings.get("groups") or {}
    for role in GROUP_ROLES:
        if not isinstance(groups.get(role, role), str):
            errors.append("monitoring_groups.%s: must be a group name" % role)
    return errors


def jobs_from_inventory(hosts, groups, settings):
    """The scrape jobs, each ``{name, interval, path, targets: [{address, labels}]}``.

    ``hosts``: inventory name -> ``{interfaces, models: [{name, port}], vllm_address, litellm_metrics_address,
    litellm_metrics_port, tls_expiry}`` (:func:`hosts_from_topology`); ``groups``: group name -> [hosts]; ``settings``:
    ``vlan`` (where exporters listen, default mgmt), ``vllm_vlan`` (default inference), ``groups`` (our role ->
    your group name), ``node_groups``, ports and intervals."""
    errors = validate_settings(settings)
    if errors:
        raise MonitoringError(errors)
    vlan = settings.get("vlan") or "mgmt"
    vllm_vlan = settings.get("vllm_vlan") or "inference"
    mapping = dict((role, role) for role in GROUP_ROLES)
    mapping.update(settings.get("groups") or {})
    members = dict((role, list(groups.get(mapping[role]) or [])) for role in GROUP_ROLES)
    gpu_interval = settings.get("gpu_interval") or "5s"
    interval = settings.get("interval") or "15s"
    jobs = []

    def need(host, address, what, variable):
        if address is None:
            errors.append("host %s: no address on VLAN %s in llmstack_interfaces (%s needs it; or set %s)"
                          % (host, vlan if variable != "vllm_bind_address" else vllm_vlan, what, variable))
        return address

    def job(name, every, targets, path="/metrics", basic_auth=False):
        if targets:
            entry = {"name": name, "interval": every, "path": path, "targets": targets}
            if basic_auth:
                # Scraped with the web user and its password file (prometheus_config).
                entry["basic_auth"] = True
            jobs.append(entry)

    dcgm = []
    vllm = []
    for host in members["gpu_vms"]:
        hv = hosts.get(host) or {}
        address = need(host, _address(host, hv, vlan), "dcgm-exporter", "monitoring_vlan")
        if address:
            port = settings.get("dcgm_port", DEFAULT_PORTS["dcgm-exporter"])
            dcgm.append({"address": _hostport(address, port), "labels": {"host": host}})
        models = hv.get("models") or []
        if models:
            vllm_address = hv.get("vllm_address")
            if not vllm_address or str(vllm_address) in ("0.0.0.0", "::"):
                # Bound to every address (or not set): scrape it where the gateway reaches it.
                vllm_address = _address(host, hv, vllm_vlan)
            vllm_address = need(host, vllm_address, "scraping vLLM", "vllm_bind_address")
            for model in models:
                port = _port(model.get("port")) if isinstance(model, dict) else None
                if port is None:
                    errors.append("host %s: vllm_models entry %r has no usable port" % (host, model))
                elif vllm_address:
                    vllm.append({"address": _hostport(vllm_address, port),
                                 "labels": {"host": host, "model": str(model.get("name"))}})
    node = []
    seen = set()
    for group in settings.get("node_groups", ["gpu_vms", "observability", "pve_hosts"]):
        for host in groups.get(mapping.get(group, group)) or []:
            if host in seen:
                continue
            seen.add(host)
            address = need(host, _address(host, hosts.get(host) or {}, vlan), "node-exporter", "monitoring_vlan")
            if address:
                port = settings.get("node_port", DEFAULT_PORTS["node-exporter"])
                node.append({"address": _hostport(address, port), "labels": {"host": host}})
    litellm, tls = [], []
    for host in members["llm_gateways"]:
        # Only where the gateway serves its metrics to this host (the tls_proxy metrics listener): LiteLLM itself
        # listens on loopback, and a target nothing answers on would fire GatewayDown on a healthy gateway.
        hv = hosts.get(host) or {}
        address = hv.get("litellm_metrics_address")
        if not address:
            continue
        given = hv.get("litellm_metrics_port")
        port = _port(given)
        if port is None:
            errors.append("host %s: tls_proxy_metrics_port %r is not a TCP port (1-65535)" % (host, given))
        else:
            litellm.append({"address": _hostport(address, port), "labels": {"host": host}})
            if hv.get("tls_expiry"):
                tls.append({"address": _hostport(address, port), "labels": {"host": host}})
    own = {"prometheus": [], "alertmanager": [], "grafana": []}
    for host in members["observability"]:
        address = need(host, _address(host, hosts.get(host) or {}, vlan), "the monitoring stack", "monitoring_vlan")
        if address:
            # A service the host renders but does not start (llmstack_services_not_started) is not scraped: its
            # target would only ever be down.
            skipped = service_start.services_to_start(
                "monitoring", list(own), (hosts.get(host) or {}).get("not_started") or [])["skipped"]
            for name in own:
                if name in skipped:
                    continue
                port = settings.get("%s_port" % name, DEFAULT_PORTS[name])
                own[name].append({"address": _hostport(address, port), "labels": {"host": host}})
    if errors:
        raise MonitoringError(errors)
    job("dcgm", gpu_interval, dcgm)
    job("vllm", gpu_interval, vllm)
    job("node", interval, node)
    job("litellm", interval, litellm, path="/metrics/")
    job("tls", interval, tls, path=tls_proxy.EXPIRY_PATH)
    for name in ("prometheus", "alertmanager", "grafana"):
        job(name, interval, own[name], basic_auth=name in WEB_FILES)
    return jobs


def prometheus_config(jobs, settings):
    """prometheus.yml as a dict: the jobs, the rule files, the Alertmanagers. The jobs marked ``basic_auth``
    (Prometheus and Alertmanager themselves) and the alerts sent to the Alertmanagers authenticate as the web user
    (``settings["web_user"]``) with the password file Prometheus reads in its container (``password_file``; the
    password itself is never in this config)."""
    errors = validate_settings(settings)
    names = [j["name"] for j in jobs]
    for name in names:
        if not NAME_RE.match(name):
            errors.append("job %r: not a valid job name" % name)
    if len(set(names)) != len(names):
        errors.append("a job name is used twice: %s" % ", ".join(sorted(n for n in set(names) if names.count(n) > 1)))
    if errors:
        raise MonitoringError(errors)
    interval = settings.get("interval") or "15s"
    auth = {"username": web_user(settings), "password_file": WEB_FILES["prometheus"]["password"]}
    scrape_configs = []
    for job in jobs:
        every = job.get("interval") or interval
        grouped = {}
        for target in job["targets"]:
            key = tuple(sorted(target["labels"].items()))
            grouped.setdefault(key, []).append(target["address"])
        scrape = {
            "job_name": job["name"],
            "scrape_interval": every,
            # A scrape may not outlast its interval (Prometheus refuses that config).
            "scrape_timeout": every if seconds(every) < 10 else "10s",
            "metrics_path": job.get("path") or "/metrics",
            "static_configs": [{"targets": addresses, "labels": dict(key)} for key, addresses in grouped.items()],
        }
        if job.get("basic_auth"):
            scrape["basic_auth"] = dict(auth)
        scrape_configs.append(scrape)
    config = {
        "global": {"scrape_interval": interval,
                   "evaluation_interval": settings.get("evaluation_interval") or interval,
                   "external_labels": dict(settings.get("external_labels") or {})},
        "rule_files": list(settings.get("rule_files") or []),
        "scrape_configs": scrape_configs,
    }
    alertmanagers = [t["address"] for j in jobs if j["name"] == "alertmanager" for t in j["targets"]]
    if alertmanagers:
        config["alerting"] = {"alertmanagers": [{"basic_auth": dict(auth),
                                                 "static_configs": [{"targets": alertmanagers}]}]}
    if not config["global"]["external_labels"]:
        del config["global"]["external_labels"]
    return config


SMARTHOST_RE = re.compile(r"^[A-Za-z0-9.-]+:[0-9]{1,5}$|^\[[0-9A-Fa-f:]+\]:[0-9]{1,5}$")
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+$")


def _absolute(value):
    return isinstance(value, str) and value.startswith("/") and not re.search(r"\s", value)


def alertmanager_config(settings):
    """alertmanager.yml as a dict. ``settings``: ``webhook`` ({url_file}), ``email`` ({to, from, smarthost,
    auth_username, auth_password_file, require_tls}), ``group_by``, ``group_wait``, ``group_interval``,
    ``repeat_interval``, ``critical_repeat_interval``. Secrets (the webhook URL, which often carries a token, and
    the SMTP password) are referred to by file, never written into this config.

    Inhibition: a critical alert on a GPU silences the warnings of the same GPU (``host`` and ``gpu`` equal); a
    model server that is down silences its own KV-cache and queue warnings."""
    errors = []
    for key in ("group_wait", "group_interval", "repeat_interval", "critical_repeat_interval"):
        value = settings.get(key)
        if value is None:
            continue
        variable = "monitoring_alert_repeat_interval" if key == "repeat_interval" else "alertmanager %s" % key
        if key == "group_wait" and value_checks.prometheus_seconds(value) == 0:
            continue
        problem = _duration_problem(variable, value)
        if problem:
            errors.append(problem)
    receiver = {"name": "default"}
    webhook = settings.get("webhook")
    if webhook:
        if not _absolute(webhook.get("url_file")):
            errors.append("monitoring_alert_webhook: url_file %r is not an absolute path" % (webhook.get("url_file"),))
        receiver["webhook_configs"] = [{"url_file": webhook.get("url_file"), "send_resolved": True}]
    email = settings.get("email")
    if email:
        for key in ("to", "from"):
            if not isinstance(email.get(key), str) or not EMAIL_RE.match(email[key]):
                errors.append("monitoring_alert_email.%s: %r is not an e-mail address" % (key, email.get(key)))
        if not isinstance(email.get("smarthost"), str) or not SMARTHOST_RE.match(email["smarthost"]):
            errors.append("monitoring_alert_email.smarthost: %r is not host:port" % (email.get("smarthost"),))
        if email.get("auth_username") and not _absolute(email.get("auth_password_file")):
            errors.append("monitoring_alert_email: a user name needs auth_password_file (an absolute path)")
        config = {"to": email.get("to"), "from": email.get("from"), "smarthost": email.get("smarthost"),
                  "require_tls": bool(email.get("require_tls", True)), "send_resolved": True}
        if email.get("auth_username"):
            config["auth_username"] = email["auth_username"]
            config["auth_password_file"] = email.get("auth_password_file")
        receiver["email_configs"] = [config]
    if errors:
        raise MonitoringError(errors)
    return {
        "route": {
            "receiver": "default",
            "group_by": list(settings.get("group_by") or ["alertname", "host"]),
            "group_wait": settings.get("group_wait") or "30s",
            "group_interval": settings.get("group_interval") or "5m",
            "repeat_interval": settings.get("repeat_interval") or "4h",
            "routes": [{"receiver": "default", "matchers": ['severity="critical"'],
                        "repeat_interval": settings.get("critical_repeat_interval") or "1h"}],
        },
        "receivers": [receiver],
        "inhibit_rules": [
            {"source_matchers": ['severity="critical"', 'gpu=~".+"'], "target_matchers": ['severity="warning"'],
             "equal": ["host", "gpu"]},
            {"source_matchers": ['alertname="VllmDown"'],
             "target_matchers": ['alertname=~"VllmKvCacheNearlyFull|VllmKvCacheFullAndRising|VllmRequestsQueueing"'],
             "equal": ["host", "model"]},
        ],
    }


IMAGE_TAG_RE = re.compile(r":(latest|main|stable|[0-9]+)$")
SERVICES = ("dcgm-exporter", "node-exporter", "prometheus", "alertmanager", "grafana")


def _pinned(image):
    return isinstance(image, str) and ("@sha256:" in image or (
        ":" in image.rsplit("/", 1)[-1] and not IMAGE_TAG_RE.search(image)))


def compose(settings):
    """The compose project of one host: ``services`` (a subset of SERVICES, in that order), ``address`` (the
    management address every port is published on), ``images``, ``ports``, ``retention_time``, ``retention_size``,
    ``gpu_interval`` (the GPU scrape interval, a Prometheus duration: dcgm-exporter collects as often; or
    ``collect_interval_ms``), ``restart``.

    Prometheus and Alertmanager read their ``web.yml`` (basic auth on every path, :func:`web_config`); their health
    checks authenticate as ``web_user`` with the password the shell reads from the service's own copy when the check
    runs, so the password is never in the compose project.

    File layout under the deployment directory: prometheus/ (prometheus.yml, web.yml, rules/, secrets/web_password),
    alertmanager/ (alertmanager.yml, web.yml, secrets/), grafana/ (provisioning/, dashboards/), dcgm-counters.csv,
    data/<service>/ (owned by the service's user), secrets/ (the canonical secrets, root only)."""
    errors = []
    user = web_user(settings)
    problem = _web_user_problem(user)
    if problem:
        errors.append(problem)
    services = settings.get("services") or []
    for name in services:
        if name not in SERVICES:
            errors.append("monitoring: unknown service %r" % name)
    images = settings.get("images") or {}
    for name in services:
        if name in SERVICES and not _pinned(images.get(name)):
            errors.append("monitoring_%s_image: %r is not pinned to a version"
                          % (name.replace("-", "_"), images.get(name)))
    address = settings.get("address")
    try:
        ipaddress.ip_address(str(address))
    except ValueError:
        errors.append("monitoring_bind_address: %r is not an IP address (the host needs an address on monitoring_vlan)"
                      % (address,))
    ports = dict(DEFAULT_PORTS, **(settings.get("ports") or {}))
    for name, port in ports.items():
        if _port(port) is None:
            errors.append("monitoring_%s_port: %r is not a TCP port (1-65535; a number, or a string of digits)"
                          % (name.replace("-", "_"), port))
    ports = dict((name, _port(port)) for name, port in ports.items())
    for key in ("retention_time",):
        if settings.get(key) is not None:
            problem = _duration_problem("monitoring_%s" % key, settings[key])
            if problem:
                errors.append(problem)
    size = settings.get("retention_size")
    if size not in (None, "") and (not isinstance(size, str) or not SIZE_RE.match(size)):
        errors.append("monitoring_retention_size: %r is not a size such as 50GB or 512MB (B, KB, MB, GB, TB, PB)"
                      % (size,))
    collect_ms = None
    if settings.get("gpu_interval") is not None:
        problem = _duration_problem("monitoring_gpu_interval", settings["gpu_interval"])
        if problem:
            errors.append(problem)
        else:
            # dcgm-exporter collects as often as Prometheus scrapes the GPU jobs (its -c is in milliseconds).
            collect_ms = max(1, int(round(seconds(settings["gpu_interval"]) * 1000)))
    elif settings.get("collect_interval_ms") is not None:
        collect_ms = value_checks.as_int(settings["collect_interval_ms"])
        if not collect_ms:
            errors.append("monitoring: collect_interval_ms %r is not a whole number of milliseconds"
                          % (settings["collect_interval_ms"],))
    if errors:
        raise MonitoringError(errors)
    restart = settings.get("restart") or "unless-stopped"
    logging = {"driver": "json-file", "options": {"max-size": "20m", "max-file": "5"}}

    def publish(name, inner):
        return ["%s:%s" % (_hostport(address, ports[name]), inner)]

    out = {}
    if "dcgm-exporter" in services:
        out["dcgm-exporter"] = {
            "image": images["dcgm-exporter"], "restart": restart,
            # Our counters file, collected as often as Prometheus scrapes the GPU jobs.
            "command": ["-f", "/etc/dcgm-exporter/llmstack-counters.csv", "-c", str(collect_ms or 5000)],
            "cap_add": ["SYS_ADMIN"],
            "deploy": {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]}}},
            "volumes": ["./dcgm-counters.csv:/etc/dcgm-exporter/llmstack-counters.csv:ro"],
            "ports": publish("dcgm-exporter", 9400), "logging": logging}
    if "node-exporter" in services:
        out["node-exporter"] = {
            "image": images["node-exporter"], "restart": restart,
            "command": ["--path.rootfs=/host", "--web.listen-address=%s" % _hostport(address, ports["node-exporter"])],
            "network_mode": "host", "pid": "host", "read_only": True,
            "volumes": ["/:/host:ro,rslave"], "logging": logging}
    if "prometheus" in services:
        # No --web.enable-lifecycle (seed 000 has it): whoever reaches :9090 could shut Prometheus down or reload
        # it (issue #23). The role reloads it with SIGHUP instead.
        command = ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus",
                   "--storage.tsdb.retention.time=%s" % (settings.get("retention_time") or "30d"),
                   "--web.config.file=%s" % WEB_FILES["prometheus"]["config"]]
        if settings.get("retention_size"):
            command.append("--storage.tsdb.retention.size=%s" % settings["retention_size"])
        out["prometheus"] = {
            "image": images["prometheus"], "restart": restart, "user": "65534:65534", "command": command,
            "volumes": ["./prometheus:/etc/prometheus:ro", "./data/prometheus:/prometheus"],
            "ports": publish("prometheus", 9090),
            "healthcheck": {"test": ready_check("prometheus", user), "interval": "10s", "timeout": "5s", "retries": 12},
            "logging": logging}
    if "alertmanager" in services:
        out["alertmanager"] = {
            "image": images["alertmanager"], "restart": restart, "user": "65534:65534",
            "command": ["--config.file=/etc/alertmanager/alertmanager.yml", "--storage.path=/alertmanager",
                        "--web.config.file=%s" % WEB_FILES["alertmanager"]["config"]],
            "volumes": ["./alertmanager:/etc/alertmanager:ro", "./data/alertmanager:/alertmanager"],
            "ports": publish("alertmanager", 9093),
            "healthcheck": {"test": ready_check("alertmanager", user), "interval": "10s", "timeout": "5s",
                            "retries": 12},
            "logging": logging}
    if "grafana" in services:
        out["grafana"] = {
            "image": images["grafana"], "restart": restart, "user": "472:472",
            "env_file": ["secrets/grafana.env"],
            "environment": {"GF_AUTH_ANONYMOUS_ENABLED": "false", "GF_USERS_ALLOW_SIGN_UP": "false",
                            "GF_ANALYTICS_REPORTING_ENABLED": "false", "GF_ANALYTICS_CHECK_FOR_UPDATES": "false",
                            "GF_SERVER_ROOT_URL": "http://%s/" % _hostport(address, ports["grafana"])},
            "volumes": ["./grafana/provisioning:/etc/grafana/provisioning:ro",
                        "./grafana/dashboards:/var/lib/grafana/dashboards:ro", "./data/grafana:/var/lib/grafana"],
            "ports": publish("grafana", 3000),
            "healthcheck": {"test": ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:3000/api/health"],
                            "interval": "10s", "timeout": "5s", "retries": 12},
            "logging": logging}
    return {"services": out}


def grafana_provisioning(prometheus_url, user=None):
    """The datasource and dashboard provider files Grafana reads at start. The datasource logs in to Prometheus as
    ``user`` (default ``llmstack``) with the password Grafana finds in its environment
    (:data:`GRAFANA_WEB_PASSWORD_ENV`, from secrets/grafana.env): Grafana expands ``$NAME`` in provisioning values, so
    the password is not in the file."""
    user = DEFAULT_WEB_USER if user is None else user
    problem = _web_user_problem(user)
    if problem:
        raise MonitoringError([problem])
    return {
        "datasources": {"apiVersion": 1, "datasources": [{
            "name": "Prometheus", "uid": "llmstack-prometheus", "type": "prometheus", "access": "proxy",
            "url": prometheus_url, "isDefault": True, "editable": False,
            "basicAuth": True, "basicAuthUser": user,
            "secureJsonData": {"basicAuthPassword": "$" + GRAFANA_WEB_PASSWORD_ENV}}]},
        "dashboards": {"apiVersion": 1, "providers": [{
            "name": "pvegpu.llmstack", "folder": "LLM stack", "type": "file", "disableDeletion": True,
            "allowUiUpdates": False, "options": {"path": "/var/lib/grafana/dashboards"}}]},
    }


def ready_check(service, user=DEFAULT_WEB_USER):
    """The compose health check of Prometheus or Alertmanager: ``wget`` of ``/-/ready`` (busybox's in the prom/*
    images, GNU's in the lab's) with a basic auth header the shell builds when the check runs, from the service's
    own copy of the password. ``$$`` is compose's escape for a ``$`` the shell sees."""
    files = WEB_FILES[service]
    problem = _web_user_problem(user)
    if problem:
        raise MonitoringError([problem])
    header = ("Authorization: Basic $$(printf '%%s:%%s' '%s' \"$$(cat %s)\" | base64 | tr -d '\\n')"
              % (user, files["password"]))
    return ["CMD-SHELL", "wget -q -O /dev/null --header \"%s\" http://127.0.0.1:%d/-/ready" % (header, files["port"])]


def web_config(user, password, earlier=()):
    """``web.yml`` of Prometheus and Alertmanager (the exporter toolkit's format) as a dict: ``basic_auth_users``
    with ``user`` and a bcrypt hash of ``password``. ``earlier``: the hashes of the files an earlier run wrote; one
    that still verifies the password is kept, so a rerun writes the same file (bcrypt_hash.keep_or_hash)."""
    problem = _web_user_problem(user)
    if problem:
        raise MonitoringError([problem])
    try:
        hashed = bcrypt_hash.keep_or_hash(password, earlier)
    except bcrypt_hash.BcryptError as exc:
        raise MonitoringError(["monitoring web password: %s" % exc])
    return {"basic_auth_users": {user: hashed}}
