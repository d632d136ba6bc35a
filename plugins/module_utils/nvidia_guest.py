# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA stack of a Debian 13 GPU guest: settings checks, package lists, apt components, the nvidia runtime in
Docker's daemon.json, OpenPGP keyring checks, the driver's reboot decision and the passthrough verdict (the Docker
engine itself is the docker role's: docker_engine.py).

Plain Python, no Ansible imports; the ``nvidia`` role's modules and filters are thin wrappers around it.

Seed 000 §driver: Debian's ``nvidia-driver`` through DKMS with the running kernel's headers, then
nvidia-container-toolkit 1.18.2-1 from NVIDIA's apt repository with a ``signed-by`` keyring and
``nvidia-ctk runtime configure --runtime=docker``.
"""

import base64
import hashlib
import json
import os
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

# Debian release -> codename this role supports (the guests guest_image builds).
SUPPORTED = {"13": "trixie"}
DRIVER_SOURCES = ("debian", "cuda-repo")
DRIVER_FLAVORS = ("proprietary", "open")
DRIVER_INSTALL = ("auto", "always", "never")
REBOOT = ("auto", "never")
NVIDIA_VENDOR = "10de"
# Display (0x0300) and 3D (0x0302: V100/A100/H100) controllers.
GPU_CLASSES = ("0300", "0302")
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                    "libnvidia-container1")
# Debian components each driver source needs (firmware-misc-nonfree is in non-free-firmware).
DEBIAN_COMPONENTS = {"debian": ("non-free", "non-free-firmware"), "cuda-repo": ("non-free-firmware",)}
TOOLKIT_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(~rc\.[0-9]+)?-[0-9]+$")
BRANCH_RE = re.compile(r"^[0-9]{3}$")


class NvidiaGuestError(ValueError):
    pass


def _problem(problems, name, text):
    problems.append("nvidia_%s: %s" % (name, text))


def check_distribution(distribution, major_version, release=None):
    """None when supported, else the message that stops the role before it installs anything."""
    if distribution == "Debian" and str(major_version) in SUPPORTED:
        return None
    supported = ", ".join("Debian %s (%s)" % (v, c) for v, c in sorted(SUPPORTED.items()))
    seen = " ".join(str(x) for x in (distribution, major_version, release) if x)
    return ("pvegpu.llmstack.nvidia supports %s only; this host runs %s. Nothing was installed. The packages, "
            "repositories and paths differ elsewhere (NVIDIA's own roles cover Ubuntu and RHEL)." % (supported, seen))


def check_settings(s):
    """Every problem of the role's variables at once, each naming its variable."""
    problems = []
    choices = (("driver_source", DRIVER_SOURCES), ("driver_flavor", DRIVER_FLAVORS),
               ("driver_install", DRIVER_INSTALL), ("reboot", REBOOT))
    for name, allowed in choices:
        if s.get(name) not in allowed:
            _problem(problems, name, "must be one of %s, not %r" % (", ".join(allowed), s.get(name)))
    if s.get("driver_source") == "cuda-repo" and not BRANCH_RE.match(str(s.get("driver_branch") or "")):
        _problem(problems, "driver_branch", "the cuda-repo source needs a driver branch of three digits (e.g. 580)"
                 ", not %r" % (s.get("driver_branch"),))
    version = str(s.get("container_toolkit_version") or "")
    if not TOOLKIT_VERSION_RE.match(version):
        _problem(problems, "container_toolkit_version", "must be a full Debian package version such as 1.18.2-1 "
                 "(the four toolkit packages are pinned to it), not %r" % version)
    for name in ("container_toolkit_repo_url", "container_toolkit_gpg_key_url", "cuda_repo_url",
                 "cuda_repo_gpg_key_url"):
        problem = value_checks.url_problem(s.get(name))
        if problem:
            _problem(problems, name, problem)
    for name in ("container_toolkit_gpg_fingerprints", "cuda_repo_gpg_fingerprints"):
        for problem in value_checks.fingerprints_problems(s.get(name)):
            _problem(problems, name, problem)
    expected = s.get("expected_gpus")
    if expected is not None:
        try:
            expected_gpus(expected)
        except NvidiaGuestError as exc:
            _problem(problems, "expected_gpus", str(exc))
    return problems


# ---------------------------------------------------------------- packages


def driver_packages(source, kernel_release, flavor="proprietary", branch=None):
    """The driver packages to install (and hold) for a source."""
    if source == "debian":
        # Seed 000: nvidia-driver via DKMS with the running kernel's headers. nvidia-kernel-dkms builds the
        # module; firmware-misc-nonfree carries the GSP firmware of the newer GPUs.
        return ["nvidia-driver", "nvidia-kernel-dkms", "nvidia-smi", "nvidia-persistenced",
                "firmware-misc-nonfree", "linux-headers-%s" % kernel_release]
    if source == "cuda-repo":
        # NVIDIA's repository: cuda-drivers (proprietary kernel modules) or nvidia-open (open kernel modules);
        # the branch is held by the apt preferences pin (driver_pin).
        meta = "nvidia-open" if flavor == "open" else "cuda-drivers"
        return [meta, "nvidia-persistenced", "linux-headers-%s" % kernel_release]
    raise NvidiaGuestError("unknown driver source %r" % (source,))


def driver_hold(source, kernel_release, flavor="proprietary", branch=None):
    """The packages held with dpkg so that apt upgrades never move the driver (the headers stay free)."""
    return [p for p in driver_packages(source, kernel_release, flavor, branch) if not p.startswith("linux-headers-")]


def driver_pin(branch, priority=1001):
    """apt preferences that hold NVIDIA's repository to one driver branch."""
    if not BRANCH_RE.match(str(branch or "")):
        raise NvidiaGuestError("driver branch must be three digits, not %r" % (branch,))
    return ("# Managed by pvegpu.llmstack.nvidia: the driver stays on branch %s.\n"
            "Package: src:nvidia-graphics-drivers src:nvidia-open-gpu-kernel-modules cuda-drivers* nvidia-open*\n"
            "Pin: version %s.*\n"
            "Pin-Priority: %d\n" % (branch, branch, priority))


def toolkit_packages(version):
    """``name=version`` of the four container toolkit packages (seed 000 pins all four)."""
    return ["%s=%s" % (name, version) for name in TOOLKIT_PACKAGES]


def toolkit_pin(version, priority=1001):
    return ("# Managed by pvegpu.llmstack.nvidia: the NVIDIA container toolkit stays at %s.\n"
            "Package: %s\n"
            "Pin: version %s\n"
            "Pin-Priority: %d\n" % (version, " ".join(TOOLKIT_PACKAGES), version, priority))


# ---------------------------------------------------------------- apt components

_POLICY_LINE = re.compile(r"^\s*-?\d+\s+(\S+)\s+(\S+)/(\S+)\s+(\S+)\s+Packages\s*$")


def policy_sources(text):
    """``apt-cache policy`` -> [{uri, suite, component, arch}] of the package indexes apt reads."""
    found = []
    for line in str(text or "").splitlines():
        match = _POLICY_LINE.match(line)
        if match:
            uri, suite, component, arch = match.groups()
            entry = {"uri": uri.rstrip("/"), "suite": suite, "component": component, "arch": arch}
            if entry not in found:
                found.append(entry)
    return found


def needed_components(source):
    """The Debian components a driver source needs."""
    if source not in DEBIAN_COMPONENTS:
        raise NvidiaGuestError("unknown driver source %r" % (source,))
    return list(DEBIAN_COMPONENTS[source])


def missing_components(policy_text, codename, needed):
    """Which Debian components the driver needs and apt does not read yet, and where to add them.

    Returns {missing: [...], sources: [{uris: [...], suites: [...], components: [...]}]}: one entry per mirror
    that serves ``main`` for the codename (or its -updates/-security suites), each with only the components it
    lacks, so nothing apt already reads is listed twice.
    """
    entries = policy_sources(policy_text)
    suites = (codename, codename + "-updates", codename + "-security")
    by_pair = {}
    for entry in entries:
        if entry["suite"] in suites:
            by_pair.setdefault((entry["uri"], entry["suite"]), set()).add(entry["component"])
    missing_all = set()
    groups = {}
    for (uri, suite), components in sorted(by_pair.items()):
        if "main" not in components:
            continue
        lacking = tuple(c for c in needed if c not in components)
        if lacking:
            missing_all.update(lacking)
            groups.setdefault((uri, lacking), []).append(suite)
    sources = [{"uris": [uri], "suites": suites_, "components": list(lacking)}
               for (uri, lacking), suites_ in sorted(groups.items())]
    main_seen = any("main" in c for (_u, s), c in by_pair.items() if s == codename)
    if not main_seen:
        raise NvidiaGuestError("apt reads no Debian %s main index (apt-cache policy lists none): configure the "
                               "guest's Debian sources first (the guest_image role writes them)" % codename)
    return {"missing": [c for c in needed if c in missing_all], "sources": sources}


# ---------------------------------------------------------------- the nvidia runtime in Docker's daemon.json


class _Object(dict):
    """A JSON object that remembers how often each key was written (json.loads keeps only the last)."""

    def __init__(self, pairs):
        dict.__init__(self, pairs)
        self.counts = {}
        for key, _value in pairs:
            self.counts[key] = self.counts.get(key, 0) + 1


def runtime_entries(text, name="nvidia"):
    """How often the runtime ``name`` is declared under ``runtimes`` in the raw daemon.json text (duplicate keys
    counted: json.loads would show one)."""
    if text is None or not str(text).strip():
        return 0
    count = [0]

    def hook(pairs):
        for key, value in pairs:
            if key == "runtimes" and isinstance(value, _Object):
                count[0] += value.counts.get(name, 0)
        return _Object(pairs)

    json.loads(text, object_pairs_hook=hook)
    return count[0]


def nvidia_runtime(data, name="nvidia"):
    """The runtime entry named ``name`` when it points at nvidia-container-runtime, else None."""
    runtimes = (data or {}).get("runtimes")
    if not isinstance(runtimes, dict):
        return None
    entry = runtimes.get(name)
    if isinstance(entry, dict) and "nvidia-container-runtime" in str(entry.get("path", "")):
        return entry
    return None


# ---------------------------------------------------------------- OpenPGP keyrings (no gpg on the guest)

_ARMOR_RE = re.compile(r"-----BEGIN PGP PUBLIC KEY BLOCK-----(.*?)-----END PGP PUBLIC KEY BLOCK-----", re.S)


normalise_fingerprint = value_checks.normalise_fingerprint


def _crc24(data):
    crc = 0xB704CE
    for byte in bytearray(data):
        crc ^= byte << 16
        for _i in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def dearmor(data):
    """An ASCII-armored public key block -> its binary packets (what ``gpg --dearmor`` writes); binary as is."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not data:
        raise NvidiaGuestError("the key is empty")
    if data[:1] and data[0] & 0x80:
        return bytes(data)
    match = _ARMOR_RE.search(data.decode("utf-8", "replace"))
    if not match:
        raise NvidiaGuestError("not an OpenPGP public key (neither binary packets nor an armored PUBLIC KEY BLOCK)")
    body = match.group(1).strip().splitlines()
    # Armor headers (Version:, Comment:) end with an empty line.
    if any(":" in line for line in body[:1]) and "" in [line.strip() for line in body]:
        body = body[[line.strip() for line in body].index("") + 1:]
    lines = [line.strip() for line in body if line.strip()]
    checksum = None
    if lines and lines[-1].startswith("="):
        checksum = lines.pop()[1:]
    try:
        raw = base64.b64decode("".join(lines), validate=True)
    except (ValueError, TypeError) as exc:
        raise NvidiaGuestError("the armored key is not valid base64 (%s)" % exc)
    if checksum is not None:
        want = base64.b64decode(checksum)
        if int.from_bytes(want, "big") != _crc24(raw):
            raise NvidiaGuestError("the armored key's CRC24 checksum does not match: the key is damaged")
    return raw


def _packets(raw):
    pos = 0
    raw = bytearray(raw)
    while pos < len(raw):
        head = raw[pos]
        if not head & 0x80:
            raise NvidiaGuestError("not an OpenPGP packet at byte %d" % pos)
        if head & 0x40:  # new format
            tag = head & 0x3F
            first = raw[pos + 1]
            if first < 192:
                length, skip = first, 2
            elif first < 224:
                length, skip = ((first - 192) << 8) + raw[pos + 2] + 192, 3
            elif first == 255:
                length, skip = int.from_bytes(bytes(raw[pos + 2:pos + 6]), "big"), 6
            else:
                raise NvidiaGuestError("partial body lengths are not allowed in a key")
        else:
            tag = (head >> 2) & 0x0F
            kind = head & 0x03
            if kind == 3:
                raise NvidiaGuestError("indeterminate packet length in a key")
            size = (1, 2, 4)[kind]
            length, skip = int.from_bytes(bytes(raw[pos + 1:pos + 1 + size]), "big"), 1 + size
        body = bytes(raw[pos + skip:pos + skip + length])
        if len(body) != length:
            raise NvidiaGuestError("the key is cut off (packet at byte %d)" % pos)
        yield tag, body
        pos += skip + length


def primary_fingerprints(raw):
    """The v4 fingerprints of the primary keys (tag 6) of binary key packets."""
    found = []
    for tag, body in _packets(raw):
        if tag == 6:
            if not body or body[0] != 4:
                raise NvidiaGuestError("only version 4 keys are supported (found version %s)"
                                       % (body[0] if body else "none"))
            digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()  # nosec B324
            found.append(digest)
    if not found:
        raise NvidiaGuestError("the key file holds no public key")
    return found


def check_keyring(data, allowed):
    """(binary keyring, fingerprints) when every primary key of ``data`` is one of ``allowed``; else an error."""
    raw = dearmor(data)
    found = primary_fingerprints(raw)
    allowed = [normalise_fingerprint(f) for f in allowed or []]
    unexpected = [f for f in found if f not in allowed]
    if unexpected:
        raise NvidiaGuestError("the key has fingerprint %s, which is not one of the expected %s: not installed "
                               "(a changed or substituted key)" % (", ".join(unexpected), ", ".join(allowed)))
    return raw, found


# ---------------------------------------------------------------- the GPUs and the driver


def nvidia_functions(devices):
    """The NVIDIA GPU functions (display or 3D controllers) on the guest's PCI bus, what lspci would list."""
    found = []
    for bdf, device in sorted((devices or {}).items()):
        if device.get("vendor") == NVIDIA_VENDOR and (device.get("class") or "")[:4] in GPU_CLASSES:
            found.append({"bdf": bdf, "device_id": "%s:%s" % (NVIDIA_VENDOR, device.get("device")),
                          "driver": device.get("driver")})
    return found


def read_module_version(root, module):
    path = os.path.join(root, "sys", "module", module, "version")
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def module_loaded(root, module):
    return os.path.isdir(os.path.join(root, "sys", "module", module))


def driver_state(loaded_version, installed_version, nouveau_loaded, functions):
    """Whether the guest must reboot for the driver, and why (the driver's kernel module changed)."""
    reasons = []
    if nouveau_loaded:
        reasons.append("nouveau is loaded (blacklisted now; it leaves on the next boot)")
    if installed_version and loaded_version and installed_version != loaded_version:
        reasons.append("the nvidia module in memory is %s, the installed one %s" % (loaded_version, installed_version))
    elif installed_version and not loaded_version and functions:
        reasons.append("the nvidia module %s is installed but not loaded" % installed_version)
    bound = [f["bdf"] for f in functions if f.get("driver") not in (None, "nvidia")]
    if bound and installed_version:
        reasons.append("%s bound to %s" % (", ".join(bound), ", ".join(sorted(set(
            f["driver"] for f in functions if f.get("driver") not in (None, "nvidia"))))))
    return {"loaded_version": loaded_version, "installed_version": installed_version,
            "nouveau_loaded": bool(nouveau_loaded), "reboot_required": bool(reasons), "reasons": reasons}


def _device_id(text):
    """``10de:2204``, ``0x220410DE`` (nvidia-smi's pci_device_id) or ``220410DE`` -> ``10de:2204``."""
    value = str(text or "").strip().lower()
    if re.match(r"^[0-9a-f]{4}:[0-9a-f]{4}$", value):
        return value
    value = value[2:] if value.startswith("0x") else value
    if re.match(r"^[0-9a-f]{8}$", value):
        return "%s:%s" % (value[4:], value[:4])
    return None


def expected_gpus(gpu_vm_gpus, host_gpus=None):
    """What the PVE host passes through: [{device_id or None, source}] from ``gpu_vm_gpus``.

    Entries are slots (``0000:41:00``; the device id comes from the host's ``llmstack_pci.gpus`` when known) or
    ``{vendor_device, count}``.
    """
    by_slot = dict((g.get("slot"), g) for g in host_gpus or [] if isinstance(g, dict))
    found = []
    if gpu_vm_gpus is None:
        return found
    if not isinstance(gpu_vm_gpus, list):
        raise NvidiaGuestError("gpu_vm_gpus must be a list of slots or {vendor_device, count}")
    for item in gpu_vm_gpus:
        if isinstance(item, dict):
            device = _device_id(item.get("vendor_device"))
            count = item.get("count", 1)
            if device is None or isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise NvidiaGuestError("%r: needs vendor_device like 10de:2204 and a count of 1 or more" % (item,))
            found.extend({"device_id": device, "source": "vendor_device"} for _i in range(count))
        elif isinstance(item, str):
            host = by_slot.get(item)
            device = "%s:%s" % (host["vendor"], host["device"]) if host and host.get("device") else None
            found.append({"device_id": device, "source": "slot %s" % item})
        else:
            raise NvidiaGuestError("%r is neither a slot nor {vendor_device, count}" % (item,))
    return found


def passthrough_verdict(expected, smi_gpus, bus_functions):
    """Do the GPUs the driver sees match what the PVE host passes through? {ok, problems, summary}."""
    problems = []
    smi_ids = sorted(_device_id(g.get("pci_device_id")) or "?" for g in smi_gpus or [])
    names = [g.get("name") for g in smi_gpus or []]
    if expected:
        if len(smi_gpus or []) != len(expected):
            problems.append("nvidia-smi shows %d GPU(s), the PVE host passes through %d"
                            % (len(smi_gpus or []), len(expected)))
        known = sorted(e["device_id"] for e in expected if e.get("device_id"))
        # Ids are compared only when both sides know every one (the count is compared in any case).
        if (known and len(known) == len(expected) and len(smi_gpus or []) == len(expected) and "?" not in smi_ids
                and known != smi_ids):
            problems.append("device ids %s, expected %s" % (", ".join(smi_ids), ", ".join(known)))
    if bus_functions is not None and len(bus_functions) != len(smi_gpus or []):
        problems.append("the PCI bus has %d NVIDIA GPU function(s) but nvidia-smi shows %d (see dmesg for NVRM "
                        "errors)" % (len(bus_functions), len(smi_gpus or [])))
    summary = "%d GPU(s): %s" % (len(names), ", ".join(str(n) for n in names)) if names else "no GPU"
    return {"ok": not problems, "problems": problems, "summary": summary}
