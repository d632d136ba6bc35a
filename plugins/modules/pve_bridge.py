#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pve_bridge
short_description: Make the PVE bridges that carry the inventory's VLANs VLAN-aware (ifupdown2), or put them back
version_added: 0.9.0
description:
  - With O(state=present), each bridge that O(vlans) puts VLANs on (their C(bridge), default C(vmbr0)) gets
    C(bridge-vlan-aware yes) and C(bridge-vids) carrying their ids in O(path); VIDs the bridge already carries are
    kept. Only those two option lines of the bridge's stanza change; the rest of the file is kept as it is.
  - The new file is checked with C(ifup -s -a -i) (ifupdown2's parser), written atomically with a backup, and
    applied with C(ifreload -a). When the reload fails, the previous file is put back and reloaded, and the task
    fails with ifupdown2's message.
  - A reload is also done when the file is already right but the running bridges do not match it (a run that
    stopped between the write and the reload).
  - Refused before anything changes - a bridge the file does not declare, an unreadable C(bridge-vids), and a
    change that would cut the controller's address off (O(management_address) on a VLAN interface of a bridge whose
    VLAN the VLAN-aware bridge would not carry).
  - With O(state=absent), the option lines recorded in O(state_dir) before the first change are put back as they
    were written (removed where there were none), and the record is removed.
  - Refused while PVE has a pending network change (C(interfaces.new) beside O(path)), which would be applied over
    this one.
  - With O(verify=true), nothing is changed - the task fails unless the file gives each bridge its VLANs and the
    running bridges match the file (C(ip -d -j link), C(bridge -j vlan)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host_diff
options:
  vlans:
    description: llmstack_vlans (name -> C(id), C(bridge)).
    type: dict
    default: {}
  state:
    description: C(present) or C(absent).
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The interfaces file.
    type: path
    default: /etc/network/interfaces
  management_address:
    description: The host's address the controller connects to (checked against the change).
    type: str
  connection:
    description: The connection plugin in use; a local or container connection needs no address check.
    type: str
    default: ssh
  state_dir:
    description: Where the options as they were before the first change are recorded (0700; the record 0600).
    type: path
    default: /etc/llmstack
  verify:
    description: Only compare the file and the running bridges with what O(vlans) asks; fail on any difference.
    type: bool
    default: false
  rollback_seconds:
    description:
      - When the file changes, put the previous one back and reload it after this many seconds unless a later call
        with O(confirm=true) cancels it - made over a new connection, this proves the reloaded network still lets
        the controller in. Armed before the new file is written (a transient systemd timer,
        C(llmstack-bridge-rollback.timer), where systemd runs; else a detached process).
      - 0 - no rollback (the module warns); negative values are refused.
    type: int
    default: 0
  confirm:
    description: Cancel a pending rollback (the new file is kept); nothing else is done.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Make vmbr0 VLAN-aware for the inventory's VLANs
  pvegpu.llmstack.pve_bridge:
    vlans: "{{ llmstack_vlans }}"
    management_address: "{{ ansible_host }}"
    connection: "{{ ansible_connection | default('ssh') }}"
"""

RETURN = r"""
bridges:
  description: Per bridge, C(before) and C(after) ({vlan_aware, vids}).
  returned: always
  type: dict
rollback_pending:
  description: Whether a rollback now waits for its confirmation.
  returned: always
  type: bool
reload_needed:
  description: Whether the file changes or the running bridges differ from it (in check mode - a reload would run).
  returned: always
  type: bool
reloaded:
  description: Whether C(ifreload -a) ran.
  returned: always
  type: bool
mismatches:
  description: What the running bridges lacked against the file (before a reload; with O(verify), after it).
  returned: always
  type: list
  elements: str
"""

import json
import os
import shlex
import socket
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_bridge
from ansible_collections.pvegpu.llmstack.plugins.module_utils import rollback_timer

ROLLBACK_UNIT = "llmstack-bridge-rollback"


def json_command(module, args):
    """Parsed JSON of an ip/bridge command, [] when it is missing or fails (nothing is running yet)."""
    binary = module.get_bin_path(args[0])
    if not binary:
        return []
    rc, out, _err = module.run_command([binary] + args[1:])
    if rc != 0 or not out.strip():
        return []
    try:
        return json.loads(out)
    except ValueError:
        return []


def running(module):
    return pve_bridge.runtime_from(json_command(module, ["ip", "-d", "-j", "link", "show"]),
                                   json_command(module, ["bridge", "-j", "vlan", "show"]),
                                   json_command(module, ["ip", "-j", "addr", "show"]))


def resolve(name):
    """The host's own lookup of a name (its /etc/hosts and resolver), [] when it has none."""
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(name, None)})
    except (OSError, UnicodeError):
        return []


