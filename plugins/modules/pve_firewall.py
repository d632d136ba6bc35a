#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pve_firewall
short_description: A GPU VM's network policy in PVE's own firewall, through the API
version_added: 0.2.0
description:
  - Makes PVE's firewall hold the O(policy) of one VM that M(pvegpu.llmstack.network_policy_render) computed from
    the topology - cluster IP sets C(llmstack-<vmid>-ssh) and C(llmstack-<vmid>-<port>) with exactly the allowed
    sources, the cluster security group C(llmstack-<vmid>) with exactly its rules in order, the VM's rule
    C(GROUP llmstack-<vmid>) kept first (the VM's other rules are left alone) and the VM firewall options
    C(enable=1), C(policy_in=DROP), C(policy_out=ACCEPT), C(log_level_in).
  - With C(cluster_enable) in the policy, also switches the datacenter firewall on (PVE enforces no VM rule
    without it) and adds the controller's addresses to the datacenter's C(management) IP set, which PVE lets
    reach the hosts' API and SSH once the firewall is on; entries there that it did not add stay.
  - Reads everything first and changes only what differs, in an order that never references a set before it
    exists; check mode lists the requests it would make; diff mode shows our objects before and after.
  - Refuses, before changing anything, a VM whose NICs lack C(firewall=1) (PVE would not filter them), and a VM
    that does not exist (in check mode it predicts the whole policy instead, the VM being created in the same run).
  - O(state=absent) removes the VM's rule, the security group and the IP sets of O(vmid) and puts the options it
    sets back to PVE's defaults; the datacenter switch and the C(management) set stay (other VMs and the PVE hosts
    may rely on them).
  - Logic in plugins/module_utils/pve_firewall.py.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.api_diff
  - pvegpu.llmstack.attributes.pve_group
  - pvegpu.llmstack.pve
options:
  policy:
    description:
      - The C(pve_firewall) result of M(pvegpu.llmstack.network_policy_render) (C(node), C(vmid), C(group),
        C(group_rules), C(ipsets), C(vm_rule), C(vm_options), C(cluster_enable), C(management)).
      - Required with O(state=present).
    type: dict
  node:
    description: The PVE node of the VM; with O(state=absent) (with O(state=present) it comes from O(policy)).
    type: str
  vmid:
    description: The VM's id; with O(state=absent).
    type: int
  state:
    description: Whether the VM's policy should be in PVE's firewall.
    type: str
    choices: [present, absent]
    default: present
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Render the GPU VM's policy
  pvegpu.llmstack.network_policy_render:
    host: "{{ inventory_hostname }}"
    topology: "{{ llmstack_topology }}"
    settings:
      controller_addresses: [192.168.10.5]
      vlans: "{{ llmstack_vlans }}"
      pve_firewall: true
  delegate_to: localhost
  register: rendered

- name: Put it into PVE's firewall
  pvegpu.llmstack.pve_firewall:
    api_host: pve-a.example.org
    api_user: automation@pve
    api_token_id: automation@pve!llmstack
    api_token_secret: "{{ vault_pve_token_secret }}"
    policy: "{{ rendered.pve_firewall }}"
  delegate_to: localhost

- name: Take it away again
  pvegpu.llmstack.pve_firewall:
    node: pve-a
    vmid: 101
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
requests:
  description: The API requests made (or, in check mode, that would be made), each C({method, path, why}).
  returned: always
  type: list
  elements: dict
  sample:
    - {"method": "post", "path": "/cluster/firewall/ipset/llmstack-101-8000",
       "why": "add 10.20.0.5 to IP set llmstack-101-8000"}
diff:
  description: Our IP sets, the security group's rules, whether our rule is the VM's first and the VM options, before
    and after.
  returned: when changed
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_api, pve_firewall

try:
    from urllib.parse import quote
except ImportError:  # pragma: no cover - Python 2
    from urllib import quote


def resource(api, path):
    """The proxmoxer resource of ``path`` (a list of segments; a CIDR's slash is escaped, not a new segment)."""
    return api([quote(str(segment), safe="") for segment in path])


def read(api, node, vmid):
    """(current, VM config or None): what pve_firewall.plan compares."""
    current = {"ipsets": {}, "groups": {}}
    prefix = "%s-%d-" % (pve_firewall.PREFIX, vmid)
    for item in resource(api, ["cluster", "firewall", "ipset"]).get() or []:
        name = item.get("name")
        if name == "management" or name.startswith(prefix):
            current["ipsets"][name] = {"comment": item.get("comment"),
                                       "entries": resource(api, ["cluster", "firewall", "ipset", name]).get() or []}
    group = pve_firewall.group_name(vmid)
    if any(item.get("group") == group for item in resource(api, ["cluster", "firewall", "groups"]).get() or []):
        current["groups"][group] = resource(api, ["cluster", "firewall", "groups", group]).get() or []
    current["cluster_options"] = resource(api, ["cluster", "firewall", "options"]).get() or {}
    try:
        config = resource(api, ["nodes", node, "qemu", str(vmid), "config"]).get() or {}
    except pve_api.ResourceException:
        config = None
    vm_base = ["nodes", node, "qemu", str(vmid), "firewall"]
    current["vm_rules"] = resource(api, vm_base + ["rules"]).get() or [] if config is not None else []
    current["vm_options"] = resource(api, vm_base + ["options"]).get() or {} if config is not None else {}
    return current, config


