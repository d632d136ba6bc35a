# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: hostpci
short_description: GPU slots to PVE hostpciN values
version_added: 0.1.0
description:
  - "Turns a list of GPU slots (C(0000:41:00), C(41:00)), functions (C(41:00.0)) or C(gpus) entries of
    M(pvegpu.llmstack.pci_iommu_facts) into C({hostpci0: ..., hostpci1: ...})."
  - A slot without C(.f) passes all its functions (GPU and audio, USB, UCSI).
  - Refuses a GPU whose IOMMU group holds other devices (bridges aside) unless O(allow_shared_group) is
    true, in which case those devices are added too; refuses more than 16 devices.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: GPU slots, functions or C(gpus) entries, in the order of hostpci0, hostpci1, ...
    type: list
    elements: raw
    required: true
  pcie:
    description: Add C(pcie=1) (needs C(machine=q35)).
    type: bool
    default: true
  primary_vga:
    description: Add C(x-vga=1) to the first device only (the VM's primary display).
    type: bool
    default: false
  rombar:
    description: Add C(rombar=1) or C(rombar=0); left out when not given.
    type: bool
  mappings:
    description:
      - Slot to the name of a PVE PCI resource mapping; such devices are written C(mapping=<name>).
      - API tokens may only use mappings (PVE allows raw addresses to C(root@pam) alone).
    type: dict
  facts:
    description: The C(llmstack_pci) facts, to check isolation of plain slots.
    type: dict
  allow_shared_group:
    description: Pass the other devices of a shared IOMMU group along instead of failing.
    type: bool
    default: false
  machine:
    description: The VM's machine type, to refuse C(pcie=1) without q35.
    type: str
"""

EXAMPLES = r"""
- name: Platform A of the seed
  ansible.builtin.debug:
    msg: "{{ ['0000:41:00', '0000:61:00', '0000:81:00', '0000:a1:00'] | pvegpu.llmstack.hostpci(primary_vga=true) }}"
  # {"hostpci0": "0000:41:00,pcie=1,x-vga=1", "hostpci1": "0000:61:00,pcie=1", ...}

- name: Through mappings, checked against the host's facts
  ansible.builtin.set_fact:
    gpu_vm_hostpci: >-
      {{ gpu_vm_gpus | pvegpu.llmstack.hostpci(facts=llmstack_pci, mappings={'0000:41:00': 'rtx3090-41'}) }}
"""

RETURN = r"""
_value:
  description: C(hostpciN) keys to their values.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import hostpci as hostpci_utils


def hostpci(items, pcie=True, primary_vga=False, rombar=None, mappings=None, facts=None, allow_shared_group=False,
            machine=None):
    try:
        return hostpci_utils.build(items, pcie=pcie, primary_vga=primary_vga, rombar=rombar, mappings=mappings,
                                   facts=facts, allow_shared_group=allow_shared_group, machine=machine)
    except hostpci_utils.HostpciError as exc:
        raise AnsibleFilterError("hostpci: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"hostpci": hostpci}
