# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The network policy of one host from the topology (seed 000 section network): default deny inbound, each service
endpoint open to the addresses of its consumers only, SSH from the controller and the admin VLANs.

Pure functions: :func:`build` returns the host's whole nftables ruleset (one ``table inet llmstack``, loadable
with ``nft -f`` in an empty network namespace) and the reachability matrix of the site; :func:`check_settings`
names every bad role variable. The ``network_policy`` role applies the ruleset (``nft -c`` first, an atomic
``nft -f``, a rollback timer); the ``network_policy_render`` module is a thin wrapper.

Two paths reach a service on a host, and both are filtered:

- ``input``: a process listening on the host (Caddy, a systemd vLLM unit, docker-proxy);
- ``forward``: a port Docker publishes is DNATed to its container before the input hook, so it is judged in a
  ``forward`` chain on its original destination (``ct original ip daddr`` / ``ct original proto-dst``), the way
  Docker's own DOCKER-USER chain is meant to be used. The chain's policy stays accept: containers' own traffic
  and Docker's other rules are untouched; only new connections to published ports are judged.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

TABLE = "llmstack"
# Services a person opens in a browser or queries by hand: the admin hosts may reach them too.
ADMIN_SERVICES = ("prometheus", "alertmanager", "grafana", "langfuse-web")
# The interfaces a host's containers come in on (Docker's default bridge and its compose networks' bridges).
CONTAINER_INTERFACES = ("docker0", "br-*")
SET_NAME_RE = re.compile(r"[^a-z0-9_]+")
ICMP_V4 = "echo-request, destination-unreachable, time-exceeded, parameter-problem"
ICMP_V6 = ("echo-request, destination-unreachable, packet-too-big, time-exceeded, parameter-problem, "
           "nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert")


class NetworkPolicyError(value_checks.SettingsProblems):
    """Bad settings or a host the topology does not know, each problem naming the variable."""


def _network(text):
    try:
        return ipaddress.ip_network(str(text), strict=False)
    except ValueError:
        return None


def check_settings(settings):
    """Every problem in the role's variables (full names as keys), each naming the variable."""
    problems = []
    controller = settings.get("network_policy_controller_addresses")
    if "network_policy_controller_addresses" in settings:
        if not isinstance(controller, list) or not controller:
            problems.append("network_policy_controller_addresses: give the address(es) Ansible connects from (a list "
                            "of addresses or CIDRs); without it the policy would cut the controller off")
        else:
            for index, item in enumerate(controller):
                if _network(item) is None:
                    problems.append("network_policy_controller_addresses[%d]: %r is not an address or CIDR"
                                    % (index, item))
    for variable in ("network_policy_admin_addresses",):
        value = settings.get(variable)
        if value is None:
            continue
        if not isinstance(value, list):
            problems.append("%s: must be a list of addresses or CIDRs" % variable)
            continue
        for index, item in enumerate(value):
            if _network(item) is None:
                problems.append("%s[%d]: %r is not an address or CIDR" % (variable, index, item))
    for variable in ("network_policy_ssh_vlans", "network_policy_admin_groups", "network_policy_container_interfaces"):
        value = settings.get(variable)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            problems.append("%s: must be a list of names" % variable)
    port = settings.get("network_policy_ssh_port")
    if port is not None and (isinstance(port, bool) or not str(port).isdigit() or not 1 <= int(port) <= 65535):
        problems.append("network_policy_ssh_port: %r is not a TCP port (1-65535)" % (port,))
    rate = settings.get("network_policy_log_rate")
    if rate is not None and not (isinstance(rate, str) and re.match(r"^[0-9]+/(second|minute|hour)$", rate)):
        problems.append("network_policy_log_rate: %r is not N/second, N/minute or N/hour" % (rate,))
    return problems


def _set_name(endpoint):
    return SET_NAME_RE.sub("_", ("%s_%s_%d" % (endpoint["role"], endpoint["service"], endpoint["port"])).lower())


def _split(addresses):
    """(IPv4 texts, IPv6 texts) of addresses/CIDRs, collapsed (an address inside a listed CIDR is left out: nft
    refuses overlapping elements of an interval set), sorted; a single address without its /32 or /128."""
    nets = {4: [], 6: []}
    for item in addresses:
        net = _network(item)
        if net is not None:
            nets[net.version].append(net)

    def texts(version):
        return [str(n.network_address) if n.prefixlen == n.max_prefixlen else str(n)
                for n in ipaddress.collapse_addresses(nets[version])]

    return texts(4), texts(6)


