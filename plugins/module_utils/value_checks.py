# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of single values that every role's settings check shares (plain Python, no Ansible imports).

One rule for numbers in every role: an integer, or a string of decimal digits (INI inventories and
``-e key=value`` give strings), is accepted and used as that integer; anything else (``"lots"``, ``8001.5``,
``true``, ``"0x1f"``) is refused. The functions here return the usable value, or None when the value is not
usable; the callers word the message, naming their variable.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

_DIGITS = re.compile(r"^\s*[0-9]+\s*$")
_FLOAT = re.compile(r"^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*$")
# Prometheus' (and Alertmanager's) duration: prometheus/common model.ParseDuration. Units in this order, each
# at most once, e.g. 1m30s, 1h, 500ms, 2w; "0" alone is allowed there (callers that need > 0 say so).
_PROMETHEUS_DURATION = re.compile(r"^(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?"
                                  r"(?:([0-9]+)s)?(?:([0-9]+)ms)?$")
_PROMETHEUS_UNITS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
# An address a person can receive mail at: local part @ DNS name with a dot (RFC 5321's dot-atom form, without
# quoted local parts, which no ACME CA accepts). No whitespace, quotes, braces or semicolons: the value ends up
# in Caddyfiles and alertmanager.yml.
_EMAIL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`|~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`|~-]+)*"
                    r"@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Directories a removal (``<role>_state: absent`` with ``<role>_purge``) must never take, even when a role's
# ``<role>_dir`` points there by mistake.
SYSTEM_DIRS = frozenset(["/etc/systemd", "/etc/default", "/etc/apt", "/etc/ssh", "/usr/local", "/usr/lib", "/usr/share",
                         "/var/lib", "/var/log", "/var/cache", "/var/lib/docker", "/var/lib/vz", "/var/spool",
                         "/var/tmp"])


def as_int(value):
    """An int from an int or a string of decimal digits; None for anything else (bools, floats, words)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _DIGITS.match(value):
        return int(value)
    return None


def as_number(value):
    """A float from an int, a float or a decimal string (``"0.9"``); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _FLOAT.match(value):
        return float(value)
    return None


def as_port(value, lowest=1):
    """A TCP port (``lowest``-65535) from an int or a digit string; None otherwise."""
    number = as_int(value)
    if number is None or not lowest <= number <= 65535:
        return None
    return number


def ip_address(value, strip=True):
    """The ``ipaddress`` object of an IPv4/IPv6 address given as text; None for names and anything else.
    ``strip=False`` refuses surrounding whitespace too (for a value written into a config as it is)."""
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.ip_address(value.strip() if strip else value)
    except ValueError:
        return None


def prometheus_seconds(value):
    """Seconds of a Prometheus duration (``1m30s`` -> 90.0, ``500ms`` -> 0.5, ``0`` -> 0.0); None if invalid."""
    if not isinstance(value, str):
        return None
    if value == "0":
        return 0.0
    match = _PROMETHEUS_DURATION.match(value)
    if not value or not match or not any(group is not None for group in match.groups()):
        return None
    groups = match.groups()
    return sum(int(groups[i]) * _PROMETHEUS_UNITS[i] for i in range(len(groups)) if groups[i] is not None)


def is_email(value):
    """True for a syntactically usable e-mail address (``ops@example.org``)."""
    return isinstance(value, str) and len(value) <= 254 and bool(_EMAIL.match(value))


def is_env_name(value):
    """True for a usable environment variable name (``NCCL_IB_DISABLE``)."""
    return isinstance(value, str) and bool(_ENV_NAME.match(value))


_URL = re.compile(r"^(https://|http://|file:///)\S+$")
_FINGERPRINT = re.compile(r"^[0-9A-F]{40}$")


def url_problem(value):
    """Why ``value`` is not a repository or key URL apt and the keyring module can fetch (None when it is)."""
    if value is not None and not _URL.match(str(value)):
        return "must be an https://, http:// or file:/// URL without spaces, not %r" % (value,)
    return None


def normalise_fingerprint(text):
    """An OpenPGP fingerprint as gpg prints it or people write it (spaces, colons, 0x) -> 40 upper-case hex digits."""
    value = re.sub(r"[\s:]", "", str(text or "")).upper()
    return value[2:] if value.startswith("0X") else value


def fingerprints_problems(value):
    """Why ``value`` is not a non-empty list of OpenPGP v4 fingerprints (an empty list when it is, or is None)."""
    if value is None:
        return []
    if not isinstance(value, list) or not value:
        return ["must be a non-empty list of key fingerprints"]
    return ["%r is not a 40-hex-digit OpenPGP v4 fingerprint" % (item,) for item in value
            if not _FINGERPRINT.match(normalise_fingerprint(item))]


def type_name(value):
    """``'lots' (a string)`` style wording for messages."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a mapping", type(None): "null"}
    return names.get(type(value), type(value).__name__)


class SettingsProblems(ValueError):
    """Bad settings: ``problems`` lists every problem found, each naming the variable (``errors`` is the same list,
    the name some callers use). The roles' planning and rendering code raises its own subclass of this, so that
    every module reports it the same way (module_utils/render_module.py)."""

    def __init__(self, problems):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.errors = self.problems
        ValueError.__init__(self, "; ".join(self.problems))


def removable_dir_problems(variable, path):
    """Why ``path`` is not a directory a role may remove with everything in it (an empty list when it is): it must
    be absolute, at least two levels deep, without empty, '.' or '..' components, and neither a home directory nor
    a system directory (SYSTEM_DIRS). One trailing slash is allowed. ``variable`` names it in the message."""
    example = "/opt/%s" % variable[:-4] if variable.endswith("_dir") else "/opt/<service>"
    wanted = ("%s: %s is not a directory this collection would remove: an absolute path at least two levels deep, "
              "without '.' or '..', that is not a home or system directory (e.g. %s)")
    if not isinstance(path, str):
        return [wanted % (variable, "%s (%s)" % (path, type_name(path)), example)]
    trimmed = path[:-1] if path.endswith("/") else path
    parts = trimmed.split("/")
    if (not trimmed.startswith("/") or len(parts) < 3 or any(part in ("", ".", "..") for part in parts[1:])
            or (len(parts) == 3 and parts[1] == "home") or trimmed in SYSTEM_DIRS):
        return [wanted % (variable, repr(path), example)]
    return []
