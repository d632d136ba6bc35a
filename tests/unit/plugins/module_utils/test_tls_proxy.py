"""tls_proxy (the nginx site and Caddyfile in front of the gateway): checks and rendering.

The rendered files are run by the real nginx and Caddy in tests/integration/test_tls_proxy.py; here: which
settings are refused and why, and the properties of the text that the servers cannot show on loopback."""

import re

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import tls_proxy


def settings(**changes):
    base = {"server": "nginx", "certificate_source": "internal_ca", "listen_addresses": ["192.0.2.12"], "port": 443,
            "upstream_host": "127.0.0.1", "upstream_port": 4000, "server_names": ["llm-gateway.lan"],
            "paths": list(tls_proxy.DEFAULT_PATHS), "timeout": 600, "max_body_mb": 20,
            "protocols": ["TLSv1.2", "TLSv1.3"], "mtls": False, "certificate_file": "/etc/llmstack/tls/server.crt",
            "key_file": "/etc/llmstack/tls/server.key", "client_ca_file": "/etc/llmstack/tls/ca.crt",
            "caddy_admin": "localhost:2019", "acme_email": "", "access_log": ""}
    base.update(changes)
    return base


def blocks(config):
    """{location path: [directives]} of an nginx site."""
    found = {}
    for match in re.finditer(r"location (\S+) \{\n(.*?)\n    \}", config, re.S):
        found[match.group(1)] = [line.strip() for line in match.group(2).splitlines()]
    return found


def test_every_api_location_is_unbuffered_and_everything_else_is_404():
    config = tls_proxy.nginx_site(settings())
    found = blocks(config)
    assert found.pop("/") == ["return 404;"]
    assert sorted(found) == sorted(tls_proxy.DEFAULT_PATHS)
    for path, directives in found.items():
        for wanted in ("proxy_buffering off;", "proxy_cache off;", "proxy_request_buffering off;", "gzip off;",
                       "proxy_http_version 1.1;", 'proxy_set_header Connection "";', "proxy_read_timeout 600s;",
                       "proxy_send_timeout 600s;", "proxy_pass http://llmstack_gateway;"):
            assert wanted in directives, (path, wanted)
    assert "keepalive" in config.split("upstream llmstack_gateway {")[1].split("}")[0]
    assert "location /metrics" not in config


def test_mtls_and_ipv6_in_nginx():
    config = tls_proxy.nginx_site(settings(mtls=True, listen_addresses=["192.0.2.12", "2001:db8::12"],
                                           upstream_host="::1", timeout=900))
    assert "listen 192.0.2.12:443 ssl;" in config and "listen [2001:db8::12]:443 ssl;" in config
    assert "server [::1]:4000;" in config
    assert "ssl_verify_client on;" in config and "ssl_client_certificate /etc/llmstack/tls/ca.crt;" in config
    assert "proxy_read_timeout 900s;" in config
    assert "ssl_verify_client" not in tls_proxy.nginx_site(settings())


def test_caddy_flushes_and_routes_only_the_api():
    config = tls_proxy.caddyfile(settings(server="caddy", mtls=True))
    assert "flush_interval -1" in config
    assert "read_timeout 600s" in config and "write_timeout 600s" in config
    matcher = re.search(r"@api path (.*)", config).group(1).split()
    assert "/v1/*" in matcher and "/models" in matcher and "/models/*" in matcher and "/" not in matcher
    assert "respond 404" in config
    assert "mode require_and_verify" in config and "trusted_ca_cert_file /etc/llmstack/tls/ca.crt" in config
    assert "auto_https off" in config and "bind 192.0.2.12" in config
    assert "strict_sni_host insecure_off" in config
    assert "strict_sni_host" not in tls_proxy.caddyfile(settings(server="caddy"))


def test_caddy_acme_names_the_site_and_leaves_https_automatic():
    config = tls_proxy.caddyfile(settings(server="caddy", certificate_source="acme", acme_email="ops@example.org",
                                          server_names=["llm.example.org"]))
    assert "llm.example.org:443 {" in config and "email ops@example.org" in config
    assert "auto_https off" not in config and "server.crt" not in config


