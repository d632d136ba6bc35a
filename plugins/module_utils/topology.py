# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's topology, computed once per run (DESIGN.md section 2b): plain Python, no Ansible imports.

The validate step (action ``pvegpu.llmstack.topology``) builds it from the checked inventory model, each
service role's settings (its ``defaults/main.yml`` overlaid with the host's variables), the PVE hosts' PCI facts
and the GPU VMs' power state, and publishes it as ``llmstack_topology`` on every host::

    hosts:     {<host>: {groups: [...], addresses: {<vlan>: <ip>}, exists: true|false, vm_status (GPU VMs read from
                the PVE API), models (a GPU VM's vllm_models), dirs: {<role>: <role>_dir} (where each service role
                keeps its files and secrets there)}}
    gpus:      {<pve host>: {<vm>: [<slot>, ...]}}        # the one GPU placement (place_gpus)
    gpu_devices: {<pve host>: {<slot>: {vendor, device, numa_node, isolated}}}   # hosts read in this run
    endpoints: [{role, service, host, address, vlan, port, scheme, consumers: [<host>], sources: [<ip>],
                 variables: {address: <variable>, port: <variable>}, model and api_key (vLLM only)}]
    pve_api:   {host, port, user, token_id, validate_certs}

Everything that decides *which GPU a VM gets* lives in :func:`place_gpus`: the ``vfio`` role binds, the
``host_preflight`` role checks and the ``gpu_vm`` role passes through exactly what it returns, so the three can
never disagree (before, vfio took slots in order while gpu_vm preferred isolated GPUs).

:func:`endpoint_problems` refuses two services listening on one host, address and port (naming both roles'
variables) and an endpoint that one of its consumers cannot reach from any of its addresses.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import inventory_model, value_checks

_SLOT = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-1][0-9a-fA-F])"
                   r"(?:\.(?P<fn>[0-7]))?$")

#: The service roles' settings the topology reads: role -> variables (their defaults come from the role's
#: defaults/main.yml, the one place they are stated).
ROLE_SETTINGS = {
    "vllm": ("vllm_bind_address", "vllm_api_key_enabled", "vllm_dir"),
    "litellm": ("litellm_bind_address", "litellm_port", "litellm_dir", "litellm_database", "litellm_shared_vlan"),
    "tls_proxy": ("tls_proxy_listen_addresses", "tls_proxy_port", "tls_proxy_metrics_listen_address",
                  "tls_proxy_metrics_port", "tls_proxy_client_sources", "tls_proxy_metrics_file"),
    "langfuse": ("langfuse_bind_address", "langfuse_port", "langfuse_s3_port", "langfuse_dir"),
    "monitoring": ("monitoring_dir", "monitoring_bind_address", "monitoring_prometheus_port",
                   "monitoring_alertmanager_port", "monitoring_grafana_port", "monitoring_node_exporter_port",
                   "monitoring_dcgm_exporter_port", "monitoring_node_groups"),
    # What the guests stage needs of a GPU VM (its disk, its node, the API that made it): published per VM as
    # hosts.<vm>.vm, so guest_image reads it there instead of restating gpu_vm's defaults.
    "gpu_vm": ("gpu_vm_node", "gpu_vm_pve_node", "gpu_vm_vmid", "gpu_vm_storage", "gpu_vm_disk_gib",
               "gpu_vm_disk_options", "gpu_vm_api_host", "gpu_vm_api_port", "gpu_vm_api_user", "gpu_vm_api_token_id",
               "gpu_vm_api_validate_certs", "gpu_vm_nic_firewall"),
    # PVE's firewall filters a VM's NIC only with firewall=1 on it (gpu_vm_nic_firewall): checked together here.
    # The PVE hosts' own services (network_policy_pve_services) and a site's own ports on any host
    # (network_policy_extra_endpoints) are endpoints like the roles' ones: the policy opens them to their consumers.
    "network_policy": ("network_policy_pve_firewall", "network_policy_nftables", "network_policy_pve_services",
                       "network_policy_extra_endpoints", "network_policy_pve_host_firewall"),
}

#: Which inventory group runs which service role (the stage playbooks' hosts).
ROLE_GROUPS = {
    "vllm": ("gpu_vms",),
    "litellm": ("llm_gateways",),
    "tls_proxy": ("llm_gateways",),
    "langfuse": ("langfuse",),
    "monitoring": ("observability", "gpu_vms", "pve_hosts"),
    "gpu_vm": ("gpu_vms",),
    "network_policy": ("pve_hosts", "gpu_vms", "llm_gateways", "langfuse", "observability", "llm_clients"),
}

