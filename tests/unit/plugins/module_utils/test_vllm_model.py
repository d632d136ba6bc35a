"""module_utils.vllm_model: a local model directory sized from its own config.json and safetensors headers (what the
vllm_model_facts module returns on the VM), and config.json parsing checked against the catalog with real configs
(tests/fixtures/model-configs, SOURCE there)."""

import json
import os
import struct

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import vllm_model, vllm_plan

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "model-configs")
TINY_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 1024, "tie_word_embeddings": False, "vocab_size": 2048, "torch_dtype": "bfloat16",
}
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1}


def write_safetensors(path, tensors, metadata=None, pad_data=True):
    """A safetensors file: 8-byte little-endian header length, the JSON header, then the tensor data (zeros)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = DTYPE_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    if metadata is not None:
        header["__metadata__"] = metadata
    raw = json.dumps(header).encode()
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        if pad_data:
            handle.write(b"\0" * offset)
    return offset


def tiny_tensors(layers=2, hidden=64, inter=128, heads=4, kv_heads=2, head_dim=32, vocab=2048, dtype="BF16"):
    tensors = {"model.embed_tokens.weight": (dtype, (vocab, hidden)), "lm_head.weight": (dtype, (vocab, hidden)),
               "model.norm.weight": (dtype, (hidden,))}
    for layer in range(layers):
        prefix = "model.layers.%d." % layer
        tensors.update({
            prefix + "self_attn.q_proj.weight": (dtype, (heads * head_dim, hidden)),
            prefix + "self_attn.k_proj.weight": (dtype, (kv_heads * head_dim, hidden)),
            prefix + "self_attn.v_proj.weight": (dtype, (kv_heads * head_dim, hidden)),
            prefix + "self_attn.o_proj.weight": (dtype, (hidden, heads * head_dim)),
            prefix + "mlp.gate_proj.weight": (dtype, (inter, hidden)),
            prefix + "mlp.up_proj.weight": (dtype, (inter, hidden)),
            prefix + "mlp.down_proj.weight": (dtype, (hidden, inter)),
            prefix + "input_layernorm.weight": (dtype, (hidden,)),
            prefix + "post_attention_layernorm.weight": (dtype, (hidden,)),
        })
    return tensors


def tiny_params():
    # By hand: embeddings + LM head 2 x 2048 x 64 = 262144; final norm 64; per layer q 128x64 = 8192, k and v
    # 64x64 = 4096 each, o 64x128 = 8192, MLP 3 x 128 x 64 = 24576, two norms 128: 49280; two layers 98560.
    return 262144 + 64 + 2 * 49280


@pytest.fixture
def tiny_dir(tmp_path):
    directory = tmp_path / "llmstack-tiny"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(TINY_CONFIG))
    write_safetensors(str(directory / "model.safetensors"), tiny_tensors(), metadata={"format": "pt"})
    return str(directory)


def load(name):
    with open(os.path.join(CONFIGS, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("fixture, catalog", [
    ("Llama-3.1-8B-Instruct.json", "meta-llama/Llama-3.1-8B-Instruct"),
    ("Qwen2.5-14B-Instruct.json", "Qwen/Qwen2.5-14B-Instruct"),
    ("Mistral-7B-Instruct-v0.3.json", "mistralai/Mistral-7B-Instruct-v0.3"),
    ("Qwen3-32B.json", "Qwen/Qwen3-32B"),
])
def test_real_configs_give_the_catalogs_numbers(fixture, catalog):
    arch = vllm_model.architecture_from_config(load(fixture))
    entry = vllm_plan.catalog_entry(catalog)
    for key in ("layers", "attention_heads", "kv_heads", "head_dim", "hidden_size", "vocab_size", "tie",
                "max_position"):
        assert arch[key] == entry[key], (fixture, key, arch[key], entry[key])
    # The parameter count estimated from the shape (no params in a config.json) within 0.5 % of the model card's.
    assert vllm_plan.estimate_params_b(arch) == pytest.approx(entry["params_b"], rel=0.005)
    assert vllm_model.config_facts(json.loads(load(fixture)))["torch_dtype"] == "bfloat16"


def test_an_explicit_head_dim_wins_over_hidden_by_heads():
    # Qwen3-32B: hidden 5120 / 64 heads = 80, but its config says head_dim 128 (and the KV cache is sized with 128).
    arch = vllm_model.architecture_from_config(load("Qwen3-32B.json"))
    assert arch["head_dim"] == 128 and arch["hidden_size"] // arch["attention_heads"] == 80
    config = dict(TINY_CONFIG)
    assert vllm_model.architecture_from_config(json.dumps(config))["head_dim"] == 32
    del config["head_dim"]
    assert vllm_model.architecture_from_config(json.dumps(config))["head_dim"] == 16


def test_vllm_plan_still_offers_architecture_from_config():
    assert vllm_plan.architecture_from_config is vllm_model.architecture_from_config


def test_a_model_directory_is_sized_from_its_safetensors_headers(tiny_dir):
    facts = vllm_model.model_dir_facts(tiny_dir)
    assert facts["params"] == tiny_params() and facts["weight_bytes"] == 2 * tiny_params()
    assert facts["torch_dtype"] == "bfloat16" and facts["files"] == ["model.safetensors"]
    assert facts["checkpoint_dtypes"] == {"BF16": 2 * tiny_params()}
    arch = facts["architecture"]
    assert (arch["layers"], arch["attention_heads"], arch["kv_heads"], arch["head_dim"]) == (2, 4, 2, 32)
    assert (arch["hidden_size"], arch["vocab_size"], arch["max_position"]) == (64, 2048, 1024)
    assert arch["params_b"] == pytest.approx(tiny_params() / 1e9)
    assert facts["quantization"] is None


def test_the_tensor_data_is_never_read(tmp_path):
    """A 64 GiB sparse file: its header says so, and facts come back at once (reading the data would not)."""
    directory = tmp_path / "big"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(TINY_CONFIG))
    path = str(directory / "model.safetensors")
    size = write_safetensors(path, {"w": ("BF16", (32 * 1024, 1024 * 1024))}, pad_data=False)
    with open(path, "r+b") as handle:
        handle.seek(0, 2)
        handle.truncate(handle.tell() + size)
    reads = []
    real_open = open

    class Counting(object):
        def __init__(self, handle):
            self.handle = handle

        def read(self, count=-1):
            data = self.handle.read(count)
            reads.append(len(data))
            return data

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    def counting_open(name, mode="r", *args, **kwargs):
        handle = real_open(name, mode, *args, **kwargs)
        return Counting(handle) if "b" in mode else handle

    facts = vllm_model.model_dir_facts(str(directory), opener=counting_open)
    assert facts["weight_bytes"] == 64 * 1024 ** 3
    assert sum(reads) < 4096, reads


def test_a_sharded_checkpoint_counts_only_the_files_of_its_index(tmp_path):
    """Mistral-7B-Instruct-v0.3 ships consolidated.safetensors beside its shards; vLLM loads what the index names."""
    directory = tmp_path / "sharded"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(TINY_CONFIG))
    tensors = tiny_tensors()
    names = sorted(tensors)
    half = len(names) // 2
    write_safetensors(str(directory / "model-00001-of-00002.safetensors"), dict((n, tensors[n]) for n in names[:half]))
    write_safetensors(str(directory / "model-00002-of-00002.safetensors"), dict((n, tensors[n]) for n in names[half:]))
    write_safetensors(str(directory / "consolidated.safetensors"), tensors)
    index = {"metadata": {"total_size": 2 * tiny_params()},
             "weight_map": dict((n, "model-0000%d-of-00002.safetensors" % (1 if i < half else 2))
                                for i, n in enumerate(names))}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    facts = vllm_model.model_dir_facts(str(directory))
    assert facts["params"] == tiny_params()
    assert facts["files"] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def test_a_quantized_checkpoint_reports_its_method_and_bytes_on_disk(tmp_path):
    directory = tmp_path / "awq"
    directory.mkdir()
    config = dict(TINY_CONFIG, quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128})
    (directory / "config.json").write_text(json.dumps(config))
    size = write_safetensors(str(directory / "model.safetensors"),
                             {"qweight": ("I32", (64, 16)), "scales": ("F16", (1, 128)), "embed": ("F16", (2048, 64))})
    facts = vllm_model.model_dir_facts(str(directory))
    assert (facts["quantization"], facts["bits"]) == ("awq", 4) and facts["weight_bytes"] == size
    assert "params_b" in facts["architecture"]     # from the shape, since packed int32 elements are not parameters


def make_broken(path, case):
    """A model directory broken in one way."""
    if case == "missing":
        return
    os.mkdir(path)
    if case == "no config":
        return
    with open(os.path.join(path, "config.json"), "w") as handle:
        handle.write("{not json" if case == "bad config" else json.dumps(TINY_CONFIG))
    weights = os.path.join(path, "model.safetensors")
    if case == "huge header":
        with open(weights, "wb") as handle:
            handle.write(struct.pack("<Q", 1 << 40))
    elif case == "truncated":
        write_safetensors(weights, tiny_tensors(), pad_data=False)


@pytest.mark.parametrize("case, fragment", [
    ("missing", "no such directory"),
    ("no config", "has no config.json"),
    ("bad config", "config.json is not JSON"),
    ("no weights", "no *.safetensors file"),
    ("huge header", "model.safetensors: header length"),
    ("truncated", "shorter than its header says"),
])
def test_problems_name_the_vllm_models_entry(tmp_path, case, fragment):
    path = str(tmp_path / "model")
    make_broken(path, case)
    models = [{"name": "hub", "model": "meta-llama/Llama-3.1-8B-Instruct"}, {"name": "fast", "model": path}]
    with pytest.raises(vllm_model.ModelFactsError) as info:
        vllm_model.model_facts(models)
    assert len(info.value.problems) == 1
    problem = info.value.problems[0]
    assert problem.startswith("vllm_models[1].model: %s: " % path) and fragment in problem, problem


def test_only_path_models_are_read_and_each_directory_once(tiny_dir):
    models = [{"name": "hub", "model": "meta-llama/Llama-3.1-8B-Instruct"}, {"name": "fast", "model": tiny_dir},
              {"name": "fast-too", "model": tiny_dir + "/"}]
    facts = vllm_model.model_facts(models)
    assert list(facts) == [tiny_dir]
    assert vllm_model.is_path_model(tiny_dir) and not vllm_model.is_path_model("Qwen/Qwen3-8B")
    assert vllm_model.model_facts([{"name": "hub", "model": "Qwen/Qwen3-8B"}]) == {}


def test_the_labs_tiny_model_when_built():
    """tools/build_tiny_model.py's directory (make setup builds it): the reader agrees with the builder's config."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".cache", "models", "llmstack-tiny")
    if not os.path.isfile(os.path.join(path, "model.safetensors")):
        pytest.skip("the tiny model is not built here")
    facts = vllm_model.model_dir_facts(os.path.abspath(path))
    assert facts["architecture"]["head_dim"] == 32 and facts["checkpoint_dtypes"].keys() == {"BF16"}
    assert facts["weight_bytes"] == 2 * facts["params"]
