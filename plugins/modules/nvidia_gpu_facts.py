#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_gpu_facts
short_description: The NVIDIA GPUs of a host and their link matrix, from nvidia-smi
version_added: 0.1.0
description:
  - Runs C(nvidia-smi -q -x), C(nvidia-smi --query-gpu=...), C(nvidia-smi topo -m) and C(nvidia-smi nvlink -s), or
    parses recorded output given as O(xml), O(query_csv), O(topology) and O(nvlink_status), and returns
    C(ansible_facts.llmstack_nvidia) with C(driver_version), C(cuda_version), C(gpus) (C(index), C(name), C(uuid),
    C(bus_id), C(memory_mib), C(compute_capability) when the driver prints it, C(bar1_mib), ...), C(topology) (see the
    C(pvegpu.llmstack.nvidia_topology) filter) and C(nvlink) (GPU index to C({name, links}), each link's GB/s or null
    when inactive; empty on boards without NVLink, where C(nvidia-smi nvlink -s) may also fail - that is not an
    error).
  - Reads only; fails with the command's error when C(nvidia-smi) is missing or cannot talk to the driver.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
  - pvegpu.llmstack.attributes.facts
options:
  nvidia_smi:
    description: The nvidia-smi command (a name looked up in C(PATH), or a path).
    type: str
    default: nvidia-smi
  xml:
    description: Recorded C(nvidia-smi -q -x) output; given, nvidia-smi is not run for it.
    type: str
  query_csv:
    description: Recorded C(--query-gpu) csv output (with a header, or with O(query_fields)).
    type: str
  nvlink_status:
    description: Recorded C(nvidia-smi nvlink -s) output; given, nvidia-smi is not run for it.
    type: str
  query_fields:
    description: The C(--query-gpu) fields, run or recorded.
    type: list
    elements: str
    default: [index, name, uuid, pci.bus_id, memory.total, driver_version, compute_cap]
  topology:
    description: Recorded C(nvidia-smi topo -m) output.
    type: str
"""

EXAMPLES = r"""
- name: Read the GPUs of a GPU VM
  pvegpu.llmstack.nvidia_gpu_facts:

- name: Parse recorded output (tests, planning on the controller)
  pvegpu.llmstack.nvidia_gpu_facts:
    xml: "{{ lookup('ansible.builtin.file', 'smi-q-x.xml') }}"
    topology: "{{ lookup('ansible.builtin.file', 'topo.txt') }}"
  delegate_to: localhost
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    llmstack_nvidia:
      description: Driver and CUDA versions, the GPUs and the link matrix.
      type: dict
      sample:
        driver_version: "550.163.01"
        cuda_version: "12.4"
        gpus:
          - {index: 0, name: "NVIDIA GeForce RTX 3090", uuid: "GPU-...", bus_id: "0000:41:00.0", memory_mib: 24576,
             compute_capability: "8.6"}
        topology: {gpus: [GPU0, GPU1], links: {GPU0: {GPU1: PHB}, GPU1: {GPU0: PHB}}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia


def run(module, args, what):
    rc, out, err = module.run_command([module.params["nvidia_smi"]] + args)
    if rc != 0:
        module.fail_json(msg="%s failed (rc %d): %s" % (what, rc, (err or out).strip()[-2000:]), rc=rc)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            xml=dict(type="str"),
            query_csv=dict(type="str"),
            query_fields=dict(type="list", elements="str",
                              default=["index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version",
                                       "compute_cap"]),
            topology=dict(type="str"),
            nvlink_status=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    recorded = any(params[k] is not None for k in ("xml", "query_csv", "topology", "nvlink_status"))
    if not recorded:
        path = module.get_bin_path(params["nvidia_smi"])
        if path is None:
            module.fail_json(msg="nvidia_smi: %s is not installed or not in PATH (is the NVIDIA driver installed? "
                                 "see the nvidia role)" % params["nvidia_smi"])
        params["nvidia_smi"] = path
    fields = ",".join(params["query_fields"])
    try:
        xml_text = params["xml"] if recorded else run(module, ["-q", "-x"], "nvidia-smi -q -x")
        csv_text = params["query_csv"] if recorded else run(
            module, ["--query-gpu=" + fields, "--format=csv,noheader,nounits"], "nvidia-smi --query-gpu")
        topo_text = params["topology"] if recorded else run(module, ["topo", "-m"], "nvidia-smi topo -m")
        xml_data = nvidia.parse_xml(xml_text) if xml_text else None
        csv_rows = nvidia.parse_query_csv(csv_text, params["query_fields"]) if csv_text else None
        topology = nvidia.parse_topology(topo_text) if topo_text else None
        if recorded:
            nvlink_text = params["nvlink_status"] or ""
        else:
            # A board without NVLink may answer with an error: no links, not a failure.
            nvlink_text = module.run_command([params["nvidia_smi"], "nvlink", "-s"])[1]
    except nvidia.NvidiaParseError as exc:
        module.fail_json(msg="cannot read nvidia-smi's output: %s" % exc)
    facts = nvidia.merge(xml_data, csv_rows, topology)
    facts["nvlink"] = nvidia.parse_nvlink_status(nvlink_text)
    module.exit_json(changed=False, ansible_facts={"llmstack_nvidia": facts})


if __name__ == "__main__":
    main()
