"""A stand-in for one vLLM OpenAI-compatible server, for tests and benchmarks on a machine without a GPU.

vLLM itself cannot run here (no GPU). This double answers the parts of vLLM's OpenAI API that the gateway
uses, in vLLM's shapes: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream``
with ``data:`` SSE chunks and ``data: [DONE]``, ``stream_options.include_usage``), bearer-key auth like
``vllm serve --api-key`` (401 otherwise) and 404 for a model it does not serve. Streams emit ``--tokens``
chunks ``--cadence-ms`` apart, so a client can measure time to first token and the gaps through a proxy.
Each content chunk names the upstream (``--name``), so tests can tell which deployment answered.
``GET /stats`` returns how many completions it served.

    python tools/fake_vllm.py --port 18401 --served-model fast --name gpu-a --api-key KEY
"""

import argparse
import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.completions = 0


def make_handler(state):
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            return

        def _json(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorised(self):
            if not args.api_key:
                return True
            if self.headers.get("Authorization", "") == "Bearer " + args.api_key:
                return True
            self._json(401, {"error": "Unauthorized"})
            return False

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                self._json(200, {})
            elif self.path == "/stats":
                with state.lock:
                    self._json(200, {"name": args.name, "completions": state.completions})
            elif self.path == "/v1/models":
                if self._authorised():
                    self._json(200, {"object": "list", "data": [
                        {"id": args.served_model, "object": "model", "owned_by": "vllm", "max_model_len": 4096}]})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length) if length else b"{}"
            if self.path not in ("/v1/chat/completions", "/v1/completions"):
                self._json(404, {"detail": "Not Found"})
                return
            if not self._authorised():
                return
            try:
                request = json.loads(raw)
            except ValueError:
                self._json(400, {"object": "error", "message": "invalid JSON", "type": "BadRequestError",
                                 "code": 400})
                return
            if request.get("model") != args.served_model:
                self._json(404, {"object": "error", "type": "NotFoundError", "code": 404, "param": None,
                                 "message": "The model `%s` does not exist." % request.get("model")})
                return
            with state.lock:
                state.completions += 1
            created = int(time.time())
            ident = "chatcmpl-%s-%d" % (args.name, time.monotonic_ns())
            tokens = int(request.get("max_tokens") or args.tokens)
            tokens = min(tokens, args.tokens)
            if request.get("stream"):
                self._stream(ident, created, tokens, bool((request.get("stream_options") or {}).get("include_usage")))
            else:
                time.sleep(args.cadence_ms * tokens / 1000.0)
                self._json(200, {
                    "id": ident, "object": "chat.completion", "created": created, "model": args.served_model,
                    "choices": [{"index": 0, "finish_reason": "length",
                                 "message": {"role": "assistant", "content": (args.name + " ") * tokens}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens}})

        def _chunk(self, payload):
            data = b"data: " + payload + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _stream(self, ident, created, tokens, usage):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": args.served_model}
            try:
                self._chunk(json.dumps(dict(base, choices=[
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])).encode())
                for _token in range(tokens):
                    time.sleep(args.cadence_ms / 1000.0)
                    self._chunk(json.dumps(dict(base, choices=[
                        {"index": 0, "delta": {"content": args.name + " "}, "finish_reason": None}])).encode())
                self._chunk(json.dumps(dict(base, choices=[
                    {"index": 0, "delta": {}, "finish_reason": "length"}])).encode())
                if usage:
                    self._chunk(json.dumps(dict(base, choices=[], usage={
                        "prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens})).encode())
                self._chunk(b"[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


class QuietServer(ThreadingHTTPServer):
    """Clients that hang up mid-stream (killed proxies, benchmarks ending) are not errors of the double."""

    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            ThreadingHTTPServer.handle_error(self, request, client_address)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model", required=True)
    parser.add_argument("--name", default="upstream")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--cadence-ms", type=float, default=20.0)
    args = parser.parse_args(argv)
    server = QuietServer((args.host, args.port), make_handler(State(args)))
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
