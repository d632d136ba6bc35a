"""pvegpu.llmstack.pve_disk_import against fakepve (PVE's own schema validates every request) served by the lab's
double (tools/lab_fakepve.py), which adds what fakepve lacks here: a drive set to ``<storage>:0,import-from=``
allocating a volume of the source's size, the old volume becoming ``unusedN``, deleting ``unusedN`` freeing it,
and ``local:import/<file>`` volumes being the files of a directory. That import behaviour is the double's
reading of PVE's API; a real PVE copying the image is not exercised here."""

import pytest
from conftest import run_pve_module, state_changing
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


def test_the_image_replaces_the_empty_disk_once(pve):
    empty = stored(pve).config["scsi0"]
    result = run_pve_module(pve, "pve_disk_import", args())
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
    assert volume_of(empty).split(":", 1)[1] not in pve.storages["local-lvm"].get("volumes", {})

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
