"""module_utils.nvidia_guest: settings, package lists, apt components (recorded apt-cache policy output), the
nvidia runtime in daemon.json, OpenPGP keyrings (keys made with gpg, fingerprints as gpg printed them:
tests/fixtures/nvidia/SOURCE), the reboot decision and the passthrough verdict."""

import json
import os
import subprocess

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia, nvidia_guest, pci

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
ED25519 = "80C4A5924FE6B382CD0D739EF3BDF33B6FB4D06A"
RSA = "758CA2598662BA28C2D94EF089FD36C9EF03D81F"


def fixture(*parts, mode="r"):
    with open(os.path.join(FIXTURES, *parts), mode) as handle:
        return handle.read()


def settings(**changes):
    base = {"driver_source": "debian", "driver_flavor": "proprietary", "driver_install": "auto",
            "driver_branch": "", "reboot": "auto",
            "container_toolkit_version": "1.18.2-1",
            "container_toolkit_repo_url": "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
            "container_toolkit_gpg_key_url": "https://nvidia.github.io/libnvidia-container/gpgkey",
            "container_toolkit_gpg_fingerprints": ["C95B321B61E88C1809C4F759DDCAE044F796ECB0"],
            "expected_gpus": None}
    base.update(changes)
    return base


# ---------------------------------------------------------------- settings and distribution

def test_the_defaults_pass():
    assert nvidia_guest.check_settings(settings()) == []


def test_every_bad_setting_is_named_at_once():
    problems = nvidia_guest.check_settings(settings(
        driver_source="runfile", container_toolkit_version="latest",
        container_toolkit_gpg_key_url="ftp://example.invalid/key", container_toolkit_gpg_fingerprints=["F796ECB0"],
        reboot="yes", expected_gpus=[{"vendor_device": "nvidia"}]))
    names = [p.split(":")[0] for p in problems]
    assert names == ["nvidia_driver_source", "nvidia_reboot",
                     "nvidia_container_toolkit_version", "nvidia_container_toolkit_gpg_key_url",
                     "nvidia_container_toolkit_gpg_fingerprints", "nvidia_expected_gpus"]
    assert "'latest'" in problems[2] and "F796ECB0" in problems[4]


def test_cuda_repo_needs_a_branch():
    assert nvidia_guest.check_settings(settings(driver_source="cuda-repo", driver_branch="580")) == []
    problems = nvidia_guest.check_settings(settings(driver_source="cuda-repo", driver_branch="latest"))
    assert len(problems) == 1 and problems[0].startswith("nvidia_driver_branch:")


@pytest.mark.parametrize("distribution,major,ok", [("Debian", "13", True), ("Debian", "12", False),
                                                   ("Ubuntu", "24", False), ("Debian", 13, True)])
def test_only_debian_13_is_supported(distribution, major, ok):
    message = nvidia_guest.check_distribution(distribution, major, "x")
    assert (message is None) == ok
    if not ok:
        assert "Debian 13 (trixie)" in message and "%s %s" % (distribution, major) in message
        assert "Nothing was installed" in message


# ---------------------------------------------------------------- packages and pins

def test_debian_driver_packages_follow_the_seed_with_the_running_kernels_headers():
    packages = nvidia_guest.driver_packages("debian", "6.12.57+deb13-amd64")
    assert packages[:2] == ["nvidia-driver", "nvidia-kernel-dkms"]
    assert "firmware-misc-nonfree" in packages and "linux-headers-6.12.57+deb13-amd64" in packages
    assert not any(p.startswith("linux-headers") for p in nvidia_guest.driver_hold("debian", "6.12.57+deb13-amd64"))


def test_cuda_repo_flavours_and_branch_pin():
    assert nvidia_guest.driver_packages("cuda-repo", "k", "open")[0] == "nvidia-open"
    assert nvidia_guest.driver_packages("cuda-repo", "k", "proprietary")[0] == "cuda-drivers"
    pin = nvidia_guest.driver_pin("580")
    assert "Pin: version 580.*\n" in pin and "Pin-Priority: 1001" in pin
    with pytest.raises(nvidia_guest.NvidiaGuestError):
        nvidia_guest.driver_pin("")


def test_toolkit_packages_are_all_four_at_one_version():
    assert nvidia_guest.toolkit_packages("1.18.2-1") == [
        "nvidia-container-toolkit=1.18.2-1", "nvidia-container-toolkit-base=1.18.2-1",
        "libnvidia-container-tools=1.18.2-1", "libnvidia-container1=1.18.2-1"]
    pin = nvidia_guest.toolkit_pin("1.18.2-1")
    assert "Pin: version 1.18.2-1\n" in pin and "libnvidia-container1" in pin


# ---------------------------------------------------------------- apt components (recorded apt-cache policy)