def _vlan_cidrs(vlans, names):
    return [str((vlans.get(name) or {}).get("cidr")) for name in names if (vlans.get(name) or {}).get("cidr")]


def _host_addresses(topology, host):
    return list(((topology.get("hosts") or {}).get(host) or {}).get("addresses", {}).values())


def admin_addresses(topology, settings):
    """The addresses the admin hosts connect from: network_policy_admin_addresses and the hosts of the admin groups."""
    found = list(settings.get("admin_addresses") or [])
    for _host, data in sorted((topology.get("hosts") or {}).items()):
        if set(data.get("groups") or []) & set(settings.get("admin_groups") or []):
            found.extend(a for a in (data.get("addresses") or {}).values() if a not in found)
    return found


def endpoint_sources(endpoint, topology, settings):
    """Who may open a connection to ``endpoint``: its consumers' addresses (the topology's ``sources``, with a site
    endpoint's own ``sources``), for a service people open by hand (``admin``) the admin hosts', and for one the
    controller calls (``controller``: PVE's API) the controller's."""
    sources = list(endpoint.get("sources") or [])
    if endpoint["service"] in ADMIN_SERVICES or endpoint.get("admin"):
        sources.extend(a for a in admin_addresses(topology, settings) if a not in sources)
    if endpoint.get("controller"):
        sources.extend(a for a in settings.get("controller_addresses") or [] if a not in sources)
    return sources


def port_match(endpoint, separator="-"):
    """``5405-5412`` (nft; PVE's firewall writes ``5405:5412``) or ``8006``."""
    low, high = endpoint["port"], endpoint.get("port_end", endpoint["port"])
    return str(low) if high == low else "%d%s%d" % (low, separator, high)


def own_consumer(endpoint):
    """Whether the endpoint's host is one of its consumers: then its own containers (which reach the host's addresses
    through a Docker bridge, not through lo) may open it, as another consumer host may."""
    return endpoint["host"] in (endpoint.get("consumers") or [])


def _is_loopback(address):
    net = _network(address)
    return net is not None and net.network_address.is_loopback


def _daddr(address):
    """(family keyword, address match) of a listen address; (None, None) for 0.0.0.0/:: (any address)."""
    net = _network(address)
    if net is None or net.network_address.is_unspecified:
        return None, None
    return ("ip" if net.version == 4 else "ip6"), str(net.network_address)


