# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""VFIO binding logic (seed 000, GRUB/VFIO section): kernel command line edits for GRUB and
systemd-boot, the vfio-pci ids of the GPUs meant for passthrough, module and modprobe files, and
whether a reboot is pending. Plain Python; the vfio role and the kernel_cmdline module use it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

GRUB_VARIABLE = "GRUB_CMDLINE_LINUX_DEFAULT"
BLACKLIST_DEFAULT = ("nouveau", "nvidia", "nvidiafb", "nvidia_drm")
SOFTDEP_DEFAULT = ("nvidia", "nouveau")
_KERNEL = re.compile(r"^(\d+)\.(\d+)")


class VfioError(ValueError):
    pass


def arg_key(arg):
    """'iommu=pt' -> 'iommu'; 'quiet' -> 'quiet'."""
    return arg.split("=", 1)[0]


def edit_args(args, add=(), remove=()):
    """A new argument list: ``add`` set (a key=value replaces the same key in place, else appended once),
    ``remove`` dropped (by key when given as a bare key, else the exact argument). Others keep their order."""
    result = list(args)
    for arg in remove:
        if "=" in arg:
            result = [a for a in result if a != arg]
        else:
            result = [a for a in result if arg_key(a) != arg]
    for arg in add:
        key = arg_key(arg)
        if "=" in arg:
            places = [i for i, a in enumerate(result) if arg_key(a) == key]
        else:
            places = [i for i, a in enumerate(result) if a == arg]
        if places:
            result[places[0]] = arg
            result = [a for i, a in enumerate(result) if i not in places[1:]]
        else:
            result.append(arg)
    return result


def split_args(text):
    return (text or "").split()


def edit_kernel_cmdline_file(text, add=(), remove=()):
    """systemd-boot's /etc/kernel/cmdline: one line of arguments. Returns the new text."""
    lines = [line for line in (text or "").splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) > 1:
        raise VfioError("/etc/kernel/cmdline has %d lines; proxmox-boot-tool reads one" % len(lines))
    args = edit_args(split_args(lines[0] if lines else ""), add, remove)
    return " ".join(args) + "\n"


_ASSIGNMENT = re.compile(r"^(?P<indent>\s*)(?P<export>export\s+)?%s=(?P<value>.*?)\s*$")


def grub_args(text, variable=GRUB_VARIABLE):
    """The arguments the last assignment of ``variable`` in a /etc/default/grub text holds (shell rules)."""
    pattern = re.compile(_ASSIGNMENT.pattern % re.escape(variable))
    value = None
    for line in (text or "").splitlines():
        match = pattern.match(line)
        if match:
            value = match.group("value")
    if value is None:
        return None
    try:
        words = shlex.split(value, comments=True)
    except ValueError as exc:
        raise VfioError("%s is not a valid shell assignment: %s" % (variable, exc))
    if len(words) > 1:
        raise VfioError("%s=%s is not quoted" % (variable, value))
    if words and "$" in words[0]:
        raise VfioError("%s refers to other variables (%s); edit it by hand or use the drop-in" % (variable, value))
    return split_args(words[0] if words else "")


def edit_grub_file(text, add=(), remove=(), variable=GRUB_VARIABLE):
    """/etc/default/grub with ``variable``'s last assignment edited (or appended). Returns the new text."""
    pattern = re.compile(_ASSIGNMENT.pattern % re.escape(variable))
    current = grub_args(text, variable)
    new_value = '%s="%s"' % (variable, " ".join(edit_args(current or [], add, remove)))
    lines = (text or "").splitlines()
    last = None
    for index, line in enumerate(lines):
        if pattern.match(line):
            last = index
    if last is None:
        lines.append(new_value)
    else:
        match = pattern.match(lines[last])
        lines[last] = match.group("indent") + (match.group("export") or "") + new_value
    return "\n".join(lines) + "\n"


