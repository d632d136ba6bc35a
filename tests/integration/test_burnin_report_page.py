"""The burn-in report pages opened in a real browser: Debian's headless Chromium, driven over the DevTools protocol.

What is real: Chromium (Debian's chromium-headless-shell, installed by make setup; nothing is downloaded), matplotlib
drawing the charts, module_utils/burnin_report.py rendering the pages, and the tool outputs: the public recordings of
tests/fixtures/burnin (tests/fixtures/burnin/SOURCE says where each came from), parsed and judged by
module_utils/burnin.py. What is not: no GPU ran here. The host "report" is composed from recordings of different
machines (an nvidia-smi log of two H200s with temperatures only, gpu-burn on an RTX 3060, nvbandwidth on six and on
eight GPUs, dcgmi diag on four), so its GPUs do not match from one section to the next; the page only has to show
what it was given. The preflight page gets preflight.evaluate() of made-up host facts (one isolated GPU, one sharing
its IOMMU group, a BAR failure line).

Each page is loaded from its file:// URL with the DevTools protocol over a pipe (--remote-debugging-pipe: no port
is opened). Every request the page makes is recorded (Network.requestWillBeSent) and every request that is not the
page itself or a data: URI is also held and failed before it leaves (Fetch); the browser is given a proxy on
127.0.0.1:9 and a resolver that resolves no name, so that nothing could reach past loopback even if the recorder
missed it. The test asserts: no request but the page's own, no console error, no uncaught exception, every <img>
decoded with a width, as many charts as the input has GPUs and matrices, and a full-page screenshot that is a PNG
of the page's size with the verdict colours in it. The screenshots stay in .cache/test-artifacts/burnin/ for a
person to look at. A control page that asks for http://example.invalid/ proves the recorder sees such a request.
"""

import base64
import contextlib
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import burnin, burnin_report, preflight

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "burnin")
ARTIFACTS = os.path.join(ROOT, ".cache", "test-artifacts", "burnin")
CHROMIUM = next((path for path in (shutil.which(name) for name in ("chromium-headless-shell", "chromium")) if path),
                None)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium-headless-shell is not installed "
                                                         "(make setup installs it: APT_PACKAGES in the Makefile)")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# ---------------------------------------------------------------- the DevTools protocol over a pipe

