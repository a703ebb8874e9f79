//! Shared by the tests of what a hostile peer can make us hold over real sockets
//! (`bounded_tokio.rs`, `bounded_blocking.rs`): raw peers that speak just enough
//! WebSocket to attack (the opening handshake, then frames written by hand) and what they
//! do once connected, the timings both layers are held to, and the liveness probes' check.
//! (The live heap is the tests' counting allocator's, `alloc_count`.)
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rapidws::handshake::accept_key;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bound on any one wait of these tests.
pub const LIMIT: Duration = Duration::from_secs(60);

/// Scheduling on a loaded 2-core machine (other test binaries and builds running), on top
/// of each deadline. Still far below every default timer, so a bound that holds shows the
/// configured deadline ended the connection; lower bounds stay exact.
pub const SLACK: Duration = Duration::from_millis(2500);

/// The message deadline of the unfinished-message tests.
pub const MESSAGE_TIMEOUT: Duration = Duration::from_millis(500);

/// The idle timeout of the trickle tests, and how often a trickler sends its next byte.
pub const IDLE: Duration = Duration::from_millis(600);
pub const TRICKLE_EVERY: Duration = Duration::from_millis(150);

pub const MIB: usize = 1 << 20;

/// How long a connection the budget cannot take waits for memory before its 1013
/// (`Config::budget_wait`, 10 s by default): short here, where the memory is held by
/// open fragments that only the test ends, so that the refusals come within the file's
/// few seconds.
pub const BUDGET_WAIT: Duration = Duration::from_millis(300);

/// Whether every one of `conns` connections holds `per` bytes of the budget or was
/// refused (`refused` counts the refusals the clients saw) and none waits for memory: the
/// bytes held and the refusals, to compare with a later look.
pub fn settled(
    budget: &rapidws::Budget,
    per: usize,
    refused: &std::sync::atomic::AtomicUsize,
    conns: usize,
) -> Option<(usize, usize)> {
    let r = refused.load(std::sync::atomic::Ordering::Relaxed);
    let held = budget.held();
    (budget.waiting() == 0 && held / per + r == conns).then_some((held, r))
}

/// How long [`settled`] must hold, unchanged, to be final: longer than the budget wait.
/// A connection between a partial grant and its next charge is out of the queue for a
/// moment, its partial bytes counted as held; only its wait's end (1013) settles it.
pub const SETTLE: Duration = BUDGET_WAIT.saturating_add(Duration::from_millis(200));

// --- frames as a raw peer writes them ---------------------------------------------------

/// A frame with first byte `b0` announcing `announced` payload bytes, followed by
/// `payload` (which may be shorter); masked (as a client sends) when `mask`.
pub fn frame(b0: u8, announced: u64, payload: &[u8], mask: bool) -> Vec<u8> {
    const KEY: [u8; 4] = [0x5a, 0x13, 0xc7, 0x88];
    let m = if mask { 0x80 } else { 0 };
    let mut f = vec![b0];
    match announced {
        0..=125 => f.push(m | announced as u8),
        126..=0xffff => {
            f.push(m | 126);
            f.extend_from_slice(&(announced as u16).to_be_bytes());
        }
        _ => {
            f.push(m | 127);
            f.extend_from_slice(&announced.to_be_bytes());
        }
    }
    if mask {
        f.extend_from_slice(&KEY);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ KEY[i & 3]));
    } else {
        f.extend_from_slice(payload);
    }
    f
}

/// A client's text message `text` and its close with `code` and `reason`, masked, in one
/// buffer to write at once.
pub fn text_then_close(text: &str, code: u16, reason: &str) -> Vec<u8> {
    let mut out = frame(0x81, text.len() as u64, text.as_bytes(), true);
    let mut close = code.to_be_bytes().to_vec();
    close.extend_from_slice(reason.as_bytes());
    out.extend(frame(0x88, close.len() as u64, &close, true));
    out
}

/// `len` zero bytes compressed with permessage-deflate (about 1,000 to 1): the payload of
/// a compressed frame.
#[cfg(feature = "deflate")]
pub fn deflated_zeros(len: usize) -> Vec<u8> {
    use rapidws::Role;
    use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};
    let config = DeflateConfig::new().level(9);
    let mut sender = PerMessageDeflate::new(Role::Client, DeflateParams::default(), &config);
    let mut out = Vec::new();
    assert!(sender.compress(&vec![0u8; len], &mut out).unwrap());
    out
}

/// What a raw peer reads from us: frames until a close frame (its code), or the end of
/// the stream.
#[derive(Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Payload bytes of data frames read so far.
    pub data: usize,
}

