"""module_utils.burnin: seed 000's burn-in table at every boundary, and the parsers on outputs recorded from public
sources (tests/fixtures/burnin/SOURCE says where each came from).

Expected verdicts come from the seed's table (§burn-in: < 83 °C pass, 83-89 watch, >= 90 fail; throttling < 5 %
watch, > 10 % fail; any XID fail; PCIe replays 1-10 watch, > 10 fail; any FAULTY fail), not from the code."""

import os

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin


def verdict(**gpu):
    return burnin.evaluate({"0": gpu})["gpus"]["0"]


@pytest.mark.parametrize("celsius, expected", [(82, "pass"), (82.9, "pass"), (83, "watch"), (89, "watch"),
                                               (89.9, "watch"), (90, "fail"), (97, "fail")])
def test_steady_temperature(celsius, expected):
    assert verdict(steady_temperature_c=celsius)["rows"]["temperature"]["verdict"] == expected


@pytest.mark.parametrize("percent, expected", [(0, "pass"), (0.5, "watch"), (4.9, "watch"), (5, "watch"),
                                               (10, "watch"), (10.1, "fail"), (100, "fail")])
def test_throttling_share_of_the_run(percent, expected):
    assert verdict(throttled_percent=percent)["rows"]["throttling"]["verdict"] == expected


@pytest.mark.parametrize("replays, expected", [(0, "pass"), (1, "watch"), (10, "watch"), (11, "fail")])
def test_pcie_replays(replays, expected):
    assert verdict(pcie_replays=replays)["rows"]["pcie_replay"]["verdict"] == expected


@pytest.mark.parametrize("xids, expected", [(0, "pass"), (1, "fail")])
def test_any_xid_fails(xids, expected):
    assert verdict(xid_errors=xids)["rows"]["xid"]["verdict"] == expected


def test_faulty_or_missing_from_gpu_burn_fails_and_a_gpu_without_data_has_no_rows():
    assert verdict(faulty=False)["rows"]["gpu_burn"]["verdict"] == "pass"
    assert verdict(faulty=True)["rows"]["gpu_burn"]["verdict"] == "fail"
    assert verdict(faulty=None)["rows"]["gpu_burn"]["verdict"] == "fail"      # not in the summary: did not run
    assert verdict() == {"verdict": "pass", "rows": {}}


def test_the_host_takes_its_worst_gpu_and_says_why():
    result = burnin.evaluate({"00000000:41:00.0": {"steady_temperature_c": 84, "pcie_replays": 0},
                              "00000000:61:00.0": {"steady_temperature_c": 70, "faulty": True}})
    assert result["verdict"] == "fail"
    assert result["gpus"]["00000000:41:00.0"]["verdict"] == "watch"
    assert result["reasons"] == ["GPU 00000000:41:00.0: temperature watch (84 °C)",
                                 "GPU 00000000:61:00.0: gpu_burn fail (FAULTY)"]


def test_thresholds_are_variables_and_bad_ones_are_named():
    assert verdict(steady_temperature_c=84)["verdict"] == "watch"
    assert burnin.evaluate({"0": {"steady_temperature_c": 84}}, {"temperature_watch_c": "85"})["verdict"] == "pass"
    with pytest.raises(burnin.BurninError) as caught:
        burnin.evaluate({}, {"temperature_watch_c": 95, "pcie_replay_fail": "lots", "hot": 1})
    text = "; ".join(caught.value.problems)
    assert "burnin_pcie_replay_fail: 'lots'" in text and "burnin_hot: not a threshold" in text
    with pytest.raises(burnin.BurninError, match="burnin_temperature_watch_c: 95 is above"):
        burnin.evaluate({}, {"temperature_watch_c": 95})


# The seed's logging loop: a date line and the header before every block of samples (the old name of the throttle
# reasons, as older drivers print it).
HEADER = ("timestamp, name, pci.bus_id, temperature.gpu, utilization.gpu [%], power.draw [W], clocks.sm [MHz], "
          "clocks_throttle_reasons.active")
SEED_LOOP = """=== Thu Dec  3 10:00:00 UTC 2026 ===
{header}
2026/12/03 10:00:00.123, NVIDIA GeForce RTX 3090, 00000000:41:00.0, 60, 100 %, 345.20 W, 1695 MHz, 0x0000000000000000
2026/12/03 10:00:00.125, NVIDIA GeForce RTX 3090, 00000000:61:00.0, 62, 100 %, 350.01 W, 1680 MHz, 0x0000000000000004
=== Thu Dec  3 10:00:05 UTC 2026 ===
{header}
2026/12/03 10:00:05.130, NVIDIA GeForce RTX 3090, 00000000:41:00.0, 80, 100 %, 349.90 W, 1695 MHz, 0x0000000000000000
2026/12/03 10:00:05.131, NVIDIA GeForce RTX 3090, 00000000:61:00.0, 91, 100 %, [N/A], 1400 MHz, 0x0000000000000020
=== Thu Dec  3 10:00:10 UTC 2026 ===
{header}
2026/12/03 10:00:10.140, NVIDIA GeForce RTX 3090, 00000000:41:00.0, 82, 100 %, 349.90 W, 1695 MHz, 0x0000000000000000
2026/12/03 10:00:10.141, NVIDIA GeForce RTX 3090, 00000000:61:00.0, 92, 100 %, 300.00 W, 1395 MHz, 0x0000000000000024
""".format(header=HEADER)


