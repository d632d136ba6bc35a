"""pve_firewall: a GPU VM's policy in PVE's firewall and the compare logic that turns what the API holds into it.

The requests are played on a small model of PVE's firewall config that follows the semantics the plan relies on
(a new rule goes first, as PVE's ``unshift``; ``moveto``; ``delete`` of options; IP set entries by CIDR). That model
is this test's; tests/integration/test_pve_firewall.py sends the same requests to fakepve, which validates them
against PVE's own schema and rule checks."""

import copy

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_firewall

VLANS = {"mgmt": {"cidr": "10.0.10.0/24"}, "inference": {"cidr": "10.0.20.0/24"}, "apps": {"cidr": "10.0.30.0/24"}}
MARK = pve_firewall.MARK


def topology():
    hosts = {
        "gw": {"groups": ["llm_gateways"], "addresses": {"mgmt": "10.0.10.12", "inference": "10.0.20.12",
                                                         "apps": "10.0.30.12"}},
        "gpu": {"groups": ["gpu_vms"], "addresses": {"mgmt": "10.0.10.20", "inference": "10.0.20.20"},
                "vm": {"node": "pve-a", "pve_node": "pve-a", "vmid": 120}},
        "obs": {"groups": ["observability"], "addresses": {"mgmt": "10.0.10.14"}},
        "ops": {"groups": ["admins"], "addresses": {"mgmt": "10.0.10.99"}},
        "client": {"groups": ["llm_clients"], "addresses": {"apps": "10.0.30.11"}},
    }
    endpoints = [
        {"role": "vllm", "service": "vllm-fast", "host": "gpu", "address": "10.0.20.20", "port": 8001,
         "sources": ["10.0.20.12", "10.0.10.14"]},
        {"role": "vllm", "service": "vllm-local", "host": "gpu", "address": "127.0.0.1", "port": 8009,
         "sources": ["127.0.0.1"]},
        {"role": "monitoring", "service": "node-exporter", "host": "gpu", "address": "0.0.0.0", "port": 9100,
         "sources": ["10.0.10.14", "fd00:10::14"]},
        {"role": "tls_proxy", "service": "https", "host": "gw", "address": "10.0.30.12", "port": 443,
         "sources": ["10.0.30.11"]},
    ]
    return {"hosts": hosts, "endpoints": endpoints}


SETTINGS = {"controller_addresses": ["10.0.10.5"], "vlans": VLANS, "admin_groups": ["admins"]}


class Pve(object):
    """The firewall config as the plan's requests change it."""

    def __init__(self, current):
        self.state = copy.deepcopy(current)
        self.state.setdefault("ipsets", {})
        self.state.setdefault("groups", {})
        self.state.setdefault("vm_rules", [])
        self.state.setdefault("vm_options", {})
        self.state.setdefault("cluster_options", {})

    def apply(self, ops):
        for op in ops:
            method, path, data = op["method"], op["path"], dict(op["data"])
            if path[:3] == ["cluster", "firewall", "ipset"]:
                rest = path[3:]
                if method == "post" and not rest:
                    assert data["name"] not in self.state["ipsets"], "created twice: " + data["name"]
                    self.state["ipsets"][data["name"]] = {"comment": data.get("comment"), "entries": []}
                elif method == "post":
                    assert rest[0] in self.state["ipsets"], "entry added to a set that does not exist: %s" % rest
                    self.state["ipsets"][rest[0]]["entries"].append({"cidr": data["cidr"],
                                                                     "comment": data.get("comment")})
                elif method == "delete" and len(rest) == 1:
                    del self.state["ipsets"][rest[0]]
                else:
                    entries = self.state["ipsets"][rest[0]]["entries"]
                    entries[:] = [e for e in entries if e["cidr"] != rest[1]]
            elif path[:3] == ["cluster", "firewall", "groups"]:
                rest = path[3:]
                if method == "post" and not rest:
                    self.state["groups"][data["group"]] = []
                elif method == "post":
                    for name in ("source", "dest"):
                        ref = data.get(name, "")
                        assert not ref.startswith("+") or ref[1:] in self.state["ipsets"], "unknown set " + ref
                    self.state["groups"][rest[0]].insert(0, data)
                elif method == "delete" and len(rest) == 1:
                    assert not self.state["groups"][rest[0]], "PVE refuses to delete a group that has rules"
                    del self.state["groups"][rest[0]]
                else:
                    del self.state["groups"][rest[0]][int(rest[1])]
            elif path[-1] == "rules":
                assert data["action"] in self.state["groups"], "VM rule names a group that does not exist"
                self.state["vm_rules"].insert(0, data)
            elif path[-2] == "rules":
                pos = int(path[-1])
                rules = self.state["vm_rules"]
                if method == "delete":
                    del rules[pos]
                elif "moveto" in data:
                    rules.insert(data["moveto"], rules.pop(pos))
                else:
                    rules[pos].update(data)
            elif path[-1] == "options" and path[0] == "nodes":
                for key in (data.pop("delete", "") or "").split(","):
                    self.state["vm_options"].pop(key, None)
                self.state["vm_options"].update(data)
            elif path[-1] == "options":
                self.state["cluster_options"].update(data)
            else:
                raise AssertionError("unexpected request %s" % op)
        return self.state


