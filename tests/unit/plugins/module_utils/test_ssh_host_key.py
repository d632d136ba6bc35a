# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM host keys the collection makes (issue #33 item 5), checked with OpenSSH's own ssh-keygen."""

import os
import shutil
import subprocess

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import ssh_host_key

SECRET = "3f9c1e0b7a5d4c2e8f6a1b3d5c7e9f0a2b4c6d8e"


def keygen_public(tmp_path, private):
    """The public key OpenSSH reads from the private key (ssh-keygen -y), without its comment."""
    path = tmp_path / "key"
    path.write_text(private)
    os.chmod(path, 0o600)
    out = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True).stdout
    return " ".join(out.split()[:2])


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_the_key_is_an_openssh_ed25519_key_pair(tmp_path):
    private, public = ssh_host_key.derive(SECRET, "gpu-3090")
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert public.startswith("ssh-ed25519 ") and public.endswith(" root@gpu-3090")
    assert keygen_public(tmp_path, private) == " ".join(public.split()[:2])
    assert ssh_host_key.public_of(private) == " ".join(public.split()[:2])


def test_the_same_secret_and_name_give_the_same_key_and_any_other_another():
    first = ssh_host_key.derive(SECRET, "gpu-3090")
    again = ssh_host_key.derive(SECRET, "gpu-3090")
    # OpenSSH's private key format has a random check number: the key inside is the same.
    assert again[1] == first[1] and raw(again[0]) == raw(first[0])
    # A secret read from a file or a vault may come with a newline: the same secret.
    assert ssh_host_key.derive(" %s\n" % SECRET, "gpu-3090")[1] == first[1]
    others = [ssh_host_key.derive(SECRET, "gpu-v100"), ssh_host_key.derive(SECRET[:-1] + "b", "gpu-3090"),
              ssh_host_key.derive(SECRET, "llm-gateway")]
    assert len({first[1].split()[1]} | {o[1].split()[1] for o in others}) == 4


def raw(private):
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(private.encode(), password=None)
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                             serialization.NoEncryption())


@pytest.mark.parametrize("secret,name,fragment", [
    ("short", "gpu-a", "guest_image_host_key_secret: must be at least 32 characters"),
    ("", "gpu-a", "guest_image_host_key_secret"),
    (SECRET, "-bad name", "guest_image_hostname: '-bad name'"),
    (SECRET, None, "guest_image_hostname: None"),
])
def test_bad_inputs_name_the_variable(secret, name, fragment):
    with pytest.raises(ssh_host_key.HostKeyError, match=fragment.replace("(", r"\(")):
        ssh_host_key.derive(secret, name)


def test_public_of_refuses_what_is_not_an_ed25519_private_key():
    with pytest.raises(ssh_host_key.HostKeyError, match="not an OpenSSH private key"):
        ssh_host_key.public_of("ssh-ed25519 AAAA")


def test_known_hosts_names_bracket_a_port_other_than_22():
    assert ssh_host_key.known_hosts_names(["10.0.10.20", "gpu-a", "10.0.10.20", ""]) == ["10.0.10.20", "gpu-a"]
    assert ssh_host_key.known_hosts_names(["10.0.10.20"], 22) == ["10.0.10.20"]
    assert ssh_host_key.known_hosts_names(["10.0.10.20"], 2222) == ["[10.0.10.20]:2222"]
