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
