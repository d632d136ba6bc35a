"""module_utils.pve_vm: canonical forms of PVE config values, validation, and the change plan."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_vm


@pytest.mark.parametrize("key, one, other", [
    ("hostpci0", "0000:41:00,pcie=1,x-vga=1", "x-vga=1,pcie=1,0000:41:00"),
    ("hostpci0", "0000:41:00,pcie=1", "host=41:00,pcie=true"),
    ("hostpci1", "mapping=rtx3090-61,pcie=1", "pcie=on,mapping=rtx3090-61"),
    ("hostpci2", "0000:41:00.0;0000:41:00.1", "41:00.0;41:00.1"),
    ("efidisk0", "local-lvm:vm-120-disk-1,efitype=4m,pre-enrolled-keys=0,size=528K",
     "file=local-lvm:vm-120-disk-1,size=540672,pre-enrolled-keys=false,efitype=4m"),
    ("scsi0", "local-lvm:vm-120-disk-0,size=32G,ssd=1", "local-lvm:vm-120-disk-0,ssd=yes,size=32768M"),
    ("net0", "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=20",
     "model=virtio,tag=20,macaddr=bc:24:11:aa:bb:cc,bridge=vmbr0"),
    ("numa", "1", True),
    ("onboot", "on", 1),
    ("balloon", "0", 0),
    ("memory", "131072", 131072),
    ("memory", "current=131072", "131072"),
    ("cpu", "host", "cputype=host"),
    ("agent", "1", "enabled=true"),
    ("affinity", "0-3,8", "8,0,1,2,3"),
    ("numa0", "cpus=0-15,hostnodes=0,memory=65536,policy=bind", "policy=bind,memory=65536,hostnodes=0,cpus=0-7;8-15"),
    ("tags", "gpu;llm", "llm,GPU"),
])
def test_the_same_setting_written_differently_is_equal(key, one, other):
    assert pve_vm.canonical(key, one) == pve_vm.canonical(key, other)


@pytest.mark.parametrize("key, one, other", [
    ("hostpci0", "0000:41:00,pcie=1,x-vga=1", "0000:41:00,pcie=1"),
    ("hostpci0", "0000:41:00,pcie=1", "0000:61:00,pcie=1"),
    ("hostpci0", "0000:41:00", "0000:41:00.0"),
    ("cores", "16", "24"),
    ("net0", "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=20", "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=30"),
    ("affinity", "0-3", "0-4"),
    ("balloon", "0", "1024"),
])
def test_different_settings_differ(key, one, other):
    assert pve_vm.canonical(key, one) != pve_vm.canonical(key, other)


def test_effective_config_takes_pending_values_and_deletes():
    pending = [{"key": "cores", "value": 16, "pending": 24}, {"key": "net1", "value": "virtio=AA", "delete": 1},
               {"key": "name", "value": "gpu"}, {"key": "tags", "pending": "gpu"}]
    config, changes = pve_vm.effective_config(pending)
    assert config == {"cores": 24, "name": "gpu", "tags": "gpu"}
    assert changes == {"cores": "set", "net1": "delete", "tags": "set"}


CURRENT = {"machine": "q35", "bios": "ovmf", "cores": "16", "memory": "131072",
           "scsi0": "local-lvm:vm-120-disk-0,discard=on,size=32G,ssd=1",
           "efidisk0": "local-lvm:vm-120-disk-1,efitype=4m,pre-enrolled-keys=0,size=528K",
           "net0": "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=20", "hostpci0": "0000:41:00,pcie=1,x-vga=1",
           "description": "kept by hand"}


def test_plan_for_a_new_vm_creates_with_every_key_as_text():
    step = pve_vm.plan({"cores": 16, "numa": True, "scsi0": "local-lvm:32", "net1": None}, None)
    assert step["create"] and step["set"] == {"cores": "16", "numa": "1", "scsi0": "local-lvm:32"}
    assert step["before"] == {} and step["after"] == step["set"]


def test_plan_of_an_unchanged_vm_written_differently_is_empty():
    wanted = {"cores": 16, "memory": 131072, "scsi0": "local-lvm:32,ssd=1,discard=on",
              "efidisk0": "local-lvm:1,efitype=4m,pre-enrolled-keys=0", "net0": "virtio,bridge=vmbr0,tag=20",
              "hostpci0": "x-vga=1,pcie=1,host=41:00"}
    step = pve_vm.plan(wanted, CURRENT)
    assert not pve_vm.changes(step)
    assert step["before"] == step["after"] and "description" not in step["after"]


def test_plan_changes_only_the_differing_key():
    step = pve_vm.plan({"cores": 24, "memory": 131072}, CURRENT)
    assert step["set"] == {"cores": "24"} and step["delete"] == [] and step["resize"] == {}
    assert step["before"] == {"cores": "16", "memory": "131072"}
    assert step["after"] == {"cores": "24", "memory": "131072"}


def test_plan_deletes_null_keys_that_exist_only():
    step = pve_vm.plan({"description": None, "net5": None}, CURRENT)
    assert step["delete"] == ["description"] and step["after"] == {}


def test_disk_growth_is_a_resize_on_the_same_volume():
    step = pve_vm.plan({"scsi0": "local-lvm:64,discard=on,ssd=1"}, CURRENT)
    assert step["set"] == {} and step["resize"] == {"scsi0": "64G"}
    assert step["after"]["scsi0"] == "local-lvm:vm-120-disk-0,discard=on,size=64G,ssd=1"


def test_disk_option_change_keeps_the_volume_and_its_size():
    step = pve_vm.plan({"scsi0": "local-lvm:32,discard=on,iothread=1,ssd=1"}, CURRENT)
    assert step["set"] == {"scsi0": "local-lvm:vm-120-disk-0,discard=on,iothread=1,size=32G,ssd=1"}


@pytest.mark.parametrize("wanted, message", [
    ({"scsi0": "local-lvm:16"}, "scsi0: the disk is 32G, the config asks for 16G; PVE cannot shrink a disk"),
    ({"scsi0": "ceph:32"}, "scsi0: the disk is local-lvm:vm-120-disk-0 on storage 'local-lvm', the config asks for "
                           "storage 'ceph'"),
    ({"scsi0": None}, "config.scsi0: is null, which would detach the disk local-lvm:vm-120-disk-0"),
])
def test_disks_are_never_shrunk_moved_or_detached(wanted, message):
    with pytest.raises(pve_vm.VmConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pve_vm.plan(wanted, CURRENT)


def test_detaching_a_disk_when_asked():
    assert pve_vm.plan({"scsi0": None}, CURRENT, remove_disks=True)["delete"] == ["scsi0"]


def test_efidisk_size_is_fixed_and_never_resized():
    step = pve_vm.plan({"efidisk0": "local-lvm:4,efitype=4m,pre-enrolled-keys=0"}, CURRENT)
    assert not pve_vm.changes(step)


def test_nic_change_keeps_the_generated_mac_and_an_asked_mac_wins():
    step = pve_vm.plan({"net0": "virtio,bridge=vmbr1,tag=20"}, CURRENT)
    assert step["set"] == {"net0": "virtio=BC:24:11:AA:BB:CC,bridge=vmbr1,tag=20"}
    step = pve_vm.plan({"net0": "virtio=02:00:00:00:00:01,bridge=vmbr0,tag=20"}, CURRENT)
    assert step["set"] == {"net0": "virtio=02:00:00:00:00:01,bridge=vmbr0,tag=20"}


@pytest.mark.parametrize("config, current, kwargs, message", [
    ({"hostpci0": "host=0000:41:00,mapping=gpu41"}, {"machine": "q35"}, {}, "names both a host address and mapping"),
    ({"hostpci0": "pcie=1"}, {"machine": "q35"}, {}, "names neither a host address nor mapping"),
    ({"hostpci0": "mapping=9gpu,pcie=1"}, {"machine": "q35"}, {}, "mapping '9gpu' is not a PVE mapping id"),
    ({"hostpci0": "0000:41:00,pcie=1"}, {}, {}, "pcie=1 needs 'machine: q35'"),
    ({"hostpci0": "0000:41:00,pcie=1", "machine": "pc-i440fx-9.0"}, {}, {}, "pcie=1 needs 'machine: q35'"),
    ({"efidisk0": "local-lvm:1"}, {"bios": "seabios"}, {}, "needs 'bios: ovmf'"),
    ({"hostpci0": "0000:41:00"}, {}, {"token": True}, "not to an API token"),
    ({"hostpci0": "0000:41:00"}, {}, {"api_user": "automation@pve"}, "not to automation@pve"),
    ({"name": "x"}, {}, {}, "config.name: 'name' is an option of the module"),
    ({"digest": "x"}, {}, {}, "config.digest"),
    ({"Cores": 4}, {}, {}, "config.Cores: not a PVE config key"),
    ({"net0": {"bridge": "vmbr0"}}, {}, {}, "config.net0: must be a string"),
])
def test_validation_names_the_key_and_the_problem(config, current, kwargs, message):
    problems = pve_vm.validate(config, current, **kwargs)
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize("config, current", [
    ({"hostpci0": "0000:41:00,pcie=1"}, {"machine": "q35"}),
    ({"hostpci0": "0000:41:00,pcie=1", "machine": "pc-q35-9.0"}, {"machine": "pc"}),
    ({"hostpci0": "mapping=gpu41,pcie=1", "machine": "q35"}, {}),
    # The ids pve_pci_mapping accepts (module_utils.pve_mapping), dots included.
    ({"hostpci0": "mapping=rtx3090.slot41,pcie=1", "machine": "q35"}, {}),
    ({"efidisk0": "local-lvm:1", "bios": "ovmf"}, {}),
])
def test_validation_accepts_good_configs(config, current):
    token = "mapping" in str(config.get("hostpci0"))
    assert pve_vm.validate(config, current, token=token) == []


def test_ballooning_with_passthrough_is_warned():
    assert "ballooning" in pve_vm.warnings_of({"balloon": 2048}, {"hostpci0": "0000:41:00"})[0]
    assert pve_vm.warnings_of({"balloon": 0}, {"hostpci0": "0000:41:00"}) == []


def test_sizes_and_cpusets_round_trip():
    assert [pve_vm.parse_size(t) for t in ("32G", "528K", "1T", "1024", "x")] == \
        [32 * 1024 ** 3, 528 * 1024, 1024 ** 4, 1024, None]
    assert pve_vm.format_size(32 * 1024 ** 3) == "32G" and pve_vm.format_size(540672) == "528K"
    assert pve_vm.format_cpuset(pve_vm.cpuset("0-19;40-59")) == "0-19,40-59"
    assert pve_vm.cpuset("3-1") is None


class FakeTasks(object):
    """Just enough of proxmoxer's call shape to drive VmApi.wait."""

    def __init__(self, states):
        self.states = list(states)

    def nodes(self, node):
        return self

    def tasks(self, upid):
        return self

    @property
    def status(self):
        return self

    def get(self):
        return self.states.pop(0)


