"""langfuse (Langfuse v4's compose project and the env files of its secrets): checks and rendering.

docker-compose validates the rendered project in tests/integration/test_langfuse.py; here: what is refused,
that no secret reaches the compose file, and that every variable a service needs comes from somewhere."""

import json

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import langfuse

SECRETS = {"salt": "s" * 48, "encryption_key": "ab" * 32, "nextauth_secret": "n" * 48, "postgres_password": "p" * 48,
           "clickhouse_password": "c" * 48, "redis_password": "r" * 48, "minio_password": "m" * 48,
           "user_password": "u" * 48, "project_public_key": "pk-lf-1", "project_secret_key": "sk-lf-1"}


def settings(**changes):
    base = {"web_image": "docker.langfuse.com/langfuse/langfuse:4.16.0",
            "worker_image": "docker.langfuse.com/langfuse/langfuse-worker:4.16.0",
            "postgres_image": "docker.io/library/postgres:17.6-bookworm",
            "clickhouse_image": "docker.io/clickhouse/clickhouse-server:25.12",
            "redis_image": "docker.io/library/redis:7.4.5-bookworm",
            "minio_image": "docker.io/minio/minio:RELEASE.2025-04-22T22-12-26Z",
            "bind_address": "192.0.2.14", "port": 3000, "s3_port": 9090, "public_url": "http://192.0.2.14:3000",
            "org_id": "llmstack", "org_name": "LLM stack", "project_id": "llm-gateway", "project_name": "LLM gateway",
            "user_email": "ops@example.org", "user_name": "Operations", "env": {}, "restart": "unless-stopped"}
    base.update(changes)
    return base


def test_the_official_topology_with_web_and_s3_on_the_management_address_only():
    project = langfuse.compose(settings())
    services = project["services"]
    assert sorted(services) == sorted(langfuse.SERVICES)
    assert services["langfuse-web"]["ports"] == ["192.0.2.14:3000:3000"]
    assert services["minio"]["ports"] == ["192.0.2.14:9090:9000"]
    assert services["langfuse-worker"]["ports"] == ["127.0.0.1:3030:3030"]
    for name in ("postgres", "clickhouse", "redis"):
        assert "ports" not in services[name], name
    for name in ("langfuse-web", "langfuse-worker"):
        assert services[name]["depends_on"] == {s: {"condition": "service_healthy"}
                                                for s in ("postgres", "clickhouse", "redis", "minio")}
    web = services["langfuse-web"]["environment"]
    assert web["TELEMETRY_ENABLED"] == "false" and web["AUTH_DISABLE_SIGNUP"] == "true"
    assert web["LANGFUSE_S3_MEDIA_UPLOAD_ENDPOINT"] == "http://192.0.2.14:9090"
    assert services["langfuse-worker"]["environment"]["LANGFUSE_S3_MEDIA_UPLOAD_ENDPOINT"] == "http://minio:9000"
    assert web["LANGFUSE_INIT_PROJECT_ID"] == "llm-gateway" and "LANGFUSE_INIT_PROJECT_SECRET_KEY" not in web


def test_ipv6_management_address_is_bracketed():
    services = langfuse.compose(settings(bind_address="2001:db8::14"))["services"]
    assert services["langfuse-web"]["ports"] == ["[2001:db8::14]:3000:3000"]


def test_every_secret_goes_to_an_env_file_and_never_to_the_compose_file():
    project = langfuse.compose(settings())
    text = json.dumps(project)
    files = langfuse.secret_env(SECRETS)
    for value in SECRETS.values():
        assert value not in text
    # Each service reads exactly the env files that hold what it needs; every secret is used somewhere.
    used = {f for service in project["services"].values() for f in service.get("env_file", [])}
    assert used == {"secrets/" + name for name in files}
    carried = {value for env in files.values() for value in env.values()}
    for name, value in SECRETS.items():
        assert any(value in v for v in carried), name
    assert files["langfuse.env"]["DATABASE_URL"] == "postgresql://langfuse:%s@postgres:5432/langfuse" % ("p" * 48)
    assert files["redis.env"] == {"REDIS_PASSWORD": "r" * 48, "REDISCLI_AUTH": "r" * 48}
    # The redis password is expanded by the container's shell, not by compose.
    assert '"$$REDIS_PASSWORD"' in project["services"]["redis"]["command"][2]


def test_a_missing_secret_is_named():
    incomplete = dict(SECRETS)
    del incomplete["salt"]
    with pytest.raises(KeyError, match="salt"):
        langfuse.secret_env(incomplete)


@pytest.mark.parametrize("changes, fragment", [
    ({"web_image": "docker.langfuse.com/langfuse/langfuse:4"},
     "langfuse_web_image: 'docker.langfuse.com/langfuse/langfuse:4' is not pinned"),
    ({"worker_image": "langfuse/langfuse-worker"}, "langfuse_worker_image: 'langfuse/langfuse-worker' is not pinned"),
    ({"minio_image": "cgr.dev/chainguard/minio:latest"}, "langfuse_minio_image: 'cgr.dev/chainguard/minio:latest'"),
    ({"redis_image": "localhost:5000/redis"}, "langfuse_redis_image: 'localhost:5000/redis' is not pinned"),
    ({"bind_address": ""}, "langfuse_bind_address: '' is not an IP address"),
    # Written into the compose file as it is: surrounding whitespace would make a broken port binding.
    ({"bind_address": " 192.0.2.14"}, "langfuse_bind_address: ' 192.0.2.14' is not an IP address"),
    ({"port": 0}, "langfuse_port: 0 is not a TCP port"),
    ({"s3_port": 3000}, "langfuse_s3_port: the same port as langfuse_port"),
    ({"org_id": "my org"}, "langfuse_init_org_id: 'my org' must be"),
    ({"project_name": " "}, "langfuse_init_project_name: must not be empty"),
    ({"user_email": "ops"}, "langfuse_init_user_email: 'ops' is not an e-mail address"),
    ({"public_url": "langfuse.lan"}, "langfuse_public_url: 'langfuse.lan' is not an http(s) URL"),
    ({"env": {"SALT": "x"}}, "langfuse_extra_env: SALT is a secret the role generates"),
])
def test_bad_settings_name_the_variable(changes, fragment):
    with pytest.raises(langfuse.LangfuseError) as raised:
        langfuse.compose(settings(**changes))
    assert any(fragment in error for error in raised.value.errors), raised.value.errors


def test_digest_pins_and_extra_env_are_accepted():
    project = langfuse.compose(settings(redis_image="docker.io/library/redis@sha256:" + "a" * 64,
                                        env={"LANGFUSE_LOG_LEVEL": "info"}))
    assert project["services"]["langfuse-worker"]["environment"]["LANGFUSE_LOG_LEVEL"] == "info"
