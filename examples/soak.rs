//! A bounded, self-stopping soak test: many loopback connections doing random operations
//! against an echo server in the same process, then checks that everything was released.
//!
//! ```text
//! ulimit -n 65536   # two descriptors per connection (client and server ends)
//! cargo run --release --example soak -- --connections 10000 --seconds 600
//! # where the per-process limit is lower (say 20,000), run the server in a child process,
//! # so each process holds one end of each connection:
//! cargo run --release --example soak -- --connections 10000 --seconds 600 --split-process
//! ```
//!
//! Each client connects (one in five offers permessage-deflate), then until the deadline
//! repeats, with a random pause between steps: a whole message of random size (text or
//! binary, compressible or not) whose echo it checks; a fragmented message; a ping whose
//! pong it checks; a burst of queued messages; and now and then a close and reconnect
//! (client-initiated, server-initiated, or an abrupt TCP drop with no close frame).
//!
//! Clients join spread over a ramp (a quarter of the phase, at most 30 s) and leave in the
//! same spread after the phase's duration.
//!
//! The run has two phases of the same workload: a warm-up (default: a quarter of the run, at
//! most 120 s) after which every connection is closed and the resident set is measured,
//! then the soak itself. At the end it checks:
//! - every connection is gone on both sides and every socket is closed (the process holds
//!   as many file descriptors as before the first connection),
//! - no task is left (the soak's own task counter, and tokio's `num_alive_tasks`),
//! - the heap is back where it started: live heap bytes (counted by a wrapper around the
//!   system allocator) within 10% of their value before the first connection, plus 1 MiB,
//! - the resident set is back where it started: after asking glibc to return its cached
//!   free memory (`malloc_trim`), `VmRSS` within 10% of its value after the warm-up. (The
//!   cold figure, before any connection, is printed too; it lacks the code pages and
//!   runtime structures the first connections touch, which stay.)
//! - no connection failed other than the ones the test broke on purpose.
//!
//! With `--split-process` the echo server runs in a child process (this program with
//! `--serve`) that makes the same checks on its side (connections, descriptors, tasks, heap,
//! trimmed RSS after the warm-up vs the end) and reports them before it exits; the run
//! fails if either process fails.
//!
//! It exits with status 1 when a check fails, 2 on bad arguments or a descriptor limit too
//! low for the connection count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rapidws::deflate::{CompressorPolicy, CompressorPool, DeflateConfig};
use rapidws::tokio::{
    ClientConfig, MaybeTlsStream, Message, MessageKind, ServerConfig, WebSocket, serve,
};
use tokio::net::{TcpListener, TcpStream};

/// Counts live heap bytes: the exact measure of "memory back where it started", free of
/// the allocator's own retention that RSS includes.
struct Counting;

static HEAP: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// plain atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HEAP.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        HEAP.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HEAP.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn heap_kib() -> i64 {
    HEAP.load(Ordering::SeqCst) as i64 / 1024
}

/// Longest a single step may take before the connection counts as stuck.
const STEP_LIMIT: Duration = Duration::from_secs(60);

