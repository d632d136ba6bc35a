# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in reports as pages a person reads (plain Python, no Ansible imports).

``render_markdown`` / ``render_html`` turn one host's report (burnin_run.build_report's dict) into Markdown and into
one self-contained HTML page: the seed's verdict table in its colours (pass / 通过 green, watch / 关注 amber,
fail / 不通过 red, not measured grey), the stages, per GPU one chart of four panels drawn from the nvidia-smi log
(temperature with the watch and fail lines, SM clock, power, the clock event reasons over time), a heat map per
nvbandwidth matrix, dcgmi diag's tests and vllm bench serve's numbers. ``render_fleet_markdown`` /
``render_fleet_html`` list every host with its verdict, its worst reasons and a link to its page;
``render_preflight_html`` gives the host preflight report (module_utils/preflight.py) the same page.

The pages load nothing: the charts are PNG images drawn with matplotlib (imported only when a chart is drawn, with
its Agg canvas and no global state) and embedded as ``data:`` URIs, the style is inline, there is no script, and a
Content-Security-Policy forbids every other source. Every text taken from the data is escaped. The same report gives
the same bytes (no time stamps in the PNG files), so a rerun does not rewrite an unchanged page.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import html
import io
import math
import re
import time

from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin

# The seed's colours: background and text of a verdict cell. Preflight's warn is the seed's watch; skip and "not
# measured" are grey.
VERDICT_COLOURS = {
    "pass": ("#1a7f37", "#ffffff"),
    "watch": ("#e3a008", "#1f2328"),
    "warn": ("#e3a008", "#1f2328"),
    "fail": ("#cf222e", "#ffffff"),
    "skip": ("#8c959f", "#ffffff"),
    "none": ("#8c959f", "#ffffff"),
}
VERDICT_LABELS = {"pass": "通过", "watch": "关注", "fail": "不通过"}

# The seed's table, in its order.
ROWS = (
    ("temperature", "steady GPU temperature"),
    ("throttling", "throttling (thermal / HW)"),
    ("xid", "XID errors"),
    ("pcie_replay", "PCIe replays"),
    ("gpu_burn", "gpu-burn FAULTY"),
    ("power_cap", "power cap"),
)

# nvidia-smi's clocks_event_reasons.active bits (nvml.h nvmlClocksEventReason*; nvidia-smi --help-query-gpu).
THROTTLE_REASONS = (
    (0x1, "GPU idle"),
    (0x2, "applications clocks setting"),
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x10, "sync boost"),
    (0x20, "SW thermal slowdown"),
    (0x40, "HW thermal slowdown"),
    (0x80, "HW power brake"),
    (0x100, "display clock setting"),
)

MATPLOTLIB_MISSING = ("matplotlib is needed on the controller to draw the report's charts: pip install matplotlib "
                      "(requirements.txt)")
_DPI = 80
_GREY = "#d0d7de"

CSS = """
body{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif;margin:24px;color:#1f2328;background:#fff;
max-width:1400px}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.25em;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
h3{font-size:1.05em;margin:16px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f6f8fa}
.verdict{font-weight:bold;white-space:nowrap}
.badge{display:inline-block;padding:3px 12px;border-radius:4px;font-weight:bold;font-size:1.1em}
.meta{color:#59636e}.not-run{color:#59636e;font-style:italic}
figure{display:inline-block;margin:8px 16px 16px 0;vertical-align:top}figcaption{font-size:.9em;color:#59636e}
img.chart{display:block;border:1px solid #d0d7de}
td ul{margin:0;padding-left:18px}ul.evidence{font-family:"DejaVu Sans Mono",monospace;font-size:.85em}
.nowrap{white-space:nowrap}
.legend span{margin-right:6px;padding:2px 8px;border-radius:3px}
""" + "".join(".v-%s{background:%s;color:%s}" % (name, bg, fg) for name, (bg, fg) in VERDICT_COLOURS.items())

# The page may show its own inline style and data: images; nothing else loads (no script, font, frame or fetch).
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _e(value):
    return html.escape("" if value is None else str(value), quote=True)


def _num(value):
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if not (isinstance(value, float) and math.isnan(value)) else None
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _fmt(value, digits=1):
    number = _num(value)
    if number is None:
        return "—" if value is None else str(value)
    return ("%d" % number) if number.is_integer() else ("%.*f" % (digits, number))


