# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: langfuse_secret_env
short_description: Langfuse's generated secrets to the env files its containers read them from
version_added: 0.1.0
description:
  - "Turns the secrets the langfuse role generates (C(salt), C(encryption_key), C(nextauth_secret),
    C(postgres_password), C(clickhouse_password), C(redis_password), C(minio_password), C(project_public_key),
    C(project_secret_key), C(user_password)) into C({env file: {VARIABLE: value}}) for the files in
    C(langfuse_dir/secrets) (0600). The compose file refers to those files and holds no secret itself."
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The generated secrets by name.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write the env files
  ansible.builtin.copy:
    content: |
      {% for name, value in (langfuse_secrets | pvegpu.llmstack.langfuse_secret_env)[item].items() %}
      {{ name }}={{ value }}
      {% endfor %}
    dest: "/opt/langfuse/secrets/{{ item }}"
    mode: "0600"
  loop: [langfuse.env, langfuse-web.env, postgres.env, clickhouse.env, redis.env, minio.env]
  no_log: true
"""

RETURN = r"""
_value:
  description: Env file name to its variables.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import langfuse as langfuse_utils


def langfuse_secret_env(secrets):
    try:
        return langfuse_utils.secret_env(secrets)
    except KeyError as exc:
        # The name of the missing secret only; never a value.
        raise AnsibleFilterError("langfuse_secret_env: the secret %s is missing" % exc)


class FilterModule(object):
    def filters(self):
        return {"langfuse_secret_env": langfuse_secret_env}