def test_each_driver_source_needs_its_components():
    assert nvidia_guest.needed_components("debian") == ["non-free", "non-free-firmware"]
    assert nvidia_guest.needed_components("cuda-repo") == ["non-free-firmware"]
    with pytest.raises(nvidia_guest.NvidiaGuestError):
        nvidia_guest.needed_components("runfile")


def test_a_minbase_guest_lacks_non_free_on_its_one_mirror():
    result = nvidia_guest.missing_components(fixture("nvidia", "apt-cache-policy-trixie-main.txt"), "trixie",
                                             ["non-free", "non-free-firmware"])
    assert result["missing"] == ["non-free", "non-free-firmware"]
    assert result["sources"] == [{"uris": ["http://deb.debian.org/debian"], "suites": ["trixie"],
                                  "components": ["non-free", "non-free-firmware"]}]


def test_only_what_each_mirror_lacks_is_added():
    result = nvidia_guest.missing_components(fixture("nvidia", "apt-cache-policy-trixie-mixed.txt"), "trixie",
                                             ["non-free", "non-free-firmware"])
    assert result["sources"] == [
        {"uris": ["http://deb.debian.org/debian"], "suites": ["trixie", "trixie-updates"],
         "components": ["non-free", "non-free-firmware"]},
        {"uris": ["http://deb.debian.org/debian-security"], "suites": ["trixie-security"],
         "components": ["non-free"]}]


def test_nothing_is_added_when_apt_reads_everything():
    text = fixture("nvidia", "apt-cache-policy-trixie-main.txt")
    extra = "".join(" 500 http://deb.debian.org/debian trixie/%s amd64 Packages\n" % c
                    for c in ("non-free", "non-free-firmware"))
    result = nvidia_guest.missing_components(text + extra, "trixie", ["non-free", "non-free-firmware"])
    assert result == {"missing": [], "sources": []}


def test_no_debian_main_at_all_is_an_error():
    with pytest.raises(nvidia_guest.NvidiaGuestError, match="no Debian trixie main"):
        nvidia_guest.missing_components("Package files:\n 100 /var/lib/dpkg/status\n", "trixie", ["non-free"])


# ---------------------------------------------------------------- the nvidia runtime in daemon.json

