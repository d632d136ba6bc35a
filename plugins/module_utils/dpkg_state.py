# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a package installation killed half-way leaves behind, and when it is safe to finish it.

dpkg keeps a journal of the status changes it makes in ``<admindir>/updates/`` (files named by digits only) and folds
it into ``status`` when it ends cleanly. A dpkg that was killed (a run SIGKILLed during an apt task, a VM reset) leaves
those files, and from then on every apt-get - so every apt task of every role - refuses with "dpkg was interrupted,
you must manually run 'dpkg --configure -a'" (apt-pkg's debSystem::Lock checks exactly these names). A dpkg that is
running now leaves them too, so they mean "interrupted" only while no process holds dpkg's locks.

Plain functions, no Ansible: plugins/modules/dpkg_recover.py runs them on the host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import os
import time

LOCKS = ("lock-frontend", "lock")


def journal(admindir):
    """The journal entries a dpkg that did not end cleanly left (sorted names), [] when there are none."""
    try:
        names = os.listdir(os.path.join(admindir, "updates"))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        raise
    return sorted(name for name in names if name.isdigit())


def audit_packages(audit_output):
    """The package names `dpkg --audit` lists as not fully installed (its lines ` name    description`)."""
    found = []
    for line in audit_output.splitlines():
        if line.startswith(" ") and line.strip():
            name = line.split()[0]
            if name not in found:
                found.append(name)
    return found


def lock_holder(admindir):
    """The first of dpkg's lock files some process holds now (an fcntl lock, as dpkg and apt take them), else None.
    The lock is only tested: taken and given back at once."""
    for name in LOCKS:
        path = os.path.join(admindir, name)
        try:
            handle = os.open(path, os.O_RDWR)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                continue
            raise
        try:
            try:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    return path
                raise
            fcntl.lockf(handle, fcntl.LOCK_UN)
        finally:
            os.close(handle)
    return None


def wait_for_locks(admindir, timeout, sleep=time.sleep, clock=time.monotonic):
    """None once no process holds dpkg's locks (at once when none does), else the lock still held after
    ``timeout`` seconds - a package manager that is running is not interrupted and must not be raced."""
    deadline = clock() + timeout
    while True:
        held = lock_holder(admindir)
        if held is None or clock() >= deadline:
            return held
        sleep(1)