#: The ports the shared PostgreSQL and Redis of several gateways listen on (litellm_config.compose publishes them).
SHARED_DATABASE_PORTS = (("postgres", 5432), ("redis", 6379))
PROTOCOLS = ("tcp", "udp")


class TopologyError(Exception):
    pass


# ---------------------------------------------------------------------------------------------- GPU placement
def normalise_slot(text):
    """'41:00' or '0000:41:00.0' -> '0000:41:00'; raises TopologyError for anything else."""
    match = _SLOT.match(str(text).strip())
    if not match:
        raise TopologyError("%r is not a PCI slot (like 0000:41:00 or 41:00)" % (text,))
    return ("%s:%s:%s" % (match.group("domain") or "0000", match.group("bus"), match.group("dev"))).lower()


def _gpus_by_slot(pci):
    return dict((g["slot"], g) for g in (pci or {}).get("gpus") or [])


def _shared_group_problem(gpu, pci, vm):
    """Why ``vm`` cannot have ``gpu`` alone (it shares its IOMMU group), or None.

    Unknown while the IOMMU is off (a new host before its VFIO reboot): nothing is refused then, and the
    placement is made again, with the groups, on the next run.
    """
    if not (pci or {}).get("iommu_enabled") or gpu.get("isolated", True) or vm.get("allow_shared_group"):
        return None
    others = gpu.get("shares_group_with") or []
    if not others:
        return None
    return ("GPU %s shares IOMMU group %s with %s: a VM must get the whole group (gpu_vm_allow_shared_group: true) "
            "or the card another slot" % (gpu["slot"], ", ".join(gpu.get("iommu_groups") or []) or "?",
                                          ", ".join(others)))


def place_gpus(node_vms, pci, node):
    """Which GPUs of PVE host ``node`` each VM placed there gets: ({vm: [slots]}, {vm: [problems]}).

    ``node_vms``: the VMs placed on the host, in inventory order, ``{name, gpus, allow_shared_group}`` (``gpus``
    as ``gpu_vm_gpus`` takes them); ``pci``: the host's ``llmstack_pci`` facts. Slots named in ``gpu_vm_gpus``
    are taken first;
    ``{vendor_device, count}`` entries then take, in inventory order, the free GPUs of that type: isolated ones,
    by slot (a GPU sharing its IOMMU group with other devices is refused, named or not, unless the VM has
    ``allow_shared_group``: it then takes the whole group). A slot named by two
    VMs, or one that is not a GPU on the host, is a problem of the VMs concerned.

    This is the only GPU resolver: vfio binds, host_preflight checks and gpu_vm passes through its result.
    """
    gpus = _gpus_by_slot(pci)
    owner, assigned = {}, {}
    problems = dict((vm["name"], []) for vm in node_vms)
    for vm in node_vms:
        assigned[vm["name"]] = []
        for index, spec in enumerate(vm.get("gpus") or []):
            if isinstance(spec, dict):
                continue
            label = "gpu_vm_gpus[%d]" % index
            try:
                slot = normalise_slot(spec)
            except TopologyError as exc:
                problems[vm["name"]].append("%s: %s" % (label, exc))
                continue
            if slot not in gpus:
                problems[vm["name"]].append("%s: %s is not a GPU on %s (GPUs there: %s)"
                                            % (label, slot, node, ", ".join(sorted(gpus)) or "none"))
                continue
            if slot in owner and owner[slot] != vm["name"]:
                for name in (vm["name"], owner[slot]):
                    problems[name].append("%s: GPU %s on %s is given to both %s and %s"
                                          % (label, slot, node, owner[slot], vm["name"]))
                continue
            problem = _shared_group_problem(gpus[slot], pci, vm)
            if problem:
                problems[vm["name"]].append("%s: %s" % (label, problem))
                continue
            owner[slot] = vm["name"]
            if slot not in assigned[vm["name"]]:
                assigned[vm["name"]].append(slot)
    for vm in node_vms:
        for index, spec in enumerate(vm.get("gpus") or []):
            if not isinstance(spec, dict):
                continue
            label = "gpu_vm_gpus[%d]" % index
            vendor, dummy_sep, device = str(spec.get("vendor_device", "")).lower().partition(":")
            count = value_checks.as_int(spec.get("count", 1))
            if count is None or count < 1:
                problems[vm["name"]].append("%s: count %r is not a positive integer" % (label, spec.get("count")))
                continue
            same = [g for g in sorted(gpus.values(), key=lambda g: (not g.get("isolated", True), g["slot"]))
                    if g["vendor"] == vendor and g["device"] == device]
            free = [g for g in same if g["slot"] not in owner and not _shared_group_problem(g, pci, vm)]
            if len(free) < count:
                shared = [g["slot"] for g in same if g["slot"] not in owner and _shared_group_problem(g, pci, vm)]
                problems[vm["name"]].append(
                    "%s: %d GPU(s) %s:%s asked for, %d free on %s (%d there; %s)"
                    % (label, count, vendor, device, len(free), node, len(same),
                       "%s share their IOMMU group with other devices (gpu_vm_allow_shared_group passes the whole "
                       "group)" % ", ".join(shared) if shared else "the others are given to other VMs"))
            for gpu in free[:count]:
                owner[gpu["slot"]] = vm["name"]
                assigned[vm["name"]].append(gpu["slot"])
    return assigned, problems


