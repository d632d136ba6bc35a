# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes every module of the collection documents, stated once. A module names the fragment in
    # extends_documentation_fragment and keeps only its own support levels (and platforms) under attributes:
    # the module's entries are merged over these, so a module says `check_mode: {support: full}` and no more.
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
