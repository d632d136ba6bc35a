"""pvegpu.llmstack.pve_vm against fakepve (a PVE API built from PVE's own schema that validates every request
and stores VMs, their pending changes, disks and power state), served by the lab's double (tools/lab_fakepve.py)
which adds disk resize. The expected configs are the seed's (000 §VM), not the module's output."""

import pytest
from conftest import run_pve_module, state_changing

# Seed 000 §VM: four RTX 3090 in one VM, x-vga only on the primary GPU.
SEED_A_SLOTS = ["0000:41:00", "0000:61:00", "0000:81:00", "0000:a1:00"]
BASE = {"machine": "q35", "bios": "ovmf", "efidisk0": "local-lvm:1,efitype=4m,pre-enrolled-keys=0", "cpu": "host",
        "cores": 16, "memory": 131072, "balloon": 0, "numa": 1, "scsihw": "virtio-scsi-single",
        "scsi0": "local-lvm:32,discard=on,iothread=1,ssd=1", "agent": 1, "onboot": 1,
        "net0": "virtio,bridge=vmbr0,tag=20"}


def platform_a_config():
    config = dict(BASE)
    for index, slot in enumerate(SEED_A_SLOTS):
        config["hostpci%d" % index] = slot + ",pcie=1" + (",x-vga=1" if index == 0 else "")
    return config


def vm_args(config, **extra):
    args = {"node": "pve-a", "vmid": 120, "name": "gpu-3090", "config": config}
    args.update(extra)
    return args


def stored(pve, vmid=120):
    return pve.vm(vmid)


def props(value):
    """'a,b=1' -> ({'a'} positional, {'b': '1'})."""
    positional, named = [], {}
    for part in value.split(","):
        key, sep, val = part.partition("=")
        if sep:
            named[key] = val
        else:
            positional.append(part)
    return positional, named


def test_platform_a_vm_is_created_as_the_seed_says_and_a_rerun_changes_nothing(labpve):
    result = run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()))
    assert not result.get("failed"), result
    assert result["changed"] is True and result["operation"] == "create"
    vm = stored(labpve)
    assert vm.name == "gpu-3090" and vm.node == "pve-a"
    cfg = vm.config
    assert (cfg["machine"], cfg["bios"], cfg["cpu"], str(cfg["balloon"]), str(cfg["numa"])) == \
        ("q35", "ovmf", "host", "0", "1")
    hostpci = sorted(k for k in cfg if k.startswith("hostpci"))
    assert hostpci == ["hostpci0", "hostpci1", "hostpci2", "hostpci3"]
    for index, key in enumerate(hostpci):
        positional, named = props(cfg[key])
        assert positional == [SEED_A_SLOTS[index]] and named.get("pcie") == "1"
        assert ("x-vga" in named) == (index == 0)
    # PVE allocated the disks and gave the NIC a MAC; none of that may count as a difference.
    assert "vm-120-disk" in cfg["scsi0"] and "size=32G" in cfg["scsi0"]
    assert cfg["net0"].startswith("virtio=") and "tag=20" in cfg["net0"]
    labpve.requests.clear()
    again = run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()))
    assert again["changed"] is False and again["operation"] == "none", again
    assert state_changing(labpve) == []
    assert again["diff"]["before"] == again["diff"]["after"]


def test_platform_b_vm_with_eight_gpus_through_mappings(labpve):
    slots = ["0000:1a:00", "0000:1b:00", "0000:3d:00", "0000:3e:00",
             "0000:88:00", "0000:89:00", "0000:b1:00", "0000:b2:00"]
    config = dict(BASE, cores=40, memory=262144)
    for index, slot in enumerate(slots):
        config["hostpci%d" % index] = "mapping=v100-%s,pcie=1" % slot[5:7]
    args = {"node": "pve-b", "vmid": 121, "name": "gpu-v100", "config": config}
    result = run_pve_module(labpve, "pve_vm", args)
    assert result["changed"] is True and not result.get("failed"), result
    cfg = stored(labpve, 121).config
    assert sorted(cfg[k] for k in cfg if k.startswith("hostpci")) == sorted(
        "mapping=v100-%s,pcie=1" % s[5:7] for s in slots)
    labpve.requests.clear()
    # The same values written another way: property order, booleans, units.
    config2 = dict(config, hostpci0="pcie=true,mapping=v100-1a", numa="yes", memory="262144")
    again = run_pve_module(labpve, "pve_vm", dict(args, config=config2))
    assert again["changed"] is False, again
    assert state_changing(labpve) == []


