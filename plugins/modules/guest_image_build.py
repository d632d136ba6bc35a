#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: guest_image_build
short_description: Build a Debian 13 GPU guest disk image with debootstrap, without mounting partitions
version_added: 0.1.0
description:
  - Builds a GPT disk image (ESP, optional C(/boot), root) holding a minimal Debian 13 with the kernel, GRUB EFI at
    the removable path (C(EFI/BOOT/BOOTX64.EFI)), systemd-networkd with the VM's static addresses, deb822 apt
    sources, locale, time zone, key-only SSH for root, a serial console and the QEMU guest agent.
  - "No partition is mounted: C(debootstrap --variant=minbase) into a directory, the files written there, then
    C(mkfs.ext4 -d) for the root (and boot) file system, C(mkfs.vfat) and mtools for the ESP, C(sfdisk) for the
    table, then each partition's data regions copied into the image (its holes skipped). Needs root (debootstrap,
    chroot)."
  - Idempotent. Next to the image, C(<path>.json) records the inputs (package list, the files written, suite,
    mirror, layout) and their digest; the image is rebuilt only when the digest changes (or with O(force)).
  - The file systems' UUIDs are derived from the inputs, so the same inputs give the same fstab.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  settings:
    description:
      - "The role's variables without the C(guest_image_) prefix: C(suite), C(mirror), C(security_mirror),
        C(components), C(updates), C(security), C(backports), C(extra_packages), C(cloud_init), C(disk_gib),
        C(esp_mib), C(boot_mib), C(hostname), C(domain), C(interfaces) (address, prefix, gateway, mac or name),
        C(vlans) (C(llmstack_vlans)), C(dns_servers), C(locale), C(timezone), C(authorized_keys),
        C(serial_console), C(kernel_cmdline), C(formats), C(host_public_key) (the VM's SSH host key made by the
        collection, M(pvegpu.llmstack.ssh_host_key); empty - keys made at the first boot)."
      - Every one is needed. Their defaults are stated once, in the role's C(defaults/main.yml); the module has none
        and names the missing ones.
    type: dict
    required: true
  path:
    description: The raw image to write (C(.qcow2) next to it when C(qcow2) is in the formats).
    type: path
    required: true
  work_dir:
    description: Where the root file system is assembled (about 1.5 GiB); removed after a build.
    type: path
    required: true
  cache_dir:
    description:
      - Keep the debootstrapped tree here as a tarball, named by the digest of suite, mirror, components and
        packages; the next image with the same base (another VM) starts from it instead of running debootstrap.
        Empty for no cache.
    type: path
    default: ''
  force:
    description: Rebuild even when the recorded inputs match.
    type: bool
    default: false
  host_key:
    description:
      - The private half of the C(host_public_key) of O(settings) (OpenSSH format), written to
        C(/etc/ssh/ssh_host_ed25519_key) (0600) in the image; required with it. Not an input of the digest (the public
        key is); the image file is then written 0600. Never logged.
    type: str
    default: ''
attributes:
  platform:
    platforms: debian
requirements:
  - debootstrap, e2fsprogs (mkfs.ext4 -d), dosfstools, mtools, fdisk (sfdisk), qemu-utils for qcow2; root.
"""

EXAMPLES = r"""
- name: Build the guest image
  pvegpu.llmstack.guest_image_build:
    settings:
      suite: trixie
      mirror: http://deb.debian.org/debian
      security_mirror: ""
      components: [main, contrib, non-free, non-free-firmware]
      updates: true
      security: true
      backports: true
      extra_packages: []
      cloud_init: false
      disk_gib: 64
      esp_mib: 256
      boot_mib: 0
      hostname: gpu-vm-a
      domain: ""
      interfaces:
        - {vlan: inference, address: 192.168.20.20, mac: "bc:24:11:00:00:20"}
      vlans:
        inference: {id: 20, cidr: 192.168.20.0/24, gateway: 192.168.20.1}
      dns_servers: []
      locale: en_US.UTF-8
      timezone: Etc/UTC
      authorized_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... ops@example"]
      serial_console: ttyS0,115200
      kernel_cmdline: ""
      formats: [raw]
      host_public_key: ""
    path: /var/lib/llmstack/images/gpu-vm-a.raw
    work_dir: /var/tmp/llmstack-image-gpu-vm-a
