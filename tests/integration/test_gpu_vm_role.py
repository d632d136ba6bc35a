"""The gpu_vm role through playbooks/gpu_vms.yml, against the lab's PVE double (fakepve, PVE's own schema, plus
stored PCI mappings) with an API token, as AWX runs it. The PVE hosts are this machine (connection local)
reading the seed's platforms from recorded-by-hand sysfs trees (tests/fixtures/sysfs)."""

import os
import sys

import pytest
import yaml
from conftest import ROOT, parse_json_report, playbook, state_changing

pytestmark = pytest.mark.slow
TOKEN_ID, TOKEN_SECRET = "automation@pve!llmstack", "7d1e0c52-test-token-secret"


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import sysfs_fixture
    finally:
        sys.path.pop(0)
    base = tmp_path_factory.mktemp("sysfs")
    return dict((name, sysfs_fixture.build_fixture(os.path.join(sysfs_fixture.FIXTURES, name), str(base / name)))
                for name in ("platform-a", "platform-b"))


def inventory(tmp_path, pve, trees, **vm_vars):
    host, port = pve.url.split("://", 1)[1].rsplit(":", 1)
    data = {"all": {
        # Every host is this machine: inventory_check must not write its network fact here.
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "inventory_check_publish_facts": False,
                 # What a first run needs, which the inventory check asks for before anything changes (#33 item 6).
                 "network_policy_controller_addresses": ["10.99.10.5"],
                 "guest_image_mirror": "http://deb.debian.org/debian",
                 "guest_image_authorized_keys": [
                     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDwyngojZfNGnYM8XwCf1zqNDcixJAYDTwE3OAqH9fo/ ops@test"],
                 "llmstack_vlans": {"mgmt": {"id": 10, "cidr": "10.99.10.0/24", "gateway": "10.99.10.1"},
                                    "inference": {"id": 20, "cidr": "10.99.20.0/24", "gateway": "10.99.20.1"}}},
        "children": {
            "pve_hosts": {"hosts": {
                "pve-a": {"llmstack_sysfs_root": trees["platform-a"],
                          "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.2"}]},
                "pve-b": {"llmstack_sysfs_root": trees["platform-b"],
                          "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.99.10.3"}]}}},
            "gpu_vms": {
                "vars": dict({"gpu_vm_api_host": host, "gpu_vm_api_port": int(port),
                              "gpu_vm_api_user": "automation@pve",
                              "gpu_vm_api_token_id": TOKEN_ID, "gpu_vm_api_token_secret": TOKEN_SECRET,
                              "gpu_vm_api_validate_certs": False}, **vm_vars),
                "hosts": {
                    "gpu-a": {"gpu_vm_node": "pve-a", "gpu_vm_vmid": 120, "gpu_vm_gpus": ["0000:41:00", "61:00"],
                              "llmstack_interfaces": [{"vlan": "inference", "address": "10.99.20.20"}]},
                    "gpu-b": {"gpu_vm_node": "pve-b", "gpu_vm_vmid": 121,
                              "gpu_vm_gpus": [{"vendor_device": "10de:1db5", "count": 4}],
                              "llmstack_interfaces": [{"vlan": "inference", "address": "10.99.20.21"}]}}}}}}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def run(path, *extra):
    rc, out, err = playbook("playbooks/gpu_vms.yml", "-i", path, *extra, json_output=True)
    return rc, parse_json_report(out), err


def test_an_api_token_creates_the_vms_through_mappings_and_a_rerun_changes_nothing(labpve, trees, tmp_path):
    labpve.apitokens[TOKEN_ID] = TOKEN_SECRET
    path = inventory(tmp_path, labpve, trees)
    rc, report, err = run(path)
    assert rc == 0, (report["stats"], err[-2000:])
    a, b = labpve.vm(120), labpve.vm(121)
    assert (a.node, a.name, b.node, b.name) == ("pve-a", "gpu-a", "pve-b", "gpu-b")
    assert a.config["hostpci0"] == "mapping=llmstack-pve-a-41-00,pcie=1,x-vga=1"
    assert a.config["hostpci1"] == "mapping=llmstack-pve-a-61-00,pcie=1"
    # {vendor_device: 10de:1db5, count: 4}: the first four V100 of platform B (node 0), no x-vga on a 3D controller.
    assert [b.config["hostpci%d" % i] for i in range(4)] == [
        "mapping=llmstack-pve-b-%s-00,pcie=1" % bus for bus in ("1a", "1b", "3d", "3e")]
    assert labpve.pci_mappings["llmstack-pve-b-3e-00"]["map"] == [
        "id=10de:1db5,iommugroup=47,node=pve-b,path=0000:3e:00,subsystem-id=10de:1249"]
    labpve.requests.clear()
    rc, report, err = run(path)
    assert rc == 0 and {h: s["changed"] for h, s in report["stats"].items() if s["changed"]} == {}
    assert state_changing(labpve) == []


def test_raw_addresses_with_a_token_are_refused_before_any_request(labpve, trees, tmp_path):
    labpve.apitokens[TOKEN_ID] = TOKEN_SECRET
    rc, report, err = run(inventory(tmp_path, labpve, trees, gpu_vm_hostpci_mode="raw"))
    assert rc != 0
    text = str(report)
    assert "gpu_vm_hostpci_mode: raw puts host PCI addresses into hostpciN, which PVE allows only to root@pam" in text
    # The validate step reads each VM's power state (GET only, issue #20's day 0); nothing is written.
    assert {method for method, _path, _body in labpve.requests} <= {"GET"}
    assert state_changing(labpve) == [] and labpve.vms == []


