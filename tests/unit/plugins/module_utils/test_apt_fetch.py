"""apt_fetch.fetch_failed: which failed apt task results are a failed download (the roles run the task again) and
which are not (the run fails at once). The first message is the one a lab run's docker role failed with when the
mirror was away for a moment (CI, stop 50); the others follow the formats of apt and the apt module."""

from ansible_collections.pvegpu.llmstack.plugins.module_utils import apt_fetch

MIRROR_AWAY = {
    "failed": True, "rc": 100,
    "msg": "E: Failed to fetch http://deb.debian.org/debian/pool/main/p/python-apt/python3-apt_3.0.0_amd64.deb  "
           "Unable to connect to deb.debian.org:http:\nE: Unable to fetch some archives, maybe run apt-get update or "
           "try with --fix-missing?",
    "stdout": "Ign:5 http://deb.debian.org/debian trixie/main amd64 python3-apt amd64 3.0.0\n"}


def test_a_download_that_could_not_connect_is_a_fetch_failure():
    assert apt_fetch.fetch_failed(MIRROR_AWAY)


def test_each_way_apt_says_a_download_failed_is_one():
    said = [
        # apt-get update through tests/harness/flaky_mirror.py while it answered 503 (printed by apt 3.0.4).
        ("stderr", "E: Failed to fetch http://deb.debian.org/debian/dists/trixie/InRelease  503  Service Unavailable "
                   "[IP: 127.0.0.1 3142]\nE: The repository 'http://deb.debian.org/debian trixie InRelease' is not "
                   "signed.\n"),
        ("msg", "Failed to update apt cache after 5 retries: W:Failed to fetch http://deb.debian.org/debian/dists/"
                "trixie/InRelease  503  Service Unavailable [IP: 203.0.113.80 80], W:Some index files failed to "
                "download. They have been ignored, or old ones used instead."),
        ("stderr", "E: Failed to fetch http://deb.debian.org/debian/dists/trixie/main/binary-amd64/Packages.xz  "
                   "Hash Sum mismatch\n"),
        ("stderr", "W: Failed to fetch http://deb.debian.org/debian/dists/trixie/InRelease  Temporary failure "
                   "resolving 'deb.debian.org'\nE: Some index files failed to download.\n"),
        # The apt module installing python3-apt on an image without lists, after an apt-get update that could not
        # connect (apt-get update exits 0 then).
        ("msg", "E: Unable to locate package python3-apt\n"),
    ]
    for key, text in said:
        assert apt_fetch.fetch_failed({"failed": True, key: text}), text


def test_failures_that_are_not_a_download_are_not_retried():
    others = [
        {"failed": True, "msg": "No package matching 'nftabels' is available"},
        {"failed": True, "msg": "'/usr/bin/apt-get -y -o \"Dpkg::Options::=--force-confdef\" install 'docker.io'' "
                                "failed: E: Sub-process /usr/bin/dpkg returned an error code (1)\n",
         "stderr": "dpkg: error processing package docker.io (--configure):\n installed docker.io package "
                   "post-installation script subprocess returned error exit status 1\n"},
        {"failed": True, "msg": "E: Unable to correct problems, you have held broken packages."},
        {"failed": True, "msg": "python3-apt must be installed to use check mode."},
        {"failed": True, "msg": "E: Unable to locate package nftabels\n"},
        # A package the (stale) lists name that the mirror no longer has: asking again gets the same 404.
        {"failed": True, "msg": "E: Failed to fetch http://deb.debian.org/debian/pool/main/n/nftables/"
                                "nftables_1.1.1-1_amd64.deb  404  Not Found [IP: 203.0.113.80 80]\nE: Unable to fetch "
                                "some archives, maybe run apt-get update or try with --fix-missing?"},
        # A repository whose key is wrong: the module's update fails, but no download did.
        {"failed": True, "msg": "Failed to update apt cache after 5 retries: E:The repository "
                                "'https://download.docker.com/linux/debian trixie InRelease' is not signed."},
        # dpkg failed; a download apt's own retry recovered earlier in the same run is in stdout only.
        {"failed": True, "msg": "'/usr/bin/apt-get -y install nvidia-driver' failed: E: Sub-process /usr/bin/dpkg "
                                "returned an error code (1)\n",
         "stdout": "Err:1 http://deb.debian.org/debian trixie/main amd64 dkms all 3.2.1-1\n  Could not connect to "
                   "deb.debian.org:80 (203.0.113.80), connection timed out\nGet:1 http://deb.debian.org/debian "
                   "trixie/main amd64 dkms all 3.2.1-1 [81.9 kB]\n"},
    ]
    for result in others:
        assert not apt_fetch.fetch_failed(result), result


def test_a_result_that_did_not_fail_is_not_a_fetch_failure_whatever_it_says():
    # apt warns about a mirror it skipped and still installs from the lists it has: the task succeeded.
    assert not apt_fetch.fetch_failed(dict(MIRROR_AWAY, failed=False, changed=True))
    assert not apt_fetch.fetch_failed({"skipped": True, "skip_reason": "Conditional result was False"})
    assert not apt_fetch.fetch_failed(None)
    assert not apt_fetch.fetch_failed({"failed": True, "msg": None, "stderr": ["Failed to fetch"]})
