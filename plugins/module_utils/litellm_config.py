# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The LiteLLM gateway's config.yaml, computed from the inventory (plain Python, no Ansible imports).

Input: the GPU VMs (each VM's inference address and the models it serves, as the vllm role deploys them),
optional external models (a cloud provider as the last fallback), the fallback map, per-group prices and
limits, router settings. Output: LiteLLM's ``config.yaml`` as a dict, without any secret in it: every key is
an ``os.environ/NAME`` reference, and ``env`` lists those names with what they hold.

Choices (docs/litellm.md):
- one ``hosted_vllm/<served name>`` deployment per (VM, model), ``api_base http://<address>:<port>/v1``;
  the same group on several VMs = several deployments of one ``model_name`` (load balancing);
- explicit fallbacks twice over: ``router_settings.fallbacks`` and, inside each group, the fallback groups'
  deployments at a lower priority (``litellm_params.order`` 2, 3, ...). Measured with LiteLLM 1.108.7: a
  single-deployment group whose upstream died answered errors when it had only router fallbacks (its
  cooldown spilled onto the fallback group); with the in-group lower-priority deployments, 0 errors;
- prices per group (per token or per second) on every deployment that serves it, so key budgets count;
- ``max_input_tokens`` from vLLM's ``max_model_len``, so context-window fallbacks have the number.
"""

import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

ROUTING_STRATEGIES = ("simple-shuffle", "latency-based-routing", "least-busy")
PRICE_KEYS = ("input_cost_per_token", "output_cost_per_token", "input_cost_per_second", "output_cost_per_second")
LIMIT_KEYS = ("rpm", "tpm")
# Per deployment (litellm_params): seed 001 gives its main deployment `timeout: 600`.
TIMEOUT_KEYS = ("timeout", "stream_timeout")
DURATION_WORDS = ("hourly", "daily", "weekly", "monthly")
DURATION_RE = re.compile(r"^[1-9][0-9]*(s|m|h|d|w|mo)$")
GROUP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
ROUTER_INT_KEYS = ("num_retries", "allowed_fails", "cooldown_time", "retry_after")


class LitellmConfigError(value_checks.SettingsProblems):
    """Bad input; ``errors`` lists every problem, each naming the variable."""


def env_name(prefix, host):
    """``VLLM_API_KEY`` + ``lab-gpu-a`` -> ``VLLM_API_KEY_LAB_GPU_A`` (an environment variable name)."""
    return prefix + "_" + re.sub(r"[^A-Z0-9]", "_", str(host).upper())


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def valid_duration(value):
    """LiteLLM's budget_duration: ``30d``, ``1mo``, ``24h``... or hourly/daily/weekly/monthly."""
    return isinstance(value, str) and (value in DURATION_WORDS or bool(DURATION_RE.match(value)))


def local_groups(gpu_vms):
    """{group: [deployment dict]} in inventory order: one deployment per (VM, model)."""
    groups = {}
    for vm in gpu_vms:
        for model in vm.get("models") or []:
            groups.setdefault(model["name"], []).append({
                "host": vm["host"], "address": vm.get("address"), "port": model.get("port"),
                "api_key": bool(vm.get("api_key", True)), "max_model_len": model.get("max_model_len"),
                "model": model.get("model")})
    return groups


def gpu_vms_from_hosts(hosts, vlan="inference"):
    """The GPU VMs as the gateway sees them, from each VM's inventory variables.

    ``hosts``: {inventory name: {interfaces: llmstack_interfaces, models: vllm_models, api_key_enabled:
    vllm_api_key_enabled, bind_address: vllm_bind_address (only when set in the inventory)}}.
    Returns (gpu_vms, errors): a VM whose vLLM is bound elsewhere than its inference address is an error,
    because the gateway could not reach it.
    """
    gpu_vms, errors = [], []
    for host, facts in hosts.items():
        facts = facts or {}
        models = facts.get("models") or []
        address = None
        for interface in facts.get("interfaces") or []:
            if isinstance(interface, dict) and interface.get("vlan") == vlan:
                address = interface.get("address")
                break
        bind = facts.get("bind_address")
        if models and address and bind not in (None, "", address, "0.0.0.0"):
            errors.append("vllm_bind_address of %s is %s, but the gateway reaches vLLM on %s (its %s VLAN "
                          "address): leave vllm_bind_address unset or set it to %s"
                          % (host, bind, address, vlan, address))
        gpu_vms.append({"host": host, "address": address, "api_key": facts.get("api_key_enabled", True) is not False,
                        "models": [{"name": m.get("name"), "port": _int_or_raw(m.get("port")), "model": m.get("model"),
                                    "max_model_len": _int_or_raw(m.get("max_model_len"))}
                                   for m in models if isinstance(m, dict)]})
    return gpu_vms, errors


def gpu_vms_from_topology(topology, vlan="inference"):
    """The GPU VMs as the gateway sees them, from ``llmstack_topology``: each vLLM endpoint where it listens (the
    topology has already refused one the gateways cannot reach), its key setting, and the VM's vllm_models.
    Returns (gpu_vms, errors) as :func:`gpu_vms_from_hosts`."""
    hosts = (topology or {}).get("hosts") or {}
    by_host = {}
    for endpoint in (topology or {}).get("endpoints") or []:
        if endpoint.get("role") != "vllm":
            continue
        entry = by_host.setdefault(endpoint["host"], {"ports": {}, "address": endpoint["address"],
                                                      "api_key": endpoint.get("api_key", True)})
        entry["ports"][endpoint.get("model")] = endpoint["port"]
    gpu_vms = []
    for host in sorted(h for h, data in hosts.items() if "gpu_vms" in (data.get("groups") or [])):
        found = by_host.get(host) or {}
        address = found.get("address")
        if address in (None, "0.0.0.0", "::"):
            address = (hosts[host].get("addresses") or {}).get(vlan)
        models = [m for m in hosts[host].get("models") or [] if isinstance(m, dict)]
        gpu_vms.append({"host": host, "address": address, "api_key": found.get("api_key", True) is not False,
                        "models": [{"name": m.get("name"), "port": _int_or_raw(m.get("port")), "model": m.get("model"),
                                    "max_model_len": _int_or_raw(m.get("max_model_len"))} for m in models]})
    return gpu_vms, []


def _int_or_raw(value):
    """A digit string as its number (as everywhere in the collection); anything else unchanged, for validate()
    to name."""
    number = value_checks.as_int(value)
    return value if number is None else number


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Role variable -> lowest whole number it takes (digit strings count; the role casts them after this check).
SETTING_INTS = (("litellm_workers", 1), ("litellm_num_retries", 0), ("litellm_timeout", 1),
                ("litellm_allowed_fails", 0), ("litellm_cooldown_time", 0), ("litellm_retry_after", 0),
                ("litellm_health_check_interval", 1), ("litellm_readiness_timeout", 1),
                ("litellm_verify_timeout", 1))


def check_settings(settings):
    """Every problem in the litellm role's own variables (full names as keys), each naming the variable; [] when
    usable. Runs first in the role's validate step, before anything is rendered or written."""
    problems = []
    for variable in ("litellm_database", "litellm_manage_keys", "litellm_verify_models"):
        if variable in settings and not isinstance(settings[variable], bool):
            problems.append("%s: %r is not a boolean (true or false)" % (variable, settings[variable]))
    if settings.get("litellm_database") is False and settings.get("litellm_manage_keys") is True:
        clients = settings.get("litellm_clients") or []
        aliases = ", ".join(str(c.get("alias", "?")) for c in clients if isinstance(c, dict)) or "none"
        problems.append("litellm_manage_keys: client keys (litellm_clients: %s) are stored in the gateway's database, "
                        "and litellm_database is false; turn the database on, or litellm_manage_keys off (clients "
                        "then use the master key)" % aliases)
    address = settings.get("litellm_bind_address")
    if "litellm_bind_address" in settings and value_checks.ip_address(address) is None:
        problems.append("litellm_bind_address: %r is not an IP address (the proxy's port is published on it, and "
                        "a host name cannot be bound; e.g. 127.0.0.1 behind tls_proxy)" % (address,))
    if "litellm_port" in settings and value_checks.as_port(settings["litellm_port"]) is None:
        problems.append("litellm_port: %r is not a TCP port (1-65535; a number, or a string of digits)"
                        % (settings["litellm_port"],))
    for variable, lowest in SETTING_INTS:
        if variable in settings:
            number = value_checks.as_int(settings[variable])
            if number is None or number < lowest:
                problems.append("%s: %r is not a whole number >= %d" % (variable, settings[variable], lowest))
    level = settings.get("litellm_log_level")
    if "litellm_log_level" in settings and level not in LOG_LEVELS:
        problems.append("litellm_log_level: %r is not one of %s" % (level, ", ".join(LOG_LEVELS)))
    env = settings.get("litellm_extra_env")
    if env is not None:
        if not isinstance(env, dict):
            problems.append("litellm_extra_env: must be a mapping NAME: value")
        else:
            for name, value in env.items():
                if not value_checks.is_env_name(name):
                    problems.append("litellm_extra_env: %r is not an environment variable name" % (name,))
                elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    problems.append("litellm_extra_env.%s: must be a string or a number" % name)
    directory = settings.get("litellm_dir")
    if "litellm_dir" in settings and (not isinstance(directory, str) or not directory.startswith("/")
                                      or re.search(r"[\s:]", directory)):
        problems.append("litellm_dir: %r is not an absolute path without blanks or ':' (compose volume syntax)"
                        % (directory,))
    return problems


def validate(data):
    """Every problem in the gateway's input, each naming the variable; [] when it is usable."""
    errors = []
    gpu_vms = data.get("gpu_vms") or []
    external = data.get("external_models") or []
    groups = local_groups(gpu_vms)
    seen_endpoints = {}
    for vm in gpu_vms:
        host = vm.get("host")
        if not vm.get("address") and vm.get("models"):
            errors.append("gpu_vms host %s serves %s but has no address on the inference VLAN "
                          "(llmstack_interfaces entry with vlan: %s)"
                          % (host, ", ".join(m.get("name", "?") for m in vm["models"]), data.get("vlan", "inference")))
        for index, model in enumerate(vm.get("models") or []):
            where = "vllm_models[%d] of %s" % (index, host)
            if not isinstance(model.get("name"), str) or not GROUP_RE.match(model.get("name") or ""):
                errors.append("%s: name %r is not a usable model group name" % (where, model.get("name")))
            port = model.get("port")
            if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
                errors.append("%s (%s): port %r must be an integer 1-65535" % (where, model.get("name"), port))
                continue
            length = model.get("max_model_len")
            if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 1):
                errors.append("%s (%s): max_model_len %r must be a whole number of tokens"
                              % (where, model.get("name"), length))
            endpoint = (vm.get("address"), port)
            if endpoint in seen_endpoints:
                errors.append("%s (%s): port %d on %s is already used by %s"
                              % (where, model.get("name"), port, host, seen_endpoints[endpoint]))
            seen_endpoints[endpoint] = "%s on %s" % (model.get("name"), host)
    names = set(groups)
    for index, ext in enumerate(external):
        where = "litellm_external_models[%d]" % index
        name = ext.get("name")
        if not isinstance(name, str) or not GROUP_RE.match(name or ""):
            errors.append("%s: name %r is not a usable model group name" % (where, name))
        elif name in names:
            errors.append("%s: name %s is already a model group (served by the GPU VMs or listed twice)"
                          % (where, name))
        if not isinstance(ext.get("model"), str) or "/" not in (ext.get("model") or ""):
            errors.append("%s (%s): model %r must be LiteLLM's provider/model, e.g. anthropic/claude-sonnet-4-5"
                          % (where, name, ext.get("model")))
        names.add(name)
    if not groups:
        errors.append("no model to route: no host in gpu_vms has vllm_models")
    fallbacks = data.get("fallbacks") or {}
    if not isinstance(fallbacks, dict):
        errors.append("litellm_fallbacks must be a mapping group -> [groups], got %r" % (fallbacks,))
        fallbacks = {}
    for var, mapping in (("litellm_fallbacks", fallbacks),
                         ("litellm_context_window_fallbacks", data.get("context_window_fallbacks") or {})):
        for group, targets in mapping.items():
            if group not in names:
                errors.append("%s: %s is not a model group (known: %s)" % (var, group, ", ".join(sorted(names))))
            if not isinstance(targets, list) or not targets:
                errors.append("%s.%s must be a non-empty list of groups" % (var, group))
                continue
            for target in targets:
                if target == group:
                    errors.append("%s.%s falls back to itself" % (var, group))
                elif target not in names:
                    errors.append("%s.%s: fallback %s is not a model group (known: %s)"
                                  % (var, group, target, ", ".join(sorted(names))))
            if len(set(targets)) != len(targets):
                errors.append("%s.%s lists a group twice: %s" % (var, group, targets))
    settings = data.get("model_settings") or {}
    for group, entry in settings.items():
        var = "litellm_model_settings.%s" % group
        if group not in names:
            errors.append("%s: %s is not a model group (known: %s)" % (var, group, ", ".join(sorted(names))))
        if not isinstance(entry, dict):
            errors.append("%s must be a mapping" % var)
            continue
        for key, value in entry.items():
            if key not in PRICE_KEYS + LIMIT_KEYS + TIMEOUT_KEYS:
                allowed = ", ".join(PRICE_KEYS + LIMIT_KEYS + TIMEOUT_KEYS)
                errors.append("%s: unknown key %s (allowed: %s)" % (var, key, allowed))
            elif key in TIMEOUT_KEYS and (not _number(value) or value <= 0):
                errors.append("%s.%s must be a number of seconds > 0, got %r" % (var, key, value))
            elif not _number(value) or value < 0:
                errors.append("%s.%s must be a number >= 0, got %r" % (var, key, value))
        per_token = [k for k in entry if k.endswith("_per_token")]
        per_second = [k for k in entry if k.endswith("_per_second")]
        if per_token and per_second:
            errors.append("%s: price per token or per second, not both (%s)"
                          % (var, ", ".join(per_token + per_second)))
    router = data.get("router") or {}
    strategy = router.get("routing_strategy", "simple-shuffle")
    if strategy not in ROUTING_STRATEGIES:
        errors.append("litellm_routing_strategy: %r is not one of %s" % (strategy, ", ".join(ROUTING_STRATEGIES)))
    for key in ROUTER_INT_KEYS:
        value = router.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            errors.append("litellm_%s must be an integer >= 0, got %r" % (key, value))
    timeout = router.get("timeout")
    if timeout is not None and (not _number(timeout) or timeout <= 0):
        errors.append("litellm_timeout must be a number of seconds > 0, got %r" % (timeout,))
    errors.extend(validate_clients(data.get("clients") or [], names, settings))
    budget = data.get("budget") or {}
    if budget.get("max_budget") is not None:
        if not _number(budget["max_budget"]) or budget["max_budget"] <= 0:
            errors.append("litellm_max_budget must be a number of USD > 0, got %r" % (budget["max_budget"],))
        unpriced = sorted(n for n in names if not priced(settings.get(n)))
        if unpriced:
            errors.append("litellm_max_budget: %s has no price in litellm_model_settings, so its spend would count as "
                          "0 and the budget would never be reached" % ", ".join(unpriced))
    duration = budget.get("budget_duration")
    if duration is not None and not valid_duration(duration):
        errors.append("litellm_budget_duration: %r is not a LiteLLM duration (30d, 1mo, 24h, 7d, or %s)"
                      % (duration, "/".join(DURATION_WORDS)))
    return errors


