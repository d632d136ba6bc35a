"""802.1Q on a VLAN-aware bridge, with real packets; run INSIDE the QEMU guest of test_guest_image.py.

    python3 -c "$(cat vlan_in_guest.py)" CONFIG_JSON      (the test sends it over SSH; prints one JSON line)

This machine's kernel has no 802.1Q and no bridge VLAN filtering; the guest's Debian kernel has both, so the test runs
this script there. Everything happens in network namespaces of the guest (named vl-*, removed at the end): no packet
leaves the guest, and the guest's own NIC (its SSH) is not touched.

The wiring, as on a PVE host with a ``bridge-vlan-aware yes`` vmbr (CONFIG_JSON "nodes" gives the VLANs and addresses):

    netns vl-switch: br0 (vlan_filtering 1, vlan_default_pvid 0: a port carries only the VLANs given to it)
      p-router  trunk, tagged members of every VLAN  <->  vl-router:  eth0 + eth0.<vid> (the VLAN gateways), forwarding
      p-gpu     trunk, tagged                        <->  vl-gpu:     eth0 + eth0.<vid> (a GPU VM with tagged NICs);
                                                                       loads CONFIG_JSON "ruleset" (nft -f)
      p-gateway trunk, tagged                        <->  vl-gateway: eth0 + eth0.<vid> (the LLM gateway)
      p-client  access: untagged, pvid <vid>         <->  vl-client:  eth0, untagged (a PVE NIC with tag=<vid>)

Then, all at once (threads, each entering its namespace with setns): listeners in vl-gpu on CONFIG_JSON "listen",
TCP connections from CONFIG_JSON "probes" ([netns, address, port]), pings ("ping"), and the VLAN hop: a raw Ethernet
frame with an 802.1Q header for VLAN "hop_vid" (and a unique marker) sent from the client's access port, and the same
frame (another marker) from the router's trunk as the control, while AF_PACKET listeners capture on the GPU VM's trunk
(vl-gpu eth0) and on the switch side of the client's port (vl-switch p-client: the frame did leave the client).
"""

import json
import os
import secrets
import select
import socket
import struct
import subprocess
import sys
import threading
import time

PREFIX = "vl-"
ETH_P_ALL = 0x0003
ETH_P_8021Q = 0x8100
SOL_PACKET, PACKET_AUXDATA, TP_STATUS_VLAN_VALID = 263, 8, 0x10      # linux/socket.h, linux/if_packet.h
ETH_P_EXPERIMENTAL = 0x88B5     # IEEE 802 local experimental EtherType: nothing in the guest handles it
STEPS = []                      # [command (shortened), seconds]: where the time went (the first run loads modules)


def run(*cmd, stdin=None):
    started = time.monotonic()
    result = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, check=False)
    STEPS.append([" ".join(cmd)[:40], round(time.monotonic() - started, 2)])
    if result.returncode != 0:
        raise RuntimeError("%s: exit %d: %s%s" % (" ".join(cmd), result.returncode, result.stdout, result.stderr))
    return result.stdout


def batch(tool, netns, lines):
    """``ip -n NETNS -batch -`` (or bridge): one process for many commands (process starts are slow under TCG)."""
    run(tool, "-n", PREFIX + netns, "-batch", "-", stdin="\n".join(lines) + "\n")


def enter(netns):
    """Move the calling thread (only it) into the namespace: the sockets it opens afterwards live there."""
    fd = os.open("/run/netns/" + PREFIX + netns, os.O_RDONLY)
    try:
        os.setns(fd, os.CLONE_NEWNET)
    finally:
        os.close(fd)


def cleanup(nodes):
    """Removes the namespaces (and with them the bridge and the veth pairs); -force: on past the ones not there."""
    lines = "".join("netns del %s%s\n" % (PREFIX, name) for name in ["switch"] + sorted(nodes))
    subprocess.run(["ip", "-force", "-batch", "-"], input=lines, capture_output=True, text=True, check=False)


