//! Interop with real peers over loopback: Python `websockets` and Node `ws`, each as a
//! client of our server and as a server for our client, with permessage-deflate on
//! (context takeover, every message compressed, the empty ones included) and off.
//!
//! Every run plays the same script (see `script()`, kept in step with
//! `tests/interop/py_echo_client.py` and `node_echo_client.js`): multi-byte text, a long
//! multi-byte text, every byte value, an empty text, an empty binary message, 16 MiB and a
//! text sent as 3 fragments (cut inside a code point where the sender allows), each
//! echoed; then a ping answered by a pong, and a clean close with 1000. The peer's side checks the echoes; ours checks
//! what arrived. A recording proxy sits between the two ends and parses the frames on the
//! wire, so the tests also prove what was negotiated, which messages went compressed
//! (RSV1) and which close codes crossed. Two more runs switch compression per message on
//! our end (`Compression::Never`, `Auto`, `Always` in turn; our server against Python, our
//! client against Node): the messages sent uncompressed go with RSV1 clear and the peer
//! still inflates the compressed ones after them, with context takeover.
//!
//! Then the limits, through `examples/echo_server` at its defaults (the binary `cargo test
//! --workspace` builds): each peer sends 16 MiB of incompressible bytes compressed in one
//! frame (a little over 16 MiB on the wire), which is echoed, and one byte more, which is
//! refused with 1009 (`tests/interop/py_limits.py`, `node_limits.js`, mode `big`); and,
//! 20 times each, a message refused while the peer is still sending it, whose close code
//! (1009, 1002, 1007) the peer must read rather than a reset (mode `refused`).
//!
//! The peers are installed by `tests/interop/setup.sh` (`.ci/run install` calls it). Where
//! they are missing, each test prints a SKIP notice and passes without running; so do the
//! limit tests when the example binary was not built (`cargo test --test interop_peers`
//! alone does not build examples).
#![cfg(all(feature = "tokio", feature = "deflate"))]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{
    ClientConfig, Compression, Config, Message, MessageKind, ServerConfig, accept, connect,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

/// Bound on one whole test (peer start, six echoes including 16 MiB each way, close).
const TEST_LIMIT: Duration = Duration::from_secs(120);
/// Bound on a peer server printing `READY <port>`.
const START_LIMIT: Duration = Duration::from_secs(30);
/// The peers exit by themselves after this many seconds, should a test leak one.
const PEER_LIFETIME_SECS: &str = "180";

/// One test at a time: each moves 16 MiB through debug builds and an interpreter on a
/// small machine, and parallel runs would only make the time bounds flaky.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// --- the script ------------------------------------------------------------------------

const TEXT: &str = "héllo wörld — ✓ 𝄞 日本語 🚀";
const BIG: usize = 16 << 20;
const BIG_BLOCK: usize = 256 << 10;
/// Indexes into `script()` of the empty messages.
const EMPTY_TEXT: usize = 3;
const EMPTY_BINARY: usize = 4;
/// Index of the message the client sends as 3 fragments, and where it cuts it (bytes; the
/// first cut is inside the 'é'). Python cuts at code points: three times `TEXT`.
const FRAGMENTED: usize = 6;
const CUTS: [usize; 2] = [2, 50];
const PING: &[u8] = b"rapidws ping";

/// SHA-1 in counter mode: `SHA-1("rapidws-0") SHA-1("rapidws-1") ...` cut to `n` bytes.
/// Incompressible, cheap in Python and Node; the 16 MiB message repeats a 256 KiB block of
/// it, which is still incompressible (DEFLATE looks back 32 KiB at most) and keeps the
/// debug-built hash off the tests' time.
fn sha1_stream(n: usize) -> Vec<u8> {
    use sha1::{Digest, Sha1};
    let mut out = Vec::with_capacity(n + 20);
    let mut i = 0u64;
    while out.len() < n {
        out.extend_from_slice(&Sha1::digest(format!("rapidws-{i}").as_bytes()));
        i += 1;
    }
    out.truncate(n);
    out
}