def read_record(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def write_record(module, state_dir, path, record):
    if not record["bridges"]:
        if os.path.exists(path):
            os.unlink(path)
        return
    if not os.path.isdir(state_dir):
        os.makedirs(state_dir, 0o700)
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=".pve_bridge-")
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
    module.atomic_move(tmp, path)
    os.chmod(path, 0o600)         # atomic_move gives a new file the umask's mode


def ifupdown(module, name):
    binary = module.get_bin_path(name)
    if not binary:
        module.fail_json(msg="%s is not installed (package ifupdown2, PVE's network stack): nothing was changed" % name)
    return binary


def write_file(module, path, content):
    """Checked by ifupdown2's parser first, then moved into place (mode and owner of the old file kept)."""
    ifup = ifupdown(module, "ifup")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".interfaces-")
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    rc, out, err = module.run_command([ifup, "-s", "-a", "-i", tmp])
    if rc != 0:
        os.unlink(tmp)
        module.fail_json(msg="ifupdown2's parser refused the new %s (nothing was changed): %s"
                         % (path, (err or out).strip()))
    module.atomic_move(tmp, path)


def reload(module):
    # ifupdown2 takes its lock in /run/network, which the networking service makes at boot; a host that got
    # ifupdown2 in this run has not booted with it yet.
    if not os.path.isdir("/run/network"):
        os.makedirs("/run/network", 0o755)
    return module.run_command([ifupdown(module, "ifreload"), "-a"])


def timer(state_dir):
    return rollback_timer.Timer(state_dir, ROLLBACK_UNIT, prefix="pve_bridge-")