def priced(entry):
    return any(key in (entry or {}) for key in PRICE_KEYS)


def validate_clients(clients, names, settings):
    """litellm_clients: alias, models, limits, and a price on every model a budgeted key may call."""
    errors = []
    aliases = set()
    for index, client in enumerate(clients):
        where = "litellm_clients[%d]" % index
        if not isinstance(client, dict):
            errors.append("%s must be a mapping, got %r" % (where, client))
            continue
        alias = client.get("alias")
        if not isinstance(alias, str) or not alias.strip():
            errors.append("%s: alias is required" % where)
        elif alias in aliases:
            errors.append("%s: alias %s is used twice" % (where, alias))
        aliases.add(alias)
        where = "%s (%s)" % (where, alias)
        models = client.get("models")
        if not isinstance(models, list) or not models:
            errors.append("%s: models must list the groups this key may call (an empty list would allow all)"
                          % where)
            models = []
        for model in models:
            if model not in names:
                errors.append("%s: model %s is not a model group (known: %s)"
                              % (where, model, ", ".join(sorted(names))))
        for key in ("max_budget",):
            if key in client and client[key] is not None and (not _number(client[key]) or client[key] < 0):
                errors.append("%s: %s must be a number >= 0, got %r" % (where, key, client[key]))
        for key in ("tpm_limit", "rpm_limit", "max_parallel_requests"):
            value = client.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                errors.append("%s: %s must be an integer >= 1, got %r" % (where, key, value))
        duration = client.get("budget_duration")
        if duration is not None and not valid_duration(duration):
            errors.append("%s: budget_duration %r is not a LiteLLM duration (30d, 1mo, 24h, 7d, or %s)"
                          % (where, duration, "/".join(DURATION_WORDS)))
        if client.get("max_budget") is not None:
            unpriced = [m for m in models if m in names and not priced(settings.get(m))]
            if unpriced:
                errors.append("%s: has max_budget %s but %s has no price in litellm_model_settings, so its spend "
                              "would stay 0 and the budget would never bind"
                              % (where, client["max_budget"], ", ".join(unpriced)))
    return errors


