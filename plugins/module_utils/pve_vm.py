# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A PVE VM's configuration, compared and changed key by key (the pvegpu.llmstack.pve_vm module). Plain Python.

PVE writes the same setting in several ways: property strings in any key order (``0000:41:00,pcie=1``
or ``host=41:00,pcie=true``), sizes in any unit, booleans as ``1``/``on``/``yes``, a NIC's MAC address
it generated itself, and a new disk (``local-lvm:32``) as the volume it allocated
(``local-lvm:vm-120-disk-0,size=32G``). :func:`canonical` reduces a value to one form per meaning, so
:func:`plan` changes a key only when its meaning differs, and sends for a disk or a NIC the value that
keeps the existing volume and MAC.

:class:`VmApi` carries out a plan through a proxmoxer ``ProxmoxAPI`` (or anything with its call shape).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.pvegpu.llmstack.plugins.module_utils import hostpci as hostpci_utils
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_mapping


class VmConfigError(ValueError):
    """A wanted config PVE would refuse or that pve_vm will not apply; the message names the key."""


DRIVE_KEY = re.compile(r"^(?:(?:ide|sata|scsi|virtio)\d+|efidisk0|tpmstate0)$")
FIXED_SIZE_DRIVES = ("efidisk0", "tpmstate0")
NET_KEY = re.compile(r"^net\d+$")
HOSTPCI_KEY = re.compile(r"^hostpci\d+$")
CONFIG_KEY = re.compile(r"^[a-z][a-z0-9_-]*$")
# A disk to allocate: [storage:]size in GiB, as the create and config APIs take it.
NEW_DISK = re.compile(r"^(?:(?P<storage>[^/:\s]+):)?(?P<gib>\d+(?:\.\d+)?)$")
NET_MODELS = ("e1000", "e1000-82540em", "e1000-82544gc", "e1000-82545em", "e1000e", "i82551", "i82557b",
              "i82559er", "ne2k_isa", "ne2k_pci", "pcnet", "rtl8139", "virtio", "vmxnet3")
# Options of the API calls, never config keys.
NOT_CONFIG = ("vmid", "node", "digest", "delete", "revert", "skiplock", "force", "background_delay")

# Property-string keys and the name of their positional (default) property; None: no positional one.
PROPERTY_KEYS = (
    (re.compile(r"^(?:(?:ide|sata|scsi|virtio)\d+|efidisk0|tpmstate0|unused\d+)$"), "file"),
    (re.compile(r"^hostpci\d+$"), "host"),
    (re.compile(r"^usb\d+$"), "host"),
    (re.compile(r"^agent$"), "enabled"),
    (re.compile(r"^cpu$"), "cputype"),
    (re.compile(r"^vga$"), "type"),
    (re.compile(r"^memory$"), "current"),
    (re.compile(r"^watchdog$"), "model"),
    (re.compile(r"^rng0$"), "source"),
    (re.compile(r"^audio0$"), "device"),
    (re.compile(r"^(?:numa\d+|smbios1|startup|boot|spice_enhancements|ivshmem|amd-sev)$"), None),
)
# Top-level keys that are booleans.
BOOL_KEYS = ("acpi", "autostart", "freeze", "kvm", "localtime", "numa", "onboot", "protection", "reboot",
             "tablet", "template")
# Properties (inside property strings) that are booleans.
BOOL_PROPS = ("backup", "enabled", "firewall", "freeze-fs-on-backup", "fstrim_cloned_disks", "hidden", "iothread",
              "legacy-igd", "link_down", "pcie", "pre-enrolled-keys", "replicate", "ro", "rombar", "shared", "ssd",
              "usb3", "x-vga")
SIZE_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


# -- values ------------------------------------------------------------------------------------------------

