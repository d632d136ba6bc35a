# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which services of a role's compose project start on a host (the shared ``service_compose`` role's start step).

``llmstack_services_not_started`` lists what a host renders and validates but does not start: ``<project>`` (every
service of that role's project, e.g. ``langfuse``) or ``<project>/<service>`` (one, e.g. ``monitoring/grafana``),
where the project is the role (litellm, langfuse, monitoring, vllm) and the service a key of its compose project.
For a site whose images cannot exist on some host (the lab: no registry, no GPU) or that runs one of them elsewhere
(an existing Grafana).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

ENTRY_RE = re.compile(r"^[a-z][a-z0-9_-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def services_to_start(project, services, not_started):
    """{start, skipped, unknown, problems} for ``project`` with compose ``services`` (names) on a host whose
    ``llmstack_services_not_started`` is ``not_started``. ``start`` and ``skipped`` keep the project's order;
    ``unknown``: this project's entries naming a service it does not have on this host (not an error: one list in
    group_vars serves hosts whose projects differ; the role shows them, a typo stays visible); ``problems`` name the
    variable for an entry that is not ``<role>`` or ``<role>/<service>``."""
    services = [str(s) for s in services or []]
    problems = []
    skip_all = False
    skip = set()
    unknown = []
    if not isinstance(not_started, (list, tuple)):
        return {"start": services, "skipped": [], "unknown": [], "problems": [
            "llmstack_services_not_started: %r is not a list of <role> or <role>/<service> entries" % (not_started,)]}
    for index, entry in enumerate(not_started):
        if not isinstance(entry, str) or not ENTRY_RE.match(entry):
            problems.append("llmstack_services_not_started[%d]: %r is not <role> or <role>/<service> (e.g. langfuse, "
                            "monitoring/grafana)" % (index, entry))
            continue
        name, dummy_sep, service = entry.partition("/")
        if name != project:
            continue
        if not service:
            skip_all = True
        elif service not in services:
            unknown.append(service)
        else:
            skip.add(service)
    skipped = [s for s in services if skip_all or s in skip]
    return {"start": [s for s in services if s not in skipped], "skipped": skipped, "unknown": unknown,
            "problems": problems}


def _error_text(result):
    """The server's own error message of a registered ``uri`` result (OpenAI shape, LiteLLM's, or uri's msg)."""
    body = result.get("json")
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        if body.get("message"):
            return str(body["message"])
        if body.get("detail"):
            return str(body["detail"])
    return str(result.get("msg") or "")


def probe_failures(results, label, what, limit=300):
    """One message per probe of a looped ``uri`` task (its registered ``results``) that did not end with HTTP 200:
    ``<label>: <what>: HTTP <status> <the server's error>``. ``label`` is formatted with the loop item (a dict: its
    keys, e.g. ``{key} on port {value}`` for dict2items; anything else: ``{item}``). Skipped results are not probes.
    The registered results carry the request's headers (an API key): the role prints these messages instead."""
    failures = []
    for result in results or []:
        if not isinstance(result, dict) or result.get("skipped"):
            continue
        status = result.get("status")
        if status == 200:
            continue
        item = result.get("item")
        try:
            name = label.format(**item) if isinstance(item, dict) else label.format(item=item)
        except (KeyError, IndexError, ValueError):
            name = str(item)
        error = _error_text(result)
        if len(error) > limit:
            error = error[:limit - 3] + "..."
        failures.append(("%s: %s: HTTP %s %s" % (name, what, status if status not in (None, -1) else "-", error))
                        .rstrip())
    return failures
