# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in stages: which run, how each is started so that it outlives the connection, whether a rerun picks one
up, and what a finished stage's files say (plain Python, no Ansible imports).

A stage runs as a transient systemd unit (``systemd-run``) in its own directory on the GPU VM:

==============  ============================================================================================
``argv.json``   the command, written before the start
``started_at``  epoch seconds, written by the wrapper when the tool starts
``output.log``  the tool's stdout and stderr
``smi.csv``     ``nvidia-smi --query-gpu=... --format=csv -l N`` sampled alongside (gpu-burn stages)
``before.xml``  ``nvidia-smi -q -x`` before the run and ``after.xml`` after it (PCIe replay counters)
``xid.log``     the kernel's ``NVRM: Xid`` lines since the start
``exit_status`` the tool's exit status, written last (its presence is what "finished" means)
==============  ============================================================================================

A rerun reads the directory and the unit: a finished stage is kept (``rerun`` archives it and starts again), a
running one is waited for, never started twice; a directory without ``exit_status`` whose unit is gone was cut off
(a reboot) and is archived and started again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin, nvidia, value_checks

# Seed 000's stages, in its order: gpu-burn 60 s (warm-up), 10 min, 1 h, 8-24 h (soak), then the measurements.
STAGES = [
    {"name": "60s", "tool": "gpu_burn", "seconds": 60},
    {"name": "10min", "tool": "gpu_burn", "seconds": 600},
    {"name": "1h", "tool": "gpu_burn", "seconds": 3600},
    {"name": "soak", "tool": "gpu_burn", "seconds": 28800},
    {"name": "nvbandwidth", "tool": "nvbandwidth", "seconds": 600},
    {"name": "dcgmi_diag", "tool": "dcgmi_diag", "seconds": 3600},
    {"name": "vllm_bench", "tool": "vllm_bench_serve", "seconds": 3600},
]
STAGE_NAMES = [s["name"] for s in STAGES]
GPU_BURN_STAGES = [s["name"] for s in STAGES if s["tool"] == "gpu_burn"]
TAG_PREFIX = "burnin_"
UNIT_PREFIX = "llmstack-burnin-"

# Seed 000's logging loop's fields, the throttle reasons (the table's throttling and power cap rows) and the UUID (it
# maps gpu-burn's GPUs, which it names by UUID in CUDA's order, to bus ids when nvidia-smi -q -x could not be read).
SMI_FIELDS = ("timestamp,name,uuid,gpu_bus_id,temperature.gpu,utilization.gpu,utilization.memory,power.draw,"
              "clocks.sm,clocks.mem,memory.used,memory.total,pcie.link.gen.current,pcie.link.width.current,"
              "clocks_event_reasons.active")

FILES = ("argv.json", "started_at", "finished_at", "exit_status", "output.log", "smi.csv", "before.xml", "after.xml",
         "xid.log")

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\): (\d+)")
_NVB_TESTS = re.compile(r"^[a-z0-9_]+$")


class BurninRunError(value_checks.SettingsProblems):
    """Burn-in settings that cannot be used: every problem, each naming its variable."""


def _true(value):
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1")


def stage(name):
    for entry in STAGES:
        if entry["name"] == name:
            return dict(entry)
    return None


def select_stages(run_tags, configured):
    """The stages to run, in the seed's order: those named by a ``burnin_<stage>`` tag of this run when there is
    one (``--tags burnin_1h``), else ``burnin_stages``."""
    tagged = [name for name in STAGE_NAMES if TAG_PREFIX + name in (run_tags or [])]
    if tagged:
        return tagged
    problems = []
    if not isinstance(configured, list) or not configured:
        raise BurninRunError(["burnin_stages: %r is not a list of stages (known: %s)"
                              % (configured, ", ".join(STAGE_NAMES))])
    for name in configured:
        if name not in STAGE_NAMES:
            problems.append("burnin_stages: %r is not a stage (known: %s)" % (name, ", ".join(STAGE_NAMES)))
    if problems:
        raise BurninRunError(problems)
    return [name for name in STAGE_NAMES if name in configured]


