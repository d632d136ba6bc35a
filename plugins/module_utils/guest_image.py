# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Debian 13 GPU guest images: settings checks, the files written into the root file system, the disk layout,
and the digest of the inputs that decides whether an image must be rebuilt.

Plain Python, no Ansible imports. The ``guest_image_build`` module runs the build (debootstrap, mkfs.ext4 -d,
mkfs.vfat + mtools, sfdisk, dd: no partition is ever mounted); everything it writes is computed here.

Seed 000 §guest builds the same system by hand from a live CD (EFI + boot + root, fstab by UUID, hostname,
static network, apt sources with a mirror, locales, timezone, kernel, grub-efi, SSH) and turns on root login
with a password. These images allow key-only SSH: ``PermitRootLogin prohibit-password``,
``PasswordAuthentication no``, root's password locked.
"""

import errno
import hashlib
import ipaddress
import json
import os
import re
import uuid

# Bumped whenever the build steps change what ends up in an image: images built before are rebuilt.
BUILDER_VERSION = 3
# Bumped when what debootstrap produces changes (its options): cached base trees built before are not reused.
BASE_VERSION = 1
SUITES = ("trixie",)
BASE_PACKAGES = ("linux-image-amd64", "systemd-sysv", "udev", "dbus", "openssh-server", "python3",
                 "qemu-guest-agent", "ca-certificates", "locales", "tzdata", "initramfs-tools", "zstd",
                 "grub-efi-amd64-bin", "grub2-common", "iproute2", "iputils-ping", "less",
                 # Seed 000's own: fsck.vfat checks the ESP at boot (fstab pass 2), and an editor.
                 "dosfstools", "vim")
COMPONENTS = ("main", "contrib", "non-free", "non-free-firmware")
SECTOR = 512
MIB = 1024 * 1024
# GPT layout: 1 MiB alignment; partition type GUIDs (UAPI discoverable partitions).
ESP_TYPE = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
ROOT_TYPE = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"   # Linux root (x86-64)
BOOT_TYPE = "BC13C2FF-59E6-4262-A352-B275FD6F7172"   # extended boot loader (XBOOTLDR)
# GRUB 2.06 (bookworm) cannot read ext4 with these features; GRUB 2.12 can, but the images stay readable by both.
EXT4_FEATURES = "^metadata_csum_seed,^orphan_file"
GRUB_MODULES = ("part_gpt", "part_msdos", "fat", "ext2", "search", "search_fs_uuid", "configfile", "normal",
                "linux", "echo", "test", "gzio", "all_video", "efi_gop", "serial", "terminal", "ls", "cat")
UUID_NAMESPACE = uuid.UUID("3d9a7f4e-6a1c-5b8e-9f2d-7c4b1e0a5d36")
HOSTNAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
DOMAIN_RE = re.compile(r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
LOCALE_RE = re.compile(r"^[A-Za-z]{2,3}_[A-Z]{2}\.UTF-8$")
TIMEZONE_RE = re.compile(r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$")
MAC_RE = re.compile(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")
IFNAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,15}$")
KEY_RE = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
                    r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/=]+( [^\n]*)?$")
MIRROR_RE = re.compile(r"^(https?|file)://[^\s]+$")
SERIAL_RE = re.compile(r"^ttyS[0-9],[0-9]{4,6}$")
# The smallest sizes that make sense: a minimal trixie with a kernel is ~700 MiB.
MIN_DISK_GIB = 2
FORMATS = ("raw", "qcow2")

# The settings check_settings() and plan() read: the guest_image role's variables without their prefix, plus the
# VM's interfaces and the VLANs (llmstack_interfaces, llmstack_vlans). Their defaults are stated once, in
# roles/guest_image/defaults/main.yml; the role passes every one, so none is defaulted here.
SETTINGS = ("suite", "mirror", "security_mirror", "components", "updates", "security", "backports", "extra_packages",
            "cloud_init", "disk_gib", "esp_mib", "boot_mib", "hostname", "domain", "interfaces", "vlans",
            "dns_servers", "locale", "timezone", "authorized_keys", "serial_console", "kernel_cmdline", "formats",
            "host_public_key")


def _problem(problems, name, message):
    problems.append("guest_image_%s: %s" % (name, message))


def _interfaces(value, vlans, problems):
    """The VM's llmstack_interfaces joined with llmstack_vlans: address/prefix, gateway, mac or name."""
    out = []
    vlans = vlans if isinstance(vlans, dict) else {}
    if not isinstance(value, list) or not value:
        _problem(problems, "interfaces", "the VM has no interface (llmstack_interfaces is empty): the guest would "
                                         "be unreachable")
        return out
    for index, iface in enumerate(value):
        label = "interfaces[%d]" % index
        if not isinstance(iface, dict):
            _problem(problems, label, "must be a mapping")
            continue
        vlan = vlans.get(iface.get("vlan"))
        if not isinstance(vlan, dict) or not vlan.get("cidr"):
            _problem(problems, label, "VLAN %r is not in llmstack_vlans (or has no cidr)" % (iface.get("vlan"),))
            continue
        try:
            network = ipaddress.ip_network(str(vlan["cidr"]), strict=False)
            address = ipaddress.ip_interface("%s/%d" % (iface.get("address"), network.prefixlen))
        except ValueError:
            _problem(problems, label, "address %r in VLAN %r (%s) is not an IP interface"
                     % (iface.get("address"), iface.get("vlan"), vlan.get("cidr")))
            continue
        gateway = vlan.get("gateway")
        if gateway:
            try:
                gw = ipaddress.ip_address(str(gateway))
            except ValueError:
                _problem(problems, label, "gateway %r is not an IP address" % (gateway,))
                continue
            if gw not in address.network:
                _problem(problems, label, "gateway %s is not in %s" % (gw, address.network))
                continue
        mac, name = iface.get("mac"), iface.get("name")
        if mac and not MAC_RE.match(str(mac)):
            _problem(problems, label, "mac %r is not a MAC address" % (mac,))
            continue
        if name and not IFNAME_RE.match(str(name)):
            _problem(problems, label, "name %r is not an interface name" % (name,))
            continue
        out.append({"vlan": str(iface.get("vlan", "net%d" % index)), "address": str(address),
                    "gateway": str(gateway) if gateway else None, "mac": str(mac).lower() if mac else None,
                    "name": str(name) if name else None})
    if len(out) > 1:
        loose = [i for i, iface in enumerate(out) if not iface["mac"] and not iface["name"]]
        if loose:
            _problem(problems, "interfaces", "the VM has %d interfaces and %s %s no mac or name in "
                     "llmstack_interfaces: the guest cannot tell its NICs apart; give each a mac (gpu_vm sets the "
                     "same MAC on the PVE NIC)" % (len(out), ", ".join("interfaces[%d]" % i for i in loose),
                                                   "has" if len(loose) == 1 else "have"))
    return out


