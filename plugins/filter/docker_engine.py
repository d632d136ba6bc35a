# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: docker_settings_problems
short_description: The problems of the docker role's settings, one message per problem naming its variable
version_added: 0.1.0
description:
  - The docker role's settings without their C(docker_) prefix -> one message per problem (an empty list when all
    is well).
  - The same plugin file holds C(docker_distribution_problem) (C(ansible_facts) -> null, or why the distribution is
    not supported), C(docker_renamed_problems) (the names of the variables a host defines -> one message per
    variable of the nvidia role from before Docker became the docker role's, naming its new name),
    C(docker_packages) (the source -> its apt packages) and C(docker_daemon_options) (the user's daemon.json
    options, log size and count -> the keys the role owns).
  - The logic is in plugins/module_utils/docker_engine.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: The settings, keyed without the C(docker_) prefix.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the settings
  ansible.builtin.fail:
    msg: "{{ problems }}"
  vars:
    problems: >-
      {{ {'source': docker_source, 'log_max_size': docker_log_max_size} | pvegpu.llmstack.docker_settings_problems }}
  when: problems | length > 0
"""

RETURN = r"""
_value:
  description: One message per problem.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import docker_engine


def docker_settings_problems(settings):
    return docker_engine.check_settings(settings)


def docker_distribution_problem(facts):
    return docker_engine.check_distribution(facts.get("distribution"), facts.get("distribution_major_version"),
                                            facts.get("distribution_release"))


def docker_packages(source):
    try:
        return docker_engine.packages(source)
    except docker_engine.DockerEngineError as exc:
        raise AnsibleFilterError("docker_packages: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"docker_settings_problems": docker_settings_problems,
                "docker_distribution_problem": docker_distribution_problem,
                "docker_renamed_problems": docker_engine.renamed_problems,
                "docker_packages": docker_packages,
                "docker_daemon_options": docker_engine.owned_daemon_options}