def host_passthrough(node_vms, pci, node, explicit=None):
    """The slots a PVE host passes through, in order, and the problems: (slots, problems).

    ``explicit`` (``vfio_gpu_slots``, or a preflight's ``passthrough_gpus``) replaces the VMs' GPUs when given;
    it is resolved by :func:`place_gpus` too, as one VM would be. Problems name the VM (or ``explicit``).
    """
    if explicit is not None:
        node_vms = [{"name": "(explicit)", "gpus": list(explicit)}]
    assigned, problems = place_gpus(node_vms, pci, node)
    slots, lines = [], []
    for vm in node_vms:
        for slot in assigned.get(vm["name"], []):
            if slot not in slots:
                slots.append(slot)
        for problem in problems.get(vm["name"], []):
            lines.append(problem if vm["name"] == "(explicit)" else "%s: %s" % (vm["name"], problem))
    return slots, lines


def placement(node_plans, pci_by_node):
    """{pve host: {vm: [slots]}} for every PVE host whose PCI facts are known, and the problems.

    ``node_plans``: {pve host: [{name, gpus}, ...]} (the VMs the inventory places there, in inventory order).
    A host without facts (not reached in this run) gets the VMs' named slots and no by-type choice.
    """
    result, problems = {}, []
    for node in sorted(node_plans):
        vms = node_plans[node]
        pci = pci_by_node.get(node)
        if pci is None:
            result[node] = {}
            for vm in vms:
                slots = []
                for spec in vm.get("gpus") or []:
                    if isinstance(spec, dict):
                        continue
                    try:
                        slots.append(normalise_slot(spec))
                    except TopologyError:
                        continue
                result[node][vm["name"]] = slots
            continue
        assigned, vm_problems = place_gpus(vms, pci, node)
        result[node] = assigned
        for vm in vms:
            problems.extend("host %s: %s" % (vm["name"], p) for p in vm_problems.get(vm["name"], []))
    return result, problems


# ---------------------------------------------------------------------------------------------- endpoints
def _ip(text):
    try:
        return ipaddress.ip_address(str(text).strip().strip("[]"))
    except ValueError:
        return None


def _vlan_of(address, vlans):
    ip = _ip(address)
    if ip is None:
        return None
    for name, vlan in sorted((vlans or {}).items()):
        try:
            if ip in ipaddress.ip_network(str(vlan.get("cidr")), strict=False):
                return name
        except ValueError:
            continue
    return None


def host_addresses(interfaces):
    """{vlan: address} of a host's llmstack_interfaces (first address per VLAN)."""
    result = {}
    for iface in interfaces or []:
        if isinstance(iface, dict) and iface.get("vlan") and iface.get("address"):
            result.setdefault(str(iface["vlan"]), str(iface["address"]).partition("/")[0])
    return result


def _members(groups, group):
    return list(groups.get(group) or [])


