# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: gpu_vm_plans
short_description: The GPU VMs the inventory places on a PVE host
version_added: 0.1.0
description:
  - From C(hostvars), the hosts of group C(gpu_vms) whose C(gpu_vm_node) is the given PVE host, as
    C({name, gpus, numa_node, allow_shared_group}) (C(gpus) from C(gpu_vm_gpus), C(numa_node) from
    C(gpu_vm_numa_node)).
  - The roles read the same list from the topology the validate step computes (C(llmstack_topology.vm_plans));
    this filter is for playbooks of your own.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  vms:
    description: The hosts of group C(gpu_vms).
    type: list
    elements: str
    required: true
  node:
    description: The inventory name of the PVE host.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The VMs of this PVE host
  ansible.builtin.debug:
    msg: "{{ hostvars | pvegpu.llmstack.gpu_vm_plans(groups['gpu_vms'] | default([]), inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: One entry per VM.
  type: list
  elements: dict
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology


def gpu_vm_plans(hostvars, vms, node):
    # topology.node_plans is the one implementation (the topology publishes it as vm_plans).
    return topology.node_plans({"pve_hosts": [node], "gpu_vms": list(vms or [])}, hostvars).get(node, [])


class FilterModule(object):
    def filters(self):
        return {"gpu_vm_plans": gpu_vm_plans}
