"""pve_firewall against the lab's PVE double (fakepve: PVE's own API schema, and pve-firewall's rule checks - a rule
naming an IP set that does not exist, a bad macro or port is refused as PVE refuses it). The policy is the one
network_policy_render computes for lab-gpu-a from the lab's topology; the VM is the lab's (its node and id).

What is not exercised: a real PVE enforcing the rules on a tap device (fakepve keeps the config and enforces
nothing); tests/integration/test_network_policy.py sends packets through the same policy as nftables rules."""

import ipaddress
import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, ansible_env, run_pve_module, state_changing

HOST = "lab-gpu-a"
CONTROLLER = "172.30.10.250"
NIC = "virtio=52:54:00:00:20:01,bridge=vmbr0,tag=20,firewall=1"


@pytest.fixture(scope="module")
def lab():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import gen_network_matrix
    finally:
        sys.path.pop(0)
    topology = gen_network_matrix.topology()
    with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "all", "main.yml")) as handle:
        vlans = yaml.safe_load(handle)["llmstack_vlans"]
    return topology, vlans


def policy(lab, **settings):
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_firewall
    topology, vlans = lab
    return pve_firewall.render(topology, HOST, dict({"controller_addresses": [CONTROLLER], "vlans": vlans,
                                                     "pve_firewall": True}, **settings))["pve_firewall"]


def address(lab, host, vlan):
    return lab[0]["hosts"][host]["addresses"][vlan]


@pytest.fixture
def pve(labpve, lab):
    vm = lab[0]["hosts"][HOST]["vm"]
    labpve.add_node(vm["pve_node"])
    labpve.add_vm(int(vm["vmid"]), HOST, node=vm["pve_node"], config={"net0": NIC})
    return labpve


def run(pve, args, check=False):
    return run_pve_module(pve, "pve_firewall", args, check=check, diff=True)


def entries(config, name):
    return sorted(e["cidr"] for e in config["ipset"].get(name, []))


def test_predicted_then_applied_then_left_alone(pve, lab):
    wanted = policy(lab)
    vmid = wanted["vmid"]
    predicted = run(pve, {"policy": wanted}, check=True)
    assert predicted["changed"] and not predicted.get("failed"), predicted
    assert state_changing(pve) == [], "check mode sent a change"
    assert any("datacenter firewall is off" in w for w in predicted.get("warnings", [])), predicted

    applied = run(pve, {"policy": wanted})
    assert applied["changed"] and not applied.get("failed"), applied
    assert [r["why"] for r in applied["requests"]] == [r["why"] for r in predicted["requests"]]
    cluster = pve.firewall_config("cluster")
    vllm_ports = sorted(e["port"] for e in lab[0]["endpoints"] if e["host"] == HOST and e["role"] == "vllm")
    assert vllm_ports
    for port in vllm_ports:
        allowed = entries(cluster, "llmstack-%d-%d" % (vmid, port))
        assert address(lab, "lab-gateway", "inference") in allowed
        assert address(lab, "lab-client", "apps") not in allowed, "an apps client must not reach vLLM"
    ssh = [ipaddress.ip_network(c) for c in entries(cluster, "llmstack-%d-ssh" % vmid)]
    assert any(ipaddress.ip_address(CONTROLLER) in net for net in ssh)
    assert not any(ipaddress.ip_address(address(lab, "lab-client", "apps")) in net for net in ssh)
    rules = cluster["groups"]["llmstack-%d" % vmid]
    assert {r.get("dport") for r in rules if r.get("proto") == "tcp"} >= {str(p) for p in vllm_ports} | {"22"}
    assert all(r["enable"] == 1 for r in rules)
    guest = pve.firewall_config("vm", wanted["node"], vmid)
    assert guest["rules"][0]["type"] == "group" and guest["rules"][0]["action"] == "llmstack-%d" % vmid
    assert guest["options"]["enable"] == 1 and guest["options"]["policy_in"] == "DROP"

    pve.requests.clear()
    again = run(pve, {"policy": wanted})
    assert again["changed"] is False and again["requests"] == [], again
    assert state_changing(pve) == []


