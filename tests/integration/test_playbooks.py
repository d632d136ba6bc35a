"""The playbooks against the example inventory (syntax-check and listings only: its addresses are a real
LAN's, never contacted) and the not-yet-implemented roles failing loudly instead of doing nothing."""

import glob
import os
import re
import sys

from conftest import ROOT, playbook

EXAMPLE = os.path.join(ROOT, "inventories", "example")
STAGES = ["pve_hosts", "gpu_vms", "guests", "inference", "gateway", "observability"]


# Roles that other roles call (include_role/import_role) and no playbook lists, so they have no tag of their own.
INTERNAL_ROLES = {"service_removal", "service_compose", "common"}


def roles():
    return sorted(d for d in os.listdir(os.path.join(ROOT, "roles"))
                  if os.path.isdir(os.path.join(ROOT, "roles", d)) and d not in INTERNAL_ROLES)


def read(path):
    with open(path) as handle:
        return handle.read()


def test_internal_roles_are_called_by_the_roles_and_listed_by_no_playbook():
    for role in INTERNAL_ROLES:
        callers = [d for d in os.listdir(os.path.join(ROOT, "roles")) if d != role and any(
                   "pvegpu.llmstack.%s" % role in read(path)
                   for path in glob.glob(os.path.join(ROOT, "roles", d, "tasks", "*.yml")))]
        assert callers, "%s is called by no role" % role
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, "playbooks")):
            for name in files:
                assert "llmstack.%s" % role not in read(os.path.join(dirpath, name)), (role, name)


def listed_tags(output):
    tags = set()
    for match in re.finditer(r"TASK TAGS: \[([^\]]*)\]", output):
        tags.update(t.strip() for t in match.group(1).split(",") if t.strip())
    return tags


def test_site_yml_syntax_check_on_the_example():
    rc, out, err = playbook("site.yml", "-i", EXAMPLE, "--syntax-check")
    assert rc == 0, out + err


def test_site_yml_lists_every_stage_and_role_tag():
    rc, out, err = playbook("site.yml", "-i", EXAMPLE, "--list-tags")
    assert rc == 0, out + err
    tags = listed_tags(out)
    missing = (set(roles()) | set(STAGES) | {"validate", "always"}) - tags
    assert not missing, "tags missing from --list-tags: %s" % sorted(missing)


def test_site_yml_lists_the_example_hosts():
    rc, out, err = playbook("site.yml", "-i", EXAMPLE, "--list-hosts")
    assert rc == 0, out + err
    for host in ("pve-a", "pve-b", "gpu-3090", "gpu-v100", "llm-gateway", "langfuse-1", "monitoring-1",
                 "openclaw", "n8n"):
        assert re.search(r"^\s+%s$" % re.escape(host), out, re.M), "%s not listed:\n%s" % (host, out)


def test_every_stage_playbook_has_valid_syntax():
    for name in STAGES + ["validate", "network", "burnin"]:
        rc, out, err = playbook(os.path.join("playbooks", name + ".yml"), "-i", EXAMPLE, "--syntax-check")
        assert rc == 0, name + out + err


def test_burnin_only_runs_when_asked():
    """burnin is tagged never: left out of a plain run, in with --tags burnin, and a burnin_<stage> tag alone brings
    in the whole role (the role then runs that stage only: burnin_run.select_stages, unit-tested)."""
    first = "pvegpu.llmstack.burnin : Check the settings and plan the stages"
    rc, out, err = playbook("site.yml", "-i", EXAMPLE, "--list-tasks")
    assert rc == 0, out + err
    assert first not in out
    for tags in ("burnin", "burnin_1h", "burnin_soak,burnin_dcgmi_diag"):
        rc, out, err = playbook("site.yml", "-i", EXAMPLE, "--list-tasks", "--tags", tags)
        assert rc == 0, out + err
        assert first in out, tags
        assert "pvegpu.llmstack.burnin : Write this host's report (JSON, Markdown, HTML)" in out, tags


