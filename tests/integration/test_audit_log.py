"""The audit_log callback in real ansible-playbook runs, the audit_log_verify module on the files they wrote,
forwarding to a real rsyslog, and a run made the way AWX makes it (ansible-runner, AWX extra vars, the
project's ansible.cfg enabling the callback).

Nothing here is a double: the runs are real (connection local, or podman for the role run), the receiver is
Debian's rsyslogd on loopback, the runner is ansible-runner from PyPI. What AWX adds around ansible-runner
(its database, the UI, credential injection) does not run here.
"""

import getpass
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml
from conftest import BIN, ROOT, ansible_env, parse_json_report

sys.path.insert(0, ROOT)
from plugins.module_utils import audit_log  # noqa: E402

IMAGE = "localhost/llmstack-debian13"

DEMO_ROLE_TASKS = """---
- name: Write the demo file
  ansible.builtin.copy:
    content: "{{ demo_content }}"
    dest: "{{ demo_dir }}/demo.conf"
    mode: "0644"
  notify: Note the change
"""

DEMO_PLAYBOOK = """---
- name: Audit demo
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Nothing to change
      ansible.builtin.stat:
        path: /
    - name: Use the demo role
      ansible.builtin.include_role:
        name: auditdemo
    - name: Store a secret
      ansible.builtin.copy:
        content: "{{ demo_secret }}"
        dest: "{{ demo_dir }}/secret"
        mode: "0600"
      no_log: true
    - name: A loop with one change
      ansible.builtin.command: "echo {{ item }}"
      loop: [one, two]
      changed_when: item == 'two'
    - name: A failure that is ignored
      ansible.builtin.fail:
        msg: expected failure
      ignore_errors: true
  handlers:
    - name: Note the change
      ansible.builtin.debug:
        msg: changed
      changed_when: true
"""


def run(args, audit, check=True, timeout=300, **env):
    environment = ansible_env(LLMSTACK_AUDIT_LOG=str(audit), **env)
    result = subprocess.run(args, cwd=ROOT, env=environment, text=True, capture_output=True, check=False,
                            timeout=timeout)
    if check:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return result


@pytest.fixture
def demo(tmp_path):
    """A playbook with a role, a no_log secret, a loop, an ignored failure and a handler, ready to run."""
    role = tmp_path / "roles" / "auditdemo"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(DEMO_ROLE_TASKS)
    (tmp_path / "demo.yml").write_text(DEMO_PLAYBOOK)
    (tmp_path / "out").mkdir()
    marker = "content-marker-" + secrets.token_hex(8)
    secret = "secret-" + secrets.token_urlsafe(24)
    return {"dir": tmp_path, "playbook": str(tmp_path / "demo.yml"), "audit": tmp_path / "audit" / "audit.jsonl",
            "secret": secret, "marker": marker,
            "vars": ["-e", "demo_dir=%s" % (tmp_path / "out"), "-e", "demo_secret=%s" % secret,
                     "-e", "demo_content='line one\nline two %s\n'" % marker],
            "env": {"ANSIBLE_ROLES_PATH": str(tmp_path / "roles")}}


def play(demo, *extra, check=True, **env):
    args = [os.path.join(BIN, "ansible-playbook"), demo["playbook"], "--diff"] + demo["vars"] + list(extra)
    return run(args, demo["audit"], check=check, **dict(demo["env"], **env))


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def verify_module(path, *args):
    """audit_log_verify through ansible (connection local); the module's result."""
    module_args = {"path": str(path)}
    for arg in args:
        module_args.update(arg)
    cmd = [os.path.join(BIN, "ansible"), "localhost", "-m", "pvegpu.llmstack.audit_log_verify",
           "-a", json.dumps(module_args)]
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                      LLMSTACK_AUDIT_LOG=str(path) + ".verify-run")
    result = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=120)
    report = parse_json_report(result.stdout)
    return list(report["plays"][0]["tasks"][0]["hosts"].values())[0]


# ------------------------------------------------------------------------------------------ what is recorded

