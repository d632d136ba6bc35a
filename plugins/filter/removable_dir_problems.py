# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: removable_dir_problems
short_description: Why a directory is not one a removal may take, naming its variable
version_added: 0.2.0
description:
  - Takes a path and the name of the variable it comes from (e.g. C(langfuse_dir)) and returns one message when the
    directory is not one that C(<role>_state=absent) with C(<role>_purge) may remove with everything in it, an
    empty list when it is.
  - The directory must be absolute, at least two levels deep, without empty, C(.) or C(..) components, and neither
    a home directory (C(/home/ops)) nor a system directory (C(/etc/ssh), C(/var/lib), C(/usr/local), ...).
  - The logic is in plugins/module_utils/value_checks.py (C(removable_dir_problems)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The directory.
    type: path
    required: true
  variable:
    description: The variable it comes from, named in the message.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Check the directory before taking it away
  ansible.builtin.fail:
    msg: "{{ problems | join('; ') }}"
  vars:
    problems: "{{ langfuse_dir | pvegpu.llmstack.removable_dir_problems('langfuse_dir') }}"
  when: problems | length > 0
"""

RETURN = r"""
_value:
  description: One message naming the variable, or nothing when the directory may be removed.
  type: list
  elements: str
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks


def removable_dir_problems(path, variable):
    return value_checks.removable_dir_problems(variable, path)


class FilterModule(object):
    def filters(self):
        return {"removable_dir_problems": removable_dir_problems}
