"""audit_log: sealing, appending, the verifier's verdict on every kind of tampering, record summaries, syslog.

The files here are written by the real writer; the callback writing them from real ansible-playbook runs is
tested in tests/integration/test_audit_log.py.
"""

import hashlib
import json
import os
import stat
import threading

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import audit_log


def write_log(path, count=6):
    writer = audit_log.AuditLogWriter(str(path))
    for n in range(count):
        writer.append({"v": 1, "event": "task", "host": "vm-%d" % (n % 3), "task": "Task %d — ü" % n,
                       "status": "changed", "run": "r1", "time": "2026-12-03T00:00:%02d.000000Z" % n})
    return path.read_bytes()


def lines_of(data):
    return data.split(b"\n")[:-1]


def test_chain_layout_and_hashes(tmp_path):
    data = write_log(tmp_path / "a.jsonl", 3)
    records = [json.loads(line) for line in lines_of(data)]
    assert len(records) == 4
    assert records[0]["event"] == "chain_start" and records[0]["prev"] is None
    assert len(records[0]["nonce"]) == 64
    for before, record, raw in zip(records[:-1], records[1:], lines_of(data)[1:], strict=True):
        assert record["prev"] == before["hash"]
        body = dict(record)
        body.pop("hash")
        expected = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                             ensure_ascii=False).encode()).hexdigest()
        assert record["hash"] == expected
        assert "ü".encode() in raw  # UTF-8 as is, not \u escapes


def test_new_files_get_their_own_nonce_and_modes(tmp_path):
    first = write_log(tmp_path / "logs" / "one.jsonl", 1)
    second = write_log(tmp_path / "logs" / "two.jsonl", 1)
    assert json.loads(lines_of(first)[0])["nonce"] != json.loads(lines_of(second)[0])["nonce"]
    assert stat.S_IMODE(os.stat(tmp_path / "logs" / "one.jsonl").st_mode) == 0o600


def test_prepare_directory(tmp_path):
    target = tmp_path / "new" / "deeper" / "audit.jsonl"
    assert audit_log.prepare_directory(str(target)) is None
    assert stat.S_IMODE(os.stat(target.parent).st_mode) == 0o700
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    warning = audit_log.prepare_directory(str(open_dir / "audit.jsonl"))
    assert "0755" in warning and str(open_dir) in warning


def test_existing_file_mode_is_tightened(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"")
    path.chmod(0o644)
    write_log(path, 1)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_verify_accepts_an_untouched_log(tmp_path):
    report = audit_log.verify_bytes(write_log(tmp_path / "a.jsonl"))
    assert report["ok"], report
    assert report["lines"] == 7 and report["records"] == 6 and report["valid_lines"] == 7
    assert report["events"] == {"task": 6} and report["statuses"] == {"changed": 6}
    assert report["hosts"] == 3 and report["runs"] == 1
    assert report["last_hash"] == json.loads(lines_of((tmp_path / "a.jsonl").read_bytes())[-1])["hash"]


def test_the_verifier_names_runs_that_lost_records_and_runs_without_their_last_record(tmp_path):
    """A run's stats record counts what it could not write; a run killed has no stats record at all."""
    writer = audit_log.AuditLogWriter(str(tmp_path / "a.jsonl"))
    for run, events, lost in (("r1", ["play_start", "task", "stats"], 0), ("r2", ["play_start", "stats"], 3),
                              ("r3", ["play_start", "task"], None)):
        for n, event in enumerate(events):
            record = {"v": 1, "event": event, "run": run, "time": "2026-12-05T00:00:%02d.000000Z" % n}
            if event == "stats":
                record["lost_records"] = lost
            writer.append(record)
    report = audit_log.verify_file(str(tmp_path / "a.jsonl"))
    assert report["ok"] and report["runs"] == 3
    assert report["lost"] == [{"run": "r2", "time": "2026-12-05T00:00:01.000000Z", "lost_records": 3}]
    assert report["unfinished"] == ["r3"]
    text = audit_log.describe(report)
    assert "NOT SEEN: 3 records of run r2" in text and "without their last record" in text and text.endswith("r3")
    clean = audit_log.verify_bytes(write_log(tmp_path / "b.jsonl"))
    assert clean["lost"] == [] and clean["unfinished"] == ["r1"]  # write_log's run has no stats record


def test_every_single_byte_edit_is_caught_on_its_line(tmp_path):
    data = write_log(tmp_path / "a.jsonl", 4)
    starts = [0]
    for n, byte in enumerate(data):
        if byte == 0x0A:
            starts.append(n + 1)
    for position in range(len(data)):
        edited = bytearray(data)
        edited[position] = edited[position] ^ 0x01
        report = audit_log.verify_bytes(bytes(edited))
        line = max(i for i, start in enumerate(starts, 1) if start <= position)
        assert not report["ok"], "byte %d edited, chain still verifies" % position
        assert report["line"] == line, (position, report)


