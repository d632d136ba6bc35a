"""The four service roles (litellm, langfuse, monitoring, vllm) run together on this machine (connection local, each
host's <role>_dir under a temp dir, one play that includes each host's role), for what they share:

- secrets: a secret file that cannot be read stops the run with a message naming the file, and nothing is
  generated or written in its place (only a missing file is generated; pvegpu.llmstack.secret_file);
- several gateways hold the same master key, salt key and database/Redis passwords: generated once, on one gateway,
  then written to the others; a lost one comes back from the first gateway that has it; a gateway that holds another
  value stops the run (its file is never overwritten);
- compose projects are brought up with --remove-orphans, so a service no longer in the project (a model removed
  from vllm_models) is stopped and frees its GPU.

There is no Docker engine here (and `docker compose` needs one even for --dry-run), so the compose check runs the
roles in check mode with llmstack_start_services true against a stand-in `docker` CLI (tools/docker_standin.py) first
on PATH: community.docker.docker_compose_v2 runs for real and the stand-in records the command lines it was given.
What compose then does with --remove-orphans (stopping the orphan) is NOT verified here.

Permission errors cannot be made for root here (root reads every file); tests/unit/plugins/module_utils/
test_secret_files.py makes one for real in a process that drops to nobody, and covers I/O errors with a stand-in.
"""

import json
import os
import sys

import pytest
import yaml
from conftest import ROOT, playbook
from test_litellm import GPU_A, GPU_B, free_port, run_gateway
from test_litellm import write_inventory as litellm_inventory

pytestmark = pytest.mark.slow
NVIDIA = os.path.join(ROOT, "tests", "fixtures", "nvidia")
GATEWAY_SECRETS = ("master_key", "salt_key", "postgres_password", "redis_password")


def write_inventory(base, **all_vars):
    dirs = {"gw": base / "gw" / "llm-gateway", "gpu-a": base / "gpu-a" / "llm-inference",
            "lf": base / "lf" / "langfuse", "obs": base / "obs" / "monitoring"}
    data = {"all": {
        "vars": dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                      "llmstack_start_services": False, "llmstack_loopback_shared": True}, **all_vars),
        "children": {
            "gpu_vms": {"hosts": {"gpu-a": {
                "test_role": "vllm", "vllm_dir": str(dirs["gpu-a"]), "vllm_systemd_dir": str(base / "systemd"),
                "vllm_download_models": False,
                "vllm_nvidia_recorded": {"query_csv": os.path.join(NVIDIA, "query-gpu-4x3090.csv"),
                                         "topology": os.path.join(NVIDIA, "topo-platform-a.txt")},
                "vllm_models": [{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "float16",
                                 "max_model_len": 4096, "gpus": [0], "port": 18001}],
                "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.20"},
                                        {"vlan": "inference", "address": "127.0.20.20"}]}}},
            "llm_gateways": {"hosts": {"gw": {
                "test_role": "litellm", "litellm_dir": str(dirs["gw"]), "litellm_langfuse_group": "",
                "litellm_manage_keys": False,
                "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.12"},
                                        {"vlan": "inference", "address": "127.0.20.12"}]}}},
            "langfuse": {"hosts": {"lf": {
                "test_role": "langfuse", "langfuse_dir": str(dirs["lf"]),
                "langfuse_init_user_email": "ops@llmstack.test",
                "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.14"}]}}},
            "observability": {"hosts": {"obs": {
                "test_role": "monitoring", "monitoring_dir": str(dirs["obs"]),
                "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.15"}]}}}}}}
    (base / "hosts.yml").write_text(yaml.safe_dump(data))
    (base / "play.yml").write_text(
        "- name: Each host's service role\n  hosts: gw:gpu-a:lf:obs\n  gather_facts: false\n  tasks:\n"
        "    - name: Include it\n      ansible.builtin.include_role:\n"
        "        name: \"pvegpu.llmstack.{{ test_role }}\"\n")
    return str(base / "hosts.yml"), str(base / "play.yml"), dirs


def test_an_unreadable_secret_stops_each_role_naming_the_file_and_nothing_is_generated(tmp_path):
    """One kind of unreadable file per role; each was turned into a fresh secret (or used) by the old slurp."""
    inventory, play, dirs = write_inventory(tmp_path)
    bad = {"gw": dirs["gw"] / "secrets" / "salt_key",              # a directory in the file's place
           "lf": dirs["lf"] / "secrets" / "project_secret_key",     # a directory (the last of its ten secrets)
           "obs": dirs["obs"] / "secrets" / "grafana_password",     # a dangling symbolic link
           "gpu-a": dirs["gpu-a"] / "secrets" / "api_key"}          # empty: vLLM would run with an empty key
    for host in ("gw", "lf"):
        bad[host].mkdir(parents=True)
    bad["obs"].parent.mkdir(parents=True)
    os.symlink(str(tmp_path / "lost" / "grafana_password"), str(bad["obs"]))
    bad["gpu-a"].parent.mkdir(parents=True)
    bad["gpu-a"].write_text("\n")
    # The GPU VM's key must be readable for the gateway to get past its own secrets: the gateway stops first anyway.
    rc, out, err = playbook("-i", inventory, play)
    assert rc != 0
    expected = {"gw": "%s is a directory" % bad["gw"], "lf": "%s is a directory" % bad["lf"],
                "obs": "%s is a symbolic link to a file that does not exist" % bad["obs"],
                "gpu-a": "%s is empty" % bad["gpu-a"]}
    for host, fragment in expected.items():
        assert fragment in out, "%s: %s\n%s" % (host, fragment, out[-6000:])
    # Nothing generated or written next to the unreadable file.
    assert not (dirs["gw"] / "secrets" / "master_key").exists()
    assert not (dirs["lf"] / "secrets" / "encryption_key").exists()
    assert not (dirs["obs"] / "secrets" / "grafana.env").exists()
    assert not (dirs["gpu-a"] / "secrets" / "vllm.env").exists()
    assert bad["gpu-a"].read_text() == "\n" and bad["gw"].is_dir() and os.path.islink(str(bad["obs"]))


