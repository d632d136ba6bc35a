"""A run killed while dpkg installs a package (issue #34: a run killed anywhere converges on rerun). On a host as a
site has it - a privileged systemd container from localhost/llmstack-debian13-systemd - a real dpkg is SIGKILLed
while a package's postinst runs (a package built here whose postinst waits for a flag file), so dpkg's journal is
left in /var/lib/dpkg/updates exactly as a killed run leaves it, and apt-get refuses every install from then on
("dpkg was interrupted"). A role's install step then runs as the rerun would (network_policy's, which installs
nftables from Debian's mirror): dpkg_recover finishes the half-done install first (`dpkg --configure -a`), so apt
installs; check mode only reports it; a second run changes nothing. Nothing here is a double.

Without dpkg_recover the role's apt task failed on this host with dpkg's "you must manually run 'dpkg --configure
-a'"."""

import time

import pytest
from conftest import parse_json_report, playbook, podman, systemd_container, tasks_run, why_it_failed

pytestmark = pytest.mark.slow
NAME = "llmstack-dpkg-killed"
RECOVER = ("pvegpu.llmstack.network_policy : Finish a package installation a killed run left half done "
           "(dpkg --configure -a)")

INVENTORY = """
all:
  hosts:
    dpkg-host:
      ansible_host: %s
      ansible_connection: podman_pipelined
      ansible_python_interpreter: /usr/bin/python3
""" % NAME

PLAY = """
- name: A role's install step, as the rerun of a killed run does it
  hosts: dpkg-host
  gather_facts: false
  tasks:
    - name: Install what network_policy needs
      ansible.builtin.import_role:
        name: pvegpu.llmstack.network_policy
        tasks_from: install
"""

CONTROL = """Package: llmstack-slow-postinst
Version: 1
Architecture: all
Maintainer: llmstack tests <tests@llmstack.test>
Description: a package whose postinst waits while /run/slow-postinst exists
"""

POSTINST = """#!/bin/sh
touch /run/postinst-running
while [ -e /run/slow-postinst ]; do sleep 0.2; done
exit 0
"""


def inside(*cmd, check=True):
    return podman("exec", NAME, *cmd, check=check)


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """The host, its dpkg killed in the middle of configuring a package (its journal left behind)."""
    with systemd_container(NAME):
        inside("mkdir", "-p", "/root/slow/DEBIAN")
        podman("exec", "-i", NAME, "sh", "-c", "cat > /root/slow/DEBIAN/control", stdin=CONTROL)
        podman("exec", "-i", NAME, "sh", "-c", "cat > /root/slow/DEBIAN/postinst", stdin=POSTINST)
        inside("chmod", "0755", "/root/slow/DEBIAN/postinst")
        inside("dpkg-deb", "--build", "/root/slow", "/root/slow.deb")
        inside("touch", "/run/slow-postinst")
        inside("sh", "-c", "dpkg -i /root/slow.deb >/dev/null 2>&1 & echo $! > /run/dpkg.pid")
        deadline = time.monotonic() + 60
        while inside("test", "-e", "/run/postinst-running", check=False).returncode != 0:
            assert time.monotonic() < deadline, "the package's postinst did not start"
            time.sleep(0.5)
        inside("sh", "-c", "kill -KILL $(cat /run/dpkg.pid) && rm /run/slow-postinst")
        path = tmp_path_factory.mktemp("dpkg-killed")
        (path / "hosts.yml").write_text(INVENTORY)
        (path / "play.yml").write_text(PLAY)
        yield path


def run(path, *extra):
    return playbook(str(path / "play.yml"), "-i", str(path / "hosts.yml"), *extra, json_output=True)


def test_the_rerun_of_a_run_killed_inside_dpkg_finishes_it_and_installs(killed):
    journal = [name for name in inside("ls", "/var/lib/dpkg/updates").stdout.split() if name.isdigit()]
    assert journal, "dpkg left no journal: the kill came too late (the test proves nothing)"
    refused = inside("apt-get", "install", "-y", "--no-download", "nftables", check=False)
    assert refused.returncode != 0 and "dpkg was interrupted" in refused.stderr, refused.stderr

    rc, out, err = run(killed, "--check")
    assert rc == 0, why_it_failed(out, err)
    predicted = [t["hosts"]["dpkg-host"] for t in tasks_run(parse_json_report(out)) if t["task"] == RECOVER]
    assert [(r["changed"], r["journal"], r["packages"]) for r in predicted] == [
        (True, journal, ["llmstack-slow-postinst"])]
    assert [n for n in inside("ls", "/var/lib/dpkg/updates").stdout.split() if n.isdigit()] == journal  # untouched

    rc, out, err = run(killed)
    assert rc == 0, why_it_failed(out, err)
    assert inside("ls", "/var/lib/dpkg/updates").stdout.split() == []
    assert inside("dpkg", "--audit").stdout == ""
    status = inside("dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n", "llmstack-slow-postinst",
                    "nftables").stdout.split("\n")
    assert [line.split()[:2] for line in status if line] == [["llmstack-slow-postinst", "ii"], ["nftables", "ii"]]

    rc, out, err = run(killed)
    assert rc == 0, why_it_failed(out, err)
    assert parse_json_report(out)["stats"]["dpkg-host"]["changed"] == 0
