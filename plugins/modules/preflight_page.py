#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_page
short_description: Write a host preflight report as a self-contained HTML page
version_added: 0.3.0
description:
  - Writes the report of M(pvegpu.llmstack.preflight_report) as one HTML page, in the style of the burn-in pages
    (M(pvegpu.llmstack.burnin_report)) - each check with its status in the same colours, its evidence and fix hint.
    The page loads nothing from anywhere.
  - Written only when its content differs. Used by the C(host_preflight) role, on the controller.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  dest:
    description: The page's path.
    type: path
    required: true
  host:
    description: The host the report is about.
    type: str
    required: true
  report:
    description: The report (C({verdict, checks, gpus}), the C(llmstack_preflight) fact).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write the preflight page
  pvegpu.llmstack.preflight_page:
    dest: ~/.local/state/llmstack/preflight/pve-a.html
    host: pve-a
    report: "{{ llmstack_preflight }}"
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: The page's path.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin_report, burnin_run


def main():
    module = AnsibleModule(argument_spec=dict(dest=dict(type="path", required=True),
                                              host=dict(type="str", required=True),
                                              report=dict(type="dict", required=True)),
                           supports_check_mode=True)
    dest = module.params["dest"]
    page = burnin_report.render_preflight_html(module.params["host"], module.params["report"])
    changed, _old = burnin_run.write_if_changed(dest, page, module.check_mode)
    module.exit_json(changed=changed, dest=dest)


if __name__ == "__main__":
    main()
