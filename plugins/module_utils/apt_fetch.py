# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an apt task failed only because a download failed (a mirror or apt cache that dropped a connection,
answered 5xx or was being synced), so that running the task again may succeed.

apt retries a download by itself (Acquire::Retries), but within one apt-get: an address it could not connect to is
not tried again in that process (apt's connect code remembers it), so a mirror that is away for a few seconds fails
the whole apt-get. The roles' apt tasks therefore run again, a few seconds apart, while this says the failure is a
download's (``until: not (result | pvegpu.llmstack.apt_fetch_failed)``); any other failure (no such package, a
dependency problem, dpkg failing) is not retried and fails the run at once.

Plain functions, no Ansible: plugins/filter/apt_fetch_failed.py calls them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# apt's line for a download that failed: "Failed to fetch <url>  <reason>" (E: or W:, and the apt module's
# own "Failed to update apt cache after N retries: W:Failed to fetch ..."); an HTTP answer's reason: "<code>  <text>".
FETCH = re.compile(r"Failed to fetch \S+\s+(?P<reason>[^\n]*)")
# A 4xx answer will not change by asking again (a package the lists name but the mirror no longer has: stale lists,
# a removed version): not a moment's outage.
CLIENT_ERROR = re.compile(r"^4[0-9][0-9]\s")
# The apt module installs python3-apt by itself first, after an apt-get update whose failed downloads are only
# warnings (apt-get exits 0 when it could not connect): on an image without package lists that outage then reads
# "Unable to locate package python3-apt". Debian always has python3-apt, so that means the lists could not be fetched.
NO_LISTS = re.compile(r"Unable to locate package python3-apt\b")


def fetch_failed(result):
    """True when ``result`` (an apt task's registered result) failed and what it says is a download that failed for a
    reason asking again may cure (no connection, a timeout, a name not resolved, 5xx, a mirror being synced), not a
    4xx answer or anything else (no such package, a dependency problem, dpkg failing). Reads the result's msg and
    stderr: stdout also has the lines of downloads apt's own retries recovered, which failed nothing."""
    if not isinstance(result, dict) or not result.get("failed"):
        return False
    said = "\n".join(text for text in (result.get("msg"), result.get("stderr")) if isinstance(text, str))
    reasons = [match.group("reason").strip() for match in FETCH.finditer(said)]
    return any(not CLIENT_ERROR.match(reason) for reason in reasons) or bool(NO_LISTS.search(said))