def test_burnin_refuses_bad_settings_before_anything_changes(tmp_path):
    """Bad burn-in settings stop the role at its first task, each named by its variable, before anything is
    installed or started (the host is this machine through the local connection; the plan step changes nothing)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  vars:\n    ansible_connection: local\n    ansible_python_interpreter: %s\n"
        "  children:\n    gpu_vms:\n      hosts:\n        here: {}\n" % sys.executable)
    rc, out, err = playbook("playbooks/stages/burnin.yml", "-i", str(inventory), "--tags", "burnin", "-e",
                            '{"burnin_stages": ["60s", "warmup"], "burnin_temperature_watch_c": 95,'
                            ' "burnin_report_dir": "%s"}' % (tmp_path / "reports"))
    assert rc != 0
    assert "burnin_stages: 'warmup' is not a stage" in out, out
    assert "burnin_temperature_watch_c: 95 is above burnin_temperature_fail_c (90)" in out, out
    # The default source archive of gpu-burn has no checksum: it is never downloaded unverified.
    assert "burnin_gpu_burn_archive_sha256: '' is not the archive's sha256" in out, out
    assert "changed=0" in out and "Install the build tools" not in out, out
    assert not (tmp_path / "reports").exists()


def test_network_policy_without_the_controllers_address_changes_nothing(tmp_path):
    """network_policy never loads a ruleset that does not name where Ansible connects from: the inventory check
    refuses it, naming the variable, before any stage runs (#33 item 6; the role's render step refuses it too, when
    the role runs on its own), so nothing is installed or loaded (the host is this machine)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  vars:\n    ansible_connection: local\n    ansible_python_interpreter: auto_silent\n"
        "  hosts:\n    here: {}\n")
    rc, out, err = playbook("playbooks/network.yml", "-i", str(inventory), "--tags", "network_policy", "-e",
                            "inventory_check_publish_facts=false", "-e", '{"inventory_check_group_vlans": {}}')
    assert rc != 0
    assert "network_policy_controller_addresses: is empty: name the address(es) Ansible connects from" in out, out
    assert "Install nftables" not in out and "Load the ruleset" not in out


def test_the_shipped_ansible_cfg_checks_host_keys():
    """A GPU VM rebuilt with new host keys, or a man in the middle on the management VLAN, is refused by SSH; the lab
    needs no exception (it connects through podman). ansible-config reads the shipped file as Ansible does."""
    import subprocess

    from conftest import BIN, ansible_env

    env = ansible_env()
    env.pop("ANSIBLE_HOST_KEY_CHECKING", None)
    result = subprocess.run([os.path.join(BIN, "ansible-config"), "dump", "--format", "json"], cwd=ROOT, env=env,
                            text=True, capture_output=True, check=False)
    assert result.returncode == 0, result.stderr
    import json

    settings = dict((entry["name"], entry) for entry in json.loads(result.stdout) if "name" in entry)
    entry = settings["HOST_KEY_CHECKING"]
    assert entry["value"] is True and entry["origin"].endswith("ansible.cfg"), entry
    # Every connection the lab inventory uses is podman's, so it does not need host keys turned off.
    rc, out, err = playbook("site.yml", "-i", os.path.join(ROOT, "inventories", "lab"), "--list-hosts")
    assert rc == 0, err


# Roles that read the topology only through `| default(...)`: run on their own they read nothing from it (nvidia:
# which GPUs the plan placed on the VM, for a check; tls_proxy: who may scrape LiteLLM's metrics) instead of computing
# it. Whether they should include roles/common too is left to issue #38.
TOPOLOGY_WITH_DEFAULTS = {"nvidia", "tls_proxy"}


def test_the_topology_fallback_is_one_role_that_every_role_reading_the_topology_includes():
    """The topology a role reads when the validate step did not compute it comes from roles/common only: every role
    that reads llmstack_topology includes it (but those that only read it with a default), none calls the topology
    module itself (there were eight copies in seven roles, four of which hid the problems)."""
    files = dict((os.path.relpath(path, ROOT), read(path))
                 for path in glob.glob(os.path.join(ROOT, "roles", "*", "*", "*.y*ml"))
                 + glob.glob(os.path.join(ROOT, "roles", "*", "templates", "*.j2")))
    computing = sorted(path for path, text in files.items() if "pvegpu.llmstack.topology:" in text)
    assert computing == ["roles/common/tasks/main.yml"]

    def role(path):
        return path.split(os.sep)[1]

    readers = sorted({role(path) for path, text in files.items()
                      if "llmstack_topology" in text and role(path) != "common"
                      and path.split(os.sep)[2] != "meta"})
    including = sorted({role(path) for path, text in files.items()
                        if path.split(os.sep)[2] == "tasks" and "name: pvegpu.llmstack.common\n" in text})
    assert sorted(set(readers) - TOPOLOGY_WITH_DEFAULTS) == including and len(including) >= 7, (readers, including)