struct Args {
    connections: usize,
    seconds: u64,
    warmup_seconds: u64,
    think_ms: u64,
    seed: u64,
    /// Run the echo server in a child process (one descriptor per connection per process).
    split_process: bool,
    /// This process is that child: serve, answer the parent on stdin/stdout, check, exit.
    serve: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        connections: 10_000,
        seconds: 600,
        warmup_seconds: 0,
        think_ms: 1000,
        seed: 0x5eed,
        split_process: false,
        serve: false,
    };
    let mut warmup = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--split-process" => {
                a.split_process = true;
                continue;
            }
            "--serve" => {
                a.serve = true;
                continue;
            }
            _ => {}
        }
        let mut value = || -> Result<u64, String> {
            it.next()
                .ok_or(format!("{flag} needs a value"))?
                .parse()
                .map_err(|e| format!("{flag}: {e}"))
        };
        match flag.as_str() {
            "--connections" => a.connections = value()? as usize,
            "--seconds" => a.seconds = value()?,
            "--warmup-seconds" => warmup = Some(value()?),
            "--think-ms" => a.think_ms = value()?.max(1),
            "--seed" => a.seed = value()?,
            "--help" | "-h" => {
                return Err("usage: soak [--connections N] [--seconds S] \
                            [--warmup-seconds W] [--think-ms MS] [--seed N] \
                            [--split-process]"
                    .into());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.connections == 0 || a.seconds == 0 {
        return Err("--connections and --seconds must be positive".into());
    }
    a.warmup_seconds = warmup.unwrap_or((a.seconds / 4).clamp(1, 120));
    Ok(a)
}

// ---------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Stats {
    server_live: AtomicUsize,
    client_live: AtomicUsize,
    tasks_live: AtomicUsize,
    connects: AtomicU64,
    messages: AtomicU64,
    bytes: AtomicU64,
    fragmented: AtomicU64,
    pings: AtomicU64,
    bursts: AtomicU64,
    client_closes: AtomicU64,
    server_closes: AtomicU64,
    drops: AtomicU64,
    connect_retries: AtomicU64,
    failures: AtomicU64,
}

impl Stats {
    fn fail(&self, what: String) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed);
        if n < 20 {
            eprintln!("failure: {what}");
        }
    }
}

/// Counts a live thing for as long as it exists.
struct Live<'a>(&'a AtomicUsize);

impl<'a> Live<'a> {
    fn new(c: &'a AtomicUsize) -> Self {
        c.fetch_add(1, Ordering::SeqCst);
        Live(c)
    }
}

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------
// Random numbers (xorshift64*: reproducible from --seed, no dependency)
// ---------------------------------------------------------------------------------------

