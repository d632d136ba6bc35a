# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The input of every topology_* filter: the fact the validate step publishes.
    DOCUMENTATION = r"""
options:
  _input:
    description: The topology (C(llmstack_topology), M(pvegpu.llmstack.topology)).
    type: dict
    required: true
"""

    # The filters that name one service endpoint of the topology.
    ENDPOINT = r"""
options:
  role:
    description: The role of the endpoint (C(tls_proxy), C(langfuse), ...).
    type: str
    required: true
  service:
    description: The service of the endpoint (C(litellm-metrics), C(langfuse-web), ...).
    type: str
    required: true
  host:
    description: The host the endpoint listens on.
    type: str
    required: true
"""