def endpoints(groups, hosts, settings, vlans):
    """Every service endpoint from each role's settings: (endpoints, problems).

    ``hosts``: {host: variables of the inventory model}; ``settings``: {host: {variable: value}}, the
    ROLE_SETTINGS variables resolved for that host (role default overlaid with its own value); ``vlans``:
    llmstack_vlans. A setting that is not an address or a port is a problem naming the host and variable.
    """
    found, problems = [], []

    def add(role, service, host, address_var, address, port_var, port, consumers, scheme="http", optional=False,
            proto="tcp", port_end=None, **extra):
        if address in (None, ""):
            if not optional and not any(p.startswith("host %s: %s:" % (host, address_var)) for p in problems):
                problems.append("host %s: %s: no address for %s %s (the host has no interface on the role's VLAN in "
                                "llmstack_interfaces; add one or set %s)" % (host, address_var, role, service,
                                                                             address_var))
            return
        ip = _ip(address)
        if ip is None:
            problems.append("host %s: %s: %r is not an IP address" % (host, address_var, address))
            return
        number = value_checks.as_port(port)
        if number is None:
            problems.append("host %s: %s: %r is not a TCP port (1-65535)" % (host, port_var, port))
            return
        entry = {"role": role, "service": service, "host": host, "address": str(ip), "vlan": _vlan_of(ip, vlans),
                 "port": number, "proto": proto, "scheme": scheme, "consumers": sorted(set(consumers)),
                 "variables": {"address": address_var, "port": port_var}}
        if port_end is not None and port_end != number:
            entry["port_end"] = port_end
        entry.update(extra)
        found.append(entry)

    def of(host):
        return settings.get(host) or {}

    gateways = _members(groups, "llm_gateways")
    observers = _members(groups, "observability")
    for host in _members(groups, "gpu_vms"):
        address = of(host).get("vllm_bind_address")
        for index, model in enumerate((hosts.get(host) or {}).get("vllm_models") or []):
            if not isinstance(model, dict):
                continue
            add("vllm", "vllm-%s" % model.get("name"), host, "vllm_bind_address", address,
                "vllm_models[%d].port" % index, model.get("port"), gateways + observers, model=str(model.get("name")),
                api_key=str(of(host).get("vllm_api_key_enabled", True)).lower() not in ("false", "no", "0", "off"))
    for host in gateways:
        mine = of(host)
        add("litellm", "litellm", host, "litellm_bind_address", mine.get("litellm_bind_address"),
            "litellm_port", mine.get("litellm_port"), [host])
        listen = mine.get("tls_proxy_listen_addresses") or []
        # Who uses the gateway: the llm_clients hosts, and the networks of people's machines (tls_proxy_client_sources).
        clients = mine.get("tls_proxy_client_sources") or []
        if not isinstance(clients, list) or not all(_network_text(c) for c in clients):
            problems.append("host %s: tls_proxy_client_sources: must be a list of addresses or CIDRs, not %r"
                            % (host, clients))
            clients = []
        for index, address in enumerate([listen] if isinstance(listen, str) else listen):
            add("tls_proxy", "https", host, "tls_proxy_listen_addresses[%d]" % index, address,
                "tls_proxy_port", mine.get("tls_proxy_port"), _members(groups, "llm_clients"), scheme="https",
                extra_sources=[str(c) for c in clients])
        # LiteLLM's /metrics/ for Prometheus: the proxy's plain-HTTP listener that serves nothing else, open to the
        # observability hosts only (LiteLLM itself stays on loopback: its admin API never leaves the host).
        add("tls_proxy", "litellm-metrics", host, "tls_proxy_metrics_listen_address",
            mine.get("tls_proxy_metrics_listen_address"), "tls_proxy_metrics_port", mine.get("tls_proxy_metrics_port"),
            observers, optional=True, expiry=mine.get("tls_proxy_metrics_file") not in (None, ""))
    # Several gateways share the first one's PostgreSQL (litellm_database) and Redis, published on its address on
    # litellm_shared_vlan (litellm_config.compose): the other gateways are their consumers.
    if len(gateways) > 1:
        primary = of(gateways[0])
        vlan = primary.get("litellm_shared_vlan") or "mgmt"
        shared = host_addresses((hosts.get(gateways[0]) or {}).get("llmstack_interfaces")).get(vlan)
        database = inventory_model.truthy(primary.get("litellm_database", True))
        for service, port in SHARED_DATABASE_PORTS:
            if service == "postgres" and not database:
                continue
            add("litellm", service, gateways[0], "litellm_shared_vlan", shared, "litellm_shared_vlan", port,
                gateways[1:], scheme=service)
    for host in _members(groups, "langfuse"):
        mine = of(host)
        add("langfuse", "langfuse-web", host, "langfuse_bind_address", mine.get("langfuse_bind_address"),
            "langfuse_port", mine.get("langfuse_port"), gateways)
        add("langfuse", "langfuse-s3", host, "langfuse_bind_address", mine.get("langfuse_bind_address"),
            "langfuse_s3_port", mine.get("langfuse_s3_port"), gateways)
    monitored = []
    # The exporters on the GPU VMs matter (and need an address) only where there is a Prometheus to read them.
    for host in observers + (_members(groups, "gpu_vms") if observers else []):
        if host not in monitored:
            monitored.append(host)
    for host in monitored:
        mine = of(host)
        address = mine.get("monitoring_bind_address")
        if host in observers:
            for service, variable in (("prometheus", "monitoring_prometheus_port"),
                                      ("alertmanager", "monitoring_alertmanager_port"),
                                      ("grafana", "monitoring_grafana_port")):
                add("monitoring", service, host, "monitoring_bind_address", address, variable, mine.get(variable),
                    observers)
        node_groups = mine.get("monitoring_node_groups") or []
        if any(host in _members(groups, g) for g in node_groups):
            add("monitoring", "node-exporter", host, "monitoring_bind_address", address,
                "monitoring_node_exporter_port", mine.get("monitoring_node_exporter_port"), observers)
        if host in _members(groups, "gpu_vms"):
            add("monitoring", "dcgm-exporter", host, "monitoring_bind_address", address,
                "monitoring_dcgm_exporter_port", mine.get("monitoring_dcgm_exporter_port"), observers)
    for host in _members(groups, "pve_hosts"):
        for index, item in enumerate(of(host).get("network_policy_pve_services") or []):
            _site_endpoint(add, problems, groups, host, "network_policy_pve_services[%d]" % index, item, "pve")
    for host in sorted(settings):
        for index, item in enumerate(of(host).get("network_policy_extra_endpoints") or []):
            _site_endpoint(add, problems, groups, host, "network_policy_extra_endpoints[%d]" % index, item, "site")
    return found, problems


