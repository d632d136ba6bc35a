#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stream_check
short_description: One streamed chat completion through the gateway, judged on when its pieces arrive
version_added: 0.2.0
description:
  - The check seeds 000 and 001 run by hand after deploying (C(curl -N) through the proxy) - sends one chat completion
    with C(stream=true) to an OpenAI-compatible endpoint (the TLS proxy in front of LiteLLM) and reads the answer as
    it arrives, noting when each socket read came.
  - Fails unless the answer is HTTP 200, at least two events carry content, it ends with C(data [DONE]), and the
    first content arrived before the end in a separate read - a proxy that buffers the response (C(proxy_buffering
    on), gzip of C(text/event-stream)) delivers everything at once at the end and is named.
  - Changes nothing; runs the same in check mode. Logic in plugins/module_utils/stream_check.py.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  url:
    description: The base URL, e.g. C(https://10.0.30.12:443) (C(/v1/models) and C(/v1/chat/completions) are added).
    type: str
    required: true
  api_key:
    description: The bearer key (a client key of the gateway, or its master key).
    type: str
    required: true
  model:
    description: The model group to ask; empty - the first that C(/v1/models) lists.
    type: str
    default: ""
  prompt:
    description: The user message.
    type: str
    default: Count from one to ten.
  max_tokens:
    description: The most tokens to generate (keep it small - this runs on every deploy).
    type: int
    default: 32
  ca_path:
    description: A CA bundle to verify the server with (the internal CA of M(pvegpu.llmstack.tls_proxy)).
    type: path
  client_cert:
    description: A client certificate, for a proxy that requires mutual TLS.
    type: path
  client_key:
    description: The key of O(client_cert).
    type: path
  validate_certs:
    description: Verify the server's certificate.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the whole answer.
    type: int
    default: 120
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: One streamed answer through the TLS proxy
  pvegpu.llmstack.stream_check:
    url: https://10.0.30.12:443
    api_key: "{{ client_key }}"
    ca_path: /etc/llmstack/tls/ca.crt
"""

RETURN = r"""
streamed:
  description: Whether the answer streamed (always true when the module succeeds).
  returned: always
  type: bool
model:
  description: The model group asked and the model the events named.
  returned: always
  type: dict
content_events:
  description: Events that carried content.
  returned: always
  type: int
reads:
  description: Socket reads that brought data.
  returned: always
  type: int
first_content_s:
  description: Seconds from the request to the first content.
  returned: always
  type: float
spread_s:
  description: Seconds between the first content and the end of the stream.
  returned: always
  type: float
text:
  description: The answer.
  returned: always
  type: str
"""

import ssl
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves import http_client
from ansible.module_utils.six.moves.urllib.parse import urlsplit
from ansible_collections.pvegpu.llmstack.plugins.module_utils import stream_check


def connection(params):
    parts = urlsplit(params["url"])
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=params["ca_path"]) if params["validate_certs"] else \
            ssl._create_unverified_context()  # pylint: disable=protected-access
        if params["client_cert"]:
            context.load_cert_chain(params["client_cert"], params["client_key"])
        return http_client.HTTPSConnection(parts.hostname, port, timeout=params["timeout"], context=context)
    return http_client.HTTPConnection(parts.hostname, port, timeout=params["timeout"])


def main():
    module = AnsibleModule(argument_spec=dict(
        url=dict(type="str", required=True), api_key=dict(type="str", required=True, no_log=True),
        model=dict(type="str", default=""), prompt=dict(type="str", default="Count from one to ten."),
        max_tokens=dict(type="int", default=32, no_log=False), ca_path=dict(type="path"), client_cert=dict(type="path"),
        client_key=dict(type="path", no_log=False), validate_certs=dict(type="bool", default=True),
        timeout=dict(type="int", default=120)), supports_check_mode=True,
        required_together=[("client_cert", "client_key")])
    params = module.params
    headers = {"Authorization": "Bearer %s" % params["api_key"], "Content-Type": "application/json"}
    model = params["model"]
    try:
        if not model:
            conn = connection(params)
            conn.request("GET", "/v1/models", headers=headers)
            answer = conn.getresponse()
            listing = answer.read()
            conn.close()
            model = stream_check.first_model(listing.decode("utf-8", "replace"))
            if answer.status != 200 or not model:
                module.fail_json(msg="GET %s/v1/models answered %s and named no model"
                                 % (params["url"], answer.status))
        conn = connection(params)
        started = time.monotonic()
        conn.request("POST", "/v1/chat/completions",
                     body=stream_check.request_body(model, params["prompt"], params["max_tokens"]), headers=headers)
        answer = conn.getresponse()
        lines, reads, pending = [], [], b""
        while True:
            chunk = answer.read1(65536) if hasattr(answer, "read1") else answer.read(1)
            now = time.monotonic() - started
            reads.append((now, len(chunk)))
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                lines.append((now, line.decode("utf-8", "replace")))
            if now > params["timeout"]:
                break
        if pending:
            lines.append((reads[-1][0], pending.decode("utf-8", "replace")))
        conn.close()
    except (OSError, ssl.SSLError, http_client.HTTPException) as exc:
        module.fail_json(msg="streamed request to %s failed: %s" % (params["url"], exc))
    verdict = stream_check.judge(answer.status, lines, reads)
    result = dict(verdict)
    result.update(changed=False, model={"asked": model, "answered": verdict["model"]})
    if not verdict["streamed"]:
        result["msg"] = "the answer from %s (model %s) did not stream: %s" % (
            params["url"], model, "; ".join(verdict["problems"]))
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
