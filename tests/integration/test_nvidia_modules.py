"""nvidia_gpu_facts and vllm_plan through ansible, as a playbook calls them. There is no GPU here: nvidia-smi is a
stand-in script that prints the recorded fixtures (tests/fixtures/nvidia, see SOURCE there) for the arguments the
module passes, and fails like the real one when the driver is missing."""

import json
import os
import stat
import subprocess

from conftest import BIN, ROOT, ansible_env, parse_json_report

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "nvidia")


def run_module(module, args, env=None):
    cmd = [os.path.join(BIN, "ansible"), "localhost", "-m", "pvegpu.llmstack." + module, "-a", json.dumps(args)]
    extra = dict(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    extra.update(env or {})
    result = subprocess.run(cmd, cwd=ROOT, env=ansible_env(**extra), text=True, capture_output=True, check=False,
                            timeout=120)
    report = parse_json_report(result.stdout)
    return list(report["plays"][0]["tasks"][0]["hosts"].values())[0]


def stand_in(tmp_path, broken=False, nvlink=None):
    script = tmp_path / "nvidia-smi"
    if broken:
        body = 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2; exit 9\n'
    else:
        body = ('case "$1" in\n  -q) cat "%s/smi-q-x-2x3090.xml" ;;\n  topo) cat "%s/topo-platform-a.txt" ;;\n'
                '  --query-gpu=*) sed 1d "%s/query-gpu.csv" | sed "s/ MiB//" ;;\n%s  *) exit 2 ;;\nesac\n'
                % (FIXTURES, FIXTURES, FIXTURES, '  nvlink) cat "%s/%s" ;;\n' % (FIXTURES, nvlink) if nvlink else ""))
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_facts_from_the_running_command(tmp_path):
    result = run_module("nvidia_gpu_facts", {"nvidia_smi": stand_in(tmp_path)})
    facts = result["ansible_facts"]["llmstack_nvidia"]
    assert facts["driver_version"] == "550.163.01"
    assert [(g["index"], g["bus_id"], g["memory_mib"], g["compute_capability"]) for g in facts["gpus"]] == [
        (0, "0000:41:00.0", 24576, "8.6"), (1, "0000:61:00.0", 24576, "8.6")]
    assert facts["topology"]["links"]["GPU0"]["GPU3"] == "PHB"
    # This board has no NVLink: the stand-in fails `nvlink -s` as such a board may; no links, not a failure.
    assert facts["nvlink"] == {}


def test_nvlink_status_is_read_when_the_board_has_it(tmp_path):
    result = run_module("nvidia_gpu_facts", {"nvidia_smi": stand_in(tmp_path, nvlink="nvlink-s-inactive.txt")})
    nvlink = result["ansible_facts"]["llmstack_nvidia"]["nvlink"]
    assert nvlink["1"]["links"] == {"0": 25.781, "1": None}  # JSON keys: strings


def test_a_broken_driver_is_reported(tmp_path):
    result = run_module("nvidia_gpu_facts", {"nvidia_smi": stand_in(tmp_path, broken=True)})
    assert result["failed"] and "couldn't communicate with the NVIDIA driver" in result["msg"]
    missing = run_module("nvidia_gpu_facts", {"nvidia_smi": "nvidia-smi-not-installed"})
    assert missing["failed"] and "is not installed or not in PATH" in missing["msg"]


def test_vllm_plan_refuses_the_seed_122b_layout_by_name():
    gpus = [{"index": i, "name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576, "compute_capability": "8.6"}
            for i in range(4)]
    result = run_module("vllm_plan", {"gpus": gpus, "models": [
        {"name": "reasoning", "model": "Qwen/Qwen3.5-122B-A10B", "dtype": "float16", "gpus": [2, 3],
         "max_model_len": 8192}]})
    assert result["failed"] and "model reasoning (Qwen/Qwen3.5-122B-A10B): does not fit on GPU(s) [2, 3]" in \
        result["msg"]
    ok = run_module("vllm_plan", {"gpus": gpus, "models": [
        {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpus": [0], "port": 8001}]})
    assert ok["services"][0]["port"] == 8001 and ok["services"][0]["estimates"]["kv_tokens"] == 39680


def test_rendered_compose_is_valid_for_a_real_compose_implementation(tmp_path):
    """Debian's docker-compose (Compose v1.29, the compose implementation installable here) parses and validates
    the project the vllm role writes; it needs no Docker engine for `config`."""
    import shutil

    import yaml

    compose_bin = shutil.which("docker-compose")
    assert compose_bin, "docker-compose is installed by make setup (APT_PACKAGES)"
    gpus = [{"index": i, "name": "NVIDIA GeForce RTX 3090", "memory_mib": 24576, "compute_capability": "8.6"}
            for i in range(4)]
    models = [{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpus": [0], "port": 8001},
              {"name": "balanced", "model": "Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4", "max_model_len": 8192,
               "gpus": [1], "port": 8002},
              {"name": "reasoning", "model": "casperhansen/deepseek-r1-distill-qwen-32b-awq", "max_model_len": 8192,
               "gpus": [2, 3], "port": 8003}]
    plan = run_module("vllm_plan", {"gpus": gpus, "models": models})
    env_file = tmp_path / "vllm.env"
    env_file.write_text("VLLM_API_KEY=test-only\n")
    rendered = run_module("vllm_render", {"services": plan["services"], "method": "compose", "settings": {
        "image": "vllm/vllm-openai:v0.11.0", "bind_address": "127.0.0.1", "hf_home": str(tmp_path / "hf"),
        "cache_dir": str(tmp_path / "cache"), "env_file": str(env_file), "offline": True}})
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(rendered["compose"]))
    check = subprocess.run([compose_bin, "config"], cwd=str(tmp_path), text=True, capture_output=True, check=False)
    assert check.returncode == 0, check.stderr
    normalised = yaml.safe_load(check.stdout)["services"]
    assert sorted(normalised) == ["vllm-balanced", "vllm-fast", "vllm-reasoning"]
    assert all(p.startswith("127.0.0.1:") for s in normalised.values() for p in s["ports"])
    assert normalised["vllm-reasoning"]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["2", "3"]
    assert normalised["vllm-fast"]["environment"]["VLLM_API_KEY"] == "test-only"   # from the env file only
