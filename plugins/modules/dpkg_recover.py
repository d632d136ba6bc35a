#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dpkg_recover
short_description: Finish a package installation that a killed run left half done, before the next apt task
version_added: 0.3.0
description:
  - A run killed while apt installs packages (SIGKILL, a lost connection, a reset VM) leaves dpkg's journal behind,
    and from then on every apt task fails with C(dpkg was interrupted, you must manually run 'dpkg --configure -a').
    Every role of this collection that installs packages runs this module first, so that the rerun converges.
  - It waits while a package manager holds dpkg's locks (one that runs is not interrupted), then runs
    C(dpkg --configure -a) (non-interactive, the installed config files kept) when the journal has entries or a
    package is left unpacked, half-configured or awaiting triggers. A package still unfinished afterwards fails the
    task with its name and dpkg's words. A package killed while being unpacked (half-installed) is only named in a
    warning - apt reinstalls it, dpkg cannot.
  - On a healthy host it only reads, and reports no change.
  - The logic is in plugins/module_utils/dpkg_state.py.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  lock_timeout:
    description: Seconds to wait for a running package manager to let go of dpkg's locks before failing.
    type: int
    default: 300
  admindir:
    description: dpkg's database directory.
    type: path
    default: /var/lib/dpkg
attributes:
  check_mode:
    details: Reports whether C(dpkg --configure -a) would run and runs nothing.
"""

EXAMPLES = r"""
- name: Finish a package installation a killed run left half done (dpkg --configure -a)
  pvegpu.llmstack.dpkg_recover:

- name: Install nginx
  ansible.builtin.apt:
    name: nginx
"""

RETURN = r"""
journal:
  description: The entries of dpkg's journal (C(<admindir>/updates/)) found before anything ran.
  returned: success
  type: list
  elements: str
packages:
  description: The packages left unpacked, half-configured or awaiting triggers before anything ran (what
    C(dpkg --configure -a) finishes).
  returned: success
  type: list
  elements: str
reinstall:
  description: The packages left half-installed (killed while being unpacked), which only a reinstall fixes; a
    warning names them, nothing fails on them.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import dpkg_state


def main():
    module = AnsibleModule(
        argument_spec=dict(
            lock_timeout=dict(type="int", default=300),
            admindir=dict(type="path", default="/var/lib/dpkg"),
        ),
        supports_check_mode=True,
    )
    admindir = module.params["admindir"]
    dpkg = module.get_bin_path("dpkg")
    if dpkg is None:
        module.exit_json(changed=False, journal=[], packages=[], reinstall=[],
                         msg="dpkg is not installed: nothing to finish")
    if module.params["lock_timeout"] < 0:
        module.fail_json(msg="lock_timeout: %d is negative" % module.params["lock_timeout"])
    held = dpkg_state.wait_for_locks(admindir, module.params["lock_timeout"])
    if held is not None:
        module.fail_json(msg="a package manager still holds %s after %d s (unattended-upgrades or another apt run?); "
                             "nothing was changed" % (held, module.params["lock_timeout"]))
    entries = dpkg_state.journal(admindir)
    query = module.get_bin_path("dpkg-query", required=True)
    options = ["--admindir=%s" % admindir]

    def states():
        rc, out, err = module.run_command([query] + options + ["-W", "-f", dpkg_state.QUERY_FORMAT])
        if rc not in (0, 1):  # 1: no packages at all
            module.fail_json(msg="dpkg-query could not read dpkg's database: %s" % err.strip())
        return dpkg_state.unfinished(out)

    configure, reinstall = states()
    result = dict(changed=bool(entries or configure), journal=entries, packages=configure, reinstall=reinstall)
    if reinstall:
        module.warn("%s: killed while being unpacked (dpkg state half-installed); dpkg --configure -a cannot finish "
                    "it, apt reinstalls it when it is installed again (apt-get install --reinstall)"
                    % ", ".join(reinstall))
    if not result["changed"] or module.check_mode:
        module.exit_json(**result)
    rc, out, err = module.run_command([dpkg] + options + ["--force-confdef", "--force-confold", "--configure", "-a"],
                                      environ_update={"DEBIAN_FRONTEND": "noninteractive"})
    left, _reinstall = states()
    if rc != 0 or left or dpkg_state.journal(admindir):
        module.fail_json(msg="dpkg --configure -a did not finish what a killed run left (still unfinished: %s): %s"
                             % (", ".join(left) or "-", (err or out).strip()[-2000:]), stdout=out, stderr=err, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
