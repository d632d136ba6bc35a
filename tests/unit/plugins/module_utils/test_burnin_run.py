"""module_utils.burnin_run: which stages run, how a stage is started and picked up again (never two burns), what
a finished stage's files say, the report data and the shapes of the burnin_parse / burnin_evaluate modules.

Stage files are built from outputs recorded from public sources (tests/fixtures/burnin, SOURCE) and hand-written
kernel/nvidia-smi lines in their documented formats; expected verdicts come from seed 000's table (< 83 °C pass,
83-89 watch, >= 90 fail; replays 1-10 watch, > 10 fail; any XID fail; any FAULTY fail), not from the code."""

import json
import os

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin_run

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "burnin")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


SETTINGS = {"stages": ["60s", "10min"], "gpu_burn_dir": "/opt/gpu-burn", "tools_install": False,
            "nvbandwidth_tests": ["host_to_device_memcpy_ce"]}


# ---------------------------------------------------------------- which stages, which commands

def test_tags_name_the_stages_else_the_setting_in_the_seeds_order():
    assert burnin_run.select_stages(["burnin"], ["dcgmi_diag", "60s"]) == ["60s", "dcgmi_diag"]
    assert burnin_run.select_stages(["burnin_1h"], ["60s"]) == ["1h"]
    assert burnin_run.select_stages(["burnin_soak", "burnin_60s"], ["10min"]) == ["60s", "soak"]


def test_unknown_stages_and_settings_are_named():
    with pytest.raises(burnin_run.BurninRunError) as err:
        burnin_run.plan(["all"], dict(SETTINGS, stages=["60s", "warmup"], poll_interval=0, fail_on="often",
                                      stage_seconds={"60s": "a minute"}), {"temperature_fail_c": "hot"})
    text = " ".join(err.value.problems)
    for expected in ("burnin_stages: 'warmup' is not a stage", "burnin_poll_interval: 0",
                     "burnin_fail_on: 'often'", "burnin_stage_seconds.60s: 'a minute'",
                     "burnin_temperature_fail_c: 'hot'"):
        assert expected in text


def test_a_negative_poll_margin_is_refused():
    with pytest.raises(burnin_run.BurninRunError) as err:
        burnin_run.plan(["all"], dict(SETTINGS, poll_margin=-5))
    assert err.value.problems == ["burnin_poll_margin: -5 is not a whole number of seconds >= 0"]


def test_building_needs_the_archives_checksum():
    with pytest.raises(burnin_run.BurninRunError) as err:
        burnin_run.plan(["all"], dict(SETTINGS, tools_install=True, gpu_burn_archive_url="http://x/a.tgz",
                                      gpu_burn_archive_sha256="abc"))
    assert "burnin_gpu_burn_archive_url: 'http://x/a.tgz' is not an https://" in err.value.problems[0]
    assert "burnin_gpu_burn_archive_sha256: 'abc' is not the archive's sha256" in err.value.problems[1]
    plan = burnin_run.plan(["all"], dict(SETTINGS, tools_install=True,
                                         gpu_burn_archive_url="https://example.invalid/gpu-burn.tar.gz",
                                         gpu_burn_archive_sha256="a" * 64))
    assert plan["build"] == ["gpu_burn"]


@pytest.mark.parametrize("key, directory", [("gpu_burn", "/opt"), ("gpu_burn", "/root"), ("gpu_burn", "/etc/ssh"),
                                            ("nvbandwidth", "/usr/local"), ("nvbandwidth", "/home/ops")])
def test_a_tool_directory_the_build_would_wipe_is_refused(key, directory):
    """A new archive makes the role remove the tool's directory with everything in it (build.yml): only a
    directory a removal may take is accepted, named by its variable (it was only required to be absolute)."""
    archives = {"%s_archive_url" % key: "https://example.invalid/a.tar.gz", "%s_archive_sha256" % key: "a" * 64,
                "%s_dir" % key: directory}
    stages = ["60s"] if key == "gpu_burn" else ["nvbandwidth"]
    with pytest.raises(burnin_run.BurninRunError) as err:
        burnin_run.plan(["all"], dict(SETTINGS, stages=stages, tools_install=True, **archives))
    assert any(p.startswith("burnin_%s_dir: '%s' is not a directory this collection would remove" % (key, directory))
               for p in err.value.problems), err.value.problems
    # Not built here (tools_install false): the directory is only read, and stays allowed.
    assert burnin_run.plan(["all"], dict(SETTINGS, stages=stages, tools_install=False, **archives))["build"] == []


