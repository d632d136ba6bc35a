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
    on O(storage), copies the image into it, and the drive's previous volume becomes C(unusedN), which this module
    then deletes. Sets C(boot=order=<disk>) and tags the VM C(llmstack-img-<digest prefix>)."
  - Idempotent through that tag - a VM tagged with this image's digest is left alone (only its boot order is
    corrected). A VM tagged with another image holds an installed guest that has changed since; it is replaced
    only with O(replace). A running VM is never changed (PVE would stage the change as pending).
  - The source is a volume id on a storage with the C(import) content type (PVE 8.2 and later), e.g.
    C(local:import/gpu-vm-a.raw) for C(/var/lib/vz/import/gpu-vm-a.raw), which an API token may import from
    (absolute paths are C(root@pam)'s). Needs C(VM.Config.Disk), C(VM.Config.Options) and
    C(Datastore.AllocateSpace) on the target storage.
  - Check mode reports what would change; diff mode shows the drive, boot order and tags before and after.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
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
    description: Replace the disk of a VM that already holds another image (its data is lost).
    type: bool
    default: false
  boot:
    description: Set the boot order to start at O(disk).
    type: bool
    default: true
  task_timeout:
    description: Seconds to wait for PVE's import task.
    type: int
    default: 1800
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: all
  action_group:
    description: Use C(group/pvegpu.llmstack.pve) in C(module_defaults) to set the connection options once.
    support: full
    membership:
      - pvegpu.llmstack.pve
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
removed:
  description: The C(unusedN) key deleted after the import (the VM's previous, empty volume).
  returned: when an import ran
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
                               replace=p["replace"], boot=p["boot"])
    if "error" in decision:
        module.fail_json(msg="VM %d: %s" % (p["vmid"], decision["error"]))
    result = {"outcome": decision["action"], "reason": decision["reason"], "update": decision["update"],
              "changed": decision["action"] != "none"}
    if module._diff and result["changed"]:
        keys = sorted(decision["update"])
        result["diff"] = {"before": "".join("%s: %s\n" % (k, config.get(k, "")) for k in keys),
                          "after": "".join("%s: %s\n" % (k, decision["update"][k]) for k in keys)}
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)
    try:
        vm.update(decision["update"], [], config.get("digest"), asynchronous=True)
        if decision["action"] == "import":
            after = vm.config()
            unused = pve_import.displaced(after, decision.get("replaced"))
            if unused:
                vm.update({}, [unused], after.get("digest"))
                result["removed"] = unused
    except (pve_api.ResourceException, pve_vm.PveTaskError) as exc:
        module.fail_json(msg="VM %d: importing %s into %s failed: %s" % (p["vmid"], p["source"], p["disk"], exc),
                         **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
