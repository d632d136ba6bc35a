# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which config a service last applied, so that a restart owed by a run that died is done by the next one.

A role writes a service's config files, then its handlers restart (or reload) the service. A run killed or failed
between the two leaves the service on the old config, and the next run sees the files unchanged: nothing notifies
the handler again. This module keeps, per service, a record on the target of the files' digests as the service last
applied them (``<state_dir>/<name>.json``, 0600: a digest of a secret file is no secret to root, but nothing else
needs to read it):

- ``check`` (before the role writes anything): with a record, compare it with the files as they are now; a
  difference is a restart a run owed and did not do (``pending``). Without a record (first run of the role, or the
  first run of a collection version that keeps them), take the files as they are now as applied when any of them
  exists (the baseline), so that a change written later in this run and lost is seen by the next one.
- ``applied`` (after the handlers ran, only where the service runs): record the files as they are now.

The record holds a digest per file (the sha256 of its content, ``missing`` for an absent one; a directory's digest
covers its files by relative path), never content.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import json
import os
import re
import tempfile

RECORD_VERSION = 1
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MISSING = "missing"


class AppliedConfigError(Exception):
    pass


def check_name(name):
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > 128:
        raise AppliedConfigError(
            "name %r: must be letters, digits, '.', '_' or '-' (it names the record file)" % (name,))


def _file_digest(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def path_digest(path):
    """The sha256 of a file's content, of a directory's files (by relative path, in order), or MISSING."""
    try:
        if os.path.isdir(path):
            digest = hashlib.sha256()
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    digest.update(os.path.relpath(full, path).encode("utf-8") + b"\0")
                    digest.update(_file_digest(full).encode("ascii") + b"\n")
            return "dir:" + digest.hexdigest()
        return _file_digest(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and not os.path.lexists(path):
            return MISSING
        raise AppliedConfigError("%s: cannot be read (%s)" % (path, exc.strerror or exc))


def digests(paths):
    """Path to digest, for every path (absolute, no duplicates)."""
    result = {}
    for path in paths:
        if not isinstance(path, str) or not os.path.isabs(path):
            raise AppliedConfigError("files: %r is not an absolute path" % (path,))
        result[os.path.normpath(path)] = path_digest(path)
    return result


def record_path(state_dir, name):
    check_name(name)
    return os.path.join(state_dir, name + ".json")


def read_record(state_dir, name):
    """The recorded digests (path to digest), or None when there is no record."""
    path = record_path(state_dir, name)
    try:
        with open(path) as handle:
            data = json.load(handle)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise AppliedConfigError("%s: cannot be read (%s)" % (path, exc.strerror or exc))
    except ValueError as exc:
        # A record torn by a crash is a restart owed, not an error: the caller restarts and writes it again.
        return {"__unreadable__": str(exc)}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {"__unreadable__": "no files in it"}
    return files


def write_record(state_dir, name, files):
    """Write the record complete or not at all (a temporary file renamed over it), 0600, in state_dir (0700)."""
    path = record_path(state_dir, name)
    if not os.path.isdir(state_dir):
        os.makedirs(state_dir, 0o700)
    handle, tmp = tempfile.mkstemp(prefix="." + name + ".", dir=state_dir)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump({"version": RECORD_VERSION, "name": name, "files": files}, out, indent=1, sort_keys=True)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def changed_files(recorded, current):
    """The current paths whose digest differs from the record (a path the record lacks counts as missing there). A
    path only in the record is no longer the service's (a vLLM unit of a model taken away): not a change of it."""
    if "__unreadable__" in recorded:
        return sorted(current)
    return sorted(path for path in current if recorded.get(path, MISSING) != current[path])


def check(state_dir, name, paths, check_mode=False):
    """Before a role writes a service's config: is a restart owed by an earlier run? Takes the baseline if none."""
    current = digests(paths)
    recorded = read_record(state_dir, name)
    result = {"name": name, "record": record_path(state_dir, name), "pending": False, "changed_files": [],
              "baseline": False, "changed": False}
    if recorded is None:
        if any(digest != MISSING for digest in current.values()):
            result["baseline"] = True
            result["changed"] = True
            if not check_mode:
                write_record(state_dir, name, current)
        return result
    changed = changed_files(recorded, current)
    result["pending"] = bool(changed)
    result["changed_files"] = changed
    return result


def applied(state_dir, name, paths, check_mode=False):
    """After the service (re)started or reloaded on its files: record them as applied."""
    current = digests(paths)
    recorded = read_record(state_dir, name)
    changed = current != recorded
    if changed and not check_mode:
        write_record(state_dir, name, current)
    return {"name": name, "record": record_path(state_dir, name), "changed": changed,
            "changed_files": changed_files(recorded, current) if recorded is not None else sorted(current),
            "pending": False, "baseline": False}
