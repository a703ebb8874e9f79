#!/usr/bin/env python3
"""Writes the committed seed inputs, fuzz/corpus/<target>/seed-*, for the decoder, inflate,
connection_ops, handshake and simulated_transport targets: one small input per interesting
shape, in each target's input format (documented at the top of each fuzz_targets/*.rs). Run
it from anywhere after changing a format: `python3 fuzz/seeds.py`. It replaces the seed-*
files of the decoder, inflate, connection_ops and simulated_transport targets, adds its own
to the handshake targets, and leaves simd_kernels' alone. Deterministic: the same script
writes the same bytes.

Compressed seeds come from Python's zlib (the C zlib, a different implementation than the
zlib-rs the library inflates with) at several levels and window bits; the round-trip seeds
have the target compress with our own encoder and zlib-rs.
"""

import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
KEY = bytes([0x37, 0xFA, 0x21, 0x3D])  # RFC 6455 5.7's example key

written = {}


def write(target, name, data):
    path = os.path.join(CORPUS, target, "seed-" + name)
    with open(path, "wb") as f:
        f.write(data)
    written.setdefault(target, []).append((name, len(data)))


def clear(target):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.remove(os.path.join(d, f))


# --- lengths (rapidws_fuzz::Reader::length) and fill specs (rapidws_fuzz::Filler) --------

def length(n):
    if n < 0xF0:
        return bytes([n])
    if n <= 0xFFFF:
        return b"\xf0" + struct.pack(">H", n)
    return b"\xff" + struct.pack(">I", n)[1:]


def repeat(byte):
    return bytes([0, byte])


def text(skip=0, whole=True):
    return bytes([2 | (8 if whole else 0), skip])


def noise(seed):
    return bytes([3]) + struct.pack(">I", seed)


def literal(data):
    return bytes([4]) + struct.pack(">H", len(data)) + data


def block(n16, seed):
    return bytes([5, n16]) + struct.pack(">I", seed)


def words(seed):
    return bytes([6]) + struct.pack(">I", seed)


# --- frames ------------------------------------------------------------------------------

def wire_header(b0, length, key=None, form="min"):
    m = 0x80 if key else 0
    if form == "min":
        form = "7" if length < 126 else "16" if length <= 0xFFFF else "64"
    if form == "7":
        h = bytes([b0, m | length])
    elif form == "16":
        h = bytes([b0, m | 126]) + struct.pack(">H", length)
    else:
        h = bytes([b0, m | 127]) + struct.pack(">Q", length)
    return h + (key or b"")


def masked(payload, key):
    return bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def close_payload(code, reason=b""):
    return struct.pack(">H", code) + reason


# --- decoder: selector | ncuts | cuts | body ----------------------------------------------

SERVER, CLIENT, RSV1 = 0, 1, 2
LIMITS_DEFAULT, LIMITS_SMALL, LIMITS_64K, LIMITS_1M = 0, 4, 8, 12
SYNTH = 0x10


def decoder(name, selector, body, cuts=()):
    """`cuts` are fractions of the stream in 1/65536ths."""
    data = bytes([selector, len(cuts)]) + b"".join(struct.pack(">H", c) for c in cuts) + body
    write("decoder", name, data)


def synth_frame(b0, length, fill, key=None, form="min"):
    # Every frame has a fill spec, an empty one too.
    return wire_header(b0, length, key, form) + (fill or repeat(0))


