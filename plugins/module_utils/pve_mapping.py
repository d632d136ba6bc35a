# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PVE cluster PCI resource mappings (/cluster/mapping/pci): entries from PCI facts, and what to change.

A mapping has an id and a list of entries, one per node, each a PVE property string such as
``id=10de:2204,iommugroup=27,node=pve-a,path=0000:41:00,subsystem-id=1458:403b``. VMs refer to it with
``hostpci0: mapping=<id>``, which API tokens may use (raw host addresses are for root@pam only).
Plain Python.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

ENTRY_KEYS = ("id", "iommugroup", "node", "path", "subsystem-id", "description")
_ID = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$")
_PATH = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-9a-f])?$")
_MAPPING_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


class MappingError(ValueError):
    pass


def parse_entry(text):
    """'id=10de:2204,node=pve-a,path=0000:41:00' -> {'id': '10de:2204', ...}."""
    entry = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise MappingError("%r is not a key=value list" % (text,))
        entry[key.strip()] = value.strip()
    return normalise_entry(entry)


def normalise_entry(entry):
    """Canonical values: lower-case ids and paths, iommugroup as a string of digits, no empty keys."""
    result = {}
    for key, value in entry.items():
        if value is None or value == "":
            continue
        key = key.replace("_", "-")
        if key not in ENTRY_KEYS:
            raise MappingError("unknown mapping entry key %r (known: %s)" % (key, ", ".join(ENTRY_KEYS)))
        value = str(value)
        if key in ("id", "subsystem-id", "path"):
            value = value.lower()
        result[key] = value
    for key in ("id", "node", "path"):
        if key not in result:
            raise MappingError("a mapping entry needs %s: %r" % (key, entry))
    if not _ID.match(result["id"]):
        raise MappingError("id %r is not vendor:device" % result["id"])
    if "subsystem-id" in result and not _ID.match(result["subsystem-id"]):
        raise MappingError("subsystem-id %r is not vendor:device" % result["subsystem-id"])
    if not _PATH.match(result["path"]):
        raise MappingError("path %r is not a PCI slot or function" % result["path"])
    if "iommugroup" in result and not result["iommugroup"].isdigit():
        raise MappingError("iommugroup %r is not a number" % result["iommugroup"])
    return result


def format_entry(entry):
    """The property string, keys in PVE's (alphabetical) order."""
    return ",".join("%s=%s" % (key, entry[key]) for key in sorted(entry))


def entry_from_gpu(node, gpu):
    """The mapping entry of a ``gpus`` entry of pci_iommu_facts on PVE node ``node`` (all functions)."""
    entry = {"id": "%s:%s" % (gpu["vendor"], gpu["device"]), "node": node, "path": gpu["slot"]}
    if gpu.get("iommu_groups"):
        entry["iommugroup"] = gpu["iommu_groups"][0]
    if gpu.get("subsystem_vendor") and gpu.get("subsystem_device") and \
            (gpu["subsystem_vendor"], gpu["subsystem_device"]) != ("0000", "0000"):
        entry["subsystem-id"] = "%s:%s" % (gpu["subsystem_vendor"], gpu["subsystem_device"])
    return normalise_entry(entry)


def canonical(entries):
    """Sorted property strings: the comparable form of a mapping's entries."""
    return sorted(format_entry(e if isinstance(e, dict) else parse_entry(e)) for e in entries)


def plan(current, wanted_entries, description=None, state="present"):
    """What to do: {'action': 'create'|'update'|'delete'|'none', 'before', 'after', 'payload'}.

    ``current`` is the mapping as GET /cluster/mapping/pci/{id} returns it (None when absent);
    ``wanted_entries`` are dicts or property strings.
    """
    before = None
    if current is not None:
        before = {"map": canonical(current.get("map") or []), "description": current.get("description") or ""}
    if state == "absent":
        return {"action": "delete" if current is not None else "none", "before": before, "after": None,
                "payload": {}}
    wanted = canonical(wanted_entries)
    if not wanted:
        raise MappingError("a mapping needs at least one entry")
    nodes = [parse_entry(e)["node"] for e in wanted]
    after = {"map": wanted, "description": before["description"] if before and description is None
             else (description or "")}
    if current is None:
        payload = {"map": wanted}
        if description:
            payload["description"] = description
        return {"action": "create", "before": None, "after": after, "payload": payload, "nodes": nodes}
    if before == after:
        return {"action": "none", "before": before, "after": after, "payload": {}, "nodes": nodes}
    payload = {"map": wanted}
    if current.get("digest"):
        payload["digest"] = current["digest"]
    if description is not None and description != before["description"]:
        if description:
            payload["description"] = description
        else:
            payload["delete"] = "description"
    return {"action": "update", "before": before, "after": after, "payload": payload, "nodes": nodes}


def valid_mapping_id(name):
    return bool(_MAPPING_ID.match(name or "")) and len(name) <= 128