def _when(value):
    """A time as text: seconds since the epoch (what the stage files hold) in UTC, ISO 8601; text as it is."""
    if value is None or value == "":
        return "—"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(value))
    return str(value)


def _thresholds(report):
    merged = dict(burnin.THRESHOLDS)
    for key, value in (report.get("thresholds") or {}).items():
        if _num(value) is not None:
            merged[key] = _num(value)
    return merged


def _sort_key(key):
    text = str(key)
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def _verdict_class(verdict):
    return verdict if verdict in VERDICT_COLOURS else "none"


def _verdict_text(verdict):
    return verdict if verdict else "not measured"


# ---------------------------------------------------------------- the seed's table

def criteria(thresholds):
    """{row: (pass, watch, fail)} of the seed's table with these thresholds, as text."""
    t = thresholds
    return {
        "temperature": ("< %s °C" % _fmt(t["temperature_watch_c"]),
                        "%s to < %s °C" % (_fmt(t["temperature_watch_c"]), _fmt(t["temperature_fail_c"])),
                        "≥ %s °C" % _fmt(t["temperature_fail_c"])),
        "throttling": ("none", "up to %s %% of the time" % _fmt(t["throttle_fail_percent"]),
                       "> %s %% of the time" % _fmt(t["throttle_fail_percent"])),
        "xid": ("0", "—", "> 0"),
        "pcie_replay": ("0", "1 to %s" % _fmt(t["pcie_replay_fail"]), "> %s" % _fmt(t["pcie_replay_fail"])),
        "gpu_burn": ("OK", "—", "FAULTY, or missing from the summary"),
        "power_cap": ("≤ %s %% of the time" % _fmt(t["power_cap_watch_percent"]),
                      "≤ %s %% of the time" % _fmt(t["power_cap_fail_percent"]),
                      "> %s %% of the time" % _fmt(t["power_cap_fail_percent"])),
    }


def row_value(row, value):
    """A measured value of the seed's table as text."""
    if row == "gpu_burn":
        return "missing" if value is None else "FAULTY" if value else "OK"
    if value is None:
        return "—"
    units = {"temperature": " °C", "throttling": " %", "power_cap": " %"}
    return "%s%s" % (_fmt(value), units.get(row, ""))


def _gpu_columns(report):
    gpus = report.get("gpus") or {}
    return [(key, gpus[key] or {}) for key in sorted(gpus, key=_sort_key)]


# ---------------------------------------------------------------- charts

def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise burnin.BurninError([MATPLOTLIB_MISSING])
    return Figure, FigureCanvasAgg


def _png(figure, canvas_class):
    canvas_class(figure)
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=_DPI, metadata={"Software": None})
    return out.getvalue()


def _plain(text):
    """Text for a matplotlib label: a '$' would start mathtext."""
    return str(text).replace("$", r"\$")


def _floats(values, length):
    values = list(values or [])[:length]
    values += [None] * (length - len(values))
    return [float("nan") if _num(v) is None else _num(v) for v in values]


def _time_axis(t_s):
    finite = [t for t in t_s if not math.isnan(t)]
    span = (max(finite) - min(finite)) if finite else 0
    if span > 3 * 3600:
        return [t / 3600.0 for t in t_s], "h"
    if span > 180:
        return [t / 60.0 for t in t_s], "min"
    return list(t_s), "s"


