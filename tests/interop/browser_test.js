#!/usr/bin/env node
// Browser interop test: headless Debian Chromium, driven by playwright-core, talks to a
// WebSocket echo server.
//
//   node tests/interop/browser_test.js ws://127.0.0.1:9001/
//
// Serves a page on 127.0.0.1 (a free port) whose script opens a WebSocket to the URL and
// checks, in order: a text message with multi-byte characters, a binary message with every
// byte value, a 4 MiB binary message, a burst of 1,000 small text messages sent without
// waiting (echoes must come back complete and in order), then a close with 1000 that the
// server must answer with 1000 (wasClean). Prints PASS and exits 0, or FAIL and exits 1.
// Bounded by a 90 s timer. Chromium: CHROMIUM=/path (default /usr/bin/chromium).
//
//   BROWSER_CERT=cert.pem node tests/interop/browser_test.js https://localhost:9443/
//
// HTTP/2 mode (RFC 8441): loads the page at that https:// URL from the server itself (an
// app with HTTP/1.1 and HTTP/2 over TLS, integration/examples/axum_h2.rs), checks that it came over
// h2, and runs the same checks on wss://<same origin>/ws (permessage-deflate expected)
// and on wss://<same origin>/ws/plain (declined), which Chromium opens as streams of that
// HTTP/2 connection. BROWSER_CERT is the server's self-signed certificate, trusted by its
// public key hash (--ignore-certificate-errors-spki-list) so the connection is a valid
// one to Chromium. Whether the WebSockets really came as extended CONNECTs is what the
// server records (browser.sh checks its log).
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const wsUrl = process.argv[2];
const loopback = /^(ws|https):\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?\//;
if (!wsUrl || !loopback.test(wsUrl)) {
  console.error('usage: browser_test.js ws://127.0.0.1:PORT/ | https://localhost:PORT/   (loopback only)');
  process.exit(2);
}
// https://: the HTTP/2 mode (see the header).
const h2Origin = wsUrl.startsWith('https://') ? new URL(wsUrl).origin : null;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const deadline = setTimeout(() => finish(false, 'timed out after 90 s'), 90_000);

