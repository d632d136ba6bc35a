# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in outputs read and judged as seed 000's table does (plain Python, no Ansible imports).

Parsers take the text a tool printed and return plain data; ``evaluate`` turns the data of one host into a verdict
per row of the seed's table and per GPU:

============================  ===========  =====================  =============================
row                           pass         watch                  fail
============================  ===========  =====================  =============================
steady GPU temperature        < 83 °C      83-89 °C               >= 90 °C
throttling (thermal / HW)     none         some of the time       > 10 % of the time
XID errors                    0            -                      > 0
PCIe replays                  0            1-10                   > 10
gpu-burn FAULTY               0            -                      > 0
power cap                     occasional   frequent               sustained
============================  ===========  =====================  =============================

The seed names "< 5 %" for the watch row of throttling and "> 10 %" for its fail row; 5-10 % is not named there
and is judged watch here. It gives no numbers for the power cap row: ours are in ``THRESHOLDS`` (time power-capped:
up to 20 % pass, up to 80 % watch, more fail) and can be changed like every threshold (the role's variables).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

PASS, WATCH, FAIL = "pass", "watch", "fail"
RANK = {PASS: 0, WATCH: 1, FAIL: 2}

THRESHOLDS = {
    "temperature_watch_c": 83,       # steady temperature at or above: watch
    "temperature_fail_c": 90,        # at or above: fail
    "throttle_fail_percent": 10,     # time throttled (thermal or hardware slowdown) above: fail; any: watch
    "pcie_replay_fail": 10,          # replays during the run above: fail; any: watch
    "power_cap_watch_percent": 20,   # time held at the power cap above: watch
    "power_cap_fail_percent": 80,    # above: fail
}

# nvidia-smi's clocks_event_reasons.active (formerly clocks_throttle_reasons.active) bits (nvml.h,
# nvmlClocksEventReason*): what counts as throttling in the seed's sense, and the power cap row.
REASON_SW_POWER_CAP = 0x4
REASON_THROTTLE = 0x8 | 0x20 | 0x40 | 0x80   # HW slowdown, SW thermal, HW thermal, HW power brake


class BurninError(value_checks.SettingsProblems):
    """Output that cannot be read, or thresholds that make no sense: every problem, each naming its source."""


def _worst(verdicts):
    return max(verdicts, key=lambda v: RANK[v]) if verdicts else PASS


def check_thresholds(thresholds):
    """The thresholds merged over THRESHOLDS, each a number (digit strings allowed), in a usable order."""
    merged = dict(THRESHOLDS)
    problems = []
    for key, value in (thresholds or {}).items():
        if key not in THRESHOLDS:
            problems.append("burnin_%s: not a threshold of the burn-in table (known: %s)"
                            % (key, ", ".join(sorted(THRESHOLDS))))
            continue
        number = value_checks.as_number(value)
        if number is None or number < 0:
            problems.append("burnin_%s: %r is not a number >= 0" % (key, value))
            continue
        merged[key] = number
    if not problems:
        if merged["temperature_watch_c"] > merged["temperature_fail_c"]:
            problems.append("burnin_temperature_watch_c: %g is above burnin_temperature_fail_c (%g)"
                            % (merged["temperature_watch_c"], merged["temperature_fail_c"]))
        if merged["power_cap_watch_percent"] > merged["power_cap_fail_percent"]:
            problems.append("burnin_power_cap_watch_percent: %g is above burnin_power_cap_fail_percent (%g)"
                            % (merged["power_cap_watch_percent"], merged["power_cap_fail_percent"]))
    if problems:
        raise BurninError(problems)
    return merged


# ---------------------------------------------------------------- nvidia-smi --query-gpu csv log

def _number(text):
    """'65', '350.12 W', '100 %', '1695 MHz' -> float; '[N/A]', 'N/A', '[Not Supported]' -> None."""
    match = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)", text or "")
    return float(match.group(1)) if match else None


def _field(header):
    """'utilization.gpu [%]' -> 'utilization.gpu'; the throttle reasons under their old and new names."""
    name = header.strip().split(" [", 1)[0].strip()
    return name.replace("clocks_throttle_reasons.", "clocks_event_reasons.")


