#!/usr/bin/python
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function


DOCUMENTATION = r"""
---
module: inventory_check
short_description: Validate the VLAN-aware inventory of pvegpu.llmstack before anything changes
version_added: 0.1.0
description:
  - Reads the variables of every host in the inventory on the controller and validates them
    against the inventory model of the collection (VLANs, interfaces, GPU VMs, models, gateway clients,
    secrets). See C(docs/inventory.md).
  - Reports every problem in one run, each naming the host(s) and the variable, and fails when there is
    any, so that a playbook stops before it touches a host.
  - This is an action plugin; it runs on the controller and never connects to a host.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  group_vlans:
    description:
      - Mapping of inventory group to the list of VLAN names every host of that group must have an
        interface on.
      - 'Defaults to C({gpu_vms: [inference], llm_gateways: [inference]}).'
    type: dict
  fail_on_problems:
    description: Fail when the inventory has problems. With C(false) the problems are only returned.
    type: bool
    default: true
requirements:
  - netaddr (on the controller)
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Validate the inventory
  pvegpu.llmstack.inventory_check:
  run_once: true
  delegate_to: localhost

- name: Collect problems without failing
  pvegpu.llmstack.inventory_check:
    fail_on_problems: false
    group_vlans:
      gpu_vms: [inference, mgmt]
  register: check
"""

RETURN = r"""
problems:
  description: One line per problem, naming the host(s), the variable and what is wrong.
  returned: always
  type: list
  elements: str
  sample: ["host gpu-a: gpu_vm_node: 'pve-x' is not a host in group pve_hosts (known: pve-a, pve-b)"]
problem_details:
  description: The problems as mappings.
  returned: always
  type: list
  elements: dict
  contains:
    hosts:
      description: The hosts concerned (C(all) for inventory-wide variables).
      type: list
      elements: str
    variable:
      description: The variable, with the path inside it.
      type: str
    message:
      description: What is wrong.
      type: str
    text:
      description: The whole line.
      type: str
hosts:
  description: How many hosts were checked.
  returned: always
  type: int
networks:
  description: Per host, its interfaces joined with their VLANs (empty when there are problems).
  returned: always
  type: dict
  sample: {"gpu-a": [{"vlan": "inference", "id": 20, "address": "192.168.20.20", "prefix": 24,
            "cidr": "192.168.20.0/24", "gateway": "192.168.20.1", "bridge": "vmbr0"}]}
"""
