"""Unit tests of module_utils.inventory_model: the VLAN-aware inventory model and its validation."""

import copy

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import inventory_model as im

VLANS = {
    "mgmt": {"id": 10, "cidr": "10.0.10.0/24", "gateway": "10.0.10.1", "bridge": "vmbr0"},
    "inference": {"id": 20, "cidr": "10.0.20.0/24", "gateway": "10.0.20.1", "bridge": "vmbr0"},
}
CREDS = {"gpu_vm_api_token_id": "ansible@pve!llmstack", "gpu_vm_api_token_secret": "0123456789abcdef0123",
         "gpu_vm_api_host": "pve-a.example.test", "guest_image_mirror": "http://deb.debian.org/debian",
         "guest_image_authorized_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDwyngojZfNGnYM8XwCf1zqNDci ops"]}


def base():
    """A valid model: two PVE hosts, two GPU VMs, a gateway."""
    hosts = {
        "pve-a": {"llmstack_interfaces": [{"vlan": "mgmt", "address": "10.0.10.2"}]},
        "pve-b": {"llmstack_interfaces": [{"vlan": "mgmt", "address": "10.0.10.3"}]},
        "vm-a": dict(CREDS, gpu_vm_node="pve-a", gpu_vm_vmid=120, gpu_vm_gpus=["0000:41:00", "61:00"],
                     llmstack_interfaces=[{"vlan": "inference", "address": "10.0.20.20"}],
                     vllm_models=[{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct", "port": 8001},
                                  {"name": "big", "model": "Qwen/Qwen2.5-32B-Instruct-AWQ", "port": 8002}]),
        "vm-b": dict(CREDS, gpu_vm_node="pve-b", gpu_vm_vmid=121,
                     gpu_vm_gpus=[{"vendor_device": "10de:1db5", "count": 8}],
                     llmstack_interfaces=[{"vlan": "inference", "address": "10.0.20.21"}]),
        "gw": {"llmstack_interfaces": [{"vlan": "inference", "address": "10.0.20.12"}],
               "litellm_fallbacks": {"big": ["fast"]},
               "litellm_clients": [{"alias": "app", "models": ["fast"], "budget_duration": "30d", "max_budget": 5}]},
    }
    for data in hosts.values():
        data["llmstack_vlans"] = copy.deepcopy(VLANS)
        data["network_policy_controller_addresses"] = ["10.0.10.5"]
    return {"groups": {"all": sorted(hosts), "pve_hosts": ["pve-a", "pve-b"], "gpu_vms": ["vm-a", "vm-b"],
                       "llm_gateways": ["gw"]},
            "hosts": hosts}


def texts(model, **kwargs):
    return [str(p) for p in im.validate(model, **kwargs)]


def set_vlans(model, vlans):
    for data in model["hosts"].values():
        data["llmstack_vlans"] = copy.deepcopy(vlans)


def only(model, fragment):
    """The model has exactly one problem, and it contains this text."""
    found = texts(model)
    assert len(found) == 1, found
    assert fragment in found[0], found
    return found[0]


def test_base_model_is_valid():
    assert texts(base()) == []


# -- VLANs ---------------------------------------------------------------------------
@pytest.mark.parametrize("vid", [0, 4095, -1, "x", True, 20.5])
def test_vlan_id_outside_range_or_not_integer(vid):
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["mgmt"]["id"] = vid
    set_vlans(model, vlans)
    assert only(model, "llmstack_vlans.mgmt.id").startswith("group all: llmstack_vlans.mgmt.id: ")


def test_vlan_id_as_decimal_string_is_accepted():
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["mgmt"]["id"] = "10"
    set_vlans(model, vlans)
    assert texts(model) == []


def test_vlan_missing_id_and_cidr():
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["spare"] = {"bridge": "vmbr0"}
    set_vlans(model, vlans)
    found = texts(model)
    assert any("llmstack_vlans.spare.id: is missing" in t for t in found), found
    assert any("llmstack_vlans.spare.cidr: is missing" in t for t in found), found


def test_vlan_unknown_key_is_reported():
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["mgmt"]["cidir"] = "10.0.10.0/24"
    set_vlans(model, vlans)
    only(model, "unknown key(s) cidir")


@pytest.mark.parametrize("cidr,fragment", [
    ("10.0.300.0/24", "is not a valid subnet"),
    ("10.0.10.0", "not a subnet in CIDR notation"),
    ("10.0.10.7/24", "has host bits set; the subnet is 10.0.10.0/24"),
])
def test_bad_cidr(cidr, fragment):
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["mgmt"]["cidr"] = cidr
    set_vlans(model, vlans)
    found = texts(model)
    assert any(fragment in t for t in found), found


def test_overlapping_subnets_named_both_ways():
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["wide"] = {"id": 99, "cidr": "10.0.0.0/16"}
    set_vlans(model, vlans)
    found = texts(model)
    assert sorted(found) == sorted([
        "group all: llmstack_vlans.wide.cidr: 10.0.0.0/16 overlaps 10.0.20.0/24 of VLAN 'inference'",
        "group all: llmstack_vlans.wide.cidr: 10.0.0.0/16 overlaps 10.0.10.0/24 of VLAN 'mgmt'",
    ]), found


def test_adjacent_subnets_do_not_overlap():
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["a"] = {"id": 30, "cidr": "10.0.30.0/25"}
    vlans["b"] = {"id": 31, "cidr": "10.0.30.128/25"}
    set_vlans(model, vlans)
    assert texts(model) == []


@pytest.mark.parametrize("gateway,fragment", [
    ("10.0.11.1", "outside the VLAN's subnet"),
    ("10.0.10.0", "is the network address"),
    ("10.0.10.255", "is the broadcast address"),
    ("gateway.lan", "is not an IP address"),
])
def test_bad_gateway(gateway, fragment):
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["mgmt"]["gateway"] = gateway
    set_vlans(model, vlans)
    only(model, fragment)


def test_bad_bridge_name():
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["mgmt"]["bridge"] = "bridge-name-far-too-long"
    set_vlans(model, vlans)
    only(model, "is not a Linux bridge name")


def test_vlans_that_differ_between_hosts():
    model = base()
    model["hosts"]["gw"]["llmstack_vlans"]["mgmt"]["id"] = 11
    found = only(model, "differs from the definition of 4 other host(s) (pve-a, pve-b, vm-a, vm-b)")
    assert found.startswith("host gw: llmstack_vlans: "), found


def test_interfaces_without_vlans():
    model = base()
    for data in model["hosts"].values():
        del data["llmstack_vlans"]
    found = texts(model)
    assert len(found) == 1 and "llmstack_vlans: is not defined" in found[0], found


def test_ipv6_vlan_and_interface():
    model = base()
    vlans = copy.deepcopy(VLANS)
    vlans["v6"] = {"id": 60, "cidr": "fd00:60::/64", "gateway": "fd00:60::1"}
    set_vlans(model, vlans)
    model["hosts"]["gw"]["llmstack_interfaces"].append({"vlan": "v6", "address": "fd00:60::12"})
    assert texts(model) == []
    model["hosts"]["pve-a"]["llmstack_interfaces"].append({"vlan": "v6", "address": "fd00:61::2"})
    only(model, "fd00:61::2 is outside VLAN 'v6'")


# -- interfaces ----------------------------------------------------------------------
def test_address_unique_across_inventory():
    model = base()
    model["hosts"]["pve-b"]["llmstack_interfaces"][0]["address"] = "10.0.10.2"
    found = only(model, "10.0.10.2 is assigned twice")
    assert found.startswith("hosts pve-a, pve-b: "), found


def test_address_with_matching_prefix_is_accepted_other_prefix_is_not():
    model = base()
    model["hosts"]["pve-a"]["llmstack_interfaces"][0]["address"] = "10.0.10.2/24"
    assert texts(model) == []
    model["hosts"]["pve-a"]["llmstack_interfaces"][0]["address"] = "10.0.10.2/16"
    only(model, "prefix /16 does not match VLAN 'mgmt'")


@pytest.mark.parametrize("address,fragment", [
    ("10.0.10.0", "is the network address"),
    ("10.0.10.255", "is the broadcast address"),
    ("10.0.10.1", "is the gateway of VLAN 'mgmt'"),
    ("10.0.20.2", "is outside VLAN 'mgmt'"),
    ("not-an-ip", "is not an IP address"),
])
def test_bad_interface_address(address, fragment):
    model = base()
    model["hosts"]["pve-a"]["llmstack_interfaces"][0]["address"] = address
    found = only(model, fragment)
    assert found.startswith("host pve-a: llmstack_interfaces[0].address: "), found


def test_two_interfaces_on_one_vlan():
    model = base()
    model["hosts"]["pve-a"]["llmstack_interfaces"].append({"vlan": "mgmt", "address": "10.0.10.9"})
    only(model, "already has an interface on VLAN 'mgmt'")


def test_interface_mac_must_be_unicast():
    model = base()
    model["hosts"]["pve-a"]["llmstack_interfaces"][0]["mac"] = "BC:24:11:00:00:01"
    assert texts(model) == []
    model["hosts"]["pve-a"]["llmstack_interfaces"][0]["mac"] = "01:00:5e:00:00:01"
    only(model, "is not a unicast MAC address")


def test_interfaces_not_a_list():
    model = base()
    model["hosts"]["pve-a"]["llmstack_interfaces"] = {"vlan": "mgmt", "address": "10.0.10.2"}
    only(model, "must be a list of {vlan, address}, got dict")


def test_group_needs_its_vlan_and_it_can_be_overridden():
    model = base()
    model["hosts"]["gw"]["llmstack_interfaces"] = [{"vlan": "mgmt", "address": "10.0.10.12"}]
    only(model, "host gw: llmstack_interfaces: has no interface on VLAN 'inference'")
    assert texts(model, group_vlans={"gpu_vms": ["inference"]}) == []


def test_required_vlan_not_defined():
    found = texts(base(), group_vlans={"llm_gateways": ["apps"]})
    assert found == ["group all: llmstack_vlans: defines no VLAN 'apps', which hosts of group llm_gateways must "
                     "be on"], found


# -- GPU VMs -------------------------------------------------------------------------
def test_vm_in_pve_hosts_too():
    model = base()
    model["groups"]["pve_hosts"].append("vm-b")
    found = texts(model)
    assert any("host vm-b: groups: is in both pve_hosts and gpu_vms" in t for t in found), found


@pytest.mark.parametrize("group", ["llm_gateways", "langfuse", "observability"])
def test_a_pve_host_runs_no_compose_project(group):
    """The docker role never goes on a PVE host (Docker's FORWARD policy would drop the bridged VMs' traffic)."""
    model = base()
    model["groups"].setdefault(group, []).append("pve-a")
    model["hosts"]["pve-a"].setdefault("llmstack_interfaces", [{"vlan": "inference", "address": "10.0.20.2"}])
    found = [t for t in texts(model) if "groups" in t]
    assert found == ["host pve-a: groups: is in both pve_hosts and %s: the %s services run in Docker, and Docker on "
                     "a PVE host sets the iptables FORWARD policy to DROP (the bridged VMs' traffic); run them in a "
                     "VM (gpu_vm_vmid in its host_vars)" % (group, group)], found


@pytest.mark.parametrize("key", ["gpu_vm_node", "gpu_vm_vmid", "gpu_vm_gpus"])
def test_vm_required_variables(key):
    model = base()
    del model["hosts"]["vm-b"][key]
    only(model, "host vm-b: %s: is missing" % key)


def plain_vm(model, **extra):
    """The gateway as a VM this collection creates (issue #33): VM settings, no GPUs."""
    model["hosts"]["gw"].update(CREDS, gpu_vm_node="pve-a", gpu_vm_vmid=112, **extra)
    return model


def test_a_host_outside_gpu_vms_with_a_vmid_is_a_vm_and_needs_no_gpus():
    model = plain_vm(base())
    assert texts(model) == []
    assert im.vm_hosts(model["groups"], model["hosts"]) == ["gw", "vm-a", "vm-b"]
    # Without VM settings the gateway is an existing host, as before.
    assert im.vm_hosts(base()["groups"], base()["hosts"]) == ["vm-a", "vm-b"]


@pytest.mark.parametrize("key,value,fragment", [
    ("gpu_vm_node", "pve-c", "host gw: gpu_vm_node: 'pve-c' is not a host in group pve_hosts"),
    ("gpu_vm_node", None, "host gw: gpu_vm_node: is missing"),
    ("gpu_vm_vmid", 120, "VM id 120 is used by both gw and vm-a in PVE cluster 'default'"),
    ("gpu_vm_vmid", 99, "host gw: gpu_vm_vmid: 99 is not a PVE VM id"),
    ("gpu_vm_gpus", ["0000:41:00"], "host gw: gpu_vm_gpus: is set on a VM outside group gpu_vms"),
    ("gpu_vm_api_host", "", "host gw: gpu_vm_api_host: is empty"),
    ("gpu_vm_api_token_id", None, "host gw: gpu_vm_api_token_secret: no PVE API credentials"),
])
def test_a_plain_vm_is_refused_for_what_a_gpu_vm_is(key, value, fragment):
    model = plain_vm(base())
    if value is None:
        del model["hosts"]["gw"][key]
        if key == "gpu_vm_api_token_id":
            del model["hosts"]["gw"]["gpu_vm_api_token_secret"]
    else:
        model["hosts"]["gw"][key] = value
    only(model, fragment)


def test_a_vm_without_the_pve_api_host_is_refused_before_anything_changes():
    model = base()
    del model["hosts"]["vm-b"]["gpu_vm_api_host"]
    only(model, "host vm-b: gpu_vm_api_host: is empty: name the PVE API host")


def test_a_vm_with_several_nics_needs_a_mac_on_each_before_anything_changes():
    """guest_image names a multi-NIC guest's interfaces by MAC and refuses one without, but only in the guests stage,
    after the PVE hosts stage may have rebooted them: the inventory check says it first, for every VM."""
    model = plain_vm(base())
    model["hosts"]["gw"]["llmstack_interfaces"] = [
        {"vlan": "inference", "address": "10.0.20.12"},
        {"vlan": "mgmt", "address": "10.0.10.12", "mac": "BC:24:11:00:10:12"}]
    only(model, "host gw: llmstack_interfaces: llmstack_interfaces[0] has no mac: a VM with 2 NICs")
    model["hosts"]["gw"]["llmstack_interfaces"][0]["mac"] = "BC:24:11:00:20:12"
    assert texts(model) == []
    # An existing host (no gpu_vm_vmid) is not imaged by the collection: no MAC needed.
    model = base()
    model["hosts"]["gw"]["llmstack_interfaces"] = [{"vlan": "inference", "address": "10.0.20.12"},
                                                   {"vlan": "mgmt", "address": "10.0.10.12"}]
    assert texts(model) == []


@pytest.mark.parametrize("key,fragment", [
    ("guest_image_mirror", "host gw: guest_image_mirror: is empty: the VM's image is built with debootstrap"),
    ("guest_image_authorized_keys", "host gw: guest_image_authorized_keys: is empty: the VM's image lets root in"),
])
def test_a_vm_whose_image_cannot_be_built_or_reached_is_refused_first(key, fragment):
    """Issue #33 item 6: refused by the offline check, not in the guests stage after the PVE hosts rebooted."""
    model = plain_vm(base())
    del model["hosts"]["gw"][key]
    only(model, fragment)
    model["hosts"]["gw"][key] = [] if key.endswith("keys") else ""
    only(model, fragment)
    model["hosts"]["gw"]["guest_image_import"] = False
    assert texts(model) == []


def test_the_policy_without_the_controllers_address_is_refused_unless_it_is_off():
    model = base()
    del model["hosts"]["pve-a"]["network_policy_controller_addresses"]
    only(model, "host pve-a: network_policy_controller_addresses: is empty: name the address(es) Ansible connects")
    for off in ({"network_policy_state": "absent"}, {"network_policy_nftables": "false"}):
        changed = copy.deepcopy(model)
        changed["hosts"]["pve-a"].update(off)
        assert texts(changed) == []
    # PVE's firewall is a policy too, nftables off or not.
    model["hosts"]["pve-a"].update(network_policy_nftables=False, network_policy_pve_firewall=True)
    only(model, "host pve-a: network_policy_controller_addresses: is empty")


def test_a_pve_host_with_a_vmid_is_refused():
    model = base()
    model["hosts"]["pve-a"]["gpu_vm_vmid"] = 150
    only(model, "host pve-a: gpu_vm_vmid: is set on a host of group pve_hosts")
    assert im.vm_hosts(model["groups"], model["hosts"]) == ["vm-a", "vm-b"]


def test_vmid_unique_per_cluster_only():
    model = base()
    model["hosts"]["vm-b"]["gpu_vm_vmid"] = 120
    only(model, "VM id 120 is used by both vm-a and vm-b in PVE cluster 'default'")
    model["hosts"]["pve-a"]["llmstack_pve_cluster"] = "east"
    model["hosts"]["pve-b"]["llmstack_pve_cluster"] = "west"
    assert texts(model) == []


def test_vmid_string_from_ini_inventory():
    model = base()
    model["hosts"]["vm-b"]["gpu_vm_vmid"] = "121"
    assert texts(model) == []


def test_same_slot_on_different_nodes_is_fine_same_node_is_not():
    model = base()
    model["hosts"]["vm-b"]["gpu_vm_gpus"] = ["0000:41:00"]
    assert texts(model) == []
    model["hosts"]["vm-b"]["gpu_vm_node"] = "pve-a"
    model["hosts"]["vm-b"]["gpu_vm_gpus"] = ["41:00.1"]
    only(model, "GPU 0000:41:00 on pve-a is assigned to both vm-a and vm-b")


def test_same_slot_twice_in_one_vm():
    model = base()
    model["hosts"]["vm-a"]["gpu_vm_gpus"] = ["0000:41:00", "0000:41:00.0"]
    only(model, "GPU 0000:41:00 on pve-a is assigned twice in this VM")


@pytest.mark.parametrize("gpu,fragment", [
    ("41:00.9", "is not a PCI slot"),
    ("zz:00", "is not a PCI slot"),
    ({"vendor_device": "10de-2204", "count": 1}, "is not a PCI id pair"),
    ({"vendor_device": "10de:2204", "count": 0}, "is not a positive integer"),
    ({"vendor_device": "10de:2204", "slots": 2}, "unknown key(s) slots"),
    (41, "must be a PCI slot string or {vendor_device, count}, got int"),
])
def test_bad_gpu_entry(gpu, fragment):
    model = base()
    model["hosts"]["vm-b"]["gpu_vm_gpus"] = [gpu]
    found = texts(model)
    assert any(fragment in t and t.startswith("host vm-b: gpu_vm_gpus[0]") for t in found), found


def test_more_than_16_gpus():
    model = base()
    model["hosts"]["vm-b"]["gpu_vm_gpus"] = [{"vendor_device": "10de:1db5", "count": 17}]
    only(model, "asks for 17 GPUs; a PVE VM has at most 16 hostpci devices")


def test_normalise_slot():
    assert im.normalise_slot("41:00") == "0000:41:00"
    assert im.normalise_slot("0000:A1:00.1") == "0000:a1:00"
    assert im.normalise_slot("0001:02:1f") == "0001:02:1f"
    assert im.normalise_slot("02:20") is None      # device numbers stop at 1f
    assert im.normalise_slot(None) is None


# -- models and gateway --------------------------------------------------------------
def test_model_missing_fields_and_bad_port():
    model = base()
    model["hosts"]["vm-a"]["vllm_models"] = [{"name": "fast", "port": 80}]
    found = texts(model)
    assert any("vllm_models[0].model: is missing" in t for t in found), found
    assert any("vllm_models[0].port: 80 is not a TCP port from 1024 to 65535" in t for t in found), found


def test_model_name_served_twice_on_one_vm():
    model = base()
    model["hosts"]["vm-a"]["vllm_models"][1]["name"] = "fast"
    model["hosts"]["gw"]["litellm_fallbacks"] = {}
    only(model, "'fast' is served twice on this VM")


def test_same_model_name_on_two_vms_is_load_balancing():
    model = base()
    model["hosts"]["vm-b"]["vllm_models"] = [{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct",
                                              "port": 8001}]
    assert texts(model) == []


def test_fallback_to_itself_and_to_unknown():
    model = base()
    model["hosts"]["gw"]["litellm_fallbacks"] = {"big": ["big"], "ghost": ["fast"]}
    found = texts(model)
    assert any("litellm_fallbacks.big: 'big' falls back to itself" in t for t in found), found
    assert any("litellm_fallbacks.ghost: 'ghost' is not a model served" in t for t in found), found


def test_external_models_are_known_to_fallbacks():
    model = base()
    model["hosts"]["gw"]["litellm_fallbacks"] = {"big": ["claude"]}
    assert len(texts(model)) == 1
    model["hosts"]["gw"]["litellm_external_models"] = [{"name": "claude", "model": "anthropic/claude"}]
    assert texts(model) == []


@pytest.mark.parametrize("field,value,fragment", [
    ("models", ["ghost"], "'ghost' is not a model served by any GPU VM"),
    ("models", [], "must be a non-empty list"),
    ("alias", "has space", "is not a client alias"),
    ("budget_duration", "30days", "is not a LiteLLM duration"),
    ("max_budget", -1, "must be a number >= 0"),
    ("rpm_limit", True, "must be a number >= 0"),
    ("tmp_limit", 5, "unknown key(s) tmp_limit"),
])
def test_bad_client(field, value, fragment):
    model = base()
    model["hosts"]["gw"]["litellm_clients"][0][field] = value
    only(model, fragment)


# -- secrets -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["litellm_master_key", "langfuse_nextauth_secret", "monitoring_grafana_admin_password",
                                  "vllm_api_key", "gpu_vm_api_password"])