def test_more_gpus_than_the_host_has_free_is_refused_before_any_change(labpve, trees, tmp_path):
    labpve.apitokens[TOKEN_ID] = TOKEN_SECRET
    path = inventory(tmp_path, labpve, trees)
    with open(path) as handle:
        data = yaml.safe_load(handle)
    data["all"]["children"]["gpu_vms"]["hosts"]["gpu-b"]["gpu_vm_gpus"] = [{"vendor_device": "10de:1db5", "count": 9}]
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle)
    rc, report, err = run(path, "--limit", "gpu-b,pve-b")
    assert rc != 0
    assert "gpu_vm_gpus[0]: 9 GPU(s) 10de:1db5 asked for, 8 free on pve-b" in str(report)
    assert state_changing(labpve) == [] and labpve.vms == []


def test_state_absent_destroys_only_its_vm_and_mappings_and_refuses_a_vm_of_another_name(labpve, trees, tmp_path):
    labpve.apitokens[TOKEN_ID] = TOKEN_SECRET
    path = inventory(tmp_path, labpve, trees)
    rc, report, err = run(path)
    assert rc == 0, (report["stats"], err[-2000:])
    assert sorted(n for n in labpve.pci_mappings if n.startswith("llmstack-pve-a-")) == [
        "llmstack-pve-a-41-00", "llmstack-pve-a-61-00"]
    # The inventory no longer lists 61:00 when the VM is taken away: its mapping goes too (read from the VM's config),
    # and a mapping the collection did not make stays.
    with open(path) as handle:
        data = yaml.safe_load(handle)
    data["all"]["children"]["gpu_vms"]["hosts"]["gpu-a"]["gpu_vm_gpus"] = ["0000:41:00"]
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle)
    labpve.pci_mappings["someone-elses"] = labpve.pci_mappings["llmstack-pve-a-61-00"]
    rc, report, err = run(path, "--limit", "gpu-a,pve-a", "-e", "gpu_vm_state=absent")
    assert rc == 0, (report["stats"], err[-2000:])
    assert sorted(vm.vmid for vm in labpve.vms) == [121]
    assert sorted(n for n in labpve.pci_mappings if n.startswith("llmstack-pve-a-")) == []
    assert "someone-elses" in labpve.pci_mappings
    assert sorted(n for n in labpve.pci_mappings if n.startswith("llmstack-pve-b-")) == [
        "llmstack-pve-b-%s-00" % bus for bus in ("1a", "1b", "3d", "3e")]
    labpve.requests.clear()
    rc, report, err = run(path, "--limit", "gpu-a,pve-a", "-e", "gpu_vm_state=absent")
    assert rc == 0 and {h: s["changed"] for h, s in report["stats"].items() if s["changed"]} == {}
    assert state_changing(labpve) == []
    # gpu-b's vmid now holds a VM of another name: not ours to destroy.
    other = labpve.vm(121)
    other.name = other.config["name"] = "someone-else"
    rc, report, err = run(path, "--limit", "gpu-b,pve-b", "-e", "gpu_vm_state=absent")
    assert rc != 0
    assert "vmid: 121 is taken by the VM 'someone-else'" in str(report)
    assert sorted(vm.vmid for vm in labpve.vms) == [121] and "llmstack-pve-b-1a-00" in labpve.pci_mappings


def test_state_absent_without_naming_the_vms_is_refused_before_anything_changes(labpve, trees, tmp_path):
    """`-e gpu_vm_state=absent` without --limit would reach every GPU VM of the inventory: refused in validate, no
    request changes anything; gpu_vm_destroy names the VMs a run without a limit may destroy (only those). (That a
    destroyed VM's disks its config does not reference are kept: tests/unit/.../test_pve_vm.py, the flag sent.)"""
    labpve.apitokens[TOKEN_ID] = TOKEN_SECRET
    path = inventory(tmp_path, labpve, trees)
    rc, report, err = run(path)
    assert rc == 0, (report["stats"], err[-2000:])
    labpve.requests.clear()
    rc, report, err = run(path, "-e", "gpu_vm_state=absent")
    assert rc != 0
    text = str(report)
    for host, vmid in (("gpu-a", 120), ("gpu-b", 121)):
        assert ("gpu_vm_state: absent would destroy VM %d (%s) of %s, and this run names no VM to destroy"
                % (vmid, host, host)) in text
    assert "--limit gpu-a" in text and "gpu_vm_destroy" in text
    assert state_changing(labpve) == [] and sorted(vm.vmid for vm in labpve.vms) == [120, 121]
    # A limit by group names no VM either.
    rc, report, err = run(path, "--limit", "gpu_vms,pve_hosts", "-e", "gpu_vm_state=absent")
    assert rc != 0 and "would destroy VM 121 (gpu-b)" in str(report)
    assert state_changing(labpve) == [] and sorted(vm.vmid for vm in labpve.vms) == [120, 121]
    # gpu_vm_destroy names one and the other is absent too: the whole run is refused (validate, any_errors_fatal).
    rc, report, err = run(path, "-e", "gpu_vm_state=absent", "-e", '{"gpu_vm_destroy": ["gpu-b"]}')
    assert rc != 0 and "would destroy VM 120 (gpu-a)" in str(report)
    assert state_changing(labpve) == [] and sorted(vm.vmid for vm in labpve.vms) == [120, 121]
    # As a site keeps it: gpu-b absent and named in its vars; a run without a limit takes gpu-b away, keeps gpu-a.
    with open(path) as handle:
        data = yaml.safe_load(handle)
    data["all"]["children"]["gpu_vms"]["hosts"]["gpu-b"].update(gpu_vm_state="absent", gpu_vm_destroy=["gpu-b"])
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle)
    rc, report, err = run(path)
    assert rc == 0, (report["stats"], err[-2000:])
    assert sorted(vm.vmid for vm in labpve.vms) == [120]
