# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU placement and memory planning for vLLM (the vllm_plan module). Plain Python.

The arithmetic, per model and per GPU of its tensor-parallel group (every number is in the output, so a
reader can redo it):

- weights = (embedding params x 2 bytes + other params x bytes/param) / TP x (1 + WEIGHT_OVERHEAD). Bytes per
  param: float16/bfloat16 2; fp8 1; GPTQ/AWQ int4 0.5 and int8 1, plus one fp16 scale and a packed zero point
  per group of 128 weights (+2.5/128 bytes). Embeddings and the LM head stay 16-bit in quantized checkpoints.
- budget = GPU memory x gpu_memory_utilization (vLLM's limit for the whole instance).
- reserve = RESERVE_GIB (CUDA context, activations of the profiling run) + CUDA_GRAPH_GIB unless enforce_eager.
- free = budget - weights - reserve: what vLLM gives the KV cache.
- KV bytes per token and GPU = 2 (K and V) x layers x KV heads on the GPU x head dim x KV dtype bytes, with
  KV heads on the GPU = KV heads / TP when KV heads >= TP, else 1 (replicated) - vLLM's own formula. Models
  with MLA (DeepSeek-V2/V3) or sliding-window layers use less; this planner does not model them and
  over-estimates their KV cache (it errs on the safe side).
- KV tokens = floor(free / (16 x KV bytes per token)) x 16 (vLLM's 16-token blocks); concurrency at
  max_model_len = KV tokens / max_model_len; a model whose KV cache cannot hold one max_model_len sequence
  does not start in vLLM, and is refused here with the shortfall in GiB.
- max_num_seqs default: seed 002's rule min(256, floor(free GiB x 12)), 256 being vLLM's default cap.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
import math
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia, value_checks, vllm_model

GIB = 1024 ** 3
MIB = 1024 ** 2
BLOCK_TOKENS = 16
WEIGHT_OVERHEAD = 0.02
RESERVE_GIB = 1.0
CUDA_GRAPH_GIB = 0.5
UTILIZATION_WARN = 0.92
UTILIZATION_MAX = 0.95
DEFAULT_UTILIZATION = 0.9
DEFAULT_MAX_MODEL_LEN = 4096
MAX_NUM_SEQS_CAP = 256
GROUP_OVERHEAD = 2.5 / 128
DTYPES = ("float16", "bfloat16", "float32")
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
DEVICES = ("gpu", "cpu")
DEFAULT_CPU_KVCACHE_GIB = 4
CPU_DEFAULT_DTYPE = "bfloat16"
QUANTIZATIONS = (None, "awq", "gptq", "fp8")
KV_DTYPES = ("auto", "fp8")

# Compute capability each weight format needs in vLLM (docs.vllm.ai, features/quantization/supported_hardware:
# AWQ Turing+, GPTQ Volta+, FP8 W8A8 Ada+; FP8 weight-only through Marlin from Turing, per the FP8 W8A8 page).
QUANTIZATION_MIN_CC = {"awq": (7, 5), "gptq": (7, 0), "fp8": (7, 5)}
FP8_NATIVE_CC = (8, 9)
BF16_MIN_CC = (8, 0)

# Compute capability by product name, for drivers that do not print compute_cap (NVIDIA's CUDA GPUs list).
CC_BY_NAME = (
    (r"V100", "7.0"), (r"TITAN V", "7.0"), (r"\bT4\b", "7.5"), (r"RTX 20\d\d|TITAN RTX|Quadro RTX", "7.5"),
    (r"A100|A800|A30\b", "8.0"), (r"RTX 30\d\d|\bA10\b|\bA40\b|A[2456]000|A16\b|A2\b", "8.6"),
    (r"RTX 40\d\d|\bL4\b|L40|RTX [2-6]000 Ada", "8.9"), (r"H100|H200|H800|GH200", "9.0"), (r"B100|B200", "10.0"),
)


def _hf(repo):
    return "https://huggingface.co/%s/blob/main/config.json" % repo


# Architecture numbers from each model's config.json (the source named): params in billions (the model
# card's count), layers (num_hidden_layers), attention_heads, kv_heads (num_key_value_heads), head_dim
# (hidden_size / heads unless the config sets it), hidden_size, vocab_size, tie (tie_word_embeddings),
# max_position (max_position_embeddings). Aliases are quantized or renamed checkpoints of the same model.
CATALOG = [
    {"model": "meta-llama/Llama-3.1-8B-Instruct", "params_b": 8.03, "layers": 32, "attention_heads": 32,
     "kv_heads": 8, "head_dim": 128, "hidden_size": 4096, "vocab_size": 128256, "tie": False,
     "max_position": 131072, "source": _hf("meta-llama/Llama-3.1-8B-Instruct"),
     "aliases": ["meta-llama/Meta-Llama-3.1-8B-Instruct", "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
                 "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"]},
    {"model": "meta-llama/Llama-3.1-70B-Instruct", "params_b": 70.55, "layers": 80, "attention_heads": 64,
     "kv_heads": 8, "head_dim": 128, "hidden_size": 8192, "vocab_size": 128256, "tie": False,
     "max_position": 131072, "source": _hf("meta-llama/Llama-3.1-70B-Instruct"),
     "aliases": ["meta-llama/Meta-Llama-3.1-70B-Instruct", "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
                 "hugging-quants/Meta-Llama-3.1-70B-Instruct-GPTQ-INT4"]},
    {"model": "Qwen/Qwen2.5-7B-Instruct", "params_b": 7.62, "layers": 28, "attention_heads": 28, "kv_heads": 4,
     "head_dim": 128, "hidden_size": 3584, "vocab_size": 152064, "tie": False, "max_position": 32768,
     "source": _hf("Qwen/Qwen2.5-7B-Instruct"),
     "aliases": ["Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4"]},
    {"model": "Qwen/Qwen2.5-14B-Instruct", "params_b": 14.77, "layers": 48, "attention_heads": 40, "kv_heads": 8,
     "head_dim": 128, "hidden_size": 5120, "vocab_size": 152064, "tie": False, "max_position": 32768,
     "source": _hf("Qwen/Qwen2.5-14B-Instruct"),
     "aliases": ["Qwen/Qwen2.5-14B-Instruct-AWQ", "Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4",
                 "Qwen/Qwen2.5-14B-Instruct-GPTQ-Int8", "Qwen/Qwen2.5-14B-Chat-GPTQ-Int4"]},
    {"model": "Qwen/Qwen2.5-32B-Instruct", "params_b": 32.76, "layers": 64, "attention_heads": 40, "kv_heads": 8,
     "head_dim": 128, "hidden_size": 5120, "vocab_size": 152064, "tie": False, "max_position": 32768,
     "source": _hf("Qwen/Qwen2.5-32B-Instruct"),
     "aliases": ["Qwen/Qwen2.5-32B-Instruct-AWQ", "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4"]},
    {"model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "params_b": 32.76, "layers": 64, "attention_heads": 40,
     "kv_heads": 8, "head_dim": 128, "hidden_size": 5120, "vocab_size": 152064, "tie": False,
     "max_position": 131072, "source": _hf("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"),
     "aliases": ["casperhansen/deepseek-r1-distill-qwen-32b-awq", "DeepSeek-R1-Distill-Qwen-32B-AWQ"]},
    {"model": "Qwen/QwQ-32B", "params_b": 32.76, "layers": 64, "attention_heads": 40, "kv_heads": 8, "head_dim": 128,
     "hidden_size": 5120, "vocab_size": 152064, "tie": False, "max_position": 40960, "source": _hf("Qwen/QwQ-32B"),
     "aliases": ["Qwen/QwQ-32B-AWQ"]},
    {"model": "Qwen/Qwen3-8B", "params_b": 8.19, "layers": 36, "attention_heads": 32, "kv_heads": 8, "head_dim": 128,
     "hidden_size": 4096, "vocab_size": 151936, "tie": False, "max_position": 40960, "source": _hf("Qwen/Qwen3-8B"),
     "aliases": ["Qwen/Qwen3-8B-AWQ", "Qwen/Qwen3-8B-FP8"]},
    {"model": "Qwen/Qwen3-32B", "params_b": 32.8, "layers": 64, "attention_heads": 64, "kv_heads": 8, "head_dim": 128,
     "hidden_size": 5120, "vocab_size": 151936, "tie": False, "max_position": 40960, "source": _hf("Qwen/Qwen3-32B"),
     "aliases": ["Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B-FP8"]},
    {"model": "mistralai/Mistral-7B-Instruct-v0.3", "params_b": 7.25, "layers": 32, "attention_heads": 32,
     "kv_heads": 8, "head_dim": 128, "hidden_size": 4096, "vocab_size": 32768, "tie": False, "max_position": 32768,
     "source": _hf("mistralai/Mistral-7B-Instruct-v0.3"), "aliases": []},
    # Seed 000 names these; its table gives the parameter count only (no config.json could be read here), so the
    # planner can size their weights but asks for the architecture before sizing a KV cache.
    {"model": "Qwen/Qwen3.5-9B", "params_b": 9.0, "source": "seed 000, model table (parameter count only)",
     "aliases": []},
    {"model": "Qwen/Qwen3.5-122B-A10B", "params_b": 122.0,
     "source": "seed 000, model table (parameter count only; MoE, all experts resident)", "aliases": []},
]
ARCH_KEYS = ("params_b", "layers", "attention_heads", "kv_heads", "head_dim", "hidden_size", "vocab_size", "tie",
             "max_position", "intermediate_size")
MODEL_KEYS = ("name", "model", "dtype", "quantization", "bits", "kv_cache_dtype", "max_model_len", "gpus",
              "tensor_parallel_size", "gpu_memory_utilization", "max_num_seqs", "enforce_eager", "architecture",
              "config_json", "device", "cpu_kvcache_space_gib")


class PlanError(value_checks.SettingsProblems):
    """Problems that stop the plan: ``problems`` lists them, each naming the model or variable."""


def catalog_entry(model):
    """The catalog's architecture of a model id (or a known alias), case-insensitive; None when unknown."""
    wanted = str(model or "").strip().lower()
    for entry in CATALOG:
        names = [entry["model"]] + entry.get("aliases", [])
        short = [n.lower().rsplit("/", maxsplit=1)[-1] for n in names]
        if wanted in [n.lower() for n in names] or wanted.rsplit("/", maxsplit=1)[-1] in short:
            return entry
    return None


# config.json parsing lives beside the model directory reader (it runs on the VM too).
architecture_from_config = vllm_model.architecture_from_config


def estimate_params_b(arch):
    """Dense decoder parameters from its shape: embeddings (x2 unless tied) + per layer attention (q, k, v, o with
    grouped KV) and a gated MLP (3 x hidden x intermediate). Billions."""
    hidden, layers, vocab = arch["hidden_size"], arch["layers"], arch["vocab_size"]
    head_dim, heads, kv_heads = arch["head_dim"], arch["attention_heads"], arch["kv_heads"]
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * arch["intermediate_size"]
    embeddings = vocab * hidden * (1 if arch.get("tie") else 2)
    return (embeddings + layers * (attention + mlp)) / 1e9


def infer_quantization(model):
    """(quantization, bits) a checkpoint name says (…-AWQ, …-GPTQ-Int4/Int8, …-FP8), or (None, None)."""
    name = str(model or "").lower()
    if "awq" in name:
        return "awq", 4
    if "gptq" in name:
        return "gptq", 8 if re.search(r"int8|8bit|w8", name) else 4
    if re.search(r"fp8", name):
        return "fp8", 8
    return None, None


def parse_cc(text):
    match = re.match(r"^\s*(\d+)\.(\d+)", str(text or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def gpu_cc(gpu):
    """(major, minor) of a GPU from its compute_capability, else from its product name; None if unknown."""
    found = parse_cc(gpu.get("compute_capability"))
    if found:
        return found
    for pattern, cc in CC_BY_NAME:
        if re.search(pattern, str(gpu.get("name") or ""), re.IGNORECASE):
            return parse_cc(cc)
    return None


def weight_bytes(arch, dtype, quantization, bits, on_disk=False):
    """Bytes of the whole model's weights. A local directory's quantized checkpoint (``on_disk``) is its bytes on
    disk (``arch['weight_bytes']``, from its safetensors headers): vLLM loads packed weights as they are."""
    if on_disk and arch.get("weight_bytes"):
        return float(arch["weight_bytes"])
    params = arch["params_b"] * 1e9
    embed = 0
    if arch.get("vocab_size") and arch.get("hidden_size"):
        embed = arch["vocab_size"] * arch["hidden_size"] * (1 if arch.get("tie") else 2)
    if quantization is None:
        return params * DTYPE_BYTES.get(dtype, 2)
    per_param = {"awq": 0.5 + GROUP_OVERHEAD, "fp8": 1.0}.get(quantization)
    if quantization == "gptq":
        per_param = (bits or 4) / 8.0 + GROUP_OVERHEAD
    return embed * 2 + (params - embed) * per_param


def kv_element_bytes(model):
    """Bytes of one KV cache element: 1 for kv_cache_dtype fp8, else the model's dtype (auto follows it)."""
    return 1 if model["kv_dtype"] == "fp8" else DTYPE_BYTES.get(model["dtype"], 2)


def kv_bytes_per_token_per_gpu(arch, tp, kv_bytes):
    kv_heads_per_gpu = max(1, arch["kv_heads"] // tp) if arch["kv_heads"] >= tp else 1
    return 2 * arch["layers"] * kv_heads_per_gpu * arch["head_dim"] * kv_bytes


INT_KEYS = ("max_model_len", "max_num_seqs", "tensor_parallel_size", "bits")


def number_problems(label, spec):
    """Numbers given as something else (``max_model_len: lots``): named here instead of crashing the arithmetic.
    Digit strings count as numbers (INI inventories give strings)."""
    problems = []
    for key in INT_KEYS:
        if spec.get(key) is not None:
            number = value_checks.as_int(spec[key])
            if number is None or number < 1:
                problems.append("%s: %s %r is not a whole number >= 1" % (label, key, spec[key]))
    if spec.get("gpu_memory_utilization") is not None:
        fraction = value_checks.as_number(spec["gpu_memory_utilization"])
        if fraction is None or not 0 < fraction <= 1:
            problems.append("%s: gpu_memory_utilization %r is not a fraction (0-1)"
                            % (label, spec["gpu_memory_utilization"]))
    gpus = spec.get("gpus")
    if gpus is not None and (not isinstance(gpus, list) or not gpus
                             or any(value_checks.as_int(g) is None for g in gpus)):
        problems.append("%s: gpus %r must be a non-empty list of GPU indices" % (label, gpus))
    architecture = spec.get("architecture")
    if architecture is not None and not isinstance(architecture, dict):
        problems.append("%s: architecture must be a mapping" % label)
    elif architecture:
        for key, value in architecture.items():
            if value is not None and key != "tie" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                problems.append("%s: architecture.%s %r is not a number" % (label, key, value))
    return problems


def _read_text(path):
    with open(path) as handle:
        return handle.read()


def _round(value, digits=2):
    return float("%.*f" % (digits, value))


class Planner(object):
    def __init__(self, gpus, topology=None, gpu_memory_utilization=DEFAULT_UTILIZATION, read_file=None, device="gpu",
                 cpu_kvcache_space_gib=DEFAULT_CPU_KVCACHE_GIB, host_memory_mib=None, model_facts=None):
        self.gpus = sorted([dict(g) for g in gpus or []], key=lambda g: int(g["index"]))
        self.by_index = dict((int(g["index"]), g) for g in self.gpus)
        self.topology = topology or {}
        self.default_util = float(gpu_memory_utilization)
        self.read_file = read_file
        self.default_device = device or "gpu"
        self.default_kv_space = cpu_kvcache_space_gib
        self.host_memory_mib = host_memory_mib
        self.model_facts = dict((vllm_model.normalize(k), v) for k, v in (model_facts or {}).items())
        self.problems = []
        self.warnings = []

    def device_of(self, spec):
        return spec.get("device") or self.default_device

    # -- the model's numbers -----------------------------------------------------------------------------
    def resolve(self, index, spec):
        label = "model %s (%s)" % (spec.get("name") or "models[%d]" % index, spec.get("model") or "?")
        # served_model_name is not one: the model is served as its name (--served-model-name <name>), the name the
        # gateway routes to; accepting another one would be silently ignored.
        passed_through = {"port", "lora_modules", "extra_args", "env", "image", "api_key", "revision", "max_loras",
                          "max_lora_rank", "block_size", "enable_chunked_prefill", "disable_custom_all_reduce",
                          "nccl_p2p_disable", "nccl_ib_disable"}
        unknown = sorted(set(spec) - set(MODEL_KEYS) - passed_through)
        if unknown:
            self.problems.append("%s: unknown keys %s" % (label, ", ".join(unknown)))
        for key in ("name", "model"):
            if not spec.get(key):
                self.problems.append("%s: needs %s" % (label, key))
        wrong = number_problems(label, spec)
        device = self.device_of(spec)
        wrong.extend(self.device_problems(label, spec, device))
        if wrong:
            self.problems.extend(wrong)
            return None
        arch, facts = {}, None
        path_model = vllm_model.is_path_model(spec.get("model"))
        if path_model:
            # A local directory is sized from its own files (vllm_model_facts, on the VM), never by its name.
            facts = self.model_facts.get(vllm_model.normalize(spec["model"]))
            if facts:
                arch.update(facts.get("architecture") or {})
                if facts.get("weight_bytes"):
                    arch["weight_bytes"] = facts["weight_bytes"]
        else:
            entry = catalog_entry(spec.get("model"))
            if entry:
                arch.update((k, entry[k]) for k in ARCH_KEYS if k in entry)
        if spec.get("config_json"):
            try:
                text = (self.read_file or _read_text)(spec["config_json"])
                arch.update(architecture_from_config(text))
            except (OSError, ValueError) as exc:
                self.problems.append("%s: config_json %s: %s" % (label, spec["config_json"], exc))
        arch.update(dict((k, v) for k, v in (spec.get("architecture") or {}).items() if v is not None))
        if "params_b" not in arch and all(arch.get(k) for k in ("hidden_size", "layers", "vocab_size", "head_dim",
                                                                "attention_heads", "kv_heads", "intermediate_size")):
            arch["params_b"] = _round(estimate_params_b(arch), 3)
        if "params_b" not in arch:
            if path_model:
                self.problems.append("%s: a local model directory that was not read: give model_facts (the "
                                     "vllm_model_facts module reads its config.json and safetensors headers on the "
                                     "host) or architecture {params_b, layers, attention_heads, kv_heads, head_dim}"
                                     % label)
            else:
                self.problems.append("%s: model %r is not in the catalog; give architecture {params_b, layers, "
                                     "attention_heads, kv_heads, head_dim} or config_json" % (label, spec.get("model")))
            return None
        quantization, bits = spec.get("quantization"), value_checks.as_int(spec.get("bits"))
        on_disk = False
        if quantization is None and facts and facts.get("quantization"):
            # The checkpoint says it is quantized (config.json quantization_config): its bytes on disk are its
            # weights; vLLM reads the method from the config itself.
            on_disk = True
            method = facts["quantization"]
            if method in QUANTIZATIONS:
                quantization, bits = method, bits or facts.get("bits")
            else:
                on_disk_gib = arch.get("weight_bytes", 0) / GIB
                self.warnings.append("%s: quantization %r (from its config.json) is sized by the checkpoint's %.2f "
                                     "GiB on disk; vLLM picks its kernels" % (label, method, on_disk_gib))
        elif quantization is None and spec.get("model") and not path_model:
            quantization, inferred_bits = infer_quantization(spec["model"])
            bits = bits or inferred_bits
        elif quantization is not None and facts:
            on_disk = True
        if quantization not in QUANTIZATIONS:
            self.problems.append("%s: quantization %r is not one of awq, gptq, fp8 (or null)" % (label, quantization))
            return None
        dtype = spec.get("dtype") or (CPU_DEFAULT_DTYPE if device == "cpu" else "float16")
        if dtype not in DTYPES:
            self.problems.append("%s: dtype %r is not float16, bfloat16 or float32" % (label, dtype))
        kv_dtype = spec.get("kv_cache_dtype") or "auto"
        if kv_dtype not in KV_DTYPES:
            self.problems.append("%s: kv_cache_dtype %r is not auto or fp8" % (label, kv_dtype))
        util = float(spec.get("gpu_memory_utilization") or self.default_util)
        if device == "gpu" and util > UTILIZATION_MAX:
            self.problems.append("%s: gpu_memory_utilization %.2f is above %.2f: long contexts then hit CUDA OOM "
                                 "(seed 001)" % (label, util, UTILIZATION_MAX))
        elif device == "gpu" and util > UTILIZATION_WARN:
            self.warnings.append("%s: gpu_memory_utilization %.2f is above %.2f (seed 001 stops at 0.92)"
                                 % (label, util, UTILIZATION_WARN))
        max_len = int(spec.get("max_model_len") or DEFAULT_MAX_MODEL_LEN)
        if arch.get("max_position") and max_len > arch["max_position"]:
            self.problems.append("%s: max_model_len %d is above the model's %d positions"
                                 % (label, max_len, arch["max_position"]))
        space = value_checks.as_int(spec.get("cpu_kvcache_space_gib") or self.default_kv_space)
        return {"label": label, "spec": spec, "arch": arch, "quantization": quantization, "device": device,
                "bits": bits if quantization == "gptq" else ({"awq": 4, "fp8": 8}.get(quantization)),
                "dtype": dtype, "kv_dtype": kv_dtype, "util": util, "util_given": spec.get("gpu_memory_utilization")
                is not None, "max_len": max_len, "eager": bool(spec.get("enforce_eager", False)),
                "on_disk": on_disk, "kv_space_gib": space if device == "cpu" else None}

    def device_problems(self, label, spec, device):
        """What a cpu model cannot have (GPUs, tensor parallelism, a GPU memory fraction), and the device itself."""
        problems = []
        if device not in DEVICES:
            return ["%s: device %r is not gpu or cpu" % (label, device)]
        space = spec.get("cpu_kvcache_space_gib")
        if device == "gpu":
            if space is not None:
                problems.append("%s: cpu_kvcache_space_gib is for cpu models (device cpu); a GPU model's KV cache "
                                "is what its GPU memory leaves" % label)
            return problems
        if spec.get("gpus") is not None:
            problems.append("%s: gpus %s: a cpu model (device cpu) runs on no GPU; drop gpus or set device gpu"
                            % (label, spec["gpus"]))
        if value_checks.as_int(spec.get("tensor_parallel_size")) not in (None, 1):
            problems.append("%s: tensor_parallel_size %s: a cpu model runs one process (tensor_parallel_size 1)"
                            % (label, spec["tensor_parallel_size"]))
        if spec.get("gpu_memory_utilization") is not None:
            problems.append("%s: gpu_memory_utilization is for GPU models; a cpu model's KV cache is "
                            "cpu_kvcache_space_gib" % label)
        for key in ("disable_custom_all_reduce", "nccl_p2p_disable", "nccl_ib_disable"):
            if spec.get(key) is not None:
                problems.append("%s: %s is for GPU models (NCCL, CUDA peer-to-peer)" % (label, key))
        if space is not None or self.default_kv_space is not None:
            value = space if space is not None else self.default_kv_space
            number = value_checks.as_int(value)
            if number is None or number < 1:
                problems.append("%s: cpu_kvcache_space_gib %r is not a whole number of GiB >= 1 (vLLM's "
                                "VLLM_CPU_KVCACHE_SPACE)" % (label, value))
        return problems

    def weights(self, model):
        """Bytes of the model's weights (the whole model, before TP and overhead)."""
        return weight_bytes(model["arch"], model["dtype"], model["quantization"], model["bits"], model["on_disk"])

    def estimate(self, model, gpus):
        """The numbers of a model on these GPU indices (its TP group)."""
        arch, tp = model["arch"], len(gpus)
        memory = min(int(self.by_index[i]["memory_mib"]) for i in gpus) * MIB
        weights = self.weights(model) / tp * (1 + WEIGHT_OVERHEAD)
        budget = memory * model["util"]
        reserve = (RESERVE_GIB + (0 if model["eager"] else CUDA_GRAPH_GIB)) * GIB
        free = budget - weights - reserve
        result = {"memory_gib_per_gpu": _round(memory / GIB), "budget_gib_per_gpu": _round(budget / GIB),
                  "weights_gib_per_gpu": _round(weights / GIB), "reserve_gib_per_gpu": _round(reserve / GIB),
                  "free_gib_per_gpu": _round(free / GIB)}
        if not all(arch.get(k) for k in ("layers", "kv_heads", "head_dim")):
            result["kv_unknown"] = True
            result["fits"] = False
            result["shortfall_gib"] = _round(max(0.0, -free) / GIB)
            return result
        kv_bytes = kv_element_bytes(model)
        per_token = kv_bytes_per_token_per_gpu(arch, tp, kv_bytes)
        tokens = int(max(0.0, free) // (BLOCK_TOKENS * per_token)) * BLOCK_TOKENS
        need = model["max_len"] * per_token
        result.update({"kv_bytes_per_token": 2 * arch["layers"] * arch["kv_heads"] * arch["head_dim"] * kv_bytes,
                       "kv_bytes_per_token_per_gpu": per_token, "kv_tokens": tokens,
                       "concurrency_at_max_len": _round(tokens / float(model["max_len"]))})
        result["fits"] = tokens >= model["max_len"]
        result["shortfall_gib"] = _round(max(0.0, need - max(0.0, free) if free >= 0 else need - free) / GIB) \
            if not result["fits"] else 0.0
        return result

    def estimate_cpu(self, model):
        """The numbers of a cpu model: its KV cache is the fixed VLLM_CPU_KVCACHE_SPACE, in host memory beside the
        weights. KV tokens = floor(space / KV bytes per token) (vLLM's CPU backend picks its own block size)."""
        arch = model["arch"]
        weights = self.weights(model) * (1 + WEIGHT_OVERHEAD)
        space = model["kv_space_gib"] * GIB
        result = {"weights_gib": _round(weights / GIB), "kv_space_gib": model["kv_space_gib"]}
        if self.host_memory_mib:
            host = float(self.host_memory_mib) * MIB
            result.update({"host_memory_gib": _round(host / GIB), "host_free_gib": _round((host - weights - space)
                                                                                          / GIB)})
        if not all(arch.get(k) for k in ("layers", "kv_heads", "head_dim")):
            result.update({"kv_unknown": True, "fits": False})
            return result
        per_token = 2 * arch["layers"] * arch["kv_heads"] * arch["head_dim"] * kv_element_bytes(model)
        tokens = int(space // per_token)
        result.update({"kv_bytes_per_token": per_token, "kv_tokens": tokens,
                       "concurrency_at_max_len": _round(tokens / float(model["max_len"])),
                       "fits": tokens >= model["max_len"]})
        result["shortfall_gib"] = 0.0 if result["fits"] else _round((model["max_len"] * per_token - space) / GIB)
        return result

    def check_cpu(self, model, estimate):
        """A cpu model whose KV space cannot hold one max_model_len sequence, or whose weights and KV space exceed
        the host's memory, does not start (or is killed by the OOM killer): refused."""
        label, fits = model["label"], True
        if estimate.get("kv_unknown"):
            self.problems.append("%s: its architecture is incomplete (layers, kv_heads, head_dim): give architecture "
                                 "or config_json to size its KV cache" % label)
            return False
        if not estimate["fits"]:
            self.problems.append(
                "%s: one %d-token sequence needs %.2f GiB of KV cache (%d bytes per token), and "
                "cpu_kvcache_space_gib %d GiB holds %d tokens: %.2f GiB short; raise cpu_kvcache_space_gib "
                "(vllm_cpu_kvcache_space_gib) or lower max_model_len"
                % (label, model["max_len"], model["max_len"] * estimate["kv_bytes_per_token"] / float(GIB),
                   estimate["kv_bytes_per_token"], model["kv_space_gib"], estimate["kv_tokens"],
                   estimate["shortfall_gib"]))
            fits = False
        if "host_free_gib" in estimate and estimate["host_free_gib"] < 0:
            self.problems.append(
                "%s: weights %.2f GiB + KV cache space %d GiB = %.2f GiB exceed the host's %.2f GiB of memory by "
                "%.2f GiB" % (label, estimate["weights_gib"], model["kv_space_gib"],
                              estimate["weights_gib"] + model["kv_space_gib"], estimate["host_memory_gib"],
                              -estimate["host_free_gib"]))
            fits = False
        return fits

    # -- checks --------------------------------------------------------------------------------------------
    def check_hardware(self, model, gpus):
        label = model["label"]
        for index in gpus:
            gpu = self.by_index[index]
            cc = gpu_cc(gpu)
            what = "GPU %d (%s)" % (index, gpu.get("name") or "?")
            if cc is None:
                self.warnings.append("%s: compute capability of %s unknown; dtype and quantization not checked"
                                     % (label, what))
                continue
            if model["dtype"] == "bfloat16" and cc < BF16_MIN_CC:
                self.problems.append("%s: dtype bfloat16 needs compute capability 8.0+, %s is %d.%d: use dtype "
                                     "float16" % (label, what, cc[0], cc[1]))
            need = QUANTIZATION_MIN_CC.get(model["quantization"])
            if need and cc < need:
                self.problems.append("%s: %s kernels need compute capability %d.%d+ in vLLM, %s is %d.%d"
                                     % (label, model["quantization"].upper(), need[0], need[1], what, cc[0], cc[1]))
            elif model["quantization"] == "fp8" and cc < FP8_NATIVE_CC:
                self.warnings.append("%s: FP8 on %s (%d.%d) runs weight-only through Marlin (W8A16), not W8A8"
                                     % (label, what, cc[0], cc[1]))
            if model["kv_dtype"] == "fp8" and cc < (8, 9):
                self.warnings.append("%s: an fp8 KV cache on %s (%d.%d) is stored in fp8 but computed in 16 bits"
                                     % (label, what, cc[0], cc[1]))

    def link(self, first, second):
        links = (self.topology or {}).get("links") or {}
        value = (links.get("GPU%d" % first) or {}).get("GPU%d" % second) or \
            (links.get("GPU%d" % second) or {}).get("GPU%d" % first)
        return value

    def group_rank(self, gpus):
        """(worst link rank in the group, its worst link name); an unknown link ranks as SYS."""
        worst, name = 1000, None
        for first, second in itertools.combinations(gpus, 2):
            value = self.link(first, second)
            rank = nvidia.link_rank(value) if value else nvidia.link_rank("SYS")
            if rank < worst:
                worst, name = rank, value or "unknown"
        return worst, name

    def numa_nodes(self, gpus):
        affinity = (self.topology or {}).get("numa_affinity") or {}
        return sorted(set(affinity.get("GPU%d" % i) for i in gpus if affinity.get("GPU%d" % i) not in (None, "N/A")))

    def check_topology(self, model, gpus):
        if len(gpus) < 2 or not self.topology:
            return
        rank, worst = self.group_rank(gpus)
        nodes = self.numa_nodes(gpus)
        if len(nodes) > 1:
            self.warnings.append("%s: tensor-parallel group GPUs %s spans NUMA nodes %s: every all-reduce crosses "
                                 "the socket interconnect" % (model["label"], gpus, ", ".join(nodes)))
        if nvidia.is_nvlink(worst):
            return
        smaller = [tp for tp in (1, 2, 4) if tp < len(gpus) and self.valid_tp(model, tp)
                   and self.estimate(model, list(gpus[:tp])).get("fits")]
        if smaller:
            path = "%s (no NVLink)" % worst if worst != "unknown" else "links the topology does not show"
            self.warnings.append("%s: tensor_parallel_size %d over %s for a model that fits on %d GPU(s): "
                                 "all-reduce over PCIe costs more than it gains (seed 000's TP=4 run of a 9B model); "
                                 "use %d GPU(s) and run replicas instead" % (model["label"], len(gpus), path,
                                                                             smaller[0], smaller[0]))

    def check_all_reduce(self, model, gpus):
        """vLLM's custom all-reduce writes into the other GPUs' memory (CUDA IPC): it needs peer-to-peer access
        between every pair of the group. Asked for explicitly (disable_custom_all_reduce: false) over a pair the
        topology shows linked only through the CPU sockets (SYS), it cannot work: refused."""
        if len(gpus) < 2 or model["spec"].get("disable_custom_all_reduce") is not False or not self.topology:
            return
        rank, worst = self.group_rank(gpus)
        if rank <= nvidia.link_rank("SYS"):
            self.problems.append("%s: disable_custom_all_reduce false on GPUs %s, linked through %s: custom all-reduce "
                                 "needs peer-to-peer access, which does not cross the CPU sockets; leave it unset "
                                 "(vLLM decides) or set it true" % (model["label"], gpus, worst))

    @staticmethod
    def valid_tp(model, tp):
        heads = model["arch"].get("attention_heads")
        return heads is None or heads % tp == 0

    # -- placement ----------------------------------------------------------------------------------------
    def best_group(self, size, free):
        """The free GPUs to use for a TP group of this size: best worst-link first, then lowest indices."""
        candidates = list(itertools.combinations(sorted(free), size))
        if not candidates:
            return None
        return list(max(candidates, key=lambda c: (self.group_rank(c)[0], [-i for i in c])))

    def plan(self, models):
        if not self.gpus and any(self.device_of(m) != "cpu" for m in models or [] if isinstance(m, dict)):
            raise PlanError(["gpus: no GPU to plan on"])
        resolved = [self.resolve(i, m) for i, m in enumerate(models or [])]
        names = [m.get("name") for m in models or []]
        for name in set(n for n in names if n and names.count(n) > 1):
            self.problems.append("models: name %r appears %d times" % (name, names.count(name)))
        if self.problems:
            raise PlanError(self.problems)
        cpu_estimates = self.plan_cpu([m for m in resolved if m["device"] == "cpu"])
        resolved_all, resolved = resolved, [m for m in resolved if m["device"] == "gpu"]
        usage = dict((i, []) for i in self.by_index)           # gpu -> [model labels]
        util_sum = dict((i, 0.0) for i in self.by_index)
        placed = {}
        # Explicit GPUs first.
        for model in resolved:
            spec = model["spec"]
            if spec.get("gpus") is None:
                continue
            gpus = [int(g) for g in spec["gpus"]]
            missing = [g for g in gpus if g not in self.by_index]
            if missing:
                self.problems.append("%s: gpus %s are not on this host (GPUs %s)" % (model["label"], missing,
                                                                                     sorted(self.by_index)))
                continue
            tp = int(spec.get("tensor_parallel_size") or len(gpus))
            if tp != len(gpus):
                self.problems.append("%s: tensor_parallel_size %d but %d gpus listed; they must match"
                                     % (model["label"], tp, len(gpus)))
                continue
            if not self.valid_tp(model, tp):
                self.problems.append("%s: tensor_parallel_size %d does not divide its %d attention heads"
                                     % (model["label"], tp, model["arch"]["attention_heads"]))
                continue
            placed[model["label"]] = gpus
            for g in gpus:
                usage[g].append(model)
                util_sum[g] += model["util"]
        # The rest, largest weights first.
        rest = [m for m in resolved if m["spec"].get("gpus") is None]
        rest.sort(key=lambda m: -self.weights(m))
        for model in rest:
            free = [g for g in self.by_index if not usage[g]]
            sizes = [int(model["spec"]["tensor_parallel_size"])] if model["spec"].get("tensor_parallel_size") else \
                [tp for tp in (1, 2, 4, 8, 16) if tp <= len(self.by_index) and self.valid_tp(model, tp)]
            chosen, last = None, None
            for tp in sizes:
                group = self.best_group(tp, free) if tp <= len(free) else None
                if group is None:
                    continue
                last = (group, self.estimate(model, group))
                if last[1]["fits"]:
                    chosen = group
                    break
            if chosen is None:
                if last is None:
                    self.problems.append("%s: no free GPUs left for it (%d GPUs, all taken by larger models)"
                                         % (model["label"], len(self.by_index)))
                else:
                    self.problems.append(self.shortfall(model, last[0], last[1]))
                continue
            placed[model["label"]] = chosen
            for g in chosen:
                usage[g].append(model)
                util_sum[g] += model["util"]
        for g, models_on in usage.items():
            if len(models_on) > 1:
                if not all(m["util_given"] for m in models_on):
                    labels = ", ".join(m["label"] for m in models_on)
                    self.problems.append("GPU %d is given to %s; two models share a GPU only when each sets "
                                         "gpu_memory_utilization (its fraction)" % (g, labels))
                elif util_sum[g] > UTILIZATION_MAX + 1e-9:
                    self.problems.append("GPU %d: the models on it (%s) ask for gpu_memory_utilization %.2f in all, "
                                         "above %.2f" % (g, ", ".join(m["label"] for m in models_on), util_sum[g],
                                                         UTILIZATION_MAX))
        services = []
        for model in resolved_all:
            if model["device"] == "cpu":
                if model["label"] in cpu_estimates:
                    services.append(self.cpu_service(model, cpu_estimates[model["label"]]))
                continue
            gpus = placed.get(model["label"])
            if gpus is None:
                continue
            estimate = self.estimate(model, gpus)
            self.check_hardware(model, gpus)
            if not estimate["fits"]:
                self.problems.append(self.shortfall(model, gpus, estimate))
                continue
            self.check_topology(model, gpus)
            self.check_all_reduce(model, gpus)
            services.append(self.service(model, gpus, estimate))
        if self.problems:
            raise PlanError(self.problems)
        return {"services": services, "warnings": self.warnings}

    def plan_cpu(self, models):
        """{label: estimate} of the cpu models that fit; the others are problems. Together they share the host's
        memory: their weights and KV spaces must fit in it side by side."""
        estimates = {}
        for model in models:
            estimate = self.estimate_cpu(model)
            if self.check_cpu(model, estimate):
                estimates[model["label"]] = estimate
        if self.host_memory_mib and len(estimates) > 1:
            total = sum(self.weights(m) * (1 + WEIGHT_OVERHEAD) / GIB + m["kv_space_gib"] for m in models
                        if m["label"] in estimates)
            host = float(self.host_memory_mib) * MIB / GIB
            if total > host:
                self.problems.append("the cpu models (%s) need %.2f GiB of weights and KV cache space together, above "
                                     "the host's %.2f GiB of memory by %.2f GiB"
                                     % (", ".join(m["label"] for m in models if m["label"] in estimates), total, host,
                                        total - host))
        return estimates

    def shortfall(self, model, gpus, estimate):
        if estimate.get("kv_unknown"):
            if estimate["shortfall_gib"] > 0:
                return ("%s: does not fit on GPU(s) %s: weights %.2f GiB + reserve %.2f GiB per GPU exceed the "
                        "%.2f GiB budget (%.2f GiB x %.2f) by %.2f GiB"
                        % (model["label"], gpus, estimate["weights_gib_per_gpu"], estimate["reserve_gib_per_gpu"],
                           estimate["budget_gib_per_gpu"], estimate["memory_gib_per_gpu"], model["util"],
                           estimate["shortfall_gib"]))
            return ("%s: its architecture is incomplete (layers, kv_heads, head_dim): give architecture or "
                    "config_json to size its KV cache" % model["label"])
        return ("%s: does not fit on GPU(s) %s: per GPU, budget %.2f GiB (%.2f GiB x %.2f) - weights %.2f GiB - "
                "reserve %.2f GiB leaves %.2f GiB, and one %d-token sequence needs %.2f GiB of KV cache: %.2f GiB short"
                % (model["label"], gpus, estimate["budget_gib_per_gpu"], estimate["memory_gib_per_gpu"], model["util"],
                   estimate["weights_gib_per_gpu"], estimate["reserve_gib_per_gpu"], estimate["free_gib_per_gpu"],
                   model["max_len"], model["max_len"] * estimate["kv_bytes_per_token_per_gpu"] / float(GIB),
                   estimate["shortfall_gib"]))

    def service(self, model, gpus, estimate):
        spec = model["spec"]
        max_num_seqs = spec.get("max_num_seqs")
        if max_num_seqs is None:
            max_num_seqs = max(1, min(MAX_NUM_SEQS_CAP, int(math.floor(estimate["free_gib_per_gpu"] * 12))))
        service = dict((k, v) for k, v in spec.items() if k not in ("architecture", "config_json"))
        service.update({
            "name": spec["name"], "model": spec["model"], "device": "gpu", "gpus": list(gpus),
            "tensor_parallel_size": len(gpus),
            "dtype": model["dtype"], "quantization": model["quantization"], "kv_cache_dtype": model["kv_dtype"],
            "gpu_memory_utilization": model["util"], "max_model_len": model["max_len"],
            "max_num_seqs": int(max_num_seqs), "enforce_eager": model["eager"], "estimates": estimate,
        })
        return service

    def cpu_service(self, model, estimate):
        spec = model["spec"]
        max_num_seqs = spec.get("max_num_seqs")
        if max_num_seqs is None:
            # Seed 002's rule on what the KV cache gets: here the fixed CPU KV space.
            max_num_seqs = max(1, min(MAX_NUM_SEQS_CAP, int(math.floor(model["kv_space_gib"] * 12))))
        service = dict((k, v) for k, v in spec.items() if k not in ("architecture", "config_json"))
        service.update({
            "name": spec["name"], "model": spec["model"], "device": "cpu", "gpus": [], "tensor_parallel_size": 1,
            "dtype": model["dtype"], "quantization": model["quantization"], "kv_cache_dtype": model["kv_dtype"],
            "gpu_memory_utilization": None, "cpu_kvcache_space_gib": model["kv_space_gib"],
            "max_model_len": model["max_len"], "max_num_seqs": int(max_num_seqs), "enforce_eager": model["eager"],
            "estimates": estimate,
        })
        return service


def plan(gpus, models, topology=None, gpu_memory_utilization=DEFAULT_UTILIZATION, read_file=None, device="gpu",
         cpu_kvcache_space_gib=DEFAULT_CPU_KVCACHE_GIB, host_memory_mib=None, model_facts=None):
    """{'services': [...], 'warnings': [...]} or PlanError naming each model and its shortfall.

    ``device`` is the default of models without their own (gpu or cpu); cpu models need no ``gpus`` and are sized
    against ``cpu_kvcache_space_gib`` (or their own) and, when given, ``host_memory_mib``. ``model_facts`` maps
    local model directories (absolute paths) to what vllm_model_facts read from them."""
    return Planner(gpus, topology, gpu_memory_utilization, read_file, device, cpu_kvcache_space_gib, host_memory_mib,
                   model_facts).plan(models)
