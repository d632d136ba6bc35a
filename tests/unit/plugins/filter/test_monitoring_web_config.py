"""The monitoring_web_config filter: web.yml of Prometheus and Alertmanager from the web password, keeping the hash
of the file an earlier run wrote (the role passes those files' text)."""

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.pvegpu.llmstack.plugins.filter.monitoring_web_config import FilterModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import bcrypt_hash

PASSWORD = "pW4sXq8zR2mT6vN0bL3kJ7hG1fD5sA9c"
web_config = FilterModule().filters()["monitoring_web_config"]


def test_a_first_run_hashes_and_a_rerun_with_the_written_files_keeps_the_hash():
    first = web_config(PASSWORD, "llmstack")
    hashed = first["basic_auth_users"]["llmstack"]
    assert bcrypt_hash.verifies(PASSWORD, hashed)
    written = "# Managed by pvegpu.llmstack\n" + yaml.safe_dump(first)
    assert web_config(PASSWORD, "llmstack", [written, written]) == first
    # A file missing or unreadable on one side (the role passes what it could read) changes nothing either.
    assert web_config(PASSWORD, "llmstack", ["", written]) == first
    changed = web_config(PASSWORD + "2", "llmstack", [written])["basic_auth_users"]["llmstack"]
    assert changed != hashed and bcrypt_hash.verifies(PASSWORD + "2", changed)


def test_a_bad_user_or_password_fails_the_filter_naming_it():
    with pytest.raises(AnsibleFilterError, match="monitoring_web_user"):
        web_config(PASSWORD, "ll:mstack")
    with pytest.raises(AnsibleFilterError, match="monitoring web password"):
        web_config("", "llmstack")
