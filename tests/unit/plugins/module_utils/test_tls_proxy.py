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


# -- issue 20: the ACME e-mail, and the config nginx -t tests before a new site replaces the old ------------
@pytest.mark.parametrize("email, fragment", [
    ("", "tls_proxy_acme_email: ACME (tls_proxy_certificate_source: acme) needs the account's e-mail"),
    ("ops", "tls_proxy_acme_email: 'ops' is not an e-mail address"),
    ("ops@example.org\n}\nimport x", "tls_proxy_acme_email: 'ops@example.org\\n}\\nimport x' is not an e-mail"),
    ("ops@example.org email2", "is not an e-mail address"),
])
def test_the_acme_email_must_be_an_address(email, fragment):
    errors = tls_proxy.validate(settings(server="caddy", certificate_source="acme", acme_email=email))
    assert any(fragment in e for e in errors), errors


def test_a_good_acme_email_passes_and_is_checked_whatever_the_source():
    assert tls_proxy.validate(settings(server="caddy", certificate_source="acme", acme_email="ops@example.org")) == []
    errors = tls_proxy.validate(settings(acme_email="not an address"))
    assert errors == ["tls_proxy_acme_email: 'not an address' is not an e-mail address (name@example.org)"]


DEBIAN_MAIN = """user www-data;
include /etc/nginx/modules-enabled/*.conf;
events { worker_connections 768; }
http {
    include mime.types;   # relative: from the main config's directory
    # include /etc/nginx/conf.d/*.conf;  (a comment, not a directive)
    include /etc/nginx/conf.d/*.conf;
    include "/etc/nginx/sites-enabled/*";
}
"""


def directives(text):
    """The include arguments in order, read with a plain regex (not the code under test)."""
    import re
    text = "\n".join(line.split("#")[0] for line in text.splitlines())
    return [m.strip('"') for m in re.findall(r"include\s+([^;]+);", text)]


def test_the_test_config_loads_the_new_site_in_place_of_the_old_one():
    on_disk = {"/etc/nginx/conf.d/*.conf": ["/etc/nginx/conf.d/a.conf", "/etc/nginx/conf.d/llmstack-gateway.conf",
                                            "/etc/nginx/conf.d/z.conf"]}
    text = tls_proxy.nginx_test_config(DEBIAN_MAIN, "/etc/nginx/nginx.conf", "/etc/nginx/conf.d/llmstack-gateway.conf",
                                       "/etc/nginx/conf.d/.new", lambda pattern: on_disk.get(pattern, []))
    assert directives(text) == ["/etc/nginx/modules-enabled/*.conf", "mime.types", "/etc/nginx/conf.d/a.conf",
                                "/etc/nginx/conf.d/.new", "/etc/nginx/conf.d/z.conf", "/etc/nginx/sites-enabled/*"]


def test_a_first_site_is_tested_with_the_other_sites_of_its_glob():
    text = tls_proxy.nginx_test_config(DEBIAN_MAIN, "/etc/nginx/nginx.conf", "/etc/nginx/sites-enabled/gw",
                                       "/etc/nginx/sites-enabled/.new",
                                       lambda pattern: ["/etc/nginx/sites-enabled/default"]
                                       if pattern.startswith("/etc/nginx/sites-enabled") else [])
    assert directives(text)[-2:] == ["/etc/nginx/sites-enabled/default", "/etc/nginx/sites-enabled/.new"]
    assert "/etc/nginx/conf.d/*.conf" in directives(text)


def test_a_site_the_main_config_does_not_include_is_refused():
    with pytest.raises(tls_proxy.TlsProxyError, match="tls_proxy_nginx_main_config: /etc/nginx/nginx.conf has no "
                                                      "include directive that names tls_proxy_nginx_site_path"):
        tls_proxy.nginx_test_config(DEBIAN_MAIN, "/etc/nginx/nginx.conf", "/srv/gw.conf", "/srv/.new",
                                    lambda pattern: [])
    # A dot file is not matched by *.conf (glob(3)), as nginx would not load it either.
    with pytest.raises(tls_proxy.TlsProxyError):
        tls_proxy.nginx_test_config(DEBIAN_MAIN, "/etc/nginx/nginx.conf", "/etc/nginx/conf.d/.gw.conf", "/x",
                                    lambda pattern: [])


