"""pve_import: when a built image goes onto a VM's disk, and the config change that does it.

The requests against PVE's schema (fakepve and the lab's import double) are in
tests/integration/test_pve_disk_import.py.
"""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_import

DIGEST = "0123456789abcdef" * 4
EMPTY = {"scsi0": "local-lvm:vm-120-disk-1,discard=on,size=64G", "boot": "order=scsi0;net0", "tags": "gpu;lab"}


def decide(config, status="stopped", **extra):
    args = {"disk": "scsi0", "storage": "local-lvm", "source": "local:import/vm.raw", "options": "discard=on",
            "digest": DIGEST}
    args.update(extra)
    return pve_import.plan(config, status, args["disk"], args["storage"], args["source"], args["options"],
                           args["digest"], replace=args.get("replace", False), boot=args.get("boot", True),
                           policy=args.get("policy", "auto"), owned=args.get("owned", ()))


def test_an_empty_vm_gets_the_image():
    result = decide(EMPTY)
    assert result["action"] == "import"
    assert result["update"] == {"scsi0": "local-lvm:0,import-from=local:import/vm.raw,discard=on",
                                "boot": "order=scsi0", "tags": "gpu;lab;llmstack-img-0123456789ab"}
    assert result["replaced"] == EMPTY["scsi0"]


def test_the_same_image_is_not_imported_twice():
    done = dict(EMPTY, tags="gpu;llmstack-img-0123456789ab", boot="order=scsi0")
    assert decide(done)["action"] == "none"
    assert decide(done, status="running")["action"] == "none"
    wrong_boot = dict(done, boot="order=net0;scsi0")
    assert decide(wrong_boot) == {"action": "boot", "update": {"boot": "order=scsi0"},
                                  "reason": "the boot order does not start at scsi0"}
    assert decide(wrong_boot, boot=False)["action"] == "none"


def test_another_image_needs_replace_and_a_running_vm_is_refused():
    other = dict(EMPTY, tags="llmstack-img-ffffffffffff")
    assert "guest_image_import_replace" in decide(other)["error"]
    replaced = decide(other, replace=True)
    assert replaced["action"] == "import" and replaced["update"]["tags"] == "llmstack-img-0123456789ab"
    assert "running" in decide(EMPTY, status="running")["error"]


def test_a_vm_without_the_disk_gets_it():
    result = decide({"boot": "order=net0"})
    assert result["action"] == "import" and result["replaced"] is None


@pytest.mark.parametrize("args, variable", [
    (("hostpci0", "local-lvm", "local:import/a.raw", "", DIGEST), "guest_image_import_disk"),
    # the GPU VM's model disk (gpu_vm_model_disk_gib) is never the image's
    (("scsi1", "local-lvm", "local:import/a.raw", "", DIGEST), "guest_image_import_disk: scsi1 is the GPU VM's model"),
    (("scsi0", "Local LVM", "local:import/a.raw", "", DIGEST), "guest_image_import_target_storage"),
    (("scsi0", "local-lvm", "/var/lib/vz/import/a.raw", "", DIGEST), "guest_image_import_storage"),
    (("scsi0", "local-lvm", "local:import/a.iso", "", DIGEST), "guest_image_import_storage"),
    (("scsi0", "local-lvm", "local:import/a.raw", "discard=on;rm", DIGEST), "gpu_vm_disk_options"),
    (("scsi0", "local-lvm", "local:import/a.raw", "", "xyz"), "digest"),
])
def test_check(args, variable):
    problems = pve_import.check(*args)
    assert len(problems) == 1 and problems[0].startswith(variable)
    assert pve_import.check("scsi0", "local-lvm", "local:import/a.raw", "discard=on,ssd=1", DIGEST) == []


def test_displaced():
    after = {"scsi0": "local-lvm:vm-120-disk-2,size=3G", "unused0": "local-lvm:vm-120-disk-0",
             "unused1": "local-lvm:vm-120-disk-1"}
    assert pve_import.displaced(after, EMPTY["scsi0"]) == "unused1"
    assert pve_import.displaced(after, None) is None
    assert pve_import.displaced({"scsi0": "x"}, EMPTY["scsi0"]) is None
    assert pve_import.displaced(dict(after, unused2="local:iso/x.iso"), "local:iso/x.iso,media=cdrom") is None


