# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serve the lab's stand-in PVE API: fakepve (PVE's own schema), one node per PVE host.

    python tools/lab_fakepve.py --port 18006 --password-file .cache/lab/pve_api_password --nodes lab-pve-a,lab-pve-b

fakepve's own CLI always has a node 'pve1'; the lab's nodes carry the inventory names of the PVE hosts.
Binds only to a loopback address or this machine's address on a podman bridge (the lab's internal VLAN networks;
tools/lab.py puts it on the management bridge, reached through lab-pve-a's forwarder); refuses any other.

fakepve answers the PCI resource mappings (/cluster/mapping/pci) from the schema with placeholders and
stores none, it does not implement disk resize, and it stores a drive's ``import-from`` as given instead of
importing. :class:`LabPve` adds those three, following PVE's API (pve-manager PVE/API2/Cluster/Mapping/PCI.pm,
qemu-server's resize_vm and its import-from handling): a mapping config with a digest, create/update/delete; a
resize that grows the volume and the drive's size= (never shrinks); and ``<storage>:0,import-from=<volume>`` on
a config update allocating a volume of the source's size, the drive's old volume becoming ``unusedN``, deleting
``unusedN`` freeing it. The ``local`` storage gets the ``import`` content type; its import volumes are the
files of ``import_dir`` (``--import-dir``), as /var/lib/vz/import is on a node. The lab and the integration
tests use it; it is a test double for those areas only, everything else is fakepve's.

