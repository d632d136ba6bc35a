"""litellm_config (the gateway's config.yaml and compose project) and litellm_keys (key reconciliation)."""

import json

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import litellm_config, litellm_keys

PRICE = {"input_cost_per_token": 1e-7, "output_cost_per_token": 2e-7}


def hosts():
    return {
        "gpu-a": {"interfaces": [{"vlan": "mgmt", "address": "10.0.10.20"},
                                 {"vlan": "inference", "address": "10.0.20.20"}],
                  "models": [{"name": "fast", "port": 8001, "max_model_len": 4096},
                             {"name": "balanced", "port": 8002, "max_model_len": 8192}]},
        "gpu-b": {"interfaces": [{"vlan": "inference", "address": "10.0.20.21"}],
                  "models": [{"name": "fast", "port": 8001}, {"name": "reasoning", "port": 8003}]},
    }


def data(**extra):
    base = {"hosts": hosts(), "vlan": "inference", "fallbacks": {"reasoning": ["balanced", "fast"]},
            "model_settings": {"fast": PRICE, "balanced": PRICE, "reasoning": PRICE}}
    base.update(extra)
    return base


def test_one_deployment_per_vm_and_model_with_fallbacks_inside_the_group():
    built = litellm_config.build(data())
    entries = [(e["model_name"], e["litellm_params"]["api_base"], e["litellm_params"]["order"])
               for e in built["config"]["model_list"]]
    assert entries == [
        ("fast", "http://10.0.20.20:8001/v1", 1), ("fast", "http://10.0.20.21:8001/v1", 1),
        ("balanced", "http://10.0.20.20:8002/v1", 1),
        ("reasoning", "http://10.0.20.21:8003/v1", 1), ("reasoning", "http://10.0.20.20:8002/v1", 2),
        ("reasoning", "http://10.0.20.20:8001/v1", 3), ("reasoning", "http://10.0.20.21:8001/v1", 3)]
    assert built["groups"] == ["balanced", "fast", "reasoning"]
    assert built["vllm_key_hosts"] == ["gpu-a", "gpu-b"]
    # the env names the role writes the keys to are the ones config.yaml refers to
    assert built["key_env"]["vllm"] == {"gpu-a": "VLLM_API_KEY_GPU_A", "gpu-b": "VLLM_API_KEY_GPU_B"}
    refs = {e["litellm_params"]["api_key"] for e in built["config"]["model_list"]}
    assert refs == {"os.environ/" + name for name in built["key_env"]["vllm"].values()}
    assert built["config"]["router_settings"]["fallbacks"] == [{"reasoning": ["balanced", "fast"]}]
    assert "sk-" not in json.dumps(built["config"])


def test_without_in_group_fallbacks_each_group_has_only_its_own_deployments():
    built = litellm_config.build(data(in_group_fallbacks=False))
    assert [e["model_name"] for e in built["config"]["model_list"]] == ["fast", "fast", "balanced", "reasoning"]


def test_prices_limits_and_context_length_go_on_every_deployment_of_the_group():
    built = litellm_config.build(data(model_settings={"fast": dict(PRICE, rpm=600, tpm=100000), "balanced": PRICE,
                                                      "reasoning": {"input_cost_per_second": 0.001}}))
    fast = built["config"]["model_list"][0]
    assert fast["litellm_params"]["rpm"] == 600 and fast["litellm_params"]["tpm"] == 100000
    assert fast["model_info"]["max_input_tokens"] == 4096 and fast["model_info"]["input_cost_per_token"] == 1e-7
    reasoning = [e for e in built["config"]["model_list"] if e["model_name"] == "reasoning"]
    assert reasoning[0]["model_info"]["input_cost_per_second"] == 0.001
    # a fallback deployment costs what the model that answers costs
    assert reasoning[1]["model_info"]["input_cost_per_token"] == 1e-7


def test_external_model_as_last_fallback_takes_its_key_from_the_environment():
    built = litellm_config.build(data(external_models=[{"name": "claude", "model": "anthropic/claude-sonnet-4-5"}],
                                      fallbacks={"reasoning": ["fast", "claude"]}))
    last = [e for e in built["config"]["model_list"] if e["model_name"] == "reasoning"][-1]
    assert last["litellm_params"] == {"model": "anthropic/claude-sonnet-4-5", "order": 3,
                                      "api_key": "os.environ/LITELLM_EXTERNAL_API_KEY_CLAUDE"}
    assert "LITELLM_EXTERNAL_API_KEY_CLAUDE" in built["env"]
    assert built["key_env"]["external"] == {"claude": "LITELLM_EXTERNAL_API_KEY_CLAUDE"}


