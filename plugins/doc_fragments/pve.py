# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The connection options of every module that talks to the PVE API (action group pvegpu.llmstack.pve).
    DOCUMENTATION = r"""
options:
  api_host:
    description: PVE API host. Falls back to the environment variable C(PROXMOX_HOST).
    type: str
    required: true
  api_port:
    description: PVE API port. Falls back to C(PROXMOX_PORT).
    type: int
    default: 8006
  api_user:
    description: User, C(user@realm). Falls back to C(PROXMOX_USER).
    type: str
    required: true
  api_password:
    description: Password of O(api_user). Falls back to C(PROXMOX_PASSWORD).
    type: str
  api_token_id:
    description: Name of an API token of O(api_user) (the part after C(!)). Falls back to C(PROXMOX_TOKEN_ID).
    type: str
  api_token_secret:
    description: Secret of the API token. Falls back to C(PROXMOX_TOKEN_SECRET).
    type: str
  validate_certs:
    description: Verify the API's TLS certificate. Falls back to C(PROXMOX_VALIDATE_CERTS).
    type: bool
    default: true
  api_timeout:
    description: Seconds to wait for an API answer.
    type: int
    default: 30
requirements:
  - proxmoxer >= 2.0
  - requests
notes:
  - Give either O(api_password) or O(api_token_id) with O(api_token_secret).
"""
