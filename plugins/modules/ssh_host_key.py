#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ssh_host_key
short_description: A VM's SSH host key, derived from the site's secret before the VM exists
version_added: 0.3.0
description:
  - Makes the ed25519 SSH host key of the VM O(name) from O(secret) (the key's seed is HMAC-SHA256 of the secret
    and the name), so the guest_image role can put it into the VM's image and record its public key in the
    controller's known_hosts before the first connection - no first connection has to trust whatever answers.
  - The same secret and name give the same key on every run and every controller (an AWX job keeps nothing between
    runs); another name or secret gives an unrelated key.
  - Runs on the controller (C(delegate_to localhost)). RV(private_key) is the VM's private key, so B(use no_log on the
    task); only that VM's key leaves the controller, never the secret.
  - The logic is in plugins/module_utils/ssh_host_key.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.PLAN
options:
  secret:
    description: The site's host key secret (at least 32 characters; C(guest_image_host_key_secret)).
    type: str
    required: true
  name:
    description: The VM's host name (C(guest_image_hostname)).
    type: str
    required: true
requirements:
  - cryptography (a dependency of ansible-core)
"""

EXAMPLES = r"""
- name: Make the VM's host key
  pvegpu.llmstack.ssh_host_key:
    secret: "{{ guest_image_host_key_secret }}"
    name: "{{ guest_image_hostname }}"
  delegate_to: localhost
  no_log: true
  register: host_key
"""

RETURN = r"""
public_key:
  description: The public key line, C(ssh-ed25519 AAAA... root@<name>).
  returned: success
  type: str
private_key:
  description: The private key in OpenSSH format.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import ssh_host_key


def main():
    module = AnsibleModule(argument_spec=dict(secret=dict(type="str", required=True, no_log=True),
                                              name=dict(type="str", required=True)),
                           supports_check_mode=True)
    try:
        private, public = ssh_host_key.derive(module.params["secret"], module.params["name"])
    except ssh_host_key.HostKeyError as exc:
        module.fail_json(msg="ssh_host_key: %s" % exc)
    module.exit_json(changed=False, public_key=public, private_key=private)


if __name__ == "__main__":
    main()
