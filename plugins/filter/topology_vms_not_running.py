# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: topology_vms_not_running
short_description: The GPU VMs the validate step found absent or stopped
version_added: 0.2.0
description:
  - Reads C(llmstack_topology) (M(pvegpu.llmstack.topology)) and returns those of the given hosts whose power
    state was read from the PVE API and is not C(running) (C(absent) or C(stopped)), in the order given. Hosts with
    no known state are left out.
  - A C(--check) run uses it to say what it cannot read yet from VMs that this run would create or start.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The topology (C(llmstack_topology)).
    type: dict
    required: true
  hosts:
    description: The hosts to look at (e.g. C(groups['gpu_vms'])).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The GPU VMs this run would create or start
  ansible.builtin.debug:
    msg: "{{ llmstack_topology | pvegpu.llmstack.topology_vms_not_running(groups['gpu_vms']) }}"
# ["gpu-b"]
"""

RETURN = r"""
_value:
  description: The hosts.
  type: list
  elements: str
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology


def topology_vms_not_running(value, hosts):
    return topology.vms_not_running(value, hosts)


class FilterModule(object):
    def filters(self):
        return {"topology_vms_not_running": topology_vms_not_running}
