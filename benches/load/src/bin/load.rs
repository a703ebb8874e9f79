//! Loopback WebSocket echo load generator.
//!
//! ```text
//! load --port P --server-pid PID [--label NAME] [--conns C] [--inflight N]
//!      [--size BYTES] [--kind binary|text] [--deflate] [--raw]
//!      [--warmup S] [--measure S] [--header]
//! load --rate R --port P --server-pid PID [--label NAME] [--conns C] [--size BYTES]
//!      [--kind binary|text] [--deflate] [--raw] [--warmup S] [--measure S] [--header]
//! load --idle --port P --server-pid PID [--label NAME] [--conns C] [--idle-wait S] [--header]
//! ```
//!
//! Echo mode opens `C` connections (raw TCP plus a minimal client handshake, on one
//! current-thread runtime), and once all are open keeps `N` messages in flight on each: a
//! reply lets the next message go. Frames are built and masked once per payload variant (at least 8 variants
//! and at least 64 KiB of them, sent in turn, so that a compressor with context takeover
//! never finds the message it compresses in its 32 KiB window), so sending costs a
//! `write` of ready bytes. Every echo is checked: the
//! payload (inflated when compressed) must equal the variant sent, byte for byte; an
//! uncompressed echo in fragments or in frames of 32 KiB and more is compared as it
//! arrives and never held whole (so 10,000 connections of 256 KiB do not cost this tool
//! 2.5 GiB). After
//! `--warmup` seconds it measures for `--measure` seconds and prints one CSV row: messages
//! per second, payload MB/s (one direction, 10^6 bytes), p50/p99 round trip, the server's
//! user and system CPU seconds over the interval (utime/stime deltas from
//! `/proc/<pid>/stat`), echoes per server CPU-second, this tool's own CPU seconds (near the
//! interval length means the client was the bottleneck), wire bytes per echo, and the
//! server's peak RSS over the interval (its VmRSS read every 100 ms, at both ends too).
//!
//! Rate mode (`--rate R`, open loop) sends `R` messages per second on each connection on
//! its own schedule, whatever the echoes do: connection `i` of `C` sends at
//! `epoch + i/C/R + k/R` for k = 0, 1, ..., so the aggregate `C*R` msg/s is smooth. Each
//! connection is one loop of `sleep_until(next intended time)` then a `write` of a ready
//! frame (no timer when it is already late: the missed messages go at once). Latency is
//! measured from each message's intended send time, not from when it went out, so a late
//! send (a slow server, a full socket, a busy client) counts as latency instead of being
//! left out (no coordinated omission). One CSV row: offered rate (`C*R`), the rate sent,
//! the answered rate (echoes/s), p50/p99/p99.9/max latency, p50/p99 of how late this tool
//! itself sent (part of the latency: its timer ticks in whole milliseconds, and its CPU
//! and the socket may hold a send back), the server's user and system
//! CPU seconds and its CPU % (100 * cpu-seconds / wall-seconds), EER = answered echoes/s
//! per server CPU % (go-websocket-benchmark's efficiency figure), the server's peak
//! VmRSS over the window (sampled every 100 ms), this tool's own CPU seconds and %,
//! the messages sent but not yet echoed when the window ends, and errors (a connection
//! the server closed, an echo that differs from the message sent).
//!
//! The tool raises its own open-file soft limit to the hard limit; when `C` connections
//! still do not fit it exits, asking for a larger `ulimit -n` (the servers need as much).
//!
//! `--raw` is for the raw TCP echo server, which sends the client's masked frames back
//! unchanged: a masked echo is accepted when its bytes equal the frame sent.
//!
//! Idle mode opens `C` connections, sends one small message on each and waits for its echo
//! (so every connection has been used once), waits `--idle-wait` seconds, and prints the
//! server's VmRSS growth per connection over its RSS before the first connection.
//!
//! Everything is bounded: connecting has a 60 s limit, the run stops after warm-up plus
//! measurement, and connections are reset (SO_LINGER 0) so no TIME_WAIT piles up between
//! runs. Only 127.0.0.1 is ever dialled.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use rapidws_load::{Rng, clock_ticks_per_second, find, json_like, proc_cpu_ticks, proc_rss_bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};

/// Payload variants per run: at least this many, and enough that one cycle through them
/// spans [`VARIANT_SPAN`] bytes, so that a deflate window (32 KiB) never holds an earlier
/// copy of the message being compressed: context takeover then helps only as much as the
/// data's own redundancy allows (JSON-like text: a lot; random binary: nothing).
const MIN_VARIANTS: usize = 8;
const VARIANT_SPAN: usize = 64 * 1024;
const MAX_VARIANTS: usize = 4096;
/// Handshakes in progress at once while connecting.
const CONNECT_CONCURRENCY: usize = 128;
/// Limit for opening all connections.
const CONNECT_LIMIT: Duration = Duration::from_secs(60);
/// Time allowed for connections to wind down after the measurement.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How often the server's VmRSS is read during the measurement.
const RSS_SAMPLE: Duration = Duration::from_millis(100);
/// Descriptors kept free beyond one per connection (stdio, the runtime, /proc reads).
const SPARE_FDS: u64 = 64;
/// Frames at least this large (uncompressed) are checked as their bytes arrive instead of
/// being held whole (the 256 KiB cell has 10,000 of them in flight); reads then take up to
/// this much.
const STREAM_CHECK: usize = 32 * 1024;
/// Largest server frame the tool accepts (the largest payload is 256 KiB).
const MAX_FRAME: usize = 64 << 20;
/// The Sec-WebSocket-Key sent (RFC 6455 1.3's example nonce) and its accept value.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

#[derive(Clone, Debug)]
struct Args {
    port: u16,
    server_pid: u32,
    label: String,
    conns: usize,
    inflight: usize,
    size: usize,
    text: bool,
    deflate: bool,
    raw: bool,
    /// Open-loop mode: messages per second on each connection.
    rate: Option<f64>,
    warmup: f64,
    measure: f64,
    idle: bool,
    idle_wait: f64,
    header: bool,
}

fn usage(msg: &str) -> ! {
    eprintln!("{msg}\n(see the top of benches/load/src/bin/load.rs for the arguments)");
    std::process::exit(2)
}

