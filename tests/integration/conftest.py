"""Helpers for the integration tests: run ansible-playbook from the checkout as the Makefile does."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
CHECK_TASK = "pvegpu.llmstack.inventory_check : Check every host's variables against the inventory model"


def ansible_env(**extra):
    env = dict(os.environ)
    env.update({
        "PATH": BIN + os.pathsep + env.get("PATH", ""),
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
        "ANSIBLE_ROLES_PATH": os.path.join(ROOT, "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_TIMEOUT": "5",
        "CONTAINERS_CONF": os.path.join(ROOT, "tests", "harness", "containers.conf"),
    })
    env.update(extra)
    return env


def playbook(*args, json_output=False, timeout=600):
    """Run ansible-playbook in the checkout; returns (returncode, stdout, stderr)."""
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json" if json_output else "default")
    result = subprocess.run([os.path.join(BIN, "ansible-playbook")] + list(args), cwd=ROOT, env=env, text=True,
                            capture_output=True, timeout=timeout, check=False)
    return result.returncode, result.stdout, result.stderr


def tasks_run(report):
    """[{play, task, hosts: {host: result}}] of a JSON callback report, in the order they ran."""
    runs = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            runs.append({"play": play["play"]["name"], "task": task["task"]["name"], "hosts": task["hosts"]})
    return runs


def parse_json_report(stdout):
    start = stdout.find("{")
    assert start >= 0, "no JSON in the output:\n" + stdout[-2000:]
    return json.loads(stdout[start:])


@pytest.fixture
def root():
    return ROOT
