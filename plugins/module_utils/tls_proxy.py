# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS in front of the LiteLLM gateway: an nginx site or a Caddyfile, computed from checked settings.

Plain Python, no Ansible imports. The role passes its variables (without the ``tls_proxy_`` prefix); every
problem is reported at once and names the variable.

What makes it safe for Server-Sent Events (seed 001 lost its "typewriter effect" to nginx buffering):
nginx talks HTTP/1.1 to the upstream with keep-alive (``Connection ""``), ``proxy_buffering off``,
``proxy_cache off``, ``proxy_request_buffering off``, ``gzip off`` on every API location and 600 s
read/send timeouts; Caddy's ``reverse_proxy`` gets ``flush_interval -1`` and the same timeouts. Only the API
paths are proxied (not ``/metrics/``, not the admin UI unless added); everything else answers 404.
"""

import calendar
import fnmatch
import ipaddress
import os.path
import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import value_checks

SERVERS = ("caddy", "nginx")
CERTIFICATE_SOURCES = ("internal_ca", "files", "acme")
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
# The OpenAI-compatible API LiteLLM serves, with and without the /v1 prefix, and its health probes.
DEFAULT_PATHS = ("/v1/", "/chat/completions", "/completions", "/embeddings", "/models", "/health/liveliness",
                 "/health/readiness")
PATH_RE = re.compile(r"^/[A-Za-z0-9._~/-]*$")
LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
NAME_RE = re.compile(r"^(\*\.)?%s(\.%s)*$" % (LABEL, LABEL))
CADDY_ADMIN_RE = re.compile(r"^(off|(localhost|127\.0\.0\.1|\[::1\]):[0-9]{1,5}|unix/[A-Za-z0-9._/-]+)$")
SIZE_MB_MAX = 4096

# The first line of every config this role writes: what it takes away again is only what carries it.
MARK = "# Managed by pvegpu.llmstack (tls_proxy role)"
# Where the metrics listener serves the certificates' expiry (tls_proxy_metrics_file), in Prometheus' text format.
EXPIRY_PATH = "/llmstack/tls-metrics"
EXPIRY_METRIC = "llmstack_tls_certificate_expiry_timestamp_seconds"
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class TlsProxyError(value_checks.SettingsProblems):
    """Bad input; ``errors`` lists every problem, each naming the variable."""


def _network(value):
    try:
        return ipaddress.ip_network(str(value).strip(), strict=False)
    except ValueError:
        return None


def _address(value):
    """An IP address as written (surrounding whitespace refused: the value goes into the config as it is)."""
    return value_checks.ip_address(value, strip=False)


def _unspecified(address):
    """True for 0.0.0.0 and ::, the addresses that listen everywhere."""
    ip = _address(address)
    return ip is not None and ip.is_unspecified


def _bounded(value, upper):
    """A whole number 1..upper (an int or a digit string), else None."""
    number = value_checks.as_int(value)
    return number if number is not None and 1 <= number <= upper else None


def _absolute(value):
    return isinstance(value, str) and value.startswith("/") and not re.search(r"[\s;{}\"'#]", value)


def _host_port(host, port):
    """``127.0.0.1:4000``; ``[::1]:4000`` for IPv6."""
    address = _address(host)
    if address is not None and address.version == 6:
        return "[%s]:%s" % (host, port)
    return "%s:%s" % (host, port)


def validate(settings):
    """Every problem with the settings, each naming the role variable. Empty when they are usable."""
    errors = []
    server = settings.get("server")
    if server not in SERVERS:
        errors.append("tls_proxy_server: %r is not one of %s" % (server, ", ".join(SERVERS)))
    source = settings.get("certificate_source")
    if source not in CERTIFICATE_SOURCES:
        errors.append("tls_proxy_certificate_source: %r is not one of %s" % (source, ", ".join(CERTIFICATE_SOURCES)))

    listen = settings.get("listen_addresses")
    if not isinstance(listen, list) or not listen:
        errors.append("tls_proxy_listen_addresses: needs at least one address (none was given, and the host has no "
                      "interface on tls_proxy_vlans)")
    else:
        for address in listen:
            if _address(address) is None:
                errors.append("tls_proxy_listen_addresses: %r is not an IP address" % (address,))
    if value_checks.as_port(settings.get("port")) is None:
        errors.append("tls_proxy_port: %r is not a TCP port (1-65535)" % (settings.get("port"),))

    upstream = settings.get("upstream_host")
    if not isinstance(upstream, str) or not (_address(upstream) or NAME_RE.match(upstream)):
        errors.append("tls_proxy_upstream_host: %r is not an address or host name" % (upstream,))
    if value_checks.as_port(settings.get("upstream_port")) is None:
        errors.append("tls_proxy_upstream_port: %r is not a TCP port (1-65535)" % (settings.get("upstream_port"),))

    names = settings.get("server_names")
    if not isinstance(names, list):
        errors.append("tls_proxy_server_names: must be a list of DNS names")
        names = []
    for name in names:
        if not isinstance(name, str) or not NAME_RE.match(name) or _address(name) is not None:
            errors.append("tls_proxy_server_names: %r is not a DNS name (addresses go in tls_proxy_listen_addresses)"
                          % (name,))

    paths = settings.get("paths")
    if not isinstance(paths, list) or not paths:
        errors.append("tls_proxy_paths: needs at least one API path to proxy")
        paths = []
    for path in paths:
        if not isinstance(path, str) or not PATH_RE.match(path):
            errors.append("tls_proxy_paths: %r is not a URL path (starts with /; letters, digits, . _ ~ / -)" % (path,))
        elif path.rstrip("/") in ("", "/metrics"):
            errors.append("tls_proxy_paths: %r would expose %s through the proxy; list the API paths instead"
                          % (path, "everything" if path == "/" else "the unauthenticated metrics"))
    if len(set(paths)) != len(paths):
        errors.append("tls_proxy_paths: lists a path twice")

    if _bounded(settings.get("timeout"), 86400) is None:
        errors.append("tls_proxy_timeout: %r is not a number of seconds (1-86400)" % (settings.get("timeout"),))
    if _bounded(settings.get("max_body_mb"), SIZE_MB_MAX) is None:
        errors.append("tls_proxy_max_body_mb: %r is not a size in MiB (1-%d)" % (settings.get("max_body_mb"),
                                                                                 SIZE_MB_MAX))
    protocols = settings.get("protocols")
    if not isinstance(protocols, list) or not protocols or any(p not in TLS_PROTOCOLS for p in protocols):
        errors.append("tls_proxy_protocols: %r must be a non-empty list of %s" % (protocols, ", ".join(TLS_PROTOCOLS)))

    mtls = settings.get("mtls")
    if not isinstance(mtls, bool):
        errors.append("tls_proxy_mtls: must be true or false")
    if source == "acme":
        if server != "caddy":
            errors.append("tls_proxy_certificate_source: acme needs tls_proxy_server: caddy (nginx has no ACME "
                          "client); use internal_ca or files with nginx")
        if not names:
            errors.append("tls_proxy_server_names: ACME certificates need at least one public DNS name")
        email = settings.get("acme_email")
        if email in (None, ""):
            errors.append("tls_proxy_acme_email: ACME (tls_proxy_certificate_source: acme) needs the account's e-mail "
                          "address (the CA sends expiry and revocation notices there)")
        if mtls is True and not settings.get("client_ca_file"):
            errors.append("tls_proxy_client_ca_file: mTLS with ACME certificates needs the CA that signs the client "
                          "certificates")
    else:
        for key in ("certificate_file", "key_file"):
            if not _absolute(settings.get(key)):
                errors.append("tls_proxy_%s: %r is not an absolute path" % (key, settings.get(key)))
    email = settings.get("acme_email")
    if email not in (None, "") and not value_checks.is_email(email):
        errors.append("tls_proxy_acme_email: %r is not an e-mail address (name@example.org)" % (email,))
    if mtls is True and source != "acme" and not _absolute(settings.get("client_ca_file")):
        errors.append("tls_proxy_client_ca_file: %r is not an absolute path (mTLS needs the CA that signs the "
                      "client certificates)" % (settings.get("client_ca_file"),))
    if server == "caddy" and not CADDY_ADMIN_RE.match(str(settings.get("caddy_admin", ""))):
        errors.append("tls_proxy_caddy_admin: %r must be off, a loopback host:port or unix/PATH (Caddy's admin API "
                      "must never listen on the network)" % (settings.get("caddy_admin"),))
    # Written on every run, whether or not the metrics listener serves it.
    expiry = settings.get("metrics_file")
    if expiry not in (None, "") and not _absolute(expiry):
        errors.append("tls_proxy_metrics_file: %r is not an absolute path ('' writes and serves no certificate "
                      "expiry)" % (expiry,))
    metrics = settings.get("metrics_listen_address")
    if metrics not in (None, ""):
        if _address(metrics) is None:
            errors.append("tls_proxy_metrics_listen_address: %r is not an IP address ('' turns the metrics listener "
                          "off)" % (metrics,))
        elif _address(metrics).is_unspecified:
            errors.append("tls_proxy_metrics_listen_address: %r listens everywhere; give the address on the "
                          "monitoring VLAN" % (metrics,))
        if value_checks.as_port(settings.get("metrics_port")) is None:
            errors.append("tls_proxy_metrics_port: %r is not a TCP port (1-65535)" % (settings.get("metrics_port"),))
        elif value_checks.as_port(settings.get("metrics_port")) == value_checks.as_port(settings.get("port")) and (
                metrics in (listen or []) or any(_unspecified(a) for a in listen or [])):
            errors.append("tls_proxy_metrics_port: the same address and port as the TLS listener (tls_proxy_port)")
        allow = settings.get("metrics_allow")
        if not isinstance(allow, list):
            errors.append("tls_proxy_metrics_allow: must be a list of addresses or networks")
        else:
            for entry in allow:
                if _network(entry) is None:
                    errors.append("tls_proxy_metrics_allow: %r is not an address or network" % (entry,))
    for key in ("access_log",):
        value = settings.get(key)
        if value not in (None, "", "off") and not _absolute(value):
            errors.append("tls_proxy_%s: %r is not an absolute path or off" % (key, value))
    return errors


def _check(settings):
    errors = validate(settings)
    if errors:
        raise TlsProxyError(errors)


def nginx_site(settings):
    """The nginx site (an ``http``-context include, e.g. /etc/nginx/conf.d/llmstack-gateway.conf)."""
    _check(settings)
    port = int(str(settings["port"]))
    timeout = int(str(settings["timeout"]))
    lines = [
        MARK + "; edits are overwritten.",
        "# TLS in front of the LiteLLM gateway; SSE-safe: no buffering, no cache, no gzip, HTTP/1.1 keep-alive.",
        "upstream llmstack_gateway {",
        "    server %s;" % _host_port(settings["upstream_host"], settings["upstream_port"]),
        "    keepalive 64;",
        "}",
        "",
        "server {",
    ]
    for address in settings["listen_addresses"]:
        lines.append("    listen %s ssl;" % _host_port(address, port))
    names = settings["server_names"] or ["_"]
    lines += [
        "    server_name %s;" % " ".join(names),
        "    ssl_certificate %s;" % settings["certificate_file"],
        "    ssl_certificate_key %s;" % settings["key_file"],
        "    ssl_protocols %s;" % " ".join(settings["protocols"]),
        "    ssl_prefer_server_ciphers off;",
        "    ssl_session_cache shared:llmstack_tls:10m;",
        "    ssl_session_timeout 1d;",
        "    ssl_session_tickets off;",
    ]
    if settings["mtls"]:
        lines += [
            "    ssl_client_certificate %s;" % settings["client_ca_file"],
            "    ssl_verify_client on;",
            "    ssl_verify_depth 2;",
        ]
    access_log = settings.get("access_log") or ""
    if access_log == "off":
        lines.append("    access_log off;")
    elif access_log:
        lines.append("    access_log %s;" % access_log)
    lines += [
        "    client_max_body_size %dm;" % int(str(settings["max_body_mb"])),
        "    server_tokens off;",
        "",
        "    # Anything that is not the API (the admin UI, /metrics/, key management) is not served here.",
        "    location / {",
        "        return 404;",
        "    }",
    ]
    for path in settings["paths"]:
        lines += [
            "",
            "    location %s {" % path,
            "        proxy_pass http://llmstack_gateway;",
            "        proxy_http_version 1.1;",
            '        proxy_set_header Connection "";',
            "        proxy_set_header Host $host;",
            "        proxy_set_header X-Real-IP $remote_addr;",
            "        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
            "        proxy_set_header X-Forwarded-Proto https;",
            "        proxy_buffering off;",
            "        proxy_cache off;",
            "        proxy_request_buffering off;",
            "        gzip off;",
            "        proxy_read_timeout %ds;" % timeout,
            "        proxy_send_timeout %ds;" % timeout,
            "    }",
        ]
    lines.append("}")
    lines += _nginx_metrics_server(settings)
    return "\n".join(lines) + "\n"


def _metrics_on(settings):
    return settings.get("metrics_listen_address") not in (None, "")


def _nginx_metrics_server(settings):
    """LiteLLM's /metrics/ in plain HTTP on the monitoring address, for the observability hosts only."""
    if not _metrics_on(settings):
        return []
    lines = [
        "",
        "# Prometheus reads LiteLLM's /metrics/ here (plain HTTP, the monitoring hosts only); nothing else is served.",
        "server {",
        "    listen %s;" % _host_port(settings["metrics_listen_address"], int(str(settings["metrics_port"]))),
        "    server_name _;",
        "    server_tokens off;",
        "    access_log off;",
        "    location / {",
        "        return 404;",
        "    }",
        "    location ~ ^/metrics/?$ {",
    ]
    lines += ["        allow %s;" % _network(entry).with_prefixlen.replace("/32", "").replace("/128", "")
              for entry in settings.get("metrics_allow") or []]
    lines += [
        "        deny all;",
        "        proxy_pass http://llmstack_gateway;",
        "        proxy_http_version 1.1;",
        '        proxy_set_header Connection "";',
        "        proxy_set_header Host $host;",
        "    }",
    ]
    if settings.get("metrics_file"):
        lines += ["    # The expiry of the proxy's certificates (tls_proxy_metrics_file, written by the role's run).",
                  "    location = %s {" % EXPIRY_PATH]
        lines += ["        allow %s;" % _network(entry).with_prefixlen.replace("/32", "").replace("/128", "")
                  for entry in settings.get("metrics_allow") or []]
        lines += [
            "        deny all;",
            "        alias %s;" % settings["metrics_file"],
            "        types { }",
            '        default_type "%s";' % EXPOSITION_TYPE,
            "    }",
        ]
    lines.append("}")
    return lines


