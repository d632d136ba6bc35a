#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: langfuse_render
short_description: Langfuse v4's compose project (web, worker, PostgreSQL, ClickHouse, Redis, MinIO)
version_added: 0.1.0
description:
  - Builds the compose project of Langfuse's official topology with pinned images, the web UI and MinIO's S3 API
    on the management address only, C(TELEMETRY_ENABLED=false), sign-up disabled and the headless init
    (C(LANGFUSE_INIT_*)) of an organisation, a project, its API keys and the first user.
  - No secret is rendered; the services read them from env files in C(secrets/) (see the
    P(pvegpu.llmstack.langfuse_secret_env#filter) filter). C(secret_env) lists which variable goes to which file.
  - Bad input fails with one message per problem, each naming the role variable. Changes nothing.
author:
  - pvegpu.llmstack contributors (@pvegpu)
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.plan
options:
  settings:
    description:
      - "The role's variables without the C(langfuse_) prefix: C(web_image), C(worker_image), C(postgres_image),
        C(clickhouse_image), C(redis_image), C(minio_image), C(bind_address), C(port), C(s3_port), C(public_url),
        C(org_id), C(org_name), C(project_id), C(project_name), C(user_email), C(user_name), C(env), C(restart)."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Render Langfuse
  pvegpu.llmstack.langfuse_render:
    settings:
      web_image: docker.langfuse.com/langfuse/langfuse:4.16.0
      worker_image: docker.langfuse.com/langfuse/langfuse-worker:4.16.0
      postgres_image: docker.io/library/postgres:17.6-bookworm
      clickhouse_image: docker.io/clickhouse/clickhouse-server:25.12.3.21
      redis_image: docker.io/library/redis:7.4.5-bookworm
      minio_image: docker.io/minio/minio:RELEASE.2025-04-22T22-12-26Z
      bind_address: 192.168.10.14
      port: 3000
      s3_port: 9090
      public_url: http://192.168.10.14:3000
      org_id: llmstack
      org_name: LLM stack
      project_id: llm-gateway
      project_name: LLM gateway
      user_email: ops@example.org
      user_name: Operations
  register: rendered
"""

RETURN = r"""
compose:
  description: The compose project.
  returned: success
  type: dict
secret_env:
  description: Env file name to the variables it must define.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import langfuse, render_module


def build(params):
    return {"compose": langfuse.compose(params["settings"]),
            "secret_env": dict((name, list(keys)) for name, keys in langfuse.SECRET_ENV.items())}


def main():
    module = AnsibleModule(argument_spec=dict(settings=dict(type="dict", required=True)), supports_check_mode=True)
    render_module.run(module, "langfuse", build)


if __name__ == "__main__":
    main()