/// The messages every run sends, in order.
fn script() -> Vec<Message> {
    static SCRIPT: OnceLock<Vec<Message>> = OnceLock::new();
    SCRIPT
        .get_or_init(|| {
            vec![
                Message::text(TEXT),
                Message::text(TEXT.repeat(4096)),
                Message::binary((0..1024).map(|i| i as u8).collect::<Vec<u8>>()),
                Message::text(""),
                Message::binary(Bytes::new()),
                Message::binary(sha1_stream(BIG_BLOCK).repeat(BIG / BIG_BLOCK)),
                Message::text(TEXT.repeat(3)),
            ]
        })
        .clone()
}

/// With the per-send switch on, how our end sends message `i` of the script (and its
/// echo): uncompressed, as the settings say (compressed, with `deflate()`), forced
/// compressed, in turn. The peer's inflater then meets uncompressed messages between
/// compressed ones, with context takeover.
fn switch_choice(i: usize) -> Compression {
    [Compression::Never, Compression::Auto, Compression::Always][i % 3]
}

trait TextBytes {
    fn as_text_bytes(&self) -> Vec<u8>;
}

impl TextBytes for Message {
    fn as_text_bytes(&self) -> Vec<u8> {
        match self {
            Message::Text(t) => t.as_bytes().to_vec(),
            other => panic!("not text: {other:?}"),
        }
    }
}

fn describe(m: &Message) -> String {
    match m {
        Message::Text(t) => format!("text of {} bytes", t.len()),
        Message::Binary(b) => format!("binary of {} bytes", b.len()),
        other => format!("{other:?}"),
    }
}

// --- the peers -------------------------------------------------------------------------

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

#[derive(Clone, Copy, Debug)]
enum Peer {
    Python,
    Node,
}

impl Peer {
    /// The interpreter, or `None` (with the reason) when the peer is not installed.
    fn program(self) -> Result<PathBuf, String> {
        let dir = interop_dir();
        match self {
            Peer::Python => {
                let python = dir.join(".venv/bin/python");
                if python.exists() {
                    Ok(python)
                } else {
                    Err(format!("{} is missing", python.display()))
                }
            }
            Peer::Node => {
                let ws = dir.join("node_modules/ws/package.json");
                if !ws.exists() {
                    return Err(format!("{} is missing", ws.display()));
                }
                match std::process::Command::new("node")
                    .arg("--version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                {
                    Ok(s) if s.success() => Ok(PathBuf::from("node")),
                    _ => Err("`node` is not on PATH".to_owned()),
                }
            }
        }
    }

    fn script_file(self, role: &str) -> PathBuf {
        interop_dir().join(match self {
            Peer::Python => format!("py_echo_{role}.py"),
            Peer::Node => format!("node_echo_{role}.js"),
        })
    }

    fn command(self, program: &Path, role: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.arg(self.script_file(role))
            .current_dir(interop_dir())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Starts the peer's echo server on a free loopback port; returns it and the port.
    async fn start_server(self, program: &Path) -> (Child, u16) {
        let mut cmd = self.command(program, "server");
        match self {
            Peer::Python => cmd.args(["0", "--lifetime", PEER_LIFETIME_SECS]),
            Peer::Node => cmd.args(["0", PEER_LIFETIME_SECS]),
        };
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning the {self:?} echo server: {e}"));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = tokio::time::timeout(START_LIMIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(port) = line.strip_prefix("READY ") {
                    return port.trim().parse::<u16>().unwrap();
                }
            }
            panic!("the {self:?} echo server exited before printing READY");
        })
        .await
        .unwrap_or_else(|_| panic!("the {self:?} echo server did not start in {START_LIMIT:?}"));
        (child, port)
    }

    /// Runs the peer's echo client against `url` to its end; panics unless it passed.
    async fn run_client(self, program: &Path, url: &str, compression: bool) {
        let mut cmd = self.command(program, "client");
        cmd.arg(url);
        if !compression {
            cmd.arg("--no-compression");
        }
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning the {self:?} echo client: {e}"));
        // Dropping the future on timeout drops the child, which kills it.
        let out = tokio::time::timeout(TEST_LIMIT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("the {self:?} echo client did not finish in time"))
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.lines().any(|l| l == "PASS"),
            "the {self:?} echo client failed ({}):\n--- stdout\n{stdout}--- stderr\n{stderr}",
            out.status
        );
    }
}

