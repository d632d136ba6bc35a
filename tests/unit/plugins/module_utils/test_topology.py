"""The topology (module_utils/topology.py): one GPU placement that vfio, host_preflight and gpu_vm share, and
the endpoints with their collisions and reachability. GPUs come from the sysfs fixtures (tests/fixtures/sysfs)."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import gpu_vm, pci, topology, vfio
from conftest import role_settings

VLANS = {"mgmt": {"id": 10, "cidr": "10.0.10.0/24", "gateway": "10.0.10.1"},
         "inference": {"id": 20, "cidr": "10.0.20.0/24", "gateway": "10.0.20.1"},
         "apps": {"id": 30, "cidr": "10.0.30.0/24", "gateway": "10.0.30.1"},
         "storage": {"id": 40, "cidr": "10.0.40.0/24"}}


def vm_plan(pci_facts, name, gpus, allow_shared_group=False, node_vms=None):
    vm = {"name": name, "node": "pve-a", "pve_node": "pve-a", "gpus": gpus,
          "interfaces": [{"vlan": "inference", "address": "10.0.20.20"}]}
    return gpu_vm.plan(vm, node_vms or [{"name": name, "gpus": gpus}], pci_facts, VLANS,
                       dict(role_settings("gpu_vm", gpu_vm.SETTINGS), allow_shared_group=allow_shared_group,
                            hostpci_mode="raw"))


@pytest.fixture(scope="module")
def two_3090(sysfs_trees):
    return pci.read_tree(sysfs_trees["two-3090-shared-group"])


def test_the_fixture_has_one_shared_and_one_isolated_3090(two_3090):
    gpus = dict((g["slot"], g) for g in two_3090["gpus"])
    assert gpus["0000:41:00"]["isolated"] is False and gpus["0000:41:00"]["shares_group_with"] == ["0000:43:00.0"]
    assert gpus["0000:42:00"]["isolated"] is True


def test_vfio_binds_exactly_the_gpu_the_vm_gets(two_3090):
    """Issue #21: vfio took slots in order (41:00) while the VM got the isolated 42:00."""
    spec = [{"vendor_device": "10de:2204", "count": 1}]
    plan = vm_plan(two_3090, "gpu-a", spec)
    slots, problems = topology.host_passthrough([{"name": "gpu-a", "gpus": spec}], two_3090, "pve-a")
    assert problems == []
    assert slots == plan["slots"] == ["0000:42:00"]
    assert plan["config"]["hostpci0"].startswith("0000:42:00")
    ids, _warnings = vfio.passthrough_ids(two_3090, slots)
    assert sorted(ids) == ["10de:1aef", "10de:2204"]


def test_a_second_vm_naming_the_shared_group_slot_is_refused_by_vfio_and_gpu_vm(two_3090):
    vms = [{"name": "gpu-a", "gpus": [{"vendor_device": "10de:2204", "count": 1}]},
           {"name": "gpu-b", "gpus": ["41:00"]}]
    slots, problems = topology.host_passthrough(vms, two_3090, "pve-a")
    assert slots == ["0000:42:00"]
    assert len(problems) == 1 and problems[0].startswith("gpu-b: gpu_vm_gpus[0]: GPU 0000:41:00 shares IOMMU group")
    assert "0000:43:00.0" in problems[0] and "gpu_vm_allow_shared_group" in problems[0]
    with pytest.raises(gpu_vm.GpuVmError) as error:
        vm_plan(two_3090, "gpu-b", ["41:00"], node_vms=vms)
    assert any("shares IOMMU group" in p for p in error.value.problems)
    # The first VM is unaffected by the second one's refusal.
    assert vm_plan(two_3090, "gpu-a", vms[0]["gpus"], node_vms=vms)["slots"] == ["0000:42:00"]


def test_allow_shared_group_passes_the_whole_group_in_both(two_3090):
    vms = [{"name": "gpu-b", "gpus": ["41:00"], "allow_shared_group": True}]
    slots, problems = topology.host_passthrough(vms, two_3090, "pve-a")
    assert (slots, problems) == (["0000:41:00"], [])
    plan = vm_plan(two_3090, "gpu-b", ["41:00"], allow_shared_group=True, node_vms=vms)
    assert [v.split(",")[0] for k, v in sorted(plan["config"].items()) if k.startswith("hostpci") and v] == \
        ["0000:41:00", "0000:43:00"]


