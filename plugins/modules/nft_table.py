#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nft_table
short_description: One nftables table replaced atomically, checked by nft first, with a rollback timer
version_added: 0.2.0
description:
  - With O(state=present), checks O(content) with C(nft -c) against the live ruleset (a refused ruleset changes
    nothing and the task fails with nft's message), then replaces the table O(family) O(name) with it in one
    C(nft -f) transaction. Other tables are never touched.
  - Idempotent without reloading - the digest of O(content) and the table as the kernel lists it
    (C(nft -s list table)) are kept in O(state_dir); a rerun with the same content and an unchanged live table
    changes nothing, a table changed by hand since is reloaded (drift).
  - With O(rollback_seconds), the table as it was (or its absence) is put back after that many seconds unless a later
    call with O(confirm=true) cancels it - made over a new connection, this proves the new rules still let the
    controller in. The rollback is armed before the new table is loaded - a transient systemd timer
    (C(llmstack-nft-rollback.timer), not a child of the connection) where systemd runs, else a detached process.
  - With O(state=absent), the table is deleted (the rest of the ruleset stays as it is) and O(state_dir)'s record
    removed.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host_diff
options:
  content:
    description: The table, as C(nft -f) reads it (exactly one C(table O(family) O(name)); no C(flush ruleset)).
    type: str
  state:
    description: C(present) or C(absent).
    type: str
    choices: [present, absent]
    default: present
  family:
    description: The table's family.
    type: str
    default: inet
  name:
    description: The table's name.
    type: str
    default: llmstack
  rollback_seconds:
    description:
      - Put the previous table back after this many seconds unless confirmed.
      - 0 - no rollback (no safety net; the module warns); negative values are refused.
    type: int
    default: 0
  confirm:
    description: Cancel a pending rollback (the new rules are kept); nothing else is done.
    type: bool
    default: false
  state_dir:
    description: Where the record of the applied table and the pending rollback are kept (0700).
    type: path
    default: /var/lib/llmstack/nft
"""

EXAMPLES = r"""
- name: Apply the host's policy, rolled back in 60 s unless confirmed
  pvegpu.llmstack.nft_table:
    content: "{{ policy.ruleset }}"
    rollback_seconds: 60
  register: applied

- name: Confirm over a new connection
  pvegpu.llmstack.nft_table:
    confirm: true
  when: applied.rollback_pending
"""

RETURN = r"""
rollback_pending:
  description: Whether a rollback now waits for its confirmation.
  returned: always
  type: bool
previous:
  description: The table as it was listed before (empty when it did not exist).
  returned: changed
  type: str
"""

import hashlib
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import network_policy
from ansible_collections.pvegpu.llmstack.plugins.module_utils import rollback_timer as rollback_timer_lib


def nft(module, args, script=None):
    """(rc, stdout, stderr) of nft; ``script`` is written to a temporary file and given with -f."""
    path = None
    try:
        if script is not None:
            fd, path = tempfile.mkstemp(prefix="llmstack-nft-", suffix=".nft")
            with os.fdopen(fd, "w") as handle:
                handle.write(script)
            args = args + ["-f", path]
        return module.run_command([module.get_bin_path("nft", required=True)] + args)
    finally:
        if path:
            os.unlink(path)


def listing(module, family, name):
    rc, out, err = nft(module, ["-s", "list", "table", family, name])
    return out if rc == 0 else None


ROLLBACK_UNIT = "llmstack-nft-rollback"


def rollback_timer(state_dir):
    """The table's rollback: rollback.pid / rollback.unit in its state directory (module_utils/rollback_timer.py)."""
    return rollback_timer_lib.Timer(state_dir, ROLLBACK_UNIT)


def cancel_rollback(state_dir, module):
    """Stop a pending rollback; True when one was pending."""
    return rollback_timer_lib.cancel(module, rollback_timer(state_dir))


def schedule_rollback(module, state_dir, seconds, script):
    """Arm the rollback before anything is loaded: ``script`` is loaded after ``seconds`` unless a confirmation
    cancels it."""
    restore = os.path.join(state_dir, "rollback.nft")
    with open(restore, "w") as handle:
        handle.write(script)
    os.chmod(restore, 0o600)
    rollback_timer_lib.arm(module, rollback_timer(state_dir), seconds,
                           [module.get_bin_path("nft", required=True), "-f", restore],
                           "pvegpu.llmstack: put the previous nftables table back (unconfirmed new rules)")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            content=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            family=dict(type="str", default="inet"),
            name=dict(type="str", default="llmstack"),
            rollback_seconds=dict(type="int", default=0),
            confirm=dict(type="bool", default=False),
            state_dir=dict(type="path", default="/var/lib/llmstack/nft")),
        supports_check_mode=True)
    p = module.params
    family, name, state_dir = p["family"], p["name"], p["state_dir"]
    if not module.get_bin_path("nft"):
        if module.check_mode and p["state"] == "present":
            # Check mode on a host whose nftables the role has not installed yet: the table would be loaded.
            module.exit_json(changed=True, rollback_pending=False, msg="nft is not installed yet")
        if p["state"] == "absent" or p["confirm"]:
            module.exit_json(changed=False, rollback_pending=False, msg="nft is not installed: no table to take away")
        module.fail_json(msg="nft is not installed (package nftables)")
    record_path = os.path.join(state_dir, "%s-%s.json" % (family, name))
    if p["confirm"]:
        pending = False if module.check_mode else cancel_rollback(state_dir, module)
        module.exit_json(changed=False, rollback_pending=False, confirmed=pending)
    live = listing(module, family, name)
    try:
        with open(record_path) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        record = {}
    if p["state"] == "absent":
        changed = live is not None
        if changed and not module.check_mode:
            rc, out, err = nft(module, ["delete", "table", family, name])
            if rc != 0:
                module.fail_json(msg="nft delete table %s %s: %s" % (family, name, err.strip()))
        if os.path.exists(record_path) and not module.check_mode:
            os.unlink(record_path)
        module.exit_json(changed=changed, rollback_pending=False,
                         diff={"before": live or "", "after": ""})
    content = p["content"]
    if content is None:
        module.fail_json(msg="content is required with state=present")
    if p["rollback_seconds"] < 0:
        module.fail_json(msg="rollback_seconds: %d is negative (0 means no rollback)" % p["rollback_seconds"])
    if p["rollback_seconds"] == 0:
        module.warn("rollback_seconds is 0: no safety net - rules that lock the controller out stay until someone "
                    "reaches the host another way")
    problems = network_policy.table_problems(content, family, name)
    if problems:
        module.fail_json(msg="; ".join(problems))
    rc, out, err = nft(module, ["-c"], network_policy.replace_script(family, name, content))
    if rc != 0:
        module.fail_json(msg="nft -c refused the ruleset (nothing was changed): %s" % err.strip(), stderr=err)
    digest = hashlib.sha256(content.encode()).hexdigest()
    changed = network_policy.needs_apply(record, digest, live)
    result = {"changed": changed, "rollback_pending": False, "diff": {"before": live or "", "after": content}}
    if changed and not module.check_mode:
        if not os.path.isdir(state_dir):
            os.makedirs(state_dir, 0o700)
        cancel_rollback(state_dir, module)
        # Armed first: from the moment the new table is in, the way back is already on its way.
        if p["rollback_seconds"] > 0:
            schedule_rollback(module, state_dir, p["rollback_seconds"],
                              network_policy.restore_script(family, name, live))
            result["rollback_pending"] = True
        rc, out, err = nft(module, [], network_policy.replace_script(family, name, content))
        if rc != 0:
            cancel_rollback(state_dir, module)
            module.fail_json(msg="nft -f failed (the transaction was not applied): %s" % err.strip())
        with open(record_path, "w") as handle:
            json.dump(network_policy.state_record(digest, listing(module, family, name)), handle)
        result["previous"] = live or ""
    module.exit_json(**result)


if __name__ == "__main__":
    main()