def _runs(times, active):
    """(start, width) of every run of consecutive active samples; a sample lasts until the next one."""
    finite = [times[i + 1] - times[i] for i in range(len(times) - 1)
              if not (math.isnan(times[i]) or math.isnan(times[i + 1])) and times[i + 1] > times[i]]
    step = sorted(finite)[len(finite) // 2] if finite else 1.0
    runs, start = [], None
    for index, on in enumerate(active):
        if on and start is None and not math.isnan(times[index]):
            start = index
        if start is not None and (not on or index == len(active) - 1 or math.isnan(times[index])):
            last = index if on and not math.isnan(times[index]) else index - 1
            end = times[last + 1] if last + 1 < len(times) and not math.isnan(times[last + 1]) else times[last] + step
            runs.append((times[start], max(end - times[start], step * 0.2)))
            start = None
    return runs


def _empty(axis, text="not measured"):
    axis.text(0.5, 0.5, text, transform=axis.transAxes, ha="center", va="center", color="#59636e", fontsize=10)
    axis.set_yticks([])


def smi_chart(series, thresholds=None):
    """One GPU's nvidia-smi log as a PNG: temperature (with the watch and fail lines), SM clock, power and the clock
    event reasons over time, four panels on one time axis. ``series``: {"t_s", "temperature_c", "sm_clock_mhz",
    "power_w", "throttle_reasons"} (lists of one length, None where a sample has no value)."""
    Figure, canvas = _matplotlib()
    t = dict(burnin.THRESHOLDS)
    t.update(thresholds or {})
    length = len(series.get("t_s") or [])
    times, unit = _time_axis(_floats(series.get("t_s"), length))
    marker = "o" if length <= 60 else None
    # Fixed margins (inches) instead of a layout engine: drawing once is half the time on a small controller.
    width, height = 9.0, 7.4
    figure = Figure(figsize=(width, height), dpi=_DPI)
    temp, clock, power, reasons = figure.subplots(4, 1, sharex=True, gridspec_kw={
        "height_ratios": [3, 2.2, 2.2, 3.4], "left": 2.1 / width, "right": 1 - 0.2 / width, "top": 1 - 0.15 / height,
        "bottom": 0.55 / height, "hspace": 0.12})
    panels = ((temp, "temperature_c", "temperature (°C)", "#cf222e"), (clock, "sm_clock_mhz", "SM clock (MHz)",
                                                                       "#0969da"),
              (power, "power_w", "power (W)", "#8250df"))
    for axis, key, label, colour in panels:
        values = _floats(series.get(key), length)
        axis.set_ylabel(label, fontsize=9)
        axis.tick_params(labelsize=8)
        axis.grid(True, color="#eaeef2", linewidth=0.8)
        if all(math.isnan(v) for v in values):
            _empty(axis)
            continue
        axis.plot(times, values, color=colour, linewidth=1.2, marker=marker, markersize=3)
    temps = [v for v in _floats(series.get("temperature_c"), length) if not math.isnan(v)]
    if temps:
        watch, fail = float(t["temperature_watch_c"]), float(t["temperature_fail_c"])
        temp.axhline(watch, color=VERDICT_COLOURS["watch"][0], linestyle="--", linewidth=1.2,
                     label="watch %s °C" % _fmt(watch))
        temp.axhline(fail, color=VERDICT_COLOURS["fail"][0], linestyle="--", linewidth=1.2,
                     label="fail %s °C" % _fmt(fail))
        temp.set_ylim(min(temps + [watch]) - 5, max(temps + [fail]) + 3)
        temp.legend(loc="lower right", fontsize=8, framealpha=0.9)
    masks = list(series.get("throttle_reasons") or [])[:length]
    masks += [None] * (length - len(masks))
    known = [m for m in masks if isinstance(m, int) and not isinstance(m, bool)]
    reasons.set_ylabel("clock event reasons", fontsize=9)
    reasons.tick_params(labelsize=8)
    if not known:
        _empty(reasons)
    else:
        labels = []
        for row, (bit, name) in enumerate(THROTTLE_REASONS):
            active = [isinstance(m, int) and bool(m & bit) for m in masks]
            share = 100.0 * sum(active) / len(known)
            labels.append("%s %s %%" % (name, _fmt(share, 0)))
            colour = ("#cf222e" if bit & burnin.REASON_THROTTLE else
                      VERDICT_COLOURS["watch"][0] if bit & burnin.REASON_SW_POWER_CAP else "#8c959f")
            runs = _runs(times, active)
            if runs:
                reasons.broken_barh(runs, (row - 0.4, 0.8), facecolors=colour)
        reasons.set_yticks(range(len(THROTTLE_REASONS)), labels=labels, fontsize=7)
        reasons.set_ylim(-0.6, len(THROTTLE_REASONS) - 0.4)
        reasons.invert_yaxis()
        reasons.grid(True, axis="x", color="#eaeef2", linewidth=0.8)
    reasons.set_xlabel("time since the first sample (%s)" % unit, fontsize=9)
    if length == 0:
        reasons.set_xlim(0, 1)
    return _png(figure, canvas)


def smi_charts(smi, thresholds=None):
    """[(gpu key, PNG)] for every GPU of the report's ``smi`` part, in GPU order."""
    return [(key, smi_chart(smi[key] or {}, thresholds)) for key in sorted(smi or {}, key=_sort_key)]


def _matrix(test):
    """(rows, columns, [[value or None]]) of a report's nvbandwidth test (a list of rows, or parse_nvbandwidth's
    {row: {column: value}})."""
    matrix = test.get("matrix") or []
    if isinstance(matrix, dict):
        rows = sorted(matrix, key=_sort_key)
        columns = list(test.get("columns") or sorted({c for r in matrix.values() for c in r}, key=_sort_key))
        return rows, columns, [[(matrix[r] or {}).get(c) for c in columns] for r in rows]
    rows = [str(r) for r in (test.get("rows") or range(len(matrix)))]
    width = max([len(r or []) for r in matrix] or [0])
    columns = [str(c) for c in (test.get("columns") or range(width))]
    return rows, columns, [list(r or []) + [None] * (len(columns) - len(r or [])) for r in matrix]


def bandwidth_heatmap(name, test):
    """One nvbandwidth matrix as a PNG heat map (GB/s written in each cell, N/A cells grey); None when the test has
    no matrix (only its SUM line was recorded)."""
    rows, columns, values = _matrix(test)
    if not rows or not columns:
        return None
    Figure, canvas = _matplotlib()
    from matplotlib import colormaps

    data = [[float("nan") if _num(v) is None else _num(v) for v in row[:len(columns)]] for row in values]
    cell_w, cell_h = (max(0.75, 3.0 / len(columns)), 0.42) if len(columns) <= 16 else (0.3, 0.2)
    plot_w, plot_h = cell_w * len(columns), max(cell_h * len(rows), 0.6)
    left, right, bottom, top = 0.6, 1.1, 0.5, 0.15
    width, height = left + plot_w + right, bottom + plot_h + top
    figure = Figure(figsize=(width, height), dpi=_DPI)
    axis = figure.add_axes((left / width, bottom / height, plot_w / width, plot_h / height))
    scale = figure.add_axes(((left + plot_w + 0.15) / width, bottom / height, 0.15 / width, plot_h / height))
    cmap = colormaps["viridis"].with_extremes(bad=_GREY)
    # From 0: links of one kind look alike and a slow one stands out (a min-max scale would paint noise).
    finite = [v for row in data for v in row if not math.isnan(v)]
    low, high = 0.0, max(finite + [0.0]) or 1.0
    image = axis.imshow(data, cmap=cmap, vmin=low, vmax=high, aspect="auto")
    axis.set_xticks(range(len(columns)), labels=[_plain(c) for c in columns], fontsize=8)
    axis.set_yticks(range(len(rows)), labels=[_plain(r) for r in rows], fontsize=8)
    axis.set_xlabel("column", fontsize=8)
    axis.set_ylabel("row", fontsize=8)
    if len(columns) <= 16:
        for r, row in enumerate(data):
            for c, value in enumerate(row):
                if math.isnan(value):
                    axis.text(c, r, "N/A", ha="center", va="center", fontsize=7, color="#59636e")
                    continue
                light = (value - low) / (high - low) > 0.6
                axis.text(c, r, _fmt(value, 1), ha="center", va="center", fontsize=7,
                          color="#1f2328" if light else "#ffffff")
    colorbar = figure.colorbar(image, cax=scale)
    colorbar.ax.tick_params(labelsize=7)
    colorbar.set_label("GB/s", fontsize=8)
    return _png(figure, canvas)


def bandwidth_heatmaps(nvbandwidth):
    """[(test name, PNG)] for every nvbandwidth test with a matrix, by name."""
    charts = []
    for name in sorted(nvbandwidth or {}):
        png = bandwidth_heatmap(name, nvbandwidth[name] or {})
        if png is not None:
            charts.append((name, png))
    return charts


def _img(png, alt, kind, key):
    return ('<img class="chart" data-chart="%s" data-key="%s" alt="%s" src="data:image/png;base64,%s">'
            % (_e(kind), _e(key), _e(alt), base64.b64encode(png).decode("ascii")))


# ---------------------------------------------------------------- HTML

def _page(title, body):
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta http-equiv="Content-Security-Policy" content="%s">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n%s\n</body>\n</html>\n'
            % (_e(CSP), _e(title), CSS, body))