def test_task_wait_reports_the_exit_status_and_times_out():
    ticks = iter(range(100))
    api = pve_vm.VmApi(FakeTasks([{"status": "running"}, {"status": "stopped", "exitstatus": "OK"}]), "pve-a", 120,
                       sleep=lambda s: None, clock=lambda: next(ticks))
    assert api.wait("UPID:pve-a:1:2:3:qmstart:120:root@pam:")["exitstatus"] == "OK"
    api = pve_vm.VmApi(FakeTasks([{"status": "stopped", "exitstatus": "VM quit/powerdown failed"}]), "pve-a", 120)
    with pytest.raises(pve_vm.PveTaskError, match="powerdown failed"):
        api.wait("UPID:pve-a:1:2:3:qmshutdown:120:root@pam:")
    ticks = iter(range(100))
    api = pve_vm.VmApi(FakeTasks([{"status": "running"}] * 10), "pve-a", 120, task_timeout=3,
                       sleep=lambda s: None, clock=lambda: next(ticks))
    with pytest.raises(pve_vm.PveTaskError, match="still running after 3s"):
        api.wait("UPID:pve-a:1:2:3:qmstart:120:root@pam:")


class FakeDestroy(FakeTasks):
    """Records the parameters of the VM's DELETE (proxmoxer's qemu(vmid).delete(**params))."""

    def __init__(self):
        super().__init__([{"status": "stopped", "exitstatus": "OK"}])
        self.deleted = []

    def qemu(self, vmid):
        return self

    def delete(self, **params):
        self.deleted.append(params)
        return "UPID:pve-a:1:2:3:qmdestroy:120:root@pam:"