def test_the_seed_loops_csv_log_per_gpu():
    parsed = burnin.parse_smi_csv(SEED_LOOP)
    assert len(parsed["samples"]) == 6 and parsed["skipped"] == 0
    assert parsed["fields"][-1] == "clocks_event_reasons.active"          # the old name read as the new one
    assert parsed["samples"][3]["power.draw"] is None                      # [N/A]
    summary = burnin.summarise_smi(parsed["samples"])
    a, b = summary["00000000:41:00.0"], summary["00000000:61:00.0"]
    # Second half of 3 samples: the last two; their median (lower middle) is 80 / 91.
    assert (a["steady_temperature_c"], a["max_temperature_c"], b["steady_temperature_c"]) == (80, 82, 91)
    # 61:00: thermal slowdown (0x20) in 2 of 3 samples, the power cap (0x4) in 2 of 3.
    assert (b["throttled_percent"], b["power_capped_percent"]) == (66.67, 66.67)
    assert (a["throttled_percent"], a["power_capped_percent"]) == (0, 0)
    result = burnin.evaluate(summary)
    assert result["gpus"]["00000000:41:00.0"]["verdict"] == "pass"
    assert result["gpus"]["00000000:61:00.0"]["rows"]["temperature"]["verdict"] == "fail"
    assert result["gpus"]["00000000:61:00.0"]["rows"]["power_cap"]["verdict"] == "watch"


# ---------------------------------------------------------------- recorded outputs (tests/fixtures/burnin/SOURCE)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "burnin")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_gpu_burn_ok():
    parsed = burnin.parse_gpu_burn(fixture("gpu-burn-ok.txt"))
    assert (parsed["complete"], parsed["tested"], parsed["percent"]) == (True, 1, 100.0)
    gpu = parsed["gpus"]["0"]
    assert (gpu["name"], gpu["result"], gpu["errors"], gpu["max_temperature_c"], gpu["faulty"]) == (
        "NVIDIA GeForce RTX 3060", "OK", 0, 70, False)
    assert burnin.evaluate({"0": {"faulty": gpu["faulty"]}})["verdict"] == "pass"


def test_gpu_burn_faulty_is_a_fail_although_gpu_burn_exits_0():
    parsed = burnin.parse_gpu_burn(fixture("gpu-burn-faulty.txt"))
    gpu = parsed["gpus"]["0"]
    assert (gpu["name"], gpu["result"], gpu["errors"], gpu["faulty"]) == ("Tesla T4", "FAULTY", 30539726, True)
    result = burnin.evaluate({"0": {"faulty": gpu["faulty"], "steady_temperature_c": gpu["max_temperature_c"]}})
    assert result["verdict"] == "fail" and result["reasons"] == ["GPU 0: gpu_burn fail (FAULTY)"]


def test_gpu_burn_legacy_format_with_negative_error_counts():
    parsed = burnin.parse_gpu_burn(fixture("gpu-burn-faulty-16gpu-legacy.txt"))
    assert parsed["tested"] == 16 and sorted(parsed["gpus"], key=int) == [str(i) for i in range(16)]
    assert all(g["result"] == "FAULTY" and g["faulty"] for g in parsed["gpus"].values())
    assert parsed["gpus"]["1"]["errors"] == -524288000 and parsed["gpus"]["0"]["errors"] == 0
    assert parsed["gpus"]["15"]["max_temperature_c"] == 52


def test_gpu_burn_cut_off_or_missing_a_gpu_in_its_summary_fails():
    text = fixture("gpu-burn-2gpu-progress-partial.txt")
    parsed = burnin.parse_gpu_burn(text)
    assert parsed["complete"] is False and parsed["percent"] == 90.0
    assert [(g["name"], g["max_temperature_c"], g["faulty"]) for _i, g in sorted(parsed["gpus"].items())] == [
        ("NVIDIA GeForce RTX 4090", 69, None), ("NVIDIA GeForce RTX 4090", 67, None)]
    # The same run with a summary that names GPU 0 only (gpu-burn lists the GPUs it could start).
    parsed = burnin.parse_gpu_burn(text + "\nKilling processes.. done\n\nTested 1 GPUs:\n\tGPU 0: OK\n")
    assert (parsed["gpus"]["0"]["faulty"], parsed["gpus"]["1"]["faulty"]) == (False, None)
    result = burnin.evaluate(dict((i, {"faulty": g["faulty"]}) for i, g in parsed["gpus"].items()))
    assert result["verdict"] == "fail"
    assert result["reasons"] == ["GPU 1: gpu_burn fail (missing from gpu-burn's summary)"]