/// Returns the peer's interpreter, or prints a SKIP notice and returns `None`.
fn installed(peer: Peer, test: &str) -> Option<PathBuf> {
    match peer.program() {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!(
                "SKIP {test}: the {peer:?} interop peer is not installed ({why}); \
                 run `bash tests/interop/setup.sh`"
            );
            None
        }
    }
}

// --- the recording proxy ---------------------------------------------------------------

/// One message as it crossed the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
struct WireMessage {
    /// 1 text, 2 binary.
    opcode: u8,
    /// RSV1 of the first frame: the message is compressed (RFC 7692 6).
    compressed: bool,
    /// Payload bytes on the wire, all frames together.
    wire_len: u64,
    frames: usize,
    /// RSV1 was set on a continuation frame (RFC 7692 6.1 forbids it).
    rsv1_on_continuation: bool,
}

/// What one direction of a connection carried after the HTTP head.
#[derive(Debug, Default)]
struct WireLog {
    /// The HTTP request (client to server) or response (server to client) head.
    head: String,
    messages: Vec<WireMessage>,
    /// The code of each close frame (`None`: a close frame without a code).
    closes: Vec<Option<u16>>,
    /// Pings and pongs.
    pings: usize,
}

/// Parses one direction's bytes incrementally, keeping only headers and close payloads.
#[derive(Default)]
struct WireParser {
    log: WireLog,
    head_done: bool,
    pending: Vec<u8>,
    /// Payload bytes of the current frame still to skip.
    skip: u64,
}

impl WireParser {
    fn feed(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        loop {
            if !self.head_done {
                let Some(end) = self.pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                    return;
                };
                self.log.head = String::from_utf8_lossy(&self.pending[..end]).into_owned();
                self.pending.drain(..end + 4);
                self.head_done = true;
                continue;
            }
            if self.skip > 0 {
                let n = self.skip.min(self.pending.len() as u64) as usize;
                if n == 0 {
                    return;
                }
                self.pending.drain(..n);
                self.skip -= n as u64;
                continue;
            }
            if !self.frame() {
                return;
            }
        }
    }

    /// Parses one frame header (and a close frame's payload); false when more bytes are needed.
    fn frame(&mut self) -> bool {
        let p = &self.pending;
        if p.len() < 2 {
            return false;
        }
        let (rsv1, opcode) = (p[0] & 0x40 != 0, p[0] & 0x0f);
        let masked = p[1] & 0x80 != 0;
        let (len, mut at) = match p[1] & 0x7f {
            126 if p.len() >= 4 => (u64::from(u16::from_be_bytes([p[2], p[3]])), 4),
            127 if p.len() >= 10 => (u64::from_be_bytes(p[2..10].try_into().unwrap()), 10),
            126 | 127 => return false,
            n => (u64::from(n), 2),
        };
        let key = if masked {
            if p.len() < at + 4 {
                return false;
            }
            at += 4;
            Some([p[at - 4], p[at - 3], p[at - 2], p[at - 1]])
        } else {
            None
        };
        match opcode {
            0x8 => {
                // Control payloads are at most 125 bytes: read the close code.
                let total = at + len as usize;
                if p.len() < total {
                    return false;
                }
                let mut payload = p[at..total].to_vec();
                if let Some(k) = key {
                    payload
                        .iter_mut()
                        .zip(k.iter().cycle())
                        .for_each(|(b, k)| *b ^= k);
                }
                self.log.closes.push(
                    (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]])),
                );
                self.pending.drain(..total);
                return true;
            }
            0x1 | 0x2 => self.log.messages.push(WireMessage {
                opcode,
                compressed: rsv1,
                wire_len: len,
                frames: 1,
                rsv1_on_continuation: false,
            }),
            0x0 => {
                if let Some(m) = self.log.messages.last_mut() {
                    m.wire_len += len;
                    m.frames += 1;
                    m.rsv1_on_continuation |= rsv1;
                }
            }
            0x9 | 0xA => self.log.pings += 1,
            _ => {}
        }
        self.pending.drain(..at);
        self.skip = len;
        true
    }
}

