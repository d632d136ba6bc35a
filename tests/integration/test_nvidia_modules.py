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


def stand_in(tmp_path, broken=False):
    script = tmp_path / "nvidia-smi"
    if broken:
        body = 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2; exit 9\n'
    else:
        body = ('case "$1" in\n  -q) cat "%s/smi-q-x-2x3090.xml" ;;\n  topo) cat "%s/topo-platform-a.txt" ;;\n'
                '  --query-gpu=*) sed 1d "%s/query-gpu.csv" | sed "s/ MiB//" ;;\n  *) exit 2 ;;\nesac\n'
                % (FIXTURES, FIXTURES, FIXTURES))
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
