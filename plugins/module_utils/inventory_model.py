# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VLAN-aware inventory model of pvegpu.llmstack and its validation.

Plain Python (netaddr is the only dependency) so that the same code serves the
``inventory_check`` action, the offline CLI ``tools/check_inventory.py`` and the
unit tests.  Nothing here talks to a host.

The model is a dict::

    {"groups": {"pve_hosts": ["pve-a"], "gpu_vms": ["gpu-a"], ...},
     "hosts": {"gpu-a": {"llmstack_vlans": {...}, "llmstack_interfaces": [...], ...}}}

``hosts[h]`` holds the host's resolved variables that this module cares about
(see :data:`HOST_VARIABLES` and :func:`is_secret_variable`).  A variable that could
not be resolved (an undefined vault variable, say) is given as an
:class:`Unresolved` instance so that it becomes a problem, not a crash.

:func:`validate` returns a list of :class:`Problem`; an empty list means valid.
"""

from __future__ import absolute_import, division, print_function


import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import model_disk

try:
    import netaddr

    HAS_NETADDR = True
except ImportError:  # pragma: no cover - reported by the callers
    netaddr = None
    HAS_NETADDR = False

#: Groups of the inventory contract (DESIGN.md section 2).
KNOWN_GROUPS = ("pve_hosts", "gpu_vms", "llm_gateways", "langfuse", "observability", "llm_clients")
# Groups whose services run as compose projects in Docker (the docker role, playbooks/stages/guests.yml), besides
# gpu_vms: none of their hosts may be a PVE host.
COMPOSE_GROUPS = ("llm_gateways", "langfuse", "observability")

#: Variables read from every host (the secret variables are found by name on top).
HOST_VARIABLES = (
    "llmstack_vlans",
    "llmstack_interfaces",
    "llmstack_pve_cluster",
    "llmstack_loopback_shared",
    "llmstack_sysfs_root",
    "llmstack_services_not_started",
    "gpu_vm_node",
    "gpu_vm_vmid",
    "gpu_vm_gpus",
    "gpu_vm_allow_shared_group",
    "gpu_vm_numa_node",
    "gpu_vm_disk_gib",
    "gpu_vm_model_disk_gib",
    "gpu_vm_model_disk_margin",
    "gpu_vm_api_token_id",
    "gpu_vm_api_host",
    "guest_image_import",
    "guest_image_mirror",
    "guest_image_authorized_keys",
    "network_policy_state",
    "network_policy_nftables",
    "network_policy_pve_firewall",
    "network_policy_controller_addresses",
    "vllm_models",
    "litellm_fallbacks",
    "litellm_clients",
    "litellm_external_models",
)

#: The gpu_vm role's defaults (roles/gpu_vm/defaults/main.yml; a unit test keeps the two equal) of the settings the
#: model disk check reads when the inventory does not set them.
GPU_VM_DEFAULTS = {"gpu_vm_disk_gib": 64, "gpu_vm_model_disk_gib": "auto",
                   "gpu_vm_model_disk_margin": model_disk.DEFAULT_MARGIN}

#: Which VLANs a host of a group must have an interface on, unless overridden.
DEFAULT_GROUP_VLANS = {"gpu_vms": ["inference"], "llm_gateways": ["inference"]}

#: Role prefixes whose variables belong to this collection.
ROLE_PREFIXES = (
    "llmstack", "inventory_check", "host_preflight", "vfio", "gpu_vm", "guest_image", "nvidia", "vllm",
    "litellm", "tls_proxy", "langfuse", "monitoring", "network_policy", "burnin",
)
_SECRET_NAME = re.compile(
    r"^(%s)_\w*(password|passwd|secret|master_key|salt_key|salt|api_key|token)$" % "|".join(ROLE_PREFIXES))

#: Values that are never acceptable as a secret (compared case-insensitively).
WEAK_SECRETS = frozenset((
    "admin", "administrator", "changeme", "change_me", "change-me", "password", "passw0rd", "secret",
    "postgres", "root", "toor", "test", "default", "letmein", "123456", "12345678", "qwerty",
    "my_secure_secret", "my_secure_salt", "sk-1234", "sk-changeme", "langfuse", "minio", "minioadmin",
    "clickhouse", "redis", "grafana", "prom-operator",
))
MIN_SECRET_LENGTH = 12
#: Secrets that need more: every VM's SSH host key is derived from this one (ssh_host_key.MIN_SECRET_LENGTH).
MIN_SECRET_LENGTHS = {"guest_image_host_key_secret": 32}

#: Secrets that must start with a given prefix when the user sets them.
SECRET_PREFIXES = {"litellm_master_key": "sk-", "litellm_salt_key": "sk-"}

VLAN_KEYS = ("id", "cidr", "gateway", "bridge", "mtu", "dns", "description")
INTERFACE_KEYS = ("vlan", "address", "name", "mac")
GPU_BY_TYPE_KEYS = ("vendor_device", "count")
MODEL_REQUIRED_KEYS = ("name", "model", "port")
CLIENT_KEYS = (
    "alias", "models", "max_budget", "budget_duration", "max_parallel_requests", "tpm_limit", "rpm_limit",
    "metadata", "key_path", "replace_lost_key",
)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_BRIDGE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}$")
_SLOT = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-1][0-9a-fA-F])"
                   r"(?:\.(?P<fn>[0-7]))?$")
_VENDOR_DEVICE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$")
_SERVED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
_DURATION = re.compile(r"^([1-9][0-9]*(s|m|h|d|w|mo)|hourly|daily|weekly|monthly)$")
_TOKEN_ID = re.compile(r"^[^@!\s]+@[^@!\s]+![A-Za-z][A-Za-z0-9._-]*$")
PVE_VMID_MIN, PVE_VMID_MAX = 100, 999999999
MAX_HOSTPCI = 16


class Unresolved(object):
    """A variable whose value could not be templated; ``error`` says why."""

    def __init__(self, error):
        self.error = str(error)

    def __repr__(self):
        return "Unresolved(%r)" % self.error


class Problem(object):
    """One thing wrong with the inventory: where (hosts, variable) and what."""

    def __init__(self, hosts, variable, message):
        if isinstance(hosts, str):
            hosts = [hosts]
        self.hosts = sorted(set(hosts))
        self.variable = variable
        self.message = message

    def __str__(self):
        if self.hosts == ["all"]:
            where = "group all"
        else:
            where = "%s %s" % ("host" if len(self.hosts) == 1 else "hosts", ", ".join(self.hosts))
        return "%s: %s: %s" % (where, self.variable, self.message)

    def as_dict(self):
        return {"hosts": self.hosts, "variable": self.variable, "message": self.message, "text": str(self)}

    def __repr__(self):
        return "Problem(%r)" % str(self)


def is_secret_variable(name):
    """True for variables of this collection that hold a secret (by naming convention)."""
    return bool(_SECRET_NAME.match(name))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value):
    """An int from an int or a decimal string (inventories in INI give strings); else None."""
    if _is_int(value):
        return value
    if isinstance(value, str) and re.match(r"^[0-9]+$", value.strip()):
        return int(value)
    return None


def _is_mapping(value):
    return isinstance(value, dict)


def _is_list(value):
    return isinstance(value, (list, tuple))


def normalise_slot(text):
    """``41:00`` / ``0000:41:00.0`` -> ``0000:41:00`` (the slot), or None when not a PCI address."""
    match = _SLOT.match(text.strip()) if isinstance(text, str) else None
    if not match:
        return None
    return "%s:%s:%s" % ((match.group("domain") or "0000").lower(), match.group("bus").lower(),
                         match.group("dev").lower())


class _Validator(object):
    def __init__(self, model, group_vlans=None):
        self.groups = dict((g, list(h)) for g, h in (model.get("groups") or {}).items())
        self.hosts = model.get("hosts") or {}
        self.group_vlans = DEFAULT_GROUP_VLANS if group_vlans is None else group_vlans
        self.problems = []
        self.networks = {}      # vlan name -> IPNetwork (valid ones only)
        self.vlans = {}         # vlan name -> entry (those with a valid subnet)
        self.vlan_names = set()  # every VLAN name defined, valid or not

    # -- helpers ---------------------------------------------------------
    def problem(self, hosts, variable, message):
        """Record a problem; the same variable and message on several hosts (group vars) is one problem."""
        hosts = [hosts] if isinstance(hosts, str) else list(hosts)
        for known in self.problems:
            if known.variable == variable and known.message == message and "all" not in hosts + known.hosts:
                known.hosts = sorted(set(known.hosts) | set(hosts))
                return
        self.problems.append(Problem(hosts, variable, message))

    def members(self, group):
        return [h for h in self.groups.get(group, []) if h in self.hosts]

    def check_keys(self, where, label, mapping, allowed):
        """A typo in a key would otherwise be ignored silently."""
        unknown = sorted(set(map(str, mapping)) - set(allowed))
        if unknown:
            self.problem(where, label, "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(allowed)))

    def var(self, host, name):
        """The host's value, or None; an Unresolved value becomes a problem and None."""
        value = self.hosts.get(host, {}).get(name)
        if isinstance(value, Unresolved):
            self.problem(host, name, "cannot be resolved: %s" % value.error)
            return None
        return value

    # -- VLANs -----------------------------------------------------------
    def check_vlans(self):
        """llmstack_vlans must be one definition (normally group_vars/all); validate it once."""
        definitions = []   # [(value, [hosts])]
        for host in sorted(self.hosts):
            value = self.var(host, "llmstack_vlans")
            if value is None:
                continue
            for known in definitions:
                if known[0] == value:
                    known[1].append(host)
                    break
            else:
                definitions.append((value, [host]))
        needs_vlans = [h for h in sorted(self.hosts) if self.hosts[h].get("llmstack_interfaces")]
        if not definitions:
            if needs_vlans:
                self.problem(needs_vlans, "llmstack_vlans",
                             "is not defined, but llmstack_interfaces refer to VLANs; define it in group_vars/all")
            return
        # The definition most hosts share is validated; the hosts with another one are named.
        definitions.sort(key=lambda definition: -len(definition[1]))
        if len(definitions) > 1:
            self.problem([h for definition in definitions[1:] for h in definition[1]], "llmstack_vlans",
                         "differs from the definition of %d other host(s) (%s); define it once, in group_vars/all"
                         % (len(definitions[0][1]), ", ".join(definitions[0][1])))
        value, hosts = definitions[0]
        if len(definitions) == 1 and len(hosts) == len(self.hosts):
            where = "all"
        else:
            where = hosts
        self.validate_vlan_map(value, where)

    def validate_vlan_map(self, vlans, where):
        var = "llmstack_vlans"
        if not _is_mapping(vlans):
            self.problem(where, var, "must be a mapping of VLAN name to {id, cidr, gateway, bridge}, got %s"
                         % type(vlans).__name__)
            return
        ids = {}
        self.vlan_names.update(vlans)
        for name in sorted(vlans, key=str):
            entry = vlans[name]
            label = "%s.%s" % (var, name)
            if not isinstance(name, str) or not _NAME.match(name):
                self.problem(where, label, "VLAN name must start with a letter and use letters, digits, '_' or '-'")
            if not _is_mapping(entry):
                self.problem(where, label, "must be a mapping with id and cidr, got %s" % type(entry).__name__)
                continue
            self.check_keys(where, label, entry, VLAN_KEYS)
            vid = _as_int(entry.get("id"))
            if "id" not in entry:
                self.problem(where, label + ".id", "is missing (802.1Q VLAN id, 1-4094)")
            elif vid is None or not 1 <= vid <= 4094:
                self.problem(where, label + ".id", "%r is not a VLAN id: must be an integer from 1 to 4094"
                             % (entry.get("id"),))
            elif vid in ids:
                self.problem(where, label + ".id", "VLAN id %d is also used by VLAN '%s'" % (vid, ids[vid]))
            else:
                ids[vid] = name
            network = self.check_cidr(where, label, entry)
            if network is not None:
                self.vlans[name] = entry
                self.networks[name] = network
                self.check_gateway(where, label, entry, network)
            bridge = entry.get("bridge")
            if bridge is not None and (not isinstance(bridge, str) or not _BRIDGE.match(bridge)):
                self.problem(where, label + ".bridge", "%r is not a Linux bridge name (letters, digits, '_.-', "
                             "at most 15 characters)" % (bridge,))
            mtu = entry.get("mtu")
            if mtu is not None and (_as_int(mtu) is None or not 576 <= _as_int(mtu) <= 65535):
                self.problem(where, label + ".mtu", "%r is not an MTU (576-65535)" % (mtu,))
        names = sorted(self.networks)
        for i, first in enumerate(names):
            for second in names[i + 1:]:
                a, b = self.networks[first], self.networks[second]
                if a.version == b.version and a.first <= b.last and b.first <= a.last:
                    self.problem(where, "%s.%s.cidr" % (var, second), "%s overlaps %s of VLAN '%s'"
                                 % (b, a, first))

    def check_cidr(self, where, label, entry):
        cidr = entry.get("cidr")
        if cidr is None:
            self.problem(where, label + ".cidr", "is missing (the VLAN's subnet, e.g. 192.168.20.0/24)")
            return None
        if not isinstance(cidr, str) or "/" not in cidr:
            self.problem(where, label + ".cidr", "%r is not a subnet in CIDR notation (e.g. 192.168.20.0/24)"
                         % (cidr,))
            return None
        try:
            network = netaddr.IPNetwork(cidr)
        except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
            self.problem(where, label + ".cidr", "%r is not a valid subnet: %s" % (cidr, exc))
            return None
        if network.ip != network.network:
            self.problem(where, label + ".cidr", "%s has host bits set; the subnet is %s" % (cidr, network.cidr))
            network = network.cidr   # reported once; checked further as the subnet that was meant
        return network

    def check_gateway(self, where, label, entry, network):
        gateway = entry.get("gateway")
        if gateway is None:
            return
        address = self.parse_address(gateway)
        if address is None:
            self.problem(where, label + ".gateway", "%r is not an IP address" % (gateway,))
        elif address not in network:
            self.problem(where, label + ".gateway", "%s is outside the VLAN's subnet %s" % (address, network))
        elif self.reserved(address, network):
            self.problem(where, label + ".gateway", "%s is the %s address of %s, not a usable host address"
                         % (address, self.reserved(address, network), network))

    @staticmethod
    def parse_address(text):
        if not isinstance(text, str) or "/" in text:
            return None
        try:
            return netaddr.IPAddress(text.strip())
        except (netaddr.AddrFormatError, ValueError, TypeError):
            return None

    @staticmethod
    def reserved(address, network):
        if network.version == 4 and network.prefixlen < 31:
            if address == network.network:
                return "network"
            if address == network.broadcast:
                return "broadcast"
        if network.version == 6 and network.prefixlen < 127 and address == network.network:
            return "subnet-router anycast"
        return None

    # -- interfaces ------------------------------------------------------
    def check_interfaces(self):
        seen = {}   # address -> (host, index)
        for host in sorted(self.hosts):
            interfaces = self.var(host, "llmstack_interfaces")
            if interfaces is None:
                continue
            if not _is_list(interfaces):
                self.problem(host, "llmstack_interfaces", "must be a list of {vlan, address}, got %s"
                             % type(interfaces).__name__)
                continue
            vlans_here = {}
            for index, iface in enumerate(interfaces):
                label = "llmstack_interfaces[%d]" % index
                if not _is_mapping(iface):
                    self.problem(host, label, "must be a mapping {vlan, address}, got %s" % type(iface).__name__)
                    continue
                self.check_keys(host, label, iface, INTERFACE_KEYS)
                vlan = iface.get("vlan")
                if vlan is None:
                    self.problem(host, label + ".vlan", "is missing (a name from llmstack_vlans)")
                elif self.vlan_names and vlan not in self.vlan_names:
                    known = ", ".join(sorted(map(str, self.vlan_names)))
                    self.problem(host, label + ".vlan", "VLAN %r is not defined in llmstack_vlans (known: %s)"
                                 % (vlan, known))
                    vlan = None
                if vlan is not None and vlan in vlans_here:
                    self.problem(host, label + ".vlan", "the host already has an interface on VLAN '%s' (%s)"
                                 % (vlan, vlans_here[vlan]))
                elif vlan is not None:
                    vlans_here[vlan] = label
                self.check_interface_address(host, label, iface, vlan, seen)
                mac = iface.get("mac")
                if mac is not None and not self.valid_unicast_mac(mac):
                    self.problem(host, label + ".mac", "%r is not a unicast MAC address" % (mac,))

    def check_interface_address(self, host, label, iface, vlan, seen):
        raw = iface.get("address")
        if raw is None:
            self.problem(host, label + ".address", "is missing")
            return
        text = raw
        network = self.networks.get(vlan) if vlan is not None else None
        if isinstance(raw, str) and "/" in raw:
            text, prefix = raw.split("/", 1)
            if network is not None and prefix != str(network.prefixlen):
                self.problem(host, label + ".address", "%s: prefix /%s does not match VLAN '%s' (%s); give the "
                             "address without a prefix" % (raw, prefix, vlan, network))
                return
        address = self.parse_address(text)
        if address is None:
            self.problem(host, label + ".address", "%r is not an IP address" % (raw,))
            return
        if network is not None:
            if address not in network:
                self.problem(host, label + ".address", "%s is outside VLAN '%s' (%s)" % (address, vlan, network))
            elif self.reserved(address, network):
                self.problem(host, label + ".address", "%s is the %s address of VLAN '%s' (%s)"
                             % (address, self.reserved(address, network), vlan, network))
            elif vlan in self.vlans and str(address) == str(self.vlans[vlan].get("gateway", "")).strip():
                self.problem(host, label + ".address", "%s is the gateway of VLAN '%s'" % (address, vlan))
        key = str(address)
        if key in seen:
            other_host, other_label = seen[key]
            self.problem([host, other_host], label + ".address", "%s is assigned twice (%s %s and %s %s)"
                         % (key, other_host, other_label, host, label))
        else:
            seen[key] = (host, label)

    @staticmethod
    def valid_unicast_mac(mac):
        try:
            eui = netaddr.EUI(str(mac))
        except (netaddr.AddrFormatError, ValueError, TypeError):
            return False
        return eui.version == 48 and not (int(eui.words[0]) & 1)

    # -- groups and their VLANs -----------------------------------------
    def check_groups(self):
        vms = set(self.members("gpu_vms"))
        for host in sorted(vms & set(self.members("pve_hosts"))):
            self.problem(host, "groups", "is in both pve_hosts and gpu_vms; a GPU VM cannot be its own PVE host")
        for group in COMPOSE_GROUPS:
            for host in sorted(set(self.members(group)) & set(self.members("pve_hosts"))):
                self.problem(host, "groups", "is in both pve_hosts and %s: the %s services run in Docker, and Docker "
                             "on a PVE host sets the iptables FORWARD policy to DROP (the bridged VMs' traffic); "
                             "run them in a VM (gpu_vm_vmid in its host_vars)" % (group, group))
        for host in sorted(set(self.members("pve_hosts")) - vms):
            if self.hosts[host].get("gpu_vm_vmid") is not None:
                self.problem(host, "gpu_vm_vmid", "is set on a host of group pve_hosts: a PVE host cannot be a VM "
                             "this collection creates (set gpu_vm_vmid in the VM's host_vars only)")
        for group in sorted(self.group_vlans):
            for vlan in self.group_vlans[group]:
                members = self.members(group)
                if not members:
                    continue
                if self.vlan_names and vlan not in self.vlan_names:
                    self.problem("all", "llmstack_vlans", "defines no VLAN '%s', which hosts of group %s must be on"
                                 % (vlan, group))
                    continue
                for host in members:
                    interfaces = self.hosts[host].get("llmstack_interfaces")
                    if isinstance(interfaces, Unresolved):
                        continue
                    on = [i.get("vlan") for i in interfaces or [] if _is_mapping(i)]
                    if vlan not in on:
                        self.problem(host, "llmstack_interfaces", "has no interface on VLAN '%s', which every host "
                                     "of group %s needs" % (vlan, group))

    # -- VMs -------------------------------------------------------------
    def check_vms(self):
        """Every VM this collection creates (vm_hosts): the GPU VMs and any other host with gpu_vm_vmid."""
        pve_hosts = set(self.members("pve_hosts"))
        gpu_vms = set(self.members("gpu_vms"))
        vmids = {}      # (cluster, vmid) -> host
        slots = {}      # (node, slot) -> host
        for host in vm_hosts(self.groups, self.hosts):
            node = self.var(host, "gpu_vm_node")
            cluster = None
            if node is None:
                self.problem(host, "gpu_vm_node", "is missing: name the PVE host (a host in group pve_hosts) "
                             "that runs this VM")
            elif not isinstance(node, str) or node not in pve_hosts:
                self.problem(host, "gpu_vm_node", "%r is not a host in group pve_hosts (known: %s)"
                             % (node, ", ".join(sorted(pve_hosts)) or "none"))
                node = None
            else:
                cluster = self.var(node, "llmstack_pve_cluster") or "default"
            self.check_vmid(host, cluster, vmids)
            self.check_api(host)
            self.check_vm_nics(host)
            self.check_vm_image(host)
            if host in gpu_vms:
                self.check_gpus(host, node, slots)
                self.check_models(host)
                self.check_model_disk(host)
            elif self.var(host, "gpu_vm_gpus"):
                self.problem(host, "gpu_vm_gpus", "is set on a VM outside group gpu_vms: only a host of gpu_vms gets "
                             "GPUs (and the NVIDIA stack, vLLM); add it to gpu_vms or drop gpu_vm_gpus")

    def check_vm_nics(self, host):
        """A VM's guest image names its NICs by MAC (guest_image refuses it later, after the PVE hosts stage)."""
        interfaces = self.hosts[host].get("llmstack_interfaces")
        if not _is_list(interfaces) or len(interfaces) < 2:
            return
        loose = ["llmstack_interfaces[%d]" % i for i, iface in enumerate(interfaces)
                 if _is_mapping(iface) and not iface.get("mac") and not iface.get("name")]
        if loose:
            self.problem(host, "llmstack_interfaces", "%s %s no mac: a VM with %d NICs needs a MAC on each, which "
                         "the gpu_vm role gives its PVE NIC and the guest image matches to name the interface"
                         % (", ".join(loose), "has" if len(loose) == 1 else "have", len(interfaces)))

    def check_vm_image(self, host):
        """What the guests stage needs to build the VM's image (guest_image_import, the default): without it the run
        would stop there, after the PVE hosts stage may have rebooted the PVE hosts."""
        if not truthy(self.var(host, "guest_image_import"), default=True):
            return
        mirror = self.var(host, "guest_image_mirror")
        if mirror is None or (isinstance(mirror, str) and not mirror.strip()):
            self.problem(host, "guest_image_mirror", "is empty: the VM's image is built with debootstrap from a "
                         "Debian mirror (e.g. http://deb.debian.org/debian, or your apt cache)")
        keys = self.var(host, "guest_image_authorized_keys")
        if not _is_list(keys) or not [k for k in keys if isinstance(k, str) and k.strip()]:
            self.problem(host, "guest_image_authorized_keys", "is empty: the VM's image lets root in with these SSH "
                         "keys only, so the run could not reach the VM it created (give the controller's public key)")

    # -- the network policy ------------------------------------------------
    def check_policy(self):
        """The policy lets the controller in before anything else; without its address the network stage stops the
        run at the end, after every other stage changed the site (network_policy.check_settings says the same)."""
        for host in sorted(self.hosts):
            state = self.var(host, "network_policy_state") or "present"
            on = (truthy(self.var(host, "network_policy_nftables"), default=True)
                  or truthy(self.var(host, "network_policy_pve_firewall"), default=False))
            if state == "absent" or not on:
                continue
            controller = self.var(host, "network_policy_controller_addresses")
            if not _is_list(controller) or not controller:
                self.problem(host, "network_policy_controller_addresses", "is empty: name the address(es) Ansible "
                             "connects from; the network policy lets them in first, and refuses to load without "
                             "them (or set network_policy_state: absent)")

    def check_api(self, host):
        """The PVE API every VM is created through: a run without it would stop only after the PVE hosts stage."""
        api_host = self.var(host, "gpu_vm_api_host")
        if api_host is None or (isinstance(api_host, str) and not api_host.strip()):
            self.problem(host, "gpu_vm_api_host", "is empty: name the PVE API host (a PVE node's or the cluster's "
                         "management address) that creates the VM")
        elif not isinstance(api_host, str):
            self.problem(host, "gpu_vm_api_host", "%r is not a host name or address" % (api_host,))

    def check_vmid(self, host, cluster, vmids):
        raw = self.var(host, "gpu_vm_vmid")
        vmid = _as_int(raw)
        if raw is None:
            self.problem(host, "gpu_vm_vmid", "is missing (the PVE VM id, %d-%d)" % (PVE_VMID_MIN, PVE_VMID_MAX))
        elif vmid is None or not PVE_VMID_MIN <= vmid <= PVE_VMID_MAX:
            self.problem(host, "gpu_vm_vmid", "%r is not a PVE VM id: must be an integer from %d to %d"
                         % (raw, PVE_VMID_MIN, PVE_VMID_MAX))
        elif cluster is not None:
            if (cluster, vmid) in vmids:
                other = vmids[(cluster, vmid)]
                self.problem([host, other], "gpu_vm_vmid", "VM id %d is used by both %s and %s in PVE cluster '%s'"
                             % (vmid, other, host, cluster))
            else:
                vmids[(cluster, vmid)] = host

    def check_gpus(self, host, node, slots):
        gpus = self.var(host, "gpu_vm_gpus")
        if gpus is None:
            self.problem(host, "gpu_vm_gpus", "is missing: list the GPU slots (e.g. \"0000:41:00\") or "
                         "{vendor_device, count} to pass through")
            return
        if not _is_list(gpus) or not gpus:
            self.problem(host, "gpu_vm_gpus", "must be a non-empty list of GPU slots or {vendor_device, count}")
            return
        total = 0
        for index, gpu in enumerate(gpus):
            label = "gpu_vm_gpus[%d]" % index
            if isinstance(gpu, str):
                slot = normalise_slot(gpu)
                if slot is None:
                    self.problem(host, label, "%r is not a PCI slot (e.g. 0000:41:00 or 41:00)" % (gpu,))
                    continue
                total += 1
                if node is not None:
                    if (node, slot) in slots:
                        other = slots[(node, slot)]
                        what = "twice in this VM" if other == host else "to both %s and %s" % (other, host)
                        self.problem(sorted({host, other}), label, "GPU %s on %s is assigned %s"
                                     % (slot, node, what))
                    else:
                        slots[(node, slot)] = host
            elif _is_mapping(gpu):
                self.check_keys(host, label, gpu, GPU_BY_TYPE_KEYS)
                vendor_device = gpu.get("vendor_device")
                if not isinstance(vendor_device, str) or not _VENDOR_DEVICE.match(vendor_device):
                    self.problem(host, label + ".vendor_device", "%r is not a PCI id pair like 10de:2204"
                                 % (vendor_device,))
                count = _as_int(gpu.get("count", 1))
                if count is None or count < 1:
                    self.problem(host, label + ".count", "%r is not a positive integer" % (gpu.get("count"),))
                else:
                    total += count
            else:
                self.problem(host, label, "must be a PCI slot string or {vendor_device, count}, got %s"
                             % type(gpu).__name__)
        if total > MAX_HOSTPCI:
            self.problem(host, "gpu_vm_gpus", "asks for %d GPUs; a PVE VM has at most %d hostpci devices"
                         % (total, MAX_HOSTPCI))

    def check_models(self, host):
        models = self.var(host, "vllm_models")
        if models is None:
            return
        if not _is_list(models):
            self.problem(host, "vllm_models", "must be a list of {name, model, port, ...}")
            return
        names, ports = {}, {}
        for index, model in enumerate(models):
            label = "vllm_models[%d]" % index
            if not _is_mapping(model):
                self.problem(host, label, "must be a mapping {name, model, port, ...}")
                continue
            for key in MODEL_REQUIRED_KEYS:
                if model.get(key) in (None, ""):
                    self.problem(host, "%s.%s" % (label, key), "is missing")
            name = model.get("name")
            if name not in (None, ""):
                if not isinstance(name, str) or not _SERVED_NAME.match(name):
                    self.problem(host, label + ".name", "%r is not a usable served model name" % (name,))
                elif name in names:
                    self.problem(host, label + ".name", "'%s' is served twice on this VM (also %s)"
                                 % (name, names[name]))
                else:
                    names[name] = label
            port = model.get("port")
            if port is not None:
                number = _as_int(port)
                if number is None or not 1024 <= number <= 65535:
                    self.problem(host, label + ".port", "%r is not a TCP port from 1024 to 65535" % (port,))
                elif number in ports:
                    self.problem(host, label + ".port", "port %d is also used by %s" % (number, ports[number]))
                else:
                    ports[number] = label

    def check_model_disk(self, host):
        """The VM's models must fit where they are downloaded (the model disk, or the root disk with 0): found here,
        a site whose weights do not fit stops before any PVE host is touched, not when a download fills the disk."""
        models = self.var(host, "vllm_models")
        if not _is_list(models):
            return
        setting, margin, root = [self.var(host, name) for name in
                                 ("gpu_vm_model_disk_gib", "gpu_vm_model_disk_margin", "gpu_vm_disk_gib")]
        result = model_disk.plan([m for m in models if _is_mapping(m)],
                                 GPU_VM_DEFAULTS["gpu_vm_model_disk_gib"] if setting is None else setting,
                                 GPU_VM_DEFAULTS["gpu_vm_model_disk_margin"] if margin is None else margin,
                                 GPU_VM_DEFAULTS["gpu_vm_disk_gib"] if root is None else root)
        for message in result["problems"]:
            variable, _sep, text = message.partition(": ")
            self.problem(host, variable, text)

    # -- gateway ---------------------------------------------------------
    def served_models(self):
        served = set()
        for host in self.members("gpu_vms"):
            models = self.hosts[host].get("vllm_models")
            if _is_list(models):
                served.update(m.get("name") for m in models if _is_mapping(m) and isinstance(m.get("name"), str))
        return served

    def check_gateways(self):
        served = self.served_models()
        for host in self.members("llm_gateways"):
            known = set(served)
            external = self.var(host, "litellm_external_models")
            if _is_list(external):
                known.update(e.get("name") or e.get("model_name") for e in external if _is_mapping(e))
            self.check_fallbacks(host, known)
            self.check_clients(host, known)

    def check_fallbacks(self, host, known):
        fallbacks = self.var(host, "litellm_fallbacks")
        if fallbacks is None:
            return
        if not _is_mapping(fallbacks):
            self.problem(host, "litellm_fallbacks", "must be a mapping of model group to a list of fallback groups")
            return
        for group in sorted(fallbacks, key=str):
            targets = fallbacks[group]
            label = "litellm_fallbacks.%s" % group
            if group not in known:
                self.problem(host, label, "'%s' is not a model served by any GPU VM (vllm_models) or listed in "
                             "litellm_external_models" % group)
            if not _is_list(targets) or not targets:
                self.problem(host, label, "must be a non-empty list of model groups")
                continue
            for target in targets:
                if target == group:
                    self.problem(host, label, "'%s' falls back to itself" % group)
                elif target not in known:
                    self.problem(host, label, "fallback '%s' is not a model served by any GPU VM or listed in "
                                 "litellm_external_models" % (target,))

    def check_clients(self, host, known):
        clients = self.var(host, "litellm_clients")
        if clients is None:
            return
        if not _is_list(clients):
            self.problem(host, "litellm_clients", "must be a list of {alias, models, ...}")
            return
        aliases = {}
        for index, client in enumerate(clients):
            label = "litellm_clients[%d]" % index
            if not _is_mapping(client):
                self.problem(host, label, "must be a mapping {alias, models, ...}")
                continue
            self.check_keys(host, label, client, CLIENT_KEYS)
            alias = client.get("alias")
            if not isinstance(alias, str) or not _NAME.match(alias):
                self.problem(host, label + ".alias", "%r is not a client alias (letters, digits, '_' or '-')"
                             % (alias,))
            elif alias in aliases:
                self.problem(host, label + ".alias", "'%s' is also used by %s" % (alias, aliases[alias]))
            else:
                aliases[alias] = label
            models = client.get("models")
            if not _is_list(models) or not models:
                self.problem(host, label + ".models", "must be a non-empty list of model groups")
            else:
                for model in models:
                    if model not in known:
                        self.problem(host, label + ".models", "'%s' is not a model served by any GPU VM" % (model,))
            for key in ("max_budget", "max_parallel_requests", "tpm_limit", "rpm_limit"):
                value = client.get(key)
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                          or value < 0):
                    self.problem(host, "%s.%s" % (label, key), "%r must be a number >= 0" % (value,))
            duration = client.get("budget_duration")
            if duration is not None and (not isinstance(duration, str) or not _DURATION.match(duration)):
                self.problem(host, label + ".budget_duration", "%r is not a LiteLLM duration such as 30d, 24h or "
                             "1mo" % (duration,))

    # -- secrets ---------------------------------------------------------
    def check_secrets(self):
        for host in sorted(self.hosts):
            for name in sorted(self.hosts[host]):
                if not is_secret_variable(name):
                    continue
                value = self.hosts[host][name]
                message = None
                if isinstance(value, Unresolved):
                    message = "cannot be resolved: %s" % value.error
                elif value is None or value == "":
                    continue    # unset: the owning role generates it, or the required check below says so
                elif not isinstance(value, str):
                    message = "must be a string"
                elif value.strip().lower() in WEAK_SECRETS:
                    message = "is a well-known default; set a random value (vault) or leave it unset to generate one"
                elif name in SECRET_PREFIXES and not value.startswith(SECRET_PREFIXES[name]):
                    message = "must start with '%s'" % SECRET_PREFIXES[name]
                elif len(value) < MIN_SECRET_LENGTHS.get(name, MIN_SECRET_LENGTH):
                    message = "is %d characters long; use at least %d" % (
                        len(value), MIN_SECRET_LENGTHS.get(name, MIN_SECRET_LENGTH))
                if message:
                    self.problem(host, name, message)
        for host in vm_hosts(self.groups, self.hosts):
            token_id = self.hosts[host].get("gpu_vm_api_token_id")
            token_secret = self.hosts[host].get("gpu_vm_api_token_secret")
            password = self.hosts[host].get("gpu_vm_api_password")
            if token_id and not isinstance(token_id, Unresolved):
                if not isinstance(token_id, str) or not _TOKEN_ID.match(token_id):
                    self.problem(host, "gpu_vm_api_token_id", "%r is not a PVE API token id (user@realm!name)"
                                 % (token_id,))
                if not token_secret:
                    self.problem(host, "gpu_vm_api_token_secret", "is missing; gpu_vm_api_token_id is set")
            elif not password and not token_secret:
                self.problem(host, "gpu_vm_api_token_secret", "no PVE API credentials: set gpu_vm_api_token_id and "
                             "gpu_vm_api_token_secret (recommended) or gpu_vm_api_password, from a vault")

    def run(self):
        if not HAS_NETADDR:
            return [Problem("all", "python", "the netaddr Python library is required on the controller")]
        unknown_groups = [g for g in self.group_vlans if not isinstance(self.group_vlans[g], (list, tuple))]
        for group in unknown_groups:
            self.problem("all", "inventory_check_group_vlans.%s" % group, "must be a list of VLAN names")
            self.group_vlans = dict((g, v) for g, v in self.group_vlans.items() if g not in unknown_groups)
        self.check_vlans()
        self.check_interfaces()
        self.check_groups()
        self.check_vms()
        self.check_policy()
        self.check_gateways()
        self.check_secrets()
        return self.problems