def test_plan_commands_lengths_and_polls():
    plan = burnin_run.plan(["all"], dict(SETTINGS, stages=["60s", "10min", "nvbandwidth", "dcgmi_diag"],
                                         stage_seconds={"10min": "120"}, poll_interval=30, poll_margin=600,
                                         dcgmi_diag_level=3, gpu_burn_doubles="True"))
    assert plan["stages"] == ["60s", "10min", "nvbandwidth", "dcgmi_diag"]
    assert plan["plans"]["60s"]["argv"] == ["/opt/gpu-burn/gpu_burn", "-d", "60"]
    assert plan["plans"]["10min"]["argv"][-1] == "120"
    assert plan["plans"]["60s"]["chdir"] == "/opt/gpu-burn"
    assert plan["plans"]["60s"]["retries"] == 22          # (60 + 600) / 30
    assert plan["plans"]["60s"]["sample_interval"] == 5 and plan["plans"]["nvbandwidth"]["sample_interval"] == 0
    assert plan["plans"]["nvbandwidth"]["argv"] == ["nvbandwidth", "-t", "host_to_device_memcpy_ce"]
    assert plan["plans"]["dcgmi_diag"]["argv"] == ["dcgmi", "diag", "-r", "3"]
    assert plan["stage_tools"][2] == {"name": "nvbandwidth", "tool": "nvbandwidth"}


def test_vllm_bench_needs_its_command():
    with pytest.raises(burnin_run.BurninRunError) as err:
        burnin_run.plan(["burnin_vllm_bench"], SETTINGS)
    assert "burnin_vllm_bench_argv: None is not a non-empty list" in err.value.problems[0]


# ---------------------------------------------------------------- never two burns

@pytest.mark.parametrize("files, active, rerun, expected", [
    (set(), False, False, "start"),
    ({"argv.json"}, True, False, "wait"),                        # started, unit running: wait for it
    ({"argv.json", "started_at"}, True, True, "wait"),            # even with rerun: never a second burn
    ({"argv.json", "started_at", "exit_status"}, False, False, "keep"),
    ({"argv.json", "started_at", "exit_status"}, False, True, "restart"),
    ({"argv.json", "started_at"}, False, False, "restart"),       # cut off (reboot): archived and started again
])
def test_decide(files, active, rerun, expected):
    assert burnin_run.decide(files, active, rerun) == expected


def test_systemd_run_is_a_transient_unit_outside_the_session():
    argv = burnin_run.systemd_run_argv("1h", "/var/lib/llmstack/burnin/1h", "/usr/local/libexec/run",
                                       ["/opt/gpu-burn/gpu_burn", "3600"], chdir="/opt/gpu-burn", sample_interval=5)
    assert argv[:3] == ["systemd-run", "--unit", "llmstack-burnin-1h.service"]
    assert "--collect" in argv and "--scope" not in argv
    assert argv[argv.index("--working-directory") + 1] == "/opt/gpu-burn"
    tail = argv[argv.index("--") + 1:]
    assert tail[:4] == ["/usr/local/libexec/run", "/var/lib/llmstack/burnin/1h", "5", burnin_run.SMI_FIELDS]
    assert tail[4:] == ["--", "/opt/gpu-burn/gpu_burn", "3600"]


def test_a_stage_that_ends_between_two_looks_is_not_taken_for_cut_off():
    """The unit is asked first, the files read after; a stage whose unit is gone and whose files have no exit status
    is read again before anything is decided (it may have just written it)."""
    state = {"reads": 0}
    finished = {"argv.json": "[]", "started_at": "1", "finished_at": "9", "exit_status": "0"}

    def read_files():
        state["reads"] += 1
        # The first read still sees the stage running; by the second one it has ended.
        return {"argv.json": "[]", "started_at": "1"} if state["reads"] == 1 else finished

    files, active = burnin_run.observe(read_files, lambda: False)
    assert (files, active) == (finished, False)
    assert burnin_run.decide(set(files), active) == "keep"
    # A unit still active: one read, and it is waited for.
    state["reads"] = 0
    files, active = burnin_run.observe(read_files, lambda: True)
    assert state["reads"] == 1 and burnin_run.decide(set(files), active, rerun=True) == "wait"


