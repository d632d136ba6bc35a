"""network_policy: the host's nftables ruleset and the site's reachability matrix from the topology. The rulesets are
also loaded by the real nft in an empty network namespace (when this runs as root with nft and unshare), and
tests/integration/test_network_policy.py sends packets through them."""

import os
import shutil
import subprocess

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import network_policy

VLANS = {"mgmt": {"cidr": "10.0.10.0/24"}, "inference": {"cidr": "10.0.20.0/24"}, "apps": {"cidr": "10.0.30.0/24"}}


def topology():
    hosts = {
        "gw": {"groups": ["llm_gateways"], "addresses": {"mgmt": "10.0.10.12", "inference": "10.0.20.12",
                                                         "apps": "10.0.30.12"}},
        "gpu": {"groups": ["gpu_vms"], "addresses": {"mgmt": "10.0.10.20", "inference": "10.0.20.20"}},
        "obs": {"groups": ["observability"], "addresses": {"mgmt": "10.0.10.14"}},
        "ops": {"groups": ["admins"], "addresses": {"mgmt": "10.0.10.99"}},
        "client": {"groups": ["llm_clients"], "addresses": {"apps": "10.0.30.11"}},
    }
    endpoints = [
        {"role": "vllm", "service": "vllm-fast", "host": "gpu", "address": "10.0.20.20", "port": 8001,
         "consumers": ["gw", "obs"], "sources": ["10.0.20.12", "10.0.10.14"]},
        {"role": "tls_proxy", "service": "https", "host": "gw", "address": "10.0.30.12", "port": 443,
         "consumers": ["client"], "sources": ["10.0.30.11"]},
        {"role": "litellm", "service": "litellm", "host": "gw", "address": "127.0.0.1", "port": 4000,
         "consumers": ["gw"], "sources": ["127.0.0.1"]},
        {"role": "monitoring", "service": "prometheus", "host": "obs", "address": "10.0.10.14", "port": 9090,
         "consumers": ["obs"], "sources": ["10.0.10.14"]},
        {"role": "monitoring", "service": "node-exporter", "host": "gpu", "address": "0.0.0.0", "port": 9100,
         "consumers": ["obs"], "sources": ["10.0.10.14", "fd00:10::14"]},
    ]
    return {"hosts": hosts, "endpoints": endpoints}


SETTINGS = {"controller_addresses": ["10.0.10.5"], "vlans": VLANS, "admin_groups": ["admins"]}


def cell(rows, source, service):
    return [r["allowed"] for r in rows if r["source"] == source and r["service"] == service]


def test_each_endpoint_is_open_to_its_consumers_and_the_admins_only_for_what_people_open():
    rows = network_policy.matrix(topology(), SETTINGS)
    assert cell(rows, "client", "vllm-fast") == [False]
    assert cell(rows, "gw", "vllm-fast") == [True] and cell(rows, "obs", "vllm-fast") == [True]
    assert cell(rows, "client", "https") == [True] and cell(rows, "gpu", "https") == [False]
    # Prometheus: the observability host itself and the admin hosts, not the other management hosts.
    assert [cell(rows, h, "prometheus") for h in ("obs", "ops", "gw", "gpu")] == [[True], [True], [False], [False]]
    # An exporter is not a page people open: not the admin hosts.
    assert cell(rows, "ops", "node-exporter") == [False]
    # Loopback: the host itself only.
    assert [cell(rows, h, "litellm") for h in ("gw", "client")] == [[True], [False]]
    assert len(rows) == 5 * 5


