"""module_utils.vfio: kernel command line edits (GRUB and systemd-boot), ids, modules, reboot decision."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pci, vfio

GRUB = """# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR="Proxmox VE"
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""
"""


def test_seed_arguments_added_once_others_kept():
    add, remove = vfio.desired_args("GenuineIntel")
    once = vfio.edit_grub_file(GRUB, add, remove)
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"' in once
    assert vfio.edit_grub_file(once, add, remove) == once          # idempotent
    assert once.replace('GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"',
                        'GRUB_CMDLINE_LINUX_DEFAULT="quiet"') == GRUB   # nothing else touched


def test_amd_needs_no_amd_iommu_on():
    add, remove = vfio.desired_args("AuthenticAMD")
    assert add == ["iommu=pt"] and remove == ["pcie_acs_override"]
    assert vfio.desired_args("AuthenticAMD", amd_iommu_on=True)[0] == ["amd_iommu=on", "iommu=pt"]


def test_existing_key_is_replaced_in_place():
    assert vfio.edit_args(["quiet", "iommu=soft", "nomodeset"], ["iommu=pt"]) == ["quiet", "iommu=pt", "nomodeset"]
    assert vfio.edit_args(["iommu=pt", "quiet", "iommu=soft"], ["iommu=pt"]) == ["iommu=pt", "quiet"]


def test_remove_by_key_or_exact_value():
    args = ["quiet", "pcie_acs_override=downstream,multifunction", "video=efifb:off", "video=vesafb:off"]
    assert vfio.edit_args(args, remove=["pcie_acs_override"]) == ["quiet", "video=efifb:off", "video=vesafb:off"]
    assert vfio.edit_args(args, remove=["video=efifb:off"]) == [
        "quiet", "pcie_acs_override=downstream,multifunction", "video=vesafb:off"]


def test_revert_restores_the_original_line():
    add, remove = vfio.desired_args("GenuineIntel", efifb_off=True)
    edited = vfio.edit_grub_file(GRUB, add, remove)
    assert vfio.edit_grub_file(edited, remove=[vfio.arg_key(a) for a in add]) == GRUB


def test_last_assignment_wins_and_export_indent_single_quotes_are_kept():
    text = "GRUB_CMDLINE_LINUX_DEFAULT='quiet'\n  export GRUB_CMDLINE_LINUX_DEFAULT='quiet splash' # comment\n"
    assert vfio.grub_args(text) == ["quiet", "splash"]
    assert vfio.edit_grub_file(text, ["iommu=pt"]) == (
        "GRUB_CMDLINE_LINUX_DEFAULT='quiet'\n  export GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash iommu=pt\"\n")


def test_missing_variable_is_appended():
    assert vfio.edit_grub_file("GRUB_DEFAULT=0\n", ["iommu=pt"]) == (
        'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="iommu=pt"\n')


@pytest.mark.parametrize("line,fragment", [
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet', "not a valid shell assignment"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"', "refers to other variables"),
    ("GRUB_CMDLINE_LINUX_DEFAULT=quiet splash", "is not quoted"),
])
def test_grub_lines_we_will_not_edit(line, fragment):
    with pytest.raises(vfio.VfioError, match=fragment):
        vfio.edit_grub_file(line + "\n", ["iommu=pt"])


def test_systemd_boot_cmdline():
    text = "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    add, remove = vfio.desired_args("GenuineIntel")
    edited = vfio.edit_kernel_cmdline_file(text, add, remove)
    assert edited == "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n"
    assert vfio.edit_kernel_cmdline_file(edited, add, remove) == edited
    with pytest.raises(vfio.VfioError, match="has 2 lines"):
        vfio.edit_kernel_cmdline_file("a\nb\n", add)


def test_platform_a_ids(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-a"])
    ids, warnings = vfio.passthrough_ids(facts, ["0000:41:00", "0000:61:00", "0000:81:00", "0000:a1:00"])
    assert ids == ["10de:2204", "10de:1aef"] and warnings == []
    assert vfio.modprobe_options(ids)[0] == "options vfio-pci ids=10de:2204,10de:1aef disable_vga=1"


def test_same_id_on_a_gpu_kept_for_the_host_warns(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-a"])
    ids, warnings = vfio.passthrough_ids(facts, ["0000:41:00"])
    assert ids == ["10de:2204", "10de:1aef"]
    assert len(warnings) == 6 and warnings[0].startswith("0000:61:00.0 (10de:2204) is not meant for passthrough")


def test_unknown_slot(sysfs_trees):
    with pytest.raises(vfio.VfioError, match="0000:c1:00 not found"):
        vfio.passthrough_ids(pci.read_tree(sysfs_trees["platform-a"]), ["0000:c1:00"])


@pytest.mark.parametrize("release,expected", [
    ("6.8.12-4-pve", ["vfio", "vfio_iommu_type1", "vfio_pci"]),
    ("6.2.16-3-pve", ["vfio", "vfio_iommu_type1", "vfio_pci"]),
    ("5.15.158-2-pve", ["vfio", "vfio_iommu_type1", "vfio_pci", "vfio_virqfd"]),
])
def test_modules(release, expected):
    assert vfio.modules(release) == expected


def test_modprobe_and_blacklist():
    assert vfio.modprobe_options(["10de:1db5"], disable_vga=False) == [
        "options vfio-pci ids=10de:1db5", "softdep nvidia pre: vfio-pci", "softdep nouveau pre: vfio-pci"]
    assert vfio.blacklist() == ["blacklist nouveau", "blacklist nvidia", "blacklist nvidiafb", "blacklist nvidia_drm"]
    with pytest.raises(vfio.VfioError):
        vfio.modprobe_options([])


@pytest.mark.parametrize("running,pending", [
    ("BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on iommu=pt", False),
    ("BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on", True),
    ("BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on iommu=pt pcie_acs_override=downstream", True),
])
def test_reboot_pending(running, pending):
    add, remove = vfio.desired_args("GenuineIntel")
    assert vfio.reboot_pending(running, add, remove) is pending


@pytest.mark.parametrize("status,cmdline,efi,expected", [
    ("System currently booted with uefi\n5D3E-5B8B is configured with: uefi (versions: 6.8.12-4-pve)",
     True, True, "systemd-boot"),
    ("System currently booted with legacy bios\n8A2C-1B33 is configured with: grub (versions: 6.8.12-4-pve)",
     False, False, "grub"),
    ("", False, True, "grub"),
    ("", True, True, "systemd-boot"),
])
def test_detect_bootloader(status, cmdline, efi, expected):
    assert vfio.detect_bootloader(status, cmdline, efi) == expected


def test_record_and_revert_are_diff_clean():
    before = ["quiet", "iommu=pt", "pcie_acs_override=downstream"]      # the user already had iommu=pt
    add, remove = vfio.desired_args("GenuineIntel")
    after = vfio.edit_args(before, add, remove)
    assert after == ["quiet", "iommu=pt", "intel_iommu=on"]
    record = vfio.record_edit(before, after)
    assert record == {"added": ["intel_iommu=on"], "removed": ["pcie_acs_override=downstream"]}
    assert vfio.record_edit(after, after, record) == record                 # a rerun keeps the record
    put_back, take_out = vfio.revert_edit(record)
    assert vfio.edit_args(after, put_back, take_out) == ["quiet", "iommu=pt", "pcie_acs_override=downstream"]


def test_reboot_reasons_come_from_state(sysfs_trees):
    add, remove = vfio.desired_args("AuthenticAMD")
    bound = pci.read_tree(sysfs_trees["platform-a"])            # vfio-pci on every GPU function
    unbound = pci.read_tree(sysfs_trees["iommu-off"])           # nouveau
    slots = ["0000:41:00"]
    assert vfio.reboot_reasons(True, "ro quiet iommu=pt", add, remove, bound, slots) == []
    assert vfio.reboot_reasons(True, "ro quiet", add, remove, bound, slots) == ["the running kernel lacks iommu=pt"]
    assert vfio.reboot_reasons(True, "ro quiet iommu=pt", add, remove, unbound, slots) == [
        "0000:41:00.0 is bound to nouveau, not vfio-pci", "0000:41:00.1 is bound to nouveau, not vfio-pci"]
    assert vfio.reboot_reasons(False, "ro quiet", [], [], bound, slots) == [
        "0000:41:00.0 is still bound to vfio-pci", "0000:41:00.1 is still bound to vfio-pci"]


def test_binding_problems_carry_the_hints(sysfs_trees):
    unbound = pci.read_tree(sysfs_trees["iommu-off"])
    problems = vfio.binding_problems(unbound, ["0000:41:00"], "ro quiet", ["iommu=pt"])
    assert problems[0].startswith("the IOMMU is off")
    assert problems[1].startswith("the running kernel lacks iommu=pt")
    assert "update-initramfs -u -k all" in problems[2]
    assert vfio.binding_problems(pci.read_tree(sysfs_trees["platform-a"]), ["0000:41:00"], "iommu=pt",
                                 ["iommu=pt"]) == []


def test_hugepages_sysctl():
    assert vfio.hugepages_sysctl(0) == []
    assert vfio.hugepages_sysctl("4096") == ["vm.nr_hugepages = 4096"]
    with pytest.raises(vfio.VfioError):
        vfio.hugepages_sysctl(-1)


def test_governor_unit():
    unit = vfio.governor_unit("performance")
    assert "echo performance > \"$f\"" in unit and "WantedBy=multi-user.target" in unit
    with pytest.raises(vfio.VfioError, match="turbo"):
        vfio.governor_unit("turbo")
