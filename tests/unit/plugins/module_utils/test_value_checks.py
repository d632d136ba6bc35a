"""module_utils.value_checks: the one rule for numbers, ports, addresses and durations that every role's check uses."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks


@pytest.mark.parametrize("value, expected", [(8001, 8001), ("8001", 8001), (" 8001 ", 8001), (1, 1), (65535, 65535),
                                             (70000, None), ("70000", None), (0, None), ("lots", None),
                                             (True, None), (8001.0, None), ("0x1f41", None), ("-1", None),
                                             (None, None), ([8001], None)])
def test_ports_are_numbers_or_digit_strings(value, expected):
    assert value_checks.as_port(value) == expected


def test_unprivileged_ports():
    assert value_checks.as_port(1023, lowest=1024) is None and value_checks.as_port("1024", lowest=1024) == 1024


@pytest.mark.parametrize("value, expected", [("0.9", 0.9), (1, 1.0), (".5", 0.5), ("nine", None), (False, None)])
def test_numbers(value, expected):
    assert value_checks.as_number(value) == expected


@pytest.mark.parametrize("value, ok", [("127.0.0.1", True), ("::1", True), ("192.168.20.10", True),
                                       ("gateway.lan", False), ("", False), (None, False), ("10.0.0.300", False)])
def test_ip_addresses(value, ok):
    assert (value_checks.ip_address(value) is not None) is ok


# Prometheus' own format (prometheus/common model.ParseDuration): units largest first, each once; "0" alone.
@pytest.mark.parametrize("text, seconds", [("1m30s", 90), ("15s", 15), ("500ms", 0.5), ("1h", 3600),
                                           ("2w", 1209600), ("1y", 31536000), ("1d12h", 129600),
                                           ("1m500ms", 60.5), ("0", 0), ("0s", 0)])
def test_prometheus_durations(text, seconds):
    assert value_checks.prometheus_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30s1m", "5s5s", "1.5m", "90 seconds", "", "s", "1M", "-5s", "5", 5, None])
def test_not_prometheus_durations(text):
    assert value_checks.prometheus_seconds(text) is None


@pytest.mark.parametrize("text, ok", [("ops@example.org", True), ("first.last+acme@mail.example.co.uk", True),
                                      ("ops", False), ("ops@localhost", False), ("ops @example.org", False),
                                      ("ops@example.org\n}", False), ('"ops"@example.org', False), ("", False),
                                      (None, False), ("a@b@example.org", False)])
def test_email(text, ok):
    assert value_checks.is_email(text) is ok


@pytest.mark.parametrize("path", ["/opt/llm-gateway", "/opt/llm-gateway/", "/srv/llmstack/langfuse", "/home/ops/vllm",
                                  "/var/lib/llmstack", "/etc/llmstack"])
def test_directories_a_removal_may_take(path):
    assert value_checks.removable_dir_problems("litellm_dir", path) == []


@pytest.mark.parametrize("path", ["/", "/opt", "/opt/", "opt/litellm", "./litellm", "/opt//litellm", "/opt/./litellm",
                                  "/opt/../etc", "/opt/litellm/..", "/opt/litellm//", "/home/ops", "/home/ops/",
                                  "/etc/ssh", "/etc/ssh/", "/var/lib", "/var/lib/docker", "/usr/local", "", None, 42,
                                  ["/opt/litellm"]])
def test_directories_a_removal_refuses_name_the_variable(path):
    problems = value_checks.removable_dir_problems("litellm_dir", path)
    assert len(problems) == 1 and problems[0].startswith("litellm_dir: ") and "(e.g. /opt/litellm)" in problems[0]
