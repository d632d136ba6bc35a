"""The network_policy role on a host: a privileged systemd container (its own network namespace, so nft changes
nothing of this machine) from localhost/llmstack-debian13-systemd, with nftables installed and a table of the
host's own loaded first, as a Debian host with a firewall has. The role renders the gateway's ruleset from the
topology, loads it (nft -c, one nft -f, the rollback confirmed over a new connection), persists it; a rerun and a
check run change nothing; a ruleset loaded without confirmation is rolled back by itself; absent leaves the
ruleset and nftables.conf byte for byte as they were; a restart or reload of nftables.service keeps a table as Docker
makes it; the rollback is a systemd timer of its own."""

import json
import os
import subprocess
import time

import pytest
from conftest import BIN, ROOT, ansible_env, parse_json_report, playbook, podman, systemd_container, why_it_failed

pytestmark = pytest.mark.slow
NAME = "llmstack-np-role"
OWN_TABLE = "table inet hostfw {\n\tchain input {\n\t\ttype filter hook input priority filter + 10; policy accept;\n" \
            "\t\ttcp dport 5555 counter drop\n\t}\n}\n"

INVENTORY = """
all:
  vars:
    ansible_connection: podman_pipelined
    ansible_python_interpreter: /usr/bin/python3
    llmstack_vlans:
      mgmt: {id: 10, cidr: 10.77.10.0/24, gateway: 10.77.10.1, bridge: vmbr0}
      apps: {id: 30, cidr: 10.77.30.0/24, gateway: 10.77.30.1, bridge: vmbr0}
  children:
    llm_gateways:
      hosts:
        np-gw:
          ansible_host: %s
          llmstack_interfaces: [{vlan: mgmt, address: 10.77.10.12}, {vlan: apps, address: 10.77.30.12}]
    llm_clients:
      hosts:
        np-client:
          llmstack_interfaces: [{vlan: apps, address: 10.77.30.11}]
""" % NAME

PLAY = """
- name: The network policy of the gateway
  hosts: np-gw
  gather_facts: false
  roles:
    - role: pvegpu.llmstack.network_policy
      network_policy_controller_addresses: [10.88.0.1]
      network_policy_rollback_seconds: 30
"""

# What Docker puts into the ruleset for a published port (through iptables-nft): a nat table DNATing to a container.
DOCKER_LIKE = ("table ip nat {\n\tchain DOCKER {\n\t}\n\tchain PREROUTING {\n\t\ttype nat hook prerouting priority "
               "dstnat; policy accept;\n\t\tfib daddr type local counter jump DOCKER\n\t}\n}\n"
               "add rule ip nat DOCKER tcp dport 4000 counter dnat to 172.17.0.2:4000\n")


def inside(*cmd):
    return podman("exec", NAME, *cmd).stdout


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    with systemd_container(NAME, ["nftables"]):
        podman("exec", "-i", NAME, "nft", "-f", "-", stdin=OWN_TABLE)
        path = tmp_path_factory.mktemp("np-role")
        (path / "hosts.yml").write_text(INVENTORY)
        (path / "play.yml").write_text(PLAY)
        yield path


def run(path, *extra):
    rc, out, err = playbook(str(path / "play.yml"), "-i", str(path / "hosts.yml"), *extra, json_output=True)
    assert rc == 0, why_it_failed(out, err)
    return parse_json_report(out)["stats"]["np-gw"]


def test_the_policy_is_loaded_persisted_kept_and_taken_away_exactly(host):
    before_ruleset = inside("nft", "list", "ruleset")
    before_conf = inside("cat", "/etc/nftables.conf")
    assert "table inet hostfw" in before_ruleset and "llmstack" not in before_ruleset

    assert run(host)["changed"] > 0
    table = inside("nft", "-s", "list", "table", "inet", "llmstack")
    assert "policy drop" in table and "10.77.30.11" in table  # the client may reach the gateway's HTTPS
    assert "dport 443" in table and "10.88.0.1" in table
    assert "table inet hostfw" in inside("nft", "list", "ruleset")  # the host's own table is untouched
    assert inside("cat", "/etc/nftables.conf").endswith('include "/etc/nftables.d/llmstack.nft"\n')
    assert inside("systemctl", "is-enabled", "nftables").strip() == "enabled"
    assert inside("cat", "/etc/nftables.d/llmstack.nft").startswith("# Managed by pvegpu.llmstack (network_policy)")
    # The rollback was confirmed over a new connection: nothing pending.
    assert podman("exec", NAME, "test", "-e", "/var/lib/llmstack/nft/rollback.pid", check=False).returncode == 1

    assert run(host)["changed"] == 0
    assert run(host, "--check", "--diff")["changed"] == 0

    # Issue #31: Debian's nftables.conf flushes the whole ruleset and the service's stop does too, so a restart or
    # reload took Docker's tables away (its published ports). A table as Docker makes it (ip nat, DNAT to a
    # container) must outlive both; the policy comes back as it was (a rerun changes nothing).
    podman("exec", "-i", NAME, "nft", "-f", "-", stdin=DOCKER_LIKE)
    for action in ("restart", "reload", "restart"):
        podman("exec", NAME, "systemctl", action, "nftables")
        ruleset = inside("nft", "list", "ruleset")
        assert "table ip nat" in ruleset and "dnat to 172.17.0.2:4000" in ruleset, (action, ruleset)
        assert "table inet hostfw" in ruleset, action
        assert inside("nft", "-s", "list", "table", "inet", "llmstack") == table, action
    assert run(host)["changed"] == 0
    # What the restarts added besides: the Docker-like table and Debian's stock (empty) table inet filter.
    podman("exec", NAME, "nft", "delete", "table", "ip", "nat")
    podman("exec", NAME, "nft", "delete", "table", "inet", "filter")

    # A ruleset loaded without its confirmation comes back by itself.
    other = ("table inet llmstack {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n"
             "\t}\n}\n")
    cmd = [os.path.join(BIN, "ansible"), "np-gw", "-i", str(host / "hosts.yml"), "-m", "pvegpu.llmstack.nft_table",
           "-a", json.dumps({"content": other, "rollback_seconds": 3})]
    result = subprocess.run(cmd, cwd=ROOT, env=ansible_env(), text=True, capture_output=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "policy drop" not in inside("nft", "-s", "list", "table", "inet", "llmstack")
    # The rollback is a systemd timer of its own (it outlives the connection that armed it), not a child process.
    assert inside("systemctl", "is-active", "llmstack-nft-rollback.timer").strip() == "active"
    deadline = time.time() + 20
    while inside("nft", "-s", "list", "table", "inet", "llmstack") != table:
        assert time.time() < deadline, "the rollback did not restore the table"
        time.sleep(0.5)

    absent = host / "absent.yml"
    absent.write_text(PLAY.replace("network_policy_rollback_seconds: 30", "network_policy_state: absent"))
    rc, out, err = playbook(str(absent), "-i", str(host / "hosts.yml"))
    assert rc == 0, why_it_failed(out, err)
    assert inside("nft", "list", "ruleset") == before_ruleset
    assert inside("cat", "/etc/nftables.conf") == before_conf
    assert podman("exec", NAME, "test", "-e", "/etc/nftables.d/llmstack.nft", check=False).returncode == 1
