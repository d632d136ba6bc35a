#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_render
short_description: The compose project or systemd units that serve planned vLLM services
version_added: 0.1.0
description:
  - From the C(services) of M(pvegpu.llmstack.vllm_plan), builds the compose project (seed 000) - one service per
    model with a pinned image, C(ipc host), its port bound to the C(bind_address) setting only, the Hugging Face and
    vLLM caches, the GPUs as C(device_ids), the planned flags, a C(/health) health check, restart policy and log
    rotation - or one systemd unit per model (seed 001) with C(CUDA_VISIBLE_DEVICES) and the same flags.
  - A cpu model (C(device) cpu in its planned service) gets no GPU reservation, no C(CUDA_VISIBLE_DEVICES) or NCCL
    variables and no GPU flags, but C(VLLM_CPU_KVCACHE_SPACE); a model given as a directory is bind-mounted
    read-only at its path and served under its name.
  - C(--shutdown-timeout) (the C(shutdown_timeout) setting) is passed only to a vLLM that has it (0.18.0 and later;
    the version is the image tag's in compose, else the C(version) setting), with a warning otherwise; compose waits
    C(stop_grace_period) = timeout + 15 s, systemd C(TimeoutStopSec=) the same with C(KillMode=mixed).
  - The API key is never rendered; vLLM reads it from C(VLLM_API_KEY) in the C(env_file) setting's file.
  - Changes nothing; the vllm role writes what it returns with its templates.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  services:
    description: The C(services) of M(pvegpu.llmstack.vllm_plan), each with a C(port).
    type: list
    elements: dict
    required: true
  method:
    description: C(compose) or C(systemd).
    type: str
    choices: [compose, systemd]
    default: compose
  settings:
    description:
      - "C(image) (pinned), C(bind_address), C(hf_home), C(cache_dir), C(env_file), C(offline), C(hf_endpoint),
        C(extra_env), C(restart), C(start_period) (compose); C(venv), C(user), C(dir) (systemd); C(version)
        (vLLM's, default none), C(shutdown_timeout) (seconds, default 30)."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Compose project of the plan
  pvegpu.llmstack.vllm_render:
    services: "{{ plan.services }}"
    method: compose
    settings:
      image: vllm/vllm-openai:v0.11.0
      bind_address: 127.0.0.1
      hf_home: /opt/llm-inference/hf-cache
      cache_dir: /opt/llm-inference/vllm-cache
      env_file: /opt/llm-inference/secrets/vllm.env
  register: rendered
"""

RETURN = r"""
compose:
  description: The compose project (method compose).
  returned: success
  type: dict
units:
  description: Unit file name to C({description, environment, env_file, argv, exec_start, user, working_directory,
    text}); C(text) is the whole unit file with every value escaped for systemd (the role's template prints it).
  returned: success
  type: dict
ports:
  description: Served name to port.
  returned: success
  type: dict
render_warnings:
  description: What is not rendered as asked (a vLLM without C(--shutdown-timeout)); each also an Ansible warning.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import render_module, vllm_deploy


def build(params):
    if params["method"] == "compose":
        result = {"compose": vllm_deploy.compose(params["services"], params["settings"]), "units": {}}
    else:
        result = {"compose": {}, "units": vllm_deploy.systemd_units(params["services"], params["settings"])}
    result["ports"] = dict((s["name"], s["port"]) for s in params["services"])
    result["render_warnings"] = vllm_deploy.render_warnings(params["services"], params["settings"], params["method"])
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            services=dict(type="list", elements="dict", required=True),
            method=dict(type="str", choices=["compose", "systemd"], default="compose"),
            settings=dict(type="dict", required=True),
        ),
        supports_check_mode=True,
    )
    render_module.run(module, "vllm_render", build, warnings="render_warnings")


if __name__ == "__main__":
    main()
