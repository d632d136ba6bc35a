# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for pvegpu.llmstack.topology: gathers, on the controller, the inventory model, each service role's
settings (its defaults/main.yml overlaid with the host's own variables: the defaults are stated there once),
the PVE hosts' PCI facts and the GPU VMs' power state, and hands them to module_utils.topology."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
from collections import ChainMap

from ansible.errors import AnsibleError
from ansible.module_utils.common.validation import check_type_bool
from ansible.plugins.action import ActionBase

from ansible_collections.pvegpu.llmstack.plugins.action.inventory_check import collect_model
from ansible_collections.pvegpu.llmstack.plugins.module_utils import inventory_model, topology

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
PVE_API_SETTINGS = ("gpu_vm_api_host", "gpu_vm_api_port", "gpu_vm_api_user", "gpu_vm_api_token_id",
                    "gpu_vm_api_validate_certs")


class _Unresolvable(Exception):
    pass


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("fail_on_problems",))

    def _role_defaults(self, role):
        path = os.path.join(ROLES_DIR, role, "defaults", "main.yml")
        return self._loader.load_from_file(path, trusted_as_template=True) or {}

    def _resolve(self, hostvars, host, names, defaults):
        """{name: value}: the host's own value, else the role default templated with the host's variables."""
        own = hostvars.raw_get(host) if hasattr(hostvars, "raw_get") else dict(hostvars[host])
        variables = ChainMap(dict(own), dict(defaults))
        templar = self._templar.copy_with_new_env(available_variables=variables)
        result = {}
        for name in names:
            try:
                if name in own or name in defaults:
                    result[name] = templar.template(own[name] if name in own else defaults[name])
            except (AnsibleError, KeyError, ValueError, TypeError) as exc:
                raise _Unresolvable("host %s: %s: %s" % (host, name, str(exc).splitlines()[0]))
        return result

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            fail_on_problems = check_type_bool(self._task.args.get("fail_on_problems", True))
        except TypeError as exc:
            return dict(result, failed=True, msg="topology: bad argument: %s" % exc)
        groups, hostvars = task_vars["groups"], task_vars["hostvars"]
        model = collect_model(groups, hostvars)
        settings, problems = {}, []
        # Every VM this collection creates: the GPU VMs and any other host with gpu_vm_vmid (issue #33).
        vms = inventory_model.vm_hosts(model.get("groups"), model.get("hosts"))
        for role, names in sorted(topology.ROLE_SETTINGS.items()):
            defaults = self._role_defaults(role)
            hosts = list(vms) if role == "gpu_vm" else []
            for group in topology.ROLE_GROUPS[role]:
                hosts.extend(h for h in groups.get(group, []) if h not in hosts)
            for host in hosts:
                try:
                    settings.setdefault(host, {}).update(self._resolve(hostvars, host, names, defaults))
                except _Unresolvable as exc:
                    problems.append(str(exc))
        pci = {}
        for host in groups.get("pve_hosts", []):
            if "llmstack_pci" in hostvars[host]:
                pci[host] = hostvars[host]["llmstack_pci"]
                continue
            read = hostvars[host].get("llmstack_pci_read") if "llmstack_pci_read" in hostvars[host] else None
            if isinstance(read, dict) and read.get("msg") and not read.get("unreachable") and not read.get("skipped"):
                problems.append("host %s: its PCI devices could not be read (llmstack_sysfs_root): %s"
                                % (host, read["msg"]))
        vm_status = dict((host, hostvars[host]["llmstack_vm_status"]) for host in vms
                         if "llmstack_vm_status" in hostvars[host])
        pve_api = {}
        if vms:
            try:
                api = self._resolve(hostvars, vms[0], PVE_API_SETTINGS, self._role_defaults("gpu_vm"))
            except _Unresolvable as exc:
                problems.append(str(exc))
                api = {}
            pve_api = {"host": api.get("gpu_vm_api_host"), "port": api.get("gpu_vm_api_port"),
                       "user": api.get("gpu_vm_api_user"), "token_id": api.get("gpu_vm_api_token_id"),
                       "validate_certs": api.get("gpu_vm_api_validate_certs")}
        built, found = topology.build(model, settings, pci, vm_status, pve_api)
        problems.extend(found)
        result.update(changed=False, problems=problems, ansible_facts={"llmstack_topology": built},
                      endpoints=len(built["endpoints"]))
        if problems and fail_on_problems:
            result["failed"] = True
            result["msg"] = "The site's topology has %d problem(s); nothing was changed:\n%s" % (
                len(problems), "\n".join("- %s" % p for p in problems))
        else:
            result["msg"] = "%d host(s), %d endpoint(s), GPUs placed on %d PVE host(s)" % (
                len(built["hosts"]), len(built["endpoints"]), len(built["gpus"]))
        return result
