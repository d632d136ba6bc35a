# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: topology_vm_gpus
short_description: The GPUs the topology places in a GPU VM
version_added: 0.2.0
description:
  - Reads C(llmstack_topology) (the validate step's fact, M(pvegpu.llmstack.topology)) and returns the GPUs the
    collection's one placement gives to a VM, C([{slot, vendor, device}]); C(vendor) and C(device) are null
    where the PVE host was not read in this run.
  - Returns null when the topology does not place the VM (no topology, or the VM's PVE host is unknown).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The topology (C(llmstack_topology)).
    type: dict
    required: true
  vm:
    description: The GPU VM's inventory name.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: What the PVE host passes through to this VM
  ansible.builtin.debug:
    msg: "{{ llmstack_topology | pvegpu.llmstack.topology_vm_gpus(inventory_hostname) }}"
# [{slot: "0000:42:00", vendor: "10de", device: "2204"}]
"""

RETURN = r"""
_value:
  description: The VM's GPUs in placement order, or null.
  type: list
  elements: dict
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology


def topology_vm_gpus(value, vm):
    return topology.vm_gpus(value, vm)


class FilterModule(object):
    def filters(self):
        return {"topology_vm_gpus": topology_vm_gpus}
