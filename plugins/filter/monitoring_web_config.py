# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: monitoring_web_config
short_description: The web.yml of Prometheus and Alertmanager - basic auth users with a bcrypt hash
version_added: 0.1.0
description:
  - Takes the web password and returns the exporter toolkit's web configuration, C(basic_auth_users) with the user
    and a bcrypt hash of the password, which Prometheus and Alertmanager read with C(--web.config.file).
  - Computed on the controller with the Python package C(bcrypt) (requirements.txt).
  - A hash found in O(earlier) (the files an earlier run wrote) that still verifies the password is kept, so a rerun
    writes the same file; otherwise a new hash with a random salt. The salt is never derived from the password.
  - Use it in a task with C(no_log), since its input is the password. The logic is in
    plugins/module_utils/monitoring.py and bcrypt_hash.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The password.
    type: str
    required: true
  user:
    description: The user name (letters, digits, C(.), C(_), C(-)).
    type: str
    required: true
  earlier:
    description: The text of the web.yml files an earlier run wrote (unreadable or empty ones are ignored).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Write web.yml
  ansible.builtin.copy:
    content: "{{ password | pvegpu.llmstack.monitoring_web_config('llmstack', [old_text]) | to_nice_yaml }}"
    dest: /opt/monitoring/prometheus/web.yml
    mode: "0640"
  no_log: true
"""

RETURN = r"""
_value:
  description: C(basic_auth_users) with the user and the bcrypt hash of the password.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import bcrypt_hash, monitoring


def monitoring_web_config(password, user, earlier=None):
    hashes = [found for text in earlier or [] for found in bcrypt_hash.find_hashes(text)]
    try:
        return monitoring.web_config(user, password, hashes)
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError("; ".join(exc.errors))


class FilterModule(object):
    def filters(self):
        return {"monitoring_web_config": monitoring_web_config}