def _argv_list(variable, value, problems):
    if not isinstance(value, list) or not value or not all(isinstance(w, str) and w for w in value):
        problems.append("%s: %r is not a non-empty list of words (the command and its arguments)" % (variable, value))
        return None
    return list(value)


def check_settings(settings, stages):
    """The role's settings (without the ``burnin_`` prefix) for the selected stages: every problem at once.

    Returns {stage: {"tool", "seconds" (the stage's expected length), "argv", "chdir", "sample"}}."""
    s = settings or {}
    problems = []
    seconds = dict((entry["name"], entry["seconds"]) for entry in STAGES)
    for name, value in (s.get("stage_seconds") or {}).items():
        number = value_checks.as_int(value)
        if name not in STAGE_NAMES:
            problems.append("burnin_stage_seconds: %r is not a stage (known: %s)" % (name, ", ".join(STAGE_NAMES)))
        elif number is None or number < 1:
            problems.append("burnin_stage_seconds.%s: %r is not a whole number of seconds >= 1" % (name, value))
        else:
            seconds[name] = number
    interval = value_checks.as_int(s.get("sample_interval", 5))
    if interval is None or interval < 1:
        problems.append("burnin_sample_interval: %r is not a whole number of seconds >= 1" % s.get("sample_interval"))
    fields = s.get("smi_fields", SMI_FIELDS.split(","))
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) and re.match(r"^[a-z_.]+$", f)
                                                             for f in fields):
        problems.append("burnin_smi_fields: %r is not a list of nvidia-smi --query-gpu fields" % (fields,))
    tests = s.get("nvbandwidth_tests") or []
    if "nvbandwidth" in stages and (not isinstance(tests, list) or not tests
                                    or not all(isinstance(t, str) and _NVB_TESTS.match(t) for t in tests)):
        problems.append("burnin_nvbandwidth_tests: %r is not a list of nvbandwidth test names "
                        "(such as host_to_device_memcpy_ce)" % (tests,))
    level = value_checks.as_int(s.get("dcgmi_diag_level", 3))
    if "dcgmi_diag" in stages and (level is None or not 1 <= level <= 4):
        problems.append("burnin_dcgmi_diag_level: %r is not 1, 2, 3 or 4" % s.get("dcgmi_diag_level"))
    bench = None
    if "vllm_bench" in stages:
        bench = _argv_list("burnin_vllm_bench_argv", s.get("vllm_bench_argv"), problems)
    plans = {}
    for name in stages:
        tool = stage(name)["tool"]
        entry = {"tool": tool, "seconds": seconds[name], "chdir": None, "sample": tool == "gpu_burn"}
        if tool == "gpu_burn":
            directory = s.get("gpu_burn_dir")
            if not isinstance(directory, str) or not directory.startswith("/"):
                problems.append("burnin_gpu_burn_dir: %r is not an absolute path (where gpu_burn and its "
                                "compare.ptx/compare.fatbin are)" % (directory,))
                continue
            entry["chdir"] = directory
            entry["argv"] = [directory.rstrip("/") + "/gpu_burn"] + (["-d"] if _true(s.get("gpu_burn_doubles")) else
                                                                     []) + [str(seconds[name])]
        elif tool == "nvbandwidth":
            entry["argv"] = [s.get("nvbandwidth_path") or "nvbandwidth", "-t"] + [str(t) for t in tests]
        elif tool == "dcgmi_diag":
            entry["argv"] = [s.get("dcgmi_path") or "dcgmi", "diag", "-r", str(level)]
        else:
            entry["argv"] = bench
        plans[name] = entry
    if problems:
        raise BurninRunError(problems)
    return plans


def unit_name(name):
    return "%s%s.service" % (UNIT_PREFIX, name)


def decide(files_present, unit_active, rerun=False):
    """What to do with a stage asked to run: ``wait`` (its unit runs: never a second one), ``keep`` (finished, kept
    unless ``rerun``), ``start`` (nothing there), ``restart`` (archive the directory and start: a finished stage with
    ``rerun``, or one cut off - its directory has no exit status and no unit runs it)."""
    if unit_active:
        return "wait"
    if "exit_status" in files_present:
        return "restart" if rerun else "keep"
    if "argv.json" in files_present or "started_at" in files_present:
        return "restart"
    return "start"


