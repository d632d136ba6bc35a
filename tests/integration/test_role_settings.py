"""Issue 20: bad values in the vllm, litellm and monitoring roles stop the run at the role's first check, with
a message naming the variable, before any change; `1m30s` (a valid Prometheus duration) is accepted and rendered.
Issue 21: a removal (langfuse_state absent with langfuse_purge) whose directory is /etc/ssh is refused, naming
langfuse_dir.

One ansible-playbook run in check mode on this machine (connection local), one host per case, a few seconds.
The messages are matched on the variable name and the bad value, not copied from the code.
"""

import sys

import yaml
from conftest import parse_json_report, playbook

PYTHON = sys.executable
# The gateway of this inventory is the litellm case; monitoring looks at no gateway here.
GROUPS = {"gpu_vms": "gpu_vms", "llm_gateways": "no_gateways", "observability": "observability"}
MODEL = {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpus": [0], "port": 8001}


def inventory(tmp_path):
    local = {"ansible_connection": "local", "ansible_python_interpreter": PYTHON, "llmstack_start_services": False,
             "llmstack_loopback_shared": True}
    vm = dict(local, vllm_dir=str(tmp_path / "vllm"),
              vllm_nvidia_recorded={"query_csv": "tests/fixtures/nvidia/query-gpu-4x3090.csv"},
              llmstack_interfaces=[{"vlan": "inference", "address": "127.0.0.1"},
                                   {"vlan": "mgmt", "address": "127.0.0.1"}])
    return {"all": {"children": {
        # Not in gpu_vms: monitoring (the mon-* hosts) scrapes those, and would name vm-bad's port too.
        "bad_vms": {"hosts": {
            "vm-bad": dict(vm, vllm_models=[dict(MODEL, max_model_len="lots", port="8001"),
                                            dict(MODEL, name="Fast", port=70000)]),
        }},
        "gpu_vms": {"hosts": {
            "mon-ok": dict(vm, vllm_models=[MODEL], monitoring_gpu_interval="1m30s", monitoring_interval="1m30s",
                           monitoring_dir=str(tmp_path / "mon"), monitoring_groups=GROUPS),
            "mon-bad": dict(vm, vllm_models=[MODEL], monitoring_gpu_interval="30s1m",
                            monitoring_interval="90 seconds", monitoring_dir=str(tmp_path / "mon"),
                            monitoring_groups=GROUPS),
        }},
        "removals": {"hosts": {
            "lf-gone": dict(local, langfuse_state="absent", langfuse_purge=True, langfuse_dir="/etc/ssh"),
        }},
        "llm_gateways": {"hosts": {
            "gw-bad": dict(local, litellm_dir=str(tmp_path / "gw"), litellm_bind_address="gateway.lan",
                           litellm_port=70000, litellm_cooldown_time="30", litellm_langfuse_group=""),
        }},
    }}}


PLAY = """
# One play (a play whose hosts all failed would end the run before the next play).
- name: Each role's checks with bad values, and monitoring's render with 1m30s
  hosts: vm-bad:gw-bad:mon-ok:mon-bad:lf-gone
  gather_facts: false
  tasks:
    - name: The vllm role
      ansible.builtin.include_role:
        name: pvegpu.llmstack.vllm
      when: inventory_hostname == 'vm-bad'
    - name: The litellm role
      ansible.builtin.include_role:
        name: pvegpu.llmstack.litellm
      when: inventory_hostname == 'gw-bad'
    - name: The langfuse role, taking its directory away
      ansible.builtin.include_role:
        name: pvegpu.llmstack.langfuse
      when: inventory_hostname == 'lf-gone'
    - name: Monitoring validate
      ansible.builtin.include_role:
        name: pvegpu.llmstack.monitoring
        tasks_from: validate
      when: inventory_hostname is match('mon-')
    - name: Show what was rendered
      ansible.builtin.debug:
        msg:
          scrape: "{{ monitoring_rendered.prometheus.scrape_configs | items2dict(key_name='job_name',
                      value_name='scrape_interval') }}"
          global: "{{ monitoring_rendered.prometheus.global.scrape_interval }}"
          dcgm: "{{ monitoring_rendered.compose.services['dcgm-exporter'].command }}"
      when: inventory_hostname == 'mon-ok'
"""


def test_bad_values_are_named_before_any_change_and_1m30s_is_accepted(tmp_path):
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(yaml.safe_dump(inventory(tmp_path)))
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    rc, out, err = playbook("-i", str(hosts), str(play), "--check", json_output=True, timeout=300)
    report = parse_json_report(out)
    assert rc != 0, out[-2000:]
    failures = {}
    for play_run in report["plays"]:
        for task in play_run["tasks"]:
            for host, result in task["hosts"].items():
                if result.get("failed"):
                    failures[host] = (task["task"]["name"], result.get("msg"))
    stats = report["stats"]
    for host in ("vm-bad", "gw-bad", "mon-bad", "lf-gone"):
        assert stats[host]["failures"] == 1 and stats[host]["changed"] == 0, stats[host]
    assert set(failures) == {"vm-bad", "gw-bad", "mon-bad", "lf-gone"}, failures

    # The first check of each role stops the run, before anything is read or written.
    task, messages = failures["vm-bad"]
    assert task.split(" : ")[-1].startswith("Check the settings")
    text = " ".join(messages)
    assert "vllm_models[0] (fast).max_model_len: 'lots'" in text
    assert "vllm_models[1] (Fast).port: 70000" in text
    assert "vllm_models[0] (fast) and vllm_models[1] (Fast)" in text          # one compose service / unit
    assert "8001" not in text                                                    # a digit string is a port
    assert not (tmp_path / "vllm").exists()

    task, messages = failures["gw-bad"]
    assert task.split(" : ")[-1].startswith("Check the settings")
    text = " ".join(messages)
    assert "litellm_bind_address: 'gateway.lan'" in text and "litellm_port: 70000" in text
    assert "litellm_cooldown_time" not in text                                   # a digit string is a number
    assert not (tmp_path / "gw").exists()

    task, message = failures["lf-gone"]
    assert task.split(" : ")[-1].startswith("Check the directory to take away"), task
    assert message.startswith("langfuse_dir: '/etc/ssh' is not a directory this collection would remove"), message

    task, message = failures["mon-bad"]
    assert "monitoring_gpu_interval: '30s1m'" in message and "monitoring_interval: '90 seconds'" in message
    assert "Traceback" not in out and "template error" not in out.lower()

    shown = [t for p in report["plays"] for t in p["tasks"] if t["task"]["name"] == "Show what was rendered"][0]
    rendered = shown["hosts"]["mon-ok"]["msg"]
    assert rendered["global"] == "1m30s" and rendered["scrape"]["dcgm"] == "1m30s"
    assert rendered["dcgm"][rendered["dcgm"].index("-c") + 1] == str(90 * 1000)