impl FrameReader {
    /// Parses the frames in `buf`; `Some(code)` at a close frame (0 when it had no code).
    fn parse(&mut self) -> Option<u16> {
        loop {
            let b = &self.buf;
            if b.len() < 2 {
                return None;
            }
            let masked = b[1] & 0x80 != 0;
            let (len, mut at) = match b[1] & 0x7f {
                126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
                127 if b.len() >= 10 => (
                    u64::from_be_bytes(b[2..10].try_into().unwrap()) as usize,
                    10,
                ),
                126 | 127 => return None,
                n => (n as usize, 2),
            };
            let key = masked.then_some(at);
            if masked {
                at += 4;
            }
            if b.len() < at + len {
                return None;
            }
            let op = b[0] & 0x0f;
            if op == 0x8 {
                let mut p = b[at..at + len].to_vec();
                if let Some(k) = key {
                    let k: [u8; 4] = b[k..k + 4].try_into().unwrap();
                    p.iter_mut()
                        .zip(k.iter().cycle())
                        .for_each(|(x, k)| *x ^= k);
                }
                return Some(if p.len() >= 2 {
                    u16::from_be_bytes([p[0], p[1]])
                } else {
                    0
                });
            }
            if op < 0x8 {
                self.data += len;
            }
            self.buf.drain(..at + len);
        }
    }

    /// Feeds bytes read from the socket; `Some(code)` once a close frame is complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<u16> {
        self.buf.extend_from_slice(bytes);
        self.parse()
    }
}

// --- raw peers (tokio sockets; the blocking tests run them on a runtime of their own) ---

/// The opening handshake as a raw client on `stream` (offering permessage-deflate when
/// `deflate`): returns the bytes that came after the response head.
pub async fn client_handshake(stream: &mut TcpStream, deflate: bool) -> Vec<u8> {
    let ext = if deflate {
        "Sec-WebSocket-Extensions: permessage-deflate\r\n"
    } else {
        ""
    };
    let request = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{ext}\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (head, rest) = read_head(stream).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    if deflate {
        assert!(head.contains("permessage-deflate"), "{head}");
    }
    rest
}

/// The opening handshake as a raw server on `stream`, accepting whatever is asked
/// (permessage-deflate with its defaults when `deflate` and offered).
pub async fn server_handshake(stream: &mut TcpStream, deflate: bool) {
    let (head, _) = read_head(stream).await;
    let key = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case("sec-websocket-key")
                .then(|| v.trim().to_owned())
        })
        .expect("a key");
    let ext = if deflate && head.contains("permessage-deflate") {
        "Sec-WebSocket-Extensions: permessage-deflate\r\n"
    } else {
        ""
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n{ext}\r\n",
        accept_key(key.as_bytes())
    );
    stream.write_all(response.as_bytes()).await.unwrap();
}

/// Reads an HTTP head; returns it and what followed it.
async fn read_head(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            return (head, buf[end + 4..].to_vec());
        }
        let n = stream.read(&mut chunk).await.expect("reading the head");
        assert!(n > 0, "EOF in the head");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads `stream` (with `leftover` first) until a close frame or the end: the close code
/// (`Some(0)` for a close without one), `None` when the stream ended without one or
/// nothing came for `limit`.
pub async fn read_close(
    stream: &mut (impl AsyncRead + Unpin),
    leftover: &[u8],
    limit: Duration,
) -> Option<u16> {
    let mut r = FrameReader::default();
    if let Some(code) = r.feed(leftover) {
        return Some(code);
    }
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(n)) => {
                if let Some(code) = r.feed(&buf[..n]) {
                    return Some(code);
                }
            }
        }
    }
}

// --- what the raw peers do once connected ------------------------------------------------

/// The first fragment of a message, as a client (`mask`) or a server; `compressed` sets
/// RSV1 (64 KiB of zeros, compressed once for all the tests).
#[cfg(feature = "deflate")]
pub fn first_fragment(compressed: bool, mask: bool) -> Vec<u8> {
    static DEFLATED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    if compressed {
        let p = DEFLATED.get_or_init(|| deflated_zeros(64 << 10));
        frame(0x40 | 0x02, p.len() as u64, p, mask)
    } else {
        frame(0x02, 1000, &[1; 1000], mask)
    }
}

/// Sends the first fragment of a message ([`first_fragment`]) and never the rest, pinging
/// meanwhile: the close code the other end sends, and the time from the fragment to it.
#[cfg(feature = "deflate")]
pub async fn unfinished_message(
    s: &mut TcpStream,
    compressed: bool,
    mask: bool,
    leftover: &[u8],
) -> (Option<u16>, Duration) {
    s.write_all(&first_fragment(compressed, mask))
        .await
        .unwrap();
    let sent = Instant::now();
    let code = keep_alive_with_pings(s, mask, leftover).await;
    (code, sent.elapsed())
}