def pve_string(value):
    """A config value as the API takes it: booleans as 1/0, numbers as decimal text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return None
    return str(value)


def _bool(text):
    lowered = str(text).strip().lower()
    if lowered in TRUE:
        return "1"
    if lowered in FALSE:
        return "0"
    return str(text).strip()


def _int_text(text):
    text = str(text).strip()
    return str(int(text)) if re.match(r"^[+-]?\d+$", text) else text


def parse_size(text):
    """'32G' -> bytes; a plain number is bytes; None when it is not a size."""
    match = re.match(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)B?$", str(text).strip(), re.IGNORECASE)
    if not match:
        return None
    return int(float(match.group(1)) * SIZE_UNITS[match.group(2).upper()])


def format_size(size):
    """Bytes -> PVE's shortest exact form ('32G', '528K')."""
    for unit in ("T", "G", "M", "K"):
        if size and size % SIZE_UNITS[unit] == 0:
            return "%d%s" % (size // SIZE_UNITS[unit], unit)
    return str(size)


def cpuset(text):
    """'0-3,8;10' -> (0, 1, 2, 3, 8, 10); None when it is not a CPU set."""
    found = set()
    for part in re.split(r"[,;\s]+", str(text).strip()):
        if not part:
            continue
        match = re.match(r"^(\d+)(?:-(\d+))?$", part)
        if not match:
            return None
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first:
            return None
        found.update(range(first, last + 1))
    return tuple(sorted(found))


def format_cpuset(cpus):
    """(0, 1, 2, 3, 8) -> '0-3,8'."""
    ranges, start, prev = [], None, None
    for cpu in sorted(cpus):
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            ranges.append((start, prev))
            start = prev = cpu
    if start is not None:
        ranges.append((start, prev))
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in ranges)


def default_property(key):
    """(is a property string, name of its positional property) of a config key."""
    for pattern, default in PROPERTY_KEYS:
        if pattern.match(key):
            return True, default
    return False, None


def split_props(text, default=None):
    """'a,b=1,c=2' -> {default: 'a', 'b': '1', 'c': '2'} (order kept); VmConfigError on a second positional."""
    props = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep:
            if default is None or default in props:
                raise VmConfigError("%r has a value without a name (%r)" % (text, part))
            name, value = default, part
        props[name.strip()] = value.strip()
    return props


def _canonical_prop(key, name, value):
    if name in BOOL_PROPS:
        return _bool(value)
    if name == "size":
        size = parse_size(value)
        return size if size is not None else value
    if name in ("cpus", "hostnodes") and key.startswith("numa"):
        cpus = cpuset(value)
        return cpus if cpus is not None else value
    if name == "host" and HOSTPCI_KEY.match(key):
        try:
            return tuple(hostpci_utils.normalise(a) for a in value.split(";"))
        except hostpci_utils.HostpciError:
            return value
    if name in ("tag", "mtu", "queues", "memory", "current", "cores", "sockets"):
        return _int_text(value)
    if name == "macaddr":
        return value.upper()
    return value


