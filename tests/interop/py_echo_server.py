#!/usr/bin/env python3
"""Echo server peer (Python `websockets`), for rapidws interop tests.

    tests/interop/.venv/bin/python tests/interop/py_echo_server.py PORT [--lifetime SECONDS]

Listens on 127.0.0.1:PORT (0 picks a free port) with permessage-deflate offered as
`websockets` does by default, echoes every message (text as text, binary as binary, up
to 64 MiB), and prints `READY <port>` on stdout once it accepts connections. It exits by
itself after --lifetime seconds (default 600), so a test that forgets it leaves nothing.
"""

import argparse
import asyncio
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

MAX_MESSAGE = 64 << 20


async def echo(ws):
    try:
        async for message in ws:
            await ws.send(message)
    except ConnectionClosed:
        pass


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--lifetime", type=float, default=600.0)
    args = parser.parse_args()
    async with serve(echo, "127.0.0.1", args.port, compression="deflate", max_size=MAX_MESSAGE,
                     ping_interval=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"READY {port}", flush=True)
        await asyncio.sleep(args.lifetime)
    print("lifetime over, exiting", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