def test_render_lists_what_the_certificate_must_carry():
    rendered = tls_proxy.render(settings(listen_addresses=["0.0.0.0", "192.0.2.12"]))
    assert rendered["certificate_addresses"] == ["192.0.2.12"]
    assert rendered["certificate_names"] == ["llm-gateway.lan"]


@pytest.mark.parametrize("changes, fragment", [
    ({"server": "haproxy"}, "tls_proxy_server: 'haproxy' is not one of caddy, nginx"),
    ({"certificate_source": "letsencrypt"}, "tls_proxy_certificate_source: 'letsencrypt' is not one of"),
    ({"listen_addresses": []}, "tls_proxy_listen_addresses: needs at least one address"),
    ({"listen_addresses": ["gw.lan"]}, "tls_proxy_listen_addresses: 'gw.lan' is not an IP address"),
    ({"port": 70000}, "tls_proxy_port: 70000 is not a TCP port"),
    ({"port": True}, "tls_proxy_port: True is not a TCP port"),
    ({"upstream_host": "bad host"}, "tls_proxy_upstream_host: 'bad host' is not an address or host name"),
    ({"upstream_port": "x"}, "tls_proxy_upstream_port: 'x' is not a TCP port"),
    ({"server_names": ["192.0.2.1"]}, "tls_proxy_server_names: '192.0.2.1' is not a DNS name"),
    ({"server_names": "gw"}, "tls_proxy_server_names: must be a list"),
    ({"paths": []}, "tls_proxy_paths: needs at least one API path"),
    ({"paths": ["/v1/ { return 200; }"]}, "is not a URL path"),
    ({"paths": ["/"]}, "tls_proxy_paths: '/' would expose everything"),
    ({"paths": ["/metrics/"]}, "would expose the unauthenticated metrics"),
    ({"paths": ["/v1/", "/v1/"]}, "tls_proxy_paths: lists a path twice"),
    ({"timeout": 0}, "tls_proxy_timeout: 0 is not a number of seconds"),
    ({"max_body_mb": "big"}, "tls_proxy_max_body_mb: 'big' is not a size in MiB"),
    ({"protocols": ["TLSv1"]}, "tls_proxy_protocols: ['TLSv1'] must be a non-empty list"),
    ({"mtls": "yes"}, "tls_proxy_mtls: must be true or false"),
    ({"certificate_source": "acme"}, "tls_proxy_certificate_source: acme needs tls_proxy_server: caddy"),
    ({"server": "caddy", "certificate_source": "acme", "server_names": []},
     "tls_proxy_server_names: ACME certificates need at least one public DNS name"),
    ({"certificate_file": "server.crt"}, "tls_proxy_certificate_file: 'server.crt' is not an absolute path"),
    ({"key_file": "/etc/x; evil"}, "tls_proxy_key_file: '/etc/x; evil' is not an absolute path"),
    ({"mtls": True, "client_ca_file": ""}, "tls_proxy_client_ca_file: '' is not an absolute path"),
    ({"server": "caddy", "caddy_admin": "0.0.0.0:2019"}, "tls_proxy_caddy_admin: '0.0.0.0:2019' must be off"),
    ({"access_log": "access.log"}, "tls_proxy_access_log: 'access.log' is not an absolute path or off"),
])
def test_bad_settings_name_the_variable(changes, fragment):
    errors = tls_proxy.validate(settings(**changes))
    assert any(fragment in error for error in errors), errors
    with pytest.raises(tls_proxy.TlsProxyError):
        tls_proxy.render(settings(**changes))


def test_all_problems_are_reported_at_once():
    errors = tls_proxy.validate(settings(server="x", port=0, paths=["/"], timeout=-1))
    assert len(errors) == 4, errors


def test_good_settings_have_no_problems():
    assert tls_proxy.validate(settings()) == []
    assert tls_proxy.validate(settings(server="caddy", caddy_admin="off", access_log="off")) == []
    assert tls_proxy.validate(settings(server="caddy", caddy_admin="unix//run/caddy/admin.sock")) == []