impl Args {
    fn parse() -> Args {
        let mut a = Args {
            port: 0,
            server_pid: 0,
            label: "server".into(),
            conns: 1,
            inflight: 1,
            size: 1024,
            text: false,
            deflate: false,
            raw: false,
            rate: None,
            warmup: 2.0,
            measure: 3.0,
            idle: false,
            idle_wait: 2.0,
            header: false,
        };
        let mut it = std::env::args().skip(1);
        fn val<T: std::str::FromStr>(it: &mut impl Iterator<Item = String>, name: &str) -> T {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        }
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--port" => a.port = val(&mut it, "--port"),
                "--server-pid" => a.server_pid = val(&mut it, "--server-pid"),
                "--label" => a.label = val(&mut it, "--label"),
                "--conns" => a.conns = val(&mut it, "--conns"),
                "--inflight" => a.inflight = val(&mut it, "--inflight"),
                "--size" => a.size = val(&mut it, "--size"),
                "--kind" => {
                    a.text = match val::<String>(&mut it, "--kind").as_str() {
                        "text" => true,
                        "binary" => false,
                        _ => usage("--kind is binary or text"),
                    }
                }
                "--deflate" => a.deflate = true,
                "--raw" => a.raw = true,
                "--rate" => a.rate = Some(val(&mut it, "--rate")),
                "--warmup" => a.warmup = val(&mut it, "--warmup"),
                "--measure" => a.measure = val(&mut it, "--measure"),
                "--idle" => a.idle = true,
                "--idle-wait" => a.idle_wait = val(&mut it, "--idle-wait"),
                "--header" => a.header = true,
                other => usage(&format!("unknown argument {other}")),
            }
        }
        if a.port == 0 || a.server_pid == 0 {
            usage("--port and --server-pid are required");
        }
        if a.conns == 0 || a.inflight == 0 || a.conns > 100_000 || a.inflight > 10_000 {
            usage("--conns must be 1..=100000 and --inflight 1..=10000");
        }
        if a.size > 16 << 20 {
            usage("--size is at most 16 MiB");
        }
        if let Some(r) = a.rate
            && !(r > 0.0 && r <= 1e6)
        {
            usage("--rate is messages per second per connection, above 0 and at most 10^6");
        }
        if a.rate.is_some() && a.idle {
            usage("--rate and --idle do not go together");
        }
        if a.raw && a.deflate {
            usage("--raw and --deflate do not go together");
        }
        if !(0.0..=600.0).contains(&a.warmup)
            || !(0.1..=600.0).contains(&a.measure)
            || !(0.0..=600.0).contains(&a.idle_wait)
        {
            usage("times are in seconds, at most 600");
        }
        a
    }
}

// ---------------------------------------------------------------------------------
// Payloads and frames

fn random_bytes(size: usize, rng: &mut Rng) -> Vec<u8> {
    let mut v = Vec::with_capacity(size + 8);
    while v.len() < size {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(size);
    v
}

/// A client frame: FIN, `opcode`, RSV1 when compressed, masked with `key`.
fn client_frame(opcode: u8, rsv1: bool, payload: &[u8], key: [u8; 4]) -> (Vec<u8>, usize) {
    let mut f = Vec::with_capacity(payload.len() + 14);
    f.push(0x80 | if rsv1 { 0x40 } else { 0 } | opcode);
    let n = payload.len();
    if n < 126 {
        f.push(0x80 | n as u8);
    } else if n <= 0xffff {
        f.push(0x80 | 126);
        f.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend_from_slice(&(n as u64).to_be_bytes());
    }
    f.extend_from_slice(&key);
    let hdr = f.len();
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i & 3]));
    (f, hdr)
}

/// Raw deflate of `data` as one RFC 7692 message (a reset compressor, so the client needs
/// `client_no_context_takeover`): sync flush, and the trailing 00 00 ff ff removed.
fn deflate_message(c: &mut Compress, data: &[u8]) -> Vec<u8> {
    c.reset();
    let mut out = Vec::with_capacity(data.len() + 64);
    loop {
        let consumed = c.total_in() as usize;
        out.reserve(4096);
        c.compress_vec(&data[consumed..], &mut out, FlushCompress::Sync)
            .expect("deflate");
        if c.total_in() as usize == data.len() && out.len() < out.capacity() {
            break;
        }
    }
    // RFC 7692 7.2.1: remove the 4 octets 0x00 0x00 0xff 0xff at the tail.
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

struct Variant {
    /// The payload the echo must carry.
    data: Vec<u8>,
    /// The frame sent.
    frame: Vec<u8>,
}

fn variants(args: &Args) -> Vec<Variant> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ args.size as u64);
    let mut z = Compress::new(Compression::fast(), false);
    let n = VARIANT_SPAN
        .div_ceil(args.size.max(1))
        .clamp(MIN_VARIANTS, MAX_VARIANTS);
    (0..n)
        .map(|_| {
            let data = if args.text {
                json_like(args.size, &mut rng)
            } else {
                random_bytes(args.size, &mut rng)
            };
            let key = (rng.next_u64() as u32 | 1).to_le_bytes();
            let opcode = if args.text { 1 } else { 2 };
            let (frame, _) = if args.deflate {
                client_frame(opcode, true, &deflate_message(&mut z, &data), key)
            } else {
                client_frame(opcode, false, &data, key)
            };
            Variant { data, frame }
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// Round-trip histogram: log-linear buckets, 32 per power of two (about 3 % wide).

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = (SUB as usize) * (64 - SUB_BITS as usize + 1);

struct Hist {
    counts: Vec<u64>,
    total: u64,
}

impl Hist {
    fn new() -> Hist {
        Hist {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // >= SUB_BITS
        let shift = e - SUB_BITS;
        let mant = (v >> shift) - SUB; // 0..SUB
        (SUB + (shift as u64) * SUB + mant) as usize
    }
    /// The middle of bucket `i`.
    fn value(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            return i;
        }
        let shift = (i - SUB) / SUB;
        let mant = (i - SUB) % SUB + SUB;
        (mant << shift) + ((1u64 << shift) >> 1)
    }
    fn record(&mut self, ns: u64) {
        self.counts[Self::index(ns)] += 1;
        self.total += 1;
    }
    /// The `q` quantile (0..=1) in nanoseconds; 0 when empty.
    fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(i);
            }
        }
        Self::value(BUCKETS - 1)
    }
}

// ---------------------------------------------------------------------------------
// Shared state (one thread: Rc and Cell)

