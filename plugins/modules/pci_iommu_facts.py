#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pci_iommu_facts
short_description: PCI devices, IOMMU groups and passthrough GPUs of a host, from sysfs
version_added: 0.1.0
description:
  - Reads C(/sys/kernel/iommu_groups) and C(/sys/bus/pci/devices) (or the same layout under O(sysfs_root))
    and returns every PCI device, every IOMMU group and one entry per GPU slot with all its functions, an
    isolation verdict, the devices that break isolation, its NUMA node and whether its PCIe link is degraded.
  - GPUs are display (class 0x0300) and 3D controllers (0x0302; V100, A100 and H100 are 3D controllers).
    Display controllers of BMCs (ASPEED, Matrox, ...) are left out unless named in O(named_slots).
  - A GPU is isolated when every device of its IOMMU groups, PCI bridges (0x0604) aside, is one of its
    own functions.
  - Needs no privileges; C(driver) and C(iommu_group) are read as link names, so a copied tree works.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
  - pvegpu.llmstack.attributes.facts
options:
  sysfs_root:
    description: Directory holding the C(sys/) tree to read; C(/) on a real host, a recorded tree in tests.
    type: path
    default: /
  named_slots:
    description: Slots (C(0000:03:00)) to treat as GPUs even when their vendor is a BMC's.
    type: list
    elements: str
    default: []
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Read the host's PCI devices and IOMMU groups
  pvegpu.llmstack.pci_iommu_facts:

- name: Read a recorded tree
  pvegpu.llmstack.pci_iommu_facts:
    sysfs_root: /opt/fixtures/platform-a

- name: Show the GPUs that cannot be passed through alone
  ansible.builtin.debug:
    msg: "{{ ansible_facts.llmstack_pci.gpus | rejectattr('isolated') | map(attribute='slot') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    llmstack_pci:
      description: PCI devices, IOMMU groups and GPUs (DESIGN.md section 3).
      type: dict
      contains:
        iommu_enabled:
          description: Whether any IOMMU group exists.
          type: bool
        groups:
          description: IOMMU group number to the addresses of its devices.
          type: dict
          sample: {"27": ["0000:41:00.0", "0000:41:00.1"]}
        devices:
          description: Address to vendor, device, class, subsystem ids, driver, iommu_group, numa_node and link.
          type: dict
        gpus:
          description: One entry per GPU slot.
          type: list
          elements: dict
          sample:
            - slot: "0000:41:00"
              functions: ["0000:41:00.0", "0000:41:00.1"]
              vendor: "10de"
              device: "2204"
              iommu_groups: ["27"]
              isolated: true
              shares_group_with: []
              numa_node: 0
              link_degraded: false
        numa_nodes:
          description:
            - NUMA node number to its CPUs (C(cpus), the kernel's cpulist), for pinning a VM next to its GPUs.
          type: dict
          sample: {"0": {"cpus": "0-19,40-59"}, "1": {"cpus": "20-39,60-79"}}
        hugepages:
          description: Hugepage size in KiB to the number of pages the host reserved.
          type: dict
          sample: {"2048": 16384, "1048576": 0}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pci


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/"),
            named_slots=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    if not os.path.isdir(os.path.join(root, "sys")):
        module.fail_json(msg="sysfs_root: %s has no sys/ directory to read" % root)
    named = []
    for slot in module.params["named_slots"]:
        normal = pci.slot_of(slot + ".0") if slot.count(":") == 2 else pci.slot_of("0000:%s.0" % slot)
        if normal is None:
            module.fail_json(msg="named_slots: %r is not a PCI slot such as 0000:03:00" % slot)
        named.append(normal)
    module.exit_json(changed=False, ansible_facts={"llmstack_pci": pci.read_tree(root, named)})


if __name__ == "__main__":
    main()