def test_one_changed_value_is_the_only_key_in_diff_and_request(labpve):
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()))
    labpve.requests.clear()
    result = run_pve_module(labpve, "pve_vm", vm_args(dict(platform_a_config(), cores=24)), diff=True)
    assert result["changed"] is True and result["operation"] == "update"
    before, after = result["diff"]["before"], result["diff"]["after"]
    assert [k for k in after if before.get(k) != after[k]] == ["cores"]
    assert (str(before["cores"]), after["cores"]) == ("16", "24")
    writes = state_changing(labpve)
    assert len(writes) == 1 and writes[0][0] == "PUT" and writes[0][1].endswith("/nodes/pve-a/qemu/120/config")
    assert sorted(writes[0][2]) == ["cores", "digest"] and writes[0][2]["cores"] == ["24"]
    assert str(stored(labpve).config["cores"]) == "24"


def test_check_mode_changes_nothing_and_diff_shows_a_manual_edit(labpve):
    check = run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()), check=True, diff=True)
    assert check["changed"] is True and check["operation"] == "create"
    assert state_changing(labpve) == [] and stored(labpve) is None
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()))
    # Someone edits the VM by hand: two cores more, and hostpci1 loses pcie.
    stored(labpve).config["cores"] = 18
    stored(labpve).config["hostpci1"] = "0000:61:00"
    labpve.requests.clear()
    check = run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()), check=True, diff=True)
    assert check["changed"] is True and state_changing(labpve) == []
    before, after = check["diff"]["before"], check["diff"]["after"]
    assert sorted(k for k in after if before.get(k) != after[k]) == ["cores", "hostpci1"]
    assert after["hostpci1"] == "0000:61:00,pcie=1" and before["hostpci1"] == "0000:61:00"
    assert str(stored(labpve).config["cores"]) == "18"


def test_running_vm_reports_reboot_required_and_restarted_applies_it(labpve):
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config(), state="started"))
    assert stored(labpve).status == "running"
    result = run_pve_module(labpve, "pve_vm", vm_args(dict(platform_a_config(), memory=65536), state="started"))
    assert result["changed"] is True and result["reboot_required"] is True and result["pending"] == ["memory"]
    # PVE keeps the running config until the next start: a rerun sees the pending value as done.
    again = run_pve_module(labpve, "pve_vm", vm_args(dict(platform_a_config(), memory=65536), state="started"))
    assert again["changed"] is False and again["reboot_required"] is True
    labpve.requests.clear()
    restarted = run_pve_module(labpve, "pve_vm", vm_args(dict(platform_a_config(), memory=65536), state="restarted"))
    assert restarted["reboot_required"] is False and restarted["status"] == "running"
    assert str(stored(labpve).config["memory"]) == "65536"
    paths = [path for dummy_method, path, dummy_form in state_changing(labpve)]
    assert paths == ["/api2/json/nodes/pve-a/qemu/120/status/shutdown", "/api2/json/nodes/pve-a/qemu/120/status/start"]


def test_stop_is_an_acpi_shutdown_and_a_guest_that_ignores_it_is_not_killed(labpve):
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config(), state="started"))
    stored(labpve).acpi = False
    result = run_pve_module(labpve, "pve_vm", vm_args(platform_a_config(), state="stopped", shutdown_timeout=5))
    assert result["failed"] and "did not power off within 5s" in result["msg"] and "force_stop_after" in result["msg"]
    assert stored(labpve).status == "running"
    forced = run_pve_module(labpve, "pve_vm", vm_args(platform_a_config(), state="stopped", force_stop_after=5))
    assert forced["changed"] is True and stored(labpve).status == "stopped"
    shutdowns = [f for m, p, f in state_changing(labpve) if p.endswith("/status/shutdown")]
    assert [s.get("forceStop") for s in shutdowns] == [["0"], ["1"]]
    assert not [p for m, p, f in state_changing(labpve) if p.endswith("/status/stop")]