struct Shared {
    args: Args,
    variants: Vec<Variant>,
    stop: watch::Receiver<bool>,
    /// Set once every connection is open: no echo traffic before, so that opening 4,096
    /// connections does not queue their handshakes behind the echoes of those already open.
    go: watch::Receiver<bool>,
    measuring: Cell<bool>,
    stopping: Cell<bool>,
    connect: Semaphore,
    ready: Cell<usize>,
    used_once: Cell<usize>,
    /// Rate mode: the start of every connection's schedule (set before `go`).
    epoch: Cell<Option<Instant>>,
    /// Rate mode: messages sent.
    sent: Cell<u64>,
    msgs: Cell<u64>,
    payload_bytes: Cell<u64>,
    wire_bytes: Cell<u64>,
    errors: Cell<u64>,
    first_error: RefCell<Option<String>>,
    hist: RefCell<Hist>,
    /// Rate mode: how late each message went out after its intended time (this tool's
    /// own lateness: its timer's granularity, its CPU, a full socket).
    send_lag: RefCell<Hist>,
}

impl Shared {
    fn fail(&self, e: String) {
        self.errors.set(self.errors.get() + 1);
        let mut f = self.first_error.borrow_mut();
        if f.is_none() {
            *f = Some(e);
        }
    }
}

// ---------------------------------------------------------------------------------
// Client handshake

fn request(args: &Args) -> String {
    let mut r = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n",
        args.port
    );
    if args.deflate {
        // Our messages are compressed once per payload, so our side needs no context
        // takeover; the server keeps its own (we do not ask for server_no_context_takeover).
        r.push_str("Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover\r\n");
    }
    r.push_str("\r\n");
    r
}

/// What the server agreed to.
struct Agreed {
    deflate: bool,
    server_no_context_takeover: bool,
}

async fn connect(shared: &Shared) -> Result<(TcpStream, Vec<u8>, Agreed), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], shared.args.port));
    let sock = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    // Reset on close: no TIME_WAIT left over between runs of the matrix.
    sock.set_zero_linger().map_err(|e| format!("linger: {e}"))?;
    let mut s = sock
        .connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    s.write_all(request(&shared.args).as_bytes())
        .await
        .map_err(|e| format!("handshake write: {e}"))?;
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 16 * 1024 {
            return Err("handshake: response head too large".into());
        }
        let n = s
            .read_buf(&mut buf)
            .await
            .map_err(|e| format!("handshake read: {e}"))?;
        if n == 0 {
            return Err("handshake: connection closed".into());
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    if !head.starts_with("http/1.1 101") {
        let line = head.lines().next().unwrap_or("");
        return Err(format!("handshake: server answered {line:?}"));
    }
    if !head.contains(&ACCEPT.to_ascii_lowercase()) {
        return Err("handshake: wrong Sec-WebSocket-Accept".into());
    }
    let ext = head
        .lines()
        .find(|l| l.starts_with("sec-websocket-extensions:"))
        .unwrap_or("");
    let agreed = Agreed {
        deflate: ext.contains("permessage-deflate"),
        server_no_context_takeover: ext.contains("server_no_context_takeover"),
    };
    if shared.args.deflate && !agreed.deflate {
        return Err("handshake: server did not agree to permessage-deflate".into());
    }
    if !shared.args.deflate && agreed.deflate {
        return Err("handshake: server agreed to an extension we did not offer".into());
    }
    Ok((s, buf[end..].to_vec(), agreed))
}

// ---------------------------------------------------------------------------------
// Receiving and checking echoes

/// Reads server frames and checks each message against the variant expected next. An
/// uncompressed message is compared as its bytes arrive (a fragment, or a part of a frame
/// of at least [`STREAM_CHECK`] bytes, at a time) and never gathered; a compressed one
/// is gathered, inflated and then compared.
struct Receiver {
    buf: Vec<u8>,
    start: usize,
    /// Compressed fragments of a message in progress (when a message spans frames).
    msg: Vec<u8>,
    msg_open: bool,
    msg_compressed: bool,
    msg_wire: usize,
    /// Bytes of the uncompressed message in progress compared so far (with `--raw`: of
    /// the frame).
    msg_checked: usize,
    /// A large frame being compared as it arrives.
    partial: Option<Partial>,
    inflate: Option<Decompress>,
    reset_inflate: bool,
    out: Vec<u8>,
}

/// The rest of a large frame, compared as it arrives.
struct Partial {
    /// Bytes of it not yet received.
    remaining: usize,
    /// It ends its message.
    fin: bool,
}

/// One complete echo: its wire size.
struct Echo {
    wire: usize,
}

impl Receiver {
    fn new(leftover: Vec<u8>, agreed: &Agreed) -> Receiver {
        let mut buf = leftover;
        buf.reserve(4096);
        Receiver {
            buf,
            start: 0,
            msg: Vec::new(),
            msg_open: false,
            msg_compressed: false,
            msg_wire: 0,
            msg_checked: 0,
            partial: None,
            inflate: agreed.deflate.then(|| Decompress::new(false)),
            reset_inflate: agreed.server_no_context_takeover,
            out: Vec::new(),
        }
    }

    /// Reads once more from `rd` (growing the buffer for a large frame).
    async fn fill(&mut self, rd: &mut (impl AsyncRead + Unpin)) -> Result<(), String> {
        if self.start > 0 && (self.start == self.buf.len() || self.start > self.buf.capacity() / 2)
        {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.partial.is_some() && self.buf.capacity() - self.buf.len() < STREAM_CHECK {
            self.buf.reserve(STREAM_CHECK);
        } else if self.buf.capacity() - self.buf.len() < 2048 {
            // Double, so that a busy connection soon reads in large chunks while an idle
            // one (the idle-memory run has 10,000) stays small.
            self.buf
                .reserve(self.buf.capacity().clamp(4096, 256 * 1024));
        }
        let n = rd
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("server closed the connection".into());
        }
        Ok(())
    }

