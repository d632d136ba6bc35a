#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: monitoring_render
short_description: Prometheus, Alertmanager, Grafana and exporter configs of one host, from the inventory
version_added: 0.1.0
description:
  - Builds the scrape jobs from inventory groups (names mappable) and each host's management (and, for vLLM,
    inference) address, with C(host) and C(model) labels; GPU jobs at their own interval.
  - Renders C(prometheus.yml), C(alertmanager.yml) (secrets referred to by file), Grafana's provisioning and the
    compose project of this host (exporters on GPU VMs, the whole stack on observability hosts), images pinned.
  - Prometheus and Alertmanager ask for HTTP basic auth on every path (C(--web.config.file)); the scrapes of
    Prometheus and Alertmanager, the alerts sent to Alertmanager, the compose health checks and Grafana's datasource
    authenticate as C(web_user) of O(settings) with a password read from a file or from Grafana's environment, never
    written into what this module renders. The web.yml itself comes from the
    P(pvegpu.llmstack.monitoring_web_config#filter) filter.
  - Bad input fails with one message per problem, each naming the host and variable. Changes nothing.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  topology:
    description: The site's topology (C(llmstack_topology), M(pvegpu.llmstack.topology)); the scrape targets are
      its endpoints. One of O(topology) and O(hosts) is required.
    type: dict
  hosts:
    description: Instead of O(topology), inventory name to C({interfaces, models, vllm_address,
      litellm_metrics_address, litellm_metrics_port}).
    type: dict
  groups:
    description: Group name to its hosts (Ansible's C(groups)).
    type: dict
    required: true
  settings:
    description:
      - "C(vlan), C(vllm_vlan), C(groups), C(node_groups), C(gpu_interval), C(interval), C(evaluation_interval),
        ports (C(dcgm_port), C(node_port), C(prometheus_port), C(alertmanager_port), C(grafana_port)),
        C(rule_files), C(external_labels), C(alertmanager) (see the role), C(web_user) (the basic auth user of
        Prometheus and Alertmanager, default C(llmstack))."
    type: dict
    required: true
  compose:
    description: "C(services), C(address), C(images), C(ports), C(retention_time), C(retention_size),
      C(gpu_interval) (the GPU scrape interval; dcgm-exporter collects as often) or C(collect_interval_ms),
      C(restart), C(web_user) (default C(llmstack))."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Render the monitoring of this host
  pvegpu.llmstack.monitoring_render:
    topology: "{{ llmstack_topology }}"
    groups: {gpu_vms: [gpu-a], observability: [mon]}
    settings: {gpu_interval: 5s, interval: 15s}
    compose: {services: [dcgm-exporter, node-exporter], address: 192.168.10.20, images: {}}
  register: rendered
"""

RETURN = r"""
jobs:
  description: The scrape jobs (name, interval, path, targets with labels).
  returned: success
  type: list
  elements: dict
prometheus:
  description: prometheus.yml as a dict.
  returned: success
  type: dict
alertmanager:
  description: alertmanager.yml as a dict.
  returned: success
  type: dict
grafana:
  description: Grafana's provisioning files (C(datasources), C(dashboards)) as dicts.
  returned: success
  type: dict
compose:
  description: The compose project of this host.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import monitoring, render_module


def build(params):
    hosts = params["hosts"] if params["hosts"] is not None else monitoring.hosts_from_topology(params["topology"])
    errors = []
    result = {}
    builders = (
        ("jobs", monitoring.jobs_from_inventory, (hosts, params["groups"], params["settings"])),
        ("alertmanager", monitoring.alertmanager_config, (params["settings"].get("alertmanager") or {},)),
        ("compose", monitoring.compose, (params["compose"],)),
    )
    # Every builder runs, so that one failure names the problems of all three.
    for key, build_part, args in builders:
        try:
            result[key] = build_part(*args)
        except monitoring.MonitoringError as exc:
            errors.extend(exc.problems)
    if errors:
        raise monitoring.MonitoringError(errors)
    result["prometheus"] = monitoring.prometheus_config(result["jobs"], params["settings"])
    # Grafana reaches Prometheus inside the compose project.
    result["grafana"] = monitoring.grafana_provisioning("http://prometheus:9090", params["settings"].get("web_user"))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="dict"),
            hosts=dict(type="dict"),
            groups=dict(type="dict", required=True),
            settings=dict(type="dict", required=True),
            compose=dict(type="dict", required=True),
        ),
        supports_check_mode=True,
        required_one_of=[("topology", "hosts")],
        mutually_exclusive=[("topology", "hosts")],
    )
    render_module.run(module, "monitoring", build)


if __name__ == "__main__":
    main()
