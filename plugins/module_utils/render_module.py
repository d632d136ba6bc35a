# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one body of every planning and rendering module (gpu_vm_plan, vllm_plan, vllm_render, litellm_render,
langfuse_render, monitoring_render, tls_proxy_render): they compute data from their parameters and change
nothing, so they run the same in check mode, fail the same way naming every problem, and pass the planner's
warnings on as Ansible warnings. Each module keeps only its argument spec and its build function.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks


def failure(label, problems):
    """The fail_json arguments for a list of problems: ``label: N problem(s): a; b``."""
    return {"msg": "%s: %d problem(s): %s" % (label, len(problems), "; ".join(problems)), "problems": problems}


def run(module, label, build, warnings=None, warning_prefix=""):
    """exit_json(changed=False, **build(module.params)), or fail_json naming every problem.

    ``label`` starts the failure message (the module or the object it plans for); ``warnings``, when given, is the
    key of the result that lists the planner's warnings: each one becomes an Ansible warning, prefixed with
    ``warning_prefix``, and stays in the result. A KeyError is a setting the role did not pass: named as such."""
    try:
        result = build(module.params)
    except value_checks.SettingsProblems as exc:
        module.fail_json(**failure(label, exc.problems))
    except KeyError as exc:
        module.fail_json(**failure(label, ["missing setting %s" % exc]))
    for warning in result.get(warnings, ()) if warnings else ():
        module.warn(warning_prefix + warning)
    module.exit_json(changed=False, **result)