def build(topology, host, settings=None):
    """{ruleset, matrix, sets} of ``host``. ``settings``: controller_addresses, ssh_port (22), ssh_vlans ([mgmt]),
    admin_addresses, admin_groups, vlans (llmstack_vlans), log (true), log_rate (10/minute)."""
    settings = dict(settings or {})
    problems = check_settings(dict(("network_policy_" + k, v) for k, v in settings.items()
                                   if k in ("controller_addresses", "admin_addresses", "ssh_vlans", "admin_groups",
                                            "ssh_port", "log_rate", "container_interfaces")))
    hosts = topology.get("hosts") or {}
    if host not in hosts:
        problems.append("host %s is not in the topology" % host)
    if problems:
        raise NetworkPolicyError(problems)
    vlans = settings.get("vlans") or {}
    ssh_port = int(settings.get("ssh_port") or 22)
    mine = [e for e in topology.get("endpoints") or [] if e["host"] == host and not _is_loopback(e["address"])]
    sets = {}

    def add_set(name, addresses):
        v4, v6 = _split(addresses)
        sets[name + "_v4"] = v4
        sets[name + "_v6"] = v6

    add_set("controller", settings.get("controller_addresses") or [])
    add_set("ssh", _vlan_cidrs(vlans, settings.get("ssh_vlans") or ["mgmt"]) + admin_addresses(topology, settings))
    rules = []
    published = []
    # The host's own containers reach its addresses through a Docker bridge (input, or forward when Docker DNATs a
    # published port): judged by the same endpoints, open where the host is a consumer, never wholesale.
    local, local_published = [], []
    for endpoint in sorted(mine, key=lambda e: (e["port"], e.get("proto", "tcp"), e["service"], e["address"])):
        name = _set_name(endpoint)
        add_set(name, endpoint_sources(endpoint, topology, settings))
        family, daddr = _daddr(endpoint["address"])
        proto, ports = endpoint.get("proto", "tcp"), port_match(endpoint)
        comment = '%s %s on %s:%s/%s' % (endpoint["role"], endpoint["service"], endpoint["address"], ports, proto)
        for version, keyword in ((4, "ip"), (6, "ip6")):
            if family not in (None, keyword):
                continue
            dest = "%s daddr %s " % (keyword, daddr) if daddr else ""
            original = "ct original %s daddr %s " % (keyword, daddr) if daddr else "meta nfproto ipv%d " % version
            if own_consumer(endpoint):
                local.append('%s%s dport %s counter accept comment "%s from its own containers"'
                             % (dest or "meta nfproto ipv%d " % version, proto, ports, comment))
                local_published.append('%smeta l4proto %s ct original proto-dst %s counter accept comment '
                                       '"%s from its own containers"' % (original, proto, ports, comment))
            if not sets["%s_v%d" % (name, version)]:
                continue
            rules.append('%s%s dport %s %s saddr @%s_v%d counter accept comment "%s"'
                         % (dest, proto, ports, keyword, name, version, comment))
            published.append('%smeta l4proto %s ct original proto-dst %s %s saddr @%s_v%d counter accept comment "%s"'
                             % (original, proto, ports, keyword, name, version, comment))
    bridges = [str(b) for b in (settings.get("container_interfaces")
                                if settings.get("container_interfaces") is not None else CONTAINER_INTERFACES)]
    log = settings.get("log", True)
    rate = settings.get("log_rate") or "10/minute"
    lines = ["# Managed by pvegpu.llmstack (network_policy) for %s from the topology; edits are overwritten." % host,
             "# Loaded with `nft -f`: the table is replaced as a whole, atomically.",
             "table inet %s {" % TABLE]
    for name in sorted(sets):
        kind = "ipv4_addr" if name.endswith("_v4") else "ipv6_addr"
        body = "type %s; flags interval;" % kind
        if sets[name]:
            body += " elements = { %s }" % ", ".join(sets[name])
        lines.append("\tset %s { %s }" % (name, body))
    lines += ["\tcounter dropped_input { }", "\tcounter dropped_published { }", "",
              "\tchain input {",
              "\t\ttype filter hook input priority filter; policy drop;",
              '\t\tiifname "lo" accept',
              "\t\tct state established,related accept",
              "\t\tct state invalid drop",
              "\t\tmeta l4proto icmp icmp type { %s } limit rate 100/second accept" % ICMP_V4,
              "\t\tmeta l4proto ipv6-icmp icmpv6 type { %s } limit rate 100/second accept" % ICMP_V6,
              "\t\ttcp dport %d ip saddr @controller_v4 accept" % ssh_port,
              "\t\ttcp dport %d ip6 saddr @controller_v6 accept" % ssh_port,
              "\t\ttcp dport %d ip saddr @ssh_v4 accept" % ssh_port,
              "\t\ttcp dport %d ip6 saddr @ssh_v6 accept" % ssh_port]
    lines += ['\t\tiifname "%s" jump from_containers' % bridge for bridge in bridges]
    lines += ["\t\t" + rule for rule in rules]
    if log:
        lines.append('\t\tlimit rate %s burst 20 packets log prefix "llmstack drop in: " level info' % rate)
    lines += ["\t\tcounter name dropped_input drop", "\t}", "",
              "\tchain forward {",
              "\t\ttype filter hook forward priority filter - 10; policy accept;",
              "\t\tct state established,related accept",
              "\t\tct status dnat jump published",
              "\t}", "",
              "\tchain published {"]
    lines += ['\t\tiifname "%s" jump published_from_containers' % bridge for bridge in bridges]
    lines += ["\t\t" + rule for rule in published]
    if log:
        lines.append('\t\tlimit rate %s burst 20 packets log prefix "llmstack drop published: " level info' % rate)
    lines += ["\t\tcounter name dropped_published drop", "\t}", "",
              "\t# From a container of this host (a Docker bridge) to the host's own endpoints: those it consumes.",
              "\tchain from_containers {"]
    lines += ["\t\t" + rule for rule in local]
    lines += ["\t}", "", "\tchain published_from_containers {"]
    lines += ["\t\t" + rule for rule in local_published]
    lines += ["\t}", "}"]
    ruleset = "\n".join(lines) + "\n"
    return {"ruleset": ruleset, "persisted": persisted(ruleset), "matrix": matrix(topology, settings), "sets": sets}