def check_settings(settings):
    """(merged settings, problems): every problem at once, each naming the role variable."""
    problems = []
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        problems.append("guest_image: unknown settings %s" % ", ".join(unknown))
    missing = [k for k in SETTINGS if k not in settings]
    if missing:
        # Defaults live in the role's defaults/main.yml only; a caller of the module passes every setting.
        return dict(settings), problems + ["guest_image: settings missing %s (pass every one; the guest_image role's "
                                           "defaults/main.yml has their defaults)" % ", ".join(missing)]
    merged = dict((k, settings[k]) for k in SETTINGS)
    if merged["suite"] not in SUITES:
        _problem(problems, "suite", "%r is not supported (%s)" % (merged["suite"], ", ".join(SUITES)))
    if not merged["mirror"]:
        _problem(problems, "mirror", "no Debian mirror given (for example http://deb.debian.org/debian)")
    elif not MIRROR_RE.match(str(merged["mirror"])):
        _problem(problems, "mirror", "%r is not an http(s):// or file:// URL" % (merged["mirror"],))
    if merged["security"] and merged["mirror"]:
        security = security_mirror(merged)
        if not security:
            _problem(problems, "security_mirror", "cannot be derived from guest_image_mirror %r (it does not end in "
                     "/debian); give it" % (merged["mirror"],))
        elif not MIRROR_RE.match(security):
            _problem(problems, "security_mirror", "%r is not an http(s):// or file:// URL" % (security,))
    components = merged["components"]
    if not isinstance(components, list) or "main" not in components or any(c not in COMPONENTS for c in components):
        _problem(problems, "components", "must be a list with main, from %s" % ", ".join(COMPONENTS))
    packages = merged["extra_packages"]
    if not isinstance(packages, list) or any(not PACKAGE_RE.match(str(p)) for p in packages):
        _problem(problems, "extra_packages", "must be a list of Debian package names")
    for name in ("disk_gib", "esp_mib", "boot_mib"):
        if not isinstance(merged[name], int) or isinstance(merged[name], bool) or merged[name] < 0:
            _problem(problems, name, "must be a whole number")
    if not problems:
        if merged["disk_gib"] < MIN_DISK_GIB:
            _problem(problems, "disk_gib", "%d GiB is too small; at least %d" % (merged["disk_gib"], MIN_DISK_GIB))
        if not 64 <= merged["esp_mib"] <= 4096:
            _problem(problems, "esp_mib", "%d MiB: the ESP must be 64-4096 MiB" % merged["esp_mib"])
        if merged["boot_mib"] and not 256 <= merged["boot_mib"] <= 4096:
            _problem(problems, "boot_mib", "%d MiB: a separate /boot must be 256-4096 MiB (0: none)"
                     % merged["boot_mib"])
    hostname = str(merged["hostname"])
    if not HOSTNAME_RE.match(hostname):
        _problem(problems, "hostname", "%r is not a host name (lowercase letters, digits, '-', at most 63)" % hostname)
    if merged["domain"] and not DOMAIN_RE.match(str(merged["domain"])):
        _problem(problems, "domain", "%r is not a DNS domain" % (merged["domain"],))
    merged["interfaces"] = _interfaces(merged["interfaces"], merged.pop("vlans"), problems)
    dns = merged["dns_servers"]
    if not isinstance(dns, list):
        _problem(problems, "dns_servers", "must be a list of IP addresses")
    else:
        for server in dns:
            try:
                ipaddress.ip_address(str(server))
            except ValueError:
                _problem(problems, "dns_servers", "%r is not an IP address" % (server,))
    if not LOCALE_RE.match(str(merged["locale"])):
        _problem(problems, "locale", "%r is not a UTF-8 locale such as en_US.UTF-8" % (merged["locale"],))
    if not TIMEZONE_RE.match(str(merged["timezone"])) or ".." in str(merged["timezone"]):
        _problem(problems, "timezone", "%r is not a time zone name such as Etc/UTC or Asia/Shanghai"
                 % (merged["timezone"],))
    keys = merged["authorized_keys"]
    if not isinstance(keys, list) or not keys:
        _problem(problems, "authorized_keys", "no SSH public key for root: the image allows key-only SSH, so nobody "
                                              "could log in")
    else:
        for index, key in enumerate(keys):
            if not KEY_RE.match(str(key).strip()):
                _problem(problems, "authorized_keys", "entry %d is not an OpenSSH public key line" % index)
    host_key = merged["host_public_key"]
    if host_key and not re.match(r"^ssh-ed25519 [A-Za-z0-9+/]+=*( \S+)?$", str(host_key).strip()):
        # The collection's own key (ssh_host_key, from guest_image_host_key_secret); empty: made at the first boot.
        _problem(problems, "host_public_key", "%r is not an ssh-ed25519 public key line" % (host_key,))
    if merged["serial_console"] and not SERIAL_RE.match(str(merged["serial_console"])):
        _problem(problems, "serial_console", "%r is not like ttyS0,115200 (empty: none)" % (merged["serial_console"],))
    if re.search(r"[\"'`$\\\n;]", str(merged["kernel_cmdline"])):
        _problem(problems, "kernel_cmdline", "must not contain quotes, $, `, \\, ; or newlines")
    formats = merged["formats"]
    if not isinstance(formats, list) or not formats or any(f not in FORMATS for f in formats) or "raw" not in formats:
        _problem(problems, "formats", "must be a list with raw, optionally qcow2")
    return merged, problems


