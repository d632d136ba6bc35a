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
                           args["digest"], replace=args.get("replace", False), boot=args.get("boot", True))


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
