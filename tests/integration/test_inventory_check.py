"""inventory_check through the real site.yml: every negative inventory (tests/inventories/negative/*.yml,
layered on tests/inventories/base.yml) stops the run with one problem naming its host and variable, and
no task after the check runs. The hosts point at 127.0.0.1:1, so a run that got past the check by
mistake could not touch anything."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import CHECK_TASK, ROOT, parse_json_report, playbook, tasks_run

BASE = os.path.join(ROOT, "tests", "inventories", "base.yml")
# base.yml names a PVE API (gpu_vm_api_host: every VM needs one, the check refuses a VM without) that nothing serves
# here: the VMs' power state is given as read (absent, a new site's), so the validate step does not ask the API.
NO_API = ("-e", "llmstack_vm_status=absent")
NEGATIVE = sorted(glob.glob(os.path.join(ROOT, "tests", "inventories", "negative", "*.yml")))
EXPECT = re.compile(r"^# expect: (?P<hosts>[^|]+?) \| (?P<variable>[^|]+?) \| (?P<message>.+)$", re.M)


def expectation(path):
    with open(path) as handle:
        match = EXPECT.search(handle.read())
    assert match, "%s has no '# expect: hosts | variable | message' line" % path
    hosts = [h.strip() for h in match.group("hosts").split(",")]
    return hosts, match.group("variable").strip(), match.group("message").strip()


def test_there_are_enough_negative_inventories():
    assert len(NEGATIVE) >= 15


@pytest.mark.parametrize("case", NEGATIVE, ids=[os.path.basename(p)[:-4] for p in NEGATIVE])
def test_negative_inventory_stops_site_yml_before_anything_runs(case):
    hosts, variable, message = expectation(case)
    rc, out, err = playbook("site.yml", "-i", BASE, "-i", case, json_output=True)
    assert rc != 0, "site.yml passed with %s:\n%s" % (case, out[-3000:])
    report = parse_json_report(out)
    runs = tasks_run(report)
    # The role's argument-spec validation runs on the controller before the check; nothing else may run.
    names = [run["task"] for run in runs if "Validating arguments against arg spec" not in run["task"]]
    assert names == [CHECK_TASK], "tasks ran besides the inventory check: %s" % names
    results = list([run["hosts"] for run in runs if run["task"] == CHECK_TASK][0].values())
    assert len(results) == 1 and results[0].get("failed"), results
    problems = results[0]["problem_details"]
    assert len(problems) == 1, "expected exactly one problem, got:\n%s" % "\n".join(p["text"] for p in problems)
    problem = problems[0]
    expected_hosts = ["all"] if hosts == ["all"] else sorted(hosts)
    assert problem["hosts"] == expected_hosts, problem
    assert problem["variable"] == variable, problem
    assert message in problem["message"], problem
    assert problem["text"] in results[0]["msg"]
    # Nothing but the check task reached any host.
    assert not report.get("stats") or all(s.get("changed", 0) == 0 for s in report["stats"].values())


def test_base_inventory_passes_the_check():
    rc, out, err = playbook("site.yml", "-i", BASE, *NO_API, "--tags", "validate", "-e",
                            "inventory_check_publish_facts=false", json_output=True)
    assert rc == 0, out[-3000:] + err[-2000:]
    runs = tasks_run(parse_json_report(out))
    check = [run["hosts"] for run in runs if run["task"] == CHECK_TASK]
    assert len(check) == 1
    result = list(check[0].values())[0]
    assert result["problems"] == []
    assert result["hosts"] == 7
    gpu_b = result["networks"]["gpu-b"]["interfaces"]
    assert gpu_b == [{"vlan": "inference", "id": 20, "address": "10.99.20.21", "prefix": 24,
                      "cidr": "10.99.20.0/24", "gateway": "10.99.20.1", "bridge": "vmbr0", "mac": "BC:24:11:99:20:21"},
                     {"vlan": "mgmt", "id": 10, "address": "10.99.10.21", "prefix": 24,
                      "cidr": "10.99.10.0/24", "gateway": "10.99.10.1", "bridge": "vmbr0", "mac": "BC:24:11:99:10:21"}]
    # The topology is computed once and reaches every host (its PVE hosts are not reachable here: the placement
    # keeps the named slots and leaves gpu-b's by-type GPUs to the run that reads pve-b).
    topo = [run["hosts"] for run in runs if run["task"].startswith("Compute llmstack_topology")]
    assert len(topo) == 1
    fact = list(topo[0].values())[0]["ansible_facts"]["llmstack_topology"]
    assert fact["gpus"] == {"pve-a": {"gpu-a": ["0000:41:00", "0000:61:00"]}, "pve-b": {"gpu-b": []}}
    assert sorted(e["port"] for e in fact["endpoints"] if e["host"] == "obs") == [3000, 3001, 9000, 9090, 9093, 9100]


def test_two_services_on_one_address_and_port_are_refused_naming_both_variables():
    """Issue #21: Langfuse's MinIO and Prometheus on one host, both on 9090 (the roles' default ports)."""
    rc, out, err = playbook("site.yml", "-i", BASE, *NO_API, "--tags", "validate", "-e",
                            "inventory_check_publish_facts=false",
                            "-e", "langfuse_s3_port=9090", json_output=True)
    assert rc != 0
    runs = tasks_run(parse_json_report(out))
    failed = [result for run in runs for result in run["hosts"].values() if result.get("failed")]
    assert len(failed) == 1
    assert failed[0]["problems"] == [
        "host obs: langfuse_s3_port (langfuse langfuse-s3) and monitoring_prometheus_port (monitoring prometheus) "
        "both listen on 10.99.10.14 port 9090: move one (set langfuse_s3_port or monitoring_prometheus_port)"]


