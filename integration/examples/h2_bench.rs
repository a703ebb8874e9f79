//! What the HTTP/2 layer costs a WebSocket (RFC 8441): echoes per server CPU-second and
//! memory per idle WebSocket, over HTTP/2 streams against HTTP/1.1 connections, on loopback.
//!
//! ```text
//! cargo run -p rapidws-integration --release --example h2_bench --features http2 [-- STREAMS SECS SIZE WINDOW IDLE]
//! ```
//!
//! Every server is rapidws behind hyper 1.x (`rapidws::hyper::upgrade`, the same service),
//! in a child process (this program with `server <mode> <port>`, a multi-thread tokio
//! runtime), cleartext, no compression, answering with `send`:
//!
//! - `h1`: hyper's HTTP/1.1 server; `STREAMS` TCP connections, one WebSocket each;
//! - `h2`: hyper's HTTP/2 server with extended CONNECT; one TCP connection carrying
//!   `STREAMS` WebSocket streams (`rapidws::http2::connect`);
//! - `h2-conns`: the same server; `STREAMS` TCP connections, one stream each;
//! - `tcp`: `rapidws::tokio::serve` without hyper, for reference.
//!
//! Load: `WINDOW` binary messages of `SIZE` bytes in flight on each WebSocket for `SECS`
//! seconds (defaults: 100 streams, 5 s, 1 KiB, 8). Server CPU is utime + stime from
//! `/proc/<pid>/stat` over that time. Idle memory, in a fresh server: `IDLE` WebSockets
//! (default 1,000; over HTTP/2 as 100 streams per connection) each echo one 16-byte message
//! and sit idle for 2 s; the server's `VmRSS` growth over its RSS before the first one,
//! divided by `IDLE`.

use std::convert::Infallible;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rapidws::tokio::{
    ClientConfig, Config, Error, MaybeTlsStream, Message, ServerConfig, WebSocket,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const MODES: [&str; 4] = ["h1", "h2", "h2-conns", "tcp"];

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("server") {
        let port: u16 = args[2].parse()?;
        return tokio::runtime::Runtime::new()?.block_on(server(&args[1], port));
    }
    let num = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (streams, secs, size, window, idle) = (
        num(0, 100),
        num(1, 5),
        num(2, 1024),
        num(3, 8),
        num(4, 1000),
    );
    println!(
        "{streams} WebSockets, {size}-byte binary messages, window {window}, {secs} s per mode; idle memory over {idle}"
    );
    let rt = tokio::runtime::Runtime::new()?;
    for (i, mode) in MODES.into_iter().enumerate() {
        let port = 19_300 + 2 * i as u16;
        let (msgs, wall, cpu) = {
            let server = Server::start(mode, port)?;
            rt.block_on(throughput(&server, streams, secs, size, window))?
        };
        let per_idle = {
            let server = Server::start(mode, port + 1)?;
            rt.block_on(idle_memory(&server, idle))?
        };
        println!(
            "{mode:>9}: {msgs:>8} echoes, {:>7.0} msg/s, server CPU {cpu:5.2} s, {:>7.0} echoes per server CPU-second, idle {:5.2} KiB per WebSocket",
            msgs as f64 / wall,
            msgs as f64 / cpu,
            per_idle / 1024.0,
        );
    }
    Ok(())
}

/// A server child process, killed when dropped.
struct Server {
    child: Child,
    mode: &'static str,
    port: u16,
}