def test_an_external_model_without_a_key_refers_to_no_environment_variable():
    built = litellm_config.build(data(external_models=[{"name": "local", "model": "openai/x", "api_base":
                                                        "http://10.0.30.5:8000/v1", "api_key": False}],
                                      fallbacks={"reasoning": ["local"]}))
    last = [e for e in built["config"]["model_list"] if e["model_name"] == "reasoning"][-1]
    assert "api_key" not in last["litellm_params"] and built["key_env"]["external"] == {}


def test_every_problem_is_reported_with_its_variable():
    bad = data(fallbacks={"reasoning": ["reasoning", "gpt-5"]}, model_settings={"fast": {"input_cost_per_token": -1,
                                                                                         "foo": 1}},
               router={"routing_strategy": "round-robin", "num_retries": -1},
               clients=[{"alias": "a", "models": ["fast", "nope"], "max_budget": 5, "budget_duration": "1 month"},
                        {"alias": "a", "models": []}])
    with pytest.raises(litellm_config.LitellmConfigError) as info:
        litellm_config.build(bad)
    errors = "\n".join(info.value.errors)
    for fragment in ("litellm_fallbacks.reasoning falls back to itself",
                     "litellm_fallbacks.reasoning: fallback gpt-5 is not a model group",
                     "litellm_model_settings.fast.input_cost_per_token must be a number >= 0",
                     "litellm_model_settings.fast: unknown key foo",
                     "litellm_routing_strategy: 'round-robin' is not one of",
                     "litellm_num_retries must be an integer >= 0",
                     "litellm_clients[0] (a): model nope is not a model group",
                     "budget_duration '1 month' is not a LiteLLM duration",
                     "litellm_clients[1]: alias a is used twice",
                     "models must list the groups"):
        assert fragment in errors, fragment


def test_a_budget_on_an_unpriced_model_is_refused():
    with pytest.raises(litellm_config.LitellmConfigError) as info:
        litellm_config.build(data(model_settings={}, clients=[{"alias": "web", "models": ["fast"], "max_budget": 10}]))
    assert "has max_budget 10 but fast has no price" in info.value.errors[0]


def test_a_vm_bound_to_localhost_or_without_inference_address_is_refused():
    vms = hosts()
    vms["gpu-a"]["bind_address"] = "127.0.0.1"
    del vms["gpu-b"]["interfaces"]
    with pytest.raises(litellm_config.LitellmConfigError) as info:
        litellm_config.build(data(hosts=vms))
    errors = "\n".join(info.value.errors)
    assert "vllm_bind_address of gpu-a is 127.0.0.1, but the gateway reaches vLLM on 10.0.20.20" in errors
    assert "gpu_vms host gpu-b serves fast, reasoning but has no address on the inference VLAN" in errors


@pytest.mark.parametrize("value,ok", [("30d", True), ("1mo", True), ("monthly", True), ("24h", True),
                                      ("month", False), ("0d", False), ("30 d", False), (30, False)])
def test_budget_durations(value, ok):
    assert litellm_config.valid_duration(value) is ok


def test_compose_single_gateway_keeps_secrets_in_files_and_ports_on_the_bind_address():
    project = litellm_config.compose({"image": "ghcr.io/berriai/litellm:main-v1.108.7", "postgres_image": "pg:17",
                                      "redis_image": "redis:7", "dir": "/opt/llm-gateway", "workers": 2})
    assert set(project["services"]) == {"postgres", "litellm"}
    litellm = project["services"]["litellm"]
    assert litellm["ports"] == ["127.0.0.1:4000:4000"] and "--num_workers" in litellm["command"]
    assert litellm["env_file"] == ["/opt/llm-gateway/secrets/litellm.env"]
    assert litellm["environment"]["PRISMA_OFFLINE_MODE"] == "true"
    assert "ports" not in project["services"]["postgres"]
    assert litellm["depends_on"] == {"postgres": {"condition": "service_healthy"}}


def test_compose_several_gateways_share_postgres_and_redis_on_the_first():
    settings = {"image": "l:1", "postgres_image": "pg:17", "redis_image": "redis:7", "dir": "/opt/gw",
                "redis": True, "shared_address": "10.0.10.12"}
    first = litellm_config.compose(dict(settings, primary=True))
    assert first["services"]["postgres"]["ports"] == ["10.0.10.12:5432:5432"]
    assert first["services"]["redis"]["ports"] == ["10.0.10.12:6379:6379"]
    other = litellm_config.compose(dict(settings, primary=False))
    assert set(other["services"]) == {"litellm"} and "depends_on" not in other["services"]["litellm"]