def archive_path(path, files_present, files, exists):
    """Where a stage's directory goes before it is started again: ``<stage>.<finished_at>`` for a finished one,
    ``<stage>.cut-<started_at>`` for one cut off, with ``.N`` added while ``exists(candidate)``."""
    if "exit_status" in files_present:
        stamp = (files.get("finished_at") or "").strip() or "finished"
    else:
        stamp = "cut-%s" % ((files.get("started_at") or "").strip() or "unknown")
    candidate, suffix = "%s.%s" % (path, stamp), 1
    while exists(candidate):
        candidate, suffix = "%s.%s.%d" % (path, stamp, suffix), suffix + 1
    return candidate


def observe(read_files, unit_active):
    """How a stage stands, read in the order that cannot mistake a stage that just ended for one cut off: the unit
    first, then the files; when the unit is gone and the files have no exit status, the files once more (the stage
    may have written it between the two looks). ``read_files()`` returns {name: text}; ``unit_active()`` a bool.

    Returns (files, active)."""
    active = unit_active()
    files = read_files()
    if not active and "exit_status" not in files and files:
        files = read_files()
    return files, active


def systemd_run_argv(name, directory, wrapper, argv, chdir=None, sample_interval=0, smi_fields=SMI_FIELDS):
    """``systemd-run`` for a stage: a transient service (not tied to the SSH session: a dropped connection or a
    killed controller leaves it running), collected after it ends, the wrapper writing the stage's files."""
    command = ["systemd-run", "--unit", unit_name(name), "--description",
               "llmstack burn-in stage %s" % name, "--collect", "--property", "KillMode=mixed"]
    if chdir:
        command += ["--working-directory", chdir]
    return command + ["--", wrapper, directory, str(int(sample_interval)), smi_fields, "--"] + list(argv)


