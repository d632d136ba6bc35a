"""module_utils.burnin_report: the burn-in pages. The verdicts come from burnin.evaluate on numbers chosen at the seed's
boundaries; the pages are read back with html.parser, the embedded images with Pillow (matplotlib's own dependency),
so that what a browser would get is checked, not the strings the code meant to write. The page in a real browser is
tests/integration/test_burnin_report_page.py."""

import base64
import io
import re
import sys
from html.parser import HTMLParser

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin, burnin_report

HOSTILE = "<script>alert(1)</script>\"'&|"


class Page(HTMLParser):
    """Elements with their attributes and text, and every attribute value (for URL checks)."""

    def __init__(self, text):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.elements, self.stack, self.attributes, self.text = [], [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": "", "parents": [e["tag"] for e in self.stack]}
        self.elements.append(element)
        self.attributes += [value or "" for _name, value in attrs]
        if tag not in ("img", "meta", "br", "link", "input"):
            self.stack.append(element)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        self.text.append(data)
        for element in self.stack:
            element["text"] += data

    def find(self, tag, **attrs):
        return [e for e in self.elements if e["tag"] == tag
                and all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items())]


def series(samples, temperature=70.0, reasons=0):
    return {"name": "NVIDIA GeForce RTX 3090", "t_s": [float(i) for i in range(samples)],
            "temperature_c": [temperature + (i % 3) for i in range(samples)],
            "sm_clock_mhz": [1695.0] * samples, "power_w": [None if i == 1 else 345.0 for i in range(samples)],
            "throttle_reasons": [reasons if i % 2 else 0 for i in range(samples)]}


def host_report(host="gpu-vm-a", gpu_name="NVIDIA GeForce RTX 3090"):
    """Four GPUs, one per verdict and one not measured, as build_report gives them."""
    judged = burnin.evaluate({
        "0": {"steady_temperature_c": 82.9, "throttled_percent": 0, "xid_errors": 0, "pcie_replays": 0,
              "faulty": False, "power_capped_percent": 20},
        "1": {"steady_temperature_c": 83, "throttled_percent": 10, "xid_errors": 0, "pcie_replays": 10,
              "faulty": False, "power_capped_percent": 80},
        "2": {"steady_temperature_c": 90, "throttled_percent": 10.1, "xid_errors": 1, "pcie_replays": 11,
              "faulty": True, "power_capped_percent": 80.1},
        "3": {},
    })
    return {
        "host": host, "generated_at": "2026-12-04T20:00:00Z", "verdict": judged["verdict"],
        "reasons": judged["reasons"] + ["nvbandwidth: exited with an error (exit status 1)"],
        "thresholds": dict(burnin.THRESHOLDS),
        "gpus": dict((key, dict(gpu, name=gpu_name)) for key, gpu in judged["gpus"].items()),
        "stages": [{"name": "10min", "tool": "gpu_burn", "state": "finished", "exit_status": 0,
                    "started_at": "2026-12-04T19:00:00Z", "finished_at": "2026-12-04T19:10:00Z", "duration_s": 600.0,
                    "verdict": judged["verdict"], "reasons": judged["reasons"]},
                   {"name": "soak", "tool": "gpu_burn", "state": "not_started", "exit_status": None,
                    "started_at": None, "finished_at": None, "duration_s": None, "verdict": None, "reasons": []}],
        "smi": {"0": series(20), "1": series(400, 84, 0x4), "2": series(8, 91, 0x24)},
        "nvbandwidth": {
            "device_to_device_memcpy_read_ce": {"engine": "CE", "rows": ["0", "1"], "columns": ["0", "1"],
                                                "matrix": [[None, 26.34], [26.35, None]], "sum": 52.69},
            "host_to_device_memcpy_ce": {"engine": "CE", "rows": ["0"], "columns": ["0", "1"],
                                         "matrix": [[25.17, 24.9]], "sum": 50.07},
            "device_local_copy": {"engine": "CE", "rows": [], "columns": [], "matrix": [], "sum": 1234.5},
        },
        "dcgmi_diag": None, "vllm_bench": None,
    }


