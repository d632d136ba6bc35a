# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: nvidia_topology
short_description: The GPU link matrix of C(nvidia-smi topo -m) output
version_added: 0.1.0
description:
  - Parses C(nvidia-smi topo -m) text into C({gpus, nics, links, cpu_affinity, numa_affinity, gpu_numa_id}).
  - Tolerates tabs or spaces, NIC rows and columns (C(NIC0) or C(mlx5_0)), the legend, missing affinity columns,
    C(N/A) and excerpts whose rows were cut (C(links) then holds only the rows printed).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The command's output.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Link matrix of the GPUs
  ansible.builtin.debug:
    msg: "{{ topo.stdout | pvegpu.llmstack.nvidia_topology }}"
# {gpus: [GPU0, GPU1], nics: [], links: {GPU0: {GPU1: NV2}, GPU1: {GPU0: NV2}},
#  cpu_affinity: {GPU0: "0-39", GPU1: "0-39"}, numa_affinity: {GPU0: "0", GPU1: "0"}, gpu_numa_id: {...}}
"""

RETURN = r"""
_value:
  description: The matrix; C(links[row][column]) is C(X)-free (no self entries).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia


def nvidia_topology(text):
    try:
        return nvidia.parse_topology(text)
    except nvidia.NvidiaParseError as exc:
        raise AnsibleFilterError("nvidia_topology: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"nvidia_topology": nvidia_topology}
