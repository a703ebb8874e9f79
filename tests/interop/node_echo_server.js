#!/usr/bin/env node
// Echo server peer (Node `ws`), for rapidws interop tests.
//
//   node tests/interop/node_echo_server.js PORT [LIFETIME_SECONDS]
//
// Listens on 127.0.0.1:PORT (0 picks a free port) with permessage-deflate enabled, echoes
// every message (text as text, binary as binary, up to 64 MiB) and prints `READY <port>`
// once it accepts connections. Exits by itself after LIFETIME_SECONDS (default 600).
'use strict';
const { WebSocketServer } = require('ws');

const port = Number(process.argv[2] ?? 0);
const lifetime = Number(process.argv[3] ?? 600);

const wss = new WebSocketServer({
  host: '127.0.0.1',
  port,
  perMessageDeflate: true,
  maxPayload: 64 << 20,
});
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  ws.on('error', (err) => console.error(`connection error: ${err.message}`));
});
wss.on('listening', () => console.log(`READY ${wss.address().port}`));
setTimeout(() => {
  console.error('lifetime over, exiting');
  process.exit(0);
}, lifetime * 1000).unref(); // the listening server keeps the process alive until then