def _caddy_metrics_site(settings):
    if not _metrics_on(settings):
        return []
    allow = [_network(entry).with_prefixlen for entry in settings.get("metrics_allow") or []]
    lines = [
        "",
        "# Prometheus reads LiteLLM's /metrics/ here (plain HTTP, the monitoring hosts only); nothing else is served.",
        "http://:%d {" % int(str(settings["metrics_port"])),
        "    bind %s" % settings["metrics_listen_address"],
        "    header -Server",
    ]
    if allow:
        lines += [
            "    @prometheus {",
            "        path /metrics /metrics/",
            "        remote_ip %s" % " ".join(allow),
            "    }",
            "    handle @prometheus {",
            "        reverse_proxy %s" % _host_port(settings["upstream_host"], settings["upstream_port"]),
            "    }",
        ]
        if settings.get("metrics_file"):
            lines += [
                "    # The expiry of the proxy's certificates (tls_proxy_metrics_file, written by the role's run).",
                "    @expiry {",
                "        path %s" % EXPIRY_PATH,
                "        remote_ip %s" % " ".join(allow),
                "    }",
                "    handle @expiry {",
                "        root * %s" % os.path.dirname(settings["metrics_file"]),
                "        rewrite * /%s" % os.path.basename(settings["metrics_file"]),
                '        header Content-Type "%s"' % EXPOSITION_TYPE,
                "        file_server",
                "    }",
            ]
    lines += [
        "    handle {",
        "        respond 404",
        "    }",
        "}",
    ]
    return lines


