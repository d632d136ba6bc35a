"""module_utils.pve_guests: `qm list` / `pct list` rows, the guests a reboot would interrupt, their description.

The layouts are PVE's printf formats (PVE::CLI::qm list: "%10s %-20s %-10s %-10s %12.2f %-10s", PVE::CLI::pct
list: "%-10s %-10s %-12s %-20s"), written out here with the cases that break naive splitting: an unnamed VM
("VM 101", a space), an empty PID, a long name, a set Lock column.
"""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_guests

QM = (
    "      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID       \n"
    "       100 gpu-3090             running    131072           64.00 41237     \n"
    "       101 VM 101               stopped    2048              0.00 0         \n"
    "       102 a-very-long-name-for-a-vm-beyond-twenty paused     4096             32.00 5521      \n"
    "       103 template-debian      stopped    2048             16.00           \n"
)
PCT = (
    "VMID       Status     Lock         Name                \n"
    "200        running                 web                 \n"
    "201        stopped    backup       db01                \n"
    "202        running    snapshot-delete cache               \n"
)


def test_qm_list_rows_read_from_both_ends():
    assert pve_guests.parse_qm_list(QM) == [
        {"type": "qemu", "vmid": 100, "name": "gpu-3090", "status": "running"},
        {"type": "qemu", "vmid": 101, "name": "VM 101", "status": "stopped"},
        {"type": "qemu", "vmid": 102, "name": "a-very-long-name-for-a-vm-beyond-twenty", "status": "paused"},
        {"type": "qemu", "vmid": 103, "name": "template-debian", "status": "stopped"},
    ]


def test_pct_list_with_and_without_lock():
    assert pve_guests.parse_pct_list(PCT) == [
        {"type": "lxc", "vmid": 200, "name": "web", "status": "running"},
        {"type": "lxc", "vmid": 201, "name": "db01", "status": "stopped"},
        {"type": "lxc", "vmid": 202, "name": "cache", "status": "running"},
    ]


def test_no_guests_is_a_header_or_nothing():
    assert pve_guests.parse_qm_list("") == []
    assert pve_guests.parse_qm_list("      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID\n") == []
    assert pve_guests.parse_pct_list("VMID       Status     Lock         Name\n") == []


def test_running_guests_named_with_kind_vmid_and_name():
    guests = pve_guests.parse_pct_list(PCT) + pve_guests.parse_qm_list(QM)
    running = pve_guests.not_stopped(guests)
    assert [g["vmid"] for g in running] == [100, 102, 200, 202]
    assert pve_guests.describe(running) == (
        "VM 100 (gpu-3090), VM 102 (a-very-long-name-for-a-vm-beyond-twenty, paused), CT 200 (web), CT 202 (cache)")
    assert pve_guests.describe([]) == ""


@pytest.mark.parametrize("parse,text,needle", [
    (pve_guests.parse_qm_list, "Error: no quorum\n", "no VMID header"),
    (pve_guests.parse_qm_list, "VMID NAME STATUS\n 100 x running\n", "cannot read the row"),
    (pve_guests.parse_pct_list, "VMID Status Lock Name\nweb running\n", "cannot read the row"),
    (pve_guests.parse_pct_list, "VMID Status Lock Name\n200 running a b c\n", "cannot read the row"),
])
def test_unreadable_output_is_refused_not_taken_for_no_guests(parse, text, needle):
    with pytest.raises(pve_guests.PveGuestsError, match=needle):
        parse(text)
