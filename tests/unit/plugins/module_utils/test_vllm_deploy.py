"""module_utils.vllm_deploy: the compose project and systemd units of planned services (seed 000 §compose,
seed 001's unit)."""

import shlex

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import vllm_deploy, vllm_plan

GPUS = [{"index": i, "name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576, "compute_capability": "8.6"}
        for i in range(4)]
MODELS = [
    {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpus": [0], "port": 8001},
    {"name": "reasoning", "model": "casperhansen/deepseek-r1-distill-qwen-32b-awq", "max_model_len": 8192,
     "gpus": [2, 3], "port": 8003, "enforce_eager": True,
     "lora_modules": [{"name": "sql", "path": "/opt/llm-inference/lora/sql"}]},
]
SETTINGS = {"image": "vllm/vllm-openai:v0.11.0", "bind_address": "127.0.0.1", "hf_home": "/opt/llm-inference/hf-cache",
            "cache_dir": "/opt/llm-inference/vllm-cache", "env_file": "/opt/llm-inference/secrets/vllm.env",
            "offline": True, "venv": "/opt/llm-inference/venv", "user": "vllm", "dir": "/opt/llm-inference"}


@pytest.fixture(scope="module")
def services():
    return vllm_plan.plan(GPUS, MODELS)["services"]


def flag(args, name):
    return args[args.index(name) + 1]


def test_compose_binds_ports_to_localhost_and_reserves_the_planned_gpus(services):
    project = vllm_deploy.compose(services, SETTINGS)
    fast, reasoning = project["services"]["vllm-fast"], project["services"]["vllm-reasoning"]
    assert fast["ports"] == ["127.0.0.1:8001:8000"] and reasoning["ports"] == ["127.0.0.1:8003:8000"]
    devices = reasoning["deploy"]["resources"]["reservations"]["devices"][0]
    assert devices == {"driver": "nvidia", "device_ids": ["2", "3"], "capabilities": ["gpu"]}
    assert fast["ipc"] == "host" and fast["image"] == "vllm/vllm-openai:v0.11.0"
    assert fast["environment"]["HF_HUB_OFFLINE"] == "1" and fast["env_file"] == [SETTINGS["env_file"]]
    assert "/health" in " ".join(fast["healthcheck"]["test"]) and "/v1/models" not in str(fast["healthcheck"])
    assert fast["logging"]["options"]["max-size"] == "50m"


def test_flags_come_from_the_plan(services):
    args = vllm_deploy.compose(services, SETTINGS)["services"]["vllm-reasoning"]["command"]
    assert flag(args, "--model") == "casperhansen/deepseek-r1-distill-qwen-32b-awq"
    assert flag(args, "--served-model-name") == "reasoning" and flag(args, "--tensor-parallel-size") == "2"
    assert flag(args, "--quantization") == "awq" and "--enforce-eager" in args and flag(args, "--port") == "8000"
    planned = [s for s in services if s["name"] == "reasoning"][0]
    assert flag(args, "--max-num-seqs") == str(planned["max_num_seqs"])
    assert args[args.index("--lora-modules") + 1] == "sql=/opt/llm-inference/lora/sql" and "--enable-lora" in args


def test_the_api_key_is_never_rendered(services):
    text = repr(vllm_deploy.compose(services, SETTINGS)) + repr(vllm_deploy.systemd_units(services, SETTINGS))
    assert "--api-key" not in text and "VLLM_API_KEY" not in text


def test_systemd_units_pin_the_gpus_and_run_vllm_serve(services):
    units = vllm_deploy.systemd_units(services, SETTINGS)
    assert sorted(units) == ["vllm-fast.service", "vllm-reasoning.service"]
    unit = units["vllm-reasoning.service"]
    assert dict(unit["environment"])["CUDA_VISIBLE_DEVICES"] == "2,3"
    argv = shlex.split(unit["exec_start"])
    assert argv[:3] == ["/opt/llm-inference/venv/bin/vllm", "serve", "casperhansen/deepseek-r1-distill-qwen-32b-awq"]
    assert flag(argv, "--host") == "127.0.0.1" and flag(argv, "--port") == "8003" and unit["user"] == "vllm"


@pytest.mark.parametrize("image", ["vllm/vllm-openai", "vllm/vllm-openai:latest", "registry:5000/vllm"])
def test_unpinned_images_are_refused(services, image):
    with pytest.raises(vllm_deploy.DeployError, match="needs a pinned tag"):
        vllm_deploy.compose(services, dict(SETTINGS, image=image))


def test_registry_port_and_digest_are_fine():
    assert vllm_deploy.check_image("registry:5000/vllm/vllm-openai:v0.11.0")
    assert vllm_deploy.check_image("vllm/vllm-openai@sha256:" + "a" * 64)


@pytest.mark.parametrize("ports, message", [([8001, 8001], "both use port 8001"), ([80, 8002], "port 80 must be"),
                                            ([None, 8002], "port None must be")])
def test_ports_must_be_distinct_and_unprivileged(services, ports, message):
    broken = [dict(s, port=p) for s, p in zip(services, ports, strict=True)]
    with pytest.raises(vllm_deploy.DeployError, match=message):
        vllm_deploy.compose(broken, SETTINGS)