def desired_args(cpu_vendor, iommu_pt=True, amd_iommu_on=False, efifb_off=False, acs_override=False,
                 ids_on_cmdline=()):
    """The kernel arguments the vfio role wants (seed 000), as (add, remove)."""
    add, remove = [], []
    vendor = (cpu_vendor or "").lower()
    if "intel" in vendor:
        add.append("intel_iommu=on")
    elif amd_iommu_on:
        add.append("amd_iommu=on")
    if iommu_pt:
        add.append("iommu=pt")
    if efifb_off:
        add.append("video=efifb:off")
    if acs_override:
        add.append("pcie_acs_override=downstream,multifunction")
    else:
        remove.append("pcie_acs_override")
    if ids_on_cmdline:
        add.append("vfio-pci.ids=%s" % ",".join(ids_on_cmdline))
    return add, remove


def reboot_pending(proc_cmdline, add, remove):
    """True when the running kernel's command line lacks an added argument or has a removed one."""
    running = split_args(proc_cmdline)
    return any(arg not in running for arg in add) or any(_present(arg, running) for arg in remove)


def _present(arg, args):
    """Whether ``arg`` (an exact key=value, or a bare key matching any value) is among ``args``."""
    return any(a == arg or ("=" not in arg and arg_key(a) == arg) for a in args)


def passthrough_ids(facts, slots):
    """(ids, warnings): the vendor:device ids of every function of the selected GPU slots, and warnings for
    ids that other, not selected, devices share (vfio-pci.ids binds them all)."""
    devices = facts.get("devices") or {}
    gpus = dict((g["slot"], g) for g in facts.get("gpus") or [])
    missing = [s for s in slots if s not in gpus]
    if missing:
        raise VfioError("GPU slot(s) %s not found on this host" % ", ".join(missing))
    ids, selected = [], set()
    for slot in slots:
        for function in gpus[slot]["functions"]:
            selected.add(function)
            device = devices[function]
            pair = "%s:%s" % (device["vendor"], device["device"])
            if pair not in ids:
                ids.append(pair)
    warnings = []
    for address, device in sorted(devices.items()):
        pair = "%s:%s" % (device.get("vendor"), device.get("device"))
        if pair in ids and address not in selected:
            warnings.append("%s (%s) is not meant for passthrough but has the same id as a selected GPU function; "
                            "vfio-pci.ids binds it too" % (address, pair))
    return ids, warnings


def kernel_at_least(release, major, minor):
    match = _KERNEL.match(release or "")
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= (major, minor)


def modules(kernel_release):
    """Modules to load at boot: vfio_virqfd only before 6.2, where it was merged into vfio."""
    names = ["vfio", "vfio_iommu_type1", "vfio_pci"]
    if kernel_release and not kernel_at_least(kernel_release, 6, 2):
        names.append("vfio_virqfd")
    return names


def modprobe_options(ids, disable_vga=True, softdeps=SOFTDEP_DEFAULT):
    """Lines of /etc/modprobe.d/vfio.conf."""
    if not ids:
        raise VfioError("no vfio-pci ids: no GPU selected for passthrough")
    lines = ["options vfio-pci ids=%s%s" % (",".join(ids), " disable_vga=1" if disable_vga else "")]
    lines.extend("softdep %s pre: vfio-pci" % driver for driver in softdeps)
    return lines


def blacklist(drivers=BLACKLIST_DEFAULT):
    return ["blacklist %s" % driver for driver in drivers]


def detect_bootloader(boot_tool_status=None, kernel_cmdline_exists=False, efi=False):
    """'systemd-boot' or 'grub' from `proxmox-boot-tool status` output and the host's files.

    PVE boots ZFS-on-root UEFI installs with systemd-boot (/etc/kernel/cmdline + proxmox-boot-tool
    refresh); everything else with GRUB, also when proxmox-boot-tool manages GRUB ESPs.
    """
    status = boot_tool_status or ""
    if re.search(r"configured with: uefi", status, re.I) and "grub" not in status.lower():
        return "systemd-boot"
    if kernel_cmdline_exists and efi and "grub" not in status.lower():
        return "systemd-boot"
    return "grub"


