"""module_utils.nvidia: nvidia-smi topo -m, -q -x and --query-gpu csv, on every fixture of tests/fixtures/nvidia
(SOURCE there says where each comes from). Expected values are read off the fixtures by eye."""

import os

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import nvidia

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nvidia")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_seed_platform_a_is_all_phb_on_one_numa_node():
    topo = nvidia.parse_topology(fixture("topo-platform-a.txt"))
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"] and topo["nics"] == []
    assert topo["links"]["GPU0"] == {"GPU1": "PHB", "GPU2": "PHB", "GPU3": "PHB"}
    assert set(v for row in topo["links"].values() for v in row.values()) == {"PHB"}
    assert topo["cpu_affinity"] == dict(("GPU%d" % i, "0-31") for i in range(4))
    assert topo["numa_affinity"]["GPU3"] == "0" and topo["gpu_numa_id"]["GPU2"] == "N/A"


def test_seed_platform_b_excerpt_is_not_square():
    topo = nvidia.parse_topology(fixture("topo-platform-b-excerpt.txt"))
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)]
    assert sorted(topo["links"]) == ["GPU0", "GPU1"]
    assert topo["links"]["GPU0"] == {"GPU1": "NV2", "GPU2": "NV2", "GPU3": "NV1", "GPU4": "PHB", "GPU5": "PHB",
                                     "GPU6": "PHB", "GPU7": "NV1"}
    assert topo["links"]["GPU1"]["GPU6"] == "NV1" and topo["cpu_affinity"]["GPU1"] == "0-39"


def test_nic_rows_and_columns_and_a_missing_numa_column():
    topo = nvidia.parse_topology(fixture("topo-nvlink-nic-old.txt"))
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"] and topo["nics"] == ["mlx5_0"]
    assert topo["links"]["GPU0"] == {"GPU1": "NV1", "GPU2": "NV1", "GPU3": "NV2", "mlx5_0": "PIX"}
    assert topo["links"]["mlx5_0"]["GPU3"] == "SYS" and "mlx5_0" not in topo["cpu_affinity"]
    assert topo["cpu_affinity"]["GPU2"] == "20-39" and topo["numa_affinity"] == {}


def test_spaces_instead_of_tabs_and_the_nic_legend():
    topo = nvidia.parse_topology(fixture("topo-nic-spaces.txt"))
    assert topo["gpus"] == ["GPU0", "GPU1"] and topo["nics"] == ["NIC0", "NIC1"]
    assert topo["links"]["GPU0"] == {"GPU1": "NV12", "NIC0": "NODE", "NIC1": "SYS"}
    assert topo["cpu_affinity"] == {"GPU0": "0-31,64-95", "GPU1": "32-63,96-127"}
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}


@pytest.mark.parametrize("text", ["", "nvidia-smi: command not found", "Legend:\n  X = Self\n"])
def test_not_a_topology_is_an_error(text):
    with pytest.raises(nvidia.NvidiaParseError):
        nvidia.parse_topology(text)


def test_link_ranks_put_nvlink_above_pcie_and_more_links_higher():
    order = ["SYS", "NODE", "PHB", "PXB", "PIX", "NV1", "NV2", "NV12"]
    assert sorted(order, key=nvidia.link_rank) == order
    assert nvidia.is_nvlink("NV4") and not nvidia.is_nvlink("PHB")


def test_xml_gives_index_name_uuid_bus_and_memory():
    data = nvidia.parse_xml(fixture("smi-q-x-2x3090.xml"))
    assert (data["driver_version"], data["cuda_version"]) == ("550.163.01", "12.4")
    first, second = data["gpus"]
    assert (first["index"], first["name"], first["bus_id"], first["memory_mib"]) == \
        (0, "NVIDIA GeForce RTX 3090", "0000:41:00.0", 24576)
    assert first["uuid"].endswith("000000000041") and first["link_width"] == "16x" and first["serial"] is None
    assert (second["index"], second["bus_id"], second["ecc_mode"]) == (1, "0000:61:00.0", None)


@pytest.mark.parametrize("text", ["<html/>", "not xml at all", ""])
def test_not_nvidia_xml_is_an_error(text):
    with pytest.raises(nvidia.NvidiaParseError):
        nvidia.parse_xml(text)


def test_query_csv_with_header_and_units():
    rows = nvidia.parse_query_csv(fixture("query-gpu.csv"))
    assert [(r["index"], r["memory_mib"], r["compute_capability"], r["bus_id"]) for r in rows] == [
        (0, 24576, "8.6", "0000:41:00.0"), (1, 24576, "8.6", "0000:61:00.0")]


