# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The network policy of a GPU VM in PVE's own firewall, through the API: what it should be, and what to change.

Plain Python (the ``pve_firewall`` module is the thin wrapper that reads and writes the API). For one VM it owns:

- cluster IP sets ``llmstack-<vmid>-ssh`` (the controller, the SSH VLANs, the admin hosts) and
  ``llmstack-<vmid>-<port>`` (the consumers of each endpoint on the VM, from the topology), entries exactly;
- the cluster security group ``llmstack-<vmid>`` (PVE allows 18 characters): its rules exactly, in order;
- one rule of the VM, ``GROUP llmstack-<vmid>``, kept first; the VM's other rules are left as they are;
- the VM firewall options it sets (``enable``, ``policy_in`` DROP, ``policy_out`` ACCEPT, ``log_level_in``);
- with ``cluster_enable``: the datacenter firewall switched on and the controller's addresses in the datacenter's
  ``management`` IP set (PVE lets that set reach the hosts' API and SSH once the firewall is on), added to what is
  there, each entry marked with :data:`MARK`.

:func:`desired` computes it from the topology (the same sources as the nftables ruleset of
``network_policy.build``); :func:`plan` compares it with what the API returned and lists the requests, in the order
they must be made (sets before the rules that name them, the VM's switch last); :func:`absent_plan` lists the way
back (the VM's rule, the group, the sets, the options back to PVE's defaults).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.pvegpu.llmstack.plugins.module_utils import network_policy

MARK = "pvegpu.llmstack"
PREFIX = "llmstack"
RULE_FIELDS = ("type", "action", "macro", "source", "dest", "proto", "dport", "icmp-type", "enable", "comment")
OPTION_NAMES = ("enable", "policy_in", "policy_out", "log_level_in")


class PveFirewallError(network_policy.NetworkPolicyError):
    """Bad settings, or a host that is not a GPU VM of the topology."""


def group_name(vmid):
    return "%s-%s" % (PREFIX, vmid)


def _canonical_cidr(text):
    """'10.0.0.5/32' -> '10.0.0.5', '10.0.1.0/24' -> '10.0.1.0/24' (host bits dropped, as PVE stores them)."""
    try:
        net = ipaddress.ip_network(str(text).strip(), strict=False)
    except ValueError:
        return str(text).strip()
    return str(net.network_address) if net.prefixlen == net.max_prefixlen else str(net)


def _cidrs(addresses):
    v4, v6 = network_policy._split(addresses)
    return sorted(set(_canonical_cidr(a) for a in v4 + v6))


def normalise_rule(rule):
    """A rule as compared: only the fields we set, values as strings, PVE's bookkeeping (pos, digest, ipversion)
    dropped, an unset ``enable`` as PVE stores it (0)."""
    result = {}
    for key in RULE_FIELDS:
        value = rule.get(key)
        if value is None or value == "":
            continue
        result[key] = str(value)
    result.setdefault("enable", "0")
    return result


def desired(topology, host, settings):
    """What ``host``'s PVE firewall should hold. ``settings``: those of ``network_policy.build`` and ``log``
    (bool), ``cluster_enable`` (bool). Raises PveFirewallError naming every problem."""
    settings = dict(settings or {})
    problems = network_policy.check_settings(dict(
        ("network_policy_" + k, v) for k, v in settings.items()
        if k in ("controller_addresses", "admin_addresses", "ssh_vlans", "admin_groups", "ssh_port")))
    data = (topology.get("hosts") or {}).get(host)
    vm = (data or {}).get("vm") or {}
    if data is None:
        problems.append("host %s is not in the topology" % host)
    elif not vm.get("vmid") or not (vm.get("pve_node") or vm.get("node")):
        problems.append("network_policy_pve_firewall: %s is not a VM this collection creates (gpu_vm_vmid and "
                        "gpu_vm_node): the PVE firewall backend filters those VMs only" % host)
    if problems:
        raise PveFirewallError(problems)
    vmid = int(vm["vmid"])
    vlans = settings.get("vlans") or {}
    ssh_port = int(settings.get("ssh_port") or 22)
    ipsets = {}
    group = group_name(vmid)
    ssh_set = "%s-%d-ssh" % (PREFIX, vmid)
    ipsets[ssh_set] = _cidrs(list(settings.get("controller_addresses") or [])
                             + network_policy._vlan_cidrs(vlans, settings.get("ssh_vlans") or ["mgmt"])
                             + network_policy.admin_addresses(topology, settings))
    rules = [{"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": str(ssh_port), "source": "+" + ssh_set,
              "enable": "1", "comment": "%s: SSH from the controller, the SSH VLANs and the admin hosts" % MARK},
             {"type": "in", "action": "ACCEPT", "macro": "Ping", "enable": "1",
              "comment": "%s: ICMP echo" % MARK},
             {"type": "in", "action": "ACCEPT", "proto": "ipv6-icmp", "icmp-type": "echo-request", "enable": "1",
              "comment": "%s: ICMPv6 echo" % MARK}]
    endpoints = [e for e in topology.get("endpoints") or []
                 if e["host"] == host and not network_policy._is_loopback(e["address"])]
    by_port = {}
    for endpoint in sorted(endpoints, key=lambda e: (e["port"], e["service"], e["address"])):
        key = (endpoint["port"], endpoint.get("port_end", endpoint["port"]), endpoint.get("proto", "tcp"))
        by_port.setdefault(key, []).append(endpoint)
    for (port, port_end, proto), items in sorted(by_port.items()):
        # One IP set per port (per range and protocol when not the TCP port alone): PVE's names allow [A-Za-z0-9-_].
        name = "%s-%d-%d" % (PREFIX, vmid, port) + ("" if (port_end, proto) == (port, "tcp")
                                                    else "-%d-%s" % (port_end, proto))
        sources = []
        for endpoint in items:
            sources.extend(network_policy.endpoint_sources(endpoint, topology, settings))
        ipsets[name] = _cidrs(sources)
        if not ipsets[name]:
            continue
        addresses = sorted({e["address"] for e in items})
        rule = {"type": "in", "action": "ACCEPT", "proto": proto, "source": "+" + name,
                "dport": network_policy.port_match(items[0], ":"),
                "enable": "1", "comment": "%s: %s" % (MARK, ", ".join(sorted({"%s %s" % (e["role"], e["service"])
                                                                              for e in items})))}
        if len(addresses) == 1 and network_policy._daddr(addresses[0])[1]:
            rule["dest"] = network_policy._daddr(addresses[0])[1]
        rules.append(rule)
    log = settings.get("log", True)
    return {
        "node": vm.get("pve_node") or vm.get("node"), "vmid": vmid, "group": group,
        "group_comment": "%s: %s" % (MARK, host),
        "group_rules": [normalise_rule(r) for r in rules],
        "ipsets": ipsets,
        "vm_rule": normalise_rule({"type": "group", "action": group, "enable": 1, "comment": MARK}),
        "vm_options": {"enable": "1", "policy_in": "DROP", "policy_out": "ACCEPT",
                       "log_level_in": "info" if log else "nolog"},
        "cluster_enable": bool(settings.get("cluster_enable")),
        "management": _cidrs(settings.get("controller_addresses") or []) if settings.get("cluster_enable") else [],
    }


def nic_problems(vm_config, vmid):
    """The VM's NICs whose traffic PVE's VM firewall would not see (no ``firewall=1``)."""
    problems = []
    for key in sorted(k for k in vm_config or {} if k.startswith("net") and k[3:].isdigit()):
        parts = dict(p.split("=", 1) for p in str(vm_config[key]).split(",") if "=" in p)
        if parts.get("firewall") not in ("1", "true", "on", "yes"):
            problems.append("VM %s: %s has no firewall=1, so PVE's firewall does not filter it: set "
                            "gpu_vm_nic_firewall: true (and run the gpu_vms stage) or turn network_policy_pve_firewall "
                            "off" % (vmid, key))
    return problems


def _op(method, path, why, **data):
    return {"method": method, "path": path, "data": data, "why": why}


def _ipset_ops(name, comment, have, want, remove_only_marked=False):
    """Requests that make cluster IP set ``name`` hold ``want`` (a list of canonical CIDRs). ``have``: None (no
    set) or {comment, entries: [{cidr, comment}]}."""
    ops = []
    path = ["cluster", "firewall", "ipset"]
    if have is None:
        ops.append(_op("post", path, "create IP set %s" % name, name=name, comment=comment))
        present = {}
    else:
        present = dict((_canonical_cidr(e.get("cidr")), e) for e in have.get("entries") or [])
    for cidr in want:
        if cidr not in present:
            ops.append(_op("post", path + [name], "add %s to IP set %s" % (cidr, name), cidr=cidr, comment=MARK))
    for cidr, entry in sorted(present.items()):
        if cidr in want:
            continue
        if remove_only_marked and entry.get("comment") != MARK:
            continue
        ops.append(_op("delete", path + [name, entry.get("cidr")], "remove %s from IP set %s" % (cidr, name)))
    return ops


def group_ops(group, have_rules, want_rules):
    """Requests that turn security group ``group``'s rules from ``have_rules`` into ``want_rules``, add before
    delete: PVE adds a rule at the top, so the wanted ones go in last to first (above the old ones, which still
    hold), then the old ones, now below them, are deleted. SSH is never missing and every moment's rules are the old
    set, the old set with new rules above it, or the new set. Nothing when they are equal."""
    if have_rules == want_rules:
        return []
    base = ["cluster", "firewall", "groups", group]
    ops = [_op("post", base, "add to %s: %s" % (group, rule.get("comment")), **rule) for rule in reversed(want_rules)]
    ops += [_op("delete", base + [str(len(want_rules))], "remove an old rule of security group %s" % group)
            for _rule in have_rules]
    return ops


def plan(current, want):
    """The requests that turn ``current`` into ``want`` (:func:`desired`), in order. ``current`` is what the API
    holds: {ipsets: {name: {comment, entries: [{cidr, comment}]}} (this VM's sets and ``management``), groups:
    {name: [rule]} (this VM's group), vm_rules: [rule], vm_options: {}, cluster_options: {}}. Each request:
    {method, path (list of segments), data, why}."""
    ops = []
    ipsets = current.get("ipsets") or {}
    for name in sorted(want["ipsets"]):
        ops += _ipset_ops(name, MARK, ipsets.get(name), want["ipsets"][name])
    # Sets of ours for ports this VM no longer serves: their rules go with the group's rewrite, then they go.
    stale_sets = sorted(n for n in ipsets if n.startswith("%s-%d-" % (PREFIX, want["vmid"]))
                        and n not in want["ipsets"])
    if want["cluster_enable"]:
        ops += _ipset_ops("management", MARK, ipsets.get("management"), want["management"] or [],
                          remove_only_marked=True)
    group = want["group"]
    groups = current.get("groups") or {}
    base = ["cluster", "firewall", "groups"]
    have_rules = [normalise_rule(r) for r in groups.get(group) or []] if group in groups else None
    if have_rules is None:
        ops.append(_op("post", base, "create security group %s" % group, group=group, comment=want["group_comment"]))
    ops += group_ops(group, have_rules or [], want["group_rules"])
    for name in stale_sets:
        ops.append(_op("delete", ["cluster", "firewall", "ipset", name], "delete IP set %s (no longer used)" % name,
                       force=1))
    vm_base = ["nodes", want["node"], "qemu", str(want["vmid"]), "firewall"]
    vm_rules = [normalise_rule(r) for r in current.get("vm_rules") or []]
    positions = [i for i, r in enumerate(vm_rules) if r.get("type") == "group" and r.get("action") == group]
    if not positions:
        ops.append(_op("post", vm_base + ["rules"], "add rule GROUP %s to VM %s, first" % (group, want["vmid"]),
                       **want["vm_rule"]))
    else:
        first = positions[0]
        if vm_rules[first] != want["vm_rule"]:
            ops.append(_op("put", vm_base + ["rules", str(first)], "update rule GROUP %s of VM %s"
                           % (group, want["vmid"]), **dict(want["vm_rule"], type=None)))
        if first != 0:
            ops.append(_op("put", vm_base + ["rules", str(first)], "move rule GROUP %s of VM %s first"
                           % (group, want["vmid"]), moveto=0))
        for extra in reversed(positions[1:]):
            ops.append(_op("delete", vm_base + ["rules", str(extra)], "remove a second GROUP %s rule" % group))
    options = current.get("vm_options") or {}
    changes = dict((k, v) for k, v in want["vm_options"].items() if str(options.get(k, "")) != v)
    if changes:
        ops.append(_op("put", vm_base + ["options"], "set VM %s firewall options %s" % (
            want["vmid"], ", ".join("%s=%s" % kv for kv in sorted(changes.items()))), **changes))
    if want["cluster_enable"] and int((current.get("cluster_options") or {}).get("enable") or 0) < 1:
        ops.append(_op("put", ["cluster", "firewall", "options"], "switch the datacenter firewall on", enable=1))
    for op in ops:
        op["data"] = dict((k, v) for k, v in op["data"].items() if v is not None)
    return ops


def absent_plan(current, node, vmid):
    """The way back for VM ``vmid``: its GROUP rule, the security group, the IP sets ``llmstack-<vmid>-*``, and the
    options this module sets back to PVE's defaults. The datacenter switch and the management set stay (other VMs
    and the PVE hosts may rely on them)."""
    ops = []
    group = group_name(vmid)
    vm_base = ["nodes", node, "qemu", str(vmid), "firewall"]
    vm_rules = [normalise_rule(r) for r in current.get("vm_rules") or []]
    for pos in reversed([i for i, r in enumerate(vm_rules) if r.get("type") == "group" and r.get("action") == group]):
        ops.append(_op("delete", vm_base + ["rules", str(pos)], "remove rule GROUP %s from VM %s" % (group, vmid)))
    groups = current.get("groups") or {}
    if group in groups:
        for _rule in groups[group]:
            ops.append(_op("delete", ["cluster", "firewall", "groups", group, "0"],
                           "remove the rules of security group %s" % group))
        ops.append(_op("delete", ["cluster", "firewall", "groups", group], "delete security group %s" % group))
    for name in sorted(current.get("ipsets") or {}):
        if name.startswith("%s-%d-" % (PREFIX, vmid)):
            ops.append(_op("delete", ["cluster", "firewall", "ipset", name], "delete IP set %s" % name, force=1))
    options = current.get("vm_options") or {}
    ours = [k for k in OPTION_NAMES if k in options]
    managed = group in groups or any(r.get("type") == "group" and r.get("action") == group for r in vm_rules)
    if ours and managed:
        ops.append(_op("put", vm_base + ["options"], "VM %s firewall options back to PVE's defaults (%s)"
                       % (vmid, ", ".join(ours)), delete=",".join(ours)))
    return ops


def wanted_summary(current, want):
    """:func:`summary` after :func:`plan`'s requests (the diff's after)."""
    before = summary(current, want["vmid"], want["group"])
    ipsets = dict((k, sorted(v)) for k, v in want["ipsets"].items())
    if want["cluster_enable"]:
        kept = [_canonical_cidr(e.get("cidr")) for e in ((current.get("ipsets") or {}).get("management") or {})
                .get("entries") or [] if e.get("comment") != MARK]
        ipsets["management"] = sorted(set(kept) | set(want["management"]))
    elif "management" in before["ipsets"]:
        ipsets["management"] = before["ipsets"]["management"]
    return {"ipsets": dict(sorted(ipsets.items())), "group_rules": want["group_rules"], "vm_rule_first": True,
            "vm_options": dict(want["vm_options"]),
            "cluster_enable": want["cluster_enable"] or before["cluster_enable"]}


def summary(current, vmid, group):
    """Our objects in ``current``, for the diff: {ipsets: {name: [cidr]}, group_rules, vm_options, vm_rule_first}."""
    ipsets = current.get("ipsets") or {}
    ours = dict((name, sorted(_canonical_cidr(e.get("cidr")) for e in data.get("entries") or []))
                for name, data in sorted(ipsets.items()) if name.startswith("%s-%d-" % (PREFIX, vmid)))
    if "management" in ipsets:
        ours["management"] = sorted(_canonical_cidr(e.get("cidr")) for e in ipsets["management"].get("entries") or [])
    group_rules = (current.get("groups") or {}).get(group)
    vm_rules = [normalise_rule(r) for r in current.get("vm_rules") or []]
    return {"ipsets": ours,
            "group_rules": [normalise_rule(r) for r in group_rules] if group_rules is not None else None,
            "vm_rule_first": bool(vm_rules) and vm_rules[0].get("action") == group,
            "vm_options": dict((k, str(v)) for k, v in sorted((current.get("vm_options") or {}).items())
                               if k in OPTION_NAMES),
            "cluster_enable": int((current.get("cluster_options") or {}).get("enable") or 0) >= 1}


def render(topology, host, settings):
    """``network_policy.build`` and, with ``pve_firewall`` in ``settings`` and ``host`` a GPU VM of the topology,
    the VM's PVE firewall (:func:`desired`, ``cluster_enable`` from ``pve_cluster_enable``) as ``pve_firewall``
    (None otherwise: the other hosts are not guests PVE filters)."""
    settings = dict(settings or {})
    result = network_policy.build(topology, host, settings)
    result["pve_firewall"] = None
    if settings.get("pve_firewall") and ((topology.get("hosts") or {}).get(host) or {}).get("vm"):
        result["pve_firewall"] = desired(topology, host, dict(settings, cluster_enable=settings.get(
            "pve_cluster_enable", False)))
    return result
