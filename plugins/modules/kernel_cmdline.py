#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Add or remove single kernel command line arguments for GRUB or systemd-boot
version_added: 0.1.0
description:
  - Edits the kernel command line where the boot loader takes it from, keeping every other argument and
    its order - C(GRUB_CMDLINE_LINUX_DEFAULT) (its last assignment) in C(/etc/default/grub) for GRUB, the
    single line of C(/etc/kernel/cmdline) for systemd-boot (Proxmox VE ZFS-on-root UEFI installs).
  - A C(key=value) argument replaces the same key in place, or is appended once; O(remove) drops arguments
    by key (C(pcie_acs_override)) or exactly (C(video=efifb:off)).
  - Does not run C(update-grub) or C(proxmox-boot-tool refresh); notify a handler on change.
  - Refuses a GRUB assignment it cannot edit safely (unquoted, referring to other variables).
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host_diff
options:
  bootloader:
    description: Which boot loader's file to edit.
    type: str
    choices: [grub, systemd-boot]
    required: true
  path:
    description: The file; C(/etc/default/grub) or C(/etc/kernel/cmdline) by default.
    type: path
  add:
    description: Arguments to be present.
    type: list
    elements: str
    default: []
  remove:
    description: Arguments (or bare keys) to be absent.
    type: list
    elements: str
    default: []
  variable:
    description: The GRUB variable to edit.
    type: str
    default: GRUB_CMDLINE_LINUX_DEFAULT
  record_path:
    description:
      - JSON file recording which arguments this module added and removed (kept across runs), so that
        O(revert) restores the line exactly as it was, also when some arguments were there before.
    type: path
  revert:
    description: Undo what O(record_path) records (O(add) and O(remove) are ignored), then delete the record.
    type: bool
    default: false
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: IOMMU on (Intel), pass-through mode, no ACS override
  pvegpu.llmstack.kernel_cmdline:
    bootloader: grub
    add: [intel_iommu=on, iommu=pt]
    remove: [pcie_acs_override]
  notify: Update the GRUB configuration
"""

RETURN = r"""
args:
  description: The arguments after the edit.
  returned: always
  type: list
  elements: str
  sample: [quiet, intel_iommu=on, iommu=pt]
before_args:
  description: The arguments before the edit.
  returned: always
  type: list
  elements: str
record:
  description: What O(record_path) holds after the run (C(added) and C(removed) arguments).
  returned: when O(record_path) is given and O(revert) is false
  type: dict
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import vfio

DEFAULT_PATHS = {"grub": "/etc/default/grub", "systemd-boot": "/etc/kernel/cmdline"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            bootloader=dict(type="str", choices=["grub", "systemd-boot"], required=True),
            path=dict(type="path"),
            add=dict(type="list", elements="str", default=[]),
            remove=dict(type="list", elements="str", default=[]),
            variable=dict(type="str", default=vfio.GRUB_VARIABLE),
            record_path=dict(type="path"),
            revert=dict(type="bool", default=False),
        ),
        required_if=[("revert", True, ("record_path",))],
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"] or DEFAULT_PATHS[params["bootloader"]]
    for arg in params["add"] + params["remove"]:
        if not arg or any(c.isspace() for c in arg):
            module.fail_json(msg="add/remove: %r is not a single kernel argument" % arg)
    try:
        with open(path) as handle:
            before = handle.read()
    except OSError as exc:
        module.fail_json(msg="path: cannot read %s (%s); is the boot loader %s?" % (path, exc, params["bootloader"]))
    record = None
    if params["record_path"] and os.path.exists(params["record_path"]):
        with open(params["record_path"]) as handle:
            record = json.load(handle)
    add, remove = params["add"], params["remove"]
    if params["revert"]:
        add, remove = vfio.revert_edit(record or {})
    try:
        if params["bootloader"] == "grub":
            after = vfio.edit_grub_file(before, add, remove, params["variable"])
            before_args = vfio.grub_args(before, params["variable"]) or []
            after_args = vfio.grub_args(after, params["variable"])
        else:
            after = vfio.edit_kernel_cmdline_file(before, add, remove)
            before_args = vfio.split_args(before.split("\n")[0]) if before.strip() else []
            after_args = vfio.split_args(after)
    except vfio.VfioError as exc:
        module.fail_json(msg="%s: %s" % (path, exc))
    new_record = None
    if params["record_path"] and not params["revert"]:
        new_record = vfio.record_edit(before_args, after_args, record)
    record_changes = (params["revert"] and record is not None) or \
        (new_record is not None and new_record != record and (new_record["added"] or new_record["removed"] or record))
    changed = after != before or bool(record_changes)
    result = {"changed": changed, "args": after_args, "before_args": before_args, "path": path,
              "record": new_record}
    if module._diff:
        result["diff"] = {"before": before, "after": after, "before_header": path, "after_header": path}
    if changed and not module.check_mode:
        directory = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kernel_cmdline.")
        with os.fdopen(fd, "w") as handle:
            handle.write(after)
        module.atomic_move(tmp, path)
    if record_changes and not module.check_mode:
        if params["revert"]:
            os.remove(params["record_path"])
        else:
            os.makedirs(os.path.dirname(params["record_path"]) or ".", mode=0o755, exist_ok=True)
            with open(params["record_path"], "w") as handle:
                json.dump(new_record, handle, indent=2, sort_keys=True)
                handle.write("\n")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
