//! Firehose client benchmark: one client connection reading a stream of small text
//! messages (market data: JSON-like, 50-500 B) from `firehose_server`, which writes
//! pre-encoded frames in 256 KiB writes so that the client is the bottleneck. Every client
//! library is used through its documented client API with its default configuration, and
//! hands each message to the same check ([`Sink::consume`]: it must be text of the sizes
//! asked, starting with `[`), so all of them do the same work per message.
//!
//! ```text
//! firehose --client NAME [--port P] [--server-pid PID] [--size 64|50-500] [--warmup S]
//!          [--measure S] [--label L] [--header]
//! ```
//!
//! Clients over the socket: `rapidws` (`WebSocket::recv`), `rapidws-ref`
//! (`WebSocket::recv_ref`, the message borrowed from the receive buffer), `rapidws-batch`
//! (`WebSocket::recv_batch`, every whole message of a read lent at once, decoded by the
//! batch kernel),
//! `tokio-tungstenite`, `fastwebsockets` (`FragmentCollector::read_frame`),
//! `tokio-websockets`, `wtx` (`read_frame`, payload lent from its buffer). In memory, over
//! the same bytes (the server's block, passed over again and again; no socket, no
//! runtime): `mem-scan` (`rapidws_simd::frame::scan`, headers only: the floor of any
//! decoder), `mem-run` (`rapidws_simd::frame::run`: the batch kernel, client rules, every
//! check and UTF-8 validation, text lent as `&str`), `mem-decoder` (`rapidws::codec::Decoder`, client role, default
//! settings: every RFC 6455 check and UTF-8 validation), `mem-connection` (the sans-IO
//! `Connection`: `handle_bytes` with 64 KiB at a time, then `poll_event`).
//!
//! After `--warmup` seconds it measures for `--measure` seconds and prints one CSV row:
//! messages, messages per second, payload MB/s, this process's user and system CPU
//! seconds over the interval (`/proc/self/stat`), messages per client CPU-second, the
//! server's CPU seconds (with `--server-pid`; near the interval length means the server,
//! not the client, was the bottleneck), and the number of messages that failed the check
//! (any makes the exit status 1). Only
//! 127.0.0.1 is dialled; the process exits after measuring.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rapidws::codec::{Decoder, DecoderConfig, Item};
use rapidws::simd::frame::{self, FrameHeader};
use rapidws::tokio::{ClientConfig, Message, MessageRef};
use rapidws::{Config, Connection, Event, MessageKind, Role};
use rapidws_load::{SizeSpec, clock_ticks_per_second, firehose_block, proc_cpu_ticks};
use tokio::net::{TcpSocket, TcpStream};

/// Messages between two looks at the clock.
const CHECK_EVERY: u64 = 1024;
/// Connecting and the handshake must finish within this.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// Bytes handed to `Connection::handle_bytes` at a time (`mem-connection`).
const MEM_READ: usize = 64 * 1024;

const CLIENTS: &[&str] = &[
    "rapidws",
    "rapidws-ref",
    "rapidws-batch",
    "tokio-tungstenite",
    "fastwebsockets",
    "tokio-websockets",
    "wtx",
    "mem-scan",
    "mem-run",
    "mem-decoder",
    "mem-connection",
];

struct Args {
    client: String,
    label: String,
    port: u16,
    server_pid: Option<u32>,
    spec: SizeSpec,
    warmup: f64,
    measure: f64,
    header: bool,
}

fn usage(msg: &str) -> ! {
    eprintln!("{msg}\n(see the top of benches/load/src/bin/firehose.rs for the arguments)");
    std::process::exit(2)
}

impl Args {
    fn parse() -> Args {
        let mut a = Args {
            client: String::new(),
            label: String::new(),
            port: 0,
            server_pid: None,
            spec: SizeSpec { lo: 64, hi: 64 },
            warmup: 1.0,
            measure: 2.0,
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
                "--client" => a.client = val(&mut it, "--client"),
                "--label" => a.label = val(&mut it, "--label"),
                "--port" => a.port = val(&mut it, "--port"),
                "--server-pid" => a.server_pid = Some(val(&mut it, "--server-pid")),
                "--size" => {
                    a.spec = SizeSpec::parse(&val::<String>(&mut it, "--size"))
                        .unwrap_or_else(|| usage("--size is N or LO-HI, 1..=65535"))
                }
                "--warmup" => a.warmup = val(&mut it, "--warmup"),
                "--measure" => a.measure = val(&mut it, "--measure"),
                "--header" => a.header = true,
                other => usage(&format!("unknown argument {other}")),
            }
        }
        if !CLIENTS.contains(&a.client.as_str()) {
            usage(&format!("--client is one of {}", CLIENTS.join(", ")));
        }
        if !a.client.starts_with("mem-") && a.port == 0 {
            usage("--port is required for a socket client");
        }
        if !(0.0..=600.0).contains(&a.warmup) || !(0.1..=600.0).contains(&a.measure) {
            usage("times are in seconds, at most 600");
        }
        if a.label.is_empty() {
            a.label = a.client.clone();
        }
        a
    }
}

