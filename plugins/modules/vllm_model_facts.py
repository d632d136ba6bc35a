#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_model_facts
short_description: Size the local model directories of vLLM models from their config.json and safetensors headers
version_added: 0.1.0
description:
  - For every model of O(models) given as an absolute path (a model directory on this host, rather than a Hugging
    Face id), reads its C(config.json) - layers, attention heads, KV heads, head dim (the config's own C(head_dim)
    when it sets one), hidden size, vocabulary, positions, C(torch_dtype), the quantization method - and the
    headers of its safetensors files - the weights' bytes and parameter count - so that
    M(pvegpu.llmstack.vllm_plan), which runs on the controller, can size the model (its C(model_facts) option).
  - Only the first 8 + N bytes of each safetensors file are read (its header length and JSON header), never the
    tensor data. With a C(model.safetensors.index.json), only the files its C(weight_map) names count, as in vLLM.
  - Fails naming C(<variable>[i].model) for a directory that does not exist, has no C(config.json), no
    safetensors file, or a broken or truncated one. Models given as Hugging Face ids are skipped.
  - Changes nothing. The logic is in plugins/module_utils/vllm_model.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  models:
    description: The models (C(vllm_models) entries with a C(model) key, or model strings); only absolute paths
      are read.
    type: list
    elements: raw
    required: true
  variable:
    description: The name the problems use for the list (C(vllm_models[1].model)).
    type: str
    default: vllm_models
"""

EXAMPLES = r"""
- name: Read the local model directories
  pvegpu.llmstack.vllm_model_facts:
    models:
      - {name: fast, model: /data/llm/models/llmstack-tiny, device: cpu, port: 8001}
  register: model_facts

- name: Plan with them (on the controller)
  pvegpu.llmstack.vllm_plan:
    gpus: []
    device: cpu
    models: [{name: fast, model: /data/llm/models/llmstack-tiny, max_model_len: 1024}]
    model_facts: "{{ model_facts.models }}"
  delegate_to: localhost
"""

RETURN = r"""
models:
  description:
    - Model directory (normalised path) to what it holds. C(architecture) uses vllm_plan's names (C(layers) from
      C(num_hidden_layers), C(kv_heads) from C(num_key_value_heads), C(max_position) from
      C(max_position_embeddings), C(tie) from C(tie_word_embeddings)); C(params_b) is the tensors' element count
      in billions, or the shape's estimate for a quantized checkpoint (packed integers are not parameters).
    - C(weight_bytes) is the sum of the tensors' byte ranges, C(params) their element count, C(checkpoint_dtypes)
      the bytes per safetensors dtype, C(files) the safetensors files counted; C(torch_dtype), C(quantization) and
      C(bits) come from config.json (C(quantization_config)).
  returned: success
  type: dict
  sample:
    /data/llm/models/llmstack-tiny:
      path: /data/llm/models/llmstack-tiny
      architecture: {layers: 2, attention_heads: 4, kv_heads: 2, head_dim: 32, hidden_size: 64, vocab_size: 2048,
                     tie: false, max_position: 1024, intermediate_size: 128, params_b: 0.000360768}
      torch_dtype: bfloat16
      quantization: null
      bits: null
      weight_bytes: 721536
      params: 360768
      checkpoint_dtypes: {BF16: 721536}
      files: [model.safetensors]
problems:
  description: Every directory that could not be sized, each naming its C(vllm_models[i].model).
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import render_module, vllm_model


def build(params):
    return {"models": vllm_model.model_facts(params["models"], params["variable"])}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            models=dict(type="list", elements="raw", required=True),
            variable=dict(type="str", default="vllm_models"),
        ),
        supports_check_mode=True,
    )
    render_module.run(module, "vllm_model_facts", build)


if __name__ == "__main__":
    main()