def _cell(verdict, text=None, tag="td"):
    shown = _verdict_text(verdict) if text is None else text
    return '<%s class="verdict v-%s">%s</%s>' % (tag, _verdict_class(verdict), _e(shown), tag)


def _badge(verdict):
    return '<span class="badge v-%s">%s</span>' % (_verdict_class(verdict), _e(_verdict_text(verdict).upper()))


def _legend(statuses):
    items = []
    for status in statuses:
        label = VERDICT_LABELS.get(status)
        items.append('<span class="v-%s"%s>%s</span>' % (_verdict_class(status),
                                                         ' title="%s"' % _e(label) if label else "",
                                                         _e("not measured" if status == "none" else status)))
    return '<p class="legend">%s</p>' % "".join(items)


def _not_run(what):
    return '<p class="not-run">%s: not run</p>' % _e(what)


def _list(items, css=None):
    if not items:
        return ""
    return "<ul%s>%s</ul>" % (' class="%s"' % css if css else "", "".join("<li>%s</li>" % _e(i) for i in items))


def _verdict_table_html(report):
    columns = _gpu_columns(report)
    if not columns:
        return _not_run("gpu-burn and the GPU measurements")
    text = criteria(_thresholds(report))
    head = "".join('<th class="verdict v-%s" title="%s">%s</th>' % (v, _e(VERDICT_LABELS[v]), v)
                   for v in ("pass", "watch", "fail"))
    head += "".join("<th>GPU %s<br><span class=\"meta\">%s</span></th>" % (_e(key), _e(gpu.get("name") or ""))
                    for key, gpu in columns)
    lines = ['<table class="verdicts">', "<tr><th>check</th>%s</tr>" % head]
    for row, label in ROWS:
        cells = "".join("<td>%s</td>" % _e(c) for c in text[row])
        for _key, gpu in columns:
            entry = (gpu.get("rows") or {}).get(row)
            if entry is None:
                cells += _cell(None, "not measured")
            else:
                cells += _cell(entry.get("verdict"), "%s %s" % (row_value(row, entry.get("value")),
                                                                entry.get("verdict")))
        lines.append('<tr data-row="%s"><th>%s</th>%s</tr>' % (_e(row), _e(label), cells))
    lines.append('<tr data-row="gpu"><th>GPU verdict</th><td colspan="3"></td>%s</tr>'
                 % "".join(_cell(gpu.get("verdict")) for _key, gpu in columns))
    lines.append("</table>")
    return "\n".join(lines)


