#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: burnin_stage
short_description: Start a burn-in stage as a transient systemd unit, or read how it stands
version_added: 0.3.0
description:
  - With O(state=started), starts the stage O(name) with C(systemd-run) as the transient service
    C(llmstack-burnin-<name>.service), its files in O(dir)C(/<name>) (the tool's output, the nvidia-smi CSV log
    sampled alongside, C(nvidia-smi -q -x) before and after, the kernel's Xid lines, the exit status last), written
    by O(wrapper). The unit belongs to no SSH session - a dropped connection or a killed controller leaves it running.
  - Never starts a stage twice. A stage whose unit runs is reported C(running) and left alone; a finished one (its
    C(exit_status) file exists) is reported C(finished) and kept, unless O(rerun) archives it
    (C(<name>.<finished_at>)) and starts it again; one cut off (its directory without an exit status, no unit
    running it, after a reboot) is archived as C(<name>.cut-<started_at>) and started again.
  - With O(state=status), changes nothing and returns how the stage stands; a finished stage comes with its
    verdict by seed 000's table (M(pvegpu.llmstack.burnin_evaluate)'s rules).
  - With O(state=stopped), stops the stage's unit if it runs (its directory stays).
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  name:
    description: The stage (C(60s), C(10min), C(1h), C(soak), C(nvbandwidth), C(dcgmi_diag), C(vllm_bench)).
    type: str
    required: true
  tool:
    description: What the stage runs, which decides how its output is read.
    type: str
    choices: [gpu_burn, nvbandwidth, dcgmi_diag, vllm_bench_serve]
    required: true
  argv:
    description: The command and its arguments (required with O(state=started)).
    type: list
    elements: str
  dir:
    description: The directory holding one subdirectory per stage.
    type: path
    required: true
  chdir:
    description: The working directory of the command (gpu-burn reads its compare file from there).
    type: path
  wrapper:
    description: The script that runs the command and writes the stage's files (installed by the burnin role).
    type: path
    default: /usr/local/libexec/llmstack-burnin-run
  sample_interval:
    description: Seconds between nvidia-smi samples taken alongside; 0 takes none.
    type: int
    default: 0
  smi_fields:
    description:
      - The C(--query-gpu) fields sampled, comma-separated; by default seed 000's, C(uuid) and
        C(clocks_event_reasons.active).
    type: str
  rerun:
    description: Run a finished stage again (its files are archived first).
    type: bool
    default: false
  thresholds:
    description: The verdict table's thresholds (C(burnin_*) variables without the prefix), for O(state=status).
    type: dict
    default: {}
  state:
    description: C(started), C(status) or C(stopped).
    type: str
    choices: [started, status, stopped]
    default: started
"""

EXAMPLES = r"""
- name: Start the 10-minute gpu-burn stage (or pick up the one that runs)
  pvegpu.llmstack.burnin_stage:
    name: 10min
    tool: gpu_burn
    argv: [/opt/gpu-burn/gpu_burn, "600"]
    chdir: /opt/gpu-burn
    dir: /var/lib/llmstack/burnin
    sample_interval: 5

- name: Wait for it
  pvegpu.llmstack.burnin_stage:
    name: 10min
    tool: gpu_burn
    dir: /var/lib/llmstack/burnin
    state: status
  register: stage
  until: stage.stage_state == 'finished'
  retries: 40
  delay: 30
"""

RETURN = r"""
stage_state:
  description: C(started) (this call started it), C(running), C(finished), C(interrupted) (cut off, not restarted
    by O(state=status)) or C(not_started).
  returned: always
  type: str
unit:
  description: The transient unit's name.
  returned: always
  type: str
path:
  description: The stage's directory.
  returned: always
  type: str
action:
  description: What O(state=started) did or would do - C(start), C(restart), C(wait) (it runs), C(keep) (finished).
  returned: when state is started
  type: str
archived:
  description: Where the previous files went when the stage was started again.
  returned: when a stage was archived
  type: str
exit_status:
  description: The tool's exit status (finished stages).
  returned: always
  type: int
verdict:
  description: C(pass), C(watch) or C(fail) for a finished stage; null otherwise.
  returned: always
  type: str