def parse_smi_csv(text):
    """Samples of an ``nvidia-smi --query-gpu=... --format=csv`` log, as seed 000's loop writes it: the header
    repeated before each sample block, ``=== date ===`` lines and blank lines in between. A header line
    (it starts with a field name such as ``timestamp`` or ``index``) sets the columns for the lines after it.

    Returns ``{"samples": [{field: value}], "fields": [...], "skipped": N}``: numbers as floats (units dropped),
    ``clocks_event_reasons.active`` as an int bitmask, other fields as text, N/A as None."""
    samples, fields, skipped, row = [], None, 0, 0
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("==="):
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if re.match(r"^[a-z_]+(\.[a-z_.]+)?( \[.*\])?$", cells[0]) and not re.match(r"^[0-9]", cells[0]):
            fields, row = [_field(cell) for cell in cells], 0
            continue
        if fields is None or len(cells) != len(fields):
            skipped += 1
            continue
        # nvidia-smi prints one line per GPU in the same order each time: the line's place in its block is the GPU
        # when the query has no index, bus id or UUID.
        sample, row = {"_row": row}, row + 1
        for index, name in enumerate(fields):
            cell = cells[index]
            if name.startswith("clocks_event_reasons."):
                sample[name] = int(cell, 16) if re.match(r"^0x[0-9a-fA-F]+$", cell) else None
            elif name in ("timestamp", "name", "pci.bus_id", "uuid", "gpu_bus_id", "driver_version", "serial"):
                sample[name] = cell
            else:
                sample[name] = _number(cell)
        samples.append(sample)
    return {"samples": samples, "fields": fields or [], "skipped": skipped}


def gpu_key(sample):
    for key in ("pci.bus_id", "gpu_bus_id", "uuid", "index"):
        if sample.get(key) is not None:
            return str(sample[key]) if key != "index" else str(int(sample[key]))
    return str(sample.get("_row", 0))


