# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serve the lab's stand-in PVE API: fakepve (PVE's own schema) on loopback, one node per PVE host.

    python tools/lab_fakepve.py --port 18006 --password-file .cache/lab/pve_api_password --nodes lab-pve-a,lab-pve-b

fakepve's own CLI always has a node 'pve1'; the lab's nodes carry the inventory names of the PVE hosts.
Binds only to a loopback address (refuses any other).
"""

import argparse
import asyncio
import ipaddress
import os
import shutil
import sys
import tempfile


def _loopback(text):
    if text != "localhost" and not ipaddress.ip_address(text).is_loopback:
        raise argparse.ArgumentTypeError("%s is not a loopback address" % text)
    return text


async def serve(args):
    from fakepve.certs import make_cert
    from fakepve.server import FakePve

    with open(args.password_file) as handle:
        password = handle.read().strip()
    pve = FakePve(user=args.user, password=password, host=args.host, port=args.port)
    pve.time_scale = 0
    pve.cluster_name = args.cluster
    pve.nodes.clear()
    for node in [n for n in args.nodes.split(",") if n]:
        pve.add_node(node)
    tmp = tempfile.mkdtemp(prefix="llmstack-fakepve-")
    try:
        certfile, keyfile, dummy_der = make_cert(tmp, hosts=(args.host,))
        await pve.start(certfile, keyfile)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("fakepve listening on https://%s:%d (nodes: %s)" % (args.host, args.port, ", ".join(sorted(pve.nodes))),
          flush=True)
    await asyncio.Event().wait()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--host", type=_loopback, default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18006)
    parser.add_argument("--user", default="root@pam")
    parser.add_argument("--password-file", required=True)
    parser.add_argument("--nodes", required=True, help="comma-separated node names")
    parser.add_argument("--cluster", default="llmstack-lab")
    args = parser.parse_args(argv)
    if not os.path.exists(args.password_file):
        parser.error("no password file %s" % args.password_file)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
