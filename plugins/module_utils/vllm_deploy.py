# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the vllm role deploys, from vllm_plan's services: a compose project (seed 000 §compose) or one
systemd unit per model (seed 001). Plain Python; the role's templates only print what this returns.

Choices, each from the seeds or from vLLM's behaviour:
- ports bound to ``bind_address`` (127.0.0.1 by default: seed 000 "listen on localhost only");
- the health check asks ``/health``, which fails once the engine is dead, not ``/v1/models``, which the API
  server keeps answering;
- the API key reaches vLLM through the ``VLLM_API_KEY`` environment variable from a 0600 env file, never on
  the command line or in the compose file;
- a pinned image tag (no ``latest``), ``ipc: host`` (PyTorch shared memory for tensor parallelism),
  log rotation, and ``HF_HUB_OFFLINE=1`` once the weights are on disk.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

CONTAINER_PORT = 8000
# Runs inside the vLLM image (which has Python, not necessarily curl).
HEALTH_PROBE = ("import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', %d, timeout=5); "
                "c.request('GET', '/health'); sys.exit(0 if c.getresponse().status == 200 else 1)")


class DeployError(ValueError):
    pass


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


def vllm_args(service, port, host=None):
    """vLLM's server flags for a planned service (the model id first, as ``vllm serve`` takes it)."""
    args = ["--model", service["model"], "--served-model-name", service["name"]]
    if host:
        args += ["--host", host]
    args += ["--port", str(port), "--dtype", service["dtype"],
             "--tensor-parallel-size", str(service["tensor_parallel_size"]),
             "--gpu-memory-utilization", "%g" % service["gpu_memory_utilization"],
             "--max-model-len", str(service["max_model_len"]), "--max-num-seqs", str(service["max_num_seqs"])]
    if service.get("quantization"):
        args += ["--quantization", service["quantization"]]
    if service.get("kv_cache_dtype") and service["kv_cache_dtype"] != "auto":
        args += ["--kv-cache-dtype", service["kv_cache_dtype"]]
    if service.get("enforce_eager"):
        args.append("--enforce-eager")
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


def service_key(name):
    return "vllm-" + re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-")


def check_services(services):
    ports = {}
    for service in services:
        port = service.get("port")
        if not isinstance(port, int) or not 1024 <= port <= 65535:
            raise DeployError("model %s: port %r must be an integer from 1024 to 65535" % (service.get("name"), port))
        if port in ports:
            raise DeployError("models %s and %s both use port %d" % (ports[port], service["name"], port))
        ports[port] = service["name"]


def compose(services, settings):
    """The compose project (a dict for to_nice_yaml) of the planned services."""
    check_services(services)
    image = check_image(settings["image"])
    # No top-level 'name': Compose v1 (Debian's docker-compose) refuses it; the project is named after vllm_dir.
    project = {"services": {}}
    for service in services:
        env = _env(settings, settings.get("offline", False))
        env.update(service.get("env") or {})
        definition = {
            "image": service.get("image") or image,
            "restart": settings.get("restart", "unless-stopped"),
            "ipc": "host",
            "ports": ["%s:%d:%d" % (settings.get("bind_address", "127.0.0.1"), service["port"], CONTAINER_PORT)],
            "volumes": ["%s:/root/.cache/huggingface" % settings["hf_home"],
                        "%s:/root/.cache/vllm" % settings["cache_dir"]],
            "environment": dict((k, str(v)) for k, v in sorted(env.items())),
            "command": vllm_args(service, CONTAINER_PORT),
            "deploy": {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "device_ids": [str(g) for g in service["gpus"]], "capabilities": ["gpu"]}]}}},
            "healthcheck": {"test": ["CMD", "python3", "-c", HEALTH_PROBE % CONTAINER_PORT],
                            "interval": "30s", "timeout": "10s", "retries": 3,
                            "start_period": "%ds" % int(settings.get("start_period", 900))},
            "logging": {"driver": "json-file", "options": {"max-size": "50m", "max-file": "5"}},
            "labels": {"io.llmstack.model": service["model"], "io.llmstack.served-name": service["name"]},
        }
        if settings.get("env_file"):
            definition["env_file"] = [settings["env_file"]]
        if service.get("image"):
            check_image(service["image"])
        project["services"][service_key(service["name"])] = definition
    return project


def systemd_units(services, settings):
    """{unit file name: {description, environment, exec_start, ...}} for the planned services."""
    check_services(services)
    units = {}
    for service in services:
        env = {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in service["gpus"]),
               "HF_HOME": settings["hf_home"], "VLLM_CACHE_ROOT": settings["cache_dir"]}
        if settings.get("offline", False):
            env["HF_HUB_OFFLINE"] = "1"
        if settings.get("hf_endpoint"):
            env["HF_ENDPOINT"] = settings["hf_endpoint"]
        env.update(settings.get("extra_env") or {})
        env.update(service.get("env") or {})
        args = vllm_args(service, service["port"], host=settings.get("bind_address", "127.0.0.1"))
        exec_start = " ".join(shlex.quote(a) for a in [settings["venv"] + "/bin/vllm", "serve"] + args[1:2] + args[2:])
        units["%s.service" % service_key(service["name"])] = {
            "description": "vLLM %s (%s) on GPU %s" % (service["name"], service["model"],
                                                       ",".join(str(g) for g in service["gpus"])),
            "environment": sorted(env.items()),
            "env_file": settings.get("env_file"),
            "exec_start": exec_start,
            "user": settings.get("user", "vllm"),
            "working_directory": settings.get("dir"),
        }
    return units