def _caddy_matcher(path):
    """nginx-style prefix semantics: ``/v1/`` matches ``/v1/*``; ``/models`` matches ``/models`` and below."""
    if path.endswith("/"):
        return [path + "*"]
    return [path, path + "/*"]


def caddyfile(settings):
    """The whole Caddyfile (Debian's caddy.service reads /etc/caddy/Caddyfile)."""
    _check(settings)
    port = int(str(settings["port"]))
    timeout = int(str(settings["timeout"]))
    acme = settings["certificate_source"] == "acme"
    lines = [
        MARK + "; edits are overwritten.",
        "# TLS in front of the LiteLLM gateway; SSE-safe: reverse_proxy flushes every chunk (flush_interval -1).",
        "{",
        "    admin %s" % settings["caddy_admin"],
    ]
    if acme:
        if settings.get("acme_email"):
            lines.append("    email %s" % settings["acme_email"])
    else:
        lines.append("    auto_https off")
    if settings["mtls"]:
        # Caddy turns on strict SNI-Host matching with client auth, which answers 421 to clients that connect by
        # address (no SNI). It guards against one site's client auth being bypassed through another site; this
        # Caddyfile has one site, so the check only gets in the way.
        lines += ["    servers {", "        strict_sni_host insecure_off", "    }"]
    lines += ["}", ""]
    if acme:
        addresses = ["%s:%d" % (name, port) for name in settings["server_names"]]
    else:
        addresses = [":%d" % port]
    lines.append("%s {" % ", ".join(addresses))
    lines.append("    bind %s" % " ".join(settings["listen_addresses"]))
    tls_line = "    tls" if acme else "    tls %s %s" % (settings["certificate_file"], settings["key_file"])
    lines += [
        tls_line + " {",
        "        protocols %s %s" % (_caddy_protocol(min(settings["protocols"])),
                                     _caddy_protocol(max(settings["protocols"]))),
    ]
    if settings["mtls"]:
        lines += [
            "        client_auth {",
            "            mode require_and_verify",
            "            trusted_ca_cert_file %s" % settings["client_ca_file"],
            "        }",
        ]
    lines.append("    }")
    access_log = settings.get("access_log") or ""
    if access_log and access_log != "off":
        lines += ["    log {", "        output file %s" % access_log, "    }"]
    matchers = []
    for path in settings["paths"]:
        matchers += _caddy_matcher(path)
    lines += [
        "    request_body {",
        "        max_size %dMiB" % int(str(settings["max_body_mb"])),  # MiB, as documented (Caddy reads MB as 10^6)
        "    }",
        "    header -Server",
        "    @api path %s" % " ".join(matchers),
        "    handle @api {",
        "        reverse_proxy %s {" % _host_port(settings["upstream_host"], settings["upstream_port"]),
        "            flush_interval -1",
        "            header_up X-Forwarded-Proto https",
        "            transport http {",
        "                read_timeout %ds" % timeout,
        "                write_timeout %ds" % timeout,
        "                keepalive 90s",
        "            }",
        "        }",
        "    }",
        "    # Anything that is not the API (the admin UI, /metrics/, key management) is not served here.",
        "    handle {",
        "        respond 404",
        "    }",
        "}",
    ]
    lines += _caddy_metrics_site(settings)
    return "\n".join(lines) + "\n"


