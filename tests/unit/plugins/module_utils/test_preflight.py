"""module_utils.preflight: the host checks, over the sysfs fixture trees and the kernel-log fixtures."""

import os

import pytest
from ansible_collections.pvegpu.llmstack.plugins.filter.inventory import gpu_vm_plans
from ansible_collections.pvegpu.llmstack.plugins.module_utils import inventory_model, pci, preflight, topology

KERNEL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                      "fixtures", "kernel")


def text(name):
    with open(os.path.join(KERNEL, name)) as handle:
        return handle.read()


def report(trees, tree, log, cmdline, **kwargs):
    kwargs.setdefault("cpu_vendor", "AuthenticAMD")
    kwargs.setdefault("kernel_release", "6.8.12-4-pve")
    return preflight.evaluate(pci.read_tree(trees[tree]), kernel_log=text(log), cmdline=text(cmdline),
                              uefi=True, **kwargs)


def statuses(result):
    return dict((c["id"], c["status"]) for c in result["checks"])


def test_report_shape_and_ids(sysfs_trees):
    result = report(sysfs_trees, "platform-a", "platform-a.dmesg", "platform-a.cmdline")
    assert [c["id"] for c in result["checks"]] == list(preflight.CHECK_IDS)
    for check in result["checks"]:
        assert set(check) == {"id", "status", "summary", "evidence", "hint"}
        assert check["status"] in preflight.STATUSES


def test_platform_a_set_up_as_the_seed_says(sysfs_trees):
    result = report(sysfs_trees, "platform-a", "platform-a.dmesg", "platform-a.cmdline")
    assert statuses(result) == {
        "iommu_enabled": "pass", "uefi_boot": "pass", "cmdline_flags": "pass", "acs_override": "pass",
        "bar_assignment": "pass", "resizable_bar": "pass", "gpu_isolation": "pass", "gpu_link": "warn",
        "gpu_numa": "pass", "host_driver_bound": "pass", "vfio_virqfd": "pass"}
    assert result["verdict"] == "warn"
    link = [c for c in result["checks"] if c["id"] == "gpu_link"][0]
    assert link["evidence"] == ["0000:81:00: width x8 of x16", "0000:a1:00: width x8 of x16"]


def test_bar_cannot_assign_fails_with_the_log_lines(sysfs_trees):
    result = report(sysfs_trees, "platform-a", "bar-fail.dmesg", "platform-a.cmdline")
    check = [c for c in result["checks"] if c["id"] == "bar_assignment"][0]
    assert check["status"] == "fail" and result["verdict"] == "fail"
    assert any("0000:41:00.0: BAR 1 [mem size 0x10000000 64bit pref]: can't assign; no space" in e
               for e in check["evidence"])
    assert "Above 4G Decoding" in check["hint"]


def test_iommu_off(sysfs_trees):
    result = report(sysfs_trees, "iommu-off", "iommu-off.dmesg", "iommu-off.cmdline")
    found = statuses(result)
    assert found["iommu_enabled"] == "fail" and found["gpu_isolation"] == "fail"
    assert found["host_driver_bound"] == "warn"          # nouveau still holds the 3090s
    assert found["cmdline_flags"] == "warn"              # no iommu=pt


def test_acs_override_and_shared_group(sysfs_trees):
    result = report(sysfs_trees, "server-switch-shared", "acs-override.dmesg", "acs-override.cmdline",
                    cpu_vendor="GenuineIntel")
    found = statuses(result)
    assert found["acs_override"] == "warn" and found["gpu_isolation"] == "fail"
    acs = [c for c in result["checks"] if c["id"] == "acs_override"][0]
    assert acs["evidence"][0] == "pcie_acs_override=downstream,multifunction"
    assert "PCIe ACS overrides enabled" in acs["evidence"][1]
    isolation = [c for c in result["checks"] if c["id"] == "gpu_isolation"][0]
    assert isolation["evidence"] == ["0000:83:00 shares group 30 with 0000:84:00.0",
                                     "0000:84:00 shares group 30 with 0000:83:00.0"]


def test_intel_needs_intel_iommu_on(sysfs_trees):
    result = report(sysfs_trees, "platform-b", "platform-b.dmesg", "iommu-off.cmdline", cpu_vendor="GenuineIntel")
    cmdline = [c for c in result["checks"] if c["id"] == "cmdline_flags"][0]
    assert cmdline["status"] == "warn" and cmdline["summary"] == "kernel command line lacks intel_iommu=on iommu=pt"
    assert statuses(report(sysfs_trees, "platform-b", "platform-b.dmesg", "platform-b.cmdline",
                           cpu_vendor="GenuineIntel"))["cmdline_flags"] == "pass"