def want(**settings):
    return pve_firewall.desired(topology(), "gpu", dict(SETTINGS, **settings))


def converge(current, wanted):
    pve = Pve(current)
    pve.apply(pve_firewall.plan(pve.state, wanted))
    return pve.state


def test_desired_opens_each_endpoint_to_its_consumers_only():
    wanted = want()
    assert wanted["node"] == "pve-a" and wanted["vmid"] == 120 and wanted["group"] == "llmstack-120"
    assert wanted["ipsets"]["llmstack-120-8001"] == ["10.0.10.14", "10.0.20.12"]
    assert wanted["ipsets"]["llmstack-120-9100"] == ["10.0.10.14", "fd00:10::14"]
    # SSH: the controller, the management VLAN, the admin hosts (inside it: collapsed into the /24).
    assert wanted["ipsets"]["llmstack-120-ssh"] == ["10.0.10.0/24"]
    assert "llmstack-120-8009" not in wanted["ipsets"], "a loopback endpoint is not the firewall's"
    by_port = dict((r.get("dport"), r) for r in wanted["group_rules"] if r.get("proto") == "tcp")
    assert by_port["8001"]["source"] == "+llmstack-120-8001" and by_port["8001"]["dest"] == "10.0.20.20"
    assert "dest" not in by_port["9100"], "0.0.0.0 listens on every address"
    assert by_port["22"]["source"] == "+llmstack-120-ssh"
    assert wanted["vm_options"]["policy_in"] == "DROP" and wanted["vm_options"]["enable"] == "1"
    # The apps client reaches nothing on the GPU VM: its address is in no set.
    assert not any("10.0.30.11" in cidrs for cidrs in wanted["ipsets"].values())


def test_from_nothing_the_plan_creates_sets_before_the_rules_that_name_them_and_switches_the_vm_on_last():
    wanted = want()
    ops = pve_firewall.plan({}, wanted)
    whys = [op["why"] for op in ops]
    assert whys[-1].startswith("set VM 120 firewall options")
    first_rule = min(i for i, op in enumerate(ops) if op["path"][:3] == ["cluster", "firewall", "groups"])
    assert all(op["path"][:3] == ["cluster", "firewall", "ipset"] for op in ops[:first_rule])
    state = Pve({}).apply(ops)
    assert [pve_firewall.normalise_rule(r) for r in state["groups"]["llmstack-120"]] == wanted["group_rules"]
    assert state["vm_rules"][0]["action"] == "llmstack-120"


def test_a_converged_firewall_needs_no_request():
    wanted = want()
    state = converge({}, wanted)
    assert pve_firewall.plan(state, wanted) == []