def restore_group(api, policy, current, vmid):
    """After a failed request: the VM's security group back to the rules it had before this run (add before delete,
    as the change itself), so that a failure mid-way leaves the previous rule set, never a part of the new one.
    Returns what the message says about it."""
    group = pve_firewall.group_name(vmid)
    before = [pve_firewall.normalise_rule(r) for r in (current.get("groups") or {}).get(group) or []]
    try:
        live = [pve_firewall.normalise_rule(r) for r in resource(api, ["cluster", "firewall", "groups", group]).get()]
        for request in pve_firewall.group_ops(group, live, before):
            getattr(resource(api, request["path"]), request["method"])(**request["data"])
    except pve_api.ResourceException as exc:
        return "; putting back the previous rules of %s failed too: %s" % (group, exc)
    return "; the previous rules of security group %s were put back" % group if before else ""


def main():
    argument_spec = pve_api.pve_argument_spec()
    argument_spec.update(policy=dict(type="dict"), node=dict(type="str"), vmid=dict(type="int"),
                         state=dict(type="str", choices=["present", "absent"], default="present"))
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_together=pve_api.PVE_REQUIRED_TOGETHER,
                           required_one_of=pve_api.PVE_REQUIRED_ONE_OF,
                           mutually_exclusive=pve_api.PVE_MUTUALLY_EXCLUSIVE,
                           required_if=[("state", "present", ["policy"]), ("state", "absent", ["node", "vmid"])])
    params = module.params
    policy = params["policy"] or {}
    if params["state"] == "present":
        missing = [k for k in ("node", "vmid", "group", "group_rules", "ipsets", "vm_rule", "vm_options")
                   if k not in policy]
        if missing:
            module.fail_json(msg="policy: not a pve_firewall result of network_policy_render (missing %s)"
                             % ", ".join(missing))
    node = policy.get("node") or params["node"]
    vmid = int(policy.get("vmid") or params["vmid"])
    api = pve_api.connect(module)
    try:
        current, config = read(api, node, vmid)
    except pve_api.ResourceException as exc:
        module.fail_json(msg="reading the firewall of VM %s on %s: %s" % (vmid, node, exc))
    if params["state"] == "present":
        if config is None and not module.check_mode:
            module.fail_json(msg="VM %s does not exist on %s: create it first (the gpu_vms stage)" % (vmid, node))
        problems = pve_firewall.nic_problems(config, vmid)
        if problems:
            module.fail_json(msg="; ".join(problems), problems=problems)
        if not policy.get("cluster_enable") and int((current.get("cluster_options") or {}).get("enable") or 0) < 1:
            module.warn("the datacenter firewall is off: PVE enforces none of VM %s's rules until it is switched on "
                        "(network_policy_pve_cluster_enable, or Datacenter > Firewall > Options)" % vmid)
        if config is None:
            module.warn("VM %s does not exist yet on %s: the whole policy is predicted" % (vmid, node))
        requests = pve_firewall.plan(current, policy)
        after = pve_firewall.wanted_summary(current, policy)
    else:
        requests = pve_firewall.absent_plan(current, node, vmid)
        after = None
    result = {"changed": bool(requests),
              "requests": [{"method": r["method"], "path": "/" + "/".join(r["path"]), "why": r["why"]}
                           for r in requests]}
    if requests:
        result["diff"] = {"before": pve_firewall.summary(current, vmid, pve_firewall.group_name(vmid)),
                          "after": after or {}}
    if requests and not module.check_mode:
        for request in requests:
            try:
                getattr(resource(api, request["path"]), request["method"])(**request["data"])
            except pve_api.ResourceException as exc:
                restored = restore_group(api, policy, current, vmid) if params["state"] == "present" else ""
                hint = ""
                if "403" in str(exc) or "ermission" in str(exc):
                    hint = (" (the datacenter IP sets and security groups need Sys.Modify on /, the VM's firewall "
                            "VM.Config.Network on /vms/%s)" % vmid)
                module.fail_json(msg="%s /%s (%s) failed: %s%s%s" % (request["method"].upper(), "/".join(
                    request["path"]), request["why"], exc, hint, restored), requests=result["requests"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
