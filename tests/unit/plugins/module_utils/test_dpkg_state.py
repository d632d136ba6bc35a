"""module_utils.dpkg_state: what a killed dpkg leaves (its journal), `dpkg --audit`'s list, and dpkg's locks - held
for real by another process here (fcntl locks are per process, as dpkg and apt take them)."""

import os
import subprocess
import sys

from ansible_collections.pvegpu.llmstack.plugins.module_utils import dpkg_state

# dpkg-query -W -f "${db:Status-Status} ${binary:Package}\n" on a host where a killed dpkg left one package
# half-configured, one unpacked, one half-installed and one awaiting triggers; the rest installed or removed with
# their config files kept.
STATES = """installed adduser
half-configured llmstack-slow-postinst
unpacked nftables:amd64
half-installed nginx-common
triggers-pending man-db:amd64
config-files old-tool
installed zstd
"""


def test_the_journal_is_the_digit_named_files_of_updates_and_none_without_the_directory(tmp_path):
    assert dpkg_state.journal(str(tmp_path)) == []
    updates = tmp_path / "updates"
    updates.mkdir()
    assert dpkg_state.journal(str(tmp_path)) == []
    (updates / "tmp.i").write_text("")          # dpkg's file being written: not a journal entry apt counts
    (updates / "0001").write_text("Package: a\n")
    (updates / "0000").write_text("Package: b\n")
    assert dpkg_state.journal(str(tmp_path)) == ["0000", "0001"]


def test_states_configure_finishes_are_told_from_the_one_only_a_reinstall_fixes():
    assert dpkg_state.unfinished(STATES) == (["llmstack-slow-postinst", "nftables:amd64", "man-db:amd64"],
                                             ["nginx-common"])
    assert dpkg_state.unfinished("installed adduser\nconfig-files old-tool\n") == ([], [])
    assert dpkg_state.unfinished("") == ([], [])


def test_a_journal_entry_is_ascii_digits_only(tmp_path):
    (tmp_path / "updates").mkdir()
    (tmp_path / "updates" / "\u0663\u0663").write_text("")   # Arabic-Indic digits: str.isdigit() says yes, apt no
    assert dpkg_state.journal(str(tmp_path)) == []


HOLD = """
import fcntl, os, sys, time
handle = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(handle, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_lock_another_process_holds_is_named_and_a_free_one_is_left_free(tmp_path):
    for name in dpkg_state.LOCKS:
        (tmp_path / name).write_text("")
    assert dpkg_state.lock_holder(str(tmp_path)) is None
    assert dpkg_state.lock_holder(str(tmp_path)) is None      # testing it did not keep it
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert dpkg_state.lock_holder(str(tmp_path)) == os.path.join(str(tmp_path), "lock")
        ticks = []      # a clock that moves only when it sleeps

        def clock():
            return sum(ticks)

        assert dpkg_state.wait_for_locks(str(tmp_path), 5, sleep=ticks.append, clock=clock) == os.path.join(
            str(tmp_path), "lock")
        assert len(ticks) == 5                                  # it waited, one second at a time, then gave up
    finally:
        holder.kill()
        holder.wait()
    assert dpkg_state.wait_for_locks(str(tmp_path), 5, sleep=ticks.append) is None


def test_no_lock_files_means_no_package_manager_runs(tmp_path):
    assert dpkg_state.lock_holder(str(tmp_path / "nothing")) is None
