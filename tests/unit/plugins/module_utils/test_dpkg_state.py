"""module_utils.dpkg_state: what a killed dpkg leaves (its journal), `dpkg --audit`'s list, and dpkg's locks - held
for real by another process here (fcntl locks are per process, as dpkg and apt take them)."""

import os
import subprocess
import sys

from ansible_collections.pvegpu.llmstack.plugins.module_utils import dpkg_state

# `dpkg --audit` on a host where a killed dpkg left one package half-configured and one unpacked (Debian 13's dpkg
# 1.22 wording).
AUDIT = """The following packages are only half configured, probably due to problems
configuring them the first time.  The configuration should be retried using
dpkg --configure <package> or the configure menu option in dselect:
 llmstack-slow-postinst a package whose postinst waits

The following packages have been unpacked but not yet configured.
They must be configured using dpkg --configure or the configure
menu option in dselect for them to work:
 nftables             Program to control packet filtering rules by Netfilter project
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


def test_the_audit_lists_each_package_once_and_nothing_when_all_is_installed():
    assert dpkg_state.audit_packages(AUDIT) == ["llmstack-slow-postinst", "nftables"]
    assert dpkg_state.audit_packages("") == []


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