def test_a_run_records_changes_and_failures_without_secrets(demo):
    play(demo, "-e", json.dumps({"awx_job_id": 4711, "awx_user_name": "alice",
                                 "tower_job_template_name": "stage gateway"}))
    lines = records(demo["audit"])
    assert lines[0]["event"] == "chain_start"
    events = [r["event"] for r in lines[1:]]
    assert events[0] == "play_start" and events[-1] == "stats"
    tasks = {r["task"]: r for r in lines if r["event"] == "task"}
    # The unchanged stat is not recorded by default; the changes, the failure and the handler are.
    assert set(tasks) == {"Write the demo file", "Store a secret", "A loop with one change",
                          "A failure that is ignored", "Note the change"}
    written = tasks["Write the demo file"]
    assert written["role"] == "auditdemo" and written["action"] == "ansible.builtin.copy"
    assert written["status"] == "changed" and written["changed"] and not written["failed"]
    assert written["paths"] == [str(demo["dir"] / "out" / "demo.conf")]
    assert written["diff"] == [{"file": str(demo["dir"] / "out" / "demo.conf"), "lines_added": 2,
                                "lines_removed": 0}]
    assert tasks["Store a secret"]["result"] == "censored" and "paths" not in tasks["Store a secret"]
    assert tasks["A loop with one change"]["items"] == 2 and tasks["A loop with one change"]["items_changed"] == 1
    failure = tasks["A failure that is ignored"]
    assert failure["status"] == "failed" and failure["ignored"] and failure["msg"] == "expected failure"
    assert tasks["Note the change"]["handler"] and not written["handler"]
    for record in lines[1:]:
        assert record["awx"] == {"job_id": 4711, "user_name": "alice", "job_template_name": "stage gateway"}
        assert record["user"] == getpass.getuser() and record["playbook"] == demo["playbook"]
        assert record["check_mode"] is False
        assert record["inventory"] == [os.path.join(ROOT, "inventories", "lab")]
    for record in lines:
        assert record["time"].endswith("Z")
    stats = lines[-1]["hosts"]["localhost"]
    assert stats["changed"] == 4 and stats["ignored"] == 1
    raw = demo["audit"].read_bytes()
    assert demo["secret"].encode() not in raw and demo["marker"].encode() not in raw
    assert (demo["dir"] / "out" / "secret").read_text() == demo["secret"]  # the secret was really written
    assert oct(os.stat(demo["audit"]).st_mode & 0o777) == "0o600"
    assert oct(os.stat(demo["audit"].parent).st_mode & 0o777) == "0o700"


def test_check_mode_and_record_ok(demo):
    play(demo, "--check", "--tags", "never,all", LLMSTACK_AUDIT_RECORD_OK="true", JOB_ID="99")
    lines = records(demo["audit"])
    tasks = {r["task"]: r for r in lines if r["event"] == "task"}
    assert tasks["Nothing to change"]["status"] == "ok"
    assert all(r["check_mode"] for r in lines[1:])
    assert all(r["awx"] == {"job_id": "99"} for r in lines[1:])
    assert lines[1]["run_tags"] == ["all", "never"]
    # Nothing was written: check mode only predicted the changes it recorded.
    assert not (demo["dir"] / "out" / "demo.conf").exists()
    assert tasks["Write the demo file"]["changed"]


def test_reruns_extend_one_chain_and_the_module_verifies_it(demo):
    play(demo)
    play(demo)
    lines = records(demo["audit"])
    assert [r["event"] for r in lines].count("chain_start") == 1
    assert len({r["run"] for r in lines[1:]}) == 2
    result = verify_module(demo["audit"])
    assert not result.get("failed"), result
    assert result["records"] == len(lines) - 1 and result["valid_lines"] == len(lines)
    assert result["events"]["play_start"] == 2 and result["events"]["stats"] == 2
    assert result["runs"] == 2 and result["last_hash"] == lines[-1]["hash"]
    assert result["changed"] is False


def tamper_edit(raw):
    middle = len(raw) // 2
    line = raw[:middle].count(b"\n") + 1
    data = bytearray(raw)
    data[middle] = ord("#") if data[middle] != ord("#") else ord("$")
    return bytes(data), line, "edited"


def tamper_delete(raw):
    lines = raw.split(b"\n")
    del lines[3]
    return b"\n".join(lines), 4, "deleted"