    /// The next complete echo in the buffer, checked against `want`; `Ok(None)` when more
    /// bytes are needed.
    fn next(&mut self, want: &Variant, raw: bool) -> Result<Option<Echo>, String> {
        loop {
            if let Some(p) = &mut self.partial {
                let n = (self.buf.len() - self.start).min(p.remaining);
                if n == 0 {
                    return Ok(None);
                }
                let got = &self.buf[self.start..self.start + n];
                let expect = if raw { &want.frame } else { &want.data };
                let at = self.msg_checked;
                if expect.get(at..at + n) != Some(got) {
                    return Err(format!("echo differs at byte {at}"));
                }
                self.msg_checked += n;
                self.msg_wire += n;
                self.start += n;
                p.remaining -= n;
                if p.remaining > 0 {
                    return Ok(None);
                }
                let fin = p.fin;
                self.partial = None;
                if !fin {
                    continue;
                }
                self.msg_open = false;
                if self.msg_checked != expect.len() {
                    return Err(format!(
                        "echo differs: {} bytes, expected {}",
                        self.msg_checked,
                        expect.len()
                    ));
                }
                return Ok(Some(Echo {
                    wire: self.msg_wire,
                }));
            }
            let b = &self.buf[self.start..];
            if b.len() < 2 {
                return Ok(None);
            }
            let fin = b[0] & 0x80 != 0;
            let rsv1 = b[0] & 0x40 != 0;
            let opcode = b[0] & 0x0f;
            let masked = b[1] & 0x80 != 0;
            let (len, mut hdr) = match b[1] & 0x7f {
                126 => {
                    if b.len() < 4 {
                        return Ok(None);
                    }
                    (u16::from_be_bytes([b[2], b[3]]) as usize, 4)
                }
                127 => {
                    if b.len() < 10 {
                        return Ok(None);
                    }
                    let l = u64::from_be_bytes(b[2..10].try_into().expect("8 bytes"));
                    (usize::try_from(l).unwrap_or(usize::MAX), 10)
                }
                l => (l as usize, 2),
            };
            if masked {
                if !raw {
                    return Err("server sent a masked frame".into());
                }
                hdr += 4;
            }
            if len > MAX_FRAME {
                return Err(format!("server frame of {len} bytes"));
            }
            if b.len() < hdr + len {
                let uncompressed = !rsv1 && (!self.msg_open || !self.msg_compressed);
                if len >= STREAM_CHECK && opcode < 8 && (raw || uncompressed) {
                    // Compared as it arrives, from the loop's top.
                    if raw {
                        // The whole frame, header included, against the frame sent.
                        self.msg_checked = 0;
                        self.msg_wire = 0;
                        self.partial = Some(Partial {
                            remaining: hdr + len,
                            fin: true,
                        });
                        continue;
                    }
                    if opcode != 0 {
                        if self.msg_open {
                            return Err("new message inside a fragmented one".into());
                        }
                        self.msg_open = true;
                        self.msg_compressed = false;
                        self.msg_checked = 0;
                        self.msg_wire = 0;
                    } else if !self.msg_open {
                        return Err("continuation without a message".into());
                    }
                    self.start += hdr;
                    self.msg_wire += hdr;
                    self.partial = Some(Partial {
                        remaining: len,
                        fin,
                    });
                    continue;
                }
                let need = self.start + hdr + len;
                if self.buf.capacity() < need {
                    self.buf.reserve(need - self.buf.len());
                }
                return Ok(None);
            }
            let wire = hdr + len;
            let payload = &b[hdr..hdr + len];
            if opcode >= 8 {
                // Control frames (a keepalive ping) are skipped; a close ends the run.
                if opcode == 8 {
                    let code = payload.get(..2).map(|c| u16::from_be_bytes([c[0], c[1]]));
                    let reason = String::from_utf8_lossy(payload.get(2..).unwrap_or_default());
                    return Err(format!("server sent a close frame ({code:?}, {reason:?})"));
                }
                self.start += wire;
                continue;
            }
            if raw {
                // The raw echo sends our frame back as it was.
                if b[..wire] != want.frame[..] {
                    return Err("raw echo differs from the frame sent".into());
                }
                self.start += wire;
                return Ok(Some(Echo { wire }));
            }
            if !self.msg_open && fin && !rsv1 && opcode != 0 {
                // The common case: a whole uncompressed message in one frame.
                if payload != &want.data[..] {
                    return Err(format!(
                        "echo differs: {} bytes, expected {}",
                        payload.len(),
                        want.data.len()
                    ));
                }
                self.start += wire;
                return Ok(Some(Echo { wire }));
            }
            // A fragment or a compressed message: gather, then check.
            if opcode != 0 {
                if self.msg_open {
                    return Err("new message inside a fragmented one".into());
                }
                self.msg_open = true;
                self.msg_compressed = rsv1;
                self.msg.clear();
                self.msg_wire = 0;
                self.msg_checked = 0;
            } else if !self.msg_open {
                return Err("continuation without a message".into());
            }
            if self.msg_compressed {
                self.msg.extend_from_slice(payload);
            } else {
                let at = self.msg_checked;
                if want.data.get(at..at + payload.len()) != Some(payload) {
                    return Err(format!("echo differs at byte {at}"));
                }
                self.msg_checked += payload.len();
            }
            self.msg_wire += wire;
            self.start += wire;
            if !fin {
                continue;
            }
            self.msg_open = false;
            let got_len = if self.msg_compressed {
                self.inflate_msg(want.data.len())?;
                if self.out != want.data {
                    return Err(format!(
                        "echo differs: {} bytes, expected {}",
                        self.out.len(),
                        want.data.len()
                    ));
                }
                self.out.len()
            } else {
                self.msg_checked
            };
            if got_len != want.data.len() {
                return Err(format!(
                    "echo differs: {got_len} bytes, expected {}",
                    want.data.len()
                ));
            }
            return Ok(Some(Echo {
                wire: self.msg_wire,
            }));
        }
    }

    fn inflate_msg(&mut self, expect: usize) -> Result<(), String> {
        let d = self
            .inflate
            .as_mut()
            .ok_or("compressed message without permessage-deflate")?;
        if self.reset_inflate {
            d.reset(false);
        }
        // RFC 7692 7.2.2: append 0x00 0x00 0xff 0xff and inflate.
        self.msg.extend_from_slice(&[0, 0, 0xff, 0xff]);
        self.out.clear();
        self.out.reserve(expect + 64);
        let start_in = d.total_in();
        for _ in 0..100_000 {
            let used = (d.total_in() - start_in) as usize;
            if self.out.capacity() - self.out.len() < 1024 {
                self.out.reserve(expect.max(4096));
            }
            let st = d
                .decompress_vec(&self.msg[used..], &mut self.out, FlushDecompress::Sync)
                .map_err(|e| format!("inflate: {e}"))?;
            let used = (d.total_in() - start_in) as usize;
            if self.out.len() > expect + 1024 {
                return Err("inflated echo is too large".into());
            }
            if matches!(st, Status::StreamEnd) {
                return Ok(());
            }
            if used == self.msg.len() && self.out.len() < self.out.capacity() {
                return Ok(());
            }
        }
        Err("inflate made no progress".into())
    }
}