def test_two_of_a_type_where_one_shares_its_group_is_a_shortfall_that_says_why(two_3090):
    vms = [{"name": "gpu-a", "gpus": [{"vendor_device": "10de:2204", "count": 2}]}]
    slots, problems = topology.host_passthrough(vms, two_3090, "pve-a")
    assert slots == ["0000:42:00"]
    assert problems == ["gpu-a: gpu_vm_gpus[0]: 2 GPU(s) 10de:2204 asked for, 1 free on pve-a (2 there; 0000:41:00 "
                        "share their IOMMU group with other devices (gpu_vm_allow_shared_group passes the whole "
                        "group))"]


def test_nothing_is_refused_for_isolation_while_the_iommu_is_off(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["iommu-off"])
    assert not facts["iommu_enabled"] and facts["gpus"]
    slot = facts["gpus"][0]["slot"]
    assert topology.host_passthrough([{"name": "vm", "gpus": [slot]}], facts, "pve") == ([slot], [])


def test_named_slots_come_first_then_types_by_slot_and_explicit_replaces_the_vms(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-b"])
    vms = [{"name": "a", "gpus": [{"vendor_device": "10de:1db5", "count": 3}]}, {"name": "b", "gpus": ["1a:00"]}]
    assigned, problems = topology.place_gpus(vms, facts, "pve-b")
    assert problems == {"a": [], "b": []}
    assert assigned == {"a": ["0000:1b:00", "0000:3d:00", "0000:3e:00"], "b": ["0000:1a:00"]}
    slots, problems = topology.host_passthrough(vms, facts, "pve-b")
    assert slots == ["0000:1b:00", "0000:3d:00", "0000:3e:00", "0000:1a:00"]
    explicit = [{"vendor_device": "10de:2204", "count": 2}]
    slots, problems = topology.host_passthrough(vms, facts, "pve-b", explicit=explicit)
    assert slots == [] and problems == ["gpu_vm_gpus[0]: 2 GPU(s) 10de:2204 asked for, 0 free on pve-b (0 there; "
                                        "the others are given to other VMs)"]


def test_a_slot_given_to_two_vms_and_a_bad_count_are_problems(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["platform-a"])
    assigned, problems = topology.place_gpus([{"name": "a", "gpus": ["41:00"]}, {"name": "b", "gpus": ["41:00.0"]},
                                              {"name": "c", "gpus": [{"vendor_device": "10de:2204", "count": "x"}]}],
                                             facts, "pve-a")
    assert assigned["a"] == ["0000:41:00"] and assigned["b"] == []
    assert problems["a"] == problems["b"] == ["gpu_vm_gpus[0]: GPU 0000:41:00 on pve-a is given to both a and b"]
    assert problems["c"] == ["gpu_vm_gpus[0]: count 'x' is not a positive integer"]


# ------------------------------------------------------------------------------------------------ endpoints
def model(extra_groups=None, **hosts):
    groups = {"pve_hosts": [], "gpu_vms": [], "llm_gateways": [], "langfuse": [], "observability": [],
              "llm_clients": []}
    groups.update(extra_groups or {})
    groups["all"] = sorted(hosts)
    data = dict((h, dict(v, llmstack_vlans=VLANS)) for h, v in hosts.items())
    return {"groups": groups, "hosts": data}


OBS = {"llmstack_interfaces": [{"vlan": "mgmt", "address": "10.0.10.14"}]}
OBS_SETTINGS = {"langfuse_bind_address": "10.0.10.14", "langfuse_port": 3000, "langfuse_s3_port": 9090,
                "monitoring_bind_address": "10.0.10.14", "monitoring_prometheus_port": 9090,
                "monitoring_alertmanager_port": 9093, "monitoring_grafana_port": 3001,
                "monitoring_node_exporter_port": 9100, "monitoring_dcgm_exporter_port": 9400,
                "monitoring_node_groups": ["gpu_vms", "observability"]}


def test_langfuse_and_prometheus_on_one_host_with_their_default_ports_are_refused_naming_both():
    m = model({"langfuse": ["obs"], "observability": ["obs"]}, obs=OBS)
    topo, problems = topology.build(m, {"obs": dict(OBS_SETTINGS)})
    assert problems == ["host obs: langfuse_s3_port (langfuse langfuse-s3) and monitoring_prometheus_port "
                        "(monitoring prometheus) both listen on 10.0.10.14 port 9090: move one (set langfuse_s3_port "
                        "or monitoring_prometheus_port)"]
    moved = dict(OBS_SETTINGS, langfuse_s3_port="9000")
    topo, problems = topology.build(m, {"obs": moved})
    assert problems == []
    s3 = topology.endpoint(topo, "langfuse", "langfuse-s3")
    assert [(e["host"], e["address"], e["port"], e["vlan"]) for e in s3] == [("obs", "10.0.10.14", 9000, "mgmt")]


def test_a_wildcard_address_collides_with_every_address_of_its_host():
    m = model({"langfuse": ["obs"], "observability": ["obs"]}, obs=OBS)
    settings = dict(OBS_SETTINGS, langfuse_s3_port=9000, langfuse_port=9093, langfuse_bind_address="0.0.0.0")
    topo, problems = topology.build(m, {"obs": settings})
    assert len(problems) == 1 and "langfuse_port (langfuse langfuse-web) and monitoring_alertmanager_port" in \
        problems[0] and "10.0.10.14 port 9093" in problems[0]


GATEWAY = {"llmstack_interfaces": [{"vlan": "mgmt", "address": "10.0.10.12"},
                                   {"vlan": "inference", "address": "10.0.20.12"},
                                   {"vlan": "apps", "address": "10.0.30.12"}]}
GPU = {"llmstack_interfaces": [{"vlan": "inference", "address": "10.0.20.20"}],
       "vllm_models": [{"name": "fast", "model": "m", "port": 8001}, {"name": "big", "model": "m", "port": "8002"}]}


def test_vllm_litellm_and_the_tls_proxy_are_endpoints_their_consumers_reach():
    m = model({"gpu_vms": ["gpu"], "llm_gateways": ["gw"], "llm_clients": ["app"]}, gw=GATEWAY, gpu=GPU,
              app={"llmstack_interfaces": [{"vlan": "apps", "address": "10.0.30.11"}]})
    settings = {"gw": {"litellm_bind_address": "127.0.0.1", "litellm_port": 4000,
                       "tls_proxy_listen_addresses": ["10.0.30.12"], "tls_proxy_port": 443},
                "gpu": {"vllm_bind_address": "10.0.20.20", "monitoring_bind_address": ""}}
    topo, problems = topology.build(m, settings)
    # No observability host: the GPU VM's exporters have nobody to serve and need no address.
    assert problems == []
    # With one, the GPU VM runs the exporters too (observability stage): without an address it is refused here.
    m["groups"]["observability"] = ["gw"]
    topo, problems = topology.build(m, settings)
    assert "host gpu: monitoring_bind_address: no address for monitoring dcgm-exporter (the host has no interface on " \
        "the role's VLAN in llmstack_interfaces; add one or set monitoring_bind_address)" in problems
    m["groups"]["observability"] = []
    topo, problems = topology.build(m, settings)
    assert [(e["role"], e["service"], e["host"], e["address"], e["port"], e["consumers"])
            for e in topo["endpoints"] if e["role"] != "monitoring"] == [
        ("vllm", "vllm-fast", "gpu", "10.0.20.20", 8001, ["gw"]),
        ("vllm", "vllm-big", "gpu", "10.0.20.20", 8002, ["gw"]),
        ("litellm", "litellm", "gw", "127.0.0.1", 4000, ["gw"]),
        ("tls_proxy", "https", "gw", "10.0.30.12", 443, ["app"])]
    assert topo["hosts"]["gw"]["addresses"] == {"mgmt": "10.0.10.12", "inference": "10.0.20.12",
                                                "apps": "10.0.30.12"}


def test_the_gateway_is_open_to_its_client_hosts_and_the_client_networks_of_tls_proxy_client_sources():
    m = model({"llm_gateways": ["gw"], "llm_clients": ["app"]}, gw=GATEWAY,
              app={"llmstack_interfaces": [{"vlan": "apps", "address": "10.0.30.11"}]})
    settings = {"gw": {"litellm_bind_address": "127.0.0.1", "litellm_port": 4000,
                       "tls_proxy_listen_addresses": ["10.0.30.12"], "tls_proxy_port": 443,
                       "tls_proxy_client_sources": ["10.0.31.0/24", "10.0.30.77"]}}
    topo, problems = topology.build(m, settings)
    assert problems == []
    assert topology.endpoint(topo, "tls_proxy", "https")[0]["sources"] == ["10.0.30.11", "10.0.31.0/24", "10.0.30.77"]
    settings["gw"]["tls_proxy_client_sources"] = ["office"]
    topo, problems = topology.build(m, settings)
    assert problems == ["host gw: tls_proxy_client_sources: must be a list of addresses or CIDRs, not ['office']"]


def test_an_endpoint_its_consumer_cannot_reach_is_refused():
    m = model({"gpu_vms": ["gpu"], "llm_gateways": ["gw"]},
              gw={"llmstack_interfaces": [{"vlan": "storage", "address": "10.0.40.12"}]}, gpu=GPU)
    settings = {"gpu": {"vllm_bind_address": "127.0.0.1", "monitoring_bind_address": "10.0.20.20",
                        "monitoring_dcgm_exporter_port": 9400},
                "gw": {"litellm_bind_address": "127.0.0.1", "litellm_port": 4000}}
    topo, problems = topology.build(m, settings)
    assert problems[0] == ("host gpu: vllm vllm-fast listens on 127.0.0.1:8001 (loopback only; set vllm_bind_address), "
                           "but gw must reach it")
    # An inventory whose hosts are one machine (the integration tests') shares its loopback.
    m["hosts"]["gw"]["llmstack_loopback_shared"] = True
    assert not [p for p in topology.build(m, settings)[1] if "loopback only" in p]
    del m["hosts"]["gw"]["llmstack_loopback_shared"]
    settings["gpu"]["vllm_bind_address"] = "10.0.20.20"
    topo, problems = topology.build(m, settings)
    # The gateway sits only on a VLAN without a gateway: no route to the inference VLAN.
    assert problems[0] == ("host gpu: vllm vllm-fast listens on 10.0.20.20:8001 (VLAN inference: gw has no address "
                           "there and no routed VLAN; set vllm_bind_address), but gw must reach it")
    m["hosts"]["gw"]["llmstack_interfaces"] = [{"vlan": "mgmt", "address": "10.0.10.12"}]
    assert topology.build(m, settings)[1] == []       # routed through the VLANs' gateways


def test_a_setting_that_is_not_an_address_or_port_names_the_variable():
    m = model({"llm_gateways": ["gw"]}, gw=GATEWAY)
    topo, problems = topology.build(m, {"gw": {"litellm_bind_address": "gateway.lan", "litellm_port": 70000,
                                               "tls_proxy_listen_addresses": ["10.0.30.12"],
                                               "tls_proxy_port": "443"}})
    assert problems == ["host gw: litellm_bind_address: 'gateway.lan' is not an IP address"]
    topo, problems = topology.build(m, {"gw": {"litellm_bind_address": "127.0.0.1", "litellm_port": 70000}})
    assert problems == ["host gw: litellm_port: 70000 is not a TCP port (1-65535)"]


def test_the_placement_the_hosts_and_the_vm_gpus(sysfs_trees):
    facts = pci.read_tree(sysfs_trees["two-3090-shared-group"])
    m = model({"pve_hosts": ["pve-a", "pve-b"], "gpu_vms": ["gpu-a", "gpu-b"]},
              **{"pve-a": {}, "pve-b": {},
                 "gpu-a": {"gpu_vm_node": "pve-a", "gpu_vm_gpus": [{"vendor_device": "10de:2204", "count": 1}]},
                 "gpu-b": {"gpu_vm_node": "pve-b", "gpu_vm_gpus": ["0000:81:00.0"]}})
    exporters = {"monitoring_bind_address": "10.0.10.20", "monitoring_dcgm_exporter_port": 9400}
    topo, problems = topology.build(m, {"gpu-a": exporters, "gpu-b": exporters}, {"pve-a": facts},
                                    {"gpu-a": "absent", "gpu-b": "running"}, {"host": "pve.example.org"})
    assert problems == []
    assert topo["gpus"] == {"pve-a": {"gpu-a": ["0000:42:00"]}, "pve-b": {"gpu-b": ["0000:81:00"]}}
    assert topo["hosts"]["gpu-a"]["exists"] is False and topo["hosts"]["gpu-b"]["exists"] is True
    assert topo["hosts"]["pve-a"]["exists"] is True
    assert topology.vm_gpus(topo, "gpu-a") == [{"slot": "0000:42:00", "vendor": "10de", "device": "2204"}]
    assert topology.vm_gpus(topo, "gpu-b") == [{"slot": "0000:81:00", "vendor": None, "device": None}]
    assert topology.vm_gpus(topo, "nope") is None
    assert topo["pve_api"] == {"host": "pve.example.org"}


def test_the_topology_publishes_each_pve_hosts_vms_and_sysfs_root_for_vfio_preflight_and_gpu_vm():
    m = model({"pve_hosts": ["pve-a", "pve-b"], "gpu_vms": ["vm-2", "vm-1"]},
              **{"pve-a": {"llmstack_sysfs_root": "/srv/sysfs/pve-a"}, "pve-b": {},
                 "vm-1": {"gpu_vm_node": "pve-a", "gpu_vm_gpus": ["41:00"], "gpu_vm_numa_node": 0},
                 "vm-2": {"gpu_vm_node": "pve-a", "gpu_vm_gpus": ["42:00"], "gpu_vm_allow_shared_group": "true"}})
    topo, _problems = topology.build(m, {})
    assert topo["vm_plans"] == {
        "pve-a": [{"name": "vm-2", "gpus": ["42:00"], "numa_node": None, "allow_shared_group": True},
                  {"name": "vm-1", "gpus": ["41:00"], "numa_node": 0, "allow_shared_group": False}],
        "pve-b": []}
    assert topo["hosts"]["pve-a"]["sysfs_root"] == "/srv/sysfs/pve-a"
    assert topo["hosts"]["pve-b"]["sysfs_root"] == "/"
    assert "sysfs_root" not in topo["hosts"]["vm-1"]


def test_first_endpoint_and_vms_not_running_read_the_topology_for_the_roles():
    m = model({"langfuse": ["obs"], "observability": ["obs"], "gpu_vms": ["vm-1", "vm-2", "vm-3"]}, obs=OBS,
              **{"vm-1": {}, "vm-2": {}, "vm-3": {}})
    topo, _problems = topology.build(m, {"obs": dict(OBS_SETTINGS, langfuse_s3_port=9000)},
                                     vm_status={"vm-1": "running", "vm-2": "absent", "vm-3": "stopped"})
    web = topology.first_endpoint(topo, "langfuse", "langfuse-web", "obs")
    assert (web["address"], web["port"], web["variables"]["port"]) == ("10.0.10.14", 3000, "langfuse_port")
    assert topology.first_endpoint(topo, "langfuse", "langfuse-web", "vm-1") == {}
    assert topology.vms_not_running(topo, ["vm-3", "vm-1", "vm-2", "unknown"]) == ["vm-3", "vm-2"]
    assert topology.vms_not_running({}, ["vm-1"]) == []


def test_each_gpu_vm_carries_its_node_disk_and_api_for_the_guests_stage_without_the_secret():
    m = model({"pve_hosts": ["pve-a"], "gpu_vms": ["vm-1"]}, **{"pve-a": {}, "vm-1": {"gpu_vm_node": "pve-a"}})
    settings = {"vm-1": {"gpu_vm_node": "pve-a", "gpu_vm_pve_node": "pve-a", "gpu_vm_vmid": 120,
                         "gpu_vm_storage": "local-zfs", "gpu_vm_disk_gib": 128, "gpu_vm_disk_options": "ssd=1",
                         "gpu_vm_api_host": "pve.example.org", "gpu_vm_api_port": 8006,
                         "gpu_vm_api_user": "automation@pve", "gpu_vm_api_token_id": "llmstack",
                         "gpu_vm_api_validate_certs": True,
                         # Were the secrets in the settings, they would still stay out of the topology.
                         "gpu_vm_api_password": "pw-0123456789", "gpu_vm_api_token_secret": "ts-0123456789"}}
    topo, _problems = topology.build(m, settings)
    assert topo["hosts"]["vm-1"]["vm"] == {
        "node": "pve-a", "pve_node": "pve-a", "vmid": 120, "storage": "local-zfs", "disk_gib": 128,
        "disk_options": "ssd=1", "api": {"host": "pve.example.org", "port": 8006, "user": "automation@pve",
                                         "token_id": "llmstack", "validate_certs": True}}
    assert "0123456789" not in str(topo) and "vm" not in topo["hosts"]["pve-a"]
    assert not [n for n in topology.ROLE_SETTINGS["gpu_vm"] if "password" in n or "secret" in n]


def test_pve_firewall_without_the_nics_firewall_flag_is_refused_naming_both():
    m = model({"pve_hosts": ["pve-a"], "gpu_vms": ["vm-1", "vm-2"]},
              **{"pve-a": {}, "vm-1": {"gpu_vm_node": "pve-a"}, "vm-2": {"gpu_vm_node": "pve-a"}})
    settings = {"vm-1": {"gpu_vm_node": "pve-a", "gpu_vm_vmid": 120, "network_policy_pve_firewall": True,
                         "gpu_vm_nic_firewall": False},
                "vm-2": {"gpu_vm_node": "pve-a", "gpu_vm_vmid": 121, "network_policy_pve_firewall": "true",
                         "gpu_vm_nic_firewall": "true"}}
    _topo, problems = topology.build(m, settings)
    found = [p for p in problems if "network_policy_pve_firewall" in p]
    assert len(found) == 1 and found[0].startswith("host vm-1:") and "gpu_vm_nic_firewall" in found[0]


# ------------------------------------------------------------------------------------- PVE hosts and site ports
PVE_SERVICES = role_settings("network_policy", ["pve_services"])["pve_services"]
PVE = {"llmstack_interfaces": [{"vlan": "mgmt", "address": "10.0.10.2"}]}


def test_the_pve_hosts_services_are_endpoints_of_the_topology():
    """Issue #31: the PVE hosts had no endpoints, so the policy dropped their API, consoles, corosync and migration."""
    m = model({"pve_hosts": ["pve-a", "pve-b"]}, **{"pve-a": PVE, "pve-b": {
        "llmstack_interfaces": [{"vlan": "mgmt", "address": "10.0.10.3"}]}})
    settings = dict((h, {"network_policy_pve_services": PVE_SERVICES}) for h in ("pve-a", "pve-b"))
    topo, problems = topology.build(m, settings)
    assert problems == []
    mine = dict((e["service"], e) for e in topo["endpoints"] if e["host"] == "pve-a")
    assert sorted(mine) == ["corosync", "pve-api", "pve-migration", "pve-spiceproxy", "pve-vnc"]
    assert (mine["corosync"]["proto"], mine["corosync"]["port"], mine["corosync"]["port_end"]) == ("udp", 5405, 5412)
    assert mine["corosync"]["consumers"] == ["pve-a", "pve-b"] and "10.0.10.3" in mine["corosync"]["sources"]
    assert mine["pve-api"]["controller"] is True and mine["pve-api"]["admin"] is True
    assert (mine["pve-vnc"]["port"], mine["pve-vnc"]["port_end"], mine["pve-vnc"]["consumers"]) == (5900, 5999, [])
    assert "port_end" not in mine["pve-api"] and mine["pve-api"]["proto"] == "tcp"


def test_a_sites_own_ports_and_bad_entries_name_the_variable():
    m = model({"pve_hosts": ["pve-a"], "backup": ["pbs"]}, **{"pve-a": PVE, "pbs": {}})
    ceph = [{"service": "ceph-mon", "port": 3300, "consumers": ["pve_hosts"]},
            {"service": "nfs", "port": 2049, "sources": ["10.0.40.0/24"]}]
    topo, problems = topology.build(m, {"pve-a": {"network_policy_extra_endpoints": ceph}})
    assert problems == []
    nfs = topology.endpoint(topo, "site", "nfs", "pve-a")[0]
    assert nfs["sources"] == ["10.0.40.0/24"] and nfs["address"] == "0.0.0.0"
    bad = [{"service": "Ceph OSD", "port": 6800, "port_end": 6000, "proto": "sctp", "consumers": ["nobody"],
            "sources": ["a.b"], "admin": "yes", "colour": "red"}, "8006"]
    _topo, problems = topology.build(m, {"pve-a": {"network_policy_extra_endpoints": bad}})
    label = "host pve-a: network_policy_extra_endpoints"
    assert problems == [
        label + "[0]: unknown key(s) colour",
        label + "[0].service: 'Ceph OSD' is not a name (lower case letters, digits, - _ .)",
        label + "[0].proto: 'sctp' is not tcp or udp",
        label + "[0].port_end: 6000 is not a port from 6800 to 65535",
        label + "[0].consumers: 'nobody' is neither a group nor a host of the inventory",
        label + "[0].sources: must be a list of addresses or CIDRs",
        label + "[0].admin: must be true or false",
        label + "[1]: must be a mapping with service, port and consumers or sources"]


def test_a_port_range_collides_with_a_port_inside_it_of_the_same_protocol_only():
    m = model({"pve_hosts": ["pve-a"]}, **{"pve-a": PVE})
    extra = [{"service": "mine", "port": 5410, "consumers": ["pve_hosts"]},
             {"service": "mine-udp", "port": 5410, "proto": "udp", "consumers": ["pve_hosts"]}]
    _topo, problems = topology.build(m, {"pve-a": {"network_policy_pve_services": PVE_SERVICES,
                                                   "network_policy_extra_endpoints": extra}})
    assert problems == [
        "host pve-a: network_policy_pve_services[3].port (pve corosync) and network_policy_extra_endpoints[1].port "
        "(site mine-udp) both listen on 0.0.0.0 port 5410: move one (set network_policy_pve_services[3].port or "
        "network_policy_extra_endpoints[1].port)"]


def test_several_gateways_consume_the_first_ones_postgres_and_redis():
    """Issue #31: the shared PostgreSQL and Redis were no endpoints, so the policy cut the other gateways off."""
    gw2 = {"llmstack_interfaces": [{"vlan": "mgmt", "address": "10.0.10.13"}]}
    m = model({"llm_gateways": ["gw", "gw2"]}, gw=GATEWAY, gw2=gw2)
    base = {"litellm_bind_address": "127.0.0.1", "litellm_port": 4000, "litellm_shared_vlan": "mgmt"}
    topo, problems = topology.build(m, {"gw": dict(base), "gw2": dict(base)})
    assert problems == []
    shared = [(e["service"], e["host"], e["address"], e["port"], e["consumers"], e["sources"])
              for e in topo["endpoints"] if e["service"] in ("postgres", "redis")]
    assert shared == [("postgres", "gw", "10.0.10.12", 5432, ["gw2"], ["10.0.10.13"]),
                      ("redis", "gw", "10.0.10.12", 6379, ["gw2"], ["10.0.10.13"])]
    topo, _problems = topology.build(m, {"gw": dict(base, litellm_database=False), "gw2": dict(base)})
    assert [e["service"] for e in topo["endpoints"] if e["service"] in ("postgres", "redis")] == ["redis"]
    # One gateway: nothing is shared, nothing is published.
    topo, _problems = topology.build(model({"llm_gateways": ["gw"]}, gw=GATEWAY), {"gw": dict(base)})
    assert not [e for e in topo["endpoints"] if e["service"] in ("postgres", "redis")]


def test_nftables_and_pves_own_firewall_on_one_pve_host_are_refused():
    m = model({"pve_hosts": ["pve-a"]}, **{"pve-a": PVE})
    _topo, problems = topology.build(m, {"pve-a": {"network_policy_pve_host_firewall": True}})
    assert len(problems) == 1 and problems[0].startswith("host pve-a: network_policy_pve_host_firewall and "
                                                         "network_policy_nftables are both true")
    _topo, problems = topology.build(m, {"pve-a": {"network_policy_pve_host_firewall": True,
                                                   "network_policy_nftables": False}})
    assert problems == []
