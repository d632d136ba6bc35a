# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: known_hosts_names
short_description: The host patterns a known_hosts line needs for the names a host is reached by
version_added: 0.3.0
description:
- Returns the names as OpenSSH looks them up in known_hosts - C(name) on port 22, C([name]:port) on another - unique,
  in order, empty ones left out.
- The guest_image role records each VM's host key under these names before the first connection.
- The logic is in plugins/module_utils/ssh_host_key.py (C(known_hosts_names)).
author:
- pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The names (C(ansible_host), the inventory name).
    type: list
    elements: str
    required: true
  port:
    description: The SSH port (C(ansible_port)); none or 22 for the default.
    type: raw
"""

EXAMPLES = r"""
- name: The names of this host in known_hosts
  ansible.builtin.debug:
    msg: "{{ ['192.168.10.20', 'gpu-3090'] | pvegpu.llmstack.known_hosts_names(2222) }}"
# ["[192.168.10.20]:2222", "[gpu-3090]:2222"]
"""

RETURN = r"""
_value:
  description: The host patterns.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import ssh_host_key


def known_hosts_names(names, port=None):
    if not isinstance(names, (list, tuple)):
        raise AnsibleFilterError("known_hosts_names: needs a list of names, got %s" % type(names).__name__)
    return ssh_host_key.known_hosts_names(names, port)


class FilterModule(object):
    def filters(self):
        return {"known_hosts_names": known_hosts_names}
