#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: network_policy_render
short_description: A host's nftables ruleset and the site's reachability matrix, from the topology
version_added: 0.2.0
description:
  - Renders the whole nftables ruleset of O(host) (one C(table inet llmstack), loadable with C(nft -f) in an empty
    network namespace) from the topology's service endpoints (seed 000, section network) - default deny inbound,
    established/related, loopback, the ICMP and ICMPv6 messages a network needs, SSH from the controller, the
    VLANs of C(ssh_vlans) in O(settings) and the admin hosts, each endpoint of the host open to the addresses of its
    consumers (and, for Prometheus, Alertmanager, Grafana and Langfuse's web UI, the admin hosts), ports Docker
    publishes judged on their original destination in a C(forward) chain, rate-limited logging and counters of
    what is dropped.
  - With C(pve_firewall) in O(settings), also what the GPU VM O(host) needs in PVE's own firewall (IP sets, a
    security group, the VM's rule and options), for M(pvegpu.llmstack.pve_firewall).
  - Returns the matrix of every endpoint of the site against every inventory host (docs/network.md).
  - The logic is in plugins/module_utils/network_policy.py. Bad input fails with one message per problem, each
    naming the role variable. Changes nothing.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  host:
    description: The inventory name of the host whose ruleset is rendered.
    type: str
    required: true
  topology:
    description: The site's topology (C(llmstack_topology), M(pvegpu.llmstack.topology)).
    type: dict
    required: true
  settings:
    description:
      - "The role's variables without the C(network_policy_) prefix: C(controller_addresses) (required, not empty),
        C(ssh_port), C(ssh_vlans), C(admin_addresses), C(admin_groups), C(log), C(log_rate), C(pve_firewall),
        C(pve_cluster_enable), C(container_interfaces) (the interfaces the host's own containers come in on,
        default C(docker0) and C(br-*)); and C(vlans) (C(llmstack_vlans))."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Render this host's ruleset
  pvegpu.llmstack.network_policy_render:
    host: "{{ inventory_hostname }}"
    topology: "{{ llmstack_topology }}"
    settings:
      controller_addresses: [192.168.10.5]
      ssh_vlans: [mgmt]
      admin_groups: [admins]
      vlans: "{{ llmstack_vlans }}"
  register: policy
"""

RETURN = r"""
ruleset:
  description: The host's whole nftables ruleset, as text.
  returned: success
  type: str
matrix:
  description: C({source, destination, service, address, port, proto, allowed}) (and C(port_end) for a range) for
    every endpoint and every inventory host.
  returned: success
  type: list
  elements: dict
sets:
  description: The named address sets of the ruleset (set name to addresses and CIDRs).
  returned: success
  type: dict
pve_firewall:
  description:
    - The PVE firewall of the GPU VM (the O(pvegpu.llmstack.pve_firewall#module:policy) of
      M(pvegpu.llmstack.pve_firewall)); null without C(pve_firewall) in O(settings).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_firewall, render_module


def main():
    module = AnsibleModule(argument_spec=dict(host=dict(type="str", required=True),
                                              topology=dict(type="dict", required=True),
                                              settings=dict(type="dict", required=True)),
                           supports_check_mode=True)
    render_module.run(module, "network_policy", lambda params: pve_firewall.render(
        params["topology"], params["host"], params["settings"]))


if __name__ == "__main__":
    main()
