"""The guest_image role: a Debian 13 image built by the real role (debootstrap from the machine's own mirror,
mkfs.ext4 -d, mkfs.vfat + mtools, sfdisk), booted with QEMU TCG + OVMF and checked over SSH.

QEMU runs the image as PVE would present it (q35, OVMF, virtio-scsi disk, a virtio NIC with the inventory's MAC),
with user networking restricted to the guest (``restrict=on``): the only way in is a forward from a loopback
port to the guest's SSH. The QEMU guest agent is reached over its virtio-serial socket. Nothing here is a double;
what is not exercised is a real PVE (the import of the image into a VM) and GPUs.

The booted guest also hosts the 802.1Q checks (vlan_in_guest.py, run there over SSH): this machine's kernel has no
802.1Q and no bridge VLAN filtering, the guest's has both. In network namespaces of the guest, a VLAN-aware bridge (as
PVE's ``bridge-vlan-aware yes`` vmbr) joins a router on a stick, a GPU VM and the LLM gateway on trunks (sub-interfaces
per VLAN) and an apps client on an access port; the GPU VM loads the nftables ruleset network_policy renders for it.
Nothing of that leaves the guest.
"""

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time

import pytest
import yaml
from conftest import ROOT, parse_json_report, playbook

pytestmark = pytest.mark.slow

MAC = "52:54:00:4c:4d:01"
ADDRESS = "10.99.20.30"          # the inference VLAN of the test inventory; slirp's network in QEMU
CACHE = os.path.join(ROOT, ".cache", "guest-image")
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"


