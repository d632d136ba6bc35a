"""module_utils.docker_engine: the docker role's settings, package lists, the variables renamed from the nvidia
role, and the daemon.json merge."""

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import docker_engine


def settings(**changes):
    base = {"source": "debian", "repo_url": "https://download.docker.com/linux/debian",
            "repo_gpg_key_url": "https://download.docker.com/linux/debian/gpg",
            "repo_gpg_fingerprints": ["9DC8 5822 9FC7 DD38 854A  E2D8 8D81 803C 0EBF CD88"],
            "daemon_options": {}, "log_max_size": "100m", "log_max_file": 3}
    base.update(changes)
    return base


def test_the_defaults_pass():
    assert docker_engine.check_settings(settings()) == []


def test_every_bad_setting_is_named_at_once():
    problems = docker_engine.check_settings(settings(
        source="snap", repo_url="ftp://example.invalid/debian", repo_gpg_fingerprints=["0EBFCD88"],
        daemon_options={"runtimes": {}}, log_max_size="100MB", log_max_file=0))
    assert [p.split(":")[0] for p in problems] == [
        "docker_source", "docker_repo_url", "docker_repo_gpg_fingerprints", "docker_daemon_options",
        "docker_log_max_size", "docker_log_max_file"]
    assert "'snap'" in problems[0] and "0EBFCD88" in problems[2] and "nvidia" in problems[3]


@pytest.mark.parametrize("value", [[], "9DC858229FC7DD38854AE2D88D81803C0EBFCD88", None])
def test_fingerprints_must_be_a_list_when_given(value):
    problems = docker_engine.check_settings(settings(repo_gpg_fingerprints=value))
    assert problems == ([] if value is None else ["docker_repo_gpg_fingerprints: must be a non-empty list of key "
                                                  "fingerprints"])


@pytest.mark.parametrize("value", [True, "3", 1.5])
def test_log_max_file_is_a_whole_number(value):
    assert docker_engine.check_settings(settings(log_max_file=value))[0].startswith("docker_log_max_file:")


def test_the_nvidia_roles_old_names_are_refused_with_their_new_ones():
    problems = docker_engine.renamed_problems(["nvidia_docker_source", "nvidia_sysctl_apply", "nvidia_reboot",
                                               "nvidia_docker_log_max_file", "nvidia_docker_source"])
    assert [p.split(" ")[0] for p in problems] == ["nvidia_docker_log_max_file", "nvidia_docker_source",
                                                   "nvidia_sysctl_apply"]
    assert "renamed docker_log_max_file" in problems[0] and "renamed docker_sysctl_apply" in problems[2]
    assert docker_engine.renamed_problems([]) == []


@pytest.mark.parametrize("distribution,major,ok", [("Debian", "13", True), ("Debian", 13, True),
                                                   ("Debian", "12", False), ("Ubuntu", "24", False)])
def test_only_debian_13_is_supported(distribution, major, ok):
    message = docker_engine.check_distribution(distribution, major, "x")
    assert (message is None) == ok
    if not ok:
        assert "Nothing was installed" in message and distribution in message


def test_package_sources():
    assert docker_engine.packages("debian")[:2] == ["docker.io", "docker-compose"]
    assert "docker-compose-plugin" in docker_engine.packages("docker")
    with pytest.raises(docker_engine.DockerEngineError):
        docker_engine.packages("snap")


def test_merge_keeps_the_users_keys_and_sets_ours():
    user = {"data-root": "/srv/docker", "log-opts": {"labels": "team", "max-size": "1g"},
            "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}
    owned = docker_engine.owned_daemon_options({"live-restore": True}, "100m", 3)
    merged, changed = docker_engine.merge_daemon(user, owned)
    assert merged == {"data-root": "/srv/docker", "live-restore": True, "log-driver": "json-file",
                      "log-opts": {"labels": "team", "max-size": "100m", "max-file": "3"},
                      "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}
    assert sorted(changed) == ["live-restore", "log-driver", "log-opts.max-file", "log-opts.max-size"]
    assert user["log-opts"]["max-size"] == "1g"  # not modified in place
    again, changed = docker_engine.merge_daemon(merged, owned)
    assert again == merged and changed == []


def test_a_users_option_overrides_the_log_defaults():
    owned = docker_engine.owned_daemon_options({"log-opts": {"max-size": "1g"}}, "100m", 3)
    assert owned["log-opts"] == {"max-size": "1g", "max-file": "3"}


@pytest.mark.parametrize("text,message", [("{", "not valid JSON"), ("[1]", "JSON list, not an object"),
                                          ('"x"', "JSON str")])
def test_a_broken_daemon_json_is_refused(text, message):
    with pytest.raises(docker_engine.DockerEngineError, match=message):
        docker_engine.load_daemon_json(text)


def test_empty_or_missing_daemon_json_is_an_empty_object():
    assert docker_engine.load_daemon_json(None) == {} and docker_engine.load_daemon_json(" \n") == {}


@pytest.mark.parametrize("written", ["9DC8 5822 9FC7 DD38 854A  E2D8 8D81 803C 0EBF CD88",
                                     "0x9dc858229fc7dd38854ae2d88d81803c0ebfcd88",
                                     "9D:C8:58:22:9F:C7:DD:38:85:4A:E2:D8:8D:81:80:3C:0E:BF:CD:88"])
def test_a_fingerprint_is_accepted_as_the_keyring_module_reads_it(written):
    """One reading of fingerprints for the settings check and apt_keyring (value_checks): the check accepted only
    spaces before, apt_keyring also colons and 0x."""
    assert docker_engine.check_settings(settings(repo_gpg_fingerprints=[written])) == []