@pytest.mark.parametrize("edit, reason", [
    (lambda raw: raw.replace(b'"host":"vm-1"', b'"host": "vm-1"'), "canonical"),
    (lambda raw: raw.replace(b'"host":"vm-1"', b'"host":"vm-9"'), "hash does not match"),
    (lambda raw: raw.replace("ü".encode(), b"\\u00fc"), "canonical"),
])
def test_edits_that_keep_valid_json(tmp_path, edit, reason):
    raw = lines_of(write_log(tmp_path / "a.jsonl"))
    raw[2] = edit(raw[2])
    report = audit_log.verify_bytes(b"\n".join(raw) + b"\n")
    assert report["line"] == 3 and reason in report["reason"]
    assert report["valid_lines"] == 2


def test_resealed_edit_still_breaks_the_next_link(tmp_path):
    """Someone edits a record and recomputes its own hash: the next line no longer chains to it."""
    raw = lines_of(write_log(tmp_path / "a.jsonl"))
    record = json.loads(raw[3])
    record["status"] = "ok"
    raw[3] = audit_log.seal(record, record["prev"])[0].rstrip(b"\n")
    report = audit_log.verify_bytes(b"\n".join(raw) + b"\n")
    assert report["line"] == 5 and "missing" in report["reason"]


@pytest.mark.parametrize("deleted", [2, 4, 6])
def test_deleted_line(tmp_path, deleted):
    raw = lines_of(write_log(tmp_path / "a.jsonl"))
    del raw[deleted - 1]
    report = audit_log.verify_bytes(b"\n".join(raw) + b"\n")
    assert report["line"] == deleted
    assert "deleted" in report["reason"]


def test_deleted_chain_start(tmp_path):
    raw = lines_of(write_log(tmp_path / "a.jsonl"))
    report = audit_log.verify_bytes(b"\n".join(raw[1:]) + b"\n")
    assert report["line"] == 1 and "chain start" in report["reason"]


@pytest.mark.parametrize("first", [2, 3, 6])
def test_swapped_lines(tmp_path, first):
    raw = lines_of(write_log(tmp_path / "a.jsonl"))
    raw[first - 1], raw[first] = raw[first], raw[first - 1]
    report = audit_log.verify_bytes(b"\n".join(raw) + b"\n")
    assert report["line"] == first
    assert "reordered" in report["reason"]


def test_line_moved_far_back(tmp_path):
    raw = lines_of(write_log(tmp_path / "a.jsonl"))
    moved = raw.pop(1)
    raw.append(moved)
    report = audit_log.verify_bytes(b"\n".join(raw) + b"\n")
    assert report["line"] == 2 and "reordered" in report["reason"]


@pytest.mark.parametrize("cut", [1, 10, 200])
def test_cut_last_line(tmp_path, cut):
    data = write_log(tmp_path / "a.jsonl")
    report = audit_log.verify_bytes(data[:-cut])
    assert report["line"] == 7 and "cut off" in report["reason"]
    assert report["valid_lines"] == 6


def test_whole_last_line_removed_needs_the_anchor(tmp_path):
    data = write_log(tmp_path / "a.jsonl")
    last = json.loads(lines_of(data)[-1])["hash"]
    shortened = b"\n".join(lines_of(data)[:-1]) + b"\n"
    assert audit_log.verify_bytes(shortened)["ok"]
    report = audit_log.verify_bytes(shortened, anchor=last)
    assert not report["ok"] and "anchor" in report["reason"]
    assert audit_log.verify_bytes(data, anchor=last)["ok"]
    with pytest.raises(ValueError):
        audit_log.verify_bytes(data, anchor="abc")


def test_two_files_joined(tmp_path):
    data = write_log(tmp_path / "a.jsonl", 2) + write_log(tmp_path / "b.jsonl", 2)
    report = audit_log.verify_bytes(data)
    assert report["line"] == 4 and "second chain start" in report["reason"]


def test_empty_file():
    report = audit_log.verify_bytes(b"")
    assert not report["ok"] and report["line"] == 1


def test_writer_refuses_to_extend_a_cut_file(tmp_path):
    path = tmp_path / "a.jsonl"
    data = write_log(path)
    path.write_bytes(data[:-5])
    with pytest.raises(audit_log.AuditLogError, match="complete line"):
        audit_log.AuditLogWriter(str(path)).append({"event": "task"})
    assert path.read_bytes() == data[:-5]
    path.write_bytes(data + b"not json\n")
    with pytest.raises(audit_log.AuditLogError, match="not an audit record"):
        audit_log.AuditLogWriter(str(path)).append({"event": "task"})


def test_long_tail_is_found_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(audit_log, "TAIL_CHUNK", 16)
    data = write_log(tmp_path / "a.jsonl", 3)
    assert audit_log.verify_bytes(data)["ok"]


def test_threads_appending_to_one_file_keep_one_chain(tmp_path):
    path = tmp_path / "a.jsonl"

    def worker(n):
        writer = audit_log.AuditLogWriter(str(path))
        for i in range(50):
            writer.append({"event": "task", "host": "h%d" % n, "seq": i})

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report = audit_log.verify_file(str(path))
    assert report["ok"], report
    assert report["records"] == 200 and report["hosts"] == 4


# ------------------------------------------------------------------------------------------ record fields

