#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: secret_file
short_description: Secrets in files on the target - read back, generated only when missing, never overwritten
version_added: 0.1.0
description:
  - Reads each secret of O(secrets) from its file in O(dir) (the file's content without the trailing newline).
  - Only a file that does not exist is created, with the secret's O(secrets[].value) or a generated one (random
    letters and digits, hex digits or a UUID, behind an optional prefix). It is written 0600, complete or not at
    all (a temporary file hard-linked to its name), in O(dir), created 0700 when missing.
  - An existing file is never overwritten. A file that cannot be read (permissions, an I/O error, a directory or
    a FIFO in its place, a dangling link, an empty file) fails the task with a message naming it, and nothing
    is written - every file is read before any is written. So does an existing file whose value differs from
    the O(secrets[].value) given.
  - An existing file that is not 0600 is set to 0600.
  - The secrets are returned in RV(secrets), so B(use no_log on the task). Because C(no_log) also hides a failure's
    message, register the result with C(failed_when) false and fail with its C(msg) in a next task when RV(secrets) is
    missing, as the roles of this collection do.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  dir:
    description: The directory of the secret files (a role's C(<role>_dir/secrets)).
    type: path
    required: true
  secrets:
    description: The secrets, one file each.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The file's name in O(dir) (no C(/), not starting with C(.)).
        type: str
        required: true
      format:
        description: What a generated secret is made of after its O(secrets[].prefix).
        type: str
        choices: [alnum, hex, uuid]
        default: alnum
      length:
        description: Characters generated after the prefix (16 to 4096; not used for C(uuid)).
        type: int
        default: 48
      prefix:
        description: Put before a generated secret (LiteLLM's C(sk-), Langfuse's C(pk-lf-)).
        type: str
        default: ""
      value:
        description:
          - The value the file must hold (one read elsewhere, or from a vault), instead of generating one.
          - Written when the file is missing; an existing file with another value fails the task.
          - Ansible masks it wherever it appears in the result, so the caller keeps its own copy.
        type: str
      source:
        description: Where O(secrets[].value) comes from, for the message when a file disagrees with it.
        type: str
  create:
    description: Create the missing files. When false, only read, and list the missing ones in RV(missing).
    type: bool
    default: true
attributes:
  check_mode:
    details: A secret that would be generated is generated and returned but never stored; a real run generates another.
notes:
  - Run it with the privileges that own O(dir) (C(become)); files are created with the task's user as owner.
"""

EXAMPLES = r"""
- name: Read back the Langfuse secrets, or generate the missing ones
  pvegpu.llmstack.secret_file:
    dir: /opt/langfuse/secrets
    secrets:
      - {name: encryption_key, format: hex, length: 64}
      - {name: project_public_key, format: uuid, prefix: pk-lf-}
      - {name: postgres_password}
  register: langfuse_secret_files
  failed_when: false  # the next task fails with the message, which no_log would hide here
  no_log: true

- name: Stop when a secret file cannot be read or written
  ansible.builtin.fail:
    msg: "{{ langfuse_secret_files.msg }}"
  when: langfuse_secret_files.secrets is not defined

- name: Only read (fail on an unreadable file, list the missing ones)
  pvegpu.llmstack.secret_file:
    dir: /opt/llm-inference/secrets
    secrets: [{name: api_key}]
    create: false
  register: vllm_key
  no_log: true

- name: A gateway gets the master key of the first gateway (written only where it is missing)
  pvegpu.llmstack.secret_file:
    dir: /opt/llm-gateway/secrets
    secrets:
      - {name: master_key, value: "{{ master_key_of_gw1 }}", source: the first gateway gw1}
  no_log: true
"""

RETURN = r"""
secrets:
  description:
    - Name to value of every secret read or written (generated ones included; with O(create) false, the missing ones
      are absent). A value given in O(secrets[].value) shows as C(********).
  returned: success
  type: dict
missing:
  description: The secrets whose file did not exist before this run.
  returned: success
  type: list
  elements: str
generated:
  description: The secrets generated (in check mode, that would be).
  returned: success
  type: list
  elements: str
written:
  description: The files created (in check mode, that would be), generated or with their given value.
  returned: success
  type: list
  elements: str
modes_fixed:
  description: Existing files set to mode 0600.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import secret_files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type="path", required=True),
            secrets=dict(type="list", elements="dict", required=True, no_log=False, options=dict(
                name=dict(type="str", required=True),
                format=dict(type="str", choices=list(secret_files.FORMATS), default="alnum"),
                length=dict(type="int", default=48, no_log=False),
                prefix=dict(type="str", default="", no_log=False),
                value=dict(type="str", no_log=True),
                source=dict(type="str"),
            )),
            create=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        result = secret_files.ensure(module.params["dir"], module.params["secrets"], create=module.params["create"],
                                     check_mode=module.check_mode)
    except secret_files.SecretFileError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