def parse_systemctl_show(text):
    """``systemctl show -p ActiveState,SubState ...`` -> {key: value}."""
    found = {}
    for line in (text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            found[key.strip()] = value.strip()
    return found


def unit_is_active(show):
    return show.get("ActiveState") in ("active", "activating", "deactivating", "reloading")


# ---------------------------------------------------------------- what a finished stage's files say

def parse_xid(text):
    """The kernel's ``NVRM: Xid (PCI:0000:41:00): 79, ...`` lines -> {"0000:41:00.0": [79, ...]}."""
    found = {}
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if match:
            bus = match.group(1).lower()
            found.setdefault(bus if "." in bus else bus + ".0", []).append(int(match.group(2)))
    return found


def replay_counters(xml_text):
    """PCIe replay counters of an ``nvidia-smi -q -x`` (``pci/replay_counter``), by bus id; {} when unreadable."""
    if not (xml_text or "").strip():
        return {}
    try:
        data = nvidia.parse_xml(xml_text)
    except nvidia.NvidiaParseError:
        return {}
    return dict((g["bus_id"], g.get("pcie_replays")) for g in data["gpus"] if g.get("bus_id"))


def _bus(text):
    """A bus id in one form (nvidia.normalise_bus_id) from any nvidia-smi or kernel spelling."""
    value = str(text or "").strip()
    if re.match(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}$", value):
        value += ".0"
    return nvidia.normalise_bus_id(value) if value else None


def _gpu(key):
    """The report's key of a GPU: its bus id in one form where the key is one, else the key as it is."""
    return _bus(key) if ":" in key else key


def _int_file(text):
    match = re.match(r"^\s*(-?\d+)\s*$", text or "")
    return int(match.group(1)) if match else None


def stage_measurements(files):
    """A finished gpu-burn stage's files -> ({gpu key: measurements for burnin.evaluate}, names, smi samples).

    GPUs are keyed by bus id where nvidia-smi's XML maps gpu-burn's UUIDs to one, else by gpu-burn's index."""
    burn = burnin.parse_gpu_burn(files.get("output.log") or "")
    smi = burnin.parse_smi_csv(files.get("smi.csv") or "")
    summary = burnin.summarise_smi(smi["samples"])
    before_xml, after_xml = files.get("before.xml") or "", files.get("after.xml") or ""
    uuid_bus, names = {}, {}
    for sample in smi["samples"]:
        bus = sample.get("pci.bus_id") or sample.get("gpu_bus_id")
        if sample.get("uuid") and bus:
            uuid_bus[sample["uuid"]] = _bus(bus)
    for text in (before_xml, after_xml):
        try:
            for gpu in nvidia.parse_xml(text)["gpus"] if text.strip() else []:
                uuid_bus[gpu.get("uuid")] = gpu.get("bus_id")
                names[gpu.get("bus_id")] = gpu.get("name")
        except nvidia.NvidiaParseError:
            pass
    before, after = replay_counters(before_xml), replay_counters(after_xml)
    xids = parse_xid(files.get("xid.log"))
    gpus = {}
    for index, entry in sorted(burn["gpus"].items()):
        key = uuid_bus.get(entry.get("uuid")) or index
        gpus[key] = {"faulty": entry["faulty"]}
        names.setdefault(key, entry.get("name"))
    # A GPU nvidia-smi saw that gpu-burn's summary leaves out fails - when the UUIDs say which GPU is which; without
    # them a bus id cannot be matched to gpu-burn's index, and the GPU is judged on what nvidia-smi measured alone.
    mapped = bool(uuid_bus) and bool(burn["gpus"])
    for key, data in summary.items():
        bus = _gpu(key)
        target = gpus.setdefault(bus, {"faulty": None} if mapped else {})
        target.update(steady_temperature_c=data["steady_temperature_c"], throttled_percent=data["throttled_percent"],
                      power_capped_percent=data["power_capped_percent"])
        names.setdefault(bus, data.get("name"))
    for bus, count in after.items():
        if count is not None and before.get(bus) is not None and bus in gpus:
            gpus[bus]["pcie_replays"] = max(0, count - before[bus])
    for key in gpus:
        if ":" in key and files.get("xid.log") is not None:
            gpus[key]["xid_errors"] = len(xids.get(key, []))
    return gpus, names, smi["samples"]


def stage_result(name, tool, files, thresholds=None):
    """One stage's state, verdict and reasons from its files ({file name: text}; absent files left out)."""
    exit_status = _int_file(files.get("exit_status"))
    result = {"name": name, "tool": tool, "exit_status": exit_status,
              "started_at": _int_file(files.get("started_at")), "finished_at": _int_file(files.get("finished_at")),
              "verdict": None, "reasons": []}
    if exit_status is None:
        result["state"] = "running" if result["started_at"] is not None else "not_started"
        return result
    result["state"] = "finished"
    if result["started_at"] is not None and result["finished_at"] is not None:
        result["duration_s"] = result["finished_at"] - result["started_at"]
    output = files.get("output.log") or ""
    if tool == "gpu_burn":
        gpus, _names, _samples = stage_measurements(files)
        judged = burnin.evaluate(gpus, thresholds)
        result["verdict"], result["reasons"] = judged["verdict"], list(judged["reasons"])
        if not gpus:
            result["verdict"] = burnin.FAIL
            result["reasons"].append("gpu-burn reported no GPU (exit status %d): see output.log" % exit_status)
    elif tool == "dcgmi_diag":
        parsed = burnin.parse_dcgmi_diag(output)
        result["verdict"] = parsed["verdict"] if parsed["tests"] else burnin.FAIL
        result["reasons"] = (["dcgmi diag: %s %s" % (test, data["verdict"]) for test, data
                              in sorted(parsed["tests"].items()) if data["verdict"] != burnin.PASS]
                             or ([] if parsed["tests"] else ["dcgmi diag printed no result table (exit status %d)"
                                                             % exit_status]))
    elif tool == "nvbandwidth":
        parsed = burnin.parse_nvbandwidth(output)
        result["verdict"] = burnin.PASS if parsed["tests"] and exit_status == 0 else burnin.FAIL
        if result["verdict"] == burnin.FAIL:
            result["reasons"] = ["nvbandwidth: %s (exit status %d)" % (
                "no result" if not parsed["tests"] else "exited with an error", exit_status)]
    else:
        parsed = burnin.parse_vllm_bench(output)
        metrics = parsed["metrics"]
        failed = metrics.get("failed_requests")
        if not metrics or exit_status != 0:
            result["verdict"] = burnin.FAIL
            result["reasons"] = ["vllm bench serve: no result (exit status %d)" % exit_status]
        elif failed:
            result["verdict"] = burnin.FAIL
            result["reasons"] = ["vllm bench serve: %d failed requests" % failed]
        else:
            result["verdict"] = burnin.PASS
    return result


def _series(samples):
    """nvidia-smi samples -> per GPU time series for the report's charts."""
    series = {}
    first = None
    for sample in samples:
        key = _gpu(burnin.gpu_key(sample))
        moment = _timestamp(sample.get("timestamp"))
        if moment is not None and first is None:
            first = moment
        entry = series.setdefault(key, {"name": sample.get("name"), "t_s": [], "temperature_c": [],
                                        "sm_clock_mhz": [], "power_w": [], "throttle_reasons": []})
        entry["t_s"].append(round(moment - first, 3) if moment is not None else float(len(entry["t_s"])))
        entry["temperature_c"].append(sample.get("temperature.gpu"))
        entry["sm_clock_mhz"].append(sample.get("clocks.sm"))
        entry["power_w"].append(sample.get("power.draw"))
        entry["throttle_reasons"].append(sample.get("clocks_event_reasons.active"))
    return series


def _timestamp(text):
    """nvidia-smi's ``2026/02/12 15:30:35.110`` -> seconds (only differences matter)."""
    match = re.match(r"^(\d{4})/(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)$", str(text or "").strip())
    if not match:
        return None
    year, month, day, hour, minute = [int(x) for x in match.groups()[:5]]
    # Days since an epoch, enough for differences within a run (month lengths from the civil calendar).
    days = _days(year, month, day)
    return ((days * 24 + hour) * 60 + minute) * 60 + float(match.group(6))


def _days(year, month, day):
    # Howard Hinnant's days_from_civil.
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _matrix(test):
    rows = sorted(test["matrix"], key=lambda r: int(r) if r.isdigit() else r)
    columns = list(test["columns"])
    return {"engine": test["engine"], "rows": rows, "columns": columns, "sum": test["sum"],
            "matrix": [[test["matrix"][r].get(c) for c in columns] for r in rows]}


def build_report(host, stages, thresholds=None, generated_at=None):
    """A host's report (the shape burnin_report renders) from its stages' files.

    ``stages``: [{"name", "tool", "files": {file name: text}}] in the order they ran. The GPU table judges the
    longest finished gpu-burn stage together with every earlier one: a GPU gets the worst verdict any stage gave
    it (a FAULTY in the warm-up is not forgiven by a clean soak)."""
    t = burnin.check_thresholds(thresholds)
    report = {"host": host, "generated_at": generated_at, "verdict": None, "reasons": [], "thresholds": t,
              "gpus": {}, "stages": [], "smi": {}, "nvbandwidth": {}, "dcgmi_diag": None, "vllm_bench": None}
    verdicts = []
    for entry in stages:
        files = entry.get("files") or {}
        result = stage_result(entry["name"], entry["tool"], files, t)
        report["stages"].append(result)
        if result["verdict"] is not None:
            verdicts.append(result["verdict"])
            report["reasons"] += ["%s: %s" % (entry["name"], reason) for reason in result["reasons"]]
        if result["state"] != "finished":
            continue
        output = files.get("output.log") or ""
        if entry["tool"] == "gpu_burn":
            gpus, names, samples = stage_measurements(files)
            judged = burnin.evaluate(gpus, t)
            for key, data in judged["gpus"].items():
                current = report["gpus"].get(key)
                if current is None or burnin.RANK[data["verdict"]] >= burnin.RANK[current["verdict"]]:
                    report["gpus"][key] = dict(data, name=names.get(key), stage=entry["name"])
            if samples:
                report["smi"] = _series(samples)
        elif entry["tool"] == "nvbandwidth":
            parsed = burnin.parse_nvbandwidth(output)
            for name, test in parsed["tests"].items():
                report["nvbandwidth"][name] = _matrix(test)
        elif entry["tool"] == "dcgmi_diag":
            report["dcgmi_diag"] = burnin.parse_dcgmi_diag(output)
        else:
            report["vllm_bench"] = burnin.parse_vllm_bench(output)
    report["verdict"] = max(verdicts, key=lambda v: burnin.RANK[v]) if verdicts else None
    if generated_at is None:
        finished = [s["finished_at"] for s in report["stages"] if s.get("finished_at")]
        report["generated_at"] = max(finished) if finished else None
    return report


def report_stages(planned, present):
    """The stages a host's report covers: those of this run and those an earlier run left, in the seed's order (a
    clean soak run on its own does not hide a FAULTY warm-up of an earlier run)."""
    return [name for name in STAGE_NAMES if name in (planned or []) or name in (present or [])]


MISSING_REASON = "no report: its run stopped before the report was written (see the play's output)"


def missing_report(host):
    """What the fleet page shows for a host whose run stopped before its report: a failure."""
    return {"host": host, "generated_at": None, "verdict": burnin.FAIL, "reasons": [MISSING_REASON], "gpus": {},
            "stages": [], "smi": {}, "nvbandwidth": {}, "dcgmi_diag": None, "vllm_bench": None,
            "thresholds": dict(burnin.THRESHOLDS)}


def fleet(reports, missing=()):
    """The fleet summary: one line per host (a host without a report fails), and the fleet's verdict (the worst)."""
    hosts = [{"host": r["host"], "verdict": r["verdict"], "reasons": r["reasons"],
              "stages": [s["name"] for s in r["stages"] if s["state"] == "finished"]} for r in reports]
    hosts += [{"host": host, "verdict": burnin.FAIL, "reasons": [MISSING_REASON], "stages": []} for host in missing]
    known = [h["verdict"] for h in hosts if h["verdict"]]
    return {"verdict": max(known, key=lambda v: burnin.RANK[v]) if known else None, "hosts": hosts}


def read_stage_files(path):
    """A stage directory's files ({name: text}, those of FILES that exist), as the VM or the controller holds them."""
    files = {}
    for name in FILES:
        target = os.path.join(path, name)
        if os.path.isfile(target):
            with open(target, "rb") as handle:
                files[name] = handle.read().decode("utf-8", "replace")
    return files


def write_if_changed(path, text, check_mode=False, mode=0o640):
    """Write ``text`` to ``path`` (atomically, ``mode``) unless it already holds exactly that; True when it did (or
    would, in check mode). Returns (changed, the previous text or None)."""
    data = text.encode("utf-8")
    old = None
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            old = handle.read()
    if old == data:
        return False, old.decode("utf-8", "replace")
    if not check_mode:
        tmp = path + ".tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    return True, None if old is None else old.decode("utf-8", "replace")


def dumps(data):
    """JSON as the report files hold it (stable: a rerun with the same results writes the same bytes)."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- the modules burnin_parse and burnin_evaluate

PARSE_TOOLS = ("gpu_burn", "nvbandwidth", "vllm_bench_serve", "nvidia_smi_csv", "dcgmi_diag")


def _bench_metrics(parsed):
    """parse_vllm_bench's metrics by label -> the fixed keys of DESIGN.md (absent -> None); every label kept too
    under ``all``."""
    m = parsed["metrics"]

    def first(*keys):
        for key in keys:
            if key in m:
                return m[key]
        return None

    metrics = {
        "successful_requests": first("successful_requests"),
        "failed_requests": first("failed_requests"),
        "duration_s": first("benchmark_duration_s"),
        "request_throughput": first("request_throughput_req_s"),
        "output_token_throughput": first("output_token_throughput_tok_s"),
        "total_token_throughput": first("total_token_throughput_tok_s"),
    }
    for name in ("ttft", "tpot", "itl"):
        metrics["%s_ms" % name] = dict((stat, first("%s_%s_ms" % (stat, name))) for stat in ("mean", "median", "p99"))
    return {"metrics": metrics, "all": dict(m)}


def parse(tool, text):
    """One tool's output in the shape the module burnin_parse returns (DESIGN.md, "Burn-in parsers")."""
    if tool == "gpu_burn":
        data = burnin.parse_gpu_burn(text)
        gpus = [{"index": int(index), "status": entry["result"], "name": entry["name"], "uuid": entry["uuid"],
                 "faulty": entry["faulty"], "max_temperature_c": entry["max_temperature_c"]}
                for index, entry in sorted(data["gpus"].items(), key=lambda item: int(item[0]))]
        return {"gpus": gpus, "summary": data["complete"], "tested": data["tested"], "percent": data["percent"],
                "errors": dict((str(g["index"]), data["gpus"][str(g["index"])]["errors"]) for g in gpus)}
    if tool == "nvbandwidth":
        data = burnin.parse_nvbandwidth(text)
        tests = [dict(_matrix(test), name=name) for name, test in data["tests"].items()]
        return {"version": data["version"], "devices": data["devices"], "tests": tests}
    if tool == "vllm_bench_serve":
        return _bench_metrics(burnin.parse_vllm_bench(text))
    if tool == "nvidia_smi_csv":
        data = burnin.parse_smi_csv(text)
        return {"samples": data["samples"], "fields": data["fields"], "skipped": data["skipped"],
                "gpus": burnin.summarise_smi(data["samples"])}
    if tool == "dcgmi_diag":
        return burnin.parse_dcgmi_diag(text)
    raise BurninRunError(["tool: %r is not one of %s" % (tool, ", ".join(PARSE_TOOLS))])


def evaluate_results(results, thresholds=None):
    """burnin_parse results ([{tool, result}]) judged by seed 000's table: every check as
    {check, gpu, verdict, reason}, and the overall verdict (the worst). A gpu_burn result without its summary, or
    with a FAULTY GPU, is never a pass."""
    t = burnin.check_thresholds(thresholds)
    problems, verdicts = [], []
    for index, entry in enumerate(results or []):
        if (not isinstance(entry, dict) or entry.get("tool") not in PARSE_TOOLS
                or not isinstance(entry.get("result"), dict)):
            problems.append("results[%d]: not {tool: one of %s, result: what burnin_parse returned}"
                            % (index, ", ".join(PARSE_TOOLS)))
    if problems:
        raise BurninRunError(problems)

    def add(check, gpu, verdict, reason=None):
        verdicts.append({"check": check, "gpu": gpu, "verdict": verdict, "reason": reason})

    for entry in results:
        tool, result = entry["tool"], entry["result"]
        if tool == "gpu_burn":
            if not result.get("summary"):
                add("gpu_burn", None, burnin.FAIL, "gpu-burn's summary is missing (the run was cut off or did not "
                                                   "start)")
            gpus = dict((str(g["index"]), {"faulty": g.get("faulty") if result.get("summary") else None})
                        for g in result.get("gpus") or [])
            if result.get("summary") and not gpus:
                add("gpu_burn", None, burnin.FAIL, "gpu-burn's summary lists no GPU")
            judged = burnin.evaluate(gpus, t)
            for gpu, data in judged["gpus"].items():
                row = data["rows"]["gpu_burn"]
                add("gpu_burn", gpu, row["verdict"], None if row["verdict"] == burnin.PASS else
                    burnin.describe("gpu_burn", row["value"]))
        elif tool == "nvidia_smi_csv":
            gpus = dict((gpu, {"steady_temperature_c": data["steady_temperature_c"],
                               "throttled_percent": data["throttled_percent"],
                               "power_capped_percent": data["power_capped_percent"]})
                        for gpu, data in (result.get("gpus") or {}).items())
            judged = burnin.evaluate(gpus, t)
            for gpu, data in judged["gpus"].items():
                for row, value in sorted(data["rows"].items()):
                    add(row, gpu, value["verdict"], None if value["verdict"] == burnin.PASS else
                        burnin.describe(row, value["value"]))
        elif tool == "dcgmi_diag":
            tests = result.get("tests") or {}
            if not tests:
                add("dcgmi_diag", None, burnin.FAIL, "dcgmi diag printed no result table")
            for name, test in sorted(tests.items()):
                add("dcgmi_diag", ",".join(str(g) for g in test.get("failed_gpus") or []) or None, test["verdict"],
                    None if test["verdict"] == burnin.PASS else "%s: %s" % (name, "; ".join(test.get("results")
                                                                                            or [])))
        elif tool == "nvbandwidth":
            tests = result.get("tests") or []
            add("nvbandwidth", None, burnin.PASS if tests else burnin.FAIL,
                None if tests else "nvbandwidth printed no result")
        else:
            metrics = result.get("metrics") or {}
            failed = metrics.get("failed_requests")
            if not metrics.get("successful_requests"):
                add("vllm_bench", None, burnin.FAIL, "vllm bench serve: no successful request")
            elif failed:
                add("vllm_bench", None, burnin.FAIL, "vllm bench serve: %d failed requests" % failed)
            else:
                add("vllm_bench", None, burnin.PASS)
    overall = max((v["verdict"] for v in verdicts), key=lambda v: burnin.RANK[v]) if verdicts else None
    return {"overall": overall, "verdicts": verdicts}


# ---------------------------------------------------------------- the role's plan (module burnin_plan)

_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


def plan(run_tags, settings, thresholds=None):
    """Everything the burnin role decides before it changes anything: the stages (tags or burnin_stages), each
    one's command and how long to wait for it, which tools it needs, and every setting checked - all problems at
    once, each naming its variable."""
    s = settings or {}
    problems = []
    try:
        stages = select_stages(run_tags, s.get("stages"))
    except BurninRunError as exc:
        problems += exc.problems
        # The known ones are still checked, so that one run names every problem.
        configured = s.get("stages")
        stages = [name for name in STAGE_NAMES if isinstance(configured, list) and name in configured]
    try:
        burnin.check_thresholds(thresholds)
    except burnin.BurninError as exc:
        problems += exc.problems
    interval = value_checks.as_int(s.get("poll_interval", 30))
    if interval is None or interval < 1:
        problems.append("burnin_poll_interval: %r is not a whole number of seconds >= 1" % s.get("poll_interval"))
    margin = value_checks.as_int(s.get("poll_margin", 900))
    if margin is None or margin < 0:
        problems.append("burnin_poll_margin: %r is not a whole number of seconds >= 0" % s.get("poll_margin"))
    if s.get("fail_on", "fail") not in ("fail", "watch", "never"):
        problems.append("burnin_fail_on: %r is not fail, watch or never" % s.get("fail_on"))
    tools = sorted(set(stage(name)["tool"] for name in stages))
    build = []
    if _true(s.get("tools_install", True)):
        for tool, key in (("gpu_burn", "gpu_burn"), ("nvbandwidth", "nvbandwidth")):
            if tool not in tools:
                continue
            url, digest = s.get("%s_archive_url" % key), s.get("%s_archive_sha256" % key)
            if not isinstance(url, str) or not re.match(r"^(https|file)://\S+$", url):
                problems.append("burnin_%s_archive_url: %r is not an https:// (or file://) URL of the source archive"
                                % (key, url))
            if not isinstance(digest, str) or not _SHA256.match(digest):
                problems.append("burnin_%s_archive_sha256: %r is not the archive's sha256 (64 hex digits): the "
                                "source is built only when its checksum is known (docs/burnin.md says how to get it)"
                                % (key, digest))
            # The role removes this directory with everything in it when a new archive arrives (build.yml): it must
            # be one a removal may take (not /opt, /root, a home directory, a system directory).
            directory = s.get("%s_dir" % key)
            if directory is None and key == "nvbandwidth" and isinstance(s.get("nvbandwidth_path"), str):
                directory = os.path.dirname(s["nvbandwidth_path"])
            problems += value_checks.removable_dir_problems("burnin_%s_dir" % key, directory)
            build.append(tool)
    plans = {}
    try:
        plans = check_settings(s, stages)
    except BurninRunError as exc:
        problems += exc.problems
    if problems:
        raise BurninRunError(problems)
    for entry in plans.values():
        entry["retries"] = -(-(entry["seconds"] + margin) // interval)
        entry["sample_interval"] = value_checks.as_int(s.get("sample_interval", 5)) if entry["sample"] else 0
    return {"stages": stages, "plans": plans, "tools": tools, "build": build, "poll_interval": interval,
            "smi_fields": ",".join(s.get("smi_fields") or SMI_FIELDS.split(",")),
            "stage_tools": [{"name": name, "tool": plans[name]["tool"]} for name in stages]}
