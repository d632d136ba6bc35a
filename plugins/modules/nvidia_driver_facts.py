#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_driver_facts
short_description: The NVIDIA GPUs on a guest's PCI bus and whether its driver needs a reboot
version_added: 0.1.0
description:
  - Reads C(<sysfs_root>/sys/bus/pci/devices) for NVIDIA display and 3D controllers (what C(lspci) lists; no
    pciutils needed), the version of the C(nvidia) module in memory (C(/sys/module/nvidia/version)) and on disk
    (C(modinfo -F version nvidia)), and whether C(nouveau) is loaded.
  - Returns C(ansible_facts.llmstack_nvidia_driver) with C(functions), C(gpu_present), C(loaded_version),
    C(installed_version), C(nouveau_loaded), C(reboot_required) and C(reasons). A reboot is required only when the
    kernel module changed (installed differs from loaded, installed but not loaded) or nouveau holds the GPU.
  - Reads only.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
  - pvegpu.llmstack.attributes.facts
options:
  sysfs_root:
    description: Where C(/sys) is (a recorded tree in tests).
    type: path
    default: /
  modinfo:
    description: The modinfo command.
    type: str
    default: modinfo
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Is there a GPU, and must the guest reboot for its driver?
  pvegpu.llmstack.nvidia_driver_facts:
"""

RETURN = r"""
ansible_facts:
  description: C(llmstack_nvidia_driver).
  returned: always
  type: complex
  contains:
    llmstack_nvidia_driver:
      description: The GPU functions (C(bdf), C(device_id), C(driver)), module versions and the reboot verdict.
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia_guest, pci


def installed_version(module):
    modinfo = module.get_bin_path(module.params["modinfo"]) or module.get_bin_path(
        module.params["modinfo"], opt_dirs=["/usr/sbin", "/sbin"])
    if not modinfo:
        return None
    for name in ("nvidia", "nvidia-current"):
        rc, out, _err = module.run_command([modinfo, "-F", "version", name])
        if rc == 0 and out.strip():
            return out.strip().splitlines()[0]
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/"),
            modinfo=dict(type="str", default="modinfo"),
        ),
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    functions = nvidia_guest.nvidia_functions(pci.read_devices(root, {}))
    state = nvidia_guest.driver_state(nvidia_guest.read_module_version(root, "nvidia"), installed_version(module),
                                      nvidia_guest.module_loaded(root, "nouveau"), functions)
    state.update(functions=functions, gpu_present=bool(functions))
    module.exit_json(changed=False, ansible_facts={"llmstack_nvidia_driver": state})


if __name__ == "__main__":
    main()
