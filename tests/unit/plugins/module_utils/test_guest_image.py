"""guest_image: which settings are refused and why, what goes into the image, and when it is rebuilt.

The image itself is built by the real role and booted under QEMU in tests/integration/test_guest_image.py.
"""

import os
import re

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import guest_image
from conftest import role_settings

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGk8mN3n7yQ5u5bE0pDq9i0yq3E1x7sJ0Q2xk5l6m7n8 ops@example"
VLANS = {"mgmt": {"id": 10, "cidr": "192.0.2.0/24", "gateway": "192.0.2.1"},
         "inference": {"id": 20, "cidr": "198.51.100.0/24", "gateway": "198.51.100.1"}}


def settings(**changes):
    # The role's defaults (its defaults/main.yml, the one place they are stated), then this VM's values; disk_gib
    # (the role's default follows gpu_vm_disk_gib) is the smallest image these tests lay out.
    # host_public_key is no variable: the role passes the key ssh_host_key made ("" with guest_image_host_keys off).
    base = role_settings("guest_image", [n for n in guest_image.SETTINGS
                                         if n not in ("interfaces", "vlans", "host_public_key")])
    base.update({"mirror": "http://deb.example.org/debian", "hostname": "gpu-vm-a", "authorized_keys": [KEY],
                 "host_public_key": "",
                 "disk_gib": 8, "interfaces": [{"vlan": "inference", "address": "198.51.100.20"}], "vlans": VLANS})
    base.update(changes)
    return base


def problems(**changes):
    return guest_image.check_settings(settings(**changes))[1]


def test_good_settings():
    merged, found = guest_image.check_settings(settings())
    assert found == []
    assert merged["interfaces"] == [{"vlan": "inference", "address": "198.51.100.20/24", "gateway": "198.51.100.1",
                                     "mac": None, "name": None}]
    assert "vlans" not in merged


@pytest.mark.parametrize("changes, variable, words", [
    ({"mirror": ""}, "guest_image_mirror", "no Debian mirror"),
    ({"mirror": "ftp://x/debian"}, "guest_image_mirror", "not an http"),
    ({"mirror": "http://mirror.example.org/custom"}, "guest_image_security_mirror", "cannot be derived"),
    ({"suite": "bookworm"}, "guest_image_suite", "not supported"),
    ({"authorized_keys": []}, "guest_image_authorized_keys", "nobody could log in"),
    ({"authorized_keys": ["not a key"]}, "guest_image_authorized_keys", "entry 0"),
    ({"hostname": "GPU_VM"}, "guest_image_hostname", "not a host name"),
    ({"timezone": "../../etc/passwd"}, "guest_image_timezone", "not a time zone"),
    ({"locale": "en_US"}, "guest_image_locale", "UTF-8"),
    ({"disk_gib": 1}, "guest_image_disk_gib", "too small"),
    ({"esp_mib": 32}, "guest_image_esp_mib", "64-4096"),
    ({"boot_mib": 100}, "guest_image_boot_mib", "256-4096"),
    ({"components": ["contrib"]}, "guest_image_components", "main"),
    ({"extra_packages": ["curl; rm -rf /"]}, "guest_image_extra_packages", "package names"),
    ({"interfaces": []}, "guest_image_interfaces", "unreachable"),
    ({"interfaces": [{"vlan": "storage", "address": "10.0.0.5"}]}, "guest_image_interfaces[0]", "not in llmstack"),
    ({"interfaces": [{"vlan": "inference", "address": "198.51.100.20", "mac": "zz"}]}, "guest_image_interfaces[0]",
     "not a MAC"),
    ({"interfaces": [{"vlan": "inference", "address": "198.51.100.20"}, {"vlan": "mgmt", "address": "192.0.2.20"}]},
     "guest_image_interfaces", "cannot tell its NICs apart"),
    ({"kernel_cmdline": "quiet; reboot"}, "guest_image_kernel_cmdline", "must not"),
    ({"serial_console": "ttyUSB0"}, "guest_image_serial_console", "ttyS0"),
    ({"formats": ["qcow2"]}, "guest_image_formats", "raw"),
    ({"dns_servers": ["dns.example"]}, "guest_image_dns_servers", "not an IP"),
    ({"colour": "blue"}, "guest_image", "unknown settings colour"),
])
def test_refused(changes, variable, words):
    found = problems(**changes)
    assert any(p.startswith(variable + ":") and words in p for p in found), found


def test_every_problem_at_once():
    found = problems(mirror="", authorized_keys=[], hostname="-bad", timezone="no such/../zone")
    assert len(found) == 4


