# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build a sysfs tree (the parts pci_iommu_facts reads) from an IOMMU group listing.

    python tools/sysfs_fixture.py tests/fixtures/sysfs/platform-a DEST     one fixture -> DEST/sys/...
    python tools/sysfs_fixture.py --all DEST                                 every fixture -> DEST/<name>/sys/...

A fixture directory holds:
  iommu_groups.txt  the listing people post and the seed's script prints, in either layout:
                      IOMMU Group 27:
                          41:00.0 VGA compatible controller [0300]: NVIDIA ... [10de:2204] (rev a1)
                    or  IOMMU Group 27 0000:41:00.0 VGA compatible controller [0300]: ... [10de:2204] (rev a1)
                    The domain is optional (0000 when absent). A listing without any "IOMMU Group" line
                    (plain lspci -nn) describes a host with the IOMMU off.
  devices.yml       what a listing lacks, per device or as defaults: driver, numa_node, link
                    [speed, width, max_speed, max_width], subsystem "vvvv:dddd", prog_if; and
                    uefi: false for a host booted in legacy mode (no sys/firmware/efi);
                    numa_nodes {N: cpulist} (sys/devices/system/node/nodeN/cpulist) and
                    hugepages {size_kib: count} (sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages).
  SOURCE            where the listing came from.
