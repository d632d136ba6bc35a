#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tls_proxy_nginx_site
short_description: Replace an nginx site only after nginx -t accepted the whole config with the new site
version_added: 0.1.0
description:
  - Writes the new site to a temporary file next to O(path), writes a temporary main config next to
    O(main_config) that loads the new file where the main config loads O(path) (the include directive that
    names it, by path or glob), runs C(nginx -t) on that, and only then moves the new file over O(path) in one
    rename. When nginx rejects it, the site in place is never touched and the module fails with nginx's message.
  - The site must be included directly by O(main_config) (Debian's C(include /etc/nginx/conf.d/*.conf;)).
  - With O(state=absent) the site is removed only when this role wrote it (its first line says so); a file of
    the same name that is not the role's is left as it is (RV(foreign)). Either way the module returns which other
    files the main config loads that hold a C(server) block (RV(other_sites)), that is what nginx still serves.
  - The logic is in plugins/module_utils/tls_proxy.py (C(nginx_test_config), C(owned), C(nginx_other_sites)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host_diff
options:
  content:
    description: The site's text (required with O(state=present)).
    type: str
  state:
    description: C(present) writes the site, C(absent) removes it if this role wrote it.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The site file.
    type: path
    required: true
  main_config:
    description: The main nginx config that includes O(path).
    type: path
    default: /etc/nginx/nginx.conf
  test:
    description: Run C(nginx -t) before replacing the site.
    type: bool
    default: true
  mode:
    description: Permissions of the site file.
    type: str
    default: "0644"
"""

EXAMPLES = r"""
- name: Write the nginx site (tested by nginx -t before it replaces the old one)
  pvegpu.llmstack.tls_proxy_nginx_site:
    content: "{{ tls_proxy_rendered.config }}"
    path: /etc/nginx/conf.d/llmstack-gateway.conf
    main_config: /etc/nginx/nginx.conf

- name: Take the site away (only if this role wrote it); what else does nginx serve?
  pvegpu.llmstack.tls_proxy_nginx_site:
    path: /etc/nginx/conf.d/llmstack-gateway.conf
    state: absent
  register: site
"""

RETURN = r"""
foreign:
  description: With O(state=absent), the file exists and was not written by this role (it was left in place).
  returned: always
  type: bool
other_sites:
  description: With O(state=absent), the other files the main config loads that hold a C(server) block.
  returned: always
  type: list
  elements: str
path:
  description: The site file.
  returned: always
  type: str
stderr:
  description: What C(nginx -t) said when it rejected the new site.
  returned: failure
  type: str
"""

import glob
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import tls_proxy


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _read_any(path):
    """A loaded file's text, or None when it cannot be read (a directory, a dangling link)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _temp(directory, prefix, suffix, content):
    handle, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    with os.fdopen(handle, "w") as out:
        out.write(content)
    return name


def absent(module):
    path, main_config = module.params["path"], module.params["main_config"]
    before = _read(path)
    ours = tls_proxy.owned(before)
    result = {"changed": ours, "path": path, "foreign": before is not None and not ours}
    if module._diff:
        result["diff"] = {"before": before or "", "after": before if not ours else "", "before_header": path,
                          "after_header": path}
    main_text = _read(main_config)
    result["other_sites"] = [] if main_text is None else tls_proxy.nginx_other_sites(
        main_text, main_config, path, glob.glob, _read_any)
    if ours and not module.check_mode:
        os.unlink(path)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            content=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            path=dict(type="path", required=True),
            main_config=dict(type="path", default="/etc/nginx/nginx.conf"),
            test=dict(type="bool", default=True),
            mode=dict(type="str", default="0644"),
        ),
        required_if=[("state", "present", ["content"])],
        supports_check_mode=True,
    )
    if module.params["state"] == "absent":
        absent(module)
    path, content = module.params["path"], module.params["content"]
    before = _read(path)
    result = {"changed": before != content, "path": path, "foreign": False, "other_sites": []}
    if module._diff:
        result["diff"] = {"before": before or "", "after": content, "before_header": path, "after_header": path}
    if not result["changed"] or module.check_mode:
        module.exit_json(**result)
    # A dot name outside nginx's include globs (conf.d/*.conf, sites-enabled/*), on the site's file system.
    candidate = _temp(os.path.dirname(path) or ".", "." + os.path.basename(path) + ".", ".llmstack-new", content)
    test_main = None
    try:
        os.chmod(candidate, int(module.params["mode"], 8))
        if module.params["test"]:
            main_config = module.params["main_config"]
            main_text = _read(main_config)
            if main_text is None:
                module.fail_json(msg="tls_proxy_nginx_main_config: %s does not exist" % main_config, path=path)
            try:
                text = tls_proxy.nginx_test_config(main_text, main_config, path, candidate, glob.glob)
            except tls_proxy.TlsProxyError as exc:
                module.fail_json(msg="; ".join(exc.errors), path=path)
            test_main = _temp(os.path.dirname(main_config), ".llmstack-nginx-test-", ".conf", text)
            nginx = module.get_bin_path("nginx", required=True)
            rc, out, err = module.run_command([nginx, "-t", "-q", "-c", test_main])
            if rc != 0:
                said = (err or out).replace(candidate, path + " (the new version)").strip()
                module.fail_json(msg="nginx -t rejected the rendered site %s; the site in place was not touched: %s"
                                 % (path, said), stderr=said, path=path)
        module.atomic_move(candidate, path)
        os.chmod(path, int(module.params["mode"], 8))
    finally:
        for name in (candidate, test_main):
            if name and os.path.exists(name):
                os.unlink(name)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
