"""The gpu_vm_plan module as Ansible runs it (the module file with its arguments as JSON): its typed C(vm)
suboptions (Ansible refuses a VM without a node, before any planning) and C(pve_node) falling back to the
inventory node, as the mapping names show. The planning itself is tested in module_utils/test_gpu_vm.py."""

import json
import os
import subprocess
import sys

from ansible_collections.pvegpu.llmstack.plugins.module_utils import gpu_vm, pci
from conftest import role_settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE = os.path.join(ROOT, "plugins", "modules", "gpu_vm_plan.py")
SETTINGS = role_settings("gpu_vm", gpu_vm.SETTINGS)


def run(tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, ".cache", "collections")] + sys.path))
    out = subprocess.run([sys.executable, MODULE, str(args_file)], capture_output=True, text=True, env=env,
                         check=False)
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout)


def test_a_vm_without_its_node_is_refused_by_the_argument_spec(tmp_path):
    result = run(tmp_path, vm={"name": "gpu-a", "gpus": ["0000:41:00"]}, pci={"gpus": []}, settings=SETTINGS)
    assert result["failed"] and "node" in result["msg"] and "vm" in result["msg"], result


def test_pve_node_defaults_to_the_inventory_node(tmp_path, sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-a"])
    vm = {"name": "gpu-a", "node": "pve-a", "gpus": ["0000:41:00"]}
    result = run(tmp_path, vm=vm, node_vms=[{"name": "gpu-a", "gpus": ["0000:41:00"]}], pci=facts,
                 settings=SETTINGS)
    assert not result.get("failed"), result
    assert [m["name"] for m in result["mappings"]] == [gpu_vm.mapping_name("llmstack", "pve-a", "0000:41:00")]
    result = run(tmp_path, vm=dict(vm, pve_node="pve1"), node_vms=[{"name": "gpu-a", "gpus": ["0000:41:00"]}],
                 pci=facts, settings=SETTINGS)
    assert [m["node"] for m in result["mappings"]] == ["pve1"]


def test_an_empty_vm_name_is_refused(tmp_path):
    result = run(tmp_path, vm={"name": " ", "node": "pve-a"}, pci={"gpus": []}, settings=SETTINGS)
    assert result["failed"] and "vm.name: empty" in result["msg"], result