def test_archive_names():
    taken = {"/s/60s.1700", "/s/60s.1700.1"}
    finished = {"exit_status": "0", "finished_at": "1700\n"}
    assert burnin_run.archive_path("/s/60s", set(finished), finished, taken.__contains__) == "/s/60s.1700.2"
    cut = {"argv.json": "[]", "started_at": "1600"}
    assert burnin_run.archive_path("/s/60s", set(cut), cut, taken.__contains__) == "/s/60s.cut-1600"
    assert burnin_run.archive_path("/s/1h", {"argv.json"}, {}, taken.__contains__) == "/s/1h.cut-unknown"


def test_unit_state():
    assert burnin_run.unit_is_active(burnin_run.parse_systemctl_show("ActiveState=active\nSubState=running\n"))
    assert not burnin_run.unit_is_active(burnin_run.parse_systemctl_show("ActiveState=inactive\nSubState=dead"))
    assert not burnin_run.unit_is_active(burnin_run.parse_systemctl_show(""))


# ---------------------------------------------------------------- a finished stage

def smi_xml(gpus):
    """nvidia-smi -q -x with the elements the stage reads (nvsmi_device dtd names): uuid, bus id, replay counter."""
    body = "".join('<gpu id="%s"><product_name>%s</product_name><uuid>%s</uuid><pci><pci_bus_id>%s</pci_bus_id>'
                   "<replay_counter>%d</replay_counter></pci></gpu>" % (bus, name, uuid, bus, replays)
                   for bus, name, uuid, replays in gpus)
    return "<nvidia_smi_log><driver_version>580.95.05</driver_version>%s</nvidia_smi_log>" % body


def uuid_of(burn):
    return "GPU-" + fixture(burn).split("(UUID: GPU-", 1)[1].split(")", 1)[0]


def smi_csv(bus, temperatures, reasons="0x0000000000000000"):
    lines = ["timestamp, name, gpu_bus_id, temperature.gpu, power.draw [W], clocks.sm [MHz], "
             "clocks_event_reasons.active"]
    for second, temp in enumerate(temperatures):
        line = "2026/12/04 10:00:%02d.000, Tesla T4, %s, %d, 70.00 W, 1590 MHz, %s" % (second, bus, temp, reasons)
        lines.append(line)
    return "\n".join(lines) + "\n"


def stage_files(burn, temps, replays=(0, 0), xid=""):
    return {"argv.json": "[]", "started_at": "1000", "finished_at": "1600", "exit_status": "0",
            "output.log": fixture(burn), "smi.csv": smi_csv("00000000:41:00.0", temps),
            "before.xml": smi_xml([("00000000:41:00.0", "Tesla T4", uuid_of(burn), replays[0])]),
            "after.xml": smi_xml([("00000000:41:00.0", "Tesla T4", uuid_of(burn), replays[1])]), "xid.log": xid}


def test_gpu_burn_faulty_with_exit_status_0_fails_and_is_keyed_by_bus_id():
    result = burnin_run.stage_result("60s", "gpu_burn", stage_files("gpu-burn-faulty.txt", [60, 61, 62, 62]))
    assert result["state"] == "finished" and result["exit_status"] == 0 and result["duration_s"] == 600
    assert result["verdict"] == "fail"
    assert result["reasons"] == ["GPU 0000:41:00.0: gpu_burn fail (FAULTY)"]