class Browser:
    """Headless Chromium with --remote-debugging-pipe: commands go to its fd 3, answers and events come from its
    fd 4, each a JSON message ended by a NUL byte."""

    def __init__(self, binary):
        self.profile = tempfile.mkdtemp(prefix="burnin-chromium-")
        to_browser, self._in = os.pipe()
        self._out, from_browser = os.pipe()
        # The browser's ends, numbered 10 and up, become its fds 3 and 4 through bash's redirections (no
        # preexec_fn; a number below 5 could be overwritten by the other redirection).
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser, from_browser)]
        os.close(to_browser)
        os.close(from_browser)
        self.log = os.path.join(self.profile, "chromium.log")
        wiring = 'exec "$0" "$@" 3<&%d 4>&%d %d<&- %d>&-' % (ends[0], ends[1], ends[0], ends[1])
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                ["/bin/bash", "-c", wiring, binary, "--headless", "--remote-debugging-pipe", "--no-sandbox",
                 "--disable-gpu", "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-extensions", "--metrics-recording-only", "--mute-audio",
                 # Nothing may leave loopback: no name resolves, and anything that tried meets a closed local port.
                 "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
                 "about:blank"],
                pass_fds=ends, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        for fd in ends:
            os.close(fd)
        self._buffer, self._id, self.events = b"", 0, []

    def close(self):
        with contextlib.suppress(OSError, EOFError, TimeoutError, RuntimeError):
            self.send("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for fd in (self._in, self._out):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _write(self, message):
        os.write(self._in, json.dumps(message).encode() + b"\0")

    def _read(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready = select.select([self._out], [], [], left)[0]
            if ready:
                chunk = os.read(self._out, 1 << 20)
                if not chunk:
                    with open(self.log) as log:
                        raise EOFError("Chromium closed its pipe; its log ends:\n" + log.read()[-3000:])
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(raw)
        if message.get("method") == "Fetch.requestPaused":
            self._held(message)
        return message

    def _held(self, message):
        """A request the page made, held by Fetch: the page's own file and data: URIs go on, anything else fails."""
        params = message["params"]
        url = params["request"]["url"]
        allowed = url == self.page_url or url.startswith("data:")
        self._id += 1
        self._write({"id": self._id, "sessionId": message.get("sessionId"),
                     "method": "Fetch.continueRequest" if allowed else "Fetch.failRequest",
                     "params": {"requestId": params["requestId"]} if allowed else
                     {"requestId": params["requestId"], "errorReason": "BlockedByClient"}})

    def send(self, method, params=None, session=None, timeout=60):
        self._id += 1
        wanted = self._id
        message = {"id": wanted, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._write(message)
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == wanted:
                if "error" in answer:
                    raise RuntimeError("%s: %s" % (method, answer["error"]))
                return answer.get("result", {})
            if "method" in answer:
                self.events.append(answer)

    def wait_for(self, method, timeout=60):
        deadline = time.monotonic() + timeout
        while not any(e["method"] == method for e in self.events):
            answer = self._read(deadline)
            if "method" in answer:
                self.events.append(answer)

    page_url = None

    def open(self, url, width=1280):
        """Load ``url`` in a new tab; returns what the page did: requests, console errors, exceptions, images,
        and a full-page screenshot (PNG bytes)."""
        self.events, self.page_url = [], url
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.send(domain + ".enable", session=session)
        self.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired")
        images = self.send("Runtime.evaluate", {"returnByValue": True, "expression": (
            "Array.from(document.images).map(i => ({chart: i.dataset.chart || null, key: i.dataset.key || null, "
            "complete: i.complete, width: i.naturalWidth, height: i.naturalHeight, "
            "png: i.src.startsWith('data:image/png;base64,')}))")}, session=session)["result"]["value"]
        size = self.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}},
            session=session)
        self.send("Target.closeTarget", {"targetId": target})
        events = [e for e in self.events if e.get("sessionId") in (None, session)]
        return {
            "requests": [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"],
            "held": [e["params"]["request"]["url"] for e in events if e["method"] == "Fetch.requestPaused"],
            "console_errors": [e["params"] for e in events if e["method"] == "Runtime.consoleAPICalled"
                               and e["params"]["type"] in ("error", "assert")]
            + [e["params"]["entry"] for e in events if e["method"] == "Log.entryAdded"
               and e["params"]["entry"]["level"] == "error"],
            "exceptions": [e["params"] for e in events if e["method"] == "Runtime.exceptionThrown"],
            "images": images, "size": size, "screenshot": base64.b64decode(shot["data"]),
        }


@pytest.fixture(scope="module")
def browser():
    instance = Browser(CHROMIUM)
    try:
        yield instance
    finally:
        instance.close()


# ---------------------------------------------------------------- the report from the recorded outputs

def _series(samples):
    """parse_smi_csv's samples -> the report's per-GPU time series (seconds since the run's first sample)."""
    def seconds(stamp):
        clock = stamp.split(" ")[1]
        hours, minutes, secs = clock.split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(secs)

    start = seconds(samples[0]["timestamp"])
    smi = {}
    for sample in samples:
        gpu = smi.setdefault(sample["pci.bus_id"], {"name": sample.get("name"), "t_s": [], "temperature_c": [],
                                                    "sm_clock_mhz": [], "power_w": [], "throttle_reasons": []})
        gpu["t_s"].append(round(seconds(sample["timestamp"]) - start, 3))
        gpu["temperature_c"].append(sample.get("temperature.gpu"))
        gpu["sm_clock_mhz"].append(sample.get("clocks.sm"))
        gpu["power_w"].append(sample.get("power.draw"))
        gpu["throttle_reasons"].append(sample.get("clocks_event_reasons.active"))
    return smi


def _stage(name, tool, verdict, reasons=()):
    return {"name": name, "tool": tool, "state": "finished", "exit_status": 0, "started_at": "2026-12-04T18:00:00Z",
            "finished_at": "2026-12-04T19:00:00Z", "duration_s": 3600.0, "verdict": verdict, "reasons": list(reasons)}


def recorded_report(host="gpu-vm-a"):
    """The report dict (burnin_report's input) composed from the recorded outputs."""
    smi = _series(burnin.parse_smi_csv(fixture("nvidia-smi-query-timestamp.csv"))["samples"])
    summary = burnin.summarise_smi(burnin.parse_smi_csv(fixture("nvidia-smi-query-timestamp.csv"))["samples"])
    burn = burnin.parse_gpu_burn(fixture("gpu-burn-ok.txt"))
    measured = dict((key, {"steady_temperature_c": s["steady_temperature_c"], "xid_errors": 0, "pcie_replays": 0})
                    for key, s in summary.items())
    measured.update(dict((index, {"faulty": g["faulty"], "steady_temperature_c": g["max_temperature_c"]})
                         for index, g in burn["gpus"].items()))
    judged = burnin.evaluate(measured)
    names = dict((key, s["name"]) for key, s in summary.items())
    names.update(dict((index, g["name"]) for index, g in burn["gpus"].items()))
    nvbandwidth = {}
    for name in ("nvbandwidth-d2d-read-ce.txt", "nvbandwidth-v0.2-8gpu-partial.txt"):
        for test, data in burnin.parse_nvbandwidth(fixture(name))["tests"].items():
            rows = sorted(data["matrix"], key=int)
            nvbandwidth[test] = {"engine": data["engine"], "rows": rows, "columns": data["columns"], "sum": data["sum"],
                                 "matrix": [[data["matrix"][r].get(c) for c in data["columns"]] for r in rows]}
    diag = burnin.parse_dcgmi_diag(fixture("dcgmi-diag-r3-fail.txt"))
    bench = burnin.parse_vllm_bench(fixture("vllm-bench-serve-v0.11plus.txt"))
    stages = [_stage("10min", "gpu_burn", judged["verdict"], judged["reasons"]),
              _stage("dcgmi_diag", "dcgmi_diag", diag["verdict"], diag["warnings"]),
              _stage("nvbandwidth", "nvbandwidth", "pass"), _stage("vllm_bench", "vllm_bench_serve", "pass")]
    stages.append({"name": "soak", "tool": "gpu_burn", "state": "not_started", "exit_status": None,
                   "started_at": None, "finished_at": None, "duration_s": None, "verdict": None, "reasons": []})
    verdicts = [s["verdict"] for s in stages if s["verdict"]]
    return {"host": host, "generated_at": "2026-12-04T19:00:00Z",
            "verdict": max(verdicts, key=lambda v: burnin.RANK[v]),
            "reasons": judged["reasons"] + ["dcgmi_diag: %s" % w for w in diag["warnings"]],
            "thresholds": dict(burnin.THRESHOLDS),
            "gpus": dict((key, dict(g, name=names.get(key))) for key, g in judged["gpus"].items()),
            "stages": stages, "smi": smi, "nvbandwidth": nvbandwidth, "dcgmi_diag": diag, "vllm_bench": bench}


def recorded_preflight():
    """preflight.evaluate() on made-up host facts: two GPUs, one sharing its IOMMU group, a BAR failure line."""
    facts = {"groups": {"1": [], "2": []}, "gpus": [
        {"slot": "0000:41:00", "isolated": True, "iommu_groups": ["40"], "functions": ["0000:41:00.0", "0000:41:00.1"],
         "shares_group_with": [], "numa_node": 0, "drivers": {"0000:41:00.0": "vfio-pci"}},
        {"slot": "0000:61:00", "isolated": False, "iommu_groups": ["60"], "functions": ["0000:61:00.0"],
         "shares_group_with": ["0000:60:01.0"], "numa_node": 0, "drivers": {"0000:61:00.0": "nvidia"}}]}
    log = ("DMAR: IOMMU enabled\npci 0000:61:00.0: BAR 1: no space for [mem size 0x10000000 64bit pref]\n")
    return preflight.evaluate(facts, kernel_log=log, cmdline="quiet intel_iommu=on", uefi=True,
                              cpu_vendor="GenuineIntel", kernel_release="6.8.12-4-pve")


# ---------------------------------------------------------------- checking a screenshot

def png_pixels(data):
    """(width, height, set of RGB colours) of a PNG (Pillow, which matplotlib brings, reads Chromium's file)."""
    from PIL import Image

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    # Every other pixel is enough (the verdict cells are solid blocks) and halves the time.
    colours = image.convert("RGB").reduce(2).getcolors(maxcolors=1 << 24)
    return image.width, image.height, {bytes(colour) for _count, colour in colours}


def rgb(hex_colour):
    return bytes(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def save(name, result):
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name + ".png")
    with open(path, "wb") as handle:
        handle.write(result["screenshot"])
    return path


def assert_clean(result, url):
    assert [u for u in result["requests"] if u != url and not u.startswith("data:")] == [], result["requests"]
    assert [u for u in result["held"] if u != url and not u.startswith("data:")] == [], result["held"]
    assert result["console_errors"] == []
    assert result["exceptions"] == []
    for image in result["images"]:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0, image
        assert image["png"], image


def assert_screenshot(result, colours_expected):
    width, height, colours = png_pixels(result["screenshot"])
    assert (width, height) == (int(result["size"]["width"]), int(result["size"]["height"]))
    assert width >= 1000 and height >= 300, (width, height)
    assert len(colours) > 50, "the screenshot has %d colours: a blank page?" % len(colours)
    missing = [c for c in colours_expected if rgb(c) not in colours]
    assert missing == [], "verdict colours not in the screenshot: %s" % missing


# ---------------------------------------------------------------- the tests

def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return "file://" + path


def test_the_host_page_loads_alone_with_its_charts_and_verdict_colours(browser, tmp_path):
    report = recorded_report()
    url = write(str(tmp_path), "gpu-vm-a.html", burnin_report.render_html(report))
    result = browser.open(url)
    assert_clean(result, url)
    charts = [(i["chart"], i["key"]) for i in result["images"]]
    matrices = sorted(name for name, test in report["nvbandwidth"].items() if test["matrix"])
    assert charts == [("smi", gpu) for gpu in sorted(report["smi"])] + [("nvbandwidth", n) for n in matrices]
    assert len(report["smi"]) == 2 and len(matrices) == 3       # two H200s; d2d read, and h2d + d2h on eight GPUs
    verdicts = {g["verdict"] for g in report["gpus"].values()} | {report["verdict"]}
    assert {"pass", "fail"} <= verdicts
    assert_screenshot(result, [burnin_report.VERDICT_COLOURS[v][0] for v in ("pass", "watch", "fail", "none")])
    save("host-report", result)


def test_the_fleet_page_links_every_host(browser, tmp_path):
    reports = [recorded_report("gpu-vm-a"), dict(recorded_report("gpu-vm-b"), verdict="watch",
                                                 reasons=["GPU 0: temperature watch (85 °C)"]),
               {"host": "gpu-vm-c", "verdict": None, "reasons": [], "stages": []}]
    url = write(str(tmp_path), "index.html", burnin_report.render_fleet_html(reports))
    write(str(tmp_path), "gpu-vm-b.html", burnin_report.render_html(reports[1]))
    result = browser.open(url)
    assert_clean(result, url)
    assert result["images"] == []
    assert_screenshot(result, [burnin_report.VERDICT_COLOURS[v][0] for v in ("watch", "fail", "none")])
    save("fleet", result)
    # Each link leads to a host page that loads by itself.
    linked = browser.open(url.replace("index.html", "gpu-vm-b.html"))
    assert_clean(linked, url.replace("index.html", "gpu-vm-b.html"))


def test_the_preflight_page(browser, tmp_path):
    report = recorded_preflight()
    assert {c["status"] for c in report["checks"]} >= {"pass", "warn", "fail"}
    url = write(str(tmp_path), "pve-a-preflight.html", burnin_report.render_preflight_html("pve-a", report))
    result = browser.open(url)
    assert_clean(result, url)
    assert_screenshot(result, [burnin_report.VERDICT_COLOURS[v][0] for v in ("pass", "warn", "fail")])
    save("preflight", result)


def test_the_recorder_sees_a_page_that_reaches_out(browser, tmp_path):
    """The control: a page that asks for a remote image and a remote script. The recorder must see both requests
    and the browser must not fetch them (they fail before leaving; nothing listens on the proxy port either)."""
    url = write(str(tmp_path), "reaches-out.html",
                '<!DOCTYPE html><html><body><img src="http://example.invalid/pixel.png">'
                '<script src="https://example.invalid/x.js"></script></body></html>')
    result = browser.open(url)
    remote = ["http://example.invalid/pixel.png", "https://example.invalid/x.js"]
    assert [u for u in result["requests"] if u != url] == remote
    assert [u for u in result["held"] if u != url] == remote
    assert sorted(e.get("url") for e in result["console_errors"]) == remote       # each failed, blocked here
    assert all("ERR_BLOCKED_BY_CLIENT" in e["text"] for e in result["console_errors"])
    assert result["images"][0]["width"] == 0
    with pytest.raises(AssertionError):
        assert_clean(result, url)
