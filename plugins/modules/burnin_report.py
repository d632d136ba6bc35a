#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: burnin_report
short_description: Write a host's burn-in report (JSON, Markdown, HTML with charts) or the fleet summary
version_added: 0.3.0
description:
  - With O(host), reads the stages' files fetched into O(dir)C(/<host>/<stage>/) (as the burnin role fetches them) -
    the stages of O(stages) and every other stage found there, in seed 000's order - judges them by seed 000's table
    and writes C(<host>.json), C(<host>.md) and C(<host>.html) in O(dir). The page has temperature, SM clock, power
    and throttle-reason curves per GPU from the nvidia-smi log, the verdict table in the seed's colours and each
    nvbandwidth matrix as a heat map, drawn with matplotlib and embedded (no request leaves the page).
  - With O(fleet), reads C(<host>.json) of those hosts and writes C(index.json), C(index.md) and C(index.html); a
    host without a report (its run stopped before it) is listed as failed.
  - A file is written only when its content differs (a rerun over the same results changes nothing). Runs where the
    reports are kept (the controller); the HTML needs matplotlib there.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host_diff
requirements:
  - matplotlib (for O(html))
options:
  dir:
    description: The report directory.
    type: path
    required: true
  host:
    description: The host whose report is written. One of O(host) and O(fleet) is required.
    type: str
  stages:
    description: The stages of this run, C([{name}]) (C(tool) may be given; it is known from the name). They are
      listed even before they ran; stages of earlier runs found in the directory are reported too.
    type: list
    elements: dict
    default: []
  fleet:
    description: The hosts of the fleet summary.
    type: list
    elements: str
  thresholds:
    description: The verdict table's thresholds (C(burnin_) variables without the prefix).
    type: dict
    default: {}
  html:
    description: Write the HTML pages too.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Write this host's report
  pvegpu.llmstack.burnin_report:
    dir: ~/.local/state/llmstack/burnin
    host: "{{ inventory_hostname }}"
    stages: [{name: 60s, tool: gpu_burn}, {name: nvbandwidth, tool: nvbandwidth}]
  delegate_to: localhost
"""

RETURN = r"""
verdict:
  description: The host's (or the fleet's) verdict, C(pass), C(watch) or C(fail); null when nothing finished.
  returned: success
  type: str
reasons:
  description: Every row that is not a pass, prefixed with its stage (host reports).
  returned: success
  type: list
  elements: str
files:
  description: The files of this report.
  returned: success
  type: list
  elements: str
written:
  description: Those that were written (their content changed).
  returned: success
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin_report, burnin_run, value_checks


def write(module, path, content, written, diffs):
    changed, old = burnin_run.write_if_changed(path, content, module.check_mode)
    if changed:
        written.append(path)
        if path.endswith((".json", ".md")):
            diffs.append({"before_header": path, "after_header": path, "before": old or "", "after": content})


def main():
    module = AnsibleModule(argument_spec=dict(dir=dict(type="path", required=True),
                                              host=dict(type="str"),
                                              stages=dict(type="list", elements="dict", default=[]),
                                              fleet=dict(type="list", elements="str"),
                                              thresholds=dict(type="dict", default={}),
                                              html=dict(type="bool", default=True)),
                           required_one_of=[("host", "fleet")],
                           mutually_exclusive=[("host", "fleet")],
                           supports_check_mode=True)
    p = module.params
    base = p["dir"]
    written, diffs, files = [], [], []
    try:
        if p["host"]:
            for index, entry in enumerate(p["stages"]):
                if entry.get("name") not in burnin_run.STAGE_NAMES:
                    module.fail_json(msg="stages[%d]: %r is not {name: a stage}" % (index, entry))
            host_dir = os.path.join(base, p["host"])
            present = [name for name in burnin_run.STAGE_NAMES if os.path.isdir(os.path.join(host_dir, name))]
            stages = [{"name": name, "tool": burnin_run.stage(name)["tool"],
                       "files": burnin_run.read_stage_files(os.path.join(host_dir, name))}
                      for name in burnin_run.report_stages([e["name"] for e in p["stages"]], present)]
            report = burnin_run.build_report(p["host"], stages, p["thresholds"])
            outputs = [("%s.json" % p["host"], burnin_run.dumps(report)),
                       ("%s.md" % p["host"], burnin_report.render_markdown(report))]
            if p["html"]:
                outputs.append(("%s.html" % p["host"], burnin_report.render_html(report)))
            verdict, reasons = report["verdict"], report["reasons"]
        else:
            reports, missing = [], []
            for host in p["fleet"]:
                path = os.path.join(base, "%s.json" % host)
                if not os.path.isfile(path):
                    missing.append(host)
                    continue
                with open(path) as handle:
                    reports.append(json.load(handle))
            summary = burnin_run.fleet(reports, missing)
            reports += [burnin_run.missing_report(host) for host in missing]
            outputs = [("index.json", burnin_run.dumps(summary)),
                       ("index.md", burnin_report.render_fleet_markdown(reports))]
            if p["html"]:
                outputs.append(("index.html", burnin_report.render_fleet_html(reports)))
            verdict, reasons = summary["verdict"], []
    except value_checks.SettingsProblems as exc:
        module.fail_json(msg="burnin_report: %s" % "; ".join(exc.problems), problems=exc.problems)
    if not module.check_mode and not os.path.isdir(base):
        os.makedirs(base, 0o750)
    for name, content in outputs:
        path = os.path.join(base, name)
        files.append(path)
        write(module, path, content, written, diffs)
    result = dict(changed=bool(written), verdict=verdict, reasons=reasons, files=files, written=written)
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