// ---------------------------------------------------------------------------------
// One connection

async fn connection(shared: Rc<Shared>, idx: usize) {
    if let Err(e) = run_connection(&shared, idx).await
        && !shared.stopping.get()
    {
        shared.fail(e);
    }
}

async fn run_connection(shared: &Shared, idx: usize) -> Result<(), String> {
    let permit = shared
        .connect
        .acquire()
        .await
        .map_err(|_| "semaphore closed".to_string())?;
    let (mut stream, leftover, agreed) = connect(shared).await?;
    drop(permit);
    shared.ready.set(shared.ready.get() + 1);
    let raw = shared.args.raw;
    let mut rx = Receiver::new(leftover, &agreed);
    let (mut rd, mut wr) = stream.split();

    if shared.args.idle {
        let v = &shared.variants[0];
        wr.write_all(&v.frame)
            .await
            .map_err(|e| format!("write: {e}"))?;
        while rx.next(v, raw)?.is_none() {
            rx.fill(&mut rd).await?;
        }
        shared.used_once.set(shared.used_once.get() + 1);
        let mut stop = shared.stop.clone();
        let _ = stop.wait_for(|s| *s).await;
        return Ok(());
    }

    // No echo traffic until every connection is open.
    let mut go = shared.go.clone();
    let _ = go.wait_for(|g| *g).await;

    if let Some(rate) = shared.args.rate {
        return open_loop(shared, idx, rate, &mut rx, &mut rd, &mut wr).await;
    }

    // Sent and not yet echoed: (variant, send time).
    let inflight: RefCell<VecDeque<(usize, Instant)>> =
        RefCell::new(VecDeque::with_capacity(shared.args.inflight));
    let credits = Cell::new(shared.args.inflight);
    let wake_writer = Notify::new();
    let next_variant = Cell::new(0usize);

    let writer = async {
        let mut out: Vec<u8> = Vec::new();
        loop {
            let k = credits.replace(0);
            if k == 0 {
                wake_writer.notified().await;
                continue;
            }
            out.clear();
            let now = Instant::now();
            let mut one = None;
            {
                let mut q = inflight.borrow_mut();
                for _ in 0..k {
                    let v = next_variant.get();
                    next_variant.set((v + 1) % shared.variants.len());
                    q.push_back((v, now));
                    if k == 1 {
                        one = Some(v);
                    } else {
                        out.extend_from_slice(&shared.variants[v].frame);
                    }
                }
            }
            // One message goes out from its ready frame (no per-connection copy: 10,000
            // connections of 256 KiB would hold 2.5 GiB of them); several, gathered.
            let bytes = match one {
                Some(v) => &shared.variants[v].frame[..],
                None => &out[..],
            };
            if let Err(e) = wr.write_all(bytes).await {
                return Err::<(), String>(format!("write: {e}"));
            }
        }
    };

    let reader = async {
        loop {
            let mut got = 0;
            loop {
                let Some(&(v, t0)) = inflight.borrow().front() else {
                    break;
                };
                let Some(echo) = rx.next(&shared.variants[v], raw)? else {
                    break;
                };
                inflight.borrow_mut().pop_front();
                got += 1;
                shared.msgs.set(shared.msgs.get() + 1);
                shared
                    .payload_bytes
                    .set(shared.payload_bytes.get() + shared.variants[v].data.len() as u64);
                shared
                    .wire_bytes
                    .set(shared.wire_bytes.get() + echo.wire as u64);
                if shared.measuring.get() {
                    shared
                        .hist
                        .borrow_mut()
                        .record(t0.elapsed().as_nanos() as u64);
                }
            }
            if got > 0 {
                if shared.stopping.get() {
                    return Ok::<(), String>(());
                }
                credits.set(credits.get() + got);
                wake_writer.notify_one();
            }
            rx.fill(&mut rd).await?;
        }
    };

    let mut stop = shared.stop.clone();
    tokio::select! {
        r = reader => r,
        r = writer => r,
        _ = stop.wait_for(|s| *s) => Ok(()),
    }
}

/// Rate mode on one connection: message `k` is due at `epoch + phase + k * period`, where
/// `phase` spreads the connections evenly over one period; each goes out at its time (at
/// once when late) whatever the echoes do, and its echo's latency counts from that time.
async fn open_loop(
    shared: &Shared,
    idx: usize,
    rate: f64,
    rx: &mut Receiver,
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
) -> Result<(), String> {
    let raw = shared.args.raw;
    let period = Duration::from_secs_f64(1.0 / rate);
    let epoch = shared.epoch.get().ok_or("no schedule epoch")?;
    let phase = period.mul_f64(idx as f64 / shared.args.conns as f64);
    // Sent and not yet echoed: (variant, intended send time).
    let pending: RefCell<VecDeque<(usize, Instant)>> = RefCell::new(VecDeque::new());

    let writer = async {
        let mut due = epoch + phase;
        let mut v = idx % shared.variants.len();
        loop {
            // One timer per message at most, none when it is already due.
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
            pending.borrow_mut().push_back((v, due));
            shared.sent.set(shared.sent.get() + 1);
            if shared.measuring.get() {
                let lag = Instant::now().saturating_duration_since(due);
                shared.send_lag.borrow_mut().record(lag.as_nanos() as u64);
            }
            if let Err(e) = wr.write_all(&shared.variants[v].frame).await {
                return Err::<(), String>(format!("write: {e}"));
            }
            v = (v + 1) % shared.variants.len();
            due += period;
        }
    };

    let reader = async {
        loop {
            loop {
                let Some(&(v, due)) = pending.borrow().front() else {
                    break;
                };
                let Some(echo) = rx.next(&shared.variants[v], raw)? else {
                    break;
                };
                pending.borrow_mut().pop_front();
                shared.msgs.set(shared.msgs.get() + 1);
                shared
                    .payload_bytes
                    .set(shared.payload_bytes.get() + shared.variants[v].data.len() as u64);
                shared
                    .wire_bytes
                    .set(shared.wire_bytes.get() + echo.wire as u64);
                if shared.measuring.get() {
                    let late = Instant::now().saturating_duration_since(due);
                    shared.hist.borrow_mut().record(late.as_nanos() as u64);
                }
            }
            rx.fill(rd).await?;
        }
    };

    let mut stop = shared.stop.clone();
    tokio::select! {
        r = reader => r,
        r = writer => r,
        _ = stop.wait_for(|s| *s) => Ok(()),
    }
}

