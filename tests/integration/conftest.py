"""Helpers for the integration tests: run ansible-playbook from the checkout as the Makefile does."""

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
# The checkout as ansible_collections.pvegpu.llmstack (make setup links it), so tests import module_utils as the
# collection's own code does.
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
if os.path.isdir(COLLECTIONS) and COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
CHECK_TASK = "pvegpu.llmstack.inventory_check : Check every host's variables against the inventory model"
# The longest files first: with `-n 2 --dist loadfile --no-loadscope-reorder` (make integration) each worker takes
# the next file in this order, so the lab (about two thirds of the stage in CI) starts at once on one worker and the
# other works through the rest beside it, instead of the lab starting late and running alone at the end. The guest
# image test also builds the debootstrapped base the lab's site run then finds cached (.cache/guest-image).
LONGEST_FIRST = ("test_lab.py", "test_guest_image.py", "test_tls_proxy.py")


def pytest_collection_modifyitems(items):
    def rank(item):
        name = os.path.basename(str(item.fspath))
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: every file keeps the order of its own tests


def ansible_env(**extra):
    env = dict(os.environ)
    env.update({
        "PATH": BIN + os.pathsep + env.get("PATH", ""),
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
        "ANSIBLE_ROLES_PATH": os.path.join(ROOT, "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_TIMEOUT": "5",
        "CONTAINERS_CONF": os.path.join(ROOT, "tests", "harness", "containers.conf"),
    })
    env.update(extra)
    return env


def playbook(*args, json_output=False, timeout=600):
    """Run ansible-playbook in the checkout; returns (returncode, stdout, stderr)."""
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json" if json_output else "default")
    result = subprocess.run([os.path.join(BIN, "ansible-playbook")] + list(args), cwd=ROOT, env=env, text=True,
                            capture_output=True, timeout=timeout, check=False)
    return result.returncode, result.stdout, result.stderr


def tasks_run(report):
    """[{play, task, hosts: {host: result}}] of a JSON callback report, in the order they ran."""
    runs = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            runs.append({"play": play["play"]["name"], "task": task["task"]["name"], "hosts": task["hosts"]})
    return runs


def parse_json_report(stdout):
    start = stdout.find("{")
    assert start >= 0, "no JSON in the output:\n" + stdout[-2000:]
    return json.loads(stdout[start:])


def why_it_failed(stdout, stderr):
    """What an assertion on a failed playbook run shows: each failed or unreachable task result of its JSON callback
    report (host, play, task, message), then the end of stderr - not the end of the report, which is its stats."""
    lines = []
    try:
        report = parse_json_report(stdout)
    except (AssertionError, ValueError):
        return stdout[-4000:] + stderr[-2000:]
    for run in tasks_run(report):
        for host, result in run["hosts"].items():
            if result.get("failed") or result.get("unreachable"):
                detail = {key: result[key] for key in ("msg", "rc", "stderr", "stdout") if result.get(key)}
                items = [item.get("msg") or item.get("stderr") for item in result.get("results") or []
                         if isinstance(item, dict) and item.get("failed")]
                if items:
                    detail["items"] = items
                lines.append("%s | %s | %s: %s" % (host, run["play"], run["task"],
                                                   json.dumps(detail, sort_keys=True)[:3000]))
    return "\n".join(lines or ["no failed task in the report"]) + "\n" + stderr[-2000:]


SYSTEMD_IMAGE = "localhost/llmstack-debian13-systemd"


def podman(*args, check=True, stdin=None):
    """podman with the harness's containers.conf; a non-zero exit fails the test unless check is false."""
    result = subprocess.run(["podman"] + list(args), env=ansible_env(), text=True, capture_output=True, input=stdin,
                            check=False)
    assert not check or result.returncode == 0, "podman %s: %s" % (" ".join(args[:3]), result.stderr)
    return result


def apt_install(name, packages, attempts=5, delay=15):
    """Install Debian's ``packages`` in container ``name`` from the mirror; again, ``delay`` seconds later, while only
    a download failed (module_utils/apt_fetch.py, as the roles' apt tasks retry: a mirror away for a moment)."""
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import apt_fetch

    for attempt in range(attempts):
        result = podman("exec", name, "sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get "
                        "install -y -qq %s >/dev/null" % " ".join(packages), check=False)
        said = {"failed": result.returncode != 0, "stderr": result.stderr}
        if not apt_fetch.fetch_failed(said) or attempt == attempts - 1:
            break
        time.sleep(delay)
    assert result.returncode == 0, "apt-get install %s in %s: %s" % (" ".join(packages), name, result.stderr)


@contextlib.contextmanager
def systemd_container(name, packages=(), image=SYSTEMD_IMAGE, timeout=60):
    """A host as a site has one, for a role test: a privileged container booting systemd from ``image`` (its own
    network namespace: nothing it changes reaches this machine), labelled for the harness's cleanup, with Debian's
    ``packages`` installed from the mirror once systemd runs; removed when the block ends, however it ends."""
    podman("rm", "-f", "-t", "0", name, check=False)
    podman("run", "-d", "--name", name, "--privileged", "--label", "io.llmstack.test=1", image)
    try:
        deadline = time.monotonic() + timeout
        while podman("exec", name, "systemctl", "is-system-running", check=False).stdout.strip() not in (
                "running", "degraded"):
            assert time.monotonic() < deadline, "systemd did not come up in %s" % name
            time.sleep(1)
        if packages:
            apt_install(name, packages)
        yield name
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


@pytest.fixture
def root():
    return ROOT


@pytest.fixture
def labpve(_fakepve_pki):
    """The lab's PVE double (tools/lab_fakepve.py: fakepve plus stored PCI mappings and disk resize) on
    127.0.0.1 with a port the system picks, nodes pve-a and pve-b, for one test."""
    from fakepve.pytest_plugin import _Serving

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import lab_fakepve
    finally:
        sys.path.pop(0)
    # A password per test, as the lab generates one per lab (never a fixed default).
    pve = lab_fakepve.lab_pve_class()(user="root@pam", password=secrets.token_urlsafe(24), host="127.0.0.1", port=0)
    pve.time_scale = 0
    pve.nodes.clear()
    for node in ("pve-a", "pve-b"):
        pve.add_node(node)
    serving = _Serving(pve, *_fakepve_pki)
    try:
        yield pve
    finally:
        serving.stop()


def run_pve_module(pve, module, args, check=False, diff=False, token=None):
    """Run pvegpu.llmstack.<module> ad hoc against a fakepve server; returns the module's result.

    ``token``: (token id, secret) to authenticate with an API token instead of the password.
    """
    host, port = pve.url.split("://", 1)[1].rsplit(":", 1)
    base = {"api_host": host, "api_port": int(port), "api_user": pve.user, "validate_certs": False}
    if token:
        base.update(api_token_id=token[0], api_token_secret=token[1])
    else:
        base["api_password"] = pve.password
    base.update(args)
    cmd = [os.path.join(BIN, "ansible"), "localhost", "-m", "pvegpu.llmstack." + module, "-a", json.dumps(base)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    result = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=300)
    report = parse_json_report(result.stdout)
    return list(report["plays"][0]["tasks"][0]["hosts"].values())[0]


def form(body):
    """A recorded request body (form-encoded bytes, as proxmoxer sends it) as {key: [values]}."""
    from urllib.parse import parse_qs

    if isinstance(body, dict):
        return dict((k, v if isinstance(v, list) else [v]) for k, v in body.items())
    return parse_qs(body.decode() if isinstance(body, bytes) else body or "")


def state_changing(pve):
    """(method, path, form) of every request that may change state (not logins, not reads)."""
    return [(method, path, form(body)) for method, path, body in pve.requests
            if method in ("POST", "PUT", "DELETE") and not path.endswith("/access/ticket")]
