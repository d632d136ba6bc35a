# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit log: a hash-chained JSON-lines file, its writer, its verifier and RFC 5424 forwarding.

Plain Python (standard library only, no Ansible imports): the ``audit_log`` callback writes through it, the
``audit_log_verify`` module and the command line (``tools/audit_log_verify.py FILE``) read through it.

The format (version 1), one JSON object per line, UTF-8, in canonical form (keys sorted, no spaces,
``ensure_ascii=False``)::

    line 1   {"event":"chain_start","hash":H1,"nonce":<64 hex, random per file>,"prev":null,"time":...,"v":1}
    line n   {...the record...,"hash":Hn,"prev":H(n-1)}

``hash`` is the SHA-256 (hex) of the line's canonical JSON without ``hash``; ``prev`` is the previous line's
``hash``, so every record is bound to all the records before it and to the file's random nonce. The
verifier checks that each line is exactly the canonical form of what it parses to (so no byte can change
unnoticed, whitespace included), that its hash matches, and that it chains to the line before it.

What a chain cannot show by itself: the removal of whole lines at the end of the file (the remaining
chain is valid). Forward the records off the controller (syslog) and pass the last hash seen there as
``anchor`` to the verifier. Whoever can rewrite the whole file can also recompute every hash; the anchor
is what makes that visible too.

Appends are atomic between processes: the file is opened with ``O_APPEND``, an exclusive ``flock`` is
held while the last line is read and the new one written, and each line is one ``write``. The file is
created 0600, a missing directory 0700.
"""

import datetime
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import socket
import stat

FORMAT_VERSION = 1
CHAIN_START = "chain_start"
HASH_RE = re.compile(r"^[0-9a-f]{64}$")
# How much of the end of the file is read to find the last line; a record is far smaller.
TAIL_CHUNK = 65536
# Diffs longer than this (lines, either side) are summarised by their sizes only.
DIFF_MAX_LINES = 20000
# At most this many items/paths of one result are listed.
LIST_MAX = 100
STATUSES = ("ok", "changed", "failed", "skipped", "unreachable")

SYSLOG_FACILITIES = {
    "kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6, "news": 7, "uucp": 8,
    "cron": 9, "authpriv": 10, "ftp": 11, "ntp": 12, "audit": 13, "alert": 14, "clock": 15,
    "local0": 16, "local1": 17, "local2": 18, "local3": 19, "local4": 20, "local5": 21, "local6": 22, "local7": 23,
}
# RFC 5424 severities by record status: failures are warnings, changes notices, the rest informational.
SYSLOG_SEVERITY = {"failed": 4, "unreachable": 4, "changed": 5}
SYSLOG_APP_NAME = "llmstack-audit"
SYSLOG_ADDRESS_RE = re.compile(r"^(udp|tcp)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")


class AuditLogError(Exception):
    """The audit log cannot be written or read (the message says which file and why)."""


def utc_now():
    """ISO 8601, UTC, microseconds: 2026-12-03T10:15:02.123456Z."""
    # datetime.timezone.utc, not datetime.UTC: the verify module runs on targets with Python older than 3.11.
    now = datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017
    return now.isoformat(timespec="microseconds").replace("+00:00", "Z")


def canonical(record):
    """The canonical JSON bytes of a record: sorted keys, no whitespace, UTF-8, no NaN."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def record_hash(record):
    """SHA-256 (hex) of the record's canonical JSON without its ``hash`` key."""
    body = dict(record)
    body.pop("hash", None)
    return hashlib.sha256(canonical(body)).hexdigest()


def seal(record, prev):
    """(line bytes, hash): the record chained to ``prev`` and sealed with its own hash."""
    body = dict(record)
    body.pop("hash", None)
    body["prev"] = prev
    body["hash"] = record_hash(body)
    return canonical(body) + b"\n", body["hash"]


def chain_start_record(time=None, nonce=None):
    """The first line of every file: a random nonce the whole chain hangs from."""
    return {"v": FORMAT_VERSION, "event": CHAIN_START, "time": time or utc_now(),
            "nonce": nonce or secrets.token_hex(32)}


# ------------------------------------------------------------------------------------------------ writing

