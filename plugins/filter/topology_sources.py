# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: topology_sources
short_description: The addresses a service endpoint's consumers connect from
version_added: 0.2.0
description:
  - Reads C(llmstack_topology) (M(pvegpu.llmstack.topology)) and returns the source addresses of an endpoint's
    consumers - each consumer's address on the endpoint's VLAN, or its routed addresses - for allow lists.
  - Returns an empty list when the topology has no such endpoint.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The topology (C(llmstack_topology)).
    type: dict
    required: true
  role:
    description: The role of the endpoint (C(tls_proxy)).
    type: str
    required: true
  service:
    description: The service of the endpoint (C(litellm-metrics)).
    type: str
    required: true
  host:
    description: The host the endpoint listens on.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Who may read LiteLLM's metrics here
  ansible.builtin.debug:
    msg: >-
      {{ llmstack_topology | pvegpu.llmstack.topology_sources('tls_proxy', 'litellm-metrics', inventory_hostname) }}
# ["192.168.10.30"]
"""

RETURN = r"""
_value:
  description: The addresses.
  type: list
  elements: str
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology


def topology_sources(value, role, service, host):
    return topology.endpoint_sources(value, role, service, host)


class FilterModule(object):
    def filters(self):
        return {"topology_sources": topology_sources}