def images(text):
    """[(data-chart, data-key, PNG bytes)] of a page."""
    found = []
    for element in Page(text).find("img"):
        src = element["attrs"]["src"]
        assert src.startswith("data:image/png;base64,")
        found.append((element["attrs"]["data-chart"], element["attrs"]["data-key"],
                      base64.b64decode(src.split(",", 1)[1], validate=True)))
    return found


def png_size(data):
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    image.load()
    return image.size, len(image.convert("RGB").getcolors(1 << 24))


def css_colour(page, css_class):
    match = re.search(r"\.%s\{background:(#[0-9a-f]{6});color:(#[0-9a-f]{6})\}" % re.escape(css_class), page)
    assert match, css_class
    return tuple(int(match.group(1)[i:i + 2], 16) for i in (1, 3, 5))


@pytest.fixture(scope="module")
def page():
    return burnin_report.render_html(host_report())


def test_each_verdict_cell_has_its_verdicts_class_and_the_seeds_colour(page):
    report = host_report()
    parsed = Page(page)
    rows = dict((e["attrs"]["data-row"], e) for e in parsed.find("tr") if "data-row" in e["attrs"])
    assert list(rows) == [row for row, _label in burnin_report.ROWS] + ["gpu"]
    cells = [e for e in parsed.elements if e["tag"] == "td" and "verdict" in e["attrs"].get("class", "")]
    # Per seed row, the GPU columns in order (0, 1, 2, 3): the classes follow the verdicts evaluate gave.
    per_row = {}
    for row in rows:
        start = parsed.elements.index(rows[row])
        per_row[row] = [e for e in parsed.elements[start + 1:]
                        if e["tag"] == "td" and "verdict" in e["attrs"].get("class", "")][:4]
    for row, _label in burnin_report.ROWS:
        for index, key in enumerate(("0", "1", "2", "3")):
            entry = report["gpus"][key]["rows"].get(row)
            expected = "v-%s" % entry["verdict"] if entry else "v-none"
            assert per_row[row][index]["attrs"]["class"] == "verdict %s" % expected, (row, key)
            assert (entry["verdict"] if entry else "not measured") in per_row[row][index]["text"]
    assert [c["attrs"]["class"] for c in per_row["gpu"]] == ["verdict v-pass", "verdict v-watch", "verdict v-fail",
                                                             "verdict v-pass"]
    assert cells
    # The seed's colours: green, amber, red, grey (hue checked, not the exact shade).
    red, green, blue = css_colour(page, "v-pass")
    assert green > 100 and green > red + 50 and green > blue + 50
    red, green, blue = css_colour(page, "v-watch")
    assert red > 180 and green > 120 and blue < 80
    red, green, blue = css_colour(page, "v-fail")
    assert red > 150 and green < 80 and blue < 80
    red, green, blue = css_colour(page, "v-none")
    assert max(red, green, blue) - min(red, green, blue) < 30
    assert css_colour(page, "v-warn") == css_colour(page, "v-watch")
    # The header cells of the criteria carry the seed's Chinese column names.
    headers = [(e["attrs"].get("class"), e["attrs"].get("title")) for e in parsed.find("th") if e["attrs"].get("title")]
    assert headers == [("verdict v-pass", "通过"), ("verdict v-watch", "关注"), ("verdict v-fail", "不通过")]


def test_the_criteria_follow_the_thresholds():
    report = dict(host_report(), thresholds=dict(burnin.THRESHOLDS, temperature_watch_c=80, temperature_fail_c=88),
                  smi={}, nvbandwidth={})
    text = Page(burnin_report.render_html(report))
    row = [e for e in text.find("tr") if e["attrs"].get("data-row") == "temperature"][0]["text"]
    assert "< 80 °C" in row and "80 to < 88 °C" in row and "≥ 88 °C" in row


