"""A stand-in for one vLLM OpenAI-compatible server, for tests and benchmarks on a machine without a GPU.

vLLM itself cannot run here (no GPU). This double answers the parts of vLLM's OpenAI API that the gateway
uses, in vLLM's shapes: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream``
with ``data:`` SSE chunks and ``data: [DONE]``, ``stream_options.include_usage``), bearer-key auth like
``vllm serve --api-key`` (401 otherwise) and 404 for a model it does not serve. Streams emit ``--tokens``
chunks ``--cadence-ms`` apart, so a client can measure time to first token and the gaps through a proxy.
Each content chunk names the upstream (``--name``), so tests can tell which deployment answered.
``GET /stats`` returns how many completions it served; ``GET /metrics`` a few of vLLM's own gauges and counters
(``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:gpu_cache_usage_perc``,
``vllm:request_success_total``), so Prometheus scrapes it as it scrapes vLLM.

    python tools/fake_vllm.py --port 18401 --served-model fast --name gpu-a --api-key KEY

``--vllm-cli`` takes vLLM's own command line instead (what the lab's stand-in image and stand-in ``vllm`` executable
are started with): ``[serve] [MODEL] [--model MODEL] [--served-model-name NAME] [--host H] [--port P] ...``, every
other vLLM flag accepted and ignored, the key from ``--api-key`` or ``VLLM_API_KEY`` as vLLM reads it, host and port
defaulting to vLLM's 0.0.0.0:8000, the name from ``LLMSTACK_STANDIN_NAME`` or the host name.
"""

import argparse
import contextlib
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.completions = 0
        self.running = 0


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
            elif self.path == "/metrics":
                self._metrics()
            elif self.path == "/v1/models":
                if self._authorised():
                    self._json(200, {"object": "list", "data": [
                        {"id": args.served_model, "object": "model", "owned_by": "vllm", "max_model_len": 4096}]})
            else:
                self._json(404, {"detail": "Not Found"})

        def _metrics(self):
            with state.lock:
                running, served = state.running, state.completions
            labels = '{model_name="%s"}' % args.served_model
            lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                     "# TYPE vllm:num_requests_running gauge", "vllm:num_requests_running%s %d" % (labels, running),
                     "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                     "# TYPE vllm:num_requests_waiting gauge", "vllm:num_requests_waiting%s 0" % labels,
                     "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
                     "# TYPE vllm:gpu_cache_usage_perc gauge",
                     "vllm:gpu_cache_usage_perc%s %g" % (labels, min(1.0, 0.05 * running)),
                     "# HELP vllm:request_success_total Count of successfully processed requests.",
                     "# TYPE vllm:request_success_total counter",
                     "vllm:request_success_total%s %d" % (labels, served)]
            body = ("\n".join(lines) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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
                state.running += 1
            try:
                self._complete(request)
            finally:
                with state.lock:
                    state.running -= 1

        def _complete(self, request):
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


def vllm_cli(argv):
    """The stand-in's settings from vLLM's own command line (``vllm serve MODEL ...`` or the image's flags)."""
    parser = argparse.ArgumentParser(prog="vllm")
    parser.add_argument("words", nargs="*")
    parser.add_argument("--model", default="")
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", default=os.environ.get("VLLM_API_KEY", ""))
    args, dummy_unknown = parser.parse_known_args(argv)
    words = [w for w in args.words if w != "serve"]
    model = args.model or (words[0] if words else "")
    if not model:
        parser.error("no model given (vllm serve MODEL, or --model MODEL)")
    served = (args.served_model_name or [model])[0]
    name = os.environ.get("LLMSTACK_STANDIN_NAME") or socket.gethostname()
    return argparse.Namespace(host=args.host, port=args.port, served_model=served, name=name, api_key=args.api_key,
                              tokens=8, cadence_ms=20.0)


def main(argv=None):
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--vllm-cli"]:
        args = vllm_cli(argv[1:])
        serve(args)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model", required=True)
    parser.add_argument("--name", default="upstream")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--cadence-ms", type=float, default=20.0)
    serve(parser.parse_args(argv))


def serve(args):
    server = QuietServer((args.host, args.port), make_handler(State(args)))
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main()