def _consumer_hosts(groups, names):
    """Hosts of a list of group and host names ([] entries that name nothing are the caller's problem)."""
    found = []
    for name in names:
        for host in (groups.get(name) or ([name] if name in (groups.get("all") or []) else [])):
            if host not in found:
                found.append(host)
    return found


def _site_endpoint(add, problems, groups, host, label, item, role):
    """One entry of network_policy_pve_services or network_policy_extra_endpoints on ``host``: {service, port,
    port_end, proto, address (default: every address), consumers: [group or host], sources: [CIDR], controller,
    admin}; every bad key is a problem naming ``label``."""
    if not isinstance(item, dict):
        problems.append("host %s: %s: must be a mapping with service, port and consumers or sources" % (host, label))
        return
    bad = len(problems)
    unknown = sorted(set(item) - {"service", "port", "port_end", "proto", "address", "consumers", "sources",
                                  "controller", "admin"})
    if unknown:
        problems.append("host %s: %s: unknown key(s) %s" % (host, label, ", ".join(unknown)))
    service = item.get("service")
    if not isinstance(service, str) or not re.match(r"^[a-z0-9][a-z0-9_.-]*$", service):
        problems.append("host %s: %s.service: %r is not a name (lower case letters, digits, - _ .)"
                        % (host, label, service))
    proto = item.get("proto", "tcp")
    if proto not in PROTOCOLS:
        problems.append("host %s: %s.proto: %r is not tcp or udp" % (host, label, proto))
    port = value_checks.as_port(item.get("port"))
    port_end = value_checks.as_port(item.get("port_end", item.get("port")))
    if port is not None and (port_end is None or port_end < port):
        problems.append("host %s: %s.port_end: %r is not a port from %d to 65535" % (host, label, item.get("port_end"),
                                                                                     port))
    consumers = item.get("consumers") or []
    all_hosts = groups.get("all") or []
    if not isinstance(consumers, list) or not all(isinstance(c, str) for c in consumers):
        problems.append("host %s: %s.consumers: must be a list of group or host names" % (host, label))
        consumers = []
    for name in consumers:
        if name not in groups and name not in all_hosts:
            problems.append("host %s: %s.consumers: %r is neither a group nor a host of the inventory"
                            % (host, label, name))
    extra = item.get("sources") or []
    if not isinstance(extra, list) or not all(_network_text(s) for s in extra):
        problems.append("host %s: %s.sources: must be a list of addresses or CIDRs" % (host, label))
        extra = []
    for flag in ("controller", "admin"):
        if not isinstance(item.get(flag, False), bool):
            problems.append("host %s: %s.%s: must be true or false" % (host, label, flag))
    if len(problems) > bad:
        return
    address = item.get("address") or "0.0.0.0"
    add(role, service, host, label + ".address", address, label + ".port", port,
        _consumer_hosts(groups, consumers), scheme=proto, proto=proto,
        port_end=port_end, extra_sources=[str(s) for s in extra], controller=bool(item.get("controller", False)),
        admin=bool(item.get("admin", False)))


