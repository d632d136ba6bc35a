# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local lab that `make lab` runs site.yml against (inventories/lab).

    python tools/lab.py up        start a podman container per host (from the inventory) and fakepve on loopback
    python tools/lab.py summary   print where things are
    python tools/lab.py down      remove what `up` started

The lab starts empty, as a new site does: `up` makes the PVE hosts and the PVE API, and nothing for the VMs this
collection creates - the GPU VMs and every other host with VM settings (gpu_vm_vmid: the gateway, observability and
client VMs). A VM's host comes into existence when site.yml starts the VM through the PVE API: the lab's PVE double
(tools/lab_fakepve.py) starts the VM's container then, stops it when the VM is stopped and removes it when the VM is
destroyed. A host without VM settings would be made by `up`, as an existing host of a site.

Containers are made from localhost/llmstack-debian13 and labelled io.llmstack.lab=1; a host with
`llmstack_lab_docker: true` (the gateway, observability and GPU VM hosts) is made from localhost/llmstack-lab-host
instead: systemd without Docker (tests/harness/lab; the docker role installs Docker from Debian's mirror in the run,
issue #33), privileged, its /var/lib/docker in .cache/lab/docker/ holding the lab's service images
(tools/build-lab-images.sh) its inventory variables name (`localhost/llmstack-lab-*`), so that the Docker the run
installs finds them and the roles' compose projects start there as on a real host. Every host is attached, with
the addresses of its llmstack_interfaces, to one internal podman network per VLAN of llmstack_vlans
(llmstack-lab-<vlan>: the VLAN's subnet, no route out), besides podman's default network for the Debian mirror:
the services reach each other on the inventory's addresses, which in the lab belong to these containers only. This
machine holds each VLAN's gateway address (the bridge's) and forwards between them; every host gets a route to the
VLANs it has no address on through its own VLAN's gateway (`vlan_routes`), as behind a site's router, so that what
keeps a host from another VLAN's service is network_policy's table (loaded in every host), not a missing route. A
host with
`llmstack_lab_sysfs_fixture: NAME` gets the sysfs tree built from tests/fixtures/sysfs/NAME mounted
read-only at its `llmstack_sysfs_root`, and `llmstack_lab_files: {PATH_IN_CONTAINER: REPO_PATH}` mounts
recorded files (kernel logs, command lines) read-only. A host with `llmstack_lab_models: PATH` gets the lab's
models (.cache/models: tools/build_tiny_model.py) read-only at PATH, as a site's model disk, and one with
`llmstack_lab_vllm_runtime: IMAGE` that image mounted read-only at /opt/llmstack-lab/vllm-cpu-root (the real vLLM of
the systemd deploy method: tests/harness/lab/vllm). The fakepve password is generated per lab into .cache/lab (0600).
The service images of the Docker hosts are loaded once per machine into a Docker image cache (a podman volume kept
across labs, rebuilt when an image changes: docker_cache, by a builder image with Debian's Docker) and each new
Docker host's data root starts with them as hard links: what a site's registry mirror gives a fresh VM.
"""

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.path.join(ROOT, "inventories", "lab")
STATE = os.path.join(ROOT, ".cache", "lab")
IMAGE = os.environ.get("LLMSTACK_IMAGE", "localhost/llmstack-debian13")
HOST_IMAGE = "localhost/llmstack-lab-host:0.1"
# The lab host with Debian 13's Docker: only to build the image cache (the VMs boot HOST_IMAGE, without Docker).
CACHE_BUILDER = "localhost/llmstack-lab-image-cache:0.1"
SERVICE_IMAGE = re.compile(r"^localhost/llmstack-lab-[a-z0-9-]+:[A-Za-z0-9_.-]+$")
LABEL = "io.llmstack.lab=1"
MODELS = os.path.join(ROOT, ".cache", "models")
VLLM_RUNTIME = "/opt/llmstack-lab/vllm-cpu-root"
NETWORK_PREFIX = "llmstack-lab-"
# The lab connects with the harness's pipelining wrapper of containers.podman.podman (one `podman exec` per task).
PODMAN_CONNECTIONS = ("podman_pipelined", "containers.podman.podman")
# The Docker image cache (docker_cache): a podman volume, kept across labs like the images it is made from.
CACHE_LABEL = "io.llmstack.lab.cache=1"
CACHE_PREFIX = "llmstack-lab-docker-images-"
CACHE_KEEP = ("image", "overlay2")  # what of Docker's data root the cache keeps: its image store and layers


def say(text):
    print("lab: %s" % text, flush=True)


def run(cmd, check=True, capture=False):
    return subprocess.run(cmd, check=check, text=True, stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture else None)


def inventory():
    """ansible-inventory's view of the lab: (hostvars, groups)."""
    out = run([os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i", INVENTORY, "--list"],
              capture=True).stdout
    data = json.loads(out)
    hostvars = data.get("_meta", {}).get("hostvars", {})
    groups = {}
    for name, group in data.items():
        if isinstance(group, dict) and "hosts" in group:
            groups[name] = group["hosts"]
    return hostvars, groups


def vms(hostvars, groups):
    """The hosts that are VMs the collection creates (as inventory_model.vm_hosts has it): the GPU VMs and every
    other host with gpu_vm_vmid, PVE hosts never."""
    pve = set(groups.get("pve_hosts", []))
    return [host for host, hv in sorted(hostvars.items()) if host not in pve
            and (host in groups.get("gpu_vms", []) or "gpu_vm_vmid" in hv)]


def containers(hostvars, groups=None):
    """{host: container name} of the hosts `up` makes: every podman host but the VMs (groups given)."""
    made_by_pve = set(vms(hostvars, groups)) if groups is not None else set()
    return dict((host, hv.get("ansible_host", host)) for host, hv in sorted(hostvars.items())
                if hv.get("ansible_connection") in PODMAN_CONNECTIONS and host not in made_by_pve)


def vm_hosts(hostvars, groups):
    """{vmid: {container, hostname, image, label, run_args, images}} of the VMs: the lab's PVE double starts these
    containers with the VMs (and loads their service images into their Docker)."""
    hosts = {}
    for host in vms(hostvars, groups):
        hv = hostvars.get(host, {})
        if hv.get("ansible_connection") in PODMAN_CONNECTIONS and "gpu_vm_vmid" in hv:
            hosts[str(hv["gpu_vm_vmid"])] = {
                "container": hv.get("ansible_host", host), "hostname": host, "label": LABEL,
                "image": HOST_IMAGE if hv.get("llmstack_lab_docker") else IMAGE,
                "command": [] if hv.get("llmstack_lab_docker") else ["sleep", "infinity"],
                "run_args": run_args(host, hv), "images": service_images(hv),
                "routes": vlan_routes(hv, hv.get("llmstack_vlans") or {}), "bridges": bridges(hostvars),
                "load_command": [sys.executable, os.path.abspath(__file__), "load-images"]}
    return hosts


def networks(hostvars):
    """{network name: {subnet, gateway}}: one internal podman network per VLAN of llmstack_vlans."""
    vlans = {}
    for hv in hostvars.values():
        vlans.update(hv.get("llmstack_vlans") or {})
    return dict((NETWORK_PREFIX + name, {"subnet": vlan["cidr"], "gateway": vlan.get("gateway")})
                for name, vlan in sorted(vlans.items()))


def ensure_networks(hostvars):
    for name, net in networks(hostvars).items():
        if run(["podman", "network", "exists", name], check=False).returncode == 0:
            continue
        cmd = ["podman", "network", "create", "--internal", "--label", LABEL, "--subnet", net["subnet"]]
        if net.get("gateway"):
            cmd += ["--gateway", net["gateway"]]
        run(cmd + [name], capture=True)
        say("network %s (%s, internal)" % (name, net["subnet"]))


def service_images(hv):
    """The lab's service images this host's variables name (vllm_image, litellm_image, monitoring_*_image..., and a
    model's own image in vllm_models)."""
    values = [value for key, value in hv.items() if key != "llmstack_lab_vllm_runtime"]  # mounted, not loaded
    values += [model.get("image") for model in hv.get("vllm_models") or [] if isinstance(model, dict)]
    return sorted({value for value in values if isinstance(value, str) and SERVICE_IMAGE.match(value)})


def run_args(host, hv):
    """podman run arguments of a host: its VLAN addresses; for a docker host, what systemd and Docker need (the
    others get CAP_NET_ADMIN in their network namespace, for network_policy's nftables table)."""
    args = ["--network", "podman"]
    for interface in hv.get("llmstack_interfaces") or []:
        if interface.get("vlan") and interface.get("address"):
            args += ["--network", "%s%s:ip=%s" % (NETWORK_PREFIX, interface["vlan"], interface["address"])]
    if hv.get("llmstack_lab_docker"):
        data = os.path.join(STATE, "docker", hv.get("ansible_host", host))
        os.makedirs(data, mode=0o700, exist_ok=True)
        seed_docker_data(data)
        # /dev/shm as a VM has it (half its memory, not podman's 64 MB): vLLM's engine puts a 160 MiB ring buffer
        # there, and its compose services share the host's (ipc: host).
        args += ["--privileged", "--cgroupns=host", "--volume", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
                 "--volume", "%s:/var/lib/docker" % data, "--shm-size", "2g"]
    else:
        # network_policy loads its nftables table in the host's own network namespace, as on a real host.
        args += ["--cap-add", "NET_ADMIN"]
    if hv.get("llmstack_lab_models"):
        args += ["--volume", "%s:%s:ro" % (MODELS, hv["llmstack_lab_models"])]
    if hv.get("llmstack_lab_vllm_runtime"):
        args += ["--mount", "type=image,source=%s,destination=%s" % (hv["llmstack_lab_vllm_runtime"], VLLM_RUNTIME)]
    return args


def vlan_routes(hv, vlans):
    """[(cidr, gateway)]: a route to each VLAN of llmstack_vlans the host has no address on, through the gateway of
    the first VLAN it has one on, as a site's router connects its VLANs. In the lab this machine holds every VLAN's
    gateway address (the bridges' .1) and forwards between them, so that what keeps a host from another VLAN's
    services is the policy, not a missing route."""
    mine = [i.get("vlan") for i in hv.get("llmstack_interfaces") or [] if i.get("vlan") in vlans and i.get("address")]
    if not mine or not vlans[mine[0]].get("gateway"):
        return []
    return [(vlans[name]["cidr"], vlans[mine[0]]["gateway"]) for name in sorted(vlans)
            if name not in mine and vlans[name].get("cidr")]


def bridges(hostvars):
    """This machine's bridge interfaces of the lab's VLAN networks (podmanN)."""
    found = []
    for name in sorted(networks(hostvars)):
        result = run(["podman", "network", "inspect", "--format", "{{.NetworkInterface}}", name], check=False,
                     capture=True)
        if result.returncode == 0 and re.match(r"^[A-Za-z0-9_.-]+$", result.stdout.strip()):
            found.append(result.stdout.strip())
    return found


def forward_between(interfaces):
    """Let this machine route between the lab's VLAN bridges: netavark turns forwarding off on an internal network's
    bridge each time a container joins it, so this runs after every container start (here and in lab_fakepve)."""
    for interface in interfaces:
        path = "/proc/sys/net/ipv4/conf/%s/forwarding" % interface
        if os.path.exists(path):  # netavark makes a bridge when the first container joins its network
            with open(path, "w") as handle:
                handle.write("1\n")


def add_routes(name, hv, interfaces):
    """Put the host's routes to the other VLANs into container ``name``'s network namespace (from this machine:
    the lab's images have no iproute2), and let this machine forward between the VLANs."""
    forward_between(interfaces)
    routes = vlan_routes(hv, hv.get("llmstack_vlans") or {})
    if not routes:
        return
    pid = run(["podman", "inspect", "--format", "{{.State.Pid}}", name], capture=True).stdout.strip()
    for cidr, gateway in routes:
        run(["nsenter", "-t", pid, "-n", "ip", "route", "replace", cidr, "via", gateway], capture=True)


def has_docker(name):
    return run(["podman", "exec", name, "sh", "-c", "command -v dockerd"], check=False, capture=True).returncode == 0


def load_images(name, images, timeout=600):
    """Load the service images into the Docker of container ``name`` (once Docker answers); already there: kept.
    The smallest first; the real vLLM's image (3.7 GB) takes about two minutes. A lab VM's host has no Docker when
    it starts (the docker role installs it in the run, issue #33): its images are those of the data root seeded
    from the image cache (seed_docker_data), which its Docker finds when it starts; one that was not seeded is an
    error, since nothing could load them later."""
    if images and not has_docker(name):
        data = os.path.join(STATE, "docker", name)
        if all(os.path.isdir(os.path.join(data, entry)) for entry in CACHE_KEEP):
            say("%s has no Docker yet: its images are in its seeded data root (the run installs Docker)" % name)
            return
        sys.exit("lab: %s has no Docker and its data root %s was not seeded from the image cache: its images (%s) "
                 "cannot be loaded (tools/lab.py up builds the cache)" % (name, data, ", ".join(images)))
    deadline = time.time() + timeout
    while run(["podman", "exec", name, "docker", "info", "--format", "{{.ID}}"], check=False,
              capture=True).returncode != 0:
        if time.time() > deadline:
            sys.exit("lab: Docker in %s did not answer within %d s" % (name, timeout))
        time.sleep(1)

    def size(image):
        got = run(["podman", "image", "inspect", "--format", "{{.Size}}", image], check=False, capture=True)
        return int(got.stdout.strip()) if got.returncode == 0 and got.stdout.strip().isdigit() else 0

    for image in sorted(images, key=size):
        if run(["podman", "exec", name, "docker", "image", "inspect", image], check=False,
               capture=True).returncode == 0:
            continue
        if run(["podman", "image", "exists", image], check=False).returncode != 0:
            sys.exit("lab: image %s is missing (tools/build-lab-images.sh builds it)" % image)
        # Docker may still restart once while the host boots (socket activation answers first): try again.
        while True:
            save = subprocess.Popen(["podman", "save", image], stdout=subprocess.PIPE)
            load = subprocess.run(["podman", "exec", "-i", name, "docker", "load", "-q"], stdin=save.stdout,
                                  capture_output=True, text=True, check=False)
            save.stdout.close()
            if save.wait() == 0 and load.returncode == 0:
                break
            if time.time() > deadline:
                sys.exit("lab: loading %s into %s failed: %s" % (image, name, load.stderr[-500:]))
            time.sleep(2)
        say("loaded %s into %s" % (image, name))


def image_id(image):
    got = run(["podman", "image", "inspect", "--format", "{{.Id}}", image], check=False, capture=True)
    return got.stdout.strip() if got.returncode == 0 else None


def docker_images(hostvars):
    """Every service image a lab host with Docker loads (the hosts `up` makes and the GPU VM hosts)."""
    return sorted({image for hv in hostvars.values() if hv.get("llmstack_lab_docker") for image in service_images(hv)})


def cache_volume(images):
    """The name of the cache volume of these images: their names and podman image ids hashed, so that a rebuilt
    image makes a new cache (None when one is missing: docker_cache says which)."""
    # The builder image too: its Docker wrote the cache, and another Docker version might not read it.
    pairs = ["%s %s" % (image, image_id(image)) for image in [CACHE_BUILDER] + list(images)]
    if not images or any(pair.endswith(" None") for pair in pairs):
        return None
    digest = hashlib.sha256("\n".join(pairs).encode()).hexdigest()
    return CACHE_PREFIX + digest[:16]


def volume_path(name):
    got = run(["podman", "volume", "inspect", "--format", "{{.Mountpoint}}", name], check=False, capture=True)
    return got.stdout.strip() if got.returncode == 0 else None


def docker_cache(hostvars):
    """The lab's Docker image cache: one Docker data root holding every service image of the lab's Docker hosts,
    loaded once per machine (a podman volume, labelled CACHE_LABEL, named after the images' ids) and then given
    to each new Docker host as hard links (seed_docker_data). Loading the real vLLM's 3.7 GB image into a new GPU
    VM host's Docker took about 140 s of every lab's VM start (podman save | docker load); with the cache it is
    there when Docker starts, as a site's pull-through registry or a VM template with the images baked in would
    have it. Only image/ and overlay2/ are kept (no container, network or engine id). Returns the volume's path,
    or None when no host needs an image; stops naming the images that are missing (tools/build-lab-images.sh).
    Building it: a throwaway lab host container whose /var/lib/docker is the volume, the images loaded, Docker
    stopped cleanly, a `complete` marker written last (a cache interrupted half-way is built again). Other cache
    volumes (older images) are removed."""
    images = docker_images(hostvars)
    name = cache_volume(images)
    CACHE_ROOT["path"] = None
    if name is None:
        missing = [image for image in [CACHE_BUILDER] + images if image_id(image) is None]
        if images and missing:
            sys.exit("lab: the image cache cannot be built, images missing: %s (tools/build-lab-images.sh builds "
                     "them)" % ", ".join(missing))
        return None
    path = volume_path(name)
    if path and os.path.exists(os.path.join(path, "complete")):
        CACHE_ROOT["path"] = path
        return path
    started = time.time()
    say("building the Docker image cache %s (%d images; once per machine and image set)" % (name, len(images)))
    builder = "llmstack-lab-image-cache"
    run(["podman", "rm", "-f", "-t", "0", builder], check=False, capture=True)
    if path:
        run(["podman", "volume", "rm", "-f", name], capture=True)
    run(["podman", "volume", "create", "--label", CACHE_LABEL, name], capture=True)
    path = volume_path(name)
    run(["podman", "run", "-d", "--name", builder, "--label", LABEL, "--privileged", "--cgroupns=host",
         "--volume", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--volume", "%s:/var/lib/docker" % path, CACHE_BUILDER],
        capture=True)
    try:
        load_images(builder, images)
        run(["podman", "exec", builder, "systemctl", "stop", "docker.socket", "docker.service", "containerd.service"],
            capture=True)
    finally:
        run(["podman", "rm", "-f", "-t", "0", builder], check=False, capture=True)
    for entry in os.listdir(path):
        if entry not in CACHE_KEEP:
            target = os.path.join(path, entry)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            else:
                os.remove(target)
    with open(os.path.join(path, "complete"), "w") as handle:
        handle.write("\n".join(images) + "\n")
    old = run(["podman", "volume", "ls", "--filter", "label=" + CACHE_LABEL, "--format", "{{.Name}}"],
              capture=True).stdout.split()
    stale = [volume for volume in old if volume != name]
    if stale:
        run(["podman", "volume", "rm", "-f"] + stale, capture=True)
    say("built the Docker image cache in %d s" % (time.time() - started))
    CACHE_ROOT["path"] = path
    return path


# The cache of this lab's image set (docker_cache sets it in `up`; None: no cache, the images are loaded).
CACHE_ROOT = {"path": None}


def cached_docker_root():
    """The path of the image cache built for this lab's images (never another image set's), or None."""
    path = CACHE_ROOT["path"]
    return path if path and os.path.exists(os.path.join(path, "complete")) else None


def seed_docker_data(data):
    """A new Docker host's data root from the image cache: its layers as hard links (instant, no space; Docker only
    reads an image's layers - a container writes to its own upper layer), the image store's small files copied.
    Only into an empty data root, and only on the same file system (podman's volumes and .cache/lab: a copy of
    every layer per host would cost minutes and gigabytes each). Copied beside it first and moved into place only
    when both copies worked: a copy that fails (a full disk) leaves the data root empty, and load_images stops
    the VM's start saying so (a lab VM's host has no Docker to load its images into)."""
    if os.listdir(data):
        return
    cache = cached_docker_root()
    if not cache:
        return
    if os.stat(cache).st_dev != os.stat(data).st_dev:
        say("could not seed %s from the image cache %s: not on the same file system (no hard links)" % (data, cache))
        return
    link = "-al"
    staging = data.rstrip("/") + ".seeding"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging, mode=0o700)
    copied = (run(["cp", "-a", os.path.join(cache, "image"), os.path.join(staging, "image")], check=False,
                  capture=True).returncode == 0
              and run(["cp", link, os.path.join(cache, "overlay2"), os.path.join(staging, "overlay2")], check=False,
                      capture=True).returncode == 0)
    if copied:
        for entry in CACHE_KEEP:
            os.rename(os.path.join(staging, entry), os.path.join(data, entry))
    else:
        say("could not seed %s from the image cache" % data)
    shutil.rmtree(staging, ignore_errors=True)


def container_state(name):
    result = run(["podman", "container", "inspect", "--format", "{{.State.Status}}", name], check=False,
                 capture=True)
    return result.stdout.strip() if result.returncode == 0 else None


def ensure_state_dir():
    os.makedirs(STATE, mode=0o700, exist_ok=True)
    os.chmod(STATE, 0o700)


def ensure_password():
    path = os.path.join(STATE, "pve_api_password")
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(24) + "\n")
    os.chmod(path, 0o600)
    return path


def ensure_import_dir():
    """The nodes' import storage (local:import/...): guest_image builds the lab's images into it."""
    path = os.path.join(STATE, "pve-import")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def ensure_ssh_key():
    """The lab's SSH key pair: guest images built by the lab let root in with it (key-only SSH)."""
    path = os.path.join(STATE, "id_ed25519")
    if not os.path.exists(path):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llmstack-lab", "-f", path], check=True)
    return path


FAKEPVE_PORT = 18006
FORWARDER = "/opt/llmstack-lab/forward.py"


def api_front(hostvars, groups):
    """(PVE host, its address, its VLAN's gateway) when the GPU VMs' gpu_vm_api_host is a PVE host's address: the
    API is reached there (tools/lab_forward.py in its container) and fakepve listens on that VLAN's gateway, this
    machine's address on the bridge. None when gpu_vm_api_host is this machine's loopback."""
    made = vms(hostvars, groups)
    api_host = hostvars.get(made[0], {}).get("gpu_vm_api_host") if made else None
    for host in groups.get("pve_hosts", []):
        hv = hostvars.get(host, {})
        for interface in hv.get("llmstack_interfaces") or []:
            vlan = (hv.get("llmstack_vlans") or {}).get(interface.get("vlan")) or {}
            if interface.get("address") == api_host and vlan.get("gateway"):
                return host, api_host, vlan["gateway"]
    return None


def fakepve_settings(hostvars, groups):
    """(address, port, nodes) fakepve listens on."""
    front = api_front(hostvars, groups)
    if front:
        return front[2], FAKEPVE_PORT, sorted(groups.get("pve_hosts", []))
    made = vms(hostvars, groups)
    port = int(hostvars.get(made[0], {}).get("gpu_vm_api_port", FAKEPVE_PORT)) if made else FAKEPVE_PORT
    return "127.0.0.1", port, sorted(groups.get("pve_hosts", []))


def start_api_front(hostvars, groups):
    """Start the PVE API's forwarder in its PVE host's container (unless it answers already)."""
    front = api_front(hostvars, groups)
    if not front:
        return
    host, address, backend = front
    port = int(hostvars[host].get("llmstack_lab_pve_api_port", 8006))
    if tls_ready(address, port, 1):
        return
    name = hostvars[host].get("ansible_host", host)
    run(["podman", "exec", "-d", name, "python3", FORWARDER, address, str(port), backend, str(FAKEPVE_PORT)],
        capture=True)
    if not tls_ready(address, port, 20):
        sys.exit("lab: the PVE API does not answer at %s:%d (the forwarder in %s to fakepve on %s:%d)"
                 % (address, port, name, backend, FAKEPVE_PORT))
    say("PVE API at https://%s:%d (%s's address; forwarded to fakepve)" % (address, port, host))


def pid_alive(pidfile):
    try:
        with open(pidfile) as handle:
            pid = int(handle.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def tls_ready(host, port, timeout):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1) as sock, \
                    context.wrap_socket(sock, server_hostname=host):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def start_fakepve(hostvars, groups):
    host, port, nodes = fakepve_settings(hostvars, groups)
    pidfile = os.path.join(STATE, "fakepve.pid")
    if pid_alive(pidfile):
        say("fakepve already running (pid %d)" % pid_alive(pidfile))
        return
    logfile = os.path.join(STATE, "fakepve.log")
    vm_file = os.path.join(STATE, "vm_hosts.json")
    with open(vm_file, "w") as handle:
        json.dump(vm_hosts(hostvars, groups), handle, indent=1, sort_keys=True)
    with open(logfile, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "tools", "lab_fakepve.py"), "--host", host, "--port", str(port),
             "--password-file", ensure_password(), "--nodes", ",".join(nodes), "--import-dir", ensure_import_dir(),
             "--vm-hosts", vm_file],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    with open(pidfile, "w") as handle:
        handle.write("%d\n" % proc.pid)
    if not tls_ready(host, port, 20):
        proc.terminate()
        sys.exit("lab: fakepve did not start on %s:%d; see %s" % (host, port, logfile))
    say("fakepve listening on https://%s:%d (nodes %s)" % (host, port, ", ".join(nodes)))


def mounts(host, hostvars):
    """podman --volume arguments for the host's recorded sysfs tree and files (and the PVE API's forwarder)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import sysfs_fixture

    args = []
    fixture = hostvars.get("llmstack_lab_sysfs_fixture")
    if fixture:
        source = os.path.join(sysfs_fixture.FIXTURES, fixture)
        if not os.path.isfile(os.path.join(source, "iommu_groups.txt")):
            sys.exit("lab: %s: llmstack_lab_sysfs_fixture %r: no fixture %s" % (host, fixture, source))
        tree = sysfs_fixture.build_fixture(source, os.path.join(STATE, "sysfs", host))
        args += ["--volume", "%s:%s:ro" % (tree, hostvars.get("llmstack_sysfs_root", "/opt/llmstack/sysfs"))]
    if not hostvars.get("llmstack_lab_docker"):
        # The PVE API's forwarder (start_api_front), for the PVE host whose address gpu_vm_api_host names.
        args += ["--volume", "%s:%s:ro" % (os.path.join(ROOT, "tools", "lab_forward.py"), FORWARDER)]
    for dest, source in sorted((hostvars.get("llmstack_lab_files") or {}).items()):
        path = os.path.join(ROOT, source)
        if not os.path.isfile(path):
            sys.exit("lab: %s: llmstack_lab_files: no file %s" % (host, source))
        args += ["--volume", "%s:%s:ro" % (path, dest)]
    return args


def build_images(hostvars):
    """The lab's images and its tiny model, when missing (make setup builds them; a developer may not have)."""
    if run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        say("building %s" % IMAGE)
        run([os.path.join(ROOT, "tools", "build-image.sh")])
    if any(run(["podman", "image", "exists", image], check=False).returncode != 0
           for image in (HOST_IMAGE, CACHE_BUILDER)):
        say("building the lab's images")
        run([os.path.join(ROOT, "tools", "build-image.sh"), "--systemd"])
        run([os.path.join(ROOT, "tools", "build-lab-images.sh")])
    if any(hv.get("llmstack_lab_models") for hv in hostvars.values()) and \
            run([sys.executable, os.path.join(ROOT, "tools", "build_tiny_model.py"), "--check"],
                check=False).returncode != 0:
        say("building the lab's tiny model")
        run([sys.executable, os.path.join(ROOT, "tools", "build_tiny_model.py")])


def start_containers(hostvars, groups):
    ensure_networks(hostvars)
    interfaces = bridges(hostvars)
    loads = []
    for host, name in containers(hostvars, groups).items():
        hv = hostvars[host]
        state = container_state(name)
        if state is None:
            cmd = ["podman", "run", "-d", "--name", name, "--hostname", host, "--label", LABEL]
            image = [HOST_IMAGE] if hv.get("llmstack_lab_docker") else [IMAGE, "sleep", "infinity"]
            run(cmd + run_args(host, hv) + mounts(host, hv) + image, capture=True)
            say("created %s (%s)" % (name, host))
        elif state != "running":
            run(["podman", "start", name], capture=True)
            say("started %s (%s)" % (name, host))
        add_routes(name, hv, interfaces)
        if hv.get("llmstack_lab_docker") and service_images(hv):
            loads.append((name, service_images(hv)))
    for name, images in loads:
        load_images(name, images)


def up(_args):
    ensure_state_dir()
    ensure_password()
    ensure_ssh_key()
    hostvars, groups = inventory()
    build_images(hostvars)
    docker_cache(hostvars)
    start_containers(hostvars, groups)
    start_fakepve(hostvars, groups)
    start_api_front(hostvars, groups)


def down(_args):
    pidfile = os.path.join(STATE, "fakepve.pid")
    pid = pid_alive(pidfile)
    if pid:
        os.killpg(pid, signal.SIGTERM)
        say("stopped fakepve (pid %d)" % pid)
    names = run(["podman", "ps", "-a", "--filter", "label=" + LABEL, "--format", "{{.Names}}"],
                capture=True).stdout.split()
    if names:
        run(["podman", "rm", "-f", "-t", "0"] + names, capture=True)
        say("removed %s" % ", ".join(sorted(names)))
    nets = run(["podman", "network", "ls", "--filter", "label=" + LABEL, "--format", "{{.Name}}"],
               capture=True).stdout.split()
    if nets:
        run(["podman", "network", "rm", "-f"] + nets, capture=True)
        say("removed networks %s" % ", ".join(sorted(nets)))
    docker_data = os.path.join(STATE, "docker")
    if os.path.isdir(docker_data):
        shutil.rmtree(docker_data)
    for name in ("fakepve.pid", "fakepve.log", "pve_api_password", "vm_hosts.json"):
        path = os.path.join(STATE, name)
        if os.path.exists(path):
            os.remove(path)
    say("down")


def address(hv, vlan):
    return next((i.get("address") for i in hv.get("llmstack_interfaces") or [] if i.get("vlan") == vlan), None)


def model_servers(hostvars, groups, gateway):
    """Which model server answers each deployment: asked from the gateway host (the only host the policy lets reach
    them), the real vLLM says its version on /version; the stand-in has no /version."""
    for host in groups.get("gpu_vms", []):
        hv = hostvars[host]
        for model in hv.get("vllm_models") or []:
            where = "%s:%s" % (address(hv, "inference"), model.get("port"))
            got = run(["podman", "exec", gateway, "curl", "-sf", "--max-time", "5", "http://%s/version" % where],
                      check=False, capture=True)
            try:
                server = "vLLM %s (the real server%s)" % (json.loads(got.stdout)["version"], ", CPU backend"
                                                          if model.get("device") == "cpu" else "")
            except (ValueError, KeyError, TypeError):
                server = "the vLLM stand-in (tools/fake_vllm.py)" if got.returncode == 22 else "not answering"
            print("  Model %-9s on %-10s %-21s %s, %s" % (model.get("name"), host, where, server,
                                                          hv.get("vllm_deploy_method", "compose")))


def try_it(hostvars, groups):
    """The exact curl that streams an answer through the TLS proxy and LiteLLM, and where Prometheus is."""
    gateways = groups.get("llm_gateways", [])
    observability = groups.get("observability", [])
    not_started = sorted({"%s (%s)" % (entry, host) for host, hv in hostvars.items()
                          for entry in hv.get("llmstack_services_not_started") or []})
    if not_started:
        print("  Rendered and checked, not started (no package or image here): %s" % ", ".join(not_started))
    if gateways and container_state(hostvars[gateways[0]].get("ansible_host", gateways[0])) == "running":
        gateway = gateways[0]
        name = hostvars[gateway].get("ansible_host", gateway)
        ca = os.path.join(STATE, "ca.crt")
        result = run(["podman", "exec", name, "cat", "/etc/llmstack/tls/ca.crt"], check=False, capture=True)
        if result.returncode == 0:
            with open(ca, "w") as handle:
                handle.write(result.stdout)
            model_servers(hostvars, groups, name)
            print("  Try it: a streamed answer from model 'fast' through the TLS proxy, LiteLLM and a GPU VM's real "
                  "vLLM\n    (the lab's CA copied to %s; LiteLLM runs without its database here, so the "
                  "master key it is):" % os.path.relpath(ca, ROOT))
            print("    curl -N --cacert %s https://%s/v1/chat/completions \\\n"
                  "      -H \"Authorization: Bearer $(podman exec %s cat /opt/llm-gateway/secrets/master_key)\" "
                  "\\\n      -H 'Content-Type: application/json' -d '{\"model\": \"fast\", \"stream\": true, "
                  "\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'"
                  % (os.path.relpath(ca, ROOT), address(hostvars[gateway], "apps"), name))
    if observability:
        mgmt = address(hostvars[observability[0]], "mgmt")
        name = hostvars[observability[0]].get("ansible_host", observability[0])
        print("  Prometheus: http://%s:9090/targets (every scrape target), http://%s:9090/alerts; Alertmanager: "
              "http://%s:9093 - user %s, password: podman exec %s cat /opt/monitoring/secrets/web_password"
              % (mgmt, mgmt, mgmt, hostvars[observability[0]].get("monitoring_web_user", "llmstack"), name))


def summary(args):
    hostvars, groups = inventory()
    host, port, nodes = fakepve_settings(hostvars, groups)
    front = api_front(hostvars, groups)
    print("\nThe lab (inventories/lab)")
    print("  PVE API   https://%s:%d  fakepve%s, user root@pam, password in %s (0600), nodes %s, %s"
          % (front[1] if front else host, int(hostvars[front[0]].get("llmstack_lab_pve_api_port", 8006))
             if front else port, " through %s's address and table (fakepve on %s:%d)" % (front[0], host, port)
             if front else "", os.path.relpath(os.path.join(STATE, "pve_api_password"), ROOT), ", ".join(nodes),
             "running" if pid_alive(os.path.join(STATE, "fakepve.pid")) else "NOT running"))
    made = set(vms(hostvars, groups))
    for group in sorted(groups):
        # lab_vms only shares the VMs' settings (inventories/lab/hosts.yml): its hosts are listed by their groups.
        if group in ("all", "ungrouped") or group.startswith("lab_"):
            continue
        for h in groups[group]:
            name = hostvars[h].get("ansible_host", h)
            state = container_state(name) or "absent"
            if h in made:
                state += " (VM %s: started with the VM through the PVE API)" % hostvars[h].get("gpu_vm_vmid")
            print("  %-13s %-12s container %-22s %s" % (group, h, name, state))
    print("  Each host's VLAN interfaces: /etc/ansible/facts.d/llmstack_network.fact "
          "(podman exec llmstack-lab-<host> cat ...)")
    reports = os.path.join(STATE, "preflight")
    if os.path.isdir(reports):
        # <host>.json is the report, <host>.html its page (host_preflight writes both).
        for name in sorted(n for n in os.listdir(reports) if n.endswith(".json")):
            with open(os.path.join(reports, name)) as handle:
                verdict = json.load(handle).get("verdict", "?")
            page = os.path.join(reports, name[:-5] + ".html")
            print("  Preflight of %-12s %-5s %s%s" % (name[:-5], verdict.upper(), os.path.relpath(
                os.path.join(reports, name), ROOT), ", page %s" % os.path.relpath(page, ROOT)
                if os.path.isfile(page) else ""))
    try_it(hostvars, groups)
    if args.skipped:
        print("  Not run in the lab (vfio needs a boot loader; nvidia needs a GPU and NVIDIA's repository - molecule "
              "nvidia runs it; burnin is not implemented yet and fails clearly if run): %s" % args.skipped)
    admins = sorted({a for hv in hostvars.values() for a in hv.get("network_policy_admin_addresses") or []})
    clients = sorted({a for hv in hostvars.values() for a in hv.get("tls_proxy_client_sources") or []})
    print("  network_policy: every host's nftables table is loaded (`nft list table inet llmstack` in its container), "
          "the VMs' policy is also in the lab PVE's firewall; this machine reaches the lab as its admin host "
          "(%s) and a client of the gateway (%s)" % (", ".join(admins) or "-", ", ".join(clients) or "-"))
    print("  Remove it all: make lab-down\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up").set_defaults(func=up)
    sub.add_parser("down").set_defaults(func=down)
    p = sub.add_parser("load-images", help="load service images into a lab host's Docker (tools/lab_fakepve.py)")
    p.add_argument("container")
    p.add_argument("images", nargs="*")
    p.set_defaults(func=lambda a: load_images(a.container, a.images))
    p = sub.add_parser("summary")
    p.add_argument("--skipped", default="")
    p.set_defaults(func=summary)
    args = parser.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