def mirror():
    return subprocess.run([os.path.join(ROOT, "tools", "debian-mirror.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()


def write_inventory(base, **overrides):
    host = {"ansible_connection": "local", "inventory_check_publish_facts": False,
            "llmstack_interfaces": [{"vlan": "inference", "address": ADDRESS, "mac": MAC}],
            "guest_image_mirror": mirror(), "guest_image_dir": str(base / "images"),
            "guest_image_work_dir": str(base / "work"), "guest_image_cache_dir": CACHE,
            "guest_image_install_tools": False, "guest_image_import": False, "guest_image_disk_gib": 3,
            "guest_image_domain": "lab.test",
            # The VM's host key (no trust on first use): the secret and known_hosts of this test, not the home's.
            "guest_image_host_key_dir": str(base / "host-keys"), "guest_image_known_hosts": str(base / "known_hosts"),
            # nft for the 802.1Q test (test_the_policy_holds_on_8021q_subinterfaces), ifupdown2 for the pve_bridge
            # role's (the guest is its PVE host: restrict=on, no mirror to install from); python3 and iproute2 are
            # in the role's base package list. The lab's list too (inventories/lab): one cached base for both.
            "guest_image_extra_packages": ["nftables", "ifupdown2"],
            "guest_image_timezone": "Asia/Shanghai",
            "guest_image_authorized_keys": [(base / "id_ed25519.pub").read_text().strip()] if
            (base / "id_ed25519.pub").exists() else []}
    host.update(overrides)
    data = {"all": {"vars": {"llmstack_vlans": {
        "mgmt": {"id": 10, "cidr": "10.99.10.0/24", "gateway": "10.99.10.1"},
        "inference": {"id": 20, "cidr": "10.99.20.0/24", "gateway": "10.99.20.1"}}},
        "children": {"gpu_vms": {"hosts": {"gpu-test": host}}}}}
    path = base / ("hosts-%s.yml" % secrets.token_hex(3))
    path.write_text(yaml.safe_dump(data))
    return str(path)


def run_role(inventory, *extra):
    return playbook("playbooks/guests.yml", "-i", inventory, "--tags", "guest_image", "--skip-tags",
                    "inventory_check", *extra, json_output=True, timeout=1500)


def stats(out):
    return parse_json_report(out)["stats"]["gpu-test"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("guest")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test@llmstack", "-f",
                    str(base / "id_ed25519")], check=True)
    inventory = write_inventory(base)
    started = time.monotonic()
    rc, out, err = run_role(inventory)
    assert rc == 0, out[-4000:] + err[-2000:]
    first = {"stats": stats(out), "seconds": time.monotonic() - started}
    rc, out, err = run_role(inventory)
    assert rc == 0, out[-4000:] + err[-2000:]
    second = stats(out)
    image = base / "images" / "gpu-test.raw"
    record = json.loads((base / "images" / "gpu-test.raw.json").read_text())
    return {"base": base, "inventory": inventory, "first": first, "second": second, "image": image,
            "record": record}


def test_a_second_run_with_the_same_inputs_does_not_rebuild(built):
    assert built["first"]["stats"]["changed"] >= 1
    assert built["second"]["changed"] == 0 and built["second"]["failures"] == 0, built["second"]
    assert built["record"]["inputs"]["suite"] == "trixie" and built["record"]["inputs"]["mirror"] == mirror()
    assert "openssh-server" in built["record"]["inputs"]["packages"]
    assert "etc/fstab" in built["record"]["inputs"]["files"]
    times = (built["first"]["seconds"], built["record"]["build_seconds"])
    print("build: %.0f s (the role, first run; image built in %.0f s)" % times)


def test_changed_inputs_are_named_and_check_mode_predicts_a_rebuild(built):
    inventory = write_inventory(built["base"], guest_image_timezone="Europe/Berlin")
    rc, out, err = run_role(inventory, "--check")
    assert rc == 0, out[-3000:]
    report = parse_json_report(out)
    results = [h for play in report["plays"] for task in play["tasks"] for h in task["hosts"].values()
               if h.get("rebuilt_because")]
    assert results and "files" in results[0]["rebuilt_because"] and "timezone" in results[0]["rebuilt_because"]
    # check mode changed nothing
    assert json.loads((built["base"] / "images" / "gpu-test.raw.json").read_text()) == built["record"]


def test_the_partition_table_and_file_systems(built):
    table = json.loads(subprocess.run(["sfdisk", "--json", str(built["image"])], capture_output=True, text=True,
                                      check=True).stdout)["partitiontable"]
    assert table["label"] == "gpt"
    types = [p["type"] for p in table["partitions"]]
    assert types == ["C12A7328-F81F-11D2-BA4B-00A0C93EC93B", "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"]
    assert all(p["start"] % 2048 == 0 for p in table["partitions"])
    assert os.path.getsize(built["image"]) == 3 * 1024 ** 3


def test_bad_settings_fail_before_anything_is_built(tmp_path):
    inventory = write_inventory(tmp_path, guest_image_mirror="", guest_image_authorized_keys=[],
                                guest_image_timezone="../etc", llmstack_interfaces=[])
    rc, out, err = run_role(inventory)
    assert rc != 0
    for variable in ("guest_image_mirror", "guest_image_authorized_keys", "guest_image_timezone",
                     "guest_image_interfaces"):
        assert variable in out, variable
    assert not (tmp_path / "images" / "gpu-test.raw").exists()


def test_a_debootstrap_failure_shows_its_log(tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id_ed25519")], check=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]   # closed again: nothing listens there
    inventory = write_inventory(tmp_path, guest_image_mirror="http://127.0.0.1:%d/debian" % port)
    rc, out, err = run_role(inventory)
    assert rc != 0
    assert "debootstrap of trixie from http://127.0.0.1:%d/debian failed" % port in out
    assert "last lines of its log" in out
    assert not (tmp_path / "images" / "gpu-test.raw").exists()


# ------------------------------------------------------------------------------------------ boot

@pytest.fixture(scope="module")
def guest(built):
    base = built["base"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    shutil.copy(OVMF_VARS, base / "vars.fd")
    qga = base / "qga.sock"
    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-machine", "q35", "-cpu", "max", "-smp", "2", "-m", "2048",
           "-drive", "if=pflash,format=raw,unit=0,readonly=on,file=%s" % OVMF_CODE,
           "-drive", "if=pflash,format=raw,unit=1,file=%s" % (base / "vars.fd"),
           "-device", "virtio-scsi-pci,id=scsi0",
           "-drive", "if=none,id=disk0,format=raw,snapshot=on,file=%s" % built["image"],
           "-device", "scsi-hd,drive=disk0",
           "-nic", "user,model=virtio-net-pci,mac=%s,net=10.99.20.0/24,host=10.99.20.1,restrict=on,"
                   "hostfwd=tcp:127.0.0.1:%d-%s:22" % (MAC, port, ADDRESS),
           "-device", "virtio-serial", "-chardev", "socket,path=%s,server=on,wait=off,id=qga0" % qga,
           "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
           "-serial", "file:%s" % (base / "serial.log"), "-display", "none"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    started = time.monotonic()
    key = str(base / "id_ed25519")
    ssh = ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
           "-o", "ConnectTimeout=5", "-i", key, "-p", str(port), "root@127.0.0.1"]
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail("QEMU exited: %s" % proc.stdout.read().decode(errors="replace"))
            if subprocess.run(ssh + ["true"], capture_output=True, check=False, timeout=60).returncode == 0:
                break
            if time.monotonic() - started > 600:
                serial = (base / "serial.log").read_text(errors="replace")[-3000:]
                pytest.fail("no SSH after 600 s; serial console:\n" + serial)
            time.sleep(3)
        boot = time.monotonic() - started
        print("boot to SSH: %.0f s" % boot)
        yield {"ssh": ssh, "port": port, "qga": str(qga), "boot_seconds": boot, "base": base, "key": key,
               "record": built["record"]}
    finally:
        proc.kill()
        proc.wait(timeout=30)


def sh(guest, command, check=True):
    result = subprocess.run(guest["ssh"] + [command], capture_output=True, text=True, check=False, timeout=120)
    if check:
        assert result.returncode == 0, "%s: %s%s" % (command, result.stdout, result.stderr)
    return result.stdout


def fstab_problems(guest):
    """Every fstab entry must name a file system that exists and is mounted there (empty: all good)."""
    problems = []
    for line in sh(guest, "cat /etc/fstab").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        source, target = line.split()[:2]
        if not source.startswith("UUID="):
            problems.append("%s: not by UUID" % target)
            continue
        device = sh(guest, "blkid -U %s" % source[5:], check=False).strip()
        if not device:
            problems.append("%s: no file system with %s" % (target, source))
            continue
        mounted = sh(guest, "findmnt -n -o SOURCE --target %s" % target).strip()
        if mounted != device:
            problems.append("%s: %s is %s, but %s is mounted there" % (target, source, device, mounted))
    verify = subprocess.run(guest["ssh"] + ["findmnt --verify"], capture_output=True, text=True, check=False)
    if verify.returncode != 0:
        problems.append("findmnt --verify: " + verify.stdout.strip())
    return problems


def test_hostname_and_fstab(guest):
    assert sh(guest, "hostname").strip() == "gpu-test"
    assert sh(guest, "hostname -f").strip() == "gpu-test.lab.test"
    assert fstab_problems(guest) == []
    uuids = re.findall(r"UUID=(\S+)", sh(guest, "cat /etc/fstab"))
    assert uuids == [guest["record"]["ids"]["root"], guest["record"]["ids"]["esp"]]


def test_the_fstab_check_fails_on_a_wrong_uuid(guest):
    """The check above can fail: with the root entry's UUID changed in the running guest, it says so."""
    sh(guest, "cp /etc/fstab /root/fstab.good && sed -i 's/^UUID=[0-9a-f-]* \\//UUID=%s \\//' /etc/fstab"
       % "00000000-1111-2222-3333-444444444444")
    try:
        problems = fstab_problems(guest)
    finally:
        sh(guest, "cp /root/fstab.good /etc/fstab")
    assert any("/: no file system with UUID=00000000-1111-2222-3333-444444444444" in p for p in problems), problems
    assert fstab_problems(guest) == []


def strict_ssh(guest, known_hosts):
    """SSH to the guest that checks its host key against ``known_hosts`` under the VM's name (the port forward's
    [127.0.0.1]:port is not the name the role recorded), and trusts nothing new."""
    return ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o",
            "UserKnownHostsFile=%s" % known_hosts, "-o", "HostKeyAlias=gpu-test", "-o", "ConnectTimeout=10",
            "-i", guest["key"], "-p", str(guest["port"]), "root@127.0.0.1"]


def test_the_first_connection_checks_the_host_key_recorded_before_the_guest_ran(guest):
    """Issue #33 item 5: the role made the VM's host key, put it in the image and in known_hosts before the VM ever
    booted; SSH with strict host key checking gets in on that record alone, and the guest offers only that key."""
    known_hosts = guest["base"] / "known_hosts"
    recorded = [line.split() for line in known_hosts.read_text().splitlines() if line.strip()]
    assert [r[0] for r in recorded] == ["gpu-test"] and recorded[0][1] == "ssh-ed25519", recorded
    result = subprocess.run(strict_ssh(guest, known_hosts) + ["cat /etc/ssh/ssh_host_ed25519_key.pub"],
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == recorded[0][1:3]
    scanned = ""
    for _attempt in range(5):      # TCG is slow: ssh-keyscan's 5 s default timeout can pass before the guest answers
        scanned = subprocess.run(["ssh-keyscan", "-T", "30", "-p", str(guest["port"]), "127.0.0.1"],
                                 capture_output=True, text=True, check=False, timeout=120).stdout
        if scanned.strip():
            break
    offered = sorted(line.split()[1:3] for line in scanned.splitlines() if line and not line.startswith("#"))
    assert offered == [recorded[0][1:3]], scanned
    host_files = sh(guest, "ls /etc/ssh | grep ^ssh_host_ | sort").split()
    assert host_files == ["ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"]
    assert sh(guest, "stat -c %a /etc/ssh/ssh_host_ed25519_key").strip() == "600"
    secret = guest["base"] / "host-keys" / "host_key_secret"
    assert oct(secret.stat().st_mode & 0o777) == "0o600" and len(secret.read_text().strip()) == 64


def test_strict_checking_refuses_the_guest_under_another_key(guest, tmp_path):
    """The check above can fail: a known_hosts that holds another key for the VM's name is refused."""
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("gpu-test %s\n" % " ".join(other.with_suffix(".pub").read_text().split()[:2]))
    command = [arg for arg in strict_ssh(guest, known_hosts) if arg != "-q"]
    result = subprocess.run(command + ["true"], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 255 and "Host key verification failed" in result.stderr, result.stderr


def test_the_system_is_running(guest):
    state = sh(guest, "systemctl is-system-running", check=False).strip()
    failed = sh(guest, "systemctl --failed --no-legend --plain", check=False)
    assert state == "running", "system %s; failed units:\n%s" % (state, failed)


def test_network_from_the_inventory(guest):
    files = sh(guest, "ls /etc/systemd/network").split()
    assert files == ["10-llmstack-00-inference.network"]
    network = sh(guest, "cat /etc/systemd/network/" + files[0])
    assert "MACAddress=%s" % MAC in network and "Address=%s/24" % ADDRESS in network
    assert "Gateway=10.99.20.1" in network
    addresses = json.loads(sh(guest, "ip -j addr"))
    nic = [a for a in addresses if a.get("address") == MAC][0]
    assert [(i["local"], i["prefixlen"]) for i in nic["addr_info"] if i["family"] == "inet"] == [(ADDRESS, 24)]
    assert "default via 10.99.20.1" in sh(guest, "ip route")
    assert sh(guest, "cat /etc/resolv.conf").strip() == "nameserver 10.99.20.1"


def test_ssh_is_key_only(guest):
    effective = sh(guest, "sshd -T")
    assert "permitrootlogin without-password" in effective
    assert "passwordauthentication no" in effective and "kbdinteractiveauthentication no" in effective
    # root has no password at all: the shadow entry is locked.
    assert sh(guest, "getent shadow root").split(":")[1].startswith(("*", "!"))
    # A client that only tries passwords is turned away before any password is asked.
    attempt = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                              "UserKnownHostsFile=/dev/null", "-o", "PubkeyAuthentication=no", "-o",
                              "PreferredAuthentications=password,keyboard-interactive", "-p", str(guest["port"]),
                              "root@127.0.0.1", "true"], capture_output=True, text=True, check=False, timeout=60)
    assert attempt.returncode == 255 and "Permission denied (publickey)" in attempt.stderr, attempt.stderr
    # The one host key is the VM's own, made by the collection (test_the_first_connection_checks_...): sshd offers
    # no other, and no host key is made at boot.
    hostkeys = [line.split()[1] for line in effective.splitlines() if line.startswith("hostkey ")]
    assert hostkeys == ["/etc/ssh/ssh_host_ed25519_key"], hostkeys
    assert sh(guest, "systemctl cat llmstack-ssh-hostkeys", check=False).strip() == ""


def test_apt_sources_locale_timezone(guest):
    sources = sh(guest, "cat /etc/apt/sources.list.d/debian.sources")
    assert "Suites: trixie trixie-updates trixie-backports" in sources
    assert "Components: main contrib non-free non-free-firmware" in sources
    assert "Suites: trixie-security" in sources and "URIs: %s-security" % mirror().rstrip("/") in sources
    assert not [line for line in sh(guest, "cat /etc/apt/sources.list").splitlines() if line.startswith("deb")]
    assert "en_US.utf8" in sh(guest, "locale -a").split()
    assert "LANG=en_US.UTF-8" in sh(guest, "cat /etc/default/locale").splitlines()
    assert sh(guest, "readlink /etc/localtime").strip() == "/usr/share/zoneinfo/Asia/Shanghai"
    assert sh(guest, "date +%Z").strip() == "CST"


def test_the_guest_agent_answers(guest):
    assert "ii  qemu-guest-agent" in sh(guest, "dpkg -l qemu-guest-agent")
    assert sh(guest, "systemctl is-active qemu-guest-agent").strip() == "active"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(guest["qga"])
        sock.sendall(b'{"execute":"guest-get-host-name"}\n')
        answer = json.loads(sock.recv(4096).decode().splitlines()[0])
    assert answer == {"return": {"host-name": "gpu-test"}}


def test_boot_loader_and_console(guest):
    cmdline = sh(guest, "cat /proc/cmdline")
    assert "root=UUID=%s" % guest["record"]["ids"]["root"] in cmdline and "console=ttyS0,115200n8" in cmdline
    assert sh(guest, "ls /boot/efi/EFI/BOOT").split() == ["BOOTX64.EFI"]
    assert 'GRUB_TERMINAL="console serial"' in sh(guest, "cat /etc/default/grub")
    serial = (guest["base"] / "serial.log").read_text(errors="replace")
    assert "gpu-test login:" in serial
    print("boot to SSH took %.0f s" % guest["boot_seconds"])


# ------------------------------------------------------------------------------------ 802.1Q in the guest
# The tagged path, with real 802.1Q in the booted guest (one run of vlan_in_guest.py, ~10 s; its docstring
# draws the wiring): network namespaces vl-switch (br0, vlan_filtering 1), vl-router (trunk: VLANs 10, 20, 30 tagged;
# eth0.10/.20/.30 hold the gateways; forwarding), vl-gpu (trunk: 10, 20; the rendered nftables ruleset of lab-gpu-a),
# vl-gateway (trunk: 20, 30), vl-client (access port, untagged, pvid 30). Addresses: inventories/lab.

VLAN_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vlan_in_guest.py")
GPU_VM, LLM_GATEWAY, APPS_CLIENT = "lab-gpu-a", "lab-gateway", "lab-client"
# The gateway's VLANs here: the inference VLAN (its path to the model servers) and apps (where clients reach it). Its
# mgmt NIC is left out: the GPU VM's mgmt endpoints are then reached only through the router, like the client's.
GATEWAY_VLANS = ("inference", "apps")
HOP_VLAN = "inference"          # the VLAN the client's hand-made frame is tagged for


def lab_vlans():
    """inventories/lab's llmstack_vlans: mgmt 10, inference 20, apps 30 (id, cidr, gateway)."""
    with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "all", "main.yml")) as handle:
        return yaml.safe_load(handle)["llmstack_vlans"]


