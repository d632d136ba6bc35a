"""module_utils.pve_mapping: mapping entries from PCI facts and the create/update/delete decision."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pci, pve_mapping

ENTRY_41 = "id=10de:2204,iommugroup=27,node=pve-a,path=0000:41:00,subsystem-id=1458:403b"


def test_entries_from_platform_a_facts(sysfs_trees):
    gpus = pci.read_tree(sysfs_trees["platform-a"])["gpus"]
    entries = [pve_mapping.format_entry(pve_mapping.entry_from_gpu("pve-a", g)) for g in gpus]
    assert entries[0] == ENTRY_41
    assert entries[3] == "id=10de:2204,iommugroup=33,node=pve-a,path=0000:a1:00,subsystem-id=1458:403b"


def test_entry_without_subsystem_or_group(sysfs_trees):
    gpu = pci.read_tree(sysfs_trees["iommu-off"])["gpus"][0]
    gpu = dict(gpu, subsystem_vendor="0000", subsystem_device="0000")
    assert pve_mapping.format_entry(pve_mapping.entry_from_gpu("pve-a", gpu)) == \
        "id=10de:2204,node=pve-a,path=0000:41:00"


def test_property_strings_compare_in_any_key_order_and_case():
    a = pve_mapping.canonical(["node=pve-a,path=0000:41:00,ID=10DE:2204,iommugroup=27,subsystem-id=1458:403B"
                               .replace("ID=", "id=")])
    assert a == [ENTRY_41]


def test_create_when_absent():
    change = pve_mapping.plan(None, [ENTRY_41], description="3090 slot 41")
    assert change["action"] == "create"
    assert change["payload"] == {"map": [ENTRY_41], "description": "3090 slot 41"}
    assert change["before"] is None and change["after"] == {"map": [ENTRY_41], "description": "3090 slot 41"}


def test_nothing_to_do_when_equal_in_another_order():
    current = {"map": ["path=0000:41:00,node=pve-a,iommugroup=27,id=10de:2204,subsystem-id=1458:403b"],
               "description": "x", "digest": "abc"}
    assert pve_mapping.plan(current, [ENTRY_41])["action"] == "none"
    assert pve_mapping.plan(current, [ENTRY_41], description="x")["action"] == "none"


def test_update_carries_the_digest_and_only_the_change():
    current = {"map": [ENTRY_41], "description": "old", "digest": "d1g3st"}
    moved = ENTRY_41.replace("iommugroup=27", "iommugroup=28")
    change = pve_mapping.plan(current, [moved])
    assert change["action"] == "update"
    assert change["payload"] == {"map": [moved], "digest": "d1g3st"}
    assert change["before"]["map"] == [ENTRY_41] and change["after"] == {"map": [moved], "description": "old"}


def test_update_clears_the_description():
    change = pve_mapping.plan({"map": [ENTRY_41], "description": "old"}, [ENTRY_41], description="")
    assert change["action"] == "update" and change["payload"]["delete"] == "description"


def test_delete_only_when_present():
    assert pve_mapping.plan(None, [], state="absent")["action"] == "none"
    assert pve_mapping.plan({"map": [ENTRY_41]}, [], state="absent")["action"] == "delete"


@pytest.mark.parametrize("entry,fragment", [
    ({"id": "10de:2204", "node": "pve-a"}, "needs path"),
    ({"id": "10de-2204", "node": "pve-a", "path": "0000:41:00"}, "is not vendor:device"),
    ({"id": "10de:2204", "node": "pve-a", "path": "41:00"}, "is not a PCI slot"),
    ({"id": "10de:2204", "node": "pve-a", "path": "0000:41:00", "iommugroup": "x"}, "is not a number"),
    ({"id": "10de:2204", "node": "pve-a", "path": "0000:41:00", "mdev": "1"}, "unknown mapping entry key"),
])
def test_bad_entries(entry, fragment):
    with pytest.raises(pve_mapping.MappingError, match=fragment):
        pve_mapping.normalise_entry(entry)


def test_empty_present_mapping_is_refused():
    with pytest.raises(pve_mapping.MappingError, match="at least one entry"):
        pve_mapping.plan(None, [])


@pytest.mark.parametrize("name,valid", [("rtx3090-41", True), ("v100.pool_1", True), ("1bad", False),
                                        ("has space", False), ("", False)])
def test_mapping_ids(name, valid):
    assert pve_mapping.valid_mapping_id(name) is valid