def test_the_ruleset_of_a_gpu_vm():
    ruleset = network_policy.build(topology(), "gpu", SETTINGS)["ruleset"]
    assert ruleset.count("table inet llmstack {") == 1
    assert "policy drop;" in ruleset and "ct state established,related accept" in ruleset
    assert "set vllm_vllm_fast_8001_v4 { type ipv4_addr; flags interval; elements = { 10.0.10.14, 10.0.20.12 } }" \
        in ruleset
    assert ('ip daddr 10.0.20.20 tcp dport 8001 ip saddr @vllm_vllm_fast_8001_v4 counter accept' in ruleset)
    # A port Docker publishes is judged on its original destination after DNAT.
    assert ("ct original ip daddr 10.0.20.20 meta l4proto tcp ct original proto-dst 8001 ip saddr "
            "@vllm_vllm_fast_8001_v4 counter accept") in ruleset
    # Listening on every address: no daddr; the IPv6 consumer gets its own rule.
    assert "tcp dport 9100 ip6 saddr @monitoring_node_exporter_9100_v6 counter accept" in ruleset
    # SSH: the controller, the management VLAN and the admin hosts (inside it: collapsed into the VLAN).
    assert "set controller_v4 { type ipv4_addr; flags interval; elements = { 10.0.10.5 } }" in ruleset
    assert "set ssh_v4 { type ipv4_addr; flags interval; elements = { 10.0.10.0/24 } }" in ruleset
    # Nothing of the other hosts' services.
    assert "443" not in ruleset and "9090" not in ruleset
    assert 'log prefix "llmstack drop in: "' in ruleset


def test_the_hosts_own_containers_reach_only_the_endpoints_it_consumes():
    """Issue #31: Prometheus in a bridge-network container sends to Alertmanager at the host's own address; only lo
    was trusted, so alerts were dropped. Now a container's packets are judged like another consumer host's."""
    ruleset = network_policy.build(topology(), "obs", SETTINGS)["ruleset"]
    assert 'iifname "docker0" jump from_containers' in ruleset and 'iifname "br-*" jump from_containers' in ruleset
    chain = ruleset.split("chain from_containers {")[1].split("}")[0]
    assert "ip daddr 10.0.10.14 tcp dport 9090 counter accept" in chain
    gpu = network_policy.build(topology(), "gpu", SETTINGS)["ruleset"]
    # The GPU VM consumes none of its own endpoints: its containers reach neither the model server nor node exporter.
    assert gpu.split("chain from_containers {")[1].split("}")[0].strip() == ""
    assert gpu.split("chain published_from_containers {")[1].split("}")[0].strip() == ""
    assert 'iifname "veth*"' in network_policy.build(topology(), "obs", dict(
        SETTINGS, container_interfaces=["veth*"]))["ruleset"]
    rows = network_policy.matrix(topology(), SETTINGS)
    assert cell(rows, "obs", "prometheus") == [True] and cell(rows, "gpu", "vllm-fast") == [False]
    assert cell(rows, "gw", "litellm") == [True]     # loopback: the host's own processes


def test_a_udp_port_range_and_the_controllers_api_access():
    topo = topology()
    topo["hosts"]["pve"] = {"groups": ["pve_hosts"], "addresses": {"mgmt": "10.0.10.2"}}
    topo["hosts"]["pve2"] = {"groups": ["pve_hosts"], "addresses": {"mgmt": "10.0.10.3"}}
    topo["endpoints"] += [
        {"role": "pve", "service": "corosync", "host": "pve", "address": "0.0.0.0", "port": 5405, "port_end": 5412,
         "proto": "udp", "consumers": ["pve", "pve2"], "sources": ["10.0.10.2", "10.0.10.3"]},
        {"role": "pve", "service": "pve-api", "host": "pve", "address": "0.0.0.0", "port": 8006, "proto": "tcp",
         "consumers": ["pve2"], "sources": ["10.0.10.3"], "controller": True, "admin": True}]
    ruleset = network_policy.build(topo, "pve", SETTINGS)["ruleset"]
    assert "udp dport 5405-5412 ip saddr @pve_corosync_5405_v4 counter accept" in ruleset
    assert ("set pve_pve_api_8006_v4 { type ipv4_addr; flags interval; elements = { 10.0.10.3, 10.0.10.5, "
            "10.0.10.99 } }") in ruleset
    rows = network_policy.matrix(topo, SETTINGS)
    corosync = [r for r in rows if r["service"] == "corosync" and r["source"] == "pve2"]
    assert [(r["proto"], r["port"], r["port_end"], r["allowed"]) for r in corosync] == [("udp", 5405, 5412, True)]
    assert cell(rows, "client", "pve-api") == [False] and cell(rows, "ops", "pve-api") == [True]
    assert "| corosync (pve, 0.0.0.0:5405-5412/udp) |" in network_policy.matrix_markdown(rows)