// ---------------------------------------------------------------------------------
// Main

struct Snapshot {
    at: Instant,
    sent: u64,
    msgs: u64,
    payload: u64,
    wire: u64,
    server: (u64, u64),
    client: (u64, u64),
}

fn snapshot(shared: &Shared) -> Result<Snapshot, String> {
    Ok(Snapshot {
        at: Instant::now(),
        sent: shared.sent.get(),
        msgs: shared.msgs.get(),
        payload: shared.payload_bytes.get(),
        wire: shared.wire_bytes.get(),
        server: proc_cpu_ticks(shared.args.server_pid)
            .map_err(|e| format!("server /proc stat: {e}"))?,
        client: proc_cpu_ticks(std::process::id()).map_err(|e| format!("own /proc stat: {e}"))?,
    })
}

/// Waits `secs`, reading the server's VmRSS every [`RSS_SAMPLE`] and at both ends;
/// returns the largest reading (0 if none could be read).
async fn sample_rss(pid: u32, secs: f64) -> u64 {
    let end = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
    let mut peak = proc_rss_bytes(pid).unwrap_or(0);
    loop {
        let now = tokio::time::Instant::now();
        if now >= end {
            return peak;
        }
        tokio::time::sleep_until((now + RSS_SAMPLE).min(end)).await;
        peak = peak.max(proc_rss_bytes(pid).unwrap_or(0));
    }
}

/// Raises the soft limit on open files to the hard limit; returns the soft limit then in
/// force (0 if it could not be read).
fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim = want;
            }
        }
    }
    lim.rlim_cur
}

