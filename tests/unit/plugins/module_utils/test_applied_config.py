"""module_utils.applied_config: a restart owed by a run that died after writing a service's config is found by the
next run (the record of what the service applied differs from the files), and only then."""

import json
import os
import stat

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import applied_config
from ansible_collections.pvegpu.llmstack.plugins.module_utils.applied_config import AppliedConfigError


@pytest.fixture
def site(tmp_path):
    conf = tmp_path / "opt" / "config.yaml"
    conf.parent.mkdir()
    conf.write_text("num_retries: 2\n")
    rules = tmp_path / "opt" / "rules"
    rules.mkdir()
    (rules / "a.yml").write_text("groups: []\n")
    return {"state": str(tmp_path / "state"), "files": [str(conf), str(rules)], "conf": conf, "rules": rules}


def run_role(site, write=None, die=False):
    """What a service role does: check, write the config, (handlers restart), record. die: killed before handlers."""
    before = applied_config.check(site["state"], "litellm", site["files"])
    if write:
        write()
    if die:
        return before, None
    return before, applied_config.applied(site["state"], "litellm", site["files"])


def test_a_change_lost_by_a_killed_run_is_pending_on_the_next_one_and_recorded_after_it(site):
    first, done = run_role(site)
    assert first["baseline"] and not first["pending"]
    assert not done["changed"]  # the baseline already holds these files
    killed, none = run_role(site, write=lambda: site["conf"].write_text("num_retries: 5\n"), die=True)
    assert not killed["pending"] and none is None
    rerun, recorded = run_role(site)
    assert rerun["pending"] and rerun["changed_files"] == [str(site["conf"])]
    assert recorded["changed"]
    again, recorded = run_role(site)
    assert not again["pending"] and not again["changed"] and not recorded["changed"]


def test_a_changed_file_in_a_directory_or_a_removed_file_is_pending(site):
    run_role(site)
    (site["rules"] / "b.yml").write_text("groups: [x]\n")
    assert applied_config.check(site["state"], "litellm", site["files"])["changed_files"] == [str(site["rules"])]
    applied_config.applied(site["state"], "litellm", site["files"])
    site["conf"].unlink()
    assert applied_config.check(site["state"], "litellm", site["files"])["changed_files"] == [str(site["conf"])]


def test_a_file_no_longer_the_services_is_no_change_and_a_new_one_is(site, tmp_path):
    """A vLLM unit of a model taken away leaves the list: the other units owe no restart for it. A file added to the
    list (redis.conf when a second gateway comes) is a change; one added and still missing is not."""
    run_role(site)
    assert not applied_config.check(site["state"], "litellm", site["files"][:1])["pending"]
    added = tmp_path / "opt" / "redis.conf"
    assert not applied_config.check(site["state"], "litellm", site["files"] + [str(added)])["pending"]
    added.write_text("requirepass x\n")
    assert applied_config.check(site["state"], "litellm", site["files"] + [str(added)])["changed_files"] == [
        str(added)]


def test_a_first_install_takes_no_baseline_until_a_file_exists_and_is_not_pending(site):
    site["conf"].unlink()
    (site["rules"] / "a.yml").unlink()
    site["rules"].rmdir()
    first = applied_config.check(site["state"], "litellm", site["files"])
    assert not first["pending"] and not first["baseline"] and not first["changed"]
    assert not os.path.exists(first["record"])
    site["conf"].write_text("num_retries: 2\n")
    site["rules"].mkdir()
    recorded = applied_config.applied(site["state"], "litellm", site["files"])
    assert recorded["changed"] and recorded["changed_files"] == sorted(site["files"])
    assert not applied_config.check(site["state"], "litellm", site["files"])["pending"]


def test_the_record_is_0600_in_a_0700_directory_holds_digests_only_and_no_temporary_file(site):
    site["conf"].write_text("master_key: sk-secret-value\n")
    result = applied_config.check(site["state"], "litellm", site["files"])
    assert stat.S_IMODE(os.stat(result["record"]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(site["state"]).st_mode) == 0o700
    with open(result["record"]) as handle:
        text = handle.read()
    assert "sk-secret-value" not in text
    assert set(json.loads(text)["files"]) == set(site["files"])
    assert os.listdir(site["state"]) == ["litellm.json"]


def test_check_mode_writes_nothing(site):
    result = applied_config.check(site["state"], "litellm", site["files"], check_mode=True)
    assert result["baseline"] and not os.path.exists(site["state"])
    result = applied_config.applied(site["state"], "litellm", site["files"], check_mode=True)
    assert result["changed"] and not os.path.exists(site["state"])


def test_a_torn_record_is_a_restart_owed(site):
    os.makedirs(site["state"])
    with open(os.path.join(site["state"], "litellm.json"), "w") as handle:
        handle.write('{"files": {"/opt/con')
    result = applied_config.check(site["state"], "litellm", site["files"])
    assert result["pending"] and result["changed_files"] == sorted(site["files"])


def test_bad_names_and_relative_paths_and_unreadable_files_fail_naming_them(site, tmp_path):
    with pytest.raises(AppliedConfigError, match="names the record file"):
        applied_config.check(site["state"], "../etc/passwd", site["files"])
    with pytest.raises(AppliedConfigError, match="'config.yaml' is not an absolute path"):
        applied_config.check(site["state"], "litellm", ["config.yaml"])
    site["conf"].unlink()
    site["conf"].symlink_to(tmp_path / "nowhere")  # a dangling link is not a missing file: it cannot be read
    with pytest.raises(AppliedConfigError, match="config.yaml: cannot be read"):
        applied_config.check(site["state"], "litellm", site["files"])


def test_an_existing_install_without_a_record_takes_the_files_it_has_as_applied(site):
    (site["rules"] / "a.yml").unlink()
    site["rules"].rmdir()
    first = applied_config.check(site["state"], "litellm", site["files"])
    assert first["baseline"] and not first["pending"]
    site["rules"].mkdir()
    assert applied_config.check(site["state"], "litellm", site["files"])["changed_files"] == [str(site["rules"])]