def test_without_a_database_there_is_no_postgres_and_no_database_url():
    settings = {"image": "l:1", "postgres_image": "pg:17", "redis_image": "redis:7", "dir": "/opt/gw"}
    alone = litellm_config.compose(dict(settings, database=False))
    assert set(alone["services"]) == {"litellm"} and "depends_on" not in alone["services"]["litellm"]
    shared = litellm_config.compose(dict(settings, database=False, redis=True, shared_address="10.0.10.12"))
    assert set(shared["services"]) == {"redis", "litellm"}
    assert shared["services"]["litellm"]["depends_on"] == {"redis": {"condition": "service_healthy"}}
    assert "DATABASE_URL" in litellm_config.build(data())["env"]
    assert "DATABASE_URL" not in litellm_config.build(data(database=False))["env"]


def test_client_keys_without_a_database_are_refused_naming_both_variables():
    clients = [{"alias": "web", "models": ["fast"]}]
    problems = litellm_config.check_settings({"litellm_database": False, "litellm_manage_keys": True,
                                              "litellm_clients": clients})
    assert len(problems) == 1
    assert problems[0].startswith("litellm_manage_keys: client keys (litellm_clients: web) are stored in the "
                                  "gateway's database, and litellm_database is false")
    assert litellm_config.check_settings({"litellm_database": False, "litellm_manage_keys": False,
                                          "litellm_clients": clients}) == []
    assert litellm_config.check_settings({"litellm_database": "no"}) == [
        "litellm_database: 'no' is not a boolean (true or false)"]


# ---------------------------------------------------------------- litellm_keys

STORED = {"token": "abc", "key_alias": "web", "models": ["fast"], "max_budget": 10.0, "budget_duration": "30d",
          "tpm_limit": 50000, "rpm_limit": 100, "max_parallel_requests": 10, "metadata": {"team": "web", "x": 1}}


def test_plan_create_update_delete_none():
    wanted = {"models": ["fast"], "max_budget": 10, "rpm_limit": 100, "metadata": {"team": "web"}}
    assert litellm_keys.plan(None, wanted, "present")[0] == "create"
    assert litellm_keys.plan(STORED, wanted, "present") == ("none", {})
    assert litellm_keys.plan(STORED, dict(wanted, rpm_limit=120), "present") == ("update", {"rpm_limit": (100, 120)})
    assert litellm_keys.plan(STORED, dict(wanted, models=["fast", "balanced"]), "present")[0] == "update"
    assert litellm_keys.plan(STORED, {}, "absent") == ("delete", {})
    assert litellm_keys.plan(None, {}, "absent") == ("none", {})


def test_api_errors_carry_litellms_message():
    api = litellm_keys.KeyApi(lambda m, p, b: (401, '{"error": {"message": "Authentication Error, bad token"}}'))
    with pytest.raises(litellm_keys.LitellmApiError) as info:
        api.find("web")
    assert "GET /key/list answered 401: Authentication Error, bad token" in str(info.value)
    assert litellm_keys.error_message('{"detail": "Not Found"}') == "Not Found"


def test_two_keys_with_one_alias_is_an_error():
    body = json.dumps({"keys": [dict(STORED), dict(STORED, token="def")]})
    api = litellm_keys.KeyApi(lambda m, p, b: (200, body))
    with pytest.raises(litellm_keys.LitellmApiError):
        api.find("web")


def test_the_gateways_verify_probes_each_vm_deployment_once_and_no_external_model():
    """In-group fallbacks repeat other groups' servers and an external model would call its provider: the ids
    listed are the (VM, model) deployments, each once."""
    built = litellm_config.build(data(external_models=[{"name": "claude", "model": "anthropic/claude-sonnet-4-5"}],
                                      fallbacks={"reasoning": ["fast", "claude"]}))
    entries = built["config"]["model_list"]
    assert len(entries) > 4  # the fallbacks and the external model are there
    assert sorted(built["vm_deployments"]) == ["balanced-gpu-a", "fast-gpu-a", "fast-gpu-b", "reasoning-gpu-b"]
    by_id = {e["model_info"]["id"]: e for e in entries}
    assert sorted(by_id[i]["litellm_params"]["api_base"] for i in built["vm_deployments"]) == [
        "http://10.0.20.20:8001/v1", "http://10.0.20.20:8002/v1", "http://10.0.20.21:8001/v1",
        "http://10.0.20.21:8003/v1"]


