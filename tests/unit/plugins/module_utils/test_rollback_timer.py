"""module_utils.rollback_timer: the way back that runs by itself unless confirmed (network_policy's nftables table,
pve_bridge's bridges). The detached-process path runs for real here (setsid, sh, sleep); the systemd path is checked
on the systemd-run command line it builds, with a recording double for run_command (no systemd in this test's
process tree) - tests/integration/test_guest_image.py runs it under the guest's systemd."""

import os
import shutil
import subprocess
import time

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import rollback_timer


class Failed(Exception):
    pass


class Module(object):
    """What rollback_timer uses of an AnsibleModule; commands really run unless ``record`` is set."""

    def __init__(self, record=False, path=None):
        self.calls = []
        self.record = record
        self.path = path

    def get_bin_path(self, name, required=False):
        path = shutil.which(name, path=self.path) or ("/usr/bin/" + name if self.record else None)
        if required and not path:
            raise Failed("missing " + name)
        return path

    def run_command(self, argv):
        self.calls.append(list(argv))
        if self.record:
            return 0, "inactive\n" if "is-active" in argv else "", ""
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        return result.returncode, result.stdout, result.stderr

    def fail_json(self, **kwargs):
        raise Failed(kwargs["msg"])


def wait_for(path, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.1)
    return os.path.exists(path)


@pytest.fixture
def detached(monkeypatch):
    monkeypatch.setattr(rollback_timer, "systemd_running", lambda: False)


def test_an_unconfirmed_rollback_runs_its_command(tmp_path, detached):
    timer = rollback_timer.Timer(str(tmp_path / "state"), "llmstack-test-rollback", prefix="test-")
    marker = tmp_path / "rolled back"
    rollback_timer.arm(Module(), timer, 1, ["/bin/sh", "-c", "echo back > '%s'" % marker], "test")
    assert os.path.exists(timer.pid_file) and timer.pid_file.endswith("test-rollback.pid")
    assert wait_for(str(marker), 15), "the rollback did not run"
    assert marker.read_text() == "back\n"
    assert wait_for_gone(timer.pid_file, 5)


def wait_for_gone(path, seconds):
    deadline = time.monotonic() + seconds
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not os.path.exists(path)


def test_a_confirmed_rollback_never_runs(tmp_path, detached):
    timer = rollback_timer.Timer(str(tmp_path / "state"), "llmstack-test-rollback")
    marker = tmp_path / "rolled back"
    module = Module()
    rollback_timer.arm(module, timer, 2, ["/bin/sh", "-c", "echo back > '%s'" % marker], "test")
    assert rollback_timer.cancel(module, timer) is True
    assert not wait_for(str(marker), 4), "a cancelled rollback ran"
    assert rollback_timer.cancel(module, timer) is False       # nothing pending any more


@pytest.fixture
def slow_host(tmp_path):
    """A PATH on which every program the detached path may start (sh, setsid) begins its work only 7 s after it was
    started, as on a host loaded by everything else a run does (the lab beside a busy CI: its rollback process was
    not there after the 5 s the old code waited, and the run failed). A double of the host's speed, the real programs
    underneath."""
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    for name in ("sh", "setsid"):
        real = shutil.which(name)
        if name == "setsid":  # setsid --fork returns at once; the process it forks starts late
            body = '( sleep 7; exec %s "$@" ) </dev/null >/dev/null 2>&1 &\n' % real
        else:
            body = 'sleep 7\nexec %s "$@"\n' % real
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return "%s:%s" % (bin_dir, os.environ.get("PATH", "/usr/bin:/bin"))


def test_a_process_that_starts_late_still_runs_and_a_confirmation_meanwhile_still_stops_it(
        tmp_path, detached, slow_host):
    module = Module(path=slow_host)
    late = rollback_timer.Timer(str(tmp_path / "state"), "llmstack-test-rollback", prefix="late-")
    marker = tmp_path / "rolled back"
    started = time.monotonic()
    rollback_timer.arm(module, late, 1, ["/bin/sh", "-c", "echo back > '%s'" % marker], "test")
    assert time.monotonic() - started < 5, "arm waited for the process to start"
    assert os.path.exists(late.pid_file)
    assert wait_for(str(marker), 30), "the rollback did not run"
    assert wait_for_gone(late.pid_file, 5)

    confirmed = rollback_timer.Timer(str(tmp_path / "state"), "llmstack-test-rollback", prefix="confirmed-")
    kept = tmp_path / "confirmed"
    rollback_timer.arm(module, confirmed, 1, ["/bin/sh", "-c", "echo back > '%s'" % kept], "test")
    assert rollback_timer.cancel(module, confirmed) is True   # before the process even began
    assert not wait_for(str(kept), 12), "a rollback confirmed before its process began ran anyway"


