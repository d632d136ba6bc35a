# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bcrypt password hashes for the HTTP basic auth of the Prometheus exporter toolkit (``web.yml``), computed on the
controller with the ``bcrypt`` package (requirements.txt, meta/ee-requirements.txt; imported when a hash is made or
checked, so that importing this file needs nothing).

A rerun must write the same file (changed=0), but a bcrypt salt is random. The hash of the earlier run is kept when
it still verifies the password and is at least as strong as asked (:func:`keep_or_hash`); only a new or changed
password gets a new salt. The salt is not derived from the password: a salt computed from the secret (an HMAC of
it, say) sits in clear in the hash and would let anyone holding the file test candidate passwords at the speed of
the HMAC instead of bcrypt's.
Plain Python: no Ansible import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

COST = 12
MAX_BYTES = 72  # bcrypt reads no more of a password (the bcrypt package refuses longer ones)
HASH_RE = re.compile(r"^\$2[aby]\$(?P<cost>[0-9]{2})\$[./A-Za-z0-9]{53}$")
FIND_RE = re.compile(r"(?<![./A-Za-z0-9$])\$2[aby]\$[0-9]{2}\$[./A-Za-z0-9]{53}(?![./A-Za-z0-9])")
BCRYPT_MISSING = ("the Python package bcrypt is needed on the controller to hash the monitoring web password: "
                  "pip install bcrypt (requirements.txt)")


class BcryptError(Exception):
    """A password bcrypt cannot hash, or the bcrypt package missing; the message says which."""


def _bcrypt():
    try:
        import bcrypt
    except ImportError:
        raise BcryptError(BCRYPT_MISSING)
    return bcrypt


def _password_bytes(password):
    if not isinstance(password, str) or not password:
        raise BcryptError("the password to hash is empty or not text")
    data = password.encode("utf-8")
    if len(data) > MAX_BYTES or "\0" in password:
        raise BcryptError("the password to hash is longer than %d bytes or holds a NUL byte: bcrypt cannot hash it"
                          % MAX_BYTES)
    return data


def find_hashes(text):
    """The bcrypt hashes in ``text`` (a file an earlier run wrote, e.g. web.yml), in order; none for anything else."""
    return FIND_RE.findall(text) if isinstance(text, str) else []


def cost(hashed):
    """The cost (log2 of the rounds) of a bcrypt hash, or None when ``hashed`` is not one."""
    match = HASH_RE.match(hashed) if isinstance(hashed, str) else None
    return int(match.group("cost")) if match else None


def new_hash(password, rounds=COST):
    """A bcrypt hash (``$2b$``) of ``password`` with a random salt."""
    if not isinstance(rounds, int) or isinstance(rounds, bool) or not 4 <= rounds <= 31:
        raise BcryptError("bcrypt cost %r: must be a whole number from 4 to 31" % (rounds,))
    bcrypt = _bcrypt()
    return bcrypt.hashpw(_password_bytes(password), bcrypt.gensalt(rounds=rounds, prefix=b"2b")).decode("ascii")


def verifies(password, hashed):
    """True when ``hashed`` is a bcrypt hash of ``password``; False for anything else (no exception)."""
    if cost(hashed) is None:
        return False
    try:
        data = _password_bytes(password)
    except BcryptError:
        return False
    try:
        return bool(_bcrypt().checkpw(data, hashed.encode("ascii")))
    except ValueError:
        return False


def keep_or_hash(password, earlier=(), rounds=COST):
    """The first of the ``earlier`` hashes that verifies ``password`` with a cost of at least ``rounds``, else a new
    hash: the same input gives the same hash as long as one earlier hash is given back."""
    _password_bytes(password)
    for hashed in earlier or ():
        if (cost(hashed) or 0) >= rounds and verifies(password, hashed):
            return hashed
    return new_hash(password, rounds)
