# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI devices, IOMMU groups and GPUs from a sysfs tree (DESIGN.md section 3, pci_iommu_facts).

Reads only ``<root>/sys/kernel/iommu_groups/<N>/devices/<BDF>`` (entry names) and
``<root>/sys/bus/pci/devices/<BDF>/{vendor,device,class,subsystem_vendor,subsystem_device,numa_node,
current_link_speed,current_link_width,max_link_speed,max_link_width}``; ``driver`` and ``iommu_group``
are symlinks whose basename is the value, so a copied tree whose link targets are missing works.
Also ``<root>/sys/devices/system/node/node<N>/cpulist`` (the CPUs of each NUMA node, for pinning) and
``<root>/sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages`` (the hugepages the host reserved).
Plain Python, no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

ATTRIBUTES = ("vendor", "device", "class", "subsystem_vendor", "subsystem_device")
LINK_ATTRIBUTES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
#: PCI class codes (base class + subclass).
CLASS_VGA, CLASS_3D, CLASS_BRIDGE = "0300", "0302", "0604"
GPU_CLASSES = (CLASS_VGA, CLASS_3D)
#: Display controllers of BMCs and server chipsets: never a passthrough GPU unless the user names them.
BMC_VGA_VENDORS = {"1a03": "ASPEED", "102b": "Matrox", "19e5": "Huawei (iBMC)", "1556": "PLDA/Nuvoton"}
_BDF = re.compile(r"^(?P<slot>[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f])\.(?P<fn>[0-7])$")
_SPEED = re.compile(r"^\s*([0-9.]+)\s*GT/s")


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _hex(value):
    """'0x10de' -> '10de'; '0x030000' -> '030000'; None stays None."""
    if value is None:
        return None
    value = value.lower()
    return value[2:] if value.startswith("0x") else value


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _link_basename(path):
    """The basename of a symlink's target (the value of sysfs 'driver' and 'iommu_group' links)."""
    try:
        return os.path.basename(os.readlink(path).rstrip("/"))
    except OSError:
        return None


def speed_gts(text):
    """'16.0 GT/s PCIe' -> 16.0; 'Unknown' or None -> None."""
    match = _SPEED.match(text or "")
    return float(match.group(1)) if match else None


def slot_of(bdf):
    """'0000:41:00.1' -> '0000:41:00' (None when not a full PCI address)."""
    match = _BDF.match(bdf)
    return match.group("slot") if match else None


def read_groups(root):
    """{group number as str: [BDF, ...]} and whether the IOMMU is on (any group present)."""
    base = os.path.join(root, "sys", "kernel", "iommu_groups")
    groups = {}
    try:
        names = os.listdir(base)
    except OSError:
        return {}, False
    for name in names:
        try:
            members = os.listdir(os.path.join(base, name, "devices"))
        except OSError:
            continue
        groups[name] = sorted(m.lower() for m in members)
    ordered = dict((k, groups[k]) for k in sorted(groups, key=lambda g: (len(g), g)))
    return ordered, bool(ordered)


def read_device(path, bdf, group_of):
    data = dict((name, _hex(_read(os.path.join(path, name)))) for name in ATTRIBUTES)
    numa = _int(_read(os.path.join(path, "numa_node")))
    data["numa_node"] = None if numa is None or numa < 0 else numa
    data["driver"] = _link_basename(os.path.join(path, "driver"))
    data["iommu_group"] = _link_basename(os.path.join(path, "iommu_group")) or group_of.get(bdf)
    link = dict((name, _read(os.path.join(path, name))) for name in LINK_ATTRIBUTES)
    data["link"] = {
        "speed": link["current_link_speed"],
        "width": _int(link["current_link_width"]),
        "max_speed": link["max_link_speed"],
        "max_width": _int(link["max_link_width"]),
    }
    return data


def read_devices(root, group_of):
    base = os.path.join(root, "sys", "bus", "pci", "devices")
    devices = {}
    try:
        names = os.listdir(base)
    except OSError:
        return devices
    for bdf in sorted(n.lower() for n in names):
        devices[bdf] = read_device(os.path.join(base, bdf), bdf, group_of)
    return devices


def base_class(device):
    return (device.get("class") or "")[:4]


