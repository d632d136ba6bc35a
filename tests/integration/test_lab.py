"""`make lab` end to end, as a user runs it: the lab comes up (podman containers from the local image and
fakepve on 127.0.0.1), site.yml converges, a second run changes nothing, every host holds its network
fact, the fakepve PVE API answers through proxmoxer with the lab's nodes, and `lab down` removes it all.
fakepve stands in for a PVE server (PVE's own API schema); the containers stand in for the hosts."""

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, ansible_env, parse_json_report, playbook

pytestmark = pytest.mark.slow
LAB = os.path.join(ROOT, "inventories", "lab")


def lab(*args):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "lab.py")] + list(args), cwd=ROOT,
                            env=ansible_env(), text=True, capture_output=True, timeout=900, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def podman(*args):
    return subprocess.run(["podman"] + list(args), env=ansible_env(), text=True, capture_output=True, check=False)


def skip_tags():
    with open(os.path.join(ROOT, "Makefile")) as handle:
        return re.search(r"^LAB_SKIP_TAGS := (\S+)$", handle.read(), re.M).group(1)


@pytest.fixture(scope="module")
def running_lab():
    was_up = podman("container", "exists", "llmstack-lab-gpu-a").returncode == 0
    lab("up")
    yield
    if not was_up:
        lab("down")
        left = podman("ps", "-a", "--filter", "label=io.llmstack.lab=1", "--format", "{{.Names}}").stdout.split()
        assert left == []


def test_site_yml_converges_and_is_idempotent(running_lab):
    rc, out, err = playbook("site.yml", "-i", LAB, "--skip-tags", skip_tags())
    assert rc == 0, out[-4000:] + err[-2000:]
    rc, out, err = playbook("site.yml", "-i", LAB, "--skip-tags", skip_tags(), json_output=True)
    assert rc == 0, out[-4000:] + err[-2000:]
    stats = parse_json_report(out)["stats"]
    assert sorted(stats) == ["lab-client", "lab-gateway", "lab-gpu-a", "lab-gpu-b", "lab-obs", "lab-pve-a",
                             "lab-pve-b"]
    assert {host: s["changed"] for host, s in stats.items() if s["changed"]} == {}
    assert all(s["unreachable"] == 0 and s["failures"] == 0 for s in stats.values()), stats


def test_every_host_holds_its_network_fact(running_lab):
    facts = {}
    for host in ("gpu-a", "gateway", "client"):
        result = podman("exec", "llmstack-lab-" + host, "cat", "/etc/ansible/facts.d/llmstack_network.fact")
        assert result.returncode == 0, result.stderr
        facts[host] = json.loads(result.stdout)["interfaces"]
    # The values of inventories/lab (group_vars/all and host_vars), written out.
    assert facts["gpu-a"] == [
        {"vlan": "mgmt", "id": 10, "address": "172.30.10.20", "prefix": 24, "cidr": "172.30.10.0/24",
         "gateway": "172.30.10.1", "bridge": "vmbr0"},
        {"vlan": "inference", "id": 20, "address": "172.30.20.20", "prefix": 24, "cidr": "172.30.20.0/24",
         "gateway": "172.30.20.1", "bridge": "vmbr0"}]
    assert [(i["vlan"], i["address"]) for i in facts["gateway"]] == [
        ("mgmt", "172.30.10.12"), ("inference", "172.30.20.12"), ("apps", "172.30.30.12")]
    assert [(i["vlan"], i["id"]) for i in facts["client"]] == [("apps", 30)]


def test_fakepve_serves_the_lab_nodes(running_lab):
    from proxmoxer import ProxmoxAPI
    from proxmoxer.core import AuthenticationError

    with open(os.path.join(ROOT, ".cache", "lab", "pve_api_password")) as handle:
        password = handle.read().strip()
    mode = os.stat(os.path.join(ROOT, ".cache", "lab", "pve_api_password")).st_mode & 0o777
    assert mode == 0o600
    api = ProxmoxAPI("127.0.0.1", port=18006, user="root@pam", password=password, verify_ssl=False)
    assert sorted(n["node"] for n in api.nodes.get()) == ["lab-pve-a", "lab-pve-b"]
    with pytest.raises(AuthenticationError):
        ProxmoxAPI("127.0.0.1", port=18006, user="root@pam", password="wrong-password", verify_ssl=False)


def test_summary_says_what_was_not_run(running_lab):
    out = lab("summary", "--skipped", skip_tags())
    assert "https://127.0.0.1:18006" in out and "running" in out
    assert "lab-gpu-a    container llmstack-lab-gpu-a" in out
    assert "Not run in the lab (vfio needs a boot loader" in out