/// Text that compresses well.
const JSON: &[u8] = b"{\"id\":12,\"name\":\"soak\"} ";

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
    /// A message size: mostly small, sometimes large.
    fn size(&mut self) -> usize {
        (match self.below(100) {
            0..60 => self.below(128),
            60..90 => 128 + self.below(8 * 1024),
            90..99 => 8 * 1024 + self.below(56 * 1024),
            _ => 64 * 1024 + self.below(192 * 1024),
        }) as usize
    }
    /// A payload: ASCII text (compressible) for text messages, bytes for binary ones.
    fn payload(&mut self, kind: MessageKind, len: usize) -> Vec<u8> {
        let compressible = self.chance(500);
        (0..len)
            .map(|i| match (kind, compressible) {
                (MessageKind::Text, true) => JSON[i % JSON.len()],
                (MessageKind::Text, false) => b'a' + (self.next() % 26) as u8,
                (_, true) => (i % 7) as u8,
                (_, false) => self.next() as u8,
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

/// A text message asking the server to close the connection itself.
const CLOSE_ME: &str = "please close";

async fn echo(mut ws: WebSocket<TcpStream>, stats: Arc<Stats>) {
    let _live = Live::new(&stats.server_live);
    let _task = Live::new(&stats.tasks_live);
    loop {
        let msg = match tokio::time::timeout(STEP_LIMIT * 2, ws.recv()).await {
            Ok(Ok(Some(m))) => m,
            // A clean close, or a peer that vanished (the abrupt drops are deliberate).
            Ok(Ok(None)) | Ok(Err(_)) => return,
            Err(_) => {
                stats.fail("server: no message for two step limits".into());
                return;
            }
        };
        if let Message::Text(t) = &msg
            && t.as_str() == CLOSE_ME
        {
            let _ = tokio::time::timeout(STEP_LIMIT, ws.close(1000, "asked to")).await;
            return;
        }
        if msg.is_data() {
            match tokio::time::timeout(STEP_LIMIT, ws.send(msg)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    stats.fail("server: echo send stuck".into());
                    return;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

enum Step {
    Continue,
    Reconnect,
}

/// Receives until a data message arrives; `Err` describes what came instead.
async fn recv_data(ws: &mut WebSocket<MaybeTlsStream<TcpStream>>) -> Result<Message, String> {
    loop {
        match tokio::time::timeout(STEP_LIMIT, ws.recv()).await {
            Ok(Ok(Some(m))) if m.is_data() => return Ok(m),
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => return Err("closed while waiting for an echo".into()),
            Ok(Err(e)) => return Err(format!("recv: {e}")),
            Err(_) => return Err("stuck waiting for an echo".into()),
        }
    }
}

fn same(m: &Message, kind: MessageKind, data: &[u8]) -> bool {
    match (m, kind) {
        (Message::Text(t), MessageKind::Text) => t.as_bytes() == data,
        (Message::Binary(b), MessageKind::Binary) => &b[..] == data,
        _ => false,
    }
}

async fn step(
    ws: &mut WebSocket<MaybeTlsStream<TcpStream>>,
    rng: &mut Rng,
    stats: &Stats,
) -> Result<Step, String> {
    let kind = if rng.chance(500) {
        MessageKind::Text
    } else {
        MessageKind::Binary
    };
    let r = rng.below(1000);
    match r {
        // A whole message, echoed.
        0..500 => {
            let len = rng.size();
            let data = rng.payload(kind, len);
            let msg = match kind {
                MessageKind::Text => Message::text(String::from_utf8(data.clone()).unwrap()),
                _ => Message::Binary(Bytes::from(data.clone())),
            };
            tokio::time::timeout(STEP_LIMIT, ws.send(msg))
                .await
                .map_err(|_| "send stuck")?
                .map_err(|e| format!("send: {e}"))?;
            let echo = recv_data(ws).await?;
            if !same(&echo, kind, &data) {
                return Err(format!("echo differs ({} bytes sent)", data.len()));
            }
            stats.messages.fetch_add(1, Ordering::Relaxed);
            stats.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        // A fragmented message.
        500..650 => {
            let parts = 1 + rng.below(5) as usize;
            let chunks: Vec<Vec<u8>> = (0..parts)
                .map(|_| {
                    let n = rng.size() / parts;
                    rng.payload(kind, n)
                })
                .collect();
            let send = async {
                let mut w = ws.begin_message(kind)?;
                for c in &chunks[..parts - 1] {
                    w.send_chunk(c).await?;
                }
                w.finish(&chunks[parts - 1]).await
            };
            tokio::time::timeout(STEP_LIMIT, send)
                .await
                .map_err(|_| "fragmented send stuck")?
                .map_err(|e| format!("fragmented send: {e}"))?;
            let whole = chunks.concat();
            let echo = recv_data(ws).await?;
            if !same(&echo, kind, &whole) {
                return Err("fragmented echo differs".into());
            }
            stats.fragmented.fetch_add(1, Ordering::Relaxed);
            stats.bytes.fetch_add(whole.len() as u64, Ordering::Relaxed);
        }
        // A ping; its pong must come back with the same payload.
        650..800 => {
            let len = rng.below(126) as usize;
            let payload = Bytes::from(rng.payload(MessageKind::Binary, len));
            tokio::time::timeout(STEP_LIMIT, ws.ping(payload.clone()))
                .await
                .map_err(|_| "ping stuck")?
                .map_err(|e| format!("ping: {e}"))?;
            loop {
                match tokio::time::timeout(STEP_LIMIT, ws.recv()).await {
                    Ok(Ok(Some(Message::Pong(p)))) if p == payload => break,
                    Ok(Ok(Some(Message::Pong(_) | Message::Ping(_)))) => {}
                    other => return Err(format!("waiting for a pong: {other:?}")),
                }
            }
            stats.pings.fetch_add(1, Ordering::Relaxed);
        }
        // A burst of small messages queued without waiting, then their echoes.
        800..850 => {
            let n = 2 + rng.below(30) as usize;
            let mut sent = Vec::with_capacity(n);
            for _ in 0..n {
                let len = rng.below(256) as usize;
                let data = rng.payload(MessageKind::Binary, len);
                match ws.try_send(Message::Binary(Bytes::from(data.clone()))) {
                    Ok(()) => sent.push(data),
                    // The queue is full: the rest of the burst waits for another time.
                    Err(_) => break,
                }
            }
            tokio::time::timeout(STEP_LIMIT, ws.flush())
                .await
                .map_err(|_| "flush stuck")?
                .map_err(|e| format!("flush: {e}"))?;
            for data in &sent {
                let echo = recv_data(ws).await?;
                if !same(&echo, MessageKind::Binary, data) {
                    return Err("burst echo differs or out of order".into());
                }
            }
            stats.bursts.fetch_add(1, Ordering::Relaxed);
            stats
                .messages
                .fetch_add(sent.len() as u64, Ordering::Relaxed);
        }
        // We close.
        850..860 => {
            tokio::time::timeout(STEP_LIMIT, ws.close(1000, "soak"))
                .await
                .map_err(|_| "close stuck")?
                .map_err(|e| format!("close: {e}"))?;
            stats.client_closes.fetch_add(1, Ordering::Relaxed);
            return Ok(Step::Reconnect);
        }
        // The server closes.
        860..865 => {
            tokio::time::timeout(STEP_LIMIT, ws.send(Message::text(CLOSE_ME)))
                .await
                .map_err(|_| "send stuck")?
                .map_err(|e| format!("send: {e}"))?;
            loop {
                match tokio::time::timeout(STEP_LIMIT, ws.recv()).await {
                    Ok(Ok(None)) => break,
                    Ok(Ok(Some(_))) => {}
                    other => return Err(format!("waiting for the server's close: {other:?}")),
                }
            }
            if ws.close_frame().map(|f| f.code.0) != Some(1000) {
                return Err(format!("server close frame: {:?}", ws.close_frame()));
            }
            stats.server_closes.fetch_add(1, Ordering::Relaxed);
            return Ok(Step::Reconnect);
        }
        // We vanish: TCP goes away without a close frame.
        865..870 => {
            stats.drops.fetch_add(1, Ordering::Relaxed);
            return Ok(Step::Reconnect);
        }
        _ => {}
    }
    Ok(Step::Continue)
}

async fn connect(
    url: &str,
    rng: &mut Rng,
    stats: &Stats,
    stop: Instant,
) -> Option<WebSocket<MaybeTlsStream<TcpStream>>> {
    let mut config = ClientConfig::default();
    if rng.chance(200) {
        config = config.with_deflate(Some(DeflateConfig::new().client_no_context_takeover(true)));
    }
    let mut backoff = Duration::from_millis(10);
    while Instant::now() < stop {
        match rapidws::tokio::connect(url, &config).await {
            Ok(ws) => {
                stats.connects.fetch_add(1, Ordering::Relaxed);
                return Some(ws);
            }
            // The listen backlog overflows while thousands connect at once: retry.
            Err(_) => {
                stats.connect_retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(backoff + Duration::from_millis(rng.below(50))).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
    None
}

async fn client(
    url: Arc<String>,
    seed: u64,
    start_delay: Duration,
    stop: Instant,
    think_ms: u64,
    stats: Arc<Stats>,
) {
    let _task = Live::new(&stats.tasks_live);
    let mut rng = Rng::new(seed);
    tokio::time::sleep(start_delay).await;
    'connection: while Instant::now() < stop {
        let Some(mut ws) = connect(&url, &mut rng, &stats, stop).await else {
            break;
        };
        let _live = Live::new(&stats.client_live);
        while Instant::now() < stop {
            tokio::time::sleep(Duration::from_millis(rng.below(2 * think_ms))).await;
            match step(&mut ws, &mut rng, &stats).await {
                Ok(Step::Continue) => {}
                Ok(Step::Reconnect) => continue 'connection,
                Err(e) => {
                    stats.fail(format!("client: {e}"));
                    continue 'connection;
                }
            }
        }
        match tokio::time::timeout(STEP_LIMIT, ws.close(1000, "done")).await {
            Ok(Ok(())) => {}
            other => stats.fail(format!("final close: {other:?}")),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Process figures
// ---------------------------------------------------------------------------------------

/// A `kB` figure from /proc/self/status (`VmRSS`, `RssAnon`, ...).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn rss_kib() -> u64 {
    status_kib("VmRSS")
}

/// Asks the allocator to give cached free memory back to the system (glibc only).
fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and releases glibc's own free lists; it is safe to
    // call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// RSS (KiB) as it is, then after trimming the allocator's caches.
fn rss_pair() -> (u64, u64) {
    let before = rss_kib();
    trim_allocator();
    (before, rss_kib())
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The soft limit on open files, from /proc/self/limits.
fn fd_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Runs one phase of the workload: `n` clients for `secs` seconds; returns when every
/// client task has finished and every server connection is gone (or after a grace period).
async fn phase(
    name: &str,
    url: &Arc<String>,
    args: &Args,
    secs: u64,
    seed: u64,
    stats: &Arc<Stats>,
    server: &mut Server,
) -> bool {
    let start = Instant::now();
    let ramp = Duration::from_secs((secs / 4).clamp(1, 30));
    let stop = start + Duration::from_secs(secs);
    let mut handles = Vec::with_capacity(args.connections);
    for i in 0..args.connections {
        let delay = ramp.mul_f64(i as f64 / args.connections as f64);
        handles.push(tokio::spawn(client(
            url.clone(),
            seed ^ (i as u64).wrapping_mul(0x1000_0000_01b3),
            delay,
            // Each client leaves as it arrived, spread over the ramp: 10,000 close
            // handshakes in the same instant would test the machine's scheduler (on 2
            // shared cores some exceed the 5 s close timeout), not the library.
            stop + delay,
            args.think_ms,
            stats.clone(),
        )));
    }
    // Progress once in a while.
    let progress = {
        let stats = stats.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(15)).await;
                eprintln!(
                    "[{name} {:>4}s] clients {} servers {} messages {} rss {} KiB heap {} KiB failures {}",
                    start.elapsed().as_secs(),
                    stats.client_live.load(Ordering::Relaxed),
                    stats.server_live.load(Ordering::Relaxed),
                    stats.messages.load(Ordering::Relaxed),
                    rss_kib(),
                    heap_kib(),
                    stats.failures.load(Ordering::Relaxed),
                );
            }
        })
    };
    for h in handles {
        if h.await.is_err() {
            stats.fail("a client task panicked".into());
        }
    }
    // The server side ends once it has seen the clients' closes.
    let servers = server.settle(stats).await;
    progress.abort();
    let _ = progress.await;
    eprintln!(
        "[{name}] done after {:.0?}: clients {} servers {servers}",
        start.elapsed(),
        stats.client_live.load(Ordering::SeqCst),
    );
    stats.client_live.load(Ordering::SeqCst) == 0 && servers == 0
}

/// Waits (bounded by the step limit) until no server connection is left; returns how many
/// are left.
async fn settle_local(stats: &Stats) -> usize {
    let grace = Instant::now() + STEP_LIMIT;
    while stats.server_live.load(Ordering::SeqCst) > 0 && Instant::now() < grace {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stats.server_live.load(Ordering::SeqCst)
}

/// Where the echo server runs.
#[expect(clippy::large_enum_variant, reason = "one value per run")]
enum Server {
    /// A task of this process, counting into the shared `Stats`.
    InProcess(tokio::task::JoinHandle<std::io::Result<()>>),
    /// A child process (`--serve`): one line per request on its stdin, one reply line on
    /// its stdout; closing its stdin ends it.
    Child {
        child: tokio::process::Child,
        stdin: Option<tokio::process::ChildStdin>,
        lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    },
}

impl Server {
    async fn start(args: &Args, stats: &Arc<Stats>) -> (Server, String) {
        if !args.split_process {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let url = format!("ws://{}/", listener.local_addr().unwrap());
            let stats = stats.clone();
            let task = tokio::spawn(serve(listener, server_config(args), move |ws| {
                echo(ws, stats.clone())
            }));
            return (Server::InProcess(task), url);
        }
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(std::env::current_exe().expect("exe"))
            .args(["--serve", "--connections", &args.connections.to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the server process");
        let stdin = child.stdin.take();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(STEP_LIMIT, lines.next_line())
            .await
            .ok()
            .and_then(|l| l.ok().flatten())
            .unwrap_or_default();
        let addr = first
            .strip_prefix("listening ")
            .expect("the server process did not say where it listens");
        let url = format!("ws://{addr}/");
        (
            Server::Child {
                child,
                stdin,
                lines,
            },
            url,
        )
    }

    /// Waits (bounded) until the server holds no connection; returns how many it holds.
    async fn settle(&mut self, stats: &Stats) -> usize {
        match self {
            Server::InProcess(_) => settle_local(stats).await,
            Server::Child { stdin, lines, .. } => {
                use tokio::io::AsyncWriteExt;
                let Some(w) = stdin.as_mut() else {
                    return usize::MAX;
                };
                if w.write_all(b"settle\n").await.is_err() || w.flush().await.is_err() {
                    return usize::MAX;
                }
                // The child waits up to one step limit, then measures for a few seconds.
                match tokio::time::timeout(STEP_LIMIT * 2, lines.next_line()).await {
                    Ok(Ok(Some(line))) => line
                        .strip_prefix("servers ")
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(usize::MAX),
                    _ => usize::MAX,
                }
            }
        }
    }

    /// Stops the server. For a child: closes its stdin, prints its report and returns
    /// whether its own checks passed.
    async fn stop(self) -> bool {
        match self {
            Server::InProcess(task) => {
                task.abort();
                let _ = task.await;
                true
            }
            Server::Child {
                mut child,
                stdin,
                mut lines,
            } => {
                drop(stdin);
                let report = async {
                    while let Ok(Some(line)) = lines.next_line().await {
                        println!("server process: {line}");
                    }
                    child.wait().await
                };
                match tokio::time::timeout(STEP_LIMIT * 2, report).await {
                    Ok(Ok(status)) => status.success(),
                    _ => {
                        println!("server process: no report within the time limit");
                        false
                    }
                }
            }
        }
    }
}

fn server_config(args: &Args) -> ServerConfig {
    // Compressors are shared: memory scales with messages being compressed, not connections.
    let pool = Arc::new(CompressorPool::new(64));
    ServerConfig::default()
        .with_max_connections(args.connections + 64)
        .with_deflate(Some(
            DeflateConfig::new().policy(CompressorPolicy::Pooled(pool)),
        ))
}

/// The `--serve` child: serves until its stdin closes, answering `settle` requests, then
/// checks that everything was released and prints its figures and verdict.
async fn serve_child(args: Args) -> bool {
    use std::io::Write;
    let stats = Arc::new(Stats::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let cold = Snapshot::take(&stats);
    let server = {
        let stats = stats.clone();
        tokio::spawn(serve(
            listener_addr_printed(listener),
            server_config(&args),
            move |ws| echo(ws, stats.clone()),
        ))
    };
    // Requests arrive on stdin; a plain thread reads them (tokio's stdin is a thread too).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let mut warm: Option<Snapshot> = None;
    let mut servers_left = 0;
    while let Some(request) = rx.recv().await {
        if request.trim() != "settle" {
            continue;
        }
        servers_left = settle_local(&stats).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        if warm.is_none() {
            warm = Some(Snapshot::take(&stats));
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "servers {servers_left}");
        let _ = out.flush();
    }
    server.abort();
    let _ = server.await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let release = Release {
        connections_left: servers_left,
        cold,
        warm: warm.unwrap_or(cold),
        end: Snapshot::take(&stats),
    };
    release.print("echo tasks");
    println!("failures           {}", release.end.failures);
    report(&release.verdict())
}

/// Prints the listener's address for the parent, then hands the listener on.
fn listener_addr_printed(listener: TcpListener) -> TcpListener {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening {}", listener.local_addr().unwrap());
    let _ = out.flush();
    listener
}

/// The process figures the release checks look at, taken at one moment on one side.
#[derive(Clone, Copy)]
struct Snapshot {
    /// `VmRSS` in KiB as found.
    rss: u64,
    /// `VmRSS` in KiB after the allocator gave its cached free memory back.
    rss_trimmed: u64,
    /// Live heap bytes, in KiB.
    heap: i64,
    /// Open file descriptors.
    fds: usize,
    /// The soak's own tasks still running (its task counter).
    tasks: usize,
    /// Tasks tokio counts as alive.
    alive: usize,
    /// Failures counted so far.
    failures: u64,
}

impl Snapshot {
    /// Trims the allocator (the untrimmed RSS is read first) and reads every figure.
    fn take(stats: &Stats) -> Self {
        let (rss, rss_trimmed) = rss_pair();
        Snapshot {
            rss,
            rss_trimmed,
            heap: heap_kib(),
            fds: open_fds(),
            tasks: stats.tasks_live.load(Ordering::SeqCst),
            alive: tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            failures: stats.failures.load(Ordering::SeqCst),
        }
    }
}

/// What the end-of-run checks look at, on one side: the process before the first
/// connection, after the warm-up, and at the end.
struct Release {
    connections_left: usize,
    cold: Snapshot,
    warm: Snapshot,
    end: Snapshot,
}

impl Release {
    /// Prints the checked figures; `tasks` names what the soak's task counter counts.
    fn print(&self, tasks: &str) {
        let (cold, warm, end) = (&self.cold, &self.warm, &self.end);
        println!(
            "rss (trimmed)      {} KiB cold, {} KiB after warm-up, {} KiB at the end",
            cold.rss_trimmed, warm.rss_trimmed, end.rss_trimmed
        );
        println!(
            "live heap          {} KiB cold, {} KiB after warm-up, {} KiB at the end",
            cold.heap, warm.heap, end.heap
        );
        println!(
            "file descriptors   {} before, {} at the end",
            cold.fds, end.fds
        );
        println!(
            "tasks left         {} {tasks}, {} tokio tasks alive",
            end.tasks, end.alive
        );
    }

    /// What failed; empty when everything was released.
    fn verdict(&self) -> Vec<String> {
        let (cold, warm, end) = (&self.cold, &self.warm, &self.end);
        let mut verdict = Vec::new();
        if self.connections_left > 0 {
            verdict.push("connections left open".to_owned());
        }
        if end.failures > 0 {
            verdict.push(format!("{} failures", end.failures));
        }
        if end.fds > cold.fds {
            verdict.push(format!("{} file descriptors leaked", end.fds - cold.fds));
        }
        if end.tasks != 0 || end.alive > 0 {
            verdict.push(format!(
                "{} soak tasks / {} tokio tasks left",
                end.tasks, end.alive
            ));
        }
        if end.heap as f64 > cold.heap as f64 * 1.10 + 1024.0 {
            verdict.push(format!(
                "live heap grew from {} to {} KiB",
                cold.heap, end.heap
            ));
        }
        if end.rss_trimmed as f64 > warm.rss_trimmed as f64 * 1.10 {
            verdict.push(format!(
                "rss (trimmed) grew from {} to {} KiB",
                warm.rss_trimmed, end.rss_trimmed
            ));
        }
        verdict
    }
}

fn report(verdict: &[String]) -> bool {
    if verdict.is_empty() {
        println!("PASS");
        true
    } else {
        println!("FAIL: {}", verdict.join("; "));
        false
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // One descriptor per connection end held by this process.
    let ends = if args.split_process || args.serve {
        1
    } else {
        2
    };
    let need = ends * args.connections as u64 + 256;
    if let Some(limit) = fd_limit()
        && limit < need
    {
        eprintln!(
            "{} connections need about {need} file descriptors but the limit is {limit}: \
             run `ulimit -n 65536` first, or use --split-process or fewer --connections",
            args.connections
        );
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let ok = if args.serve {
        rt.block_on(serve_child(args))
    } else {
        rt.block_on(run(args))
    };
    // Tasks still alive would keep the runtime's memory; shut it down before exiting.
    rt.shutdown_timeout(Duration::from_secs(5));
    std::process::exit(if ok { 0 } else { 1 });
}

async fn run(args: Args) -> bool {
    let stats = Arc::new(Stats::default());
    let cold = Snapshot::take(&stats);
    let (mut server, url) = Server::start(&args, &stats).await;
    let url = Arc::new(url);
    // The in-process listener is one more descriptor that goes away with the server.
    eprintln!(
        "soak: {} connections, {} s (+{} s warm-up), think {} ms, seed {:#x}, server {}; rss {} KiB, {} fds",
        args.connections,
        args.seconds,
        args.warmup_seconds,
        args.think_ms,
        args.seed,
        if args.split_process {
            "in a child process"
        } else {
            "in this process"
        },
        cold.rss_trimmed,
        cold.fds
    );

    let mut ok = phase(
        "warm-up",
        &url,
        &args,
        args.warmup_seconds,
        !args.seed,
        &stats,
        &mut server,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warm = Snapshot::take(&stats);
    eprintln!(
        "after warm-up: rss {} KiB ({} KiB trimmed), heap {} KiB, {} fds",
        warm.rss, warm.rss_trimmed, warm.heap, warm.fds
    );

    let t0 = Instant::now();
    ok &= phase(
        "soak",
        &url,
        &args,
        args.seconds,
        args.seed,
        &stats,
        &mut server,
    )
    .await;
    let soak_time = t0.elapsed();

    let server_ok = server.stop().await;
    // Give the runtime a moment to drop what the aborted tasks held.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // `run` itself is the runtime's `block_on` future, not a task: none should be alive.
    let release = Release {
        connections_left: usize::from(!ok),
        cold,
        warm,
        end: Snapshot::take(&stats),
    };

    let s = &stats;
    let secs = soak_time.as_secs_f64().max(1.0);
    println!("connections        {}", args.connections);
    println!(
        "soak time          {:.0} s (warm-up {} s)",
        soak_time.as_secs_f64(),
        args.warmup_seconds
    );
    println!(
        "connects           {} ({} connect retries)",
        s.connects.load(Ordering::SeqCst),
        s.connect_retries.load(Ordering::SeqCst)
    );
    println!(
        "messages echoed    {} ({:.0}/s), {} fragmented, {} bursts",
        s.messages.load(Ordering::SeqCst),
        s.messages.load(Ordering::SeqCst) as f64 / secs,
        s.fragmented.load(Ordering::SeqCst),
        s.bursts.load(Ordering::SeqCst)
    );
    println!("payload bytes      {}", s.bytes.load(Ordering::SeqCst));
    println!("pings answered     {}", s.pings.load(Ordering::SeqCst));
    println!(
        "closes             {} by clients, {} by the server, {} abrupt drops",
        s.client_closes.load(Ordering::SeqCst),
        s.server_closes.load(Ordering::SeqCst),
        s.drops.load(Ordering::SeqCst)
    );
    println!(
        "failures           {} ({} in warm-up)",
        release.end.failures, release.warm.failures
    );
    println!(
        "rss                {} KiB cold, {} KiB after warm-up, {} KiB at the end",
        cold.rss_trimmed, warm.rss, release.end.rss
    );
    release.print("soak tasks");

    let mut verdict = release.verdict();
    if !server_ok {
        verdict.push("the server process failed its checks".to_owned());
    }
    report(&verdict)
}
