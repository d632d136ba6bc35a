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
- The way back: the option lines as they were before the collection first changed a bridge are recorded, as
  written (RECORD_NAME under the role's state directory, only the keys it changed); the revert (``state: absent``)
  puts those lines back - removed where there were none - so the file is as it was, to the byte, unless someone
  edited those two lines since (the revert then overwrites the edit).
- Refused before any reload: a bridge the file does not declare (or declares without ``bridge-ports``), an
  unreadable ``bridge-vids``, and a result that would cut an address the controller uses (every address of the name
  it connects to that the host has): on a VLAN interface of a bridge (``vmbr0.10``, or ``vlan-raw-device vmbr0``)
  whose VLAN the VLAN-aware bridge would not carry; or untagged on a bridge that turns VLAN-aware while it or its
  ports have a ``bridge-pvid``/``bridge-access`` other than 1 (untagged frames would go to that VLAN). The check is
  made on the file as it will be reloaded, also when the file is already so and only the kernel differs. An address
  on the bridge itself otherwise stays on the untagged PVID 1 (this plan never sets ``bridge-pvid``); an address on
  an interface outside the bridges is not touched. Where the controller's address is on none of the host's
  interfaces (NAT, a jump host), the plan cannot tell and refuses unless told which address to protect.
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
VARIABLE = "pve_bridge_vlans (default llmstack_vlans)"
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
            raise BridgeError("%s.%s: no id" % (VARIABLE, name))
        try:
            vid = int(vlan["id"])
        except (TypeError, ValueError):
            raise BridgeError("%s.%s.id: %r is not a number" % (VARIABLE, name, vlan["id"]))
        if not 1 <= vid <= 4094:
            raise BridgeError("%s.%s.id: %d is outside 1-4094" % (VARIABLE, name, vid))
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
    """(vlan_aware, [vids], [ports]) of a bridge as the file has it; ports is None when ``bridge-ports`` is a
    ``glob``/``regex`` pattern (the kernel's members are taken then)."""
    stanza = bridge_stanza(stanzas, bridge)
    opts = options(stanza) if stanza else {}
    aware = is_true(opts.get(VLAN_AWARE))
    vids = parse_vids(opts.get(VIDS), "%s: %s" % (bridge, VIDS)) if VIDS in opts else []
    words = [p for p in (opts.get("bridge-ports") or "").split() if p.lower() != "none"]
    ports = None if words and words[0] in ("glob", "regex") else words
    return aware, vids, ports


def untagged_vlan_options(stanzas, bridge):
    """The ``bridge-pvid``/``bridge-access`` lines (other than 1) of the bridge and of its ports: with VLAN filtering
    on, they decide which VLAN untagged traffic lands on."""
    _aware, _vids, ports = settings(stanzas, bridge)
    found = []
    for name in [bridge] + list(ports or []):
        for stanza in stanzas:
            if stanza["name"] == name:
                for option in stanza["options"]:
                    if option[1] in ("bridge-pvid", "bridge-access") and option[2].strip() != "1":
                        found.append("%s: %s %s" % (name, option[1], option[2].strip()))
    return found


def option_lines(text, bridge):
    """{managed key: the line as written} of the bridge's stanza (first occurrence), None for a missing key."""
    lines = text.splitlines()
    stanza = bridge_stanza(parse(text), bridge)
    found = dict((key, None) for key in MANAGED)
    for index, key, _value in stanza["options"]:
        if key in MANAGED and found[key] is None:
            found[key] = lines[index]
    return found


def option_line(text, bridge, key, value):
    """``key value`` in the indentation of the line it replaces, else of the stanza's first option (else a tab)."""
    lines = text.splitlines()
    stanza = bridge_stanza(parse(text), bridge)
    indent = None
    for index, found, _value in stanza["options"]:
        match = OPTION.match(lines[index])
        if found == key and match:
            indent = match.group(1)
            break
        if indent is None and match and match.group(1):
            indent = match.group(1)
    return "%s%s %s" % (indent if indent is not None else "\t", key, value)


def edit(text, bridge, lines_by_key):
    """``text`` with the managed options of ``bridge`` set to ``lines_by_key`` ({key: the whole line, or None to
    remove it}): the first line of a key is replaced in place (its repeats dropped), a new one goes after the stanza's
    last option. Every other byte of the file is kept."""
    lines = text.splitlines()
    trailing_newline = text.endswith("\n")
    stanza = bridge_stanza(parse(text), bridge)
    present = {}
    for index, key, _value in stanza["options"]:
        if key in MANAGED:
            present.setdefault(key, []).append(index)
    drop, added = set(), []
    for key in MANAGED:
        if key not in lines_by_key:
            continue
        indexes = present.get(key, [])
        if lines_by_key[key] is None:
            drop.update(indexes)
        elif indexes:
            lines[indexes[0]] = lines_by_key[key]
            drop.update(indexes[1:])
        else:
            added.append(lines_by_key[key])
    last = stanza["options"][-1][0] if stanza["options"] else stanza["start"]
    out = []
    for index, line in enumerate(lines):
        if index not in drop:
            out.append(line)
        if index == last:
            out.extend(added)
    return "\n".join(out) + ("\n" if trailing_newline or not out else "")


# ------------------------------------------------------------------------------------------ the running state

def runtime_from(links, bridge_vlans, addresses):
    """{links: {name: {kind, master, vlan_filtering, vlan_id, parent}}, vids: {port: set}, addresses: {ip: [names]}}
    from ``ip -d -j link show``, ``bridge -j vlan show`` and ``ip -j addr show`` (parsed JSON). An address can sit on
    several interfaces (an IPv6 link-local one on a bridge and on its VLAN interfaces, which share its MAC)."""
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
                names = result["addresses"].setdefault(info["local"], [])
                if link.get("ifname") not in names:
                    names.append(link.get("ifname"))
    return result


# Ports PVE adds to a bridge for its guests (taps, firewall links, containers' veths): not the bridge's uplinks.
GUEST_PORT = re.compile(r"^(tap|fwpr|fwln|veth|vmtab)")


def ports_of(stanzas, bridge, runtime):
    """The bridge's uplinks: its ``bridge-ports``, or for a glob/regex the kernel's members that are not guest ports."""
    ports = settings(stanzas, bridge)[2]
    if ports is not None:
        return ports
    return sorted(name for name, link in runtime["links"].items()
                  if link.get("master") == bridge and not GUEST_PORT.match(name or ""))


def mismatches(stanzas, bridges, runtime):
    """What the kernel's bridges lack against the file, for ``bridges`` (empty: they match)."""
    found = []
    for bridge in bridges:
        if bridge_stanza(stanzas, bridge) is None:
            continue
        aware, vids, _ports = settings(stanzas, bridge)
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
        for port in ports_of(stanzas, bridge, runtime):
            if port not in runtime["links"]:
                found.append("%s: its port %s does not exist" % (bridge, port))
                continue
            missing = sorted(set(vids) - runtime["vids"].get(port, set()))
            if missing:
                found.append("%s: port %s does not carry VLAN %s" % (bridge, port, format_vids(missing)))
    return found


# ------------------------------------------------------------------------------------------ the controller's address

def management(address, connection, runtime, resolve=None):
    """Where the controller's address sits: {address, interface, bridge, vid, local, locations: [{address,
    interface, bridge, vid}]}, the first location at the top level. ``local`` when the connection does not use the
    network. A name is looked up with ``resolve`` (name -> [addresses], on the host) and every address of it the host
    has is a location (the controller may use any of them); ``fe80::1%vmbr0.5`` names its interface. Raises
    BridgeError when no address is on the host's interfaces."""
    if (connection or "ssh") in LOCAL_CONNECTIONS:
        return {"address": address, "interface": None, "bridge": None, "vid": None, "local": True, "locations": []}
    text, _sep, zone = (address or "").partition("%")
    try:
        candidates = [str(ipaddress.ip_address(text))]
    except ValueError:
        zone = ""
        looked_up = resolve(address) if resolve and address else []
        candidates = [str(ipaddress.ip_address(a.split("%")[0])) for a in looked_up]
        if not candidates:
            raise BridgeError("the address the controller uses (%r) is neither an IP address nor a name this host "
                              "resolves: set pve_bridge_management_address to the host's address it connects to"
                              % address)
    locations = []
    for ip in candidates:
        if ipaddress.ip_address(ip).is_loopback:
            continue
        for interface in runtime["addresses"].get(ip, []):
            if zone and interface != zone:
                continue
            link = runtime["links"].get(interface) or {}
            bridge, vid = None, None
            if link.get("kind") == "vlan" and link.get("parent"):
                bridge, vid = link["parent"], link.get("vlan_id")
            elif link.get("kind") == "bridge":
                bridge = interface
            locations.append({"address": ip, "interface": interface, "bridge": bridge, "vid": vid})
    if not locations:
        raise BridgeError("the controller's address %s is on none of this host's interfaces (%s): set "
                          "pve_bridge_management_address to the host's own address its traffic arrives on, so "
                          "that the change can be checked against it"
                          % (", ".join(candidates), ", ".join(sorted(runtime["addresses"])) or "none"))
    return dict(locations[0], local=False, locations=locations)


# ------------------------------------------------------------------------------------------ the plan

def plan(text, vlans, record, state, mgmt, runtime):
    """What to write and why. ``record``: the option lines as they were before this collection first changed each
    bridge ({bridges: {name: {key: line or None}}}, only the keys it changed). Returns {content, changed, record,
    bridges: {name: {before, after}}, reload, mismatches}. Raises BridgeError before anything changes."""
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
                    "bridge %s (pve_bridge_vlans, default llmstack_vlans: %s) is %s: make it in PVE first (System > "
                    "Network), then rerun" % (bridge, ", ".join(users), "declared without bridge-ports (not a bridge)"
                                              if named else "not in the interfaces file"))
            aware, vids, _ports = settings(stanzas, bridge)
            opts = options(stanza)
            after_vids = sorted(set(vids) | set(targets[bridge]))
            values = {}
            if not aware or opts.get(VLAN_AWARE) != "yes":
                values[VLAN_AWARE] = "yes"
            if after_vids != vids or VIDS not in opts:
                values[VIDS] = format_vids(after_vids)
            if values:
                before = option_lines(content, bridge)
                kept = dict(record["bridges"].get(bridge) or {})
                for key in values:
                    kept.setdefault(key, before[key])       # the line before the collection's first change
                record["bridges"][bridge] = kept
                content = edit(content, bridge, dict((key, option_line(content, bridge, key, value))
                                                     for key, value in values.items()))
            report[bridge] = {"before": {"vlan_aware": aware, "vids": format_vids(vids)},
                              "after": {"vlan_aware": True, "vids": format_vids(after_vids)}}
    else:
        for bridge, previous in sorted(record["bridges"].items()):
            if bridge_stanza(stanzas, bridge) is not None:
                aware, vids, _ports = settings(stanzas, bridge)
                content = edit(content, bridge, dict((key, previous.get(key)) for key in MANAGED if key in previous))
                after_aware, after_vids, _ports = settings(parse(content), bridge)
                report[bridge] = {"before": {"vlan_aware": aware, "vids": format_vids(vids)},
                                  "after": {"vlan_aware": after_aware, "vids": format_vids(after_vids)}}
        record = {"bridges": {}}
    final = parse(content)
    concerned = sorted(report)
    drift = mismatches(final, concerned, runtime) if runtime is not None else []
    changed = content != text
    reload = changed or bool(drift)
    cut = cuts(final, mgmt, runtime)
    if cut and reload:          # a reload would apply it, whether the file changes now or changed before
        raise BridgeError(cut)
    return {"content": content, "changed": changed, "record": record, "bridges": report, "reload": reload,
            "mismatches": drift}


