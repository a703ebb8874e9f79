//! Broadcast: one ~4 KiB JSON message to N loopback connections, per round.
//!
//! Server in this process (one current-thread tokio runtime, pinned to CPU 0 with
//! `taskset` when available); clients in a child process (this binary re-run with
//! `RAPIDWS_BCAST_CLIENT` set, pinned to CPU 1), rapidws clients on one current-thread
//! runtime. Per cell the server accepts N connections, then sends M rounds; each round
//! builds a new message and sends it to every connection (`send`: queue + vectored write).
//!
//! Variants, in the same run:
//! - `prepared`: `PreparedMessage` built once per round, `WebSocket::send_prepared`;
//! - `ordinary`: `WebSocket::send(Message::Text(shared.clone()))` (a `Bytes` clone, so
//!   without compression no copy either; with compression every connection compresses);
//! - `tungstenite`: tokio-tungstenite 0.30, `Message::Text(shared.clone())` per connection
//!   (no permessage-deflate support, so uncompressed cells only).
//!
//! Compression cells negotiate permessage-deflate with context takeover both ways.
//!
//! Reported per cell: deliveries (messages the clients received) per wall second, and
//! server CPU (user + system of this process, from `/proc/self/stat`) per delivery and
//! deliveries per server CPU-second.
//!
//! ```text
//! ulimit -n 20000   # the child holds N sockets, the server N more
//! cargo bench -p rapidws-integration --bench broadcast
//! RAPIDWS_BCAST_SIZES=1000 RAPIDWS_BCAST_DELIVERIES=100000 cargo bench -p rapidws-integration --bench broadcast
//! ```

use std::future::poll_fn;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_sink::Sink;
use rapidws::PreparedMessage;
use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ClientConfig, Message, ServerConfig, Utf8Bytes, WebSocket, accept};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

const CLIENT_ENV: &str = "RAPIDWS_BCAST_CLIENT";
/// Every cell is bounded by this, whatever happens.
const CELL_LIMIT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Prepared,
    Ordinary,
    Tungstenite,
}

fn main() {
    if let Ok(spec) = std::env::var(CLIENT_ENV) {
        client_main(&spec);
        return;
    }
    // `cargo test --benches` runs bench binaries with `--test`: do nothing then.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("RAPIDWS_BCAST_SIZES")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let deliveries: usize = std::env::var("RAPIDWS_BCAST_DELIVERIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let pinned = pin(std::process::id(), "0");
    println!(
        "server pinned to CPU 0: {pinned}; clients in a child process on CPU 1; {} Hz ticks",
        clk_tck()
    );
    println!(
        "{:>6} {:>5} {:>12} {:>10} {:>12} {:>12} {:>14}",
        "conns", "defl", "variant", "deliveries", "per wall s", "CPU us/deliv", "per CPU-second"
    );
    for &n in &sizes {
        let rounds = (deliveries / n).max(5);
        for compress in [false, true] {
            let mut per_cpu = Vec::new();
            for variant in [Variant::Prepared, Variant::Ordinary, Variant::Tungstenite] {
                if compress && variant == Variant::Tungstenite {
                    continue;
                }
                let r = run_cell(n, rounds, compress, variant);
                let per_cpu_s = r.deliveries as f64 / r.cpu_s.max(1e-9);
                println!(
                    "{:>6} {:>5} {:>12} {:>10} {:>12.0} {:>12.2} {:>14.0}",
                    n,
                    if compress { "on" } else { "off" },
                    format!("{variant:?}").to_lowercase(),
                    r.deliveries,
                    r.deliveries as f64 / r.wall_s,
                    r.cpu_s * 1e6 / r.deliveries.max(1) as f64,
                    per_cpu_s
                );
                per_cpu.push((variant, per_cpu_s));
            }
            let base = per_cpu[0].1;
            for (v, x) in &per_cpu[1..] {
                println!(
                    "{:>6} {:>5}   prepared / {:?}: {:.2}x deliveries per CPU-second",
                    n,
                    if compress { "on" } else { "off" },
                    v,
                    base / x
                );
            }
        }
    }
}

/// Pins a process (all its threads) to `cpus` with `taskset`; false when that failed.
fn pin(pid: u32, cpus: &str) -> bool {
    std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// User + system CPU seconds of this process so far.
fn process_cpu(tck: f64) -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which is in parentheses): state is field 3, utime
    // field 14, stime field 15.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / tck
}

/// A ~4 KiB JSON document whose numbers change every round.
fn json(round: usize) -> String {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ round as u64;
    let mut s = format!("{{\"type\":\"book\",\"seq\":{round},\"levels\":[");
    let mut i = 0;
    while s.len() < 4000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!(
            "{{\"i\":{i},\"px\":{}.{:02},\"qty\":{},\"side\":\"{}\"}},",
            x % 100_000,
            (x >> 20) % 100,
            (x >> 30) % 10_000,
            if x & 1 == 0 { "bid" } else { "ask" }
        ));
        i += 1;
    }
    s.push_str("{}]}");
    s
}

struct CellResult {
    deliveries: u64,
    wall_s: f64,
    cpu_s: f64,
}

// Unboxed on purpose: no extra indirection on either library's send path.
#[allow(clippy::large_enum_variant)]
enum Conn {
    Rapid(WebSocket<TcpStream>),
    Tung(tokio_tungstenite::WebSocketStream<TcpStream>),
}

