#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pve_vm
short_description: Manage a PVE QEMU VM's existence, configuration and power state, key by key
version_added: 0.1.0
description:
  - Ensures a VM with the given O(vmid) and O(name) exists on O(node) with the given O(config) keys; only the keys
    in O(config) are managed, every other key is left as it is.
  - Reads the VM's config including its pending changes, compares each managed key in canonical form (property
    strings in any order, sizes in any unit, booleans, the MAC address PVE generated for a NIC, a disk allocation
    such as C(local-lvm:32) against the volume PVE made of it), and sends only the keys that differ, with the
    config digest so that a concurrent edit is refused rather than overwritten.
  - Never detaches a disk unless O(remove_disks) is true and never shrinks one; a bigger disk size is a resize,
    a changed disk option is applied to the existing volume.
  - "Fails before any change on: a O(vmid) used by a VM of another name or on another node, an unknown O(node),
    a C(hostpciN) with both a host address and a mapping, C(pcie=1) without C(machine: q35), C(efidisk0) without
    C(bios: ovmf), and a raw host address in C(hostpciN) when authenticating with an API token or as a user other
    than root@pam (PVE allows that only to root@pam; use a PCI mapping, see M(pvegpu.llmstack.pve_pci_mapping))."
  - Power changes shut the VM down through ACPI or the guest agent, never a hard stop unless O(force_stop_after) is
    set, because NVIDIA GPUs often fail to reset after a hard stop (seed 000).
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.api_diff
  - pvegpu.llmstack.attributes.pve_group
  - pvegpu.llmstack.pve
