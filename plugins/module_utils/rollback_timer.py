# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A way back that runs by itself: a command run after some seconds unless a confirmation cancels it first. For the
changes that could cut the controller off (network_policy's nftables table, pve_bridge's bridges): the change is
confirmed over a new connection, so if none gets through, the old state comes back without anyone at the console.

Where systemd runs, a transient timer of its own (systemd-run: not a child of the SSH session, so neither the
session's end nor logind's cleanup of it takes it away); else a detached shell in its own session (setsid --fork),
which a confirmation ends with one killpg. ``module`` is an AnsibleModule (get_bin_path, run_command, fail_json)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import shlex
import signal
import time


class Timer(object):
    """Names of one rollback: the systemd unit and the files under ``state_dir`` (``<prefix>rollback.pid`` while it
    is a detached process, ``<prefix>rollback.unit`` while it is a systemd timer)."""

    def __init__(self, state_dir, unit, prefix=""):
        self.state_dir = state_dir
        self.unit = unit
        self.pid_file = os.path.join(state_dir, prefix + "rollback.pid")
        self.unit_file = os.path.join(state_dir, prefix + "rollback.unit")


def systemd_running():
    return os.path.isdir("/run/systemd/system")


def cancel(module, timer):
    """Stop a pending rollback; True when one was pending."""
    if os.path.exists(timer.unit_file):
        systemctl = module.get_bin_path("systemctl", required=True)
        _rc, out, _err = module.run_command([systemctl, "is-active", timer.unit + ".timer"])
        pending = out.strip() == "active"
        module.run_command([systemctl, "stop", timer.unit + ".timer"])
        module.run_command([systemctl, "reset-failed", timer.unit + ".timer", timer.unit + ".service"])
        os.unlink(timer.unit_file)
        return pending
    try:
        with open(timer.pid_file) as handle:
            pid = int(handle.read().strip())
    except (OSError, ValueError):
        return False
    with contextlib.suppress(OSError):  # already gone: it ran, or the host rebooted
        os.killpg(pid, signal.SIGTERM)
    os.unlink(timer.pid_file)
    return True


def arm(module, timer, seconds, argv, description):
    """Run ``argv`` after ``seconds`` unless cancelled; fails the module (nothing else done) when it cannot be armed."""
    if not os.path.isdir(timer.state_dir):
        os.makedirs(timer.state_dir, 0o700)
    run = module.get_bin_path("systemd-run")
    if run and systemd_running():
        systemctl = module.get_bin_path("systemctl", required=True)
        module.run_command([systemctl, "stop", timer.unit + ".timer"])
        module.run_command([systemctl, "reset-failed", timer.unit + ".timer", timer.unit + ".service"])
        rc, _out, err = module.run_command([
            run, "--unit", timer.unit, "--on-active", "%ds" % seconds, "--timer-property", "AccuracySec=1s",
            "--description", description] + list(argv))
        if rc != 0:
            module.fail_json(msg="could not arm the rollback timer (nothing was changed): %s" % err.strip())
        with open(timer.unit_file, "w") as handle:
            handle.write(timer.unit + "\n")
        return
    # setsid --fork: the shell leads its own session, so a dropped connection does not end it and a confirmation
    # ends it (and its sleep) with one killpg; it writes its pid, then waits.
    script = "exec </dev/null >/dev/null 2>&1; echo $$ > %s; sleep %d && %s; rm -f %s" % (
        shlex.quote(timer.pid_file), seconds, " ".join(shlex.quote(arg) for arg in argv), shlex.quote(timer.pid_file))
    rc, _out, err = module.run_command([module.get_bin_path("setsid", required=True), "--fork", "/bin/sh", "-c",
                                        script])
    if rc != 0:
        module.fail_json(msg="could not start the rollback (nothing was changed): %s" % err.strip())
    deadline = time.time() + 5
    while not os.path.exists(timer.pid_file):
        if time.time() > deadline:
            module.fail_json(msg="the rollback process did not start (nothing was changed)")
        time.sleep(0.05)
