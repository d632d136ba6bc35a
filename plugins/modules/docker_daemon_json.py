#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: docker_daemon_json
short_description: Merge keys into Docker's daemon.json, keeping every key someone else set
version_added: 0.1.0
description:
  - Reads C(/etc/docker/daemon.json) (a missing or empty file is an empty object), sets the keys of O(options)
    (nested mappings such as C(log-opts) are merged key by key) and keeps every other key - the user's, and the
    C(runtimes) entry C(nvidia-ctk) adds.
  - Writes only when the merged object differs from what the file holds (compared as JSON, so a file another tool
    formatted differently is not rewritten). A file that is not a JSON object is never overwritten; the module
    fails and says so.
  - With O(validate), the new file is checked first (for example C(dockerd --validate --config-file %s)).
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host_diff
options:
  path:
    description: The daemon configuration file.
    type: path
    default: /etc/docker/daemon.json
  options:
    description: The keys to set.
    type: dict
    required: true
  validate:
    description: A command run on the new file (C(%s) is its path) before it replaces the old one; the file is
      not written when it fails. Skipped when its program is not installed (check mode on a fresh host).
    type: str
  backup:
    description: Keep a time-stamped copy of the previous file.
    type: bool
    default: false
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Log rotation for every container, the user's keys kept
  pvegpu.llmstack.docker_daemon_json:
    options:
      log-driver: json-file
      log-opts: {max-size: 100m, max-file: "3"}
    validate: dockerd --validate --config-file %s
"""

RETURN = r"""
changed_keys:
  description: The keys set or changed (nested keys dotted).
  returned: always
  type: list
  elements: str
  sample: [log-opts.max-size]
config:
  description: The configuration after the merge.
  returned: always
  type: dict
backup_file:
  description: The copy of the previous file.
  returned: when O(backup) and the file changed
  type: str
"""

import os
import shlex
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import docker_engine


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/docker/daemon.json"),
            options=dict(type="dict", required=True),
            validate=dict(type="str"),
            backup=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    before_text = None
    if os.path.exists(path):
        with open(path) as handle:
            before_text = handle.read()
    try:
        current = docker_engine.load_daemon_json(before_text, path)
    except docker_engine.DockerEngineError as exc:
        module.fail_json(msg=str(exc))
    merged, changed_keys = docker_engine.merge_daemon(current, module.params["options"])
    changed = merged != current or before_text is None
    after_text = docker_engine.render_daemon_json(merged)
    result = {"changed": changed, "changed_keys": changed_keys, "config": merged, "path": path}
    if module._diff:
        result["diff"] = {"before": before_text or "", "after": after_text if changed else before_text or "",
                          "before_header": path, "after_header": path}
    if not changed:
        module.exit_json(**result)
    directory = os.path.dirname(path) or "."
    if module.check_mode:
        module.exit_json(**result)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".daemon.json.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(after_text)
        os.chmod(tmp, 0o644)
        validate = module.params["validate"]
        if validate:
            if "%s" not in validate:
                module.fail_json(msg="validate: must contain %%s (the new file's path), not %r" % validate)
            argv = [a.replace("%s", tmp) for a in shlex.split(validate)]
            if module.get_bin_path(argv[0]) or os.path.isabs(argv[0]) and os.path.exists(argv[0]):
                rc, out, err = module.run_command(argv)
                if rc != 0:
                    module.fail_json(msg="validate: %s refused the new %s: %s" % (argv[0], path, (err or out).strip()),
                                     config=merged)
            else:
                module.warn("validate: %s is not installed; %s was not validated" % (argv[0], path))
        if module.params["backup"] and before_text is not None:
            result["backup_file"] = module.backup_local(path)
        module.atomic_move(tmp, path)
        tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