/// Pings every 100 ms (so that nothing but the message deadline ends the connection)
/// while reading (with `leftover` first) until the close: its code.
async fn keep_alive_with_pings(s: &mut TcpStream, mask: bool, leftover: &[u8]) -> Option<u16> {
    let (mut rd, mut wr) = s.split();
    let ping = frame(0x89, 0, &[], mask);
    let pinger = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if wr.write_all(&ping).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        code = read_close(&mut rd, leftover, LIMIT) => code,
        _ = pinger => unreachable!(),
    }
}

/// Writes the bytes of a large frame one at a time, every [`TRICKLE_EVERY`], while reading
/// (with `leftover` first): the close code the other end sends (`None`: none came), and
/// the time since `start`.
pub async fn trickle(
    s: &mut TcpStream,
    mask: bool,
    leftover: &[u8],
    start: Instant,
) -> (Option<u16>, Duration) {
    let bytes = frame(0x82, 1 << 20, &[9; 4096], mask);
    let (mut rd, mut wr) = s.split();
    let writer = async {
        for b in &bytes {
            tokio::time::sleep(TRICKLE_EVERY).await;
            if wr.write_all(std::slice::from_ref(b)).await.is_err() {
                break;
            }
        }
        std::future::pending::<()>().await;
    };
    let code = tokio::select! {
        code = read_close(&mut rd, leftover, LIMIT) => code,
        _ = writer => unreachable!(),
    };
    (code, start.elapsed())
}

/// Writes `payload` `times` over in 64 KiB pieces, until a piece waits 200 ms (the other
/// end reads no more: a peer blocked in `send` towards us): when the last piece went.
pub async fn write_until_stuck(s: &mut TcpStream, payload: &[u8], times: usize) -> Instant {
    let mut last_write = Instant::now();
    for _ in 0..times {
        for piece in payload.chunks(64 << 10) {
            let w = tokio::time::timeout(Duration::from_millis(200), s.write_all(piece));
            match w.await {
                Ok(Ok(())) => last_write = Instant::now(),
                _ => return last_write,
            }
        }
    }
    last_write
}

/// A raw client attacking our server with an open compressed message: connects (one of
/// [`ramp`]'s at a time), offers permessage-deflate, sends `fragment` and holds the message
/// open. `true` when it was refused (the close it reads must be 1013); `false` when held
/// until `release`.
pub async fn hold_open_fragment(
    addr: SocketAddr,
    ramp: Arc<tokio::sync::Semaphore>,
    fragment: &[u8],
    release: &tokio::sync::Notify,
) -> bool {
    let permit = ramp.acquire_owned().await.unwrap();
    let mut s = connect(addr).await;
    let leftover = client_handshake(&mut s, true).await;
    s.write_all(fragment).await.unwrap();
    drop(permit);
    // A refused one reads 1013 at once; the others hold their message open until released
    // (then their socket closes: 1006 on our side).
    tokio::select! {
        code = read_close(&mut s, &leftover, LIMIT) => {
            assert_eq!(code, Some(1013), "the close code of a refused fragment");
            true
        }
        _ = release.notified() => false,
    }
}

/// A raw server: accepts one connection on `l` and answers its opening handshake
/// ([`server_handshake`]).
pub async fn accept(l: &TcpListener, deflate: bool) -> TcpStream {
    let (mut s, _) = l.accept().await.unwrap();
    server_handshake(&mut s, deflate).await;
    s
}

/// A raw server that trickles: accepts one connection on `l`, answers its handshake, and
/// [`trickle`]s as a server: the close code read, and the time since the connection came.
pub async fn trickling_server(l: TcpListener) -> (Option<u16>, Duration) {
    let (mut s, _) = l.accept().await.unwrap();
    let start = Instant::now();
    server_handshake(&mut s, false).await;
    trickle(&mut s, false, &[], start).await
}

/// How many attackers connect at once: thousands of connects in the same instant would
/// overflow the kernel's listen backlog (1,024), whose dropped SYNs are retried after 1 s,
/// for the probes as much as for the attackers; that is the kernel's limit, not ours.
pub fn ramp() -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(64))
}