def _caddy_protocol(name):
    return {"TLSv1.2": "tls1.2", "TLSv1.3": "tls1.3"}[name]


def render(settings):
    """``{"server", "config", "certificate_names", "certificate_addresses"}`` for the role."""
    config = caddyfile(settings) if settings["server"] == "caddy" else nginx_site(settings)
    return {
        "server": settings["server"],
        "config": config,
        # What the internal CA's server certificate must name: the DNS names and the listen addresses
        # (unspecified addresses such as 0.0.0.0 are no use in a certificate).
        "certificate_names": list(settings["server_names"]),
        "certificate_addresses": [a for a in settings["listen_addresses"] if not _unspecified(a)],
    }


def _nginx_includes(text):
    """(start, end, arguments) of every ``include`` directive in an nginx config text (comments and quotes
    understood; the positions cover the directive up to its ``;``)."""
    found = []
    tokens, start, index, length = [], None, 0, len(text)
    while index < length:
        char = text[index]
        if char == "#":
            newline = text.find("\n", index)
            index = length if newline < 0 else newline + 1
        elif char.isspace():
            index += 1
        elif char in "{}":
            tokens, start = [], None
            index += 1
        elif char == ";":
            if tokens and tokens[0] == "include":
                found.append((start, index + 1, tokens[1:]))
            tokens, start = [], None
            index += 1
        elif char in "\"'":
            end, word = index + 1, []
            while end < length and text[end] != char:
                if text[end] == "\\" and end + 1 < length:
                    end += 1
                word.append(text[end])
                end += 1
            start = index if start is None else start
            tokens.append("".join(word))
            index = end + 1
        else:
            end = index
            while end < length and not text[end].isspace() and text[end] not in ";{}\"'":
                end += 1
            start = index if start is None else start
            tokens.append(text[index:end])
            index = end
    return found