def vlan_lab_config(topology, ruleset):
    """What vlan_in_guest.py builds, from inventories/lab (llmstack_vlans and the hosts' llmstack_interfaces, as the
    topology has them): the router holds every VLAN's gateway on a trunk; the GPU VM and the gateway are trunks with
    one sub-interface per VLAN they are on; the client sits on an access port of its one VLAN (apps)."""
    vlans = lab_vlans()

    def cidr(vlan, address):
        return "%s/%s" % (address, vlans[vlan]["cidr"].split("/")[1])

    hosts = topology["hosts"]

    def trunk(host, names):
        return dict((str(vlans[v]["id"]), cidr(v, a)) for v, a in hosts[host]["addresses"].items() if v in names)

    gpu, client = hosts[GPU_VM]["addresses"], hosts[APPS_CLIENT]["addresses"]
    assert list(client) == ["apps"], client
    nodes = {
        "router": {"trunk": dict((str(v["id"]), cidr(n, v["gateway"])) for n, v in vlans.items()), "forward": True},
        "gpu": {"trunk": trunk(GPU_VM, gpu), "via": vlans["inference"]["gateway"]},
        "gateway": {"trunk": trunk(LLM_GATEWAY, GATEWAY_VLANS), "via": vlans["inference"]["gateway"]},
        "client": {"access": vlans["apps"]["id"], "address": cidr("apps", client["apps"]),
                   "via": vlans["apps"]["gateway"]},
    }
    endpoints = [e for e in topology["endpoints"] if e["host"] == GPU_VM and not e["address"].startswith("127.")]
    listen = [[e["address"], e["port"]] for e in endpoints] + [["0.0.0.0", 22]]
    probes = [[ns, e["address"], e["port"]] for ns in ("gateway", "client") for e in endpoints]
    # SSH: from the mgmt VLAN (the router's address there) yes, from the apps VLAN no.
    probes += [["router", gpu["mgmt"], 22], ["client", gpu["mgmt"], 22]]
    return {"nodes": nodes, "ruleset": ruleset, "listen": listen, "probes": probes, "hop_vid": vlans[HOP_VLAN]["id"],
            # the client's routed path to the GPU VM works (ICMP echo is allowed): its TCP refusals are the policy's
            "ping": [["client", gpu[HOP_VLAN]]], "timeout": 1.5}


