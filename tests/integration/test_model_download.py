"""Model downloads that were killed half-way are completed on the next run (issue #34 item 4), with the real
`hf download` (huggingface_hub from make setup's venv) and the vllm_model_download module run by ansible-playbook.

The test double: the Hugging Face Hub (no internet here). A small HTTP server on loopback speaks the part of the
Hub's API that `hf download` and the module use - the revision's commit (/api/models/REPO/revision/REV), the tree
listing (/api/models/REPO/tree/COMMIT, with LFS sizes and sha256), and the files (HEAD and GET
/REPO/resolve/COMMIT/PATH with X-Repo-Commit, ETag, sizes and Range) - for one repository of three files: a small
config.json, a 24 MiB model.safetensors (LFS) sent slowly enough to kill the download in the middle of it (hf
writes in 10 MiB pieces), and a
consolidated.safetensors the role excludes. Everything else (the CLI, the cache, the module) is real.

Before this, the vllm role took a model whose `snapshots/` directory existed as downloaded: a download killed after
config.json had arrived was never completed (the first assertion below shows that state)."""

import hashlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import BIN, parse_json_report, playbook

pytestmark = pytest.mark.slow
REPO = "llmstack-test/tiny"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CHUNK = 64 * 1024


def git_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub:
    """The Hub double: one repository; counts the requests; sends model.safetensors at ``rate`` bytes a second."""

    def __init__(self):
        weights = os.urandom(24 * 1024 * 1024)
        self.files = {"config.json": (b'{"model_type": "llama"}\n', False),
                      "model.safetensors": (weights, True),
                      "consolidated.safetensors": (os.urandom(4096), True)}
        self.rate = None
        self.requests = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _json(self, data):
                body = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self, head):
                path = self.path.split("?")[0]
                prefix = "/%s/resolve/" % REPO
                rest = path[len(prefix):].split("/", 1)
                if not path.startswith(prefix) or len(rest) != 2 or rest[1] not in hub.files:
                    self.send_error(404)
                    return
                data, lfs = hub.files[rest[1]]
                etag = hashlib.sha256(data).hexdigest() if lfs else git_oid(data)
                start = 0
                ranged = self.headers.get("Range")
                if ranged and ranged.startswith("bytes=") and not head:
                    start = int(ranged[6:].split("-")[0])
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", '"%s"' % etag)
                if lfs:
                    self.send_header("X-Linked-Etag", '"%s"' % etag)
                    self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(data) - start))
                if start:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
                self.end_headers()
                if head:
                    return
                slow = lfs and hub.rate
                for offset in range(start, len(data), CHUNK):
                    self.wfile.write(data[offset:offset + CHUNK])
                    self.wfile.flush()
                    if slow:
                        time.sleep(CHUNK / hub.rate)

            def do_HEAD(self):  # noqa: N802
                hub.requests.append(("HEAD", self.path))
                self._file(True)

            def do_GET(self):  # noqa: N802
                hub.requests.append(("GET", self.path))
                path = self.path.split("?")[0]
                if path.startswith("/api/models/%s/revision/" % REPO):
                    self._json({"id": REPO, "modelId": REPO, "sha": COMMIT, "private": False,
                                "siblings": [{"rfilename": name} for name in sorted(hub.files)]})
                elif path.startswith("/api/models/%s/tree/" % REPO):
                    entries = []
                    for name in sorted(hub.files):
                        data, lfs = hub.files[name]
                        entry = {"type": "file", "path": name, "size": len(data), "oid": git_oid(data)}
                        if lfs:
                            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                            "pointerSize": 134}
                        entries.append(entry)
                    self._json(entries)
                else:
                    self._file(False)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub():
    server = Hub()
    yield server
    server.close()


def partial_size(folder, etag):
    """Bytes of the weights' partial file so far (0 while there is none: hf writes in 10 MiB pieces)."""
    total = 0
    for path in (folder / "blobs").glob(etag + ".*.incomplete"):
        try:
            total = max(total, path.stat().st_size)
        except OSError:
            continue
    return total


def hf_env(home, hub):
    env = dict(os.environ, HF_HOME=str(home), HF_ENDPOINT=hub.url, HF_HUB_DISABLE_XET="1",
               HF_HUB_DISABLE_TELEMETRY="1")
    env.pop("HF_TOKEN", None)
    return env


def run_module(tmp_path, home, endpoint, *extra, download=True):
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False, "tasks": [{
            "name": "Download", "register": "result",
            "pvegpu.llmstack.vllm_model_download": {
                "model": REPO, "hf_home": str(home), "hf": os.path.join(BIN, "hf"), "endpoint": endpoint,
                "exclude": ["*consolidated*"], "download": download}},
            {"name": "Show", "ansible.builtin.debug": {"var": "result"}}]}]))
    rc, out, err = playbook(str(play), "-i", "localhost,", "-c", "local", "-e",
                            "ansible_python_interpreter=" + sys.executable, *extra, json_output=True)
    report = parse_json_report(out)
    results = [t for p in report["plays"] for t in p["tasks"] if t["task"]["name"] == "Download"]
    return rc, results[0]["hosts"]["localhost"] if results else {}, out + err


