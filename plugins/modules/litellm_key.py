#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: litellm_key
short_description: Idempotent LiteLLM virtual keys, found by their alias
version_added: 0.1.0
description:
  - Creates, updates or deletes one LiteLLM proxy virtual key, identified by O(key_alias), through the proxy's
    management API (C(/key/list), C(/key/generate), C(/key/update), C(/key/delete)) with the master key.
  - Only the settings given are managed; C(changed) only when one of them differs from what the proxy stores.
    Check mode predicts without calling a changing endpoint; diff mode shows the managed settings before and after.
  - The key value exists only when it is generated. It is written to O(key_path) on the target (mode 0600) and
    returned as RV(key) only when O(return_key) is true (then use C(no_log) on the task). The proxy stores a hash,
    so a key whose file was lost cannot be read again; O(replace_lost_key) deletes and regenerates it.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.api_diff
options:
  api_url:
    description: The proxy's base URL.
    type: str
    default: http://127.0.0.1:4000
  master_key:
    description: The proxy's master key (C(LITELLM_MASTER_KEY) from the environment when not given).
    type: str
    required: true
  key_alias:
    description: The key's alias (unique).
    type: str
    required: true
  state:
    description: C(present) or C(absent).
    type: str
    choices: [present, absent]
    default: present
  models:
    description: Model groups the key may call.
    type: list
    elements: str
  max_budget:
    description: Budget in USD per O(budget_duration).
    type: float
  budget_duration:
    description: Budget period (C(30d), C(1mo), C(monthly), ...).
    type: str
  tpm_limit:
    description: Tokens per minute.
    type: int
  rpm_limit:
    description: Requests per minute.
    type: int
  max_parallel_requests:
    description: Concurrent requests.
    type: int
  metadata:
    description: Metadata; only the keys given are compared.
    type: dict
  key_path:
    description: File on the target the generated key is written to (0600, directory created 0700).
    type: path
  return_key:
    description: Return the generated key as RV(key).
    type: bool
    default: false
  replace_lost_key:
    description: When the key exists but O(key_path) does not, delete it and generate a new one (else fail).
    type: bool
    default: false
  validate_certs:
    description: Verify the proxy's TLS certificate.
    type: bool
    default: true
  timeout:
    description: Seconds per request.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: OpenClaw agent key (seed 000)
  pvegpu.llmstack.litellm_key:
    api_url: http://127.0.0.1:4000
    master_key: "{{ litellm_master_key }}"
    key_alias: openclaw-agent
    models: [fast, balanced, reasoning]
    max_budget: 50
    budget_duration: 30d
    max_parallel_requests: 5
    tpm_limit: 100000
    rpm_limit: 60
    key_path: /opt/llm-gateway/secrets/clients/openclaw-agent.key
"""

RETURN = r"""
operation:
  description: C(create), C(update), C(replace) (lost key file), C(delete) or C(none).
  returned: always
  type: str
changes:
  description: Managed setting to C([before, after]) for the settings that differ.
  returned: always
  type: dict
key:
  description: The generated key; only on creation with O(return_key).
  returned: when created and return_key
  type: str
token:
  description: The key's hash as the proxy stores it (not a secret).
  returned: when the key exists
  type: str
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.urls import open_url
from ansible_collections.pvegpu.llmstack.plugins.module_utils import litellm_keys


def make_request(module):
    base = module.params["api_url"].rstrip("/")

    def request(method, path, body=None):
        data = json.dumps(body) if body is not None else None
        headers = {"Authorization": "Bearer %s" % module.params["master_key"], "Content-Type": "application/json"}
        try:
            response = open_url(base + path, method=method, data=data, headers=headers,
                                validate_certs=module.params["validate_certs"], timeout=module.params["timeout"])
            return response.getcode(), response.read().decode("utf-8", "replace")
        except HTTPError as exc:
            body_text = exc.read().decode("utf-8", "replace") if hasattr(exc, "read") else ""
            return exc.code, body_text
        except (URLError, OSError) as exc:
            return None, "cannot reach %s: %s" % (base, exc)

    return request


def write_key(path, key):
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".litellm-key-")
    try:
        os.fchmod(handle, 0o600)
        os.write(handle, (key + "\n").encode())
    finally:
        os.close(handle)
    os.rename(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            api_url=dict(type="str", default="http://127.0.0.1:4000"),
            master_key=dict(type="str", required=True, no_log=True, fallback=(os.environ.get, ["LITELLM_MASTER_KEY"])),
            key_alias=dict(type="str", required=True, no_log=False),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            models=dict(type="list", elements="str"),
            max_budget=dict(type="float"),
            budget_duration=dict(type="str"),
            tpm_limit=dict(type="int"),
            rpm_limit=dict(type="int"),
            max_parallel_requests=dict(type="int"),
            metadata=dict(type="dict"),
            key_path=dict(type="path", no_log=False),
            return_key=dict(type="bool", default=False),
            replace_lost_key=dict(type="bool", default=False),
            validate_certs=dict(type="bool", default=True),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    alias = params["key_alias"]
    wanted = litellm_keys.wanted_fields(params)
    api = litellm_keys.KeyApi(make_request(module))
    try:
        current = api.find(alias)
        action, changes = litellm_keys.plan(current, wanted, params["state"])
        lost = (params["state"] == "present" and current is not None and params["key_path"]
                and not os.path.exists(params["key_path"]))
        if lost and not params["replace_lost_key"]:
            module.fail_json(msg="key %s exists in LiteLLM but its file %s is missing, and the proxy keeps only a "
                                 "hash: set replace_lost_key to delete it and generate a new one"
                                 % (alias, params["key_path"]))
        if lost:
            action = "replace"
        result = {"changed": action != "none", "operation": action,
                  "changes": dict((f, list(v)) for f, v in changes.items())}
        before = dict((f, (current or {}).get(f)) for f in wanted) if current is not None else {}
        after = {} if params["state"] == "absent" else dict(before, **wanted)
        if module._diff:
            result["diff"] = {"before": before, "after": after,
                              "before_header": "key %s" % alias, "after_header": "key %s" % alias}
        if current is not None:
            result["token"] = current.get("token")
        if module.check_mode or action == "none":
            module.exit_json(**result)
        if action == "update":
            api.update(current["token"], dict((f, wanted[f]) for f in changes))
        elif action == "delete":
            api.delete(alias)
        else:
            if action == "replace":
                api.delete(alias)
            created = api.generate(alias, wanted)
            key = created.get("key")
            if not key:
                module.fail_json(msg="LiteLLM /key/generate returned no key for %s" % alias)
            if params["key_path"]:
                write_key(params["key_path"], key)
            if params["return_key"]:
                result["key"] = key
            result["token"] = created.get("token") or created.get("token_id")
    except litellm_keys.LitellmApiError as exc:
        module.fail_json(msg=str(exc), status=exc.status)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
