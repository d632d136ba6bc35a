"""A mirror away for a moment does not fail a role's apt task: network_policy's install (nftables, and the apt
module's own python3-apt first) on a plain Debian 13 container whose apt asks through tests/harness/flaky_mirror.py,
a test double of a mirror that is away (it refuses connections, as the mirror did in the CI run this came from, or
answers 503 for its first seconds) and then passes requests on to Debian's real mirror.
apt's own retries are off in the container (Acquire::Retries 0), so that what carries the task over the outage is the
role's retry (until + pvegpu.llmstack.apt_fetch_failed), not apt's backoff, which gives up within seconds and, once
it could not connect to an address, does not try it again in that apt-get. A failure that is not a download's (a
package that does not exist) is not run again."""

import os
import subprocess
import time

import pytest
from conftest import BIN, ROOT, ansible_env, parse_json_report, playbook, podman, why_it_failed

pytestmark = pytest.mark.slow
NAME = "llmstack-apt-retry"
IMAGE = "localhost/llmstack-debian13"  # minbase trixie + python3: no python3-apt, no nftables
DOWN = 8  # seconds of 503 from the first request: longer than one failed attempt, shorter than the delay (10 s)

INVENTORY = """
all:
  hosts:
    apt-host:
      ansible_host: %s
      ansible_connection: podman_pipelined
      ansible_python_interpreter: /usr/bin/python3
""" % NAME

PLAY = """
- name: Install what network_policy installs, through a mirror that is away for its first seconds
  hosts: apt-host
  gather_facts: false
  vars:
    llmstack_apt_retries: %d
    llmstack_apt_retry_delay: 10
  tasks:
    - name: The role's install tasks
      ansible.builtin.include_role:
        name: pvegpu.llmstack.network_policy
        tasks_from: install.yml
"""

NO_SUCH_PACKAGE = """
- name: A failure that is not a download's
  hosts: apt-host
  gather_facts: false
  tasks:
    - name: Install a package that does not exist
      ansible.builtin.apt:
        name: llmstack-no-such-package
      register: installed
      until: not (installed | pvegpu.llmstack.apt_fetch_failed)
      retries: 3
      delay: 10
"""


@pytest.fixture
def host(tmp_path):
    podman("rm", "-f", "-t", "0", NAME, check=False)
    podman("run", "-d", "--name", NAME, "--label", "io.llmstack.test=1", IMAGE, "sleep", "infinity")
    try:
        sources = podman("exec", NAME, "sh", "-c", "cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null",
                         check=False).stdout
        if "http://" not in sources:  # the image takes this machine's mirror (tools/debian-mirror.sh)
            pytest.skip("the image's mirror is not http:// (the double is an http proxy): %s" % sources.strip())
        podman("cp", os.path.join(ROOT, "tests", "harness", "flaky_mirror.py"), "%s:/usr/local/bin/flaky-mirror" % NAME)
        podman("exec", "-i", NAME, "sh", "-c", "cat > /etc/apt/apt.conf.d/90flaky-mirror",
               stdin='Acquire::http::Proxy "http://127.0.0.1:3142/";\nAcquire::Retries "0";\n')
        (tmp_path / "hosts.yml").write_text(INVENTORY)
        yield tmp_path
    finally:
        podman("rm", "-f", "-t", "0", NAME, check=False)


def start_mirror(down):
    """Start the double in the container (its pid in /run/flaky-mirror.pid); back once it accepts connections."""
    podman("exec", "-d", NAME, "sh", "-c", "echo $$ > /run/flaky-mirror.pid; exec python3 /usr/local/bin/flaky-mirror "
           "--down %s --log /tmp/flaky-mirror.log" % down)
    probe = "import socket; socket.create_connection(('127.0.0.1', 3142), 1).close()"
    deadline = time.monotonic() + 30
    while podman("exec", NAME, "python3", "-c", probe, check=False).returncode != 0:
        assert time.monotonic() < deadline, "the mirror double did not listen"
        time.sleep(0.2)


