# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action for pvegpu.llmstack.inventory_check: gathers the inventory model from hostvars on the
controller and hands it to module_utils.inventory_model (where the logic and its tests live)."""

from __future__ import absolute_import, division, print_function


from ansible.errors import AnsibleError
from ansible.module_utils.common.validation import check_type_bool, check_type_dict
from ansible.plugins.action import ActionBase

from ansible_collections.pvegpu.llmstack.plugins.module_utils import inventory_model


def collect_model(groups, hostvars):
    """The inventory model: groups and, per host, the variables the validator reads.

    A variable that fails to template becomes ``inventory_model.Unresolved`` so that it is
    reported as a problem of that host and variable instead of aborting the run.
    """
    model = {"groups": dict((g, list(h)) for g, h in groups.items()), "hosts": {}}
    for host in groups.get("all", []):
        variables = hostvars[host]
        data = {}
        for name in inventory_model.wanted_variables(list(variables.keys())):
            try:
                data[name] = variables[name]
            except (AnsibleError, KeyError, ValueError, TypeError) as exc:
                data[name] = inventory_model.Unresolved(str(exc).splitlines()[0])
        model["hosts"][host] = data
    return model


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("group_vlans", "fail_on_problems"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        try:
            group_vlans = args.get("group_vlans")
            group_vlans = None if group_vlans is None else check_type_dict(group_vlans)
            fail_on_problems = check_type_bool(args.get("fail_on_problems", True))
        except TypeError as exc:
            return dict(result, failed=True, msg="inventory_check: bad argument: %s" % exc)

        model = collect_model(task_vars["groups"], task_vars["hostvars"])
        problems = inventory_model.validate(model, group_vlans)
        networks = {}
        if not problems:
            networks = dict((host, {"interfaces": inventory_model.host_network(model, host)})
                            for host in model["hosts"])
        result.update(
            changed=False,
            problems=[str(p) for p in problems],
            problem_details=[p.as_dict() for p in problems],
            hosts=len(model["hosts"]),
            networks=networks,
        )
        if problems and fail_on_problems:
            result["failed"] = True
            result["msg"] = "The inventory has %d problem(s); nothing was changed:\n%s" % (
                len(problems), "\n".join("- %s" % p for p in problems))
        else:
            result["msg"] = "The inventory of %d host(s) is valid" % len(model["hosts"]) if not problems else \
                "The inventory has %d problem(s)" % len(problems)
        return result
