#!/usr/bin/python
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function


DOCUMENTATION = r"""
---
module: topology
short_description: Compute the site's topology once - GPU placement, addresses, service endpoints, PVE API
version_added: 0.2.0
description:
  - Builds C(llmstack_topology) (C(docs/architecture.md), "The topology") from the inventory, each service
    role's settings (the role's C(defaults/main.yml) overlaid with the host's own variables), the PCI facts of
    the PVE hosts read in this run (C(llmstack_pci)) and the GPU VMs' power state (C(llmstack_vm_status)), and
    returns it as a fact. Roles read it instead of other hosts' variables.
  - The GPU placement is the collection's one resolver; vfio binds, host_preflight checks and gpu_vm passes
    through the same GPUs.
  - Refuses, before anything changes, two services listening on one host, address and port (naming both
    variables), and an endpoint that a host which must use it cannot reach (a loopback address, or a VLAN
    the consumer has no address on and no route to).
  - This is an action plugin; it runs on the controller and never connects to a host. Run it with
    C(run_once) so that every host of the play gets the same fact.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  fail_on_problems:
    description: Fail when the topology has problems. With C(false) they are only returned.
    type: bool
    default: true
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Compute the topology for every host of the play
  pvegpu.llmstack.topology:
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
ansible_facts:
  description: The topology.
  returned: always
  type: dict
  contains:
    llmstack_topology:
      description: C(hosts), C(gpus), C(endpoints), C(pve_api) (DESIGN.md 2b, docs/architecture.md).
      type: dict
      sample: {"hosts": {"gpu-a": {"groups": ["gpu_vms"], "addresses": {"inference": "192.168.20.20"},
               "exists": true}}, "gpus": {"pve-a": {"gpu-a": ["0000:41:00"]}},
               "endpoints": [{"role": "litellm", "service": "litellm", "host": "gw", "address": "127.0.0.1",
               "vlan": null, "port": 4000, "scheme": "http", "consumers": ["gw"],
               "variables": {"address": "litellm_bind_address", "port": "litellm_port"}}],
               "pve_api": {"host": "pve.example.org", "port": 8006, "user": "root@pam", "token_id": "",
               "validate_certs": true}}
problems:
  description: One line per problem, naming the host and the variable(s).
  returned: always
  type: list
  elements: str
endpoints:
  description: How many service endpoints the topology holds.
  returned: always
  type: int
"""
