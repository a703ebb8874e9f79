#!/usr/bin/env node
// Echo client peer (Node `ws`), for rapidws interop tests.
//
//   node tests/interop/node_echo_client.js ws://127.0.0.1:PORT/ [--no-compression]
//
// Connects (offering permessage-deflate unless --no-compression) and sends, one at a time,
// the messages of the interop script (the same list in py_echo_client.py and
// tests/interop_peers.rs; keep the three in step):
//
//   0  text    'héllo wörld — ✓ 𝄞 日本語 🚀'               (multi-byte)
//   1  text    that string 4096 times                      (~160 KB)
//   2  binary  bytes 0..=255, 4 times                      (every byte value)
//   3  text    ''                                          (empty)
//   4  binary  empty buffer                                (empty)
//   5  binary  16 MiB: a 256 KiB block repeated 64 times, the block being
//              SHA-1('rapidws-0') SHA-1('rapidws-1') ... truncated to 256 KiB
//   6  text    the string of 0 three times, sent as 3 fragments cut at bytes 2 and 50
//              (the first cut falls inside 'é': fragments need not be valid UTF-8)
//
// checks each echo is identical and of the same type, sends a ping with payload
// 'rapidws ping' and waits for its pong, closes with 1000 and checks the server answered
// 1000. Prints PASS and exits 0, or prints what failed and exits 1.
// Bounded by a 60 s timer.
'use strict';
const crypto = require('node:crypto');
const WebSocket = require('ws');

const url = process.argv[2];
if (!url) {
  console.error('usage: node_echo_client.js URL [--no-compression]');
  process.exit(2);
}
const compression = !process.argv.includes('--no-compression');

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}
setTimeout(() => fail('timed out after 60 s'), 60_000).unref();

// SHA-1 in counter mode: deterministic, incompressible, cheap in every language.
function sha1Stream(len) {
  const out = Buffer.alloc(len);
  for (let off = 0, i = 0; off < len; off += 20, i++) {
    crypto.createHash('sha1').update(`rapidws-${i}`).digest().copy(out, off);
  }
  return out;
}

const TEXT = 'héllo wörld — ✓ 𝄞 日本語 🚀';
const messages = [
  { data: TEXT, binary: false },
  { data: TEXT.repeat(4096), binary: false },
  { data: Buffer.from(Array.from({ length: 1024 }, (_, i) => i % 256)), binary: true },
  { data: '', binary: false },
  { data: Buffer.alloc(0), binary: true },
  { data: Buffer.concat(Array(64).fill(sha1Stream(256 << 10))), binary: true },
  { data: TEXT.repeat(3), binary: false, cuts: [2, 50] },
];

// Sends message `i`, as fragments when it has cuts.
function sendMessage(i) {
  const m = messages[i];
  if (!m.cuts) {
    ws.send(m.data, { binary: m.binary });
    return;
  }
  const bytes = Buffer.from(m.data);
  const bounds = [0, ...m.cuts, bytes.length];
  for (let k = 0; k + 1 < bounds.length; k++) {
    ws.send(bytes.subarray(bounds[k], bounds[k + 1]), {
      binary: m.binary,
      fin: k + 2 === bounds.length,
    });
  }
}
const PING = Buffer.from('rapidws ping');

const ws = new WebSocket(url, { perMessageDeflate: compression, maxPayload: 64 << 20 });
let next = 0;
ws.on('open', () => {
  console.log(`connected to ${url}; extensions: ${ws.extensions || 'none'}`);
  sendMessage(0);
});
ws.on('message', (data, isBinary) => {
  const want = messages[next];
  const got = isBinary ? data : data.toString('utf8');
  const same = isBinary === want.binary &&
    (isBinary ? Buffer.compare(got, want.data) === 0 : got === want.data);
  if (!same) fail(`echo ${next} mismatch (binary=${isBinary}, ${data.length} bytes)`);
  console.log(`echoed message ${next} (${data.length} bytes)`);
  next += 1;
  if (next < messages.length) {
    sendMessage(next);
  } else {
    ws.ping(PING);
  }
});
let pinged = false;
ws.on('pong', (data) => {
  if (Buffer.compare(data, PING) !== 0) fail(`pong payload ${data.toString('hex')}`);
  console.log('ping answered');
  pinged = true;
  ws.close(1000, 'done');
});
ws.on('close', (code) => {
  if (next !== messages.length) fail(`closed with ${code} after ${next} echoes`);
  if (!pinged) fail('closed before the pong arrived');
  if (code !== 1000) fail(`server answered the close with ${code}, want 1000`);
  console.log('PASS');
  process.exit(0);
});
ws.on('error', (err) => fail(err.message));
