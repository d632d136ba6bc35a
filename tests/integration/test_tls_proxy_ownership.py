"""The tls_proxy role takes away only what it wrote (issue #34 item 3), on a host as a site has it: a privileged
systemd container from localhost/llmstack-debian13-systemd with Debian's nginx and Caddy installed and running
before the role, each with a config of the host's own - an nginx site on 127.0.0.1:8080 and a Caddyfile on
127.0.0.1:8081. The role then runs as on a gateway (services started, TLS on 127.0.0.1:8443; no LiteLLM behind it,
so the API answers 502, which the role's verify accepts): check mode first, nginx present, a rerun, a switch to
Caddy and back, Caddy again and absent, nginx present again and nginx absent. After every step the host's own
sites still answer (the host's Caddyfile while it is not replaced by the role's), and each server is stopped only
when the role's config was all it served. Everything here is real (the role, systemd, nginx, Caddy); nothing is a
double.

Before this, the role stopped and disabled the other server whenever it ran (the host's Caddy site went down with
nginx present), and absent stopped nginx with every other site on it."""

import time

import pytest
from conftest import parse_json_report, playbook, podman, systemd_container, why_it_failed

pytestmark = pytest.mark.slow
NAME = "llmstack-tls-own"

INVENTORY = """
all:
  hosts:
    tls-own:
      ansible_host: %s
      ansible_connection: podman_pipelined
      ansible_python_interpreter: /usr/bin/python3
      tls_proxy_listen_addresses: [127.0.0.1]
      tls_proxy_port: 8443
      tls_proxy_server_names: [gw.llmstack.test]
      tls_proxy_stream_check: false
""" % NAME

PLAY = """
- name: The TLS proxy
  hosts: tls-own
  gather_facts: false
  roles:
    - role: pvegpu.llmstack.tls_proxy
"""

WIKI = "server {\n    listen 127.0.0.1:8080;\n    location / { return 200 \"wiki\\n\"; }\n}\n"
CADDYFILE = "http://127.0.0.1:8081 {\n\trespond \"mine\"\n}\n"


def inside(*cmd, check=True):
    return podman("exec", NAME, *cmd, check=check)


