# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PVE config of a GPU VM, from the inventory and its PVE host's PCI facts (the gpu_vm role). Plain Python.

Seed 000 §VM: ``machine: q35``, ``bios: ovmf`` with an EFI vars disk, ``cpu: host``, fixed memory
(``balloon: 0``: ballooning and VFIO DMA mappings conflict), ``numa: 1``, hostpci with ``pcie=1`` and
``x-vga=1`` on the first GPU only; §performance: hugepages, vCPUs and memory on the GPUs' NUMA node.

Every ``hostpciN`` and ``netN`` belongs to the plan: those it does not use are ``None`` (deleted when
present), so a GPU or a VLAN taken out of the inventory leaves the VM too. Pinning and hugepages work
the same way: switched off, their keys are ``None``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import hostpci as hostpci_utils
from ansible_collections.pvegpu.llmstack.plugins.module_utils import model_disk
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_vm
from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology, value_checks

MAX_NETS = 32
HUGEPAGE_MODES = ("auto", "none", "2", "1024", "any")
HOSTPCI_MODES = ("mapping", "raw")
# The settings plan() reads: the gpu_vm role's variables without their prefix. Their defaults are stated once, in
# roles/gpu_vm/defaults/main.yml (and its argument spec); the role passes every one, so none is defaulted here.
SETTINGS = ("machine", "cores", "sockets", "memory_mib", "storage", "disk_gib", "disk_options", "model_disk_gib",
            "model_disk_margin", "scsihw", "efidisk", "onboot", "agent", "ostype", "hostpci_mode", "mapping_prefix",
            "primary_vga", "rombar",
            "allow_shared_group", "numa_pin", "numa_node", "hugepages", "nic_model", "nic_firewall", "extra_config")


class GpuVmError(value_checks.SettingsProblems):
    """Problems that stop the plan: ``problems`` is a list of messages naming the variable."""


def _gpus_by_slot(pci):
    return dict((g["slot"], g) for g in (pci or {}).get("gpus") or [])


def mapping_name(prefix, pve_node, slot):
    """A PVE mapping id for a slot of a node: llmstack-pve-a-41-00."""
    node = re.sub(r"[^A-Za-z0-9_-]+", "-", str(pve_node)).strip("-")
    bus_dev = slot.split(":", 1)[1].replace(":", "-") if slot.count(":") == 2 else slot.replace(":", "-")
    return "%s-%s-%s" % (prefix, node, bus_dev)


def config_mappings(config, prefix, pve_node):
    """The PCI resource mappings a VM's config uses (``hostpciN: mapping=<name>,...``) that this collection made for
    the node (named ``<prefix>-<node>-...``, as mapping_name makes them), sorted: what to remove after the VM, even
    when the inventory no longer lists those GPUs. Mappings of other names are left alone."""
    own = mapping_name(prefix, pve_node, "00:00")[:-len("00-00")]
    # <prefix>-<node>-<bus>-<device> exactly: node pve-a must not take node pve-a-2's mappings.
    ours = re.compile("^%s[0-9a-fA-F]{2}-[0-9a-fA-F]{2}$" % re.escape(own))
    names = set()
    for key, value in (config or {}).items():
        if not (isinstance(key, str) and re.match(r"^hostpci[0-9]+$", key) and isinstance(value, str)):
            continue
        for option in value.split(","):
            name = option[len("mapping="):] if option.startswith("mapping=") else None
            if name and ours.match(name):
                names.add(name)
    return sorted(names)


def _device_as_gpu(pci, slot):
    """A gpus-like entry for a non-GPU slot that joins a VM with its shared IOMMU group."""
    devices = (pci or {}).get("devices") or {}
    functions = sorted(d for d in devices if d.startswith(slot + "."))
    first = devices.get(functions[0]) if functions else None
    if first is None:
        return None
    return {"slot": slot, "vendor": first.get("vendor"), "device": first.get("device"),
            "subsystem_vendor": first.get("subsystem_vendor"), "subsystem_device": first.get("subsystem_device"),
            "iommu_groups": [first["iommu_group"]] if first.get("iommu_group") else []}


def _is_vga(pci, slot):
    """True when function 0 of the slot is a VGA controller (class 0x0300), or nothing says otherwise."""
    device = ((pci or {}).get("devices") or {}).get(slot + ".0") or {}
    return not device.get("class") or str(device["class"]).startswith("0300")


