# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: probe_failures
short_description: One message per readiness probe of a looped uri task that did not answer HTTP 200
version_added: 0.1.0
description:
  - "Takes the registered result of a looped C(ansible.builtin.uri) task (a readiness probe such as a one-token
    completion) and returns C(<label>: <what>: HTTP <status> <the server's error>) for each probe that did not end
    with HTTP 200; skipped items are not probes."
  - The roles print these messages instead of the registered results, whose invocation holds the request's
    Authorization header.
  - The logic is in plugins/module_utils/service_start.py (C(probe_failures)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The registered result's C(results) list.
    type: list
    elements: dict
    required: true
  label:
    description: >-
      Names the probe, formatted with its loop item: a dict item's keys (C({key} on port {value}) for
      C(dict2items)), otherwise C({item}).
    type: str
    required: true
  what:
    description: What did not happen, e.g. C(did not complete a token within 300 s).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Stop when a model did not complete a token
  ansible.builtin.fail:
    msg: "{{ failures }}"
  vars:
    failures: "{{ probes.results | pvegpu.llmstack.probe_failures('{key} on port {value}', 'no token within 60 s') }}"
  when: failures | length > 0
"""

RETURN = r"""
_value:
  description: One message per failed probe; empty when every probe answered 200.
  type: list
  elements: str
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import service_start


def probe_failures(results, label, what):
    return service_start.probe_failures(results, label, what)


class FilterModule(object):
    def filters(self):
        return {"probe_failures": probe_failures}
