#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: litellm_render
short_description: The LiteLLM gateway's config.yaml and compose project, from the inventory
version_added: 0.1.0
description:
  - Builds LiteLLM's C(config.yaml) from the GPU VMs (each VM's inference address and the models the vllm role
    serves there) - one C(hosted_vllm) deployment per VM and model, several per group when a model runs on several
    VMs, explicit fallbacks both as C(router_settings.fallbacks) and as lower-priority (C(order)) deployments
    inside each group, per-group prices and rpm/tpm, router and health-check settings, callbacks.
  - Builds the compose project (LiteLLM pinned, PostgreSQL, Redis when several gateways share rate-limit state).
  - Secrets are never rendered. The config refers to them as C(os.environ/NAME); C(env) lists every name.
  - Bad input fails with one message per problem, each naming the variable. Changes nothing.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  data:
    description:
      - "C(topology) (C(llmstack_topology): the vLLM endpoints and each GPU VM's models) with C(vlan), or C(hosts)
        (inventory name to C({interfaces, models, api_key_enabled, bind_address}) of each GPU VM), or C(gpu_vms)
        (list of C({host, address, api_key, models: [{name, port, max_model_len}]})),
        C(external_models) (C(api_key) true when a key is given; its value never passes here), C(fallbacks),
        C(context_window_fallbacks), C(model_settings) (group to prices and C(rpm)/C(tpm)), C(router),
        C(clients) (checked only), C(redis), C(health_checks), C(prometheus), C(metrics_require_auth),
        C(langfuse), C(in_group_fallbacks), C(database) (false: no C(DATABASE_URL) in the environment)."
    type: dict
    required: true
  compose:
    description:
      - "Compose settings: C(image), C(postgres_image), C(redis_image), C(dir), C(bind_address), C(port),
        C(workers), C(log_level), C(env), C(primary), C(redis), C(shared_address), C(restart), C(database)
        (false: no PostgreSQL service)."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Render the gateway
  pvegpu.llmstack.litellm_render:
    data:
      gpu_vms:
        - {host: gpu-3090, address: 192.168.20.20, models: [{name: fast, port: 8001, max_model_len: 4096}]}
      fallbacks: {}
      model_settings: {fast: {input_cost_per_token: 0.0000001, output_cost_per_token: 0.0000002}}
    compose:
      image: ghcr.io/berriai/litellm:main-v1.108.7
      postgres_image: docker.io/library/postgres:17.6-bookworm
      redis_image: docker.io/library/redis:7.4.5-bookworm
      dir: /opt/llm-gateway
  register: rendered
"""

RETURN = r"""
config:
  description: LiteLLM's config.yaml as a dict.
  returned: success
  type: dict
compose:
  description: The compose project.
  returned: success
  type: dict
env:
  description: Environment variable name to what it holds (the secrets file must define each).
  returned: success
  type: dict
vllm_key_hosts:
  description: The GPU VMs whose vLLM API key the gateway needs (as C(VLLM_API_KEY_<HOST>)).
  returned: success
  type: list
  elements: str
key_env:
  description: "C({vllm: {host: NAME}, external: {model name: NAME}}): the environment variable each API key goes to."
  returned: success
  type: dict
groups:
  description: The model groups clients can call.
  returned: success
  type: list
  elements: str
vm_deployments:
  description: >-
    The ids of the GPU VM deployments, one per (VM, model): the role's verify sends each a one-token completion
    through the proxy.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import litellm_config, render_module


def build(params):
    built = litellm_config.build(params["data"])
    return {"config": built["config"], "env": built["env"], "groups": built["groups"],
            "vm_deployments": built["vm_deployments"],
            "vllm_key_hosts": built["vllm_key_hosts"], "key_env": built["key_env"],
            "compose": litellm_config.compose(params["compose"])}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            data=dict(type="dict", required=True),
            compose=dict(type="dict", required=True),
        ),
        supports_check_mode=True,
    )
    render_module.run(module, "litellm", build)


if __name__ == "__main__":
    main()
