"""The nvidia and docker roles' guards and modules on this machine (Debian 12, no GPU, no Docker engine).

The roles themselves run in the molecule scenarios `nvidia` and `docker` (trixie systemd containers). Here: each
role stops on this host's distribution and on bad settings in check mode, before any install task (the nvidia role
also where the docker role did not run first; the docker role on the nvidia role's old Docker variables); the
modules run ad hoc against
files under tmp_path - docker_daemon_json (merge, check mode, a broken file, a failing validate command),
nvidia_ctk_runtime with a stand-in nvidia-ctk (NVIDIA's tool cannot be installed here) that records its calls,
apt_keyring with the gpg-made fixture keys, nvidia_driver_facts on a recorded sysfs tree with a stand-in modinfo.
"""

import json
import os
import subprocess
import sys

import pytest
from conftest import BIN, ROOT, ansible_env, parse_json_report, playbook, tasks_run

sys.path.insert(0, os.path.join(ROOT, "tools"))
import sysfs_fixture  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "nvidia")
ED25519 = "80C4A5924FE6B382CD0D739EF3BDF33B6FB4D06A"
RSA = "758CA2598662BA28C2D94EF089FD36C9EF03D81F"


def module(name, args, check=False, diff=False):
    cmd = [os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-m", "pvegpu.llmstack." + name,
           "-a", json.dumps(args), "-e", "ansible_python_interpreter=" + sys.executable]
    cmd += ["--check"] if check else []
    cmd += ["--diff"] if diff else []
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    result = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=300)
    return list(parse_json_report(result.stdout)["plays"][0]["tasks"][0]["hosts"].values())[0]


def os_release():
    with open("/etc/os-release") as handle:
        return dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)


def role_playbook(tmp_path, extra_vars, role="nvidia"):
    path = tmp_path / ("%s.yml" % role)
    path.write_text(json.dumps([{"name": "%s on this machine" % role, "hosts": "localhost", "connection": "local",
                                 "gather_facts": False,
                                 "vars": dict(extra_vars, ansible_python_interpreter=sys.executable),
                                 "roles": [{"role": "pvegpu.llmstack." + role}]}]))
    return str(path)


# What the docker role leaves for the nvidia role (it ran first on the host).
DOCKER_RAN = {"docker_engine": {"source": "debian", "installed": True}}


@pytest.mark.skipif(os_release().get("VERSION_ID", "").strip('"') == "13", reason="this machine runs Debian 13")
@pytest.mark.parametrize("role", ["nvidia", "docker"])
def test_an_unsupported_distribution_stops_the_role_before_any_install_task(tmp_path, role):
    release = os_release()
    rc, out, _err = playbook(role_playbook(tmp_path, DOCKER_RAN, role), "-i", "localhost,", "--check",
                             json_output=True)
    assert rc != 0
    runs = tasks_run(parse_json_report(out))
    last = runs[-1]
    result = last["hosts"]["localhost"]
    assert "Stop on a distribution" in last["task"] and result["failed"]
    assert "pvegpu.llmstack.%s supports Debian 13 (trixie) only; this host runs Debian %s" % (
        role, release["VERSION_ID"].strip('"')) in result["msg"]
    assert "Nothing was installed" in result["msg"]
    assert not any(r["hosts"]["localhost"].get("changed") for r in runs)
    assert not any("Install" in r["task"] for r in runs)


def test_bad_settings_are_named_before_anything_else(tmp_path):
    rc, out, _err = playbook(role_playbook(tmp_path, dict(DOCKER_RAN, **{
        "nvidia_container_toolkit_version": "latest", "nvidia_container_toolkit_gpg_fingerprints": ["F796ECB0"],
        "nvidia_driver_source": "cuda-repo"})), "-i", "localhost,", "--check", json_output=True)
    assert rc != 0
    runs = tasks_run(parse_json_report(out))
    assert "Check the settings" in runs[-1]["task"]
    message = str(runs[-1]["hosts"]["localhost"]["msg"])
    for name in ("nvidia_driver_branch", "nvidia_container_toolkit_version",
                 "nvidia_container_toolkit_gpg_fingerprints"):
        assert name + ":" in message
    assert not any("distribution" in r["task"].lower() and "Stop" in r["task"] for r in runs)


