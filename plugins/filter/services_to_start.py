# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: services_to_start
short_description: Which services of a role's compose project start on this host
version_added: 0.2.0
description:
  - Takes the service names of a compose project, the project (the role - litellm, langfuse, monitoring, vllm) and
    the host's C(llmstack_services_not_started), and returns C({start, skipped, unknown, problems}).
  - An entry C(<role>) keeps every service of that role's project from starting, C(<role>/<service>) one of them;
    entries of other roles are ignored. C(unknown) lists this role's entries naming a service its project does not
    have on this host (not an error, since one list in group_vars serves hosts whose projects differ); C(problems) names
    the variable for an entry that is neither form.
  - The logic is in plugins/module_utils/service_start.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The project's service names, in order.
    type: list
    elements: str
    required: true
  project:
    description: The role whose project it is.
    type: str
    required: true
  not_started:
    description: The host's C(llmstack_services_not_started).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Start only what may run here
  community.docker.docker_compose_v2:
    project_src: /opt/monitoring
    services: "{{ (['prometheus', 'grafana'] | pvegpu.llmstack.services_to_start('monitoring',
                  ['monitoring/grafana'])).start }}"
"""

RETURN = r"""
_value:
  description: C(start) and C(skipped) (service names, in the project's order), C(unknown) (names) and
    C(problems) (messages).
  type: dict
"""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import service_start


def services_to_start(services, project, not_started):
    return service_start.services_to_start(project, services, not_started)


class FilterModule(object):
    def filters(self):
        return {"services_to_start": services_to_start}