@pytest.mark.parametrize("temps, replays, xid, expected", [
    ([40, 82, 82, 82], (5, 5), "", "pass"),
    ([40, 83, 83, 83], (5, 5), "", "watch"),
    ([40, 90, 90, 90], (5, 5), "", "fail"),
    ([40, 70, 70, 70], (5, 15), "", "watch"),       # 10 replays during the run
    ([40, 70, 70, 70], (5, 16), "", "fail"),        # 11
    ([40, 70, 70, 70], (5, 5), "[ 812.3] NVRM: Xid (PCI:0000:41:00): 79, pid=1234, GPU has fallen off the bus.\n",
     "fail"),
    ([40, 70, 70, 70], (5, 5), "[ 812.3] NVRM: Xid (PCI:0000:61:00): 79, pid=1234, GPU has fallen off the bus.\n",
     "pass"),                                       # another GPU's Xid
])
def test_a_clean_burn_judged_by_the_seeds_table(temps, replays, xid, expected):
    files = stage_files("gpu-burn-ok-a400.txt", temps, replays, xid)
    assert burnin_run.stage_result("10min", "gpu_burn", files)["verdict"] == expected


def test_gpu_burn_uuids_map_through_the_csv_when_the_xml_is_missing():
    """nvidia-smi -q -x could not be read (empty files): the CSV's uuid column maps gpu-burn's GPU to its bus id; a
    clean run passes. Without any UUID the bus id cannot be matched: the GPU is judged on its readings, never failed
    as "missing from gpu-burn's summary"."""
    files = stage_files("gpu-burn-ok-a400.txt", [70, 70, 70])
    files["before.xml"] = files["after.xml"] = ""
    uuid = uuid_of("gpu-burn-ok-a400.txt")
    with_uuid = smi_csv("00000000:41:00.0", [70, 70, 70]).replace("timestamp, name,", "timestamp, uuid, name,")
    with_uuid = with_uuid.replace("Tesla T4,", "%s, Tesla T4," % uuid)
    result = burnin_run.stage_result("10min", "gpu_burn", dict(files, **{"smi.csv": with_uuid}))
    assert result["verdict"] == "pass", result
    gpus, _names, _samples = burnin_run.stage_measurements(dict(files, **{"smi.csv": with_uuid}))
    assert list(gpus) == ["0000:41:00.0"]
    assert burnin_run.stage_result("10min", "gpu_burn", files)["verdict"] == "pass"
    gpus, _names, _samples = burnin_run.stage_measurements(files)
    assert sorted(gpus) == ["0", "0000:41:00.0"] and "faulty" not in gpus["0000:41:00.0"]


def test_no_xid_log_means_not_measured():
    files = stage_files("gpu-burn-ok-a400.txt", [70, 70])
    del files["xid.log"]
    gpus, _names, _samples = burnin_run.stage_measurements(files)
    assert "xid_errors" not in gpus["0000:41:00.0"]
    assert burnin_run.stage_measurements(stage_files("gpu-burn-ok-a400.txt", [70]))[0]["0000:41:00.0"][
        "xid_errors"] == 0


def test_a_cut_off_or_running_stage_has_no_verdict():
    files = stage_files("gpu-burn-2gpu-progress-partial.txt", [60])
    del files["exit_status"], files["finished_at"]
    assert burnin_run.stage_result("1h", "gpu_burn", files) == {
        "name": "1h", "tool": "gpu_burn", "exit_status": None, "started_at": 1000, "finished_at": None,
        "verdict": None, "reasons": [], "state": "running"}
    assert burnin_run.stage_result("1h", "gpu_burn", {})["state"] == "not_started"


def test_a_gpu_burn_cut_off_before_its_summary_fails():
    files = stage_files("gpu-burn-2gpu-progress-partial.txt", [60, 60])
    files["before.xml"] = files["after.xml"] = ""
    result = burnin_run.stage_result("1h", "gpu_burn", files)
    assert result["verdict"] == "fail"
    assert "missing from gpu-burn's summary" in " ".join(result["reasons"])


