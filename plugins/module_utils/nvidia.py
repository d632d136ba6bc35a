# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for nvidia-smi output: ``-q -x`` (XML), ``--query-gpu ... --format=csv`` and ``topo -m``. Plain Python.

``topo -m`` (DESIGN.md §3, the nvidia_topology filter) is a matrix meant for people: columns separated by
tabs (or spaces once copied), a header row naming the devices then "CPU Affinity", "NUMA Affinity" and
(newer drivers) "GPU NUMA ID"; NIC rows and columns on hosts with NICs; ``X`` on the diagonal; ``N/A``;
and a legend after a blank line. Published excerpts are often cut (rows elided with ``...``), so a
matrix need not be square.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import xml.etree.ElementTree as ET

#: Connection types from the legend, best first; NV<n> is n bonded NVLinks.
LINK_RANK = {"X": 100, "NV": 50, "PIX": 40, "PXB": 30, "PHB": 20, "NODE": 10, "SYS": 0}
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+)$")
_EXTRA_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


class NvidiaParseError(ValueError):
    pass


def link_rank(value):
    """Order of a topology value: NV<n> ranks above every PCIe path, more links higher."""
    value = str(value or "").strip().upper()
    match = re.match(r"^NV(\d+)$", value)
    if match:
        return LINK_RANK["NV"] + int(match.group(1))
    return LINK_RANK.get(value, -1)


def is_nvlink(value):
    return bool(re.match(r"^NV\d+$", str(value or "").strip().upper()))


def _is_header(tokens):
    """A header row names devices: GPU0 GPU1 ... (or GPU0 CPU Affinity ... for one GPU); a data row's
    second cell is a link value (X, NV2, PHB, ...)."""
    return bool(tokens) and _DEVICE.match(tokens[0]) is not None and \
        (len(tokens) == 1 or _DEVICE.match(tokens[1]) is not None or tokens[1] == "CPU")


def parse_topology(text):
    """``nvidia-smi topo -m`` -> {gpus, nics, links, cpu_affinity, numa_affinity, gpu_numa_id}.

    Cells are split on white space (tabs or spaces: only the header's names contain spaces); the values
    after the device columns are matched, in order, to the extra columns the header names.
    """
    lines = str(text or "").splitlines()
    header_index = next((i for i, line in enumerate(lines) if _is_header(line.split())), None)
    if header_index is None:
        raise NvidiaParseError("no header row naming GPU0 ... (is this 'nvidia-smi topo -m' output?)")
    header = lines[header_index]
    devices = [t for t in header.split() if _DEVICE.match(t)]
    extras = [name for name in _EXTRA_COLUMNS if name in re.sub(r"\s+", " ", header)]
    result = {"gpus": [d for d in devices if d.startswith("GPU")],
              "nics": [d for d in devices if not d.startswith("GPU")],
              "links": {}, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}}
    keys = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}
    for line in lines[header_index + 1:]:
        stripped = line.strip()
        if stripped.lower().startswith(("legend", "nic legend")):
            break
        cells = stripped.split()
        if not cells or not _DEVICE.match(cells[0]):
            continue
        row, values = cells[0], cells[1:]
        links, rest = values[:len(devices)], values[len(devices):]
        result["links"][row] = dict((devices[i], links[i]) for i in range(len(links)) if devices[i] != row)
        for position, name in enumerate(extras[:len(rest)]):
            result[keys[name]][row] = rest[position]
    if not result["links"]:
        raise NvidiaParseError("no device rows under the header")
    return result


def _text(node, path, default=None):
    found = node.find(path)
    if found is None or found.text is None:
        return default
    text = found.text.strip()
    return default if text in ("", "N/A") else text


def _mib(text):
    """'24576 MiB' -> 24576; None when not a size."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(MiB|GiB|KiB)?\s*$", str(text or ""))
    if not match:
        return None
    value = float(match.group(1))
    unit = match.group(2) or "MiB"
    return int(value * {"KiB": 1.0 / 1024, "MiB": 1, "GiB": 1024}[unit])


def normalise_bus_id(text):
    """'00000000:41:00.0' -> '0000:41:00.0' (nvidia-smi prints an 8-digit domain)."""
    match = re.match(r"^([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])$", str(text or "").strip())
    if not match:
        return text
    return "%s:%s:%s.%s" % (match.group(1)[-4:].lower(), match.group(2).lower(), match.group(3).lower(),
                            match.group(4))


def _pci_device_id(text):
    """nvidia-smi's ``0x220410DE`` (device, then vendor) -> ``10de:2204``; None when absent or not that shape."""
    value = str(text or "").strip().lower()
    value = value[2:] if value.startswith("0x") else value
    if re.match(r"^[0-9a-f]{8}$", value):
        return "%s:%s" % (value[4:], value[:4])
    return None


