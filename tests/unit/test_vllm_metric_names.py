"""Every `vllm:` series the monitoring role's alert rules and dashboards read exists on the real vLLM's /metrics.

The page is tests/fixtures/metrics/vllm-0.32.0-cpu.prom, recorded from the real vLLM 0.32.0 (CPU backend) in the lab
(see SOURCE there; test_lab checks that the lab's Prometheus holds the KV-cache gauge of both live servers, labelled
per host and model as the rules read it). A series missing from it
is allowed only as another vLLM version's name, listed in RENAMED with the name this version prints, and only where
the expression reads both (`new or old`), so a rule keeps working on either version.
"""

import glob
import json
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "tests", "fixtures", "metrics", "vllm-0.32.0-cpu.prom")
MONITORING = os.path.join(ROOT, "roles", "monitoring", "files")
SERIES = re.compile(r"vllm:[A-Za-z0-9_:]*[A-Za-z0-9_]")
# Another vLLM version's name -> the name vLLM 0.32.0 prints (vLLM 0.10 renamed the KV-cache gauge).
RENAMED = {"vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc"}


def printed_series(path=PAGE):
    """The sample names of a Prometheus text page (histograms' _bucket/_sum/_count included)."""
    names = set()
    with open(path) as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def expressions():
    """[(where, PromQL)] of the rule files and the dashboards."""
    found = []
    for path in sorted(glob.glob(os.path.join(MONITORING, "rules", "*.yml"))):
        with open(path) as handle:
            for group in yaml.safe_load(handle)["groups"]:
                for rule in group["rules"]:
                    found.append(("%s: %s" % (os.path.basename(path), rule.get("alert") or rule.get("record")),
                                  rule["expr"]))
    for path in sorted(glob.glob(os.path.join(MONITORING, "dashboards", "*.json"))):
        with open(path) as handle:
            dashboard = json.load(handle)
        for panel in dashboard.get("panels", []):
            for target in panel.get("targets", []):
                if target.get("expr"):
                    found.append(("%s: %s" % (os.path.basename(path), panel.get("title")), target["expr"]))
        for variable in (dashboard.get("templating") or {}).get("list", []):
            query = variable.get("query")
            query = query.get("query") if isinstance(query, dict) else query
            if isinstance(query, str) and "vllm:" in query:
                found.append(("%s: variable %s" % (os.path.basename(path), variable.get("name")), query))
    return found


def problems(printed, exprs):
    out = []
    for where, expr in exprs:
        for name in sorted(set(SERIES.findall(expr))):
            if name in printed:
                continue
            if name in RENAMED and RENAMED[name] in printed and RENAMED[name] in expr:
                continue
            out.append("%s reads %s, which vLLM 0.32.0 does not print%s" % (
                where, name, "" if name not in RENAMED else " (and the expression lacks %s)" % RENAMED[name]))
    return out


def test_the_recorded_page_is_the_real_servers():
    printed = printed_series()
    assert "vllm:kv_cache_usage_perc" in printed and "vllm:time_to_first_token_seconds_bucket" in printed
    assert len({n for n in printed if n.startswith("vllm:")}) > 50


def test_every_vllm_series_the_rules_and_dashboards_read_exists_on_the_real_server():
    exprs = expressions()
    assert sum("vllm:" in expr for _w, expr in exprs) >= 10, exprs  # the rules and dashboards were found
    assert problems(printed_series(), exprs) == []


def test_a_series_only_another_version_prints_is_caught(tmp_path):
    """The check can fail: an old name alone, or a name no version prints, is reported."""
    printed = printed_series()
    found = problems(printed, [("r", "vllm:gpu_cache_usage_perc > 0.9"), ("s", "rate(vllm:no_such_total[5m])"),
                               ("t", "vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc")])
    assert found == ["r reads vllm:gpu_cache_usage_perc, which vLLM 0.32.0 does not print (and the expression lacks "
                     "vllm:kv_cache_usage_perc)", "s reads vllm:no_such_total, which vLLM 0.32.0 does not print"]
