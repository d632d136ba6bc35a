# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model disk of a GPU VM (seed 000: the models in ``/data/llm/models`` on their own NVMe). Plain Python.

What vLLM downloads for a model of the Hugging Face Hub is its safetensors weights (plus config and tokenizer
files, a few MiB): the checkpoint's bytes, not what the served dtype makes of them. Per model, from the planner's
catalog or the model's ``architecture``: unquantized checkpoints are 16-bit (2 bytes per parameter, also when
served as float32); quantized ones (``quantization`` or a name saying AWQ/GPTQ/FP8) are vllm_plan.weight_bytes of
their format. A local model directory (``model: /path``) is not downloaded: it counts 0 here.

- ``auto``: size = ceil(weights x (1 + margin)) rounded up to STEP_GIB, at least MIN_GIB; no disk when the VM
  downloads nothing. The margin covers tokenizer files, a half-finished download and one revision beside the
  current one (the Hub cache keeps old snapshots' blobs until they are pruned).
- a number of GiB: refused when the weights do not fit (the margin is a warning).
- 0: no model disk; the weights then go to the root disk, which must hold them beside ROOT_RESERVE_GIB (the
  guest's system, Docker's images - the vLLM image alone unpacks to about 20 GiB - and logs).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks, vllm_model, vllm_plan

GIB = 1024 ** 3
MIN_GIB = 16
STEP_GIB = 8
ROOT_RESERVE_GIB = 32
DEFAULT_MARGIN = 0.25
# The guest sees the disk PVE attaches as scsi1 under this name (QEMU's scsi-hd serial is drive-scsi1).
DISK_KEY = "scsi1"
DEVICE = "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-%s" % DISK_KEY


def _read_text(path):
    with open(path) as handle:
        return handle.read()


def download_bytes(spec, read_file=None):
    """(bytes, None) of what vLLM downloads for one vllm_models entry; (0, None) for a local directory;
    (None, why) when its size is unknown (a model outside the catalog without config_json or
    architecture.params_b). ``config_json`` is read on the controller, as the planner reads it."""
    model = spec.get("model")
    if vllm_model.is_path_model(model):
        return 0, None
    arch = {}
    entry = vllm_plan.catalog_entry(model)
    if entry:
        arch.update((k, entry[k]) for k in vllm_plan.ARCH_KEYS if k in entry)
    if spec.get("config_json"):
        try:
            arch.update(vllm_plan.architecture_from_config((read_file or _read_text)(spec["config_json"])))
        except (OSError, ValueError) as exc:
            return None, "config_json %s: %s" % (spec["config_json"], exc)
    arch.update(dict((k, v) for k, v in (spec.get("architecture") or {}).items() if v is not None))
    if "params_b" not in arch and all(arch.get(k) for k in ("hidden_size", "layers", "vocab_size", "head_dim",
                                                            "attention_heads", "kv_heads", "intermediate_size")):
        arch["params_b"] = vllm_plan.estimate_params_b(arch)
    try:
        arch["params_b"] = float(arch["params_b"])
    except (KeyError, TypeError, ValueError):
        return None, "not in the planner's catalog, and neither config_json nor architecture.params_b is given"
    quantization, bits = spec.get("quantization"), value_checks.as_int(spec.get("bits"))
    if quantization is None:
        quantization, inferred = vllm_plan.infer_quantization(model)
        bits = bits or inferred
    if quantization not in vllm_plan.QUANTIZATIONS:
        return None, "quantization %r has no known size on disk" % (quantization,)
    # The checkpoint's bytes: 16-bit unless quantized, whatever dtype it is served as.
    return vllm_plan.weight_bytes(arch, "bfloat16", quantization, bits), None


def _gib(value):
    return round(value / float(GIB), 2)


def plan(models, setting, margin=DEFAULT_MARGIN, root_disk_gib=None, variable="gpu_vm_model_disk_gib"):
    """{'size_gib': int (0: no model disk), 'weights_gib', 'models': [{name, model, gib}], 'grow_only': bool,
    'problems': [...], 'warnings': [...]} for a VM serving ``models`` (its vllm_models)."""
    problems, warnings, rows, total = [], [], [], 0.0
    auto = str(setting).strip().lower() == "auto"
    size = None if auto else value_checks.as_int(setting)
    if not auto and (size is None or size < 0):
        return {"size_gib": 0, "weights_gib": 0.0, "models": [], "grow_only": False, "warnings": [],
                "problems": ["%s: %r is not auto, 0 (no model disk) or a number of GiB" % (variable, setting)]}
    try:
        margin = float(margin)
        if not math.isfinite(margin) or margin < 0:
            raise ValueError
    except (TypeError, ValueError):
        problems.append("%s: %r is not a fraction >= 0" % (variable.replace("_gib", "_margin"), margin))
        margin = DEFAULT_MARGIN
    unknown = []
    for index, spec in enumerate(models or []):
        if not isinstance(spec, dict):
            continue
        name = spec.get("name") or "vllm_models[%d]" % index
        got, why = download_bytes(spec)
        if got is None:
            unknown.append("%s (%s): %s" % (name, spec.get("model"), why))
            continue
        rows.append({"name": name, "model": spec.get("model"), "gib": _gib(got)})
        total += got
    weights_gib = _gib(total)
    listing = ", ".join("%s %.2f GiB" % (r["name"], r["gib"]) for r in rows if r["gib"])
    if auto:
        if unknown:
            problems.append("%s: auto cannot size the model disk: %s; give the size in GiB (or 0 for none)"
                            % (variable, "; ".join(unknown)))
            size = 0
        elif total <= 0:
            size = 0
        else:
            wanted = total * (1 + margin) / GIB
            size = max(MIN_GIB, int(math.ceil(wanted / STEP_GIB)) * STEP_GIB)
    elif size > 0:
        if total > size * GIB:
            problems.append("%s: %d GiB does not hold the %.2f GiB of weights this VM downloads (%s); give at least "
                            "%d, or auto" % (variable, size, weights_gib, listing, int(math.ceil(total / GIB))))
        elif total * (1 + margin) > size * GIB:
            warnings.append("%s: %d GiB holds the %.2f GiB of weights (%s) with less than the %d%% margin for "
                            "tokenizers, partial downloads and a second revision"
                            % (variable, size, weights_gib, listing, int(round(margin * 100))))
        if unknown:
            warnings.append("%s: not counted (size unknown): %s" % (variable, "; ".join(unknown)))
    elif total > 0 and root_disk_gib is not None:
        room = value_checks.as_int(root_disk_gib)
        if room is not None and total > (room - ROOT_RESERVE_GIB) * GIB:
            problems.append("%s: 0 puts the models on the root disk, and gpu_vm_disk_gib %d GiB less %d GiB for the "
                            "system and Docker's images leaves %d GiB for %.2f GiB of weights (%s); use auto (a "
                            "model disk) or raise gpu_vm_disk_gib to %d"
                            % (variable, room, ROOT_RESERVE_GIB, max(0, room - ROOT_RESERVE_GIB), weights_gib, listing,
                               ROOT_RESERVE_GIB + int(math.ceil(total / GIB))))
    return {"size_gib": size, "weights_gib": weights_gib, "models": rows, "grow_only": auto, "problems": problems,
            "warnings": warnings}


def config_value(plan_result, storage, options):
    """The scsi1 value for pve_vm (PVE's allocation syntax), or None when the VM gets no model disk."""
    if not plan_result["size_gib"]:
        return None
    return ",".join(p for p in ("%s:%d" % (storage, plan_result["size_gib"]), options) if p)
