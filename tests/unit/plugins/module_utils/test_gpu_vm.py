"""module_utils.gpu_vm: a GPU VM's PVE config from the inventory and the host's PCI facts (the sysfs fixtures).

Expected values come from seed 000 (§VM table and config, §performance) and the fixtures' devices.yml,
not from the code."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import gpu_vm, pci
from conftest import role_settings

VLANS = {"mgmt": {"id": 10, "cidr": "192.168.10.0/24", "bridge": "vmbr0"},
         "inference": {"id": 20, "cidr": "192.168.20.0/24", "bridge": "vmbr1"}}
SEED_A = ["0000:41:00", "0000:61:00", "0000:81:00", "0000:a1:00"]
# The role's defaults, read from its defaults/main.yml (the one place they are stated), as the role passes them.
ROLE_SETTINGS = role_settings("gpu_vm", gpu_vm.SETTINGS)


def plan(vm_, node_vms, facts_, vlans, changes):
    """gpu_vm.plan with the role's defaults overlaid by ``changes`` (what the role passes after the inventory's)."""
    return gpu_vm.plan(vm_, node_vms, facts_, vlans, dict(ROLE_SETTINGS, **changes))


@pytest.fixture(scope="module")
def facts(sysfs_trees):
    return dict((name, pci.read_tree(root)) for name, root in sysfs_trees.items())


def vm(name="gpu-a", gpus=None, node="pve-a", interfaces=None):
    return {"name": name, "node": node, "pve_node": node, "gpus": gpus if gpus is not None else list(SEED_A),
            "interfaces": interfaces if interfaces is not None else [{"vlan": "inference", "address": "192.168.20.20"}]}


def test_platform_a_vm_follows_the_seed(facts):
    result = plan(vm(), [], facts["platform-a"], VLANS, {"hostpci_mode": "raw", "memory_mib": 131072})
    config = result["config"]
    assert (config["machine"], config["bios"], config["cpu"], config["balloon"], config["numa"]) == \
        ("q35", "ovmf", "host", 0, 1)
    assert config["efidisk0"] == "local-lvm:1,efitype=4m,pre-enrolled-keys=0"
    # Seed 000: hostpci0..3, pcie=1 on each, x-vga=1 only on hostpci0.
    assert [config["hostpci%d" % i] for i in range(4)] == [
        "0000:41:00,pcie=1,x-vga=1", "0000:61:00,pcie=1", "0000:81:00,pcie=1", "0000:a1:00,pcie=1"]
    assert all(config["hostpci%d" % i] is None for i in range(4, 16))
    assert config["net0"] == "virtio,bridge=vmbr1,tag=20" and config["net1"] is None
    assert result["mappings"] == [] and result["slots"] == SEED_A


def test_mappings_replace_addresses_and_are_named_per_node_and_slot(facts):
    result = plan(vm(gpus=["41:00", "0000:61:00"]), [], facts["platform-a"], VLANS, {})
    assert result["config"]["hostpci0"] == "mapping=llmstack-pve-a-41-00,pcie=1,x-vga=1"
    assert result["config"]["hostpci1"] == "mapping=llmstack-pve-a-61-00,pcie=1"
    assert [(m["name"], m["node"], m["gpu"]["slot"]) for m in result["mappings"]] == [
        ("llmstack-pve-a-41-00", "pve-a", "0000:41:00"), ("llmstack-pve-a-61-00", "pve-a", "0000:61:00")]


def test_v100_gets_no_x_vga_and_type_counts_take_free_gpus_in_order(facts):
    node_vms = [{"name": "first", "gpus": ["0000:1a:00"]},
                {"name": "second", "gpus": [{"vendor_device": "10de:1db5", "count": 3}]}]
    result = plan(vm("second", gpus=node_vms[1]["gpus"], node="pve-b"), node_vms, facts["platform-b"], VLANS,
                  {"hostpci_mode": "raw"})
    assert result["slots"] == ["0000:1b:00", "0000:3d:00", "0000:3e:00"]
    assert result["config"]["hostpci0"] == "0000:1b:00,pcie=1"


def test_a_gpu_given_to_two_vms_is_refused(facts):
    node_vms = [{"name": "first", "gpus": ["0000:41:00"]}, {"name": "gpu-a", "gpus": ["0000:41:00", "0000:61:00"]}]
    with pytest.raises(gpu_vm.GpuVmError, match="GPU 0000:41:00 on pve-a is given to both first and gpu-a"):
        plan(vm(gpus=["0000:41:00", "0000:61:00"]), node_vms, facts["platform-a"], VLANS, {})


def test_more_gpus_of_a_type_than_are_free_is_refused(facts):
    node_vms = [{"name": "first", "gpus": [{"vendor_device": "10de:1db5", "count": 6}]},
                {"name": "second", "gpus": [{"vendor_device": "10de:1db5", "count": 3}]}]
    with pytest.raises(gpu_vm.GpuVmError, match=r"3 GPU\(s\) 10de:1db5 asked for, 2 free on pve-b \(8 there"):
        plan(vm("second", gpus=node_vms[1]["gpus"], node="pve-b"), node_vms, facts["platform-b"], VLANS, {})


def test_a_gpu_that_is_not_on_the_host_is_refused(facts):
    with pytest.raises(gpu_vm.GpuVmError, match="gpu_vm_gpus\\[0\\]: 0000:c1:00 is not a GPU on pve-a"):
        plan(vm(gpus=["0000:c1:00"]), [], facts["platform-a"], VLANS, {})


def test_a_gpu_in_a_shared_group_is_refused_unless_allowed(facts):
    shared = facts["server-switch-shared"]
    with pytest.raises(gpu_vm.GpuVmError, match="GPU 0000:83:00 shares IOMMU group"):
        plan(vm(gpus=["0000:83:00"]), [], shared, VLANS, {})
    result = plan(vm(gpus=["0000:83:00"]), [], shared, VLANS, {"allow_shared_group": True})
    assert [m["slot"] for m in result["mappings"]] == ["0000:83:00", "0000:84:00"]


def test_iommu_off_is_refused(facts):
    with pytest.raises(gpu_vm.GpuVmError, match="no IOMMU groups"):
        plan(vm(gpus=["0000:41:00"]), [], facts["iommu-off"], VLANS, {})


def test_a_vm_without_gpus_is_the_same_vm_less_the_passthrough(facts):
    """A gateway VM (issue #33): the seed's VM settings, no hostpci, no IOMMU needed; pinning asked for has
    nothing to pin to, and the host's hugepages stay for the GPU VMs unless asked for by size."""
    gpu_vms = [{"name": "gpu-a", "gpus": list(SEED_A)}]
    for tree in ("platform-a", "iommu-off"):
        result = plan(vm(name="gateway", gpus=[]), gpu_vms, facts[tree], VLANS,
                      {"numa_pin": True, "memory_mib": 8192, "cores": 4})
        config = result["config"]
        assert (config["machine"], config["bios"], config["cpu"], config["balloon"], config["cores"]) == \
            ("q35", "ovmf", "host", 0, 4)
        assert all(config["hostpci%d" % i] is None for i in range(16))
        assert (config["hugepages"], config["affinity"], config["numa0"]) == (None, None, None)
        assert config["net0"] == "virtio,bridge=vmbr1,tag=20"
        assert (result["mappings"], result["slots"], result["warnings"]) == ([], [], [])
    # platform-a reserves 32 GiB of 2 MiB pages: taken only when the VM asks for that size.
    result = plan(vm(name="gateway", gpus=[]), gpu_vms, facts["platform-a"], VLANS,
                  {"memory_mib": 8192, "hugepages": "2"})
    assert result["config"]["hugepages"] == "2"


def test_numa_pinning_uses_the_gpus_node_cpus_and_binds_memory(facts):
    # Platform B (devices.yml): 88:00 and 89:00 on node 1, whose CPUs are 20-39,60-79.
    result = plan(vm(gpus=["0000:88:00", "0000:89:00"], node="pve-b"), [], facts["platform-b"], VLANS,
                  {"numa_pin": True, "cores": 8, "memory_mib": 65536})
    assert result["config"]["affinity"] == "20-39,60-79"
    assert result["config"]["numa0"] == "cpus=0-7,hostnodes=1,memory=65536,policy=bind"
    assert result["warnings"] == []


def test_gpus_on_two_numa_nodes_are_not_pinned_and_a_mismatch_warns(facts):
    result = plan(vm(gpus=["0000:3e:00", "0000:88:00"], node="pve-b"), [], facts["platform-b"], VLANS,
                  {"numa_pin": True})
    assert result["config"]["affinity"] is None and result["config"]["numa0"] is None
    assert "sit on NUMA nodes 0, 1: not pinning" in result["warnings"][0]
    result = plan(vm(gpus=["0000:88:00"], node="pve-b"), [], facts["platform-b"], VLANS, {"numa_node": 0})
    assert "gpu_vm_numa_node: 0, but the VM's GPUs sit on NUMA node(s) 1" in result["warnings"][0]
    assert result["config"]["affinity"] is None


@pytest.mark.parametrize("fixture, memory, mode, expected, warns", [
    ("platform-a", 32768, "auto", "2", False),       # 16384 x 2 MiB reserved = 32 GiB
    ("platform-a", 65536, "auto", None, True),       # not enough: no hugepages, and a warning
    ("platform-b", 131072, "auto", "2", False),      # 65536 x 2 MiB = 128 GiB
    ("platform-a", 32768, "none", None, False),
    ("platform-a", 32768, "1024", "1024", True),     # asked for; no 1 GiB pages reserved
])
def test_hugepages_follow_what_the_host_reserved(facts, fixture, memory, mode, expected, warns):
    result = plan(vm(gpus=[facts[fixture]["gpus"][0]["slot"]], node="pve"), [], facts[fixture], VLANS,
                  {"memory_mib": memory, "hugepages": mode})
    assert result["config"]["hugepages"] == expected
    assert [w for w in result["warnings"] if w.startswith("gpu_vm_hugepages")] != [] if warns else \
        result["warnings"] == []


def test_nics_follow_the_interfaces_and_their_vlans(facts):
    interfaces = [{"vlan": "mgmt", "address": "192.168.10.20", "mac": "bc:24:11:00:00:01"},
                  {"vlan": "inference", "address": "192.168.20.20"}]
    config = plan(vm(interfaces=interfaces), [], facts["platform-a"], VLANS, {"nic_firewall": True})["config"]
    assert config["net0"] == "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10,firewall=1"
    assert config["net1"] == "virtio,bridge=vmbr1,tag=20,firewall=1"
    with pytest.raises(gpu_vm.GpuVmError, match="VLAN 'storage' is not in llmstack_vlans"):
        plan(vm(interfaces=[{"vlan": "storage"}]), [], facts["platform-a"], VLANS, {})


def test_extra_config_wins_and_bad_settings_name_the_variable(facts):
    config = plan(vm(), [], facts["platform-a"], VLANS, {"extra_config": {"cores": 48, "hostpci5": "0000:22:00",
                                                                          "tags": "llm"}})["config"]
    assert (config["cores"], config["hostpci5"], config["tags"]) == (48, "0000:22:00", "llm")
    with pytest.raises(gpu_vm.GpuVmError) as info:
        bad = {"cores": 0, "hugepages": "3", "machine": "pc", "hostpci_mode": "vfio", "mapping_prefix": "9x"}
        plan(vm(), [], facts["platform-a"], VLANS, bad)
    text = str(info.value)
    for fragment in ("gpu_vm_cores: 0 is not a positive integer", "gpu_vm_hugepages: '3' is not one of",
                     "gpu_vm_machine: 'pc' is not a q35", "gpu_vm_hostpci_mode: 'vfio'",
                     "gpu_vm_mapping_prefix: '9x' must start with a letter"):
        assert fragment in text


def test_a_setting_left_out_is_named_not_defaulted_in_python(facts):
    partial = dict(ROLE_SETTINGS)
    del partial["cores"], partial["hugepages"]
    with pytest.raises(gpu_vm.GpuVmError, match=r"settings: missing cores, hugepages \(pass every gpu_vm_ setting"):
        gpu_vm.plan(vm(), [], facts["platform-a"], VLANS, partial)


def test_config_mappings_are_the_collections_own_mappings_of_the_node():
    config = {"hostpci0": "mapping=llmstack-pve-a-41-00,pcie=1,x-vga=1",
              "hostpci1": "mapping=llmstack-pve-a-61-00,pcie=1",
              "hostpci2": "0000:81:00,pcie=1",                           # a raw address: no mapping
              "hostpci3": "mapping=someone-elses,pcie=1",                # not ours
              "hostpci4": "mapping=llmstack-pve-b-41-00,pcie=1",         # ours, but of another node
              "hostpci5": "mapping=llmstack-pve-a-2-41-00,pcie=1",       # of node pve-a-2, not pve-a
              "net0": "virtio,bridge=vmbr0,tag=20", "description": "mapping=llmstack-pve-a-99-00"}
    assert gpu_vm.config_mappings(config, "llmstack", "pve-a") == ["llmstack-pve-a-41-00", "llmstack-pve-a-61-00"]
    assert gpu_vm.config_mappings({}, "llmstack", "pve-a") == []
    # The names config_mappings accepts are the ones mapping_name makes.
    assert gpu_vm.config_mappings({"hostpci0": "mapping=%s" % gpu_vm.mapping_name("lab", "pve 1", "0000:41:00")},
                                  "lab", "pve 1") == [gpu_vm.mapping_name("lab", "pve 1", "0000:41:00")]


# -- gpu_vm_state absent: only a VM the run names ---------------------------------------------------------------
@pytest.mark.parametrize("limit, destroy, refused", [
    (None, [], True),                      # -e gpu_vm_state=absent alone: every VM would go
    ("gpu_vms", [], True),                 # a group names no VM
    ("all", [], True),
    ("gpu-*", [], True),                   # nor does a pattern
    ("!gpu-b", [], True),                  # an exclusion names what stays
    ("gpu-a,pve-a", [], False),
    ("pve-a:gpu-a", [], False),
    ("vm-a", [], False),                   # the VM's own name
    (None, ["gpu-a"], False),
    (None, ["vm-a"], False),
    ("gpu_vms", ["gpu-b"], True),
])
def test_a_vm_in_state_absent_must_be_named_by_the_run(limit, destroy, refused):
    problems = gpu_vm.destroy_problems("absent", "gpu-a", "vm-a", 120, limit, destroy)
    if refused:
        assert len(problems) == 1 and problems[0].startswith(
            "gpu_vm_state: absent would destroy VM 120 (vm-a) of gpu-a, and this run names no VM to destroy"), problems
        assert "--limit gpu-a" in problems[0] and "gpu_vm_destroy" in problems[0]
    else:
        assert problems == []


def test_other_states_pass_and_a_bad_destroy_list_is_named():
    assert gpu_vm.destroy_problems("started", "gpu-a", "vm-a", 120, None, []) == []
    assert gpu_vm.destroy_problems("started", "gpu-a", "vm-a", 120, None, "gpu-a") == [
        "gpu_vm_destroy: 'gpu-a' is not a list of VM names (inventory names or gpu_vm_name)"]


def test_a_gpu_vm_gets_its_model_disk_as_scsi1_sized_from_its_models(facts):
    """Seed 000 keeps the models in /data/llm/models on their own disk: scsi1 on the VM's storage with the boot
    disk's options, grown only (auto), never there for a VM that downloads nothing."""
    models = [{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "port": 8001},
              {"name": "balanced", "model": "Qwen/Qwen2.5-14B-Instruct", "port": 8002}]
    result = plan(dict(vm(), models=models), [], facts["platform-a"], VLANS, {"hostpci_mode": "raw"})
    disk = result["model_disk"]
    size = int(result["config"]["scsi1"].split(",", 1)[0].split(":")[1])
    assert result["config"]["scsi1"] == "local-lvm:%d,discard=on,iothread=1,ssd=1" % size
    # 16.07 + 29.5 GB published (42.4 GiB) and the 25 % margin: 53 GiB, so 56 in 8 GiB steps.
    assert size == disk["size_gib"] == 56
    assert disk["device"] == "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"
    assert result["grow_only_disks"] == ["scsi1"]
    fixed = plan(dict(vm(), models=models), [], facts["platform-a"], VLANS, {"hostpci_mode": "raw",
                                                                             "model_disk_gib": 100})
    assert fixed["config"]["scsi1"].startswith("local-lvm:100,") and fixed["grow_only_disks"] == []
    for changes, models_ in (({}, []), ({"model_disk_gib": 0, "disk_gib": 128}, models)):
        none = plan(dict(vm(), models=models_), [], facts["platform-a"], VLANS, dict(changes, hostpci_mode="raw"))
        # Not None: an existing model disk is left attached (pve_vm would refuse to detach it anyway).
        assert "scsi1" not in none["config"] and none["model_disk"]["key"] is None


def test_models_that_do_not_fit_their_disk_stop_the_plan(facts):
    models = [{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "port": 8001}]
    with pytest.raises(gpu_vm.GpuVmError) as raised:
        plan(dict(vm(), models=models), [], facts["platform-a"], VLANS, {"hostpci_mode": "raw", "model_disk_gib": 8})
    assert [p for p in raised.value.problems if p.startswith("gpu_vm_model_disk_gib: 8 GiB does not hold")]
