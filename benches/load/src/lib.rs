//! Shared pieces of the loopback benchmark: the echo servers' command line and accept loop,
//! a minimal opening handshake (server side for the peers whose documented server API starts
//! after the handshake, fastwebsockets and yawc, and for the raw TCP echo; client side for
//! fastwebsockets' firehose client), `/proc` readers, the JSON-like payload generator and
//! the firehose stream (`firehose_block`).
//!
//! Every echo server takes the same arguments:
//!
//! ```text
//! echo_<lib> [--port P] [--deflate] [--level N] [--split] [--feed] [--handler] [--handler-ref]
//!           [--stream]
//! ```
//!
//! binds `127.0.0.1:P` (port 0 picks one), prints `READY <port>` on stdout once it listens,
//! and serves until killed, on a current-thread tokio runtime so that every library gets
//! exactly one core's worth of executor. Per-connection errors (the load tool resets its
//! connections when it stops) are not printed.

use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest HTTP request head the minimal handshake accepts.
pub const MAX_HEAD: usize = 8 * 1024;

/// RFC 6455 4.2.2: the GUID appended to `Sec-WebSocket-Key` before hashing.
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Command line of an echo server.
#[derive(Clone, Debug, Default)]
pub struct ServerArgs {
    /// Port on 127.0.0.1; 0 lets the OS choose (printed in the `READY` line).
    pub port: u16,
    /// Turn permessage-deflate on (libraries that support it).
    pub deflate: bool,
    /// Use the library's split read/write halves (rapidws).
    pub split: bool,
    /// Compression level (0..=9) instead of the benchmark's default of 1.
    pub level: Option<u32>,
    /// Answer with `feed` (queue without flushing) instead of `send` (rapidws).
    pub feed: bool,
    /// Echo through the event-handler API (`rapidws::handler`) instead of a receive loop.
    pub handler: bool,
    /// Echo through the handler API's borrowed callback (`Handler::BORROWED`,
    /// `on_message_ref`).
    pub handler_ref: bool,
    /// Echo through the streaming API: chunk delivery, each chunk received by the reading
    /// half (`recv_chunk`) sent on at once by the writing half as a fragment of the answer
    /// (`begin_message`, `send_chunk_bytes`, `finish_bytes`), so no message is held
    /// (rapidws).
    pub stream: bool,
    /// `Config::read_buffer_size` instead of the default (rapidws): under `--stream`, the
    /// size of a chunk when larger than 16 KiB.
    pub read_buffer: Option<usize>,
    /// Turn off the limits that are on by default and cost something per message: the
    /// shared memory budget, the message deadline and the idle timeout (rapidws), to
    /// measure what they cost.
    pub unbounded: bool,
    /// Put every connection under a shutdown signal (never given), to measure what that
    /// costs (rapidws).
    pub shutdown: bool,
    /// Turn the keepalive off (rapidws): with `--unbounded`, no timer runs at all, as in
    /// the peers' servers, to measure what the timers cost.
    pub no_keepalive: bool,
    /// zlib memory level (1..=9) instead of the library's default (rapidws).
    pub mem_level: Option<u8>,
    /// Largest window the server compresses with (9..=15), answered to every offer
    /// (rapidws).
    pub window_bits: Option<u8>,
}

impl ServerArgs {
    /// Parses `std::env::args()`; exits with a usage message on anything unknown.
    pub fn parse() -> Self {
        let mut out = ServerArgs::default();
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--port" => {
                    out.port = args
                        .next()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or_else(|| usage("--port needs a number"))
                }
                "--deflate" => out.deflate = true,
                "--split" => out.split = true,
                "--feed" => out.feed = true,
                "--handler" => out.handler = true,
                "--handler-ref" => out.handler_ref = true,
                "--stream" => out.stream = true,
                "--read-buffer" => {
                    out.read_buffer = Some(
                        args.next()
                            .and_then(|p| p.parse().ok())
                            .unwrap_or_else(|| usage("--read-buffer needs a number of bytes")),
                    )
                }
                "--unbounded" => out.unbounded = true,
                "--shutdown" => out.shutdown = true,
                "--no-keepalive" => out.no_keepalive = true,
                "--level" => {
                    out.level = Some(
                        args.next()
                            .and_then(|p| p.parse().ok())
                            .filter(|&l| l <= 9)
                            .unwrap_or_else(|| usage("--level needs 0..=9")),
                    )
                }
                "--mem-level" => {
                    out.mem_level = Some(
                        args.next()
                            .and_then(|p| p.parse().ok())
                            .filter(|l| (1..=9).contains(l))
                            .unwrap_or_else(|| usage("--mem-level needs 1..=9")),
                    )
                }
                "--window-bits" => {
                    out.window_bits = Some(
                        args.next()
                            .and_then(|p| p.parse().ok())
                            .filter(|b| (9..=15).contains(b))
                            .unwrap_or_else(|| usage("--window-bits needs 9..=15")),
                    )
                }
                other => usage(&format!("unknown argument {other}")),
            }
        }
        out
    }
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "{msg}\nusage: echo_<lib> [--port P] [--deflate] [--level N] [--mem-level N] [--window-bits N] [--split] [--feed] [--handler] [--handler-ref] [--stream] [--read-buffer BYTES] [--unbounded] [--no-keepalive]"
    );
    std::process::exit(2)
}