def test_runtime_count_sees_duplicate_keys():
    once = json.dumps({"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}})
    assert nvidia_guest.runtime_entries(once) == 1
    twice = '{"runtimes": {"nvidia": {"path": "a"}, "nvidia": {"path": "nvidia-container-runtime"}}}'
    assert nvidia_guest.runtime_entries(twice) == 2
    assert nvidia_guest.runtime_entries('{"default-runtime": "nvidia"}') == 0
    assert nvidia_guest.nvidia_runtime(json.loads(once)) == {"path": "nvidia-container-runtime", "args": []}
    assert nvidia_guest.nvidia_runtime({"runtimes": {"nvidia": {"path": "/usr/bin/runc"}}}) is None


# ---------------------------------------------------------------- keyrings

def test_an_armored_key_is_dearmored_as_gpg_does_and_its_fingerprint_read():
    armored = fixture("nvidia", "fixture-key.asc")
    raw = nvidia_guest.dearmor(armored)
    assert nvidia_guest.primary_fingerprints(raw) == [ED25519]
    gpg = subprocess.run(["gpg", "--dearmor"], input=armored.encode(), capture_output=True, check=False)
    if gpg.returncode == 0:
        assert gpg.stdout == raw


def test_a_binary_old_format_rsa_key():
    raw = fixture("nvidia", "fixture-key-rsa.gpg", mode="rb")
    keyring, found = nvidia_guest.check_keyring(raw, ["758c a259 8662 ba28 c2d9 4ef0 89fd 36c9 ef03 d81f"])
    assert keyring == raw and found == [RSA]


def test_an_unexpected_key_is_refused():
    with pytest.raises(nvidia_guest.NvidiaGuestError, match="fingerprint %s, which is not one of" % ED25519):
        nvidia_guest.check_keyring(fixture("nvidia", "fixture-key.asc"), [RSA])
    rsa = fixture("nvidia", "fixture-key-rsa.gpg", mode="rb")
    both = nvidia_guest.dearmor(fixture("nvidia", "fixture-key.asc")) + rsa
    with pytest.raises(nvidia_guest.NvidiaGuestError, match=RSA):
        nvidia_guest.check_keyring(both, [ED25519])
    assert nvidia_guest.check_keyring(both, [ED25519, RSA])[1] == [ED25519, RSA]


def test_a_damaged_key_is_refused():
    armored = fixture("nvidia", "fixture-key.asc")
    lines = armored.splitlines()
    body = [i for i, line in enumerate(lines) if line and not line.startswith(("-----", "=")) and ":" not in line]
    line = lines[body[1]]
    lines[body[1]] = ("A" if line[5] != "A" else "B").join((line[:5], line[6:]))
    with pytest.raises(nvidia_guest.NvidiaGuestError, match="CRC24"):
        nvidia_guest.dearmor("\n".join(lines))
    with pytest.raises(nvidia_guest.NvidiaGuestError, match="not an OpenPGP public key"):
        nvidia_guest.dearmor("<html>404</html>")
    with pytest.raises(nvidia_guest.NvidiaGuestError, match="cut off"):
        nvidia_guest.primary_fingerprints(fixture("nvidia", "fixture-key-rsa.gpg", mode="rb")[:100])


# ---------------------------------------------------------------- GPUs, driver, verdict

def test_nvidia_functions_of_a_recorded_tree(sysfs_trees):
    devices = pci.read_devices(sysfs_trees["platform-a"], {})
    functions = nvidia_guest.nvidia_functions(devices)
    assert [f["device_id"] for f in functions] == ["10de:2204"] * 4
    assert all(f["bdf"].endswith(".0") for f in functions)  # the audio functions are not GPUs
    assert nvidia_guest.nvidia_functions(pci.read_devices(sysfs_trees["no-nvidia"], {})) == []


@pytest.mark.parametrize("loaded,installed,nouveau,drivers,reboot", [
    ("550.163.01", "550.163.01", False, ["nvidia"], False),
    ("550.163.01", "560.35.03", False, ["nvidia"], True),
    (None, "550.163.01", False, [None], True),
    (None, "550.163.01", True, ["nouveau"], True),
    (None, None, False, [], False),
])
def test_reboot_only_when_the_kernel_module_changed(loaded, installed, nouveau, drivers, reboot):
    functions = [{"bdf": "0000:01:00.0", "device_id": "10de:2204", "driver": d} for d in drivers]
    state = nvidia_guest.driver_state(loaded, installed, nouveau, functions)
    assert state["reboot_required"] is reboot and bool(state["reasons"]) is reboot


def test_expected_gpus_from_slots_and_counts():
    host = [{"slot": "0000:41:00", "vendor": "10de", "device": "2204"}]
    found = nvidia_guest.expected_gpus(["0000:41:00", "0000:61:00", {"vendor_device": "10de:1db5", "count": 2}], host)
    assert [e["device_id"] for e in found] == ["10de:2204", None, "10de:1db5", "10de:1db5"]
    with pytest.raises(nvidia_guest.NvidiaGuestError):
        nvidia_guest.expected_gpus([{"vendor_device": "10de:1db5", "count": 0}])


def test_the_verdict_against_recorded_nvidia_smi_xml():
    gpus = nvidia.parse_xml(fixture("nvidia", "smi-q-x-2x3090.xml"))["gpus"]
    # The hand-written fixture gives the first GPU's <pci> block only: ids cannot be compared, counts can.
    assert [g["pci_device_id"] for g in gpus] == ["10de:2204", None]
    v100 = nvidia_guest.expected_gpus([{"vendor_device": "10de:1db5", "count": 2}])
    assert nvidia_guest.passthrough_verdict(v100, gpus, [{"bdf": "a"}, {"bdf": "b"}])["ok"]
    gpus[1]["pci_device_id"] = "10de:2204"
    two = nvidia_guest.expected_gpus([{"vendor_device": "10de:2204", "count": 2}])
    bus = [{"bdf": "0000:01:00.0"}, {"bdf": "0000:02:00.0"}]
    assert nvidia_guest.passthrough_verdict(two, gpus, bus) == {
        "ok": True, "problems": [], "summary": "2 GPU(s): NVIDIA GeForce RTX 3090, NVIDIA GeForce RTX 3090"}
    three = nvidia_guest.expected_gpus([{"vendor_device": "10de:2204", "count": 3}])
    assert nvidia_guest.passthrough_verdict(three, gpus, bus)["problems"] == [
        "nvidia-smi shows 2 GPU(s), the PVE host passes through 3"]
    v100 = nvidia_guest.expected_gpus([{"vendor_device": "10de:1db5", "count": 2}])
    assert nvidia_guest.passthrough_verdict(v100, gpus, bus)["problems"] == [
        "device ids 10de:2204, 10de:2204, expected 10de:1db5, 10de:1db5"]
    lost = nvidia_guest.passthrough_verdict(two, gpus, bus + [{"bdf": "0000:03:00.0"}])
    assert not lost["ok"] and "PCI bus has 3" in lost["problems"][0]
    unknown = nvidia_guest.expected_gpus(["0000:41:00", "0000:61:00"])
    assert nvidia_guest.passthrough_verdict(unknown, gpus, bus)["ok"]
