#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_model_download
short_description: Download a Hugging Face model into the cache until it is complete, and say when it is not
version_added: 0.2.0
description:
  - A model counts as on disk only when every file of the repository at its commit (the Hub's tree listing, less
    O(exclude)) is in the cache's snapshot with the Hub's size, each LFS file's blob is named by the Hub's sha256,
    and C(refs/<revision>) names that commit. The listing checked is recorded next to the cache
    (C(.llmstack-download.<revision>.json)); later runs check the files against the record and do not ask the Hub.
  - Otherwise (a first download, or one that was killed or failed half-way) it removes the partial files a killed
    C(hf download) left in C(blobs/) whose lock no download holds (huggingface_hub 2.x never resumes another
    process's partial file, so they only take disk space), runs C(hf download) again - the files already complete
    are kept - then reads the Hub's listing and checks the cache against it (at the commit the download wrote to
    C(refs/<revision>)); it fails naming the files still missing or wrong, or saying that the Hub's listing could
    not be read.
  - With O(download=false) it changes nothing and only reports (RV(complete), RV(missing), RV(leftovers)).
  - The logic is in plugins/module_utils/hf_cache.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  model:
    description: The Hugging Face repository id (C(org/name)).
    type: str
    required: true
  revision:
    description: The branch, tag or commit to download.
    type: str
    default: main
  hf_home:
    description: C(HF_HOME) (the cache is C(hub/) below it).
    type: path
    required: true
  hf:
    description: The C(hf) command of huggingface_hub.
    type: path
    default: hf
  endpoint:
    description: The Hub (C(HF_ENDPOINT)), or a mirror that speaks its API.
    type: str
    default: https://huggingface.co
  token:
    description: A Hugging Face token (gated models); never logged.
    type: str
    default: ""
  exclude:
    description: Paths not downloaded (C(hf download --exclude), fnmatch patterns).
    type: list
    elements: str
    default: []
  download:
    description: Download what is missing; C(false) only reports.
    type: bool
    default: true
  timeout:
    description: Seconds for each request to the Hub's API.
    type: int
    default: 60
"""

EXAMPLES = r"""
- name: Download a model (resumed when a run died half-way; complete only when every file is there)
  pvegpu.llmstack.vllm_model_download:
    model: Qwen/Qwen2.5-7B-Instruct
    hf_home: /data/llm/models/hf-cache
    hf: /opt/llmstack/hf-cli/bin/hf
    exclude: ["*consolidated*"]
"""

RETURN = r"""
complete:
  description: Every file of the repository is in the cache (after the download, with O(download=true)).
  returned: always
  type: bool
commit:
  description: The commit the cache holds complete (from the record), when known.
  returned: always
  type: str
missing:
  description: Files of the record not in the snapshot, or of the wrong size or blob.
  returned: always
  type: list
  elements: str
