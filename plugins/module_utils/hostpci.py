# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU slots -> PVE ``hostpciN`` values (the pvegpu.llmstack.hostpci filter). Plain Python.

``0000:41:00,pcie=1,x-vga=1`` passes every function of the slot (PVE's "All Functions"); a value with
``.f`` passes one function. With PCI resource mappings the address is replaced by ``mapping=<name>``,
which is what API tokens may use (PVE allows raw addresses to root@pam only).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MAX_HOSTPCI = 16
_ADDRESS = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-1][0-9a-fA-F])"
                      r"(?:\.(?P<fn>[0-7]))?$")
_MAPPING = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


class HostpciError(ValueError):
    pass


def normalise(address):
    """'41:00' -> '0000:41:00'; '41:00.1' -> '0000:41:00.1'; HostpciError when not a PCI address."""
    match = _ADDRESS.match(str(address).strip())
    if not match:
        raise HostpciError("%r is not a PCI slot or function (e.g. 0000:41:00 or 41:00.0)" % (address,))
    text = "%s:%s:%s" % ((match.group("domain") or "0000").lower(), match.group("bus").lower(),
                         match.group("dev").lower())
    return text + (".%s" % match.group("fn") if match.group("fn") is not None else "")


def _facts_gpus(facts):
    if not facts:
        return {}
    return dict((g["slot"], g) for g in facts.get("gpus", []))


def _entry(item, gpus_by_slot):
    """(address, gpu facts or None) of one input item: a slot string or a gpus entry."""
    if isinstance(item, dict):
        if "slot" not in item:
            raise HostpciError("a GPU entry needs 'slot': %r" % (item,))
        address = normalise(item["slot"])
        return address, item
    address = normalise(item)
    return address, gpus_by_slot.get(address.split(".")[0])


def build(items, pcie=True, primary_vga=False, rombar=None, mappings=None, facts=None, allow_shared_group=False,
          machine=None):
    """{'hostpci0': '0000:41:00,pcie=1,x-vga=1', ...} for these GPUs, in the given order."""
    if items is None or isinstance(items, (str, dict)):
        items = [items] if items else []
    if pcie and machine is not None and not str(machine).startswith(("q35", "pc-q35")):
        raise HostpciError("pcie=1 needs machine q35, not %r" % (machine,))
    mappings = mappings or {}
    for slot, name in mappings.items():
        if not isinstance(name, str) or not _MAPPING.match(name):
            raise HostpciError("mapping name %r for %s is not a PVE mapping id" % (name, slot))
    mappings = dict((normalise(k), v) for k, v in mappings.items())
    gpus_by_slot = _facts_gpus(facts)
    wanted = []          # addresses in order, no repeats
    for item in items:
        address, gpu = _entry(item, gpus_by_slot)
        if address not in wanted:
            wanted.append(address)
        if gpu is None or gpu.get("isolated", True):
            continue
        others = gpu.get("shares_group_with") or []
        groups = ", ".join(gpu.get("iommu_groups") or []) or "?"
        if not others:
            raise HostpciError("GPU %s is in no IOMMU group (is the IOMMU on?); it cannot be passed through"
                               % address)
        if not allow_shared_group:
            raise HostpciError("GPU %s shares IOMMU group %s with %s; a VM must get the whole group: pass "
                               "allow_shared_group=true to add them, or move the card to a slot with its own group"
                               % (address, groups, ", ".join(others)))
        for other in others:
            other_slot = normalise(other).split(".")[0]
            if other_slot not in [w.split(".")[0] for w in wanted]:
                wanted.append(other_slot)
    if len(wanted) > MAX_HOSTPCI:
        raise HostpciError("%d devices asked for; a PVE VM has at most %d (hostpci0-hostpci%d)"
                           % (len(wanted), MAX_HOSTPCI, MAX_HOSTPCI - 1))
    result = {}
    for index, address in enumerate(wanted):
        target = "mapping=%s" % mappings[address] if address in mappings else address
        parts = [target]
        if pcie:
            parts.append("pcie=1")
        if rombar is not None:
            parts.append("rombar=%d" % (1 if rombar else 0))
        if primary_vga and index == 0:
            parts.append("x-vga=1")
        result["hostpci%d" % index] = ",".join(parts)
    return result