options:
  node:
    description: The PVE node that runs (or is to run) the VM.
    type: str
    required: true
  vmid:
    description: The VM id.
    type: int
    required: true
  name:
    description:
      - The VM's name. A VM with this O(vmid) but another name is never changed or removed (the module fails).
    type: str
    required: true
  config:
    description:
      - PVE config keys and values (C(/nodes/{node}/qemu/{vmid}/config)), the managed keys. A value of V(null)
        deletes the key. New disks use PVE's allocation syntax C(<storage>:<GiB>[,options]).
    type: dict
    default: {}
  state:
    description:
      - V(present) ensures the VM and its config, without touching its power state. V(started) and V(stopped) also
        ensure the power state; V(restarted) shuts the VM down (if running) and starts it, which also applies
        pending changes. V(absent) shuts it down and destroys it with the disks its config references (see
        O(destroy_unreferenced_disks)).
    type: str
    choices: [present, absent, started, stopped, restarted]
    default: present
  remove_disks:
    description: Allow a disk key set to V(null) in O(config) to be detached (PVE keeps it as C(unusedN)).
    type: bool
    default: false
  grow_only_disks:
    description:
      - Disk keys of O(config) whose size is a floor, such as a size computed from what the disk will hold (the
        gpu_vm role's model disk with C(gpu_vm_model_disk_gib=auto)) - a smaller size keeps the disk's current size
        instead of failing (PVE cannot shrink a disk); a bigger one is a resize as for any disk.
    type: list
    elements: str
    default: []
  destroy_unreferenced_disks:
    description:
      - With O(state=absent), also destroy the disks of the VM's id on any storage that its config does not
        reference (PVE's C(destroy-unreferenced-disks)). Off by default - such a disk was not made by this module
        (attached by hand, left by a restore) and may be someone's data.
    type: bool
    default: false
  shutdown_timeout:
    description: Seconds to wait for the guest to power off after the ACPI or guest agent request.
    type: int
    default: 180
  force_stop_after:
    description:
      - Seconds after which a guest that did not power off is stopped hard. Unset (the default), the module fails
        instead, because a hard stop can leave an NVIDIA GPU unable to reset until the host reboots.
    type: int
  task_timeout:
    description: Seconds to wait for a PVE task (create, configure, resize, start, destroy).
    type: int
    default: 600
attributes:
  check_mode:
    details: In check mode O(state=present) reads only; C(reboot_required) is then a prediction.
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: The seed's platform-A VM, four RTX 3090 through PCI mappings
  pvegpu.llmstack.pve_vm:
    api_host: pve-a.example.org
    api_user: automation@pve
    api_token_id: automation@pve!llmstack
    api_token_secret: "{{ vault_pve_token_secret }}"
    node: pve-a
    vmid: 120
    name: gpu-3090
    config:
      machine: q35
      bios: ovmf
      efidisk0: "local-lvm:1,efitype=4m,pre-enrolled-keys=0"
      cpu: host
      cores: 32
      memory: 131072
      balloon: 0
      numa: 1
      scsihw: virtio-scsi-single
      scsi0: "local-lvm:200,discard=on,iothread=1,ssd=1"
      agent: 1
      hostpci0: "mapping=rtx3090-41,pcie=1,x-vga=1"
      hostpci1: "mapping=rtx3090-61,pcie=1"
      net0: "virtio,bridge=vmbr0,tag=20"
    state: started
  delegate_to: localhost

- name: Grow the disk and take away a NIC
  pvegpu.llmstack.pve_vm:
    node: pve-a
    vmid: 120
    name: gpu-3090
    config:
      scsi0: "local-lvm:400,discard=on,iothread=1,ssd=1"
      net1: null

- name: Apply pending changes (a reboot, ACPI first)
  pvegpu.llmstack.pve_vm:
    node: pve-a
    vmid: 120
    name: gpu-3090
    state: restarted
    force_stop_after: 300
"""

RETURN = r"""
operation:
  description: C(create), C(update), C(delete) or C(none), for the config (done, or in check mode to be done).
  returned: always
  type: str
  sample: update
diff:
  description: The managed keys before and after (raw values as PVE shows them).
  returned: always
  type: dict
  sample: {"before": {"cores": "16"}, "after": {"cores": "32"}}
reboot_required:
  description: The VM is running and has pending changes that take effect at its next start.
  returned: always
  type: bool
pending:
  description: The keys with pending changes after the run.
  returned: always
  type: list
  elements: str
status:
  description: The VM's power state after the run (C(running), C(stopped)), C(absent) when it does not exist.
  returned: always
  type: str
config:
  description: The VM's config as PVE reports it after the run (in check mode, before it); without C(digest).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_api, pve_vm

# Keys PVE applies to a running VM at once (the rest waits for the next start, unless hot-plugged).
HOTPLUG_KEYS = ("name", "description", "onboot", "tags", "protection", "startup")


class Runner(object):
    def __init__(self, module, vm):
        self.module = module
        self.vm = vm
        self.params = module.params
        self.changed = False

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def call(self, what, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except pve_vm.PveTaskError as exc:
            self.fail("%s: %s" % (what, exc))
        except pve_api.ResourceException as exc:
            hint = ""
            if "403" in str(exc) or "ermission" in str(exc):
                hint = (" (hostpci with a mapping needs Mapping.Use on /mapping/pci/<name> and VM.Config.HWType; a raw "
                        "host address needs root@pam)")
            self.fail("%s: %s%s" % (what, exc, hint))
        return None

    def check_identity(self):
        params = self.params
        nodes = self.call("listing the PVE nodes", self.vm.nodes)
        if params["node"] not in nodes:
            self.fail("node: '%s' is not a node of this PVE cluster (nodes: %s)"
                      % (params["node"], ", ".join(nodes) or "none"))
        found = self.call("looking up VM %d" % params["vmid"], self.vm.find)
        if found is None:
            return None
        if found["type"] != "qemu":
            self.fail("vmid: %d is taken by a container (%s) on node %s"
                      % (params["vmid"], found["name"], found["node"]))
        if found["name"] != params["name"]:
            self.fail("vmid: %d is taken by the VM '%s' on node %s, not '%s'; choose another vmid (or rename that VM "
                      "in PVE if it is this one)" % (params["vmid"], found["name"], found["node"], params["name"]))
        if found["node"] != params["node"]:
            self.fail("node: VM %d '%s' runs on node %s, not %s; pve_vm does not migrate VMs"
                      % (params["vmid"], params["name"], found["node"], params["node"]))
        return found

    def power_off(self, status):
        if status != "running":
            return status
        self.changed = True
        if self.module.check_mode:
            return "stopped"
        force_after = self.params["force_stop_after"]
        timeout = force_after if force_after is not None else self.params["shutdown_timeout"]
        try:
            self.vm.shutdown(timeout, force_after is not None)
        except pve_vm.PveTaskError as exc:
            self.fail("VM %d did not power off within %ss after the ACPI/guest agent request (%s). Check the guest "
                      "(qemu-guest-agent, acpid), or set force_stop_after to stop it hard as a last resort: NVIDIA "
                      "GPUs may then need a host reboot before they reset" % (self.vm.vmid, timeout, exc))
        except pve_api.ResourceException as exc:
            self.fail("shutting down VM %d: %s" % (self.vm.vmid, exc))
        return "stopped"

    def power_on(self, status):
        if status == "running":
            return status
        self.changed = True
        if not self.module.check_mode:
            self.call("starting VM %d" % self.vm.vmid, self.vm.start)
        return "running"

    def absent(self, found):
        if found is None:
            return {"operation": "none", "status": "absent", "config": {}, "diff": {"before": {}, "after": {}}}
        before = self.call("reading VM %d" % self.vm.vmid, self.vm.config) or {}
        before.pop("digest", None)
        self.power_off(found["status"])
        self.changed = True
        if not self.module.check_mode:
            self.call("destroying VM %d" % self.vm.vmid, self.vm.destroy, self.params["destroy_unreferenced_disks"])
        return {"operation": "delete", "status": "absent", "config": {}, "diff": {"before": before, "after": {}}}

    def present(self, found):
        params = self.params
        config = params["config"] or {}
        current = None
        pending_before = {}
        if found is not None:
            pending = self.call("reading VM %d" % self.vm.vmid, self.vm.pending)
            current, pending_before = pve_vm.effective_config(pending)
        problems = pve_vm.validate(config, current, api_user=params["api_user"], token=bool(params["api_token_id"]))
        if problems:
            self.fail("VM %d '%s': %s" % (params["vmid"], params["name"], "; ".join(problems)), problems=problems)
        for warning in pve_vm.warnings_of(config, current):
            self.module.warn("VM %d '%s': %s" % (params["vmid"], params["name"], warning))
        try:
            step = pve_vm.plan(config, current, remove_disks=params["remove_disks"],
                               grow_only=params["grow_only_disks"])
        except pve_vm.VmConfigError as exc:
            self.fail("VM %d '%s': %s" % (params["vmid"], params["name"], exc))
        operation = "none"
        if step["create"]:
            operation = "create"
        elif pve_vm.changes(step):
            operation = "update"
        if operation != "none":
            self.changed = True
        if operation != "none" and not self.module.check_mode:
            self.apply(step)
        status = "stopped" if found is None else found["status"]
        state = params["state"]
        if state == "started":
            status = self.power_on(status)
        elif state == "stopped":
            status = self.power_off(status)
        elif state == "restarted":
            self.changed = True
            status = self.power_on(self.power_off(status))
        result = {"operation": operation, "status": status, "diff": {"before": step["before"], "after": step["after"]}}
        if self.module.check_mode:
            result["config"] = dict((k, v) for k, v in (current or {}).items())
            if state == "restarted" or (status == "running" and found is not None and found["status"] != "running"):
                result["pending"] = []
            else:
                changed_keys = [k for k in list(step["set"]) + step["delete"] if k not in HOTPLUG_KEYS]
                result["pending"] = sorted(set(pending_before) | set(changed_keys)) if found is not None else []
        else:
            result["config"] = self.call("reading VM %d" % self.vm.vmid, self.vm.config) or {}
            result["config"].pop("digest", None)
            result["pending"] = sorted(pve_vm.effective_config(self.call("reading VM %d" % self.vm.vmid,
                                                                         self.vm.pending))[1])
        result["reboot_required"] = status == "running" and bool(result["pending"])
        return result

    def apply(self, step):
        vmid = self.vm.vmid
        if step["create"]:
            self.call("creating VM %d" % vmid, self.vm.create, self.params["name"], step["set"])
            return
        if step["set"] or step["delete"]:
            digest = (self.call("reading VM %d" % vmid, self.vm.config) or {}).get("digest")
            allocates = any(pve_vm.DRIVE_KEY.match(k) for k in step["set"])
            self.call("configuring VM %d" % vmid, self.vm.update, step["set"], step["delete"], digest,
                      asynchronous=allocates)
        for disk in sorted(step["resize"]):
            self.call("resizing %s of VM %d" % (disk, vmid), self.vm.resize, disk, step["resize"][disk])


def main():
    argument_spec = pve_api.pve_argument_spec()
    argument_spec.update(
        node=dict(type="str", required=True),
        vmid=dict(type="int", required=True),
        name=dict(type="str", required=True),
        config=dict(type="dict", default={}),
        state=dict(type="str", choices=["present", "absent", "started", "stopped", "restarted"], default="present"),
        remove_disks=dict(type="bool", default=False),
        grow_only_disks=dict(type="list", elements="str", default=[]),
        destroy_unreferenced_disks=dict(type="bool", default=False),
        shutdown_timeout=dict(type="int", default=180),
        force_stop_after=dict(type="int"),
        task_timeout=dict(type="int", default=600),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_together=pve_api.PVE_REQUIRED_TOGETHER,
                           required_one_of=pve_api.PVE_REQUIRED_ONE_OF,
                           mutually_exclusive=pve_api.PVE_MUTUALLY_EXCLUSIVE)
    params = module.params
    if not 100 <= params["vmid"] <= 999999999:
        module.fail_json(msg="vmid: %d is not a PVE VM id (100-999999999)" % params["vmid"])
    problems = pve_vm.validate(params["config"] or {}, {"machine": "q35", "bios": "ovmf"},
                               api_user=params["api_user"], token=bool(params["api_token_id"]))
    if problems:
        # Malformed keys and values, and a raw address with a token: known before reading anything.
        module.fail_json(msg="VM %d '%s': %s" % (params["vmid"], params["name"], "; ".join(problems)),
                         problems=problems)
    api = pve_api.connect(module)
    runner = Runner(module, pve_vm.VmApi(api, params["node"], params["vmid"], task_timeout=params["task_timeout"]))
    found = runner.check_identity()
    if params["state"] == "absent":
        result = runner.absent(found)
        result.update(reboot_required=False, pending=[])
    else:
        result = runner.present(found)
    module.exit_json(changed=runner.changed, **result)


if __name__ == "__main__":
    main()
