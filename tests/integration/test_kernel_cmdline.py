"""The kernel_cmdline module through the real `ansible` CLI on copies of a GRUB default file and a
systemd-boot /etc/kernel/cmdline: edits, idempotence, check mode and refusals."""

import json
import os
import subprocess
import sys

from conftest import ROOT, ansible_env

GRUB = 'GRUB_DEFAULT=0\nGRUB_DISTRIBUTOR="Proxmox VE"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'


def run(args, check=False):
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m",
           "pvegpu.llmstack.kernel_cmdline", "-a", json.dumps(args)] + (["--check", "--diff"] if check else [])
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    result = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=120)
    report = json.loads(result.stdout[result.stdout.index("{"):])
    return list(report["plays"][0]["tasks"][0]["hosts"].values())[0]


def test_grub_edit_is_idempotent_and_check_mode_writes_nothing(tmp_path):
    grub = tmp_path / "grub"
    grub.write_text(GRUB)
    os.chmod(str(grub), 0o644)
    args = {"bootloader": "grub", "path": str(grub), "add": ["intel_iommu=on", "iommu=pt"],
            "remove": ["pcie_acs_override"]}
    checked = run(args, check=True)
    assert checked["changed"] is True and grub.read_text() == GRUB
    assert checked["args"] == ["quiet", "intel_iommu=on", "iommu=pt"]
    first = run(args)
    assert first["changed"] is True and first["before_args"] == ["quiet"]
    assert grub.read_text() == GRUB.replace('"quiet"', '"quiet intel_iommu=on iommu=pt"')
    assert oct(os.stat(str(grub)).st_mode & 0o777) == "0o644"
    assert run(args)["changed"] is False


def test_systemd_boot(tmp_path):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("root=ZFS=rpool/ROOT/pve-1 boot=zfs pcie_acs_override=downstream\n")
    result = run({"bootloader": "systemd-boot", "path": str(cmdline), "add": ["iommu=pt"],
                  "remove": ["pcie_acs_override"]})
    assert result["changed"] is True
    assert cmdline.read_text() == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"


def test_refusals(tmp_path):
    grub = tmp_path / "grub"
    grub.write_text('GRUB_CMDLINE_LINUX_DEFAULT="$EXTRA quiet"\n')
    result = run({"bootloader": "grub", "path": str(grub), "add": ["iommu=pt"]})
    assert result["failed"] and "refers to other variables" in result["msg"]
    result = run({"bootloader": "grub", "path": str(tmp_path / "missing"), "add": ["iommu=pt"]})
    assert result["failed"] and "is the boot loader grub?" in result["msg"]
    result = run({"bootloader": "grub", "path": str(grub), "add": ["iommu=pt quiet"]})
    assert result["failed"] and "is not a single kernel argument" in result["msg"]
