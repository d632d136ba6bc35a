# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A local model directory sized from its own files (the vllm_model_facts module, on the VM). Plain Python, stdlib.

A model given to the vllm role as an absolute path (``model: /data/llm/models/llmstack-tiny``) is not looked up in
vllm_plan's catalog: its architecture comes from the directory's ``config.json`` (the numbers vllm_plan's catalog
cites), its weights from the headers of its safetensors files. A safetensors file is an 8-byte little-endian header
length N, then N bytes of JSON ``{tensor: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}``, then
the tensor data; only the 8 + N bytes are read, never the data. Weight bytes = the sum of the tensors' byte ranges;
parameters = the sum of their element counts. With a ``model.safetensors.index.json`` only the files its
``weight_map`` names count (what vLLM loads: Mistral's repositories ship a consolidated file beside the shards).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import struct

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

# safetensors' own limit on the header (100 MB): a larger length is a broken or foreign file.
MAX_HEADER_BYTES = 100 * 1000 * 1000
# Element sizes of safetensors dtypes (the format's Dtype enum); unknown dtypes count by their byte range only.
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
               "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
INDEX_FILE = "model.safetensors.index.json"


class ModelFactsError(value_checks.SettingsProblems):
    """Model directories that cannot be sized: ``problems`` names each ``vllm_models[i].model``."""


class ModelDirError(Exception):
    """One directory's problem (without the vllm_models entry, which model_facts adds)."""


def is_path_model(model):
    """A model given as a local directory (an absolute path) rather than a Hugging Face id."""
    return isinstance(model, str) and model.startswith("/")


def normalize(path):
    """The key of a model directory: ``/a/b/`` and ``/a/b`` are one directory."""
    return os.path.normpath(path)


def architecture_from_config(text):
    """Architecture numbers from a Hugging Face config.json text, in vllm_plan's names: layers
    (num_hidden_layers), attention_heads, kv_heads (num_key_value_heads, else the attention heads), head_dim (the
    config's own when it sets one - Qwen3-32B: 128 while hidden / heads is 80 -, else hidden / heads), hidden_size,
    vocab_size, tie (tie_word_embeddings), max_position (max_position_embeddings), intermediate_size. Models that nest
    the language model under ``text_config`` are read from there."""
    config = json.loads(text)
    if not isinstance(config, dict):
        raise ValueError("config.json is not a JSON object")
    if isinstance(config.get("text_config"), dict):
        config = dict(config, **config["text_config"])
    hidden = config.get("hidden_size")
    heads = config.get("num_attention_heads")
    arch = {
        "layers": config.get("num_hidden_layers"),
        "attention_heads": heads,
        "kv_heads": config.get("num_key_value_heads") or heads,
        "head_dim": config.get("head_dim") or (hidden // heads if hidden and heads else None),
        "hidden_size": hidden,
        "vocab_size": config.get("vocab_size"),
        "tie": bool(config.get("tie_word_embeddings", False)),
        "max_position": config.get("max_position_embeddings"),
        "intermediate_size": config.get("intermediate_size"),
    }
    return dict((k, v) for k, v in arch.items() if v is not None)


def config_facts(config):
    """What else config.json says that sizing needs: its torch_dtype and the checkpoint's quantization method
    (``quantization_config.quant_method``) and bits."""
    if isinstance(config.get("text_config"), dict):
        config = dict(config, **config["text_config"])
    quant = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else {}
    method = quant.get("quant_method")
    return {"torch_dtype": config.get("torch_dtype") or config.get("dtype"),
            "quantization": str(method).lower() if method else None,
            "bits": quant.get("bits") if isinstance(quant.get("bits"), int) else None}


def safetensors_header(path, opener=open):
    """The JSON header of one safetensors file; reads its first 8 + N bytes only."""
    with opener(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ModelDirError("%s: not a safetensors file (shorter than 8 bytes)" % os.path.basename(path))
        (length,) = struct.unpack("<Q", head)
        if length < 2 or length > MAX_HEADER_BYTES:
            raise ModelDirError("%s: header length %d is not a safetensors header (2 bytes to 100 MB)"
                                % (os.path.basename(path), length))
        raw = handle.read(length)
    if len(raw) < length:
        raise ModelDirError("%s: the file ends inside its %d-byte header" % (os.path.basename(path), length))
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise ModelDirError("%s: the header is not JSON (%s)" % (os.path.basename(path), exc))
    if not isinstance(header, dict):
        raise ModelDirError("%s: the header is not a JSON object" % os.path.basename(path))
    return length, header


def tensor_totals(path, opener=open):
    """{params, bytes, dtypes: {dtype: bytes}} of one safetensors file, from its header."""
    length, header = safetensors_header(path, opener)
    params, total, dtypes, end = 0, 0, {}, 0
    name = os.path.basename(path)
    for tensor, info in header.items():
        if tensor == "__metadata__":
            continue
        try:
            begin, stop = [int(x) for x in info["data_offsets"]]
            shape = [int(x) for x in info["shape"]]
            dtype = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            raise ModelDirError("%s: tensor %s has no dtype, shape and data_offsets" % (name, tensor))
        if stop < begin or begin < 0:
            raise ModelDirError("%s: tensor %s has data_offsets %s" % (name, tensor, info["data_offsets"]))
        count = 1
        for dim in shape:
            count *= dim
        size = stop - begin
        if dtype in DTYPE_BYTES and size != count * DTYPE_BYTES[dtype]:
            raise ModelDirError("%s: tensor %s: %s x %s takes %d bytes, its data_offsets say %d"
                                % (name, tensor, dtype, shape, count * DTYPE_BYTES[dtype], size))
        params += count
        total += size
        dtypes[dtype] = dtypes.get(dtype, 0) + size
        end = max(end, stop)
    actual = os.path.getsize(path)
    if actual < 8 + length + end:
        raise ModelDirError("%s: %d bytes, shorter than its header says (%d): a partial download?"
                            % (name, actual, 8 + length + end))
    return {"params": params, "bytes": total, "dtypes": dtypes}


def safetensors_files(directory):
    """The safetensors files vLLM loads from a directory: those of the index's weight_map, else every
    ``*.safetensors`` in it (sorted names, relative to the directory)."""
    index = os.path.join(directory, INDEX_FILE)
    if os.path.isfile(index):
        try:
            with open(index) as handle:
                weight_map = json.load(handle).get("weight_map")
        except (OSError, ValueError, AttributeError) as exc:
            raise ModelDirError("%s is not a safetensors index (%s)" % (INDEX_FILE, exc))
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelDirError("%s has no weight_map" % INDEX_FILE)
        names = sorted(set(str(v) for v in weight_map.values()))
        missing = [n for n in names if not os.path.isfile(os.path.join(directory, n))]
        if missing:
            raise ModelDirError("%s names files that are not there: %s" % (INDEX_FILE, ", ".join(missing)))
        return names
    return sorted(n for n in os.listdir(directory) if n.endswith(".safetensors")
                  and os.path.isfile(os.path.join(directory, n)))


def model_dir_facts(directory, opener=open):
    """{path, architecture, torch_dtype, quantization, bits, weight_bytes, params, checkpoint_dtypes, files} of one
    model directory; ModelDirError when it cannot be sized. ``architecture.params_b`` is the tensors' element count
    (exact) unless the checkpoint is quantized (packed integers are not parameters): then it is estimated from the
    shape, and the planner sizes the weights by their bytes on disk."""
    if not os.path.isdir(directory):
        raise ModelDirError("no such directory")
    config_path = os.path.join(directory, "config.json")
    if not os.path.isfile(config_path):
        raise ModelDirError("has no config.json (not a Hugging Face model directory)")
    try:
        with open(config_path) as handle:
            text = handle.read()
        config = json.loads(text)
        architecture = architecture_from_config(text)
    except (OSError, ValueError) as exc:
        raise ModelDirError("config.json is not JSON (%s)" % exc)
    missing = [k for k in ("layers", "attention_heads", "kv_heads", "head_dim") if not architecture.get(k)]
    if missing:
        raise ModelDirError("config.json has no %s (num_hidden_layers, num_attention_heads, ...)" % ", ".join(missing))
    files = safetensors_files(directory)
    if not files:
        raise ModelDirError("has no *.safetensors file (vLLM's CPU and GPU loaders read safetensors; convert "
                            ".bin/.pt checkpoints first)")
    params, total, dtypes = 0, 0, {}
    for name in files:
        totals = tensor_totals(os.path.join(directory, name), opener)
        params += totals["params"]
        total += totals["bytes"]
        for dtype, size in totals["dtypes"].items():
            dtypes[dtype] = dtypes.get(dtype, 0) + size
    facts = config_facts(config)
    if facts["quantization"] is None:
        architecture["params_b"] = params / 1e9
    elif all(architecture.get(k) for k in ("hidden_size", "vocab_size", "intermediate_size")):
        architecture["params_b"] = _estimate_params_b(architecture)
    else:
        architecture["params_b"] = params / 1e9
    facts.update({"path": directory, "architecture": architecture, "weight_bytes": total, "params": params,
                  "checkpoint_dtypes": dtypes, "files": files})
    return facts


def _estimate_params_b(arch):
    # The same shape estimate as vllm_plan.estimate_params_b (kept here so that the module needs no planner).
    attention = arch["hidden_size"] * arch["attention_heads"] * arch["head_dim"] * 2 + \
        arch["hidden_size"] * arch["kv_heads"] * arch["head_dim"] * 2
    mlp = 3 * arch["hidden_size"] * arch["intermediate_size"]
    embeddings = arch["vocab_size"] * arch["hidden_size"] * (1 if arch.get("tie") else 2)
    return (embeddings + arch["layers"] * (attention + mlp)) / 1e9


def model_facts(models, variable="vllm_models", opener=open):
    """{directory: facts} for every path model of ``models`` (vllm_models entries, or model strings); each
    directory read once. ModelFactsError lists every directory that cannot be sized, naming
    ``<variable>[i].model``."""
    facts, problems = {}, []
    for index, entry in enumerate(models or []):
        model = entry.get("model") if isinstance(entry, dict) else entry
        if not is_path_model(model):
            continue
        key = normalize(model)
        if key in facts:
            continue
        try:
            facts[key] = model_dir_facts(key, opener)
        except ModelDirError as exc:
            problems.append("%s[%d].model: %s: %s" % (variable, index, model, exc))
        except OSError as exc:
            problems.append("%s[%d].model: %s: cannot be read (%s)" % (variable, index, model, exc))
    if problems:
        raise ModelFactsError(problems)
    return facts