"""

RETURN = r"""
digest:
  description: SHA-256 of the inputs; the image is rebuilt when it changes.
  returned: success
  type: str
rebuilt_because:
  description: Why the image was (or in check mode would be) built; null when it was up to date.
  returned: success
  type: str
path:
  description: The raw image.
  returned: success
  type: str
ids:
  description: The file system and partition UUIDs (root, boot, esp, disk, part_*).
  returned: success
  type: dict
kernel:
  description: The kernel version in the image.
  returned: when built or recorded
  type: str
build_seconds:
  description: How long the build took (this run, or the recorded one).
  returned: when built or recorded
  type: float
base:
  description: Where the base tree came from in this build, C(debootstrap) or C(cache).
  returned: when built
  type: str
packages:
  description: The packages installed besides minbase.
  returned: success
  type: list
  elements: str
"""

import contextlib
import json
import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import guest_image, ssh_host_key


def recorded(path):
    try:
        with open(path + ".json") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


class Builder:
    def __init__(self, module, built, work):
        self.module = module
        self.plan = built
        self.work = work
        self.rootfs = os.path.join(work, "rootfs")
        self.log = os.path.join(work, "build.log")

    def run(self, args, what, data=None, cwd=None):
        rc, out, err = self.module.run_command(args, data=data, cwd=cwd, binary_data=data is not None)
        with open(self.log, "a") as handle:
            handle.write("$ %s\n%s%s\n" % (" ".join(args), out, err))
        if rc != 0:
            tail = "\n".join((out + err).strip().splitlines()[-20:])
            self.fail("%s failed (exit %d): %s" % (what, rc, tail))
        return out

    def fail(self, msg, **extra):
        self.module.fail_json(msg="guest_image: " + msg, work_dir=self.work, **extra)

    def base(self, cache_dir):
        """The debootstrapped tree, from the cache when the same suite, mirror and packages were built before."""
        if cache_dir:
            tarball = os.path.join(cache_dir, "base-%s.tar" % self.plan["base_digest"])
            if os.path.exists(tarball):
                os.makedirs(self.rootfs)
                self.run(["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-xpf", tarball, "-C",
                          self.rootfs], "unpacking the cached base tree")
                return "cache"
        self.debootstrap()
        if cache_dir:
            os.makedirs(cache_dir, mode=0o700, exist_ok=True)
            partial = "%s.%d.partial" % (tarball, os.getpid())
            self.run(["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-cpf", partial, "-C", self.rootfs,
                      "."], "caching the base tree")
            os.chmod(partial, 0o600)
            os.rename(partial, tarball)
            # Keep the three most recent base trees; older ones belong to inputs no longer used.
            bases = sorted((os.path.join(cache_dir, n) for n in os.listdir(cache_dir)
                            if n.startswith("base-") and n.endswith(".tar")), key=os.path.getmtime, reverse=True)
            for old in bases[3:]:
                os.unlink(old)
        return "debootstrap"

    def debootstrap(self):
        settings = self.plan["settings"]
        args = ["debootstrap", "--variant=minbase", "--components=" + ",".join(settings["components"]),
                "--include=" + ",".join(self.plan["packages"]), settings["suite"], self.rootfs, settings["mirror"]]
        rc, out, err = self.module.run_command(args)
        with open(self.log, "a") as handle:
            handle.write("$ %s\n%s%s\n" % (" ".join(args), out, err))
        if rc != 0:
            tail = ""
            inner = os.path.join(self.rootfs, "debootstrap", "debootstrap.log")
            if os.path.exists(inner):
                with open(inner, errors="replace") as handle:
                    tail = "\n".join(handle.read().splitlines()[-20:])
            tail = tail or "\n".join((out + err).strip().splitlines()[-20:])
            self.fail("debootstrap of %s from %s failed (exit %d); last lines of its log:\n%s"
                      % (settings["suite"], settings["mirror"], rc, tail))

    def write_files(self):
        for rel, mode in guest_image.DIR_MODES.items():
            path = os.path.join(self.rootfs, rel)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, mode)
        for rel, content in self.plan["files"].items():
            path = os.path.join(self.rootfs, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.islink(path) or os.path.exists(path):
                os.unlink(path)
            with open(path, "w") as handle:
                handle.write(content)
            os.chmod(path, guest_image.FILE_MODES.get(rel, 0o644))
        settings = self.plan["settings"]
        localtime = os.path.join(self.rootfs, "etc", "localtime")
        if os.path.lexists(localtime):
            os.unlink(localtime)
        if not os.path.exists(os.path.join(self.rootfs, "usr", "share", "zoneinfo", settings["timezone"])):
            self.fail("guest_image_timezone: %r is not a time zone of tzdata" % settings["timezone"])
        os.symlink("/usr/share/zoneinfo/" + settings["timezone"], localtime)
        os.makedirs(os.path.join(self.rootfs, "boot", "efi"), exist_ok=True)

    def chroot(self, host_key=None):
        self.run(["chroot", self.rootfs, "locale-gen"], "locale-gen")
        self.run(["chroot", self.rootfs, "update-locale", "LANG=" + self.plan["settings"]["locale"]], "update-locale")
        self.run(["chroot", self.rootfs, "systemctl", "enable"] + guest_image.enable_units(self.plan["settings"]),
                 "systemctl enable")
        # Unique per VM: the collection's own key (host_key), or regenerated on the first boot.
        for name in os.listdir(os.path.join(self.rootfs, "etc", "ssh")):
            if name.startswith("ssh_host_"):
                os.unlink(os.path.join(self.rootfs, "etc", "ssh", name))
        if host_key:
            path = os.path.join(self.rootfs, guest_image.HOST_KEY)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(host_key if host_key.endswith("\n") else host_key + "\n")
            with open(path + ".pub", "w") as handle:
                handle.write(self.plan["files"][guest_image.HOST_KEY + ".pub"])
            os.chmod(path + ".pub", 0o644)
        with open(os.path.join(self.rootfs, "etc", "machine-id"), "w"):
            pass
        dbus_id = os.path.join(self.rootfs, "var", "lib", "dbus", "machine-id")
        if os.path.lexists(dbus_id):
            os.unlink(dbus_id)
        self.run(["chroot", self.rootfs, "apt-get", "clean"], "apt-get clean")
        with open(os.path.join(self.rootfs, "etc", "shadow")) as handle:
            root = [line for line in handle if line.startswith("root:")][0].split(":")[1]
        if not root.startswith(("*", "!")):
            self.fail("root has a password in the built image; refusing to ship it")

    def kernel(self):
        versions = sorted(name[len("vmlinuz-"):] for name in os.listdir(os.path.join(self.rootfs, "boot"))
                          if name.startswith("vmlinuz-"))
        if not versions:
            self.fail("no kernel in /boot after debootstrap (linux-image-amd64 missing?)")
        version = versions[-1]
        if not os.path.exists(os.path.join(self.rootfs, "boot", "initrd.img-" + version)):
            self.fail("no initramfs for kernel %s" % version)
        return version

    def bootloader(self, version):
        settings, ids = self.plan["settings"], self.plan["ids"]
        grub_dir = os.path.join(self.rootfs, "boot", "grub")
        os.makedirs(os.path.join(grub_dir, "x86_64-efi"), exist_ok=True)
        with open(os.path.join(grub_dir, "grub.cfg"), "w") as handle:
            handle.write(guest_image.grub_cfg(settings, ids, version))
        source = os.path.join(self.rootfs, "usr", "lib", "grub", "x86_64-efi")
        for name in os.listdir(source):
            if name.endswith((".mod", ".lst")):
                shutil.copy2(os.path.join(source, name), os.path.join(grub_dir, "x86_64-efi", name))
        with open(os.path.join(self.rootfs, "tmp", "grub-early.cfg"), "w") as handle:
            handle.write(self.plan["grub_early"])
        prefix = "/grub" if settings["boot_mib"] else "/boot/grub"
        self.run(["chroot", self.rootfs, "grub-mkimage", "-d", "/usr/lib/grub/x86_64-efi", "-O", "x86_64-efi",
                  "-c", "/tmp/grub-early.cfg", "-p", prefix, "-o", "/tmp/BOOTX64.EFI"] + list(guest_image.GRUB_MODULES),
                 "grub-mkimage")
        efi = os.path.join(self.work, "BOOTX64.EFI")
        shutil.move(os.path.join(self.rootfs, "tmp", "BOOTX64.EFI"), efi)
        os.unlink(os.path.join(self.rootfs, "tmp", "grub-early.cfg"))
        return efi

    def du(self, path):
        total = 0
        for folder, _dirs, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(folder, name)).st_blocks * 512
        return total

    def filesystems(self, efi):
        settings, ids, plan = self.plan["settings"], self.plan["ids"], self.plan["layout"]
        parts = dict((p["name"], p) for p in plan["partitions"])
        images = {}
        root_source = self.rootfs
        if settings["boot_mib"]:
            boot_source = os.path.join(self.work, "bootfs")
            os.makedirs(boot_source)
            for name in os.listdir(os.path.join(self.rootfs, "boot")):
                if name != "efi":
                    shutil.move(os.path.join(self.rootfs, "boot", name), os.path.join(boot_source, name))
            os.makedirs(os.path.join(boot_source, "efi"), exist_ok=True)
            problem = guest_image.check_fits(self.du(boot_source), parts["boot"]["size"])
            if problem:
                self.fail(problem.replace("guest_image_disk_gib", "guest_image_boot_mib").replace("root", "boot"))
            images["boot"] = os.path.join(self.work, "boot.img")
            self.mkext4(images["boot"], boot_source, parts["boot"]["size"], ids["boot"], "boot")
        problem = guest_image.check_fits(self.du(root_source), parts["root"]["size"])
        if problem:
            self.fail(problem)
        images["root"] = os.path.join(self.work, "root.img")
        self.mkext4(images["root"], root_source, parts["root"]["size"], ids["root"], "root")
        images["esp"] = os.path.join(self.work, "esp.img")
        self.run(["mkfs.vfat", "-F", "32", "-n", "EFI", "-i", ids["esp_serial"], "-C", images["esp"],
                  str(parts["esp"]["size"] // 1024)], "mkfs.vfat")
        env_img = ["-i", images["esp"]]
        self.run(["mmd"] + env_img + ["::/EFI", "::/EFI/BOOT"], "mmd")
        self.run(["mcopy"] + env_img + [efi, "::/EFI/BOOT/BOOTX64.EFI"], "mcopy")
        return images

    def mkext4(self, image, source, size, fs_uuid, label):
        # Lazy inode tables and journal: a 64 GiB image stays sparse; the guest's kernel initialises them.
        extended = "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard"
        self.run(["mkfs.ext4", "-q", "-F", "-d", source, "-U", fs_uuid, "-L", label, "-O",
                  guest_image.EXT4_FEATURES, "-E", extended, image, "%dk" % (size // 1024)],
                 "mkfs.ext4 -d (%s)" % label)

    def disk(self, images, target):
        plan = self.plan["layout"]
        with open(target, "wb") as handle:
            handle.truncate(plan["disk"])
        self.run(["sfdisk", "--no-reread", "--no-tell-kernel", target], "sfdisk",
                 data=self.plan["sfdisk"].encode("utf-8"))
        for part in plan["partitions"]:
            try:
                guest_image.copy_into(images[part["name"]], target, part["start"])
            except OSError as exc:
                self.fail("copying the %s partition into %s failed: %s" % (part["name"], target, exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(settings=dict(type="dict", required=True), path=dict(type="path", required=True),
                           work_dir=dict(type="path", required=True), cache_dir=dict(type="path", default=""),
                           force=dict(type="bool", default=False), host_key=dict(type="str", default="", no_log=True)),
        supports_check_mode=True,
    )
    path, work = module.params["path"], module.params["work_dir"]
    try:
        built = guest_image.plan(module.params["settings"])
    except ValueError as err:
        module.fail_json(msg="guest_image: the settings have problems; nothing was built:\n" + str(err))
    public = built["settings"]["host_public_key"]
    if public:
        try:
            matches = ssh_host_key.public_of(module.params["host_key"]) == " ".join(str(public).split()[:2])
        except ssh_host_key.HostKeyError as err:
            module.fail_json(msg="guest_image: host_key: %s (settings.host_public_key is set); nothing was built" % err)
        if not matches:
            module.fail_json(msg="guest_image: host_key is not the private half of settings.host_public_key; nothing "
                                 "was built")
    before = recorded(path)
    result = {"digest": built["digest"], "path": path, "ids": built["ids"], "packages": built["packages"],
              "rebuilt_because": None}
    if not os.path.exists(path):
        reason = "the image does not exist"
    elif before is None:
        reason = "no record of the inputs next to the image"
    elif before.get("digest") != built["digest"]:
        changed_inputs = sorted(k for k in built["inputs"] if before.get("inputs", {}).get(k) != built["inputs"][k])
        reason = "the inputs changed: %s" % ", ".join(changed_inputs or ["builder"])
    elif "qcow2" in built["settings"]["formats"] and not os.path.exists(os.path.splitext(path)[0] + ".qcow2"):
        reason = "the qcow2 image is missing"
    elif module.params["force"]:
        reason = "force"
    else:
        reason = None
    if reason is None:
        result.update(kernel=before.get("kernel"), build_seconds=before.get("build_seconds"))
        module.exit_json(changed=False, **result)
    result["rebuilt_because"] = reason
    if module.check_mode:
        module.exit_json(changed=True, **result)
    if os.geteuid() != 0:
        module.fail_json(msg="guest_image: building an image needs root (debootstrap, chroot)", **result)
    for tool in ("debootstrap", "mkfs.ext4", "mkfs.vfat", "mmd", "mcopy", "sfdisk", "chroot"):
        if not module.get_bin_path(tool):
            module.fail_json(msg="guest_image: %s is not installed on the build host" % tool, **result)
    start = time.monotonic()
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work, mode=0o700)
    builder = Builder(module, built, work)
    result["base"] = builder.base(module.params["cache_dir"])
    builder.write_files()
    builder.chroot(module.params["host_key"] if public else None)
    kernel = builder.kernel()
    efi = builder.bootloader(kernel)
    images = builder.filesystems(efi)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    partial = path + ".partial"
    if public:
        # The image holds the VM's private host key: its files (raw, qcow2) are made 0600 from the start.
        os.umask(0o077)
    builder.disk(images, partial)
    if public:
        os.chmod(partial, 0o600)
    if "qcow2" in built["settings"]["formats"]:
        qcow2 = os.path.splitext(path)[0] + ".qcow2"
        builder.run(["qemu-img", "convert", "-O", "qcow2", partial, qcow2 + ".partial"], "qemu-img convert")
        if public:
            os.chmod(qcow2 + ".partial", 0o600)
        os.rename(qcow2 + ".partial", qcow2)
    os.rename(partial, path)
    seconds = round(time.monotonic() - start, 1)
    record = {"digest": built["digest"], "inputs": built["inputs"], "ids": built["ids"], "kernel": kernel,
              "build_seconds": seconds, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cmdline": built["cmdline"]}
    with open(path + ".json.partial", "w") as handle:
        json.dump(record, handle, indent=2, sort_keys=True)
    os.rename(path + ".json.partial", path + ".json")
    shutil.rmtree(work)
    result.update(kernel=kernel, build_seconds=seconds)
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