/// Both directions of the one connection a proxy relayed.
#[derive(Debug)]
struct Wire {
    from_client: WireLog,
    from_server: WireLog,
}

/// A loopback proxy for one connection to `upstream`, recording its frames.
struct Proxy {
    port: u16,
    task: tokio::task::JoinHandle<Wire>,
}

impl Proxy {
    async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (down, _) = listener.accept().await.unwrap();
            let up = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
            let _ = (down.set_nodelay(true), up.set_nodelay(true));
            let (down_rd, down_wr) = down.into_split();
            let (up_rd, up_wr) = up.into_split();
            let c2s = tokio::spawn(relay(down_rd, up_wr));
            let s2c = tokio::spawn(relay(up_rd, down_wr));
            Wire {
                from_client: c2s.await.unwrap(),
                from_server: s2c.await.unwrap(),
            }
        });
        Proxy { port, task }
    }

    /// The record, once both directions have ended.
    async fn finish(self) -> Wire {
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("the proxied connection did not end")
            .unwrap()
    }
}

/// Copies `rd` to `wr` until EOF (or an error), parsing what passes.
async fn relay(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
) -> WireLog {
    let mut parser = WireParser::default();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        parser.feed(&buf[..n]);
        if wr.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = wr.shutdown().await;
    parser.log
}

// --- checks on the wire ----------------------------------------------------------------

fn header_value<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Checks both directions carried the script's messages, compressed or not as agreed (in
/// direction `switched`, as [`switch_choice`] says), the fragmented one in at least
/// `client_fragments` frames from the client, a ping and its pong, and a 1000 close each
/// way.
fn check_wire(wire: &Wire, compression: bool, client_fragments: usize, switched: Option<&str>) {
    let ext = header_value(&wire.from_server.head, "sec-websocket-extensions");
    eprintln!(
        "offered: {:?}; agreed: {ext:?}",
        header_value(&wire.from_client.head, "sec-websocket-extensions")
    );
    for (dir, log) in [
        ("from the client", &wire.from_client),
        ("from the server", &wire.from_server),
    ] {
        let sizes: Vec<(u64, usize)> = log
            .messages
            .iter()
            .map(|m| (m.wire_len, m.frames))
            .collect();
        eprintln!("{dir}: (wire bytes, frames) per message {sizes:?}");
    }
    if compression {
        let ext = ext.expect("permessage-deflate was offered by the client and not agreed");
        assert!(ext.starts_with("permessage-deflate"), "agreed: {ext}");
        // RFC 7692 7.1.1: context takeover is on unless a *_no_context_takeover is agreed.
        assert!(
            !ext.contains("no_context_takeover"),
            "context takeover was not kept: {ext}"
        );
    } else {
        assert_eq!(ext, None, "an extension was agreed without an offer");
    }
    let expected = script();
    for (dir, log) in [
        ("client to server", &wire.from_client),
        ("server to client", &wire.from_server),
    ] {
        assert_eq!(
            log.messages.len(),
            expected.len(),
            "{dir}: messages on the wire: {:?}",
            log.messages
        );
        let rsv1 = |i: usize| {
            compression && (switched != Some(dir) || switch_choice(i) != Compression::Never)
        };
        for (i, (m, want)) in log.messages.iter().zip(&expected).enumerate() {
            let opcode = if matches!(want, Message::Text(_)) {
                1
            } else {
                2
            };
            assert_eq!(m.opcode, opcode, "{dir}: message {i} opcode");
            assert_eq!(
                m.compressed,
                rsv1(i),
                "{dir}: message {i} ({}) RSV1",
                describe(want)
            );
            if !rsv1(i) {
                assert_eq!(m.wire_len, want.len() as u64, "{dir}: message {i} length");
            }
            assert!(
                !m.rsv1_on_continuation,
                "{dir}: message {i}: RSV1 on a continuation"
            );
        }
        if dir == "client to server" {
            // Three fragments; websockets ends an iterable with an empty FIN frame.
            assert!(
                log.messages[FRAGMENTED].frames >= client_fragments,
                "{dir}: the fragmented message went as {} frame(s)",
                log.messages[FRAGMENTED].frames
            );
        }
        if compression {
            // The empty messages went compressed: RFC 7692 7.2.3.6's single 0x00 byte (or
            // nothing at all, which also inflates to nothing).
            for i in [EMPTY_TEXT, EMPTY_BINARY].into_iter().filter(|&i| rsv1(i)) {
                assert!(
                    log.messages[i].compressed && log.messages[i].wire_len <= 1,
                    "{dir}: empty message {i} on the wire: {:?}",
                    log.messages[i]
                );
            }
        }
        assert_eq!(log.closes, [Some(1000)], "{dir}: close frames");
        assert_eq!(log.pings, 1, "{dir}: pings and pongs");
    }
}