@pytest.mark.parametrize("unreferenced, sent", [(False, 0), (True, 1)])
def test_destroy_keeps_disks_the_config_does_not_reference_unless_asked(unreferenced, sent):
    fake = FakeDestroy()
    pve_vm.VmApi(fake, "pve-a", 120).destroy(unreferenced_disks=unreferenced)
    assert fake.deleted == [{"purge": 1, "destroy-unreferenced-disks": sent}]


def test_a_grow_only_disk_keeps_its_size_when_asked_for_less():
    """The model disk's auto size (gpu_vm_model_disk_gib) is a floor: a model taken out never shrinks the disk."""
    step = pve_vm.plan({"scsi0": "local-lvm:16,discard=on,ssd=1"}, CURRENT, grow_only=["scsi0"])
    assert not pve_vm.changes(step) and step["after"]["scsi0"] == CURRENT["scsi0"]
    bigger = pve_vm.plan({"scsi0": "local-lvm:64,discard=on,ssd=1"}, CURRENT, grow_only=["scsi0"])
    assert bigger["resize"] == {"scsi0": "64G"}
    # Only the keys named: another disk asked smaller is still refused.
    with pytest.raises(pve_vm.VmConfigError, match="PVE cannot shrink a disk"):
        pve_vm.plan({"scsi0": "local-lvm:16,discard=on,ssd=1"}, CURRENT, grow_only=["scsi1"])