def parse_net(text):
    """A NIC value -> (model, MAC or None, {other properties}); both PVE forms (virtio=MAC and model=)."""
    model, mac, rest = None, None, {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        name, _sep, value = part.partition("=")
        if name in NET_MODELS:
            model, mac = name, value or None
        elif name == "model":
            model = value
        elif name == "macaddr":
            mac = value or None
        else:
            rest[name] = value
    return model, (mac.upper() if mac else None), rest


def canonical(key, value):
    """One comparable form per meaning of a config value (see the module docstring)."""
    if value is None:
        return None
    text = pve_string(value).strip()
    if NET_KEY.match(key):
        model, mac, rest = parse_net(text)
        return ("net", model, mac, tuple(sorted((n, _canonical_prop(key, n, v)) for n, v in rest.items())))
    is_props, default = default_property(key)
    if is_props:
        props = split_props(text, default)
        return tuple(sorted((n, _canonical_prop(key, n, v)) for n, v in props.items()))
    if key in BOOL_KEYS:
        return _bool(text)
    if key == "tags":
        return tuple(sorted(set(t.lower() for t in re.split(r"[;,\s]+", text) if t)))
    if key == "affinity":
        cpus = cpuset(text)
        return cpus if cpus is not None else text
    return _int_text(text)


def effective_config(pending):
    """GET .../pending items -> (the config the next start uses, {key: 'set'|'delete'} of pending changes)."""
    config, changes = {}, {}
    for item in pending or []:
        key = item.get("key")
        if key is None:
            continue
        if item.get("delete"):
            changes[key] = "delete"
            continue
        if "pending" in item:
            changes[key] = "set"
            config[key] = item["pending"]
        elif "value" in item:
            config[key] = item["value"]
    return config, changes


# -- drives and NICs ----------------------------------------------------------------------------------------

def _drive(key, value):
    """(volume, {properties}) of a drive value."""
    props = split_props(pve_string(value), "file")
    return props.pop("file", ""), props


def _drive_opts_equal(key, wanted_props, current_props):
    skip = ("size", "format")
    wanted = dict((n, _canonical_prop(key, n, v)) for n, v in wanted_props.items() if n not in skip)
    current = dict((n, _canonical_prop(key, n, v)) for n, v in current_props.items() if n not in skip)
    return wanted == current


def plan_drive(key, wanted, current, grow_only=False):
    """What to do for one drive key: {'set': value or None, 'resize': '64G' or None}.

    A wanted allocation (``local-lvm:64,ssd=1``) matches an existing volume on the same storage; its
    options are changed on that volume (never a new allocation), a bigger size is a resize, a smaller
    one an error (PVE cannot shrink a disk) - or, with ``grow_only`` (a computed size, such as the
    model disk's), the current size kept - another storage an error (moving disks is not done here).
    """
    want_volume, want_props = _drive(key, wanted)
    if current is None:
        return {"set": pve_string(wanted), "resize": None}
    cur_volume, cur_props = _drive(key, current)
    new = NEW_DISK.match(want_volume)
    is_media = want_volume in ("none", "cdrom") or want_props.get("media") == "cdrom"
    if not new or is_media:
        if canonical(key, wanted) == canonical(key, current):
            return {"set": None, "resize": None}
        return {"set": pve_string(wanted), "resize": None}
    cur_storage = cur_volume.split(":", 1)[0] if ":" in cur_volume else None
    want_storage = new.group("storage")
    if want_storage and cur_storage and want_storage != cur_storage:
        raise VmConfigError("%s: the disk is %s on storage '%s', the config asks for storage '%s'; pve_vm does not "
                            "move disks (use 'qm disk move' or the UI), or name the current volume"
                            % (key, cur_volume, cur_storage, want_storage))
    resize = None
    if key not in FIXED_SIZE_DRIVES:
        want_size = int(float(new.group("gib")) * SIZE_UNITS["G"])
        cur_size = parse_size(cur_props.get("size", "")) or 0
        if cur_size and want_size < cur_size and grow_only:
            want_size = cur_size
        if cur_size and want_size < cur_size:
            raise VmConfigError("%s: the disk is %s, the config asks for %s; PVE cannot shrink a disk: ask for %s or "
                                "more" % (key, format_size(cur_size), format_size(want_size), format_size(cur_size)))
        if want_size > cur_size:
            resize = format_size(want_size)
    if _drive_opts_equal(key, want_props, cur_props):
        return {"set": None, "resize": resize}
    props = dict((n, v) for n, v in want_props.items() if n not in ("size", "format"))
    if cur_props.get("size"):
        props["size"] = cur_props["size"]
    value = ",".join([cur_volume] + ["%s=%s" % (n, props[n]) for n in sorted(props)])
    return {"set": value, "resize": resize}


def net_value(wanted, current):
    """The NIC value to send: the wanted one, keeping the MAC PVE gave the NIC when none is asked for."""
    model, mac, rest = parse_net(pve_string(wanted))
    if mac is None and current is not None:
        cur_model, cur_mac, dummy_rest = parse_net(current)
        mac = cur_mac
    if model is None:
        return pve_string(wanted)
    first = "%s=%s" % (model, mac) if mac else model
    return ",".join([first] + ["%s=%s" % (n, rest[n]) for n in rest])


def _net_equal(wanted, current):
    w_model, w_mac, w_rest = canonical("net0", wanted)[1:]
    c_model, c_mac, c_rest = canonical("net0", current)[1:]
    return w_model == c_model and w_rest == c_rest and (w_mac is None or w_mac == c_mac)


# -- validation ---------------------------------------------------------------------------------------------

def hostpci_target(key, value):
    """('host', (addresses)) or ('mapping', name) of a hostpciN value; VmConfigError when it is malformed."""
    try:
        props = split_props(pve_string(value), "host")
    except VmConfigError as exc:
        raise VmConfigError("%s: %s" % (key, exc))
    if "host" in props and "mapping" in props:
        raise VmConfigError("%s: %r names both a host address and mapping=%s; use one (a mapping is what API "
                            "tokens may use)" % (key, value, props["mapping"]))
    if "mapping" in props:
        if not pve_mapping.valid_mapping_id(props["mapping"]):
            raise VmConfigError("%s: mapping %r is not a PVE mapping id" % (key, props["mapping"]))
        return "mapping", props["mapping"]
    if "host" not in props:
        raise VmConfigError("%s: %r names neither a host address nor mapping=<name>" % (key, value))
    try:
        return "host", tuple(hostpci_utils.normalise(a) for a in props["host"].split(";"))
    except hostpci_utils.HostpciError as exc:
        raise VmConfigError("%s: %s" % (key, exc))


def validate(config, current=None, api_user="root@pam", token=False):
    """Problems (list of messages naming the key) of a wanted config, given the VM's current one."""
    problems = []
    current = current or {}
    if not isinstance(config, dict):
        return ["config must be a dict of PVE config keys, got %s" % type(config).__name__]
    merged = dict((k, v) for k, v in current.items())
    for key, value in config.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    for key in sorted(config):
        value = config[key]
        if key in NOT_CONFIG or key == "name":
            problems.append("config.%s: '%s' is an option of the module or the API, not a config key%s"
                            % (key, key, " (use the name option)" if key == "name" else ""))
            continue
        if not CONFIG_KEY.match(key):
            problems.append("config.%s: not a PVE config key (lower-case letters, digits, '_', '-')" % key)
            continue
        if isinstance(value, (dict, list)):
            problems.append("config.%s: must be a string, number or boolean (PVE property strings are "
                            "'a=1,b=2' text), got %s" % (key, type(value).__name__))
            continue
        try:
            if value is not None:
                canonical(key, value)
        except VmConfigError as exc:
            problems.append("config.%s: %s" % (key, exc))
            continue
        if value is None or not HOSTPCI_KEY.match(key):
            continue
        try:
            kind, dummy_target = hostpci_target(key, value)
        except VmConfigError as exc:
            problems.append("config.%s" % exc)
            continue
        props = split_props(pve_string(value), "host")
        if kind == "host" and (token or api_user != "root@pam"):
            who = "an API token" if token else api_user
            problems.append("config.%s: a raw host address (%s) is allowed by PVE only to root@pam with a password, "
                            "not to %s: use a PCI resource mapping (mapping=<name>, see pvegpu.llmstack."
                            "pve_pci_mapping)" % (key, props["host"], who))
        if _bool(props.get("pcie", "0")) == "1":
            machine = pve_string(merged.get("machine") or "")
            machine_type = split_props(machine, "type").get("type", "") if machine else ""
            if not re.match(r"^(?:pc-)?q35", machine_type):
                problems.append("config.%s: pcie=1 needs 'machine: q35' (PCI Express exists only on q35), the VM "
                                "has machine %r" % (key, machine or "i440fx (the default)"))
    if config.get("efidisk0") is not None and str(merged.get("bios", "seabios")) != "ovmf":
        problems.append("config.efidisk0: an EFI vars disk needs 'bios: ovmf', the VM has bios %r"
                        % str(merged.get("bios", "seabios (the default)")))
    return problems


def warnings_of(config, current=None):
    """Settings that work but that seed 000 warns against."""
    merged = dict(current or {})
    merged.update(dict((k, v) for k, v in config.items() if v is not None))
    found = []
    has_pci = any(HOSTPCI_KEY.match(k) for k in merged)
    balloon = merged.get("balloon")
    if has_pci and balloon is not None and _int_text(pve_string(balloon)) != "0":
        found.append("balloon is %s on a VM with PCI passthrough: ballooning and VFIO DMA mappings conflict "
                     "(set balloon: 0)" % balloon)
    return found


# -- planning -----------------------------------------------------------------------------------------------

def plan(config, current, remove_disks=False, grow_only=()):
    """What to change so that the managed keys (those of ``config``) have the wanted values.

    ``current`` is the effective config (:func:`effective_config`), or None for a VM that does not exist.
    ``grow_only``: drive keys whose size is a floor (a smaller one keeps the disk's size instead of failing).
    Returns {'create', 'set', 'delete', 'resize', 'before', 'after'}; ``before``/``after`` hold only the
    managed keys (raw values as PVE shows them / as they will be), so a diff shows exactly what changes.
    """
    wanted = dict((k, v) for k, v in config.items())
    if current is None:
        values = dict((k, pve_string(v)) for k, v in wanted.items() if v is not None)
        return {"create": True, "set": values, "delete": [], "resize": {}, "before": {}, "after": dict(values)}
    result = {"create": False, "set": {}, "delete": [], "resize": {}, "before": {}, "after": {}}
    for key in sorted(wanted):
        want = wanted[key]
        have = current.get(key)
        if have is not None:
            result["before"][key] = have
        if want is None:
            if have is None:
                continue
            if DRIVE_KEY.match(key) and not remove_disks and not _drive(key, have)[1].get("media") == "cdrom":
                raise VmConfigError("config.%s: is null, which would detach the disk %s; pve_vm leaves disks alone "
                                    "unless remove_disks is true" % (key, _drive(key, have)[0]))
            result["delete"].append(key)
            continue
        if DRIVE_KEY.match(key):
            step = plan_drive(key, want, have, grow_only=key in (grow_only or ()))
            if step["resize"]:
                result["resize"][key] = step["resize"]
            if step["set"] is not None:
                result["set"][key] = step["set"]
            after = step["set"] if step["set"] is not None else have
            if step["resize"] and after is not None and have is not None:
                volume, props = _drive(key, after)
                props["size"] = step["resize"]
                after = ",".join([volume] + ["%s=%s" % (n, props[n]) for n in sorted(props)])
            result["after"][key] = after
            continue
        if NET_KEY.match(key):
            if have is not None and _net_equal(want, have):
                result["after"][key] = have
                continue
            value = net_value(want, have)
            result["set"][key] = value
            result["after"][key] = value
            continue
        if have is not None and canonical(key, want) == canonical(key, have):
            result["after"][key] = have
            continue
        result["set"][key] = pve_string(want)
        result["after"][key] = pve_string(want)
    return result


def changes(step):
    """True when a plan changes anything."""
    return bool(step["create"] or step["set"] or step["delete"] or step["resize"])


# -- the API ------------------------------------------------------------------------------------------------

class PveTaskError(RuntimeError):
    pass


class VmApi(object):
    """The calls pve_vm makes, on a proxmoxer ProxmoxAPI."""

    def __init__(self, api, node, vmid, task_timeout=600, poll=1.0, sleep=time.sleep, clock=time.time):
        self.api = api
        self.node = node
        self.vmid = int(vmid)
        self.task_timeout = task_timeout
        self.poll = poll
        self.sleep = sleep
        self.clock = clock

    @property
    def qemu(self):
        return self.api.nodes(self.node).qemu(self.vmid)

    def nodes(self):
        return sorted(n["node"] for n in self.api.nodes.get() or [])

    def find(self):
        """{node, name, status} of the VM with this vmid anywhere in the cluster, or None."""
        for item in self.api.cluster.resources.get(type="vm") or []:
            if int(item.get("vmid", -1)) == self.vmid:
                return {"node": item.get("node"), "name": item.get("name"), "status": item.get("status"),
                        "type": item.get("type", "qemu")}
        return None

    def config(self):
        return dict(self.qemu.config.get() or {})

    def pending(self):
        return list(self.qemu.pending.get() or [])

    def status(self):
        return (self.qemu.status.current.get() or {}).get("status")

    def wait(self, upid, timeout=None, what="task"):
        """Wait for a PVE task; PveTaskError with its exit status when it did not end OK."""
        if not upid or not str(upid).startswith("UPID:"):
            return None
        node = str(upid).split(":")[1] or self.node
        deadline = self.clock() + (timeout or self.task_timeout)
        while True:
            state = self.api.nodes(node).tasks(upid).status.get() or {}
            if state.get("status") == "stopped":
                if state.get("exitstatus") != "OK":
                    raise PveTaskError("%s %s ended with: %s" % (what, upid, state.get("exitstatus")))
                return state
            if self.clock() >= deadline:
                raise PveTaskError("%s %s still running after %ss" % (what, upid, timeout or self.task_timeout))
            self.sleep(self.poll)

    def create(self, name, values):
        upid = self.api.nodes(self.node).qemu.post(vmid=self.vmid, name=name, **values)
        return self.wait(upid, what="creating VM %d" % self.vmid)

    def update(self, values, delete, digest, asynchronous=False):
        params = dict(values)
        if delete:
            params["delete"] = ",".join(delete)
        if digest:
            params["digest"] = digest
        if asynchronous:
            return self.wait(self.qemu.config.post(**params), what="configuring VM %d" % self.vmid)
        return self.qemu.config.put(**params)

    def resize(self, disk, size):
        return self.wait(self.qemu.resize.put(disk=disk, size=size), what="resizing %s of VM %d" % (disk, self.vmid))

    def start(self):
        return self.wait(self.qemu.status.start.post(), what="starting VM %d" % self.vmid)

    def shutdown(self, timeout, force):
        """ACPI (or guest agent) shutdown; a hard stop after ``timeout`` seconds only when ``force``."""
        upid = self.qemu.status.shutdown.post(timeout=int(timeout), forceStop=1 if force else 0)
        return self.wait(upid, timeout=int(timeout) + 60, what="shutting down VM %d" % self.vmid)

    def destroy(self, unreferenced_disks=False):
        """Destroy the VM with the disks its config references (PVE's default); disks of its vmid that its config
        does not reference (someone's, attached by hand or left by a restore) only when ``unreferenced_disks``."""
        upid = self.qemu.delete(purge=1, **{"destroy-unreferenced-disks": 1 if unreferenced_disks else 0})
        return self.wait(upid, what="destroying VM %d" % self.vmid)