With ``--vm-hosts FILE`` ({vmid: {container, hostname, image, label, command, run_args, routes, bridges,
images, load_command}},
written by tools/lab.py) a VM's guest is a podman container (its service images loaded into its Docker in the
background once it runs): starting the VM (or rebooting it) starts the container inside the start task, so the task
fails as a real start does when the guest cannot come up; stopping or shutting the VM down stops it (its disk, the
container's file system, stays), destroying the VM removes it. The lab's GPU VM hosts exist only while their VM
runs, as on a new site.
"""

import argparse
import asyncio
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def _loopback(text):
    """A loopback address, or this machine's address on one of podman's bridges (podmanN: the lab's VLAN networks,
    internal, which route nowhere else): nothing outside this machine and its containers can reach either."""
    if text == "localhost" or ipaddress.ip_address(text).is_loopback:
        return text
    listed = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False).stdout
    for line in listed.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == text and re.match(r"^podman[0-9]+$", fields[1]):
            return text
    raise argparse.ArgumentTypeError("%s is neither a loopback address nor this machine's address on a podman "
                                     "bridge" % text)


# The PVE tasks that change a VM's power state, and what its guest container does after each.
POWER_TASKS = {"qmstart": "run", "qmreboot": "run", "qmstop": "stop", "qmshutdown": "stop", "qmdestroy": "remove"}


async def _podman(*args):
    """(returncode, output) of a podman command, without blocking the API's event loop."""
    proc = await asyncio.create_subprocess_exec("podman", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, dummy = await proc.communicate()
    return proc.returncode, out.decode(errors="replace").strip()


async def _add_routes(host):
    """The guest's routes to the VLANs it has no address on (tools/lab.py vlan_routes), set in its network namespace
    once it runs, and this machine's forwarding between the VLAN bridges on again. Returns (returncode, output) of
    the first that failed, else (0, "")."""
    for interface in host.get("bridges") or []:
        # netavark turned forwarding off on the VLAN bridges the guest joined (tools/lab.py forward_between).
        path = "/proc/sys/net/ipv4/conf/%s/forwarding" % interface
        if os.path.exists(path):
            with open(path, "w") as handle:
                handle.write("1\n")
    if not host.get("routes"):
        return 0, ""
    rc, pid = await _podman("inspect", "--format", "{{.State.Pid}}", host["container"])
    if rc != 0:
        return rc, pid
    for cidr, gateway in host["routes"]:
        proc = await asyncio.create_subprocess_exec("nsenter", "-t", pid, "-n", "ip", "route", "replace", cidr, "via",
                                                    gateway, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        out, dummy = await proc.communicate()
        if proc.returncode != 0:
            return proc.returncode, out.decode(errors="replace").strip()
    return 0, ""


async def _load_images(host):
    """Load the guest's service images into its Docker (tools/lab.py load-images; an image already there is kept)
    before the start task ends: the compose projects of the roles need them, and the real vLLM's image (3.7 GB) takes
    minutes to load - a start task that returned at once left the vllm role's `compose up` to pull from a registry
    that does not exist. A real VM's start task ends sooner; its images come from a registry. Returns (rc, output)."""
    if not host.get("images") or not host.get("load_command"):
        return 0, ""
    log_path = os.path.join(os.path.dirname(host["load_command"][1]), "..", ".cache", "lab",
                            "load-%s.log" % host["container"])
    with open(log_path, "a") as log:
        proc = await asyncio.create_subprocess_exec(*(host["load_command"] + [host["container"]] + host["images"]),
                                                    stdout=log, stderr=asyncio.subprocess.STDOUT)
        rc = await proc.wait()
    return rc, "" if rc == 0 else "loading its images failed (see %s)" % log_path


async def sync_guest(host, running, remove=False):
    """Make the VM's guest container match the VM: running, stopped, or gone. Returns an error text or None."""
    name = host["container"]
    rc, state = await _podman("container", "inspect", "--format", "{{.State.Status}}", name)
    exists = rc == 0
    if remove:
        rc, out = await _podman("rm", "-f", "-t", "0", name) if exists else (0, "")
    elif running and not exists:
        rc, out = await _podman("run", "-d", "--name", name, "--hostname", host["hostname"], "--label",
                                host.get("label", "io.llmstack.lab=1"), *host.get("run_args", []), host["image"],
                                *host.get("command", ["sleep", "infinity"]))
        if rc == 0:
            rc, out = await _add_routes(host)
        if rc == 0:
            rc, out = await _load_images(host)
    elif running and state != "running":
        rc, out = await _podman("start", name)
        if rc == 0:
            rc, out = await _add_routes(host)
        if rc == 0:
            rc, out = await _load_images(host)
    elif not running and exists and state == "running":
        rc, out = await _podman("stop", "-t", "0", name)
    else:
        rc, out = 0, ""
    return None if rc == 0 else "guest container %s: %s" % (name, out[-500:])


def lab_pve_class():
    """FakePve with stored PCI mappings and disk resize (imported late: fakepve is a dev requirement)."""
    from fakepve import routing
    from fakepve.model import PveError, TaskError
    from fakepve.qemu import join_drive, split_drive
    from fakepve.server import FakePve

    sizes = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}

    def as_list(value):
        if value is None:
            return []
        return value if isinstance(value, list) else [value]

    def parse_size(text):
        match = re.match(r"^(\+)?(\d+(?:\.\d+)?)([KMGT])?$", str(text))
        if not match:
            raise routing.param_error(size="value does not match the regex pattern")
        return bool(match.group(1)), int(float(match.group(2)) * sizes.get(match.group(3) or "", 1))

    def format_size(size):
        for unit in ("T", "G", "M", "K"):
            if size % sizes[unit] == 0:
                return "%d%s" % (size // sizes[unit], unit)
        return str(size)

    class LabPve(FakePve):
        def __init__(self, *args, import_dir=None, vm_hosts=None, **kwargs):
            super().__init__(*args, **kwargs)
            self.vm_hosts = dict((str(k), v) for k, v in (vm_hosts or {}).items())
            self.background = set()
            # id -> {"map": [...], "description": str}
            self.pci_mappings = {}
            self.import_dir = import_dir
            local = self.storages.get("local")
            if local is not None and "import" not in local["content"].split(","):
                local["content"] += ",import"

        async def task(self, node, ttype, tid, user, body, vm=None, lock=True, log=()):
            """A power task of a VM that has a guest container also starts, stops or removes the container."""
            host = self.vm_hosts.get(str(tid)) if ttype in POWER_TASKS else None
            if host is None or vm is None:
                return await super().task(node, ttype, tid, user, body, vm=vm, lock=lock, log=log)

            async def with_guest():
                note = await body()
                action = POWER_TASKS[ttype]
                error = await sync_guest(host, vm.status == "running" and action == "run", remove=action == "remove")
                if error:
                    if action == "run":
                        vm.status = vm.qmpstatus = "stopped"
                    raise TaskError(error)
                return note
            if not host.get("images") or POWER_TASKS[ttype] != "run":
                return await super().task(node, ttype, tid, user, with_guest, vm=vm, lock=lock, log=log)
            # A guest whose images must be loaded: the task runs in the background and the API answers with its UPID
            # at once, as PVE's does (fakepve runs tasks inline at time_scale 0, and loading takes minutes); the
            # caller polls the task's status (pve_vm waits up to its task_timeout).

            async def guarded():
                try:
                    return await with_guest()
                except TaskError:
                    raise
                except Exception as exc:  # the task must end failed, not stay "running" until the caller's timeout
                    raise TaskError("guest container %s: %r" % (host["container"], exc))

            before = len(self.tasklog)
            running = asyncio.ensure_future(super().task(node, ttype, tid, user, guarded, vm=vm, lock=lock, log=log))
            self.background.add(running)  # asyncio keeps only a weak reference to a task
            running.add_done_callback(self.background.discard)
            while not running.done():
                mine = [r for r in self.tasklog[before:] if r["type"] == ttype and r["id"] == str(tid)]
                if mine:
                    return mine[0]["upid"]
                await asyncio.sleep(0)
            return running.result()

        def _import_volume(self, source, user):
            """{size} of an import source volume (a file of import_dir for local:import/<name>)."""
            match = re.match(r"^([^:\s]+):(import|images)/(.+)$", source)
            if source.startswith("/"):
                if user != "root@pam":
                    raise PveError(403, "Permission check failed (only root can import from an absolute path)")
                raise routing.die("the lab's PVE double imports from volumes, not paths")
            if not match:
                raise routing.die("unable to parse volume ID '%s'" % source)
            sid, content, name = match.groups()
            self.require(user, "/storage/" + sid, "Datastore.Audit")
            if sid == "local" and content == "import" and self.import_dir:
                path = os.path.join(self.import_dir, name)
                if os.path.isfile(path) and "/" not in name:
                    return {"size": os.path.getsize(path)}
            vol = self._qm_volume(source)
            if vol is None:
                raise routing.die("volume '%s' does not exist" % source)
            return vol

        async def _apply_config(self, vm, user, p):
            p = dict(p)
            displaced = []
            for key in list(p):
                value = str(p[key])
                if not re.match(r"^(scsi|virtio|sata|ide)\d+$", key) or "import-from=" not in value:
                    continue
                volume, props = split_drive(value)
                source = props.pop("import-from")
                target = re.match(r"^([^:\s]+):0$", volume)
                if not target:
                    raise routing.param_error(**{key: "import-from needs a new volume <storage>:0"})
                self.require(user, "/storage/" + target.group(1), "Datastore.AllocateSpace")
                size = int(self._import_volume(source, user).get("size") or 0)
                volid, dummy_fmt = self._qm_alloc(target.group(1), vm.vmid, props.pop("format", None), size)
                props["size"] = format_size(size)
                if vm.config.get(key):
                    displaced.append(split_drive(vm.config[key])[0])
                p[key] = join_drive(volid, props)
            deleted = [k for k in str(p.get("delete", "") or "").split(",") if re.match(r"^unused\d+$", k)]
            freed = [split_drive(vm.config[k])[0] for k in deleted if k in vm.config]
            await super()._apply_config(vm, user, p)
            for volume in freed:
                self._qm_free(volume)
            for volume in displaced:
                n = 0
                while "unused%d" % n in vm.config:
                    n += 1
                vm.config["unused%d" % n] = volume

        def _mapping_digest(self):
            return routing.sha1(json.dumps(self.pci_mappings, sort_keys=True))

        def _routes_labmapping(self):
            one = "/cluster/mapping/pci/{id}"
            return [("GET", "/cluster/mapping/pci", self._map_list), ("POST", "/cluster/mapping/pci", self._map_create),
                    ("GET", one, self._map_get), ("PUT", one, self._map_update), ("DELETE", one, self._map_delete),
                    ("PUT", "/nodes/{node}/qemu/{vmid}/resize", self._qm_resize)]

        async def _map_list(self, values, user):
            return [{"id": name, "map": list(data["map"]), "description": data.get("description", ""),
                     "type": "pci"} for name, data in sorted(self.pci_mappings.items())]

        async def _map_create(self, values, user):
            name = values["id"]
            if name in self.pci_mappings:
                raise routing.die("pci ID '%s' already defined" % name)
            self.pci_mappings[name] = {"map": as_list(values.get("map")), "description": values.get("description", "")}
            return None

        def _mapping(self, name):
            if name not in self.pci_mappings:
                raise PveError(500, "PCI mapping '%s' not found" % name)
            return self.pci_mappings[name]

        async def _map_get(self, values, user):
            data = self._mapping(values["id"])
            return {"map": list(data["map"]), "description": data.get("description", ""), "type": "pci",
                    "digest": self._mapping_digest()}

        async def _map_update(self, values, user):
            data = self._mapping(values["id"])
            routing.check_digest(self._mapping_digest(), values.get("digest"))
            for key in routing.split_list(values.get("delete")):
                data.pop(key, None)
            if "map" in values:
                data["map"] = as_list(values["map"])
            if "description" in values:
                data["description"] = values["description"]
            return None

        async def _map_delete(self, values, user):
            self._mapping(values["id"])
            del self.pci_mappings[values["id"]]
            return None

        async def _qm_resize(self, values, user):
            vm = self.find(values["node"], values["vmid"])
            disk = values["disk"]
            if disk not in vm.config:
                raise routing.die("disk '%s' does not exist" % disk)
            routing.check_digest(vm.digest(), values.get("digest"))
            volume, props = split_drive(vm.config[disk])
            vol = self._qm_volume(volume) or {}
            current = int(vol.get("size") or 0)
            relative, size = parse_size(values["size"])
            new = current + size if relative else size
            if new < current:
                raise routing.die("shrinking disks is not supported")

            async def body():
                if vol:
                    vol["size"] = new
                props["size"] = format_size(new)
                vm.config[disk] = join_drive(volume, props)
            return await self.task(vm.node, "resize", vm.vmid, user, body, vm=vm)

    return LabPve


async def serve(args):
    from fakepve.certs import make_cert

    with open(args.password_file) as handle:
        password = handle.read().strip()
    vm_hosts = {}
    if args.vm_hosts:
        with open(args.vm_hosts) as handle:
            vm_hosts = json.load(handle)
    pve = lab_pve_class()(user=args.user, password=password, host=args.host, port=args.port,
                          import_dir=args.import_dir, vm_hosts=vm_hosts)
    pve.time_scale = 0
    pve.cluster_name = args.cluster
    pve.nodes.clear()
    for node in [n for n in args.nodes.split(",") if n]:
        pve.add_node(node)
    tmp = tempfile.mkdtemp(prefix="llmstack-fakepve-")
    try:
        certfile, keyfile, dummy_der = make_cert(tmp, hosts=(args.host,))
        await pve.start(certfile, keyfile)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("fakepve listening on https://%s:%d (nodes: %s)" % (args.host, args.port, ", ".join(sorted(pve.nodes))),
          flush=True)
    await asyncio.Event().wait()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--host", type=_loopback, default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18006)
    parser.add_argument("--user", default="root@pam")
    parser.add_argument("--password-file", required=True)
    parser.add_argument("--nodes", required=True, help="comma-separated node names")
    parser.add_argument("--cluster", default="llmstack-lab")
    parser.add_argument("--import-dir",
                        help="the files of storage local's import content (a node's /var/lib/vz/import)")
    parser.add_argument("--vm-hosts", help="JSON {vmid: {container, hostname, image, label}}: the VMs' guests")
    args = parser.parse_args(argv)
    if not os.path.exists(args.password_file):
        parser.error("no password file %s" % args.password_file)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
