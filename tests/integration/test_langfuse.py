"""The langfuse role (render, secrets, headless-init keys) and the gateway that uses those keys.

Langfuse cannot run here: its images (web, worker, ClickHouse, MinIO) come from registries this machine cannot
reach, and there is no Docker engine. So the role runs with llmstack_start_services false against this machine
(connection local, langfuse_dir under a temp dir), and the tests check what it wrote: the compose project,
validated by a real compose implementation (Debian's docker-compose), every generated secret (0600, stable on
rerun, never a known default), and the gateway's LiteLLM config and env file carrying the project keys that
headless init is given. Whether Langfuse v4 accepts them at run time is NOT verified here.
"""

import json
import re
import stat
import subprocess

import pytest
import yaml
from conftest import parse_json_report, playbook
from test_litellm import free_port, write_inventory

pytestmark = pytest.mark.slow

SECRETS = ("salt", "encryption_key", "nextauth_secret", "postgres_password", "clickhouse_password", "redis_password",
           "minio_password", "user_password", "project_public_key", "project_secret_key")
ENV_FILES = ("langfuse.env", "langfuse-web.env", "postgres.env", "clickhouse.env", "redis.env", "minio.env")
# The placeholders of Langfuse's own compose file and seed 000's Langfuse v2 setup.
KNOWN_DEFAULTS = ("postgres", "mysalt", "mysecret", "miniosecret", "myredissecret", "clickhouse", "0" * 64,
                  "my_secure_secret", "changeme", "admin", "password")
LANGFUSE_ADDRESS = "10.99.10.14"   # data only: nothing is started, nothing connects to it