leftovers:
  description: Partial files (C(blobs/*.incomplete)) of a killed download, found before this run removed them.
  returned: always
  type: list
  elements: str
"""

import fcntl
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url
from ansible_collections.pvegpu.llmstack.plugins.module_utils import hf_cache


def _get(module, url):
    headers = {"Accept": "application/json"}
    if module.params["token"]:
        headers["Authorization"] = "Bearer %s" % module.params["token"]
    response = open_url(url, headers=headers, timeout=module.params["timeout"])
    body = json.loads(response.read().decode("utf-8"))
    link = response.headers.get("Link") or ""
    following = None
    for part in link.split(","):
        if 'rel="next"' in part and "<" in part:
            following = part[part.index("<") + 1:part.index(">")]
    return body, following


def hub_listing(module, commit=None):
    """(commit, tree) of the repository at the revision, from the Hub's API (the tree paginated by Link). ``commit``:
    the one the download just wrote to refs/<revision>; else the Hub resolves the revision."""
    base = module.params["endpoint"].rstrip("/")
    repo = module.params["model"]
    if not commit:
        info, _ignored = _get(module, "%s/api/models/%s/revision/%s"
                              % (base, repo, quote(module.params["revision"], safe="")))
        commit = info.get("sha")
    if not commit:
        module.fail_json(msg="%s: the Hub's answer for revision %s has no commit" % (repo, module.params["revision"]))
    tree, url = [], "%s/api/models/%s/tree/%s?recursive=true" % (base, repo, commit)
    while url:
        page, url = _get(module, url)
        tree.extend(page)
    return commit, tree


def _in_use(path):
    """True while another process holds huggingface_hub's lock of that blob (a download running now)."""
    if not os.path.exists(path):
        return False
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _say(found):
    return ["%s (%d bytes)" % (path, size) for path, size in found]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model=dict(type="str", required=True),
            revision=dict(type="str", default="main"),
            hf_home=dict(type="path", required=True),
            hf=dict(type="path", default="hf"),
            endpoint=dict(type="str", default="https://huggingface.co"),
            token=dict(type="str", default="", no_log=True),
            exclude=dict(type="list", elements="str", default=[]),
            download=dict(type="bool", default=True),
            timeout=dict(type="int", default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    folder = hf_cache.repo_folder(params["hf_home"], params["model"])
    state = hf_cache.recorded_state(folder, params["revision"], params["exclude"])
    result = {"changed": False, "complete": state["complete"],
              "commit": (state["record"] or {}).get("commit", "") if state["complete"] else "",
              "missing": state["missing"] + state["wrong"], "leftovers": _say(state["leftovers"])}
    if state["complete"] or not params["download"]:
        module.exit_json(**result)
    result["changed"] = True
    if module.check_mode:
        module.exit_json(**result)
    record = hf_cache.record_path(folder, params["revision"])
    if os.path.exists(record):
        os.unlink(record)  # complete again only once checked below
    for path, _size in state["leftovers"]:
        if _in_use(hf_cache.lock_path(folder, path)):
            continue
        if os.path.exists(path):
            os.unlink(path)
    hf = params["hf"] if os.path.isabs(params["hf"]) else module.get_bin_path(params["hf"], required=True)
    argv = [hf, "download", params["model"], "--revision", params["revision"]]
    for pattern in params["exclude"]:
        argv += ["--exclude", pattern]
    env = {"HF_HOME": params["hf_home"], "HF_ENDPOINT": params["endpoint"].rstrip("/")}
    if params["token"]:
        env["HF_TOKEN"] = params["token"]
    rc, out, err = module.run_command(argv, environ_update=env)
    if rc != 0:
        said = (err or out).strip()[-2000:]
        module.fail_json(msg="hf download %s failed (rc %d): %s" % (params["model"], rc, said), rc=rc, stderr=said,
                         **result)
    try:
        commit, tree = hub_listing(module, hf_cache.ref_commit(folder, params["revision"]))
    except Exception as exc:  # pylint: disable=broad-except  # urllib's, the socket's and JSON errors alike
        module.fail_json(msg="%s: hf download ended, but the Hub's file listing (%s) could not be read to check the "
                         "cache against it: %s. Set vllm_hf_endpoint to a mirror that serves the Hub's API, or "
                         "run again once the Hub answers." % (params["model"], params["endpoint"], exc), **result)
    files = hf_cache.expected_files(tree, params["exclude"])
    checked = hf_cache.check(folder, commit, files)
    result.update(commit=commit, complete=checked["complete"], missing=checked["missing"] + checked["wrong"])
    if not checked["complete"]:
        module.fail_json(msg="hf download %s ended, but the cache does not hold the Hub's files at %s: %s"
                         % (params["model"], commit, "; ".join(result["missing"][:20])), **result)
    with open(record + ".tmp", "w") as handle:
        handle.write(hf_cache.record_text(params["revision"], commit, files, params["exclude"]))
    os.rename(record + ".tmp", record)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