// The page's test, run in the browser. Resolves to {ok, log}.
const TEST_SCRIPT = `
window.runTest = async function (url, expectDeflate) {
  const log = [];
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  const inbox = [];
  let waiter = null;
  let closeEvent = null;
  let closeWaiter = null;
  ws.onmessage = (e) => { inbox.push(e.data); if (waiter) { const w = waiter; waiter = null; w(); } };
  ws.onclose = (e) => { closeEvent = e; if (waiter) { const w = waiter; waiter = null; w(); } if (closeWaiter) closeWaiter(); };
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = () => reject(new Error('connection failed')); });
  log.push('open; extensions: ' + (ws.extensions || 'none'));
  // Chromium always offers permessage-deflate; check the server's answer was honoured.
  if (expectDeflate !== null && ws.extensions.startsWith('permessage-deflate') !== expectDeflate) {
    throw new Error('expected permessage-deflate ' + (expectDeflate ? 'on' : 'off') + ', got extensions: ' + JSON.stringify(ws.extensions));
  }
  async function recv() {
    while (inbox.length === 0) {
      if (closeEvent) throw new Error('closed early with ' + closeEvent.code);
      await new Promise((r) => { waiter = r; });
    }
    return inbox.shift();
  }
  function sameBytes(a, b) {
    if (!(a instanceof ArrayBuffer) || a.byteLength !== b.byteLength) return false;
    const x = new Uint8Array(a), y = new Uint8Array(b);
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
    return true;
  }
  function pseudoRandom(n) {  // xorshift32, deterministic
    const out = new Uint8Array(n);
    let s = 0x9e3779b9;
    for (let i = 0; i < n; i++) { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; out[i] = s & 0xff; }
    return out.buffer;
  }

  const text = 'héllo wörld — ✓ 𝄞 日本語 🚀';
  ws.send(text);
  const t = await recv();
  if (t !== text) throw new Error('text echo differs: ' + JSON.stringify(t));
  log.push('text ok');

  const bin = new Uint8Array(1024);
  for (let i = 0; i < bin.length; i++) bin[i] = i & 0xff;
  ws.send(bin.buffer);
  if (!sameBytes(await recv(), bin.buffer)) throw new Error('binary echo differs');
  log.push('binary ok');

  const big = pseudoRandom(4 << 20);
  ws.send(big);
  if (!sameBytes(await recv(), big)) throw new Error('4 MiB echo differs');
  log.push('4 MiB ok');

  const N = 1000;
  for (let i = 0; i < N; i++) ws.send('burst ' + i + ' ✓');
  for (let i = 0; i < N; i++) {
    const m = await recv();
    if (m !== 'burst ' + i + ' ✓') throw new Error('burst echo ' + i + ' differs: ' + JSON.stringify(m));
  }
  log.push('burst of ' + N + ' ok');

  ws.close(1000, 'done');
  if (!closeEvent) await new Promise((r) => { closeWaiter = r; });
  if (closeEvent.code !== 1000 || !closeEvent.wasClean) {
    throw new Error('close: code ' + closeEvent.code + ', wasClean ' + closeEvent.wasClean);
  }
  log.push('close 1000 ok');
  return log;
};
`;
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>rapidws browser interop</title>
<script>${TEST_SCRIPT}</script>
`;

let server = null;
let context = null;
let userDataDir = null;
let finished = false;

async function finish(ok, message) {
  if (finished) return;
  finished = true;
  clearTimeout(deadline);
  console.log(ok ? 'PASS' : `FAIL: ${message}`);
  try { if (context) await context.close(); } catch (_) { /* already gone */ }
  if (server) server.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  process.exit(ok ? 0 : 1);
}

// The base64 SHA-256 of a PEM certificate's SubjectPublicKeyInfo, as Chromium's
// --ignore-certificate-errors-spki-list wants it.
function spkiHash(pemPath) {
  const cert = new crypto.X509Certificate(fs.readFileSync(pemPath));
  const spki = cert.publicKey.export({ type: 'spki', format: 'der' });
  return crypto.createHash('sha256').update(spki).digest('base64');
}

async function main() {
  let pageUrl;
  const args = [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync',
  ];
  if (h2Origin) {
    pageUrl = wsUrl;
    if (process.env.BROWSER_CERT) {
      args.push(`--ignore-certificate-errors-spki-list=${spkiHash(process.env.BROWSER_CERT)}`);
    }
  } else {
    server = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(PAGE);
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    pageUrl = `http://127.0.0.1:${server.address().port}/`;
  }

  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rapidws-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args,
  });
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => console.log(`[page] ${m.text()}`));
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  await page.goto(pageUrl);
  if (h2Origin) {
    const protocol = await page.evaluate(() => performance.getEntriesByType('navigation')[0].nextHopProtocol);
    if (protocol !== 'h2') throw new Error(`the page came over ${protocol}, not h2`);
    console.log(`chromium loaded ${pageUrl} over ${protocol}`);
    await page.addScriptTag({ content: TEST_SCRIPT });
    const host = new URL(h2Origin).host;
    for (const [route, expectDeflate] of [['/ws', true], ['/ws/plain', false]]) {
      const url = `wss://${host}${route}`;
      console.log(`testing ${url} (permessage-deflate ${expectDeflate ? 'expected' : 'declined'})`);
      const log = await page.evaluate(([u, e]) => window.runTest(u, e), [url, expectDeflate]);
      for (const line of log) console.log(`  ${line}`);
    }
    await finish(true);
    return;
  }
  console.log(`chromium ${context.browser() ? context.browser().version() : ''} loaded ${pageUrl}; testing ${wsUrl}`);
  // BROWSER_EXPECT_DEFLATE=1/0 checks the negotiated extension; unset, anything goes.
  const expect = process.env.BROWSER_EXPECT_DEFLATE;
  const expectDeflate = expect === undefined ? null : expect === '1';
  const log = await page.evaluate(([url, e]) => window.runTest(url, e), [wsUrl, expectDeflate]);
  for (const line of log) console.log(`  ${line}`);
  await finish(true);
}

main().catch((e) => finish(false, e.message.split('\n')[0]));