def _read_last_line(fd, size):
    """The last complete line of an open file of ``size`` bytes (without its newline)."""
    end = size
    data = b""
    while True:
        start = max(0, end - TAIL_CHUNK)
        data = os.pread(fd, end - start, start) + data
        end = start
        if not data.endswith(b"\n"):
            return None
        cut = data.rfind(b"\n", 0, len(data) - 1)
        if cut >= 0:
            return data[cut + 1:-1]
        if start == 0:
            return data[:-1]


def last_hash(fd, size, path="the audit log"):
    """The ``hash`` of the last line of an open audit log; AuditLogError if the chain cannot be extended."""
    line = _read_last_line(fd, size)
    if line is None:
        raise AuditLogError("%s does not end with a complete line (cut off?): the chain cannot be extended; "
                            "check it with audit_log_verify and move it aside" % path)
    try:
        value = json.loads(line.decode("utf-8")).get("hash")
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, str) or not HASH_RE.match(value):
        raise AuditLogError("the last line of %s is not an audit record with a hash: the chain cannot be extended; "
                            "check it with audit_log_verify and move it aside" % path)
    return value


def prepare_directory(path):
    """Create the log's directory 0700 when missing; a warning (str) when an existing one is open to others."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        try:
            os.makedirs(directory, mode=0o700)
        except OSError as err:
            if err.errno != errno.EEXIST:
                raise AuditLogError("cannot create the audit log directory %s: %s" % (directory, err.strerror))
        return None
    mode = stat.S_IMODE(os.stat(directory).st_mode)
    if mode & 0o077 and not mode & stat.S_ISVTX:
        return ("the audit log directory %s has mode %04o: others can list or replace the log; make it 0700"
                % (directory, mode))
    return None


class AuditLogWriter:
    """Appends sealed records to one file; safe with other writers (processes) on the same file."""

    def __init__(self, path, fsync=False):
        self.path = os.path.abspath(os.path.expanduser(path))
        self.fsync = fsync
        self.last_hash = None
        # The lines the last append wrote: the record, preceded by the chain start when it began the file.
        self.written = []

    def _open(self):
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            try:
                fd = os.open(self.path, flags, 0o600)
            except FileNotFoundError:
                prepare_directory(self.path)
                fd = os.open(self.path, flags, 0o600)
        except OSError as err:
            raise AuditLogError("cannot open the audit log %s: %s" % (self.path, err.strerror))
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise AuditLogError("the audit log %s is not a regular file" % self.path)
            if stat.S_IMODE(info.st_mode) != 0o600 and info.st_uid == os.geteuid():
                os.fchmod(fd, 0o600)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _write(self, fd, line):
        written = os.write(fd, line)
        if written != len(line):
            raise AuditLogError("short write to the audit log %s (%d of %d bytes): disk full?"
                                % (self.path, written, len(line)))

    def check_writable(self):
        """AuditLogError naming the file when it cannot be opened for appending (creating it, and its directory, when
        missing - it is empty then, and the first record starts its chain)."""
        os.close(self._open())

    def append(self, record):
        """Seal ``record`` onto the end of the chain; returns its hash. Starts the chain in an empty file."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            written = []
            if size == 0:
                line, prev = seal(chain_start_record(), None)
                self._write(fd, line)
                written.append(line)
            else:
                prev = last_hash(fd, size, self.path)
            line, digest = seal(record, prev)
            self._write(fd, line)
            written.append(line)
            if self.fsync:
                os.fsync(fd)
        except OSError as err:
            raise AuditLogError("cannot write the audit log %s: %s" % (self.path, err.strerror))
        finally:
            os.close(fd)
        self.last_hash, self.written = digest, written
        return digest


# ------------------------------------------------------------------------------------------------ records

def _count_line_changes(before, after):
    """(added, removed) lines between two texts; sizes only when either side is very long."""
    import difflib

    old, new = before.splitlines(), after.splitlines()
    if len(old) > DIFF_MAX_LINES or len(new) > DIFF_MAX_LINES:
        return None, None
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def _diff_item(item):
    """What one diff says changed, never the contents: the file (header), line counts or the changed keys."""
    if not isinstance(item, dict):
        return None
    summary = {}
    header = item.get("after_header") or item.get("before_header")
    if isinstance(header, str) and header:
        summary["file"] = header[:512]
    before, after = item.get("before"), item.get("after")
    if isinstance(before, dict) or isinstance(after, dict):
        before = before if isinstance(before, dict) else {}
        after = after if isinstance(after, dict) else {}
        keys = sorted(str(k) for k in set(before) | set(after) if before.get(k, ...) != after.get(k, ...))
        summary["keys"] = keys[:LIST_MAX]
    elif isinstance(before, str) or isinstance(after, str):
        before = before if isinstance(before, str) else ""
        after = after if isinstance(after, str) else ""
        added, removed = _count_line_changes(before, after)
        if added is None:
            summary["bytes_before"], summary["bytes_after"] = len(before), len(after)
        else:
            summary["lines_added"], summary["lines_removed"] = added, removed
    if isinstance(item.get("prepared"), str):
        summary["prepared_lines"] = len(item["prepared"].splitlines())
    return summary or None