def test_bad_settings_name_the_variable_before_anything_is_rendered():
    with pytest.raises(network_policy.NetworkPolicyError) as info:
        network_policy.build(topology(), "gpu", {"controller_addresses": [], "ssh_port": 70000,
                                                 "log_rate": "often", "admin_addresses": ["10.0.10.300"]})
    assert info.value.problems == [
        "network_policy_controller_addresses: give the address(es) Ansible connects from (a list of addresses or "
        "CIDRs); without it the policy would cut the controller off",
        "network_policy_admin_addresses[0]: '10.0.10.300' is not an address or CIDR",
        "network_policy_ssh_port: 70000 is not a TCP port (1-65535)",
        "network_policy_log_rate: 'often' is not N/second, N/minute or N/hour"]
    with pytest.raises(network_policy.NetworkPolicyError) as info:
        network_policy.build(topology(), "nowhere", SETTINGS)
    assert info.value.problems == ["host nowhere is not in the topology"]


def test_the_matrix_as_markdown_has_a_row_per_service_and_a_column_per_host():
    text = network_policy.matrix_markdown(network_policy.matrix(topology(), SETTINGS))
    lines = text.splitlines()
    assert lines[0] == "| service (host, address:port/proto) | client | gpu | gw | obs | ops |"
    # The model server's own host is no consumer of it: its containers may not open it (its processes use lo).
    assert "| vllm-fast (gpu, 10.0.20.20:8001/tcp) | - | - | open | open | - |" in lines
    assert "| prometheus (obs, 10.0.10.14:9090/tcp) | - | - | - | own | open |" in lines


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("unshare"),
                    reason="needs root, nft and unshare")
@pytest.mark.parametrize("host", ["gw", "gpu", "obs", "ops", "client"])
def test_every_hosts_ruleset_loads_in_an_empty_network_namespace(host, tmp_path):
    path = tmp_path / "ruleset.nft"
    path.write_text(network_policy.build(topology(), host, SETTINGS)["ruleset"])
    result = subprocess.run(["unshare", "-n", "sh", "-c", "nft -f %s && nft -s list table inet llmstack" % path],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "chain input" in result.stdout and "policy drop" in result.stdout


def test_the_module_replaces_one_table_and_nothing_else():
    ok = network_policy.build(topology(), "gw", SETTINGS)["ruleset"]
    assert network_policy.table_problems(ok, "inet", "llmstack") == []
    assert network_policy.table_problems("table inet llmstack {}\ntable ip nat {}\n", "inet", "llmstack") == [
        "content: must define exactly one table, inet llmstack (it defines: inet llmstack, ip nat)"]
    assert network_policy.table_problems("flush ruleset\ntable inet llmstack {}\n", "inet", "llmstack") == [
        "content: must not flush or delete the whole ruleset (only table inet llmstack is replaced)"]
    script = network_policy.replace_script("inet", "llmstack", "table inet llmstack {\n}\n")
    assert script.splitlines()[:2] == ["table inet llmstack {}", "delete table inet llmstack"]
    assert network_policy.restore_script("inet", "llmstack", None) == (
        "table inet llmstack {}\ndelete table inet llmstack\n")


def test_a_rerun_loads_nothing_unless_asked_for_something_else_or_the_table_drifted():
    record = network_policy.state_record("d1", "table inet llmstack { ... }")
    assert network_policy.needs_apply(record, "d1", "table inet llmstack { ... }") is False
    assert network_policy.needs_apply(record, "d2", "table inet llmstack { ... }") is True
    assert network_policy.needs_apply(record, "d1", "table inet llmstack { edited }") is True
    assert network_policy.needs_apply(record, "d1", None) is True
    assert network_policy.needs_apply({}, "d1", "table inet llmstack { ... }") is True
