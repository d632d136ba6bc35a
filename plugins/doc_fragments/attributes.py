# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes every module of the collection documents, stated once. A module names this fragment and one of
    # PLAN, HOST, HOST_DIFF or API_DIFF below in extends_documentation_fragment; under attributes it keeps only
    # what differs (a module's entries are merged over the fragments').
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: full
"""

    # The support levels most modules share; a module names one of these with the base fragment and states only
    # what differs (details, another platform).
    # Plans and renders computed from their inputs on the controller; they change nothing.
    PLAN = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: all
"""

    # Modules that read or change a host without a diff to show.
    HOST = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    # Modules that change a host's files and show the change in diff mode.
    HOST_DIFF = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
"""

    # Modules that change objects through an API (PVE, LiteLLM) and show the change in diff mode.
    API_DIFF = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: all
"""

    # Modules that return ansible_facts.
    FACTS = r"""
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""

    # Modules of the action group pvegpu.llmstack.pve (the PVE API modules).
    PVE_GROUP = r"""
attributes:
  action_group:
    description: Use C(group/pvegpu.llmstack.pve) in C(module_defaults) to set the connection options once.
    support: full
    membership:
      - pvegpu.llmstack.pve
"""
