#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pve_disk_import
short_description: Put a disk image on a PVE VM's drive with import-from, once, and boot from it
version_added: 0.1.0
description:
  - "Sets the VM's drive (O(disk)) to C(<storage>:0,import-from=<source>): PVE allocates a volume of the image's size
    on O(storage), copies the image into it, and the drive's previous volume becomes C(unusedN). Sets
    C(boot=order=<disk>) and tags the VM C(llmstack-img-<digest prefix>)."
  - "The previous volume is never deleted unless it is this collection's (O(displaced)): by default a disk the
    collection did not put there - the VM carries no C(llmstack-img-) tag and the volume is not in O(owned_volumes)
    - stays on its storage as C(unusedN) and the module warns, naming the VM, the drive and the volume. The
    module cannot tell an empty disk from one holding an installed system or data through the API, so keeping is
    the only default that never loses data; it costs one unused volume (thin on LVM-thin, ZFS, Ceph and qcow2)
    that C(qm set <vmid> --delete unusedN) or the GUI frees. Refusing instead would stop the first
    import of every VM whose empty disk the M(pvegpu.llmstack.pve_vm) module created in an earlier run."
  - "With O(replace) on a VM tagged with another image of ours, the image volume it displaces is deleted (the
    data O(replace) says is lost) unless O(displaced=keep), which keeps it as C(unusedN), e.g. to go back."
  - Idempotent through that tag - a VM tagged with this image's digest is left alone (only its boot order is
    corrected). A VM tagged with another image holds an installed guest that has changed since; it is replaced
    only with O(replace). A running VM is never changed (PVE would stage the change as pending).
  - The source is a volume id on a storage with the C(import) content type (PVE 8.2 and later), e.g.
    C(local:import/gpu-vm-a.raw) for C(/var/lib/vz/import/gpu-vm-a.raw), which an API token may import from
    (absolute paths are C(root@pam)'s). Needs C(VM.Config.Disk), C(VM.Config.Options) and
    C(Datastore.AllocateSpace) on the target storage.
  - Check mode reports what would change, including the C(unusedN) key the displaced volume would get and whether
    it would be deleted; diff mode shows the drive, boot order, tags and the displaced volume before and after.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.api_diff
  - pvegpu.llmstack.attributes.pve_group
  - pvegpu.llmstack.pve
options:
  node:
    description: The PVE node the VM is on.
    type: str
    required: true
  vmid:
    description: The VM id.
    type: int
    required: true
  disk:
    description: The drive that gets the image.
    type: str
    default: scsi0
  storage:
    description: The storage the imported volume is allocated on.
    type: str
    required: true
  source:
    description: The image as a PVE volume id, C(<storage>:import/<file>.raw).
    type: str
    required: true
  options:
    description: Drive options kept on the imported drive (C(discard=on,iothread=1,ssd=1)).
    type: str
    default: ''
  digest:
    description: SHA-256 of the image's inputs (M(pvegpu.llmstack.guest_image_build) returns it); its first 12
      characters go into the VM's tag.
    type: str
    required: true
  replace:
    description: Replace the disk of a VM that already holds another image (its data is lost, see O(displaced)).
    type: bool
    default: false
  displaced:
    description:
      - What becomes of the volume the import takes off O(disk) (PVE makes it C(unusedN) first).
      - V(auto) deletes it only when it is this collection's - the VM carries an C(llmstack-img-) tag (an image
        imported earlier, replaced with O(replace)), or the volume is one of O(owned_volumes) - and keeps any
        other volume as C(unusedN).
      - V(keep) keeps every displaced volume as C(unusedN); V(delete) deletes it whoever put it there (its data is
        lost).
    type: str
    choices: [auto, keep, delete]
    default: auto
  owned_volumes:
    description:
      - Volume ids (or drive values such as C(local-lvm:vm-120-disk-1,size=64G)) that the caller allocated and
        nothing has written to since, e.g. the empty disk M(pvegpu.llmstack.pve_vm) created in the same run. With
        O(displaced=auto) such a volume is deleted when the import displaces it. Only the volume currently on
        O(disk) is compared.
    type: list
    elements: str
    default: []
  boot:
    description: Set the boot order to start at O(disk).
    type: bool
    default: true
  task_timeout:
    description: Seconds to wait for PVE's import task.
    type: int
    default: 1800
"""

EXAMPLES = r"""
- name: Put the guest image on the VM's first disk
  pvegpu.llmstack.pve_disk_import:
    api_host: pve-a.lan
    api_user: ansible@pve
    api_token_id: ansible@pve!llmstack
    api_token_secret: "{{ vault_pve_token_secret }}"
    node: pve-a
    vmid: 101
    storage: local-lvm
    source: local:import/gpu-3090.raw
    options: discard=on,iothread=1,ssd=1
    digest: "{{ built.digest }}"
  delegate_to: localhost