def test_nvbandwidth_host_to_device_ce_and_sm():
    ce = burnin.parse_nvbandwidth(fixture("nvbandwidth-h2d-ce.txt"))
    assert ce["version"] == "v0.5" and ce["devices"] == {"0": "NVIDIA A10"}
    assert ce["tests"]["host_to_device_memcpy_ce"]["engine"] == "CE"
    assert ce["tests"]["host_to_device_memcpy_ce"]["matrix"] == {"0": {"0": 25.17}}
    assert ce["tests"]["host_to_device_memcpy_ce"]["sum"] == 25.17
    sm = burnin.parse_nvbandwidth(fixture("nvbandwidth-h2d-sm.txt"))
    assert list(sm["tests"]) == ["host_to_device_memcpy_sm"]
    assert sm["tests"]["host_to_device_memcpy_sm"]["engine"] == "SM"
    assert sm["tests"]["host_to_device_memcpy_sm"]["sum"] == 25.13


def test_nvbandwidth_device_to_device_matrix_with_na_diagonal():
    parsed = burnin.parse_nvbandwidth(fixture("nvbandwidth-d2d-read-ce.txt"))
    test = parsed["tests"]["device_to_device_memcpy_read_ce"]
    assert test["columns"] == ["0", "1", "2", "3", "4", "5"] and sorted(test["matrix"]) == test["columns"]
    assert [test["matrix"][str(i)][str(i)] for i in range(6)] == [None] * 6
    assert (test["matrix"]["0"]["1"], test["matrix"]["3"]["0"], test["matrix"]["5"]["4"]) == (26.34, 21.82, 26.35)
    assert test["sum"] == 715.53


def test_nvbandwidth_old_and_new_layouts():
    old = burnin.parse_nvbandwidth(fixture("nvbandwidth-v0.2-8gpu-partial.txt"))
    assert old["version"] == "v0.2" and len(old["devices"]) == 8
    assert old["tests"]["host_to_device_memcpy_ce"]["matrix"]["0"]["3"] == 26.30
    assert old["tests"]["host_to_device_memcpy_ce"]["sum"] == 205.04
    new = burnin.parse_nvbandwidth(fixture("nvbandwidth-v0.10-7gpu-run.txt"))
    names = set(new["tests"])
    bidirectional = "device_to_device_bidirectional_memcpy_read_ce"
    assert {bidirectional + "_read1", bidirectional + "_read2", bidirectional + "_total"} <= names
    assert all(len(new["tests"][name]["matrix"]) == 7 for name in names if name.startswith("device_to_device"))


def test_dcgmi_diag_pass_and_fail():
    passed = burnin.parse_dcgmi_diag(fixture("dcgmi-diag-r3-pass.txt"))
    assert passed["verdict"] == "pass" and passed["metadata"]["DCGM Version"] == "3.3.9"
    assert passed["tests"]["EUD Test"]["results"] == ["Skip - All"]
    assert passed["tests"]["EUD Test"]["verdict"] == "pass"
    failed = burnin.parse_dcgmi_diag(fixture("dcgmi-diag-r3-fail.txt"))
    assert failed["verdict"] == "fail"
    assert [(n, t["failed_gpus"]) for n, t in failed["tests"].items() if t["verdict"] == "fail"] == [
        ("Targeted Power", [1])]
    assert failed["tests"]["Targeted Power"]["results"] == ["Pass - GPUs: 0, 2, 3", "Fail - GPU: 1"]
    # The warning, wrapped mid-word in the table, reads as one sentence again.
    assert failed["warnings"] == ["GPU 1 Max power of 224.1 did not reach desired power minimum target_power_min_ratio "
                                  "of 224.2 for GPU 1 Verify that the clock speeds and GPU utilization are high."]


def test_dcgmi_diag_dcgm4_layouts():
    four = burnin.parse_dcgmi_diag(fixture("dcgmi-diag-dcgm4.2.3-partial.txt"))
    assert four["metadata"]["DCGM Version"] == "4.2.3"
    assert four["tests"]["software"]["results"][1:] == ["GPU0: Pass", "GPU1: Pass", "GPU2: Pass", "GPU3: Pass"]
    fragment = burnin.parse_dcgmi_diag(fixture("dcgmi-diag-r2-fail-fragment.txt"))
    assert fragment["tests"]["GPU Memory"]["failed_gpus"] == [0] and fragment["verdict"] == "fail"
    assert fragment["warnings"][0].startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds")
    assert burnin.parse_dcgmi_diag("| memory | GPU0: Pass |\n|        | GPU1: Fail |\n")["tests"]["memory"][
        "failed_gpus"] == [1]


