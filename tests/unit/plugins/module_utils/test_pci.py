"""module_utils.pci against the sysfs fixture trees; the expected values are those each fixture's SOURCE
note states (written from the listing, not from this code's output)."""

import os

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pci


def gpus(facts):
    return dict((g["slot"], g) for g in facts["gpus"])


def test_platform_a_four_isolated_3090s(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-a"])
    assert facts["iommu_enabled"] is True
    found = gpus(facts)
    assert sorted(found) == ["0000:41:00", "0000:61:00", "0000:81:00", "0000:a1:00"]
    gpu = found["0000:41:00"]
    assert gpu["functions"] == ["0000:41:00.0", "0000:41:00.1"]
    assert (gpu["vendor"], gpu["device"], gpu["iommu_groups"]) == ("10de", "2204", ["27"])
    assert gpu["isolated"] is True and gpu["shares_group_with"] == []
    assert gpu["numa_node"] == 0 and gpu["driver"] == "vfio-pci"
    assert (gpu["subsystem_vendor"], gpu["subsystem_device"]) == ("1458", "403b")
    assert facts["groups"]["27"] == ["0000:41:00.0", "0000:41:00.1"]
    assert [s for s, g in sorted(found.items()) if g["link_degraded"]] == ["0000:81:00", "0000:a1:00"]
    assert found["0000:81:00"]["link_degraded_reasons"] == ["width x8 of x16"]
    assert found["0000:81:00"]["link"] == {"speed": "16.0 GT/s PCIe", "width": 8, "max_speed": "16.0 GT/s PCIe",
                                           "max_width": 16}


def test_platform_b_eight_v100_3d_controllers_not_the_bmc(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-b"])
    found = gpus(facts)
    assert sorted(found) == ["0000:%s:00" % b for b in ("1a", "1b", "3d", "3e", "88", "89", "b1", "b2")]
    assert all(g["class"] == "030200" and g["device"] == "1db5" and g["isolated"] for g in found.values())
    assert all(g["functions"] == [g["slot"] + ".0"] for g in found.values())
    assert [found["0000:%s:00" % b]["numa_node"] for b in ("1a", "3e", "88", "b2")] == [0, 0, 1, 1]
    assert facts["devices"]["0000:03:00.0"]["vendor"] == "1a03"       # the AST2500 VGA is there ...
    assert "0000:03:00" not in found                                   # ... but is no GPU


def test_bmc_vga_counts_when_named(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-b"], named_slots=["0000:03:00"])
    assert "0000:03:00" in gpus(facts)


def test_desktop_gpu_sharing_only_with_its_root_port_is_isolated(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["desktop-shared-root-port"])
    found = gpus(facts)
    assert sorted(found) == ["0000:00:02", "0000:01:00"]
    gpu = found["0000:01:00"]
    assert facts["groups"]["1"] == ["0000:00:01.0", "0000:01:00.0", "0000:01:00.1"]
    assert gpu["isolated"] is True and gpu["shares_group_with"] == []
    assert gpu["driver"] == "nouveau"
    assert gpu["drivers"] == {"0000:01:00.0": "nouveau", "0000:01:00.1": "snd_hda_intel"}
    assert gpu["numa_node"] is None            # -1 in sysfs: no NUMA information


def test_two_gpus_behind_a_switch_without_acs_share_a_group(sysfs_trees):
    found = gpus(pci.read_tree(sysfs_trees["server-switch-shared"]))
    assert found["0000:83:00"]["isolated"] is False
    assert found["0000:83:00"]["shares_group_with"] == ["0000:84:00.0"]
    assert found["0000:84:00"]["shares_group_with"] == ["0000:83:00.0"]


def test_host_without_nvidia_has_no_gpus(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["no-nvidia"])
    assert facts["iommu_enabled"] is True and facts["gpus"] == []
    assert len(facts["devices"]) == 6


def test_iommu_off(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["iommu-off"])
    assert facts["iommu_enabled"] is False and facts["groups"] == {}
    gpu = gpus(facts)["0000:41:00"]
    assert gpu["iommu_groups"] == [] and gpu["isolated"] is False


def test_copied_tree_with_dangling_links_still_reads(tmp_path, sysfs_trees):
    """A tree copied without its link targets (e.g. tar of /sys/bus/pci/devices) keeps link names."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(sysfs_trees["platform-a"], str(copy), symlinks=True)
    shutil.rmtree(str(copy / "sys" / "bus" / "pci" / "drivers"))
    facts = pci.read_tree(str(copy))
    assert gpus(facts)["0000:41:00"]["driver"] == "vfio-pci"


def test_nvswitch_and_other_bridges_are_not_gpus(tmp_path):
    import sysfs_fixture

    listing = sysfs_fixture.parse_listing(
        "IOMMU Group 5 0000:05:00.0 Bridge [0680]: NVIDIA Corporation GA100 [A100 NVSwitch] [10de:1af1] (rev a1)\n"
        "IOMMU Group 6 0000:07:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 80GB] [10de:20b2]\n")
    root = sysfs_fixture.build_tree(listing, {}, str(tmp_path))
    assert [g["slot"] for g in pci.read_tree(root)["gpus"]] == ["0000:07:00"]


def test_missing_tree_reads_as_nothing(tmp_path):
    assert pci.read_tree(str(tmp_path)) == {"iommu_enabled": False, "groups": {}, "devices": {}, "gpus": [],
                                            "numa_nodes": {}, "hugepages": {}}


def test_numa_node_cpus_and_reserved_hugepages(sysfs_trees):
    """Platform B is a dual Xeon Gold 6138 (devices.yml): a node per socket; 65536 2 MiB pages reserved."""
    tree = pci.read_tree(sysfs_trees["platform-b"])
    assert tree["numa_nodes"] == {"0": {"cpus": "0-19,40-59"}, "1": {"cpus": "20-39,60-79"}}
    assert tree["hugepages"] == {"2048": 65536, "1048576": 0}
    assert sorted({g["numa_node"] for g in tree["gpus"]}) == [0, 1]


@pytest.mark.parametrize("link,expected", [
    ({"speed": "16.0 GT/s PCIe", "width": 16, "max_speed": "16.0 GT/s PCIe", "max_width": 16}, []),
    ({"speed": "8.0 GT/s PCIe", "width": 16, "max_speed": "16.0 GT/s PCIe", "max_width": 16},
     ["speed 8 GT/s of 16 GT/s"]),
    ({"speed": "2.5 GT/s PCIe", "width": 8, "max_speed": "8.0 GT/s PCIe", "max_width": 16},
     ["width x8 of x16", "speed 2.5 GT/s of 8 GT/s"]),
    ({"speed": "Unknown", "width": None, "max_speed": None, "max_width": None}, []),
])
def test_link_degraded(link, expected):
    assert pci.link_degraded(link) == (bool(expected), expected)


def test_fixture_builder_layouts_agree():
    """The one-line and the header layouts, with and without domain, parse to the same devices."""
    import sysfs_fixture

    header = sysfs_fixture.parse_listing(
        "IOMMU Group 27:\n\t41:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] "
        "[10de:2204] (rev a1)\n\t41:00.1 Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio "
        "Controller [10de:1aef] (rev a1)\n")
    oneline = sysfs_fixture.parse_listing(
        "IOMMU Group 27: 0000:41:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] "
        "[10de:2204] (rev a1)\nIOMMU Group 27 0000:41:00.1 Audio device [0403]: NVIDIA Corporation GA102 High "
        "Definition Audio Controller [10de:1aef] (rev a1)\n")
    assert header == oneline
    assert header[0] == {"bdf": "0000:41:00.0", "group": "27", "class": "0300", "vendor": "10de", "device": "2204",
                         "name": "NVIDIA Corporation GA102 [GeForce RTX 3090]",
                         "description": "VGA compatible controller"}


def test_fixture_builder_rejects_garbage():
    import sysfs_fixture

    with pytest.raises(sysfs_fixture.ListingError, match="line 2"):
        sysfs_fixture.parse_listing("IOMMU Group 1:\n\tnot a device\n")


def test_fixture_tree_uses_relative_links(sysfs_trees):
    link = os.path.join(sysfs_trees["platform-a"], "sys", "kernel", "iommu_groups", "27", "devices", "0000:41:00.0")
    assert os.readlink(link) == "../../../../devices/pci0000:41/0000:41:00.0"
    assert os.path.isfile(os.path.join(link, "vendor"))
