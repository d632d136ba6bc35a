# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: apt_fetch_failed
short_description: Whether an apt task failed only because a download failed
version_added: 0.1.0
description:
  - Takes the registered result of an C(ansible.builtin.apt) task and returns true when the task failed and its
    message, stderr or stdout says a download failed (C(Failed to fetch), C(Unable to connect to), C(Temporary failure
    resolving), C(Hash Sum mismatch), the apt module's C(Failed to update apt cache), ...).
  - The roles retry their apt tasks while this is true (C(until), C(retries), C(delay)), so that a mirror or apt cache
    that is away for a moment does not fail a run; any other failure fails at once.
  - The logic is in plugins/module_utils/apt_fetch.py (C(fetch_failed)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The apt task's registered result.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Install nftables, again while only a download failed
  ansible.builtin.apt:
    name: nftables
  register: installed
  until: not (installed | pvegpu.llmstack.apt_fetch_failed)
  retries: 4
  delay: 15
"""

RETURN = r"""
_value:
  description: True when the task failed because a download failed; false when it succeeded or failed otherwise.
  type: bool
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import apt_fetch


def apt_fetch_failed(result):
    return apt_fetch.fetch_failed(result)


class FilterModule(object):
    def filters(self):
        return {"apt_fetch_failed": apt_fetch_failed}