@pytest.fixture(scope="module")
def vlan_lab(guest):
    """Runs vlan_in_guest.py once in the booted guest with the ruleset network_policy renders for a GPU VM of
    inventories/lab (topology and settings as test_network_policy.py computes them). {config, result, matrix}."""
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import network_policy
    from test_network_policy import CONTROLLER, lab_topology

    started = time.monotonic()
    topology = lab_topology()
    policy = network_policy.build(topology, GPU_VM, {"controller_addresses": [CONTROLLER], "ssh_vlans": ["mgmt"],
                                                     "vlans": lab_vlans()})
    config = vlan_lab_config(topology, policy["ruleset"])
    rendered = time.monotonic()
    with open(VLAN_SCRIPT) as handle:
        script = handle.read()
    run = subprocess.run(guest["ssh"] + ["python3 -c %s %s" % (shlex.quote(script), shlex.quote(json.dumps(config)))],
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print("802.1Q lab: topology and ruleset %.1f s on the controller, %.1f s in the guest (built in %.1f s, "
          "probed in %.1f s), kernel %s" % (rendered - started, time.monotonic() - rendered, result["build_seconds"],
                                            result["exercise_seconds"], result["kernel"]))
    print("slowest steps in the guest: %s" % sorted(result["steps"], key=lambda s: -s[1])[:4])
    matrix = [r for r in policy["matrix"] if r["destination"] == GPU_VM]
    return {"config": config, "result": result, "matrix": matrix}


def test_the_vlan_aware_bridge_carries_what_each_port_is_given(vlan_lab):
    """``bridge -j vlan show``: trunks carry their VLANs tagged, the client's access port only apps, untagged (pvid);
    no port carries a VLAN it was not given (vlan_default_pvid 0: no VLAN 1 either)."""
    result, nodes = vlan_lab["result"], vlan_lab["config"]["nodes"]
    found = dict((port["ifname"], dict((v["vlan"], sorted(v.get("flags", []))) for v in port.get("vlans", [])))
                 for port in result["bridge_vlans"] if port["ifname"].startswith("p-"))
    wanted = dict(("p-" + name, dict((int(vid), []) for vid in node.get("trunk", {}))) for name, node in nodes.items())
    wanted["p-client"] = {nodes["client"]["access"]: ["Egress Untagged", "PVID"]}
    assert found == wanted
    assert found["p-router"] == {10: [], 20: [], 30: []} and found["p-gpu"] == {10: [], 20: []}


def test_the_policy_holds_on_8021q_subinterfaces(vlan_lab):
    """The GPU VM (trunk, eth0.10/eth0.20) runs the rendered nftables ruleset: the gateway reaches its model servers
    over its own VLAN-20 sub-interface; the client, routed from the apps VLAN through the router's sub-interfaces,
    reaches none of them (nor SSH), although its packets do get there (ping) and are counted as dropped."""
    result, config = vlan_lab["result"], vlan_lab["config"]
    assert result["errors"] == [] and result["sent"] == [None, None], result
    hosts = {"gateway": LLM_GATEWAY, "client": APPS_CLIENT}
    allowed = {(r["source"], r["address"], r["port"]): r["allowed"] for r in vlan_lab["matrix"]}

    def expect(netns, address, port):
        if port == 22:              # SSH: from the mgmt VLAN (network_policy_ssh_vlans), i.e. the router's address
            return netns == "router"
        return allowed[(hosts[netns], address, port)]

    wanted = {(ns, address, port): expect(ns, address, port) for ns, address, port in config["probes"]}
    assert True in wanted.values() and False in wanted.values()
    found = {(p["netns"], p["address"], p["port"]): p["opened"] for p in result["probes"]}
    assert found == wanted, result["probes"]
    # Who got through, as the listeners saw them: the gateway from its VLAN-20 sub-interface, the router from VLAN 10.
    source = {"gateway": config["nodes"]["gateway"]["trunk"]["20"], "router": config["nodes"]["router"]["trunk"]["10"]}
    assert sorted((a[1], a[2]) for a in result["accepted"]) == sorted(
        (port, source[ns].split("/")[0]) for (ns, _a, port), opened in wanted.items() if opened)
    assert [p["rc"] for p in result["pings"]] == [0]
    assert result["dropped_input"] >= len([v for v in wanted.values() if not v])


def test_a_frame_tagged_for_another_vlan_does_not_get_through(vlan_lab):
    """A hand-made frame tagged for the inference VLAN, sent from the client's access port (apps), left the client
    (seen on the bridge port) but is dropped by the bridge: it never reaches the GPU VM's trunk. The control: the same
    frame from the router's trunk, a member of that VLAN, does arrive there, tagged for it."""
    result = vlan_lab["result"]
    markers, captured = result["markers"], result["captured"]
    assert result["errors"] == [] and result["sent"] == [None, None], result
    vid = vlan_lab["config"]["hop_vid"]
    assert captured["vl-switch p-client"].get(markers["access"]) == {"vid": vid}, captured
    assert markers["access"] not in captured["vl-gpu eth0"], captured
    assert captured["vl-gpu eth0"].get(markers["trunk"]) == {"vid": vid}, captured


# ------------------------------------------------------------------------------------------ the VLAN-aware PVE bridge

# The guest as a PVE host as its installer leaves it, plus the management address on a VLAN of the bridge (PVE's
# "VLAN for host management"): vmbr0 over a dummy NIC, an untagged address on it and one on vmbr0.5.
PVE_INTERFACES = """auto lo
iface lo inet loopback

auto dummy0
iface dummy0 inet manual
\tlink-type dummy

auto vmbr0
iface vmbr0 inet static
\taddress 10.6.0.2/24
\tbridge-ports dummy0
\tbridge-stp off
\tbridge-fd 0

auto vmbr0.5
iface vmbr0.5 inet static
\taddress 10.5.0.2/24
"""
BRIDGE_MGMT = "10.5.0.2"


def bridge_state(guest):
    """(vlan_filtering of vmbr0, {port: [vids]}, {ifname: [addresses]}) as the guest's kernel has them."""
    links = json.loads(sh(guest, "ip -d -j link show vmbr0"))
    vlans = json.loads(sh(guest, "bridge -j vlan show") or "[]")
    addresses = json.loads(sh(guest, "ip -j addr show"))
    ports = {}
    for port in vlans:
        vids = []
        for entry in port.get("vlans", []):
            vids += list(range(entry["vlan"], entry.get("vlanEnd", entry["vlan"]) + 1))
        ports[port["ifname"]] = vids
    return (links[0]["linkinfo"]["info_data"].get("vlan_filtering"), ports,
            {a["ifname"]: [i["local"] for i in a.get("addr_info", [])] for a in addresses})


@pytest.fixture(scope="module")
def bridge_runs(guest, tmp_path_factory):
    """The pve_bridge role run over SSH against the booted guest, its PVE host (ifupdown2 from the image, the guest's
    kernel has bridge VLAN filtering), in the order a site meets it: a change that would cut the controller's
    management VLAN (refused), the change with that VLAN in the inventory, a rerun, a rerun after the kernel lost the
    setting (a run that stopped between the write and the reload), and the way back. Each step's recap, file and
    kernel state are kept for the tests below."""
    base = tmp_path_factory.mktemp("bridge")
    sh(guest, "cat > /etc/network/interfaces <<'END'\n%sEND\nifreload -a" % PVE_INTERFACES)
    vlans = lab_vlans()
    host = {"ansible_host": "127.0.0.1", "ansible_port": guest["port"], "ansible_user": "root",
            "ansible_ssh_private_key_file": guest["key"], "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
            # The controller comes in through QEMU's port forward (127.0.0.1 is the guest's loopback too): the
            # address to protect is named, as a site behind NAT would name it.
            "pve_bridge_management_address": BRIDGE_MGMT}
    inventory = base / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"llmstack_vlans": vlans},
                                                 "hosts": {"pve-test": host}}}))
    play = base / "bridge.yml"
    play.write_text(yaml.safe_dump([{"name": "The VLAN-aware bridge", "hosts": "all", "gather_facts": False,
                                     "roles": ["pvegpu.llmstack.pve_bridge"]}]))
    with_mgmt = json.dumps({"pve_bridge_vlans": dict(vlans, hostmgmt={"id": 5, "bridge": "vmbr0"})})
    runs = {"original": sh(guest, "cat /etc/network/interfaces"), "before": bridge_state(guest)}
    # The module alone, as a run that dies (or loses the host) between the reload and its confirmation leaves it: a
    # change (VLAN 40 more) with a 60 s rollback that nobody confirms (long enough for the run and the checks after
    # it under TCG on a busy machine: a shorter one fired before the module's own check after its reload).
    unconfirmed = base / "unconfirmed.yml"
    unconfirmed.write_text(yaml.safe_dump([{"name": "A bridge change nobody confirms", "hosts": "all",
                                            "gather_facts": False, "tasks": [{"pvegpu.llmstack.pve_bridge": {
                                                "vlans": dict(vlans, hostmgmt={"id": 5}, extra={"id": 40}),
                                                "management_address": BRIDGE_MGMT, "rollback_seconds": 60}}]}]))
    steps = [("refused", play, []), ("applied", play, ["-e", with_mgmt]), ("rerun", play, ["-e", with_mgmt]),
             ("kernel_lost_it", play, ["-e", with_mgmt]), ("unconfirmed", unconfirmed, []),
             ("reverted", play, ["-e", "pve_bridge_enabled=false"])]
    for name, playbook_file, extra in steps:
        if name == "kernel_lost_it":
            sh(guest, "ip link set vmbr0 type bridge vlan_filtering 0")
            runs["lost"] = bridge_state(guest)
        started = time.monotonic()
        rc, out, err = playbook(str(playbook_file), "-i", str(inventory), *extra, json_output=True, timeout=600)
        report = parse_json_report(out)
        runs[name] = {"rc": rc, "stats": report["stats"].get("pve-test"), "report": report, "err": err,
                      "seconds": round(time.monotonic() - started, 1),
                      "file": sh(guest, "cat /etc/network/interfaces"), "kernel": bridge_state(guest),
                      "timer": sh(guest, "systemctl is-active llmstack-bridge-rollback.timer", check=False).strip(),
                      "record": sh(guest, "stat -c %a /etc/llmstack/pve_bridge.json 2>/dev/null; "
                                          "cat /etc/llmstack/pve_bridge.json 2>/dev/null", check=False)}
        if name == "unconfirmed":
            deadline = time.monotonic() + 300        # 60 s, under TCG
            while sh(guest, "cat /etc/network/interfaces") != runs["applied"]["file"]:
                assert time.monotonic() < deadline, "the rollback did not put the file back"
                time.sleep(2)
            time.sleep(3)                            # and its ifreload -a, which runs after the copy
            runs["rolled_back"] = {"file": sh(guest, "cat /etc/network/interfaces"), "kernel": bridge_state(guest)}
    print("pve_bridge runs: %s" % {step[0]: runs[step[0]]["seconds"] for step in steps})
    return runs