def arm_rollback(module, state_dir, path, text, seconds):
    """The file as it was, put back and reloaded after ``seconds`` unless confirmed (armed before the new file)."""
    if not os.path.isdir(state_dir):
        os.makedirs(state_dir, 0o700)
    saved = os.path.join(state_dir, "pve_bridge.rollback")
    with open(saved, "w") as handle:
        handle.write(text)
    os.chmod(saved, 0o600)
    rollback_timer.cancel(module, timer(state_dir))
    ifreload = ifupdown(module, "ifreload")
    script = "cp %s %s && mkdir -p /run/network && %s -a" % tuple(shlex.quote(part) for part in (saved, path, ifreload))
    rollback_timer.arm(module, timer(state_dir), seconds, ["/bin/sh", "-c", script],
                       "pvegpu.llmstack: put the previous %s back (unconfirmed bridge change)" % path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            vlans=dict(type="dict", default={}),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            path=dict(type="path", default="/etc/network/interfaces"),
            management_address=dict(type="str"),
            connection=dict(type="str", default="ssh"),
            state_dir=dict(type="path", default="/etc/llmstack"),
            verify=dict(type="bool", default=False),
            rollback_seconds=dict(type="int", default=0),
            confirm=dict(type="bool", default=False)),
        supports_check_mode=True)
    p = module.params
    path = p["path"]
    record_path = os.path.join(p["state_dir"], pve_bridge.RECORD_NAME)
    if p["confirm"]:
        pending = False if module.check_mode else rollback_timer.cancel(module, timer(p["state_dir"]))
        saved = os.path.join(p["state_dir"], "pve_bridge.rollback")
        if os.path.exists(saved) and not module.check_mode:
            os.unlink(saved)
        module.exit_json(changed=False, rollback_pending=False, confirmed=pending, reloaded=False,
                         reload_needed=False, bridges={}, mismatches=[])
    if p["rollback_seconds"] < 0:
        module.fail_json(msg="rollback_seconds: %d is negative (0 means no rollback)" % p["rollback_seconds"])
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as exc:
        if p["state"] == "absent" and not os.path.exists(record_path):
            module.exit_json(changed=False, bridges={}, reloaded=False, reload_needed=False, mismatches=[],
                             msg="%s is not there and nothing was recorded: nothing to put back" % path)
        module.fail_json(msg="cannot read %s: %s (a PVE host has its bridges there)" % (path, exc))
    runtime = running(module)
    try:
        if p["verify"]:
            stanzas = pve_bridge.parse(text)
            targets = pve_bridge.wanted(p["vlans"]) if p["state"] == "present" else {}
            problems = []
            for bridge, vids in sorted(targets.items()):
                aware, have, _ports = pve_bridge.settings(stanzas, bridge)
                missing = sorted(set(vids) - set(have))
                if not aware or missing:
                    problems.append("%s: the file has bridge-vlan-aware %s, VLAN %s missing from bridge-vids"
                                    % (bridge, "yes" if aware else "no", pve_bridge.format_vids(missing) or "none"))
            concerned = sorted(set(targets) | set(read_record(record_path).get("bridges") or {}))
            problems += pve_bridge.mismatches(stanzas, concerned, runtime)
            if problems:
                module.fail_json(msg="the bridges are not as planned: " + "; ".join(problems), mismatches=problems)
            module.exit_json(changed=False, bridges={}, reloaded=False, reload_needed=False, mismatches=[])
        mgmt = pve_bridge.management(p["management_address"], p["connection"], runtime, resolve)
        result = pve_bridge.plan(text, p["vlans"], read_record(record_path), p["state"], mgmt, runtime)
    except pve_bridge.BridgeError as exc:
        module.fail_json(msg=str(exc))
    out = {"changed": result["reload"], "reload_needed": result["reload"], "bridges": result["bridges"],
           "reloaded": False, "rollback_pending": False, "mismatches": result["mismatches"], "management": mgmt,
           "diff": {"before": text, "after": result["content"], "before_header": path, "after_header": path}}
    if not result["reload"]:
        # The way back with nothing left to change (the lines were edited back by hand): the record goes, so that a
        # later revert cannot take away what an administrator wrote since.
        if p["state"] == "absent" and os.path.exists(record_path) and not module.check_mode:
            write_record(module, p["state_dir"], record_path, result["record"])
        module.exit_json(**out)
    pending = path + ".new"
    if os.path.exists(pending):
        module.fail_json(msg="%s exists: a network change made in PVE's GUI is pending (Apply Configuration, or "
                             "pvenetcommit at boot, would put it over this change). Apply or revert it in PVE first; "
                             "nothing was changed" % pending)
    if module.check_mode:
        module.exit_json(**out)
    if result["changed"]:
        ifupdown(module, "ifup")
        out["backup_file"] = module.backup_local(path)
        if p["state"] == "present":
            write_record(module, p["state_dir"], record_path, result["record"])     # before: the way back first
        if p["rollback_seconds"] > 0:
            arm_rollback(module, p["state_dir"], path, text, p["rollback_seconds"])
            out["rollback_pending"] = True
        else:
            module.warn("rollback_seconds is 0: no safety net - a reload that cuts the controller off stays until "
                        "someone reaches the host another way")
        write_file(module, path, result["content"])
    rc, stdout, stderr = reload(module)
    if rc != 0:
        undone = ""
        if out["rollback_pending"]:
            rollback_timer.cancel(module, timer(p["state_dir"]))
            out["rollback_pending"] = False
        if result["changed"]:
            write_file(module, path, text)
            again = reload(module)
            undone = (" (the previous file is back and reloaded)" if again[0] == 0 else
                      " (the previous file is back, but reloading it failed too: %s)" % (again[2] or again[1]).strip())
        module.fail_json(msg="ifreload -a failed%s: %s" % (undone, (stderr or stdout).strip()),
                         **dict((k, v) for k, v in out.items() if k != "changed"))
    if p["state"] == "absent":
        write_record(module, p["state_dir"], record_path, result["record"])
    out["reloaded"] = True
    after = pve_bridge.mismatches(pve_bridge.parse(result["content"]), sorted(result["bridges"]), running(module))
    if after:
        module.fail_json(msg="after ifreload -a the running bridges still differ from %s: %s"
                         % (path, "; ".join(after)),
                         **dict((k, v) for k, v in out.items() if k != "changed"))
    module.exit_json(**out)


if __name__ == "__main__":
    main()
