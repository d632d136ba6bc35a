# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A VM's SSH host key, made by the collection before the VM exists (guest_image), so the first connection checks it.

The key is an ed25519 key derived from one secret of the site and the VM's name: HMAC-SHA256(secret, a fixed label
and the name) is the key's 32-byte seed. The same secret gives every run, every controller and every AWX job the
same key for a VM - nothing per VM has to be kept - and a different name or secret gives an unrelated key. The
private key goes into the VM's image only; the public key into the image, its build record and the controller's
known_hosts. Plain Python on top of ``cryptography`` (a dependency of ansible-core).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import hmac
import re

try:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - ansible-core requires cryptography on the controller
    HAS_CRYPTOGRAPHY = False

LABEL = b"pvegpu.llmstack ssh host key ed25519 v1\x00"
MIN_SECRET_LENGTH = 32
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class HostKeyError(ValueError):
    pass


def check(secret, name):
    """Every problem with the inputs (a list of messages naming the variable)."""
    problems = []
    if not isinstance(secret, str) or len(secret.strip()) < MIN_SECRET_LENGTH:
        problems.append("guest_image_host_key_secret: must be at least %d characters (a random secret of the site, "
                        "from a vault; left empty, one is generated per install)" % MIN_SECRET_LENGTH)
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append("guest_image_hostname: %r is not a host name the key can be made for" % (name,))
    return problems


def derive(secret, name):
    """(private key in OpenSSH format, public key line ``ssh-ed25519 AAAA... root@<name>``) of VM ``name``."""
    if not HAS_CRYPTOGRAPHY:
        raise HostKeyError("the Python library cryptography is needed on the controller")
    problems = check(secret, name)
    if problems:
        raise HostKeyError("; ".join(problems))
    seed = hmac.new(secret.strip().encode("utf-8"), LABEL + name.encode("utf-8"), hashlib.sha256).digest()
    key = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode("ascii")
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode("ascii")
    return private, "%s root@%s" % (public, name)


def public_of(private):
    """The ``ssh-ed25519 AAAA...`` part of an OpenSSH private key's public key (HostKeyError if it is not one)."""
    if not HAS_CRYPTOGRAPHY:
        raise HostKeyError("the Python library cryptography is needed")
    try:
        key = serialization.load_ssh_private_key(private.encode("ascii"), password=None)
    except (ValueError, TypeError, UnicodeError) as exc:
        raise HostKeyError("not an OpenSSH private key: %s" % exc)
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise HostKeyError("not an ed25519 key")
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode("ascii")


def known_hosts_names(names, port=None):
    """The host patterns of a known_hosts line for these names: ``name``, or ``[name]:port`` off port 22; unique,
    in order, empty names left out."""
    found = []
    for name in names or []:
        if not name:
            continue
        text = str(name) if port in (None, "", 22, "22") else "[%s]:%s" % (name, port)
        if text not in found:
            found.append(text)
    return found