def read_env(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def add_langfuse(inventory, base, **langfuse_vars):
    with open(inventory) as handle:
        data = yaml.safe_load(handle)
    host = {"langfuse_dir": str(base / "langfuse"), "llmstack_start_services": False,
            "langfuse_init_user_email": "ops@llmstack.test",
            "llmstack_interfaces": [{"vlan": "mgmt", "address": LANGFUSE_ADDRESS}]}
    host.update(langfuse_vars)
    data["all"]["children"]["langfuse"] = {"hosts": {"lf": host}}
    data["all"]["children"]["llm_gateways"]["hosts"]["gw"]["litellm_manage_keys"] = False
    with open(inventory, "w") as handle:
        yaml.safe_dump(data, handle)
    return inventory


def run(*args):
    rc, out, err = playbook(*args, json_output=True)
    assert rc == 0, out[-4000:] + err[-2000:]
    return parse_json_report(out)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    base = tmp_path_factory.mktemp("langfuse")
    ports = {"fast": free_port("127.0.20.20"), "balanced": free_port("127.0.20.20"),
             "reasoning": free_port("127.0.20.21")}
    inventory = add_langfuse(write_inventory(base, ports, free_port()), base)
    first = run("playbooks/observability.yml", "-i", inventory, "--tags", "langfuse", "--skip-tags", "inventory_check")
    secrets = {name: (base / "langfuse" / "secrets" / name).read_text().strip() for name in SECRETS}
    second = run("playbooks/observability.yml", "-i", inventory, "--tags", "langfuse", "--skip-tags",
                 "inventory_check")
    gateway = run("playbooks/gateway.yml", "-i", inventory, "--skip-tags", "tls_proxy,inventory_check")
    return {"base": base, "dir": base / "langfuse", "inventory": inventory, "first": first, "second": second,
            "secrets": secrets, "gateway": gateway}


def test_every_secret_is_generated_0600_and_none_is_a_known_default(deployed):
    secrets_dir = deployed["dir"] / "secrets"
    assert stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700
    for name in SECRETS + ENV_FILES:
        assert stat.S_IMODE((secrets_dir / name).stat().st_mode) == 0o600, name
    secrets = deployed["secrets"]
    assert re.fullmatch(r"[0-9a-f]{64}", secrets["encryption_key"])
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.fullmatch("pk-lf-" + uuid, secrets["project_public_key"])
    assert re.fullmatch("sk-lf-" + uuid, secrets["project_secret_key"])
    for name in ("salt", "nextauth_secret", "postgres_password", "clickhouse_password", "redis_password",
                 "minio_password", "user_password"):
        assert len(secrets[name]) >= 32 and secrets[name] not in KNOWN_DEFAULTS, name
    assert len(set(secrets.values())) == len(secrets), "two secrets are the same"


def test_a_rerun_keeps_every_secret_and_changes_nothing(deployed):
    stats = deployed["second"]["stats"]["lf"]
    assert stats["changed"] == 0 and stats["failures"] == 0, stats
    now = {name: (deployed["dir"] / "secrets" / name).read_text().strip() for name in SECRETS}
    assert now == deployed["secrets"]


def test_the_env_files_carry_the_secrets_and_headless_init(deployed):
    secrets, env_dir = deployed["secrets"], deployed["dir"] / "secrets"
    common = read_env(env_dir / "langfuse.env")
    assert common["DATABASE_URL"] == "postgresql://langfuse:%s@postgres:5432/langfuse" % secrets["postgres_password"]
    assert common["ENCRYPTION_KEY"] == secrets["encryption_key"] and common["SALT"] == secrets["salt"]
    assert common["REDIS_AUTH"] == read_env(env_dir / "redis.env")["REDIS_PASSWORD"] == secrets["redis_password"]
    assert common["CLICKHOUSE_PASSWORD"] == read_env(env_dir / "clickhouse.env")["CLICKHOUSE_PASSWORD"]
    minio = read_env(env_dir / "minio.env")
    assert common["LANGFUSE_S3_EVENT_UPLOAD_SECRET_ACCESS_KEY"] == minio["MINIO_ROOT_PASSWORD"]
    web = read_env(env_dir / "langfuse-web.env")
    assert web["LANGFUSE_INIT_PROJECT_PUBLIC_KEY"] == secrets["project_public_key"]
    assert web["LANGFUSE_INIT_PROJECT_SECRET_KEY"] == secrets["project_secret_key"]
    assert web["LANGFUSE_INIT_USER_PASSWORD"] == secrets["user_password"]
    assert web["NEXTAUTH_SECRET"] == secrets["nextauth_secret"]
    assert read_env(env_dir / "postgres.env") == {"POSTGRES_PASSWORD": secrets["postgres_password"]}


def test_the_compose_project_is_valid_for_a_real_compose_implementation(deployed):
    """Debian's docker-compose parses and validates the file, with the env files in place."""
    result = subprocess.run(["docker-compose", "-f", str(deployed["dir"] / "docker-compose.yml"), "config"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    web = resolved["services"]["langfuse-web"]["environment"]
    # What compose hands the web container: our settings and the env files' secrets, merged.
    assert web["TELEMETRY_ENABLED"] == "false" and web["AUTH_DISABLE_SIGNUP"] == "true"
    assert web["LANGFUSE_INIT_PROJECT_PUBLIC_KEY"] == deployed["secrets"]["project_public_key"]
    assert web["NEXTAUTH_URL"] == "http://%s:3000" % LANGFUSE_ADDRESS
    assert resolved["services"]["redis"]["environment"]["REDISCLI_AUTH"] == deployed["secrets"]["redis_password"]


def test_the_compose_file_holds_no_secret_and_publishes_only_the_management_address(deployed):
    text = (deployed["dir"] / "docker-compose.yml").read_text()
    for name, value in deployed["secrets"].items():
        assert value not in text, name
    for default in ("mysecret", "miniosecret", "myredissecret", "postgres:postgres"):
        assert default not in text
    compose = yaml.safe_load(text)
    assert sorted(compose["services"]) == ["clickhouse", "langfuse-web", "langfuse-worker", "minio", "postgres",
                                           "redis"]
    published = {name: service.get("ports", []) for name, service in compose["services"].items()}
    assert published == {"langfuse-web": ["%s:3000:3000" % LANGFUSE_ADDRESS],
                         "minio": ["%s:9090:9000" % LANGFUSE_ADDRESS],
                         "langfuse-worker": ["127.0.0.1:3030:3030"],
                         "clickhouse": [], "postgres": [], "redis": []}
    for name, service in compose["services"].items():
        assert not re.search(r":(latest|[0-9]+)$", service["image"]), (name, service["image"])
    assert compose["services"]["langfuse-web"]["image"] == "docker.langfuse.com/langfuse/langfuse:4.16.0"


def test_the_gateway_traces_to_the_project_headless_init_created(deployed):
    gateway_dir = deployed["base"] / "llm-gateway"
    config = yaml.safe_load((gateway_dir / "config.yaml").read_text())
    assert "langfuse_otel" in config["litellm_settings"]["callbacks"]
    env = read_env(gateway_dir / "secrets" / "litellm.env")
    assert env["LANGFUSE_PUBLIC_KEY"] == deployed["secrets"]["project_public_key"]
    assert env["LANGFUSE_SECRET_KEY"] == deployed["secrets"]["project_secret_key"]
    assert env["LANGFUSE_OTEL_HOST"] == "http://%s:3000" % LANGFUSE_ADDRESS
    assert deployed["secrets"]["project_secret_key"] not in (gateway_dir / "config.yaml").read_text()
    # The run's output shows no key (the tasks that touch them are no_log).
    assert deployed["secrets"]["project_secret_key"] not in json.dumps(deployed["gateway"])


def test_the_gateway_stops_clearly_when_langfuse_is_not_deployed_yet(tmp_path):
    ports = {"fast": free_port("127.0.20.20"), "balanced": free_port("127.0.20.20"),
             "reasoning": free_port("127.0.20.21")}
    inventory = add_langfuse(write_inventory(tmp_path, ports, free_port()), tmp_path)
    rc, out, err = playbook("playbooks/gateway.yml", "-i", inventory, "--skip-tags", "tls_proxy,inventory_check")
    assert rc != 0
    assert "its project keys are not in %s/langfuse/secrets: deploy Langfuse first" % tmp_path in out, out[-3000:]
    assert not (tmp_path / "llm-gateway" / "config.yaml").exists()


@pytest.mark.parametrize("extra, fragments", [
    ({"langfuse_init_user_email": ""}, ["langfuse_init_user_email is empty"]),
    ({"langfuse_web_image": "docker.langfuse.com/langfuse/langfuse:4", "langfuse_init_project_id": "my project",
      "llmstack_interfaces": []},
     ["langfuse_web_image: 'docker.langfuse.com/langfuse/langfuse:4' is not pinned",
      "langfuse_init_project_id: 'my project' must be",
      "langfuse_bind_address: '' is not an IP address"]),
])
def test_bad_settings_fail_before_anything_is_written(tmp_path, extra, fragments):
    ports = {"fast": free_port("127.0.20.20"), "balanced": free_port("127.0.20.20"),
             "reasoning": free_port("127.0.20.21")}
    inventory = add_langfuse(write_inventory(tmp_path, ports, free_port()), tmp_path, **extra)
    rc, out, err = playbook("playbooks/observability.yml", "-i", inventory, "--tags", "langfuse", "--skip-tags",
                            "inventory_check")
    assert rc != 0
    for fragment in fragments:
        assert fragment in out, out[-3000:]
    assert not (tmp_path / "langfuse").exists()
