# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A way back that runs by itself: a command run after some seconds unless a confirmation cancels it first. For the
changes that could cut the controller off (network_policy's nftables table, pve_bridge's bridges): the change is
confirmed over a new connection, so if none gets through, the old state comes back without anyone at the console.

Where systemd runs, a transient timer of its own (systemd-run: not a child of the SSH session, so neither the
session's end nor logind's cleanup of it takes it away); else a detached shell in its own session (setsid in the
child), which a confirmation ends with one killpg. ``module`` is an AnsibleModule (get_bin_path, run_command,
fail_json)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import shlex
import signal
import subprocess
import time


PROC = "/proc"


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
    # The file outlives its shell when the host reboots within the window (the shell's own `rm -f` never runs): its pid
    # may then be another process group's, which must not be sent SIGTERM. The shell is ours only while its command
    # line names this pid file (the script ends with `rm -f <pid file>`).
    ours = _is_rollback_shell(pid, timer)
    # No /proc to ask (not mounted): as before, the recorded group is signalled - a rollback left running would put
    # back the state this run has just confirmed, with nothing left to cancel it.
    pending = True if ours is None else ours
    if pending:
        with contextlib.suppress(OSError):  # gone since it was read: it just ran
            os.killpg(pid, signal.SIGTERM)
    with contextlib.suppress(FileNotFoundError):  # the shell's own `rm -f` after it ran
        os.unlink(timer.pid_file)
    return pending


def _is_rollback_shell(pid, timer, wait=5.0):
    """Whether process ``pid`` is the shell arm() started for ``timer`` (its command line names the pid file); None
    when this host has no /proc to tell. A process's command line reads empty while the kernel is still loading the
    program it execs, which can be after Popen returned (a confirmation right after arm, on a loaded host): that is
    waited out, up to ``wait`` seconds; a zombie's is empty for good (it ran, and nothing reaped it)."""
    if not os.path.isdir(os.path.join(PROC, "self")):
        return None
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(os.path.join(PROC, str(pid), "stat")) as handle:
                stat = handle.read()
            with open(os.path.join(PROC, str(pid), "cmdline"), "rb") as handle:
                argv = [arg for arg in handle.read().split(b"\0") if arg]
        except OSError:  # no such process: it ran, or the host rebooted
            return False
        if stat[stat.rindex(")") + 2:].startswith("Z"):
            return False
        if argv or time.monotonic() >= deadline:
            return any(shlex.quote(timer.pid_file).encode() in arg for arg in argv)
        time.sleep(0.02)


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
    # A shell in its own session (start_new_session: setsid in the child), so a dropped connection does not end it
    # and a confirmation ends it (and its sleep) with one killpg. Its pid is known when Popen returns and written
    # here, before anything is changed: waiting for the shell to write it would fail the run whenever a loaded host
    # starts the process late (a fixed 5 s wait did, in the lab beside a busy CI), and a confirmation made meanwhile
    # would find nothing to cancel.
    script = "sleep %d && %s; rm -f %s" % (
        seconds, " ".join(shlex.quote(arg) for arg in argv), shlex.quote(timer.pid_file))
    try:
        with open(os.devnull, "r+b") as null:
            process = subprocess.Popen(  # pylint: disable=consider-using-with  # detached: it outlives the module
                [module.get_bin_path("sh", required=True), "-c", script], stdin=null, stdout=null, stderr=null,
                cwd="/", close_fds=True, start_new_session=True)
    except OSError as err:
        module.fail_json(msg="could not start the rollback (nothing was changed): %s" % err)
    partial = timer.pid_file + ".new"
    try:
        with open(partial, "w") as handle:
            handle.write("%d\n" % process.pid)
        os.rename(partial, timer.pid_file)
    except OSError as err:
        # Untracked, it would still run later and put back a state some later run made: it goes now.
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGTERM)
        module.fail_json(msg="could not record the rollback (nothing was changed): %s" % err)