def failure_messages(report):
    return [r.get("msg", "") for play in report["plays"] for task in play["tasks"]
            for r in task["hosts"].values() if r.get("failed")]


def test_a_bridge_change_that_would_cut_the_management_vlan_is_refused_before_anything_changes(bridge_runs):
    refused = bridge_runs["refused"]
    assert refused["rc"] != 0 and refused["stats"]["changed"] == 0
    messages = failure_messages(refused["report"])
    assert any("10.5.0.2 on vmbr0.5 (VLAN 5 of vmbr0)" in m and "carrying only VLAN 10 20 30" in m
               for m in messages), messages
    assert refused["file"] == bridge_runs["original"] and refused["kernel"] == bridge_runs["before"]
    assert bridge_runs["before"][0] == 0 and BRIDGE_MGMT in bridge_runs["before"][2]["vmbr0.5"]


def test_the_bridge_becomes_vlan_aware_and_its_port_carries_the_inventorys_vlans(bridge_runs):
    applied = bridge_runs["applied"]
    assert applied["rc"] == 0 and applied["stats"]["changed"] >= 1, failure_messages(applied["report"])
    filtering, ports, addresses = applied["kernel"]
    assert filtering == 1
    assert {5, 10, 20, 30} <= set(ports["dummy0"]), ports
    assert BRIDGE_MGMT in addresses["vmbr0.5"] and "10.6.0.2" in addresses["vmbr0"]
    assert applied["file"] == bridge_runs["original"].replace(
        "\tbridge-fd 0\n", "\tbridge-fd 0\n\tbridge-vlan-aware yes\n\tbridge-vids 5 10 20 30\n")
    mode, record = applied["record"].split("\n", 1)
    assert mode == "600" and json.loads(record) == {
        "bridges": {"vmbr0": {"bridge-vids": None, "bridge-vlan-aware": None}}}