def test_nginx_itself_accepts_the_test_config_and_rejects_a_bad_candidate(tmp_path):
    import glob
    import shutil
    import subprocess
    if shutil.which("nginx") is None:
        pytest.fail("nginx is not installed: run make setup")
    sites = tmp_path / "sites"
    sites.mkdir()
    (sites / "other.conf").write_text("server { listen 127.0.0.1:1; server_name other; }\n")
    site = sites / "gw.conf"
    site.write_text("server { listen 127.0.0.1:2; server_name gw; }\n")
    main = tmp_path / "nginx.conf"
    main.write_text("pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n access_log off;\n"
                    " include sites/*.conf;\n}\n" % (tmp_path, tmp_path))
    results = {}
    for name, candidate_text in (("good", "server { listen 127.0.0.1:3; server_name gw; }\n"),
                                 ("bad", "server { listen 127.0.0.1:3; no_such_directive on; }\n")):
        candidate = sites / (".gw.conf." + name)
        candidate.write_text(candidate_text)
        test_main = tmp_path / (".test-%s.conf" % name)
        test_main.write_text(tls_proxy.nginx_test_config(main.read_text(), str(main), str(site), str(candidate),
                                                         glob.glob))
        run = subprocess.run(["nginx", "-t", "-q", "-c", str(test_main)], capture_output=True, text=True, check=False)
        results[name] = (run.returncode, run.stderr)
    assert results["good"][0] == 0, results["good"]
    assert results["bad"][0] != 0 and "no_such_directive" in results["bad"][1] and ".gw.conf.bad" in results["bad"][1]


# What the role takes away (tls_proxy_state absent, or the other server after tls_proxy_server changed): only what
# it wrote; the server stays up while it serves anything else.
def test_only_a_config_whose_first_line_is_the_roles_is_its_own():
    assert tls_proxy.owned(tls_proxy.nginx_site(settings()))
    assert tls_proxy.owned(tls_proxy.caddyfile(settings(server="caddy")))
    assert not tls_proxy.owned("server { listen 8080; }\n")
    assert not tls_proxy.owned("# a site of mine, copied from a gist that said\n# Managed by pvegpu.llmstack "
                               "(tls_proxy role)\n")
    assert not tls_proxy.owned("") and not tls_proxy.owned(None)


def test_the_other_sites_are_the_included_files_with_a_server_block_but_ours():
    files = {
        "/etc/nginx/modules-enabled/50-mod-stream.conf": "load_module modules/ngx_stream_module.so;\n",
        "/etc/nginx/mime.types": "types { text/html html; }\n",
        "/etc/nginx/conf.d/llmstack-gateway.conf": "# Managed by pvegpu.llmstack (tls_proxy role)\nserver {}\n",
        "/etc/nginx/conf.d/upstreams.conf": "upstream app { server 127.0.0.1:9000; }\n",
        "/etc/nginx/conf.d/commented.conf": "# server {\n#   listen 81;\n# }\n",
        "/etc/nginx/sites-enabled/wiki": "server{listen 8080;}\n",
        "/etc/nginx/sites-enabled/subdir": None,
    }
    globs = {"/etc/nginx/modules-enabled/*.conf": ["/etc/nginx/modules-enabled/50-mod-stream.conf"],
             "/etc/nginx/mime.types": ["/etc/nginx/mime.types"],
             "/etc/nginx/conf.d/*.conf": ["/etc/nginx/conf.d/upstreams.conf", "/etc/nginx/conf.d/llmstack-gateway.conf",
                                          "/etc/nginx/conf.d/commented.conf"],
             "/etc/nginx/sites-enabled/*": ["/etc/nginx/sites-enabled/wiki", "/etc/nginx/sites-enabled/subdir"]}
    other = tls_proxy.nginx_other_sites(DEBIAN_MAIN, "/etc/nginx/nginx.conf", "/etc/nginx/conf.d/llmstack-gateway.conf",
                                        lambda pattern: globs.get(pattern, []), files.get)
    assert other == ["/etc/nginx/sites-enabled/wiki"]
    # Our site alone: nothing else is served.
    globs["/etc/nginx/sites-enabled/*"] = []
    assert tls_proxy.nginx_other_sites(DEBIAN_MAIN, "/etc/nginx/nginx.conf",
                                       "/etc/nginx/conf.d/llmstack-gateway.conf",
                                       lambda pattern: globs.get(pattern, []), files.get) == []