// ---------------------------------------------------------------------------------
// What every client does with a message

#[derive(Clone, Copy)]
struct Snapshot {
    at: Instant,
    msgs: u64,
    bytes: u64,
    cpu: (u64, u64),
    server_cpu: u64,
}

fn snapshot(msgs: u64, bytes: u64, server: Option<u32>) -> Snapshot {
    Snapshot {
        at: Instant::now(),
        msgs,
        bytes,
        cpu: proc_cpu_ticks(std::process::id()).expect("own /proc stat"),
        // A server that went away shows as 0: the run then fails on its read anyway.
        server_cpu: server
            .and_then(|p| proc_cpu_ticks(p).ok())
            .map_or(0, |(u, s)| u + s),
    }
}

/// Counts and checks messages, and ends the run: warm-up, then the measured interval.
struct Sink {
    lo: usize,
    hi: usize,
    msgs: u64,
    bytes: u64,
    bad: u64,
    warmup_end: Instant,
    measure: Duration,
    server: Option<u32>,
    start: Option<Snapshot>,
    end: Option<Snapshot>,
}

impl Sink {
    fn new(args: &Args) -> Sink {
        Sink {
            lo: args.spec.lo,
            hi: args.spec.hi,
            msgs: 0,
            bytes: 0,
            bad: 0,
            warmup_end: Instant::now() + Duration::from_secs_f64(args.warmup),
            measure: Duration::from_secs_f64(args.measure),
            server: args.server_pid,
            start: None,
            end: None,
        }
    }

    /// Takes one message; `false` once the run is over. Not inlined, so that a callgrind
    /// profile counts messages as calls to it (benches/callgrind.sh).
    #[inline(never)]
    fn consume(&mut self, text: bool, payload: &[u8]) -> bool {
        self.msgs += 1;
        self.bytes += payload.len() as u64;
        if !text || payload.len() < self.lo || payload.len() > self.hi || payload[0] != b'[' {
            self.bad += 1;
        }
        if self.msgs.is_multiple_of(CHECK_EVERY) {
            return self.tick();
        }
        true
    }

    #[cold]
    #[inline(never)]
    fn tick(&mut self) -> bool {
        let now = Instant::now();
        match self.start {
            None if now >= self.warmup_end => {
                self.start = Some(snapshot(self.msgs, self.bytes, self.server));
                true
            }
            Some(s) if now >= s.at + self.measure => {
                self.end = Some(snapshot(self.msgs, self.bytes, self.server));
                false
            }
            _ => true,
        }
    }
}

// ---------------------------------------------------------------------------------
// Clients over the socket

async fn tcp(port: u16) -> Result<TcpStream, String> {
    let sock = TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    // Reset on close: no TIME_WAIT left over between runs of the matrix.
    sock.set_zero_linger().map_err(|e| format!("linger: {e}"))?;
    let s = sock
        .connect(([127, 0, 0, 1], port).into())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    Ok(s)
}

fn err(what: &str) -> impl Fn(&dyn std::fmt::Display) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// How the rapidws client takes its messages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Receive {
    Owned,
    Borrowed,
    Batch,
}

async fn run_rapidws(args: &Args, sink: &mut Sink, how: Receive) -> Result<(), String> {
    let host = format!("127.0.0.1:{}", args.port);
    let path = format!("/{}", args.spec);
    let config = ClientConfig::default();
    let stream = tcp(args.port).await?;
    let mut ws = tokio::time::timeout(
        CONNECT_LIMIT,
        rapidws::tokio::client_handshake(stream, &host, &path, &config),
    )
    .await
    .map_err(|_| "handshake timed out".to_string())?
    .map_err(|e| err("handshake")(&e))?;
    if how == Receive::Batch {
        loop {
            let Some(batch) = ws.recv_batch().await.map_err(|e| err("recv_batch")(&e))? else {
                return Err("server closed".into());
            };
            for msg in batch {
                let keep = match msg {
                    MessageRef::Text(t) => sink.consume(true, t.as_bytes()),
                    MessageRef::Binary(b) => sink.consume(false, b),
                    _ => true,
                };
                if !keep {
                    return Ok(());
                }
            }
        }
    }
    if how == Receive::Borrowed {
        loop {
            let keep = match ws.recv_ref().await.map_err(|e| err("recv_ref")(&e))? {
                Some(MessageRef::Text(t)) => sink.consume(true, t.as_bytes()),
                Some(MessageRef::Binary(b)) => sink.consume(false, b),
                Some(_) => true,
                None => return Err("server closed".into()),
            };
            if !keep {
                return Ok(());
            }
        }
    }
    loop {
        let keep = match ws.recv().await.map_err(|e| err("recv")(&e))? {
            Some(Message::Text(t)) => sink.consume(true, t.as_bytes()),
            Some(Message::Binary(b)) => sink.consume(false, &b),
            Some(_) => true,
            None => return Err("server closed".into()),
        };
        if !keep {
            return Ok(());
        }
    }
}