impl Server {
    fn start(mode: &'static str, port: u16) -> Result<Self, BoxError> {
        let child = Command::new(std::env::current_exe()?)
            .args(["server", mode, &port.to_string()])
            .spawn()?;
        Ok(Server { child, mode, port })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn wait_ready(&self) -> Result<(), BoxError> {
        for _ in 0..100 {
            if TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                // Let the runtime threads and first allocations settle before a baseline.
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err("the server did not start".into())
    }

    /// `count` WebSockets, each having echoed one `size`-byte message.
    async fn open(&self, count: usize, size: usize) -> Result<Vec<Ws>, BoxError> {
        let url = format!("ws://127.0.0.1:{}/", self.port);
        let config = ClientConfig::default().with_connection(connection_config());
        let payload = Bytes::from(vec![0x5A; size]);
        let mut out = Vec::with_capacity(count);
        let mut sender: Option<SendRequest<Empty<Bytes>>> = None;
        for i in 0..count {
            let mut ws = match self.mode {
                "h1" | "tcp" => Ws::Tcp(rapidws::tokio::connect(&url, &config).await?),
                _ => {
                    // `h2`: 100 streams per connection; `h2-conns`: one.
                    let per_conn = if self.mode == "h2" { 100 } else { 1 };
                    if i % per_conn == 0 {
                        sender = Some(h2_connection(self.port).await?);
                    }
                    let sender = sender.as_mut().ok_or("no connection")?;
                    Ws::H2(rapidws::http2::connect(sender, &url, &config).await?)
                }
            };
            ws.send(Message::Binary(payload.clone())).await?;
            while !ws.recv().await?.is_some_and(|m| m.is_data()) {}
            out.push(ws);
        }
        Ok(out)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn h2_connection(port: u16) -> Result<SendRequest<Empty<Bytes>>, BoxError> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// Either client WebSocket, for one load loop.
enum Ws {
    Tcp(WebSocket<MaybeTlsStream<TcpStream>>),
    H2(rapidws::hyper::HyperWebSocket),
}

impl Ws {
    async fn send(&mut self, m: Message) -> Result<(), Error> {
        match self {
            Ws::Tcp(ws) => ws.send(m).await,
            Ws::H2(ws) => ws.send(m).await,
        }
    }
    async fn feed(&mut self, m: Message) -> Result<(), Error> {
        match self {
            Ws::Tcp(ws) => ws.feed(m).await,
            Ws::H2(ws) => ws.feed(m).await,
        }
    }
    async fn flush(&mut self) -> Result<(), Error> {
        match self {
            Ws::Tcp(ws) => ws.flush().await,
            Ws::H2(ws) => ws.flush().await,
        }
    }
    async fn recv(&mut self) -> Result<Option<Message>, Error> {
        match self {
            Ws::Tcp(ws) => ws.recv().await,
            Ws::H2(ws) => ws.recv().await,
        }
    }
    async fn close(&mut self) -> Result<(), Error> {
        match self {
            Ws::Tcp(ws) => ws.close(1000, "").await,
            Ws::H2(ws) => ws.close(1000, "").await,
        }
    }
}

async fn throughput(
    server: &Server,
    streams: usize,
    secs: usize,
    size: usize,
    window: usize,
) -> Result<(u64, f64, f64), BoxError> {
    server.wait_ready().await?;
    let clients = server.open(streams, size).await?;
    let payload = Bytes::from(vec![0x5A; size]);
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = cpu_seconds(server.pid())?;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for mut ws in clients {
        let (count, stop, payload) = (count.clone(), stop.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..window {
                    ws.feed(Message::Binary(payload.clone())).await?;
                }
                ws.flush().await?;
                let mut got = 0;
                while got < window {
                    match ws.recv().await? {
                        Some(m) if m.is_data() => got += 1,
                        Some(_) => {}
                        None => return Err(Error::Closed),
                    }
                }
                count.fetch_add(window as u64, Ordering::Relaxed);
            }
            let _ = tokio::time::timeout(Duration::from_secs(2), ws.close()).await;
            Ok::<_, Error>(())
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs as u64)).await;
    let msgs = count.load(Ordering::Relaxed);
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(server.pid())? - cpu0;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    Ok((msgs, wall, cpu))
}

async fn idle_memory(server: &Server, count: usize) -> Result<f64, BoxError> {
    server.wait_ready().await?;
    let rss0 = rss_bytes(server.pid())?;
    let clients = server.open(count, 16).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let per = (rss_bytes(server.pid())? - rss0) / count as f64;
    drop(clients);
    Ok(per)
}

/// The connection settings of both ends: the defaults without keepalive pings, so that no
/// ping travels beside the measured echoes.
fn connection_config() -> Config {
    Config::default().with_keepalive(None, Duration::from_secs(30))
}

async fn server(mode: &str, port: u16) -> Result<(), BoxError> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let config = Arc::new(ServerConfig::default().with_connection(connection_config()));
    if mode == "tcp" {
        rapidws::tokio::serve(listener, (*config).clone(), echo).await?;
        return Ok(());
    }
    let http2 = mode != "h1";
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let config = config.clone();
        let service = hyper::service::service_fn(move |request| route(request, config.clone()));
        let io = TokioIo::new(tcp);
        if http2 {
            let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            builder
                .enable_connect_protocol()
                .max_concurrent_streams(1000);
            tokio::spawn(builder.serve_connection(io, service));
        } else {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .with_upgrades();
            tokio::spawn(connection);
        }
    }
}

async fn route(
    mut request: Request<Incoming>,
    config: Arc<ServerConfig>,
) -> Result<Response<String>, Infallible> {
    Ok(match rapidws::hyper::upgrade(&mut request, &config) {
        Ok((response, websocket)) => {
            tokio::spawn(async move {
                if let Ok(ws) = websocket.await {
                    echo(ws).await;
                }
            });
            response
        }
        Err(refusal) => refusal.response(),
    })
}

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut ws: WebSocket<S>) {
    while let Ok(Some(msg)) = ws.recv().await {
        if msg.is_data() && ws.send(msg).await.is_err() {
            return;
        }
    }
}

/// Resident set size of `pid`, in bytes.
fn rss_bytes(pid: u32) -> Result<f64, BoxError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS")?;
    let kib: f64 = line["VmRSS:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib * 1024.0)
}

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> Result<f64, BoxError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').ok_or("bad stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}
