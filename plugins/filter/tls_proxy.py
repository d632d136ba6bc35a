# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: tls_proxy_leave_action
short_description: What becomes of a web server when the tls_proxy role takes its config away
version_added: 0.2.0
description:
  - Takes whether the role's config was there (C(ours)), whether the server still serves something the role did
    not write (C(serves_more)) and whether its unit runs (C(running)), and returns C(stop) (stop and disable it,
    the role's config was all it served), C(reload) (it keeps serving the rest), C(report) (nothing of the role's
    was there, it is left exactly as it is) or C(none).
  - Used for C(tls_proxy_state=absent) and for the other server after C(tls_proxy_server) changed.
  - The same plugin file holds C(tls_proxy_expiry_metrics) (the results of a C(community.crypto.x509_certificate_info)
    loop over C([name, path]) pairs -> the text the proxy's metrics listener serves, one
    C(llmstack_tls_certificate_expiry_timestamp_seconds) sample per certificate read).
  - The logic is in plugins/module_utils/tls_proxy.py (C(leave_action), C(expiry_metrics)).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  _input:
    description: Whether the role's config was there.
    type: bool
    required: true
  serves_more:
    description: Whether the server has a site or config the role did not write.
    type: bool
    required: true
  running:
    description: Whether the server's unit is active.
    type: bool
    required: true
"""

EXAMPLES = r"""
- name: Stop nginx only when the role's site was all it served
  ansible.builtin.systemd_service:
    name: nginx
    state: stopped
    enabled: false
  when: site.changed | pvegpu.llmstack.tls_proxy_leave_action(site.other_sites | length > 0, true) == 'stop'
"""

RETURN = r"""
_value:
  description: C(stop), C(reload), C(report) or C(none).
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.module_utils import tls_proxy


def tls_proxy_leave_action(ours, serves_more, running):
    return tls_proxy.leave_action(bool(ours), bool(serves_more), bool(running))


def tls_proxy_expiry_metrics(results):
    certificates = []
    for result in results or []:
        name, path = result["item"][0], result["item"][1]
        known = not result.get("failed") and not result.get("skipped")
        certificates.append({"certificate": name, "file": path,
                             "not_after": result.get("not_after") if known else None})
    try:
        return tls_proxy.expiry_metrics(certificates)
    except tls_proxy.TlsProxyError as exc:
        raise AnsibleFilterError("tls_proxy_expiry_metrics: %s" % "; ".join(exc.errors))


class FilterModule(object):
    def filters(self):
        return {"tls_proxy_leave_action": tls_proxy_leave_action, "tls_proxy_expiry_metrics": tls_proxy_expiry_metrics}