The tree is laid out like the kernel's: device directories under sys/devices/pci<domain>:<bus>/ (flat,
without the bridge nesting), sys/bus/pci/devices/<BDF> and sys/kernel/iommu_groups/<N>/devices/<BDF>
as relative symlinks to them, and driver and iommu_group links inside each device directory.
"""

import argparse
import os
import re
import shutil
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "sysfs")
_GROUP = re.compile(r"^\s*IOMMU [Gg]roup (?P<group>\d+)\s*:?\s*(?P<rest>.*)$")
_DEVICE = re.compile(
    r"^\s*(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-1][0-9a-fA-F])\.(?P<fn>[0-7])\s+"
    r"(?P<description>.*?)\s*\[(?P<cls>[0-9a-fA-F]{4})\]:\s*(?P<name>.*?)\s*"
    r"\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\](?:\s*\(rev (?P<rev>[0-9a-fA-F]{2})\))?.*$")


class ListingError(ValueError):
    pass


def parse_listing(text):
    """[{bdf, group, class, vendor, device, name, description}] of an IOMMU group (or plain lspci -nn) listing."""
    devices, group = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        header = _GROUP.match(line)
        if header:
            group = header.group("group")
            line = header.group("rest")
            if not line.strip():
                continue
        match = _DEVICE.match(line)
        if not match:
            raise ListingError("line %d is neither an 'IOMMU Group N' header nor a device: %r" % (number, line))
        bdf = "%s:%s:%s.%s" % ((match.group("domain") or "0000").lower(), match.group("bus").lower(),
                               match.group("dev").lower(), match.group("fn"))
        devices.append({"bdf": bdf, "group": group, "class": match.group("cls").lower(),
                        "vendor": match.group("vendor").lower(), "device": match.group("device").lower(),
                        "name": match.group("name"), "description": match.group("description")})
    bdfs = [d["bdf"] for d in devices]
    if len(set(bdfs)) != len(bdfs):
        raise ListingError("a device is listed twice")
    if any(d["group"] is None for d in devices) and any(d["group"] is not None for d in devices):
        raise ListingError("some devices have an IOMMU group and some do not")
    return devices


def _settings(extra, bdf):
    short = bdf[5:]
    merged = dict(extra.get("defaults") or {})
    per_device = extra.get("devices") or {}
    merged.update(per_device.get(short) or {})
    merged.update(per_device.get(bdf) or {})
    return merged


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text + "\n")


def build_tree(listing, extra, dest):
    """Write the sysfs tree of a parsed listing (+ devices.yml data) under dest."""
    sysfs = os.path.join(dest, "sys")
    if os.path.exists(sysfs):
        shutil.rmtree(sysfs)
    for bus_dir in ("sys/bus/pci/devices", "sys/bus/pci/drivers"):
        os.makedirs(os.path.join(dest, bus_dir))
    if extra.get("uefi", True):
        os.makedirs(os.path.join(sysfs, "firmware", "efi"))
    for node, cpus in (extra.get("numa_nodes") or {}).items():
        _write(os.path.join(sysfs, "devices", "system", "node", "node%d" % int(node), "cpulist"), str(cpus))
    for size, count in (extra.get("hugepages") or {}).items():
        _write(os.path.join(sysfs, "kernel", "mm", "hugepages", "hugepages-%dkB" % int(size), "nr_hugepages"),
               str(int(count)))
    iommu = any(d["group"] is not None for d in listing)
    if iommu:
        os.makedirs(os.path.join(sysfs, "kernel", "iommu_groups"))
    for dev in listing:
        bdf = dev["bdf"]
        settings = _settings(extra, bdf)
        root_bus = "pci%s:%s" % (bdf[:4], bdf[5:7])
        device_dir = os.path.join(sysfs, "devices", root_bus, bdf)
        os.makedirs(device_dir)
        subsystem = str(settings.get("subsystem", "0000:0000")).split(":")
        for name, value in (("vendor", dev["vendor"]), ("device", dev["device"]),
                            ("class", dev["class"] + str(settings.get("prog_if", "00"))),
                            ("subsystem_vendor", subsystem[0]), ("subsystem_device", subsystem[1])):
            _write(os.path.join(device_dir, name), "0x" + value)
        _write(os.path.join(device_dir, "numa_node"), str(settings.get("numa_node", -1)))
        link = settings.get("link")
        if link:
            if len(link) != 4:
                raise ListingError("%s: link must be [speed, width, max_speed, max_width]" % bdf)
            names = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
            for name, value in zip(names, link, strict=True):
                _write(os.path.join(device_dir, name), str(value))
        driver = settings.get("driver")
        if driver:
            os.makedirs(os.path.join(sysfs, "bus", "pci", "drivers", driver), exist_ok=True)
            os.symlink(os.path.join("..", "..", "..", "bus", "pci", "drivers", driver),
                       os.path.join(device_dir, "driver"))
        os.symlink(os.path.join("..", "..", "..", "devices", root_bus, bdf),
                   os.path.join(sysfs, "bus", "pci", "devices", bdf))
        if dev["group"] is not None:
            group_dir = os.path.join(sysfs, "kernel", "iommu_groups", dev["group"])
            os.makedirs(os.path.join(group_dir, "devices"), exist_ok=True)
            os.symlink(os.path.join("..", "..", "..", "..", "devices", root_bus, bdf),
                       os.path.join(group_dir, "devices", bdf))
            os.symlink(os.path.join("..", "..", "..", "kernel", "iommu_groups", dev["group"]),
                       os.path.join(device_dir, "iommu_group"))
    return dest


def build_fixture(fixture_dir, dest):
    with open(os.path.join(fixture_dir, "iommu_groups.txt")) as handle:
        listing = parse_listing(handle.read())
    extra = {}
    path = os.path.join(fixture_dir, "devices.yml")
    if os.path.exists(path):
        with open(path) as handle:
            extra = yaml.safe_load(handle) or {}
    return build_tree(listing, extra, dest)


def fixtures():
    return sorted(d for d in os.listdir(FIXTURES) if os.path.isfile(os.path.join(FIXTURES, d, "iommu_groups.txt")))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--all", action="store_true", help="build every fixture under tests/fixtures/sysfs")
    parser.add_argument("paths", nargs="+", help="FIXTURE_DIR DEST, or DEST with --all")
    args = parser.parse_args(argv)
    if args.all:
        if len(args.paths) != 1:
            parser.error("--all takes one DEST")
        for name in fixtures():
            print(build_fixture(os.path.join(FIXTURES, name), os.path.join(args.paths[0], name)))
        return 0
    if len(args.paths) != 2:
        parser.error("give FIXTURE_DIR DEST")
    print(build_fixture(args.paths[0], args.paths[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