def summarise_smi(samples):
    """Per GPU (by bus id): samples, the steady temperature (the median of the second half of the run: the first
    half is the warm-up the seed's 10-minute stage is for), the hottest sample, and the share of samples that were
    throttled (thermal or hardware slowdown) and that were held at the power cap (percent)."""
    by_gpu = {}
    for sample in samples:
        by_gpu.setdefault(gpu_key(sample), []).append(sample)
    summary = {}
    for gpu, rows in sorted(by_gpu.items()):
        temps = [r["temperature.gpu"] for r in rows if r.get("temperature.gpu") is not None]
        steady = sorted(temps[len(temps) // 2:])
        reasons = [r.get("clocks_event_reasons.active") for r in rows]
        known = [r for r in reasons if r is not None]
        summary[gpu] = {
            "samples": len(rows),
            "name": rows[0].get("name"),
            "steady_temperature_c": steady[(len(steady) - 1) // 2] if steady else None,
            "max_temperature_c": max(temps) if temps else None,
            "throttled_percent": (round(100.0 * sum(1 for r in known if r & REASON_THROTTLE) / len(known), 2)
                                  if known else None),
            "power_capped_percent": (round(100.0 * sum(1 for r in known if r & REASON_SW_POWER_CAP) / len(known), 2)
                                     if known else None),
        }
    return summary


# ---------------------------------------------------------------- gpu-burn

_BURN_DEVICE = re.compile(r"^\s*GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_BURN_PROGRESS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)%\s+proc'd:(.*?)errors:(.*?)temps:(.*)$")
_BURN_TESTED = re.compile(r"^\s*Tested (\d+) GPUs:\s*$")
_BURN_RESULT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)\s*$")


def parse_gpu_burn(text):
    """gpu-burn's output (wilicc/gpu-burn, 2019 to 2026 formats). Its exit status says nothing (it exits 0 with
    FAULTY GPUs), and a run that was cut off has no summary, so the verdict is read from the text: per GPU the
    summary's OK/FAULTY, the largest error count and the hottest temperature of the progress lines.

    Returns ``{"gpus": {index: {"name", "uuid", "result" (OK, FAULTY or None when the summary does not list it),
    "errors", "max_temperature_c", "faulty" (True, False, or None: not in the summary)}}, "tested", "complete",
    "percent"}``."""
    gpus, tested, complete, percent = {}, None, False, None

    def gpu(index):
        return gpus.setdefault(str(index), {"name": None, "uuid": None, "result": None, "errors": 0,
                                            "max_temperature_c": None})

    for line in re.split(r"[\r\n]+", text or ""):
        match = _BURN_DEVICE.match(line)
        if match:
            gpu(match.group(1)).update(name=match.group(2), uuid=match.group(3))
            continue
        match = _BURN_PROGRESS.match(line)
        if match:
            percent = float(match.group(1))
            errors = re.findall(r"(?<![0-9])(-?[0-9]+)", match.group(3).replace("(WARNING!)", " "))
            temps = re.findall(r"(-?[0-9]+) C", match.group(4))
            for index, count in enumerate(errors):
                entry = gpu(index)
                if abs(int(count)) > abs(entry["errors"]):
                    entry["errors"] = int(count)
            for index, temp in enumerate(temps):
                entry = gpu(index)
                if entry["max_temperature_c"] is None or int(temp) > entry["max_temperature_c"]:
                    entry["max_temperature_c"] = int(temp)
            continue
        match = _BURN_TESTED.match(line)
        if match:
            tested, complete = int(match.group(1)), True
            continue
        match = _BURN_RESULT.match(line)
        if match and complete:
            gpu(match.group(1))["result"] = match.group(2)
    for entry in gpus.values():
        entry["faulty"] = None if entry["result"] is None else (entry["result"] == "FAULTY" or entry["errors"] != 0)
    return {"gpus": gpus, "tested": tested, "complete": complete, "percent": percent}


# ---------------------------------------------------------------- nvbandwidth

_NVB_TITLE = re.compile(r"^(memcpy|memset)?\s*(CE|SM)\s+(.*?)\s+bandwidth \(GB/s\)\s*$")


def _nvb_value(cell):
    """A matrix cell in GB/s; N/A (the diagonal, a pair without a path) and anything else that is not a number are
    None."""
    return float(cell) if re.match(r"^[0-9]+(?:\.[0-9]+)?$", cell) else None


def parse_nvbandwidth(text):
    """nvbandwidth's output (v0.2 to v0.10): for each test its matrix (rows and columns as printed, N/A as None) and
    its SUM line: a matrix is named by the SUM line after it (``Running <test>.`` may be missing from a copied
    output, and v0.10's bidirectional tests print three matrices, each with its own SUM).

    Returns ``{"version", "devices": {index: name}, "tests": {name: {"engine" (CE or SM), "title", "columns",
    "matrix": {row: {column: GB/s}}, "sum"}}}``."""
    version, devices, tests = None, {}, {}
    pending, header = None, None
    for raw in (text or "").splitlines():
        line = raw.strip()
        match = re.match(r"^nvbandwidth Version: (\S+)", line)
        if match:
            version = match.group(1)
            continue
        match = re.match(r"^Device (\d+): (.+)$", line)
        if match:
            devices[match.group(1)] = match.group(2)
            continue
        match = _NVB_TITLE.match(line)
        if match:
            pending = {"engine": match.group(2), "title": line, "columns": [], "matrix": {}, "sum": None}
            header = True
            continue
        if pending is not None and header and re.match(r"^[0-9]+(\s+[0-9]+)*$", line):
            pending["columns"] = line.split()
            header = False
            continue
        if pending is not None and not header and line and re.match(r"^[0-9]+\s", line):
            cells = line.split()
            pending["matrix"][cells[0]] = dict((column, _nvb_value(cells[1 + i]))
                                               for i, column in enumerate(pending["columns"]) if 1 + i < len(cells))
            continue
        match = re.match(r"^SUM (\S+) ([0-9]+(?:\.[0-9]+)?)$", line)
        if match:
            name = match.group(1)
            # The matrix printed since the last SUM is this test's (v0.10's bidirectional tests print three, each
            # with its own SUM: <test>_read1, _read2, _total).
            entry = pending if pending is not None else {
                "engine": "SM" if name.endswith("_sm") else "CE", "title": None, "columns": [], "matrix": {}}
            entry["sum"] = float(match.group(2))
            tests[name] = entry
            pending, header = None, None
    return {"version": version, "devices": devices, "tests": tests}


# ---------------------------------------------------------------- dcgmi diag

def parse_dcgmi_diag(text):
    """``dcgmi diag -r N``'s table (DCGM 3 and 4): every test with its result lines (``Pass - All``,
    ``Fail - GPU: 1``, ``GPU0: Pass``), the GPUs that failed, the warnings (wrapped cells joined again), the
    metadata, and a verdict: fail when a test failed, watch when one warned, pass otherwise (Skip is not a failure).

    Returns ``{"metadata": {...}, "tests": {name: {"results": [...], "verdict", "failed_gpus": [...]}},
    "warnings": [...], "verdict"}``."""
    metadata, tests, warnings = {}, {}, []
    section, name, note = None, None, None
    for raw in (text or "").splitlines():
        line = raw.rstrip("\n")
        match = re.match(r"^[|+]-+\s+(\w[\w ]*?)\s+-+[+|]", line)
        if match:
            section, name, note = match.group(1), None, None
            continue
        if not line.startswith("|") or line.startswith("|=") or "+===" in line:
            continue
        parts = line.split("|")
        if len(parts) < 3:
            continue
        label, cell = parts[1].strip(), "|".join(parts[2:-1]) if line.rstrip().endswith("|") else "|".join(parts[2:])
        cell = cell[1:] if cell.startswith(" ") else cell
        if label in ("Diagnostic", "") and cell.strip() == "Result":
            continue
        # Messages are cut every 45 characters, mid-word included (the cell is 46 wide): joined as they were.
        if label in ("Warning", "Info"):
            note = {"kind": label, "text": cell[:45]}
            (warnings if label == "Warning" else []).append(note)
            continue
        if not label and note is not None:
            note["text"] += cell[:45]
            continue
        if section == "Metadata" and label:
            metadata[label] = cell.strip()
            continue
        if label:
            name, note = label, None
            tests[name] = {"section": section, "results": [], "verdict": PASS, "failed_gpus": []}
        if name is None or not cell.strip():
            continue
        result = cell.strip()
        tests[name]["results"].append(result)
        words = re.sub(r"^GPU\s*[0-9]+:\s*", "", result).split()
        outcome = words[0].lower().strip("-,") if words else ""
        if outcome.startswith("fail"):
            tests[name]["verdict"] = FAIL
            per_gpu = re.match(r"^GPU\s*([0-9]+):", result)                 # DCGM 4: "GPU0: Fail"
            listed = re.search(r"GPUs?:\s*([0-9, ]+)$", result)              # DCGM 3: "Fail - GPU: 1"
            gpus = [per_gpu.group(1)] if per_gpu else re.findall(r"[0-9]+", listed.group(1)) if listed else []
            tests[name]["failed_gpus"].extend(int(g) for g in gpus)
        elif outcome.startswith("warn") and tests[name]["verdict"] == PASS:
            tests[name]["verdict"] = WATCH
    for warning in warnings:
        warning["text"] = re.sub(r"\s+", " ", warning["text"]).strip()
    return {"metadata": metadata, "tests": tests, "warnings": [w["text"] for w in warnings],
            "verdict": _worst([t["verdict"] for t in tests.values()])}


# ---------------------------------------------------------------- vllm bench serve

def _key(label):
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def parse_vllm_bench(text):
    """The result block of ``vllm bench serve`` (and of the older ``benchmarks/benchmark_serving.py``): every
    ``Label: number`` line between the ``Serving Benchmark Result`` banner and the closing line of ``=``, keyed by
    the label in lower case with its unit (``Mean TTFT (ms)`` -> ``mean_ttft_ms``, ``Total Token throughput (tok/s)``
    -> ``total_token_throughput_tok_s``), whatever the order, the version or the extra lines.

    Returns ``{"metrics": {key: number}, "labels": {key: label}}``; empty when the block is not there."""
    metrics, labels, inside = {}, {}, False
    for raw in (text or "").splitlines():
        line = raw.strip()
        if "Serving Benchmark Result" in line:
            inside, metrics, labels = True, {}, {}
            continue
        if not inside:
            continue
        if re.match(r"^=+$", line):
            break
        match = re.match(r"^([^:]+):\s+(-?[0-9]+(?:\.[0-9]+)?)\s*$", line)
        if match:
            key = _key(match.group(1))
            value = float(match.group(2))
            metrics[key] = int(value) if value.is_integer() and "." not in match.group(2) else value
            labels[key] = match.group(1).strip()
    return {"metrics": metrics, "labels": labels}


# ---------------------------------------------------------------- the verdict table

def _temperature(value, t):
    if value is None:
        return None
    return FAIL if value >= t["temperature_fail_c"] else WATCH if value >= t["temperature_watch_c"] else PASS


def _throttle(percent, t):
    if percent is None:
        return None
    return FAIL if percent > t["throttle_fail_percent"] else WATCH if percent > 0 else PASS


def _count(value, fail_above=0, watch_above=None):
    if value is None:
        return None
    if value > fail_above:
        return FAIL
    return WATCH if watch_above is not None and value > watch_above else PASS


def _power(percent, t):
    if percent is None:
        return None
    return (FAIL if percent > t["power_cap_fail_percent"] else WATCH if percent > t["power_cap_watch_percent"]
            else PASS)


def evaluate(gpus, thresholds=None):
    """The seed's table for each GPU of a host and the host's verdict.

    ``gpus``: {gpu: {"steady_temperature_c", "throttled_percent", "power_capped_percent" (summarise_smi),
    "xid_errors", "pcie_replays" (during the run), "faulty" (gpu-burn: True/False, or None when the GPU is missing
    from its summary)}}; a value that is None or absent is "not measured" and leaves its row out, except a GPU
    gpu-burn did not report, which fails (it did not run there).

    Returns {"verdict", "gpus": {gpu: {"verdict", "rows": {row: {"value", "verdict"}}}}, "reasons": [...]}."""
    t = check_thresholds(thresholds)
    problems = []
    for gpu, data in sorted((gpus or {}).items()):
        if not isinstance(data, dict):
            problems.append("GPU %s: its measurements are %s, not a mapping" % (gpu, value_checks.type_name(data)))
            continue
        for key in ("steady_temperature_c", "throttled_percent", "power_capped_percent", "xid_errors",
                    "pcie_replays"):
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                problems.append("GPU %s: %s is %r, not a number" % (gpu, key, value))
        if data.get("faulty", False) not in (True, False, None):
            problems.append("GPU %s: faulty is %r, not true, false or null" % (gpu, data.get("faulty")))
    if problems:
        raise BurninError(problems)
    result = {"gpus": {}, "reasons": []}
    for gpu, data in sorted((gpus or {}).items()):
        rows = {}
        faulty = data.get("faulty", "unknown")
        checks = [
            ("temperature", data.get("steady_temperature_c"), _temperature(data.get("steady_temperature_c"), t)),
            ("throttling", data.get("throttled_percent"), _throttle(data.get("throttled_percent"), t)),
            ("xid", data.get("xid_errors"), _count(data.get("xid_errors"))),
            ("pcie_replay", data.get("pcie_replays"),
             _count(data.get("pcie_replays"), fail_above=t["pcie_replay_fail"], watch_above=0)),
            ("gpu_burn", faulty if faulty != "unknown" else None,
             None if faulty == "unknown" else FAIL if faulty is None or faulty else PASS),
            ("power_cap", data.get("power_capped_percent"), _power(data.get("power_capped_percent"), t)),
        ]
        for row, value, verdict in checks:
            if verdict is None:
                continue
            rows[row] = {"value": value, "verdict": verdict}
            if verdict != PASS:
                result["reasons"].append("GPU %s: %s %s (%s)" % (gpu, row, verdict, describe(row, value)))
        result["gpus"][gpu] = {"verdict": _worst([r["verdict"] for r in rows.values()]), "rows": rows}
    result["verdict"] = _worst([g["verdict"] for g in result["gpus"].values()])
    return result


def describe(row, value):
    if row == "gpu_burn":
        return "missing from gpu-burn's summary" if value is None else "FAULTY"
    units = {"temperature": " °C", "throttling": " % of the time", "power_cap": " % of the time"}
    return "%s%s" % (value, units.get(row, ""))
