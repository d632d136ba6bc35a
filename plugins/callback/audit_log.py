# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: audit_log
type: notification
short_description: A tamper-evident, hash-chained JSON-lines record of what each run changed
version_added: 0.1.0
description:
  - Writes one JSON line per task result that B(changed) or B(failed) (and, with O(record_ok), every result), one
    per play start and one with the run's statistics. Each line names the time (UTC), host, play, role, task and
    action, the status flags, check mode, a diff summary (which files and keys changed, never their contents),
    the playbook, the task's tags, the inventory sources, the controller user and host, and the AWX/Tower job
    metadata when AWX passes it (C(awx_job_id) or C(tower_job_id), C(awx_job_template_name), C(awx_user_name),
    C(awx_inventory_name), C(awx_project_revision); the C(JOB_ID) environment variable).
  - A C(no_log) result is recorded as C("censored"), with its status flags only.
  - "Tamper evidence: every line carries C(prev), the previous line's hash, and C(hash), the SHA-256 of its canonical
    JSON without C(hash); the first line of a file is a random nonce the chain starts from. Check a file with the
    M(pvegpu.llmstack.audit_log_verify) module or C(python3 tools/audit_log_verify.py FILE) in the collection."
  - Appends are atomic between concurrent runs (C(O_APPEND), one write per line, an exclusive lock while the last
    line is read and the new one written). The file is created 0600 and a missing directory 0700.
  - Optionally forwards each line to syslog (RFC 5424 over UDP, TCP with octet counting, or a unix socket) so the
    records, and their hashes, also leave the controller.
  - With O(required), a log that cannot be written stops the run before its first task, naming the file (what AWX
    job templates should set; docs/awx.md). Otherwise a record that cannot be written is a warning, and goes to
    O(syslog_address) when it is set, else to O(fallback_syslog) (unsealed - the chain is in the file). The run's
    last record says how many were lost, and the verifier names those runs.
  - A record that cannot be forwarded to O(syslog_address) is a warning.
requirements:
  - Enable it with C(callbacks_enabled = pvegpu.llmstack.audit_log) in C(ansible.cfg) (the collection's own
    ansible.cfg does) or C(ANSIBLE_CALLBACKS_ENABLED).
