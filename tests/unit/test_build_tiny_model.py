"""tools/build_tiny_model.py: the lab's tiny model for the real vLLM is deterministic, loadable as vLLM needs it
(head_dim >= 32 for the CPU backend, a chat template, the weights every Llama layer has) and sized by the vllm role's
own reader (module_utils/vllm_model.py) the way the planner will see it."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
import build_tiny_model  # noqa: E402
from ansible_collections.pvegpu.llmstack.plugins.module_utils import vllm_model  # noqa: E402


def load(directory, name):
    with open(os.path.join(directory, name)) as handle:
        return json.load(handle)


def files(directory):
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as handle:
            out[name] = handle.read()
    return out


def test_two_builds_are_byte_for_byte_the_same(tmp_path):
    build_tiny_model.build(str(tmp_path / "a"))
    build_tiny_model.build(str(tmp_path / "b"))
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert build_tiny_model.current(str(tmp_path / "a"))
    assert not build_tiny_model.current(str(tmp_path / "missing"))


def test_the_model_is_what_vllm_and_the_planner_need(tmp_path):
    out = str(tmp_path / "m")
    build_tiny_model.build(out)
    config = load(out, "config.json")
    assert config["head_dim"] >= 32 and config["architectures"] == ["LlamaForCausalLM"]
    tokenizer_config = load(out, "tokenizer_config.json")
    assert "add_generation_prompt" in tokenizer_config["chat_template"]
    tokenizer = load(out, "tokenizer.json")
    assert len(tokenizer["model"]["vocab"]) + len(tokenizer["added_tokens"]) >= config["vocab_size"] - 4
    assert config["eos_token_id"] == next(t["id"] for t in tokenizer["added_tokens"] if t["content"] == "<|im_end|>")
    facts = vllm_model.model_dir_facts(out)
    arch = facts["architecture"]
    assert (arch["layers"], arch["attention_heads"], arch["kv_heads"], arch["head_dim"], arch["hidden_size"]) == (
        2, 4, 2, 32, 64)
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    _length, header = vllm_model.safetensors_header(os.path.join(out, "model.safetensors"))
    assert 0 < size - facts["weight_bytes"] < 16384  # everything but the header is weights
    names = set(header) - {"__metadata__"}
    assert names == set(build_tiny_model.tensor_shapes(config))
    assert {"model.layers.1.self_attn.q_proj.weight", "lm_head.weight"} <= names
    assert header["model.layers.0.self_attn.q_proj.weight"]["shape"] == [128, 64]


def test_bfloat16_rounds_to_nearest_even():
    import numpy

    values = numpy.array([1.0, -2.5, 1.00390625, 1.01171875], dtype=numpy.float32)  # 1+2^-8 ties down, 1+3*2^-8 up
    got = numpy.frombuffer(build_tiny_model.bfloat16_bytes(values), dtype="<u2")
    assert [hex(v) for v in got] == ["0x3f80", "0xc020", "0x3f80", "0x3f82"]