def security_mirror(settings):
    if settings.get("security_mirror"):
        return str(settings["security_mirror"])
    mirror = str(settings.get("mirror") or "").rstrip("/")
    if mirror.endswith("/debian"):
        return mirror + "-security"
    return ""


def packages(settings):
    """Every package debootstrap installs besides minbase, sorted."""
    wanted = set(BASE_PACKAGES) | set(settings["extra_packages"])
    if settings["cloud_init"]:
        wanted.add("cloud-init")
    return sorted(wanted)


def layout(settings):
    """Partitions: [{name, start, size (bytes), type}] and the disk size, 1 MiB aligned, GPT backup at the end."""
    disk = settings["disk_gib"] * 1024 * MIB
    start = MIB
    parts = [{"name": "esp", "start": start, "size": settings["esp_mib"] * MIB, "type": ESP_TYPE}]
    start += parts[-1]["size"]
    if settings["boot_mib"]:
        parts.append({"name": "boot", "start": start, "size": settings["boot_mib"] * MIB, "type": BOOT_TYPE})
        start += parts[-1]["size"]
    # The backup GPT takes the last 33 sectors; the root partition ends 1 MiB before the end of the disk.
    parts.append({"name": "root", "start": start, "size": disk - start - MIB, "type": ROOT_TYPE})
    return {"disk": disk, "partitions": parts}