def test_drift_is_put_back_and_the_vms_other_rules_stay():
    wanted = want()
    state = converge({}, wanted)
    state["vm_rules"].insert(0, {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "5201", "enable": 1})
    state["ipsets"]["llmstack-120-8001"]["entries"].append({"cidr": "10.0.30.11", "comment": "by hand"})
    vllm = state["ipsets"]["llmstack-120-8001"]
    vllm["entries"] = [e for e in vllm["entries"] if e["cidr"] != "10.0.20.12"]
    state["groups"]["llmstack-120"][0]["enable"] = 0
    state["vm_options"]["policy_in"] = "ACCEPT"
    ops = pve_firewall.plan(state, wanted)
    whys = " | ".join(op["why"] for op in ops)
    assert "add 10.0.20.12 to IP set llmstack-120-8001" in whys
    assert "remove 10.0.30.11 from IP set llmstack-120-8001" in whys
    assert "move rule GROUP llmstack-120 of VM 120 first" in whys
    assert "policy_in=DROP" in whys
    after = Pve(state).apply(ops)
    assert pve_firewall.plan(after, wanted) == []
    assert after["vm_rules"][0]["action"] == "llmstack-120"
    assert after["vm_rules"][1]["dport"] == "5201", "the VM's own rule stays"


def test_a_port_no_longer_served_loses_its_rule_and_then_its_set():
    old = want()
    state = converge({}, old)
    smaller = topology()
    smaller["endpoints"] = [e for e in smaller["endpoints"] if e["port"] != 9100]
    new = pve_firewall.desired(smaller, "gpu", SETTINGS)
    ops = pve_firewall.plan(state, new)
    deletes = [i for i, op in enumerate(ops) if op["why"] == "delete IP set llmstack-120-9100 (no longer used)"]
    last_rule = max(i for i, op in enumerate(ops) if op["path"][:3] == ["cluster", "firewall", "groups"])
    assert deletes and deletes[0] > last_rule
    after = Pve(state).apply(ops)
    assert "llmstack-120-9100" not in after["ipsets"] and pve_firewall.plan(after, new) == []


def test_the_management_set_keeps_what_others_put_there():
    wanted = want(cluster_enable=True)
    current = {"ipsets": {"management": {"comment": "", "entries": [
        {"cidr": "192.168.1.0/24", "comment": "the admins' LAN"},
        {"cidr": "10.0.10.6", "comment": MARK}]}}, "cluster_options": {"enable": 0}}
    ops = pve_firewall.plan(current, wanted)
    whys = [op["why"] for op in ops]
    assert "add 10.0.10.5 to IP set management" in whys
    assert "remove 10.0.10.6 from IP set management" in whys, "an entry of ours no longer asked for goes"
    assert not any("192.168.1.0/24" in w for w in whys)
    assert whys[-1] == "switch the datacenter firewall on"
    after = Pve(current).apply(ops)
    assert sorted(e["cidr"] for e in after["ipsets"]["management"]["entries"]) == ["10.0.10.5", "192.168.1.0/24"]
    # PVE keeps a time stamp in the cluster's enable: any value >= 1 is on.
    after["cluster_options"]["enable"] = 1733300000
    assert pve_firewall.plan(after, wanted) == []


def test_without_cluster_enable_the_datacenter_is_left_alone():
    ops = pve_firewall.plan({"cluster_options": {"enable": 0}}, want())
    assert not any(op["path"] == ["cluster", "firewall", "options"] for op in ops)
    assert not any("management" in op["why"] for op in ops)


def test_absent_removes_ours_only_and_puts_the_options_back():
    wanted = want()
    state = converge({"vm_rules": [{"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "5201",
                                    "enable": 1}],
                      "ipsets": {"other": {"comment": "", "entries": [{"cidr": "10.9.9.9"}]}},
                      "vm_options": {"macfilter": 0}}, wanted)
    ops = pve_firewall.absent_plan(state, "pve-a", 120)
    after = Pve(state).apply(ops)
    assert after["groups"] == {} and list(after["ipsets"]) == ["other"]
    assert [r["dport"] for r in after["vm_rules"]] == ["5201"]
    assert after["vm_options"] == {"macfilter": 0}
    assert pve_firewall.absent_plan(after, "pve-a", 120) == []


def test_nic_problems_name_the_variable():
    problems = pve_firewall.nic_problems({"net0": "virtio=52:54:00:00:00:01,bridge=vmbr0,tag=20,firewall=1",
                                          "net1": "virtio=52:54:00:00:00:02,bridge=vmbr0,tag=10"}, 120)
    assert len(problems) == 1 and "net1" in problems[0] and "gpu_vm_nic_firewall: true" in problems[0]