/// Builds the current-thread runtime every server runs on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Binds `127.0.0.1:port` and prints `READY <port>` (the harness waits for that line).
pub async fn bind(port: u16) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    announce(&listener)?;
    Ok(listener)
}

/// Prints `READY <port>` for `listener`.
pub fn announce(listener: &TcpListener) -> io::Result<()> {
    use std::io::Write as _;
    let port = listener.local_addr()?.port();
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY {port}")?;
    out.flush()
}

/// Accepts forever, sets `TCP_NODELAY` and spawns `handler` for every connection.
pub async fn accept_loop<F, Fut>(listener: TcpListener, handler: F) -> io::Result<()>
where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of file descriptors or similar: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(handler(stream));
    }
}

/// What the minimal server handshake agreed to.
#[derive(Clone, Debug, Default)]
pub struct Upgraded {
    /// The `Sec-WebSocket-Extensions` value sent back, if any.
    pub extensions: Option<String>,
    /// The request target (path and query) of the upgrade request.
    pub path: String,
}

/// The server side of the opening handshake, just enough for the benchmark's own client
/// (and any well-behaved one): reads the request head (at most [`MAX_HEAD`] bytes), checks
/// that it is a version 13 upgrade, answers 101 with the accept key, and when `deflate` is
/// set and the client offered permessage-deflate, agrees to it with context takeover in
/// the server-to-client direction, plus `client_no_context_takeover` when the client
/// offered it. The client must not send frames before the 101 (ours does not), so nothing
/// after the head is read.
pub async fn server_handshake(stream: &mut TcpStream, deflate: bool) -> io::Result<Upgraded> {
    let head = read_head(stream).await?;
    let end = head.len();
    let text = std::str::from_utf8(&head[..end])
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "head is not UTF-8"))?;
    let path = text
        .split("\r\n")
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or("/")
        .to_owned();
    let mut key = None;
    let mut version_ok = false;
    let mut offer: Option<&str> = None;
    for line in text.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("sec-websocket-key") {
            key = Some(value);
        } else if name.eq_ignore_ascii_case("sec-websocket-version") {
            version_ok = value == "13";
        } else if name.eq_ignore_ascii_case("sec-websocket-extensions") {
            offer = Some(value);
        }
    }
    let (Some(key), true) = (key, version_ok) else {
        stream
            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not an upgrade"));
    };
    let extensions = match offer {
        Some(o) if deflate && o.contains("permessage-deflate") => {
            // Only the first offer matters to our client; it never offers more than one.
            let first = o.split(',').next().unwrap_or("");
            let mut agreed = String::from("permessage-deflate");
            if first.contains("client_no_context_takeover") {
                agreed.push_str("; client_no_context_takeover");
            }
            Some(agreed)
        }
        _ => None,
    };
    let mut resp = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n",
        accept_key(key)
    );
    if let Some(e) = &extensions {
        resp.push_str("Sec-WebSocket-Extensions: ");
        resp.push_str(e);
        resp.push_str("\r\n");
    }
    resp.push_str("\r\n");
    stream.write_all(resp.as_bytes()).await?;
    Ok(Upgraded { extensions, path })
}