def test_other_tools():
    done = {"exit_status": "0", "started_at": "1", "finished_at": "2"}
    assert burnin_run.stage_result("dcgmi_diag", "dcgmi_diag",
                                   dict(done, **{"output.log": fixture("dcgmi-diag-r3-pass.txt")}))["verdict"] == "pass"
    failed = burnin_run.stage_result("dcgmi_diag", "dcgmi_diag",
                                     dict(done, **{"output.log": fixture("dcgmi-diag-r3-fail.txt")}))
    assert failed["verdict"] == "fail" and failed["reasons"]
    assert burnin_run.stage_result("dcgmi_diag", "dcgmi_diag",
                                   dict(done, **{"output.log": "Error: unable to connect to host engine"}))[
        "verdict"] == "fail"
    assert burnin_run.stage_result("nvbandwidth", "nvbandwidth",
                                   dict(done, **{"output.log": fixture("nvbandwidth-h2d-ce.txt")}))["verdict"] == "pass"
    assert burnin_run.stage_result("nvbandwidth", "nvbandwidth",
                                   dict(done, exit_status="1", **{"output.log": "CUDA error"}))["verdict"] == "fail"
    bench = burnin_run.stage_result("vllm_bench", "vllm_bench_serve",
                                    dict(done, **{"output.log": fixture("vllm-bench-serve-v0.11plus.txt")}))
    assert bench["verdict"] == "pass"


def test_xid_lines():
    text = ("[ 100.0] NVRM: Xid (PCI:0000:41:00): 79, pid=1, GPU has fallen off the bus.\n"
            "[ 101.0] NVRM: Xid (PCI:0000:41:00): 48, pid=1, DBE\n[ 102.0] unrelated\n")
    assert burnin_run.parse_xid(text) == {"0000:41:00.0": [79, 48]}


# ---------------------------------------------------------------- the report

def test_report_takes_the_worst_of_every_stage_and_keeps_the_curves():
    ok = stage_files("gpu-burn-ok-a400.txt", [40, 70, 70, 70])
    faulty = stage_files("gpu-burn-faulty.txt", [40, 84, 84, 84])
    report = burnin_run.build_report("gpu-a", [
        {"name": "60s", "tool": "gpu_burn", "files": faulty},
        {"name": "10min", "tool": "gpu_burn", "files": ok},
        {"name": "nvbandwidth", "tool": "nvbandwidth",
         "files": {"exit_status": "0", "started_at": "1", "finished_at": "1700",
                   "output.log": fixture("nvbandwidth-d2d-read-ce.txt")}},
        {"name": "dcgmi_diag", "tool": "dcgmi_diag", "files": {}}])
    assert report["verdict"] == "fail"
    gpu = report["gpus"]["0000:41:00.0"]
    assert gpu["verdict"] == "fail" and gpu["stage"] == "60s" and gpu["name"] == "Tesla T4"
    assert [s["state"] for s in report["stages"]] == ["finished", "finished", "finished", "not_started"]
    assert report["generated_at"] == 1700
    series = report["smi"]["0000:41:00.0"]
    assert series["t_s"] == [0.0, 1.0, 2.0, 3.0] and series["temperature_c"] == [40, 70, 70, 70]
    matrix = report["nvbandwidth"]["device_to_device_memcpy_read_ce"]
    assert len(matrix["matrix"]) == len(matrix["rows"]) and matrix["matrix"][0][0] is None
    assert "60s: GPU 0000:41:00.0: temperature watch (84.0 °C)" in report["reasons"]
    summary = burnin_run.fleet([report, dict(report, host="gpu-b", verdict="pass", reasons=[])])
    assert summary["verdict"] == "fail" and [h["host"] for h in summary["hosts"]] == ["gpu-a", "gpu-b"]
    assert json.loads(burnin_run.dumps(report)) == report          # plain JSON data, nothing lost on the way
    # A host whose run stopped before its report fails the fleet.
    summary = burnin_run.fleet([dict(report, verdict="pass", reasons=[])], missing=["gpu-c"])
    assert summary["verdict"] == "fail" and summary["hosts"][1]["host"] == "gpu-c"
    assert burnin_run.missing_report("gpu-c")["verdict"] == "fail"


def test_the_report_covers_earlier_runs_stages_in_the_seeds_order():
    assert burnin_run.report_stages(["soak"], ["60s", "soak", "nvbandwidth"]) == ["60s", "soak", "nvbandwidth"]
    assert burnin_run.report_stages(["10min", "60s"], []) == ["60s", "10min"]


# ---------------------------------------------------------------- the modules' shapes (DESIGN.md)

