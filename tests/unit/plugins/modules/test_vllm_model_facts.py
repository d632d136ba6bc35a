"""vllm_model_facts and vllm_plan as Ansible runs them (the module file with its arguments as JSON): a local model
directory read on the host, its facts fed to the planner for a cpu model with no GPU, and a missing directory named
as its vllm_models entry. The reading itself is tested in module_utils/test_vllm_model.py."""

import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULES = os.path.join(ROOT, "plugins", "modules")
CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 1024,
          "vocab_size": 2048, "torch_dtype": "bfloat16"}


def run(tmp_path, module, **args):
    args_file = tmp_path / ("%s.json" % module)
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, ".cache", "collections")] + sys.path))
    out = subprocess.run([sys.executable, os.path.join(MODULES, module + ".py"), str(args_file)], capture_output=True,
                         text=True, env=env, check=False)
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout)


def model_dir(tmp_path):
    directory = tmp_path / "llmstack-tiny"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(CONFIG))
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "model.embed_tokens.weight": {"dtype": "BF16", "shape": [2048, 64],
                                                       "data_offsets": [0, 262144]},
                         "lm_head.weight": {"dtype": "BF16", "shape": [2048, 64],
                                            "data_offsets": [262144, 524288]}}).encode()
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 524288)
    return str(directory)


def test_facts_feed_the_planner_of_a_cpu_model_without_gpus(tmp_path):
    path = model_dir(tmp_path)
    models = [{"name": "hub", "model": "Qwen/Qwen3-8B", "device": "cpu", "port": 8002},
              {"name": "fast", "model": path, "device": "cpu", "max_model_len": 1024, "port": 8001}]
    facts = run(tmp_path, "vllm_model_facts", models=models)
    assert not facts.get("failed") and not facts["changed"], facts
    assert list(facts["models"]) == [path]
    tiny = facts["models"][path]
    assert tiny["weight_bytes"] == 524288 and tiny["params"] == 262144 and tiny["architecture"]["head_dim"] == 32
    plan = run(tmp_path, "vllm_plan", models=models[1:], device="cpu", host_memory_mb=65536,
               model_facts=facts["models"])
    assert not plan.get("failed"), plan
    service = plan["services"][0]
    assert service["device"] == "cpu" and service["estimates"]["kv_bytes_per_token"] == 512


def test_a_missing_directory_names_its_entry(tmp_path):
    result = run(tmp_path, "vllm_model_facts", models=[{"name": "fast", "model": str(tmp_path / "nope")}])
    assert result["failed"] and result["problems"] == ["vllm_models[0].model: %s: no such directory"
                                                       % (tmp_path / "nope")]