def test_secret_variables_are_recognised(name):
    assert im.is_secret_variable(name)


@pytest.mark.parametrize("name", ["litellm_clients", "gpu_vm_api_token_id", "ansible_password", "vllm_models",
                                  "langfuse_secret_dir"])
def test_other_variables_are_not_secrets(name):
    assert not im.is_secret_variable(name)


@pytest.mark.parametrize("value,fragment", [
    ("changeme", "is a well-known default"),
    ("Admin", "is a well-known default"),
    ("short", "is 5 characters long; use at least 12"),
    (12345, "must be a string"),
])
def test_weak_secret(value, fragment):
    model = base()
    model["hosts"]["gw"]["langfuse_db_password"] = value
    only(model, "host gw: langfuse_db_password: " + fragment)


def test_master_key_prefix():
    model = base()
    model["hosts"]["gw"]["litellm_master_key"] = "0123456789abcdef0123"
    only(model, "litellm_master_key: must start with 'sk-'")
    model["hosts"]["gw"]["litellm_master_key"] = "sk-0123456789abcdef0123"
    assert texts(model) == []


def test_same_weak_secret_from_group_vars_is_one_problem():
    model = base()
    for host in ("vm-a", "vm-b"):
        model["hosts"][host]["vllm_api_key"] = "password"
    found = texts(model)
    assert found == ["hosts vm-a, vm-b: vllm_api_key: is a well-known default; set a random value (vault) or "
                     "leave it unset to generate one"], found