def _hugepages(mode, memory_mib, pci, warnings):
    reserved = dict((str(k), int(v or 0)) for k, v in ((pci or {}).get("hugepages") or {}).items())
    mib = {"2": reserved.get("2048", 0) * 2, "1024": reserved.get("1048576", 0) * 1024}
    if mode == "none":
        return None
    if mode == "any":
        return "any"
    if mode in ("2", "1024"):
        if mib[mode] < memory_mib:
            warnings.append("gpu_vm_hugepages: %s asks for %s MiB pages, the host reserves %d MiB of them, less "
                            "than the VM's %d MiB: PVE will not start the VM until more are reserved (vfio_hugepages)"
                            % (mode, mode, mib[mode], memory_mib))
        return mode
    for size in ("1024", "2"):
        if mib[size] >= memory_mib:
            return size
    if mib["2"] or mib["1024"]:
        warnings.append("gpu_vm_hugepages: the host reserves %d MiB of hugepages, less than the VM's %d MiB: not "
                        "using them (raise vfio_hugepages, or lower gpu_vm_memory_mib)"
                        % (max(mib.values()), memory_mib))
    return None


def _numa(settings, gpu_nodes, pci, warnings):
    """(affinity, numa0) of a pinned VM, or (None, None)."""
    wanted = settings["numa_node"]
    nodes = sorted(gpu_nodes)
    if wanted is not None and nodes and nodes != [int(wanted)]:
        warnings.append("gpu_vm_numa_node: %s, but the VM's GPUs sit on NUMA node(s) %s: memory and CPU traffic to "
                        "them crosses sockets" % (wanted, ", ".join(str(n) for n in nodes)))
    if not settings["numa_pin"]:
        return None, None
    if wanted is None:
        if len(nodes) != 1:
            where = ("sit on NUMA nodes %s" % ", ".join(str(n) for n in nodes)) if nodes else \
                "have no known NUMA node"
            warnings.append("gpu_vm_numa_pin: the VM's GPUs %s: not pinning; set gpu_vm_numa_node to choose one"
                            % where)
            return None, None
        wanted = nodes[0]
    cpus = (((pci or {}).get("numa_nodes") or {}).get(str(wanted)) or {}).get("cpus")
    host_cpus = pve_vm.cpuset(cpus) if cpus else None
    if not host_cpus:
        warnings.append("gpu_vm_numa_pin: the host reports no CPUs for NUMA node %s: not pinning" % wanted)
        return None, None
    vcpus = settings["cores"] * settings["sockets"]
    if vcpus > len(host_cpus):
        warnings.append("gpu_vm_numa_pin: %d vCPUs on the %d CPUs of NUMA node %s: they will share CPUs"
                        % (vcpus, len(host_cpus), wanted))
    numa0 = "cpus=%s,hostnodes=%s,memory=%d,policy=bind" % ("0" if vcpus == 1 else "0-%d" % (vcpus - 1), wanted,
                                                            settings["memory_mib"])
    return pve_vm.format_cpuset(host_cpus), numa0


def _nets(interfaces, vlans, settings, problems):
    nets = {}
    for index, iface in enumerate(interfaces or []):
        vlan = (vlans or {}).get(iface.get("vlan"))
        if vlan is None:
            problems.append("llmstack_interfaces[%d]: VLAN %r is not in llmstack_vlans" % (index, iface.get("vlan")))
            continue
        model = settings["nic_model"]
        first = "%s=%s" % (model, str(iface["mac"]).upper()) if iface.get("mac") else model
        parts = [first, "bridge=%s" % vlan.get("bridge", "vmbr0"), "tag=%d" % int(vlan["id"])]
        if settings["nic_firewall"]:
            parts.append("firewall=1")
        nets["net%d" % index] = ",".join(parts)
    if len(nets) > MAX_NETS:
        problems.append("llmstack_interfaces: %d interfaces, a PVE VM has at most %d" % (len(nets), MAX_NETS))
    return nets