async fn run_tungstenite(args: &Args, sink: &mut Sink) -> Result<(), String> {
    use tokio_tungstenite::tungstenite::Message as M;
    let url = format!("ws://127.0.0.1:{}/{}", args.port, args.spec);
    let stream = tcp(args.port).await?;
    let (mut ws, _) =
        tokio::time::timeout(CONNECT_LIMIT, tokio_tungstenite::client_async(url, stream))
            .await
            .map_err(|_| "handshake timed out".to_string())?
            .map_err(|e| err("handshake")(&e))?;
    loop {
        let keep = match ws.next().await {
            Some(Ok(M::Text(t))) => sink.consume(true, t.as_bytes()),
            Some(Ok(M::Binary(b))) => sink.consume(false, &b),
            Some(Ok(_)) => true,
            Some(Err(e)) => return Err(err("read")(&e)),
            None => return Err("server closed".into()),
        };
        if !keep {
            return Ok(());
        }
    }
}

async fn run_fastwebsockets(args: &Args, sink: &mut Sink) -> Result<(), String> {
    use fastwebsockets::{FragmentCollector, OpCode, Role, WebSocket};
    let mut stream = tcp(args.port).await?;
    // fastwebsockets' own client handshake needs hyper; its client API starts from
    // `after_handshake`, like its README's server.
    let path = format!("/{}", args.spec);
    tokio::time::timeout(
        CONNECT_LIMIT,
        rapidws_load::client_handshake(&mut stream, args.port, &path),
    )
    .await
    .map_err(|_| "handshake timed out".to_string())?
    .map_err(|e| err("handshake")(&e))?;
    let mut ws = FragmentCollector::new(WebSocket::after_handshake(stream, Role::Client));
    loop {
        let frame = ws.read_frame().await.map_err(|e| err("read")(&e))?;
        let keep = match frame.opcode {
            OpCode::Text => sink.consume(true, &frame.payload),
            OpCode::Binary => sink.consume(false, &frame.payload),
            OpCode::Close => return Err("server closed".into()),
            _ => true,
        };
        if !keep {
            return Ok(());
        }
    }
}

async fn run_tokio_websockets(args: &Args, sink: &mut Sink) -> Result<(), String> {
    let url = format!("ws://127.0.0.1:{}/{}", args.port, args.spec);
    let stream = tcp(args.port).await?;
    let builder = tokio_websockets::ClientBuilder::new()
        .uri(&url)
        .map_err(|e| err("uri")(&e))?;
    let (mut ws, _) = tokio::time::timeout(CONNECT_LIMIT, builder.connect_on(stream))
        .await
        .map_err(|_| "handshake timed out".to_string())?
        .map_err(|e| err("handshake")(&e))?;
    loop {
        let keep = match ws.next().await {
            Some(Ok(m)) => match m.as_text() {
                Some(t) => sink.consume(true, t.as_bytes()),
                None if m.is_binary() => sink.consume(false, m.as_payload()),
                None => true,
            },
            Some(Err(e)) => return Err(err("read")(&e)),
            None => return Err("server closed".into()),
        };
        if !keep {
            return Ok(());
        }
    }
}