// --- our ends --------------------------------------------------------------------------

/// Generous limits for the 16 MiB message; short timeouts so a stuck close fails fast.
fn connection_config() -> Config {
    Config::default()
        .with_max_message_size(32 << 20)
        .with_max_frame_size(32 << 20)
        .with_keepalive(None, Duration::from_secs(30))
        .with_close_timeout(Duration::from_secs(10))
}

/// Compress every message, the empty ones included, keeping context between messages.
/// The incompressible 16 MiB message too (`predict_incompressible` off, which would send
/// it uncompressed), so that it goes through both compressors and both inflaters.
fn deflate() -> DeflateConfig {
    DeflateConfig::default()
        .min_size(0)
        .predict_incompressible(false)
}

/// Our server for one connection: checks each message against the script, echoes it
/// (compressed as [`switch_choice`] says, with `switch`), and returns the close frame's
/// code once the connection has ended cleanly.
async fn our_server(listener: TcpListener, switch: bool) -> Option<u16> {
    let config = ServerConfig::default()
        .with_connection(connection_config())
        .with_deflate(Some(deflate()));
    let (stream, _) = listener.accept().await.unwrap();
    let mut ws = accept(stream, &config).await.expect("server handshake");
    let mut expected = script().into_iter().enumerate();
    let mut close = None;
    let mut pinged = false;
    while let Some(msg) = ws.recv().await.expect("server recv") {
        match msg {
            Message::Close(frame) => close = frame.map(|f| f.code.0),
            // The library answers it; the wire check sees the pong.
            Message::Ping(p) => {
                assert_eq!(p, PING, "ping payload");
                pinged = true;
            }
            Message::Pong(_) => panic!("a pong nobody asked for"),
            data => {
                let (i, want) = expected.next().expect("more messages than the script");
                assert!(
                    data == want,
                    "server received message {i} as {}, want {}",
                    describe(&data),
                    describe(&want)
                );
                let choice = if switch {
                    switch_choice(i)
                } else {
                    Compression::Auto
                };
                ws.send_with(data, choice).await.expect("server echo");
            }
        }
    }
    assert!(
        expected.next().is_none(),
        "the connection closed before the script ended"
    );
    assert!(pinged, "the client's ping did not arrive");
    close
}

/// A peer's client against our server (its echoes switched per message with `switch`),
/// through the proxy; the wire record, or `None` when the peer is not installed.
async fn peer_client_against_our_server(
    peer: Peer,
    compression: bool,
    switch: bool,
    test: &str,
) -> Option<Wire> {
    let program = installed(peer, test)?;
    let _serial = SERIAL.lock().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(our_server(listener, switch));
    let proxy = Proxy::start(server_port).await;
    let url = format!("ws://127.0.0.1:{}/", proxy.port);
    peer.run_client(&program, &url, compression).await;
    let close = tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("our server did not finish after the client left")
        .unwrap();
    assert_eq!(close, Some(1000), "the close code our server received");
    let wire = proxy.finish().await;
    check_wire(&wire, compression, 3, switch.then_some("server to client"));
    Some(wire)
}