def test_the_docker_role_names_bad_settings_and_the_nvidia_roles_old_docker_variables(tmp_path):
    rc, out, _err = playbook(role_playbook(tmp_path, {
        "docker_daemon_options": {"runtimes": {"nvidia": {}}}, "docker_log_max_size": "100MB",
        "nvidia_docker_source": "docker", "nvidia_sysctl_apply": False}, "docker"),
        "-i", "localhost,", "--check", json_output=True)
    assert rc != 0
    runs = tasks_run(parse_json_report(out))
    assert "Check the settings" in runs[-1]["task"] and not any("Install" in r["task"] for r in runs)
    message = str(runs[-1]["hosts"]["localhost"]["msg"])
    for text in ("docker_daemon_options: must not set runtimes", "docker_log_max_size:",
                 "nvidia_docker_source was renamed docker_source",
                 "nvidia_sysctl_apply was renamed docker_sysctl_apply"):
        assert text in message


def nvidia_without_the_docker_role(tmp_path):
    """The nvidia role alone in check mode, dockerd looked for under tmp_path (this machine may have Debian's
    docker.io; role vars yield to -e only). Returns the tasks run; the run fails on this machine either way."""
    paths = json.dumps({"nvidia_dockerd_paths": [str(tmp_path / "sbin-dockerd"), str(tmp_path / "bin-dockerd")]})
    rc, out, _err = playbook(role_playbook(tmp_path, {}), "-i", "localhost,", "--check", "-e", paths,
                             json_output=True)
    assert rc != 0
    return tasks_run(parse_json_report(out))


def test_the_nvidia_role_stops_where_the_docker_role_did_not_run_and_no_dockerd_is_installed(tmp_path):
    runs = nvidia_without_the_docker_role(tmp_path)
    assert "Stop when Docker is not there" in runs[-1]["task"]
    assert "localhost has none: run pvegpu.llmstack.docker on it first" in runs[-1]["hosts"]["localhost"]["msg"]
    assert not any(r["hosts"]["localhost"].get("changed") for r in runs)


@pytest.mark.skipif(os_release().get("VERSION_ID", "").strip('"') == "13", reason="this machine runs Debian 13")
def test_a_dockerd_an_earlier_run_installed_lets_the_nvidia_role_run_without_the_docker_role(tmp_path):
    """--tags nvidia alone on a guest an earlier run gave Docker: past the Docker check (here it then stops on this
    machine's Debian 12, before any install task)."""
    (tmp_path / "bin-dockerd").write_text("")
    runs = nvidia_without_the_docker_role(tmp_path)
    assert "Stop on a distribution" in runs[-1]["task"]
    assert [r["hosts"]["localhost"].get("skipped") for r in runs if "Stop when Docker" in r["task"]] == [True]


# ---------------------------------------------------------------- docker_daemon_json

