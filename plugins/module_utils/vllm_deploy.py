# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the vllm role deploys, from vllm_plan's services: a compose project (seed 000 §compose) or one
systemd unit per model (seed 001). Plain Python; the role's templates only print what this returns.

Choices, each from the seeds or from vLLM's behaviour:
- ports bound to ``bind_address``: the role passes the VM's inference-VLAN address (the gateway on another host
  reaches vLLM there, behind the API key), 127.0.0.1 on a VM without one; 127.0.0.1 when the caller passes none;
- the health check asks ``/health``, which fails once the engine is dead, not ``/v1/models``, which the API
  server keeps answering;
- the API key reaches vLLM through the ``VLLM_API_KEY`` environment variable from a 0600 env file, never on
  the command line or in the compose file;
- a pinned image tag (no ``latest``), ``ipc: host`` (PyTorch shared memory for tensor parallelism),
  log rotation, and ``HF_HUB_OFFLINE=1`` once the weights are on disk;
- a cpu model (vLLM's CPU backend) gets no GPU: no device reservation, no ``CUDA_VISIBLE_DEVICES``/NCCL, no
  ``--gpu-memory-utilization``/``--tensor-parallel-size``, but ``VLLM_CPU_KVCACHE_SPACE`` (GiB) and, in compose,
  ``cap_add: [SYS_NICE]`` (Docker's default seccomp profile then allows the NUMA calls - mbind, set_mempolicy,
  migrate_pages - that vLLM's CPU worker uses to bind its threads and memory);
- a local model directory (``model: /abs/path``) is bind-mounted read-only at the same path into the container and
  served under its name (``--served-model-name``);
- ``--shutdown-timeout`` (vLLM >= 0.18.0, vllm-project/vllm#34730: the seconds vLLM drains open requests after
  SIGTERM; its default 0 aborts them) from the ``shutdown_timeout`` setting, passed only to a vLLM that has it (an
  older one refuses unknown flags): the version is the image tag's in compose, else the ``version`` setting.
  Compose waits ``stop_grace_period`` = timeout + 15 s before SIGKILL, systemd ``TimeoutStopSec=`` the same, with
  ``KillMode=mixed``: SIGTERM to vLLM's API server only (it drains, then stops its engine processes itself; a
  SIGTERM to every process at once, systemd's default, would abort the engine first), SIGKILL to whatever is left
  of the unit at the end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks, vllm_model

CONTAINER_PORT = 8000
# Runs inside the vLLM image (which has Python, not necessarily curl).
HEALTH_PROBE = ("import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', %d, timeout=5); "
                "c.request('GET', '/health'); sys.exit(0 if c.getresponse().status == 200 else 1)")


DEFAULT_SHUTDOWN_TIMEOUT = 30
STOP_GRACE_EXTRA = 15
SHUTDOWN_TIMEOUT_SINCE = (0, 18, 0)
VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
DTYPES = ("float16", "bfloat16", "float32")
DEVICES = ("gpu", "cpu")
GPU_ONLY_KEYS = ("gpus", "tensor_parallel_size", "gpu_memory_utilization", "disable_custom_all_reduce",
                 "nccl_p2p_disable", "nccl_ib_disable")


class DeployError(value_checks.SettingsProblems):
    """A service or setting the deployment cannot be written for (raised with one message)."""


# The model disk (gpu_vm_model_disk_gib; the vllm role's model_disk.yml): auto mounts it when the VM has it.
MODEL_DISK_MODES = ("auto", "required", "none")
MODEL_DISK_FSTYPES = ("ext4", "xfs")


def check_image(image):
    """An image reference with an explicit tag or digest that is not ``latest``."""
    text = str(image or "")
    name, dummy_sep, tag = text.rpartition(":") if ":" in text.rsplit("/", maxsplit=1)[-1] else (text, "", "")
    if "@sha256:" in text:
        return text
    if not tag or tag == "latest" or not name:
        raise DeployError("vllm_image: %r needs a pinned tag (e.g. vllm/vllm-openai:v0.11.0), not 'latest' or none"
                          % text)
    return text


def parse_version(text):
    """(major, minor, patch) of ``0.11.0``, ``v0.18.1-cu128``; None when the text does not start with one."""
    match = VERSION_RE.match(str(text or "").strip())
    if not match:
        return None
    return tuple(int(x or 0) for x in match.groups())


def image_version(image):
    """The vLLM version an image tag names (``vllm/vllm-openai:v0.11.0``), None for a digest or another tag."""
    text = str(image or "")
    if "@" in text:
        return None
    last = text.rsplit("/", maxsplit=1)[-1]
    return parse_version(last.rpartition(":")[2]) if ":" in last else None


def service_image(service, settings):
    """The image a service runs in compose: its model's own ``image``, else vllm_cpu_image for a cpu model (vLLM's
    CPU build; vllm_image is a CUDA build, which would not start without a GPU), else vllm_image."""
    if service.get("image"):
        return service["image"]
    if is_cpu(service) and settings.get("cpu_image"):
        return settings["cpu_image"]
    return settings.get("image")


def service_version(service, settings, method):
    """The vLLM version a service runs: its image's tag in compose when it names one, else ``settings['version']``
    (vllm_version, what the systemd method installs)."""
    if method == "compose":
        found = image_version(service_image(service, settings))
        if found:
            return found
    return parse_version(settings.get("version"))


def shutdown_timeout(settings):
    return int(settings.get("shutdown_timeout", DEFAULT_SHUTDOWN_TIMEOUT))


def shutdown_flag(service, settings, method):
    """The --shutdown-timeout value for this service, or None where its vLLM predates the flag."""
    version = service_version(service, settings, method)
    if version is None or version < SHUTDOWN_TIMEOUT_SINCE:
        return None
    return shutdown_timeout(settings)


def render_warnings(services, settings, method):
    """What the deployment cannot do as asked: services whose vLLM has no --shutdown-timeout."""
    old = [(s["name"], service_version(s, settings, method)) for s in services
           if shutdown_flag(s, settings, method) is None]
    if not old:
        return []
    return ["vllm_shutdown_timeout %d is not passed to %s: --shutdown-timeout exists from vLLM %s (vllm-project/vllm"
            "#34730); older vLLMs refuse it, and on SIGTERM abort open requests at once (the stop timeout still "
            "waits %d s). Use vllm_image / vllm_version 0.18.0 or later to drain."
            % (shutdown_timeout(settings), ", ".join("%s (vLLM %s)" % (name, ".".join(str(x) for x in v) if v else "?")
                                                     for name, v in old),
               ".".join(str(x) for x in SHUTDOWN_TIMEOUT_SINCE), stop_timeout(settings))]


def stop_timeout(settings):
    """Seconds the container engine or systemd waits after SIGTERM before SIGKILL: vLLM's drain + 15."""
    return shutdown_timeout(settings) + STOP_GRACE_EXTRA


def is_cpu(service):
    return service.get("device") == "cpu"


def vllm_args(service, port, host=None, drain=None):
    """vLLM's server flags for a planned service (the model id or directory first, as ``vllm serve`` takes it);
    ``drain`` is the --shutdown-timeout to pass (None: not passed)."""
    args = ["--model", service["model"], "--served-model-name", service["name"]]
    if host:
        args += ["--host", host]
    args += ["--port", str(port), "--dtype", service["dtype"]]
    if not is_cpu(service):
        args += ["--tensor-parallel-size", str(service["tensor_parallel_size"]),
                 "--gpu-memory-utilization", "%g" % service["gpu_memory_utilization"]]
    args += ["--max-model-len", str(service["max_model_len"]), "--max-num-seqs", str(service["max_num_seqs"])]
    if drain is not None:
        args += ["--shutdown-timeout", str(int(drain))]
    if service.get("quantization"):
        args += ["--quantization", service["quantization"]]
    if service.get("kv_cache_dtype") and service["kv_cache_dtype"] != "auto":
        args += ["--kv-cache-dtype", service["kv_cache_dtype"]]
    if service.get("enforce_eager"):
        args.append("--enforce-eager")
    if service.get("block_size") is not None:
        args += ["--block-size", str(service["block_size"])]
    if service.get("enable_chunked_prefill") is not None:
        args.append("--enable-chunked-prefill" if service["enable_chunked_prefill"] else "--no-enable-chunked-prefill")
    if service.get("disable_custom_all_reduce"):
        args.append("--disable-custom-all-reduce")
    if service.get("revision"):
        args += ["--revision", str(service["revision"])]
    loras = service.get("lora_modules") or []
    if loras:
        args.append("--enable-lora")
        args.append("--lora-modules")
        for lora in loras:
            if not isinstance(lora, dict) or not lora.get("name") or not lora.get("path"):
                raise DeployError("model %s: lora_modules entries need name and path" % service["name"])
            args.append("%s=%s" % (lora["name"], lora["path"]))
        if service.get("max_loras") is not None:
            args += ["--max-loras", str(service["max_loras"])]
        if service.get("max_lora_rank") is not None:
            args += ["--max-lora-rank", str(service["max_lora_rank"])]
    for extra in service.get("extra_args") or []:
        args.append(str(extra))
    return args


def _env(settings, offline):
    env = {"HF_HOME": "/root/.cache/huggingface"}
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    if settings.get("hf_endpoint"):
        env["HF_ENDPOINT"] = settings["hf_endpoint"]
    env.update(settings.get("extra_env") or {})
    return env


def device_env(service):
    """A cpu model's KV cache size (vLLM's VLLM_CPU_KVCACHE_SPACE, GiB); NCCL's switches of a GPU model."""
    if is_cpu(service):
        return {"VLLM_CPU_KVCACHE_SPACE": str(int(service["cpu_kvcache_space_gib"]))}
    return nccl_env(service)


def nccl_env(service):
    """NCCL's switches of a model (seed 001's multi-GPU unit: NCCL_P2P_DISABLE=0, NCCL_IB_DISABLE=1)."""
    env = {}
    for key, name in (("nccl_p2p_disable", "NCCL_P2P_DISABLE"), ("nccl_ib_disable", "NCCL_IB_DISABLE")):
        if service.get(key) is not None:
            env[name] = "1" if service[key] else "0"
    return env


def service_key(name):
    """The compose service and systemd unit name of a served model: ``Fast`` and ``fast``, ``a.b`` and ``a-b``
    fold to the same key (check_settings refuses such pairs)."""
    return "vllm-" + re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-")


def check_services(services):
    """Distinct unprivileged ports (a digit string is used as its number, as everywhere in the collection)."""
    ports = {}
    for service in services:
        port = value_checks.as_port(service.get("port"), lowest=1024)
        if port is None:
            raise DeployError("model %s: port %r must be an integer from 1024 to 65535"
                              % (service.get("name"), service.get("port")))
        service["port"] = port
        if port in ports:
            raise DeployError("models %s and %s both use port %d" % (ports[port], service["name"], port))
        ports[port] = service["name"]


SERVED_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
MODEL_INT_KEYS = (("max_model_len", 1), ("max_num_seqs", 1), ("tensor_parallel_size", 1), ("bits", 1))
BOOL_KEYS = ("enforce_eager", "enable_chunked_prefill", "disable_custom_all_reduce", "nccl_p2p_disable",
             "nccl_ib_disable")
# vLLM's choices (vllm/config: BlockSize, and the LoRA ranks its kernels are built for).
CHOICE_KEYS = (("block_size", (1, 8, 16, 32, 64, 128)), ("max_lora_rank", (1, 8, 16, 32, 64, 128, 256, 320, 512)))
SCALARS = (str, int, float)


def _path_problem(value):
    if not isinstance(value, str) or not value.startswith("/"):
        return "%r is not an absolute path" % (value,)
    if re.search(r"[\x00-\x1f\x7f]", value):
        return "%r has a control character (newline, tab...)" % (value,)
    return None


def _env_problems(variable, env):
    if env is None:
        return []
    if not isinstance(env, dict):
        return ["%s: must be a mapping NAME: value, got %s" % (variable, value_checks.type_name(env))]
    problems = []
    for name, value in env.items():
        if not value_checks.is_env_name(name):
            problems.append("%s: %r is not an environment variable name (letters, digits, _; not first a digit)"
                            % (variable, name))
        if isinstance(value, bool) or not isinstance(value, SCALARS):
            problems.append("%s.%s: must be a string or a number, got %s"
                            % (variable, name, value_checks.type_name(value)))
    return problems


def _device_problems(label, model, default_device):
    """A model's device (its own, else vllm_device), and what a cpu model cannot have; a local model directory."""
    problems = []
    device = model.get("device")
    if device is not None and device not in DEVICES:
        problems.append("%s.device: %r is not gpu or cpu" % (label, device))
        return problems
    device = device or default_device
    space = model.get("cpu_kvcache_space_gib")
    if device == "cpu":
        for key in GPU_ONLY_KEYS:
            if model.get(key) is None or (key == "tensor_parallel_size" and value_checks.as_int(model[key]) == 1):
                continue
            problems.append("%s.%s: a cpu model (device cpu) runs on no GPU: %s is for GPU models; drop it or set "
                            "device: gpu" % (label, key, key))
        if space is not None:
            number = value_checks.as_int(space)
            if number is None or number < 1:
                problems.append("%s.cpu_kvcache_space_gib: %r is not a whole number of GiB >= 1 (vLLM's "
                                "VLLM_CPU_KVCACHE_SPACE)" % (label, space))
    elif device == "gpu" and space is not None:
        problems.append("%s.cpu_kvcache_space_gib: only for a cpu model (device cpu, or vllm_device cpu); a GPU "
                        "model's KV cache is what its GPU memory leaves" % label)
    if model.get("dtype") is not None and model["dtype"] not in DTYPES:
        problems.append("%s.dtype: %r is not one of %s" % (label, model["dtype"], ", ".join(DTYPES)))
    path = model.get("model")
    if vllm_model.is_path_model(path):
        problem = _path_problem(path)
        if problem or ":" in path or "," in path:
            problems.append("%s.model: %s" % (label, problem or "%r: a model directory with ':' or ',' cannot be "
                                                                "bind-mounted into the container" % (path,)))
        if model.get("revision") is not None:
            problems.append("%s.revision: a local model directory has no revision (revisions are the Hub's)" % label)
    return problems


def _model_problems(index, model, default_device="gpu"):
    """Problems of one vllm_models entry that would otherwise crash the planner or the renderer."""
    label = "vllm_models[%d]" % index
    if not isinstance(model, dict):
        return ["%s: must be a mapping {name, model, port, ...}, got %s" % (label, value_checks.type_name(model))]
    problems = []
    name = model.get("name")
    if not isinstance(name, str) or not SERVED_NAME_RE.match(name):
        problems.append("%s.name: %r is not a served model name (letters, digits, . _ : / -; first a letter or "
                        "digit)" % (label, name))
    else:
        label = "%s (%s)" % (label, name)
    if not isinstance(model.get("model"), str) or not model["model"].strip() or re.search(r"\s", model["model"]):
        problems.append("%s.model: %r is not a Hugging Face model id or a model directory (an absolute path)"
                        % (label, model.get("model")))
    problems.extend(_device_problems(label, model, default_device))
    if value_checks.as_port(model.get("port"), lowest=1024) is None:
        problems.append("%s.port: %r is not a TCP port from 1024 to 65535 (a number, or a string of digits)"
                        % (label, model.get("port")))
    for key, lowest in MODEL_INT_KEYS:
        if model.get(key) is not None:
            number = value_checks.as_int(model[key])
            if number is None or number < lowest:
                problems.append("%s.%s: %r is not a whole number >= %d" % (label, key, model[key], lowest))
    if model.get("gpu_memory_utilization") is not None:
        fraction = value_checks.as_number(model["gpu_memory_utilization"])
        if fraction is None or not 0 < fraction <= 1:
            problems.append("%s.gpu_memory_utilization: %r is not a fraction of GPU memory (0-1, e.g. 0.45)"
                            % (label, model["gpu_memory_utilization"]))
    gpus = model.get("gpus")
    if gpus is not None:
        indices = [value_checks.as_int(g) for g in gpus] if isinstance(gpus, list) else [None]
        if not indices or None in indices:
            problems.append("%s.gpus: %r must be a non-empty list of GPU indices (0, 1, ...)" % (label, gpus))
        elif len(set(indices)) != len(indices):
            problems.append("%s.gpus: %r lists a GPU twice" % (label, gpus))
    for key in BOOL_KEYS:
        if key in model and model[key] is not None and not isinstance(model[key], bool):
            problems.append("%s.%s: %r must be true or false" % (label, key, model[key]))
    for key, allowed in CHOICE_KEYS:
        if model.get(key) is not None and value_checks.as_int(model[key]) not in allowed:
            problems.append("%s.%s: %r is not one of vLLM's values (%s)" % (label, key, model[key],
                                                                            ", ".join(str(a) for a in allowed)))
    if model.get("max_loras") is not None:
        count = value_checks.as_int(model["max_loras"])
        if count is None or count < 1:
            problems.append("%s.max_loras: %r is not a whole number >= 1" % (label, model["max_loras"]))
    for key in ("max_loras", "max_lora_rank"):
        if model.get(key) is not None and not model.get("lora_modules"):
            problems.append("%s.%s: only with lora_modules (vLLM serves LoRA adapters only with --enable-lora)"
                            % (label, key))
    if model.get("nccl_p2p_disable") is True and model.get("disable_custom_all_reduce") is False:
        problems.append("%s: disable_custom_all_reduce false needs peer-to-peer access between the GPUs, which "
                        "nccl_p2p_disable true turns off; drop one of them" % label)
    architecture = model.get("architecture")
    if architecture is not None:
        if not isinstance(architecture, dict):
            problems.append("%s.architecture: must be a mapping {params_b, layers, ...}" % label)
        else:
            for key, value in architecture.items():
                if value is not None and key != "tie" and (isinstance(value, bool)
                                                           or not isinstance(value, (int, float))):
                    problems.append("%s.architecture.%s: %r is not a number" % (label, key, value))
    problems.extend(_env_problems("%s.env" % label, model.get("env")))
    extra = model.get("extra_args")
    if extra is not None and (not isinstance(extra, list)
                              or any(isinstance(a, bool) or not isinstance(a, SCALARS) for a in extra)):
        problems.append("%s.extra_args: must be a list of strings (one per argument), got %r" % (label, extra))
    loras = model.get("lora_modules")
    if loras is not None and (not isinstance(loras, list) or not all(
            isinstance(lora, dict) and isinstance(lora.get("name"), str) and lora["name"]
            and "=" not in lora["name"] and _path_problem(lora.get("path")) is None for lora in loras)):
        problems.append("%s.lora_modules: must be a list of {name, path} (a name without '=', an absolute "
                        "path), got %r" % (label, loras))
    for key in ("revision", "image", "config_json"):
        if model.get(key) is not None and not isinstance(model[key], str):
            problems.append("%s.%s: %r must be a string" % (label, key, model[key]))
    if isinstance(model.get("image"), str):
        try:
            check_image(model["image"])
        except DeployError as exc:
            problems.append("%s.image: %s" % (label, str(exc).split(": ", 1)[1]))
    return problems


def check_settings(settings):
    """Every problem in the vllm role's variables (full names as keys), each naming the variable; [] when usable.

    Runs first in the role's validate step, before anything is read or written: wrong types (``max_model_len:
    lots``), ports out of range, an address that is not an IP address, and two models whose names fold to the
    same compose service / systemd unit name (``Fast`` and ``fast``: one would silently replace the other)."""
    problems = []
    models = settings.get("vllm_models")
    if models is None:
        models = []
    if not isinstance(models, list):
        return ["vllm_models: must be a list of {name, model, port, ...}, got %s" % value_checks.type_name(models)]
    keys, ports = {}, {}
    device = settings.get("vllm_device", "gpu")
    if device not in DEVICES:
        problems.append("vllm_device: %r is not gpu or cpu" % (device,))
        device = "gpu"
    for index, model in enumerate(models):
        problems.extend(_model_problems(index, model, device))
        if not isinstance(model, dict):
            continue
        name = model.get("name")
        if isinstance(name, str) and SERVED_NAME_RE.match(name):
            key = service_key(name)
            if key in keys:
                other_index, other = keys[key]
                problems.append("vllm_models[%d] (%s) and vllm_models[%d] (%s) map to the same compose service and "
                                "systemd unit %s: rename one (names are folded to lowercase, and characters other "
                                "than letters, digits and - become -)" % (other_index, other, index, name, key))
            else:
                keys[key] = (index, name)
        port = value_checks.as_port(model.get("port"), lowest=1024)
        if port is not None:
            if port in ports:
                problems.append("vllm_models[%d].port: %d is also the port of vllm_models[%d] (%s)"
                                % (index, port, ports[port][0], ports[port][1]))
            else:
                ports[port] = (index, name)
    if models:
        address = settings.get("vllm_bind_address")
        if value_checks.ip_address(address) is None:
            problems.append("vllm_bind_address: %r is not an IP address (the model ports are published on it; a "
                            "host name cannot be bound)" % (address,))
        fraction = value_checks.as_number(settings.get("vllm_gpu_memory_utilization", 0.9))
        if fraction is None or not 0 < fraction <= 1:
            problems.append("vllm_gpu_memory_utilization: %r is not a fraction of GPU memory (0-1, e.g. 0.9)"
                            % (settings.get("vllm_gpu_memory_utilization"),))
        for variable, lowest in (("vllm_start_period", 0), ("vllm_health_timeout", 1), ("vllm_shutdown_timeout", 0)):
            if variable in settings:
                number = value_checks.as_int(settings[variable])
                if number is None or number < lowest:
                    problems.append("%s: %r is not a whole number of seconds >= %d"
                                    % (variable, settings[variable], lowest))
        if "vllm_cpu_kvcache_space_gib" in settings:
            space = value_checks.as_int(settings["vllm_cpu_kvcache_space_gib"])
            if space is None or space < 1:
                problems.append("vllm_cpu_kvcache_space_gib: %r is not a whole number of GiB >= 1 (vLLM's "
                                "VLLM_CPU_KVCACHE_SPACE)" % (settings["vllm_cpu_kvcache_space_gib"],))
        if "vllm_version" in settings and parse_version(settings["vllm_version"]) is None:
            problems.append("vllm_version: %r is not a vLLM version (e.g. 0.11.0): the systemd method installs it, "
                            "and the flags passed depend on it" % (settings["vllm_version"],))
        problems.extend(_env_problems("vllm_extra_env", settings.get("vllm_extra_env")))
        for variable in ("vllm_image", "vllm_cpu_image"):
            if variable in settings:
                try:
                    check_image(settings[variable])
                except DeployError as exc:
                    problems.append(str(exc).replace("vllm_image:", variable + ":", 1))
        if "vllm_model_disk" in settings and settings["vllm_model_disk"] not in MODEL_DISK_MODES:
            problems.append("vllm_model_disk: %r is not one of %s" % (settings["vllm_model_disk"],
                                                                      ", ".join(MODEL_DISK_MODES)))
        if "vllm_model_disk_fstype" in settings and settings["vllm_model_disk_fstype"] not in MODEL_DISK_FSTYPES:
            problems.append("vllm_model_disk_fstype: %r is not one of %s" % (settings["vllm_model_disk_fstype"],
                                                                             ", ".join(MODEL_DISK_FSTYPES)))
        device = settings.get("vllm_model_disk_device")
        if device is not None and not re.match(r"^/dev/[A-Za-z0-9._:/+-]+$", str(device)):
            problems.append("vllm_model_disk_device: %r is not a device path under /dev" % (device,))
        for variable in ("vllm_dir", "vllm_venv", "vllm_hf_home", "vllm_cache_dir", "vllm_model_disk_mount"):
            if variable in settings:
                problem = _path_problem(settings[variable])
                if problem:
                    problems.append("%s: %s" % (variable, problem))
        user = settings.get("vllm_user", "vllm")
        if not isinstance(user, str) or not USER_RE.match(user):
            problems.append("vllm_user: %r is not a system user name (lowercase letters, digits, _ -; at most 32)"
                            % (user,))
        endpoint = settings.get("vllm_hf_endpoint") or ""
        if not isinstance(endpoint, str) or (endpoint and not re.match(r"^https?://[^\s\"'%$]+$", endpoint)):
            problems.append("vllm_hf_endpoint: %r is not an http(s):// URL" % (endpoint,))
    return problems


def compose(services, settings):
    """The compose project (a dict for to_nice_yaml) of the planned services."""
    check_services(services)
    image = check_image(settings["image"])
    # No top-level 'name': Compose v1 (Debian's docker-compose) refuses it; the project is named after vllm_dir.
    project = {"services": {}}
    for service in services:
        env = _env(settings, settings.get("offline", False))
        env.update(device_env(service))
        env.update(service.get("env") or {})
        volumes = ["%s:/root/.cache/huggingface" % settings["hf_home"], "%s:/root/.cache/vllm" % settings["cache_dir"]]
        if vllm_model.is_path_model(service["model"]):
            # The local model directory, read-only at the same path: the container serves the path it was given.
            volumes.append("%s:%s:ro" % (service["model"], service["model"]))
        definition = {
            "image": service_image(service, settings) or image,
            "restart": settings.get("restart", "unless-stopped"),
            "ipc": "host",
            "ports": ["%s:%d:%d" % (settings.get("bind_address", "127.0.0.1"), service["port"], CONTAINER_PORT)],
            "volumes": volumes,
            "environment": dict((k, str(v)) for k, v in sorted(env.items())),
            "command": vllm_args(service, CONTAINER_PORT, drain=shutdown_flag(service, settings, "compose")),
            "stop_grace_period": "%ds" % stop_timeout(settings),
            "healthcheck": {"test": ["CMD", "python3", "-c", HEALTH_PROBE % CONTAINER_PORT],
                            "interval": "30s", "timeout": "10s", "retries": 3,
                            "start_period": "%ds" % int(settings.get("start_period", 900))},
            "logging": {"driver": "json-file", "options": {"max-size": "50m", "max-file": "5"}},
            "labels": {"io.llmstack.model": service["model"], "io.llmstack.served-name": service["name"]},
        }
        if is_cpu(service):
            definition["cap_add"] = ["SYS_NICE"]
        else:
            definition["deploy"] = {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "device_ids": [str(g) for g in service["gpus"]], "capabilities": ["gpu"]}]}}}
        if settings.get("env_file"):
            definition["env_file"] = [settings["env_file"]]
        if service.get("image"):
            check_image(service["image"])
        project["services"][service_key(service["name"])] = definition
    return project