def stop_mirror():
    podman("exec", NAME, "sh", "-c", "kill $(cat /run/flaky-mirror.pid) && rm /run/flaky-mirror.pid")
    probe = "import socket; socket.create_connection(('127.0.0.1', 3142), 1).close()"
    deadline = time.monotonic() + 30
    while podman("exec", NAME, "python3", "-c", probe, check=False).returncode == 0:
        assert time.monotonic() < deadline, "the mirror double did not stop"
        time.sleep(0.2)


def installed(package):
    return podman("exec", NAME, "dpkg-query", "-W", "-f", "${db:Status-Status}", package, check=False).stdout


def test_an_apt_task_runs_again_while_the_mirror_refuses_connections_and_installs_once_it_is_back(host):
    """The CI failure: package lists were read, then the mirror refused connections while the .debs were fetched.
    The mirror comes back exactly when the run says it will run the task again (the default callback's FAILED -
    RETRYING line), so the first attempt always meets it away and the second always finds it back."""
    start_mirror(0)
    podman("exec", NAME, "apt-get", "update", "-qq")  # the lists, as the docker role's run had them
    stop_mirror()
    (host / "play.yml").write_text(PLAY % 3)
    run = subprocess.Popen([os.path.join(BIN, "ansible-playbook"), str(host / "play.yml"), "-i",
                            str(host / "hosts.yml")], cwd=ROOT, env=ansible_env(ANSIBLE_STDOUT_CALLBACK="default"),
                           text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said = []
    try:
        for line in run.stdout:
            said.append(line)
            if line.startswith("FAILED - RETRYING:") and len([s for s in said if s.startswith("FAILED")]) == 1:
                start_mirror(0)
        rc = run.wait(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    output = "".join(said)
    assert rc == 0, output[-4000:]
    retried = [s for s in said if s.startswith("FAILED - RETRYING:")]
    assert len(retried) == 1 and "Install nftables" in retried[0], output[-4000:]
    assert (installed("nftables"), installed("python3-apt")) == ("installed", "installed")


def test_an_apt_task_runs_again_while_the_mirror_answers_503_and_installs_once_it_is_back(host):
    start_mirror(DOWN)
    (host / "play.yml").write_text(PLAY % 3)
    rc, out, err = playbook(str(host / "play.yml"), "-i", str(host / "hosts.yml"), json_output=True)
    assert rc == 0, why_it_failed(out, err)
    answers = podman("exec", NAME, "cat", "/tmp/flaky-mirror.log").stdout.split()[::2]
    assert answers[0] == "503" and "200" in answers, answers  # the first attempt was told 503, a later one got through
    tasks = [t for play in parse_json_report(out)["plays"] for t in play["tasks"]]
    install = [t["hosts"]["apt-host"] for t in tasks if t["task"]["name"].endswith("Install nftables")]
    assert install[0]["attempts"] >= 2 and install[0]["changed"], install
    assert (installed("nftables"), installed("python3-apt")) == ("installed", "installed")


def test_without_retries_the_same_outage_fails_the_task(host):
    start_mirror(DOWN)
    (host / "play.yml").write_text(PLAY % 0)
    rc, out, err = playbook(str(host / "play.yml"), "-i", str(host / "hosts.yml"), json_output=True)
    assert rc != 0
    assert "503  Service Unavailable" in out, out[-3000:]
    assert installed("nftables") != "installed"


def test_a_package_that_does_not_exist_is_not_tried_again(host):
    start_mirror(0)
    (host / "nosuch.yml").write_text(NO_SUCH_PACKAGE)
    rc, out, err = playbook(str(host / "nosuch.yml"), "-i", str(host / "hosts.yml"), json_output=True)
    assert rc != 0
    tasks = [t for play in parse_json_report(out)["plays"] for t in play["tasks"]]
    result = [t["hosts"]["apt-host"] for t in tasks if t["task"]["name"] == "Install a package that does not exist"][0]
    assert result["failed"] and "llmstack-no-such-package" in result["msg"], result
    assert result.get("attempts", 1) == 1, result