def test_a_killed_download_is_completed_and_recorded_and_the_rerun_asks_nothing(tmp_path, hub):
    home = tmp_path / "hf"
    folder = home / "hub" / ("models--" + REPO.replace("/", "--"))
    snapshot = folder / "snapshots" / COMMIT
    # 24 MiB at 4 MiB/s: `hf download` is killed once its first 10 MiB piece is on disk, before the end.
    hub.rate = 4 * 1024 * 1024
    proc = subprocess.Popen([os.path.join(BIN, "hf"), "download", REPO, "--exclude", "*consolidated*"],
                            env=hf_env(home, hub), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    weights = hashlib.sha256(hub.files["model.safetensors"][0]).hexdigest()
    deadline = time.time() + 60
    while time.time() < deadline and partial_size(folder, weights) == 0:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # What the old role looked at: snapshots/ exists, so it took the model as downloaded.
    assert (folder / "snapshots").is_dir() and (snapshot / "config.json").exists()
    assert not (snapshot / "model.safetensors").exists()
    assert 0 < partial_size(folder, weights) < len(hub.files["model.safetensors"][0])

    # Reported as partial without changing anything (the role's verify), in check mode as well.
    rc, result, out = run_module(tmp_path, home, hub.url, download=False)
    assert rc == 0 and result["complete"] is False and result["changed"] is False, out[-3000:]
    assert any(".incomplete" in left for left in result["leftovers"])
    rc, result, out = run_module(tmp_path, home, hub.url, "--check")
    assert rc == 0 and result["changed"] is True and list((folder / "blobs").glob("*.incomplete")), out[-3000:]

    hub.rate = None
    rc, result, out = run_module(tmp_path, home, hub.url)
    assert rc == 0 and result["changed"] is True and result["complete"] is True, out[-3000:]
    for name in ("config.json", "model.safetensors"):
        assert (snapshot / name).read_bytes() == hub.files[name][0], name
    assert not (snapshot / "consolidated.safetensors").exists()
    assert not list((folder / "blobs").glob("*.incomplete"))  # the killed download's partial file is gone
    assert json.loads((folder / ".llmstack-download.main.json").read_text())["commit"] == COMMIT

    # The rerun checks the cache against its record: no change, no request to the Hub.
    asked = len(hub.requests)
    rc, result, out = run_module(tmp_path, home, hub.url)
    assert rc == 0 and result["changed"] is False and result["complete"] is True, out[-3000:]
    assert len(hub.requests) == asked

    # A file damaged afterwards (here: cut short) makes the model incomplete again, and the next run repairs it.
    blob = os.path.realpath(snapshot / "model.safetensors")
    with open(blob, "r+b") as handle:
        handle.truncate(1000)
    rc, result, out = run_module(tmp_path, home, hub.url, download=False)
    assert result["complete"] is False and any("model.safetensors" in m for m in result["missing"]), out[-3000:]


def test_a_download_that_fails_is_named_and_not_recorded(tmp_path, hub):
    home = tmp_path / "hf"
    rc, result, out = run_module(tmp_path, home, hub.url + "/no-such-hub")
    assert rc != 0 and "hf download llmstack-test/tiny failed" in out, out[-3000:]
    assert not (home / "hub" / ("models--" + REPO.replace("/", "--")) / ".llmstack-download.main.json").exists()


def test_the_vllm_role_completes_a_download_an_earlier_run_left_half_way(tmp_path, hub):
    """The vllm role's own download tasks (roles/vllm/tasks/download.yml), with the Hugging Face CLI of make setup's
    venv as its tools venv, after a killed `hf download`: the model ends complete."""
    home = tmp_path / "hf"
    folder = home / "hub" / ("models--" + REPO.replace("/", "--"))
    hub.rate = 4 * 1024 * 1024
    proc = subprocess.Popen([os.path.join(BIN, "hf"), "download", REPO, "--exclude", "*consolidated*"],
                            env=hf_env(home, hub), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (folder / "snapshots" / COMMIT / "config.json").exists():
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (folder / "snapshots").is_dir() and not (folder / "snapshots" / COMMIT / "model.safetensors").exists()
    hub.rate = None
    play = tmp_path / "role.yml"
    play.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"vllm_plan_result": {"services": [{"model": REPO}]}, "vllm_hf_home": str(home),
                 "vllm_tools_venv": os.path.dirname(BIN), "vllm_hf_endpoint": hub.url},
        "tasks": [{"ansible.builtin.include_role": {"name": "pvegpu.llmstack.vllm", "tasks_from": "download"}}]}]))
    rc, out, err = playbook(str(play), "-i", "localhost,", "-c", "local", "-e",
                            "ansible_python_interpreter=" + sys.executable)
    assert rc == 0, out[-3000:] + err[-2000:]
    assert (folder / "snapshots" / COMMIT / "model.safetensors").read_bytes() == hub.files["model.safetensors"][0]