def test_compose_projects_are_brought_up_with_remove_orphans(tmp_path, monkeypatch):
    """Check mode with llmstack_start_services true: the real docker_compose_v2 module, a stand-in docker CLI."""
    inventory, play, dirs = write_inventory(tmp_path, llmstack_start_services=True)
    for directory in dirs.values():
        directory.mkdir(parents=True)
        # A project written by an earlier run, with a model since removed from vllm_models (vllm-old).
        (directory / "docker-compose.yml").write_text("services:\n  vllm-old: {image: 'vllm/vllm-openai:v0.11.0'}\n")
    (dirs["gpu-a"] / "secrets").mkdir(mode=0o700)
    (dirs["gpu-a"] / "secrets" / "api_key").write_text("k" * 48 + "\n")   # the gateway reads it
    os.chmod(str(dirs["gpu-a"] / "secrets" / "api_key"), 0o600)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    standin = os.path.join(ROOT, "tools", "docker_standin.py")
    (bin_dir / "docker").write_text('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, standin))
    (bin_dir / "docker").chmod(0o755)
    log = tmp_path / "docker.jsonl"
    monkeypatch.setenv("DOCKER_STANDIN_LOG", str(log))
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ["PATH"])
    rc, out, err = playbook("-i", inventory, play, "--check")
    assert rc == 0, out[-6000:] + err[-2000:]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    ups = {}
    for argv in calls:
        if "up" in argv:
            ups[argv[argv.index("--project-directory") + 1]] = argv
    assert sorted(ups) == sorted(str(d) for d in dirs.values()), calls
    for argv in ups.values():
        assert "--remove-orphans" in argv and "--dry-run" in argv, argv


def two_gateways(base):
    """test_litellm's inventory (GPU VMs gpu-a, gpu-b; gateway gw) with a second gateway, gw2."""
    ports = {"fast": free_port(GPU_A), "balanced": free_port(GPU_A), "reasoning": free_port(GPU_B)}
    inventory = litellm_inventory(base, ports, 1, litellm_manage_keys=False)
    with open(inventory) as handle:
        data = yaml.safe_load(handle)
    gateways = data["all"]["children"]["llm_gateways"]["hosts"]
    gateways["gw2"] = dict(gateways["gw"], litellm_dir=str(base / "gw2" / "llm-gateway"),
                           llmstack_interfaces=[{"vlan": "mgmt", "address": "10.99.10.13"},
                                                {"vlan": "inference", "address": "127.0.20.13"}])
    with open(inventory, "w") as handle:
        yaml.safe_dump(data, handle)
    return inventory, {"gw": base / "llm-gateway" / "secrets", "gw2": base / "gw2" / "llm-gateway" / "secrets"}


def read_secrets(directory):
    return dict((name, (directory / name).read_text().strip()) for name in GATEWAY_SECRETS)


def test_several_gateways_share_secrets_generated_once_and_a_disagreeing_one_is_refused(tmp_path):
    inventory, dirs = two_gateways(tmp_path)
    run_gateway(inventory)
    first, second = read_secrets(dirs["gw"]), read_secrets(dirs["gw2"])
    assert first == second and first["master_key"].startswith("sk-") and len(set(first.values())) == 4
    env = dict((host, (dirs[host] / "litellm.env").read_text().splitlines()) for host in dirs)
    for host in dirs:
        assert "LITELLM_MASTER_KEY=%s" % first["master_key"] in env[host]
        assert "REDIS_PASSWORD=%s" % first["redis_password"] in env[host]
    # gw2 reaches the first gateway's PostgreSQL with the password that database was made with.
    assert "DATABASE_URL=postgresql://litellm:%s@10.99.10.12:5432/litellm" % first["postgres_password"] in env["gw2"]

    # Lost on one gateway: taken back from the first gateway that still has it, not generated anew.
    (dirs["gw"] / "master_key").unlink()
    (dirs["gw2"] / "salt_key").unlink()
    run_gateway(inventory)
    assert read_secrets(dirs["gw"]) == read_secrets(dirs["gw2"]) == first

    # A gateway that holds another value is refused, naming its file, and its file is not overwritten.
    (dirs["gw2"] / "postgres_password").write_text("another-password-%s\n" % os.getpid())
    rc, out, err = playbook("playbooks/gateway.yml", "-i", inventory, "--skip-tags", "tls_proxy,inventory_check")
    assert rc != 0
    refused = "the secret %s holds another value than the first gateway that has it, gw" % (
        dirs["gw2"] / "postgres_password")
    assert refused in out, out[-4000:]
    assert (dirs["gw2"] / "postgres_password").read_text() == "another-password-%s\n" % os.getpid()
    assert first["postgres_password"] not in out