def test_result_summary_diff_without_contents():
    result = {"changed": True, "dest": "/etc/app.conf", "diff": [
        {"before_header": "/etc/app.conf", "after_header": "/etc/app.conf",
         "before": "a=1\npassword=old\n", "after": "a=1\npassword=new\nb=2\n"},
        {"before": {"state": "absent", "mode": "0644"}, "after": {"state": "file", "mode": "0644", "owner": "x"}},
    ]}
    summary = audit_log.result_summary(result, "changed")
    assert summary["diff"] == [{"file": "/etc/app.conf", "lines_added": 2, "lines_removed": 1},
                               {"keys": ["owner", "state"]}]
    assert summary["paths"] == ["/etc/app.conf"]
    assert "old" not in json.dumps(summary) and "new" not in json.dumps(summary)


def test_result_summary_censored():
    censored = {"changed": True, "censored": "the output has been hidden", "_ansible_no_log": True}
    assert audit_log.result_summary(censored, "changed") == {"status": "changed", "changed": True, "failed": False,
                                                             "skipped": False, "result": "censored"}
    plain = {"changed": True, "dest": "/x", "diff": {"before": "s3cret", "after": "other"}}
    assert audit_log.result_summary(plain, "changed", task_no_log=True)["result"] == "censored"


def test_result_summary_loops_and_failures():
    result = {"changed": True, "results": [
        {"changed": True, "path": "/a", "diff": {"before": "", "after": "x\n"}},
        {"changed": False, "path": "/b"},
        {"changed": True, "_ansible_no_log": True, "path": "/secret"},
    ]}
    summary = audit_log.result_summary(result, "changed")
    assert summary["items"] == 3 and summary["items_changed"] == 1
    assert summary["paths"] == ["/a", "/b"]
    failed = audit_log.result_summary({"msg": "boom", "failed": True}, "failed")
    assert failed["failed"] and failed["msg"] == "boom"
    with pytest.raises(ValueError):
        audit_log.result_summary({}, "weird")


def test_huge_diff_is_sized_not_compared():
    before = "x\n" * (audit_log.DIFF_MAX_LINES + 1)
    summary = audit_log.diff_summary({"before": before, "after": ""})
    assert summary == [{"bytes_before": len(before), "bytes_after": 0}]


def test_awx_metadata():
    extra = {"awx_job_id": 1234, "tower_job_template_name": "gateway", "awx_user_name": "alice", "other": "x",
             "awx_project_revision": "0f3e2a1", "awx_inventory_name": ""}
    assert audit_log.awx_metadata(extra, {"JOB_ID": "99"}) == {
        "job_id": 1234, "job_template_name": "gateway", "user_name": "alice", "project_revision": "0f3e2a1"}
    assert audit_log.awx_metadata({}, {"JOB_ID": "99"}) == {"job_id": "99"}
    assert audit_log.awx_metadata(None, {}) == {}


# ------------------------------------------------------------------------------------------ syslog

def test_rfc5424_shape():
    line = b'{"event":"task","hash":"ab"}\n'
    message = audit_log.rfc5424(line, "local3", "failed", "ctl host", 4711, "task", "2026-12-03T00:00:00.000001Z")
    header, body = message.split(b" \xef\xbb\xbf", 1)
    assert header == b"<156>1 2026-12-03T00:00:00.000001Z ctlhost llmstack-audit 4711 task -"  # 19*8+4
    assert body == line.rstrip(b"\n")
    assert audit_log.rfc5424(line, "audit", "changed", "", "", "", "t").startswith(b"<109>1 t - llmstack-audit - - -")
    with pytest.raises(ValueError):
        audit_log.rfc5424(line, "local9", "ok", "h", 1, "m", "t")


@pytest.mark.parametrize("address, problem", [
    ("udp://127.0.0.1:514", None), ("tcp://[::1]:601", None), ("unix:///dev/log", None),
    ("127.0.0.1:514", "must be"), ("udp://host:0", "port"), ("unix://dev/log", "absolute"),
    ("tcp://a b:5", "must be"),
])
def test_syslog_addresses(address, problem):
    found = audit_log.check_syslog_address(address)
    assert (found is None) if problem is None else (problem in found)


def test_syslog_sender_udp_and_tcp_framing():
    import socket

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(5)
    sender = audit_log.SyslogSender("udp://127.0.0.1:%d" % udp.getsockname()[1])
    sender.send(b"<134>1 - - x - - - hello")
    assert udp.recv(1000) == b"<134>1 - - x - - - hello"
    sender.close()
    udp.close()

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    sender = audit_log.SyslogSender("tcp://127.0.0.1:%d" % port)
    sender.send(b"first")
    sender.send("zwei ü".encode())
    conn, dummy = server.accept()
    conn.settimeout(5)
    received = b""
    while len(received) < len(b"5 first7 zwei \xc3\xbc"):
        received += conn.recv(100)
    assert received == b"5 first7 zwei \xc3\xbc"
    sender.close()
    conn.close()
    server.close()
    with pytest.raises(audit_log.AuditLogError, match="cannot send"):
        audit_log.SyslogSender("tcp://127.0.0.1:%d" % port).send(b"x")