files:
  description: The stage's files present in its directory (of argv.json, started_at, output.log, smi.csv,
    before.xml, after.xml, xid.log, finished_at, exit_status).
  returned: when the stage was not started by this call
  type: list
  elements: str
reasons:
  description: One line per row of the table that is not a pass.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin_run, value_checks


def unit_active(module, unit):
    rc, out, err = module.run_command(["systemctl", "show", "-p", "ActiveState,SubState", unit])
    if rc != 0:
        # Never guessed: a unit taken for stopped would start a second burn.
        module.fail_json(msg="systemctl show %s failed: %s" % (unit, (err or out).strip()))
    return burnin_run.unit_is_active(burnin_run.parse_systemctl_show(out))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            tool=dict(type="str", required=True, choices=["gpu_burn", "nvbandwidth", "dcgmi_diag", "vllm_bench_serve"]),
            argv=dict(type="list", elements="str"),
            dir=dict(type="path", required=True),
            chdir=dict(type="path"),
            wrapper=dict(type="path", default="/usr/local/libexec/llmstack-burnin-run"),
            sample_interval=dict(type="int", default=0),
            smi_fields=dict(type="str"),
            rerun=dict(type="bool", default=False),
            thresholds=dict(type="dict", default={}),
            state=dict(type="str", default="started", choices=["started", "status", "stopped"]),
        ),
        required_if=[("state", "started", ["argv"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["name"] not in burnin_run.STAGE_NAMES:
        module.fail_json(msg="name: %r is not a stage (known: %s)" % (p["name"], ", ".join(burnin_run.STAGE_NAMES)))
    unit = burnin_run.unit_name(p["name"])
    path = os.path.join(p["dir"], p["name"])
    files, active = burnin_run.observe(lambda: burnin_run.read_stage_files(path), lambda: unit_active(module, unit))
    result = dict(changed=False, unit=unit, path=path)

    def finish(files_now, state=None):
        try:
            stage = burnin_run.stage_result(p["name"], p["tool"], files_now, p["thresholds"])
        except value_checks.SettingsProblems as exc:
            module.fail_json(msg="; ".join(exc.problems), problems=exc.problems, **result)
        if state is None:
            state = stage["state"]
            if state == "running" and not active:
                state = "interrupted"
        result.update(stage_state=state, exit_status=stage["exit_status"], verdict=stage["verdict"],
                      files=sorted(files_now),
                      reasons=stage["reasons"], started_at=stage["started_at"], finished_at=stage["finished_at"])
        module.exit_json(**result)

    if p["state"] == "status":
        finish(files, "running" if active else None)
    if p["state"] == "stopped":
        if active:
            result["changed"] = True
            if not module.check_mode:
                module.run_command(["systemctl", "stop", unit], check_rc=True)
        finish(files, "interrupted" if active else None)

    action = burnin_run.decide(set(files), active, p["rerun"])
    result["action"] = action
    if action == "wait":
        finish(files, "running")
    if action == "keep":
        finish(files)
    if not os.access(p["wrapper"], os.X_OK) and not module.check_mode:
        module.fail_json(msg="wrapper: %s is not an executable file (the burnin role installs it)" % p["wrapper"],
                         **result)
    result["changed"] = True
    if module.check_mode:
        result.update(stage_state="started", exit_status=None, verdict=None, reasons=[])
        module.exit_json(**result)
    if action == "restart":
        archived = burnin_run.archive_path(path, set(files), files, os.path.exists)
        os.rename(path, archived)
        result["archived"] = archived
    os.makedirs(path, mode=0o750, exist_ok=True)
    with open(os.path.join(path, "argv.json"), "w") as handle:
        handle.write(json.dumps(p["argv"]) + "\n")
    command = burnin_run.systemd_run_argv(p["name"], path, p["wrapper"], p["argv"], chdir=p["chdir"],
                                          sample_interval=p["sample_interval"],
                                          smi_fields=p["smi_fields"] or burnin_run.SMI_FIELDS)
    rc, out, err = module.run_command(command)
    if rc != 0:
        module.fail_json(msg="systemd-run could not start %s: %s" % (unit, (err or out).strip()), command=command,
                         **result)
    result.update(stage_state="started", exit_status=None, verdict=None, reasons=[], command=command)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