def sfdisk_script(plan, ids):
    """sfdisk input for the plan; partition UUIDs fixed so that rebuilding the same inputs gives the same table."""
    lines = ["label: gpt", "label-id: %s" % ids["disk"].upper(), "unit: sectors", "first-lba: 2048",
             "sector-size: 512"]
    for part in plan["partitions"]:
        lines.append("start=%d, size=%d, type=%s, uuid=%s, name=%s" % (
            part["start"] // SECTOR, part["size"] // SECTOR, part["type"], ids["part_" + part["name"]].upper(),
            part["name"]))
    return "\n".join(lines) + "\n"


def identifiers(seed):
    """File system and partition identifiers derived from the inputs (the same inputs give the same image)."""
    def make(label):
        return str(uuid.uuid5(UUID_NAMESPACE, "%s:%s" % (seed, label)))

    esp = make("esp").replace("-", "")[:8].upper()
    return {"root": make("root"), "boot": make("boot"), "esp": "%s-%s" % (esp[:4], esp[4:]),
            "esp_serial": esp, "disk": make("disk"), "part_esp": make("part-esp"), "part_boot": make("part-boot"),
            "part_root": make("part-root")}


def _network_files(settings):
    files = {}
    gateway_set = False
    dns = settings["dns_servers"] or sorted({i["gateway"] for i in settings["interfaces"] if i["gateway"]})
    for index, iface in enumerate(settings["interfaces"]):
        if iface["mac"]:
            match = "MACAddress=%s" % iface["mac"]
        elif iface["name"]:
            match = "Name=%s" % iface["name"]
        else:
            match = "Type=ether\nName=en* eth*"
        lines = ["# %s (VLAN %s); written by pvegpu.llmstack.guest_image" % (iface["address"], iface["vlan"]),
                 "[Match]", match, "", "[Network]", "Address=%s" % iface["address"]]
        # One default route: the first interface with a gateway.
        if iface["gateway"] and not gateway_set:
            lines.append("Gateway=%s" % iface["gateway"])
            gateway_set = True
        lines += ["LinkLocalAddressing=no", "IPv6AcceptRA=no", ""]
        slug = re.sub(r"[^a-z0-9-]", "-", iface["vlan"].lower())
        files["etc/systemd/network/10-llmstack-%02d-%s.network" % (index, slug)] = "\n".join(lines)
    files["etc/resolv.conf"] = "".join("nameserver %s\n" % s for s in dns)
    return files


def cmdline(settings, ids):
    parts = ["root=UUID=%s" % ids["root"], "ro"]
    if settings["serial_console"]:
        parts += ["console=tty0", "console=%sn8" % settings["serial_console"]]
    if settings["kernel_cmdline"]:
        parts.append(str(settings["kernel_cmdline"]).strip())
    return " ".join(parts)