def test_daemon_json_is_merged_and_the_users_keys_kept(tmp_path):
    path = tmp_path / "daemon.json"
    user = {"data-root": "/srv/docker", "log-opts": {"labels": "team"},
            "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    path.write_text(json.dumps(user, indent=4))
    options = {"log-driver": "json-file", "log-opts": {"max-size": "100m", "max-file": "3"}}
    predicted = module("docker_daemon_json", {"path": str(path), "options": options}, check=True, diff=True)
    assert predicted["changed"] and json.loads(path.read_text()) == user
    assert sorted(predicted["changed_keys"]) == ["log-driver", "log-opts.max-file", "log-opts.max-size"]
    assert '"max-size": "100m"' in predicted["diff"]["after"] and predicted["diff"]["before"] == path.read_text()
    done = module("docker_daemon_json", {"path": str(path), "options": options})
    data = json.loads(path.read_text())
    assert done["changed"] and data["data-root"] == "/srv/docker" and data["runtimes"] == user["runtimes"]
    assert data["log-opts"] == {"labels": "team", "max-size": "100m", "max-file": "3"}
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    # Another tool reformats the file: same JSON, so nothing is rewritten.
    path.write_text(json.dumps(data, indent=8))
    before = path.read_text()
    again = module("docker_daemon_json", {"path": str(path), "options": options})
    assert not again["changed"] and path.read_text() == before


def test_a_missing_daemon_json_and_its_directory_are_created(tmp_path):
    path = tmp_path / "etc-docker" / "daemon.json"
    done = module("docker_daemon_json", {"path": str(path), "options": {"live-restore": True}})
    assert done["changed"] and json.loads(path.read_text()) == {"live-restore": True}


@pytest.mark.parametrize("text", ["{\"data-root\": \"/srv\",", "[\"not\", \"an object\"]"])
def test_a_broken_daemon_json_is_never_overwritten(tmp_path, text):
    path = tmp_path / "daemon.json"
    path.write_text(text)
    result = module("docker_daemon_json", {"path": str(path), "options": {"log-driver": "json-file"}})
    assert result["failed"] and "it is left as it is" in result["msg"] and str(path) in result["msg"]
    assert path.read_text() == text


def test_a_failing_validate_command_keeps_the_old_file(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text('{"debug": false}\n')
    refuse = "%s -c \"import sys; print('no, not this one'); sys.exit(3)\" %%s" % sys.executable
    result = module("docker_daemon_json", {"path": str(path), "options": {"debug": True}, "validate": refuse})
    assert result["failed"] and "refused the new" in result["msg"] and "no, not this one" in result["msg"]
    assert path.read_text() == '{"debug": false}\n' and os.listdir(tmp_path) == ["daemon.json"]
    accept = "%s -c \"import json, sys; json.load(open(sys.argv[1]))\" %%s" % sys.executable
    assert module("docker_daemon_json", {"path": str(path), "options": {"debug": True}, "validate": accept})["changed"]
    assert json.loads(path.read_text()) == {"debug": True}


# ---------------------------------------------------------------- nvidia_ctk_runtime (stand-in nvidia-ctk)

CTK = """#!%s
# Stand-in for nvidia-ctk (tests): runtime configure --runtime=docker --config=PATH, as NVIDIA documents it.
import json, sys
open(%r, "a").write(" ".join(sys.argv[1:]) + "\\n")
path = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--config=")][0]
text = open(path).read() if %r == "good" else ""
config = json.loads(text) if text.strip() else {}
config.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
out = json.dumps(config, indent=4)
if %r == "twice":
    out = out.replace('"runtimes": {', '"runtimes": {"nvidia": {"path": "x"}, ', 1)
open(path, "w").write(out + "\\n")
"""


def stand_in_ctk(tmp_path, behaviour="good"):
    log = tmp_path / "ctk.log"
    script = tmp_path / ("nvidia-ctk-" + behaviour)
    script.write_text(CTK % (sys.executable, str(log), behaviour, behaviour))
    script.chmod(0o755)
    return str(script), log


def test_nvidia_ctk_runs_only_when_the_runtime_is_missing(tmp_path):
    ctk, log = stand_in_ctk(tmp_path)
    path = tmp_path / "daemon.json"
    path.write_text('{"data-root": "/srv/docker"}')
    args = {"path": str(path), "nvidia_ctk": ctk}
    assert module("nvidia_ctk_runtime", args, check=True)["changed"] and not log.exists()
    first = module("nvidia_ctk_runtime", args)
    assert first["changed"] and first["runtime"] == {"args": [], "path": "nvidia-container-runtime"}
    assert log.read_text() == "runtime configure --runtime=docker --config=%s\n" % path
    assert json.loads(path.read_text())["data-root"] == "/srv/docker"
    second = module("nvidia_ctk_runtime", args)
    assert not second["changed"] and log.read_text().count("\n") == 1


def test_nvidia_ctk_that_declares_the_runtime_twice_fails(tmp_path):
    ctk, _log = stand_in_ctk(tmp_path, "twice")
    path = tmp_path / "daemon.json"
    path.write_text("{}")
    result = module("nvidia_ctk_runtime", {"path": str(path), "nvidia_ctk": ctk})
    assert result["failed"] and "declares the nvidia runtime 2 time(s)" in result["msg"]


def test_a_missing_nvidia_ctk_is_named(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text("{}")
    result = module("nvidia_ctk_runtime", {"path": str(path), "nvidia_ctk": "nvidia-ctk-not-here"})
    assert result["failed"] and "nvidia-ctk-not-here is not installed" in result["msg"]


# ---------------------------------------------------------------- apt_keyring

def test_a_key_with_an_expected_fingerprint_is_installed_dearmored(tmp_path):
    dest = tmp_path / "keyrings" / "fixture.gpg"
    args = {"url": "file://" + os.path.join(FIXTURES, "fixture-key.asc"), "dest": str(dest),
            "fingerprints": [ED25519]}
    predicted = module("apt_keyring", args, check=True)
    assert predicted["changed"] and not dest.exists()
    done = module("apt_keyring", args)
    assert done["changed"] and done["fingerprints"] == [ED25519]
    with open(os.path.join(FIXTURES, "fixture-key.asc"), "rb") as handle:
        gpg = subprocess.run(["gpg", "--dearmor"], input=handle.read(), capture_output=True, check=True)
    assert dest.read_bytes() == gpg.stdout and oct(os.stat(dest).st_mode & 0o777) == "0o644"
    assert not module("apt_keyring", args)["changed"]


def test_a_key_with_another_fingerprint_is_not_installed(tmp_path):
    dest = tmp_path / "nvidia.gpg"
    result = module("apt_keyring", {"url": "file://" + os.path.join(FIXTURES, "fixture-key-rsa.gpg"),
                                    "dest": str(dest), "fingerprints": [ED25519]})
    assert result["failed"] and "fingerprint %s, which is not one of the expected %s" % (RSA, ED25519) in result["msg"]
    assert not dest.exists()


# ---------------------------------------------------------------- nvidia_driver_facts

def test_driver_facts_on_a_recorded_tree_with_a_stand_in_modinfo(tmp_path):
    root = sysfs_fixture.build_fixture(os.path.join(sysfs_fixture.FIXTURES, "platform-a"), str(tmp_path / "a"))
    os.makedirs(os.path.join(root, "sys", "module", "nvidia"))
    with open(os.path.join(root, "sys", "module", "nvidia", "version"), "w") as handle:
        handle.write("550.163.01\n")
    modinfo = tmp_path / "modinfo"
    modinfo.write_text("#!/bin/sh\n[ \"$3\" = nvidia ] && echo 560.35.03\n")
    modinfo.chmod(0o755)
    facts = module("nvidia_driver_facts", {"sysfs_root": root, "modinfo": str(modinfo)})["ansible_facts"]
    state = facts["llmstack_nvidia_driver"]
    assert state["gpu_present"] and [f["device_id"] for f in state["functions"]] == ["10de:2204"] * 4
    assert state["loaded_version"] == "550.163.01" and state["installed_version"] == "560.35.03"
    assert state["reboot_required"] and "in memory is 550.163.01, the installed one 560.35.03" in state["reasons"][0]
    empty = sysfs_fixture.build_fixture(os.path.join(sysfs_fixture.FIXTURES, "no-nvidia"), str(tmp_path / "n"))
    none = module("nvidia_driver_facts", {"sysfs_root": empty, "modinfo": str(modinfo)})["ansible_facts"]
    assert not none["llmstack_nvidia_driver"]["gpu_present"]
    assert not none["llmstack_nvidia_driver"]["reboot_required"]


# ---------------------------------------------------------------- the Debian components the driver needs

def test_missing_components_render_a_sources_file_apt_reads(tmp_path):
    """The role's filter on recorded `apt-cache policy` output and its template; this machine's apt parses the
    result (indextargets lists what apt would download; nothing is downloaded)."""
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable,
                      "nvidia_components": "{{ lookup('ansible.builtin.file', '%s') | "
                                           "pvegpu.llmstack.nvidia_missing_components('trixie', 'debian') }}"
                                           % os.path.join(FIXTURES, "apt-cache-policy-trixie-mixed.txt")},
             "tasks": [{"name": "Render", "ansible.builtin.template": {
                 "src": os.path.join(ROOT, "roles", "nvidia", "templates", "components.sources.j2"),
                 "dest": str(parts / "llmstack-nvidia-components.sources"), "mode": "0644"}}]}]
    path = tmp_path / "render.yml"
    path.write_text(json.dumps(play))
    rc, out, err = playbook(str(path), "-i", "localhost,")
    assert rc == 0, out + err
    listing = subprocess.run(["apt-get", "-o", "Dir::Etc::SourceList=/dev/null",
                              "-o", "Dir::Etc::SourceParts=%s" % parts, "-o", "Dir::State::Lists=%s" % tmp_path,
                              "indextargets", "--no-release-info", "--format",
                              "$(IDENTIFIER) $(REPO_URI) $(RELEASE) $(COMPONENT)"],
                             capture_output=True, text=True, check=True)
    targets = sorted(set(line.split(" ", 1)[1] for line in listing.stdout.splitlines()
                         if line.startswith("Packages ")))
    assert targets == ["http://deb.debian.org/debian-security/ trixie-security non-free",
                       "http://deb.debian.org/debian/ trixie non-free",
                       "http://deb.debian.org/debian/ trixie non-free-firmware",
                       "http://deb.debian.org/debian/ trixie-updates non-free",
                       "http://deb.debian.org/debian/ trixie-updates non-free-firmware"]
