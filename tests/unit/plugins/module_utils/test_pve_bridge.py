"""module_utils.pve_bridge: the VLAN-aware PVE bridge (issue #33 item 3).

The interfaces files are as the PVE installer and PVE's GUI write them (tab-indented options, ``bridge-vids 2-4094``
when "VLAN aware" is ticked); the running state is the JSON of ``ip -d -j link``, ``bridge -j vlan`` and
``ip -j addr`` in the shape iproute2 6 prints it (Debian 12/13)."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import pve_bridge

LAB_VLANS = {"mgmt": {"id": 10, "cidr": "172.30.10.0/24", "bridge": "vmbr0"},
             "inference": {"id": 20, "cidr": "172.30.20.0/24", "bridge": "vmbr0"},
             "apps": {"id": 30, "cidr": "172.30.30.0/24", "bridge": "vmbr0"}}

# What the PVE 8 installer leaves: the management address untagged on vmbr0 over the first NIC.
INSTALLER = """auto lo
iface lo inet loopback

iface eno1 inet manual

auto vmbr0
iface vmbr0 inet static
\taddress 192.168.10.2/24
\tgateway 192.168.10.1
\tbridge-ports eno1
\tbridge-stp off
\tbridge-fd 0

source /etc/network/interfaces.d/*
"""

# The management address on a VLAN interface of the bridge (PVE's documented "VLAN for host management").
TAGGED_MGMT = """auto lo
iface lo inet loopback

iface eno1 inet manual

auto vmbr0.5
iface vmbr0.5 inet static
        address 10.5.0.2/24
        gateway 10.5.0.1

auto vmbr0
iface vmbr0 inet manual
        bridge-ports eno1
        bridge-stp off
        bridge-fd 0
"""


def link(name, kind=None, master=None, parent=None, **data):
    entry = {"ifname": name}
    if master:
        entry["master"] = master
    if parent:
        entry["link"] = parent
    if kind:
        entry["linkinfo"] = {"info_kind": kind, "info_data": data}
    return entry


def runtime(filtering=0, port_vids=(1,), addresses=None, extra_links=()):
    links = [link("lo"), link("eno1", master="vmbr0"), link("vmbr0", "bridge", vlan_filtering=filtering)]
    links += list(extra_links)
    vlans = [{"ifname": "eno1", "vlans": [{"vlan": v} for v in port_vids]}] if filtering else []
    addrs = [{"ifname": name, "addr_info": [{"local": ip}]} for ip, name in (addresses or {}).items()]
    return pve_bridge.runtime_from(links, vlans, addrs)


def mgmt_on(address, rt, connection="ssh"):
    return pve_bridge.management(address, connection, rt)


def test_what_each_bridge_carries_comes_from_llmstack_vlans():
    vlans = dict(LAB_VLANS, storage={"id": 40, "bridge": "vmbr1"}, legacy={"id": 50})
    assert pve_bridge.wanted(vlans) == {"vmbr0": [10, 20, 30, 50], "vmbr1": [40]}


@pytest.mark.parametrize("vlan,message", [({"id": 5000}, "llmstack_vlans).bad.id: 5000 is outside 1-4094"),
                                          ({"id": "x"}, "llmstack_vlans).bad.id: 'x' is not a number"),
                                          ({"cidr": "10.0.0.0/24"}, "llmstack_vlans).bad: no id")])
def test_a_bad_vlan_id_is_named(vlan, message):
    with pytest.raises(pve_bridge.BridgeError) as error:
        pve_bridge.wanted({"bad": vlan})
    assert str(error.value) == "pve_bridge_vlans (default " + message


def test_vid_lists_read_and_written_as_ifupdown2_has_them():
    assert pve_bridge.parse_vids("2-4094")[:2] == [2, 3] and len(pve_bridge.parse_vids("2-4094")) == 4093
    assert pve_bridge.parse_vids("10 20,21  22 30") == [10, 20, 21, 22, 30]
    assert pve_bridge.format_vids([30, 10, 21, 20, 22]) == "10 20-22 30"
    with pytest.raises(pve_bridge.BridgeError, match="'x' is not a VLAN id"):
        pve_bridge.parse_vids("10 x")
    with pytest.raises(pve_bridge.BridgeError, match="'0-5' is outside 1-4094"):
        pve_bridge.parse_vids("0-5")


def test_the_installer_bridge_gets_two_lines_in_its_own_indentation_and_nothing_else_moves():
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    result = pve_bridge.plan(INSTALLER, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    assert result["changed"] and result["reload"]
    assert result["content"] == INSTALLER.replace("\tbridge-fd 0\n",
                                                  "\tbridge-fd 0\n\tbridge-vlan-aware yes\n\tbridge-vids 10 20 30\n")
    assert result["record"] == {"bridges": {"vmbr0": {"bridge-vlan-aware": None, "bridge-vids": None}}}
    assert result["bridges"]["vmbr0"] == {"before": {"vlan_aware": False, "vids": ""},
                                          "after": {"vlan_aware": True, "vids": "10 20 30"}}


def test_a_second_run_changes_nothing_and_reloads_only_when_the_kernel_differs():
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    first = pve_bridge.plan(INSTALLER, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    applied = runtime(filtering=1, port_vids=(1, 10, 20, 30), addresses={"192.168.10.2": "vmbr0"})
    again = pve_bridge.plan(first["content"], LAB_VLANS, first["record"], "present",
                            mgmt_on("192.168.10.2", applied), applied)
    assert not again["changed"] and not again["reload"] and again["mismatches"] == []
    assert again["record"] == first["record"]
    # A run that stopped after writing the file and before ifreload: the file is right, the kernel is not.
    stale = pve_bridge.plan(first["content"], LAB_VLANS, first["record"], "present", mgmt_on("192.168.10.2", rt), rt)
    assert not stale["changed"] and stale["reload"]
    assert stale["mismatches"] == ["vmbr0: vlan_filtering is 0, the file says yes"]
    partial = runtime(filtering=1, port_vids=(1, 10), addresses={"192.168.10.2": "vmbr0"})
    assert pve_bridge.plan(first["content"], LAB_VLANS, first["record"], "present", mgmt_on("192.168.10.2", partial),
                           partial)["mismatches"] == ["vmbr0: port eno1 does not carry VLAN 20 30"]


def test_vids_the_bridge_already_carries_are_kept():
    gui = INSTALLER.replace("\tbridge-fd 0\n", "\tbridge-fd 0\n\tbridge-vlan-aware yes\n\tbridge-vids 2-4094\n")
    rt = runtime(filtering=1, port_vids=range(1, 4095), addresses={"192.168.10.2": "vmbr0"})
    result = pve_bridge.plan(gui, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    assert not result["changed"] and not result["reload"] and result["record"] == {"bridges": {}}
    narrow = INSTALLER.replace("\tbridge-fd 0\n", "\tbridge_vlan_aware yes\n\tbridge-vids 10 99\n\tbridge-fd 0\n")
    result = pve_bridge.plan(narrow, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    # ifupdown2 reads bridge_vlan_aware as bridge-vlan-aware: the line is left as it is written.
    assert result["content"] == narrow.replace("bridge-vids 10 99", "bridge-vids 10 20 30 99")
    # Only the line it changed is recorded, as it was written.
    assert result["record"]["bridges"]["vmbr0"] == {"bridge-vids": "\tbridge-vids 10 99"}


def test_the_revert_puts_back_the_file_as_it_was():
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    for original in (INSTALLER, INSTALLER.replace("\tbridge-fd 0\n", "\tbridge-fd 0\n\tbridge-vids 7\n")):
        applied = pve_bridge.plan(original, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
        assert applied["changed"]
        after = runtime(filtering=1, port_vids=(1, 10, 20, 30), addresses={"192.168.10.2": "vmbr0"})
        reverted = pve_bridge.plan(applied["content"], LAB_VLANS, applied["record"], "absent",
                                   mgmt_on("192.168.10.2", after), after)
        assert reverted["content"] == original and reverted["changed"] and reverted["reload"]
        assert reverted["record"] == {"bridges": {}}
    # Nothing recorded (the bridge was VLAN-aware before the collection came): the revert leaves it so.
    nothing = pve_bridge.plan(INSTALLER, LAB_VLANS, {}, "absent", mgmt_on("192.168.10.2", rt), rt)
    assert not nothing["changed"] and not nothing["reload"]


def test_a_change_that_would_cut_the_controllers_vlan_is_refused():
    rt = runtime(addresses={"10.5.0.2": "vmbr0.5"},
                 extra_links=[link("vmbr0.5", "vlan", parent="vmbr0", protocol="802.1Q", id=5)])
    mgmt = mgmt_on("10.5.0.2", rt)
    location = {"address": "10.5.0.2", "interface": "vmbr0.5", "bridge": "vmbr0", "vid": 5}
    assert mgmt == dict(location, local=False, locations=[location])
    with pytest.raises(pve_bridge.BridgeError) as error:
        pve_bridge.plan(TAGGED_MGMT, LAB_VLANS, {}, "present", mgmt, rt)
    assert "10.5.0.2 on vmbr0.5 (VLAN 5 of vmbr0)" in str(error.value)
    assert "carrying only VLAN 10 20 30" in str(error.value) and "nothing was changed" in str(error.value)
    # With the management VLAN in the inventory the same change goes through, and carries it.
    vlans = dict(LAB_VLANS, hostmgmt={"id": 5, "bridge": "vmbr0"})
    result = pve_bridge.plan(TAGGED_MGMT, vlans, {}, "present", mgmt, rt)
    assert "        bridge-vids 5 10 20 30\n" in result["content"]


def test_an_untagged_address_on_the_bridge_or_one_elsewhere_is_not_in_the_way():
    rt = runtime(addresses={"192.168.10.2": "vmbr0", "10.0.0.2": "eno2"},
                 extra_links=[link("eno2")])
    assert pve_bridge.plan(INSTALLER, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)["changed"]
    assert pve_bridge.plan(INSTALLER, LAB_VLANS, {}, "present", mgmt_on("10.0.0.2", rt), rt)["changed"]


def test_an_address_the_host_does_not_have_is_refused_unless_the_connection_is_local():
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    with pytest.raises(pve_bridge.BridgeError, match="203.0.113.7 is on none of this host's interfaces.*"
                                                     "pve_bridge_management_address"):
        mgmt_on("203.0.113.7", rt)
    with pytest.raises(pve_bridge.BridgeError, match=r"\('pve-a.example'\) is neither an IP address nor a name"):
        mgmt_on("pve-a.example", rt)
    # A name: what the host resolves it to; 127.0.1.1 (Debian's /etc/hosts line for the host's own name) never counts.
    looked_up = {"pve-a.example": ["127.0.1.1", "192.168.10.2"]}
    assert pve_bridge.management("pve-a.example", "ssh", dict(rt, addresses=dict(rt["addresses"], **{
        "127.0.1.1": "lo"})), looked_up.get)["interface"] == "vmbr0"
    assert mgmt_on("llmstack-lab-pve-a", rt, connection="podman_pipelined")["local"]


def test_a_bridge_the_file_does_not_have_is_refused_by_name():
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    vlans = dict(LAB_VLANS, storage={"id": 40, "bridge": "vmbr1"})
    with pytest.raises(pve_bridge.BridgeError, match=r"bridge vmbr1 \(pve_bridge_vlans, default llmstack_vlans: "
                                                     r"storage\) is not in the interfaces file"):
        pve_bridge.plan(INSTALLER, vlans, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    not_a_bridge = INSTALLER + "\nauto vmbr1\niface vmbr1 inet manual\n"
    with pytest.raises(pve_bridge.BridgeError, match="declared without bridge-ports"):
        pve_bridge.plan(not_a_bridge, vlans, {}, "present", mgmt_on("192.168.10.2", rt), rt)


def test_the_options_go_to_the_stanza_with_bridge_ports_when_there_is_an_inet6_one():
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    inet6 = "iface vmbr0 inet6 static\n\taddress fd00::2/64\n\n"
    after = INSTALLER.replace("source", inet6 + "source")
    before = INSTALLER.replace("auto vmbr0\n", "auto vmbr0\n" + inet6)
    for text in (after, before):
        content = pve_bridge.plan(text, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)["content"]
        assert content.count("bridge-vlan-aware") == 1
        assert "\tbridge-fd 0\n\tbridge-vlan-aware yes\n\tbridge-vids 10 20 30\n" in content
        assert inet6 in content


def test_a_file_that_is_already_vlan_aware_is_not_reloaded_when_the_reload_would_cut_the_controller():
    """The file says VLAN-aware without VLAN 5 but the kernel does not filter yet (edited by hand, or a run that
    stopped before its reload): the controller still gets in on vmbr0.5, and the reload this plan would do cuts it."""
    written = TAGGED_MGMT.replace("        bridge-fd 0\n",
                                  "        bridge-fd 0\n        bridge-vlan-aware yes\n        bridge-vids 10 20 30\n")
    rt = runtime(addresses={"10.5.0.2": "vmbr0.5"},
                 extra_links=[link("vmbr0.5", "vlan", parent="vmbr0", protocol="802.1Q", id=5)])
    with pytest.raises(pve_bridge.BridgeError, match="10.5.0.2 on vmbr0.5 .VLAN 5 of vmbr0."):
        pve_bridge.plan(written, LAB_VLANS, {}, "present", mgmt_on("10.5.0.2", rt), rt)
    # Once the kernel filters as the file says (nothing to reload), the run has nothing to do and does not fail.
    filtering = runtime(filtering=1, port_vids=(1, 10, 20, 30), addresses={"10.5.0.2": "vmbr0.5"},
                        extra_links=[link("vmbr0.5", "vlan", parent="vmbr0", protocol="802.1Q", id=5)])
    quiet = pve_bridge.plan(written, LAB_VLANS, {}, "present", mgmt_on("10.5.0.2", filtering), filtering)
    assert not quiet["reload"] and not quiet["changed"]


def test_every_address_of_the_controllers_name_is_protected():
    rt = runtime(addresses={"10.0.0.2": "vmbr0", "10.5.0.2": "vmbr0.5"},
                 extra_links=[link("vmbr0.5", "vlan", parent="vmbr0", protocol="802.1Q", id=5)])
    mgmt = pve_bridge.management("pve-a.example", "ssh", rt, {"pve-a.example": ["10.0.0.2", "10.5.0.2"]}.get)
    assert [(where["interface"], where["vid"]) for where in mgmt["locations"]] == [("vmbr0", None), ("vmbr0.5", 5)]
    with pytest.raises(pve_bridge.BridgeError, match="10.5.0.2 on vmbr0.5"):
        pve_bridge.plan(TAGGED_MGMT, LAB_VLANS, {}, "present", mgmt, rt)


def test_an_ipv6_link_local_address_counts_on_the_interface_its_zone_names():
    """A bridge and its VLAN interfaces share a MAC, so they have the same fe80:: address."""
    rt = runtime(extra_links=[link("vmbr0.5", "vlan", parent="vmbr0", protocol="802.1Q", id=5)])
    rt["addresses"]["fe80::1"] = ["vmbr0", "vmbr0.5"]
    assert pve_bridge.management("fe80::1%vmbr0.5", "ssh", rt)["locations"] == [
        {"address": "fe80::1", "interface": "vmbr0.5", "bridge": "vmbr0", "vid": 5}]
    assert len(pve_bridge.management("fe80::1", "ssh", rt)["locations"]) == 2


def test_an_untagged_controller_address_is_refused_where_a_pvid_would_move_untagged_frames():
    pvid = INSTALLER.replace("iface eno1 inet manual\n", "iface eno1 inet manual\n\tbridge-pvid 5\n")
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    with pytest.raises(pve_bridge.BridgeError, match="untagged on vmbr0.*eno1: bridge-pvid 5"):
        pve_bridge.plan(pvid, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    assert pve_bridge.plan(pvid.replace("bridge-pvid 5", "bridge-pvid 1"), LAB_VLANS, {}, "present",
                           mgmt_on("192.168.10.2", rt), rt)["changed"]


def test_the_revert_keeps_the_spelling_and_spacing_the_file_had():
    odd = INSTALLER.replace("\tbridge-fd 0\n", "\tbridge-fd 0\n\tbridge_vlan_aware no \n\tbridge-vids\t7\n")
    rt = runtime(addresses={"192.168.10.2": "vmbr0"})
    applied = pve_bridge.plan(odd, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    assert "\tbridge-vlan-aware yes\n\tbridge-vids 7 10 20 30\n" in applied["content"]
    after = runtime(filtering=1, port_vids=(1, 7, 10, 20, 30), addresses={"192.168.10.2": "vmbr0"})
    reverted = pve_bridge.plan(applied["content"], LAB_VLANS, applied["record"], "absent",
                               mgmt_on("192.168.10.2", after), after)
    assert reverted["content"] == odd
    # A bridge the role found VLAN-aware keeps that line on the way back; only the VIDs it added go.
    aware = INSTALLER.replace("\tbridge-fd 0\n", "\tbridge-fd 0\n\tbridge-vlan-aware yes\n\tbridge-vids 10\n")
    applied = pve_bridge.plan(aware, LAB_VLANS, {}, "present", mgmt_on("192.168.10.2", rt), rt)
    assert applied["record"]["bridges"]["vmbr0"] == {"bridge-vids": "\tbridge-vids 10"}
    assert pve_bridge.plan(applied["content"], LAB_VLANS, applied["record"], "absent", mgmt_on("192.168.10.2", after),
                           after)["content"] == aware


def test_a_glob_of_ports_is_checked_on_the_kernels_uplinks_not_on_the_guests_taps():
    glob = INSTALLER.replace("bridge-ports eno1", "bridge-ports glob eno1-2").replace(
        "\tbridge-fd 0\n", "\tbridge-fd 0\n\tbridge-vlan-aware yes\n\tbridge-vids 10 20 30\n")
    links = [link("eno1", master="vmbr0"), link("eno2", master="vmbr0"), link("tap100i0", master="vmbr0"),
             link("vmbr0", "bridge", vlan_filtering=1)]
    vlans = [{"ifname": "eno1", "vlans": [{"vlan": 10}, {"vlan": 20, "vlanEnd": 30}]},
             {"ifname": "eno2", "vlans": [{"vlan": 10}]}, {"ifname": "tap100i0", "vlans": [{"vlan": 20}]}]
    rt = pve_bridge.runtime_from(links, vlans, [])
    assert pve_bridge.mismatches(pve_bridge.parse(glob), ["vmbr0"], rt) == [
        "vmbr0: port eno2 does not carry VLAN 20 30"]
