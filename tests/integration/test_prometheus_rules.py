"""The monitoring role's alert rules (roles/monitoring/files/rules) and their promtool unit tests
(tests/prometheus/*.test.yml), with Debian's promtool (make setup installs the prometheus package).

Besides running promtool: every alert carries severity, summary, description and a runbook hint; every alert has
a test case where it fires and one where it must not; and moving a threshold makes the tests fail, so they can."""

import glob
import os
import re
import shutil
import subprocess

import pytest
import yaml
from conftest import ROOT

RULES = sorted(glob.glob(os.path.join(ROOT, "roles", "monitoring", "files", "rules", "*.yml")))
TESTS = sorted(glob.glob(os.path.join(ROOT, "tests", "prometheus", "*.test.yml")))


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: make setup installs Debian's prometheus package")
    return path


def alerts():
    found = {}
    for path in RULES:
        with open(path) as handle:
            for group in yaml.safe_load(handle)["groups"]:
                for rule in group["rules"]:
                    if "alert" in rule:
                        found[rule["alert"]] = (os.path.basename(path), rule)
    return found


def test_the_rule_files_are_valid(promtool):
    assert RULES, "no rule files"
    result = subprocess.run([promtool, "check", "rules"] + RULES, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_promtool_unit_tests_pass(promtool):
    assert TESTS, "no promtool tests"
    result = subprocess.run([promtool, "test", "rules"] + TESTS, capture_output=True, text=True, check=False,
                            cwd=os.path.join(ROOT, "tests", "prometheus"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_severity_and_says_what_to_do():
    for name, (path, rule) in alerts().items():
        assert rule.get("labels", {}).get("severity") in ("warning", "critical"), (path, name)
        for key in ("summary", "description", "runbook"):
            assert rule.get("annotations", {}).get(key, "").strip(), (path, name, key)


def test_every_alert_is_tested_firing_and_not_firing():
    fired, quiet = set(), set()
    for path in TESTS:
        with open(path) as handle:
            for case in yaml.safe_load(handle)["tests"]:
                for check in case.get("alert_rule_test", []):
                    (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = set(alerts())
    assert names - fired == set(), "alerts never shown firing"
    assert names - quiet == set(), "alerts never shown staying quiet"


@pytest.mark.parametrize("rule_file, before, after", [
    ("gpu.yml", "DCGM_FI_DEV_GPU_TEMP > 85", "DCGM_FI_DEV_GPU_TEMP > 86"),
    ("gpu.yml", "DCGM_FI_DEV_GPU_TEMP >= 90", "DCGM_FI_DEV_GPU_TEMP > 90"),
    ("vllm.yml", ") > 0.9\n        for: 5m", ") >= 0.9\n        for: 5m"),
    ("hosts.yml", "for: 2m", "for: 5m"),
    ("gpu.yml", "(DCGM_FI_DEV_GPU_UTIL) < 5", "(DCGM_FI_DEV_GPU_UTIL) <= 5"),
    ("gpu.yml", "increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[1h]) > 10", "increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[1h]) > 11"),
    ("vllm.yml", "> 0.05 / 60", "> 0.03 / 60"),
])
def test_moving_a_threshold_fails_the_tests(promtool, tmp_path, rule_file, before, after):
    rules_dir = tmp_path / "roles" / "monitoring" / "files" / "rules"
    shutil.copytree(os.path.join(ROOT, "roles", "monitoring", "files", "rules"), rules_dir)
    text = (rules_dir / rule_file).read_text()
    assert text.count(before) == 1, before
    (rules_dir / rule_file).write_text(text.replace(before, after))
    tests_dir = tmp_path / "tests" / "prometheus"
    shutil.copytree(os.path.join(ROOT, "tests", "prometheus"), tests_dir)
    test_file = rule_file.replace(".yml", ".test.yml")
    result = subprocess.run([promtool, "test", "rules", test_file], capture_output=True, text=True, check=False,
                            cwd=str(tests_dir))
    assert result.returncode != 0, result.stdout


def test_every_dcgm_field_the_rules_use_is_in_our_counters_csv():
    """dcgm-exporter only exports what its counters file lists; a rule on a field that is not listed never fires."""
    listed = set()
    with open(os.path.join(ROOT, "roles", "monitoring", "files", "dcgm-counters.csv")) as handle:
        for line in handle:
            line = line.strip()
            if line and not line.startswith("#"):
                field, kind, help_text = [part.strip() for part in line.split(",", 2)]
                assert kind in ("gauge", "counter") and help_text, line
                listed.add(field)
    used = set()
    for entry in alerts().values():
        used.update(re.findall(r"DCGM_FI_[A-Z0-9_]+", entry[1]["expr"]))
    assert used and used - listed == set()
    # The fields seed 000's burn-in verdicts need and dcgm-exporter's default list leaves out.
    assert {"DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= listed
    # Seed 002's fabric alerts: the NVLink error counters, left out of dcgm-exporter's default list as well.
    assert {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"} <= used