def test_one_chart_per_gpu_and_one_heat_map_per_matrix_each_a_real_png(page):
    report = host_report()
    found = images(page)
    with_matrix = sorted(n for n, t in report["nvbandwidth"].items() if t["matrix"])
    assert [(c, k) for c, k, _png in found] == ([("smi", k) for k in sorted(report["smi"])]
                                                + [("nvbandwidth", n) for n in with_matrix])
    for chart, _key, png in found:
        (width, height), colours = png_size(png)
        if chart == "smi":
            assert (width, height) == (720, 592)
        else:
            assert 150 <= width <= 900 and 60 <= height <= 700
        assert colours > 20                      # drawn, not a blank canvas
    # A test with only its SUM line says so instead of drawing.
    assert "device_local_copy (CE): SUM 1234.50 GB/s (no matrix recorded)" in "".join(Page(page).text)


def test_the_page_loads_nothing_from_anywhere(page):
    for text in (page, burnin_report.render_fleet_html([host_report()]),
                 burnin_report.render_preflight_html("pve-a", {"verdict": "pass", "checks": [], "gpus": []})):
        assert not re.search(r"https?:", text, re.I)
        assert not re.search(r"<script|<link|<iframe|@import|url\(|<object|<embed", text, re.I)
        parsed = Page(text)
        assert all(a.startswith("data:image/png;base64,") for a in (e["attrs"].get("src") for e in parsed.elements)
                   if a is not None)
        assert not [a for a in parsed.attributes if re.match(r"\s*(javascript|//)", a, re.I)]
        csp = parsed.find("meta", http_equiv="Content-Security-Policy")[0]["attrs"]["content"]
        assert csp.startswith("default-src 'none'") and "img-src data:" in csp


def test_hostile_names_are_text_everywhere():
    report = dict(host_report(host=HOSTILE, gpu_name="<img src=x onerror=alert(1)>"), smi={}, nvbandwidth={})
    report["reasons"].append("</li><script>alert(2)</script>")
    report["smi"]["$\\frac{a}{b}$ <b>"] = dict(series(5), name="<b>bold</b>")
    report["nvbandwidth"]["<i>$x$"] = {"engine": "<SM>", "rows": ["$\\frac{a}$", "<1>"], "columns": ["$", "&"],
                                       "matrix": [[1.0, None], [None, 2.0]], "sum": 3.0}
    pages = [burnin_report.render_html(report), burnin_report.render_fleet_html([report]),
             burnin_report.render_preflight_html(HOSTILE, {"verdict": "fail", "gpus": [HOSTILE], "checks": [
                 {"id": HOSTILE, "status": "fail", "summary": HOSTILE, "evidence": [HOSTILE], "hint": HOSTILE}]})]
    for text in pages:
        parsed = Page(text)
        assert [e["tag"] for e in parsed.elements if e["tag"] in ("script", "b", "i")] == []
        assert [e for e in parsed.find("img") if e["attrs"]["src"] == "x"] == []
        assert HOSTILE in "".join(parsed.text)
    assert [(c, k) for c, k, _png in images(pages[0])] == [("smi", "$\\frac{a}{b}$ <b>"), ("nvbandwidth", "<i>$x$")]
    assert Page(pages[0]).find("title")[0]["text"] == "Burn-in report: " + HOSTILE
    link = Page(pages[1]).find("a")[0]["attrs"]["href"]
    assert link == "%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%27%26%7C.html"


def test_markdown_tables_keep_their_columns():
    report = host_report(host="gpu|vm", gpu_name="RTX | 3090")
    text = burnin_report.render_markdown(report)
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    assert len(tables) == 5            # verdict table, stages, nvidia-smi, two nvbandwidth matrices
    for table in tables:
        widths = {len(re.split(r"(?<!\\)\|", line)) for line in table}
        assert len(widths) == 1, table
        assert re.match(r"^\|(---\|)+$", table[1])
    verdicts = tables[0]
    assert verdicts[0].startswith("| check | pass (通过) | watch (关注) | fail (不通过) | GPU 0 RTX \\| 3090 |")
    assert "| steady GPU temperature | < 83 °C | 83 to < 90 °C | ≥ 90 °C | 82.9 °C **PASS** | 83 °C **WATCH** | " \
           "90 °C **FAIL** | not measured |" in verdicts
    assert "| gpu-burn FAULTY | OK | — | FAULTY, or missing from the summary | OK **PASS** | OK **PASS** | " \
           "FAULTY **FAIL** | not measured |" in verdicts
    assert text.startswith("# Burn-in report: gpu\\|vm\n\nVerdict: **FAIL**")
    assert "| 0 | N/A | 26.34 |" in text and "device_local_copy (CE): SUM 1234.50 GB/s\n\nno matrix recorded" in text
    assert "dcgmi diag: not run" in text and "vllm bench serve: not run" in text