/// Our client against a peer's echo server (its messages switched per message with
/// `switch`), through the proxy.
async fn our_client_against_peer_server(peer: Peer, compression: bool, switch: bool, test: &str) {
    let Some(program) = installed(peer, test) else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let (_server, port) = peer.start_server(&program).await;
    let proxy = Proxy::start(port).await;
    let mut config = ClientConfig::default().with_connection(connection_config());
    if compression {
        config = config.with_deflate(Some(deflate()));
    } else {
        config = config.with_deflate(None);
    }
    let url = format!("ws://127.0.0.1:{}/", proxy.port);
    tokio::time::timeout(TEST_LIMIT, async {
        let mut ws = connect(&url, &config).await.expect("connect");
        for (i, msg) in script().into_iter().enumerate() {
            let choice = if switch {
                switch_choice(i)
            } else {
                Compression::Auto
            };
            if i == FRAGMENTED {
                let bytes = msg.as_text_bytes();
                let mut w = ws
                    .begin_message_with(MessageKind::Text, choice)
                    .expect("begin");
                w.send_chunk(&bytes[..CUTS[0]]).await.expect("fragment");
                w.send_chunk(&bytes[CUTS[0]..CUTS[1]])
                    .await
                    .expect("fragment");
                w.finish(&bytes[CUTS[1]..]).await.expect("last fragment");
                ws.flush().await.expect("flush");
            } else {
                ws.send_with(msg.clone(), choice).await.expect("send");
            }
            let echo = loop {
                match ws.recv().await.expect("recv") {
                    Some(m) if m.is_data() => break m,
                    Some(_) => {}
                    None => panic!("the server closed before echoing message {i}"),
                }
            };
            assert!(
                echo == msg,
                "echo of message {i}: got {}, want {}",
                describe(&echo),
                describe(&msg)
            );
        }
        ws.ping(PING).await.expect("ping");
        match ws.recv().await.expect("recv") {
            Some(Message::Pong(p)) if p == PING => {}
            Some(other) => panic!("waiting for the pong, got {}", describe(&other)),
            None => panic!("the server closed instead of answering the ping"),
        }
        ws.close(1000, "done").await.expect("close");
        assert_eq!(
            ws.close_frame().map(|f| f.code.0),
            Some(1000),
            "the code of the server's close answer"
        );
    })
    .await
    .expect("the run did not finish in time");
    // Compressing, our sender holds small fragments until zlib emits output, so the three
    // short fragments may leave as one frame.
    let compressed_fragments =
        compression && !(switch && switch_choice(FRAGMENTED) == Compression::Never);
    check_wire(
        &proxy.finish().await,
        compression,
        if compressed_fragments { 1 } else { 3 },
        switch.then_some("client to server"),
    );
}

// --- limits, through examples/echo_server ----------------------------------------------

/// `examples/echo_server` as `cargo test` built it (next to this test's `deps/`), or `None`
/// with a SKIP notice.
fn echo_server_binary(test: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("examples").join("echo_server");
    if bin.exists() {
        return Some(bin);
    }
    eprintln!(
        "SKIP {test}: {} is missing; `cargo test --workspace` builds it (or `cargo build \
         --example echo_server`)",
        bin.display()
    );
    None
}

/// Starts `examples/echo_server` at its defaults on a free port; returns it and the port.
async fn start_echo_server(bin: &Path) -> (Child, u16) {
    // Its stderr (a line per refused connection) is not needed: the peers report.
    let mut child = Command::new(bin)
        .args(["--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawning examples/echo_server");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(START_LIMIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            // "echo server listening on ws://127.0.0.1:PORT/ (...)"
            if let Some(rest) = line.split("ws://127.0.0.1:").nth(1) {
                return rest.split('/').next().unwrap().parse::<u16>().unwrap();
            }
        }
        panic!("echo_server exited before it listened");
    })
    .await
    .expect("echo_server did not start");
    // Drain the rest of its output so that it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// Runs the peer's `*_limits` script with `args` to its end; panics unless it passed.
/// Returns its output.
async fn run_limits(peer: Peer, program: &Path, args: &[&str]) -> String {
    let script = interop_dir().join(match peer {
        Peer::Python => "py_limits.py",
        Peer::Node => "node_limits.js",
    });
    let out = Command::new(program)
        .arg(script)
        .args(args)
        .current_dir(interop_dir())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(TEST_LIMIT, out)
        .await
        .unwrap_or_else(|_| panic!("the {peer:?} limits script did not finish in time"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "PASS"),
        "the {peer:?} limits script failed ({}):\n--- stdout\n{stdout}--- stderr\n{stderr}",
        out.status
    );
    stdout
}