fn run_cell(n: usize, rounds: usize, compress: bool, variant: Variant) -> CellResult {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(CELL_LIMIT, cell(n, rounds, compress, variant))
            .await
            .expect("cell timed out")
    })
}

async fn cell(n: usize, rounds: usize, compress: bool, variant: Variant) -> CellResult {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(4096).unwrap();
    let addr = listener.local_addr().unwrap();

    let exe = std::env::current_exe().unwrap();
    let spec = format!("{addr} {n} {rounds} {}", u8::from(compress));
    let mut cmd = if which_taskset() {
        let mut c = tokio::process::Command::new("taskset");
        c.arg("-c").arg("1").arg(&exe);
        c
    } else {
        tokio::process::Command::new(&exe)
    };
    let mut child = cmd
        .env(CLIENT_ENV, spec)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the client process");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();

    // Accept and upgrade every connection (handshakes run concurrently).
    let config = Arc::new(ServerConfig::default().with_deflate(compress.then(DeflateConfig::new)));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let accepting = tokio::spawn(async move {
        for _ in 0..n {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (tx, config) = (tx.clone(), config.clone());
            tokio::spawn(async move {
                let conn = match variant {
                    Variant::Tungstenite => {
                        Conn::Tung(tokio_tungstenite::accept_async(stream).await.unwrap())
                    }
                    _ => Conn::Rapid(accept(stream, &config).await.unwrap()),
                };
                let _ = tx.send(conn);
            });
        }
    });
    let mut conns = Vec::with_capacity(n);
    while conns.len() < n {
        conns.push(rx.recv().await.unwrap());
    }
    accepting.await.unwrap();
    assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("ready"));

    let tck = clk_tck();
    let cpu0 = process_cpu(tck);
    let t0 = Instant::now();
    for round in 0..rounds {
        let text = json(round);
        match variant {
            Variant::Prepared => {
                let msg = PreparedMessage::text(&text);
                for c in &mut conns {
                    let Conn::Rapid(ws) = c else { unreachable!() };
                    ws.send_prepared(&msg).await.unwrap();
                }
            }
            Variant::Ordinary => {
                let shared = Utf8Bytes::from(text);
                for c in &mut conns {
                    let Conn::Rapid(ws) = c else { unreachable!() };
                    ws.send(Message::Text(shared.clone())).await.unwrap();
                }
            }
            Variant::Tungstenite => {
                let shared = tokio_tungstenite::tungstenite::Utf8Bytes::from(text);
                for c in &mut conns {
                    let Conn::Tung(ws) = c else { unreachable!() };
                    let msg = tokio_tungstenite::tungstenite::Message::Text(shared.clone());
                    let mut ws = Pin::new(ws);
                    poll_fn(|cx| ws.as_mut().poll_ready(cx)).await.unwrap();
                    ws.as_mut().start_send(msg).unwrap();
                    poll_fn(|cx| ws.as_mut().poll_flush(cx)).await.unwrap();
                }
            }
        }
    }
    let cpu_send = process_cpu(tck) - cpu0;
    let done = lines.next_line().await.unwrap().unwrap_or_default();
    let wall_s = t0.elapsed().as_secs_f64();
    let deliveries: u64 = done
        .strip_prefix("done ")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert_eq!(deliveries, (n * rounds) as u64, "every message delivered");
    drop(conns);
    let _ = child.wait().await;
    CellResult {
        deliveries,
        wall_s,
        cpu_s: cpu_send,
    }
}

fn which_taskset() -> bool {
    std::process::Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The client process: connects N clients, says `ready`, counts what arrives, says
/// `done <count>` once every client has its M messages (or the time limit passed).
fn client_main(spec: &str) {
    let parts: Vec<&str> = spec.split_whitespace().collect();
    let addr = parts[0].to_string();
    let n: usize = parts[1].parse().unwrap();
    let rounds: u64 = parts[2].parse().unwrap();
    let compress = parts[3] == "1";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let config =
            Arc::new(ClientConfig::default().with_deflate(compress.then(DeflateConfig::new)));
        let url = format!("ws://{addr}/");
        let mut clients = Vec::with_capacity(n);
        // Connect in batches, so the listen backlog never overflows.
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let mut set = tokio::task::JoinSet::new();
            for _ in chunk {
                let (url, config) = (url.clone(), config.clone());
                set.spawn(async move { rapidws::tokio::connect(&url, &config).await.unwrap() });
            }
            while let Some(ws) = set.join_next().await {
                clients.push(ws.unwrap());
            }
        }
        let total = Arc::new(AtomicU64::new(0));
        let mut set = tokio::task::JoinSet::new();
        for mut ws in clients {
            let total = total.clone();
            set.spawn(async move {
                let mut got = 0;
                while got < rounds {
                    match ws.recv().await {
                        Ok(Some(Message::Text(_))) => {
                            got += 1;
                            total.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Some(_)) => {}
                        _ => break,
                    }
                }
                ws
            });
        }
        println!("ready");
        let mut kept = Vec::new();
        let _ = tokio::time::timeout(CELL_LIMIT, async {
            while let Some(ws) = set.join_next().await {
                kept.push(ws);
            }
        })
        .await;
        println!("done {}", total.load(Ordering::Relaxed));
        // Hold the connections until the server has read the count.
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
}
