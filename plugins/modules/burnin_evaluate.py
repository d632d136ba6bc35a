#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: burnin_evaluate
short_description: Judge burn-in results by seed 000's pass / watch / fail table
version_added: 0.3.0
description:
  - Takes results of M(pvegpu.llmstack.burnin_parse) and returns one verdict per check and GPU and the overall
    verdict (the worst). Changes nothing.
  - 'The table: steady temperature below 83 C pass, 83-89 watch, 90 or more fail; throttling none pass, up to 10 %
    of the time watch, more fail; any XID fail; PCIe replays 1-10 watch, more fail; any FAULTY GPU fail (a gpu-burn
    result without its summary is never a pass); power cap up to 20 % of the time pass, up to 80 % watch, more fail;
    a failed dcgmi diag test fail, a warning watch; vllm bench serve with failed requests fail.'
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  results:
    description: C([{tool, result}]), each C(result) as M(pvegpu.llmstack.burnin_parse) returned it for C(tool).
    type: list
    elements: dict
    required: true
  thresholds:
    description:
      - The table's thresholds, by the C(burnin_) role variables' names without the prefix
        (C(temperature_watch_c), C(temperature_fail_c), C(throttle_fail_percent), C(pcie_replay_fail),
        C(power_cap_watch_percent), C(power_cap_fail_percent)); those not given keep seed 000's values.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Judge a gpu-burn run and its nvidia-smi log
  pvegpu.llmstack.burnin_evaluate:
    results:
      - {tool: gpu_burn, result: "{{ burn.result }}"}
      - {tool: nvidia_smi_csv, result: "{{ smi.result }}"}
  register: verdict
"""

RETURN = r"""
overall:
  description: C(pass), C(watch) or C(fail); null when nothing was judged.
  returned: success
  type: str
verdicts:
  description: C({check, gpu, verdict, reason}) per check and GPU; C(reason) is null for a pass.
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin_run, render_module


def main():
    module = AnsibleModule(argument_spec=dict(results=dict(type="list", elements="dict", required=True),
                                              thresholds=dict(type="dict", default={})),
                           supports_check_mode=True)
    render_module.run(module, "burnin", lambda params: burnin_run.evaluate_results(params["results"],
                                                                                   params["thresholds"]))


if __name__ == "__main__":
    main()