def _glob_matches(pattern, path):
    """True when nginx's include ``pattern`` (glob(3): ``*`` stops at ``/`` and skips dot files) names ``path``."""
    wanted, have = os.path.normpath(pattern).split("/"), os.path.normpath(path).split("/")
    if len(wanted) != len(have):
        return False
    for index, name in enumerate(have):
        part = wanted[index]
        if name.startswith(".") and not part.startswith("."):
            return False
        if not fnmatch.fnmatchcase(name, part):
            return False
    return True


def _quote_nginx(path):
    return '"%s"' % path.replace("\\", "\\\\").replace('"', '\\"')


def nginx_test_config(main_text, main_path, site_path, candidate_path, expand):
    """The text of a main nginx config that loads ``candidate_path`` where ``main_path`` loads ``site_path``.

    ``nginx -t -c <that file>`` then tests the whole configuration as it will be once the candidate replaces the
    site, while the site in place stays untouched (the candidate is only moved over it when the test passes).
    Every ``include`` of the main config whose path or glob names the site is replaced by the files it names
    today (``expand``: a glob function), in nginx's order, with the candidate in the site's place. The file must
    be written next to ``main_path``: nginx resolves relative includes from the main config's directory.
    Raises TlsProxyError when no include of the main config names the site (nginx would not load it)."""
    base = os.path.dirname(main_path)
    out, position, replaced = [], 0, False
    for start, end, arguments in _nginx_includes(main_text):
        if len(arguments) != 1:
            continue
        pattern = arguments[0] if arguments[0].startswith("/") else os.path.join(base, arguments[0])
        if not _glob_matches(pattern, site_path):
            continue
        site = os.path.normpath(site_path)
        files = sorted(set(os.path.normpath(f) for f in expand(pattern)) - {site})
        files = sorted(files + [site])
        out.append(main_text[position:start])
        out.append(" ".join("include %s;" % _quote_nginx(candidate_path if f == site else f) for f in files))
        position, replaced = end, True
    if not replaced:
        raise TlsProxyError(["tls_proxy_nginx_main_config: %s has no include directive that names "
                             "tls_proxy_nginx_site_path %s (by its path or a glob such as conf.d/*.conf), so nginx "
                             "would not load the site" % (main_path, site_path)])
    out.append(main_text[position:])
    return "".join(out)