def vm_hosts(groups, hosts):
    """The hosts that are VMs this collection creates through the PVE API, in inventory order: every host of
    gpu_vms, and any other host (a gateway, Langfuse, observability or client host) with ``gpu_vm_vmid`` set. The
    others are taken as existing (bare metal, or made elsewhere). A PVE host is never one (check_groups says so)."""
    pve_hosts = set((groups or {}).get("pve_hosts") or [])
    gpu_vms = set((groups or {}).get("gpu_vms") or [])
    order = list((groups or {}).get("all") or sorted(hosts or {}))
    order += [h for h in sorted(hosts or {}) if h not in order]
    return [h for h in order if h in (hosts or {}) and h not in pve_hosts
            and (h in gpu_vms or (hosts[h] or {}).get("gpu_vm_vmid") is not None)]


def validate(model, group_vlans=None):
    """All problems of an inventory model (see the module docstring); [] when it is valid."""
    return _Validator(model, group_vlans).run()


def wanted_variables(names):
    """Of a host's variable names, those the model needs: HOST_VARIABLES and the secret ones."""
    return [n for n in names if n in HOST_VARIABLES or is_secret_variable(n)]


def host_network(model, host):
    """The host's interfaces joined with their VLANs: [{vlan, id, address, prefix, cidr, gateway, bridge}].

    Only for a model that :func:`validate` accepted.
    """
    data = model["hosts"].get(host, {})
    vlans = data.get("llmstack_vlans") or {}
    result = []
    for iface in data.get("llmstack_interfaces") or []:
        vlan = vlans[iface["vlan"]]
        network = netaddr.IPNetwork(vlan["cidr"])
        entry = {
            "vlan": iface["vlan"],
            "id": _as_int(vlan["id"]),
            "address": str(iface["address"]).partition("/")[0],
            "prefix": network.prefixlen,
            "cidr": str(network.cidr),
            "gateway": vlan.get("gateway"),
            "bridge": vlan.get("bridge", "vmbr0"),
        }
        for key in ("mac", "name"):
            if iface.get(key):
                entry[key] = iface[key]
        result.append(entry)
    return result


def truthy(value, default=False):
    """A YAML or INI boolean as Ansible's ``bool`` filter reads it; ``default`` when unset (None)."""
    if value is None:
        return default
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y", "t")


def gpus_of_plans(plans):
    """All GPUs (gpu_vm_gpus entries) of these VM plans, in order: the default passthrough set of a host."""
    return [gpu for plan in plans or [] for gpu in plan.get("gpus") or []]