def _deployment(group, target, dep, order, settings):
    params = {"model": "hosted_vllm/%s" % target, "api_base": "http://%s:%d/v1" % (dep["address"], dep["port"])}
    if dep["api_key"]:
        params["api_key"] = "os.environ/%s" % env_name("VLLM_API_KEY", dep["host"])
    entry = settings.get(target) or {}
    for key in LIMIT_KEYS + TIMEOUT_KEYS:
        if key in entry:
            params[key] = entry[key]
    params["order"] = order
    info = {"id": "%s-%s-%s" % (group, dep["host"], target) if group != target else "%s-%s" % (group, dep["host"])}
    if dep.get("max_model_len"):
        info["max_input_tokens"] = dep["max_model_len"]
    for key in PRICE_KEYS:
        if key in entry:
            info[key] = entry[key]
    return {"model_name": group, "litellm_params": params, "model_info": info}


def _external(group, ext, order, settings):
    params = {"model": ext["model"]}
    if ext.get("api_base"):
        params["api_base"] = ext["api_base"]
    if ext.get("api_key", True):
        params["api_key"] = "os.environ/%s" % env_name("LITELLM_EXTERNAL_API_KEY", ext["name"])
    entry = settings.get(ext["name"]) or {}
    for key in LIMIT_KEYS + TIMEOUT_KEYS:
        if key in entry:
            params[key] = entry[key]
    params["order"] = order
    info = {"id": "%s-external-%s" % (group, ext["name"]) if group != ext["name"] else "external-%s" % group}
    for key in PRICE_KEYS:
        if key in entry:
            info[key] = entry[key]
    return {"model_name": group, "litellm_params": params, "model_info": info}


