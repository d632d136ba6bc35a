# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model repository in the Hugging Face cache (``HF_HOME/hub/models--ORG--NAME``): is its download complete,
what did a killed one leave behind (the vllm_model_download module, on the VM). Plain Python, stdlib.

The cache's layout (huggingface_hub's): ``blobs/<etag>`` holds each file's bytes (an LFS file's etag is its
sha256), ``snapshots/<commit>/<path>`` links to the blob, ``refs/<revision>`` holds the commit. A file is in the
snapshot only once it was downloaded whole; a download in progress writes ``blobs/<etag>.<id>.incomplete`` and
huggingface_hub 1.x/2.x never resumes another process's file, so a killed `hf download` leaves it behind for good.
A ``snapshots/`` directory therefore says nothing about completeness: the first small file makes it.

Complete means: every file of the repository at that commit (the Hub's tree listing, minus the excluded patterns)
is in the snapshot with the Hub's size, and an LFS file's blob is named by the Hub's sha256. The module records the
listing it checked (``.llmstack-download.json`` in the repository's folder), so a later run checks the files
against that record without asking the Hub.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import json
import os

RECORD = ".llmstack-download.json"
RECORD_VERSION = 1


def repo_folder(hf_home, repo_id):
    """The repository's folder in the cache, as huggingface_hub names it."""
    return os.path.join(hf_home, "hub", "models--" + repo_id.replace("/", "--"))


def excluded(path, patterns):
    """True when ``path`` matches one of ``patterns`` as `hf download --exclude` reads them (fnmatch; a pattern
    ending in / means everything below)."""
    for pattern in patterns or []:
        if pattern.endswith("/"):
            pattern += "*"
        if fnmatch.fnmatch(path, pattern):
            return True
    return False


def expected_files(tree, exclude=None):
    """{path: {"size": bytes, "sha256": hex or None}} from the Hub's tree listing (``/api/models/REPO/tree/COMMIT
    ?recursive=true``: entries ``{type, path, size, lfs: {oid (its sha256), size}}``), directories and excluded
    paths left out."""
    files = {}
    for entry in tree:
        if not isinstance(entry, dict) or entry.get("type") != "file" or excluded(entry.get("path", ""), exclude):
            continue
        lfs = entry.get("lfs") or {}
        size = lfs.get("size", entry.get("size"))
        files[entry["path"]] = {"size": int(size) if size is not None else None,
                                "sha256": lfs.get("oid") or lfs.get("sha256")}
    return files


def check(folder, commit, files, stat=os.stat, realpath=os.path.realpath):
    """The files of ``files`` (expected_files) that the snapshot of ``commit`` lacks or holds wrong:
    {"complete": bool, "missing": [path], "wrong": [path: why]}."""
    missing, wrong = [], []
    snapshot = os.path.join(folder, "snapshots", commit)
    for path in sorted(files):
        local = os.path.join(snapshot, path)
        try:
            size = stat(local).st_size
        except OSError:
            missing.append(path)
            continue
        want = files[path]
        if want.get("size") is not None and size != want["size"]:
            wrong.append("%s: %d bytes, the Hub says %d" % (path, size, want["size"]))
        elif want.get("sha256") and os.path.basename(realpath(local)) != want["sha256"]:
            wrong.append("%s: its blob is not the Hub's sha256 %s" % (path, want["sha256"]))
    return {"complete": not missing and not wrong, "missing": missing, "wrong": wrong}


def leftovers(folder, listdir=os.listdir, stat=os.stat):
    """[(path, bytes)] of the partial files (``blobs/*.incomplete``) a killed download left behind."""
    blobs = os.path.join(folder, "blobs")
    try:
        names = listdir(blobs)
    except OSError:
        return []
    found = []
    for name in sorted(names):
        if name.endswith(".incomplete"):
            path = os.path.join(blobs, name)
            try:
                found.append((path, stat(path).st_size))
            except OSError:
                continue
    return found


def read_record(folder):
    """The record of the last complete download, or None (absent, unreadable, or of another version)."""
    try:
        with open(os.path.join(folder, RECORD)) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or not isinstance(data.get("files"), dict):
        return None
    return data


def record_text(revision, commit, files, exclude):
    return json.dumps({"version": RECORD_VERSION, "revision": revision, "commit": commit,
                       "exclude": list(exclude or []), "files": files}, indent=1, sort_keys=True) + "\n"


def recorded_state(folder, revision, exclude):
    """What the cache says without the Hub: {"complete": bool, "record": dict or None, "missing", "wrong",
    "leftovers"}. Complete only with a record of this revision and exclude list whose files are all there."""
    record = read_record(folder)
    partial = leftovers(folder)
    if record is None or record.get("revision") != revision or record.get("exclude") != list(exclude or []):
        return {"complete": False, "record": record, "missing": [], "wrong": [], "leftovers": partial}
    result = check(folder, record["commit"], record["files"])
    result.update(record=record, leftovers=partial)
    return result
