#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_report
short_description: Check a PVE host's readiness for GPU passthrough
version_added: 0.1.0
description:
  - Reads the host's PCI devices and IOMMU groups (as M(pvegpu.llmstack.pci_iommu_facts)), its kernel log,
    kernel command line, boot mode and module lists, and returns a report with one entry per check
    (C(pass), C(warn), C(fail) or C(skip)), each with evidence and a fix hint, as the C(llmstack_preflight) fact.
  - 'Checks: iommu_enabled, uefi_boot, cmdline_flags, acs_override, bar_assignment, resizable_bar,
    gpu_isolation, gpu_link, gpu_numa, host_driver_bound, vfio_virqfd (and gpu_present when
    O(passthrough_gpus) names GPUs the host does not have).'
  - Changes nothing. Used by the C(host_preflight) role, which writes the report and decides whether to stop.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
  - pvegpu.llmstack.attributes.facts
options:
  sysfs_root:
    description: Directory holding the C(sys/) tree to read.
    type: path
    default: /
  kernel_log_path:
    description: File with the kernel log; empty reads the live log with C(dmesg).
    type: path
    default: ""
  cmdline_path:
    description: File with the kernel command line.
    type: path
    default: /proc/cmdline
  modules_paths:
    description: Files listing modules to load at boot (globs allowed).
    type: list
    elements: path
    default: [/etc/modules, /etc/modules-load.d/*.conf]
  cpu_vendor:
    description: C(GenuineIntel) or C(AuthenticAMD); decides whether C(intel_iommu=on) is needed.
    type: str
  kernel_release:
    description: The running kernel release (C(uname -r)); decides whether C(vfio_virqfd) still exists.
    type: str
  passthrough_gpus:
    description:
      - GPUs meant for passthrough, as C(gpu_vm_gpus) takes them (slots or C({vendor_device, count})).
      - When not given, the GPUs of O(vm_plans), or every GPU of the host when there are none.
    type: list
    elements: raw
  vm_plans:
    description: The GPU VMs on this host, C({name, gpus, numa_node}), for the NUMA check.
    type: list
    elements: dict
    default: []
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Check the host
  pvegpu.llmstack.preflight_report:
    passthrough_gpus: ["0000:41:00", "0000:61:00"]
  register: preflight

- name: Check a recorded host
  pvegpu.llmstack.preflight_report:
    sysfs_root: /opt/fixtures/platform-a
    kernel_log_path: /opt/fixtures/platform-a.dmesg
    cmdline_path: /opt/fixtures/platform-a.cmdline
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    llmstack_preflight:
      description: The report.
      type: dict
      contains:
        verdict:
          description: The worst status of the checks.
          type: str
          sample: fail
        checks:
          description: One entry per check, C({id, status, summary, evidence, hint}).
          type: list
          elements: dict
        gpus:
          description: The slots of the GPUs checked.
          type: list
          elements: str
summary:
  description: The report as table lines.
  returned: always
  type: list
  elements: str
flagged:
  description: The ids of the checks that warned or failed.
  returned: always
  type: list
  elements: str
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pci, preflight, topology


def read_text(module, path, what):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as exc:
        module.fail_json(msg="%s: cannot read %s: %s" % (what, path, exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/"),
            kernel_log_path=dict(type="path", default=""),
            cmdline_path=dict(type="path", default="/proc/cmdline"),
            modules_paths=dict(type="list", elements="path", default=["/etc/modules", "/etc/modules-load.d/*.conf"]),
            cpu_vendor=dict(type="str"),
            kernel_release=dict(type="str"),
            passthrough_gpus=dict(type="list", elements="raw", no_log=False),
            vm_plans=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    root = params["sysfs_root"]
    if not os.path.isdir(os.path.join(root, "sys")):
        module.fail_json(msg="sysfs_root: %s has no sys/ directory to read" % root)
    facts = pci.read_tree(root)
    if params["kernel_log_path"]:
        kernel_log = read_text(module, params["kernel_log_path"], "kernel_log_path")
    else:
        rc, kernel_log, err = module.run_command(["dmesg"])
        if rc != 0:
            module.fail_json(msg="cannot read the kernel log with dmesg (%s); give kernel_log_path" % err.strip())
    cmdline = read_text(module, params["cmdline_path"], "cmdline_path")
    modules_text = ""
    for pattern in params["modules_paths"]:
        for path in sorted(p for p in glob.glob(pattern) if os.path.exists(p)):   # dangling links: skipped
            modules_text += read_text(module, path, "modules_paths") + "\n"
    # The one GPU resolver (module_utils/topology.py), as vfio and gpu_vm use it.
    slots, problems = None, []
    if params["passthrough_gpus"] is not None or params["vm_plans"]:
        slots, problems = topology.host_passthrough(params["vm_plans"], facts, "this host",
                                                    explicit=params["passthrough_gpus"])
    assigned, unused_problems = topology.place_gpus(params["vm_plans"], facts, "this host")
    plans = [{"name": plan.get("name"), "slots": assigned.get(plan.get("name"), []),
              "numa_node": plan.get("numa_node")} for plan in params["vm_plans"]]
    report = preflight.evaluate(
        facts, kernel_log=kernel_log, cmdline=cmdline,
        uefi=os.path.isdir(os.path.join(root, "sys", "firmware", "efi")),
        cpu_vendor=params["cpu_vendor"], kernel_release=params["kernel_release"], modules_text=modules_text,
        passthrough_slots=slots, vm_plans=plans)
    for problem in problems:
        report["checks"].append({"id": "gpu_present", "status": "fail", "summary": problem, "evidence": [],
                                 "hint": "Check gpu_vm_gpus against lspci -nn on this host"})
    report["verdict"] = preflight.verdict(report["checks"])
    module.exit_json(changed=False, ansible_facts={"llmstack_preflight": report},
                     summary=preflight.summary_table(report),
                     flagged=[c["id"] for c in report["checks"] if c["status"] in ("warn", "fail")])


if __name__ == "__main__":
    main()