def test_disks_grow_keep_their_volume_and_never_shrink(labpve):
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()))
    volume = stored(labpve).config["scsi0"].split(",")[0]
    labpve.requests.clear()
    grown = run_pve_module(labpve, "pve_vm", vm_args(dict(platform_a_config(), scsi0="local-lvm:40,discard=on,"
                                                          "iothread=1,ssd=1")))
    assert grown["changed"] is True
    writes = state_changing(labpve)
    assert [(m, p.rsplit("/", 1)[1]) for m, p, f in writes] == [("PUT", "resize")]
    assert writes[0][2]["disk"] == ["scsi0"] and writes[0][2]["size"] == ["40G"]
    assert "size=40G" in stored(labpve).config["scsi0"]
    # Options change on the same volume; no new allocation.
    run_pve_module(labpve, "pve_vm", vm_args(dict(platform_a_config(), scsi0="local-lvm:40,discard=ignore")))
    assert stored(labpve).config["scsi0"].split(",")[0] == volume
    assert "discard=ignore" in stored(labpve).config["scsi0"] and "ssd" not in stored(labpve).config["scsi0"]
    labpve.requests.clear()
    shrink = run_pve_module(labpve, "pve_vm", vm_args(dict(platform_a_config(), scsi0="local-lvm:20")))
    assert shrink["failed"] and "scsi0: the disk is 40G" in shrink["msg"] and "cannot shrink" in shrink["msg"]
    gone = run_pve_module(labpve, "pve_vm", vm_args({"scsi0": None}))
    assert gone["failed"] and "remove_disks" in gone["msg"]
    assert state_changing(labpve) == []


def test_a_changed_nic_keeps_the_mac_pve_gave_it(labpve):
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()))
    mac = stored(labpve).config["net0"].split(",")[0].split("=")[1]
    result = run_pve_module(labpve, "pve_vm", vm_args({"net0": "virtio,bridge=vmbr0,tag=30"}))
    assert result["changed"] is True
    assert stored(labpve).config["net0"].split(",")[0] == "virtio=" + mac and "tag=30" in stored(labpve).config["net0"]


def test_absent_shuts_down_and_destroys_only_the_named_vm(labpve):
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config(), state="started"))
    wrong = run_pve_module(labpve, "pve_vm", vm_args({}, name="other", state="absent"))
    assert wrong["failed"] and "taken by the VM 'gpu-3090'" in wrong["msg"] and stored(labpve) is not None
    gone = run_pve_module(labpve, "pve_vm", vm_args({}, state="absent"))
    assert gone["changed"] is True and stored(labpve) is None
    again = run_pve_module(labpve, "pve_vm", vm_args({}, state="absent"))
    assert again["changed"] is False


@pytest.mark.parametrize("args, message", [
    ({"name": "someone-else"}, "vmid: 120 is taken by the VM 'gpu-3090' on node pve-a, not 'someone-else'"),
    ({"node": "pve-z"}, "node: 'pve-z' is not a node of this PVE cluster (nodes: pve-a, pve-b)"),
    ({"node": "pve-b"}, "node: VM 120 'gpu-3090' runs on node pve-a, not pve-b"),
    ({"config": {"hostpci4": "host=0000:c1:00,mapping=rtx3090-c1"}}, "config.hostpci4: 'host=0000:c1:00,mapping="
     "rtx3090-c1' names both a host address and mapping=rtx3090-c1"),
    ({"config": {"machine": "pc-i440fx-9.0"}}, "config.hostpci0: pcie=1 needs 'machine: q35'"),
    ({"config": {"bios": "seabios"}}, "config.efidisk0: an EFI vars disk needs 'bios: ovmf'"),
    ({"config": {"hostpci5": "0000:4g:00"}}, "config.hostpci5: '0000:4g:00' is not a PCI slot"),
])
def test_refusals_name_the_problem_and_change_nothing(labpve, args, message):
    run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()))
    before = dict(stored(labpve).config)
    labpve.requests.clear()
    merged = vm_args(dict(platform_a_config(), **args.pop("config", {})), **args)
    result = run_pve_module(labpve, "pve_vm", merged)
    assert result.get("failed") and message in result["msg"], result
    assert state_changing(labpve) == [] and stored(labpve).config == before


def test_raw_host_address_with_an_api_token_is_refused_before_any_request(labpve):
    labpve.apitokens["root@pam!llmstack"] = "token-secret-for-tests"
    result = run_pve_module(labpve, "pve_vm", vm_args(platform_a_config()),
                            token=("root@pam!llmstack", "token-secret-for-tests"))
    assert result["failed"] and "allowed by PVE only to root@pam with a password, not to an API token" in result["msg"]
    assert "mapping=<name>" in result["msg"] and labpve.requests == []
    mapped = dict(platform_a_config())
    for index, slot in enumerate(SEED_A_SLOTS):
        mapped["hostpci%d" % index] = "mapping=rtx3090-%s,pcie=1%s" % (slot[5:7], ",x-vga=1" if index == 0 else "")
    ok = run_pve_module(labpve, "pve_vm", vm_args(mapped), token=("root@pam!llmstack", "token-secret-for-tests"))
    assert ok["changed"] is True and not ok.get("failed"), ok
