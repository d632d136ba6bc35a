"""The secret_file module as Ansible runs it (the module file with its arguments as JSON): the result's keys,
check mode, the given value masked by its no_log option, and a failure naming the file."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE = os.path.join(ROOT, "plugins", "modules", "secret_file.py")


def run(tmp_path, check_mode=False, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check_mode)}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, ".cache", "collections")] + sys.path))
    out = subprocess.run([sys.executable, MODULE, str(args_file)], capture_output=True, text=True, env=env,
                         check=False)
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout)


def test_generates_once_then_reads_back(tmp_path):
    directory = str(tmp_path / "secrets")
    first = run(tmp_path, dir=directory, secrets=[{"name": "master_key", "prefix": "sk-"}])
    assert first["changed"] and first["generated"] == ["master_key"]
    second = run(tmp_path, dir=directory, secrets=[{"name": "master_key", "prefix": "sk-"}])
    assert not second["changed"] and second["secrets"] == first["secrets"]
    assert (tmp_path / "secrets" / "master_key").read_text() == first["secrets"]["master_key"] + "\n"


def test_check_mode_writes_nothing(tmp_path):
    result = run(tmp_path, check_mode=True, dir=str(tmp_path / "secrets"), secrets=[{"name": "api_key"}])
    assert result["changed"] and result["generated"] == ["api_key"] and len(result["secrets"]["api_key"]) == 48
    assert not (tmp_path / "secrets").exists()


def test_a_given_value_is_written_and_masked_in_the_result(tmp_path):
    value = "sk-" + os.urandom(12).hex()
    result = run(tmp_path, dir=str(tmp_path), secrets=[{"name": "master_key", "value": value}])
    assert result["written"] == ["master_key"] and value not in json.dumps(result)
    assert (tmp_path / "master_key").read_text() == value + "\n"


@pytest.mark.parametrize("create", [True, False])
def test_an_unreadable_file_fails_naming_it(tmp_path, create):
    (tmp_path / "api_key").mkdir()
    result = run(tmp_path, dir=str(tmp_path), secrets=[{"name": "api_key"}], create=create)
    assert result["failed"] and str(tmp_path / "api_key") in result["msg"] and "is a directory" in result["msg"]
