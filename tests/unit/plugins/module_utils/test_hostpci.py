"""module_utils.hostpci: slots to PVE hostpciN values."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import hostpci, pci


def test_seed_platform_a():
    assert hostpci.build(["0000:41:00", "0000:61:00", "0000:81:00", "0000:a1:00"], primary_vga=True) == {
        "hostpci0": "0000:41:00,pcie=1,x-vga=1", "hostpci1": "0000:61:00,pcie=1",
        "hostpci2": "0000:81:00,pcie=1", "hostpci3": "0000:a1:00,pcie=1"}


def test_short_slots_functions_rombar_and_no_pcie():
    assert hostpci.build(["41:00", "61:00.0"], pcie=False, rombar=False) == {
        "hostpci0": "0000:41:00,rombar=0", "hostpci1": "0000:61:00.0,rombar=0"}


def test_mappings_replace_addresses():
    assert hostpci.build(["41:00", "0000:61:00"], mappings={"0000:41:00": "rtx3090-a", "61:00": "rtx3090-b"},
                         primary_vga=True) == {"hostpci0": "mapping=rtx3090-a,pcie=1,x-vga=1",
                                               "hostpci1": "mapping=rtx3090-b,pcie=1"}


def test_repeats_collapse():
    assert list(hostpci.build(["41:00", "0000:41:00"])) == ["hostpci0"]


def test_shared_group_refused_naming_the_other_devices(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["server-switch-shared"])
    with pytest.raises(hostpci.HostpciError) as error:
        hostpci.build(["0000:83:00"], facts=facts)
    assert "GPU 0000:83:00 shares IOMMU group 30 with 0000:84:00.0" in str(error.value)


def test_shared_group_allowed_takes_the_whole_group(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["server-switch-shared"])
    assert hostpci.build(["0000:83:00"], facts=facts, allow_shared_group=True) == {
        "hostpci0": "0000:83:00,pcie=1", "hostpci1": "0000:84:00,pcie=1"}


def test_gpus_entries_are_accepted(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-b"])
    result = hostpci.build(facts["gpus"][:2])
    assert result == {"hostpci0": "0000:1a:00,pcie=1", "hostpci1": "0000:1b:00,pcie=1"}


def test_gpu_without_iommu_group_is_refused(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["iommu-off"])
    with pytest.raises(hostpci.HostpciError, match="in no IOMMU group"):
        hostpci.build(["41:00"], facts=facts)


def test_more_than_16_devices():
    with pytest.raises(hostpci.HostpciError, match="17 devices asked for; a PVE VM has at most 16"):
        hostpci.build(["%02x:00" % b for b in range(1, 18)])


@pytest.mark.parametrize("kwargs,fragment", [
    ({"items": ["41:0"]}, "is not a PCI slot"),
    ({"items": ["41:00"], "machine": "pc-i440fx-8.1"}, "pcie=1 needs machine q35"),
    ({"items": ["41:00"], "mappings": {"41:00": "bad name"}}, "is not a PVE mapping id"),
    ({"items": [{"functions": []}]}, "needs 'slot'"),
])
def test_bad_input(kwargs, fragment):
    with pytest.raises(hostpci.HostpciError, match=fragment):
        hostpci.build(**kwargs)


def test_q35_machine_versions_are_fine():
    assert hostpci.build(["41:00"], machine="pc-q35-8.1") == {"hostpci0": "0000:41:00,pcie=1"}
