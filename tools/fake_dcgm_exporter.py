# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for dcgm-exporter in the lab (no GPU and no DCGM here): serves a recorded /metrics page.

dcgm-exporter needs an NVIDIA GPU and its DCGM libraries, neither of which exists on this machine. The lab's
image of it (tests/harness/lab) runs this instead: ``GET /metrics`` answers the page dcgm-exporter printed on a
real GPU (tests/fixtures/metrics/dcgm-exporter-tesla-t4.prom, see its SOURCE), so Prometheus scrapes the GPU jobs
as it would and the GPU rules evaluate recorded values. dcgm-exporter's own flags (``-f FILE -c MS``) are accepted
and ignored.

    python tools/fake_dcgm_exporter.py [--metrics FILE] [--listen :9400] [dcgm-exporter flags...]
"""

import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", default="/etc/llmstack-lab/dcgm-metrics.prom")
    parser.add_argument("--listen", "-a", default=":9400")
    args, dummy_ignored = parser.parse_known_args(argv)
    with open(args.metrics, "rb") as handle:
        page = handle.read()
    host, dummy_sep, port = args.listen.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):
            return

        def do_GET(self):  # noqa: N802 (http.server's naming)
            status, body = (200, page) if self.path.split("?")[0] == "/metrics" else (404, b"not found\n")
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler).serve_forever()


if __name__ == "__main__":
    main()