def parse_xml(text):
    """``nvidia-smi -q -x`` -> {driver_version, cuda_version, gpus: [{index, name, uuid, bus_id, memory_mib, ...}]}."""
    try:
        root = ET.fromstring(str(text or "").strip())
    except ET.ParseError as exc:
        raise NvidiaParseError("not nvidia-smi XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise NvidiaParseError("not nvidia-smi XML: root element is <%s>, not <nvidia_smi_log>" % root.tag)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        entry = {
            "index": index,
            "name": _text(gpu, "product_name"),
            "uuid": _text(gpu, "uuid"),
            "bus_id": normalise_bus_id(_text(gpu, "pci/pci_bus_id") or gpu.get("id")),
            "pci_device_id": _pci_device_id(_text(gpu, "pci/pci_device_id")),
            "memory_mib": _mib(_text(gpu, "fb_memory_usage/total")),
            # The BAR1 aperture the CPU maps the VRAM through: 256 MiB without Resizable BAR (seed 000, BIOS).
            "bar1_mib": _mib(_text(gpu, "bar1_memory_usage/total")),
            "architecture": _text(gpu, "product_architecture"),
            "vbios_version": _text(gpu, "vbios_version"),
            "serial": _text(gpu, "serial"),
            "persistence_mode": _text(gpu, "persistence_mode"),
            "link_width": _text(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width"),
            "link_gen": _text(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
            "ecc_mode": _text(gpu, "ecc_mode/current_ecc"),
            # PCIe replays since the driver loaded (the burn-in judges their increase during a run).
            "pcie_replays": _int(_text(gpu, "pci/replay_counter")),
            "temperature_c": _int(_text(gpu, "temperature/gpu_temp")),
            "power_limit_w": _float(_text(gpu, "gpu_power_readings/current_power_limit")
                                    or _text(gpu, "power_readings/power_limit")),
        }
        cc = _text(gpu, "compute_cap") or _text(gpu, "cuda_compute_capability")
        if cc:
            entry["compute_capability"] = cc
        gpus.append(entry)
    return {"driver_version": _text(root, "driver_version"), "cuda_version": _text(root, "cuda_version"),
            "gpus": gpus}


def _int(text):
    match = re.match(r"^\s*(-?\d+)", str(text or ""))
    return int(match.group(1)) if match else None


def _float(text):
    match = re.match(r"^\s*(-?\d+(?:\.\d+)?)", str(text or ""))
    return float(match.group(1)) if match else None


#: --query-gpu field -> (key in the result, converter)
QUERY_FIELDS = {
    "index": ("index", _int),
    "name": ("name", str),
    "uuid": ("uuid", str),
    "pci.bus_id": ("bus_id", normalise_bus_id),
    "memory.total": ("memory_mib", _mib),
    "memory.used": ("memory_used_mib", _mib),
    "memory.free": ("memory_free_mib", _mib),
    "driver_version": ("driver_version", str),
    "compute_cap": ("compute_capability", str),
    "temperature.gpu": ("temperature_c", _int),
    "power.limit": ("power_limit_w", _float),
    "utilization.gpu": ("utilization_pct", _int),
    "pcie.link.width.current": ("link_width", _int),
    "pcie.link.gen.current": ("link_gen", _int),
}


def parse_query_csv(text, fields=None):
    """``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`` -> [{...}].

    With a header the fields are read from it (units in brackets dropped); without one, ``fields``
    (the --query-gpu list) names the columns.
    """
    lines = [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]
    if not lines:
        return []
    first = [c.strip() for c in lines[0].split(",")]
    names = [re.sub(r"\s*\[.*\]$", "", c) for c in first]
    if all(n in QUERY_FIELDS or re.match(r"^[a-z_.]+$", n) for n in names) and not re.match(r"^\d", first[0]):
        rows = lines[1:]
    else:
        if not fields:
            raise NvidiaParseError("csv without a header: pass the --query-gpu fields")
        names = [f.strip() for f in (fields.split(",") if isinstance(fields, str) else fields)]
        rows = lines
    gpus = []
    for line in rows:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(names):
            raise NvidiaParseError("row %r has %d values for %d fields" % (line, len(cells), len(names)))
        entry = {}
        for position, name in enumerate(names):
            cell = cells[position]
            key, convert = QUERY_FIELDS.get(name, (name.replace(".", "_"), str))
            entry[key] = None if cell in ("[N/A]", "N/A", "[Not Supported]") else convert(cell)
        gpus.append(entry)
    return gpus


def merge(xml_data=None, csv_rows=None, topology=None):
    """One view of a host's GPUs: the XML's list, completed by the csv rows (matched by bus id or index)."""
    gpus = [dict(g) for g in (xml_data or {}).get("gpus") or []]
    if not gpus and csv_rows:
        gpus = [dict(r) for r in csv_rows]
    else:
        for row in csv_rows or []:
            target = None
            for gpu in gpus:
                if row.get("bus_id") and gpu.get("bus_id") == row.get("bus_id"):
                    target = gpu
                    break
            if target is None and row.get("index") is not None and row["index"] < len(gpus):
                target = gpus[row["index"]]
            if target is not None:
                for key, value in row.items():
                    if value is not None and target.get(key) is None:
                        target[key] = value
    for index, gpu in enumerate(gpus):
        gpu.setdefault("index", index)
    result = {"driver_version": (xml_data or {}).get("driver_version"),
              "cuda_version": (xml_data or {}).get("cuda_version"), "gpus": gpus}
    if result["driver_version"] is None:
        versions = [r.get("driver_version") for r in csv_rows or [] if r.get("driver_version")]
        result["driver_version"] = versions[0] if versions else None
    if topology is not None:
        result["topology"] = topology
    return result


def bar1_notes(gpus):
    """The GPUs whose BAR1 aperture is smaller than their VRAM (Resizable BAR off or lost on the way into the VM),
    one sentence each; seed 000 checks BAR1 in `nvidia-smi -q` after enabling Above 4G decoding and Re-Size BAR."""
    notes = []
    for gpu in gpus or []:
        bar1, vram = gpu.get("bar1_mib"), gpu.get("memory_mib")
        if bar1 is None or vram is None or bar1 >= vram:
            continue
        notes.append("GPU %s (%s): BAR1 %d MiB is smaller than its %d MiB of VRAM - Resizable BAR is off (BIOS: Above "
                     "4G Decoding and Re-Size BAR Support) or the VM does not get it (OVMF, a 64-bit MMIO window as "
                     "large as the BARs)" % (gpu.get("index"), gpu.get("name") or "?", bar1, vram))
    return notes


_NVLINK_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: [^)]*\))?\s*$")
_NVLINK_LINK = re.compile(r"^\s+Link (\d+): (.*?)\s*$")


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> {gpu index: {name, links: {link: GB/s, or None when <inactive>}}}; a GPU whose board
    has no NVLink prints no Link line (or "(Not supported)") and has no links."""
    gpus, current = {}, None
    for line in str(text or "").splitlines():
        found = _NVLINK_GPU.match(line)
        if found:
            current = int(found.group(1))
            gpus[current] = {"name": found.group(2).strip(), "links": {}}
            continue
        found = _NVLINK_LINK.match(line)
        if found and current is not None:
            speed = re.match(r"^([0-9.]+) GB/s$", found.group(2))
            gpus[current]["links"][int(found.group(1))] = float(speed.group(1)) if speed else None
    return gpus


def nvlink_problems(status, topology=None):
    """Seed 000's `nvidia-smi nvlink -s` check on a box with NVLink: every link a GPU reports must be up, and a GPU
    that topo -m links to another over NVLink must report that many links up."""
    problems = []
    for index, gpu in sorted((status or {}).items()):
        down = sorted(link for link, speed in gpu["links"].items() if speed is None)
        if down and len(down) < len(gpu["links"]):
            problems.append("GPU %d (%s): NVLink link(s) %s inactive while %d are up - reseat the bridge or check "
                            "the board (nvidia-smi nvlink -e for the error counters)"
                            % (index, gpu["name"], ", ".join(str(d) for d in down), len(gpu["links"]) - len(down)))
    links = (topology or {}).get("links") or {}
    for name, row in sorted(links.items()):
        if not name.startswith("GPU"):
            continue
        index = int(name[3:])
        wanted = sum(int(v[2:]) for v in row.values() if re.match(r"^NV\d+$", str(v).strip().upper()))
        up = len([s for s in ((status or {}).get(index) or {}).get("links", {}).values() if s is not None])
        if wanted and up < wanted:
            problems.append("GPU %d: topo -m shows %d NVLink(s) to its peers, nvidia-smi nvlink -s %d up"
                            % (index, wanted, up))
    return problems
