"""render_module.run: the shared body of the planning and rendering modules, with a recording stand-in for
AnsibleModule (fail_json and exit_json end the module, as Ansible's do)."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import render_module, value_checks, vllm_deploy


class Ended(Exception):
    pass


class FakeModule:
    def __init__(self, params):
        self.params = params
        self.warnings = []
        self.outcome = None

    def warn(self, text):
        self.warnings.append(text)

    def fail_json(self, **kwargs):
        self.outcome = ("failed", kwargs)
        raise Ended()

    def exit_json(self, **kwargs):
        self.outcome = ("ok", kwargs)
        raise Ended()


def run(build, **kwargs):
    module = FakeModule({"x": 1})
    with pytest.raises(Ended):
        render_module.run(module, "thing", build, **kwargs)
    return module


def test_a_result_exits_unchanged_with_its_keys():
    module = run(lambda params: {"value": params["x"] + 1})
    assert module.outcome == ("ok", {"changed": False, "value": 2})


def test_every_problem_is_named_in_the_message_and_listed():
    def build(params):
        raise value_checks.SettingsProblems(["a_port: 'x' is not a port", "b_dir: must be absolute"])
    module = run(build)
    assert module.outcome == ("failed", {
        "msg": "thing: 2 problem(s): a_port: 'x' is not a port; b_dir: must be absolute",
        "problems": ["a_port: 'x' is not a port", "b_dir: must be absolute"]})


def test_a_subclass_raised_with_one_message_is_one_problem():
    def build(params):
        raise vllm_deploy.DeployError("vllm_image: needs a pinned tag")
    module = run(build)
    assert module.outcome[1]["problems"] == ["vllm_image: needs a pinned tag"]


def test_a_missing_setting_is_named():
    module = run(lambda params: {"v": params["settings"]["port"]})
    assert module.outcome == ("failed", {"msg": "thing: 1 problem(s): missing setting 'settings'",
                                         "problems": ["missing setting 'settings'"]})


def test_warnings_become_ansible_warnings_and_stay_in_the_result():
    module = run(lambda params: {"notes": ["one", "two"]}, warnings="notes", warning_prefix="VM a: ")
    assert module.warnings == ["VM a: one", "VM a: two"]
    assert module.outcome == ("ok", {"changed": False, "notes": ["one", "two"]})


def test_other_errors_are_not_swallowed():
    def build(params):
        raise RuntimeError("a bug")
    with pytest.raises(RuntimeError):
        render_module.run(FakeModule({}), "thing", build)