def _network_text(text):
    try:
        ipaddress.ip_network(str(text), strict=False)
        return True
    except ValueError:
        return False


def _port_range(endpoint):
    return endpoint["port"], endpoint.get("port_end", endpoint["port"])


def _overlap(a, b):
    ip_a, ip_b = _ip(a), _ip(b)
    if ip_a is None or ip_b is None:
        return False
    if ip_a.version != ip_b.version:
        return False
    return ip_a == ip_b or ip_a.is_unspecified or ip_b.is_unspecified


def reachable(endpoint, consumer, addresses, vlans=None, loopback_shared=False):
    """Whether ``consumer`` (a host with {vlan: address}) can open a connection to ``endpoint``.

    Loopback: only from the host itself (from every host with ``loopback_shared``: llmstack_loopback_shared, an
    inventory whose hosts are one machine, as the tests' are). A VLAN address: from a host on that VLAN, or
    routed through the VLANs' gateways when both ends' VLANs have one (which flows the routers let through is
    network_policy's matter).
    """
    ip = _ip(endpoint["address"])
    if ip.is_loopback:
        return consumer == endpoint["host"] or loopback_shared
    if consumer == endpoint["host"] or ip.is_unspecified or endpoint.get("vlan") is None:
        return True
    if endpoint["vlan"] in addresses:
        return True
    vlans = vlans or {}

    def routed(name):
        return bool((vlans.get(name) or {}).get("gateway"))

    return routed(endpoint["vlan"]) and any(routed(name) for name in addresses)


def sources(endpoint, hosts, vlans=None):
    """The addresses the endpoint's consumers connect from: each consumer's address on the endpoint's VLAN, else
    (routed) all its addresses on VLANs with a gateway; loopback for a loopback endpoint."""
    ip = _ip(endpoint["address"])
    result = []
    for consumer in endpoint["consumers"]:
        addresses = (hosts.get(consumer) or {}).get("addresses") or {}
        if ip.is_loopback or consumer == endpoint["host"] and not addresses:
            found = ["127.0.0.1" if ip.version == 4 else "::1"]
        elif endpoint.get("vlan") in addresses:
            found = [addresses[endpoint["vlan"]]]
        else:
            found = [a for name, a in sorted(addresses.items())
                     if (vlans or {}).get(name, {}).get("gateway") or endpoint.get("vlan") is None]
        result.extend(a for a in found if a not in result)
    return result


def endpoint_problems(found, hosts, vlans=None, loopback_shared=False):
    """Collisions (same host, overlapping address, same port) and consumers that cannot reach an endpoint.

    ``hosts``: {host: {addresses: {vlan: ip}}} (the topology's hosts).
    """
    problems = []
    for index, first in enumerate(found):
        for second in found[index + 1:]:
            (low_a, high_a), (low_b, high_b) = _port_range(first), _port_range(second)
            if first["host"] != second["host"] or first.get("proto", "tcp") != second.get("proto", "tcp") \
                    or high_a < low_b or high_b < low_a:
                continue
            if not _overlap(first["address"], second["address"]):
                continue
            problems.append(
                "host %s: %s (%s) and %s (%s) both listen on %s port %d: move one (set %s or %s)"
                % (first["host"], first["variables"]["port"], "%s %s" % (first["role"], first["service"]),
                   second["variables"]["port"], "%s %s" % (second["role"], second["service"]),
                   first["address"] if not _ip(first["address"]).is_unspecified else second["address"],
                   max(low_a, low_b), first["variables"]["port"], second["variables"]["port"]))
    for endpoint in found:
        for consumer in endpoint["consumers"]:
            addresses = (hosts.get(consumer) or {}).get("addresses") or {}
            if reachable(endpoint, consumer, addresses, vlans, loopback_shared):
                continue
            where = "loopback only" if _ip(endpoint["address"]).is_loopback else \
                "VLAN %s: %s has no address there and no routed VLAN" % (endpoint["vlan"], consumer)
            problems.append("host %s: %s %s listens on %s:%d (%s; set %s), but %s must reach it"
                            % (endpoint["host"], endpoint["role"], endpoint["service"], endpoint["address"],
                               endpoint["port"], where, endpoint["variables"]["address"], consumer))
    return problems


