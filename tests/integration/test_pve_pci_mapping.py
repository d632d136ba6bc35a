"""pve_pci_mapping against fakepve, a PVE API built from PVE's own schema that validates every request.
fakepve answers GET /cluster/mapping/pci from the schema and stores no mapping, so these tests check
the requests the module sends (shape, method, payload) and its errors; the compare/update decision
is covered by tests/unit/.../test_pve_mapping.py."""

import json
import os
import subprocess
import sys

from conftest import ROOT, ansible_env, form

ENTRY_41 = "id=10de:2204,iommugroup=27,node=pve1,path=0000:41:00,subsystem-id=1458:403b"


def run_module(fakepve, args, check=False):
    host, port = fakepve.url.split("://", 1)[1].rsplit(":", 1)
    base = {"api_host": host, "api_port": int(port), "api_user": fakepve.user, "api_password": fakepve.password,
            "validate_certs": False}
    base.update(args)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m",
           "pvegpu.llmstack.pve_pci_mapping", "-a", json.dumps(base)]
    if check:
        cmd += ["--check", "--diff"]
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    result = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=120)
    report = json.loads(result.stdout[result.stdout.index("{"):])
    return list(report["plays"][0]["tasks"][0]["hosts"].values())[0]


def writes(fakepve):
    return [(method, path, form(body)) for method, path, body in fakepve.requests
            if method in ("POST", "PUT", "DELETE") and "/cluster/mapping/pci" in path]


def test_create_sends_a_schema_valid_post(fakepve):
    result = run_module(fakepve, {"name": "rtx3090-41", "description": "slot 41", "entries": [ENTRY_41]})
    assert not result.get("failed"), result
    assert result["changed"] is True and result["operation"] == "create"
    sent = writes(fakepve)
    assert [(request[0], request[1]) for request in sent] == [("POST", "/api2/json/cluster/mapping/pci")]
    assert sent[0][2] == {"id": ["rtx3090-41"], "description": ["slot 41"], "map": [ENTRY_41]}


def test_check_mode_sends_nothing(fakepve):
    result = run_module(fakepve, {"name": "rtx3090-41", "entries": [ENTRY_41]}, check=True)
    assert result["changed"] is True and result["diff"]["after"]["map"] == [ENTRY_41]
    assert writes(fakepve) == []


def test_entries_from_gpu_facts(fakepve):
    gpu = {"slot": "0000:81:00", "vendor": "10de", "device": "2204", "iommu_groups": ["31"],
           "subsystem_vendor": "1458", "subsystem_device": "403b"}
    result = run_module(fakepve, {"name": "rtx3090-81", "entries_from_gpus": [{"node": "pve1", "gpus": [gpu]}]},
                        check=True)
    assert result["mapping"]["map"] == ["id=10de:2204,iommugroup=31,node=pve1,path=0000:81:00,subsystem-id=1458:403b"]


def test_bad_entry_fails_before_any_request(fakepve):
    result = run_module(fakepve, {"name": "x1", "entries": [{"id": "10de:2204", "node": "pve1", "path": "41:00"}]})
    assert result["failed"] and "entries: path '41:00' is not a PCI slot or function" in result["msg"]
    assert fakepve.requests == []


def test_wrong_password_is_named(fakepve):
    result = run_module(fakepve, {"name": "x1", "entries": [ENTRY_41], "api_password": "not-the-password"})
    assert result["failed"] and "refused the credentials of root@pam" in result["msg"]
