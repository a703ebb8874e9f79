#!/usr/bin/env python3
"""Echo client peer (Python `websockets`), for rapidws interop tests.

    tests/interop/.venv/bin/python tests/interop/py_echo_client.py ws://127.0.0.1:PORT/ [--no-compression]

Connects (offering permessage-deflate unless --no-compression) and sends, one at a time,
the messages of the interop script (the same list in node_echo_client.js and
tests/interop_peers.rs; keep the three in step):

    0  text    "héllo wörld — ✓ 𝄞 日本語 🚀"                 (multi-byte)
    1  text    that string 4096 times                        (~160 KB, many frames' worth)
    2  binary  bytes 0..=255, 4 times                        (every byte value)
    3  text    ""                                            (empty)
    4  binary  b""                                           (empty)
    5  binary  16 MiB: a 256 KiB block repeated 64 times, the block being
               SHA-1("rapidws-0") SHA-1("rapidws-1") ... truncated to 256 KiB
    6  text    the string of 0 three times, sent as 3 fragments (continuation frames)

checking that each comes back identical and of the same type; then sends a ping with
payload "rapidws ping" and waits for its pong; then closes with 1000 and checks the
server answered 1000. Prints `PASS` and exits 0, or prints what went wrong to
stderr and exits 1. The whole run is bounded by --timeout seconds (default 60).
"""

import argparse
import asyncio
import hashlib
import sys

from websockets.asyncio.client import connect

MAX_MESSAGE = 64 << 20
TEXT = "héllo wörld — ✓ 𝄞 日本語 🚀"
BIG = 16 << 20
BIG_BLOCK = 256 << 10


def sha1_stream(n: int) -> bytes:
    """SHA-1 in counter mode: deterministic, incompressible, cheap in every language."""
    out = b"".join(hashlib.sha1(f"rapidws-{i}".encode()).digest() for i in range((n + 19) // 20))
    return out[:n]


def script() -> list:
    return [TEXT, TEXT * 4096, bytes(range(256)) * 4, "", b"", sha1_stream(BIG_BLOCK) * (BIG // BIG_BLOCK),
            [TEXT, TEXT, TEXT]]


def describe(m) -> str:
    kind = "text" if isinstance(m, str) else "binary"
    return f"{kind} of {len(m)} {'chars' if kind == 'text' else 'bytes'}"


async def run(url: str, compression: bool) -> None:
    async with connect(url, compression="deflate" if compression else None, max_size=MAX_MESSAGE,
                       proxy=None, ping_interval=None) as ws:
        ext = ws.response.headers.get("Sec-WebSocket-Extensions", "none")
        print(f"connected to {url}; extensions: {ext}", flush=True)
        for sent in script():
            # A list is sent as a fragmented message; its echo is the joined text.
            await ws.send(sent)
            if isinstance(sent, list):
                sent = "".join(sent)
            got = await ws.recv()
            if type(got) is not type(sent) or got != sent:
                raise AssertionError(f"echo mismatch: sent {describe(sent)}, got {describe(got)}")
            print(f"echoed {describe(sent)}", flush=True)
        pong = await ws.ping(b"rapidws ping")
        await asyncio.wait_for(pong, 10)
        print("ping answered", flush=True)
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