def test_only_vms_the_collection_creates_and_good_settings():
    with pytest.raises(pve_firewall.PveFirewallError) as info:
        pve_firewall.desired(topology(), "gw", SETTINGS)
    assert "gw is not a VM this collection creates" in str(info.value.problems)
    with pytest.raises(pve_firewall.PveFirewallError) as info:
        pve_firewall.desired(topology(), "gpu", dict(SETTINGS, controller_addresses=[]))
    assert any("network_policy_controller_addresses" in p for p in info.value.problems)
    rendered = pve_firewall.render(topology(), "gw", dict(SETTINGS, pve_firewall=True))
    assert rendered["pve_firewall"] is None and "table inet llmstack" in rendered["ruleset"]
    assert pve_firewall.render(topology(), "gpu", dict(SETTINGS, pve_firewall=True))["pve_firewall"]["vmid"] == 120
    # The gateway as a VM the collection creates (issue #33): PVE's firewall filters it like a GPU VM, HTTPS from the
    # client in, SSH from the controller.
    made = topology()
    made["hosts"]["gw"]["vm"] = {"node": "pve-a", "pve_node": "pve-a", "vmid": 112}
    policy = pve_firewall.render(made, "gw", dict(SETTINGS, pve_firewall=True))["pve_firewall"]
    assert policy["vmid"] == 112
    assert any(r.get("dport") == "443" for r in policy["group_rules"]), policy["group_rules"]


def test_a_changed_group_is_rewritten_add_before_delete_so_ssh_is_never_missing():
    """Issue #31: the group's rules were all deleted, then re-added one by one with SSH last; a failure in between
    left the VM with policy_in DROP and no SSH rule. Now every step's rules hold SSH and all old or all new rules."""
    old = want()
    state = converge({}, old)
    smaller = topology()
    smaller["endpoints"] = [e for e in smaller["endpoints"] if e["port"] != 9100]
    new = pve_firewall.desired(smaller, "gpu", SETTINGS)
    ops = [op for op in pve_firewall.plan(state, new) if op["path"][:3] == ["cluster", "firewall", "groups"]]
    assert ops and all(op["method"] == "post" for op in ops[:len(new["group_rules"])])
    pve = Pve(state)
    for step, op in enumerate(ops):
        pve.apply([op])
        rules = [pve_firewall.normalise_rule(r) for r in pve.state["groups"]["llmstack-120"]]
        assert any(r.get("dport") == "22" for r in rules), "no SSH rule after step %d" % step
        # What holds at each step: the new rules on top, whatever of the old is left below them.
        done = min(step + 1, len(new["group_rules"]))
        assert rules[:done] == new["group_rules"][len(new["group_rules"]) - done:]
    assert [pve_firewall.normalise_rule(r) for r in pve.state["groups"]["llmstack-120"]] == new["group_rules"]
    # Back to the old rules (what the module does after a failed request) the same way.
    back = pve_firewall.group_ops("llmstack-120", new["group_rules"], old["group_rules"])
    pve.apply(back)
    assert [pve_firewall.normalise_rule(r) for r in pve.state["groups"]["llmstack-120"]] == old["group_rules"]
    assert pve_firewall.group_ops("llmstack-120", old["group_rules"], old["group_rules"]) == []


def test_a_udp_port_range_gets_its_own_set_and_rule():
    topo = topology()
    topo["endpoints"].append({"role": "site", "service": "rtp", "host": "gpu", "address": "0.0.0.0", "port": 10000,
                              "port_end": 10100, "proto": "udp", "sources": ["10.0.20.12"]})
    wanted = pve_firewall.desired(topo, "gpu", SETTINGS)
    assert wanted["ipsets"]["llmstack-120-10000-10100-udp"] == ["10.0.20.12"]
    rule = [r for r in wanted["group_rules"] if r.get("proto") == "udp"]
    assert [(r["dport"], r["source"]) for r in rule] == [("10000:10100", "+llmstack-120-10000-10100-udp")]
