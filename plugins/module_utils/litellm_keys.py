# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""LiteLLM virtual keys by ``key_alias``: compare, plan and apply through the proxy's management API.

Request and response shapes followed (LiteLLM 1.108.7, litellm/proxy/management_endpoints/
key_management_endpoints.py and litellm/proxy/_types.py; docs.litellm.ai "Virtual Keys"):
- ``GET /key/list?key_alias=A&return_full_object=true`` -> ``{"keys": [{token, key_alias, models, max_budget,
  budget_duration, tpm_limit, rpm_limit, max_parallel_requests, metadata, ...}], "total_count", ...}``;
- ``POST /key/generate`` with the settings and ``key_alias`` -> ``{"key": "sk-...", "token": <hash>, ...}``;
- ``POST /key/update`` with ``key`` (the key or its hash) and the fields to change (a merge patch);
- ``POST /key/delete`` with ``{"key_aliases": [A]}`` -> ``{"deleted_keys": [...]}``;
- errors: HTTP 4xx/5xx with ``{"error": {"message", "type", "code"}}`` or FastAPI's ``{"detail": ...}``.
All calls carry ``Authorization: Bearer <master key>``.
"""

import json

FIELDS = ("models", "max_budget", "budget_duration", "tpm_limit", "rpm_limit", "max_parallel_requests", "metadata")


class LitellmApiError(Exception):
    def __init__(self, method, path, status, message):
        self.status = status
        Exception.__init__(self, "LiteLLM %s %s answered %s: %s" % (method, path, status, message))


def error_message(body):
    """The human part of a LiteLLM error body (JSON or text)."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return (body or "").strip()[:500] if isinstance(body, str) else repr(body)[:500]
    if isinstance(data, dict):
        if isinstance(data.get("error"), dict):
            return str(data["error"].get("message") or data["error"])[:500]
        if "detail" in data:
            detail = data["detail"]
            if isinstance(detail, dict) and "error" in detail:
                return str(detail["error"])[:500]
            return str(detail)[:500]
        if "error" in data:
            return str(data["error"])[:500]
    return json.dumps(data)[:500]


def normalise(field, value):
    """Compare the way LiteLLM stores: models as a sorted list, numbers as floats, empty metadata as {}."""
    if field == "models":
        return sorted(value or [])
    if field == "metadata":
        return dict(value or {})
    if field == "max_budget":
        return None if value is None else float(value)
    return value


def wanted_fields(params):
    """The managed settings the user gave (None = leave alone)."""
    return {f: params[f] for f in FIELDS if params.get(f) is not None}


def differences(current, wanted):
    """{field: (current, wanted)} of the managed fields that differ. Metadata compares only the given keys."""
    diff = {}
    for field, value in wanted.items():
        have = current.get(field)
        if field == "metadata":
            have = dict(have or {})
            subset = {k: have.get(k) for k in value}
            if subset != dict(value):
                diff[field] = (subset, dict(value))
            continue
        if normalise(field, have) != normalise(field, value):
            diff[field] = (have, value)
    return diff


def plan(current, wanted, state):
    """('create'|'update'|'delete'|'none', {field: (before, after)})."""
    if state == "absent":
        return ("delete", {}) if current is not None else ("none", {})
    if current is None:
        return "create", {f: (None, v) for f, v in wanted.items()}
    diff = differences(current, wanted)
    return ("update", diff) if diff else ("none", {})


class KeyApi:
    """The four calls, over a ``request(method, path, body) -> (status, text)`` function."""

    def __init__(self, request):
        self._request = request

    def _call(self, method, path, body=None):
        status, text = self._request(method, path, body)
        if status is None or status >= 400:
            raise LitellmApiError(method, path.split("?")[0], status, error_message(text))
        try:
            return json.loads(text) if text else {}
        except ValueError:
            raise LitellmApiError(method, path, status, "not JSON: %s" % text[:200])

    def find(self, alias):
        """The stored key with this alias, or None; two keys with one alias is an error."""
        from urllib.parse import urlencode

        query = urlencode({"key_alias": alias, "return_full_object": "true", "size": 100})
        data = self._call("GET", "/key/list?" + query)
        keys = [k for k in data.get("keys") or [] if isinstance(k, dict) and k.get("key_alias") == alias]
        if len(keys) > 1:
            raise LitellmApiError("GET", "/key/list", 200, "%d keys carry the alias %s; delete the extra ones "
                                  "so the alias names one key" % (len(keys), alias))
        return keys[0] if keys else None

    def generate(self, alias, fields):
        body = dict(fields, key_alias=alias)
        return self._call("POST", "/key/generate", body)

    def update(self, token, fields):
        return self._call("POST", "/key/update", dict(fields, key=token))

    def delete(self, alias):
        return self._call("POST", "/key/delete", {"key_aliases": [alias]})