# ---------------------------------------------------------------------------------------------- the whole
def node_plans(groups, hosts):
    """{pve host: [{name, gpus, numa_node, allow_shared_group}]}: the GPU VMs the inventory places on each PVE host,
    in inventory order, from gpu_vm_node, gpu_vm_gpus, gpu_vm_numa_node and gpu_vm_allow_shared_group of the
    gpu_vms. Published in the topology as ``vm_plans``: vfio, host_preflight and gpu_vm read it there."""
    plans = dict((node, []) for node in _members(groups, "pve_hosts"))
    for vm in _members(groups, "gpu_vms"):
        data = hosts.get(vm) or {}
        node = data.get("gpu_vm_node")
        if node in plans:
            plans[node].append({"name": vm, "gpus": list(data.get("gpu_vm_gpus") or []),
                                "numa_node": data.get("gpu_vm_numa_node"),
                                "allow_shared_group": inventory_model.truthy(
                                    data.get("gpu_vm_allow_shared_group", False))})
    return plans


def vm_settings(host_settings):
    """A VM's entry ``vm`` of the topology (a GPU VM's, or any host's with gpu_vm_vmid) from its gpu_vm settings:
    {node, pve_node, vmid, storage, disk_gib, disk_options, api: {host, port, user, token_id, validate_certs}} (the API
    secrets are never in the topology)."""
    def get(name):
        return host_settings.get("gpu_vm_" + name)
    return {"node": get("node"), "pve_node": get("pve_node") or get("node"), "vmid": get("vmid"),
            "storage": get("storage"), "disk_gib": get("disk_gib"), "disk_options": get("disk_options"),
            "api": {"host": get("api_host"), "port": get("api_port"), "user": get("api_user"),
                    "token_id": get("api_token_id"), "validate_certs": get("api_validate_certs")}}