def tamper_swap(raw):
    lines = raw.split(b"\n")
    lines[4], lines[5] = lines[5], lines[4]
    return b"\n".join(lines), 5, "reordered"


def tamper_cut(raw):
    count = raw.count(b"\n")
    return raw[:-40], count, "cut off"


@pytest.mark.parametrize("tamper", [tamper_edit, tamper_delete, tamper_swap, tamper_cut],
                         ids=["edit", "delete", "swap", "cut"])
def test_the_module_finds_tampering_with_the_line(demo, tamper):
    play(demo)
    original = demo["audit"].read_bytes()
    data, line, word = tamper(original)
    demo["audit"].write_bytes(data)
    result = verify_module(demo["audit"])
    assert result.get("failed"), result
    assert result["line"] == line and word in result["reason"], result
    assert "line %d" % line in result["msg"]
    assert result["valid_lines"] == line - 1


def cli(*args):
    script = os.path.join(ROOT, "tools", "audit_log_verify.py")
    return subprocess.run(["/usr/bin/python3", "-I", script] + [str(a) for a in args], capture_output=True,
                          text=True, check=False)


def test_the_command_line_runs_without_ansible(demo):
    """The verifier as a plain script under the system Python (no Ansible on its path)."""
    play(demo)
    lines = records(demo["audit"])
    ok = cli(demo["audit"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("OK: %d records" % (len(lines) - 1)) and lines[-1]["hash"] in ok.stdout
    demo["audit"].write_bytes(demo["audit"].read_bytes()[:-1])
    broken = cli(demo["audit"])
    assert broken.returncode == 1 and "BROKEN: line %d: the last line is cut off" % len(lines) in broken.stdout
    report = json.loads(cli("--json", demo["audit"]).stdout)
    assert report["line"] == len(lines) and report["valid_lines"] == len(lines) - 1
    assert cli(demo["dir"] / "missing.jsonl").returncode == 2
    assert cli("--anchor", "xyz", demo["audit"]).returncode == 2


def test_a_log_that_cannot_be_written_is_a_warning_not_a_failed_run(demo):
    blocker = demo["dir"] / "not-a-dir"
    blocker.write_text("")
    result = play(dict(demo, audit=blocker / "audit.jsonl"), LLMSTACK_AUDIT_FALLBACK_SYSLOG="")
    assert "audit_log" in result.stderr and "could not be written" in result.stderr


def test_a_required_log_that_cannot_be_written_stops_the_run_before_its_first_task(demo):
    """LLMSTACK_AUDIT_REQUIRED (docs/awx.md: what AWX job templates set): the run fails naming the file, and the
    demo's tasks (they write files in out/) never ran. Without the setting the same run goes on (test above)."""
    blocker = demo["dir"] / "not-a-dir"
    blocker.write_text("")
    result = play(dict(demo, audit=blocker / "audit.jsonl"), check=False, LLMSTACK_AUDIT_REQUIRED="true")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert str(blocker / "audit.jsonl") in output and "audit log is required" in output, output[-2000:]
    assert list((demo["dir"] / "out").iterdir()) == []


# ------------------------------------------------------------------------------------------ concurrency

CONCURRENT = """---
- name: Concurrent writer {{ me }}
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Say I am ready
      ansible.builtin.file:
        path: "{{ base }}/ready-{{ me }}"
        state: touch
        mode: "0600"
    - name: Wait for the other run
      ansible.builtin.wait_for:
        path: "{{ base }}/ready-{{ other }}"
        timeout: 120
%s
"""


def test_two_concurrent_runs_append_one_valid_chain(tmp_path):
    tasks = "".join("""    - name: Change %d
      ansible.builtin.command: /bin/true
      changed_when: true
""" % n for n in range(60))
    (tmp_path / "concurrent.yml").write_text(CONCURRENT % tasks)
    audit = tmp_path / "audit.jsonl"
    procs = []
    for me, other in (("a", "b"), ("b", "a")):
        args = [os.path.join(BIN, "ansible-playbook"), str(tmp_path / "concurrent.yml"), "-e", "me=%s" % me,
                "-e", "other=%s" % other, "-e", "base=%s" % tmp_path]
        procs.append(subprocess.Popen(args, cwd=ROOT, env=ansible_env(LLMSTACK_AUDIT_LOG=str(audit)),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for proc in procs:
        out = proc.communicate(timeout=300)[0]
        assert proc.returncode == 0, out[-3000:]
    report = audit_log.verify_file(str(audit))
    assert report["ok"], report
    lines = records(audit)
    runs = [r["run"] for r in lines[1:]]
    assert len(set(runs)) == 2
    # 1 touch + 60 changes + play start + stats per run
    assert sorted(runs.count(r) for r in set(runs)) == [63, 63]
    # The runs really wrote at the same time: their records alternate more than once.
    switches = sum(1 for a, b in zip(runs, runs[1:], strict=False) if a != b)
    assert switches >= 3, "the runs did not overlap (%d switches); the test proves nothing" % switches


# ------------------------------------------------------------------------------------------ syslog

RSYSLOG_CONF = """global(workDirectory="%(dir)s" maxMessageSize="64k")
module(load="imudp")
module(load="imtcp")
input(type="imudp" address="127.0.0.1" port="%(udp)d")
input(type="imtcp" address="127.0.0.1" port="%(tcp)d")
template(name="fields" type="list") {
  property(name="pri") constant(value="|")
  property(name="app-name") constant(value="|")
  property(name="procid") constant(value="|")
  property(name="msgid") constant(value="|")
  property(name="timereported" dateFormat="rfc3339") constant(value="|")
  property(name="msg") constant(value="\\n")
}
*.* action(type="omfile" file="%(dir)s/received.log" template="fields")
"""


def free_port(kind):
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def rsyslog(tmp_path):
    """Debian's rsyslogd in the foreground, receiving RFC 5424 on loopback UDP and TCP, writing what it parsed."""
    base = tmp_path / "rsyslog"
    base.mkdir()
    ports = {"udp": free_port(socket.SOCK_DGRAM), "tcp": free_port(socket.SOCK_STREAM)}
    (base / "rsyslog.conf").write_text(RSYSLOG_CONF % dict(ports, dir=base))
    proc = subprocess.Popen(["rsyslogd", "-n", "-f", str(base / "rsyslog.conf"), "-i", str(base / "pid")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", ports["tcp"]), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("rsyslogd did not listen: %s" % proc.communicate()[0])
    yield {"dir": base, "ports": ports, "out": base / "received.log"}
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def received(rsyslog, count):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if rsyslog["out"].exists() and len(rsyslog["out"].read_text().splitlines()) >= count:
            break
        time.sleep(0.2)
    out = []
    for line in rsyslog["out"].read_text().splitlines():
        pri, app, procid, msgid, stamp, msg = line.split("|", 5)
        out.append({"pri": int(pri), "app": app, "procid": procid, "msgid": msgid, "time": stamp,
                    "msg": msg.lstrip("\ufeff")})
    return out


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_records_reach_a_real_syslog_receiver_and_anchor_the_chain(demo, rsyslog, transport):
    address = "%s://127.0.0.1:%d" % (transport, rsyslog["ports"][transport])
    play(demo, LLMSTACK_AUDIT_SYSLOG=address, LLMSTACK_AUDIT_SYSLOG_FACILITY="local4")
    lines = demo["audit"].read_text().splitlines()
    got = received(rsyslog, len(lines))
    # Every line, the chain start included, arrived intact as rsyslog's RFC 5424 parser read it.
    assert [g["msg"] for g in got] == lines
    pid = json.loads(lines[1])["pid"]
    for message, line in zip(got, lines, strict=True):
        record = json.loads(line)
        assert message["app"] == "llmstack-audit" and message["procid"] == str(pid)
        assert message["msgid"] == record["event"]
        assert message["pri"] // 8 == 20  # local4
        severity = message["pri"] % 8
        assert severity == {"failed": 4, "changed": 5}.get(record.get("status"), 6)
        assert message["time"].startswith(record["time"][:19])
    # The receiver's copy holds the last hash: removing the last line from the file is now caught.
    anchor = json.loads(got[-1]["msg"])["hash"]
    demo["audit"].write_text("\n".join(lines[:-1]) + "\n")
    assert audit_log.verify_file(str(demo["audit"]))["ok"]
    result = verify_module(demo["audit"], {"anchor": anchor})
    assert result.get("failed") and "anchor" in result["reason"], result


@pytest.mark.parametrize("setting", ["LLMSTACK_AUDIT_FALLBACK_SYSLOG", "LLMSTACK_AUDIT_SYSLOG"])
def test_records_the_file_does_not_take_reach_syslog_unsealed_and_without_secrets(demo, rsyslog, setting):
    """The log's directory is a file: every record goes to fallback_syslog instead (a real rsyslogd here; the local
    /dev/log, which journald reads, by default), or to syslog_address when that is set (fallback_syslog pointing
    nowhere then), marked unsealed, the no_log secret never in it."""
    blocker = demo["dir"] / "not-a-dir"
    blocker.write_text("")
    address = "udp://127.0.0.1:%d" % rsyslog["ports"]["udp"]
    env = {setting: address}
    if setting == "LLMSTACK_AUDIT_SYSLOG":
        env["LLMSTACK_AUDIT_FALLBACK_SYSLOG"] = "unix:///nonexistent/log"
    result = play(dict(demo, audit=blocker / "audit.jsonl"), **env)
    assert "could not be written" in result.stderr
    got = [json.loads(message["msg"]) for message in received(rsyslog, 3)]
    events = [record["event"] for record in got]
    assert events[0] == "play_start" and events[-1] == "stats" and "task" in events, events
    assert all(record["unsealed"] is True and "hash" not in record for record in got)
    assert got[-1]["lost_records"] == len(got) - 1  # the stats record counts the ones before it
    assert demo["secret"] not in rsyslog["out"].read_text()
    assert any(record.get("status") == "changed" for record in got)


# ------------------------------------------------------------------------------------------ as AWX runs it

def podman(*args, check=True):
    result = subprocess.run(["podman"] + list(args), env=ansible_env(), text=True, capture_output=True, check=False)
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def awx_project(tmp_path):
    """A private data dir as AWX hands it to ansible-runner: the lab inventory (with its state dir), AWX's extra
    vars and environment; and a container for the observability host."""
    project = tmp_path / "project"
    shutil.copytree(os.path.join(ROOT, "inventories", "lab"), project / "inventories" / "lab")
    (project / ".cache" / "lab").mkdir(parents=True)
    password = secrets.token_urlsafe(24)
    (project / ".cache" / "lab" / "pve_api_password").write_text(password + "\n")
    # What the lab inventory reads besides: the mirror script and the lab's SSH key (guest images).
    (project / "tools").mkdir()
    shutil.copy(os.path.join(ROOT, "tools", "debian-mirror.sh"), project / "tools" / "debian-mirror.sh")
    key = project / ".cache" / "lab" / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    name = "llmstack-audit-obs-%s" % secrets.token_hex(4)
    hosts_file = project / "inventories" / "lab" / "hosts.yml"
    hosts = yaml.safe_load(hosts_file.read_text())
    hosts["all"]["children"]["langfuse"]["hosts"]["lab-obs"]["ansible_host"] = name
    hosts_file.write_text(yaml.safe_dump(hosts))
    podman("run", "-d", "--name", name, "--network", "none", IMAGE, "sleep", "infinity")
    private = tmp_path / "runner"
    (private / "env").mkdir(parents=True)
    audit = tmp_path / "audit" / "audit.jsonl"
    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True, capture_output=True,
                              check=False).stdout.strip() or "unknown"
    extra = {"awx_job_id": 4711, "tower_job_id": 4711, "awx_job_template_name": "llmstack / observability",
             "awx_user_name": "alice", "awx_inventory_name": "lab", "awx_project_revision": revision}
    (private / "env" / "extravars").write_text(yaml.safe_dump(extra))
    (private / "env" / "envvars").write_text(yaml.safe_dump({"JOB_ID": "4711", "LLMSTACK_AUDIT_LOG": str(audit)}))
    try:
        yield {"private": private, "inventory": project / "inventories" / "lab", "audit": audit, "extra": extra,
               "container": name, "password": password}
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def runner(awx_project, ident, cmdline, *options):
    # As AWX: ansible-runner in the project directory, no ANSIBLE_CONFIG (the project's ansible.cfg is found in
    # the working directory and enables the callback), the audit path from the job's environment.
    env = {k: v for k, v in ansible_env().items() if not k.startswith("ANSIBLE_") and k != "LLMSTACK_AUDIT_LOG"}
    cmd = [os.path.join(BIN, "ansible-runner"), "run", str(awx_project["private"]), "--project-dir", ROOT,
           "-p", "site.yml", "--inventory", str(awx_project["inventory"]), "--ident", ident, "--cmdline", cmdline]
    cmd += list(options)
    result = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, check=False, timeout=600)
    status = (awx_project["private"] / "artifacts" / ident / "status").read_text().strip()
    assert result.returncode == 0 and status == "successful", result.stdout[-4000:] + result.stderr[-2000:]
    events = [json.loads((awx_project["private"] / "artifacts" / ident / "job_events" / f).read_text())
              for f in os.listdir(awx_project["private"] / "artifacts" / ident / "job_events")]
    return events


@pytest.mark.slow
def test_ansible_runner_as_awx_runs_it(awx_project):
    # Validation only: the inventory model is checked, nothing is written to the hosts (the lab's other hosts
    # have no container here).
    # (--limit: the lab's PVE hosts and its PVE API do not exist in this test; the validate step reads them.)
    # lab-obs is a VM of the lab (gpu_vm_vmid, issue #33) and this test has no PVE API: its power state is given as
    # read (running - the container stands in for the VM), so validate does not ask the API.
    validate = runner(awx_project, "validate", "--tags validate -e inventory_check_publish_facts=false "
                      "-e llmstack_vm_status=running", "--limit", "lab-obs")
    assert any(e.get("event") == "playbook_on_stats" for e in validate)  # AWX's own event stream is intact
    lines = records(awx_project["audit"])
    assert lines[0]["event"] == "chain_start"
    validate_records = lines[1:]
    assert {r["event"] for r in validate_records} == {"play_start", "stats"}  # validation changes nothing
    assert validate_records[0]["playbook"] == os.path.join(ROOT, "site.yml")
    assert validate_records[0]["run_tags"] == ["validate"]

    runner(awx_project, "langfuse", "--tags langfuse -e llmstack_vm_status=running", "--limit", "lab-obs")
    lines = records(awx_project["audit"])
    report = audit_log.verify_file(str(awx_project["audit"]))
    assert report["ok"], report
    assert report["runs"] == 2
    expected_awx = {"job_id": 4711, "job_template_name": "llmstack / observability", "user_name": "alice",
                    "inventory_name": "lab", "project_revision": awx_project["extra"]["awx_project_revision"]}
    assert all(r["awx"] == expected_awx for r in lines[1:])
    tasks = [r for r in lines if r["event"] == "task"]
    assert tasks and {r["host"] for r in tasks} == {"lab-obs"}
    # The role (and the compose lifecycle it shares with the other service roles) writes its files. lab-obs is a VM
    # the collection creates (issue #33): its network fact is written by the guests stage, not by validate.
    assert {r["role"] for r in tasks} == {"pvegpu.llmstack.langfuse", "pvegpu.llmstack.service_compose"}
    assert all(r["status"] == "changed" for r in tasks)
    # The task that generates and stores the secrets (secret_file, no_log) is recorded, its result censored.
    stored = [r for r in tasks if r["task"].startswith("Read back the secrets of an earlier run, generate the missing")]
    assert stored and all(r["result"] == "censored" for r in stored)
    assert any(r.get("paths") == ["/opt/langfuse/docker-compose.yml"] for r in tasks)
    # The secrets the role generated in the container are nowhere in the audit file, nor the PVE password.
    raw = awx_project["audit"].read_text()
    names = podman("exec", awx_project["container"], "ls", "/opt/langfuse/secrets").stdout.split()
    assert "encryption_key" in names
    for name in names:
        value = podman("exec", awx_project["container"], "cat", "/opt/langfuse/secrets/" + name).stdout.strip()
        assert value and value not in raw, name
    assert awx_project["password"] not in raw
