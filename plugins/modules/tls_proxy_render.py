#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tls_proxy_render
short_description: The SSE-safe TLS proxy's nginx site or Caddyfile, from checked settings
version_added: 0.1.0
description:
  - Renders the nginx site (an C(http)-context include) or the whole Caddyfile that puts TLS in front of the LiteLLM
    gateway. Only the API paths are proxied; everything else answers 404.
  - "SSE-safe: nginx uses HTTP/1.1 keep-alive to the upstream (C(Connection \"\")), C(proxy_buffering off),
    C(proxy_cache off), C(proxy_request_buffering off), C(gzip off) and the read/send timeout on every API location;
    Caddy's C(reverse_proxy) uses C(flush_interval -1) and the same timeouts."
  - Bad input fails with one message per problem, each naming the role variable. Changes nothing.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  settings:
    description:
      - "The role's variables without the C(tls_proxy_) prefix: C(server) (caddy or nginx), C(certificate_source)
        (internal_ca, files, acme), C(listen_addresses), C(port), C(upstream_host), C(upstream_port),
        C(server_names), C(paths), C(timeout), C(max_body_mb), C(protocols), C(mtls), C(certificate_file),
        C(key_file), C(client_ca_file), C(caddy_admin), C(acme_email), C(access_log), C(metrics_listen_address),
        C(metrics_port), C(metrics_allow) (LiteLLM's /metrics/ for Prometheus; an empty address turns it off)."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Render the proxy
  pvegpu.llmstack.tls_proxy_render:
    settings:
      server: nginx
      certificate_source: internal_ca
      listen_addresses: [192.168.30.12]
      port: 443
      upstream_host: 127.0.0.1
      upstream_port: 4000
      server_names: [llm-gateway]
      paths: [/v1/, /chat/completions, /completions, /embeddings, /models, /health/liveliness]
      timeout: 600
      max_body_mb: 20
      protocols: [TLSv1.2, TLSv1.3]
      mtls: false
      certificate_file: /etc/llmstack/tls/server.crt
      key_file: /etc/llmstack/tls/server.key
  register: rendered
"""

RETURN = r"""
config:
  description: The nginx site or the Caddyfile, as text.
  returned: success
  type: str
server:
  description: C(caddy) or C(nginx).
  returned: success
  type: str
certificate_names:
  description: The DNS names a certificate for the proxy must carry.
  returned: success
  type: list
  elements: str
certificate_addresses:
  description: The IP addresses a certificate for the proxy must carry (the listen addresses but unspecified ones).
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import render_module, tls_proxy


def main():
    module = AnsibleModule(argument_spec=dict(settings=dict(type="dict", required=True)), supports_check_mode=True)
    render_module.run(module, "tls_proxy", lambda params: tls_proxy.render(params["settings"]))


if __name__ == "__main__":
    main()