def answer(url):
    """What the URL answers inside the host (curl; '' when nothing listens)."""
    code = inside("curl", "-sk", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", url, check=False)
    body = inside("curl", "-sk", "--max-time", "5", url, check=False)
    return code.stdout.strip() + ":" + body.stdout.strip()


def active(unit):
    return inside("systemctl", "is-active", unit, check=False).stdout.strip()


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    with systemd_container(NAME, ["nginx", "caddy", "curl", "python3-cryptography"]):
        podman("exec", "-i", NAME, "sh", "-c", "cat >/etc/nginx/conf.d/wiki.conf", stdin=WIKI)
        podman("exec", "-i", NAME, "sh", "-c", "cat >/etc/caddy/Caddyfile", stdin=CADDYFILE)
        inside("chown", "root:caddy", "/etc/caddy/Caddyfile")
        inside("chmod", "0640", "/etc/caddy/Caddyfile")
        inside("systemctl", "enable", "--now", "nginx", "caddy")
        inside("systemctl", "reload-or-restart", "nginx")
        inside("systemctl", "restart", "caddy")
        path = tmp_path_factory.mktemp("tls-own")
        (path / "hosts.yml").write_text(INVENTORY)
        (path / "play.yml").write_text(PLAY)
        yield path


def run(path, *extra):
    rc, out, err = playbook(str(path / "play.yml"), "-i", str(path / "hosts.yml"), *extra, json_output=True)
    assert rc == 0, why_it_failed(out, err)
    return parse_json_report(out)["stats"]["tls-own"]


def wait_for(url, wanted, timeout=20):
    deadline = time.time() + timeout
    while answer(url) != wanted and time.time() < deadline:
        time.sleep(0.5)
    return answer(url)


def test_the_hosts_own_sites_survive_present_a_switch_and_absent(host):
    wiki, mine, tls = "http://127.0.0.1:8080/", "http://127.0.0.1:8081/", "https://127.0.0.1:8443/health/liveliness"
    assert answer(wiki) == "200:wiki" and answer(mine) == "200:mine"
    assert answer("http://127.0.0.1:80/").startswith("200:")  # Debian's default nginx site

    # Check mode before the role ever ran, on a host whose Caddyfile is its own: a prediction, no failure.
    assert run(host, "--check", "-e", "tls_proxy_server=caddy")["failures"] == 0
    assert inside("cat", "/etc/caddy/Caddyfile").stdout == CADDYFILE

    # nginx present: its TLS site is added beside the wiki; the host's own Caddy is left running (and reported).
    assert run(host, "-e", "tls_proxy_server=nginx")["changed"] > 0
    assert answer(tls).startswith("502:")
    assert answer(wiki) == "200:wiki"
    assert active("caddy") == "active" and answer(mine) == "200:mine"
    assert inside("test", "-L", "/etc/llmstack/tls_proxy/nginx-default-site", check=False).returncode == 0
    assert answer("http://127.0.0.1:80/") == "000:"  # the welcome page is gone while the proxy is there
    assert run(host, "-e", "tls_proxy_server=nginx")["changed"] == 0

    # A switch to Caddy: the role's nginx site goes, nginx keeps the wiki; the host's Caddyfile is kept aside.
    assert run(host, "-e", "tls_proxy_server=caddy")["changed"] > 0
    assert inside("test", "-e", "/etc/nginx/conf.d/llmstack-gateway.conf", check=False).returncode == 1
    assert active("nginx") == "active" and answer(wiki) == "200:wiki"
    assert wait_for(tls, "502:").startswith("502:")
    assert inside("cat", "/etc/llmstack/tls_proxy/Caddyfile").stdout == CADDYFILE

    # And back to nginx: the role's Caddyfile goes and Caddy, which served nothing else, is stopped and disabled.
    # The kept Caddyfile is not put back on a switch (Debian's own serves :80, which nginx may hold): only by absent.
    assert run(host, "-e", "tls_proxy_server=nginx")["changed"] > 0
    assert inside("test", "-e", "/etc/caddy/Caddyfile", check=False).returncode == 1
    assert active("caddy") == "inactive"
    assert inside("systemctl", "is-enabled", "caddy", check=False).stdout.strip() == "disabled"
    assert answer(tls).startswith("502:") and answer(wiki) == "200:wiki"

    # Caddy again (no Caddyfile now: nothing more to keep), then Caddy absent: the host's first Caddyfile comes back
    # with its owner and mode, and Caddy serves it again.
    assert run(host, "-e", "tls_proxy_server=caddy")["changed"] > 0
    assert wait_for(tls, "502:").startswith("502:")
    assert run(host, "-e", "tls_proxy_server=caddy", "-e", "tls_proxy_state=absent")["changed"] > 0
    assert inside("cat", "/etc/caddy/Caddyfile").stdout == CADDYFILE
    assert inside("stat", "-c", "%U:%G %a", "/etc/caddy/Caddyfile").stdout.strip() == "root:caddy 640"
    assert active("caddy") == "active" and wait_for(mine, "200:mine") == "200:mine"
    assert answer(tls) == "000:" and answer(wiki) == "200:wiki"

    # nginx present again, then absent: nginx stays up for the wiki, Debian's default site is back, Caddy untouched.
    assert run(host, "-e", "tls_proxy_server=nginx")["changed"] > 0
    assert answer(tls).startswith("502:") and answer(mine) == "200:mine"
    assert run(host, "-e", "tls_proxy_server=nginx", "-e", "tls_proxy_state=absent")["changed"] > 0
    assert inside("test", "-e", "/etc/nginx/conf.d/llmstack-gateway.conf", check=False).returncode == 1
    assert active("nginx") == "active" and answer(wiki) == "200:wiki"
    assert answer(tls) == "000:"
    assert inside("readlink", "/etc/nginx/sites-enabled/default").stdout.strip() == "/etc/nginx/sites-available/default"
    assert answer("http://127.0.0.1:80/").startswith("200:")
    assert active("caddy") == "active" and answer(mine) == "200:mine"
    assert run(host, "-e", "tls_proxy_server=nginx", "-e", "tls_proxy_state=absent")["changed"] == 0


def test_a_server_that_served_only_the_role_is_stopped_by_absent(host):
    """nginx with nothing of the host's (the wiki and the default site gone): absent stops and disables it."""
    inside("rm", "-f", "/etc/nginx/conf.d/wiki.conf", "/etc/nginx/sites-enabled/default")
    inside("systemctl", "reload", "nginx")
    assert run(host, "-e", "tls_proxy_server=nginx", "-e", "tls_proxy_nginx_remove_default_site=false")["changed"] > 0
    assert answer("https://127.0.0.1:8443/health/liveliness").startswith("502:")
    assert run(host, "-e", "tls_proxy_server=nginx", "-e", "tls_proxy_state=absent")["changed"] > 0
    assert active("nginx") == "inactive"
    assert inside("systemctl", "is-enabled", "nginx", check=False).stdout.strip() == "disabled"
    assert active("caddy") == "active" and answer("http://127.0.0.1:8081/") == "200:mine"
