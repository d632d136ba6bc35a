#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_plan
short_description: Place vLLM models on GPUs and size them, or refuse a layout that cannot fit
version_added: 0.1.0
description:
  - From the GPUs (index, memory, compute capability), their link matrix and the models to serve, decides each
    model's GPUs and tensor-parallel size (explicit C(gpus), or the largest model first on the best-connected free
    GPUs, the smallest TP that fits), and sizes it - weights per GPU, KV cache bytes per token, KV tokens that fit,
    concurrency at C(max_model_len), C(max_num_seqs) (seed 002 - min(256, floor(free GiB x 12))) - with every
    number in C(estimates) so that a reader can recompute it.
  - Fails before anything is deployed, naming the model and the shortfall in GiB, when a model does not fit;
    refuses bfloat16 below compute capability 8.0 (V100 - use float16), AWQ below 7.5, GPTQ below 7.0, FP8 below
    7.5 (vLLM's quantization hardware table), C(gpu_memory_utilization) above 0.95 (seed 001; warns above 0.92), and
    two models on one GPU unless each sets its C(gpu_memory_utilization) fraction.
  - Warns when a tensor-parallel group has no NVLink although the model fits on fewer GPUs (seed 000 - TP=4 for a
    9B model over PCIe wastes the cards), and when a group spans NUMA nodes.
  - "A cpu model (O(device) or its own C(device): cpu - vLLM's CPU backend) takes no GPU: its KV cache is the fixed
    C(cpu_kvcache_space_gib) (vLLM's C(VLLM_CPU_KVCACHE_SPACE)), KV tokens = space / KV bytes per token,
    concurrency at C(max_model_len) = tokens / C(max_model_len); a C(max_model_len) that does not fit the space, or
    weights + KV space above O(host_memory_mb) (when given; all cpu models together too), is refused. It may not
    set C(gpus), C(tensor_parallel_size) > 1 or C(gpu_memory_utilization)."
  - "A model given as an absolute path (a local model directory) is sized from O(model_facts) (what
    M(pvegpu.llmstack.vllm_model_facts) read on the host), never from the catalog."
  - "The arithmetic and its limits (MLA and sliding-window attention are not modelled: their KV cache is
    over-estimated) are in plugins/module_utils/vllm_plan.py and docs/vllm.md. Runs anywhere, reads nothing but
    the C(config_json) files of O(models)."
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  gpus:
    description:
      - The GPUs, C({index, name, memory_mib, compute_capability}) (M(pvegpu.llmstack.nvidia_gpu_facts)). Needed
        only when a model runs on a GPU.
    type: list
    elements: dict
    default: []
  device:
    description: The device of models that do not set their own C(device).
    type: str
    choices: [gpu, cpu]
    default: gpu
  cpu_kvcache_space_gib:
    description: KV cache space of cpu models that do not set their own C(cpu_kvcache_space_gib), whole GiB.
    type: int
    default: 4
  host_memory_mb:
    description: The host's memory (C(ansible_memtotal_mb)); cpu models whose weights and KV space exceed it are
      refused. Not checked when omitted.
    type: int
  model_facts:
    description: Local model directory to its facts - the C(models) of M(pvegpu.llmstack.vllm_model_facts).
    type: dict
    default: {}
  topology:
    description: The link matrix (the C(pvegpu.llmstack.nvidia_topology) filter); optional.
    type: dict
  gpu_memory_utilization:
    description: The default fraction of each GPU's memory a vLLM instance may use.
    type: float
    default: 0.9
  models:
    description:
      - "The models: C(name) (served name), C(model) (Hugging Face id, looked up in the built-in catalog), C(dtype)
        (C(float16) or C(bfloat16)), C(quantization) (null, C(awq), C(gptq), C(fp8); read from the id when null),
        C(bits) (GPTQ 4 or 8), C(kv_cache_dtype) (C(auto), C(fp8)), C(max_model_len) (default 4096), C(gpus),
        C(tensor_parallel_size), C(gpu_memory_utilization), C(max_num_seqs), C(enforce_eager), C(architecture)
        (C({params_b, layers, attention_heads, kv_heads, head_dim, hidden_size, vocab_size}), overrides the
        catalog), C(config_json) (path of a local config.json), C(device) (C(gpu) or C(cpu)),
        C(cpu_kvcache_space_gib). C(dtype) may also be C(float32) (4 bytes per weight and KV element; a cpu model's
        default is C(bfloat16)). Other keys (C(port), ...) are passed through."
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan platform A (seed 000)
  pvegpu.llmstack.vllm_plan:
    gpus: "{{ llmstack_nvidia.gpus }}"
    topology: "{{ llmstack_nvidia.topology }}"
    models:
      - {name: fast, model: meta-llama/Llama-3.1-8B-Instruct, dtype: float16, max_model_len: 4096, gpus: [0]}
      - {name: balanced, model: Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4, max_model_len: 8192, gpus: [1]}
      - {name: reasoning, model: casperhansen/deepseek-r1-distill-qwen-32b-awq, max_model_len: 8192, gpus: [2, 3]}
  register: plan