def model_list(data):
    """The deployments: each group's own (order 1), then its fallback groups' (order 2, 3, ...)."""
    groups = local_groups(data.get("gpu_vms") or [])
    external = {e["name"]: e for e in data.get("external_models") or []}
    settings = data.get("model_settings") or {}
    fallbacks = data.get("fallbacks") or {}
    in_group = data.get("in_group_fallbacks", True)
    entries = []
    for group in list(groups) + [name for name in external if name not in groups]:
        chain = [group] + (list(fallbacks.get(group) or []) if in_group else [])
        for position, target in enumerate(chain):
            order = position + 1
            if target in groups:
                entries.extend(_deployment(group, target, dep, order, settings) for dep in groups[target])
            elif target in external:
                entries.append(_external(group, external[target], order, settings))
    return entries


def vm_deployment_ids(config):
    """The ids (model_info.id) of a config's GPU VM deployments, one per (VM, model), in config order: what the
    gateway's verify probes through the proxy (LiteLLM routes a request whose model is a deployment id to that
    deployment alone): the entries serving their own group through vLLM's API (``hosted_vllm/<group>``). A group's
    in-group fallbacks to other groups' servers are the same servers again, and a provider's model would cost money
    and has no answer on an offline site: neither is listed. (An external model given as ``hosted_vllm/<its own
    name>`` - a vLLM server elsewhere - is listed: one token costs it nothing.)"""
    ids = []
    for entry in config.get("model_list") or []:
        params = entry.get("litellm_params") or {}
        if params.get("model") == "hosted_vllm/%s" % entry.get("model_name"):
            ids.append((entry.get("model_info") or {}).get("id"))
    return [i for i in ids if i]


