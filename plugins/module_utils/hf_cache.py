# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model repository in the Hugging Face cache (``HF_HOME/hub/models--ORG--NAME``): is its download complete,
what did a killed one leave behind (the vllm_model_download module, on the VM). Plain Python, stdlib.

The cache's layout (huggingface_hub's): ``blobs/<etag>`` holds each file's bytes (an LFS file's etag is its
sha256), ``snapshots/<commit>/<path>`` links to the blob, ``refs/<revision>`` holds the commit. A file is in the
snapshot only once it was downloaded whole; a download in progress writes ``blobs/<etag>.<id>.incomplete`` and
huggingface_hub 2.x never resumes another process's file (older releases resumed ``<etag>.incomplete``), so a killed
`hf download` of 2.x leaves it behind for good. A 2.x blob may itself link on into a shared store named by the Xet
hash: the etag is the name the snapshot entry links to, not the end of the chain.
A ``snapshots/`` directory therefore says nothing about completeness: the first small file makes it.

Complete means: every file of the repository at that commit (the Hub's tree listing, minus the excluded patterns)
is in the snapshot with the Hub's size, and an LFS file's blob is named by the Hub's sha256. The module records the
listing it checked (``.llmstack-download.<revision>.json`` in the repository's folder), so a later run checks the files
against that record without asking the Hub.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import json
import os
import re

try:
    from urllib.parse import quote
except ImportError:  # Python 2 (the controller-side sanity tests)
    from urllib import quote  # noqa: F401

# One record per revision (quoted): two services may use one repository at two revisions.
RECORD = ".llmstack-download.%s.json"
RECORD_VERSION = 1
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


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


def _blob_name(link, readlink=os.readlink):
    """The name of the blob a snapshot entry points to: its own link's target (``../../blobs/<etag>``), not the
    end of the chain - huggingface_hub 2.x links that blob on into a shared store named by the Xet hash."""
    try:
        return os.path.basename(readlink(link))
    except OSError:
        return os.path.basename(link)


def check(folder, commit, files, stat=os.stat, readlink=os.readlink):
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
        elif want.get("sha256") and _blob_name(local, readlink) != want["sha256"]:
            wrong.append("%s: its blob is not the Hub's sha256 %s" % (path, want["sha256"]))
    return {"complete": not missing and not wrong, "missing": missing, "wrong": wrong}


def lock_path(folder, partial):
    """huggingface_hub's lock of the blob a partial file belongs to (``hub/.locks/<repo folder>/<etag>.lock``)."""
    etag = os.path.basename(partial).split(".", 1)[0]
    return os.path.join(os.path.dirname(folder), ".locks", os.path.basename(folder), etag + ".lock")


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


def record_path(folder, revision):
    return os.path.join(folder, RECORD % quote(revision, safe=""))


def ref_commit(folder, revision):
    """The commit ``refs/<revision>`` names (huggingface_hub writes it for a branch or tag), the revision itself
    when it is a commit hash, else None."""
    if COMMIT_RE.match(revision):
        return revision
    try:
        with open(os.path.join(folder, "refs", revision)) as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def read_record(folder, revision):
    """The record of the last complete download of ``revision``, or None (absent, unreadable, or of another
    version)."""
    try:
        with open(record_path(folder, revision)) as handle:
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
    record = read_record(folder, revision)
    partial = leftovers(folder)
    if record is None or record.get("revision") != revision or record.get("exclude") != list(exclude or []):
        return {"complete": False, "record": record, "missing": [], "wrong": [], "leftovers": partial}
    # What the cache serves for the revision (vLLM reads refs/<revision> offline) must be the commit recorded: a
    # later download of a newer commit of the branch, cut short, is not complete.
    served = ref_commit(folder, revision)
    if served != record.get("commit"):
        why = "refs/%s: names %s, not the complete %s" % (revision, served, record.get("commit"))
        return {"complete": False, "record": record, "missing": [], "wrong": [why], "leftovers": partial}
    result = check(folder, record["commit"], record["files"])
    result.update(record=record, leftovers=partial)
    return result