/// The peer sends 16 MiB of incompressible data compressed in one frame through the
/// recording proxy to `echo_server`: echoed; then 16 MiB + 1 byte: 1009.
async fn sixteen_mib_in_one_compressed_frame(peer: Peer, test: &str) {
    let Some(program) = installed(peer, test) else {
        return;
    };
    let Some(bin) = echo_server_binary(test) else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let (_server, port) = start_echo_server(&bin).await;
    let proxy = Proxy::start(port).await;
    let url = format!("ws://127.0.0.1:{}/", proxy.port);
    run_limits(peer, &program, &[&url, "big"]).await;
    let wire = proxy.finish().await;
    let sent = &wire.from_client.messages;
    eprintln!(
        "{peer:?} sent (wire bytes, frames): {:?}",
        sent.iter()
            .map(|m| (m.wire_len, m.frames))
            .collect::<Vec<_>>()
    );
    assert_eq!(sent.len(), 2, "{sent:?}");
    for (m, inflated) in sent.iter().zip([BIG, BIG + 1]) {
        assert!(m.compressed && m.frames == 1, "{m:?}");
        // Larger than the 16 MiB frame limit on the wire, inside its compressed allowance.
        assert!(
            m.wire_len > BIG as u64
                && m.wire_len <= rapidws::codec::max_compressed_frame_size(BIG) as u64,
            "{inflated} bytes went as {} wire bytes",
            m.wire_len
        );
    }
    assert_eq!(wire.from_server.messages.len(), 1, "one echo");
    assert_eq!(wire.from_server.closes, [Some(1009)]);
}

/// 20 times each, a message the server refuses while the peer is still sending it: the
/// peer reads our close code (1009, 1002, 1007), never a reset in its place.
async fn refused_while_still_sending(peer: Peer, test: &str) {
    let Some(program) = installed(peer, test) else {
        return;
    };
    let Some(bin) = echo_server_binary(test) else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let (_server, port) = start_echo_server(&bin).await;
    let url = format!("ws://127.0.0.1:{port}/");
    let out = match peer {
        Peer::Python => run_limits(peer, &program, &[&url, "refused", "--tries", "20"]).await,
        Peer::Node => run_limits(peer, &program, &[&url, "refused", "20"]).await,
    };
    for (kind, code) in [("too_big", 1009), ("protocol", 1002), ("utf8", 1007)] {
        let line = format!("{kind}: 20 of 20 read {code}");
        assert!(
            out.lines().any(|l| l == line),
            "{peer:?}: no \"{line}\" in:\n{out}"
        );
    }
}

#[tokio::test]
async fn python_sends_16_mib_compressed_in_one_frame_through_echo_server_and_one_byte_more_gets_1009()
 {
    sixteen_mib_in_one_compressed_frame(Peer::Python, "python_16_mib_one_frame").await;
}

#[tokio::test]
async fn node_sends_16_mib_compressed_in_one_frame_through_echo_server_and_one_byte_more_gets_1009()
{
    sixteen_mib_in_one_compressed_frame(Peer::Node, "node_16_mib_one_frame").await;
}

#[tokio::test]
async fn python_still_sending_reads_our_close_code_20_of_20() {
    refused_while_still_sending(Peer::Python, "python_refused_while_sending").await;
}

#[tokio::test]
async fn node_still_sending_reads_our_close_code_20_of_20() {
    refused_while_still_sending(Peer::Node, "node_refused_while_sending").await;
}

// --- the tests -------------------------------------------------------------------------

#[tokio::test]
async fn python_client_talks_to_our_server_with_deflate() {
    peer_client_against_our_server(Peer::Python, true, false, "python_client_with_deflate").await;
}

#[tokio::test]
async fn python_client_talks_to_our_server_without_deflate() {
    peer_client_against_our_server(Peer::Python, false, false, "python_client_without_deflate")
        .await;
}

#[tokio::test]
async fn node_client_talks_to_our_server_with_deflate() {
    peer_client_against_our_server(Peer::Node, true, false, "node_client_with_deflate").await;
}