def build(data):
    """{"config": LiteLLM config dict, "env": {NAME: what it holds}, "groups": [...]}; raises LitellmConfigError."""
    if data.get("topology") is not None:
        gpu_vms, host_errors = gpu_vms_from_topology(data["topology"], data.get("vlan", "inference"))
        data = dict((k, v) for k, v in data.items() if k != "topology")
        data["gpu_vms"] = gpu_vms
    elif data.get("hosts") is not None:
        gpu_vms, host_errors = gpu_vms_from_hosts(data["hosts"], data.get("vlan", "inference"))
        data = dict(data, gpu_vms=gpu_vms)
    else:
        host_errors = []
    errors = host_errors + validate(data)
    if errors:
        raise LitellmConfigError(errors)
    router = dict(data.get("router") or {})
    router_settings = {"routing_strategy": router.get("routing_strategy", "simple-shuffle")}
    for key in ROUTER_INT_KEYS + ("timeout",):
        if router.get(key) is not None:
            router_settings[key] = router[key]
    fallbacks = data.get("fallbacks") or {}
    if fallbacks:
        router_settings["fallbacks"] = [{group: list(targets)} for group, targets in fallbacks.items()]
    window = data.get("context_window_fallbacks") or {}
    if window:
        router_settings["context_window_fallbacks"] = [{group: list(targets)} for group, targets in window.items()]
    env = {"LITELLM_MASTER_KEY": "master key (admin API, generated per install)",
           "LITELLM_SALT_KEY": "salt key (encrypts credentials stored in the database)"}
    if data.get("database", True):
        env["DATABASE_URL"] = "PostgreSQL connection string of the gateway's database"
    if data.get("redis"):
        router_settings.update({"redis_host": "os.environ/REDIS_HOST", "redis_port": "os.environ/REDIS_PORT",
                                "redis_password": "os.environ/REDIS_PASSWORD"})
        env.update({"REDIS_HOST": "Redis host (shared rpm/tpm state)", "REDIS_PORT": "Redis port",
                    "REDIS_PASSWORD": "Redis password"})
    # The database URL is not in the config: LiteLLM reads DATABASE_URL from the environment (secrets file).
    general = {"master_key": "os.environ/LITELLM_MASTER_KEY", "store_model_in_db": False}
    health = data.get("health_checks") or {}
    if health.get("enabled"):
        general["background_health_checks"] = True
        general["health_check_interval"] = int(health.get("interval", 300))
        if health.get("routing"):
            general["enable_health_check_routing"] = True
    litellm_settings = {"drop_params": True, "set_verbose": False}
    budget = data.get("budget") or {}
    if budget.get("max_budget") is not None:
        litellm_settings["max_budget"] = budget["max_budget"]
        if budget.get("budget_duration"):
            litellm_settings["budget_duration"] = budget["budget_duration"]
    callbacks = []
    if data.get("prometheus"):
        callbacks.append("prometheus")
        litellm_settings["require_auth_for_metrics_endpoint"] = bool(data.get("metrics_require_auth", False))
    if data.get("langfuse"):
        callbacks.append("langfuse_otel")
        env.update({"LANGFUSE_PUBLIC_KEY": "Langfuse project public key", "LANGFUSE_SECRET_KEY":
                    "Langfuse project secret key", "LANGFUSE_OTEL_HOST": "Langfuse URL"})
    if callbacks:
        litellm_settings["callbacks"] = callbacks
    entries = model_list(data)
    # LiteLLM keys its deployments by model_info.id (routing, cooldowns, the verify's probes): two entries with one id
    # (a host and a group whose names join the same way, e.g. group chat on gpu-fast and chat's fallback fast on gpu)
    # would be one deployment to it.
    ids = [entry["model_info"]["id"] for entry in entries]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise LitellmConfigError(["model_info.id %s is given to two deployments (group and host names join to the "
                                  "same id): rename a model group or a GPU VM host" % i for i in twice])
    for vm in data.get("gpu_vms") or []:
        if vm.get("models") and vm.get("api_key", True):
            env[env_name("VLLM_API_KEY", vm["host"])] = "vLLM API key of %s" % vm["host"]
    for ext in data.get("external_models") or []:
        if ext.get("api_key", True):
            env[env_name("LITELLM_EXTERNAL_API_KEY", ext["name"])] = "API key of external model %s" % ext["name"]
    groups = sorted({entry["model_name"] for entry in entries})
    config = {"model_list": entries, "router_settings": router_settings, "litellm_settings": litellm_settings,
              "general_settings": general}
    api_keys = [vm["host"] for vm in data.get("gpu_vms") or [] if vm.get("models") and vm.get("api_key", True)]
    # The environment variable each secret goes to, so the role's env file uses the names config.yaml refers to.
    key_env = {"vllm": dict((host, env_name("VLLM_API_KEY", host)) for host in api_keys),
               "external": dict((ext["name"], env_name("LITELLM_EXTERNAL_API_KEY", ext["name"]))
                                for ext in data.get("external_models") or [] if ext.get("api_key", True))}
    return {"config": config, "env": env, "groups": groups, "vm_deployments": vm_deployment_ids(config),
            "vllm_key_hosts": api_keys, "key_env": key_env}