def build(config):
    nodes = config["nodes"]
    # The namespaces and the veth pairs in one batch, from the root namespace of the guest: each end is made in its
    # namespace at once (eth0 in the node's, p-<node> in the switch's).
    root = ["netns add %s%s" % (PREFIX, name) for name in ["switch"] + sorted(nodes)]
    root += ["link add eth0 netns %s%s type veth peer name p-%s netns %sswitch" % (PREFIX, name, name, PREFIX)
             for name in sorted(nodes)]
    run("ip", "-batch", "-", stdin="\n".join(root) + "\n")
    switch = ["link set lo up", "link add br0 type bridge vlan_filtering 1 vlan_default_pvid 0", "link set br0 up"]
    switch += ["link set p-%s master br0 up" % name for name in sorted(nodes)]
    vlans = []
    for name, node in sorted(nodes.items()):
        inside = ["link set lo up", "link set eth0 up"]
        if "access" in node:
            vlans.append("vlan add dev p-%s vid %d pvid untagged" % (name, node["access"]))
            inside.append("addr add %s dev eth0" % node["address"])
        for vid, address in sorted(node.get("trunk", {}).items()):
            vlans.append("vlan add dev p-%s vid %s" % (name, vid))
            inside += ["link add link eth0 name eth0.%s type vlan id %s" % (vid, vid),
                       "addr add %s dev eth0.%s" % (address, vid), "link set eth0.%s up" % vid]
        if node.get("via"):
            inside.append("route add default via %s" % node["via"])
        node["commands"] = inside
    batch("ip", "switch", switch)
    batch("bridge", "switch", vlans)
    for name, node in sorted(nodes.items()):
        batch("ip", name, node.pop("commands"))
        if node.get("forward"):
            run("ip", "netns", "exec", PREFIX + name, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    if config.get("ruleset"):
        # As the network_policy role loads it (nft -f: the table as a whole, or nothing).
        run("ip", "netns", "exec", PREFIX + "gpu", "nft", "-f", "-", stdin=config["ruleset"])


def mac_of(netns, ifname):
    return json.loads(run("ip", "-n", PREFIX + netns, "-j", "link", "show", ifname))[0]["address"]


class Listener(threading.Thread):
    """TCP listeners in a namespace; records who connected to what."""

    def __init__(self, netns, endpoints, stop):
        super().__init__(daemon=True)
        self.netns, self.endpoints, self.stop, self.ready = netns, endpoints, stop, threading.Event()
        self.accepted, self.error = [], None

    def run(self):
        try:
            enter(self.netns)
            socks = {}
            for address, port in self.endpoints:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, port))
                sock.listen(16)
                socks[sock] = (address, port)
        except Exception as exc:  # reported in the JSON, not lost in a thread
            self.error = repr(exc)
            return
        finally:
            self.ready.set()
        while not self.stop.is_set():
            for sock in select.select(list(socks), [], [], 0.1)[0]:
                conn, peer = sock.accept()
                self.accepted.append([socks[sock][0], socks[sock][1], peer[0]])
                conn.close()


class Sniffer(threading.Thread):
    """An AF_PACKET listener on one interface: which of the markers arrived there (tag as the kernel reports it)."""

    def __init__(self, netns, ifname, markers, stop):
        super().__init__(daemon=True)
        self.netns, self.ifname, self.markers, self.stop = netns, ifname, markers, stop
        self.ready, self.seen, self.error = threading.Event(), {}, None

    def run(self):
        try:
            enter(self.netns)
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)  # the VLAN tag the kernel took off, as ancillary data
            sock.bind((self.ifname, 0))
            sock.settimeout(0.1)
        except Exception as exc:  # reported in the JSON, not lost in a thread
            self.error = repr(exc)
            return
        finally:
            self.ready.set()
        while not self.stop.is_set():
            try:
                data, ancillary, _flags, _addr = sock.recvmsg(65535, socket.CMSG_SPACE(32))
            except TimeoutError:
                continue
            for marker in self.markers:
                if marker.encode() in data:
                    self.seen[marker] = {"vid": self.vid(data, ancillary)}

    @staticmethod
    def vid(data, ancillary):
        for level, kind, aux in ancillary:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(aux) >= 20:
                # struct tpacket_auxdata: status, len, snaplen, mac, net (u32, u32, u32, u16, u16), vlan_tci (u16)
                status, tci = struct.unpack_from("I", aux, 0)[0], struct.unpack_from("H", aux, 16)[0]
                if status & TP_STATUS_VLAN_VALID:
                    return tci & 0x0FFF
        if struct.unpack_from("!H", data, 12)[0] == ETH_P_8021Q:
            return struct.unpack_from("!H", data, 14)[0] & 0x0FFF
        return None


