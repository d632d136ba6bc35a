"""module_utils.vllm_plan: the seeds' layouts, hand-computed KV and weight numbers, placement, refusals.

Hand computations (in the comments) use the catalog's config.json numbers and the formulas in the
module docstring; they are done here independently of the code, not copied from its output."""

import os

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia, vllm_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nvidia")
GIB = 1024 ** 3


def topo(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return nvidia.parse_topology(handle.read())


RTX3090 = [{"index": i, "name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576, "compute_capability": "8.6"}
           for i in range(4)]
V100 = [{"index": i, "name": "Tesla V100-SXM2-32GB", "memory_mib": 32768} for i in range(8)]   # no compute_cap

# Seed 000, platform A: GPU0 8B FP16 (fast), GPU1 14B GPTQ-Int4 (balanced), GPU2-3 32B AWQ TP=2 (reasoning).
PLATFORM_A = [
    {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "float16", "max_model_len": 4096,
     "gpus": [0], "port": 8001},
    {"name": "balanced", "model": "Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4", "max_model_len": 8192, "gpus": [1]},
    {"name": "reasoning", "model": "casperhansen/deepseek-r1-distill-qwen-32b-awq", "max_model_len": 8192,
     "gpus": [2, 3]},
]


def by_name(result):
    return dict((s["name"], s) for s in result["services"])


def test_seed_platform_a_fits_as_the_seed_lays_it_out():
    services = by_name(vllm_plan.plan(RTX3090, PLATFORM_A, topo("topo-platform-a.txt")))
    assert [(n, s["gpus"], s["tensor_parallel_size"]) for n, s in sorted(services.items())] == [
        ("balanced", [1], 1), ("fast", [0], 1), ("reasoning", [2, 3], 2)]
    assert services["balanced"]["quantization"] == "gptq" and services["reasoning"]["quantization"] == "awq"
    assert services["fast"]["port"] == 8001


def test_llama_8b_fp16_numbers_by_hand():
    fast = by_name(vllm_plan.plan(RTX3090, PLATFORM_A[:1]))["fast"]["estimates"]
    # KV: 2 (K,V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes = 131072 bytes per token.
    assert fast["kv_bytes_per_token"] == 131072 == fast["kv_bytes_per_token_per_gpu"]
    # Weights: 8.03e9 params x 2 bytes x 1.02 = 16.3812e9 bytes = 15.256 GiB.
    assert fast["weights_gib_per_gpu"] == pytest.approx(15.26, abs=0.01)
    # Budget 24 GiB x 0.9 = 21.6; reserve 1.0 + 0.5 (CUDA graphs) = 1.5; free = 21.6 - 15.256 - 1.5 = 4.844 GiB.
    assert fast["free_gib_per_gpu"] == pytest.approx(4.84, abs=0.01)
    # 4.844 GiB / (16 x 131072 bytes per block) = 2480.2 blocks -> 2480 x 16 = 39680 tokens; 39680/4096 = 9.69.
    assert fast["kv_tokens"] == 39680 and fast["concurrency_at_max_len"] == pytest.approx(9.69, abs=0.01)


def test_32b_awq_tp2_numbers_by_hand_and_seed_001_layout():
    # Seed 001: DeepSeek-R1-Distill-Qwen-32B-AWQ, TP=2, util 0.92, max len 8192, enforce_eager, on 2 x 24 GB.
    model = {"name": "r1", "model": "DeepSeek-R1-Distill-Qwen-32B-AWQ", "gpus": [0, 1], "gpu_memory_utilization": 0.92,
             "max_model_len": 8192, "enforce_eager": True}
    service = vllm_plan.plan(RTX3090[:2], [model])["services"][0]
    est = service["estimates"]
    # KV: 2 x 64 x 8 x 128 x 2 = 262144 bytes per token; 8 KV heads over TP 2 -> 131072 per GPU.
    assert (est["kv_bytes_per_token"], est["kv_bytes_per_token_per_gpu"]) == (262144, 131072)
    # Weights: embeddings 152064 x 5120 x 2 = 1.557e9 params at 2 bytes = 3.114e9 B; the other 31.203e9 params at
    # 0.5 + 2.5/128 bytes = 16.214e9 B; total 19.328e9 B / 2 GPUs x 1.02 = 9.857e9 B = 9.18 GiB per GPU.
    assert est["weights_gib_per_gpu"] == pytest.approx(9.18, abs=0.01)
    # Budget 24 x 0.92 = 22.08; reserve 1.0 (eager); free = 22.08 - 9.18 - 1.0 = 11.90 GiB.
    assert est["free_gib_per_gpu"] == pytest.approx(11.90, abs=0.01)
    # Seed 002's rule: min(256, floor(11.90 x 12)) = 142.
    assert service["max_num_seqs"] == 142 and est["concurrency_at_max_len"] > 1


def test_seed_000_122b_fp16_on_two_24gb_cards_is_refused_with_the_shortfall():
    model = {"name": "reasoning", "model": "Qwen/Qwen3.5-122B-A10B", "dtype": "float16", "tensor_parallel_size": 2,
             "gpus": [2, 3], "max_model_len": 8192}
    with pytest.raises(vllm_plan.PlanError) as info:
        vllm_plan.plan(RTX3090, [model])
    message = str(info.value)
    # 122e9 x 2 bytes / 2 GPUs x 1.02 = 124.44e9 B = 115.89 GiB per GPU, + 1.5 reserve against a 21.6 budget.
    assert "model reasoning (Qwen/Qwen3.5-122B-A10B): does not fit on GPU(s) [2, 3]" in message
    assert "weights 115.89 GiB" in message and "by 95.79 GiB" in message


def test_a_kv_cache_too_small_for_one_sequence_is_refused():
    # QwQ-32B-AWQ on one 24 GB card: weights 18.35 GiB + 1.5 leave 1.75 GiB, but 32768 tokens x 262144 B = 8 GiB.
    with pytest.raises(vllm_plan.PlanError, match=r"one 32768-token sequence needs 8\.00 GiB of KV cache"):
        vllm_plan.plan(RTX3090, [{"name": "qwq", "model": "Qwen/QwQ-32B-AWQ", "gpus": [0], "max_model_len": 32768}])


def test_automatic_placement_puts_the_largest_model_first_on_the_smallest_tp_that_fits():
    models = [{"name": "small", "model": "Qwen/Qwen2.5-7B-Instruct"},
              {"name": "big", "model": "Qwen/QwQ-32B-AWQ", "max_model_len": 8192}]
    services = by_name(vllm_plan.plan(RTX3090, models, topo("topo-platform-a.txt")))
    # QwQ-32B-AWQ does not fit one card at 8192 (1.75 GiB free < 2 GiB for one sequence): TP=2 on GPUs 0-1.
    assert services["big"]["gpus"] == [0, 1] and services["small"]["gpus"] == [2]


def test_tp_groups_prefer_nvlink():
    # Platform B's printed rows: GPU0-GPU1 NV2, GPU0-GPU3 NV1, GPU0-GPU4 PHB.
    gpus = [dict(g, compute_capability="7.0") for g in V100]
    model = {"name": "m", "model": "Qwen/Qwen2.5-14B-Instruct", "dtype": "float16", "tensor_parallel_size": 2}
    service = vllm_plan.plan(gpus, [model], topo("topo-platform-b-excerpt.txt"))["services"][0]
    assert service["gpus"] == [0, 1]


def test_tp4_over_pcie_for_a_model_that_fits_one_gpu_warns():
    model = {"name": "nine", "model": "Qwen/Qwen2.5-7B-Instruct", "tensor_parallel_size": 4}
    result = vllm_plan.plan(RTX3090, [model], topo("topo-platform-a.txt"))
    assert result["services"][0]["gpus"] == [0, 1, 2, 3]
    assert any("tensor_parallel_size 4 over PHB (no NVLink) for a model that fits on 1 GPU" in w
               for w in result["warnings"])


def test_kv_heads_fewer_than_tp_are_replicated():
    # Qwen2.5-7B has 4 KV heads; over TP 8 each GPU keeps 1: 2 x 28 x 1 x 128 x 2 = 14336 bytes per token.
    gpus = [dict(g, compute_capability="8.6", index=i) for i, g in enumerate(RTX3090 * 2)]
    service = vllm_plan.plan(gpus, [{"name": "m", "model": "Qwen/Qwen2.5-7B-Instruct", "gpus": list(range(8)),
                                     "architecture": {"attention_heads": 32}}])["services"][0]
    assert service["estimates"]["kv_bytes_per_token_per_gpu"] == 14336


def test_v100_generation_checks():
    gpus = V100   # compute capability from the product name: V100 -> 7.0
    with pytest.raises(vllm_plan.PlanError) as info:
        vllm_plan.plan(gpus, [
            {"name": "bf", "model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "bfloat16", "gpus": [0]},
            # Seed 000's platform B table: Llama-3.1-70B INT4 (AWQ) TP=4 - AWQ has no Volta kernels in vLLM.
            {"name": "reasoning", "model": "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "gpus": [3, 4, 5, 6],
             "max_model_len": 8192},
        ])
    text = str(info.value)
    assert "model bf (meta-llama/Llama-3.1-8B-Instruct): dtype bfloat16 needs compute capability 8.0+, GPU 0 " \
           "(Tesla V100-SXM2-32GB) is 7.0: use dtype float16" in text
    assert "AWQ kernels need compute capability 7.5+ in vLLM, GPU 3 (Tesla V100-SXM2-32GB) is 7.0" in text


def test_platform_b_lab_layout_with_gptq_fits():
    models = [{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "float16", "max_model_len": 8192,
               "gpus": [0]},
              {"name": "reasoning", "model": "hugging-quants/Meta-Llama-3.1-70B-Instruct-GPTQ-INT4",
               "quantization": "gptq", "max_model_len": 8192, "gpus": [1, 2, 3, 4], "tensor_parallel_size": 4}]
    services = by_name(vllm_plan.plan(V100, models))
    # 70B: 2 x 80 x 8 x 128 x 2 = 327680 bytes per token; 8 KV heads over TP 4 -> 81920 per GPU.
    assert services["reasoning"]["estimates"]["kv_bytes_per_token_per_gpu"] == 81920
    assert services["reasoning"]["quantization"] == "gptq"


@pytest.mark.parametrize("util, outcome", [(0.92, None), (0.93, "warn"), (0.96, "fail")])
def test_utilization_limits_from_seed_001(util, outcome):
    model = dict(PLATFORM_A[0], gpu_memory_utilization=util)
    if outcome == "fail":
        with pytest.raises(vllm_plan.PlanError, match="gpu_memory_utilization 0.96 is above 0.95"):
            vllm_plan.plan(RTX3090, [model])
        return
    warnings = vllm_plan.plan(RTX3090, [model])["warnings"]
    assert bool([w for w in warnings if "above 0.92" in w]) == (outcome == "warn")


def test_two_models_share_a_gpu_only_with_fractions():
    a = {"name": "a", "model": "Qwen/Qwen2.5-7B-Instruct", "gpus": [0], "max_model_len": 2048}
    b = {"name": "b", "model": "mistralai/Mistral-7B-Instruct-v0.3", "gpus": [0], "max_model_len": 2048}
    big = [dict(g, memory_mib=81920, name="NVIDIA H100 80GB HBM3") for g in RTX3090]
    with pytest.raises(vllm_plan.PlanError, match="GPU 0 is given to model a .*, model b .*; two models share a GPU "
                                                  "only when each sets gpu_memory_utilization"):
        vllm_plan.plan(big, [a, b])
    result = vllm_plan.plan(big, [dict(a, gpu_memory_utilization=0.45), dict(b, gpu_memory_utilization=0.45)])
    assert [s["gpus"] for s in result["services"]] == [[0], [0]]
    with pytest.raises(vllm_plan.PlanError, match=r"ask for gpu_memory_utilization 1\.00 in all"):
        vllm_plan.plan(big, [dict(a, gpu_memory_utilization=0.5), dict(b, gpu_memory_utilization=0.5)])


def test_unknown_model_needs_architecture_or_config_json(tmp_path):
    with pytest.raises(vllm_plan.PlanError, match="is not in the catalog; give architecture"):
        vllm_plan.plan(RTX3090, [{"name": "x", "model": "someone/unknown-7b"}])
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, '
                      '"num_hidden_layers": 32, "vocab_size": 128256, "intermediate_size": 14336, '
                      '"max_position_embeddings": 131072}')
    service = vllm_plan.plan(RTX3090, [{"name": "x", "model": "someone/unknown-8b", "config_json": str(config)}])
    estimate = service["services"][0]["estimates"]
    # Llama-3.1-8B's shape: the estimate gives 8.03e9 params, so the same 15.26 GiB of weights.
    assert estimate["weights_gib_per_gpu"] == pytest.approx(15.26, abs=0.02)


def test_bad_input_names_the_model_and_key():
    with pytest.raises(vllm_plan.PlanError) as info:
        vllm_plan.plan(RTX3090, [
            {"name": "a", "model": "Qwen/Qwen2.5-7B-Instruct", "dtype": "float8", "gpus": [9]},
            {"name": "a", "model": "Qwen/Qwen2.5-7B-Instruct", "quantization": "int3", "flavour": 1},
            {"name": "c", "model": "Qwen/Qwen2.5-7B-Instruct", "max_model_len": 65536},
        ])
    text = str(info.value)
    for fragment in ("model a (Qwen/Qwen2.5-7B-Instruct): dtype 'float8' is not float16, bfloat16 or float32",
                     "quantization 'int3' is not one of awq, gptq, fp8", "unknown keys flavour",
                     "models: name 'a' appears 2 times", "max_model_len 65536 is above the model's 32768 positions"):
        assert fragment in text


# Issue 20: a wrong type is a problem naming the model and the key, never a Python exception.
@pytest.mark.parametrize("changes, fragment", [
    ({"max_model_len": "lots"}, "max_model_len 'lots' is not a whole number"),
    ({"gpu_memory_utilization": "most"}, "gpu_memory_utilization 'most' is not a fraction"),
    ({"tensor_parallel_size": "two"}, "tensor_parallel_size 'two'"),
    ({"max_num_seqs": [64]}, "max_num_seqs [64]"),
    ({"gpus": ["first"]}, "gpus ['first'] must be a non-empty list"),
    ({"architecture": {"params_b": "8b", "layers": 32}}, "architecture.params_b '8b' is not a number"),
])
def test_wrong_types_are_problems_not_exceptions(changes, fragment):
    with pytest.raises(vllm_plan.PlanError) as raised:
        vllm_plan.plan(RTX3090, [dict(PLATFORM_A[0], **changes)])
    assert any(fragment in p and "model fast" in p for p in raised.value.problems), raised.value.problems


def test_numbers_given_as_digit_strings_are_used_as_numbers():
    planned = vllm_plan.plan(RTX3090, [dict(PLATFORM_A[0], max_model_len="4096", gpus=["0"], bits="4")])
    assert planned["services"][0]["max_model_len"] == 4096 and planned["services"][0]["gpus"] == [0]


@pytest.mark.parametrize("host, gpus, topology", [
    ("gpu-3090", RTX3090, "topo-platform-a.txt"), ("gpu-v100", V100, None)])
def test_the_example_inventory_is_accepted_by_the_planner(host, gpus, topology):
    """inventories/example places the seeds' models on the seeds' GPUs: every model there must be one the planner
    knows (a public repository in its catalog) and that fits where the inventory puts it."""
    import yaml
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "inventories", "example", "host_vars",
                        host + ".yml")
    with open(path) as handle:
        models = yaml.safe_load(handle)["vllm_models"]
    services = by_name(vllm_plan.plan(gpus, models, topo(topology) if topology else None))
    assert sorted(services) == sorted(model["name"] for model in models)
    for model in models:
        entry = vllm_plan.catalog_entry(model["model"])
        # A repository the catalog names in full (owner/name), not only a name that matches after the owner.
        assert entry is not None and model["model"].lower() in [
            name.lower() for name in [entry["model"]] + entry.get("aliases", []) if "/" in name], model["model"]
        assert services[model["name"]]["gpus"] == model["gpus"]
        assert services[model["name"]]["estimates"]["concurrency_at_max_len"] >= 1, model["name"]


def test_served_model_name_is_refused_the_model_is_served_as_its_name():
    """vllm_deploy serves every model as its name (the name the gateway routes to): a served_model_name would be
    ignored without a word, so it is refused naming the model."""
    with pytest.raises(vllm_plan.PlanError, match=r"model fast \(Qwen/Qwen2.5-7B-Instruct\): unknown keys "
                                                  r"served_model_name"):
        vllm_plan.plan(RTX3090, [{"name": "fast", "model": "Qwen/Qwen2.5-7B-Instruct", "gpus": [0],
                                  "served_model_name": "qwen-7b"}])


def test_custom_all_reduce_asked_for_across_the_sockets_is_refused():
    """Custom all-reduce needs P2P between the GPUs: refused when asked for over a SYS link, fine over NVLink or
    when vLLM decides (unset)."""
    sys_link = {"links": {"GPU0": {"GPU1": "SYS"}, "GPU1": {"GPU0": "SYS"}}}
    model = {"name": "m", "model": "Qwen/Qwen2.5-14B-Instruct", "gpus": [0, 1], "disable_custom_all_reduce": False}
    with pytest.raises(vllm_plan.PlanError) as info:
        vllm_plan.plan(RTX3090, [model], sys_link)
    assert any("disable_custom_all_reduce false on GPUs [0, 1], linked through SYS" in p for p in info.value.problems)
    assert vllm_plan.plan(RTX3090, [dict(model, disable_custom_all_reduce=None)], sys_link)["services"]
    nvlink = {"links": {"GPU0": {"GPU1": "NV4"}, "GPU1": {"GPU0": "NV4"}}}
    assert vllm_plan.plan(RTX3090, [model], nvlink)["services"][0]["disable_custom_all_reduce"] is False


# -- CPU models (vLLM's CPU backend) and local model directories ----------------------------------------------
LLAMA_CPU = {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "device": "cpu", "dtype": "bfloat16",
             "max_model_len": 4096}
TINY_FACTS = {"/data/llm/models/llmstack-tiny": {
    "architecture": {"layers": 2, "attention_heads": 4, "kv_heads": 2, "head_dim": 32, "hidden_size": 64,
                     "vocab_size": 2048, "tie": False, "max_position": 1024, "intermediate_size": 128,
                     "params_b": 360768 / 1e9},
    "torch_dtype": "bfloat16", "weight_bytes": 2 * 360768, "params": 360768, "quantization": None, "bits": None}}


def test_a_cpu_model_is_sized_against_its_kv_cache_space_by_hand():
    service = vllm_plan.plan([], [LLAMA_CPU], device="gpu", cpu_kvcache_space_gib=4,
                             host_memory_mib=32768)["services"][0]
    est = service["estimates"]
    assert (service["device"], service["gpus"], service["tensor_parallel_size"]) == ("cpu", [], 1)
    assert service["gpu_memory_utilization"] is None and service["cpu_kvcache_space_gib"] == 4
    # KV: 2 x 32 layers x 8 KV heads x 128 x 2 bytes (bfloat16) = 131072 bytes per token; 4 GiB / 131072 = 32768
    # tokens; 32768 / 4096 = 8 sequences at max_model_len.
    assert est["kv_bytes_per_token"] == 131072 and est["kv_tokens"] == 32768
    assert est["concurrency_at_max_len"] == 8.0 and est["kv_space_gib"] == 4
    # Weights 8.03e9 x 2 x 1.02 = 16.3812e9 B = 15.26 GiB; host 32 GiB - 15.26 - 4 = 12.74 GiB left.
    assert est["weights_gib"] == pytest.approx(15.26, abs=0.01)
    assert est["host_memory_gib"] == 32.0 and est["host_free_gib"] == pytest.approx(12.74, abs=0.01)
    # max_num_seqs: seed 002's rule on the KV space: min(256, floor(4 x 12)) = 48.
    assert service["max_num_seqs"] == 48


def test_the_per_model_space_and_device_override_the_defaults():
    model = dict(LLAMA_CPU, device=None, cpu_kvcache_space_gib=2, max_model_len=8192)
    service = vllm_plan.plan([], [model], device="cpu", cpu_kvcache_space_gib=4)["services"][0]
    # 2 GiB / 131072 = 16384 tokens = 2 x 8192.
    assert service["device"] == "cpu" and service["estimates"]["kv_tokens"] == 16384
    assert service["cpu_kvcache_space_gib"] == 2 and service["estimates"]["concurrency_at_max_len"] == 2.0
    assert "host_memory_gib" not in service["estimates"]


def test_a_max_model_len_that_does_not_fit_the_kv_space_is_refused():
    model = dict(LLAMA_CPU, max_model_len=32768, cpu_kvcache_space_gib=2)
    with pytest.raises(vllm_plan.PlanError) as info:
        vllm_plan.plan([], [model])
    # One 32768-token sequence: 32768 x 131072 B = 4 GiB; 2 GiB hold 16384 tokens: 2 GiB short.
    message = str(info.value)
    assert "model fast (meta-llama/Llama-3.1-8B-Instruct): one 32768-token sequence needs 4.00 GiB" in message
    assert "cpu_kvcache_space_gib 2 GiB holds 16384 tokens: 2.00 GiB short" in message


def test_weights_and_kv_space_above_the_host_memory_are_refused():
    with pytest.raises(vllm_plan.PlanError) as info:
        vllm_plan.plan([], [LLAMA_CPU], host_memory_mib=16384)
    # 15.26 GiB weights + 4 GiB KV cache space = 19.26 GiB > 16 GiB: 3.26 GiB over.
    assert "weights 15.26 GiB + KV cache space 4 GiB = 19.26 GiB exceed the host's 16.00 GiB of memory by 3.26 GiB" \
        in str(info.value)
    two = [dict(LLAMA_CPU, name="a"), dict(LLAMA_CPU, name="b")]
    with pytest.raises(vllm_plan.PlanError, match=r"the cpu models \(model a .*, model b .*\) need 38\.51 GiB"):
        vllm_plan.plan([], two, host_memory_mib=32768)


def test_float32_doubles_weights_and_kv_cache():
    service = vllm_plan.plan([], [dict(LLAMA_CPU, dtype="float32", max_model_len=2048)])["services"][0]
    est = service["estimates"]
    # 8.03e9 x 4 x 1.02 = 32.7624e9 B = 30.51 GiB; KV 2 x 32 x 8 x 128 x 4 = 262144 B/token -> 16384 tokens.
    assert est["weights_gib"] == pytest.approx(30.51, abs=0.01) and est["kv_bytes_per_token"] == 262144
    assert est["kv_tokens"] == 16384 and service["dtype"] == "float32"
    gpu = vllm_plan.plan(RTX3090, [{"name": "f", "model": "Qwen/Qwen2.5-7B-Instruct", "dtype": "float32",
                                    "gpus": [0, 1], "max_model_len": 1024}])["services"][0]
    # 7.62e9 x 4 / 2 x 1.02 = 15.5448e9 B = 14.48 GiB per GPU.
    assert gpu["estimates"]["weights_gib_per_gpu"] == pytest.approx(14.48, abs=0.01)


@pytest.mark.parametrize("changes, fragment", [
    ({"gpus": [0]}, "gpus [0]: a cpu model (device cpu) runs on no GPU"),
    ({"tensor_parallel_size": 2}, "tensor_parallel_size 2: a cpu model runs one process"),
    ({"gpu_memory_utilization": 0.5}, "gpu_memory_utilization is for GPU models"),
    ({"cpu_kvcache_space_gib": 0}, "cpu_kvcache_space_gib 0 is not a whole number of GiB >= 1"),
    ({"device": "tpu"}, "device 'tpu' is not gpu or cpu"),
    ({"device": "gpu", "cpu_kvcache_space_gib": 4}, "cpu_kvcache_space_gib is for cpu models"),
])
def test_cpu_refusals_name_the_model_and_key(changes, fragment):
    with pytest.raises(vllm_plan.PlanError) as info:
        vllm_plan.plan(RTX3090, [dict(LLAMA_CPU, **changes)])
    assert any(fragment in p for p in info.value.problems), info.value.problems


def test_cpu_models_need_no_gpus_and_gpu_models_still_do():
    assert vllm_plan.plan([], [LLAMA_CPU])["services"][0]["device"] == "cpu"
    with pytest.raises(vllm_plan.PlanError, match="gpus: no GPU to plan on"):
        vllm_plan.plan([], [LLAMA_CPU, dict(PLATFORM_A[0], name="gpu")])
    services = by_name(vllm_plan.plan(RTX3090, [LLAMA_CPU, dict(PLATFORM_A[0], name="gpu")]))
    assert services["gpu"]["device"] == "gpu" and services["gpu"]["gpus"] == [0]
    assert services["fast"]["gpus"] == [] and "weights_gib_per_gpu" not in services["fast"]["estimates"]


def test_gpu_plans_are_unchanged_by_the_cpu_options():
    before = vllm_plan.plan(RTX3090, PLATFORM_A, topo("topo-platform-a.txt"))
    after = vllm_plan.plan(RTX3090, PLATFORM_A, topo("topo-platform-a.txt"), cpu_kvcache_space_gib=8,
                           host_memory_mib=1024)
    strip = [dict((k, v) for k, v in s.items() if k != "device") for s in after["services"]]
    assert [dict((k, v) for k, v in s.items() if k != "device") for s in before["services"]] == strip
    assert all(s["device"] == "gpu" for s in after["services"])


def test_a_path_model_is_sized_from_its_facts_not_refused_for_the_catalog():
    model = {"name": "fast", "model": "/data/llm/models/llmstack-tiny", "device": "cpu", "max_model_len": 1024}
    service = vllm_plan.plan([], [model], model_facts=TINY_FACTS)["services"][0]
    est = service["estimates"]
    # KV: 2 x 2 layers x 2 KV heads x 32 (its explicit head_dim) x 2 bytes = 512 B/token; 4 GiB / 512 = 8388608.
    assert est["kv_bytes_per_token"] == 512 and est["kv_tokens"] == 8388608
    # Weights: 360768 params x 2 bytes x 1.02 = 735967 B.
    assert est["weights_gib"] == pytest.approx(735967 / GIB, abs=0.01)
    assert service["model"] == "/data/llm/models/llmstack-tiny" and service["name"] == "fast"
    assert service["dtype"] == "bfloat16"      # a cpu model's default dtype
    with pytest.raises(vllm_plan.PlanError, match="max_model_len 4096 is above the model's 1024 positions"):
        vllm_plan.plan([], [dict(model, max_model_len=4096)], model_facts=TINY_FACTS)


def test_a_path_model_without_facts_is_refused_and_its_name_never_looks_up_the_catalog():
    model = {"name": "fast", "model": "/models/Llama-3.1-8B-Instruct", "device": "cpu", "max_model_len": 1024}
    with pytest.raises(vllm_plan.PlanError, match="a local model directory that was not read"):
        vllm_plan.plan([], [model])
    facts = {"/models/Llama-3.1-8B-Instruct": TINY_FACTS["/data/llm/models/llmstack-tiny"]}
    service = vllm_plan.plan([], [model], model_facts=facts)["services"][0]
    assert service["estimates"]["kv_bytes_per_token"] == 512       # the directory's numbers, not the catalog's


def test_a_quantized_path_model_is_sized_by_its_bytes_on_disk():
    facts = {"/m/awq": dict(TINY_FACTS["/data/llm/models/llmstack-tiny"], quantization="awq", bits=4,
                            weight_bytes=4 * GIB)}
    model = {"name": "q", "model": "/m/awq", "device": "cpu", "max_model_len": 1024}
    service = vllm_plan.plan([], [model], model_facts=facts)["services"][0]
    # 4 GiB on disk x 1.02 = 4.08 GiB.
    assert service["quantization"] == "awq" and service["estimates"]["weights_gib"] == pytest.approx(4.08, abs=0.01)
