"""The vfio role refuses a bad vfio_reboot_running_guests before it touches anything, naming the variable.

(The role itself runs in the molecule scenarios vfio-grub, vfio-systemd-boot and vfio-revert.)"""

import json

import pytest
from conftest import parse_json_report, playbook, tasks_run

PLAY = [{"name": "vfio with a bad value", "hosts": "localhost", "connection": "local", "gather_facts": False,
         "roles": [{"role": "pvegpu.llmstack.vfio"}]}]


@pytest.mark.parametrize("value", ["perhaps", [True], {"vm": 120}])
def test_bad_reboot_running_guests_refused_before_any_change(tmp_path, value):
    play = tmp_path / "play.yml"
    play.write_text(json.dumps(PLAY))
    rc, out, err = playbook(str(play), "-i", "localhost,", "-e", json.dumps({"vfio_reboot_running_guests": value}),
                            json_output=True, timeout=120)
    assert rc != 0, out + err
    runs = tasks_run(parse_json_report(out))
    # the role's first task is its argument check: it failed, nothing ran after it, nothing changed
    assert len(runs) == 1, [r["task"] for r in runs]
    result = runs[0]["hosts"]["localhost"]
    assert result.get("failed") and not result.get("changed")
    assert "vfio_reboot_running_guests" in result["msg"] and "bool" in result["msg"], result["msg"]
