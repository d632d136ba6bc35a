"""Gateway overhead: time to first token and inter-chunk gaps, direct to an upstream vs through LiteLLM.

The upstream is tools/fake_vllm.py (a stand-in for vLLM, which cannot run here: 8 chunks 20 ms apart); LiteLLM is
the pinned PyPI version from .venv-litellm, with the config the role renders for one group of one deployment. Two
LiteLLM settings are measured: LiteLLM's defaults (1 worker, default logging) and the role's (litellm_workers =
CPUs + 1, LITELLM_LOG=ERROR, the prometheus callback on). Then the TLS hop in front (issue #8): nginx and Caddy from
Debian with the site/Caddyfile the tls_proxy role renders, a throwaway CA, the client trusting it. 1, 8 and 32
concurrent streams; results to bench/results/.
Everything (client, proxy, upstream) shares this machine's cores, so read the numbers as relative.
"""

import http.client
import json
import os
import platform
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import llm_load  # noqa: E402

LITELLM = os.path.join(ROOT, ".venv-litellm", "bin", "litellm")
STREAMS = (1, 8, 32)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait(port, path, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("nothing answered on port %d" % port)


def config(upstream_port, prometheus):
    sys.path.insert(0, ROOT)
    from plugins.module_utils import litellm_config  # noqa: E402 (plain Python, importable from the checkout)

    built = litellm_config.build({"gpu_vms": [{"host": "bench", "address": "127.0.0.1", "api_key": True,
                                               "models": [{"name": "fast", "port": upstream_port}]}],
                                  "prometheus": prometheus, "router": {"num_retries": 2, "timeout": 600}})
    return built["config"]


def run_proxy(cfg, workers, log_level, env):
    import yaml

    path = os.path.join(ROOT, ".cache", "bench-litellm.yaml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        yaml.safe_dump(cfg, handle)
    port = free_port()
    args = [LITELLM, "--config", path, "--host", "127.0.0.1", "--port", str(port)]
    if workers:
        args += ["--num_workers", str(workers)]
    proc_env = dict(env, LITELLM_LOCAL_MODEL_COST_MAP="True")
    if log_level:
        proc_env["LITELLM_LOG"] = log_level
    proc = subprocess.Popen(args, env=proc_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait(port, "/health/liveliness")
    return proc, port


def measure(url, key, streams, context=None):
    llm_load.run_load(url, key, "fast", max(streams, 8), requests_per_stream=2, context=context)  # warm-up
    return llm_load.summarise(llm_load.run_load(url, key, "fast", streams, requests_per_stream=max(3, 96 // streams),
                                                context=context))


def make_pki(work):
    """A throwaway CA and a server certificate for 127.0.0.1 (openssl; the role uses community.crypto)."""
    def openssl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-nodes", "-keyout",
            os.path.join(work, "ca.key"), "-out", os.path.join(work, "ca.crt"), "-subj", "/CN=bench CA", "-days", "1")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            os.path.join(work, "server.key"), "-out", os.path.join(work, "server.csr"), "-subj", "/CN=127.0.0.1")
    ext = os.path.join(work, "ext")
    with open(ext, "w") as handle:
        handle.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", os.path.join(work, "server.csr"), "-CA", os.path.join(work, "ca.crt"), "-CAkey",
            os.path.join(work, "ca.key"), "-CAcreateserial", "-out", os.path.join(work, "server.crt"), "-days", "1",
            "-extfile", ext)


def run_tls_proxy(server, work, upstream_port):
    """nginx or Caddy in the foreground with what the tls_proxy role renders; returns (process, port)."""
    sys.path.insert(0, ROOT)
    from plugins.module_utils import tls_proxy  # noqa: E402

    port = free_port()
    settings = {"server": server, "certificate_source": "internal_ca", "listen_addresses": ["127.0.0.1"],
                "port": port, "upstream_host": "127.0.0.1", "upstream_port": upstream_port, "server_names": [],
                "paths": list(tls_proxy.DEFAULT_PATHS), "timeout": 600, "max_body_mb": 20,
                "protocols": ["TLSv1.2", "TLSv1.3"], "mtls": False,
                "certificate_file": os.path.join(work, "server.crt"), "key_file": os.path.join(work, "server.key"),
                "client_ca_file": "", "caddy_admin": "off",
                "acme_email": "", "access_log": "off"}
    if server == "nginx":
        site = os.path.join(work, "site.conf")
        with open(site, "w") as handle:
            handle.write(tls_proxy.nginx_site(settings))
        main = os.path.join(work, "nginx.conf")
        with open(main, "w") as handle:
            # As Debian's nginx.conf: one worker per CPU.
            handle.write("worker_processes auto;\npid %(d)s/nginx.pid;\nerror_log %(d)s/error.log;\n"
                         "events { worker_connections 1024; }\nhttp {\n"
                         "client_body_temp_path %(d)s/b; proxy_temp_path %(d)s/p; fastcgi_temp_path %(d)s/f;\n"
                         "uwsgi_temp_path %(d)s/u; scgi_temp_path %(d)s/s;\ninclude %(s)s;\n}\n"
                         % {"d": work, "s": site})
        args, env = ["nginx", "-c", main, "-g", "daemon off;"], None
    else:
        caddyfile = os.path.join(work, "Caddyfile")
        with open(caddyfile, "w") as handle:
            handle.write(tls_proxy.caddyfile(settings))
        args = ["caddy", "run", "--adapter", "caddyfile", "--config", caddyfile]
        env = dict(os.environ, HOME=work, XDG_DATA_HOME=work, XDG_CONFIG_HOME=work)
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("%s did not listen on %d" % (server, port))


def tls_hop(litellm_port, key, direct, litellm_rows):
    """TTFT through tls_proxy + LiteLLM (role defaults), against direct and against LiteLLM alone."""
    out = {}
    work = tempfile.mkdtemp(prefix="bench-tls-")
    try:
        make_pki(work)
        context = ssl.create_default_context(cafile=os.path.join(work, "ca.crt"))
        for server in ("nginx", "caddy"):
            if shutil.which(server) is None:
                out[server] = "not installed (make setup)"
                continue
            proc, port = run_tls_proxy(server, work, litellm_port)
            try:
                rows = {}
                for n in STREAMS:
                    proxied = measure("https://127.0.0.1:%d" % port, key, n, context=context)
                    alone = litellm_rows[n]["proxied"]
                    rows[n] = {"proxied": proxied,
                               "added_ttft_p50_ms": round(proxied["ttft_p50_ms"] - direct[n]["ttft_p50_ms"], 1),
                               "added_ttft_p99_ms": round(proxied["ttft_p99_ms"] - direct[n]["ttft_p99_ms"], 1),
                               "tls_hop_ttft_p50_ms": round(proxied["ttft_p50_ms"] - alone["ttft_p50_ms"], 1),
                               "tls_hop_ttft_p99_ms": round(proxied["ttft_p99_ms"] - alone["ttft_p99_ms"], 1),
                               "gap_p99_ms": proxied["gap_p99_ms"]}
                out[server] = rows
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main():
    if not os.path.exists(LITELLM):
        print("bench_litellm: %s missing (make setup)" % LITELLM)
        return 1
    version = subprocess.run([os.path.join(ROOT, ".venv-litellm", "bin", "python"), "-c",
                              "import importlib.metadata as m; print(m.version('litellm'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    upstream_port = free_port()
    upstream = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "fake_vllm.py"), "--port",
                                 str(upstream_port), "--served-model", "fast", "--name", "bench", "--api-key", "k",
                                 "--cadence-ms", "20"])
    wait(upstream_port, "/health")
    env = dict(os.environ, VLLM_API_KEY_BENCH="k", LITELLM_MASTER_KEY="sk-bench-" + os.urandom(8).hex())
    direct = dict((n, measure("http://127.0.0.1:%d" % upstream_port, "k", n)) for n in STREAMS)
    results = {"litellm_version": version, "cpus": os.cpu_count(), "machine": platform.platform(),
               "upstream": "tools/fake_vllm.py, 8 chunks 20 ms apart", "direct": direct, "settings": {}}
    role_workers = (os.cpu_count() or 3) + 1
    for label, workers, log_level, prometheus in (
            ("litellm defaults (1 worker)", None, None, False),
            ("role defaults (%d workers, ERROR, prometheus)" % role_workers, role_workers, "ERROR", True),
            ("role, litellm_prometheus false", role_workers, "ERROR", False)):
        proc, port = run_proxy(config(upstream_port, prometheus), workers, log_level, env)
        try:
            rows = {}
            for n in STREAMS:
                proxied = measure("http://127.0.0.1:%d" % port, env["LITELLM_MASTER_KEY"], n)
                rows[n] = {"proxied": proxied,
                           "added_ttft_p50_ms": round(proxied["ttft_p50_ms"] - direct[n]["ttft_p50_ms"], 1),
                           "added_ttft_p99_ms": round(proxied["ttft_p99_ms"] - direct[n]["ttft_p99_ms"], 1),
                           "gap_p99_ms": proxied["gap_p99_ms"]}
            results["settings"][label] = rows
            if label.startswith("role defaults"):
                results["tls_proxy"] = tls_hop(port, env["LITELLM_MASTER_KEY"], direct, rows)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    upstream.terminate()
    out = os.path.join(ROOT, "bench", "results", "litellm-overhead.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print("LiteLLM %s overhead (added TTFT p50/p99 ms, gap p99 ms) on %d CPUs" % (version, os.cpu_count()))
    for label, rows in results["settings"].items():
        for n, row in rows.items():
            print("  %-46s %2d streams: +%6.1f / +%6.1f   gap p99 %6.1f  errors %d"
                  % (label, n, row["added_ttft_p50_ms"], row["added_ttft_p99_ms"], row["gap_p99_ms"] or 0,
                     row["proxied"]["errors"]))
    for server, rows in results.get("tls_proxy", {}).items():
        if isinstance(rows, str):
            print("  tls_proxy %s: %s" % (server, rows))
            continue
        for n, row in rows.items():
            print("  tls_proxy %-6s + role LiteLLM %2d streams: +%6.1f / +%6.1f vs direct (TLS hop %+6.1f / %+6.1f)"
                  "   gap p99 %6.1f  errors %d"
                  % (server, n, row["added_ttft_p50_ms"], row["added_ttft_p99_ms"], row["tls_hop_ttft_p50_ms"],
                     row["tls_hop_ttft_p99_ms"], row["gap_p99_ms"] or 0, row["proxied"]["errors"]))
    print("written to %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