def _duration(seconds):
    number = _num(seconds)
    if number is None:
        return "—"
    number = int(round(number))
    hours, rest = divmod(number, 3600)
    minutes, secs = divmod(rest, 60)
    return "%dh %02dm %02ds" % (hours, minutes, secs) if hours else "%dm %02ds" % (minutes, secs)


def _stages_html(report):
    stages = report.get("stages") or []
    if not stages:
        return _not_run("stages")
    lines = ['<table class="stages"><tr><th>stage</th><th>tool</th><th>state</th><th>exit status</th>'
             "<th>started</th><th>finished</th><th>duration</th><th>verdict</th><th>reasons</th></tr>"]
    for stage in stages:
        exit_status = stage.get("exit_status")
        lines.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>%s<td>%s</td>"
                     "</tr>" % (_e(stage.get("name")), _e(stage.get("tool")), _e(stage.get("state")),
                                _e("—" if exit_status is None else exit_status), _e(_when(stage.get("started_at"))),
                                _e(_when(stage.get("finished_at"))), _e(_duration(stage.get("duration_s"))),
                                _cell(stage.get("verdict")), _list(stage.get("reasons"))))
    lines.append("</table>")
    return "\n".join(lines)


def _smi_html(report):
    smi = report.get("smi") or {}
    if not smi:
        return _not_run("nvidia-smi log")
    gpus = report.get("gpus") or {}
    parts = []
    for key, png in smi_charts(smi, _thresholds(report)):
        series = smi[key] or {}
        name = series.get("name") or (gpus.get(key) or {}).get("name") or ""
        samples = len(series.get("t_s") or [])
        caption = "GPU %s%s: %d sample%s" % (key, " (%s)" % name if name else "", samples, "" if samples == 1 else "s")
        parts.append("<figure>%s<figcaption>%s</figcaption></figure>"
                     % (_img(png, "GPU %s: temperature, SM clock, power and clock event reasons" % key, "smi", key),
                        _e(caption)))
    return "\n".join(parts)


