"""network_policy with packets: every host of inventories/lab gets its own network namespace, one bridge per VLAN
(in a switch namespace: this kernel has no 802.1Q) carries the inventory's addresses, a router namespace holds each
VLAN's gateway, each host loads the ruleset network_policy_render makes for it from the lab's topology, a listener
answers on every endpoint of the host, and every cell of the matrix (source host x destination service) is probed
with a real TCP connection: an allowed cell opens, a denied one does not, and the drop counters move.

Nothing leaves the namespaces this test creates (DESIGN.md section 3b); they are removed at the end."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("ip"),
                                reason="needs root, nft and ip (network namespaces)")
LAB = os.path.join(ROOT, "inventories", "lab")
PREFIX = "llmnp-"
CONTROLLER = "172.30.10.250"

LISTENER = r"""
import socket, sys, threading
def serve(address, port):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.close()
def echo(address, port):
    s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((address, port))
    while True:
        data, peer = s.recvfrom(64); s.sendto(data, peer)
for item in sys.argv[1:]:
    address, port, proto = (item.split(",") + ["tcp"])[:3]
    threading.Thread(target=serve if proto == "tcp" else echo, args=(address, int(port)), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

PROBE = r"""
import json, socket, sys, concurrent.futures
def probe(target):
    address, port = target[:2]
    if (list(target) + ["tcp"])[2] == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(1.5)
        try:
            s.sendto(b"corosync?", (address, port))
            return s.recvfrom(64)[0] == b"corosync?"
        except OSError:
            return False
        finally:
            s.close()
    try:
        socket.create_connection((address, port), timeout=1.5).close()
        return True
    except OSError:
        return False
targets = [tuple(t) for t in json.loads(sys.argv[1])]
with concurrent.futures.ThreadPoolExecutor(len(targets) or 1) as pool:
    print(json.dumps(list(pool.map(probe, targets))))
"""


def sh(*cmd, check=True):
    result = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise AssertionError("%s: %s" % (" ".join(cmd), result.stderr))
    return result


def ns(name):
    return PREFIX + name.replace("lab-", "")[:9]


def lab_topology():
    """The lab's topology, as docs/network.md's generator computes it (the topology action on localhost)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import gen_network_matrix

    return gen_network_matrix.topology()


def render(tmp_path, topology, vlans):
    """{host: {ruleset, matrix}} from the module, as the role runs it (one ad-hoc call per host)."""
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import network_policy

    settings = {"controller_addresses": [CONTROLLER], "ssh_vlans": ["mgmt"], "vlans": vlans}
    return dict((host, network_policy.build(topology, host, settings)) for host in topology["hosts"])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("network-policy")
    topology = lab_topology()
    vlans = {"mgmt": {"cidr": "172.30.10.0/24", "gateway": "172.30.10.1"},
             "inference": {"cidr": "172.30.20.0/24", "gateway": "172.30.20.1"},
             "apps": {"cidr": "172.30.30.0/24", "gateway": "172.30.30.1"}}
    made, listeners = [], []

    def add_ns(name):
        sh("ip", "netns", "add", name)
        made.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    try:
        add_ns(PREFIX + "switch")
        add_ns(PREFIX + "router")
        sh("ip", "netns", "exec", PREFIX + "router", "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for vlan in vlans:
            sh("ip", "-n", PREFIX + "switch", "link", "add", "br-" + vlan, "type", "bridge")
            sh("ip", "-n", PREFIX + "switch", "link", "set", "br-" + vlan, "up")
        index = 0

        def plug(name, vlan, address):
            nonlocal index
            index += 1
            inside, outside = "v%d" % index, "p%d" % index
            sh("ip", "link", "add", inside, "netns", name, "type", "veth", "peer", "name", outside, "netns",
               PREFIX + "switch")
            sh("ip", "-n", PREFIX + "switch", "link", "set", outside, "master", "br-" + vlan, "up")
            sh("ip", "-n", name, "addr", "add", "%s/24" % address, "dev", inside)
            sh("ip", "-n", name, "link", "set", inside, "up")

        for vlan, data in vlans.items():
            plug(PREFIX + "router", vlan, data["gateway"])
        hosts = topology["hosts"]
        for host, data in sorted(hosts.items()):
            add_ns(ns(host))
            for vlan, address in sorted(data["addresses"].items()):
                plug(ns(host), vlan, address)
            first = sorted(data["addresses"])[0] if data["addresses"] else None
            if first:
                sh("ip", "-n", ns(host), "route", "add", "default", "via", vlans[first]["gateway"])
        policies = render(tmp_path, topology, vlans)
        for host, policy in policies.items():
            path = tmp_path / ("%s.nft" % host)
            path.write_text(policy["ruleset"])
            sh("ip", "netns", "exec", ns(host), "nft", "-c", "-f", str(path))
            sh("ip", "netns", "exec", ns(host), "nft", "-f", str(path))
            # Every endpoint of the host (the first and last port of a range, UDP ones echo), and SSH.
            targets = ["%s,%d,%s" % (e["address"], port, e.get("proto", "tcp")) for e in topology["endpoints"]
                       if e["host"] == host and not e["address"].startswith("127.")
                       for port in sorted({e["port"], e.get("port_end", e["port"])})] + ["0.0.0.0,22"]
            if targets:
                proc = subprocess.Popen(["ip", "netns", "exec", ns(host), sys.executable, "-c", LISTENER] + targets,
                                        stdout=subprocess.PIPE, text=True)
                listeners.append(proc)
                assert proc.stdout.readline().strip() == "ready"
        # A container of lab-obs, as Docker makes one: its own namespace behind a bridge br-<id> of the host, the
        # bridge's address its default route.
        add_ns(PREFIX + "obs-ctr")
        sh("ip", "-n", ns("lab-obs"), "link", "add", "br-llmnptest", "type", "bridge")
        sh("ip", "-n", ns("lab-obs"), "addr", "add", "172.31.250.1/24", "dev", "br-llmnptest")
        sh("ip", "-n", ns("lab-obs"), "link", "set", "br-llmnptest", "up")
        sh("ip", "link", "add", "c0", "netns", PREFIX + "obs-ctr", "type", "veth", "peer", "name", "c0h", "netns",
           ns("lab-obs"))
        sh("ip", "-n", ns("lab-obs"), "link", "set", "c0h", "master", "br-llmnptest", "up")
        sh("ip", "-n", PREFIX + "obs-ctr", "addr", "add", "172.31.250.2/24", "dev", "c0")
        sh("ip", "-n", PREFIX + "obs-ctr", "link", "set", "c0", "up")
        sh("ip", "-n", PREFIX + "obs-ctr", "route", "add", "default", "via", "172.31.250.1")
        yield topology, policies
    finally:
        for proc in listeners:
            proc.kill()
            proc.wait()
        for name in made:
            sh("ip", "netns", "del", name, check=False)


def probe(host, targets, namespace=None):
    result = sh("ip", "netns", "exec", namespace or ns(host), sys.executable, "-c", PROBE, json.dumps(targets))
    return json.loads(result.stdout)


def address_of(topology, row):
    address = row["address"]
    if address in ("0.0.0.0", "::"):
        address = sorted(topology["hosts"][row["destination"]]["addresses"].values())[0]
    return address


def test_every_cell_of_the_matrix_is_what_packets_find(site):
    topology, policies = site
    matrix = next(iter(policies.values()))["matrix"]
    assert all(p["matrix"] == matrix for p in policies.values())
    # Loopback endpoints cannot be reached from another namespace at all; they are the host's own.
    rows = [r for r in matrix if not r["address"].startswith("127.") and r["source"] != r["destination"]]
    assert len(rows) > 50 and any(r["allowed"] for r in rows) and not all(r["allowed"] for r in rows)
    # The PVE hosts' own services are cells too (issue #31): corosync over UDP between the nodes, not from a client.
    assert {(r["source"], r["destination"], r["proto"], r["allowed"]) for r in rows if r["service"] == "corosync"} \
        >= {("lab-pve-b", "lab-pve-a", "udp", True), ("lab-client", "lab-pve-a", "udp", False)}
    found = []
    for source in sorted(topology["hosts"]):
        mine = [r for r in rows if r["source"] == source]
        targets = [[address_of(topology, r), r.get("port_end", r["port"]), r["proto"]] for r in mine]
        for r, opened in zip(mine, probe(source, targets), strict=True):
            found.append(dict(r, opened=opened))
    wrong = [(r["source"], r["destination"], r["service"], r["port"], r["allowed"]) for r in found
             if r["opened"] != r["allowed"]]
    assert wrong == []


def test_the_seeds_rules_hold(site):
    """Seed 000: clients on the apps VLAN reach the gateway's HTTPS and no model server; Prometheus only from the
    observability host; SSH from the controller and the management VLAN, not from the apps VLAN."""
    topology, policies = site
    by = dict(((r["source"], r["service"]), r["allowed"]) for r in next(iter(policies.values()))["matrix"])
    assert by[("lab-client", "https")] is True
    assert [by[("lab-client", s)] for s in ("vllm-fast", "vllm-balanced", "vllm-reasoning")] == [False] * 3
    assert [by[(h, "prometheus")] for h in ("lab-obs", "lab-gateway", "lab-gpu-a", "lab-client")] == \
        [True, False, False, False]
    mgmt_a = topology["hosts"]["lab-gpu-a"]["addresses"]["mgmt"]
    # SSH: from the management VLAN (the gateway's address there), not from the apps VLAN.
    assert probe("lab-client", [[mgmt_a, 22]]) == [False]
    assert probe("lab-gateway", [[mgmt_a, 22]]) == [True]
    dropped = sh("ip", "netns", "exec", ns("lab-gpu-a"), "nft", "list", "counter", "inet", "llmstack",
                 "dropped_input").stdout
    assert "packets 0 " not in dropped, dropped


def test_a_hosts_own_containers_reach_what_the_host_consumes_and_nothing_else(site):
    """Issue #31: Prometheus runs in a bridge-network container and sends to Alertmanager, scrapes itself and node
    exporter at the host's own address; only lo was trusted, so alerts were dropped. From a container behind a Docker
    bridge of lab-obs: its own Prometheus, Alertmanager and node exporter open (it consumes them), Langfuse's S3 and
    the other hosts' model servers as any other source finds them (the forward path is Docker's)."""
    topology, policies = site
    rows = [r for r in next(iter(policies.values()))["matrix"] if r["destination"] == "lab-obs"
            and r["source"] == "lab-obs" and not r["address"].startswith("127.")]
    services = {r["service"]: r["allowed"] for r in rows}
    assert services["alertmanager"] is True and services["prometheus"] is True and services["langfuse-s3"] is False
    opened = probe("lab-obs", [[address_of(topology, r), r["port"], r["proto"]] for r in rows],
                   namespace=PREFIX + "obs-ctr")
    assert [(r["service"], o) for r, o in zip(rows, opened, strict=True)] == \
        [(r["service"], r["allowed"]) for r in rows]


def test_docs_network_md_holds_the_matrix_of_the_model():
    """docs/network.md's table is what the model gives (tools/gen_network_matrix.py --check)."""
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_network_matrix.py"), "--check"],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
