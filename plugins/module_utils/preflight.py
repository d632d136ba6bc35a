# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PVE host preflight checks for GPU passthrough (seed 000: BIOS, GRUB, IOMMU, troubleshooting).

``evaluate(...)`` turns what was read from a host (PCI facts, kernel log, kernel command line, UEFI,
CPU vendor, kernel release, module lists, the GPUs meant for passthrough) into the report of DESIGN.md
section 3: ``{verdict, checks: [{id, status, summary, evidence, hint}]}``. Plain Python.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

STATUSES = ("pass", "skip", "warn", "fail")      # in increasing severity
CHECK_IDS = ("iommu_enabled", "uefi_boot", "cmdline_flags", "acs_override", "bar_assignment", "resizable_bar",
             "gpu_isolation", "gpu_link", "gpu_numa", "host_driver_bound", "vfio_virqfd")
HOST_DRIVERS = ("nouveau", "nvidia", "nvidiafb", "nvidia_drm", "amdgpu", "radeon")
MAX_EVIDENCE = 8

_IOMMU_ON = re.compile(r"DMAR: IOMMU enabled|AMD-Vi: (?:AMD IOMMUv2|Interrupt remapping enabled|Found IOMMU)|"
                       r"iommu: Default domain type", re.I)
_IOMMU_OFF = re.compile(r"DMAR: IOMMU disabled|AMD-Vi: .*disabled|No DMAR|DMAR: Host address width.*disabled", re.I)
_BAR_FAIL = re.compile(r"BAR \d+.*(can't assign|no space|failed to assign|can't claim)|"
                       r"(not enough MMIO resources|No space for BAR)", re.I)
_REBAR = re.compile(r"(failed to resize|resiz\w* BAR.*(fail|error)|ReBAR.*(fail|error)|"
                    r"BAR \d+: .*resiz\w*.*fail)", re.I)
_ACS_LOG = re.compile(r"ACS overrides? enabled", re.I)
_KERNEL = re.compile(r"^(\d+)\.(\d+)")


def _check(check_id, status, summary, evidence=(), hint=None):
    return {"id": check_id, "status": status, "summary": summary, "evidence": list(evidence)[:MAX_EVIDENCE],
            "hint": hint}


def _grep(pattern, text):
    return [line.strip() for line in (text or "").splitlines() if pattern.search(line)]


def cmdline_args(cmdline):
    """'quiet intel_iommu=on iommu=pt' -> {'quiet': None, 'intel_iommu': 'on', 'iommu': 'pt'} (last wins)."""
    args = {}
    for word in (cmdline or "").split():
        key, sep, value = word.partition("=")
        args[key] = value if sep else None
    return args


def kernel_at_least(release, major, minor):
    match = _KERNEL.match(release or "")
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= (major, minor)


def check_iommu(facts, log):
    groups = len(facts.get("groups") or {})
    on_lines = _grep(_IOMMU_ON, log)
    if groups:
        return _check("iommu_enabled", "pass", "%d IOMMU groups" % groups, on_lines[:3])
    return _check("iommu_enabled", "fail", "no IOMMU groups: the IOMMU is off", _grep(_IOMMU_OFF, log) or on_lines,
                  "Enable VT-d (Intel) or AMD-Vi/IOMMU (AMD) in the BIOS; on Intel add intel_iommu=on to the kernel "
                  "command line (the vfio role does), then reboot")


def check_uefi(uefi):
    if uefi is None:
        return _check("uefi_boot", "skip", "could not tell how the host booted")
    if uefi:
        return _check("uefi_boot", "pass", "booted through UEFI (/sys/firmware/efi exists)")
    return _check("uefi_boot", "warn", "legacy (CSM) boot: /sys/firmware/efi is missing", [],
                  "Turn CSM off and boot in UEFI mode: OVMF guests and GPU option ROMs behave unpredictably with CSM")


def check_cmdline(args, cpu_vendor):
    missing = []
    vendor = (cpu_vendor or "").lower()
    if "intel" in vendor and args.get("intel_iommu") != "on":
        missing.append("intel_iommu=on")
    if args.get("iommu") != "pt":
        missing.append("iommu=pt")
    present = ["%s=%s" % (k, v) if v is not None else k for k, v in sorted(args.items())
               if k in ("intel_iommu", "amd_iommu", "iommu", "pcie_acs_override", "video", "vfio-pci.ids")]
    if not missing:
        return _check("cmdline_flags", "pass", "kernel command line has the passthrough flags", present)
    return _check("cmdline_flags", "warn", "kernel command line lacks %s" % " ".join(missing), present,
                  "The vfio role adds them (GRUB or systemd-boot); AMD CPUs need no amd_iommu=on, iommu=pt keeps "
                  "host devices off the IOMMU translation path")