def _nvbandwidth_html(report):
    tests = report.get("nvbandwidth") or {}
    if not tests:
        return _not_run("nvbandwidth")
    charts = dict(bandwidth_heatmaps(tests))
    parts = []
    for name in sorted(tests):
        test = tests[name] or {}
        caption = "%s (%s): SUM %s GB/s" % (name, test.get("engine") or "?", _fmt(test.get("sum"), 2))
        if name in charts:
            parts.append("<figure>%s<figcaption>%s</figcaption></figure>"
                         % (_img(charts[name], "nvbandwidth %s" % name, "nvbandwidth", name), _e(caption)))
        else:
            parts.append('<p>%s <span class="not-run">(no matrix recorded)</span></p>' % _e(caption))
    return "\n".join(parts)


def _dcgmi_html(report):
    diag = report.get("dcgmi_diag")
    if not diag or not diag.get("tests"):
        return _not_run("dcgmi diag")
    lines = ["<p>verdict: %s</p>" % _badge(diag.get("verdict")),
             '<table class="dcgmi"><tr><th>section</th><th>test</th><th>results</th><th>verdict</th></tr>']
    for name, test in (diag.get("tests") or {}).items():
        lines.append("<tr><td>%s</td><td>%s</td><td>%s</td>%s</tr>"
                     % (_e(test.get("section")), _e(name), _e("; ".join(test.get("results") or [])),
                        _cell(test.get("verdict"))))
    lines.append("</table>")
    if diag.get("warnings"):
        lines.append("<h3>warnings</h3>" + _list(diag["warnings"]))
    if diag.get("metadata"):
        lines.append('<p class="meta">%s</p>' % _e("; ".join("%s: %s" % kv for kv in diag["metadata"].items())))
    return "\n".join(lines)


def _bench_rows(bench):
    metrics = bench.get("metrics") or {}
    labels = bench.get("labels") or {}
    return [(labels.get(key) or key, _fmt(value, 2)) for key, value in metrics.items()]


def _vllm_html(report):
    bench = report.get("vllm_bench")
    rows = _bench_rows(bench) if bench else []
    if not rows:
        return _not_run("vllm bench serve")
    return ('<table class="vllm"><tr><th>metric</th><th>value</th></tr>%s</table>'
            % "".join("<tr><td>%s</td><td>%s</td></tr>" % (_e(k), _e(v)) for k, v in rows))


def render_html(report):
    """One host's burn-in report as a self-contained HTML page."""
    host = report.get("host") or "?"
    body = ["<h1>Burn-in report: %s</h1>" % _e(host),
            '<p>verdict: %s <span class="meta">generated at %s</span></p>'
            % (_badge(report.get("verdict")), _e(_when(report.get("generated_at"))))]
    reasons = report.get("reasons") or []
    body.append("<h2>Reasons</h2>" + (_list(reasons) or "<p>none</p>"))
    body.append("<h2>Verdict table (seed 000)</h2>" + _legend(("pass", "watch", "fail", "none"))
                + _verdict_table_html(report))
    body.append("<h2>Stages</h2>" + _stages_html(report))
    body.append("<h2>nvidia-smi log</h2>" + _smi_html(report))
    body.append("<h2>nvbandwidth</h2>" + _nvbandwidth_html(report))
    body.append("<h2>dcgmi diag</h2>" + _dcgmi_html(report))
    body.append("<h2>vllm bench serve</h2>" + _vllm_html(report))
    return _page("Burn-in report: %s" % host, "\n".join(body))


def _worst_reasons(reasons, limit=3):
    """The reasons naming a fail first, then a watch, then the rest; at most ``limit`` and a count of the others."""
    def rank(reason):
        text = " %s " % str(reason).lower()
        return 0 if re.search(r"\bfail", text) else 1 if re.search(r"\bwatch", text) else 2

    ordered = sorted(reasons or [], key=rank)
    shown = [str(r) for r in ordered[:limit]]
    if len(ordered) > limit:
        shown.append("and %d more" % (len(ordered) - limit))
    return shown


def _fleet_verdict(reports):
    known = [r.get("verdict") for r in reports if r.get("verdict") in burnin.RANK]
    return max(known, key=lambda v: burnin.RANK[v]) if known else None


def _by_host(reports):
    return sorted(reports or [], key=lambda r: str(r.get("host") or ""))


def _link(host, suffix):
    from urllib.parse import quote

    return quote("%s.%s" % (host, suffix), safe="")