def test_unresolved_variable_is_a_problem_not_a_crash():
    model = base()
    model["hosts"]["vm-a"]["gpu_vm_api_token_secret"] = im.Unresolved("'vault_secret' is undefined")
    only(model, "host vm-a: gpu_vm_api_token_secret: cannot be resolved: 'vault_secret' is undefined")


def test_pve_credentials_required():
    model = base()
    for host in ("vm-a", "vm-b"):
        del model["hosts"][host]["gpu_vm_api_token_id"]
        del model["hosts"][host]["gpu_vm_api_token_secret"]
    only(model, "hosts vm-a, vm-b: gpu_vm_api_token_secret: no PVE API credentials")
    for host in ("vm-a", "vm-b"):
        model["hosts"][host]["gpu_vm_api_password"] = "a-long-random-password"
    assert texts(model) == []


def test_token_id_format():
    model = base()
    model["hosts"]["vm-a"]["gpu_vm_api_token_id"] = "ansible@pve"
    only(model, "is not a PVE API token id (user@realm!name)")


# -- helpers -------------------------------------------------------------------------
def test_host_network_joins_interfaces_with_vlans():
    model = base()
    model["hosts"]["vm-a"]["llmstack_interfaces"][0]["mac"] = "BC:24:11:00:00:01"
    model["hosts"]["vm-a"]["llmstack_interfaces"].append({"vlan": "mgmt", "address": "10.0.10.20/24",
                                                          "mac": "BC:24:11:00:00:02"})
    assert im.validate(model) == []
    assert im.host_network(model, "vm-a") == [
        {"vlan": "inference", "id": 20, "address": "10.0.20.20", "prefix": 24, "cidr": "10.0.20.0/24",
         "gateway": "10.0.20.1", "bridge": "vmbr0", "mac": "BC:24:11:00:00:01"},
        {"vlan": "mgmt", "id": 10, "address": "10.0.10.20", "prefix": 24, "cidr": "10.0.10.0/24",
         "gateway": "10.0.10.1", "bridge": "vmbr0", "mac": "BC:24:11:00:00:02"},
    ]
    assert im.host_network(model, "nobody") == []


