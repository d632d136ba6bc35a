#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: audit_log_verify
short_description: Check the hash chain of an audit log written by the pvegpu.llmstack.audit_log callback
version_added: 0.1.0
description:
  - Walks the chain from the file's nonce line to its last line and fails at the first broken link, with the line
    number and the reason. An edited line (any byte, whitespace included), a deleted line, lines in another order,
    a last line that was cut off, an empty file or a second chain start are each reported.
  - The removal of whole lines at the end of the file leaves a valid chain; give O(anchor), a hash recorded
    elsewhere (the syslog copy), to catch that too.
  - Reads the file where the module runs; the log lives on the controller, so delegate to it.
  - The same check from a shell, without Ansible, is
    C(python3 tools/audit_log_verify.py FILE [--anchor HASH] [--json]) in the collection (exit 0 when the chain holds,
    1 when it is broken, 2 when the file cannot be read).
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  path:
    description: The audit log file.
    type: path
    required: true
  anchor:
    description: The hash of a record known from elsewhere (for example the last one the syslog receiver got); the
      chain must contain it.
    type: str
seealso:
  - plugin: pvegpu.llmstack.audit_log
    plugin_type: callback
"""

EXAMPLES = r"""
- name: Check the audit log on the controller
  pvegpu.llmstack.audit_log_verify:
    path: "{{ lookup('ansible.builtin.env', 'LLMSTACK_AUDIT_LOG') }}"
  delegate_to: localhost
  run_once: true
  register: audit

- name: Check it against the last hash the syslog server received
  pvegpu.llmstack.audit_log_verify:
    path: /var/log/llmstack/audit.jsonl
    anchor: 5f0c8d2e4bb1f3a5d7e9c1b3a5d7e9f1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3
  delegate_to: localhost
"""

RETURN = r"""
path:
  description: The file checked (absolute).
  returned: always
  type: str
line:
  description: The first broken line (1-based); null when the chain holds (or only the anchor is missing).
  returned: always
  type: int
reason:
  description: Why that line breaks the chain; null when it holds.
  returned: always
  type: str
  sample: it chains to line 5, which comes after it (lines reordered)
lines:
  description: Lines in the file.
  returned: always
  type: int
records:
  description: Records after the chain start line.
  returned: always
  type: int
valid_lines:
  description: Lines before the first broken one (all of them when the chain holds).
  returned: always
  type: int
events:
  description: Verified records per event (C(play_start), C(task), C(stats)).
  returned: always
  type: dict
statuses:
  description: Verified task records per status (C(changed), C(failed), ...).
  returned: always
  type: dict
hosts:
  description: Distinct hosts in the verified records.
  returned: always
  type: int
runs:
  description: Distinct runs (playbook invocations) in the verified records.
  returned: always
  type: int
nonce:
  description: The file's nonce.
  returned: always
  type: str
first_time:
  description: Time of the first verified record.
  returned: always
  type: str
last_time:
  description: Time of the last verified record.
  returned: always
  type: str
last_hash:
  description: Hash of the last verified line; keep it elsewhere to use as a later O(anchor).
  returned: always
  type: str
lost:
  description: The runs whose last record counts records that could not be written to this file (C(run), C(time),
    C(lost_records)); its syslog receiver or C(fallback_syslog) may hold them.
  returned: always
  type: list
  elements: dict
unfinished:
  description: The runs (ids) without their last record - killed, still running, or that record was lost.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import audit_log


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path", required=True), anchor=dict(type="str")),
        supports_check_mode=True,
    )
    anchor = module.params["anchor"]
    if anchor is not None and not audit_log.HASH_RE.match(anchor):
        module.fail_json(msg="anchor must be a SHA-256 hash (64 lowercase hex characters), got %r" % anchor)
    try:
        report = audit_log.verify_file(module.params["path"], anchor=anchor)
    except audit_log.AuditLogError as err:
        module.fail_json(msg=str(err), path=module.params["path"])
    report.pop("ok")
    if report["reason"] is not None:
        module.fail_json(msg="audit log %s: %s" % (report["path"], audit_log.describe(dict(report, ok=False))),
                         **report)
    module.exit_json(changed=False, **report)


if __name__ == "__main__":
    main()
