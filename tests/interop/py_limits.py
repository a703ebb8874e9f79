#!/usr/bin/env python3
"""A server's limits as Python `websockets` meets them, for rapidws interop tests.

    tests/interop/.venv/bin/python tests/interop/py_limits.py URL big
    tests/interop/.venv/bin/python tests/interop/py_limits.py URL refused [--tries 20]

`big` (permessage-deflate on, which websockets uses to compress a whole message into one
frame): sends 16 MiB of incompressible bytes (SHA-1 in counter mode, as in
py_echo_client.py) and checks the echo; then sends 16 MiB + 1 byte on the same connection
and checks that the server closes with 1009. Both are compressed single frames a little
larger than 16 MiB on the wire (a stored block's 5 bytes per 2 KiB at websockets'
memLevel 5).

`refused` (no compression): `--tries` times each, on a fresh connection, sends something
the server must refuse and keeps sending while it is refused, then reports the close code
it read from the server:

    too_big   a 32 MiB binary message (past a 16 MiB limit): 1009
    protocol  a frame with the reserved opcode 0x3 announcing 12 MiB, and its 12 MiB: 1002
    utf8      a text frame of 12 MiB whose first byte is 0xFF: 1007

The two raw frames are written straight to the transport, masked with a zero key.
Prints one line per try, then `PASS` and exits 0 when every try read its code, or `FAIL`
with the tally and exits 1. Bounded by --timeout seconds (default 120).
"""

import argparse
import asyncio
import hashlib
import struct
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

BIG = 16 << 20
EXPECTED = {"too_big": 1009, "protocol": 1002, "utf8": 1007}


def sha1_stream(n: int) -> bytes:
    """SHA-1 in counter mode: deterministic, incompressible."""
    out = b"".join(hashlib.sha1(f"rapidws-{i}".encode()).digest() for i in range((n + 19) // 20))
    return out[:n]


def masked_frame(b0: int, payload: bytes) -> bytes:
    """A client frame with a zero masking key (the payload goes as it is)."""
    return bytes([b0, 0x80 | 127]) + struct.pack(">Q", len(payload)) + b"\0\0\0\0" + payload


async def big(url: str) -> None:
    async with connect(url, compression="deflate", max_size=None, ping_interval=None,
                       proxy=None) as ws:
        ext = ws.response.headers.get("Sec-WebSocket-Extensions", "none")
        print(f"connected; extensions: {ext}", flush=True)
        data = sha1_stream(BIG)
        await ws.send(data)
        echo = await ws.recv()
        if echo != data:
            raise AssertionError(f"the echo of 16 MiB differs ({len(echo)} bytes)")
        print("16 MiB echoed", flush=True)
        try:
            await ws.send(sha1_stream(BIG + 1))
            await ws.recv()
        except ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd else None
        else:
            raise AssertionError("16 MiB + 1 byte was accepted")
        if code != 1009:
            raise AssertionError(f"16 MiB + 1 byte: close code {code}, want 1009")
        print("16 MiB + 1 byte: 1009", flush=True)


async def refuse_once(url: str, kind: str) -> int | None:
    ws = await connect(url, compression=None, max_size=None, ping_interval=None, proxy=None,
                       close_timeout=5)
    code = None
    try:
        if kind == "too_big":
            await ws.send(bytes(32 << 20))
        elif kind == "protocol":
            ws.transport.write(masked_frame(0x83, bytes(12 << 20)))
        else:
            ws.transport.write(masked_frame(0x81, b"\xff" + bytes((12 << 20) - 1)))
        await ws.recv()
    except ConnectionClosed as e:
        code = e.rcvd.code if e.rcvd else None
    # The connection is closed by now; websockets' own close() may trip over the raw
    # writes it did not make.
    await ws.wait_closed()
    return code


async def refused(url: str, tries: int) -> None:
    failures = []
    for kind, want in EXPECTED.items():
        got = []
        for i in range(tries):
            code = await refuse_once(url, kind)
            got.append(code)
            print(f"refused {kind} try {i + 1}: close code {code}", flush=True)
        ok = sum(1 for c in got if c == want)
        print(f"{kind}: {ok} of {tries} read {want}", flush=True)
        if ok != tries:
            failures.append(f"{kind}: {ok} of {tries} read {want} (got {got})")
    if failures:
        raise AssertionError("; ".join(failures))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("mode", choices=["big", "refused"])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    run = big(args.url) if args.mode == "big" else refused(args.url, args.tries)
    try:
        asyncio.run(asyncio.wait_for(run, args.timeout))
    except Exception as e:  # noqa: BLE001 - any failure is a failed run
        print(f"FAIL: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
