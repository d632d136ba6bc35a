# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VLAN-aware PVE bridge (issue #33 item 3): ``bridge-vlan-aware yes`` and ``bridge-vids`` on each bridge that
llmstack_vlans puts VLANs on, in /etc/network/interfaces as ifupdown2 (PVE's network stack) reads it. Plain Python.

- What a bridge must carry: the ids of every VLAN of llmstack_vlans whose ``bridge`` (default vmbr0, as the VMs' NICs
  have it) it is. VIDs the bridge already carries are kept (PVE's GUI writes ``bridge-vids 2-4094``; other VMs of the
  site may use VLANs the inventory does not name): the collection only ever adds.
- Only the bridge's own stanza changes (two option lines, replaced in place or added after its last option, in its
  indentation); every other line, comment and stanza is kept byte for byte.
- The way back: the options as they were before the collection first changed a bridge are recorded (RECORD_NAME under
  the role's state directory); the revert (``state: absent``) puts them back - removed where there were none.
- Refused before anything changes: a bridge the file does not declare (or declares without ``bridge-ports``), an
  unreadable ``bridge-vids``, and a result that would cut the address the controller uses: that address on a VLAN
  interface of a bridge (``vmbr0.10``, or ``vlan-raw-device vmbr0``) whose VLAN the VLAN-aware bridge would not carry.
  An address on the bridge itself stays on its untagged PVID (this plan never sets ``bridge-pvid``); an address on an
  interface outside the bridges is not touched. Where the controller's address is on none of the host's interfaces
  (NAT, a jump host), the plan cannot tell and refuses unless told which address to protect.
- The running state (``ip -d -j link``, ``bridge -j vlan``) against the file: a reload is due when the file changed
  or the kernel's bridges do not match it (a run that stopped between writing and reloading), and the verification
  after the reload is the same comparison.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

RECORD_NAME = "pve_bridge.json"
DEFAULT_BRIDGE = "vmbr0"
VLAN_AWARE = "bridge-vlan-aware"
VIDS = "bridge-vids"
MANAGED = (VLAN_AWARE, VIDS)
# Lines that start a new stanza (interfaces(5), ifupdown2): an iface's options run until the next of these.
STANZA = re.compile(r"^\s*(iface|auto|allow-[A-Za-z0-9_-]+|mapping|source|source-directory|rename)\b")
IFACE = re.compile(r"^\s*iface\s+(\S+)")
OPTION = re.compile(r"^(\s*)([A-Za-z0-9_-]+)(?:\s+(.*?))?\s*$")
TRUE_WORDS = ("yes", "on", "1", "true")
# Connections that do not go over the network: nothing to protect.
LOCAL_CONNECTIONS = ("local", "podman", "podman_pipelined", "containers.podman.podman", "docker",
                     "community.docker.docker", "community.general.chroot", "chroot", "lxc", "buildah")


class BridgeError(Exception):
    """Input this plan refuses; the message names what is wrong."""


def _key(name):
    """ifupdown2 reads ``bridge_vids`` as ``bridge-vids``."""
    return name.replace("_", "-").lower()


def parse_vids(value, where="bridge-vids"):
    """'10 20 30-32' / '2-4094' / '10,20' -> sorted list of ints (1-4094)."""
    vids = set()
    for token in re.split(r"[\s,]+", (value or "").strip()):
        if not token:
            continue
        match = re.match(r"^(\d+)(?:-(\d+))?$", token)
        if not match:
            raise BridgeError("%s: %r is not a VLAN id or range" % (where, token))
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if not 1 <= low <= high <= 4094:
            raise BridgeError("%s: %r is outside 1-4094" % (where, token))
        vids.update(range(low, high + 1))
    return sorted(vids)


def format_vids(vids):
    """[10, 20, 21, 22, 30] -> '10 20-22 30' (ifupdown2's number-comma-range list)."""
    parts, run = [], []
    for vid in sorted(set(vids)):
        if run and vid == run[-1] + 1:
            run.append(vid)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
        run = [vid]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
    return " ".join(parts)


def wanted(vlans):
    """{bridge: [vid, ...]} from llmstack_vlans ({name: {id, bridge?}}): what each bridge must carry."""
    result = {}
    for name, vlan in sorted((vlans or {}).items()):
        if not isinstance(vlan, dict) or vlan.get("id") in (None, ""):
            raise BridgeError("llmstack_vlans.%s: no id" % name)
        try:
            vid = int(vlan["id"])
        except (TypeError, ValueError):
            raise BridgeError("llmstack_vlans.%s.id: %r is not a number" % (name, vlan["id"]))
        if not 1 <= vid <= 4094:
            raise BridgeError("llmstack_vlans.%s.id: %d is outside 1-4094" % (name, vid))
        bridge = vlan.get("bridge") or DEFAULT_BRIDGE
        result.setdefault(bridge, set()).add(vid)
    return dict((bridge, sorted(vids)) for bridge, vids in result.items())


# ------------------------------------------------------------------------------------------ the file

def parse(text):
    """The stanzas of an interfaces file: [{name, start, options: [(line index, key, value)]}] in file order."""
    lines = text.splitlines()
    stanzas, current = [], None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if STANZA.match(line):
            match = IFACE.match(line)
            current = {"name": match.group(1), "start": index, "options": []} if match else None
            if current:
                stanzas.append(current)
            continue
        if current is not None:
            match = OPTION.match(line)
            if match:
                current["options"].append((index, _key(match.group(2)), match.group(3) or ""))
    return stanzas


def bridge_stanza(stanzas, bridge):
    """The stanza of ``bridge`` that holds its bridge options (PVE writes them in the inet one); None if none."""
    candidates = [s for s in stanzas if s["name"] == bridge]
    for stanza in candidates:
        if any(option[1] == "bridge-ports" for option in stanza["options"]):
            return stanza
    return None


def options(stanza):
    return dict((option[1], option[2]) for option in stanza["options"])


def is_true(value):
    return (value or "").strip().lower() in TRUE_WORDS


def settings(stanzas, bridge):
    """(vlan_aware, [vids], [ports]) of a bridge as the file has it."""
    stanza = bridge_stanza(stanzas, bridge)
    opts = options(stanza) if stanza else {}
    aware = is_true(opts.get(VLAN_AWARE))
    vids = parse_vids(opts.get(VIDS), "%s: %s" % (bridge, VIDS)) if VIDS in opts else []
    ports = [p for p in (opts.get("bridge-ports") or "").split() if p.lower() != "none"]
    return aware, vids, ports


def edit(text, bridge, values):
    """``text`` with the managed options of ``bridge`` set to ``values`` ({key: value or None = remove})."""
    lines = text.splitlines()
    trailing_newline = text.endswith("\n")
    stanza = bridge_stanza(parse(text), bridge)
    indent = "\t"
    present = {}
    for option in stanza["options"]:
        match = OPTION.match(lines[option[0]])
        if match and match.group(1):
            indent = match.group(1)
            break
    for index, key, _value in stanza["options"]:
        if key in MANAGED:
            present.setdefault(key, []).append(index)
    drop = set()
    for key in MANAGED:
        value = values.get(key, "__keep__")
        if value == "__keep__":
            continue
        indexes = present.get(key, [])
        if value is None:
            drop.update(indexes)
            continue
        if indexes:
            lines[indexes[0]] = "%s%s %s" % (OPTION.match(lines[indexes[0]]).group(1) or indent, key, value)
            drop.update(indexes[1:])
    last = stanza["options"][-1][0] if stanza["options"] else stanza["start"]
    added = ["%s%s %s" % (indent, key, values[key]) for key in MANAGED
             if values.get(key, "__keep__") not in ("__keep__", None) and not present.get(key)]
    out = []
    for index, line in enumerate(lines):
        if index not in drop:
            out.append(line)
        if index == last:
            out.extend(added)
    return "\n".join(out) + ("\n" if trailing_newline or not out else "")


# ------------------------------------------------------------------------------------------ the running state

def runtime_from(links, bridge_vlans, addresses):
    """{links: {name: {kind, master, vlan_filtering, vlan_id, parent}}, vids: {port: set}, addresses: {ip: name}}
    from ``ip -d -j link show``, ``bridge -j vlan show`` and ``ip -j addr show`` (parsed JSON)."""
    result = {"links": {}, "vids": {}, "addresses": {}}
    for link in links or []:
        info = link.get("linkinfo") or {}
        data = info.get("info_data") or {}
        result["links"][link.get("ifname")] = {
            "kind": info.get("info_kind"), "master": link.get("master"),
            "vlan_filtering": data.get("vlan_filtering") if info.get("info_kind") == "bridge" else None,
            "vlan_id": data.get("id") if info.get("info_kind") == "vlan" else None,
            "parent": link.get("link")}
    for port in bridge_vlans or []:
        vids = set()
        for entry in port.get("vlans") or []:
            low = int(entry.get("vlan"))
            vids.update(range(low, int(entry.get("vlanEnd", low)) + 1))
        result["vids"][port.get("ifname")] = vids
    for link in addresses or []:
        for info in link.get("addr_info") or []:
            if info.get("local"):
                result["addresses"][info["local"]] = link.get("ifname")
    return result


def mismatches(stanzas, bridges, runtime):
    """What the kernel's bridges lack against the file, for ``bridges`` (empty: they match)."""
    found = []
    for bridge in bridges:
        if bridge_stanza(stanzas, bridge) is None:
            continue
        aware, vids, ports = settings(stanzas, bridge)
        link = runtime["links"].get(bridge)
        if link is None:
            found.append("%s: no such bridge is running" % bridge)
            continue
        filtering = bool(link.get("vlan_filtering"))
        if filtering != aware:
            said = "yes" if aware else "no"
            found.append("%s: vlan_filtering is %d, the file says %s" % (bridge, int(filtering), said))
            continue
        if not aware:
            continue
        for port in ports:
            if port not in runtime["links"]:
                found.append("%s: its port %s does not exist" % (bridge, port))
                continue
            missing = sorted(set(vids) - runtime["vids"].get(port, set()))
            if missing:
                found.append("%s: port %s does not carry VLAN %s" % (bridge, port, format_vids(missing)))
    return found


# ------------------------------------------------------------------------------------------ the controller's address

def management(address, connection, runtime, resolve=None):
    """Where the controller's address sits: {address, interface, bridge, vid, local}. ``local`` when the connection
    does not use the network. A name is looked up with ``resolve`` (name -> [addresses], on the host) and the first
    of its addresses the host has counts. Raises BridgeError when the address is on none of the host's interfaces."""
    if (connection or "ssh") in LOCAL_CONNECTIONS:
        return {"address": address, "interface": None, "bridge": None, "vid": None, "local": True}
    try:
        candidates = [str(ipaddress.ip_address((address or "").split("%")[0]))]
    except ValueError:
        candidates = [str(ipaddress.ip_address(a)) for a in (resolve(address) if resolve and address else [])]
        if not candidates:
            raise BridgeError("the address the controller uses (%r) is neither an IP address nor a name this host "
                              "resolves: set pve_bridge_management_address to the host's address it connects to"
                              % address)
    found = [ip for ip in candidates if ip in runtime["addresses"] and not ipaddress.ip_address(ip).is_loopback]
    if not found:
        raise BridgeError("the controller's address %s is on none of this host's interfaces (%s): set "
                          "pve_bridge_management_address to the host's own address its traffic arrives on, so "
                          "that the change can be checked against it"
                          % (", ".join(candidates), ", ".join(sorted(runtime["addresses"])) or "none"))
    ip = found[0]
    interface = runtime["addresses"][ip]
    link = runtime["links"].get(interface) or {}
    bridge, vid = None, None
    if link.get("kind") == "vlan" and link.get("parent"):
        bridge, vid = link["parent"], link.get("vlan_id")
    elif link.get("kind") == "bridge":
        bridge = interface
    return {"address": ip, "interface": interface, "bridge": bridge, "vid": vid, "local": False}


# ------------------------------------------------------------------------------------------ the plan

def plan(text, vlans, record, state, mgmt, runtime):
    """What to write and why. ``record``: the options as they were before this collection first changed each bridge
    ({bridges: {name: {key: value or None}}}). Returns {content, changed, record, bridges: {name: {before, after}},
    reload, mismatches}. Raises BridgeError before anything changes."""
    stanzas = parse(text)
    record = {"bridges": dict((record or {}).get("bridges") or {})}
    content = text
    report = {}
    if state == "present":
        targets = wanted(vlans)
        for bridge in sorted(targets):
            stanza = bridge_stanza(stanzas, bridge)
            if stanza is None:
                named = [s["name"] for s in stanzas if s["name"] == bridge]
                users = [n for n, v in sorted((vlans or {}).items()) if (v.get("bridge") or DEFAULT_BRIDGE) == bridge]
                raise BridgeError(
                    "bridge %s (llmstack_vlans: %s) is %s: make it in PVE first (System > Network), then rerun"
                    % (bridge, ", ".join(users),
                       "declared without bridge-ports (not a bridge)" if named else "not in the interfaces file"))
            aware, vids, _ports = settings(stanzas, bridge)
            opts = options(stanza)
            after_vids = sorted(set(vids) | set(targets[bridge]))
            values = {}
            if not aware or opts.get(VLAN_AWARE) != "yes":
                values[VLAN_AWARE] = "yes"
            if after_vids != vids or VIDS not in opts:
                values[VIDS] = format_vids(after_vids)
            if values:
                if bridge not in record["bridges"]:
                    record["bridges"][bridge] = dict((key, opts.get(key)) for key in MANAGED)
                content = edit(content, bridge, values)
            report[bridge] = {"before": {"vlan_aware": aware, "vids": format_vids(vids)},
                              "after": {"vlan_aware": True, "vids": format_vids(after_vids)}}
    else:
        for bridge, previous in sorted(record["bridges"].items()):
            stanza = bridge_stanza(stanzas, bridge)
            if stanza is not None:
                aware, vids, _ports = settings(stanzas, bridge)
                content = edit(content, bridge, dict((key, previous.get(key)) for key in MANAGED))
                after = parse(content)
                after_aware, after_vids, _ports = settings(after, bridge)
                report[bridge] = {"before": {"vlan_aware": aware, "vids": format_vids(vids)},
                                  "after": {"vlan_aware": after_aware, "vids": format_vids(after_vids)}}
        record = {"bridges": {}}
    final = parse(content)
    cut = cuts(final, mgmt)
    if cut and not cuts(stanzas, mgmt):      # refused only when this change would do it, not as the file stands
        raise BridgeError(cut)
    concerned = sorted(report)
    drift = mismatches(final, concerned, runtime) if runtime is not None else []
    changed = content != text
    return {"content": content, "changed": changed, "record": record, "bridges": report,
            "reload": changed or bool(drift), "mismatches": drift}


def cuts(stanzas, mgmt):
    """Why the file would cut the controller's address (None when it would not)."""
    if not mgmt or mgmt.get("local") or not mgmt.get("bridge") or mgmt.get("vid") is None:
        return None
    bridge, vid = mgmt["bridge"], int(mgmt["vid"])
    if bridge_stanza(stanzas, bridge) is None:
        return None
    aware, vids, _ports = settings(stanzas, bridge)
    if aware and vid not in vids:
        return ("refused: the controller reaches this host at %s on %s (VLAN %d of %s), and a VLAN-aware %s "
                "carrying only VLAN %s would cut it off. Add a VLAN with id %d and bridge %s to llmstack_vlans "
                "(or to the bridge's bridge-vids), or reach the host another way; nothing was changed"
                % (mgmt["address"], mgmt["interface"], vid, bridge, bridge, format_vids(vids) or "none", vid, bridge))
    return None