def test_fleet_pages_list_every_host_with_its_verdict_and_link():
    reports = [host_report("gpu-vm-b"), dict(host_report("gpu-vm-a"), verdict="watch", reasons=["x watch"]),
               {"host": "gpu-vm-c", "verdict": None, "reasons": []},
               dict(host_report("gpu-vm-d"), verdict="pass", reasons=[])]
    parsed = Page(burnin_report.render_fleet_html(reports))
    rows = [e for e in parsed.find("tr") if "data-host" in e["attrs"]]
    assert [r["attrs"]["data-host"] for r in rows] == ["gpu-vm-a", "gpu-vm-b", "gpu-vm-c", "gpu-vm-d"]
    classes = [e["attrs"]["class"] for e in parsed.find("td") if "verdict" in e["attrs"].get("class", "")]
    assert classes == ["verdict v-watch", "verdict v-fail", "verdict v-none", "verdict v-pass"]
    assert [a["attrs"]["href"] for a in parsed.find("a")] == ["gpu-vm-%s.html" % x for x in "abcd"]
    assert parsed.find("span", **{"class": "badge v-fail"})[0]["text"] == "FAIL"       # the fleet: its worst host
    # The worst reasons: fails first, at most three, and how many more.
    worst = [e["text"] for e in parsed.elements[parsed.elements.index(rows[1]):] if e["tag"] == "li"][:4]
    assert worst == ["GPU 2: temperature fail (90 °C)", "GPU 2: throttling fail (10.1 % of the time)",
                     "GPU 2: xid fail (1)", "and 8 more"]
    assert burnin_report._worst_reasons(["GPU 1: temperature watch (84 °C)", "nvbandwidth: no result",
                                         "GPU 2: xid fail (1)"]) == [
        "GPU 2: xid fail (1)", "GPU 1: temperature watch (84 °C)", "nvbandwidth: no result"]
    markdown = burnin_report.render_fleet_markdown(reports)
    assert "Fleet verdict: **FAIL**" in markdown
    for host, verdict in (("a", "WATCH"), ("b", "FAIL"), ("c", "NOT MEASURED"), ("d", "PASS")):
        assert re.search(r"^\| gpu-vm-%s \| \*\*%s\*\* \|.*\| \[gpu-vm-%s\.md\]\(gpu-vm-%s\.md\) \|$"
                         % (host, verdict, host, host), markdown, re.M), host
    assert "no" in burnin_report.render_fleet_html([]) and "not run" in burnin_report.render_fleet_markdown([])


def test_the_preflight_page_shows_each_checks_status_and_hint():
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import preflight

    facts = {"groups": {"1": []}, "gpus": [
        {"slot": "0000:41:00", "isolated": False, "iommu_groups": ["40"], "functions": ["0000:41:00.0"],
         "shares_group_with": ["0000:40:01.0"], "drivers": {"0000:41:00.0": "nvidia"}}]}
    result = preflight.evaluate(facts, kernel_log="DMAR: IOMMU enabled\n", cmdline="quiet", uefi=None,
                                cpu_vendor="GenuineIntel")
    parsed = Page(burnin_report.render_preflight_html("pve-a", result))
    rows = dict((e["attrs"]["data-check"], e) for e in parsed.find("tr") if "data-check" in e["attrs"])
    assert list(rows) == [c["id"] for c in result["checks"]]
    statuses = set()
    for check in result["checks"]:
        start = parsed.elements.index(rows[check["id"]])
        cell = parsed.elements[start + 2]
        assert (cell["tag"], cell["attrs"]["class"], cell["text"]) == ("td", "verdict v-%s" % check["status"],
                                                                       check["status"])
        assert check["summary"] in rows[check["id"]]["text"]
        if check["hint"]:
            assert check["hint"] in rows[check["id"]]["text"]
        for line in check["evidence"]:
            assert line in rows[check["id"]]["text"]
        statuses.add(check["status"])
    assert statuses == {"pass", "warn", "fail", "skip"}
    assert parsed.find("span", **{"class": "badge v-fail"})[0]["text"] == "FAIL"
    assert "0000:41:00" in "".join(parsed.text)