def is_gpu(device, named=False):
    """A passthrough GPU: VGA or 3D controller, not a BMC's display unless the user names it."""
    return base_class(device) in GPU_CLASSES and (named or device.get("vendor") not in BMC_VGA_VENDORS)


def link_degraded(link):
    """(degraded, reasons): the current width or speed below the device's maximum."""
    reasons = []
    width, max_width = link.get("width"), link.get("max_width")
    if width and max_width and width < max_width:
        reasons.append("width x%d of x%d" % (width, max_width))
    speed, max_speed = speed_gts(link.get("speed")), speed_gts(link.get("max_speed"))
    if speed and max_speed and speed < max_speed:
        reasons.append("speed %s GT/s of %s GT/s" % (_fmt(speed), _fmt(max_speed)))
    return bool(reasons), reasons


def _fmt(number):
    return ("%.1f" % number).rstrip("0").rstrip(".")


def gpus_of(devices, groups, named_slots=()):
    """The GPU entries of the contract, one per slot, in slot order."""
    named = set(named_slots)
    slots = {}
    for bdf in devices:
        slot = slot_of(bdf)
        if slot is not None:
            slots.setdefault(slot, []).append(bdf)
    result = []
    for slot in sorted(slots):
        functions = sorted(slots[slot])
        primary = devices[functions[0]]
        if not is_gpu(primary, named=slot in named):
            continue
        group_ids = sorted({devices[f]["iommu_group"] for f in functions if devices[f]["iommu_group"] is not None},
                           key=lambda g: (len(g), g))
        others = []
        for group in group_ids:
            for member in groups.get(group, []):
                if member in functions or member not in devices and slot_of(member) == slot:
                    continue
                if devices.get(member) and base_class(devices[member]) == CLASS_BRIDGE:
                    continue
                others.append(member)
        degraded, reasons = link_degraded(primary["link"])
        result.append({
            "slot": slot,
            "functions": functions,
            "vendor": primary["vendor"],
            "device": primary["device"],
            "class": primary["class"],
            "subsystem_vendor": primary["subsystem_vendor"],
            "subsystem_device": primary["subsystem_device"],
            "driver": primary["driver"],
            "drivers": dict((f, devices[f]["driver"]) for f in functions),
            "iommu_groups": group_ids,
            "isolated": bool(group_ids) and not others,
            "shares_group_with": sorted(set(others)),
            "numa_node": primary["numa_node"],
            "link": primary["link"],
            "link_degraded": degraded,
            "link_degraded_reasons": reasons,
        })
    return result


def read_numa_nodes(root):
    """{"0": {"cpus": "0-19,40-59"}} from ``<root>/sys/devices/system/node/node<N>/cpulist``."""
    base = os.path.join(root, "sys", "devices", "system", "node")
    nodes = {}
    try:
        names = os.listdir(base)
    except OSError:
        return nodes
    for name in names:
        match = re.match(r"^node(\d+)$", name)
        if not match:
            continue
        cpus = _read(os.path.join(base, name, "cpulist"))
        nodes[match.group(1)] = {"cpus": cpus or ""}
    return nodes


def read_hugepages(root):
    """{"2048": 16384} (page size in KiB -> pages reserved) from ``<root>/sys/kernel/mm/hugepages``."""
    base = os.path.join(root, "sys", "kernel", "mm", "hugepages")
    pages = {}
    try:
        names = os.listdir(base)
    except OSError:
        return pages
    for name in names:
        match = re.match(r"^hugepages-(\d+)kB$", name)
        if match:
            pages[match.group(1)] = _int(_read(os.path.join(base, name, "nr_hugepages"))) or 0
    return pages


def read_tree(root="/", named_slots=()):
    """The ``llmstack_pci`` facts of the sysfs tree under ``root``."""
    groups, enabled = read_groups(root)
    group_of = {}
    for group, members in groups.items():
        for member in members:
            group_of[member] = group
    devices = read_devices(root, group_of)
    return {
        "iommu_enabled": enabled,
        "groups": groups,
        "devices": devices,
        "gpus": gpus_of(devices, groups, named_slots),
        "numa_nodes": read_numa_nodes(root),
        "hugepages": read_hugepages(root),
    }