/// Reads an HTTP head (through its blank line, at most [`MAX_HEAD`] bytes) and nothing
/// after it: it peeks, then consumes only up to the end of the head, so the bytes that
/// follow (a server's first frames) stay in the socket for whoever reads next.
pub async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    let mut byte = [0u8; 512];
    loop {
        let n = stream.peek(&mut byte).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let start = head.len();
        head.extend_from_slice(&byte[..n]);
        let from = start.saturating_sub(3);
        if let Some(i) = find(&head[from..], b"\r\n\r\n") {
            let end = from + i + 4;
            stream.read_exact(&mut byte[..end - start]).await?;
            head.truncate(end);
            return Ok(head);
        }
        stream.read_exact(&mut byte[..n]).await?;
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
        }
    }
}

/// The client side of the opening handshake for `path` on `127.0.0.1:port`, for the
/// peers whose documented client API starts after the handshake (fastwebsockets): sends
/// a version 13 upgrade with RFC 6455 1.3's example key, checks the 101 and its accept
/// key, and reads nothing past the response head (see [`read_head`]).
pub async fn client_handshake(stream: &mut TcpStream, port: u16, path: &str) -> io::Result<()> {
    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await?;
    let head = read_head(stream).await?;
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    if !head.starts_with("http/1.1 101") {
        return Err(bad("handshake: no 101"));
    }
    if !head.contains(&accept_key(KEY).to_ascii_lowercase()) {
        return Err(bad("handshake: wrong Sec-WebSocket-Accept"));
    }
    Ok(())
}

/// RFC 6455 4.2.2: base64(SHA-1(key + GUID)).
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(WS_GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// Position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The number after `name` on the command line, or `default` (the small tools' flags).
///
/// # Panics
/// If the value after `name` is not a number.
pub fn arg_f64(name: &str, default: f64) -> f64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

/// User and system CPU time of a process, in clock ticks, from `/proc/<pid>/stat`.
pub fn proc_cpu_ticks(pid: u32) -> io::Result<(u64, u64)> {
    stat_cpu_ticks(&format!("/proc/{pid}/stat"))
}

/// User and system CPU time of the calling thread, in clock ticks.
pub fn thread_cpu_ticks() -> io::Result<(u64, u64)> {
    stat_cpu_ticks("/proc/thread-self/stat")
}

/// User and system CPU time, in clock ticks, from a `/proc` `stat` file.
fn stat_cpu_ticks(path: &str) -> io::Result<(u64, u64)> {
    let s = std::fs::read_to_string(path)?;
    // The command name (field 2) may contain spaces and parentheses: fields after it start
    // after the last ')'. There, index 0 is field 3 (state); utime is field 14, stime 15.
    let rest = s
        .rfind(')')
        .map(|i| &s[i + 1..])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| -> io::Result<u64> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc stat field"))
    };
    Ok((get(11)?, get(12)?))
}

/// Resident set size of a process in bytes, from `VmRSS` in `/proc/<pid>/status`.
pub fn proc_rss_bytes(pid: u32) -> io::Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    for line in s.lines() {
        if let Some(v) = line.strip_prefix("VmRSS:") {
            let kb: u64 = v
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad VmRSS"))?;
            return Ok(kb * 1024);
        }
    }
    Err(io::Error::new(io::ErrorKind::NotFound, "no VmRSS"))
}

/// Clock ticks per second for `/proc` CPU times (`getconf CLK_TCK`; 100 on Linux when
/// that is not available).
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// A small deterministic PRNG (xorshift64*), so every run sends the same bytes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `size` bytes of JSON-like ASCII text: an array of small records with varying numbers
/// and words, cut at `size` (so "JSON-like": the cut may end mid-record).
pub fn json_like(size: usize, rng: &mut Rng) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
    ];
    let mut s = String::with_capacity(size + 256);
    s.push('[');
    let mut id = rng.next_u64() % 100_000;
    while s.len() < size {
        id += 1 + rng.next_u64() % 7;
        let r = rng.next_u64();
        let _ = write!(
            s,
            "{{\"id\":{id},\"user\":\"{}_{}\",\"ts\":{},\"price\":{}.{:02},\"tags\":[\"{}\",\"{}\"],\"active\":{}}},",
            WORDS[(r % 16) as usize],
            r % 1000,
            1_700_000_000_000u64 + (r >> 20) % 1_000_000_000,
            (r >> 8) % 10_000,
            (r >> 4) % 100,
            WORDS[((r >> 32) % 16) as usize],
            WORDS[((r >> 40) % 16) as usize],
            r & 1 == 1,
        );
    }
    let mut v = s.into_bytes();
    v.truncate(size);
    v
}