/// A loopback listener on a free port.
pub async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A socket connected to `addr`, retrying while the listen backlog is full.
pub async fn connect(addr: SocketAddr) -> TcpStream {
    for _ in 0..50 {
        if let Ok(s) = TcpStream::connect(addr).await {
            let _ = s.set_nodelay(true);
            return s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("cannot connect to {addr}");
}

// --- timing -----------------------------------------------------------------------------

/// Liveness figures: how long fresh clients took from connect to their echo, and when
/// each started.
#[derive(Debug, Default)]
pub struct Probes {
    pub times: Vec<Duration>,
    started: Vec<Instant>,
}

impl Probes {
    pub fn push(&mut self, at: Instant, took: Duration) {
        self.started.push(at);
        self.times.push(took);
    }

    pub fn max(&self) -> Duration {
        self.times.iter().copied().max().unwrap_or_default()
    }

    /// The probes started before `t`, and the others.
    pub fn split(&self, t: Instant) -> (Probes, Probes) {
        let (mut before, mut after) = (Probes::default(), Probes::default());
        for (at, took) in self.started.iter().zip(&self.times) {
            let side = if *at < t { &mut before } else { &mut after };
            side.push(*at, *took);
        }
        (before, after)
    }

    /// "n=.. min/median/p90/max" in milliseconds.
    pub fn summary(&self) -> String {
        let mut t = self.times.clone();
        t.sort();
        if t.is_empty() {
            return "no probes".into();
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "n={} min {:.1} ms, median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
            t.len(),
            ms(t[0]),
            ms(t[t.len() / 2]),
            ms(t[t.len() * 9 / 10]),
            ms(t[t.len() - 1])
        )
    }
}

/// Checks the probes made once the attack was in place (`in_place`: the attackers
/// connected and holding what they could) against [`LIVENESS`], and reports those made
/// while they arrived. Thousands of connections arriving at once cost the kernel more
/// than us (76 % of the CPU time in its TCP and page-fault paths, `perf`, release build),
/// and an unoptimized build spends 8-25 ms zeroing each MiB it inflates (0.1-1 ms
/// optimized): those figures are printed, not asserted.
pub fn check_liveness(shape: &str, probes: &Probes, in_place: Instant) {
    let (arriving, held) = probes.split(in_place);
    // The test file's name says which layer.
    let layer = env!("CARGO_CRATE_NAME");
    eprintln!(
        "{layer}, {shape}: fresh client handshake + echo while the attack arrives: {}; while it holds: {}",
        arriving.summary(),
        held.summary()
    );
    assert!(
        !held.times.is_empty(),
        "{shape}: no probe ran while the attack held"
    );
    assert!(
        held.max() <= LIVENESS,
        "{shape}: a fresh client waited {:?} (> {LIVENESS:?}): {}",
        held.max(),
        held.summary()
    );
}

/// Reports what the shared budget let in (`admitted` messages held at once, `refused`
/// refused) and checks it: the peak within the limit, 64 admitted (what the budget holds;
/// two may be on their way in), and every refusal counted by the budget.
pub fn check_admitted(what: &str, budget: &rapidws::Budget, admitted: usize, refused: usize) {
    eprintln!(
        "{}, {what}: {admitted} held, {refused} refused; budget peak {} of {}",
        env!("CARGO_CRATE_NAME"),
        budget.peak(),
        budget.limit()
    );
    assert!(budget.peak() <= budget.limit());
    assert!(admitted <= 64 && admitted + 2 >= 64, "{admitted}");
    assert_eq!(refused as u64, budget.refused());
}

/// The liveness bound: a fresh client's handshake and echo on loopback, while an attack
/// holds. A server the attack stalled would answer only when one of the attack's timers
/// freed it (`MESSAGE_TIMEOUT`, 500 ms, is the earliest) or never; a live one answers in a
/// few milliseconds. 400 ms stays below the first and leaves a starved machine (load 9
/// on 2 cores, other test binaries and builds running) room that 100 ms did not: a
/// bound on being stalled, not a measure of speed.
pub const LIVENESS: Duration = Duration::from_millis(400);

/// Whether the elapsed time since `start` is within `from..=to`.
pub fn within(start: Instant, from: Duration, to: Duration) -> bool {
    let e = start.elapsed();
    e >= from && e <= to
}

/// Raises this process's soft limit on open descriptors to `n` if it is lower (a fresh
/// CI machine often starts at 1,024): the many-connection tests hold both ends of each
/// connection.
pub fn ensure_descriptors(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limits into the struct it is given, a local.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur >= n {
        return;
    }
    assert!(
        lim.rlim_max >= n,
        "this test needs {n} open descriptors; the hard limit is {}",
        lim.rlim_max
    );
    lim.rlim_cur = n;
    // SAFETY: setrlimit reads the struct it is given, a local.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}
