"""pvegpu.llmstack.pve_disk_import against fakepve (PVE's own schema validates every request) served by the lab's
double (tools/lab_fakepve.py), which adds what fakepve lacks here: a drive set to ``<storage>:0,import-from=``
allocating a volume of the source's size, the old volume becoming ``unusedN``, deleting ``unusedN`` freeing it,
and ``local:import/<file>`` volumes being the files of a directory. That import behaviour is the double's
reading of PVE's API; a real PVE copying the image is not exercised here."""

import json

import pytest
from conftest import playbook, run_pve_module, state_changing
from test_pve_vm import BASE, stored

DIGEST = "ab" * 32
OTHER = "cd" * 32
OPTIONS = "discard=on,iothread=1,ssd=1"


@pytest.fixture
def pve(labpve, tmp_path):
    labpve.import_dir = str(tmp_path)
    with open(tmp_path / "gpu-3090.raw", "wb") as handle:
        handle.truncate(3 * 1024 ** 3)   # sparse: 3 GiB, like a built image
    result = run_pve_module(labpve, "pve_vm", {"node": "pve-a", "vmid": 120, "name": "gpu-3090", "config": BASE})
    assert result["changed"] and not result.get("failed"), result
    labpve.requests.clear()
    return labpve


def args(**extra):
    base = {"node": "pve-a", "vmid": 120, "storage": "local-lvm", "source": "local:import/gpu-3090.raw",
            "options": OPTIONS, "digest": DIGEST}
    base.update(extra)
    return base


def volume_of(value):
    return value.split(",", 1)[0]


def on_storage(pve, volume):
    """Whether the double still holds the volume (``local-lvm:vm-120-disk-0``) on its storage."""
    storage, name = volume.split(":", 1)
    return name in pve.storages[storage].get("volumes", {})


def test_the_image_replaces_the_empty_disk_once(pve):
    # The empty disk pve_vm allocated in this run (the role passes it as owned_volumes): freed after the import.
    empty = stored(pve).config["scsi0"]
    result = run_pve_module(pve, "pve_disk_import", args(owned_volumes=[empty]))
    assert result["changed"] and result["outcome"] == "import", result
    writes = state_changing(pve)
    # One config change with the import, the boot order and the tag, then the displaced disk deleted.
    assert [(m, p.rsplit("/", 1)[1]) for m, p, f in writes] == [("POST", "config"), ("PUT", "config")]
    sent = writes[0][2]
    assert sent["scsi0"] == ["local-lvm:0,import-from=local:import/gpu-3090.raw," + OPTIONS]
    assert sent["boot"] == ["order=scsi0"] and sent["tags"] == ["llmstack-img-" + DIGEST[:12]]
    assert writes[1][2]["delete"] == ["unused0"] and result["removed"] == "unused0"
    config = stored(pve).config
    assert volume_of(config["scsi0"]) != volume_of(empty)
    assert "size=3G" in config["scsi0"] and "ssd=1" in config["scsi0"]
    assert not [k for k in config if k.startswith("unused")]
    assert not on_storage(pve, volume_of(empty))
    assert result["displaced"] == {"volume": volume_of(empty), "key": "unused0", "action": "delete", "ours": True}

    pve.requests.clear()
    again = run_pve_module(pve, "pve_disk_import", args())
    assert again["changed"] is False and again["outcome"] == "none"
    assert state_changing(pve) == []


def test_check_mode_and_diff_change_nothing(pve):
    before = dict(stored(pve).config)
    result = run_pve_module(pve, "pve_disk_import", args(), check=True, diff=True)
    assert result["changed"] and result["outcome"] == "import"
    assert "import-from=local:import/gpu-3090.raw" in result["diff"]["after"]
    assert state_changing(pve) == [] and stored(pve).config == before