def owned(text):
    """True when a config text was written by this role (its first line is MARK)."""
    return bool(text) and text.split("\n", 1)[0].startswith(MARK)


_SERVER_BLOCK = re.compile(r"(?:^|[\s;{}])server\s*\{")


def _uncommented(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def nginx_other_sites(main_text, main_path, site_path, expand, read):
    """The files ``main_path`` includes (directly, Debian's ``conf.d/*.conf`` and ``sites-enabled/*``) that hold a
    ``server`` block, except ``site_path``: what nginx still serves once this role's site is gone.

    ``expand`` is a glob function, ``read`` returns a file's text (None when it cannot be read)."""
    base = os.path.dirname(main_path)
    site = os.path.normpath(site_path)
    found = []
    for _start, _end, arguments in _nginx_includes(main_text):
        if len(arguments) != 1:
            continue
        pattern = arguments[0] if arguments[0].startswith("/") else os.path.join(base, arguments[0])
        for name in sorted(os.path.normpath(f) for f in expand(pattern)):
            if name == site or name in found:
                continue
            text = read(name)
            if text and _SERVER_BLOCK.search(_uncommented(text)):
                found.append(name)
    return found


def leave_action(ours, serves_more, running):
    """What becomes of a web server when this role takes its config away from it (tls_proxy_state absent, or the
    other server after tls_proxy_server changed).

    ``ours``: the role's config was there (and is being removed); ``serves_more``: the server still has a site or
    config the role did not write; ``running``: its unit is active. Returns "stop" (stop and disable: the role's
    config was all it served), "reload" (it keeps serving the rest), "report" (nothing of the role's: running,
    left exactly as it is) or "none"."""
    if not ours:
        return "report" if running else "none"
    if serves_more:
        return "reload" if running else "none"
    return "stop"


def _asn1_time(value):
    """Seconds since the epoch of an ASN.1 time as community.crypto returns it (``20271107120000Z``)."""
    match = re.match(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$", str(value or ""))
    if not match:
        raise TlsProxyError(["%r is not an ASN.1 time (YYYYMMDDHHMMSSZ)" % (value,)])
    return calendar.timegm(tuple(int(part) for part in match.groups()) + (0, 0, 0))


def _label(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def expiry_metrics(certificates):
    """The text the metrics listener serves at EXPIRY_PATH: one sample per certificate, its notAfter in seconds.

    ``certificates``: [{"certificate": "server" | "ca" | "client/NAME", "file": path, "not_after": ASN.1 time or
    None}] - one whose notAfter is unknown (check mode before the first run) has no sample. The value is fixed
    until the certificate changes, so the file changes only when a certificate does."""
    lines = ["# HELP %s When the certificate stops being valid (notAfter), as the tls_proxy role read it on its last "
             "run." % EXPIRY_METRIC,
             "# TYPE %s gauge" % EXPIRY_METRIC]
    for entry in certificates:
        if entry.get("not_after") in (None, ""):
            continue
        lines.append('%s{certificate="%s",file="%s"} %d' % (EXPIRY_METRIC, _label(entry["certificate"]),
                                                            _label(entry["file"]), _asn1_time(entry["not_after"])))
    return "\n".join(lines) + "\n"