# The data-loss edge: what becomes of the volume the import takes off the drive.
FOREIGN = "local-lvm:vm-120-disk-1"          # EMPTY's scsi0 volume: nothing on the VM says the collection put it


def test_a_disk_the_collection_did_not_put_there_is_kept_by_default():
    result = decide(EMPTY)
    moved = result["displaced"]
    assert moved["volume"] == FOREIGN and moved["action"] == "keep" and moved["ours"] is False
    assert moved["key"] == "unused0"
    # The warning names the drive, the volume, where it is kept and the option that lets the import free it.
    for word in ("scsi0", FOREIGN, "unused0", "guest_image_import_displaced", "displaced: delete"):
        assert word in result["warning"], word
    assert "kept" in result["reason"]
    # PVE gives the displaced volume the lowest free unusedN.
    assert decide(dict(EMPTY, unused0="local-lvm:vm-120-disk-7", unused2="local-lvm:vm-120-disk-8"))[
        "displaced"]["key"] == "unused1"
    assert decide(EMPTY, policy="keep")["displaced"]["action"] == "keep"


def test_a_disk_the_collection_did_not_put_there_is_deleted_only_when_asked():
    result = decide(EMPTY, policy="delete")
    assert result["displaced"] == {"volume": FOREIGN, "key": "unused0", "action": "delete", "ours": False}
    assert "warning" not in result


def test_our_volumes_are_freed_unless_kept():
    # The empty disk the caller allocated (named as a drive value or a volume id).
    for owned in ([EMPTY["scsi0"]], [FOREIGN], ["local-lvm:vm-120-disk-9", FOREIGN + ",size=64G"]):
        result = decide(EMPTY, owned=owned)
        assert result["displaced"]["action"] == "delete" and result["displaced"]["ours"] is True, owned
        assert "warning" not in result
    assert decide(EMPTY, owned=["local-lvm:vm-120-disk-10"])["displaced"]["action"] == "keep"
    assert decide(EMPTY, owned=[FOREIGN], policy="keep")["displaced"]["action"] == "keep"
    # An image of ours, replaced: the data replace says is lost.
    other = dict(EMPTY, tags="llmstack-img-ffffffffffff")
    replaced = decide(other, replace=True)
    assert replaced["displaced"] == {"volume": FOREIGN, "key": "unused0", "action": "delete", "ours": True}
    kept = decide(other, replace=True, policy="keep")
    assert kept["displaced"]["action"] == "keep" and "warning" not in kept


def test_no_volume_no_displacement_and_nothing_else_changes():
    for config in ({"boot": "order=net0"}, dict(EMPTY, scsi0="none,media=cdrom"),
                   dict(EMPTY, scsi0="local:iso/debian.iso,media=cdrom")):
        result = decide(config, policy="delete")
        assert result["action"] == "import" and "displaced" not in result and "warning" not in result
    done = dict(EMPTY, tags="llmstack-img-0123456789ab", boot="order=scsi0")
    assert "displaced" not in decide(done, policy="delete")
    assert "guest_image_import_displaced" in decide(EMPTY, policy="remove")["error"]
    # The refusals stay refusals whatever the policy.
    assert "error" in decide(dict(EMPTY, tags="llmstack-img-ffffffffffff"), policy="delete")
    assert "running" in decide(EMPTY, status="running", policy="delete")["error"]


def lines(text):
    return dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "") for line in text.splitlines())


def test_diff_shows_what_becomes_of_the_displaced_volume():
    kept = decide(EMPTY)
    text = pve_import.diff(EMPTY, kept)
    before, after = lines(text["before"]), lines(text["after"])
    assert before["scsi0"] == EMPTY["scsi0"] and after["scsi0"] == kept["update"]["scsi0"]
    assert before["unused0"] == "" and after["unused0"] == FOREIGN
    deleted = decide(EMPTY, policy="delete")
    text = pve_import.diff(EMPTY, deleted)
    assert "unused0" not in text["after"]
    assert FOREIGN in text["before"] and "deleted" in lines(text["after"])["volume " + FOREIGN]
    assert "deleted" not in text["before"]
    none = pve_import.diff({"boot": "order=net0"}, decide({"boot": "order=net0"}))
    assert "volume" not in none["after"] and "unused" not in none["after"]