def check_settings(settings):
    problems = []
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        problems.append("settings: unknown %s" % ", ".join(unknown))
    missing = [k for k in SETTINGS if k not in settings]
    if missing:
        # Defaults live in the role's defaults/main.yml only; a caller of the module passes every setting.
        raise GpuVmError(["settings: missing %s (pass every gpu_vm_ setting without the prefix; the gpu_vm role's "
                          "defaults/main.yml has their defaults)" % ", ".join(missing)] + problems)
    merged = dict((k, settings[k]) for k in SETTINGS)
    for key in ("cores", "sockets", "memory_mib", "disk_gib"):
        try:
            merged[key] = int(merged[key])
            if merged[key] < 1:
                raise ValueError
        except (TypeError, ValueError):
            problems.append("gpu_vm_%s: %r is not a positive integer" % (key, merged[key]))
    if str(merged["hugepages"]) not in HUGEPAGE_MODES:
        problems.append("gpu_vm_hugepages: %r is not one of %s" % (merged["hugepages"], ", ".join(HUGEPAGE_MODES)))
    merged["hugepages"] = str(merged["hugepages"])
    if merged["hostpci_mode"] not in HOSTPCI_MODES:
        problems.append("gpu_vm_hostpci_mode: %r is not one of %s" % (merged["hostpci_mode"], ", ".join(HOSTPCI_MODES)))
    if not re.match(r"^[A-Za-z][A-Za-z0-9_-]*$", str(merged["mapping_prefix"])):
        problems.append("gpu_vm_mapping_prefix: %r must start with a letter, then letters, digits, '_' or '-'"
                        % (merged["mapping_prefix"],))
    if not re.match(r"^(?:pc-)?q35", str(merged["machine"])):
        problems.append("gpu_vm_machine: %r is not a q35 machine type; PCIe passthrough needs q35 (seed 000)"
                        % (merged["machine"],))
    if merged["numa_node"] is not None:
        try:
            merged["numa_node"] = int(merged["numa_node"])
        except (TypeError, ValueError):
            problems.append("gpu_vm_numa_node: %r is not a NUMA node number" % (merged["numa_node"],))
    if not isinstance(merged["extra_config"] or {}, dict):
        problems.append("gpu_vm_extra_config: must be a dict of PVE config keys")
    return merged, problems


def plan(vm, node_vms, pci, vlans, settings):
    """The VM's PVE config: {'config', 'slots', 'mappings': [{name, node, gpu}], 'warnings'}.

    ``vm``: {name, node (inventory name of the PVE host), pve_node (its PVE node name), gpus
    (gpu_vm_gpus; empty for a VM without GPUs), interfaces (llmstack_interfaces), models (vllm_models: they size
    the model disk)}; ``node_vms``: every VM
    the inventory places on that host, in inventory order ({name, gpus}); ``pci``: the host's llmstack_pci
    facts. Raises GpuVmError with every problem found.
    """
    settings, problems = check_settings(settings or {})
    warnings = []
    # A VM without GPUs (a gateway, Langfuse, monitoring or client VM, issue #33) shares every setting but the
    # passthrough ones: no IOMMU needed, nothing to pin to, and the hugepages the host reserved stay for the GPU VMs.
    with_gpus = bool(vm.get("gpus"))
    if with_gpus and not (pci or {}).get("iommu_enabled"):
        problems.append("gpu_vm_node: %s has no IOMMU groups (IOMMU off?); run the pve_hosts stage (host_preflight, "
                        "vfio) first" % vm["node"])
    vm = dict(vm, allow_shared_group=settings["allow_shared_group"])
    node_vms = list(node_vms or [])
    if vm["name"] not in [v["name"] for v in node_vms]:
        node_vms.append(vm)
    node_vms = [vm if v["name"] == vm["name"] else v for v in node_vms]
    assigned, gpu_problems = topology.place_gpus(node_vms, pci, vm["node"])
    problems.extend(gpu_problems.get(vm["name"], []))
    slots = assigned.get(vm["name"], [])
    gpus = _gpus_by_slot(pci)
    hostpci = {}
    mappings = []
    primary_vga = settings["primary_vga"]
    if slots and primary_vga and not _is_vga(pci, slots[0]):
        # A 3D controller (V100, A100, H100) has no VGA; QEMU refuses x-vga on it.
        primary_vga = False
    if slots and not problems:
        try:
            raw = hostpci_utils.build(slots, pcie=True, primary_vga=primary_vga, rombar=settings["rombar"],
                                      facts=pci, allow_shared_group=settings["allow_shared_group"],
                                      machine=settings["machine"])
        except hostpci_utils.HostpciError as exc:
            problems.append("gpu_vm_gpus: %s" % exc)
            raw = {}
        addresses = [value.split(",", 1)[0] for key, value in sorted(raw.items(), key=lambda kv: int(kv[0][7:]))]
        names = {}
        if settings["hostpci_mode"] == "mapping":
            for address in addresses:
                gpu = gpus.get(address) or _device_as_gpu(pci, address)
                if gpu is None:
                    problems.append("gpu_vm_gpus: %s is not on %s" % (address, vm["node"]))
                    continue
                name = mapping_name(settings["mapping_prefix"], vm["pve_node"], address)
                names[address] = name
                mappings.append({"name": name, "node": vm["pve_node"], "slot": address, "gpu": gpu})
        if not problems:
            hostpci = hostpci_utils.build(addresses, pcie=True, primary_vga=primary_vga,
                                          rombar=settings["rombar"], mappings=names, machine=settings["machine"])
    gpu_nodes = set(gpus[s]["numa_node"] for s in slots if s in gpus and gpus[s].get("numa_node") is not None)
    affinity, numa0 = _numa(settings, gpu_nodes, pci, warnings) if with_gpus else (None, None)
    nets = _nets(vm.get("interfaces"), vlans, settings, problems)
    # The model disk (seed 000's /data/llm/models on its own disk), sized from what the VM's models download.
    disk = model_disk.plan(vm.get("models"), settings["model_disk_gib"], settings["model_disk_margin"],
                           settings["disk_gib"])
    problems.extend(disk["problems"])
    warnings.extend(disk["warnings"])
    if problems:
        raise GpuVmError(problems)

    storage = settings["storage"]
    config = {
        "machine": settings["machine"],
        "bios": "ovmf",
        "efidisk0": "%s:1,efitype=4m,pre-enrolled-keys=0" % storage if settings["efidisk"] else None,
        "cpu": "host",
        "cores": settings["cores"],
        "sockets": settings["sockets"],
        "memory": settings["memory_mib"],
        "balloon": 0,
        "numa": 1,
        "scsihw": settings["scsihw"],
        "scsi0": ",".join(p for p in ("%s:%d" % (storage, settings["disk_gib"]), settings["disk_options"]) if p),
        "agent": "1" if settings["agent"] else "0",
        "onboot": 1 if settings["onboot"] else 0,
        "ostype": settings["ostype"],
        "hugepages": (_hugepages(settings["hugepages"], settings["memory_mib"], pci, warnings)
                      if with_gpus or settings["hugepages"] != "auto" else None),
        "affinity": affinity,
        "numa0": numa0,
    }
    if not settings["efidisk"]:
        # Never detach an existing EFI disk just because the setting changed: leave the key alone.
        config.pop("efidisk0")
    if disk["size_gib"]:
        config[model_disk.DISK_KEY] = model_disk.config_value(disk, storage, settings["disk_options"])
    # No model disk (0, or nothing to download): an existing one is left alone, never detached with its models.
    for index in range(hostpci_utils.MAX_HOSTPCI):
        config["hostpci%d" % index] = hostpci.get("hostpci%d" % index)
    for index in range(MAX_NETS):
        config["net%d" % index] = nets.get("net%d" % index)
    config.update(settings["extra_config"] or {})
    disk_summary = dict((k, disk[k]) for k in ("size_gib", "weights_gib", "models", "grow_only"))
    disk_summary.update({"key": model_disk.DISK_KEY if disk["size_gib"] else None,
                         "device": model_disk.DEVICE if disk["size_gib"] else None})
    return {"config": config, "slots": slots, "mappings": mappings, "warnings": warnings, "model_disk": disk_summary,
            "grow_only_disks": [model_disk.DISK_KEY] if disk["size_gib"] and disk["grow_only"] else []}