def cuts(stanzas, mgmt, runtime=None):
    """Why the file, once reloaded, would cut one of the controller's addresses off (None when it would not): on a
    VLAN interface of a VLAN-aware bridge that does not carry its VLAN, or untagged on a bridge that turns VLAN-aware
    with a PVID other than 1 on it or its ports."""
    if not mgmt or mgmt.get("local"):
        return None
    for where in mgmt.get("locations") or [mgmt]:
        bridge = where.get("bridge")
        if not bridge or bridge_stanza(stanzas, bridge) is None:
            continue
        aware, vids, _ports = settings(stanzas, bridge)
        if not aware:
            continue
        if where.get("vid") is not None and int(where["vid"]) not in vids:
            vid = int(where["vid"])
            return ("refused: the controller reaches this host at %s on %s (VLAN %d of %s), and a VLAN-aware %s "
                    "carrying only VLAN %s would cut it off. Add a VLAN with id %d and bridge %s to "
                    "pve_bridge_vlans (default llmstack_vlans), or to the bridge's bridge-vids, or reach the host "
                    "another way; nothing was changed"
                    % (where["address"], where["interface"], vid, bridge, bridge, format_vids(vids) or "none", vid,
                       bridge))
        filtering = bool(((runtime or {}).get("links", {}).get(bridge) or {}).get("vlan_filtering"))
        pvids = untagged_vlan_options(stanzas, bridge)
        if where.get("vid") is None and where.get("interface") == bridge and pvids and not filtering:
            return ("refused: the controller reaches this host at %s, untagged on %s, and with VLAN filtering on "
                    "untagged frames would follow %s instead of VLAN 1 - this change cannot tell whether that cuts "
                    "it off. Make the bridge VLAN-aware by hand (PVE's console), then rerun; nothing was changed"
                    % (where["address"], bridge, "; ".join(pvids)))
    return None