def test_wanted_variables():
    assert im.wanted_variables(["gpu_vm_node", "ansible_host", "litellm_salt_key", "inventory_hostname"]) == [
        "gpu_vm_node", "litellm_salt_key"]


def test_problem_as_dict():
    problem = im.Problem(["b", "a"], "x", "is wrong")
    assert problem.as_dict() == {"hosts": ["a", "b"], "variable": "x", "message": "is wrong",
                                 "text": "hosts a, b: x: is wrong"}


def test_the_host_key_secret_needs_32_characters_before_anything_changes():
    """Every VM's SSH host key is derived from it (ssh_host_key needs 32): a shorter one is refused offline, not in
    the guests stage after the PVE hosts stage."""
    model = base()
    model["hosts"]["vm-a"]["guest_image_host_key_secret"] = "x7Kp2Qm9Lr4Tv8Wz3Yb6Nc1"
    only(model, "host vm-a: guest_image_host_key_secret: is 23 characters long; use at least 32")
    model["hosts"]["vm-a"]["guest_image_host_key_secret"] = "x7Kp2Qm9Lr4Tv8Wz3Yb6Nc1Hd5Fg0Js2A"
    assert texts(model) == []


def test_the_model_disk_defaults_are_the_gpu_vm_roles():
    from conftest import role_settings

    names = [n[len("gpu_vm_"):] for n in im.GPU_VM_DEFAULTS]
    assert dict(("gpu_vm_" + k, v) for k, v in role_settings("gpu_vm", names).items()) == im.GPU_VM_DEFAULTS


def test_models_that_do_not_fit_the_model_disk_are_refused_before_anything_changes():
    model = base()
    model["hosts"]["vm-a"]["gpu_vm_model_disk_gib"] = 20
    only(model, "host vm-a: gpu_vm_model_disk_gib: 20 GiB does not hold the")
    model["hosts"]["vm-a"]["gpu_vm_model_disk_gib"] = 0
    only(model, "host vm-a: gpu_vm_model_disk_gib: 0 puts the models on the root disk")
    model["hosts"]["vm-a"]["gpu_vm_disk_gib"] = 200
    assert texts(model) == []