def limit_names(limit):
    """The host names a --limit (ansible_limit) names literally: its entries split on ',' and ':', without
    exclusions (!x), intersections (&x), wildcards, ranges and regular expressions (~x), which name no host by
    itself."""
    if not isinstance(limit, str):
        return []
    names = []
    for entry in re.split(r"[,:]", limit):
        entry = entry.strip()
        if not entry or entry[0] in "!&~@" or any(c in entry for c in "*?[]"):
            continue
        names.append(entry)
    return names


def destroy_problems(state, host, vm_name, vmid, limit, destroy):
    """Why a GPU VM in state ``absent`` may not be destroyed by this run ([] when it may, or is not absent): it must
    be named, literally, by the run's --limit (``limit``: ansible_limit, None without one) or by ``destroy``
    (gpu_vm_destroy: inventory names or VM names). A limit by group (--limit gpu_vms) or pattern names no VM: one
    command must not destroy every GPU VM of an inventory."""
    if not isinstance(destroy, (list, tuple)) or not all(isinstance(d, str) for d in destroy):
        return ["gpu_vm_destroy: %r is not a list of VM names (inventory names or gpu_vm_name)" % (destroy,)]
    if state != "absent":
        return []
    named = set(limit_names(limit)) | set(destroy)
    if host in named or vm_name in named:
        return []
    return ["gpu_vm_state: absent would destroy VM %s (%s) of %s, and this run names no VM to destroy: limit the "
            "run to the VMs to take away by their names (--limit %s; a group or a pattern names none), or list them "
            "in gpu_vm_destroy. Nothing was changed." % (vmid, vm_name, host, host)]