def test_plan_is_deterministic_and_every_input_counts():
    first, again = guest_image.plan(settings()), guest_image.plan(settings())
    assert first["digest"] == again["digest"] and first["ids"] == again["ids"]
    for change in ({"timezone": "Asia/Shanghai"}, {"extra_packages": ["htop"]}, {"authorized_keys": [KEY + "2"]},
                   {"mirror": "http://other.example.org/debian"}, {"disk_gib": 16}, {"hostname": "gpu-vm-b"},
                   {"interfaces": [{"vlan": "inference", "address": "198.51.100.21"}]}):
        other = guest_image.plan(settings(**change))
        assert other["digest"] != first["digest"], change
    # Only the packages and the mirror change the cached base tree.
    assert guest_image.plan(settings(hostname="gpu-vm-b"))["base_digest"] == first["base_digest"]
    assert guest_image.plan(settings(extra_packages=["htop"]))["base_digest"] != first["base_digest"]
    with pytest.raises(ValueError, match="guest_image_mirror"):
        guest_image.plan(settings(mirror=""))


def test_fstab_by_uuid_and_a_separate_boot():
    plan = guest_image.plan(settings())
    fstab = plan["files"]["etc/fstab"].splitlines()[1:]
    assert fstab == ["UUID=%s / ext4 defaults,relatime,errors=remount-ro 0 1" % plan["ids"]["root"],
                     "UUID=%s /boot/efi vfat umask=0077 0 1" % plan["ids"]["esp"]]
    assert re.fullmatch(r"[0-9A-F]{4}-[0-9A-F]{4}", plan["ids"]["esp"])
    with_boot = guest_image.plan(settings(boot_mib=512))
    assert "UUID=%s /boot ext4" % with_boot["ids"]["boot"] in with_boot["files"]["etc/fstab"]
    assert [p["name"] for p in with_boot["layout"]["partitions"]] == ["esp", "boot", "root"]
    assert "set prefix=($root)/grub" in with_boot["grub_early"]
    assert "linux /vmlinuz-6.12" in guest_image.grub_cfg(with_boot["settings"], with_boot["ids"], "6.12")


def test_layout_and_sfdisk_script():
    plan = guest_image.plan(settings(disk_gib=4, esp_mib=256))
    parts = plan["layout"]["partitions"]
    assert [p["start"] for p in parts] == [1024 ** 2, 257 * 1024 ** 2]
    assert parts[-1]["start"] + parts[-1]["size"] == 4 * 1024 ** 3 - 1024 ** 2
    script = plan["sfdisk"]
    assert script.startswith("label: gpt\n")
    assert "start=2048, size=524288, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B" in script
    assert "uuid=%s" % plan["ids"]["part_root"].upper() in script


def test_network_files():
    two = settings(interfaces=[{"vlan": "mgmt", "address": "192.0.2.20", "mac": "BC:24:11:00:00:20"},
                               {"vlan": "inference", "address": "198.51.100.20", "name": "ens19"}])
    files = guest_image.plan(two)["files"]
    mgmt = files["etc/systemd/network/10-llmstack-00-mgmt.network"]
    inference = files["etc/systemd/network/10-llmstack-01-inference.network"]
    assert "MACAddress=bc:24:11:00:00:20" in mgmt and "Address=192.0.2.20/24" in mgmt
    assert "Gateway=192.0.2.1" in mgmt and "Gateway" not in inference  # one default route
    assert "Name=ens19" in inference
    assert files["etc/resolv.conf"] == "nameserver 192.0.2.1\nnameserver 198.51.100.1\n"
    assert guest_image.plan(settings(dns_servers=["9.9.9.9"]))["files"]["etc/resolv.conf"] == "nameserver 9.9.9.9\n"


def test_ssh_and_sources():
    plan = guest_image.plan(settings(backports=False))
    sshd = plan["files"]["etc/ssh/sshd_config.d/10-llmstack.conf"]
    assert "PermitRootLogin prohibit-password" in sshd and "PasswordAuthentication no" in sshd
    assert "PermitRootLogin yes" not in "".join(plan["files"].values())
    assert plan["files"]["root/.ssh/authorized_keys"] == KEY + "\n"
    sources = plan["files"]["etc/apt/sources.list.d/debian.sources"]
    assert "Suites: trixie trixie-updates\n" in sources
    assert "URIs: http://deb.example.org/debian-security" in sources
    assert "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in sources
    assert "cloud-init" in guest_image.packages(guest_image.check_settings(settings(cloud_init=True))[0])


