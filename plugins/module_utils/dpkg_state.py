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
import re
import struct
import time

LOCKS = ("lock-frontend", "lock")
DIGITS = re.compile(r"^[0-9]+$")
FLOCK = "hhqqi0q"  # native alignment, padded to the kernel's 32 bytes (64-bit Linux)


# dpkg's package states that `dpkg --configure -a` finishes, and the one it cannot (a package killed while being
# unpacked: apt reinstalls it, dpkg alone does not).
CONFIGURABLE = ("unpacked", "half-configured", "triggers-awaited", "triggers-pending")
REINSTALL = ("half-installed",)
# The dpkg-query format the states are read with: "<state> <package>" per package.
QUERY_FORMAT = "${db:Status-Status} ${binary:Package}\n"


def journal(admindir):
    """The journal entries a dpkg that did not end cleanly left (sorted names), [] when there are none."""
    try:
        names = os.listdir(os.path.join(admindir, "updates"))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        raise
    return sorted(name for name in names if DIGITS.match(name))


def unfinished(query_output):
    """(packages dpkg --configure -a finishes, packages only a reinstall fixes) of dpkg-query's QUERY_FORMAT lines."""
    configure, reinstall = [], []
    for line in query_output.splitlines():
        words = line.split()
        if len(words) != 2:
            continue
        if words[0] in CONFIGURABLE:
            configure.append(words[1])
        elif words[0] in REINSTALL:
            reinstall.append(words[1])
    return configure, reinstall


def lock_holder(admindir):
    """The first of dpkg's lock files some process holds now (an fcntl lock, as dpkg and apt take them), else None.
    Asked with F_GETLK, so nothing is taken: an apt starting in the same instant never finds it held by us. A lock
    file this user may not open is taken as free (dpkg itself then says why it cannot run)."""
    for name in LOCKS:
        path = os.path.join(admindir, name)
        try:
            handle = os.open(path, os.O_RDONLY)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EACCES, errno.EPERM):
                continue
            raise
        try:
            # struct flock {short l_type, l_whence; off_t l_start, l_len; pid_t l_pid} - a write lock on the whole file
            query = struct.pack(FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            answer = fcntl.fcntl(handle, fcntl.F_GETLK, query)
            if struct.unpack(FLOCK, answer)[0] != fcntl.F_UNLCK:
                return path
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