async fn run_wtx(args: &Args, sink: &mut Sink) -> Result<(), String> {
    use wtx::collection::Vector;
    use wtx::misc::UriRef;
    use wtx::web_socket::{OpCode, WebSocketConnector, WebSocketPayloadOrigin};
    let url = format!("ws://127.0.0.1:{}/{}", args.port, args.spec);
    let stream = tcp(args.port).await?;
    // `no_masking(false)`: a plain RFC 6455 client (this one only reads anyway).
    let uri = UriRef::new(&url);
    let connect = WebSocketConnector::default()
        .no_masking(false)
        .connect(stream, &uri);
    let mut ws = tokio::time::timeout(CONNECT_LIMIT, connect)
        .await
        .map_err(|_| "handshake timed out".to_string())?
        .map_err(|e: wtx::Error| err("handshake")(&e))?;
    let mut buffer = Vector::new();
    loop {
        let frame = ws
            .read_frame(&mut buffer, WebSocketPayloadOrigin::Adaptive)
            .await
            .map_err(|e| err("read")(&e))?;
        let keep = match frame.op_code() {
            OpCode::Text => sink.consume(true, frame.payload()),
            OpCode::Binary => sink.consume(false, frame.payload()),
            OpCode::Close => return Err("server closed".into()),
            _ => true,
        };
        if !keep {
            return Ok(());
        }
    }
}

// ---------------------------------------------------------------------------------
// In memory, over the server's bytes

fn run_mem_scan(block: &[u8], sink: &mut Sink) -> Result<(), String> {
    let mut headers = [FrameHeader::default(); 32];
    loop {
        let mut pos = 0;
        while pos < block.len() {
            let s = frame::scan(&block[pos..], &mut headers);
            if s.frames == 0 {
                return Err(format!("scan stopped at byte {pos}: {:?}", s.error));
            }
            let mut at = pos;
            for h in &headers[..s.frames] {
                let start = at + h.header_len as usize;
                let end = start + h.payload_len as usize;
                if !sink.consume(h.opcode == 1, &block[start..end]) {
                    return Ok(());
                }
                at = end;
            }
            pos += s.consumed;
        }
    }
}

fn run_mem_run(block: &[u8], sink: &mut Sink) -> Result<(), String> {
    use rapidws::simd::frame::{Data, Rules};
    // Server frames are not masked: decoding leaves the bytes as they are, so the same
    // buffer serves every pass.
    let mut buf = block.to_vec();
    loop {
        let mut run = frame::run(&mut buf, Rules::client(16 << 20));
        for data in &mut run {
            let keep = match data {
                Data::Text(t) => sink.consume(true, t.as_bytes()),
                Data::Binary(b) => sink.consume(false, b),
            };
            if !keep {
                return Ok(());
            }
        }
        if run.consumed() != block.len() {
            return Err(format!(
                "run stopped at byte {}: {:?}",
                run.consumed(),
                run.end()
            ));
        }
    }
}

fn run_mem_decoder(block: &[u8], sink: &mut Sink) -> Result<(), String> {
    let mut decoder = Decoder::new(DecoderConfig::new(Role::Client));
    // Server frames are not masked: decoding leaves the bytes as they are, so the same
    // buffer serves every pass.
    let mut buf = block.to_vec();
    let mut pos = 0;
    loop {
        let d = decoder
            .decode(&mut buf[pos..])
            .map_err(|e| format!("decode: {e}"))?;
        match d.item {
            Some(Item::Data(c)) => {
                let payload = &buf[pos + c.payload.start..pos + c.payload.end];
                if !sink.consume(c.kind == MessageKind::Text, payload) {
                    return Ok(());
                }
            }
            Some(_) => {}
            None => return Err(format!("decoder wants more bytes at {pos}")),
        }
        pos += d.consumed;
        if pos == buf.len() {
            pos = 0;
        }
    }
}