options:
  path:
    description: The audit log file. Created 0600 (its directory 0700) when missing.
    type: path
    default: ~/.ansible/llmstack-audit/audit.jsonl
    env:
      - name: LLMSTACK_AUDIT_LOG
    ini:
      - section: callback_audit_log
        key: path
  record_ok:
    description: Also record results that are C(ok) (unchanged) or skipped; by default only changed and failed ones.
    type: bool
    default: false
    env:
      - name: LLMSTACK_AUDIT_RECORD_OK
    ini:
      - section: callback_audit_log
        key: record_ok
  fsync:
    description: Flush every line to disk before the run goes on (slower; survives a controller crash).
    type: bool
    default: false
    env:
      - name: LLMSTACK_AUDIT_FSYNC
    ini:
      - section: callback_audit_log
        key: fsync
  syslog_address:
    description:
      - Also send every line to this syslog receiver as an RFC 5424 message (the JSON line is the message; app name
        C(llmstack-audit), message ID the event). C(udp://HOST:PORT), C(tcp://HOST:PORT) (octet-counted framing,
        RFC 6587) or C(unix:///dev/log). Empty to send nothing.
      - Receivers often cut UDP messages at 8 KiB; prefer TCP for large diffs.
    type: str
    default: ''
    env:
      - name: LLMSTACK_AUDIT_SYSLOG
    ini:
      - section: callback_audit_log
        key: syslog_address
  required:
    description:
      - Stop the run before its first task when the audit log cannot be opened for appending (a missing or
        read-only directory, a file of another user, a directory in its place), naming the file.
      - A record that cannot be written later in the run (a full disk) cannot stop the tasks already under way; it
        is a warning, goes to O(fallback_syslog), and is counted in the run's last record.
    type: bool
    default: false
    env:
      - name: LLMSTACK_AUDIT_REQUIRED
    ini:
      - section: callback_audit_log
        key: required
  fallback_syslog:
    description:
      - Where a record that cannot be written to the file goes instead (same forms as O(syslog_address)); the
        local syslog socket by default, which journald reads. Empty to send nothing. Not used when
        O(syslog_address) is set (it receives those records instead).
    type: str
    default: unix:///dev/log
    env:
      - name: LLMSTACK_AUDIT_FALLBACK_SYSLOG
    ini:
      - section: callback_audit_log
        key: fallback_syslog
  syslog_facility:
    description: The syslog facility of the forwarded messages.
    type: str
    default: local0
    choices: [kern, user, mail, daemon, auth, syslog, lpr, news, uucp, cron, authpriv, ftp, ntp, audit, alert, clock,
              local0, local1, local2, local3, local4, local5, local6, local7]
    env:
      - name: LLMSTACK_AUDIT_SYSLOG_FACILITY
    ini:
      - section: callback_audit_log
        key: syslog_facility
"""

import getpass
import os
import socket
import uuid

from ansible import context
from ansible.module_utils.common.text.converters import to_text
from ansible.playbook.handler import Handler
from ansible.plugins.callback import CallbackBase
from ansible.release import __version__ as ansible_version
from ansible_collections.pvegpu.llmstack.plugins.module_utils import audit_log


def _controller_user():
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _strings(value):
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_text(v) for v in value]
    return [to_text(value)] if value else []


class CallbackModule(CallbackBase):
    """Thin: collects the fields from Ansible's objects; sealing, writing and forwarding are in module_utils."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "pvegpu.llmstack.audit_log"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.writer = None
        self.syslog = None
        self.facility = "local0"
        self.record_ok = False
        self.run_id = uuid.uuid4().hex
        self.playbook = None
        self.play = None
        self.awx = {}
        self.lost = 0
        self.warned = set()
        self.base = {}
        self.fallback = None

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super(CallbackModule, self).set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        self.record_ok = self.get_option("record_ok")
        self.writer = audit_log.AuditLogWriter(self.get_option("path"), fsync=self.get_option("fsync"))
        try:
            problem = audit_log.prepare_directory(self.writer.path)
        except audit_log.AuditLogError as err:
            problem = str(err)
        if problem:
            self._warn(problem)
        if self.get_option("required"):
            try:
                self.writer.check_writable()
            except audit_log.AuditLogError as err:
                # Ansible turns an exception of a callback's set_options into a warning and runs on: SystemExit is
                # the one way out here (load_callbacks, in the controller's main process, before any task).
                self._display.error("audit_log: %s; the run stops before its first task because the audit log is "
                                    "required (LLMSTACK_AUDIT_REQUIRED / [callback_audit_log] required)" % err)
                raise SystemExit(1)
        address = self.get_option("syslog_address")
        self.facility = self.get_option("syslog_facility")
        if address:
            try:
                self.syslog = audit_log.SyslogSender(address)
            except audit_log.AuditLogError as err:
                self._warn("audit_log: %s; records stay in %s only" % (err, self.writer.path))
        fallback = self.get_option("fallback_syslog")
        if fallback and self.syslog is None:
            try:
                self.fallback = audit_log.SyslogSender(fallback)
            except audit_log.AuditLogError as err:
                self._warn("audit_log: fallback_syslog: %s" % err)
        self.base = {
            "v": audit_log.FORMAT_VERSION,
            "run": self.run_id,
            "user": _controller_user(),
            "controller": socket.gethostname(),
            "pid": os.getpid(),
            "inventory": [os.path.abspath(p) if os.path.exists(p) else p
                          for p in _strings(context.CLIARGS.get("inventory"))],
            "check_mode": bool(context.CLIARGS.get("check", False)),
        }

    # ---------------------------------------------------------------------------------------------- writing
    def _warn(self, message):
        if message not in self.warned:
            self.warned.add(message)
            self._display.warning(message)

    def _record(self, event, fields, status=None):
        if self.writer is None:
            return
        record = dict(self.base)
        record.update(time=audit_log.utc_now(), event=event, playbook=self.playbook)
        if self.awx:
            record["awx"] = self.awx
        record.update(fields)
        try:
            self.writer.append(record)
        except (audit_log.AuditLogError, ValueError, TypeError) as err:
            self.lost += 1
            self._warn("audit_log: record not written: %s" % err)
            self._fall_back(record, event, status)
            return
        if self.syslog is not None:
            try:
                for line in self.writer.written:
                    last = line is self.writer.written[-1]
                    kind = event if last else audit_log.CHAIN_START
                    self.syslog.send(audit_log.rfc5424(line, self.facility, (status or event) if last else "ok",
                                                       self.base["controller"], self.base["pid"], kind,
                                                       record["time"]))
            except audit_log.AuditLogError as err:
                self._warn("audit_log: %s" % err)

    def _fall_back(self, record, event, status):
        """The record the file did not take, unsealed, to syslog_address (which gets every record) or else to
        fallback_syslog; the chain lives in the file only."""
        sender = self.syslog if self.syslog is not None else self.fallback
        if sender is None:
            return
        try:
            line = audit_log.canonical(dict(record, unsealed=True))
        except (ValueError, TypeError):
            return
        try:
            sender.send(audit_log.rfc5424(line, self.facility, status or event, self.base["controller"],
                                          self.base["pid"], event, record["time"]))
        except audit_log.AuditLogError as err:
            self._warn("audit_log: %s: %s" % ("syslog_address" if sender is self.syslog else "fallback_syslog", err))

    def _task_record(self, result, status, **extra):
        task = result.task
        data = result.result
        if status in ("ok", "skipped") and not self.record_ok:
            return
        role = getattr(task, "_role", None)
        check_mode = task.check_mode if isinstance(task.check_mode, bool) else self.base["check_mode"]
        fields = {
            "host": result.host.get_name(),
            "play": self.play,
            "role": role.get_name() if role else None,
            "task": to_text(task.name or task.action),
            "action": to_text(task.action),
            "handler": isinstance(task, Handler),
            "tags": sorted(_strings(task.tags)),
            "check_mode": check_mode,
        }
        delegated = (data.get("_ansible_delegated_vars") or {}).get("ansible_host")
        if delegated:
            fields["delegated_to"] = to_text(delegated)
        fields.update(audit_log.result_summary(data, status, task_no_log=task.no_log is True))
        fields.update(extra)
        self._record("task", fields, status=status)

    # ---------------------------------------------------------------------------------------------- events
    def v2_playbook_on_start(self, playbook):
        self.playbook = os.path.abspath(to_text(playbook._file_name))

    def v2_playbook_on_play_start(self, play):
        self.play = to_text(play.get_name())
        manager = play.get_variable_manager()
        extra_vars = getattr(manager, "extra_vars", None) or {}
        self.awx = audit_log.awx_metadata(extra_vars, os.environ)
        self._record("play_start", {
            "play": self.play,
            "hosts": _strings(play.hosts),
            "run_tags": sorted(_strings(context.CLIARGS.get("tags"))),
            "skip_tags": sorted(_strings(context.CLIARGS.get("skip_tags"))),
            "limit": to_text(context.CLIARGS.get("subset") or ""),
            "diff_mode": bool(context.CLIARGS.get("diff", False)),
            "ansible_version": ansible_version,
        })

    def v2_runner_on_ok(self, result):
        self._task_record(result, "changed" if result.result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._task_record(result, "failed", ignored=bool(ignore_errors))

    def v2_runner_on_unreachable(self, result):
        self._task_record(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._task_record(result, "skipped")

    def v2_playbook_on_stats(self, stats):
        hosts = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._record("stats", {"play": self.play, "hosts": hosts, "lost_records": self.lost})
        if self.lost:
            self._display.warning("audit_log: %d records of this run could not be written to %s"
                                  % (self.lost, self.writer.path))
        for sender in (self.syslog, self.fallback):
            if sender is not None:
                sender.close()