def test_query_csv_without_header_needs_the_fields():
    fields = "index,name,uuid,pci.bus_id,memory.total,driver_version,compute_cap"
    rows = nvidia.parse_query_csv(fixture("query-gpu-noheader.csv"), fields)
    assert rows[0]["name"] == "Tesla V100-SXM2-32GB" and rows[0]["memory_mib"] == 32768
    assert rows[1]["bus_id"] == "0000:1b:00.0" and rows[1]["compute_capability"] == "7.0"
    with pytest.raises(nvidia.NvidiaParseError, match="pass the --query-gpu fields"):
        nvidia.parse_query_csv(fixture("query-gpu-noheader.csv"))
    with pytest.raises(nvidia.NvidiaParseError, match="has 7 values for 2 fields"):
        nvidia.parse_query_csv(fixture("query-gpu-noheader.csv"), "index,name")


def test_merge_completes_the_xml_with_the_csv_compute_capability():
    merged = nvidia.merge(nvidia.parse_xml(fixture("smi-q-x-2x3090.xml")),
                          nvidia.parse_query_csv(fixture("query-gpu.csv")),
                          nvidia.parse_topology(fixture("topo-platform-a.txt")))
    assert [g["compute_capability"] for g in merged["gpus"]] == ["8.6", "8.6"]
    assert merged["gpus"][1]["name"] == "NVIDIA GeForce RTX 3090"
    assert merged["topology"]["links"]["GPU0"]["GPU1"] == "PHB"


def test_bar1_against_the_vram_from_recorded_outputs():
    """tests/fixtures/nvidia/smi-q-x-bar1-public.xml (SOURCE): 256 MiB BAR1 on an 8 GiB card is Resizable BAR off;
    a BAR1 as large as the VRAM, or larger, is not named."""
    with open(os.path.join(FIXTURES, "smi-q-x-bar1-public.xml")) as handle:
        gpus = nvidia.parse_xml(handle.read())["gpus"]
    assert [(g["memory_mib"], g["bar1_mib"]) for g in gpus] == [(8192, 256), (23034, 32768), (8188, 8192)]
    notes = nvidia.bar1_notes(gpus)
    assert len(notes) == 1 and notes[0].startswith("GPU 0 (")
    assert "BAR1 256 MiB is smaller than its 8192 MiB" in notes[0]
    assert nvidia.bar1_notes([{"index": 0, "memory_mib": 24576}]) == [], "no BAR1 reading: nothing to say"


def read_fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_nvlink_status_from_recorded_outputs():
    """Seed 000: `nvidia-smi nvlink -s` shows 25.781 GB/s per link on the V100 SXM2 board (SOURCE)."""
    v100 = nvidia.parse_nvlink_status(read_fixture("nvlink-s-v100.txt"))
    assert sorted(v100) == [0, 1] and v100[0]["name"] == "Tesla V100-SXM2-16GB"
    assert v100[1]["links"] == dict((link, 25.781) for link in range(6))
    assert nvidia.nvlink_problems(v100) == []
    broken = nvidia.parse_nvlink_status(read_fixture("nvlink-s-inactive.txt"))
    assert broken[1]["links"] == {0: 25.781, 1: None}
    problems = nvidia.nvlink_problems(broken)
    assert len(problems) == 1 and problems[0].startswith("GPU 1 (Quadro RTX 8000): NVLink link(s) 1 inactive")


def test_nvlink_links_topo_shows_must_be_up():
    """topo -m NV2 between two GPUs: each must report two links up; a board without NVLink reports none and is
    judged only where topo -m shows NVLink."""
    topology = {"links": {"GPU0": {"GPU1": "NV2"}, "GPU1": {"GPU0": "NV2"}}}
    two = {0: {"name": "a", "links": {0: 25.781, 1: 25.781}}, 1: {"name": "b", "links": {0: 25.781, 1: 25.781}}}
    assert nvidia.nvlink_problems(two, topology) == []
    one = {0: two[0], 1: {"name": "b", "links": {0: 25.781}}}
    problems = nvidia.nvlink_problems(one, topology)
    assert len(problems) == 1 and problems[0].startswith("GPU 1:") and "2 NVLink" in problems[0]
    pcie = {"links": {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}}}
    assert nvidia.nvlink_problems(nvidia.parse_nvlink_status("GPU 0: RTX 3090\nGPU 1: RTX 3090\n"), pcie) == []
