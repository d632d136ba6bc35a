"""A stand-in for LiteLLM's key-management API, for tests on a machine where LiteLLM's DB tier cannot run.

LiteLLM keeps virtual keys in PostgreSQL through prisma, whose engine binaries come from a host this machine
cannot reach (../shared/HARNESS.md), so ``/key/*`` of the real proxy answers "No connected db." here. This
double follows the shapes of LiteLLM 1.108.7 (litellm/proxy/management_endpoints/key_management_endpoints.py,
litellm/proxy/_types.py GenerateKeyResponse; docs.litellm.ai "Virtual Keys"):

- every call needs ``Authorization: Bearer <master key>``; otherwise 401 ``{"error": {"message", "type":
  "auth_error", "code": "401"}}``;
- ``POST /key/generate`` {key_alias, models, max_budget, ...} -> 200 {"key": "sk-...", "token": <sha256>,
  "key_alias", ...}; an alias already in use -> 400 (LiteLLM enforces unique aliases);
- ``GET /key/list?key_alias=A&return_full_object=true`` -> {"keys": [full objects], "total_count",
  "current_page", "total_pages"} (without return_full_object: the hashes only);
- ``POST /key/update`` {key: <key or hash>, fields...} -> 200 the updated object (a merge patch); unknown -> 404;
- ``POST /key/delete`` {"keys": [...]} or {"key_aliases": [...]} -> {"deleted_keys": [...]}; none found -> 404;
- ``GET /key/info?key=K`` -> {"key": K, "info": {...}};
- ``GET /health/liveliness`` -> 200 without a key (the role probes it in check mode).
Stored keys hold the hash only, as LiteLLM does. ``GET /_calls`` (not LiteLLM's) lists the calls it got,
so tests can assert that check mode changed nothing.

    python tools/fake_litellm_keys.py --port 18500 --master-key sk-...
"""

import argparse
import hashlib
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

FIELDS = ("models", "max_budget", "budget_duration", "tpm_limit", "rpm_limit", "max_parallel_requests", "metadata")


def make_handler(master_key, store, calls, lock):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            return

        def _send(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status, message, kind="bad_request_error"):
            self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": str(status)}})

        def _auth(self):
            expected = master_key() if callable(master_key) else master_key
            if not expected or self.headers.get("Authorization") != "Bearer " + expected:
                self._error(401, "Authentication Error, Invalid proxy server token passed.", "auth_error")
                return False
            return True

        def _find(self, key):
            token = key if key in store else hashlib.sha256(key.encode()).hexdigest()
            return token if token in store else None

        def do_GET(self):  # noqa: N802
            url = urlsplit(self.path)
            query = dict((k, v[-1]) for k, v in parse_qs(url.query).items())
            if url.path == "/_calls":
                with lock:
                    self._send(200, list(calls))
                return
            if url.path == "/health/liveliness":  # LiteLLM answers this without a key
                self._send(200, "I'm alive!")
                return
            with lock:
                calls.append(["GET", url.path, query])
            if not self._auth():
                return
            with lock:
                if url.path == "/key/list":
                    keys = [v for v in store.values()
                            if "key_alias" not in query or v.get("key_alias") == query["key_alias"]]
                    if query.get("return_full_object") != "true":
                        keys = [v["token"] for v in keys]
                    self._send(200, {"keys": keys, "total_count": len(keys), "current_page": 1, "total_pages": 1})
                elif url.path == "/key/info":
                    token = self._find(query.get("key", ""))
                    if token is None:
                        self._error(404, "Key not found in database.", "not_found_error")
                    else:
                        self._send(200, {"key": query["key"], "info": store[token]})
                else:
                    self._send(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(422, {"detail": [{"msg": "JSON decode error"}]})
                return
            with lock:
                calls.append(["POST", self.path, body])
            if not self._auth():
                return
            with lock:
                if self.path == "/key/generate":
                    alias = body.get("key_alias")
                    if alias and any(v.get("key_alias") == alias for v in store.values()):
                        self._error(400, "Unique key aliases across all keys are required. key_alias=%s already "
                                         "exists." % alias)
                        return
                    key = "sk-" + secrets.token_urlsafe(16)
                    token = hashlib.sha256(key.encode()).hexdigest()
                    record = {"token": token, "key_alias": alias, "spend": 0.0, "models": [], "metadata": {},
                              "max_budget": None, "budget_duration": None, "tpm_limit": None, "rpm_limit": None,
                              "max_parallel_requests": None}
                    record.update({f: body[f] for f in FIELDS if f in body})
                    store[token] = record
                    self._send(200, dict(record, key=key, token=token, token_id=token))
                elif self.path == "/key/update":
                    token = self._find(body.get("key") or "")
                    if token is None:
                        self._error(404, "Key not found: %s" % body.get("key"), "not_found_error")
                        return
                    store[token].update({f: body[f] for f in FIELDS if f in body})
                    self._send(200, store[token])
                elif self.path == "/key/delete":
                    tokens = [self._find(k) for k in body.get("keys") or []]
                    tokens += [t for t, v in store.items() if v.get("key_alias") in (body.get("key_aliases") or [])]
                    tokens = [t for t in tokens if t]
                    if not tokens:
                        self._error(404, "Failed to delete all keys. Keys not found.", "not_found_error")
                        return
                    for token in tokens:
                        store.pop(token, None)
                    self._send(200, {"deleted_keys": tokens})
                else:
                    self._send(404, {"detail": "Not Found"})

    return Handler


def serve(port, master_key, host="127.0.0.1"):
    """Start in a thread; returns (server, store, calls). ``master_key`` may be a function (read per request,
    e.g. from the file the litellm role generates)."""
    store, calls, lock = {}, [], threading.Lock()
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer((host, port), make_handler(master_key, store, calls, lock))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, store, calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--master-key", required=True)
    args = parser.parse_args(argv)
    store, calls, lock = {}, [], threading.Lock()
    ThreadingHTTPServer((args.host, args.port), make_handler(args.master_key, store, calls, lock)).serve_forever()


if __name__ == "__main__":
    main()
