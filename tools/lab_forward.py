# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A TCP forwarder the lab runs inside its first PVE host's container: the PVE API (fakepve, on this machine's
address on the management bridge) is reached at that PVE host's own address and port 8006, as on a real node - so
every API call of site.yml and the tests passes that host's network_policy table, and a policy that dropped 8006
would cut the next run off exactly as it would on a site.

    python3 lab_forward.py LISTEN_ADDRESS LISTEN_PORT TARGET_ADDRESS TARGET_PORT

Plain bytes both ways (TLS is end to end, fakepve's); standard library only (the lab's base image has python3).
Exits 1 when the listening address is taken (a forwarder already runs there).
"""

import asyncio
import contextlib
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


async def main(listen, listen_port, target, target_port):
    async def handle(client_reader, client_writer):
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(target, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer))

    try:
        server = await asyncio.start_server(handle, listen, listen_port)
    except OSError as error:
        print("lab_forward: %s:%d: %s" % (listen, listen_port, error), file=sys.stderr)
        sys.exit(1)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
