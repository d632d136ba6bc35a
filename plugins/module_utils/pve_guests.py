# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guests of one Proxmox VE node, from `qm list` and `pct list` (what the vfio role reads before it
reboots a host). Plain Python, no Ansible imports.

`qm list` prints ``VMID NAME STATUS MEM(MB) BOOTDISK(GB) PID`` with printf widths that do not truncate; a VM
without a name is listed as ``VM <vmid>`` (a space inside the name) and the PID may be empty, so a row is read
from both ends. `pct list` prints ``VMID Status Lock Name`` where Lock is usually empty and the name (the
container's hostname, or ``CT<vmid>``) has no space.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_QM_ROW = re.compile(r"^\s*(?P<vmid>\d+)\s+(?P<name>.*?)\s+(?P<status>[a-z-]+)\s+(?P<mem>\d+(?:\.\d+)?)"
                     r"\s+(?P<disk>\d+(?:\.\d+)?)(?:\s+(?P<pid>\d+))?\s*$")
KINDS = {"qemu": "VM", "lxc": "CT"}


class PveGuestsError(ValueError):
    pass


def _rows(text, command):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if lines and lines[0].split()[0].upper() == "VMID":
        lines = lines[1:]
    elif lines:
        raise PveGuestsError("%s: unexpected output, no VMID header: %r" % (command, lines[0]))
    return lines


def parse_qm_list(text):
    """`qm list` -> [{type: qemu, vmid, name, status}]."""
    guests = []
    for line in _rows(text, "qm list"):
        match = _QM_ROW.match(line)
        if not match:
            raise PveGuestsError("qm list: cannot read the row %r" % line.strip())
        guests.append({"type": "qemu", "vmid": int(match.group("vmid")), "name": match.group("name"),
                       "status": match.group("status")})
    return guests


def parse_pct_list(text):
    """`pct list` -> [{type: lxc, vmid, name, status}] (the Lock column, when set, is skipped)."""
    guests = []
    for line in _rows(text, "pct list"):
        words = line.split()
        if len(words) not in (3, 4) or not words[0].isdigit():
            raise PveGuestsError("pct list: cannot read the row %r" % line.strip())
        guests.append({"type": "lxc", "vmid": int(words[0]), "name": words[-1], "status": words[1]})
    return guests


def not_stopped(guests):
    """The guests a reboot would interrupt: every one whose status is not `stopped` (running, paused, ...),
    ordered by VMID."""
    return sorted((g for g in guests if g["status"] != "stopped"), key=lambda g: g["vmid"])


def describe(guests):
    """'VM 120 (gpu-3090), CT 200 (web, paused)': kind, VMID and name, and the status when not running."""
    parts = []
    for guest in guests:
        detail = guest["name"] if guest["status"] == "running" else "%s, %s" % (guest["name"], guest["status"])
        parts.append("%s %d (%s)" % (KINDS.get(guest["type"], guest["type"]), guest["vmid"], detail))
    return ", ".join(parts)