def test_a_vm_with_another_image_is_kept_unless_replace(pve):
    run_pve_module(pve, "pve_disk_import", args(digest=OTHER))
    installed = stored(pve).config["scsi0"]
    pve.requests.clear()
    refused = run_pve_module(pve, "pve_disk_import", args())
    assert refused["failed"] and "guest_image_import_replace" in refused["msg"]
    assert state_changing(pve) == [] and stored(pve).config["scsi0"] == installed
    replaced = run_pve_module(pve, "pve_disk_import", args(replace=True))
    assert replaced["changed"] and volume_of(stored(pve).config["scsi0"]) != volume_of(installed)
    assert stored(pve).config["tags"] == "llmstack-img-" + DIGEST[:12]
    # The replaced image was ours: its volume is freed (replace says its data is lost) ...
    assert replaced["displaced"]["action"] == "delete" and replaced["displaced"]["ours"] is True
    assert not on_storage(pve, volume_of(installed))
    assert volume_of(installed) not in stored(pve).config.values()


def test_replace_keeps_our_old_image_when_told(pve):
    run_pve_module(pve, "pve_disk_import", args(digest=OTHER, displaced="delete"))
    installed = volume_of(stored(pve).config["scsi0"])
    kept = run_pve_module(pve, "pve_disk_import", args(replace=True, displaced="keep"))
    assert kept["changed"] and kept["displaced"]["action"] == "keep", kept
    unused = dict((k, v) for k, v in stored(pve).config.items() if k.startswith("unused"))
    assert unused == {kept["displaced"]["key"]: installed} and on_storage(pve, installed)


def test_a_disk_the_collection_did_not_put_there_survives_the_import(pve):
    """A VM made by hand: its scsi0 is not in owned_volumes and the VM has no image tag of ours."""
    foreign = volume_of(stored(pve).config["scsi0"])
    predicted = run_pve_module(pve, "pve_disk_import", args(), check=True, diff=True)
    assert predicted["changed"] and state_changing(pve) == [], predicted
    result = run_pve_module(pve, "pve_disk_import", args(), diff=True)
    assert result["changed"] and not result.get("failed"), result
    # Nothing deleted: one config change (the import), no second request.
    assert [(m, p.rsplit("/", 1)[1]) for m, p, f in state_changing(pve)] == [("POST", "config")]
    assert "removed" not in result
    config = stored(pve).config
    assert volume_of(config["scsi0"]) != foreign
    kept = [k for k, v in config.items() if k.startswith("unused") and volume_of(v) == foreign]
    assert len(kept) == 1 and on_storage(pve, foreign)
    assert result["displaced"] == {"volume": foreign, "key": kept[0], "action": "keep", "ours": False}
    # The warning names the VM, the drive, the volume, where it is kept and the option that frees it.
    warning = " ".join(result.get("warnings", []))
    for word in ("VM 120", "scsi0", foreign, kept[0], "displaced"):
        assert word in warning, (word, warning)
    # Check mode and diff said exactly this beforehand.
    for key in ("outcome", "reason", "update", "displaced", "diff", "warnings"):
        assert predicted.get(key) == result.get(key), key
    assert foreign in result["diff"]["after"] and kept[0] in result["diff"]["after"]


def test_a_disk_the_collection_did_not_put_there_is_deleted_when_allowed(pve):
    foreign = volume_of(stored(pve).config["scsi0"])
    predicted = run_pve_module(pve, "pve_disk_import", args(displaced="delete"), check=True, diff=True)
    assert state_changing(pve) == [] and on_storage(pve, foreign)
    result = run_pve_module(pve, "pve_disk_import", args(displaced="delete"), diff=True)
    assert result["changed"] and result["removed"] == predicted["displaced"]["key"], result
    assert result["displaced"] == {"volume": foreign, "key": result["removed"], "action": "delete", "ours": False}
    assert [(m, p.rsplit("/", 1)[1]) for m, p, f in state_changing(pve)] == [("POST", "config"), ("PUT", "config")]
    assert not on_storage(pve, foreign) and not [k for k in stored(pve).config if k.startswith("unused")]
    for key in ("outcome", "update", "displaced", "diff"):
        assert predicted.get(key) == result.get(key), key
    assert not result.get("warnings")


