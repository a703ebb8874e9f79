//! Shared by the tests of what a hostile peer can make us hold over real sockets
//! (`bounded_tokio.rs`, `bounded_blocking.rs`): a process-wide counting allocator, raw
//! peers that speak just enough WebSocket to attack (the opening handshake, then frames
//! written by hand), and the liveness probe that times a fresh client's echo.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use rapidws::handshake::accept_key;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// --- a process-wide counting allocator --------------------------------------------------

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn note(delta: isize) {
    let now = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
    if delta > 0 && now > PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the bookkeeping is
// two atomics, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap bytes live in the whole process now (every thread, every test running).
pub fn live_heap() -> usize {
    LIVE.load(Ordering::Relaxed).max(0) as usize
}

/// The most heap bytes live at once since the last [`reset_peak`].
pub fn peak_heap() -> usize {
    PEAK.load(Ordering::Relaxed).max(0) as usize
}

/// Starts a new peak from what is live now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

pub const MIB: usize = 1 << 20;

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
pub async fn read_close(stream: &mut TcpStream, leftover: &[u8], limit: Duration) -> Option<u16> {
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

/// The liveness bound: a fresh client's handshake and echo on loopback.
pub const LIVENESS: Duration = Duration::from_millis(100);

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