def test_kernel_command_line():
    plan = guest_image.plan(settings(kernel_cmdline="iommu=pt"))
    assert plan["cmdline"] == "root=UUID=%s ro console=tty0 console=ttyS0,115200n8 iommu=pt" % plan["ids"]["root"]
    assert 'GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200n8 iommu=pt"' in plan["files"]["etc/default/grub"]
    quiet = guest_image.plan(settings(serial_console=""))
    assert "console=" not in quiet["cmdline"] and "GRUB_TERMINAL" not in quiet["files"]["etc/default/grub"]


def test_check_fits():
    mib = 1024 ** 2
    assert guest_image.check_fits(700 * mib, 3000 * mib) is None
    message = guest_image.check_fits(3000 * mib, 2000 * mib)
    assert message.startswith("guest_image_disk_gib:") and "3705 MiB" in message and "2000 MiB" in message


def test_a_setting_left_out_is_named_not_defaulted_in_python():
    partial = settings()
    del partial["suite"], partial["formats"]
    found = guest_image.check_settings(partial)[1]
    assert found == ["guest_image: settings missing suite, formats (pass every one; the guest_image role's "
                     "defaults/main.yml has their defaults)"]


HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDwyngojZfNGnYM8XwCf1zqNDcixJAYDTwE3OAqH9fo/ root@gpu-vm-a"


def test_a_host_key_of_the_collection_replaces_the_first_boot_one():
    """Issue #33 item 5: with the collection's key the image carries it (sshd offers it alone) and makes none at the
    first boot; without, the first boot makes them as before (the same inputs, so no image is rebuilt for it)."""
    without = guest_image.plan(settings())
    assert "etc/systemd/system/llmstack-ssh-hostkeys.service" in without["files"]
    assert "llmstack-ssh-hostkeys.service" in without["inputs"]["enable"]
    with_key = guest_image.plan(settings(host_public_key=HOST_KEY))
    files = with_key["files"]
    assert files["etc/ssh/ssh_host_ed25519_key.pub"] == HOST_KEY + "\n"
    assert "HostKey /etc/ssh/ssh_host_ed25519_key\n" in files["etc/ssh/sshd_config.d/10-llmstack.conf"]
    assert "etc/systemd/system/llmstack-ssh-hostkeys.service" not in files
    assert "llmstack-ssh-hostkeys.service" not in with_key["inputs"]["enable"]
    # Another key is another image; the private key is no input (it never reaches the record).
    other = guest_image.plan(settings(host_public_key=HOST_KEY.replace("AAAAIDwy", "AAAAIDwz")))
    assert len({without["digest"], with_key["digest"], other["digest"]}) == 3


def test_a_host_key_that_is_not_an_ed25519_public_key_is_named():
    assert any(p.startswith("guest_image_host_public_key: ") for p in problems(host_public_key="ssh-rsa AAAA x"))


def test_a_partition_is_copied_into_the_disk_by_its_data_regions(tmp_path):
    """guest_image_build's copy of each partition image into the disk (was `dd conv=notrunc,sparse`, which read the
    whole 64 GiB of a sparse root file system): the same bytes land at the partition's offset, the holes stay holes
    in the disk image, and only the data is copied."""
    mib = guest_image.MIB
    source, disk = tmp_path / "root.img", tmp_path / "disk.raw"
    with open(source, "wb") as handle:
        handle.truncate(256 * mib)
        for at, fill in ((0, b"A"), (100 * mib + 7, b"B"), (256 * mib - 3, b"C")):
            handle.seek(at)
            handle.write(fill * 3 if fill == b"C" else fill * (mib + 5))
    with open(disk, "wb") as handle:
        handle.truncate(300 * mib)
    offset = 17 * mib
    copied = guest_image.copy_into(str(source), str(disk), offset)
    with open(source, "rb") as src, open(disk, "rb") as dst:
        want = src.read()
        got = dst.read()
    assert got[offset:offset + len(want)] == want
    assert got[:offset] == b"\0" * offset and got[offset + len(want):] == b"\0" * (len(got) - offset - len(want))
    # Far less than the 256 MiB a full read would copy, at least the 2 MiB written (file systems round extents up).
    assert 2 * mib <= copied < 64 * mib
    assert os.stat(disk).st_blocks * 512 < 64 * mib


def test_data_extents_of_a_file_without_holes_is_the_whole_file(tmp_path):
    path = tmp_path / "full"
    path.write_bytes(b"x" * 10000)
    with open(path, "rb") as handle:
        assert guest_image.data_extents(handle.fileno(), 10000) == [(0, 10000)]
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with open(empty, "rb") as handle:
        assert guest_image.data_extents(handle.fileno(), 0) == []