def render_files(settings, ids):
    """{path in the root file system: content} for every file the build writes (modes in FILE_MODES)."""
    fqdn = "%s.%s" % (settings["hostname"], settings["domain"]) if settings["domain"] else settings["hostname"]
    fstab = ["# <file system> <mount point> <type> <options> <dump> <pass>; written by pvegpu.llmstack.guest_image",
             "UUID=%s / ext4 defaults,relatime,errors=remount-ro 0 1" % ids["root"]]
    if settings["boot_mib"]:
        fstab.append("UUID=%s /boot ext4 defaults,relatime 0 2" % ids["boot"])
    fstab.append("UUID=%s /boot/efi vfat umask=0077 0 1" % ids["esp"])
    suites = [settings["suite"]]
    if settings["updates"]:
        suites.append(settings["suite"] + "-updates")
    if settings["backports"]:
        suites.append(settings["suite"] + "-backports")
    components = " ".join(settings["components"])
    sources = ["Types: deb", "URIs: %s" % settings["mirror"], "Suites: %s" % " ".join(suites),
               "Components: %s" % components, "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"]
    if settings["security"]:
        sources += ["", "Types: deb", "URIs: %s" % security_mirror(settings),
                    "Suites: %s-security" % settings["suite"], "Components: %s" % components,
                    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"]
    serial = settings["serial_console"]
    grub_default = [
        "# Written by pvegpu.llmstack.guest_image; update-grub reads it after kernel upgrades.",
        "GRUB_DEFAULT=0", "GRUB_TIMEOUT=1", "GRUB_DISTRIBUTOR=Debian",
        'GRUB_CMDLINE_LINUX_DEFAULT=""',
        'GRUB_CMDLINE_LINUX="%s"' % " ".join(cmdline(settings, ids).split()[2:]),
    ]
    if serial:
        unit, speed = serial.split(",")
        grub_default += ['GRUB_TERMINAL="console serial"',
                         'GRUB_SERIAL_COMMAND="serial --unit=%s --speed=%s"' % (unit[len("ttyS"):], speed)]
    files = {
        "etc/hostname": settings["hostname"] + "\n",
        "etc/hosts": "127.0.0.1 localhost\n127.0.1.1 %s %s\n::1 localhost ip6-localhost ip6-loopback\n"
                     % (fqdn, settings["hostname"]) if fqdn != settings["hostname"] else
                     "127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost ip6-loopback\n"
                     % settings["hostname"],
        "etc/fstab": "\n".join(fstab) + "\n",
        "etc/apt/sources.list.d/debian.sources": "\n".join(sources) + "\n",
        "etc/apt/sources.list": "# See /etc/apt/sources.list.d/debian.sources (deb822).\n",
        "etc/locale.gen": "%s UTF-8\n" % settings["locale"],
        "etc/default/locale": "LANG=%s\n" % settings["locale"],
        "etc/timezone": settings["timezone"] + "\n",
        "etc/default/grub": "\n".join(grub_default) + "\n",
        "etc/ssh/sshd_config.d/10-llmstack.conf": (
            "# Key-only SSH (pvegpu.llmstack.guest_image): no passwords, root by key only.\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PermitEmptyPasswords no\n"),
        "root/.ssh/authorized_keys": "".join(str(k).strip() + "\n" for k in settings["authorized_keys"]),
        "etc/llmstack-image": "",
    }
    if settings["host_public_key"]:
        # The VM's own host key, made by the collection (the build writes the private half, which is not an input):
        # sshd offers it alone, and the controller's known_hosts has it before the first connection.
        files["etc/ssh/ssh_host_ed25519_key.pub"] = str(settings["host_public_key"]).strip() + "\n"
        files["etc/ssh/sshd_config.d/10-llmstack.conf"] += "HostKey /etc/ssh/ssh_host_ed25519_key\n"
    else:
        # Host keys are made on the first boot, so no two VMs share them (the build removes its own).
        files["etc/systemd/system/llmstack-ssh-hostkeys.service"] = (
            "[Unit]\nDescription=Generate the SSH host keys on the first boot\n"
            "ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key\nBefore=ssh.service\n\n"
            "[Service]\nType=oneshot\nExecStart=/usr/bin/ssh-keygen -A\nRemainAfterExit=yes\n\n"
            "[Install]\nRequiredBy=ssh.service\n")
    files.update(_network_files(settings))
    return files


FILE_MODES = {"root/.ssh/authorized_keys": 0o600}
DIR_MODES = {"root/.ssh": 0o700}
# Units the build enables (systemctl enable in the chroot): enable_units() of the settings.
ENABLE_UNITS = ("systemd-networkd.service", "llmstack-ssh-hostkeys.service", "ssh.service")
HOST_KEY = "etc/ssh/ssh_host_ed25519_key"


def enable_units(settings):
    """The units the build enables: the first-boot host key service only when the image has no host key of ours."""
    return [u for u in ENABLE_UNITS if u != "llmstack-ssh-hostkeys.service" or not settings.get("host_public_key")]


def grub_cfg(settings, ids, kernel_version):
    """/boot/grub/grub.cfg for the first boot (update-grub replaces it after a kernel upgrade)."""
    prefix = "" if settings["boot_mib"] else "/boot"
    serial = settings["serial_console"]
    lines = ["# Written by pvegpu.llmstack.guest_image for the first boot; update-grub replaces it.",
             "set timeout=1", "set default=0"]
    if serial:
        unit, speed = serial.split(",")
        lines += ["serial --unit=%s --speed=%s" % (unit[len("ttyS"):], speed), "terminal_input console serial",
                  "terminal_output console serial"]
    lines += ["insmod part_gpt", "insmod ext2", "search --no-floppy --fs-uuid --set=root %s"
              % (ids["boot"] if settings["boot_mib"] else ids["root"]),
              "menuentry 'Debian GNU/Linux (%s)' {" % kernel_version,
              "    linux %s/vmlinuz-%s %s" % (prefix, kernel_version, cmdline(settings, ids)),
              "    initrd %s/initrd.img-%s" % (prefix, kernel_version), "}"]
    return "\n".join(lines) + "\n"


def grub_early_cfg(settings, ids):
    """The configuration embedded in EFI/BOOT/BOOTX64.EFI: find the file system with /boot/grub, load grub.cfg."""
    target = ids["boot"] if settings["boot_mib"] else ids["root"]
    prefix = "/grub" if settings["boot_mib"] else "/boot/grub"
    return ("search --no-floppy --fs-uuid --set=root %s\nset prefix=($root)%s\nconfigfile $prefix/grub.cfg\n"
            % (target, prefix))


def _digest(data):
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def plan(settings):
    """Everything the build needs, and the inputs digest. ValueError with the problems when settings are bad."""
    merged, problems = check_settings(settings)
    if problems:
        raise ValueError("\n".join(problems))
    # An image without a host key of ours has the inputs (and the identifiers) it had before host keys existed.
    seeded = dict((k, v) for k, v in merged.items() if k != "host_public_key" or v)
    seed = _digest({"builder": BUILDER_VERSION, "settings": seeded})
    ids = identifiers(seed)
    files = render_files(merged, ids)
    disk = layout(merged)
    inputs = {
        "builder": BUILDER_VERSION,
        "suite": merged["suite"],
        "mirror": merged["mirror"],
        "variant": "minbase",
        "components": merged["components"],
        "packages": packages(merged),
        "files": dict((path, hashlib.sha256(content.encode("utf-8")).hexdigest()) for path, content in files.items()),
        "grub_early": hashlib.sha256(grub_early_cfg(merged, ids).encode("utf-8")).hexdigest(),
        "layout": disk,
        "formats": sorted(merged["formats"]),
        "enable": enable_units(merged),
        "locale": merged["locale"],
        "timezone": merged["timezone"],
    }
    base = {"base": BASE_VERSION, "suite": merged["suite"], "mirror": merged["mirror"],
            "components": merged["components"], "packages": inputs["packages"]}
    return {"base_digest": _digest(base), "settings": merged, "ids": ids, "files": files, "layout": disk,
            "sfdisk": sfdisk_script(disk, ids),
            "packages": inputs["packages"], "inputs": inputs, "digest": _digest(inputs),
            "grub_early": grub_early_cfg(merged, ids), "cmdline": cmdline(merged, ids)}


def check_fits(rootfs_bytes, root_partition_bytes):
    """None, or why the root file system does not fit its partition (with 15 % and 256 MiB to spare)."""
    needed = int(rootfs_bytes * 1.15) + 256 * MIB
    if needed > root_partition_bytes:
        sizes = (needed // MIB, rootfs_bytes // MIB, root_partition_bytes // MIB)
        return ("guest_image_disk_gib: the root file system needs about %d MiB (%d MiB of files), the root partition "
                "has %d MiB; raise guest_image_disk_gib" % sizes)
    return None


def data_extents(fd, size):
    """[(start, length)] of the regions of an open file that hold data (SEEK_DATA/SEEK_HOLE), in order; the whole
    file where the file system cannot say."""
    extents, position = [], 0
    try:
        while position < size:
            try:
                start = os.lseek(fd, position, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:   # no data after position
                    break
                raise
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            extents.append((start, end - start))
            position = end
    except (AttributeError, OSError):
        return [(0, size)] if size else []
    return extents


def copy_into(source, target, offset, chunk=4 * MIB):
    """Copy a (sparse) partition image into the disk image at ``offset``, its data regions only: the holes of a 64 GiB
    root file system are neither read nor written (``dd conv=sparse`` read and compared all of them, about 30 s of
    CPU per image). The target's bytes in a hole are left as they are (the disk image is new and sparse: zeros).
    Returns the bytes copied."""
    copied = 0
    with open(source, "rb") as src, open(target, "r+b") as dst:
        size = os.fstat(src.fileno()).st_size
        for start, length in data_extents(src.fileno(), size):
            src.seek(start)
            dst.seek(offset + start)
            left = length
            while left:
                block = src.read(min(chunk, left))
                if not block:
                    break
                dst.write(block)
                left -= len(block)
                copied += len(block)
    return copied
