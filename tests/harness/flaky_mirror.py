"""A test double of a Debian mirror that is away for a moment: an HTTP proxy for apt (Acquire::http::Proxy) that
answers 503 Service Unavailable to every request for ``--down`` seconds from the first request it gets, then passes
requests on to the real mirror (the absolute URL apt asks a proxy for). Each answer is logged as "<status> <url>" to
``--log``, so that a test reads what apt was told and when it asked again.

Stdlib only: it runs inside the test's container (its loopback), with the container's python3.
    python3 flaky_mirror.py --port 3142 --down 8 --log /tmp/flaky-mirror.log"""

import argparse
import http.server
import threading
import time
import urllib.error
import urllib.request

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


def handler(down, log):
    lock = threading.Lock()
    first = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def record(self, status):
            with lock, open(log, "a") as handle:
                handle.write("%d %s\n" % (status, self.path))

        def do_GET(self):
            with lock:
                if not first:
                    first.append(time.monotonic())
                away = time.monotonic() - first[0] < down
            if away:
                self.send_response(503, "Service Unavailable")
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.record(503)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | {"host"}}
            request = urllib.request.Request(self.path, headers=headers, method=self.command)
            try:
                answer = urllib.request.urlopen(request, timeout=60)
            except urllib.error.HTTPError as error:
                answer = error
            body = answer.read()
            self.send_response(answer.status if hasattr(answer, "status") else answer.code)
            for key, value in answer.headers.items():
                if key.lower() not in HOP | {"content-length"}:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.record(answer.status if hasattr(answer, "status") else answer.code)

        do_HEAD = do_GET

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=3142)
    parser.add_argument("--down", type=float, required=True, help="seconds of 503 from the first request")
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.down, args.log))
    server.serve_forever()


if __name__ == "__main__":
    main()