def test_a_running_vm_is_not_touched(pve):
    run_pve_module(pve, "pve_vm", {"node": "pve-a", "vmid": 120, "name": "gpu-3090", "config": BASE,
                                   "state": "started"})
    pve.requests.clear()
    result = run_pve_module(pve, "pve_disk_import", args())
    assert result["failed"] and "running" in result["msg"]
    assert state_changing(pve) == []


def test_a_wrong_boot_order_is_corrected_alone(pve):
    run_pve_module(pve, "pve_disk_import", args())
    run_pve_module(pve, "pve_vm", {"node": "pve-a", "vmid": 120, "name": "gpu-3090",
                                   "config": {"boot": "order=net0;scsi0"}})
    pve.requests.clear()
    result = run_pve_module(pve, "pve_disk_import", args())
    assert result["outcome"] == "boot" and result["update"] == {"boot": "order=scsi0"}
    assert [f for m, p, f in state_changing(pve)][0]["boot"] == ["order=scsi0"]


@pytest.mark.parametrize("extra, message", [
    ({"source": "/var/lib/vz/import/gpu-3090.raw"}, "guest_image_import_storage"),
    ({"disk": "hostpci0"}, "guest_image_import_disk"),
    ({"digest": "abc"}, "digest"),
    ({"source": "local:import/missing.raw"}, "does not exist"),
])
def test_bad_arguments_and_missing_images_fail_clearly(pve, extra, message):
    result = run_pve_module(pve, "pve_disk_import", args(**extra))
    assert result["failed"] and message in result["msg"], result
    assert not [w for w in state_changing(pve) if "delete" in w[2]]
    assert "import-from" not in stored(pve).config["scsi0"]


@pytest.mark.parametrize("created_here", [True, False])
def test_the_role_frees_only_the_empty_disk_gpu_vm_created_in_this_run(pve, tmp_path, created_here):
    """roles/guest_image/tasks/import.yml passes gpu_vm's just-created disk as owned_volumes, nothing else."""
    empty = stored(pve).config["scsi0"]
    host, port = pve.url.split("://", 1)[1].rsplit(":", 1)
    # The VM as the topology has it (the validate step's fact: gpu_vm's settings of this host); the API password is
    # the inventory's own variable, never in the topology.
    vm = {"node": "pve-a", "pve_node": "pve-a", "vmid": 120, "storage": "local-lvm", "disk_gib": 64,
          "disk_options": "discard=on,iothread=1,ssd=1",
          "api": {"host": host, "port": int(port), "user": pve.user, "token_id": "", "validate_certs": False}}
    facts = {"llmstack_topology": {"hosts": {"localhost": {"vm": vm}}}, "gpu_vm_api_password": pve.password,
             "guest_image_path": str(tmp_path / "gpu-3090.raw"),
             "guest_image_build": {"digest": DIGEST}, "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    if created_here:   # what gpu_vm's "Create, update or destroy the VM" task registers when it created the VM
        facts["gpu_vm_result"] = {"changed": True, "operation": "create", "config": {"scsi0": empty}}
    else:              # the VM was created in an earlier run (or by hand): the task did not create it
        facts["gpu_vm_result"] = {"changed": False, "operation": "none", "config": {"scsi0": empty}}
    play = [{"hosts": "localhost", "gather_facts": False, "vars": facts,
             "tasks": [{"ansible.builtin.include_role": {"name": "pvegpu.llmstack.guest_image",
                                                         "tasks_from": "import.yml"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    rc, out, err = playbook("-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"), json_output=True)
    assert rc == 0, out[-3000:] + err[-2000:]
    config = stored(pve).config
    assert "llmstack-img-" + DIGEST[:12] in config["tags"]
    unused = [k for k, v in config.items() if k.startswith("unused") and volume_of(v) == volume_of(empty)]
    if created_here:
        assert unused == [] and not on_storage(pve, volume_of(empty))
    else:
        assert len(unused) == 1 and on_storage(pve, volume_of(empty))