def check_acs(args, log):
    evidence = _grep(_ACS_LOG, log)
    if "pcie_acs_override" in args:
        evidence = ["pcie_acs_override=%s" % args["pcie_acs_override"]] + evidence
        return _check("acs_override", "warn", "pcie_acs_override is in use: IOMMU groups are split by force",
                      evidence, "Devices split this way are not isolated from each other's DMA; acceptable on a "
                      "single-tenant homelab, not for VMs of different tenants. Prefer a slot with its own group.")
    return _check("acs_override", "pass", "no ACS override")


def check_bar(log):
    lines = _grep(_BAR_FAIL, log)
    if lines:
        return _check("bar_assignment", "fail", "%d PCI BAR assignment failure(s) in the kernel log" % len(lines),
                      lines, "Enable Above 4G Decoding in the BIOS (each RTX 3090 has a 256 MB BAR 1; several GPUs "
                      "exceed the 32-bit window). In the VM the symptom is nvidia-smi 'Unable to determine the "
                      "device handle'.")
    return _check("bar_assignment", "pass", "no BAR assignment failures in the kernel log")


def check_rebar(log):
    lines = _grep(_REBAR, log)
    if lines:
        return _check("resizable_bar", "warn", "Resizable BAR errors in the kernel log", lines,
                      "Turn Resizable BAR off in the BIOS: with some firmware and QEMU versions the GPU fails to "
                      "initialise in the VM (Code 43 on Windows, RmInitAdapter failed on Linux)")
    return _check("resizable_bar", "pass", "no Resizable BAR errors in the kernel log")


def check_isolation(gpus):
    if not gpus:
        return _check("gpu_isolation", "skip", "no GPU meant for passthrough on this host")
    bad = [g for g in gpus if not g["isolated"]]
    if not bad:
        evidence = ["%s: groups %s, functions %s" % (g["slot"], ",".join(g["iommu_groups"]), ",".join(g["functions"]))
                    for g in gpus]
        return _check("gpu_isolation", "pass", "%d GPU(s) each alone in IOMMU group(s) with all functions"
                      % len(gpus), evidence)
    evidence = []
    for gpu in bad:
        if gpu["iommu_groups"]:
            evidence.append("%s shares group %s with %s" % (gpu["slot"], ",".join(gpu["iommu_groups"]),
                                                            ", ".join(gpu["shares_group_with"])))
        else:
            evidence.append("%s is in no IOMMU group" % gpu["slot"])
    return _check("gpu_isolation", "fail", "%d of %d GPU(s) not isolated" % (len(bad), len(gpus)), evidence,
                  "Pass the whole group to one VM (hostpci allow_shared_group), move the card to a slot with its "
                  "own group, or, knowing the risk, pcie_acs_override=downstream,multifunction")


def check_link(gpus):
    if not gpus:
        return _check("gpu_link", "skip", "no GPU meant for passthrough on this host")
    degraded = [g for g in gpus if g.get("link_degraded")]
    if not degraded:
        return _check("gpu_link", "pass", "every GPU links at its maximum width and speed")
    return _check("gpu_link", "warn", "%d GPU(s) below their maximum PCIe link" % len(degraded),
                  ["%s: %s" % (g["slot"], "; ".join(g.get("link_degraded_reasons") or [])) for g in degraded],
                  "A narrower link is the slot's wiring or a riser (x8 in an x16 slot) or a badly seated card; "
                  "GPUs also lower the link speed when idle, so recheck the speed under load")


def check_numa(gpus, vm_plans):
    known = [g for g in gpus if g.get("numa_node") is not None]
    if not gpus or not known:
        return _check("gpu_numa", "skip", "no NUMA information for the GPUs")
    by_slot = dict((g["slot"], g) for g in gpus)
    problems, evidence = [], []
    for plan in vm_plans or []:
        nodes = sorted({by_slot[s]["numa_node"] for s in plan.get("slots", []) if s in by_slot
                        and by_slot[s].get("numa_node") is not None})
        evidence.append("%s: GPUs on NUMA node(s) %s" % (plan.get("name"), ",".join(map(str, nodes)) or "-"))
        if len(nodes) > 1:
            problems.append("%s spans NUMA nodes %s" % (plan.get("name"), ",".join(map(str, nodes))))
        wanted = plan.get("numa_node")
        if wanted is not None and nodes and nodes != [wanted]:
            problems.append("%s is planned on NUMA node %s but its GPUs are on %s"
                            % (plan.get("name"), wanted, ",".join(map(str, nodes))))
    if problems:
        return _check("gpu_numa", "warn", "; ".join(problems), evidence,
                      "Give each VM GPUs of one socket and pin its cores and memory to that node (numa: 1, affinity); "
                      "crossing UPI/QPI costs P2P and host-to-device bandwidth")
    return _check("gpu_numa", "pass", "each VM's GPUs sit on one NUMA node", evidence)


