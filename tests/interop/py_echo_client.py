#!/usr/bin/env python3
"""Echo client peer (Python `websockets`), for rapidws interop tests.

    tests/interop/.venv/bin/python tests/interop/py_echo_client.py ws://127.0.0.1:PORT/ [--no-compression]

Connects (offering permessage-deflate unless --no-compression), sends a text message with
multi-byte characters, a binary message with every byte value, and a 16 MiB binary
message; checks that each comes back identical and of the same type; closes with 1000 and
checks the server answered 1000. Prints `PASS` and exits 0, or prints what went wrong to
stderr and exits 1. The whole run is bounded by --timeout seconds (default 60).
"""

import argparse
import asyncio
import random
import sys

from websockets.asyncio.client import connect

MAX_MESSAGE = 64 << 20


def describe(m) -> str:
    kind = "text" if isinstance(m, str) else "binary"
    return f"{kind} of {len(m)} {'chars' if kind == 'text' else 'bytes'}"


async def run(url: str, compression: bool) -> None:
    messages = [
        "héllo wörld — ✓ 𝄞 日本語 🚀",
        bytes(range(256)) * 4,
        random.Random(6455).randbytes(16 << 20),
    ]
    async with connect(url, compression="deflate" if compression else None, max_size=MAX_MESSAGE,
                       proxy=None, ping_interval=None) as ws:
        ext = ws.response.headers.get("Sec-WebSocket-Extensions", "none")
        print(f"connected to {url}; extensions: {ext}", flush=True)
        for sent in messages:
            await ws.send(sent)
            got = await ws.recv()
            if type(got) is not type(sent) or got != sent:
                raise AssertionError(f"echo mismatch: sent {describe(sent)}, got {describe(got)}")
            print(f"echoed {describe(sent)}", flush=True)
        await ws.close(1000, "done")
        if ws.close_code != 1000:
            raise AssertionError(f"server answered the close with code {ws.close_code}, want 1000")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--no-compression", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    try:
        asyncio.run(asyncio.wait_for(run(args.url, not args.no_compression), args.timeout))
    except Exception as e:  # noqa: BLE001 - any failure is a failed interop run
        print(f"FAIL: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