def test_two_deployments_with_one_id_are_refused():
    """chat on host gpu-fast is chat-gpu-fast; chat's in-group fallback to fast on host gpu is chat-gpu-fast too."""
    hosts = {"gpu-fast": {"interfaces": [{"vlan": "inference", "address": "10.0.20.20"}],
                          "models": [{"name": "chat", "port": 8001}]},
             "gpu": {"interfaces": [{"vlan": "inference", "address": "10.0.20.21"}],
                     "models": [{"name": "fast", "port": 8001}]}}
    with pytest.raises(litellm_config.LitellmConfigError) as err:
        litellm_config.build({"hosts": hosts, "vlan": "inference", "fallbacks": {"chat": ["fast"]}})
    assert any("model_info.id chat-gpu-fast is given to two deployments" in e for e in err.value.errors)


# -- issue 20: the role's own variables, checked before anything is rendered --------------------------------
ROLE = {"litellm_bind_address": "127.0.0.1", "litellm_port": 4000, "litellm_workers": 3, "litellm_num_retries": 2,
        "litellm_timeout": 600, "litellm_allowed_fails": 0, "litellm_cooldown_time": 30, "litellm_retry_after": 0,
        "litellm_health_check_interval": 60, "litellm_readiness_timeout": 300, "litellm_log_level": "ERROR",
        "litellm_extra_env": {}, "litellm_dir": "/opt/llm-gateway"}


def test_good_role_settings_and_digit_strings_pass():
    assert litellm_config.check_settings(ROLE) == []
    assert litellm_config.check_settings(dict(ROLE, litellm_port="8001", litellm_workers="4", litellm_timeout="600",
                                              litellm_bind_address="::1")) == []


@pytest.mark.parametrize("changes, fragment", [
    ({"litellm_bind_address": "gateway.lan"}, "litellm_bind_address: 'gateway.lan' is not an IP address"),
    ({"litellm_bind_address": ""}, "litellm_bind_address: '' is not an IP address"),
    ({"litellm_port": 70000}, "litellm_port: 70000 is not a TCP port"),
    ({"litellm_port": "http"}, "litellm_port: 'http' is not a TCP port"),
    ({"litellm_port": 0}, "litellm_port: 0 is not a TCP port"),
    ({"litellm_workers": 0}, "litellm_workers: 0 is not a whole number >= 1"),
    ({"litellm_workers": "many"}, "litellm_workers: 'many'"),
    ({"litellm_timeout": "10m"}, "litellm_timeout: '10m' is not a whole number >= 1"),
    ({"litellm_health_check_interval": "1m"}, "litellm_health_check_interval: '1m'"),
    ({"litellm_log_level": "loud"}, "litellm_log_level: 'loud' is not one of"),
    ({"litellm_extra_env": {"1X": "a"}}, "litellm_extra_env: '1X' is not an environment variable name"),
    ({"litellm_dir": "opt/gw"}, "litellm_dir: 'opt/gw' is not an absolute path"),
    ({"litellm_verify_models": "yes"}, "litellm_verify_models: 'yes' is not a boolean"),
    ({"litellm_verify_timeout": 0}, "litellm_verify_timeout: 0 is not a whole number >= 1"),
])
def test_bad_role_settings_are_named(changes, fragment):
    problems = litellm_config.check_settings(dict(ROLE, **changes))
    assert any(fragment in p for p in problems), problems


def test_a_vllm_port_given_as_digits_is_routed_to_that_port():
    given = hosts()
    given["gpu-b"]["models"] = [{"name": "fast", "port": "8001"},
                                {"name": "reasoning", "port": "8003", "max_model_len": "8192"}]
    built = litellm_config.build(data(hosts=given))
    bases = [e["litellm_params"]["api_base"] for e in built["config"]["model_list"]
             if e["model_info"]["id"] == "reasoning-gpu-b"]
    assert bases == ["http://10.0.20.21:8003/v1"]
    info = [e["model_info"] for e in built["config"]["model_list"] if e["model_info"]["id"] == "reasoning-gpu-b"]
    assert info[0]["max_input_tokens"] == 8192


def test_a_vllm_max_model_len_that_is_not_a_number_is_named():
    given = hosts()
    given["gpu-b"]["models"][1]["max_model_len"] = "lots"
    expected = r"vllm_models\[1\] of gpu-b \(reasoning\): max_model_len 'lots'"
    with pytest.raises(litellm_config.LitellmConfigError, match=expected):
        litellm_config.build(data(hosts=given))


