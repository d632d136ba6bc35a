# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Langfuse v4's compose project (the official topology), computed from checked settings.

Plain Python, no Ansible imports. Langfuse v2 (seed 000) is out of support; v3 and v4 need six services:
langfuse-web (UI and ingestion API), langfuse-worker (queue processing), PostgreSQL, ClickHouse, Redis and
S3-compatible storage (MinIO). The topology and variable names follow langfuse/langfuse's docker-compose.yml
(v4.16.0, 2026-08); the differences (docs/langfuse.md):

- no secret in the compose file: every password, key and the headless-init credentials come from env files in
  ``<dir>/secrets`` (0600) the role writes; ``SECRET_ENV`` lists which variable goes to which file;
- images pinned to versions (``:4``, ``:7`` or latest are refused);
- ports: the web UI/API on the management address only; MinIO's S3 API on the same address (browsers upload
  media there through presigned URLs); the worker, ClickHouse, PostgreSQL and Redis are not published at all;
- ``TELEMETRY_ENABLED=false``, sign-up disabled (``AUTH_DISABLE_SIGNUP``): the organisation, project, its API
  keys and the first user come from ``LANGFUSE_INIT_*``.
"""

import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

SERVICES = ("langfuse-web", "langfuse-worker", "postgres", "clickhouse", "redis", "minio")
IMAGE_KEYS = ("web_image", "worker_image", "postgres_image", "clickhouse_image", "redis_image", "minio_image")
# Which secret each env file carries (the role generates every one of them; none is ever defaulted).
SECRET_ENV = {
    "langfuse.env": ("DATABASE_URL", "SALT", "ENCRYPTION_KEY", "CLICKHOUSE_PASSWORD", "REDIS_AUTH",
                     "LANGFUSE_S3_EVENT_UPLOAD_SECRET_ACCESS_KEY", "LANGFUSE_S3_MEDIA_UPLOAD_SECRET_ACCESS_KEY",
                     "LANGFUSE_S3_BATCH_EXPORT_SECRET_ACCESS_KEY"),
    "langfuse-web.env": ("NEXTAUTH_SECRET", "LANGFUSE_INIT_PROJECT_PUBLIC_KEY", "LANGFUSE_INIT_PROJECT_SECRET_KEY",
                         "LANGFUSE_INIT_USER_PASSWORD"),
    "postgres.env": ("POSTGRES_PASSWORD",),
    "clickhouse.env": ("CLICKHOUSE_PASSWORD",),
    "redis.env": ("REDIS_PASSWORD", "REDISCLI_AUTH"),
    "minio.env": ("MINIO_ROOT_PASSWORD",),
}
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
UNPINNED_TAG_RE = re.compile(r"^(latest|main|stable|[0-9]+)$")


class LangfuseError(value_checks.SettingsProblems):
    """Bad input; ``errors`` lists every problem, each naming the variable."""


def _tag(image):
    """The tag of ``registry/name:tag`` (``None`` without one; a registry port is not a tag)."""
    if not isinstance(image, str) or "@sha256:" in image:
        return None if not isinstance(image, str) else "digest"
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def validate(settings):
    """Every problem with the settings, each naming the role variable."""
    errors = []
    for key in IMAGE_KEYS:
        tag = _tag(settings.get(key))
        if tag is None or (tag != "digest" and UNPINNED_TAG_RE.match(tag)):
            errors.append("langfuse_%s: %r is not pinned to a version (use e.g. :4.16.0, never :4 or :latest)"
                          % (key, settings.get(key)))
    address = value_checks.ip_address(settings.get("bind_address"), strip=False)
    if address is None:
        errors.append("langfuse_bind_address: %r is not an IP address (the host needs an address on langfuse_vlan "
                      "in llmstack_interfaces, or set langfuse_bind_address)" % (settings.get("bind_address"),))
    for key in ("port", "s3_port"):
        if value_checks.as_port(settings.get(key)) is None:
            errors.append("langfuse_%s: %r is not a TCP port (1-65535)" % (key, settings.get(key)))
    port = value_checks.as_port(settings.get("port"))
    if port and port == value_checks.as_port(settings.get("s3_port")):
        errors.append("langfuse_s3_port: the same port as langfuse_port")
    for key in ("org_id", "project_id"):
        if not isinstance(settings.get(key), str) or not ID_RE.match(settings[key]):
            errors.append("langfuse_init_%s: %r must be 1-63 letters, digits, _ or - (a stable id)"
                          % (key, settings.get(key)))
    for key in ("org_name", "project_name", "user_name"):
        if not isinstance(settings.get(key), str) or not settings[key].strip():
            errors.append("langfuse_init_%s: must not be empty" % key)
    if not isinstance(settings.get("user_email"), str) or not EMAIL_RE.match(settings["user_email"]):
        errors.append("langfuse_init_user_email: %r is not an e-mail address" % (settings.get("user_email"),))
    if not isinstance(settings.get("public_url"), str) or not re.match(r"^https?://[^\s/]+", settings["public_url"]):
        errors.append("langfuse_public_url: %r is not an http(s) URL" % (settings.get("public_url"),))
    env = settings.get("env") or {}
    if not isinstance(env, dict):
        errors.append("langfuse_extra_env: must be a mapping")
    else:
        secret_names = {name for names in SECRET_ENV.values() for name in names}
        for name in env:
            if name in secret_names:
                errors.append("langfuse_extra_env: %s is a secret the role generates; it cannot be set here" % name)
    return errors


def _hostport(address, port):
    ip = value_checks.ip_address(address, strip=False)
    return "[%s]:%s" % (address, port) if ip is not None and ip.version == 6 else "%s:%s" % (address, port)


def compose(settings):
    """The compose project as a dict (written with to_nice_yaml; no secret in it)."""
    errors = validate(settings)
    if errors:
        raise LangfuseError(errors)
    address = settings["bind_address"]
    port, s3_port = int(str(settings["port"])), int(str(settings["s3_port"]))
    s3_external = "http://%s" % _hostport(address, s3_port)
    restart = settings.get("restart") or "unless-stopped"
    logging = {"driver": "json-file", "options": {"max-size": "50m", "max-file": "5"}}
    # Shared by web and worker (the official compose's &langfuse-worker-env), secrets excepted.
    common = {
        "NEXTAUTH_URL": settings["public_url"],
        "TELEMETRY_ENABLED": "false",
        "LANGFUSE_ENABLE_EXPERIMENTAL_FEATURES": "false",
        "CLICKHOUSE_MIGRATION_URL": "clickhouse://clickhouse:9000",
        "CLICKHOUSE_URL": "http://clickhouse:8123",
        "CLICKHOUSE_USER": "clickhouse",
        "CLICKHOUSE_CLUSTER_ENABLED": "false",
        "REDIS_HOST": "redis",
        "REDIS_PORT": "6379",
    }
    for kind, prefix in (("EVENT_UPLOAD", "events/"), ("MEDIA_UPLOAD", "media/"), ("BATCH_EXPORT", "exports/")):
        common.update({
            "LANGFUSE_S3_%s_BUCKET" % kind: "langfuse",
            "LANGFUSE_S3_%s_REGION" % kind: "auto",
            "LANGFUSE_S3_%s_ACCESS_KEY_ID" % kind: "langfuse",
            "LANGFUSE_S3_%s_ENDPOINT" % kind: "http://minio:9000",
            "LANGFUSE_S3_%s_FORCE_PATH_STYLE" % kind: "true",
            "LANGFUSE_S3_%s_PREFIX" % kind: prefix,
        })
    common["LANGFUSE_S3_BATCH_EXPORT_ENABLED"] = "false"
    common["LANGFUSE_S3_BATCH_EXPORT_EXTERNAL_ENDPOINT"] = s3_external
    common.update({str(k): str(v) for k, v in (settings.get("env") or {}).items()})
    web_env = dict(common)
    web_env.update({
        # Browsers upload media straight to MinIO through presigned URLs: they need its published address.
        "LANGFUSE_S3_MEDIA_UPLOAD_ENDPOINT": s3_external,
        "HOSTNAME": "0.0.0.0",
        "AUTH_DISABLE_SIGNUP": "true",
        "LANGFUSE_INIT_ORG_ID": settings["org_id"],
        "LANGFUSE_INIT_ORG_NAME": settings["org_name"],
        "LANGFUSE_INIT_PROJECT_ID": settings["project_id"],
        "LANGFUSE_INIT_PROJECT_NAME": settings["project_name"],
        "LANGFUSE_INIT_USER_EMAIL": settings["user_email"],
        "LANGFUSE_INIT_USER_NAME": settings["user_name"],
    })
    healthy = {name: {"condition": "service_healthy"} for name in ("postgres", "clickhouse", "redis", "minio")}
    services = {
        "langfuse-worker": {
            "image": settings["worker_image"],
            "restart": restart,
            "depends_on": healthy,
            "env_file": ["secrets/langfuse.env"],
            "environment": common,
            # The worker's port stays on the host's loopback (health checks only).
            "ports": ["127.0.0.1:3030:3030"],
            "logging": logging,
        },
        "langfuse-web": {
            "image": settings["web_image"],
            "restart": restart,
            "depends_on": healthy,
            "env_file": ["secrets/langfuse.env", "secrets/langfuse-web.env"],
            "environment": web_env,
            "ports": ["%s:3000" % _hostport(address, port)],
            "healthcheck": {"test": ["CMD-SHELL", "wget -q -O /dev/null http://127.0.0.1:3000/api/public/health"],
                            "interval": "10s", "timeout": "5s", "retries": 30, "start_period": "60s"},
            "logging": logging,
        },
        "clickhouse": {
            "image": settings["clickhouse_image"],
            "restart": restart,
            "user": "101:101",
            "env_file": ["secrets/clickhouse.env"],
            "environment": {"CLICKHOUSE_DB": "default", "CLICKHOUSE_USER": "clickhouse"},
            "volumes": ["langfuse_clickhouse_data:/var/lib/clickhouse",
                        "langfuse_clickhouse_logs:/var/log/clickhouse-server"],
            "healthcheck": {"test": "wget --no-verbose --tries=1 --spider http://localhost:8123/ping || exit 1",
                            "interval": "5s", "timeout": "5s", "retries": 10, "start_period": "1s"},
            "ulimits": {"nofile": {"soft": 262144, "hard": 262144}},
            "logging": logging,
        },
        "minio": {
            "image": settings["minio_image"],
            "restart": restart,
            "entrypoint": "sh",
            # Create the 'langfuse' bucket before the server starts (as the official compose does).
            "command": "-c 'mkdir -p /data/langfuse && "
                       "minio server --address \":9000\" --console-address \":9001\" /data'",
            "env_file": ["secrets/minio.env"],
            "environment": {"MINIO_ROOT_USER": "langfuse"},
            "ports": ["%s:9000" % _hostport(address, s3_port)],
            "volumes": ["langfuse_minio_data:/data"],
            "healthcheck": {"test": ["CMD", "mc", "ready", "local"], "interval": "2s", "timeout": "5s",
                            "retries": 15, "start_period": "2s"},
            "logging": logging,
        },
        "redis": {
            "image": settings["redis_image"],
            "restart": restart,
            # The password comes from the env file, so it is not in this file (compose leaves $$ to the shell).
            "command": ["sh", "-c", 'exec redis-server --requirepass "$$REDIS_PASSWORD" --maxmemory-policy noeviction '
                                    "--appendonly yes"],
            "env_file": ["secrets/redis.env"],
            "volumes": ["langfuse_redis_data:/data"],
            # redis-cli reads the password from REDISCLI_AUTH (redis.env).
            "healthcheck": {"test": ["CMD", "redis-cli", "ping"], "interval": "3s", "timeout": "10s",
                            "retries": 10},
            "logging": logging,
        },
        "postgres": {
            "image": settings["postgres_image"],
            "restart": restart,
            "env_file": ["secrets/postgres.env"],
            "environment": {"POSTGRES_USER": "langfuse", "POSTGRES_DB": "langfuse", "TZ": "UTC", "PGTZ": "UTC"},
            "volumes": ["langfuse_postgres_data:/var/lib/postgresql/data"],
            "healthcheck": {"test": ["CMD-SHELL", "pg_isready -U langfuse -d langfuse"], "interval": "3s",
                            "timeout": "3s", "retries": 10},
            "logging": logging,
        },
    }
    # No top-level "name": Debian's docker-compose 1.29 refuses it; the project is named after langfuse_dir.
    return {
        "services": services,
        "volumes": {name: {"driver": "local"} for name in (
            "langfuse_postgres_data", "langfuse_clickhouse_data", "langfuse_clickhouse_logs", "langfuse_minio_data",
            "langfuse_redis_data")},
    }


def secret_env(secrets):
    """{env file: {NAME: value}} from the generated secrets (what the role writes, 0600, into secrets/)."""
    database_url = "postgresql://langfuse:%s@postgres:5432/langfuse" % secrets["postgres_password"]
    values = {
        "DATABASE_URL": database_url,
        "SALT": secrets["salt"],
        "ENCRYPTION_KEY": secrets["encryption_key"],
        "CLICKHOUSE_PASSWORD": secrets["clickhouse_password"],
        "REDIS_AUTH": secrets["redis_password"],
        "REDIS_PASSWORD": secrets["redis_password"],
        "REDISCLI_AUTH": secrets["redis_password"],
        "LANGFUSE_S3_EVENT_UPLOAD_SECRET_ACCESS_KEY": secrets["minio_password"],
        "LANGFUSE_S3_MEDIA_UPLOAD_SECRET_ACCESS_KEY": secrets["minio_password"],
        "LANGFUSE_S3_BATCH_EXPORT_SECRET_ACCESS_KEY": secrets["minio_password"],
        "MINIO_ROOT_PASSWORD": secrets["minio_password"],
        "POSTGRES_PASSWORD": secrets["postgres_password"],
        "NEXTAUTH_SECRET": secrets["nextauth_secret"],
        "LANGFUSE_INIT_PROJECT_PUBLIC_KEY": secrets["project_public_key"],
        "LANGFUSE_INIT_PROJECT_SECRET_KEY": secrets["project_secret_key"],
        "LANGFUSE_INIT_USER_PASSWORD": secrets["user_password"],
    }
    return {name: {key: values[key] for key in keys} for name, keys in SECRET_ENV.items()}
