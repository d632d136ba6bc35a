#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: applied_config
short_description: Keep which config files a service last applied, so that a restart a dead run owed is not lost
version_added: 0.3.0
description:
  - A role writes a service's config files and restarts (or reloads) the service in a handler. A run killed or failed
    between the two leaves the service on its old config, and the next run finds the files unchanged. This module
    keeps a record per service on the target (C(<state_dir>/<name>.json), 0600) of the files' digests as the service
    last applied them, and the service roles of this collection use it the same way (docs/architecture.md,
    "Pending restarts").
  - O(state=check), before the role writes anything, compares the record with the files now. A difference is a
    restart an earlier run owed (RV(pending)) - the task is reported changed and notifies the role's handler. Without
    a record, the files as they are now are recorded when any of them exists (RV(baseline)) - the first run of this
    module on an existing install; a first install has none of them yet.
  - O(state=applied), after the handlers ran, records the files as they are now (a service the run did not start
    starts on them when it starts).
  - The record holds a sha256 per file (a directory's covers its files), never content.
  - The logic is in plugins/module_utils/applied_config.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  name:
    description: The service's record name (the role and the service, e.g. C(litellm), C(monitoring-prometheus)).
    type: str
    required: true
  files:
    description: The absolute paths of the files (or directories) whose content the service reads at start or reload.
    type: list
    elements: path
    required: true
  state:
    description: C(check) before the files are written, C(applied) after the service applied them.
    type: str
    choices: [check, applied]
    default: check
  state_dir:
    description: Where the records are kept (created 0700).
    type: path
    default: /var/lib/llmstack/applied
attributes:
  check_mode:
    details: Reports what it would record and writes nothing.
"""

EXAMPLES = r"""
- name: Find a restart of the gateway an earlier run owed (before config.yaml is written)
  pvegpu.llmstack.applied_config:
    name: litellm
    files: [/opt/llm-gateway/config.yaml, /opt/llm-gateway/secrets/litellm.env]
  register: litellm_applied
  changed_when: litellm_applied.pending
  notify: Restart the gateway

- name: Record the config the gateway runs with (after flush_handlers)
  pvegpu.llmstack.applied_config:
    name: litellm
    files: [/opt/llm-gateway/config.yaml, /opt/llm-gateway/secrets/litellm.env]
    state: applied
"""

RETURN = r"""
pending:
  description: O(state=check) - the files differ from what the service last applied (a restart is owed).
  returned: success
  type: bool
changed_files:
  description: The paths whose content differs from the record (with O(state=applied), those newly recorded).
  returned: success
  type: list
  elements: str
baseline:
  description: O(state=check) - there was no record, and the files as they are now were recorded.
  returned: success
  type: bool
record:
  description: The record's path.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import applied_config


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            files=dict(type="list", elements="path", required=True),
            state=dict(type="str", choices=["check", "applied"], default="check"),
            state_dir=dict(type="path", default="/var/lib/llmstack/applied"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    action = applied_config.check if params["state"] == "check" else applied_config.applied
    try:
        result = action(params["state_dir"], params["name"], params["files"], check_mode=module.check_mode)
    except applied_config.AppliedConfigError as exc:
        module.fail_json(msg="%s: %s" % (params["name"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