def test_a_report_without_data_says_not_run_and_draws_nothing():
    for report in ({"host": "gpu-vm-a"}, dict((k, None) for k in host_report()) | {"host": "gpu-vm-a"}):
        text = burnin_report.render_html(report)
        assert images(text) == []
        for section in ("gpu-burn and the GPU measurements", "stages", "nvidia-smi log", "nvbandwidth", "dcgmi diag",
                        "vllm bench serve"):
            assert "%s: not run" % section in text
        assert Page(text).find("span", **{"class": "badge v-none"})[0]["text"] == "NOT MEASURED"
        markdown = burnin_report.render_markdown(report)
        assert "Verdict: **NOT MEASURED**" in markdown and "nvbandwidth: not run" in markdown
    assert "preflight checks: not run" in burnin_report.render_preflight_html("pve-a", None)


def test_times_in_epoch_seconds_are_shown_in_utc():
    report = dict(host_report(), generated_at=1796400600, smi={}, nvbandwidth={})
    report["stages"][0].update(started_at=1796400000, finished_at=1796400600.0)
    text, markdown = burnin_report.render_html(report), burnin_report.render_markdown(report)
    for page in (text, markdown):
        assert "2026-12-04T16:10:00Z" in page and "2026-12-04T16:00:00Z" in page and "1796400" not in page
    assert "2026-12-04T16:10:00Z" in burnin_report.render_fleet_markdown([report])


def test_charts_of_empty_or_missing_series_still_draw():
    empty = {"t_s": [], "temperature_c": [], "sm_clock_mhz": [], "power_w": [], "throttle_reasons": []}
    unknown = {"t_s": [0.0, 1.0], "temperature_c": [None, None], "throttle_reasons": [None, None]}
    for data in (empty, unknown, {}):
        (width, height), _colours = png_size(burnin_report.smi_chart(data))
        assert (width, height) == (720, 592)


def test_parse_nvbandwidths_own_matrix_shape_is_drawn_too():
    parsed = {"engine": "CE", "columns": ["0", "1", "2"], "sum": 1.0,
              "matrix": {"1": {"0": 3.0, "1": None, "2": 1.0}, "0": {"0": None, "1": 2.0, "2": 4.0}}}
    assert png_size(burnin_report.bandwidth_heatmap("x", parsed))[0][0] > 200
    assert burnin_report.bandwidth_heatmap("x", {"matrix": {}, "columns": []}) is None


def test_throttle_runs_last_until_the_next_sample():
    runs = burnin_report._runs([0.0, 1.0, 2.0, 3.0, 4.0, 6.0], [True, True, False, True, False, True])
    assert runs == [(0.0, 2.0), (3.0, 1.0), (6.0, 1.0)]         # the last sample lasts the median interval


def test_the_same_report_gives_the_same_bytes(page):
    """A rerun must not rewrite an unchanged page: the charts carry no time stamp or version."""
    report = host_report()
    charts = [png for _chart, _key, png in images(page)]
    assert burnin_report.smi_chart(report["smi"]["0"], report["thresholds"]) == charts[0]
    test = report["nvbandwidth"]["device_to_device_memcpy_read_ce"]
    assert burnin_report.bandwidth_heatmap("device_to_device_memcpy_read_ce", test) == charts[3]


def test_without_matplotlib_the_charts_fail_clearly(monkeypatch):
    for name in [n for n in sys.modules if n == "matplotlib" or n.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)             # import matplotlib... raises ImportError
    with pytest.raises(burnin.BurninError) as caught:
        burnin_report.render_html(host_report())
    assert caught.value.problems == [burnin_report.MATPLOTLIB_MISSING]
    assert "pip install matplotlib" in str(caught.value)
    # Pages that draw nothing need no matplotlib.
    assert "not run" in burnin_report.render_html({"host": "gpu-vm-a"})
    assert burnin_report.render_markdown(host_report()).startswith("# Burn-in report")
