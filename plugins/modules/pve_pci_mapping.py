#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pve_pci_mapping
short_description: Manage a PVE cluster PCI resource mapping
version_added: 0.1.0
description:
  - Ensures a cluster-wide PCI resource mapping (C(/cluster/mapping/pci/<name>)) with exactly the given
    entries, one per node and device (C(id) vendor:device, C(subsystem-id), C(iommugroup), C(node), C(path)),
    or its absence.
  - Reads the mapping, compares its entries in canonical form, and creates it (POST), updates it (PUT with
    the digest PVE gave) or deletes it only when they differ; reports the difference in diff mode.
  - Why mappings - PVE lets only C(root@pam) put raw host addresses into C(hostpciN); an API token (AWX)
    must use C(mapping=<name>), which needs C(Mapping.Use) and C(VM.Config.HWType) on the VM side, and
    C(Mapping.Modify) to create the mapping.
  - Build the entries from M(pvegpu.llmstack.pci_iommu_facts) with the C(entries_from_gpus) option.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.api_diff
  - pvegpu.llmstack.attributes.pve_group
  - pvegpu.llmstack.pve
options:
  name:
    description: The mapping id (letters, digits, C(_.-), starting with a letter).
    type: str
    required: true
  description:
    description: Free text shown in the PVE UI; left as it is when not given.
    type: str
  entries:
    description:
      - The mapping's entries, each a dict C({id, node, path, iommugroup, subsystem-id, description}) or a PVE
        property string. A C(path) without C(.f) maps all functions of the slot.
    type: list
    elements: raw
    default: []
  entries_from_gpus:
    description:
      - C({node, gpus}) where C(gpus) are C(gpus) entries of M(pvegpu.llmstack.pci_iommu_facts) on PVE node
        C(node); each becomes an entry (vendor:device, subsystem, first IOMMU group, slot).
    type: list
    elements: dict
    default: []
  state:
    description: Whether the mapping should exist.
    type: str
    choices: [present, absent]
    default: present
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: One mapping per RTX 3090 of platform A, from the host's PCI facts
  pvegpu.llmstack.pve_pci_mapping:
    api_host: pve-a.example.org
    api_user: automation@pve
    api_token_id: automation@pve!llmstack
    api_token_secret: "{{ vault_pve_token_secret }}"
    name: "rtx3090-{{ item.slot | replace('0000:', '') | replace(':', '-') }}"
    entries_from_gpus:
      - node: pve-a
        gpus: ["{{ item }}"]
  loop: "{{ llmstack_pci.gpus }}"
  delegate_to: localhost

- name: Explicit entries
  pvegpu.llmstack.pve_pci_mapping:
    name: v100-pool
    description: The eight V100 of platform B
    entries:
      - "id=10de:1db5,iommugroup=41,node=pve-b,path=0000:1a:00,subsystem-id=10de:1249"
      - {id: "10de:1db5", node: pve-b, path: "0000:1b:00", iommugroup: 43}

- name: Remove a mapping
  pvegpu.llmstack.pve_pci_mapping:
    name: v100-pool
    state: absent
"""

RETURN = r"""
operation:
  description: What was (or in check mode would be) done (C(create), C(update), C(delete) or C(none)).
  returned: always
  type: str
  sample: update
mapping:
  description: The mapping's entries and description after the run (null when absent).
  returned: always
  type: dict
  sample: {"map": ["id=10de:2204,iommugroup=27,node=pve-a,path=0000:41:00,subsystem-id=1458:403b"],
           "description": ""}
diff:
  description: Before and after, with the entries as canonical property strings.
  returned: when changed
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_api, pve_mapping


def find(api, name):
    """The mapping as GET /cluster/mapping/pci/{id} returns it, or None."""
    listed = [m for m in api.cluster.mapping.pci.get() or [] if m.get("id") == name]
    if not listed:
        return None
    current = api.cluster.mapping.pci(name).get() or {}
    current.setdefault("map", listed[0].get("map") or [])
    return current


def main():
    argument_spec = pve_api.pve_argument_spec()
    argument_spec.update(
        name=dict(type="str", required=True),
        description=dict(type="str"),
        entries=dict(type="list", elements="raw", default=[]),
        entries_from_gpus=dict(type="list", elements="dict", default=[]),
        state=dict(type="str", choices=["present", "absent"], default="present"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_together=pve_api.PVE_REQUIRED_TOGETHER,
                           required_one_of=pve_api.PVE_REQUIRED_ONE_OF,
                           mutually_exclusive=pve_api.PVE_MUTUALLY_EXCLUSIVE)
    params = module.params
    if not pve_mapping.valid_mapping_id(params["name"]):
        module.fail_json(msg="name: %r is not a PVE mapping id (a letter, then letters, digits, '_', '.', '-')"
                         % params["name"])
    try:
        wanted = [pve_mapping.parse_entry(e) if isinstance(e, str) else pve_mapping.normalise_entry(e)
                  for e in params["entries"]]
        for index, item in enumerate(params["entries_from_gpus"]):
            if not item.get("node") or not isinstance(item.get("gpus"), list):
                module.fail_json(msg="entries_from_gpus[%d]: needs node and a list of gpus" % index)
            wanted.extend(pve_mapping.entry_from_gpu(item["node"], gpu) for gpu in item["gpus"])
    except (pve_mapping.MappingError, KeyError, TypeError) as exc:
        module.fail_json(msg="entries: %s" % exc)
    if params["state"] == "present" and not wanted:
        module.fail_json(msg="entries: state=present needs at least one entry (entries or entries_from_gpus)")

    api = pve_api.connect(module)
    try:
        current = find(api, params["name"])
        change = pve_mapping.plan(current, wanted, params["description"], params["state"])
    except pve_mapping.MappingError as exc:
        module.fail_json(msg="mapping %s: %s" % (params["name"], exc))
    except pve_api.ResourceException as exc:
        module.fail_json(msg="reading mapping %s: %s" % (params["name"], exc))
    changed = change["action"] != "none"
    result = {"changed": changed, "operation": change["action"], "mapping": change["after"]}
    if changed:
        result["diff"] = {"before": change["before"] or {}, "after": change["after"] or {}}
    if changed and not module.check_mode:
        try:
            if change["action"] == "create":
                api.cluster.mapping.pci.post(id=params["name"], **change["payload"])
            elif change["action"] == "update":
                api.cluster.mapping.pci(params["name"]).put(**change["payload"])
            else:
                api.cluster.mapping.pci(params["name"]).delete()
        except pve_api.ResourceException as exc:
            hint = ""
            if "403" in str(exc) or "ermission" in str(exc):
                hint = " (creating or changing a mapping needs Mapping.Modify on /mapping/pci)"
            module.fail_json(msg="%s of mapping %s failed: %s%s" % (change["action"], params["name"], exc, hint))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
