#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pve_local_guests
short_description: The VMs and containers of this Proxmox VE node, and which of them are not stopped
version_added: 0.1.0
description:
  - Runs C(qm list) and C(pct list) on the PVE host (no API, no cluster quorum needed) and returns every guest
    with its VMID, name and status, and those a reboot would interrupt (every status but C(stopped)).
  - Fails when a command is missing or fails, or prints rows it cannot read, so that a caller deciding whether
    to reboot never takes an unreadable list for an empty one.
  - Reads only. The C(vfio) role calls it before it reboots a host.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  qm:
    description: The C(qm) command.
    type: str
    default: qm
  pct:
    description: The C(pct) command.
    type: str
    default: pct
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Which guests would a reboot interrupt?
  pvegpu.llmstack.pve_local_guests:
  register: guests

- name: Refuse to reboot while guests run
  ansible.builtin.assert:
    that: guests.running | length == 0
    fail_msg: "Running guests: {{ guests.running_text }}"
"""

RETURN = r"""
guests:
  description: Every VM (C(type=qemu)) and container (C(type=lxc)) of the node.
  returned: always
  type: list
  elements: dict
  sample: [{type: qemu, vmid: 120, name: gpu-3090, status: running}]
running:
  description: The guests whose status is not C(stopped), by VMID.
  returned: always
  type: list
  elements: dict
running_text:
  description: Those guests in words, each with its kind, VMID and name (and its status when not running).
  returned: always
  type: str
  sample: "VM 120 (gpu-3090), CT 200 (web, paused)"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_guests


def main():
    module = AnsibleModule(
        argument_spec=dict(
            qm=dict(type="str", default="qm"),
            pct=dict(type="str", default="pct"),
        ),
        supports_check_mode=True,
    )
    guests = []
    for option, parse in (("qm", pve_guests.parse_qm_list), ("pct", pve_guests.parse_pct_list)):
        command = module.get_bin_path(module.params[option])
        if not command:
            module.fail_json(msg="%s: %s not found; is this a Proxmox VE host?" % (option, module.params[option]))
        rc, out, err = module.run_command([command, "list"])
        if rc != 0:
            module.fail_json(msg="%s list failed (rc %d): %s" % (module.params[option], rc, (err or out).strip()))
        try:
            guests.extend(parse(out))
        except pve_guests.PveGuestsError as exc:
            module.fail_json(msg=str(exc))
    running = pve_guests.not_stopped(guests)
    module.exit_json(changed=False, guests=guests, running=running, running_text=pve_guests.describe(running))


if __name__ == "__main__":
    main()