def compose(settings):
    """The gateway's compose project (no top-level ``name``: docker-compose 1.29 refuses it).

    ``settings``: image, postgres_image, redis_image, dir, bind_address, port, workers, log_level, env (dict,
    non-secret), primary (bool: this host runs PostgreSQL, and Redis when ``redis``), redis (bool), database
    (bool, default true: false runs the proxy without PostgreSQL - no virtual keys, budgets or spend),
    shared_address (the primary's address other gateways reach its PostgreSQL/Redis on; '' when alone),
    restart. Secrets stay in files under ``<dir>/secrets`` (env files, redis.conf), never in this dict.
    """
    base = settings["dir"].rstrip("/")
    restart = settings.get("restart", "unless-stopped")
    logging = {"driver": "json-file", "options": {"max-size": "50m", "max-file": "5"}}
    shared = settings.get("shared_address") or ""
    services = {}
    environment = {"LITELLM_LOG": settings.get("log_level", "ERROR"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                   "PRISMA_OFFLINE_MODE": "true", "LITELLM_MODE": "PRODUCTION"}
    environment.update({k: str(v) for k, v in (settings.get("env") or {}).items()})
    litellm = {
        "image": settings["image"],
        "restart": restart,
        "command": ["--config", "/app/config.yaml", "--host", "0.0.0.0", "--port", "4000",
                    "--num_workers", str(int(settings.get("workers", 1)))],
        "env_file": ["%s/secrets/litellm.env" % base],
        "environment": environment,
        "ports": ["%s:%d:4000" % (settings.get("bind_address", "127.0.0.1"), int(settings.get("port", 4000)))],
        "volumes": ["%s/config.yaml:/app/config.yaml:ro" % base],
        "healthcheck": {"test": ["CMD", "python3", "-c", "import http.client as h; c = h.HTTPConnection("
                                 "'127.0.0.1', 4000, timeout=5); c.request('GET', '/health/liveliness'); "
                                 "raise SystemExit(c.getresponse().status != 200)"],
                        "interval": "15s", "timeout": "10s", "retries": 5, "start_period": "60s"},
        "logging": logging,
    }
    if settings.get("primary", True) and settings.get("database", True):
        postgres = {
            "image": settings["postgres_image"],
            "restart": restart,
            "env_file": ["%s/secrets/postgres.env" % base],
            "volumes": ["%s/postgres:/var/lib/postgresql/data" % base],
            "healthcheck": {"test": ["CMD-SHELL", "pg_isready -U litellm -d litellm"], "interval": "10s",
                            "timeout": "5s", "retries": 10},
            "logging": logging,
        }
        if shared:
            postgres["ports"] = ["%s:5432:5432" % shared]
        services["postgres"] = postgres
        litellm["depends_on"] = {"postgres": {"condition": "service_healthy"}}
    if settings.get("primary", True) and settings.get("redis"):
        redis = {
            "image": settings["redis_image"],
            "restart": restart,
            "command": ["redis-server", "/usr/local/etc/redis/redis.conf"],
            "volumes": ["%s/secrets/redis.conf:/usr/local/etc/redis/redis.conf:ro" % base],
            "healthcheck": {"test": ["CMD-SHELL", "redis-cli -a \"$$(sed -n 's/^requirepass //p' "
                                     "/usr/local/etc/redis/redis.conf)\" --no-auth-warning ping | grep PONG"],
                            "interval": "10s", "timeout": "5s", "retries": 10},
            "logging": logging,
        }
        if shared:
            redis["ports"] = ["%s:6379:6379" % shared]
        services["redis"] = redis
        litellm.setdefault("depends_on", {})["redis"] = {"condition": "service_healthy"}
    services["litellm"] = litellm
    return {"services": services}