def decoder_seeds():
    clear("decoder")
    server = SERVER | SYNTH
    # Control frames a server receives: ping, pong, closes with each kind of code.
    decoder("ping-pong", server,
            synth_frame(0x89, 5, literal(b"hello"), KEY)
            + synth_frame(0x8A, 5, literal(b"hello"), KEY)
            + synth_frame(0x89, 0, b"", KEY))
    for code, reason in [(1000, b""), (1001, b"going away"), (1009, "too big \u00e9".encode()),
                         (1013, b"try again later"), (3000, b""), (4999, b"x")]:
        decoder(f"close-{code}", server,
                synth_frame(0x88, 2 + len(reason), literal(close_payload(code, reason)), KEY))
    for code in [1005, 1006, 1015, 999, 5000]:
        decoder(f"close-{code}-refused", server,
                synth_frame(0x88, 2, literal(close_payload(code)), KEY))
    decoder("close-empty-and-1-byte", server,
            synth_frame(0x88, 0, b"", KEY) + synth_frame(0x88, 1, literal(b"\x03"), KEY))
    decoder("close-reason-bad-utf8", server,
            synth_frame(0x88, 4, literal(close_payload(1000, b"\xc3\x28")), KEY))
    # A fragmented text message whose fragments end inside code points, a ping between
    # them, fed in pieces cut inside frames too.
    decoder("fragmented-text-split-code-point", server,
            synth_frame(0x01, 7, text(whole=False), KEY)
            + synth_frame(0x89, 2, literal(b"hi"), KEY)
            + synth_frame(0x00, 5, text(whole=False), KEY)
            + synth_frame(0x80, 13, text(whole=True), KEY),
            cuts=(9000, 30000, 52000))
    decoder("fragmented-text-bad-utf8", server,
            synth_frame(0x01, 3, literal("a\u20ac".encode()[:3]), KEY)
            + synth_frame(0x80, 2, literal(b"\xff\xfe"), KEY))
    # 70 KiB frames: 127-length, masked text and binary; unmasked to a client.
    decoder("frame-70k-127-text", server,
            synth_frame(0x81, 70 * 1024, text(), KEY), cuts=(100, 20000, 40000, 65000))
    decoder("frame-70k-127-noise", server, synth_frame(0x82, 70 * 1024, noise(7), KEY))
    decoder("frame-70k-client", CLIENT | SYNTH, synth_frame(0x82, 70 * 1024, repeat(0x55)))
    decoder("frame-70k-over-64k-limit", server | LIMITS_64K,
            synth_frame(0x82, 70 * 1024, repeat(0), KEY))
    decoder("frame-126-boundaries", server,
            synth_frame(0x82, 126, repeat(1), KEY)
            + synth_frame(0x82, 65535, block(3, 9), KEY)
            + synth_frame(0x82, 65536, block(200, 9), KEY))
    decoder("length-non-minimal", server,
            synth_frame(0x82, 5, literal(b"abcde"), KEY, form="16")
            + synth_frame(0x81, 5, literal(b"abcde"), KEY, form="64"))
    # A 1 MiB message in 16 fragments of 64 KiB, under 1 MiB limits; then one over them.
    frags = synth_frame(0x02, 65536, words(1), KEY)
    for i in range(14):
        frags += synth_frame(0x00, 65536, words(i + 2), KEY)
    decoder("message-1m-16-fragments", server | LIMITS_1M,
            frags + synth_frame(0x80, 65536, words(99), KEY), cuts=(1000, 33000, 64000))
    decoder("message-over-limit-in-fragments", server | LIMITS_64K,
            synth_frame(0x02, 65535, repeat(2), KEY) + synth_frame(0x00, 65535, repeat(3), KEY)
            + synth_frame(0x80, 65535, repeat(4), KEY))
    decoder("frame-16m-announced", server,
            synth_frame(0x82, 16 << 20, repeat(0), KEY))
    decoder("frame-16m-plus-1-refused", server,
            synth_frame(0x82, (16 << 20) + 1, repeat(0), KEY))
    decoder("length-2-pow-63", server, wire_header(0x82, 1 << 63, KEY) + repeat(0))
    decoder("length-2-pow-62", server, wire_header(0x82, 1 << 62, KEY) + repeat(0))
    # Compressed messages (RSV1) to a client: RFC 7692's "Hello", whole and fragmented.
    hello = bytes([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])
    decoder("compressed-hello", CLIENT | RSV1 | SYNTH,
            synth_frame(0xC1, 7, literal(hello))
            + synth_frame(0x41, 3, literal(hello[:3])) + synth_frame(0x80, 4, literal(hello[3:])))
    decoder("rsv1-not-negotiated", CLIENT | SYNTH, synth_frame(0xC1, 7, literal(hello)))
    decoder("rsv1-on-continuation", CLIENT | RSV1 | SYNTH,
            synth_frame(0x41, 3, literal(hello[:3])) + synth_frame(0xC0, 4, literal(hello[3:])))
    # Protocol errors: reserved opcodes and bits, long or fragmented control frames,
    # continuation misuse, the wrong masking for the role.
    decoder("reserved-opcode", server, synth_frame(0x83, 1, repeat(0), KEY))
    decoder("rsv2-rsv3", server, synth_frame(0xA1, 1, repeat(0x61), KEY)
            + synth_frame(0x91, 1, repeat(0x61), KEY))
    decoder("ping-126-bytes", server, synth_frame(0x89, 126, repeat(0), KEY))
    decoder("ping-fragmented", server, synth_frame(0x09, 1, repeat(0), KEY))
    decoder("continuation-first", server, synth_frame(0x80, 1, repeat(0), KEY))
    decoder("text-inside-fragmented", server,
            synth_frame(0x01, 1, repeat(0x61), KEY) + synth_frame(0x81, 1, repeat(0x61), KEY))
    decoder("unmasked-to-server", server, synth_frame(0x81, 2, literal(b"hi")))
    decoder("masked-to-client", CLIENT | SYNTH, synth_frame(0x81, 2, literal(b"hi"), KEY))
    decoder("small-limits", server | LIMITS_SMALL,
            synth_frame(0x82, 64, repeat(0), KEY) + synth_frame(0x82, 65, repeat(0), KEY))
    # A burst of small frames (the batch path), then one with invalid UTF-8 inside it.
    burst = b"".join(synth_frame(0x81, 9, literal(b"message %d" % (i % 10)), KEY)
                     for i in range(40))
    decoder("burst-40-small-frames", server, burst, cuts=(20000,))
    decoder("burst-bad-utf8-inside", server,
            burst[: len(burst) // 2] + synth_frame(0x81, 2, literal(b"\xc0\x80"), KEY) + burst)
    # Raw mode: the stream itself, as the RFC writes it.
    decoder("raw-rfc-masked-hello", SERVER,
            wire_header(0x81, 5, KEY) + masked(b"Hello", KEY), cuts=(20000, 40000))
    decoder("raw-rfc-unmasked-hello-fragments", CLIENT,
            bytes([0x01, 0x03]) + b"Hel" + bytes([0x80, 0x02]) + b"lo")
    decoder("raw-rfc-ping-and-pong", CLIENT,
            bytes([0x89, 0x05]) + b"Hello" + bytes([0x8A, 0x05]) + b"Hello")
    decoder("raw-256-and-64k-binary", CLIENT,
            bytes([0x82, 0x7E, 0x01, 0x00]) + bytes(256)
            + bytes([0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0]) + bytes(1000))


# --- inflate: mode | windows | level | limit (2) | records --------------------------------

RAW, ROUND_TRIP, CORRUPT = 0, 1, 2
SCALE = {1: 0, 4: 1, 16: 2, 64: 3}
WINDOWS_15 = 7 | (7 << 3)


# The level byte picks from this table (inflate.rs): our encoder is 1, the rest zlib-rs.
INFLATE_LEVELS = [1, 1, 1, 1, 1, 1, 0, 2, 6, 9]


def inflate(name, mode, limit, records, windows=WINDOWS_15, level=1, flags=0):
    """`limit` is in bytes; it is written as a 16-bit number times the smallest scale."""
    level = INFLATE_LEVELS.index(level)
    for scale, bits in sorted(SCALE.items()):
        if limit // scale <= 0xFFFF and limit % scale == 0:
            break
    else:
        raise ValueError(limit)
    head = bytes([mode | (bits << 2) | flags, windows, level]) + struct.pack(">H", limit // scale)
    write("inflate", name, head + records)


def raw_frame(data, fin):
    n = len(data)
    top = 0x80 if fin else 0
    if n < 126:
        return bytes([top | n]) + data
    if n <= 0xFFFF:
        return bytes([top | 126]) + struct.pack(">H", n) + data
    return bytes([top | 127]) + struct.pack(">I", n)[1:] + data


def raw_message(payload, pieces=1):
    size = -(-len(payload) // pieces) if payload else 1
    parts = [payload[i:i + size] for i in range(0, len(payload), size)] or [b""]
    return b"".join(raw_frame(p, i + 1 == len(parts)) for i, p in enumerate(parts))


def sample_text(n):
    """JSON-like text of `n` bytes, the kind of message that compresses."""
    out = []
    i = 0
    while sum(map(len, out)) < n:
        out.append('{"id":%d,"symbol":"BTC-USD","price":%d.%02d,"qty":0.%04d},'
                   % (i, 30000 + i * 7 % 913, i % 100, i * 31 % 10000))
        i += 1
    return "".join(out).encode()[:n]


def deflate_messages(messages, level, wbits, takeover=True, finish=False):
    """Raw DEFLATE per RFC 7692: sync-flushed, trailer removed (or BFINAL via Z_FINISH)."""
    out = []
    c = zlib.compressobj(level, zlib.DEFLATED, -wbits)
    for m in messages:
        if not takeover:
            c = zlib.compressobj(level, zlib.DEFLATED, -wbits)
        if finish:
            data = c.compress(m) + c.flush(zlib.Z_FINISH)
            c = zlib.compressobj(level, zlib.DEFLATED, -wbits)
        else:
            data = c.compress(m) + c.flush(zlib.Z_SYNC_FLUSH)
            assert data.endswith(b"\x00\x00\xff\xff")
            data = data[:-4]
        out.append(data)
    return out


def message_record(flags, n, fill):
    return bytes([flags]) + length(n) + fill


def inflate_seeds():
    clear("inflate")
    hello = bytes([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])
    # RFC 7692 7.2.3: "Hello" compressed, again with context takeover, as a stored block,
    # fragmented, and with BFINAL set.
    inflate("rfc-hello", RAW, 1024, raw_message(hello))
    inflate("rfc-hello-context-takeover", RAW, 1024,
            raw_message(hello) + raw_message(bytes([0xF2, 0x00, 0x11, 0x00, 0x01, 0x00])))
    inflate("rfc-hello-stored-block", RAW, 1024,
            raw_message(bytes([0x00, 0x05, 0x00, 0xFA, 0xFF]) + b"Hello" + b"\x00"))
    inflate("rfc-hello-fragmented", RAW, 1024, raw_frame(hello[:2], False) + raw_frame(hello[2:], True))
    inflate("rfc-hello-bfinal", RAW, 1024, raw_message(bytes([0xF3, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])))
    inflate("empty-message", RAW, 0, raw_message(b"\x00"))
    inflate("hello-over-4-byte-limit", RAW, 4, raw_message(hello))
    # zlib at several levels and window bits, several messages with and without context
    # takeover, in frames of 126- and 127-length records.
    msgs = [sample_text(20000), sample_text(3000)[::-1], b"a" * 5000, sample_text(12000)]
    for level, wbits in [(1, 9), (6, 10), (9, 12), (6, 15), (1, 15)]:
        comp = deflate_messages(msgs, level, wbits)
        inflate(f"zlib-level{level}-window{wbits}", RAW, 64 * 1024,
                b"".join(raw_message(c, pieces=2) for c in comp),
                windows=(wbits - 8) | ((wbits - 8) << 3))
    comp = deflate_messages(msgs[:2], 6, 15, takeover=False)
    inflate("zlib-no-context-takeover", RAW, 64 * 1024, b"".join(raw_message(c) for c in comp),
            flags=0x10)
    comp = deflate_messages(msgs[:2], 6, 15, finish=True)
    inflate("zlib-bfinal-per-message", RAW, 64 * 1024, b"".join(raw_message(c) for c in comp))
    # 70 KiB of incompressible bytes: stored blocks, a 127-length record.
    incompressible = bytes((i * 7919 + (i >> 3) * 104729) % 251 for i in range(70 * 1024))
    comp = deflate_messages([incompressible], 0, 15)
    inflate("zlib-level0-70k-stored", RAW, 128 * 1024, raw_message(comp[0]))
    # Bombs: 4 MiB of zeros in about 4 KiB, under a 1 MiB limit and under a 4 MiB one.
    comp = deflate_messages([bytes(4 << 20)], 9, 15)
    inflate("bomb-4m-limit-1m", RAW, 1 << 20, raw_message(comp[0], pieces=3))
    inflate("bomb-4m-limit-4m", RAW, 0xFFFF * 64, raw_message(comp[0]))
    # Corrupt streams: a reserved block type, a distance too far back, a truncated block.
    inflate("reserved-block-type", RAW, 1024, raw_message(b"\x07\x00"))
    inflate("distance-too-far", RAW, 1024, raw_message(bytes([0x73, 0x04, 0x02, 0x20, 0x00])))
    inflate("truncated", RAW, 1024, raw_message(comp[0][:9]))
    # Round trips through our compressor (level 1) and zlib-rs's (6, 9), whole and in
    # chunks, at several windows: JSON-like text, noise, a repeated noise block, text.
    big = 0xFFFF * 64  # the largest limit: just under 4 MiB
    inflate("round-trip-ours-json-300k", ROUND_TRIP, big,
            message_record(0, 300 * 1024, words(5)) + message_record(0x11, 70 * 1024, words(6)),
            level=1)
    inflate("round-trip-ours-noise-and-blocks", ROUND_TRIP, big,
            message_record(0, 70 * 1024, noise(3)) + message_record(1, 200 * 1024, block(255, 4))
            + message_record(0x0B, 70 * 1024, text()), level=1, flags=0x80)
    inflate("round-trip-zlib-level9-window9", ROUND_TRIP, big,
            message_record(0, 40 * 1024, words(8)) + message_record(3, 20 * 1024, block(40, 1)),
            windows=1 | (1 << 3), level=9)
    inflate("round-trip-zlib-level6-no-context", ROUND_TRIP, big,
            message_record(0, 30 * 1024, words(8)) + message_record(0, 30 * 1024, words(8)),
            level=6, flags=0x30)
    inflate("round-trip-window8-uncompressed", ROUND_TRIP, big,
            message_record(1, 1000, words(1)), windows=0, level=1)
    inflate("round-trip-over-limit", ROUND_TRIP, 65536,
            message_record(0, 65536, repeat(1)) + message_record(0, 65537, repeat(2)))
    inflate("corrupted-ours-json", CORRUPT, big,
            message_record(0, 40 * 1024, words(2)) + bytes([3, 0, 0x12, 0x34, 0x80, 0, 0x80, 0x00, 0x00, 0, 0xF0, 0x00, 0x01]))


# --- connection_ops: flags | deflate | level | ops -----------------------------------------

OP_SEND, OP_SEND_FILL, OP_BEGIN, OP_CHUNK, OP_CHUNK_FILL = 0, 1, 2, 3, 4
OP_PING, OP_CLOSE, OP_PUMP, OP_RAW, OP_RAW_FRAME, OP_ADVANCE, OP_RELEASE = 5, 6, 7, 8, 9, 10, 11
OP_EOF, OP_SHUTDOWN = 12, 13
ON_SERVER, V = 0x10, 0x20
HOW_BYTES, HOW_PREPARED = 0x40, 0x80


def send(data, server=False, text=True, how=0):
    return bytes([OP_SEND | (ON_SERVER if server else 0) | (V if text else 0) | how, len(data)]) + data


def send_fill(n, fill, server=False, text=False, how=0):
    return (bytes([OP_SEND_FILL | (ON_SERVER if server else 0) | (V if text else 0) | how])
            + length(n) + fill)


def pump(server=False, split=0xFFFF, chunk=None):
    op = OP_PUMP | (ON_SERVER if server else 0)
    if chunk is None:
        return bytes([op]) + struct.pack(">H", split)
    return bytes([op | V]) + struct.pack(">HH", split, chunk - 1)


def pumps():
    return pump(False) + pump(True) + pump(False) + pump(True)


def close(code, reason=b"", server=False):
    return bytes([OP_CLOSE | (ON_SERVER if server else 0)]) + struct.pack(">H", code) + bytes([len(reason)]) + reason


# The low 3 bits of the level byte pick from this table (connection_ops.rs).
CONN_LEVELS = [1, 1, 1, 1, 1, 0, 2, 9]


def conn(name, flags, ops, d=0, level=1, extra=0):
    """`level` is the compression level; `extra` the level byte's other bits."""
    write("connection_ops", name, bytes([flags, d, CONN_LEVELS.index(level) | extra]) + ops)


DEFLATE_ON = 0x10
D15 = (7 << 2) | (7 << 5)


def connection_seeds():
    clear("connection_ops")
    conn("echo-ping-close", 0,
         send(b"hello") + pump() + send(b"\x00\x01binary", server=True, text=False) + pump(True)
         + bytes([OP_PING, 4]) + b"ping" + bytes([OP_PING | V | ON_SERVER, 0]) + pumps()
         + close(1000, b"bye") + pumps())
    for code in [1001, 1009, 1013, 3000, 4999, 1005, 1015]:
        conn(f"close-{code}", 0, send(b"x") + pump() + close(code, b"reason", server=True) + pumps())
    # A fragmented text message cut inside code points, read in 3-byte pieces.
    conn("fragmented-text-split-code-point", 0,
         bytes([OP_BEGIN | V]) + bytes([OP_CHUNK, 5]) + "a\u00e9\u20ac".encode()[:5]
         + bytes([OP_CHUNK_FILL]) + length(70001) + text(whole=False)
         + bytes([OP_PING, 1, 0x21]) + bytes([OP_CHUNK | V, 3]) + "\U0001F600".encode()[1:]
         + pump(split=7, chunk=3) + pumps())
    # 70 KiB frames with a 127 length, read in 4 KiB pieces; sent by copy, as `Bytes`, and
    # prepared.
    conn("frame-70k", 0,
         send_fill(70 * 1024, noise(1)) + pump(chunk=4096)
         + send_fill(70 * 1024, block(10, 2), server=True, how=HOW_BYTES) + pump(True, chunk=4096)
         + send_fill(70 * 1024, text(), server=True, text=True, how=HOW_PREPARED) + pumps())
    conn("frame-70k-chunks-delivery-tight-buffers", 0x01 | 0x80,
         send_fill(70 * 1024, words(3)) + pump(chunk=1000) + pumps())
    conn("message-over-limits", 0x04,
         send_fill(80 * 1024, repeat(7)) + pump() + send_fill(100, repeat(1), server=True) + pumps())
    conn("fragments-over-message-limit", 0x04,
         bytes([OP_BEGIN]) + bytes([OP_CHUNK_FILL]) + length(60000) + repeat(1)
         + bytes([OP_CHUNK_FILL]) + length(60000) + repeat(2)
         + bytes([OP_CHUNK_FILL]) + length(60000) + repeat(3)
         + bytes([OP_CHUNK_FILL | V]) + length(60000) + repeat(4) + pumps())
    # permessage-deflate: our level-1 encoder, zlib-rs's levels, small windows, no context
    # takeover, pooled compressors; megabyte messages.
    conn("deflate-ours-json-300k", DEFLATE_ON,
         send_fill(300 * 1024, words(4), text=True) + pump(chunk=65536)
         + send_fill(200 * 1024, words(5), server=True, text=True) + pump(True)
         + send(b"short") + pumps(), d=D15, extra=0x20)
    conn("deflate-zlib-level9-window9", DEFLATE_ON,
         send_fill(40 * 1024, words(4)) + send_fill(40 * 1024, block(50, 5), server=True)
         + pumps(), d=(1 << 2) | (1 << 5), level=9)
    conn("deflate-fragmented-no-context-pooled", DEFLATE_ON | 0x01,
         bytes([OP_BEGIN | V]) + bytes([OP_CHUNK_FILL]) + length(30000) + words(1)
         + bytes([OP_CHUNK_FILL | V]) + length(30000) + words(2)
         + send_fill(5000, noise(9), server=True, how=HOW_PREPARED) + pumps(), d=D15 | 3, extra=0x80 | 0x20)
    conn("deflate-window8-sends-uncompressed", DEFLATE_ON,
         send_fill(10000, words(1), text=True) + pumps(), d=0)
    conn("deflate-inflate-past-limit", DEFLATE_ON | 0x04,
         send_fill(300 * 1024, repeat(0)) + pumps(), d=D15)
    # Hostile frames: 127-length frames announcing 16 MiB + 1 and 2^63, one announcing 70 KiB
    # under small limits, one with RSV1 unnegotiated, and raw bytes.
    def raw_frame_op(b0, announced, fill, key=KEY, form=0, server=True):
        shape = (0x80 if key else 0) | 0x40 | form
        return (bytes([OP_RAW_FRAME | (ON_SERVER if server else 0), b0, shape]) + (key or b"")
                + struct.pack(">Q", announced) + fill)
    conn("hostile-frame-16m-plus-1", 0, raw_frame_op(0x82, (16 << 20) + 1, repeat(0), form=2) + pumps())
    conn("hostile-frame-2-pow-63", 0, raw_frame_op(0x82, 1 << 63, repeat(0), form=2) + pumps())
    conn("hostile-frame-70k-small-limits", 0x02, raw_frame_op(0x82, 70 * 1024, repeat(0)) + pumps())
    conn("hostile-rsv1-unnegotiated", 0, raw_frame_op(0xC1, 7, literal(bytes([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]))) + pumps())
    conn("hostile-raw-ping-flood-tight", 0x80,
         bytes([OP_RAW | ON_SERVER]) + struct.pack(">H", 20 * 6)
         + (wire_header(0x89, 0, KEY)) * 20 + pump(True) + pumps())
    # The teardown: a clean close with the shutdowns and FINs done by hand; the transport
    # ending in the middle of a message and of a close; a failure that lingers.
    conn("teardown-clean", 0,
         send(b"last") + close(1000) + pump() + pump(True)
         + bytes([OP_SHUTDOWN | ON_SERVER]) + pump(True) + bytes([OP_SHUTDOWN]) + pump())
    conn("eof-inside-a-message", 0,
         bytes([OP_BEGIN]) + bytes([OP_CHUNK, 3]) + b"abc" + pump(split=5)
         + bytes([OP_EOF | ON_SERVER]) + pumps())
    conn("eof-after-close-sent", 0,
         send(b"x") + close(1001, b"away") + bytes([OP_EOF]) + pumps())
    conn("failure-lingers", 0,
         send(b"ok") + bytes([OP_RAW | ON_SERVER]) + struct.pack(">H", 2) + b"\x83\x80"
         + bytes([OP_SHUTDOWN | ON_SERVER]) + send_fill(100000, repeat(1)) + pump(chunk=1000)
         + bytes([OP_ADVANCE, 2]) + pumps())
    # Timers: keepalive pings, the pong timeout, the idle timeout, the close timeout.
    conn("timers", 0x08,
         send(b"a") + pump() + bytes([OP_ADVANCE, 11]) + pumps() + bytes([OP_ADVANCE, 11])
         + bytes([OP_ADVANCE, 70]) + close(1000) + bytes([OP_ADVANCE, 6]) + bytes([OP_RELEASE]) + pumps())


# --- handshakes: split | bytes ------------------------------------------------------------

def request(headers, path="/chat"):
    lines = [f"GET {path} HTTP/1.1", "Host: example.com", "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
             "Sec-WebSocket-Version: 13"] + headers
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def response(headers):
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="] + headers
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def handshake_seeds():
    # Split byte: low 6 bits the piece size - 1, top 2 bits the deflate settings.
    s = "handshake_server"
    write(s, "many-headers-26", bytes([5]) + request([f"X-Header-{i}: value {i}" for i in range(26)]))
    write(s, "too-many-headers-40", bytes([5]) + request([f"X-Header-{i}: value {i}" for i in range(40)]))
    write(s, "head-over-4k", bytes([63]) + request(["X-Big: " + "v" * 4100]))
    offers = [
        ("deflate-defaults", 1, ["Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"]),
        ("deflate-limited", 2, ["Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=12; client_max_window_bits=11; server_no_context_takeover"]),
        ("deflate-pooled", 3, ["Sec-WebSocket-Extensions: permessage-deflate"]),
        ("deflate-second-offer", 1, ["Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=16, permessage-deflate; client_max_window_bits=\"10\""]),
        ("deflate-unknown-then-offer", 2, ["Sec-WebSocket-Extensions: x-webkit-deflate-frame", "Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover"]),
        ("deflate-malformed", 1, ["Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=08; client_max_window_bits"]),
    ]
    for name, choice, headers in offers:
        write(s, name, bytes([(choice << 6) | 7]) + request(headers))
    c = "handshake_client"
    write(c, "many-headers-29", bytes([3]) + response([f"X-Header-{i}: {i}" for i in range(29)]))
    write(c, "too-many-headers-40", bytes([3]) + response([f"X-Header-{i}: {i}" for i in range(40)]))
    answers = [
        ("deflate-agreed", 1, ["Sec-WebSocket-Extensions: permessage-deflate"]),
        ("deflate-windows", 2, ["Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=10; client_no_context_takeover; client_max_window_bits=9"]),
        ("deflate-window-over-offer", 2, ["Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=11"]),
        ("deflate-dropped-server-no-context", 3, ["Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=9"]),
        ("deflate-twice", 1, ["Sec-WebSocket-Extensions: permessage-deflate, permessage-deflate"]),
        ("deflate-leftover-frame", 1, ["Sec-WebSocket-Extensions: permessage-deflate"]),
    ]
    for name, choice, headers in answers:
        data = bytes([(choice << 6) | 9]) + response(headers)
        if name.endswith("leftover-frame"):
            data += bytes([0xC1, 0x07, 0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])
        write(c, name, data)


# --- simulated_transport: 8 bytes of seed, little-endian, and no choices of its own -----

# Seeds of tests/simulated_transport.rs (SIM_SEED), whose runs found bugs (FOUND there),
# and a few more: with no choice bytes after it, an input replays the test's run of its
# seed exactly, and the fuzzer mutates from there.
SIM_FOUND = [
    0x0, 0xB, 0x29,  # blocking: a write timeout while a read answered a ping
    0x34, 0x56, 0xA2,  # tokio: a futures-split reader pending before the first send
    0x92, 0x108, 0x11E,  # connection: the transport's end after an unanswered peer close
    0x3B3A, 0x4002, 0x4823,  # tokio: a failed send left a fragmented message to fail
    0x512,  # connection: a FIN read with the close echo was awaited again
    0x51A, 0x70A, 0xABA,  # tokio: sends and flushes on a connection that was over
]
SIM_MORE = list(range(16))


def simulated_transport_seeds():
    t = "simulated_transport"
    clear(t)
    for seed in SIM_FOUND:
        write(t, f"found-{seed:#x}", struct.pack("<Q", seed))
    for seed in SIM_MORE:
        write(t, f"{seed}", struct.pack("<Q", seed))


def main():
    decoder_seeds()
    inflate_seeds()
    connection_seeds()
    handshake_seeds()
    simulated_transport_seeds()
    total = 0
    for target, files in sorted(written.items()):
        size = sum(n for _, n in files)
        total += size
        print(f"{target:18} {len(files):3} seeds written, {size:8,} bytes")
    print(f"{'total':18} {sum(len(f) for f in written.values()):3} seeds written, {total:8,} bytes")


if __name__ == "__main__":
    main()