def check_drivers(gpus):
    if not gpus:
        return _check("host_driver_bound", "skip", "no GPU meant for passthrough on this host")
    bound = []
    for gpu in gpus:
        for function, driver in sorted((gpu.get("drivers") or {}).items()):
            if driver in HOST_DRIVERS:
                bound.append("%s: %s" % (function, driver))
    if bound:
        return _check("host_driver_bound", "warn", "a host driver holds %d GPU function(s) meant for passthrough"
                      % len(bound), bound, "The vfio role blacklists nouveau/nvidia, binds the ids to vfio-pci with "
                      "disable_vga=1 and rebuilds the initramfs; if it persists, another modprobe file loads the "
                      "driver")
    unbound = [f for g in gpus for f, d in sorted((g.get("drivers") or {}).items()) if d != "vfio-pci"]
    return _check("host_driver_bound", "pass", "no host GPU driver on the passthrough GPUs",
                  ["not yet on vfio-pci: %s" % ", ".join(unbound)] if unbound else [])


def check_virqfd(modules_text, kernel_release):
    lines = [line.strip() for line in (modules_text or "").splitlines()
             if line.split("#")[0].strip() == "vfio_virqfd"]
    if not lines:
        return _check("vfio_virqfd", "pass", "no vfio_virqfd in the module lists")
    if kernel_at_least(kernel_release, 6, 2):
        return _check("vfio_virqfd", "warn", "vfio_virqfd is listed, but kernel %s has it built into vfio"
                      % kernel_release, lines, "Remove vfio_virqfd from /etc/modules (merged into vfio in 6.2); the "
                      "vfio role does")
    return _check("vfio_virqfd", "pass", "vfio_virqfd is needed on kernel %s" % kernel_release, lines)


def select_gpus(facts, slots=None):
    """The GPUs meant for passthrough: those in ``slots`` (all GPUs when None)."""
    gpus = facts.get("gpus") or []
    if slots is None:
        return gpus
    wanted = set(slots)
    return [g for g in gpus if g["slot"] in wanted]


def verdict(checks):
    return max((c["status"] for c in checks), key=STATUSES.index) if checks else "pass"


def evaluate(facts, kernel_log="", cmdline="", uefi=None, cpu_vendor=None, kernel_release=None, modules_text="",
             passthrough_slots=None, vm_plans=None):
    gpus = select_gpus(facts, passthrough_slots)
    args = cmdline_args(cmdline)
    checks = [
        check_iommu(facts, kernel_log),
        check_uefi(uefi),
        check_cmdline(args, cpu_vendor),
        check_acs(args, kernel_log),
        check_bar(kernel_log),
        check_rebar(kernel_log),
        check_isolation(gpus),
        check_link(gpus),
        check_numa(gpus, vm_plans),
        check_drivers(gpus),
        check_virqfd(modules_text, kernel_release),
    ]
    missing = [s for s in (passthrough_slots or []) if s not in {g["slot"] for g in gpus}]
    if missing:
        checks.append(_check("gpu_present", "fail", "GPU(s) meant for passthrough not found: %s" % ", ".join(missing),
                             [], "Check the slots in gpu_vm_gpus against lspci on this host"))
    return {"verdict": verdict(checks), "checks": checks, "gpus": [g["slot"] for g in gpus]}


def summary_table(report, host=""):
    """The report as a fixed-width table, one line per check."""
    lines = ["%s preflight: %s" % (host, report["verdict"].upper()) if host else "preflight: %s"
             % report["verdict"].upper(),
             "%-18s %-5s %s" % ("check", "", "summary")]
    for check in report["checks"]:
        lines.append("%-18s %-5s %s" % (check["id"], check["status"].upper(), check["summary"]))
        if check["status"] in ("warn", "fail") and check.get("hint"):
            lines.append("%-18s %-5s fix: %s" % ("", "", check["hint"]))
    return lines