- name: Import into a VM created by hand; its old disk stays as unusedN (the default) - or free it explicitly
  pvegpu.llmstack.pve_disk_import:
    node: pve-a
    vmid: 130
    storage: local-lvm
    source: local:import/gpu-3090.raw
    digest: "{{ built.digest }}"
    displaced: delete
  delegate_to: localhost
"""

RETURN = r"""
outcome:
  description: C(import), C(boot) (only the boot order changed) or C(none).
  returned: success
  type: str
reason:
  description: Why.
  returned: success
  type: str
update:
  description: The config parameters sent (or that would be sent in check mode).
  returned: success
  type: dict
displaced:
  description:
    - The volume the import takes (or in check mode would take) off O(disk), and what becomes of it. In check mode
      a prediction, which a real run reports from the VM's config afterwards.
  returned: when an import displaces a volume
  type: dict
  contains:
    volume:
      description: Its volume id.
      type: str
      sample: local-lvm:vm-120-disk-0
    key:
      description: The C(unusedN) key PVE gives it (null when PVE kept it in no key, e.g. a volume of another VM).
      type: str
      sample: unused0
    action:
      description: C(keep) (left as C(unusedN)), C(delete) (freed) or C(detached) (PVE put it in no C(unusedN)).
      type: str
      sample: keep
    ours:
      description: Whether the collection put it there (an image tag of ours on the VM, or one of O(owned_volumes)).
      type: bool
removed:
  description: The C(unusedN) key deleted after the import (only when the displaced volume was deleted).
  returned: when an import deleted the displaced volume
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_api, pve_import, pve_vm


def main():
    argument_spec = pve_api.pve_argument_spec()
    argument_spec.update(
        node=dict(type="str", required=True), vmid=dict(type="int", required=True),
        disk=dict(type="str", default="scsi0"), storage=dict(type="str", required=True),
        source=dict(type="str", required=True), options=dict(type="str", default=""),
        digest=dict(type="str", required=True, no_log=False), replace=dict(type="bool", default=False),
        displaced=dict(type="str", default="auto", choices=list(pve_import.DISPLACED)),
        owned_volumes=dict(type="list", elements="str", default=[]),
        boot=dict(type="bool", default=True), task_timeout=dict(type="int", default=1800),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_together=pve_api.PVE_REQUIRED_TOGETHER,
                           required_one_of=pve_api.PVE_REQUIRED_ONE_OF,
                           mutually_exclusive=pve_api.PVE_MUTUALLY_EXCLUSIVE)
    p = module.params
    problems = pve_import.check(p["disk"], p["storage"], p["source"], p["options"], p["digest"])
    if problems:
        module.fail_json(msg="; ".join(problems))
    vm = pve_vm.VmApi(pve_api.connect(module), p["node"], p["vmid"], task_timeout=p["task_timeout"])
    try:
        config = vm.config()
        status = vm.status()
    except pve_api.ResourceException as exc:
        module.fail_json(msg="VM %d on node %s: %s" % (p["vmid"], p["node"], exc))
    decision = pve_import.plan(config, status, p["disk"], p["storage"], p["source"], p["options"], p["digest"],
                               replace=p["replace"], boot=p["boot"], policy=p["displaced"],
                               owned=p["owned_volumes"])
    if "error" in decision:
        module.fail_json(msg="VM %d: %s" % (p["vmid"], decision["error"]))
    result = {"outcome": decision["action"], "reason": decision["reason"], "update": decision["update"],
              "changed": decision["action"] != "none"}
    if decision.get("displaced"):
        result["displaced"] = dict(decision["displaced"])
    if decision.get("warning"):
        module.warn("VM %d: %s" % (p["vmid"], decision["warning"]))
    if module.check_mode or not result["changed"]:
        if module._diff and result["changed"]:
            result["diff"] = pve_import.diff(config, decision)
        module.exit_json(**result)
    try:
        vm.update(decision["update"], [], config.get("digest"), asynchronous=True)
        moved = result.get("displaced")
        if moved:
            after = vm.config()
            moved["key"] = pve_import.displaced(after, decision.get("replaced"))
            if moved["key"] is None:
                moved["action"] = "detached"
            elif moved["action"] == "delete":
                vm.update({}, [moved["key"]], after.get("digest"))
                result["removed"] = moved["key"]
    except (pve_api.ResourceException, pve_vm.PveTaskError) as exc:
        module.fail_json(msg="VM %d: importing %s into %s failed: %s" % (p["vmid"], p["source"], p["disk"], exc),
                         **result)
    if module._diff:
        result["diff"] = pve_import.diff(config, dict(decision, displaced=result.get("displaced")))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