def diff_summary(diff):
    """A result's ``diff`` (one dict or a list) as a list of summaries without any content."""
    items = diff if isinstance(diff, list) else [diff]
    out = [s for s in (_diff_item(item) for item in items) if s]
    return out[:LIST_MAX]


def _paths(result):
    found = []
    for key in ("dest", "path"):
        value = result.get(key)
        if isinstance(value, str) and value:
            found.append(value[:512])
    return found


def is_censored(result, task_no_log=False):
    return bool(task_no_log or result.get("_ansible_no_log") or "censored" in result)


def result_summary(result, status, task_no_log=False):
    """The audit fields of one task result: status flags, and (unless no_log) diff summary and paths.

    ``result`` is the result dictionary a callback receives; for a ``no_log`` result only ``"censored"`` is
    recorded: no diff, no path, no message.
    """
    if status not in STATUSES:
        raise ValueError("status must be one of %s" % ", ".join(STATUSES))
    out = {"status": status, "changed": bool(result.get("changed")), "failed": status in ("failed", "unreachable"),
           "skipped": status == "skipped"}
    if is_censored(result, task_no_log):
        out["result"] = "censored"
        return out
    diffs, paths, changed_items, items = [], [], 0, 0
    loop = result.get("results")
    parts = loop if isinstance(loop, list) else [result]
    for part in parts:
        if not isinstance(part, dict):
            continue
        items += 1
        if is_censored(part):
            continue
        if part.get("changed"):
            changed_items += 1
        if "diff" in part:
            diffs.extend(diff_summary(part["diff"]))
        paths.extend(p for p in _paths(part) if p not in paths)
    if isinstance(loop, list):
        out["items"] = items
        out["items_changed"] = changed_items
    if diffs:
        out["diff"] = diffs[:LIST_MAX]
    if paths:
        out["paths"] = paths[:LIST_MAX]
    if status in ("failed", "unreachable") and isinstance(result.get("msg"), str):
        out["msg"] = result["msg"][:1024]
    return out


AWX_FIELDS = ("job_id", "job_template_name", "user_name", "inventory_name", "project_revision", "job_launch_type",
              "workflow_job_id", "user_email")


def awx_metadata(extra_vars, environ):
    """AWX / Tower job metadata from the extra vars AWX passes (``awx_*``, ``tower_*``) and ``JOB_ID``."""
    out = {}
    extra_vars = extra_vars or {}
    for field in AWX_FIELDS:
        for prefix in ("awx_", "tower_"):
            value = extra_vars.get(prefix + field)
            if value not in (None, ""):
                out[field] = value if isinstance(value, (int, float, bool)) else str(value)[:512]
                break
    job_id = environ.get("JOB_ID")
    if job_id and "job_id" not in out:
        out["job_id"] = job_id
    return out


# ------------------------------------------------------------------------------------------------ verifying

def _reason_for_link(index, prev, hashes):
    """Why line ``index`` (1-based) does not chain to the line before it."""
    later = [n for n, h in enumerate(hashes, 1) if h == prev and n > index]
    earlier = [n for n, h in enumerate(hashes, 1) if h == prev and n < index - 1]
    if later:
        return "it chains to line %d, which comes after it (lines reordered)" % later[0]
    if earlier:
        return ("it chains to line %d, not to line %d (lines reordered, or lines %d-%d inserted)"
                % (earlier[-1], index - 1, earlier[-1] + 1, index - 1))
    return "the line it chains to is missing (a line before it was deleted)"