@pytest.mark.parametrize("name, expected", [
    ("vllm-benchmark-serving-v0.8.4.txt", {
        "successful_requests": 500, "mean_ttft_ms": 3401.63, "p99_itl_ms": 218.51,
        "total_token_throughput_tok_s": 1119.89, "request_throughput_req_s": 2.51}),
    ("vllm-bench-serve-v0.11plus.txt", {
        "successful_requests": 1, "failed_requests": 0, "mean_ttft_ms": 83.91,
        "total_token_throughput_tok_s": 172.39, "peak_concurrent_requests": 1.0}),
    ("vllm-bench-serve-v0.9-dev.txt", {"successful_requests": 1000, "mean_ttft_ms": 9626.13}),
    # the real tool, recorded in the lab against the real vLLM 0.32.0 (CPU backend)
    ("vllm-bench-serve-0.32.0-cpu.txt", {
        "successful_requests": 20, "failed_requests": 0, "total_generated_tokens": 320,
        "peak_output_token_throughput_tok_s": 320.0, "mean_ttft_ms": 205.22, "p99_itl_ms": 57.93}),
])
def test_vllm_bench_serve_result_blocks(name, expected):
    metrics = burnin.parse_vllm_bench(fixture(name))["metrics"]
    assert dict((key, metrics.get(key)) for key in expected) == expected


def test_vllm_bench_serve_older_block_has_input_throughput_and_no_block_is_empty():
    metrics = burnin.parse_vllm_bench(fixture("vllm-benchmark-serving-input-throughput-variant.txt"))["metrics"]
    assert "input_token_throughput_tok_s" in metrics and "total_token_throughput_tok_s" not in metrics
    no_block = "INFO: starting\nTraceback (most recent call last):\n"
    assert burnin.parse_vllm_bench(no_block) == {"metrics": {}, "labels": {}}


def test_nvidia_smi_csv_recorded_on_an_h200_and_by_index():
    parsed = burnin.parse_smi_csv(fixture("nvidia-smi-query-timestamp.csv"))
    assert len(parsed["samples"]) == 6 and parsed["samples"][0]["memory.used"] == 20747
    summary = burnin.summarise_smi(parsed["samples"])
    assert sorted(summary) == ["00000000:5D:00.0", "00000000:9B:00.0"]
    assert summary["00000000:5D:00.0"]["max_temperature_c"] == 68 and summary["00000000:5D:00.0"]["samples"] == 3
    assert summary["00000000:5D:00.0"]["throttled_percent"] is None          # the log has no throttle reasons
    by_index = burnin.summarise_smi(burnin.parse_smi_csv(fixture("nvidia-smi-query-power-watch.csv"))["samples"])
    assert sorted(by_index) == [str(i) for i in range(7)] and by_index["4"]["max_temperature_c"] == 42


def test_a_log_without_an_id_column_keeps_its_gpus_apart():
    """nvidia-smi-query.csv (a GTX 1080 Ti and a GTX 1060, no index or bus id in the query): one GPU per line of
    each block, not one GPU with both cards' samples."""
    summary = burnin.summarise_smi(burnin.parse_smi_csv(fixture("nvidia-smi-query.csv"))["samples"])
    assert sorted(summary) == ["0", "1"] and [summary[k]["samples"] for k in ("0", "1")] == [1, 1]
    assert summary["0"]["name"] != summary["1"]["name"]


@pytest.mark.parametrize("text", [
    "| memory | GPU0: |\n",                                      # cut off after the GPU
    "Running x.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n   0\n 0   -\n\nSUM x .\n",
    "..%  proc'd: 1 (2 Gflop/s)   errors: 0   temps: 50 C\n",
    "",
])
def test_cut_or_garbled_output_is_data_or_nothing_never_an_exception(text):
    for parse in (burnin.parse_gpu_burn, burnin.parse_nvbandwidth, burnin.parse_dcgmi_diag, burnin.parse_vllm_bench,
                  burnin.parse_smi_csv):
        parse(text)
    assert burnin.parse_nvbandwidth(text.replace("SUM x .", "SUM x 1.5")).get("tests", {}).get("x", {}).get(
        "matrix", {"0": {"0": None}}) == {"0": {"0": None}}


def test_measurements_of_the_wrong_type_are_named():
    with pytest.raises(burnin.BurninError) as caught:
        burnin.evaluate({"0": {"xid_errors": "3"}, "1": None, "2": {"faulty": "yes"}})
    assert caught.value.problems == ["GPU 0: xid_errors is '3', not a number",
                                     "GPU 1: its measurements are null, not a mapping",
                                     "GPU 2: faulty is 'yes', not true, false or null"]