# ExecStart= words that need neither quotes nor escapes (systemd.service(5), "Command lines").
SYSTEMD_PLAIN_WORD = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def _systemd_c_escape(text):
    """The inside of a double-quoted systemd string: backslash, double quote and control characters escaped."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif ord(char) < 0x20 or ord(char) == 0x7f:
            out.append("\\x%02x" % ord(char))
        else:
            out.append(char)
    return "".join(out)


def systemd_exec_word(word):
    """One ExecStart= argument, so that systemd passes exactly ``word``: ``%`` (specifiers) doubled, ``$``
    (variable expansion) doubled, and, unless the word is plain, the whole word in double quotes with C escapes
    (systemd.service(5) documents quotes around whole words only; shlex.quote, used before, left ``%`` and ``$``
    for systemd to expand)."""
    text = str(word)
    if text == ";":
        return "\\;"          # a lone ; separates commands; \; is the literal argument
    text = text.replace("%", "%%").replace("$", "$$")
    if SYSTEMD_PLAIN_WORD.match(text):
        return text
    return '"%s"' % _systemd_c_escape(text)


def systemd_environment(name, value):
    """The value of one Environment= line, ``"NAME=value"``: quoted, C-escaped, ``%`` doubled (Environment=
    expands specifiers but not ``$``)."""
    if not value_checks.is_env_name(name):
        raise DeployError("environment variable name %r is not usable (letters, digits, _)" % (name,))
    return '"%s=%s"' % (name, _systemd_c_escape(str(value).replace("%", "%%")))


def _systemd_line(value):
    """A value systemd takes as the rest of the line (Description=, WorkingDirectory=, EnvironmentFile=, User=):
    specifiers doubled, control characters (a newline would start a new directive) refused."""
    text = str(value)
    if re.search(r"[\x00-\x1f\x7f]", text):
        raise DeployError("%r has a control character and cannot go into a systemd unit" % (text,))
    return text.replace("%", "%%")


def systemd_unit_text(unit):
    """The unit file of one systemd_units() entry; every value escaped for systemd. ``EnvironmentFile=`` has no
    ``-`` prefix: without its env file (the API key) the unit fails to start instead of serving without a key."""
    lines = ["[Unit]", "Description=%s" % _systemd_line(unit["description"]),
             "After=network-online.target", "Wants=network-online.target"]
    if unit.get("mounts_for"):
        lines.append("RequiresMountsFor=%s" % _systemd_line(unit["mounts_for"]))
    lines += ["", "[Service]", "Type=simple",
              "User=%s" % _systemd_line(unit["user"]), "Group=%s" % _systemd_line(unit["user"])]
    if unit.get("working_directory"):
        lines.append("WorkingDirectory=%s" % _systemd_line(unit["working_directory"]))
    lines.extend("Environment=%s" % systemd_environment(name, value) for name, value in unit["environment"])
    if unit.get("env_file"):
        lines.append("EnvironmentFile=%s" % _systemd_line(unit["env_file"]))
    lines += ["ExecStart=%s" % " ".join(systemd_exec_word(word) for word in unit["argv"]),
              "Restart=always", "RestartSec=10", "TimeoutStartSec=900",
              # SIGTERM to the API server alone, which drains (--shutdown-timeout) and then stops its engine
              # processes; SIGKILL to the whole unit once TimeoutStopSec= is over.
              "KillSignal=SIGTERM", "KillMode=mixed", "TimeoutStopSec=%d" % int(unit["timeout_stop_sec"]),
              "LimitNOFILE=65536", "",
              "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


def systemd_units(services, settings):
    """{unit file name: {description, environment, argv, exec_start, text, ...}} for the planned services;
    ``text`` is the whole unit file, escaped for systemd (the role's template prints it)."""
    check_services(services)
    units = {}
    for service in services:
        env = {"HF_HOME": settings["hf_home"], "VLLM_CACHE_ROOT": settings["cache_dir"]}
        # A cpu model sees no GPU: on a host whose GPU models share its venv (a CUDA build of vLLM), an unset
        # CUDA_VISIBLE_DEVICES would let it start on GPU 0, on top of the model planned there.
        env["CUDA_VISIBLE_DEVICES"] = "" if is_cpu(service) else ",".join(str(g) for g in service["gpus"])
        if settings.get("offline", False):
            env["HF_HUB_OFFLINE"] = "1"
        if settings.get("hf_endpoint"):
            env["HF_ENDPOINT"] = settings["hf_endpoint"]
        env.update(settings.get("extra_env") or {})
        env.update(device_env(service))
        env.update(service.get("env") or {})
        args = vllm_args(service, service["port"], host=settings.get("bind_address", "127.0.0.1"),
                         drain=shutdown_flag(service, settings, "systemd"))
        argv = [settings["venv"] + "/bin/vllm", "serve"] + args[1:]
        where = "CPU" if is_cpu(service) else "GPU %s" % ",".join(str(g) for g in service["gpus"])
        unit = {
            "description": "vLLM %s (%s) on %s" % (service["name"], service["model"], where),
            "timeout_stop_sec": stop_timeout(settings),
            "environment": sorted((str(k), str(v)) for k, v in env.items()),
            "env_file": settings.get("env_file"),
            "argv": argv,
            "exec_start": " ".join(systemd_exec_word(word) for word in argv),
            "user": settings.get("user", "vllm"),
            "working_directory": settings.get("dir"),
            # The weights' file system (the model disk, mounted with nofail) before the server starts.
            "mounts_for": settings["hf_home"],
        }
        unit["text"] = systemd_unit_text(unit)
        units["%s.service" % service_key(service["name"])] = unit
    return units