def build(model, settings, pci_by_node=None, vm_status=None, pve_api=None):
    """The topology and its problems: (topology, problems).

    ``model``: the inventory model ({groups, hosts}) that inventory_model.validate accepted; ``settings``:
    {host: {ROLE_SETTINGS variable: value}}; ``pci_by_node``: {pve host: llmstack_pci} of the hosts read in this
    run; ``vm_status``: {vm: absent|stopped|running} of the VMs read from the PVE API; ``pve_api``: the API
    connection without secrets.
    """
    groups, hosts = model.get("groups") or {}, model.get("hosts") or {}
    vm_status = vm_status or {}
    vlans = {}
    for data in hosts.values():
        if isinstance((data or {}).get("llmstack_vlans"), dict):
            vlans = data["llmstack_vlans"]
            break
    names = list(groups.get("all") or sorted(hosts))
    vms = inventory_model.vm_hosts(groups, hosts)
    topo_hosts = {}
    firewall_problems = []
    for host in names:
        data = hosts.get(host) or {}
        member_of = sorted(g for g, members in groups.items() if host in (members or []) and g not in
                           ("all", "ungrouped"))
        status = vm_status.get(host)
        topo_hosts[host] = {"groups": member_of, "addresses": host_addresses(data.get("llmstack_interfaces")),
                            "exists": status not in ("absent",) if host in vms else True}
        if status:
            topo_hosts[host]["vm_status"] = status
        not_started = data.get("llmstack_services_not_started")
        if isinstance(not_started, list) and not_started:
            # What the host renders but does not start (service_start.py): nothing should scrape or route to it.
            topo_hosts[host]["not_started"] = [str(entry) for entry in not_started]
        if host in _members(groups, "gpu_vms"):
            topo_hosts[host]["models"] = [m for m in data.get("vllm_models") or [] if isinstance(m, dict)]
        dirs = dict((role, (settings.get(host) or {})["%s_dir" % role]) for role in ROLE_GROUPS
                    if "%s_dir" % role in (settings.get(host) or {}))
        if dirs:
            topo_hosts[host]["dirs"] = dirs
        if host in _members(groups, "pve_hosts"):
            topo_hosts[host]["sysfs_root"] = data.get("llmstack_sysfs_root") or "/"
            own = settings.get(host) or {}
            if (inventory_model.truthy(own.get("network_policy_pve_host_firewall", False))
                    and inventory_model.truthy(own.get("network_policy_nftables", True))):
                firewall_problems.append(
                    "host %s: network_policy_pve_host_firewall and network_policy_nftables are both true: two packet "
                    "filters would judge the PVE host's traffic (keep PVE's own firewall and set "
                    "network_policy_nftables: false for pve_hosts, or turn network_policy_pve_host_firewall off)"
                    % host)
        if host in vms:
            topo_hosts[host]["vm"] = vm_settings(settings.get(host) or {})
            own = settings.get(host) or {}
            if (inventory_model.truthy(own.get("network_policy_pve_firewall", False))
                    and not inventory_model.truthy(own.get("gpu_vm_nic_firewall", False))):
                firewall_problems.append(
                    "host %s: network_policy_pve_firewall is true but gpu_vm_nic_firewall is false: PVE's firewall "
                    "would not filter the VM's NICs (set gpu_vm_nic_firewall: true)" % host)
    gpus, problems = placement(node_plans(groups, hosts), pci_by_node or {})
    found, endpoint_errors = endpoints(groups, hosts, settings, vlans)
    problems.extend(endpoint_errors)
    problems.extend(firewall_problems)
    shared = any(str((data or {}).get("llmstack_loopback_shared")).lower() in ("true", "yes", "1", "on")
                 for data in hosts.values())
    problems.extend(endpoint_problems(found, topo_hosts, vlans, shared))
    for entry in found:
        entry["sources"] = sources(entry, topo_hosts, vlans)
        entry["sources"].extend(a for a in entry.pop("extra_sources", []) if a not in entry["sources"])
    devices = {}
    for node, pci in sorted((pci_by_node or {}).items()):
        devices[node] = dict((g["slot"], {"vendor": g.get("vendor"), "device": g.get("device"),
                                          "numa_node": g.get("numa_node"), "isolated": g.get("isolated")})
                             for g in (pci or {}).get("gpus") or [])
    topology = {"hosts": topo_hosts, "gpus": gpus, "gpu_devices": devices, "endpoints": found,
                "vm_plans": node_plans(groups, hosts), "pve_api": dict(pve_api or {})}
    return topology, problems


def endpoint(topology, role, service=None, host=None):
    """The endpoints of ``role`` (and ``service``, ``host``) in a topology, in order."""
    return [e for e in (topology or {}).get("endpoints") or []
            if e["role"] == role and (service is None or e["service"] == service)
            and (host is None or e["host"] == host)]


def vm_gpus(topology, vm):
    """The GPUs placed for GPU VM ``vm``: [{slot, vendor, device}] (vendor/device None where the host was not
    read in this run); None when the topology does not place the VM."""
    for node, vms in sorted(((topology or {}).get("gpus") or {}).items()):
        if vm in vms:
            devices = ((topology.get("gpu_devices") or {}).get(node)) or {}
            return [{"slot": slot, "vendor": (devices.get(slot) or {}).get("vendor"),
                     "device": (devices.get(slot) or {}).get("device")} for slot in vms[vm]]
    return None


def first_endpoint(topology, role, service, host):
    """The endpoint ``role``/``service`` on ``host``, or {} when the topology has none."""
    found = endpoint(topology, role, service, host)
    return dict(found[0]) if found else {}


def vms_not_running(topology, hosts):
    """Of ``hosts``, those whose power state the validate step read from the PVE API and found not running
    (absent or stopped), in the order given; hosts with no known state are left out."""
    known = (topology or {}).get("hosts") or {}
    return [h for h in hosts or [] if (known.get(h) or {}).get("vm_status") not in (None, "running")]


def endpoint_sources(topology, role, service, host):
    """The source addresses of the endpoint ``role``/``service`` on ``host`` ([] when it has none or is unknown)."""
    found = endpoint(topology, role, service, host)
    return list(found[0].get("sources") or []) if found else []