"""

RETURN = r"""
services:
  description: One per model, with the placement, the vLLM settings and C(estimates).
  returned: success
  type: list
  elements: dict
  sample:
    - name: fast
      model: meta-llama/Llama-3.1-8B-Instruct
      gpus: [0]
      tensor_parallel_size: 1
      dtype: float16
      quantization: null
      gpu_memory_utilization: 0.9
      max_model_len: 4096
      max_num_seqs: 58
      estimates: {memory_gib_per_gpu: 24.0, budget_gib_per_gpu: 21.6, weights_gib_per_gpu: 15.26,
                  reserve_gib_per_gpu: 1.5, free_gib_per_gpu: 4.84, kv_bytes_per_token: 131072,
                  kv_bytes_per_token_per_gpu: 131072, kv_tokens: 39680, concurrency_at_max_len: 9.69}
    - name: tiny
      model: /data/llm/models/llmstack-tiny
      device: cpu
      gpus: []
      tensor_parallel_size: 1
      dtype: bfloat16
      gpu_memory_utilization: null
      cpu_kvcache_space_gib: 4
      max_model_len: 1024
      max_num_seqs: 48
      estimates: {weights_gib: 0.0, kv_space_gib: 4, kv_bytes_per_token: 512, kv_tokens: 8388608,
                  concurrency_at_max_len: 8192.0, host_memory_gib: 15.6, host_free_gib: 11.6}
plan_warnings:
  description: What works but is not advised (each also shown as a warning).
  returned: success
  type: list
  elements: str
problems:
  description: Every reason the layout was refused.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import render_module, vllm_plan


def build(params):
    problems = ["gpus[%d]: needs index and memory_mib" % index for index, gpu in enumerate(params["gpus"] or [])
                if gpu.get("index") is None or not gpu.get("memory_mib")]
    if problems:
        raise vllm_plan.PlanError(problems)
    result = vllm_plan.plan(params["gpus"], params["models"], params["topology"], params["gpu_memory_utilization"],
                            device=params["device"], cpu_kvcache_space_gib=params["cpu_kvcache_space_gib"],
                            host_memory_mib=params["host_memory_mb"], model_facts=params["model_facts"])
    return {"services": result["services"], "plan_warnings": result["warnings"]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="dict", default=[]),
            topology=dict(type="dict"),
            gpu_memory_utilization=dict(type="float", default=0.9),
            models=dict(type="list", elements="dict", required=True),
            device=dict(type="str", choices=["gpu", "cpu"], default="gpu"),
            cpu_kvcache_space_gib=dict(type="int", default=4),
            host_memory_mb=dict(type="int"),
            model_facts=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    render_module.run(module, "vllm_plan", build, warnings="plan_warnings")


if __name__ == "__main__":
    main()
