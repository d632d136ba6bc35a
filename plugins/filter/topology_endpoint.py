# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: topology_endpoint
short_description: One service endpoint of the topology
version_added: 0.2.0
description:
  - Reads C(llmstack_topology) (M(pvegpu.llmstack.topology)) and returns the endpoint of a role's service on a host
    (C(role), C(service), C(host), C(address), C(vlan), C(port), C(scheme), C(consumers), C(sources),
    C(variables)), so that a role reads another role's address and port there, not from its variables.
  - Returns an empty dict when the topology has no such endpoint.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The topology (C(llmstack_topology)).
    type: dict
    required: true
  role:
    description: The role of the endpoint (C(langfuse)).
    type: str
    required: true
  service:
    description: The service of the endpoint (C(langfuse-web)).
    type: str
    required: true
  host:
    description: The host the endpoint listens on.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Where the gateway reaches Langfuse
  ansible.builtin.debug:
    msg: "{{ llmstack_topology | pvegpu.llmstack.topology_endpoint('langfuse', 'langfuse-web', 'obs-1') }}"
# {"address": "192.168.10.30", "port": 3000, "scheme": "http", ...}
"""

RETURN = r"""
_value:
  description: The endpoint, or an empty dict.
  type: dict
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology


def topology_endpoint(value, role, service, host):
    return topology.first_endpoint(value, role, service, host)


class FilterModule(object):
    def filters(self):
        return {"topology_endpoint": topology_endpoint}