def record_edit(args_before, args_after, record=None):
    """The record of what this collection changed on the command line, for a diff-clean revert:
    {'added': args absent before and present now, 'removed': exact args present before and gone now},
    merged with an earlier record (an arg added earlier stays 'added' while it is present)."""
    record = record or {}
    added = [a for a in record.get("added", []) if a in args_after]
    removed = [a for a in record.get("removed", []) if a not in args_after]
    for arg in args_after:
        if arg not in args_before and arg not in added and arg not in record.get("removed", []):
            added.append(arg)
    for arg in args_before:
        if arg not in args_after and arg not in removed and arg not in record.get("added", []):
            removed.append(arg)
    return {"added": added, "removed": removed}


def revert_edit(record):
    """(add, remove) that undo a record: put back what was removed, take out exactly what was added."""
    return list(record.get("removed", [])), list(record.get("added", []))


def reboot_reasons(enabled, proc_cmdline, add, remove, facts, slots):
    """Why the host must reboot, from its state (not from what this run changed), so that a rerun after
    a manual reboot finds nothing to do: arguments not yet on the running kernel, or GPU functions not
    (enabled) / still (disabled) bound to vfio-pci."""
    reasons = []
    running = split_args(proc_cmdline)
    missing = [a for a in add if a not in running]
    lingering = [a for a in remove if _present(a, running)]
    if missing:
        reasons.append("the running kernel lacks %s" % " ".join(missing))
    if lingering:
        reasons.append("the running kernel still has %s" % " ".join(lingering))
    gpus = dict((g["slot"], g) for g in facts.get("gpus") or [])
    for slot in slots:
        for function, driver in sorted((gpus.get(slot, {}).get("drivers") or {}).items()):
            if enabled and driver != "vfio-pci":
                reasons.append("%s is bound to %s, not vfio-pci" % (function, driver or "no driver"))
            elif not enabled and driver == "vfio-pci":
                reasons.append("%s is still bound to vfio-pci" % function)
    return reasons


def binding_problems(facts, slots, proc_cmdline, add):
    """After the reboot: what is still wrong, each with the seed's troubleshooting hint."""
    problems = []
    if not facts.get("iommu_enabled"):
        problems.append("the IOMMU is off: enable VT-d/AMD-Vi in the BIOS (and intel_iommu=on on Intel)")
    running = split_args(proc_cmdline)
    missing = [a for a in add if a not in running]
    if missing:
        problems.append("the running kernel lacks %s: the boot loader configuration was not applied "
                        "(update-grub / proxmox-boot-tool refresh) or another entry booted" % " ".join(missing))
    gpus = dict((g["slot"], g) for g in facts.get("gpus") or [])
    for slot in slots:
        for function, driver in sorted((gpus.get(slot, {}).get("drivers") or {}).items()):
            if driver != "vfio-pci":
                problems.append("%s is bound to %s: the driver loaded before vfio-pci - check that the initramfs "
                                "was rebuilt (update-initramfs -u -k all) and that no other modprobe file loads it"
                                % (function, driver or "no driver"))
    return problems


GOVERNORS = ("performance", "powersave", "schedutil", "ondemand", "conservative", "userspace")


def hugepages_sysctl(count):
    """/etc/sysctl.d lines reserving ``count`` default-size (2 MiB) hugepages; [] when count is 0."""
    count = int(count)
    if count < 0:
        raise VfioError("hugepages: %d is negative" % count)
    return ["vm.nr_hugepages = %d" % count] if count else []


def governor_unit(governor):
    """A oneshot systemd unit setting every CPU's frequency governor at boot (seed 000, performance)."""
    if governor not in GOVERNORS:
        raise VfioError("CPU governor %r is not one of %s" % (governor, ", ".join(GOVERNORS)))
    return "\n".join([
        "# Managed by pvegpu.llmstack.vfio",
        "[Unit]",
        "Description=Set the CPU frequency governor to %s (pvegpu.llmstack)" % governor,
        "After=multi-user.target",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=/bin/sh -c 'for f in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do "
        "[ -w \"$f\" ] && echo %s > \"$f\"; done; true'" % governor,
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])
