#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vfio_plan
short_description: Work out a PVE host's VFIO binding - boot loader, kernel arguments, ids, modules, reboot
version_added: 0.1.0
description:
  - Reads the host's PCI facts (as M(pvegpu.llmstack.pci_iommu_facts)), its running kernel command line and
    its boot setup, and returns what the C(vfio) role writes - kernel arguments to add and remove, the
    vfio-pci ids of every function of the GPUs meant for passthrough, the modules and modprobe lines, the
    blacklist - the boot loader in use, whether a reboot is needed and why, and (O(verify)) what is still
    wrong with the binding.
  - Changes nothing.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  enabled:
    description: Whether the GPUs should be bound to vfio-pci (false, the role is reverting).
    type: bool
    default: true
  sysfs_root:
    description: Directory holding the C(sys/) tree to read.
    type: path
    default: /
  proc_cmdline_path:
    description: File with the running kernel's command line.
    type: path
    default: /proc/cmdline
  kernel_cmdline_path:
    description: systemd-boot's command line file, whose presence hints at systemd-boot.
    type: path
    default: /etc/kernel/cmdline
  bootloader:
    description: C(auto) detects it from C(proxmox-boot-tool status), O(kernel_cmdline_path) and UEFI.
    type: str
    choices: [auto, grub, systemd-boot]
    default: auto
  gpus:
    description:
      - GPUs meant for passthrough, as C(gpu_vm_gpus) takes them (slots or C({vendor_device, count})).
      - When not given, the GPUs of O(vm_plans).
    type: list
    elements: raw
  vm_plans:
    description: The GPU VMs placed on this host, C({name, gpus, numa_node}) (the topology's C(vm_plans) of the host).
    type: list
    elements: dict
    default: []
  cpu_vendor:
    description: C(GenuineIntel) or C(AuthenticAMD).
    type: str
  kernel_release:
    description: C(uname -r); decides whether C(vfio_virqfd) is still a module.
    type: str
  iommu_pt:
    description: Add C(iommu=pt).
    type: bool
    default: true
  amd_iommu_on:
    description: Add C(amd_iommu=on) on AMD (on by default there).
    type: bool
    default: false
  efifb_off:
    description: Add C(video=efifb:off).
    type: bool
    default: false
  acs_override:
    description: Add C(pcie_acs_override=downstream,multifunction) (no DMA isolation between the split devices).
    type: bool
    default: false
  ids_on_cmdline:
    description: Also put C(vfio-pci.ids=) on the kernel command line.
    type: bool
    default: false
  disable_vga:
    description: C(disable_vga=1) on the vfio-pci options.
    type: bool
    default: true
  softdeps:
    description: Drivers that must load after vfio-pci.
    type: list
    elements: str
    default: [nvidia, nouveau]
  blacklist:
    description: Drivers to blacklist on the host.
    type: list
    elements: str
    default: [nouveau, nvidia, nvidiafb, nvidia_drm]
  hugepages:
    description: 2 MiB hugepages to reserve at boot (seed 000, performance); 0 leaves them alone.
    type: int
    default: 0
  cpu_governor:
    description: CPU frequency governor to set at boot (C(performance)); empty leaves it alone.
    type: str
    default: ""
  verify:
    description: Also return C(problems), what is wrong with the binding now.
    type: bool
    default: false
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Plan the binding of the VMs' GPUs
  pvegpu.llmstack.vfio_plan:
    gpus: ["0000:41:00", "0000:61:00"]
    cpu_vendor: "{{ ansible_facts['processor'][1] }}"
    kernel_release: "{{ ansible_facts['kernel'] }}"
  register: plan
"""

RETURN = r"""
bootloader:
  description: C(grub) or C(systemd-boot).
  returned: always
  type: str
boot_tool_managed:
  description: Whether proxmox-boot-tool manages ESPs (then it must refresh them after any change).
  returned: always
  type: bool
slots:
  description: The GPU slots meant for passthrough.
  returned: always
  type: list
  elements: str
ids:
  description: vendor:device of every function of those slots.
  returned: always
  type: list
  elements: str
  sample: ["10de:2204", "10de:1aef"]
warnings_ids:
  description: Devices not meant for passthrough that share an id (vfio-pci.ids binds them too).
  returned: always
  type: list
  elements: str
cmdline_add:
  description: Kernel arguments to add.
  returned: always
  type: list
  elements: str
cmdline_remove:
  description: Kernel arguments to remove.
  returned: always
  type: list
  elements: str
modules:
  description: Modules to load at boot.
  returned: always
  type: list
  elements: str
modprobe:
  description: Lines of the vfio modprobe file.
  returned: always
  type: list
  elements: str
blacklist:
  description: Lines of the blacklist file.
  returned: always
  type: list
  elements: str
hugepages_sysctl:
  description: Lines of the hugepages sysctl file (empty when O(hugepages) is 0).
  returned: always
  type: list
  elements: str
governor_unit:
  description: The CPU governor unit (empty when O(cpu_governor) is empty).
  returned: always
  type: str
reboot_reasons:
  description: Why the host must reboot (empty when it need not).
  returned: always
  type: list
  elements: str
problems:
  description: What is wrong with the binding now, with hints.
  returned: when O(verify) is true
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pci, topology, vfio


def main():
    module = AnsibleModule(
        argument_spec=dict(
            enabled=dict(type="bool", default=True),
            sysfs_root=dict(type="path", default="/"),
            proc_cmdline_path=dict(type="path", default="/proc/cmdline"),
            kernel_cmdline_path=dict(type="path", default="/etc/kernel/cmdline"),
            bootloader=dict(type="str", choices=["auto", "grub", "systemd-boot"], default="auto"),
            gpus=dict(type="list", elements="raw"),
            vm_plans=dict(type="list", elements="dict", default=[]),
            cpu_vendor=dict(type="str"),
            kernel_release=dict(type="str"),
            iommu_pt=dict(type="bool", default=True),
            amd_iommu_on=dict(type="bool", default=False),
            efifb_off=dict(type="bool", default=False),
            acs_override=dict(type="bool", default=False),
            ids_on_cmdline=dict(type="bool", default=False),
            disable_vga=dict(type="bool", default=True),
            softdeps=dict(type="list", elements="str", default=list(vfio.SOFTDEP_DEFAULT)),
            blacklist=dict(type="list", elements="str", default=list(vfio.BLACKLIST_DEFAULT)),
            hugepages=dict(type="int", default=0),
            cpu_governor=dict(type="str", default=""),
            verify=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not os.path.isdir(os.path.join(p["sysfs_root"], "sys")):
        module.fail_json(msg="sysfs_root: %s has no sys/ directory to read" % p["sysfs_root"])
    facts = pci.read_tree(p["sysfs_root"])
    # The one GPU resolver (module_utils/topology.py): gpu_vm passes through exactly these slots.
    slots, problems = topology.host_passthrough(p["vm_plans"], facts, "this host", explicit=p["gpus"])
    if problems:
        module.fail_json(msg="gpus: %s" % "; ".join(problems))
    if p["enabled"] and not slots:
        module.fail_json(msg="gpus: no GPU selected for passthrough on this host (vfio_gpu_slots, or gpu_vm_gpus of "
                             "the VMs placed here)")
    try:
        ids, id_warnings = vfio.passthrough_ids(facts, slots) if slots else ([], [])
        modprobe = vfio.modprobe_options(ids, p["disable_vga"], p["softdeps"]) if ids else []
    except vfio.VfioError as exc:
        module.fail_json(msg="gpus: %s" % exc)
    try:
        sysctl = vfio.hugepages_sysctl(p["hugepages"])
        unit = vfio.governor_unit(p["cpu_governor"]) if p["cpu_governor"] else ""
    except vfio.VfioError as exc:
        module.fail_json(msg="tuning: %s" % exc)
    add, remove = vfio.desired_args(p["cpu_vendor"], p["iommu_pt"], p["amd_iommu_on"], p["efifb_off"],
                                    p["acs_override"], ids if p["ids_on_cmdline"] else ())
    try:
        with open(p["proc_cmdline_path"]) as handle:
            running = handle.read()
    except OSError as exc:
        module.fail_json(msg="proc_cmdline_path: cannot read %s: %s" % (p["proc_cmdline_path"], exc))
    status = ""
    tool = module.get_bin_path("proxmox-boot-tool")
    if tool:
        rc, out, err = module.run_command([tool, "status"])
        status = out if rc == 0 else ""
    bootloader = p["bootloader"]
    if bootloader == "auto":
        bootloader = vfio.detect_bootloader(status, os.path.exists(p["kernel_cmdline_path"]),
                                            os.path.isdir(os.path.join(p["sysfs_root"], "sys", "firmware", "efi")))
    if p["enabled"]:
        reasons = vfio.reboot_reasons(True, running, add, remove, facts, slots)
    else:
        reasons = vfio.reboot_reasons(False, running, [], [], facts, slots)
    result = dict(changed=False, bootloader=bootloader, boot_tool_managed="configured with:" in status,
                  slots=slots, ids=ids, warnings_ids=id_warnings, cmdline_add=add, cmdline_remove=remove,
                  modules=vfio.modules(p["kernel_release"]), modprobe=modprobe,
                  blacklist=vfio.blacklist(p["blacklist"]), reboot_reasons=reasons, hugepages_sysctl=sysctl,
                  governor_unit=unit)
    if p["verify"]:
        result["problems"] = vfio.binding_problems(facts, slots, running, add) if p["enabled"] else []
    module.exit_json(**result)


if __name__ == "__main__":
    main()
