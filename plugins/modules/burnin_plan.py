#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: burnin_plan
short_description: Plan the burnin role's stages and check its settings before anything changes
version_added: 0.3.0
description:
  - The stages to run (those named by C(burnin_<stage>) tags of this run, else C(stages) of O(settings)) in seed 000's
    order (C(60s), C(10min), C(1h), C(soak), C(nvbandwidth), C(dcgmi_diag), C(vllm_bench)), each one's command,
    how long it is waited for, the tools it needs and which of them are built from source.
  - Fails naming every bad setting by its C(burnin_) variable. Changes nothing.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  run_tags:
    description: The run's tags (C(ansible_run_tags)).
    type: list
    elements: str
    default: []
  settings:
    description: The role's variables without the C(burnin_) prefix (roles/burnin/tasks/validate.yml lists them).
    type: dict
    required: true
  thresholds:
    description: The verdict table's thresholds (C(burnin_) variables without the prefix).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Plan the stages
  pvegpu.llmstack.burnin_plan:
    run_tags: "{{ ansible_run_tags }}"
    settings:
      stages: [60s, 10min]
      gpu_burn_dir: /opt/llmstack-burnin/gpu-burn
      tools_install: false
  register: plan
"""

RETURN = r"""
stages:
  description: The stages to run, in order.
  returned: success
  type: list
  elements: str
plans:
  description: Per stage C({tool, seconds, argv, chdir, sample, sample_interval, retries}).
  returned: success
  type: dict
tools:
  description: The tools the stages need.
  returned: success
  type: list
  elements: str
build:
  description: The tools built from their source archives (C(gpu_burn), C(nvbandwidth)).
  returned: success
  type: list
  elements: str
stage_tools:
  description: C([{name, tool}]) of the stages, in order (what M(pvegpu.llmstack.burnin_report) takes).
  returned: success
  type: list
  elements: dict
poll_interval:
  description: Seconds between two looks at a running stage.
  returned: success
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin_run, render_module


def main():
    module = AnsibleModule(argument_spec=dict(run_tags=dict(type="list", elements="str", default=[]),
                                              settings=dict(type="dict", required=True),
                                              thresholds=dict(type="dict", default={})),
                           supports_check_mode=True)
    render_module.run(module, "burnin", lambda params: burnin_run.plan(params["run_tags"], params["settings"],
                                                                       params["thresholds"]))


if __name__ == "__main__":
    main()