def render_fleet_html(reports):
    """The fleet summary page: one row per host with its verdict, worst reasons and a link to ``<host>.html``."""
    reports = _by_host(reports)
    counts = {}
    for report in reports:
        key = report.get("verdict") if report.get("verdict") in burnin.RANK else "none"
        counts[key] = counts.get(key, 0) + 1
    body = ["<h1>Burn-in: fleet summary</h1>",
            "<p>fleet verdict: %s <span class=\"meta\">%s</span></p>"
            % (_badge(_fleet_verdict(reports)),
               _e(", ".join("%d %s" % (counts[v], _verdict_text(None if v == "none" else v))
                            for v in ("fail", "watch", "pass", "none") if counts.get(v)))),
            _legend(("pass", "watch", "fail", "none"))]
    if not reports:
        body.append(_not_run("burn-in on any host"))
    else:
        body.append('<table class="fleet"><tr><th>host</th><th>verdict</th><th>worst reasons</th>'
                    "<th>generated at</th><th>report</th></tr>")
        for report in reports:
            host = report.get("host") or "?"
            body.append('<tr data-host="%s"><td class="nowrap">%s</td>%s<td>%s</td><td class="nowrap">%s</td>'
                        '<td class="nowrap"><a href="%s">%s</a></td></tr>'
                        % (_e(host), _e(host), _cell(report.get("verdict")),
                           _list(_worst_reasons(report.get("reasons"))) or "—",
                           _e(_when(report.get("generated_at"))), _e(_link(host, "html")),
                           _e("%s.html" % host)))
        body.append("</table>")
    return _page("Burn-in: fleet summary", "\n".join(body))


def render_preflight_html(host, preflight):
    """The host preflight report (preflight.evaluate()'s {"verdict", "checks", "gpus"}) as the same kind of page."""
    preflight = preflight or {}
    body = ["<h1>Host preflight: %s</h1>" % _e(host),
            "<p>verdict: %s</p>" % _badge(preflight.get("verdict")),
            _legend(("pass", "warn", "fail", "skip"))]
    gpus = preflight.get("gpus") or []
    body.append("<p>GPUs meant for passthrough: %s</p>" % (_e(", ".join(str(g) for g in gpus)) if gpus else "none"))
    checks = preflight.get("checks") or []
    if not checks:
        body.append(_not_run("preflight checks"))
    else:
        body.append('<table class="checks"><tr><th>check</th><th>status</th><th>summary</th><th>evidence</th>'
                    "<th>how to fix</th></tr>")
        for check in checks:
            body.append('<tr data-check="%s"><td class="nowrap">%s</td>%s<td>%s</td><td>%s</td><td>%s</td></tr>'
                        % (_e(check.get("id")), _e(check.get("id")), _cell(check.get("status")),
                           _e(check.get("summary")), _list(check.get("evidence"), "evidence"),
                           _e(check.get("hint") or "")))
        body.append("</table>")
    return _page("Host preflight: %s" % host, "\n".join(body))


# ---------------------------------------------------------------- Markdown

def _md(value):
    """A Markdown table cell: pipes escaped, one line."""
    text = "—" if value is None or value == "" else str(value)
    return re.sub(r"\s*[\r\n]+\s*", " ", text).replace("\\", "\\\\").replace("|", "\\|")


def _md_table(header, rows):
    lines = ["| %s |" % " | ".join(_md(h) for h in header), "|%s" % ("---|" * len(header))]
    lines += ["| %s |" % " | ".join(_md(c) for c in row) for row in rows]
    return lines


def _md_verdict(verdict):
    return "**%s**" % _verdict_text(verdict).upper()


