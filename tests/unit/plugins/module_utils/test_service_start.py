from ansible_collections.pvegpu.llmstack.plugins.module_utils.service_start import services_to_start

MONITORING = ["node-exporter", "prometheus", "alertmanager", "grafana"]


def test_nothing_listed_starts_everything():
    assert services_to_start("monitoring", MONITORING, []) == {"start": MONITORING, "skipped": [], "unknown": [],
                                                               "problems": []}


def test_one_service_or_the_whole_project_or_another_roles_entry():
    plan = services_to_start("monitoring", MONITORING, ["monitoring/grafana", "langfuse", "litellm/postgres"])
    assert plan == {"start": ["node-exporter", "prometheus", "alertmanager"], "skipped": ["grafana"], "unknown": [],
                    "problems": []}
    whole = services_to_start("langfuse", ["postgres", "langfuse-web"], ["monitoring/grafana", "langfuse"])
    assert whole == {"start": [], "skipped": ["postgres", "langfuse-web"], "unknown": [], "problems": []}


def test_a_service_this_host_does_not_run_is_reported_not_refused():
    gpu_vm = services_to_start("monitoring", ["dcgm-exporter", "node-exporter"], ["monitoring/grafana"])
    assert gpu_vm == {"start": ["dcgm-exporter", "node-exporter"], "skipped": [], "unknown": ["grafana"],
                      "problems": []}


def test_bad_entries_name_the_variable():
    plan = services_to_start("monitoring", MONITORING, ["Monitoring", 3, "a/b/c"])
    assert plan["start"] == MONITORING
    assert plan["problems"] == [
        "llmstack_services_not_started[0]: 'Monitoring' is not <role> or <role>/<service> (e.g. langfuse, "
        "monitoring/grafana)",
        "llmstack_services_not_started[1]: 3 is not <role> or <role>/<service> (e.g. langfuse, monitoring/grafana)",
        "llmstack_services_not_started[2]: 'a/b/c' is not <role> or <role>/<service> (e.g. langfuse, "
        "monitoring/grafana)"]
    assert services_to_start("vllm", ["vllm-fast"], "vllm")["problems"] == [
        "llmstack_services_not_started: 'vllm' is not a list of <role> or <role>/<service> entries"]


# -- probe_failures: the messages a role prints for its readiness probes (never the registered results) ----------
from ansible_collections.pvegpu.llmstack.plugins.module_utils.service_start import probe_failures  # noqa: E402


def test_only_probes_without_http_200_are_named_with_the_servers_own_error():
    results = [
        {"item": {"key": "fast", "value": 8001}, "status": 200, "json": {"choices": []}},
        {"item": {"key": "balanced", "value": 8002}, "status": 500,
         "json": {"error": {"message": "EngineDeadError", "type": "InternalServerError"}}},
        {"item": {"key": "reasoning", "value": 8003}, "skipped": True},
        {"item": {"key": "embed", "value": 8004}, "status": -1, "msg": "Status code was -1: Connection refused"},
    ]
    assert probe_failures(results, "{key} on 10.0.20.20:{value}", "no token within 300 s") == [
        "balanced on 10.0.20.20:8002: no token within 300 s: HTTP 500 EngineDeadError",
        "embed on 10.0.20.20:8004: no token within 300 s: HTTP - Status code was -1: Connection refused"]


def test_a_plain_item_litellms_error_shapes_and_a_long_error_is_cut():
    results = [{"item": "fast", "status": 400, "json": {"error": {"message": "x" * 400}}},
               {"item": "balanced", "status": 404, "json": {"detail": "no such group"}},
               {"item": "reasoning", "status": 401, "json": {"error": "Authentication Error"}},
               {"item": {"name": "odd"}, "status": 503}]
    failures = probe_failures(results, "{item}", "no token")
    assert failures[0] == "fast: no token: HTTP 400 " + "x" * 297 + "..."
    assert failures[1:3] == ["balanced: no token: HTTP 404 no such group",
                             "reasoning: no token: HTTP 401 Authentication Error"]
    # a label that does not fit the item still names it
    assert failures[3] == "{'name': 'odd'}: no token: HTTP 503"


def test_nothing_failed_nothing_said():
    assert probe_failures([], "{item}", "x") == []
    assert probe_failures([{"item": "a", "status": 200}], "{item}", "x") == []