def test_check_runs_once_when_stage_playbooks_are_combined(tmp_path):
    """A site of the user's own importing two stage playbooks validates once."""
    combined = tmp_path / "combined.yml"
    combined.write_text("---\n- import_playbook: {0}/playbooks/gateway.yml\n"
                        "- import_playbook: {0}/playbooks/inference.yml\n".format(ROOT))
    rc, out, err = playbook(str(combined), "-i", BASE, *NO_API, "--tags", "validate", "-e",
                            "inventory_check_publish_facts=false", json_output=True)
    assert rc == 0, out[-3000:] + err[-2000:]
    runs = tasks_run(parse_json_report(out))
    executed = [run["hosts"] for run in runs if run["task"] == CHECK_TASK]
    assert len(executed) == 2   # the second import is listed, but skipped
    assert not list(executed[0].values())[0].get("skipped")
    assert all(r.get("skipped") for r in executed[1].values())


def run_cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "check_inventory.py")] + list(args),
                          text=True, capture_output=True, check=False)


def test_cli_accepts_the_example_inventory_with_its_vault_variable():
    result = run_cli("-i", os.path.join(ROOT, "inventories", "example"), "-e",
                     "vault_gpu_vm_api_token_secret=8c5d5a52-0f9e-4a63-a2d5-9d6c1f0b7e22")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The inventory of 9 host(s) is valid" in result.stdout


def test_cli_names_the_missing_vault_variable():
    result = run_cli("-i", os.path.join(ROOT, "inventories", "example"))
    assert result.returncode == 1
    # Defined for the whole site (group_vars/all/site.yml: every VM is made through the API): one line, every host.
    expected = ("hosts gpu-3090, gpu-v100, langfuse-1, llm-gateway, monitoring-1, n8n, openclaw, pve-a, pve-b: "
                "gpu_vm_api_token_secret: cannot be resolved: 'vault_gpu_vm_api_token_secret' is undefined")
    assert expected in result.stdout


@pytest.mark.parametrize("variable,fragment", [
    ("gpu_vm_api_host", "gpu_vm_api_host: is empty: name the PVE API host"),
    ("guest_image_mirror", "guest_image_mirror: is empty"),
    ("guest_image_authorized_keys", "guest_image_authorized_keys: is empty"),
    ("network_policy_controller_addresses", "network_policy_controller_addresses: is empty"),
])
def test_the_example_site_without_what_a_first_run_needs_is_refused_offline(tmp_path, variable, fragment):
    """Issue #33 item 6: each variable a first run of the seed's whole site needs is in the example inventory, and a
    copy without it is refused by the offline check (before any PVE host is touched), naming it on every host that
    needs it: the seven VMs for the VM settings, all nine hosts for the policy's controller address."""
    import shutil

    import yaml

    inventory = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "inventories", "example"), str(inventory))
    shared = inventory / "group_vars" / "all" / "site.yml"
    data = yaml.safe_load(shared.read_text())
    assert data.get(variable), "inventories/example does not set %s" % variable
    del data[variable]
    shared.write_text(yaml.safe_dump(data))
    result = run_cli("-i", str(inventory), "-e", "vault_gpu_vm_api_token_secret=8c5d5a52-0f9e-4a63-a2d5-9d6c1f0b7e22")
    assert result.returncode == 1, result.stdout + result.stderr
    named = [line for line in result.stdout.splitlines() if fragment in line]
    assert len(named) == 1, result.stdout
    vms = "gpu-3090, gpu-v100, langfuse-1, llm-gateway, monitoring-1, n8n, openclaw"
    hosts = vms + ", pve-a, pve-b" if variable.startswith("network_policy") else vms
    assert named[0].startswith("- hosts %s: " % hosts), named[0]