def persisted(ruleset):
    """The file nftables.service loads: the ruleset as a script that replaces the table (empty table, delete, the
    table), so that loading it again - a reload, a restart - needs no ``flush ruleset``, which would take every other
    table with it (Docker's among them)."""
    lines = ruleset.splitlines(True)
    head = [line for line in lines if line.startswith("#")]
    body = "".join(lines[len(head):])
    return "".join(head) + replace_script("inet", TABLE, body)


def allowed(endpoint, source, topology, settings):
    """Whether inventory host ``source`` may open a connection to ``endpoint`` under the policy."""
    if _is_loopback(endpoint["address"]):
        return source == endpoint["host"]
    if source == endpoint["host"]:
        # The host's own processes come through lo; this cell is what its containers find.
        return own_consumer(endpoint)
    permitted = [_network(a) for a in endpoint_sources(endpoint, topology, settings)]
    for address in _host_addresses(topology, source):
        ip = _network(address)
        if ip is not None and any(net is not None and ip.network_address in net for net in permitted):
            return True
    return False


def matrix(topology, settings=None):
    """[{source, destination, service, address, port, proto, allowed}] for every endpoint and every inventory host."""
    settings = settings or {}
    rows = []
    for endpoint in sorted(topology.get("endpoints") or [], key=lambda e: (e["host"], e["port"], e["service"])):
        for source in sorted(topology.get("hosts") or {}):
            row = {"source": source, "destination": endpoint["host"], "service": endpoint["service"],
                   "address": endpoint["address"], "port": endpoint["port"], "proto": endpoint.get("proto", "tcp"),
                   "allowed": allowed(endpoint, source, topology, settings)}
            if "port_end" in endpoint:
                row["port_end"] = endpoint["port_end"]
            rows.append(row)
    return rows


def matrix_markdown(rows):
    """docs/network.md's table: one row per destination service, one column per source host."""
    sources = sorted({r["source"] for r in rows})
    services = []
    for r in rows:
        key = (r["destination"], r["service"], r["address"], port_match(r), r.get("proto", "tcp"))
        if key not in services:
            services.append(key)
    cells = dict(((r["destination"], r["service"], r["address"], port_match(r), r.get("proto", "tcp"), r["source"]),
                  r["allowed"]) for r in rows)
    out = ["| service (host, address:port/proto) | " + " | ".join(sources) + " |",
           "| --- | " + " | ".join("---" for _s in sources) + " |"]
    for key in services:
        out.append("| %s (%s, %s:%s/%s) | " % (key[1], key[0], key[2], key[3], key[4]) + " | ".join(
            ("own" if key[0] == s else "open") if cells[key + (s,)] else "-" for s in sources) + " |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- applying it (module nft_table)

def replace_script(family, name, content):
    """An ``nft -f`` script that replaces table ``family name`` with ``content`` in one transaction (the table is
    created empty first, so that deleting it cannot fail when it does not exist yet)."""
    return "table %s %s {}\ndelete table %s %s\n%s" % (family, name, family, name, content or "")


def restore_script(family, name, previous):
    """The ``nft -f`` script that puts back what was there before: the previous listing of the table, or no table."""
    return replace_script(family, name, previous or "")


def table_problems(content, family, name):
    """Why ``content`` is not exactly one ``table family name`` (the module replaces that table and nothing else)."""
    tables = re.findall(r"^\s*table\s+(\S+)\s+(\S+)\s*\{", content or "", re.M)
    if tables != [(family, name)]:
        return ["content: must define exactly one table, %s %s (it defines: %s)"
                % (family, name, ", ".join("%s %s" % t for t in tables) or "none")]
    if re.search(r"^\s*(flush|delete)\s+ruleset", content, re.M):
        return ["content: must not flush or delete the whole ruleset (only table %s %s is replaced)" % (family, name)]
    return []


def state_record(content_digest, listing):
    """What the module keeps after applying: the digest of what was asked and the table as the kernel lists it, so
    that a rerun knows without reloading whether the live table is still what it applied (drift shows as change)."""
    return {"digest": content_digest, "listing": listing}


def needs_apply(record, content_digest, live_listing):
    """Whether the table must be (re)loaded: never applied, asked for something else, or changed since (drift)."""
    if live_listing is None or not record:
        return True
    return record.get("digest") != content_digest or record.get("listing") != live_listing
