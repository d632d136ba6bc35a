#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_vm_plan
short_description: The PVE config of a GPU VM, from the inventory and its host's PCI facts
version_added: 0.1.0
description:
  - Computes the config keys M(pvegpu.llmstack.pve_vm) should manage for a GPU VM, as seed 000 configures one
    (C(machine) q35, C(bios) ovmf with an EFI vars disk, C(cpu) host, C(balloon) 0, C(numa) 1, C(hostpciN)
    with C(pcie=1) and C(x-vga=1) on the first GPU only, VLAN-tagged NICs), plus hugepages when the host
    reserved enough, and C(affinity)/C(numa0) on the GPUs' NUMA node when pinning is asked for.
  - Assigns the GPUs of every VM the inventory places on the host (named slots first, then
    C({vendor_device, count}) entries in inventory order), refuses a GPU given to two VMs, a GPU not on the host and
    a GPU whose IOMMU group is shared (unless C(allow_shared_group)), and warns when the GPUs' NUMA node differs
    from C(numa_node).
  - Every C(hostpciN) and C(netN) the plan does not use is V(null), so that pve_vm removes what the inventory no
    longer asks for. Reads nothing and changes nothing; runs on the controller.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  vm:
    description: The VM.
    type: dict
    required: true
    suboptions:
      name:
        description: Its inventory name.
        type: str
        required: true
      node:
        description: The inventory name of its PVE host.
        type: str
        required: true
      pve_node:
        description: That host's node name in PVE; O(vm.node) when not given.
        type: str
      gpus:
        description: Its GPUs (C(gpu_vm_gpus)) - slots, or C({vendor_device, count}) entries.
        type: list
        elements: raw
        default: []
      interfaces:
        description: Its addresses per VLAN (C(llmstack_interfaces)), C({vlan, address}).
        type: list
        elements: dict
        default: []
      models:
        description:
          - The models it serves (C(vllm_models)); they size the model disk (O(settings) C(model_disk_gib)).
        type: list
        elements: dict
        default: []
  node_vms:
    description:
      - Every VM placed on the same host, in inventory order, as C({name, gpus}) (the topology's C(vm_plans) of
        the host, or the C(pvegpu.llmstack.gpu_vm_plans) filter).
    type: list
    elements: dict
    default: []
  pci:
    description: The host's C(llmstack_pci) facts (M(pvegpu.llmstack.pci_iommu_facts)).
    type: dict
    required: true
  vlans:
    description: C(llmstack_vlans).
    type: dict
    default: {}
  settings:
    description:
      - Every one of the gpu_vm role's settings without the C(gpu_vm_) prefix (C(machine), C(cores), C(sockets),
        C(memory_mib), C(storage), C(disk_gib), C(disk_options), C(model_disk_gib), C(model_disk_margin), C(scsihw),
        C(efidisk), C(onboot), C(agent), C(ostype), C(hostpci_mode), C(mapping_prefix), C(primary_vga), C(rombar),
        C(allow_shared_group), C(numa_pin), C(numa_node), C(hugepages), C(nic_model), C(nic_firewall),
        C(extra_config)); see the role's documentation for each.
      - Their defaults are stated once, in the role's C(defaults/main.yml); the module has none and names the
        missing ones.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the VM's config
  pvegpu.llmstack.gpu_vm_plan:
    vm:
      name: "{{ inventory_hostname }}"
      node: "{{ gpu_vm_node }}"
      pve_node: "{{ gpu_vm_pve_node }}"
      gpus: "{{ gpu_vm_gpus }}"
      interfaces: "{{ llmstack_interfaces }}"
    node_vms: "{{ llmstack_topology.vm_plans[gpu_vm_node] }}"
    pci: "{{ node_pci.ansible_facts.llmstack_pci }}"
    vlans: "{{ llmstack_vlans }}"
    settings:
      machine: q35
      cores: 32
      sockets: 1
      memory_mib: 131072
      storage: local-lvm
      disk_gib: 64
      disk_options: discard=on,iothread=1,ssd=1
      model_disk_gib: auto
      model_disk_margin: 0.25
      scsihw: virtio-scsi-single
      efidisk: true
      onboot: true
      agent: true
      ostype: l26
      hostpci_mode: mapping
      mapping_prefix: llmstack
      primary_vga: true
      rombar:
      allow_shared_group: false
      numa_pin: true
      numa_node:
      hugepages: auto
      nic_model: virtio
      nic_firewall: false
      extra_config: {}
  delegate_to: localhost
  register: gpu_vm_plan
"""

RETURN = r"""
config:
  description: The config keys for M(pvegpu.llmstack.pve_vm) (V(null) = remove).
  returned: success
  type: dict
  sample: {"machine": "q35", "bios": "ovmf", "hostpci0": "mapping=llmstack-pve-a-41-00,pcie=1,x-vga=1"}
slots:
  description: The GPU slots the VM gets.
  returned: success
  type: list
  elements: str
mappings:
  description: The PCI mappings the config refers to, C({name, node, slot, gpu}) (empty with raw addresses).
  returned: success
  type: list
  elements: dict
model_disk:
  description:
    - The model disk, C({size_gib, weights_gib, models, grow_only, key, device}) - C(size_gib) 0 and C(key) V(null)
      when the VM gets none; C(models) lists each model's download in GiB; C(device) is the disk's name in the guest.
  returned: success
  type: dict
  sample: {"size_gib": 104, "weights_gib": 79.44, "key": "scsi1", "grow_only": true,
           "device": "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"}
grow_only_disks:
  description: The disk keys whose size is a floor (the O(pvegpu.llmstack.pve_vm#module:grow_only_disks) of pve_vm).
  returned: success
  type: list
  elements: str
notices:
  description: What works but is not as the seed advises (each is also shown as a warning).
  returned: success
  type: list
  elements: str
problems:
  description: Every reason the plan was refused.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import gpu_vm, render_module


def build(params):
    empty = [key for key in ("name", "node") if not params["vm"][key].strip()]
    if empty:
        raise gpu_vm.GpuVmError(["vm.%s: empty" % key for key in empty])
    vm = dict(params["vm"], pve_node=params["vm"]["pve_node"] or params["vm"]["node"])
    result = gpu_vm.plan(vm, params["node_vms"], params["pci"], params["vlans"], params["settings"])
    result["notices"] = result.pop("warnings")
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vm=dict(type="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                node=dict(type="str", required=True),
                pve_node=dict(type="str"),
                gpus=dict(type="list", elements="raw", default=[]),
                interfaces=dict(type="list", elements="dict", default=[]),
                models=dict(type="list", elements="dict", default=[]),
            )),
            node_vms=dict(type="list", elements="dict", default=[]),
            pci=dict(type="dict", required=True),
            vlans=dict(type="dict", default={}),
            settings=dict(type="dict", required=True),
        ),
        supports_check_mode=True,
    )
    vm = module.params["vm"]
    render_module.run(module, "VM %s on %s" % (vm["name"], vm["node"]), build, warnings="notices",
                      warning_prefix="VM %s: " % vm["name"])


if __name__ == "__main__":
    main()
