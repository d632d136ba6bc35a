# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: vm_config_mappings
short_description: The PCI resource mappings of the collection that a VM's config uses
version_added: 0.2.0
description:
- Reads a VM's config as PVE returns it (e.g. the C(diff.before) of M(pvegpu.llmstack.pve_vm) with C(state=absent)) and
  returns the names of the mappings its C(hostpciN) entries use (C(mapping=<name>)) that this collection made for the
  node (C(<prefix>-<node>-<bus>-<device>)), sorted.
- The gpu_vm role removes those after destroying the VM, also when the inventory no longer lists the GPUs. Mappings of
  other names are left alone.
- The logic is in plugins/module_utils/gpu_vm.py (C(config_mappings)).
author:
- pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The VM's config (C(hostpciN) keys to their values).
    type: dict
    required: true
  prefix:
    description: The mapping name prefix (C(gpu_vm_mapping_prefix)).
    type: str
    required: true
  pve_node:
    description: The VM's node name in PVE.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The mappings VM 120 used
  ansible.builtin.debug:
    msg: "{{ {'hostpci0': 'mapping=llmstack-pve-a-41-00,pcie=1'}
             | pvegpu.llmstack.vm_config_mappings('llmstack', 'pve-a') }}"
# ["llmstack-pve-a-41-00"]
"""

RETURN = r"""
_value:
  description: The mapping names.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import gpu_vm


def vm_config_mappings(config, prefix, pve_node):
    if not isinstance(config, dict):
        raise AnsibleFilterError("vm_config_mappings: needs a VM config (a mapping), got %s" % type(config).__name__)
    return gpu_vm.config_mappings(config, prefix, pve_node)


class FilterModule(object):
    def filters(self):
        return {"vm_config_mappings": vm_config_mappings}