def render_markdown(report):
    """One host's burn-in report as Markdown (the same sections as the page, the charts left out)."""
    host = report.get("host") or "?"
    lines = ["# Burn-in report: %s" % _md(host), "",
             "Verdict: %s (generated at %s)" % (_md_verdict(report.get("verdict")),
                                                _md(_when(report.get("generated_at")))), "", "## Reasons", ""]
    reasons = report.get("reasons") or []
    lines += ["- %s" % _md(r) for r in reasons] or ["none"]
    lines += ["", "## Verdict table (seed 000)", ""]
    columns = _gpu_columns(report)
    if not columns:
        lines.append("gpu-burn and the GPU measurements: not run")
    else:
        text = criteria(_thresholds(report))
        header = (["check"] + ["%s (%s)" % (v, VERDICT_LABELS[v]) for v in ("pass", "watch", "fail")]
                  + ["GPU %s%s" % (key, " %s" % gpu["name"] if gpu.get("name") else "") for key, gpu in columns])
        rows = []
        for row, label in ROWS:
            cells = [label] + list(text[row])
            for _key, gpu in columns:
                entry = (gpu.get("rows") or {}).get(row)
                cells.append("not measured" if entry is None else "%s %s" % (row_value(row, entry.get("value")),
                                                                             _md_verdict(entry.get("verdict"))))
            rows.append(cells)
        rows.append(["GPU verdict", "", "", ""] + [_md_verdict(gpu.get("verdict")) for _key, gpu in columns])
        lines += _md_table(header, rows)
    lines += ["", "## Stages", ""]
    stages = report.get("stages") or []
    if stages:
        lines += _md_table(["stage", "tool", "state", "exit status", "started", "finished", "duration", "verdict",
                            "reasons"],
                           [[s.get("name"), s.get("tool"), s.get("state"),
                             "—" if s.get("exit_status") is None else s.get("exit_status"), _when(s.get("started_at")),
                             _when(s.get("finished_at")), _duration(s.get("duration_s")), _md_verdict(s.get("verdict")),
                             "; ".join(s.get("reasons") or [])] for s in stages])
    else:
        lines.append("stages: not run")
    lines += ["", "## nvidia-smi log", ""]
    smi = report.get("smi") or {}
    if smi:
        lines += _md_table(["GPU", "name", "samples", "max temperature", "max power"],
                           [[key, (smi[key] or {}).get("name"), len((smi[key] or {}).get("t_s") or []),
                             _md_max((smi[key] or {}).get("temperature_c"), " °C"),
                             _md_max((smi[key] or {}).get("power_w"), " W")] for key in sorted(smi, key=_sort_key)])
        lines += ["", "The curves are on the HTML page."]
    else:
        lines.append("nvidia-smi log: not run")
    lines += ["", "## nvbandwidth", ""]
    tests = report.get("nvbandwidth") or {}
    if not tests:
        lines.append("nvbandwidth: not run")
    for name in sorted(tests):
        test = tests[name] or {}
        rows, columns, values = _matrix(test)
        lines += ["### %s (%s): SUM %s GB/s" % (_md(name), _md(test.get("engine")), _fmt(test.get("sum"), 2)), ""]
        if rows and columns:
            lines += _md_table(["row \\ column"] + columns,
                               [[r] + ["N/A" if _num(v) is None else _fmt(v, 2) for v in values[i][:len(columns)]]
                                for i, r in enumerate(rows)])
        else:
            lines.append("no matrix recorded")
        lines.append("")
    lines += ["## dcgmi diag", ""]
    diag = report.get("dcgmi_diag")
    if diag and diag.get("tests"):
        lines += ["Verdict: %s" % _md_verdict(diag.get("verdict")), ""]
        lines += _md_table(["section", "test", "results", "verdict"],
                           [[t.get("section"), n, "; ".join(t.get("results") or []), _md_verdict(t.get("verdict"))]
                            for n, t in diag["tests"].items()])
        if diag.get("warnings"):
            lines += [""] + ["- warning: %s" % _md(w) for w in diag["warnings"]]
    else:
        lines.append("dcgmi diag: not run")
    lines += ["", "## vllm bench serve", ""]
    rows = _bench_rows(report.get("vllm_bench") or {})
    lines += _md_table(["metric", "value"], rows) if rows else ["vllm bench serve: not run"]
    return "\n".join(lines) + "\n"


def _md_max(values, unit):
    numbers = [_num(v) for v in values or [] if _num(v) is not None]
    return "%s%s" % (_fmt(max(numbers)), unit) if numbers else "—"


def render_fleet_markdown(reports):
    """The fleet summary as Markdown: one row per host, linking ``<host>.md``."""
    reports = _by_host(reports)
    lines = ["# Burn-in: fleet summary", "", "Fleet verdict: %s" % _md_verdict(_fleet_verdict(reports)), ""]
    if not reports:
        return "\n".join(lines + ["burn-in on any host: not run"]) + "\n"
    rows = []
    for report in reports:
        host = report.get("host") or "?"
        rows.append([host, _md_verdict(report.get("verdict")), "; ".join(_worst_reasons(report.get("reasons"))),
                     _when(report.get("generated_at")), "[%s.md](%s)" % (host, _link(host, "md"))])
    lines += _md_table(["host", "verdict", "worst reasons", "generated at", "report"], rows)
    return "\n".join(lines) + "\n"
