"""The acceptance commands of the PCI facts and the hostpci filter, through the real `ansible` CLI:
`ansible localhost -m pvegpu.llmstack.pci_iommu_facts -a sysfs_root=<tree>` for every fixture tree."""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, ansible_env

sys.path.insert(0, os.path.join(ROOT, "tools"))
import sysfs_fixture  # noqa: E402

CONTRACT_GPU_KEYS = {"slot", "functions", "vendor", "device", "iommu_groups", "isolated", "shares_group_with",
                     "numa_node", "link_degraded"}


def ansible(*args):
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    result = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost"] + list(args),
                            cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=120)
    report = json.loads(result.stdout[result.stdout.index("{"):])
    return list(report["plays"][0]["tasks"][0]["hosts"].values())[0]


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    base = tmp_path_factory.mktemp("trees")
    return dict((name, sysfs_fixture.build_fixture(os.path.join(sysfs_fixture.FIXTURES, name), str(base / name)))
                for name in sysfs_fixture.fixtures())


@pytest.mark.parametrize("name", sysfs_fixture.fixtures())
def test_module_returns_the_contract_keys(trees, name):
    result = ansible("-m", "pvegpu.llmstack.pci_iommu_facts", "-a", "sysfs_root=%s" % trees[name])
    assert not result.get("failed"), result
    facts = result["ansible_facts"]["llmstack_pci"]
    assert set(facts) >= {"iommu_enabled", "groups", "devices", "gpus"}
    for gpu in facts["gpus"]:
        assert set(gpu) >= CONTRACT_GPU_KEYS, gpu
    for device in facts["devices"].values():
        assert {"vendor", "device", "class", "driver", "iommu_group", "numa_node", "link"} <= set(device)


def test_module_refuses_a_directory_without_sys(tmp_path):
    result = ansible("-m", "pvegpu.llmstack.pci_iommu_facts", "-a", "sysfs_root=%s" % tmp_path)
    assert result["failed"] and "has no sys/ directory" in result["msg"]


def test_filter_refuses_a_shared_group_naming_the_other_gpu(trees):
    expression = "{{ ['0000:83:00'] | pvegpu.llmstack.hostpci(facts=facts.ansible_facts.llmstack_pci) }}"
    facts = ansible("-m", "pvegpu.llmstack.pci_iommu_facts", "-a", "sysfs_root=%s" % trees["server-switch-shared"])
    result = ansible("-m", "ansible.builtin.debug", "-a", "msg=%s" % expression, "-e",
                     json.dumps({"facts": {"ansible_facts": facts["ansible_facts"]}}))
    assert result.get("failed"), result
    assert "GPU 0000:83:00 shares IOMMU group 30 with 0000:84:00.0" in result["msg"]