def test_a_rerun_changes_nothing_and_one_after_the_kernel_lost_the_setting_puts_it_back(bridge_runs):
    assert bridge_runs["rerun"]["rc"] == 0 and bridge_runs["rerun"]["stats"]["changed"] == 0, failure_messages(
        bridge_runs["rerun"]["report"])
    assert bridge_runs["lost"][0] == 0
    again = bridge_runs["kernel_lost_it"]
    assert again["rc"] == 0 and again["stats"]["changed"] == 1, failure_messages(again["report"])
    assert again["kernel"][0] == 1 and {5, 10, 20, 30} <= set(again["kernel"][1]["dummy0"])
    assert again["file"] == bridge_runs["applied"]["file"]


def test_the_role_confirms_its_change_and_an_unconfirmed_one_is_rolled_back(bridge_runs):
    """The role's runs confirm over a new connection (no rollback left pending); the module's change nobody confirmed
    is put back after its 60 s: the file as it was, and the kernel without VLAN 40 on the port."""
    assert bridge_runs["applied"]["timer"] != "active" and bridge_runs["kernel_lost_it"]["timer"] != "active"
    unconfirmed = bridge_runs["unconfirmed"]
    assert unconfirmed["rc"] == 0, failure_messages(unconfirmed["report"])
    assert "bridge-vids 5 10 20 30 40" in unconfirmed["file"] and 40 in unconfirmed["kernel"][1]["dummy0"]
    assert unconfirmed["timer"] == "active"
    rolled_back = bridge_runs["rolled_back"]
    assert rolled_back["file"] == bridge_runs["applied"]["file"]
    assert rolled_back["kernel"][0] == 1 and 40 not in rolled_back["kernel"][1]["dummy0"]
    assert {5, 10, 20, 30} <= set(rolled_back["kernel"][1]["dummy0"])


def test_the_way_back_restores_the_file_and_the_kernel(bridge_runs):
    reverted = bridge_runs["reverted"]
    assert reverted["rc"] == 0 and reverted["stats"]["changed"] >= 1, failure_messages(reverted["report"])
    assert reverted["file"] == bridge_runs["original"]
    assert reverted["kernel"][0] == 0 and reverted["record"].strip() == ""
