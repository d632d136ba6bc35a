#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_keyring
short_description: Install a repository's signing key as a binary keyring, only when its fingerprint is expected
version_added: 0.1.0
description:
  - Downloads O(url) (armored or binary OpenPGP), converts it to the binary packets C(gpg --dearmor) writes and
    checks that every primary key in it has one of O(fingerprints) before writing O(dest) (for an apt
    C(signed-by) option). Needs no gpg on the host.
  - A key whose fingerprint is not expected (rotated upstream, or substituted on the way) is not written; the
    module fails and names the fingerprint it found.
  - Writes only when the keyring's bytes change. Check mode downloads and checks but writes nothing.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  url:
    description: Where the key is (C(https://), C(http://) or C(file:///)).
    type: str
    required: true
  dest:
    description: The keyring file, conventionally under C(/usr/share/keyrings).
    type: path
    required: true
  fingerprints:
    description: The fingerprints (40 hex digits; spaces and colons ignored) the key may have.
    type: list
    elements: str
    required: true
  timeout:
    description: Download timeout in seconds.
    type: int
    default: 30
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: NVIDIA's container toolkit repository key
  pvegpu.llmstack.apt_keyring:
    url: https://nvidia.github.io/libnvidia-container/gpgkey
    dest: /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
    fingerprints: [C95B321B61E88C1809C4F759DDCAE044F796ECB0]
"""

RETURN = r"""
fingerprints:
  description: The primary key fingerprints in the keyring.
  returned: success
  type: list
  elements: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia_guest


def download(module, url):
    if url.startswith("file://"):
        path = url[len("file://"):]
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except OSError as exc:
            module.fail_json(msg="url: cannot read %s (%s)" % (path, exc))
    response, info = fetch_url(module, url, timeout=module.params["timeout"])
    if info.get("status") != 200 or response is None:
        module.fail_json(msg="url: %s answered %s %s" % (url, info.get("status"), info.get("msg", "")))
    return response.read()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            fingerprints=dict(type="list", elements="str", required=True),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    url, dest = module.params["url"], module.params["dest"]
    data = download(module, url)
    try:
        keyring, found = nvidia_guest.check_keyring(data, module.params["fingerprints"])
    except nvidia_guest.NvidiaGuestError as exc:
        module.fail_json(msg="%s: %s" % (url, exc))
    current = None
    if os.path.exists(dest):
        with open(dest, "rb") as handle:
            current = handle.read()
    changed = current != keyring
    if changed and not module.check_mode:
        directory = os.path.dirname(dest) or "."
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".keyring.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(keyring)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, dest)
    elif not changed and os.stat(dest).st_mode & 0o7777 != 0o644:
        changed = True
        if not module.check_mode:
            os.chmod(dest, 0o644)
    module.exit_json(changed=changed, fingerprints=found, dest=dest)


if __name__ == "__main__":
    main()