#[tokio::test]
async fn node_client_talks_to_our_server_without_deflate() {
    peer_client_against_our_server(Peer::Node, false, false, "node_client_without_deflate").await;
}

#[tokio::test]
async fn our_client_talks_to_python_server_with_deflate() {
    our_client_against_peer_server(Peer::Python, true, false, "python_server_with_deflate").await;
}

#[tokio::test]
async fn our_client_talks_to_python_server_without_deflate() {
    our_client_against_peer_server(Peer::Python, false, false, "python_server_without_deflate")
        .await;
}

#[tokio::test]
async fn our_client_talks_to_node_server_with_deflate() {
    our_client_against_peer_server(Peer::Node, true, false, "node_server_with_deflate").await;
}

#[tokio::test]
async fn our_client_talks_to_node_server_without_deflate() {
    our_client_against_peer_server(Peer::Node, false, false, "node_server_without_deflate").await;
}

/// The per-send switch against real inflaters with context takeover: our end sends every
/// third message uncompressed (RSV1 clear on the wire) between compressed ones, and the
/// peer still inflates every compressed one (it checks each echo, or echoes what it
/// inflated). Our server against Python, our client against Node: each run moves the
/// script's 16 MiB both ways, so the other two pairings would only add time.
#[tokio::test]
async fn python_client_inflates_our_server_after_uncompressed_messages() {
    peer_client_against_our_server(Peer::Python, true, true, "python_client_switched").await;
}

#[tokio::test]
async fn node_server_inflates_our_client_after_uncompressed_messages() {
    our_client_against_peer_server(Peer::Node, true, true, "node_server_switched").await;
}

#[tokio::test]
#[ignore = "known: with `predict_incompressible` off (as `deflate()` sets it here) zlib-rs level 1 (fixed-Huffman quick strategy) makes incompressible data 5.5 % larger (17,694,554 wire bytes for 16 MiB; Python websockets 16,818,182, Node ws 16,782,342); the default predictor sends such messages uncompressed (tests/deflate.rs)"]
async fn compressing_incompressible_data_costs_at_most_one_percent() {
    let Some(wire) =
        peer_client_against_our_server(Peer::Python, true, false, "incompressible_overhead").await
    else {
        return;
    };
    let sent = wire.from_server.messages[5].wire_len;
    assert!(
        sent * 100 <= BIG as u64 * 101,
        "16 MiB of incompressible data left our server as {sent} bytes"
    );
}

#[test]
fn wire_parser_reads_headers_split_anywhere() {
    // A response head, a masked compressed text frame of 3 bytes, a 300-byte binary frame
    // in two fragments (16-bit length) and a masked close 1000, fed one byte at a time.
    let mut bytes =
        b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
            .to_vec();
    bytes.extend_from_slice(&[0xC1, 0x83, 1, 2, 3, 4, 9, 9, 9]);
    bytes.extend_from_slice(&[0x02, 126, 0, 200]);
    bytes.extend_from_slice(&[7; 200]);
    bytes.extend_from_slice(&[0x80, 100]);
    bytes.extend_from_slice(&[7; 100]);
    let key = [0x11, 0x22, 0x33, 0x44];
    let code = 1000u16.to_be_bytes();
    bytes.extend_from_slice(&[0x88, 0x82]);
    bytes.extend_from_slice(&key);
    bytes.extend_from_slice(&[code[0] ^ key[0], code[1] ^ key[1]]);
    let mut p = WireParser::default();
    for b in &bytes {
        p.feed(std::slice::from_ref(b));
    }
    assert_eq!(
        header_value(&p.log.head, "sec-websocket-extensions"),
        Some("permessage-deflate")
    );
    assert_eq!(
        p.log.messages,
        [
            WireMessage {
                opcode: 1,
                compressed: true,
                wire_len: 3,
                frames: 1,
                rsv1_on_continuation: false,
            },
            WireMessage {
                opcode: 2,
                compressed: false,
                wire_len: 300,
                frames: 2,
                rsv1_on_continuation: false,
            },
        ]
    );
    assert_eq!(p.log.closes, [Some(1000)]);
}