def send_tagged(netns, ifname, dst, vid, marker):
    """A raw Ethernet frame with an 802.1Q header for ``vid``, written to ``ifname`` as it is (no kernel VLAN code)."""
    enter(netns)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((ifname, 0))
        src = sock.getsockname()[4]
        frame = (bytes.fromhex(dst.replace(":", "")) + src + struct.pack("!HHH", ETH_P_8021Q, vid, ETH_P_EXPERIMENTAL)
                 + marker.encode())
        sock.send(frame.ljust(64, b"\0"))


def connect(netns, address, port, timeout):
    enter(netns)
    try:
        socket.create_connection((address, port), timeout=timeout).close()
        return True, None
    except OSError as exc:
        return False, type(exc).__name__


def in_thread(function, *args):
    box = {}

    def body():
        try:
            box["value"] = function(*args)
        except Exception as exc:  # reported in the JSON, not lost in a thread
            box["error"] = repr(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, box


def exercise(config):
    timeout = float(config.get("timeout", 1.5))
    token = secrets.token_hex(6)
    markers = {"access": "llmstack-vlan-hop-%s-from-access-port" % token,
               "trunk": "llmstack-vlan-hop-%s-from-trunk-port" % token}
    stop = threading.Event()
    listener = Listener("gpu", [tuple(e) for e in config["listen"]], stop)
    sniffers = {"vl-gpu eth0": Sniffer("gpu", "eth0", list(markers.values()), stop),
                "vl-switch p-client": Sniffer("switch", "p-client", list(markers.values()), stop)}
    for thread in [listener] + list(sniffers.values()):
        thread.start()
        thread.ready.wait(10)
    started = time.monotonic()
    pings = [(netns, address, subprocess.Popen(["ip", "netns", "exec", PREFIX + netns, "ping", "-n", "-q", "-c", "1",
                                                "-W", str(int(timeout) + 1), address],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
             for netns, address in config.get("ping", [])]
    probes = [(p, in_thread(connect, p[0], p[1], p[2], timeout)) for p in config["probes"]]
    dst = mac_of("gpu", "eth0.%d" % config["hop_vid"])
    sent = [in_thread(send_tagged, "client", "eth0", dst, config["hop_vid"], markers["access"]),
            in_thread(send_tagged, "router", "eth0", dst, config["hop_vid"], markers["trunk"])]
    for thread, _box in sent + [t for _p, t in probes]:
        thread.join(timeout + 5)
    # The capture window: at least `timeout` seconds after the frames went out.
    time.sleep(max(0.0, timeout - (time.monotonic() - started)))
    stop.set()
    for thread in [listener] + list(sniffers.values()):
        thread.join(5)
    result = {
        "probes": [{"netns": p[0], "address": p[1], "port": p[2], "opened": box.get("value", (None,))[0],
                    "error": box.get("value", (None, None))[1] or box.get("error")} for p, (_t, box) in probes],
        "pings": [{"netns": n, "address": a, "rc": proc.wait(timeout + 5)} for n, a, proc in pings],
        "accepted": listener.accepted,
        "markers": markers,
        "sent": [box.get("error") for _t, box in sent],
        "captured": dict((name, s.seen) for name, s in sniffers.items()),
        "errors": [e for e in [listener.error] + [s.error for s in sniffers.values()] if e],
        "exercise_seconds": round(time.monotonic() - started, 2),
    }
    return result


def main():
    config = json.loads(sys.argv[1])
    nodes = config["nodes"]
    cleanup(nodes)
    started = time.monotonic()
    try:
        build(config)
        built = time.monotonic()
        result = exercise(config)
        result["bridge_vlans"] = json.loads(run("bridge", "-n", PREFIX + "switch", "-j", "vlan", "show"))
        if config.get("ruleset"):
            counter = json.loads(run("ip", "netns", "exec", PREFIX + "gpu", "nft", "-j", "list", "counter", "inet",
                                     "llmstack", "dropped_input"))
            result["dropped_input"] = [c["counter"]["packets"] for c in counter["nftables"] if "counter" in c][0]
        result["build_seconds"] = round(built - started, 2)
        result["kernel"] = os.uname().release
        result["steps"] = STEPS
    finally:
        cleanup(nodes)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
