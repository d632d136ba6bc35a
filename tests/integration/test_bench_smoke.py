"""make bench's three scripts in their --smoke mode: the same code as the full runs, tiny sizes, results written to
tmp_path (never bench/results/). Each must exit 0 and write its results with numbers where the full run has them,
so that make bench cannot rot unseen (bench_litellm.py once failed on an import after minutes of measuring).
The numbers themselves are not asserted: the cores are shared.

Each script is run as make bench runs it (the venv's python, the Makefile's environment) and, for the import paths,
as a person runs it directly: from another directory, without the Makefile's environment.
"""

import json
import numbers
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, ansible_env

pytestmark = pytest.mark.slow
TOOLS = os.path.join(ROOT, "tools")
LITELLM = os.path.join(ROOT, ".venv-litellm", "bin", "litellm")


def run_bench(script, out, make_env=True, timeout=300):
    """``tools/<script> --smoke --out <out>``; returns the results (the JSON file) after asserting exit 0."""
    if make_env:
        env, cwd = ansible_env(), ROOT
    else:  # run directly: no ANSIBLE_* / PYTHONPATH, and not from the checkout
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
        cwd = str(out.parent)
    result = subprocess.run([sys.executable, os.path.join(TOOLS, script), "--smoke", "--out", str(out)], cwd=cwd,
                            env=env, text=True, capture_output=True, timeout=timeout, check=False)
    assert result.returncode == 0, "%s --smoke exited with %d:\n%s\n%s" % (
        script, result.returncode, result.stdout[-3000:], result.stderr[-5000:])
    assert out.is_file(), "%s wrote no results to %s:\n%s" % (script, out, result.stdout[-2000:])
    with open(out) as handle:
        results = json.load(handle)
    assert results["smoke"] is True
    return results


def number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def assert_numbers(row, *keys):
    for key in keys:
        assert number(row.get(key)), "%s is not a number in %r" % (key, row)


def assert_stream_summary(summary):
    assert summary["requests"] >= 1 and summary["errors"] == 0, summary
    assert_numbers(summary, "ttft_p50_ms", "ttft_p99_ms", "gap_p50_ms", "gap_p99_ms", "gap_mean_ms")


@pytest.mark.parametrize("make_env", [True, False], ids=["make", "direct"])
def test_bench_module_utils(tmp_path, make_env):
    results = run_bench("bench.py", tmp_path / "module-utils.json", make_env)
    assert results["inventory"] and results["sysfs"] and results["vllm_plan"], results
    for row in results["inventory"].values():
        assert_numbers(row, "hosts", "problems", "best_ms", "peak_kib")
        assert row["problems"] == 0 and row["hosts"] > 0
    for row in results["sysfs"].values():
        assert_numbers(row, "devices", "gpus", "best_ms", "peak_kib")
        assert row["devices"] > 0 and row["gpus"] > 0
    for row in results["vllm_plan"].values():
        assert_numbers(row, "models", "services", "best_ms", "peak_kib")
        assert row["services"] == row["models"]


def test_bench_litellm(tmp_path):
    if not os.path.exists(LITELLM):
        pytest.fail("%s is missing: run make setup (venv-litellm)" % LITELLM)
    # Directly (the Makefile's environment is what the other tests check): the collection must be found from the
    # script's own location.
    results = run_bench("bench_litellm.py", tmp_path / "litellm-overhead.json", make_env=False)
    assert results["litellm_version"]
    assert list(results["direct"]) == ["1"]
    assert_stream_summary(results["direct"]["1"])
    (label, rows), = results["settings"].items()
    assert label.startswith("role defaults"), label
    assert_stream_summary(rows["1"]["proxied"])
    assert_numbers(rows["1"], "added_ttft_p50_ms", "added_ttft_p99_ms", "gap_p99_ms")
    # The real server is not measured in --smoke without --real (CI's cores; make bench always measures it):
    # the smoke says so instead of leaving it out silently.
    assert results["real_vllm"] == "not measured: --smoke without --real"
    for server in ("nginx", "caddy"):
        hop = results["tls_proxy"][server]
        if shutil.which(server) is None:
            assert hop.startswith("not installed"), hop
            continue
        assert_stream_summary(hop["1"]["proxied"])
        assert_numbers(hop["1"], "added_ttft_p50_ms", "added_ttft_p99_ms", "tls_hop_ttft_p50_ms",
                       "tls_hop_ttft_p99_ms", "gap_p99_ms")


def test_bench_audit_log(tmp_path):
    results = run_bench("bench_audit_log.py", tmp_path / "audit-log.json")
    configs = {"off", "on", "on+ok", "off+changed", "on+changed", "on+fsync"}
    assert set(results["median_s"]) == configs
    for name in configs:
        assert number(results["median_s"][name]) and results["median_s"][name] > 0
        assert len(results["runs_s"][name]) == results["rounds"]
    assert set(results["overhead_pct"]) == {"on", "on+ok", "on+changed", "on+fsync"}
    for value in results["overhead_pct"].values():
        assert number(value)
    tasks = results["tasks"]
    assert results["records"]["off"] == results["records"]["off+changed"] == 0
    assert results["records"]["on"] >= 1
    for name in ("on+ok", "on+changed", "on+fsync"):
        assert results["records"][name] >= tasks, results["records"]
