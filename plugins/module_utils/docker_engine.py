# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Docker engine of every host that runs a compose project (GPU VMs, gateway, Langfuse, observability): settings
checks, package lists and the daemon.json merge of the ``docker`` role (the NVIDIA runtime is the ``nvidia`` role's,
added to the same file afterwards).

Plain Python, no Ansible imports; the ``docker`` role's module and filters are thin wrappers around it.

Seed 000 installs Docker from Debian on each VM of the site (``docker.io``, compose v2) and caps container logs.
"""

import copy
import json
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

# Debian release -> codename the role supports (what guest_image builds: trixie's docker-compose is compose v2,
# bookworm's is the old Python v1 that community.docker.docker_compose_v2 cannot drive).
SUPPORTED = {"13": "trixie"}
SOURCES = ("debian", "docker")
# procps (sysctl), pciutils (lspci, for people debugging a guest) and kmod (modinfo, /etc/modprobe.d) come with the
# engine.
DEBIAN_PACKAGES = ("docker.io", "docker-compose", "procps", "pciutils", "kmod")
DOCKER_CE_PACKAGES = ("procps", "pciutils", "kmod", "docker-ce", "docker-ce-cli", "containerd.io",
                      "docker-buildx-plugin", "docker-compose-plugin")
LOG_SIZE_RE = re.compile(r"^[1-9][0-9]*[kmg]$")
# Variables of the nvidia role before the docker role took Docker over: a site still setting one is told
# the new name instead of having its setting ignored.
RENAMED = dict(("nvidia_docker_" + name, "docker_" + name) for name in (
    "source", "repo_url", "repo_gpg_key_url", "repo_gpg_fingerprints", "daemon_options", "log_max_size",
    "log_max_file", "validate"))
RENAMED["nvidia_sysctl_apply"] = "docker_sysctl_apply"


class DockerEngineError(ValueError):
    pass


def _problem(problems, name, text):
    problems.append("docker_%s: %s" % (name, text))


def check_distribution(distribution, major_version, release=None):
    """None when supported, else the message that stops the role before it installs anything."""
    if distribution == "Debian" and str(major_version) in SUPPORTED:
        return None
    supported = ", ".join("Debian %s (%s)" % (v, c) for v, c in sorted(SUPPORTED.items()))
    seen = " ".join(str(x) for x in (distribution, major_version, release) if x)
    return ("pvegpu.llmstack.docker supports %s only; this host runs %s. Nothing was installed (the packages and "
            "their compose plugin differ elsewhere)." % (supported, seen))


def check_settings(s):
    """Every problem of the role's variables (given without their ``docker_`` prefix) at once, each named."""
    problems = []
    if s.get("source") not in SOURCES:
        _problem(problems, "source", "must be one of %s, not %r" % (", ".join(SOURCES), s.get("source")))
    for name in ("repo_url", "repo_gpg_key_url"):
        problem = value_checks.url_problem(s.get(name))
        if problem:
            _problem(problems, name, problem)
    for problem in value_checks.fingerprints_problems(s.get("repo_gpg_fingerprints")):
        _problem(problems, "repo_gpg_fingerprints", problem)
    options = s.get("daemon_options")
    if not isinstance(options, dict):
        _problem(problems, "daemon_options", "must be a mapping of daemon.json keys")
    elif "runtimes" in options:
        _problem(problems, "daemon_options", "must not set runtimes: the nvidia role adds the nvidia runtime with "
                 "nvidia-ctk, and a runtime set here would be merged over it")
    if not LOG_SIZE_RE.match(str(s.get("log_max_size") or "")):
        _problem(problems, "log_max_size", "must be a size such as 100m (k, m or g), not %r" % (s.get("log_max_size"),))
    max_file = s.get("log_max_file")
    if isinstance(max_file, bool) or not isinstance(max_file, int) or max_file < 1:
        _problem(problems, "log_max_file", "must be a whole number of files, 1 or more, not %r" % (max_file,))
    return problems


def renamed_problems(names):
    """One message per variable the site still sets under its name from before the docker role (``names``: the
    variable names defined for the host)."""
    return ["%s was renamed %s (Docker is the pvegpu.llmstack.docker role's now): rename it in the "
            "inventory, it is not read any more" % (old, RENAMED[old]) for old in sorted(set(names)) if old in RENAMED]


def packages(source):
    """The apt packages of a source: the engine, its CLI and compose v2."""
    if source == "debian":
        return list(DEBIAN_PACKAGES)
    if source == "docker":
        return list(DOCKER_CE_PACKAGES)
    raise DockerEngineError("unknown Docker source %r" % (source,))


# ---------------------------------------------------------------- daemon.json


def load_daemon_json(text, path="/etc/docker/daemon.json"):
    """The daemon configuration as a dict ({} for a missing or empty file); a clear error for anything else."""
    if text is None or not str(text).strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DockerEngineError("%s is not valid JSON (%s); it is left as it is: fix or remove it" % (path, exc))
    if not isinstance(data, dict):
        raise DockerEngineError("%s holds a JSON %s, not an object; it is left as it is: fix or remove it"
                                % (path, type(data).__name__))
    return data


def _deep_merge(current, owned, prefix, changed):
    for key, value in owned.items():
        name = prefix + key
        if isinstance(value, dict) and isinstance(current.get(key), dict):
            _deep_merge(current[key], value, name + ".", changed)
        elif key not in current or current[key] != value:
            current[key] = copy.deepcopy(value)
            changed.append(name)


def merge_daemon(current, owned):
    """``owned`` merged into ``current``: our keys set (nested mappings merged key by key), every other key kept.

    Returns (merged, changed_keys). ``current`` is not modified.
    """
    merged = copy.deepcopy(current or {})
    changed = []
    _deep_merge(merged, owned or {}, "", changed)
    return merged, changed


def owned_daemon_options(options, log_max_size, log_max_file):
    """The daemon.json keys the role owns: log rotation (json-file, size and count) and the user's options."""
    owned = {"log-driver": "json-file", "log-opts": {"max-size": str(log_max_size), "max-file": str(log_max_file)}}
    merged, _changed = merge_daemon(owned, options or {})
    return merged


def render_daemon_json(data):
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
