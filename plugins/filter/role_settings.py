# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: vllm_settings_problems
short_description: Every problem in the vllm role's variables, each naming the variable
version_added: 0.1.0
description:
  - Takes the role's variables by their full names (C(vllm_models), C(vllm_bind_address), ...) and returns one
    message per problem (an empty list when they are usable), for a C(fail) task that runs before anything is read
    or written. Wrong types (a C(max_model_len) of C(lots)), ports out of range, an address that is not an IP
    address, and two models whose names map to the same compose service or systemd unit are refused.
  - The same plugin file holds C(litellm_settings_problems) (the litellm role's own variables, e.g.
    C(litellm_bind_address), C(litellm_port), C(litellm_workers)).
  - Numbers may be given as strings of digits (INI inventories, C(-e key=value)); anything else is refused.
  - The logic is in plugins/module_utils/vllm_deploy.py and litellm_config.py (C(check_settings)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The role's variables, by their full names.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the settings
  ansible.builtin.fail:
    msg: "{{ problems }}"
  vars:
    problems: "{{ {'vllm_models': vllm_models, 'vllm_bind_address': vllm_bind_address}
                  | pvegpu.llmstack.vllm_settings_problems }}"
  when: problems | length > 0
"""

RETURN = r"""
_value:
  description: One message per problem, each naming the variable; empty when the settings are usable.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import litellm_config, vllm_deploy


def _checked(function, settings):
    if not isinstance(settings, dict):
        raise AnsibleFilterError("%s: needs a mapping of variable names to values" % function.__module__)
    return function(settings)


def vllm_settings_problems(settings):
    return _checked(vllm_deploy.check_settings, settings)


def litellm_settings_problems(settings):
    return _checked(litellm_config.check_settings, settings)


class FilterModule(object):
    def filters(self):
        return {"vllm_settings_problems": vllm_settings_problems,
                "litellm_settings_problems": litellm_settings_problems}