def test_no_gpus_skips_the_gpu_checks(sysfs_trees):
    found = statuses(report(sysfs_trees, "no-nvidia", "platform-b.dmesg", "platform-b.cmdline"))
    assert [found[i] for i in ("gpu_isolation", "gpu_link", "gpu_numa", "host_driver_bound")] == ["skip"] * 4


def test_only_the_passthrough_gpus_are_checked(sysfs_trees):
    result = report(sysfs_trees, "platform-a", "platform-a.dmesg", "platform-a.cmdline",
                    passthrough_slots=["0000:41:00", "0000:61:00"])
    assert statuses(result)["gpu_link"] == "pass" and result["gpus"] == ["0000:41:00", "0000:61:00"]


def test_missing_passthrough_gpu_fails(sysfs_trees):
    result = report(sysfs_trees, "platform-a", "platform-a.dmesg", "platform-a.cmdline",
                    passthrough_slots=["0000:41:00", "0000:c1:00"])
    assert statuses(result)["gpu_present"] == "fail" and result["verdict"] == "fail"


def test_numa_vm_spanning_sockets(sysfs_trees):
    plans = [{"name": "vm-a", "slots": ["0000:1a:00", "0000:88:00"]},
             {"name": "vm-b", "slots": ["0000:1b:00"], "numa_node": 1}]
    result = report(sysfs_trees, "platform-b", "platform-b.dmesg", "platform-b.cmdline", vm_plans=plans)
    numa = [c for c in result["checks"] if c["id"] == "gpu_numa"][0]
    assert numa["status"] == "warn"
    assert numa["summary"] == ("vm-a spans NUMA nodes 0,1; vm-b is planned on NUMA node 1 but its GPUs are on 0")


@pytest.mark.parametrize("modules,release,status", [
    ("vfio\nvfio_iommu_type1\nvfio_pci\nvfio_virqfd\n", "6.8.12-4-pve", "warn"),
    ("vfio\nvfio_virqfd  # old\n", "5.15.158-2-pve", "pass"),
    ("vfio\n# vfio_virqfd\n", "6.8.12-4-pve", "pass"),
])
def test_vfio_virqfd(modules, release, status):
    assert preflight.check_virqfd(modules, release)["status"] == status


def test_rebar_errors_warn():
    check = preflight.check_rebar("[    2.1] pci 0000:41:00.0: BAR 1: failed to resize to 32768MB\n")
    assert check["status"] == "warn" and "Resizable BAR" in check["hint"]


def test_legacy_boot_warns():
    assert preflight.check_uefi(False)["status"] == "warn"
    assert preflight.check_uefi(None)["status"] == "skip"


def test_cmdline_args():
    assert preflight.cmdline_args("quiet intel_iommu=on iommu=pt video=efifb:off") == {
        "quiet": None, "intel_iommu": "on", "iommu": "pt", "video": "efifb:off"}


def test_summary_table_lists_every_check(sysfs_trees):
    result = report(sysfs_trees, "platform-a", "bar-fail.dmesg", "platform-a.cmdline")
    lines = preflight.summary_table(result, "pve-a")
    assert lines[0] == "pve-a preflight: FAIL"
    assert any(line.startswith("bar_assignment     FAIL  ") for line in lines)
    assert any("fix: Enable Above 4G Decoding" in line for line in lines)


def test_gpus_of_plans():
    plans = [{"name": "a", "gpus": ["41:00", "61:00"]},
             {"name": "b", "gpus": [{"vendor_device": "10de:1db5", "count": 2}]},
             {"name": "c", "gpus": None}]
    assert inventory_model.gpus_of_plans(plans) == ["41:00", "61:00", {"vendor_device": "10de:1db5", "count": 2}]
    assert inventory_model.gpus_of_plans(None) == []


def test_node_plans_place_each_vm_on_its_pve_host_in_inventory_order():
    hosts = {"vm-a": {"gpu_vm_node": "pve-a", "gpu_vm_gpus": ["41:00"]},
             "vm-b": {"gpu_vm_node": "pve-b", "gpu_vm_gpus": ["61:00"], "gpu_vm_numa_node": 1},
             "vm-c": {"gpu_vm_node": "pve-b", "gpu_vm_gpus": ["62:00"]}}
    groups = {"pve_hosts": ["pve-a", "pve-b"], "gpu_vms": ["vm-c", "vm-a", "vm-b"]}
    plans = topology.node_plans(groups, hosts)
    assert [p["name"] for p in plans["pve-b"]] == ["vm-c", "vm-b"]
    assert plans["pve-b"][1] == {"name": "vm-b", "gpus": ["61:00"], "numa_node": 1, "allow_shared_group": False}
    hosts["vm-b"]["gpu_vm_allow_shared_group"] = "yes"
    assert topology.node_plans(groups, hosts)["pve-b"][1]["allow_shared_group"] is True
    assert gpu_vm_plans(hosts, ["vm-a", "vm-b"], "pve-a") == plans["pve-a"]