def test_cli_accepts_the_lab_inventory():
    # The lab's secrets and key are files `tools/lab.py up` writes (.cache/lab): given here, so the test does not
    # depend on whether a lab was brought up in this checkout before it.
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDwyngojZfNGnYM8XwCf1zqNDcixJAYDTwE3OAqH9fo/ lab"
    result = run_cli("-i", os.path.join(ROOT, "inventories", "lab"), "-e", "gpu_vm_api_password=lab-password-xyz123",
                     "-e", json.dumps({"guest_image_authorized_keys": [key]}))
    assert result.returncode == 0, result.stdout + result.stderr


def test_cli_reports_every_problem_of_a_negative_inventory_as_json():
    result = run_cli("-i", BASE, "-i", os.path.join(ROOT, "tests", "inventories", "negative", "vmid-duplicate.yml"),
                     "--json")
    assert result.returncode == 1
    assert '"variable": "gpu_vm_vmid"' in result.stdout


def test_cli_decrypts_a_vaulted_secret_in_group_vars(tmp_path):
    """The offline check reads a vault-encrypted group_vars file with a vault password file."""
    import shutil

    from ansible.parsing.vault import VaultLib, VaultSecret

    inventory = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "inventories", "example"), str(inventory))
    password = tmp_path / "vault-pass"
    password.write_text("a-test-vault-password\n")
    vault = VaultLib([("default", VaultSecret(b"a-test-vault-password"))])
    plain = b"vault_gpu_vm_api_token_secret: 8c5d5a52-0f9e-4a63-a2d5-9d6c1f0b7e22\n"
    (inventory / "group_vars" / "all" / "vault.yml").write_bytes(vault.encrypt(plain))
    without = run_cli("-i", str(inventory))
    assert without.returncode == 2 and "A vault password must be specified" in without.stderr, \
        without.stdout + without.stderr
    result = run_cli("-i", str(inventory), "--vault-password-file", str(password))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The inventory of 9 host(s) is valid" in result.stdout


def test_validation_does_not_connect_to_gpu_vms_that_do_not_exist_yet(tmp_path):
    """Day 0: the GPU VMs of base.yml point at 127.0.0.1:1 over SSH (nothing answers there, as a VM the gpu_vms stage
    has not created yet). The validate step checks the inventory, writes the network fact on every other host (here
    this machine through the local connection, into a temporary facts directory) and never tries the VMs; a bad
    inventory on the same hosts is still refused before anything is written."""
    import yaml

    with open(BASE) as handle:
        data = yaml.safe_load(handle)
    others = []
    # The PVE hosts exist on day 0: the validate step reads their GPUs (here recorded sysfs trees) for the placement.
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import sysfs_fixture
    finally:
        sys.path.pop(0)
    roots = {"pve-a": sysfs_fixture.build_fixture(os.path.join(sysfs_fixture.FIXTURES, "platform-a"),
                                                  str(tmp_path / "sysfs-a")),
             "pve-b": sysfs_fixture.build_fixture(os.path.join(sysfs_fixture.FIXTURES, "platform-b"),
                                                  str(tmp_path / "sysfs-b"))}
    for host, root in roots.items():
        data["all"]["children"]["pve_hosts"]["hosts"][host]["llmstack_sysfs_root"] = root
    for group, body in data["all"]["children"].items():
        for host in (body or {}).get("hosts") or {}:
            if group != "gpu_vms":
                hostvars = data["all"]["children"][group]["hosts"][host] or {}
                hostvars.update({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                 "inventory_check_facts_dir": str(tmp_path / "facts" / host)})
                data["all"]["children"][group]["hosts"][host] = hostvars
                others.append(host)
    inventory = tmp_path / "day0.yml"
    inventory.write_text(yaml.safe_dump(data))
    rc, out, err = playbook("playbooks/validate.yml", "-i", str(inventory), *NO_API, json_output=True)
    assert rc == 0, out[-3000:] + err[-2000:]
    stats = parse_json_report(out)["stats"]
    assert {h: s["unreachable"] for h, s in stats.items() if s["unreachable"]} == {}
    assert sorted(os.listdir(tmp_path / "facts")) == sorted(set(others))
    assert not (tmp_path / "facts" / "gpu-a").exists()
    # The same hosts with a bad VLAN id: refused on the controller, no fact written anywhere.
    shutil.rmtree(str(tmp_path / "facts"))
    data["all"]["vars"]["llmstack_vlans"]["mgmt"]["id"] = 5000
    inventory.write_text(yaml.safe_dump(data))
    rc, out, err = playbook("playbooks/validate.yml", "-i", str(inventory), *NO_API, json_output=True)
    assert rc != 0 and "llmstack_vlans" in out
    assert not (tmp_path / "facts").exists()
