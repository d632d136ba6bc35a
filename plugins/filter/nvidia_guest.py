# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: nvidia_expected_gpus
short_description: The GPUs a GPU VM should see, from its gpu_vm_gpus and its PVE host's PCI facts
version_added: 0.1.0
description:
  - C(gpu_vm_gpus) entries are slots (the device id then comes from the host's C(llmstack_pci.gpus) when known) or
    C({vendor_device, count}); returns one C({device_id, source}) per GPU (C(device_id) null when unknown).
  - The same plugin file holds C(nvidia_passthrough_verdict) - C(smi_gpus | nvidia_passthrough_verdict(expected,
    bus_functions)) -> C({ok, problems, summary}) - and C(nvidia_missing_components) (C(apt-cache policy) text,
    codename, driver source -> the Debian components that source needs and apt does not read yet).
  - C(nvidia_bar1_notes) (C(nvidia_gpu_facts) GPUs -> one sentence per GPU whose BAR1 aperture is smaller than its
    VRAM, i.e. Resizable BAR off or not passed through), C(nvidia_nvlink_problems) (C(llmstack_nvidia.nvlink),
    C(llmstack_nvidia.topology) -> inactive links, and GPUs with fewer links up than topo -m shows).
  - C(nvidia_settings_problems) (the role's settings without their C(nvidia_) prefix -> one message per problem),
    C(nvidia_distribution_problem) (C(ansible_facts) -> null, or why the distribution is not supported).
  - The package lists and apt pins C(nvidia_driver_packages), C(nvidia_driver_pin), C(nvidia_toolkit_packages) and
    C(nvidia_toolkit_pin); Docker's package list is the docker role's filter C(docker_packages).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: C(gpu_vm_gpus).
    type: list
    elements: raw
    required: true
  host_gpus:
    description: C(llmstack_pci.gpus) of the VM's PVE host.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: What should the guest see
  ansible.builtin.set_fact:
    expected: "{{ gpu_vm_gpus | pvegpu.llmstack.nvidia_expected_gpus(hostvars[gpu_vm_node].llmstack_pci.gpus) }}"
"""

RETURN = r"""
_value:
  description: One entry per GPU.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia as nvidia_smi
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia_guest


def nvidia_expected_gpus(gpu_vm_gpus, host_gpus=None):
    try:
        return nvidia_guest.expected_gpus(gpu_vm_gpus, host_gpus)
    except nvidia_guest.NvidiaGuestError as exc:
        raise AnsibleFilterError("nvidia_expected_gpus: %s" % exc)


def nvidia_settings_problems(settings):
    return nvidia_guest.check_settings(settings)


def nvidia_distribution_problem(facts):
    return nvidia_guest.check_distribution(facts.get("distribution"), facts.get("distribution_major_version"),
                                           facts.get("distribution_release"))


def nvidia_passthrough_verdict(smi_gpus, expected, bus_functions=None):
    return nvidia_guest.passthrough_verdict(expected, smi_gpus, bus_functions)


def nvidia_missing_components(policy_text, codename, source):
    try:
        return nvidia_guest.missing_components(policy_text, codename, nvidia_guest.needed_components(source))
    except nvidia_guest.NvidiaGuestError as exc:
        raise AnsibleFilterError("nvidia_missing_components: %s" % exc)


def _wrap(function):
    def filter_(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except nvidia_guest.NvidiaGuestError as exc:
            raise AnsibleFilterError("%s: %s" % (function.__name__, exc))
    return filter_


def nvidia_driver_packages(source, kernel_release, flavor="proprietary", hold=False):
    function = nvidia_guest.driver_hold if hold else nvidia_guest.driver_packages
    return _wrap(function)(source, kernel_release, flavor)


class FilterModule(object):
    def filters(self):
        return {"nvidia_expected_gpus": nvidia_expected_gpus,
                "nvidia_settings_problems": nvidia_settings_problems,
                "nvidia_distribution_problem": nvidia_distribution_problem,
                "nvidia_passthrough_verdict": nvidia_passthrough_verdict,
                "nvidia_bar1_notes": nvidia_smi.bar1_notes,
                "nvidia_nvlink_problems": nvidia_smi.nvlink_problems,
                "nvidia_missing_components": nvidia_missing_components,
                "nvidia_driver_packages": nvidia_driver_packages,
                "nvidia_driver_pin": _wrap(nvidia_guest.driver_pin),
                "nvidia_toolkit_packages": nvidia_guest.toolkit_packages,
                "nvidia_toolkit_pin": nvidia_guest.toolkit_pin}
