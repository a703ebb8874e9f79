#!/usr/bin/env node
// A server's limits as Node `ws` meets them, for rapidws interop tests.
//
//   node tests/interop/node_limits.js URL big
//   node tests/interop/node_limits.js URL refused [TRIES]
//
// `big` (permessage-deflate on; ws compresses a whole message into one frame): sends
// 16 MiB of incompressible bytes (SHA-1 in counter mode, as in node_echo_client.js) and
// checks the echo; then 16 MiB + 1 byte on the same connection, which the server must
// close with 1009. Both are compressed single frames a little larger than 16 MiB.
//
// `refused` (no compression): TRIES times each (default 20), on a fresh connection,
// sends something the server must refuse and keeps sending while it is refused, then
// reports the close code it read:
//
//   too_big   a 32 MiB binary message (past a 16 MiB limit): 1009
//   protocol  a frame with the reserved opcode 0x3 announcing 12 MiB, and its 12 MiB: 1002
//   utf8      a text frame of 12 MiB whose first byte is 0xFF: 1007
//
// The raw frames are written straight to the socket, masked with a zero key. Prints one
// line per try, then PASS and exits 0 when every try read its code, or FAIL and exits 1.
// Bounded by a 120 s timer.
'use strict';
const crypto = require('node:crypto');
const WebSocket = require('ws');

const [url, mode, triesArg] = process.argv.slice(2);
if (!url || !['big', 'refused'].includes(mode)) {
  console.error('usage: node_limits.js URL big|refused [TRIES]');
  process.exit(2);
}
const tries = Number(triesArg || 20);

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}
setTimeout(() => fail('timed out after 120 s'), 120_000).unref();

const BIG = 16 << 20;

function sha1Stream(len) {
  const out = Buffer.alloc(len + 20);
  for (let off = 0, i = 0; off < len; off += 20, i++) {
    crypto.createHash('sha1').update(`rapidws-${i}`).digest().copy(out, off);
  }
  return out.subarray(0, len);
}

// A client frame with a 64-bit length and a zero masking key.
function maskedFrame(b0, payload) {
  const head = Buffer.alloc(14);
  head[0] = b0;
  head[1] = 0x80 | 127;
  head.writeBigUInt64BE(BigInt(payload.length), 2);
  return Buffer.concat([head, payload]);
}

function big() {
  const data = sha1Stream(BIG);
  const over = sha1Stream(BIG + 1);
  const ws = new WebSocket(url, { perMessageDeflate: true, maxPayload: 64 << 20 });
  let echoed = false;
  ws.on('open', () => {
    console.log(`connected; extensions: ${ws.extensions || 'none'}`);
    ws.send(data, { binary: true });
  });
  ws.on('message', (msg) => {
    if (echoed) fail('a second echo');
    if (Buffer.compare(msg, data) !== 0) fail(`the echo of 16 MiB differs (${msg.length} bytes)`);
    console.log('16 MiB echoed');
    echoed = true;
    ws.send(over, { binary: true });
  });
  ws.on('close', (code) => {
    if (!echoed) fail(`closed with ${code} before the echo`);
    if (code !== 1009) fail(`16 MiB + 1 byte: close code ${code}, want 1009`);
    console.log('16 MiB + 1 byte: 1009');
    console.log('PASS');
    process.exit(0);
  });
  ws.on('error', (e) => console.log(`error: ${e.message}`));
}

function refuseOnce(kind) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    let errored = null;
    ws.on('open', () => {
      if (kind === 'too_big') {
        ws.send(Buffer.alloc(32 << 20), { binary: true });
      } else if (kind === 'protocol') {
        ws._socket.write(maskedFrame(0x83, Buffer.alloc(12 << 20)));
      } else {
        const p = Buffer.alloc(12 << 20);
        p[0] = 0xff;
        ws._socket.write(maskedFrame(0x81, p));
      }
    });
    ws.on('error', (e) => {
      errored = e.code || e.message;
    });
    // 1006 when no close frame was read (a reset destroyed it, or none came).
    ws.on('close', (code) => resolve({ code, errored }));
  });
}

async function refused() {
  const expected = { too_big: 1009, protocol: 1002, utf8: 1007 };
  const failures = [];
  for (const [kind, want] of Object.entries(expected)) {
    let ok = 0;
    const got = [];
    for (let i = 0; i < tries; i++) {
      const { code, errored } = await refuseOnce(kind);
      got.push(code);
      if (code === want) ok++;
      console.log(`refused ${kind} try ${i + 1}: close code ${code}${errored ? ` (error ${errored})` : ''}`);
    }
    console.log(`${kind}: ${ok} of ${tries} read ${want}`);
    if (ok !== tries) failures.push(`${kind}: ${ok} of ${tries} read ${want} (got ${got})`);
  }
  if (failures.length) fail(failures.join('; '));
  console.log('PASS');
  process.exit(0);
}

if (mode === 'big') big();
else refused();
