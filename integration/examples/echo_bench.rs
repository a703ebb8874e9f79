//! Echo throughput per server CPU-second: rapidws vs tokio-tungstenite, over loopback.
//!
//! ```text
//! cargo run -p rapidws-integration --release --example echo_bench [-- CONNS SECS SIZE WINDOW]
//! ```
//!
//! For each implementation, a server runs in a child process (this program with
//! `server <impl> <port>`); this process opens `CONNS` connections (default 100) with the
//! rapidws client and keeps `WINDOW` binary messages of `SIZE` bytes (default 8 and 1 KiB)
//! in flight on each for `SECS` seconds (default 5). The server's CPU time is read from
//! `/proc/<pid>/stat` (utime + stime) before and after; the figure reported is echoed
//! messages per second and per server CPU-second. Both servers use the same tokio
//! runtime settings, no compression, and flush after every message; a third run,
//! `rapidws-feed`, answers with `feed` instead (answers to a burst leave in one write), and
//! `rapidws-ref` receives with `recv_ref` (borrowed, no allocation) and sends a copy.
//!
//! Before the load, the server's resident memory (`VmRSS`) is read once before the
//! connections open and once after every connection has echoed one message and gone
//! idle; the difference divided by `CONNS` is reported as memory per idle connection
//! (allocator and kernel-side socket buffers not attributed to the process excluded).

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_core::Stream;
use futures_sink::Sink;
use rapidws::tokio::{ClientConfig, Config, Message, ServerConfig, WebSocket, connect, serve};
use tokio::net::{TcpListener, TcpStream};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("server") {
        let port: u16 = args[2].parse()?;
        let rt = tokio::runtime::Runtime::new()?;
        return rt.block_on(async {
            match args[1].as_str() {
                "rapidws" => rapidws_server(port, false).await,
                "rapidws-feed" => rapidws_server(port, true).await,
                "rapidws-ref" => rapidws_ref_server(port).await,
                "tungstenite" => tungstenite_server(port).await,
                other => Err(format!("unknown server {other}").into()),
            }
        });
    }
    let num = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (conns, secs, size, window) = (num(0, 100), num(1, 5), num(2, 1024), num(3, 8));
    let rt = tokio::runtime::Runtime::new()?;
    println!(
        "{conns} connections, {size}-byte binary messages, window {window}, {secs} s per server"
    );
    for (i, name) in ["rapidws", "tungstenite", "rapidws-feed", "rapidws-ref"]
        .into_iter()
        .enumerate()
    {
        let port = 19_100 + i as u16;
        let mut child = ChildGuard(
            Command::new(std::env::current_exe()?)
                .args(["server", name, &port.to_string()])
                .spawn()?,
        );
        let pid = child.0.id();
        let r = rt.block_on(load(
            port,
            pid,
            conns as usize,
            Duration::from_secs(secs),
            size as usize,
            window as usize,
        ));
        let _ = child.0.kill();
        let _ = child.0.wait();
        let (msgs, wall, cpu, per_conn) = r?;
        println!(
            "{name:>12}: {msgs:>9} echoes, {:>9.0} msg/s, server CPU {cpu:.2} s, {:>9.0} msg per server CPU-second, idle RSS {per_conn:.0} B/conn",
            msgs as f64 / wall,
            msgs as f64 / cpu
        );
    }
    Ok(())
}

struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

/// Resident set size of `pid`, in bytes.
fn rss_bytes(pid: u32) -> Result<f64, Box<dyn std::error::Error>> {
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
fn cpu_seconds(pid: u32) -> Result<f64, Box<dyn std::error::Error>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').ok_or("bad stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

async fn load(
    port: u16,
    pid: u32,
    conns: usize,
    dur: Duration,
    size: usize,
    window: usize,
) -> Result<(u64, f64, f64, f64), Box<dyn std::error::Error>> {
    let url = format!("ws://127.0.0.1:{port}/");
    let config = ClientConfig::default().with_connection(connection_config());
    // Wait (bounded) for the child to listen.
    let mut ready = false;
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !ready {
        return Err("server did not start".into());
    }
    // Let the server settle (runtime threads, first allocations) before the baseline.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss0 = rss_bytes(pid)?;
    let payload = Bytes::from(vec![0x5A; size]);
    let mut clients = Vec::with_capacity(conns);
    for _ in 0..conns {
        let mut ws = connect(&url, &config).await?;
        ws.send(Message::Binary(payload.clone())).await?;
        while !ws.recv().await?.is_some_and(|m| m.is_data()) {}
        clients.push(ws);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let per_conn = (rss_bytes(pid)? - rss0) / conns as f64;
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = cpu_seconds(pid)?;
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
                        None => return Err(rapidws::tokio::Error::Closed),
                    }
                }
                count.fetch_add(window as u64, Ordering::Relaxed);
            }
            let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(1000, "")).await;
            Ok::<_, rapidws::tokio::Error>(())
        }));
    }
    tokio::time::sleep(dur).await;
    let msgs = count.load(Ordering::Relaxed);
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid)? - cpu0;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    Ok((msgs, wall, cpu, per_conn))
}

/// The connection settings of both ends: the defaults without keepalive pings, so that no
/// ping travels beside the measured echoes.
fn connection_config() -> Config {
    Config::default().with_keepalive(None, Duration::from_secs(30))
}

/// Serves every rapidws variant the same way: a loopback listener on `port`, the default
/// server settings over [`connection_config`], and `handler` on each connection.
async fn serve_rapidws<F, Fut>(port: u16, handler: F) -> Result<(), Box<dyn std::error::Error>>
where
    F: Fn(WebSocket<TcpStream>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let config = ServerConfig::default().with_connection(connection_config());
    serve(listener, config, handler).await?;
    Ok(())
}

/// `feed`: answer with `feed` (queued; written when the receive loop would wait)
/// instead of `send` (written at once).
async fn rapidws_server(port: u16, feed: bool) -> Result<(), Box<dyn std::error::Error>> {
    serve_rapidws(port, move |mut ws: WebSocket<TcpStream>| async move {
        while let Ok(Some(msg)) = ws.recv().await {
            if !msg.is_data() {
                continue;
            }
            let r = if feed {
                ws.feed(msg).await
            } else {
                ws.send(msg).await
            };
            if r.is_err() {
                return;
            }
        }
    })
    .await
}

/// Receives borrowed (`recv_ref`), so an echo must copy the payload to send it back.
async fn rapidws_ref_server(port: u16) -> Result<(), Box<dyn std::error::Error>> {
    serve_rapidws(port, |mut ws: WebSocket<TcpStream>| async move {
        while let Ok(Some(msg)) = ws.recv_ref().await {
            if !msg.is_data() {
                continue;
            }
            let answer = msg.to_message();
            if ws.send(answer).await.is_err() {
                return;
            }
        }
    })
    .await
}

async fn tungstenite_server(port: u16) -> Result<(), Box<dyn std::error::Error>> {
    use tokio_tungstenite::tungstenite::Message as TMessage;
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            while let Some(Ok(msg)) = poll_fn(|cx| Pin::new(&mut ws).poll_next(cx)).await {
                if !matches!(msg, TMessage::Text(_) | TMessage::Binary(_)) {
                    continue;
                }
                let sent = async {
                    poll_fn(|cx| Pin::new(&mut ws).poll_ready(cx)).await?;
                    Pin::new(&mut ws).start_send(msg)?;
                    poll_fn(|cx| Pin::new(&mut ws).poll_flush(cx)).await
                };
                if sent.await.is_err() {
                    return;
                }
            }
        });
    }
}
