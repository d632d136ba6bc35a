# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: gpu_vm_destroy_problems
short_description: Why a GPU VM in state absent may not be destroyed by this run
version_added: 0.1.0
description:
  - Takes C(gpu_vm_state) and returns one message when the VM is C(absent) and the run does not name it - neither
    literally in its C(--limit) (C(ansible_limit); a group or a pattern names no VM) nor in C(gpu_vm_destroy) - and
    one when C(gpu_vm_destroy) is not a list of names; an empty list otherwise.
  - The logic is in plugins/module_utils/gpu_vm.py (C(destroy_problems)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: C(gpu_vm_state).
    type: str
    required: true
  host:
    description: The inventory name of the VM's host.
    type: str
    required: true
  vm_name:
    description: C(gpu_vm_name).
    type: str
    required: true
  vmid:
    description: C(gpu_vm_vmid).
    type: raw
    required: true
  limit:
    description: C(ansible_limit), or none.
    type: raw
    required: true
  destroy:
    description: C(gpu_vm_destroy).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Refuse to destroy a VM nobody named
  ansible.builtin.fail:
    msg: "{{ problems | join('; ') }}"
  vars:
    problems: >-
      {{ gpu_vm_state | pvegpu.llmstack.gpu_vm_destroy_problems(inventory_hostname, gpu_vm_name, gpu_vm_vmid,
         ansible_limit | default(none), gpu_vm_destroy) }}
  when: problems | length > 0
"""

RETURN = r"""
_value:
  description: The messages; empty when nothing is wrong.
  type: list
  elements: str
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import gpu_vm


def gpu_vm_destroy_problems(state, host, vm_name, vmid, limit, destroy):
    return gpu_vm.destroy_problems(state, host, vm_name, vmid, limit, destroy)


class FilterModule(object):
    def filters(self):
        return {"gpu_vm_destroy_problems": gpu_vm_destroy_problems}