fn main() {
    let args = Args::parse();
    let limit = raise_nofile_limit();
    if limit < args.conns as u64 + SPARE_FDS {
        eprintln!(
            "{} connections need {} open files and the limit is {limit} (the hard limit): \
             run `ulimit -n {}` first (as root, or raise the hard limit), for the server too",
            args.conns,
            args.conns as u64 + SPARE_FDS,
            (args.conns as u64 + SPARE_FDS).max(20_000)
        );
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    let code = local.block_on(&rt, run(args));
    std::process::exit(code);
}

async fn run(args: Args) -> i32 {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (go_tx, go_rx) = watch::channel(false);
    let shared = Rc::new(Shared {
        variants: variants(&args),
        args: args.clone(),
        stop: stop_rx,
        go: go_rx,
        measuring: Cell::new(false),
        stopping: Cell::new(false),
        connect: Semaphore::new(CONNECT_CONCURRENCY),
        ready: Cell::new(0),
        used_once: Cell::new(0),
        epoch: Cell::new(None),
        sent: Cell::new(0),
        msgs: Cell::new(0),
        payload_bytes: Cell::new(0),
        wire_bytes: Cell::new(0),
        errors: Cell::new(0),
        first_error: RefCell::new(None),
        hist: RefCell::new(Hist::new()),
        send_lag: RefCell::new(Hist::new()),
    });
    let rss_before = if args.idle {
        match proc_rss_bytes(args.server_pid) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("server RSS: {e}");
                return 1;
            }
        }
    } else {
        0
    };

    let mut tasks = Vec::with_capacity(args.conns);
    for _ in 0..args.conns {
        tasks.push(tokio::task::spawn_local(connection(
            shared.clone(),
            tasks.len(),
        )));
    }
    // Wait until every connection is open (or one failed).
    let target = |s: &Shared| {
        if args.idle {
            s.used_once.get()
        } else {
            s.ready.get()
        }
    };
    let deadline = Instant::now() + CONNECT_LIMIT;
    while target(&shared) < args.conns {
        if shared.errors.get() > 0 || Instant::now() > deadline {
            let e = shared.first_error.borrow().clone();
            eprintln!(
                "{}: {} of {} connections ready; first error: {}",
                args.label,
                target(&shared),
                args.conns,
                e.unwrap_or_else(|| "timed out".into())
            );
            return 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    shared.epoch.set(Some(Instant::now()));
    let _ = go_tx.send(true);
    let code = if args.idle {
        tokio::time::sleep(Duration::from_secs_f64(args.idle_wait)).await;
        let rss = proc_rss_bytes(args.server_pid);
        match rss {
            Ok(rss) => {
                let per = (rss.saturating_sub(rss_before)) as f64 / args.conns as f64;
                if args.header {
                    println!("server,conns,rss_before_bytes,rss_after_bytes,bytes_per_conn,errors");
                }
                println!(
                    "{},{},{},{},{:.0},{}",
                    args.label,
                    args.conns,
                    rss_before,
                    rss,
                    per,
                    shared.errors.get()
                );
                eprintln!(
                    "{}: {} idle connections: server RSS {:.1} MiB -> {:.1} MiB, {:.1} KiB per connection",
                    args.label,
                    args.conns,
                    rss_before as f64 / 1048576.0,
                    rss as f64 / 1048576.0,
                    per / 1024.0
                );
                0
            }
            Err(e) => {
                eprintln!("server RSS: {e}");
                1
            }
        }
    } else if args.rate.is_some() {
        measure_rate(&args, &shared).await
    } else {
        measure(&args, &shared).await
    };

    shared.stopping.set(true);
    let _ = stop_tx.send(true);
    let stop_deadline = tokio::time::Instant::now() + STOP_GRACE;
    for t in tasks {
        if tokio::time::timeout_at(stop_deadline, t).await.is_err() {
            break;
        }
    }
    code
}

/// What echo and rate mode both measure: the window after the warm-up, its counters and
/// the CPU seconds spent in it.
struct Window {
    /// The snapshots at its start and end.
    a: Snapshot,
    b: Snapshot,
    /// Its length in seconds.
    secs: f64,
    /// Echoes answered in it.
    msgs: u64,
    /// The server's user and system CPU seconds.
    su: f64,
    ss: f64,
    /// This tool's own CPU seconds (user and system).
    client: f64,
    /// The server's peak VmRSS over it.
    peak_rss: u64,
}

/// Waits out the warm-up, then measures for `--measure` seconds (latencies are recorded
/// meanwhile). The error is printed already.
async fn measure_window(args: &Args, shared: &Shared) -> Result<Window, ()> {
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let snap = || snapshot(shared).map_err(|e| eprintln!("{e}"));
    let a = snap()?;
    shared.measuring.set(true);
    let peak_rss = sample_rss(args.server_pid, args.measure).await;
    shared.measuring.set(false);
    let b = snap()?;
    let tck = clock_ticks_per_second() as f64;
    Ok(Window {
        secs: (b.at - a.at).as_secs_f64(),
        msgs: b.msgs - a.msgs,
        su: (b.server.0 - a.server.0) as f64 / tck,
        ss: (b.server.1 - a.server.1) as f64 / tck,
        client: ((b.client.0 + b.client.1) - (a.client.0 + a.client.1)) as f64 / tck,
        peak_rss,
        a,
        b,
    })
}

/// The tail of a mode's summary line: the error count and the first error, when any.
fn errors_note(shared: &Shared) -> String {
    let errors = shared.errors.get();
    if errors > 0 {
        format!(
            " ERRORS {errors}: {}",
            shared.first_error.borrow().clone().unwrap_or_default()
        )
    } else {
        String::new()
    }
}

async fn measure(args: &Args, shared: &Rc<Shared>) -> i32 {
    let Ok(w) = measure_window(args, shared).await else {
        return 1;
    };
    let cpu = w.su + w.ss;
    let hist = shared.hist.borrow();
    let p50 = hist.quantile(0.50) as f64 / 1000.0;
    let p99 = hist.quantile(0.99) as f64 / 1000.0;
    let per_cpu = if cpu > 0.0 { w.msgs as f64 / cpu } else { 0.0 };
    let wire = if w.msgs > 0 {
        (w.b.wire - w.a.wire) as f64 / w.msgs as f64
    } else {
        0.0
    };
    let errors = shared.errors.get();
    if args.header {
        println!(
            "server,payload,size,conns,inflight,deflate,seconds,msgs,msgs_per_s,mb_per_s,p50_us,p99_us,server_user_s,server_sys_s,echoes_per_cpu_s,client_cpu_s,wire_bytes_per_echo,errors,server_peak_rss_bytes"
        );
    }
    println!(
        "{},{},{},{},{},{},{:.3},{},{:.0},{:.2},{:.1},{:.1},{:.2},{:.2},{:.0},{:.2},{:.1},{},{}",
        args.label,
        if args.text { "text" } else { "binary" },
        args.size,
        args.conns,
        args.inflight,
        args.deflate as u8,
        w.secs,
        w.msgs,
        w.msgs as f64 / w.secs,
        (w.b.payload - w.a.payload) as f64 / w.secs / 1e6,
        p50,
        p99,
        w.su,
        w.ss,
        per_cpu,
        w.client,
        wire,
        errors,
        w.peak_rss
    );
    eprintln!(
        "{:<22} {:>6} {:>7}B c={:<5} n={:<3} z={} {:>9.0} msg/s {:>8.1} MB/s p50 {:>8.1}us p99 {:>8.1}us srv {:.2}u+{:.2}s cli {:.2}s {:>9.0}/cpu-s rss {:.0} MiB{}",
        args.label,
        if args.text { "text" } else { "bin" },
        args.size,
        args.conns,
        args.inflight,
        args.deflate as u8,
        w.msgs as f64 / w.secs,
        (w.b.payload - w.a.payload) as f64 / w.secs / 1e6,
        p50,
        p99,
        w.su,
        w.ss,
        w.client,
        per_cpu,
        w.peak_rss as f64 / 1048576.0,
        errors_note(shared)
    );
    if errors > 0 || w.msgs == 0 { 1 } else { 0 }
}

/// Rate mode's measurement: one CSV row (see the top of this file).
async fn measure_rate(args: &Args, shared: &Rc<Shared>) -> i32 {
    let Ok(w) = measure_window(args, shared).await else {
        return 1;
    };
    let rate = args.rate.unwrap_or(0.0);
    let offered = rate * args.conns as f64;
    let sent = (w.b.sent - w.a.sent) as f64 / w.secs;
    let answered = w.msgs as f64 / w.secs;
    let cpu_pct = 100.0 * (w.su + w.ss) / w.secs;
    let eer = if cpu_pct > 0.0 {
        answered / cpu_pct
    } else {
        0.0
    };
    let client_pct = 100.0 * w.client / w.secs;
    let pending = w.b.sent.saturating_sub(w.b.msgs);
    let hist = shared.hist.borrow();
    let us = |q: f64| hist.quantile(q) as f64 / 1000.0;
    let (p50, p99, p999, max) = (us(0.50), us(0.99), us(0.999), us(1.0));
    let lag = shared.send_lag.borrow();
    let (lag50, lag99) = (
        lag.quantile(0.50) as f64 / 1000.0,
        lag.quantile(0.99) as f64 / 1000.0,
    );
    let errors = shared.errors.get();
    if args.header {
        println!(
            "server,payload,size,conns,rate_per_conn,deflate,seconds,offered_per_s,sent_per_s,answered_per_s,p50_us,p99_us,p999_us,max_us,send_lag_p50_us,send_lag_p99_us,server_user_s,server_sys_s,server_cpu_pct,eer,server_peak_rss_bytes,client_cpu_s,client_cpu_pct,pending_at_end,errors"
        );
    }
    println!(
        "{},{},{},{},{},{},{:.3},{:.0},{:.0},{:.0},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.2},{:.2},{:.1},{:.1},{},{:.2},{:.1},{},{}",
        args.label,
        if args.text { "text" } else { "binary" },
        args.size,
        args.conns,
        rate,
        args.deflate as u8,
        w.secs,
        offered,
        sent,
        answered,
        p50,
        p99,
        p999,
        max,
        lag50,
        lag99,
        w.su,
        w.ss,
        cpu_pct,
        eer,
        w.peak_rss,
        w.client,
        client_pct,
        pending,
        errors
    );
    eprintln!(
        "{:<22} {:>7}B c={:<5} rate={:<5} offered {:>7.0}/s sent {:>7.0}/s answered {:>7.0}/s p50 {:.0}us p99 {:.0}us p99.9 {:.0}us (send lag p99 {:.0}us) srv {:.2}u+{:.2}s ({:.1} %) EER {:.1} rss {:.0} MiB cli {:.1} %{}",
        args.label,
        args.size,
        args.conns,
        rate,
        offered,
        sent,
        answered,
        p50,
        p99,
        p999,
        lag99,
        w.su,
        w.ss,
        cpu_pct,
        eer,
        w.peak_rss as f64 / 1048576.0,
        client_pct,
        errors_note(shared)
    );
    if errors > 0 || w.msgs == 0 { 1 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_bucket_width() {
        let mut h = Hist::new();
        for v in 1..=100_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 / 50_000_000.0 - 1.0).abs() < 0.04, "p50 {p50}");
        assert!((p99 / 99_000_000.0 - 1.0).abs() < 0.04, "p99 {p99}");
    }

    #[test]
    fn histogram_index_and_value_round_trip_monotonically() {
        let mut last = 0;
        for i in 0..BUCKETS - 1 {
            let v = Hist::value(i);
            assert!(v >= last, "bucket {i}");
            assert_eq!(Hist::index(v), i, "bucket {i} value {v}");
            last = v;
        }
    }

    #[test]
    fn deflated_message_inflates_back_through_receiver() {
        let data = json_like(4096, &mut Rng(7));
        let mut frame = vec![0xc1u8, 126];
        let z = deflate_message(&mut Compress::new(Compression::fast(), false), &data);
        frame.extend_from_slice(&(z.len() as u16).to_be_bytes());
        frame.extend_from_slice(&z);
        let agreed = Agreed {
            deflate: true,
            server_no_context_takeover: false,
        };
        let mut rx = Receiver::new(frame, &agreed);
        let want = Variant {
            data,
            frame: Vec::new(),
        };
        let echo = rx.next(&want, false).unwrap().expect("a whole echo");
        assert_eq!(echo.wire, 4 + z.len());
    }

    #[test]
    fn corrupted_echo_is_an_error() {
        let data = vec![1u8, 2, 3, 4];
        let mut frame = vec![0x82u8, 4];
        frame.extend_from_slice(&[1, 2, 3, 5]);
        let agreed = Agreed {
            deflate: false,
            server_no_context_takeover: false,
        };
        let mut rx = Receiver::new(frame, &agreed);
        let want = Variant {
            data,
            frame: Vec::new(),
        };
        assert!(rx.next(&want, false).is_err());
    }

    #[test]
    fn fragmented_echo_is_checked_fragment_by_fragment() {
        let data: Vec<u8> = (0..300u16).map(|i| i as u8).collect();
        let mut wire = vec![0x02u8, 100];
        wire.extend_from_slice(&data[..100]);
        wire.extend_from_slice(&[0x80, 126, 0, 200]);
        wire.extend_from_slice(&data[100..]);
        let agreed = Agreed {
            deflate: false,
            server_no_context_takeover: false,
        };
        let mut rx = Receiver::new(wire.clone(), &agreed);
        let want = Variant {
            data,
            frame: Vec::new(),
        };
        let echo = rx.next(&want, false).unwrap().expect("a whole echo");
        assert_eq!(echo.wire, wire.len());
    }

    #[test]
    fn large_echo_is_checked_as_it_arrives() {
        let data = random_bytes(100_000, &mut Rng(5));
        let mut wire = vec![0x82u8, 127];
        wire.extend_from_slice(&(data.len() as u64).to_be_bytes());
        wire.extend_from_slice(&data);
        let agreed = Agreed {
            deflate: false,
            server_no_context_takeover: false,
        };
        let want = Variant {
            data,
            frame: Vec::new(),
        };
        let mut rx = Receiver::new(wire[..1000].to_vec(), &agreed);
        assert!(rx.next(&want, false).unwrap().is_none());
        assert!(rx.partial.is_some());
        rx.buf.extend_from_slice(&wire[1000..60_000]);
        assert!(rx.next(&want, false).unwrap().is_none());
        assert_eq!(rx.start, rx.buf.len(), "what arrived was consumed");
        rx.buf.extend_from_slice(&wire[60_000..]);
        let echo = rx.next(&want, false).unwrap().expect("a whole echo");
        assert_eq!(echo.wire, wire.len());
        assert!(rx.msg.is_empty() && rx.partial.is_none());

        let mut bad = wire.clone();
        bad[70_000] ^= 1;
        let mut rx = Receiver::new(bad[..60_000].to_vec(), &agreed);
        assert!(rx.next(&want, false).unwrap().is_none());
        rx.buf.extend_from_slice(&bad[60_000..]);
        assert!(rx.next(&want, false).is_err());
    }

    #[test]
    fn large_raw_echo_is_checked_against_the_frame_sent() {
        let data = random_bytes(50_000, &mut Rng(6));
        let (frame, _) = client_frame(2, false, &data, [9, 8, 7, 6]);
        let agreed = Agreed {
            deflate: false,
            server_no_context_takeover: false,
        };
        let want = Variant {
            data,
            frame: frame.clone(),
        };
        let mut rx = Receiver::new(frame[..5000].to_vec(), &agreed);
        assert!(rx.next(&want, true).unwrap().is_none());
        rx.buf.extend_from_slice(&frame[5000..]);
        let echo = rx.next(&want, true).unwrap().expect("a whole echo");
        assert_eq!(echo.wire, frame.len());
    }

    #[test]
    fn client_frame_is_masked_and_unmasks_to_payload() {
        let data = random_bytes(70_000, &mut Rng(3));
        let key = [1, 2, 3, 4];
        let (f, hdr) = client_frame(2, false, &data, key);
        assert_eq!(hdr, 14);
        assert_eq!(f[1], 0x80 | 127);
        let back: Vec<u8> = f[hdr..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i & 3])
            .collect();
        assert_eq!(back, data);
    }

    #[test]
    fn json_like_text_has_requested_size_and_is_ascii() {
        for size in [16, 1024, 16 * 1024] {
            let t = json_like(size, &mut Rng(1));
            assert_eq!(t.len(), size);
            assert!(t.is_ascii());
        }
    }
}
