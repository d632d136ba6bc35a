# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters that read the topology (llmstack_topology): thin calls into module_utils/topology.py. Each one is
documented in its own sidecar file, plugins/filter/<name>.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.pvegpu.llmstack.plugins.module_utils import topology


def topology_vm_gpus(value, vm):
    return topology.vm_gpus(value, vm)


def topology_sources(value, role, service, host):
    return topology.endpoint_sources(value, role, service, host)


def topology_endpoint(value, role, service, host):
    return topology.first_endpoint(value, role, service, host)


def topology_vms_not_running(value, hosts):
    return topology.vms_not_running(value, hosts)


class FilterModule(object):
    def filters(self):
        return {"topology_vm_gpus": topology_vm_gpus, "topology_sources": topology_sources,
                "topology_endpoint": topology_endpoint, "topology_vms_not_running": topology_vms_not_running}