/// Message sizes of a firehose stream: `lo..=hi` bytes, uniformly (`lo == hi` for one
/// size). Written `64` or `50-500`, which is also the request path's last segment that
/// the firehose server reads it from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeSpec {
    /// Smallest payload.
    pub lo: usize,
    /// Largest payload.
    pub hi: usize,
}

impl SizeSpec {
    /// Parses `N` or `LO-HI` (1 to 65,535 bytes, so that every frame has a 2- or 4-byte
    /// header, as market data does).
    pub fn parse(s: &str) -> Option<SizeSpec> {
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let n = s.parse().ok()?;
                (n, n)
            }
        };
        (1 <= lo && lo <= hi && hi <= 0xffff).then_some(SizeSpec { lo, hi })
    }
}

impl std::fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// Bytes of pre-encoded frames in one firehose block (written whole, again and again).
pub const FIREHOSE_BLOCK: usize = 256 * 1024;

/// The firehose stream's repeating block: unmasked server text frames (FIN, opcode 1),
/// each carrying a different JSON-like payload of a size drawn from `spec`, whole frames
/// only, at least [`FIREHOSE_BLOCK`] bytes. Returns the block and its frame count. The
/// server writes it and the in-memory decoders read it, so both see the same bytes.
pub fn firehose_block(spec: SizeSpec) -> (Vec<u8>, usize) {
    let mut rng = Rng(0x5eed_f12e_4053_0001 ^ (spec.lo as u64) << 16 ^ spec.hi as u64);
    let mut block = Vec::with_capacity(FIREHOSE_BLOCK + spec.hi + 4);
    let mut frames = 0;
    while block.len() < FIREHOSE_BLOCK {
        let span = (spec.hi - spec.lo + 1) as u64;
        let size = spec.lo + (rng.next_u64() % span) as usize;
        let payload = json_like(size, &mut rng);
        block.push(0x81);
        if size < 126 {
            block.push(size as u8);
        } else {
            block.push(126);
            block.extend_from_slice(&(size as u16).to_be_bytes());
        }
        block.extend_from_slice(&payload);
        frames += 1;
    }
    (block, frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_matches_rfc_6455_example() {
        // RFC 6455 1.3 example.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn cpu_ticks_grow_while_this_process_computes() {
        let pid = std::process::id();
        let (u0, s0) = proc_cpu_ticks(pid).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut x = 1u64;
        loop {
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            let (u, s) = proc_cpu_ticks(pid).unwrap();
            if u + s > u0 + s0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no CPU time accounted"
            );
        }
    }

    #[test]
    fn size_specs_parse_single_sizes_and_ranges() {
        assert_eq!(SizeSpec::parse("64"), Some(SizeSpec { lo: 64, hi: 64 }));
        assert_eq!(
            SizeSpec::parse("50-500"),
            Some(SizeSpec { lo: 50, hi: 500 })
        );
        assert_eq!(SizeSpec::parse("500-50"), None);
        assert_eq!(SizeSpec::parse("0"), None);
        assert_eq!(SizeSpec::parse("70000"), None);
        assert_eq!(SizeSpec::parse("50-500").unwrap().to_string(), "50-500");
    }

    #[test]
    fn firehose_block_is_whole_text_frames_of_the_sizes_asked() {
        for spec in ["64", "256", "50-500"] {
            let spec = SizeSpec::parse(spec).unwrap();
            let (block, frames) = firehose_block(spec);
            let mut hdrs = [rapidws::simd::frame::FrameHeader::default(); 64];
            let (mut pos, mut seen) = (0, 0);
            while pos < block.len() {
                let s = rapidws::simd::frame::scan(&block[pos..], &mut hdrs);
                assert!(s.frames > 0 && s.error.is_none());
                let mut p = pos;
                for h in &hdrs[..s.frames] {
                    assert!(h.fin && h.opcode == 1 && h.mask.is_none());
                    let len = h.payload_len as usize;
                    assert!((spec.lo..=spec.hi).contains(&len));
                    let start = p + h.header_len as usize;
                    assert_eq!(block[start], b'[');
                    assert!(block[start..start + len].is_ascii());
                    p = start + len;
                }
                pos += s.consumed;
                seen += s.frames;
            }
            assert_eq!((pos, seen), (block.len(), frames));
            assert!(block.len() >= FIREHOSE_BLOCK);
        }
    }

    #[test]
    fn rss_of_own_process_is_at_least_a_page() {
        assert!(proc_rss_bytes(std::process::id()).unwrap() >= 4096);
    }
}