def test_the_gateway_reads_the_gpu_vms_from_the_topology():
    """Issue #21: the model list comes from the topology's vLLM endpoints (where vLLM listens, its key setting) and
    the VMs' vllm_models, not from the VMs' hostvars."""
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology

    vlans = {"inference": {"id": 20, "cidr": "10.0.20.0/24", "gateway": "10.0.20.1"}}
    model = {"groups": {"all": ["gpu-a", "gpu-b", "gw"], "gpu_vms": ["gpu-a", "gpu-b"], "llm_gateways": ["gw"]},
             "hosts": {"gpu-a": {"llmstack_vlans": vlans,
                                 "llmstack_interfaces": [{"vlan": "inference", "address": "10.0.20.20"}],
                                 "vllm_models": [{"name": "fast", "model": "m1", "port": 8001, "max_model_len": 4096}]},
                       "gpu-b": {"llmstack_vlans": vlans,
                                 "llmstack_interfaces": [{"vlan": "inference", "address": "10.0.20.21"}],
                                 "vllm_models": [{"name": "fast", "model": "m1", "port": "8002"}]},
                       "gw": {"llmstack_vlans": vlans,
                              "llmstack_interfaces": [{"vlan": "inference", "address": "10.0.20.12"}]}}}
    exporters = {"monitoring_bind_address": "10.0.20.20", "monitoring_dcgm_exporter_port": 9400}
    settings = {"gpu-a": dict(exporters, vllm_bind_address="10.0.20.20", vllm_dir="/srv/a"),
                "gpu-b": dict(exporters, vllm_bind_address="0.0.0.0", vllm_api_key_enabled=False),
                "gw": {"litellm_bind_address": "127.0.0.1", "litellm_port": 4000}}
    topo, problems = topology.build(model, settings)
    assert problems == []
    assert topo["hosts"]["gpu-a"]["dirs"] == {"vllm": "/srv/a"}
    gpu_vms, errors = litellm_config.gpu_vms_from_topology(topo)
    assert errors == []
    assert gpu_vms == [
        {"host": "gpu-a", "address": "10.0.20.20", "api_key": True,
         "models": [{"name": "fast", "port": 8001, "model": "m1", "max_model_len": 4096}]},
        {"host": "gpu-b", "address": "10.0.20.21", "api_key": False,
         "models": [{"name": "fast", "port": 8002, "model": "m1", "max_model_len": None}]}]


def test_a_per_deployment_timeout_and_the_proxy_wide_budget_are_rendered():
    """Seed 001: the main deployment waits 600 s while the router's timeout is 60; seed 000: max_budget 100 a month."""
    built = litellm_config.build(data(model_settings={"fast": dict(PRICE, timeout=600, stream_timeout=120),
                                                      "balanced": PRICE, "reasoning": PRICE},
                                      budget={"max_budget": 100, "budget_duration": "monthly"}))
    fast = [e for e in built["config"]["model_list"] if e["model_name"] == "fast"]
    assert {(e["litellm_params"]["timeout"], e["litellm_params"]["stream_timeout"]) for e in fast} == {(600, 120)}
    reasoning = [e for e in built["config"]["model_list"] if e["model_name"] == "reasoning"]
    assert "timeout" not in reasoning[0]["litellm_params"]
    settings = built["config"]["litellm_settings"]
    assert (settings["max_budget"], settings["budget_duration"]) == (100, "monthly")
    assert "max_budget" not in litellm_config.build(data())["config"]["litellm_settings"]


@pytest.mark.parametrize("extra, fragment", [
    ({"model_settings": {"fast": dict(PRICE, timeout=0), "balanced": PRICE, "reasoning": PRICE}},
     "litellm_model_settings.fast.timeout must be a number of seconds > 0"),
    ({"budget": {"max_budget": -5}}, "litellm_max_budget must be a number of USD > 0"),
    ({"budget": {"max_budget": 100}, "model_settings": {"fast": PRICE}},
     "litellm_max_budget: balanced, reasoning has no price"),
    ({"budget": {"max_budget": 100, "budget_duration": "fortnightly"}}, "litellm_budget_duration: 'fortnightly'"),
])
def test_bad_timeouts_and_budgets_are_named(extra, fragment):
    with pytest.raises(litellm_config.LitellmConfigError) as info:
        litellm_config.build(data(**extra))
    assert any(fragment in e for e in info.value.errors), info.value.errors