def verify_bytes(data, anchor=None):
    """Walk the chain in ``data``; a report dict. ``ok`` is False at the first broken link (``line``, ``reason``).

    Counts: ``lines`` (all lines), ``records`` (lines after the chain start), ``valid_lines`` (lines before the
    first broken one), ``events`` (records per event), ``statuses`` (task records per status), ``hosts``,
    ``runs``; ``nonce``, ``first_time``, ``last_time``, ``last_hash`` of the valid part. What the file cannot show:
    ``lost`` (runs whose last record counts records that were not written: ``{run, time, lost_records}``) and
    ``unfinished`` (runs without their last record: killed, still running, or that record lost).
    """
    report = {"ok": True, "line": None, "reason": None, "lines": 0, "records": 0, "valid_lines": 0, "events": {},
              "statuses": {}, "hosts": 0, "runs": 0, "nonce": None, "first_time": None, "last_time": None,
              "last_hash": None, "lost": [], "unfinished": []}
    if anchor is not None and not HASH_RE.match(str(anchor)):
        raise ValueError("anchor must be a SHA-256 hash: 64 lowercase hex characters")
    if not data:
        report.update(ok=False, line=1, reason="the file is empty: no chain start line")
        return report
    complete = data.endswith(b"\n")
    raw_lines = data.split(b"\n")
    if complete:
        raw_lines.pop()
    report["lines"] = len(raw_lines)
    report["records"] = max(0, len(raw_lines) - 1)
    # The hash each line claims (for telling a reorder from a deletion); None where it has none.
    claimed = []
    for raw in raw_lines:
        try:
            value = json.loads(raw.decode("utf-8")).get("hash")
        except (ValueError, AttributeError):
            value = None
        claimed.append(value if isinstance(value, str) else None)

    hosts, runs, prev_hash = set(), set(), None
    run_order, finished = [], set()
    for index, raw in enumerate(raw_lines, 1):
        last_cut = not complete and index == len(raw_lines)
        reason = None
        try:
            record = json.loads(raw.decode("utf-8"))
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except ValueError:
            record = None
            reason = ("the last line is cut off (truncated: the file does not end with a newline)" if last_cut
                      else "it is not a JSON record (edited)")
        if reason is None and last_cut:
            reason = "the last line is cut off (truncated: the file does not end with a newline)"
        if reason is None and canonical(record) != raw:
            reason = "it is not in canonical form (edited)"
        if reason is None and record.get("hash") != record_hash(record):
            reason = "its hash does not match its content (edited)"
        if reason is None and index == 1:
            if record.get("event") != CHAIN_START:
                reason = "the file does not begin with its chain start line (first line deleted or replaced)"
            elif record.get("prev") is not None or not HASH_RE.match(str(record.get("nonce", ""))):
                reason = "the chain start line has no valid nonce"
        elif reason is None:
            if record.get("event") == CHAIN_START:
                reason = "a second chain start (another file appended to this one?)"
            elif record.get("prev") != prev_hash:
                reason = _reason_for_link(index, record.get("prev"), claimed)
        if reason is not None:
            report.update(ok=False, line=index, reason=reason)
            break
        prev_hash = record["hash"]
        report["valid_lines"] = index
        report["last_hash"] = prev_hash
        if index == 1:
            report["nonce"] = record["nonce"]
            continue
        event = str(record.get("event"))
        report["events"][event] = report["events"].get(event, 0) + 1
        if event == "task":
            status = str(record.get("status"))
            report["statuses"][status] = report["statuses"].get(status, 0) + 1
        if record.get("host"):
            hosts.add(str(record["host"]))
        if record.get("run"):
            run = str(record["run"])
            if run not in runs:
                run_order.append(run)
            runs.add(run)
            if event == "stats":
                finished.add(run)
                lost = record.get("lost_records")
                if isinstance(lost, int) and lost > 0:
                    report["lost"].append({"run": run, "time": record.get("time"), "lost_records": lost})
        report["first_time"] = report["first_time"] or record.get("time")
        report["last_time"] = record.get("time")
    report["hosts"], report["runs"] = len(hosts), len(runs)
    report["unfinished"] = [run for run in run_order if run not in finished]
    if report["ok"] and anchor is not None and anchor not in claimed:
        report.update(ok=False, line=None,
                      reason="the anchor %s is not in the chain (lines after it deleted, or another file)" % anchor)
    return report