fn run_mem_connection(block: &[u8], sink: &mut Sink) -> Result<(), String> {
    let mut conn = Connection::new(Role::Client, Config::default(), Instant::now());
    let mut pos = 0;
    loop {
        let end = (pos + MEM_READ).min(block.len());
        conn.handle_bytes(Instant::now(), &block[pos..end]);
        pos = if end == block.len() { 0 } else { end };
        while let Some(ev) = conn.poll_event() {
            let keep = match ev.map_err(|e| format!("connection: {e}"))? {
                Event::Message(MessageRef::Text(t)) => sink.consume(true, t.as_bytes()),
                Event::Message(MessageRef::Binary(b)) => sink.consume(false, b),
                _ => true,
            };
            if !keep {
                return Ok(());
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Main

fn main() {
    let args = Args::parse();
    let mut sink = Sink::new(&args);
    let result = if let Some(mem) = args.client.strip_prefix("mem-") {
        let (block, _) = firehose_block(args.spec);
        // The warm-up starts now, with the data built.
        sink.warmup_end = Instant::now() + Duration::from_secs_f64(args.warmup);
        match mem {
            "scan" => run_mem_scan(&block, &mut sink),
            "run" => run_mem_run(&block, &mut sink),
            "decoder" => run_mem_decoder(&block, &mut sink),
            _ => run_mem_connection(&block, &mut sink),
        }
    } else {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            // The warm-up starts once connected, like the measurement.
            let client = args.client.as_str();
            sink.warmup_end = Instant::now() + Duration::from_secs_f64(args.warmup);
            match client {
                "rapidws" => run_rapidws(&args, &mut sink, Receive::Owned).await,
                "rapidws-ref" => run_rapidws(&args, &mut sink, Receive::Borrowed).await,
                "rapidws-batch" => run_rapidws(&args, &mut sink, Receive::Batch).await,
                "tokio-tungstenite" => run_tungstenite(&args, &mut sink).await,
                "fastwebsockets" => run_fastwebsockets(&args, &mut sink).await,
                "tokio-websockets" => run_tokio_websockets(&args, &mut sink).await,
                _ => run_wtx(&args, &mut sink).await,
            }
        })
    };
    let code = report(&args, &sink, result);
    std::process::exit(code);
}

fn report(args: &Args, sink: &Sink, result: Result<(), String>) -> i32 {
    if let Err(e) = result {
        eprintln!("{}: {e}", args.label);
        return 1;
    }
    let (Some(a), Some(b)) = (sink.start, sink.end) else {
        eprintln!("{}: the run ended before it was measured", args.label);
        return 1;
    };
    let tck = clock_ticks_per_second() as f64;
    let secs = (b.at - a.at).as_secs_f64();
    let msgs = b.msgs - a.msgs;
    let user = (b.cpu.0 - a.cpu.0) as f64 / tck;
    let sys = (b.cpu.1 - a.cpu.1) as f64 / tck;
    let cpu = user + sys;
    let per_cpu = if cpu > 0.0 { msgs as f64 / cpu } else { 0.0 };
    let server = (b.server_cpu - a.server_cpu) as f64 / tck;
    if args.header {
        println!(
            "client,size,seconds,msgs,msgs_per_s,mb_per_s,client_user_s,client_sys_s,msgs_per_cpu_s,server_cpu_s,errors"
        );
    }
    println!(
        "{},{},{:.3},{},{:.0},{:.2},{:.2},{:.2},{:.0},{:.2},{}",
        args.label,
        args.spec,
        secs,
        msgs,
        msgs as f64 / secs,
        (b.bytes - a.bytes) as f64 / secs / 1e6,
        user,
        sys,
        per_cpu,
        server,
        sink.bad
    );
    eprintln!(
        "{:<18} {:>7} B {:>10.0} msg/s {:>8.1} MB/s cpu {:.2}u+{:.2}s srv {:.2}s {:>11.0} msg/cpu-s{}",
        args.label,
        args.spec.to_string(),
        msgs as f64 / secs,
        (b.bytes - a.bytes) as f64 / secs / 1e6,
        user,
        sys,
        server,
        per_cpu,
        if sink.bad > 0 {
            format!(" BAD MESSAGES {}", sink.bad)
        } else {
            String::new()
        }
    );
    if sink.bad > 0 || msgs == 0 { 1 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(spec: &str) -> Args {
        Args {
            client: String::new(),
            label: String::new(),
            port: 0,
            server_pid: None,
            spec: SizeSpec::parse(spec).unwrap(),
            warmup: 0.0,
            measure: 0.1,
            header: false,
        }
    }

    #[test]
    fn in_memory_readers_see_every_message_of_the_stream_intact() {
        type Reader = fn(&[u8], &mut Sink) -> Result<(), String>;
        let readers: [(&str, Reader); 4] = [
            ("scan", run_mem_scan),
            ("run", run_mem_run),
            ("decoder", run_mem_decoder),
            ("connection", run_mem_connection),
        ];
        for spec in ["64", "50-500"] {
            let a = args(spec);
            let (block, frames) = firehose_block(a.spec);
            for (name, read) in readers {
                let mut sink = Sink::new(&a);
                read(&block, &mut sink).unwrap();
                assert_eq!(sink.bad, 0, "{name} {spec}");
                // More than one pass over the block, and the runs were measured.
                assert!(sink.msgs > frames as u64, "{name} {spec}");
                assert!(sink.start.is_some() && sink.end.is_some(), "{name} {spec}");
            }
        }
    }

    #[test]
    fn sink_counts_a_wrong_message_as_bad() {
        let mut sink = Sink::new(&args("64"));
        assert!(sink.consume(true, &[b'['; 64]));
        assert!(sink.consume(false, &[b'['; 64]));
        assert!(sink.consume(true, &[b'['; 63]));
        assert!(sink.consume(true, &[b'x'; 64]));
        assert_eq!((sink.msgs, sink.bad), (4, 3));
    }
}