def test_drift_is_put_back_the_vms_own_rules_stay_and_absent_takes_ours_away(pve, lab):
    from proxmoxer import ProxmoxAPI
    wanted = policy(lab)
    node, vmid = wanted["node"], wanted["vmid"]
    assert run(pve, {"policy": wanted})["changed"]
    host, port = pve.url.split("://", 1)[1].rsplit(":", 1)
    api = ProxmoxAPI(host, port=int(port), user=pve.user, password=pve.password, verify_ssl=False)
    guest = api.nodes(node).qemu(vmid).firewall
    guest.rules.post(type="in", action="ACCEPT", proto="tcp", dport="5201", enable=1, comment="iperf, by hand")
    stray = address(lab, "lab-client", "apps")
    vllm_set = "llmstack-%d-%d" % (vmid, min(e["port"] for e in lab[0]["endpoints"]
                                             if e["host"] == HOST and e["role"] == "vllm"))
    api.cluster.firewall.ipset(vllm_set).post(cidr=stray)
    guest.options.put(policy_in="ACCEPT")

    fixed = run(pve, {"policy": wanted})
    whys = [r["why"] for r in fixed["requests"]]
    assert fixed["changed"] and not fixed.get("failed"), fixed
    assert "remove %s from IP set %s" % (stray, vllm_set) in whys
    assert "move rule GROUP llmstack-%d of VM %d first" % (vmid, vmid) in whys
    assert fixed["diff"]["before"]["vm_options"]["policy_in"] == "ACCEPT"
    config = pve.firewall_config("vm", node, vmid)
    assert [r.get("dport") for r in config["rules"]] == [None, "5201"]
    assert stray not in entries(pve.firewall_config("cluster"), vllm_set)
    assert run(pve, {"policy": wanted})["changed"] is False

    gone = run(pve, {"node": node, "vmid": vmid, "state": "absent"})
    assert gone["changed"] and not gone.get("failed"), gone
    cluster = pve.firewall_config("cluster")
    assert not [n for n in cluster["ipset"] if n.startswith("llmstack-%d-" % vmid)]
    assert "llmstack-%d" % vmid not in cluster["groups"]
    config = pve.firewall_config("vm", node, vmid)
    assert [r.get("comment") for r in config["rules"]] == ["iperf, by hand"]
    assert not set(config["options"]) & {"enable", "policy_in", "policy_out", "log_level_in"}
    assert run(pve, {"node": node, "vmid": vmid, "state": "absent"})["changed"] is False


def test_the_datacenter_switch_and_the_management_set_keep_what_was_there(pve, lab):
    from proxmoxer import ProxmoxAPI
    host, port = pve.url.split("://", 1)[1].rsplit(":", 1)
    api = ProxmoxAPI(host, port=int(port), user=pve.user, password=pve.password, verify_ssl=False)
    api.cluster.firewall.ipset.post(name="management", comment="the admins")
    api.cluster.firewall.ipset("management").post(cidr="192.168.1.0/24", comment="the admins' LAN")
    wanted = policy(lab, pve_cluster_enable=True)
    result = run(pve, {"policy": wanted})
    assert result["changed"] and not result.get("failed") and not result.get("warnings"), result
    cluster = pve.firewall_config("cluster")
    assert entries(cluster, "management") == sorted([CONTROLLER, "192.168.1.0/24"])
    assert cluster["options"]["enable"] >= 1
    assert run(pve, {"policy": wanted})["changed"] is False


def test_a_nic_without_the_firewall_flag_is_refused_before_anything_changes(labpve, lab):
    wanted = policy(lab)
    labpve.add_node(wanted["node"])
    labpve.add_vm(wanted["vmid"], HOST, node=wanted["node"], config={"net0": NIC.replace(",firewall=1", "")})
    result = run(labpve, {"policy": wanted})
    assert result.get("failed") and "net0 has no firewall=1" in result["msg"], result
    assert "gpu_vm_nic_firewall: true" in result["msg"]
    assert state_changing(labpve) == []


def test_a_vm_not_created_yet_is_predicted_in_check_mode_and_refused_otherwise(labpve, lab):
    wanted = policy(lab)
    labpve.add_node(wanted["node"])
    predicted = run(labpve, {"policy": wanted}, check=True)
    assert predicted["changed"] and not predicted.get("failed"), predicted
    assert any("does not exist yet" in w for w in predicted["warnings"])
    refused = run(labpve, {"policy": wanted})
    assert refused.get("failed") and "does not exist" in refused["msg"], refused
    assert state_changing(labpve) == []


def test_the_render_module_returns_the_policy_only_for_vms(lab):
    """network_policy_render (as the role calls it) hands the policy over for every VM the collection creates - the
    lab's gateway is one (issue #33) - and none for a host that is not a VM (a PVE host)."""
    topology, vlans = lab
    out = {}
    for host in (HOST, "lab-gateway", "lab-pve-a"):
        settings = {"controller_addresses": [CONTROLLER], "vlans": vlans, "pve_firewall": True}
        args = {"host": host, "topology": topology, "settings": settings}
        result = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m",
                                 "pvegpu.llmstack.network_policy_render", "-a", json.dumps(args)], cwd=ROOT,
                                env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                                                ANSIBLE_LOAD_CALLBACK_PLUGINS="1"),
                                capture_output=True, text=True, check=False, timeout=120)
        report = json.loads(result.stdout[result.stdout.index("{"):])
        out[host] = list(report["plays"][0]["tasks"][0]["hosts"].values())[0]
    assert out[HOST]["pve_firewall"] == policy(lab)
    assert out["lab-gateway"]["pve_firewall"]["vmid"] == 112
    assert out["lab-pve-a"]["pve_firewall"] is None and "table inet llmstack" in out["lab-pve-a"]["ruleset"]