def test_under_systemd_it_is_a_transient_timer_and_cancel_stops_it(tmp_path, monkeypatch):
    monkeypatch.setattr(rollback_timer, "systemd_running", lambda: True)
    timer = rollback_timer.Timer(str(tmp_path / "state"), "llmstack-bridge-rollback", prefix="pve_bridge-")
    module = Module(record=True)
    rollback_timer.arm(module, timer, 120, ["/bin/sh", "-c", "cp a b && ifreload -a"], "put it back")
    run = [call for call in module.calls if call[0].endswith("systemd-run")]
    assert run == [[run[0][0], "--unit", "llmstack-bridge-rollback", "--on-active", "120s", "--timer-property",
                    "AccuracySec=1s", "--description", "put it back", "/bin/sh", "-c", "cp a b && ifreload -a"]]
    with open(timer.unit_file) as handle:
        assert handle.read() == "llmstack-bridge-rollback\n"
    module.calls = []
    rollback_timer.cancel(module, timer)
    assert [call[1:] for call in module.calls] == [
        ["is-active", "llmstack-bridge-rollback.timer"], ["stop", "llmstack-bridge-rollback.timer"],
        ["reset-failed", "llmstack-bridge-rollback.timer", "llmstack-bridge-rollback.service"]]
    assert not os.path.exists(timer.unit_file)


def recorded(tmp_path, pid):
    """A rollback record naming ``pid``, written as arm() writes it."""
    timer = rollback_timer.Timer(str(tmp_path / "state"), "llmstack-test-rollback", prefix="test-")
    os.makedirs(timer.state_dir, exist_ok=True)
    with open(timer.pid_file, "w") as handle:
        handle.write("%d\n" % pid)
    return timer


def state(pid):
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


def test_a_pid_file_left_by_a_reboot_never_signals_the_process_that_has_its_pid_now(tmp_path, detached):
    """A reboot within the window leaves the pid file (the shell's own rm never ran); after it, that pid can be any
    process group's. A confirmation must not SIGTERM it: here a real process in its own session stands for whatever
    got the pid."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        timer = recorded(tmp_path, other.pid)
        assert rollback_timer.cancel(Module(), timer) is False  # nothing was pending
        time.sleep(0.2)
        assert other.poll() is None, "the unrelated process was signalled"
        assert not os.path.exists(timer.pid_file)  # the stale record is gone
    finally:
        other.kill()
        other.wait()


def test_a_rollback_that_ran_and_was_never_reaped_is_not_pending(tmp_path, detached, monkeypatch):
    """A container whose init does not reap (sleep infinity) keeps the finished rollback shell as a zombie: its pid is
    still there, its command line empty for good - not a pending rollback, and not waited for as an exec in progress."""
    done = subprocess.Popen(["sh", "-c", "exit 0"])  # never waited for here: a zombie
    try:
        deadline = time.monotonic() + 10
        while state(done.pid) != "Z":
            assert time.monotonic() < deadline, "the shell did not end"
            time.sleep(0.05)
        timer = recorded(tmp_path, done.pid)

        def no_wait(_seconds):
            raise AssertionError("cancel waited for a zombie's command line")

        monkeypatch.setattr(rollback_timer.time, "sleep", no_wait)
        assert rollback_timer.cancel(Module(), timer) is False
    finally:
        monkeypatch.undo()
        done.wait()


def test_without_proc_the_recorded_group_is_still_signalled(tmp_path, detached, monkeypatch):
    """No /proc to tell whose pid it is: the rollback is stopped as before (left running, it would put back what the
    run has just confirmed, with nothing left to cancel it)."""
    monkeypatch.setattr(rollback_timer, "PROC", str(tmp_path / "no-proc"))
    pending = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert rollback_timer.cancel(Module(), recorded(tmp_path, pending.pid)) is True
        assert pending.wait(timeout=10) == -15  # SIGTERM
    finally:
        if pending.poll() is None:
            pending.kill()
            pending.wait()