@pytest.mark.parametrize("ours, serves_more, running, action", [
    (True, False, True, "stop"),      # the role's site was all nginx served
    (True, False, False, "stop"),     # stopped already: still disabled, it would serve nothing at boot
    (True, True, True, "reload"),     # other sites: nginx keeps serving them
    (True, True, False, "none"),      # not running: the role does not start it
    (False, True, True, "report"),    # nothing of the role's: a foreign server is left alone
    (False, False, True, "report"),
    (False, False, False, "none"),
])
def test_a_server_is_stopped_only_when_the_roles_config_was_all_it_served(ours, serves_more, running, action):
    assert tls_proxy.leave_action(ours, serves_more, running) == action


def test_the_certificates_expiry_is_their_not_after_in_seconds_and_unknown_ones_are_left_out():
    import datetime
    text = tls_proxy.expiry_metrics([
        {"certificate": "server", "file": "/etc/llmstack/tls/server.crt", "not_after": "20271107120000Z"},
        {"certificate": "ca", "file": "/etc/llmstack/tls/ca.crt", "not_after": None},
        {"certificate": "client/openclaw", "file": '/odd"name.crt', "not_after": "20360101000001Z"},
    ])
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    server = datetime.datetime(2027, 11, 7, 12, 0, 0, tzinfo=datetime.UTC).timestamp()
    client = datetime.datetime(2036, 1, 1, 0, 0, 1, tzinfo=datetime.UTC).timestamp()
    assert samples == [
        'llmstack_tls_certificate_expiry_timestamp_seconds{certificate="server",file="/etc/llmstack/tls/server.crt"} '
        '%d' % server,
        'llmstack_tls_certificate_expiry_timestamp_seconds{certificate="client/openclaw",file="/odd\\"name.crt"} '
        '%d' % client,
    ]
    assert "# TYPE llmstack_tls_certificate_expiry_timestamp_seconds gauge" in text
    with pytest.raises(tls_proxy.TlsProxyError):
        tls_proxy.expiry_metrics([{"certificate": "server", "file": "/x", "not_after": "Nov  7 12:00:00 2027 GMT"}])


@pytest.mark.parametrize("server", ["nginx", "caddy"])
def test_the_metrics_listener_serves_the_expiry_file_to_the_monitoring_hosts_only(server):
    config = tls_proxy.render(settings(server=server, metrics_listen_address="10.0.10.12", metrics_port=9402,
                                       metrics_allow=["10.0.10.30"],
                                       metrics_file="/var/lib/llmstack/tls_proxy/tls.prom"))["config"]
    metrics = config[config.index("9402"):]
    assert "/llmstack/tls-metrics" in metrics and "10.0.10.30" in metrics
    if server == "nginx":
        block = metrics[metrics.index("location = /llmstack/tls-metrics"):]
        block = block[:block.index("}")]
        assert "allow 10.0.10.30;" in block and "deny all;" in block
        assert "alias /var/lib/llmstack/tls_proxy/tls.prom;" in block
    else:
        assert "root * /var/lib/llmstack/tls_proxy" in metrics and "rewrite * /tls.prom" in metrics
    without = tls_proxy.render(settings(server=server, metrics_listen_address="10.0.10.12", metrics_port=9402,
                                        metrics_allow=["10.0.10.30"], metrics_file=""))["config"]
    assert "tls-metrics" not in without
    assert any("tls_proxy_metrics_file" in e for e in tls_proxy.validate(settings(
        metrics_listen_address="10.0.10.12", metrics_port=9402, metrics_file="tls.prom")))
    # Written on every run: checked with the listener off too.
    assert any("tls_proxy_metrics_file" in e for e in tls_proxy.validate(settings(metrics_file="tls.prom")))