def verify_file(path, anchor=None):
    """verify_bytes on a file; AuditLogError when it cannot be read."""
    try:
        with open(os.path.expanduser(path), "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise AuditLogError("cannot read the audit log %s: %s" % (path, err.strerror))
    report = verify_bytes(data, anchor=anchor)
    report["path"] = os.path.abspath(os.path.expanduser(path))
    return report


def describe(report):
    """One line for people: OK with counts, or BROKEN with the line and the reason."""
    if report["ok"]:
        text = ("OK: %d records (%s) from %d runs on %d hosts, %s .. %s; last hash %s"
                % (report["records"], ", ".join("%s %d" % kv for kv in sorted(report["events"].items())) or "none",
                   report["runs"], report["hosts"], report["first_time"], report["last_time"], report["last_hash"]))
        for lost in report.get("lost", []):
            text += ("; NOT SEEN: %d records of run %s (%s) were not written here (its syslog receiver or "
                     "fallback_syslog may hold them)" % (lost["lost_records"], lost["run"], lost["time"]))
        if report.get("unfinished"):
            text += ("; runs without their last record (killed, still running, or it was lost): %s"
                     % ", ".join(report["unfinished"]))
        return text
    where = "line %d: " % report["line"] if report["line"] else ""
    return "BROKEN: %s%s (%d lines before it verify)" % (where, report["reason"], report["valid_lines"])


# ------------------------------------------------------------------------------------------------ syslog

def check_syslog_address(address):
    """None if ``address`` is udp://host:port, tcp://host:port or unix:///path; else what is wrong."""
    if address.startswith("unix://"):
        return None if address[len("unix://"):].startswith("/") else "unix:// needs an absolute path"
    match = SYSLOG_ADDRESS_RE.match(address)
    if not match:
        return "must be udp://HOST:PORT, tcp://HOST:PORT or unix:///PATH"
    if not 0 < int(match.group(3)) < 65536:
        return "the port must be 1-65535"
    return None


def _field(value, limit):
    """An RFC 5424 header field: printable US-ASCII without spaces, or the nil value."""
    text = "".join(ch for ch in str(value or "") if 33 <= ord(ch) <= 126)[:limit]
    return text or "-"


def rfc5424(record_line, facility, status, hostname, procid, msgid, timestamp):
    """One RFC 5424 message (bytes) carrying ``record_line`` (the sealed JSON line, without newline) as MSG."""
    if facility not in SYSLOG_FACILITIES:
        raise ValueError("facility must be one of %s" % ", ".join(sorted(SYSLOG_FACILITIES)))
    pri = SYSLOG_FACILITIES[facility] * 8 + SYSLOG_SEVERITY.get(status, 6)
    fields = (pri, _field(timestamp, 64), _field(hostname, 255), SYSLOG_APP_NAME, _field(procid, 128),
              _field(msgid, 32))
    header = "<%d>1 %s %s %s %s %s -" % fields
    return header.encode("ascii") + b" \xef\xbb\xbf" + record_line.rstrip(b"\n")


class SyslogSender:
    """Sends messages to one syslog receiver: UDP datagrams, TCP with octet counting (RFC 6587), or a unix
    datagram socket such as /dev/log. Reconnects on the next message after a failure."""

    def __init__(self, address, timeout=5.0):
        problem = check_syslog_address(address)
        if problem:
            raise AuditLogError("syslog address %r %s" % (address, problem))
        self.address = address
        self.timeout = timeout
        self.sock = None

    def _connect(self):
        if self.address.startswith("unix://"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.settimeout(self.timeout)
            sock.connect(self.address[len("unix://"):])
            return sock
        scheme, host, port = SYSLOG_ADDRESS_RE.match(self.address).groups()
        host = host.strip("[]")
        kind = socket.SOCK_DGRAM if scheme == "udp" else socket.SOCK_STREAM
        family, socktype, proto, dummy, sockaddr = socket.getaddrinfo(host, int(port), 0, kind)[0]
        sock = socket.socket(family, socktype, proto)
        sock.settimeout(self.timeout)
        sock.connect(sockaddr)
        return sock

    def send(self, message):
        try:
            if self.sock is None:
                self.sock = self._connect()
            if self.address.startswith("tcp://"):
                self.sock.sendall(b"%d " % len(message) + message)
            else:
                self.sock.send(message)
        except OSError as err:
            self.close()
            raise AuditLogError("cannot send to syslog at %s: %s" % (self.address, err))

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