def test_parse_shapes():
    burn = burnin_run.parse("gpu_burn", fixture("gpu-burn-faulty.txt"))
    assert burn["summary"] is True and burn["gpus"][0]["index"] == 0 and burn["gpus"][0]["status"] == "FAULTY"
    cut = burnin_run.parse("gpu_burn", fixture("gpu-burn-2gpu-progress-partial.txt"))
    assert cut["summary"] is False and [g["status"] for g in cut["gpus"]] == [None, None]
    nvb = burnin_run.parse("nvbandwidth", fixture("nvbandwidth-h2d-ce.txt"))
    assert nvb["tests"][0]["name"] == "host_to_device_memcpy_ce" and nvb["tests"][0]["sum"] > 0
    bench = burnin_run.parse("vllm_bench_serve", fixture("vllm-bench-serve-v0.11plus.txt"))["metrics"]
    assert bench["successful_requests"] > 0 and bench["ttft_ms"]["mean"] > 0 and bench["failed_requests"] == 0
    old = burnin_run.parse("vllm_bench_serve", fixture("vllm-benchmark-serving-input-throughput-variant.txt"))
    assert old["metrics"]["total_token_throughput"] is None and old["metrics"]["request_throughput"] > 0
    smi = burnin_run.parse("nvidia_smi_csv", fixture("nvidia-smi-query-timestamp.csv"))
    assert len(smi["gpus"]) == 2
    with pytest.raises(burnin_run.BurninRunError):
        burnin_run.parse("gpu-burn", "")


def test_evaluate_results():
    burn = burnin_run.parse("gpu_burn", fixture("gpu-burn-faulty.txt"))
    judged = burnin_run.evaluate_results([{"tool": "gpu_burn", "result": burn}])
    assert judged["overall"] == "fail"
    assert judged["verdicts"] == [{"check": "gpu_burn", "gpu": "0", "verdict": "fail", "reason": "FAULTY"}]
    ok = burnin_run.parse("gpu_burn", fixture("gpu-burn-ok.txt"))
    assert burnin_run.evaluate_results([{"tool": "gpu_burn", "result": ok}])["overall"] == "pass"
    # FAULTY with exit status 0, a run cut off before its summary: never a pass.
    cut = burnin_run.parse("gpu_burn", fixture("gpu-burn-2gpu-progress-partial.txt"))
    judged = burnin_run.evaluate_results([{"tool": "gpu_burn", "result": cut}])
    assert judged["overall"] == "fail" and judged["verdicts"][0]["gpu"] is None
    dcgm = burnin_run.parse("dcgmi_diag", fixture("dcgmi-diag-r3-fail.txt"))
    assert burnin_run.evaluate_results([{"tool": "dcgmi_diag", "result": dcgm}])["overall"] == "fail"
    smi = burnin_run.parse("nvidia_smi_csv", smi_csv("00000000:41:00.0", [40, 85, 85, 85]))
    judged = burnin_run.evaluate_results([{"tool": "nvidia_smi_csv", "result": smi}],
                                         {"temperature_watch_c": 86})
    assert judged["overall"] == "pass"
    assert burnin_run.evaluate_results([{"tool": "nvidia_smi_csv", "result": smi}])["overall"] == "watch"
    with pytest.raises(burnin_run.BurninRunError):
        burnin_run.evaluate_results([{"tool": "gpu_burn"}])


def test_files_written_only_when_they_change(tmp_path):
    page = tmp_path / "gpu-a.html"
    assert burnin_run.write_if_changed(str(page), "<p>1</p>", check_mode=True) == (True, None)
    assert not page.exists()
    assert burnin_run.write_if_changed(str(page), "<p>1</p>") == (True, None)
    assert page.read_text() == "<p>1</p>" and oct(page.stat().st_mode & 0o777) == "0o640"
    assert burnin_run.write_if_changed(str(page), "<p>1</p>") == (False, "<p>1</p>")
    assert burnin_run.write_if_changed(str(page), "<p>2</p>") == (True, "<p>1</p>")


def test_stage_files_read_from_a_directory(tmp_path):
    (tmp_path / "exit_status").write_text("0\n")
    (tmp_path / "output.log").write_bytes(b"GPU 0: OK \xff\n")
    (tmp_path / "unrelated.txt").write_text("x")
    assert burnin_run.read_stage_files(str(tmp_path)) == {"exit_status": "0\n", "output.log": "GPU 0: OK \ufffd\n"}
