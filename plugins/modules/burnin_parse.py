#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: burnin_parse
short_description: Read a burn-in tool's output (gpu-burn, nvbandwidth, vllm bench serve, nvidia-smi CSV, dcgmi diag)
version_added: 0.3.0
description:
  - Parses what a burn-in or benchmark tool printed into plain data; changes nothing. The text comes from
    O(content), or from O(path) on the target.
  - C(gpu_burn) - every GPU with its summary status (C(OK), C(FAULTY), or null when the summary does not list it),
    the error counts of the progress lines, and whether the summary was printed at all (gpu-burn exits 0 with
    FAULTY GPUs, so its exit status says nothing).
  - C(nvbandwidth) - every test's matrix (rows and columns as printed, N/A as null) and SUM, v0.2 to v0.10 layouts.
  - C(vllm_bench_serve) - the result block of C(vllm bench serve) or C(benchmark_serving.py), by label, whatever the
    version, order or extra lines.
  - C(nvidia_smi_csv) - the samples of an C(nvidia-smi --query-gpu=... --format=csv) log and per-GPU summaries
    (steady temperature, share of time throttled and power-capped).
  - C(dcgmi_diag) - each test of a C(dcgmi diag -r N) table (DCGM 3 and 4), the GPUs that failed, the warnings.
  - M(pvegpu.llmstack.burnin_evaluate) judges the results by seed 000's table.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  tool:
    description: Which tool printed the text.
    type: str
    required: true
    choices: [gpu_burn, nvbandwidth, vllm_bench_serve, nvidia_smi_csv, dcgmi_diag]
  content:
    description: The tool's output. One of O(content) and O(path) is required.
    type: str
  path:
    description: A file on the target holding the tool's output.
    type: path
"""

EXAMPLES = r"""
- name: Read gpu-burn's log
  pvegpu.llmstack.burnin_parse:
    tool: gpu_burn
    path: /var/lib/llmstack/burnin/60s/output.log
  register: burn
"""

RETURN = r"""
result:
  description:
    - "C(gpu_burn) - C({gpus [{index, status, name, uuid, faulty, max_temperature_c}], summary, tested, percent,
      errors}), C(errors) by GPU index."
    - "C(nvbandwidth) - C({version, devices, tests [{name, engine, rows, columns, matrix, sum}]})."
    - "C(vllm_bench_serve) - C({metrics {successful_requests, failed_requests, duration_s, request_throughput,
      output_token_throughput, total_token_throughput, ttft_ms {mean, median, p99}, tpot_ms, itl_ms}, all}),
      absent values null."
    - "C(nvidia_smi_csv) - C({samples, fields, skipped, gpus}), C(gpus) the summary per GPU."
    - "C(dcgmi_diag) - C({metadata, tests, warnings, verdict}), each test with its results, verdict and failed GPUs."
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin_run


def main():
    tools = list(burnin_run.PARSE_TOOLS)
    module = AnsibleModule(argument_spec=dict(tool=dict(type="str", required=True, choices=tools),
                                              content=dict(type="str"),
                                              path=dict(type="path")),
                           required_one_of=[("content", "path")],
                           mutually_exclusive=[("content", "path")],
                           supports_check_mode=True)
    text = module.params["content"]
    if text is None:
        try:
            with open(module.params["path"], "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError as exc:
            module.fail_json(msg="path: cannot read %s: %s" % (module.params["path"], exc))
    module.exit_json(changed=False, result=burnin_run.parse(module.params["tool"], text))


if __name__ == "__main__":
    main()
