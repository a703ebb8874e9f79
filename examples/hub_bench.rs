//! Fan-out cost per node: deliveries per node CPU-second, 1,000 subscribers per node,
//! 1 KiB JSON-like text, with and without permessage-deflate. Compared in one run:
//!
//! - `naive`: one node, a loop calling `send` on each subscriber's `WriteHalf` (framed
//!   and, with deflate, compressed once per socket);
//! - `memory`: one node, the hub with its in-memory broker;
//! - `redis`, `nats`: three nodes, each publishing, through a Redis or NATS server this
//!   program starts on a free loopback port.
//!
//! Each node runs on its own thread (a current-thread runtime: its tasks, broker
//! included, all run there), and its CPU time is that thread's (`CLOCK_THREAD_CPUTIME_ID`)
//! from the first publication until every client has every message. The clients run on
//! other threads and are not counted.
//!
//! ```text
//! cargo run --release --example hub_bench --features hub-redis,hub-nats -- [publications per node]
//! ```

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rapidws::deflate::DeflateConfig;
use rapidws::hub::{Hub, HubBuilder, NatsBroker, NatsConfig, RedisBroker, RedisConfig};
use rapidws::tokio::{ClientConfig, Message, ServerConfig, WriteHalf, accept, connect};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const SUBSCRIBERS: usize = 1000;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime with a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A JSON-like message of about 1 KiB, different for each publication.
fn message(node: usize, seq: u64) -> String {
    let mut s = format!(r#"{{"node":{node},"seq":{seq},"ticks":["#);
    let mut i = 0u64;
    while s.len() < 1000 {
        let p = (seq * 7919 + i * 104_729) % 100_000;
        s.push_str(&format!(
            r#"{{"sym":"S{:03}","px":{}.{:02},"qty":{}}},"#,
            i % 500,
            p / 100,
            p % 100,
            p % 977
        ));
        i += 1;
    }
    s.pop();
    s.push_str("]}");
    s
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Naive,
    Hub,
}

struct NodeResult {
    cpu: Duration,
    deliveries: u64,
}

/// Runs one node (the argument list is the run's whole description): accepts `SUBSCRIBERS` connections, waits for `go`, publishes
/// `publications`, waits for `stop`, and reports its CPU time and deliveries.
#[allow(clippy::too_many_arguments)]
fn node(
    index: usize,
    mode: Mode,
    build: Option<Box<dyn FnOnce() -> HubBuilder + Send>>,
    publications: u64,
    deflate: bool,
    addr_tx: std::sync::mpsc::Sender<SocketAddr>,
    mut go: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) -> std::thread::JoinHandle<NodeResult> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let hub = build.map(|b| b().build().expect("hub"));
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let config = if deflate {
                ServerConfig::default().with_deflate(Some(DeflateConfig::default()))
            } else {
                ServerConfig::default()
            };
            let mut halves: Vec<WriteHalf<TcpStream>> = Vec::new();
            let mut members = Vec::new();
            for _ in 0..SUBSCRIBERS {
                let (s, _) = listener.accept().await.unwrap();
                let (mut rd, wr) = accept(s, &config).await.unwrap().into_split();
                tokio::spawn(async move { while let Ok(Some(_)) = rd.recv().await {} });
                match &hub {
                    Some(h) => {
                        let m = h.join(wr);
                        m.subscribe("t").unwrap();
                        members.push(m);
                    }
                    None => halves.push(wr),
                }
            }
            if let Some(h) = &hub {
                while !h.broker_ready("t") {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            let _ = go.wait_for(|g| *g).await;
            let before = hub.as_ref().map_or(0, |h| h.metrics().deliveries);
            let cpu0 = thread_cpu();
            let mut naive_deliveries = 0u64;
            for seq in 0..publications {
                let text = message(index, seq);
                match mode {
                    Mode::Hub => {
                        hub.as_ref().unwrap().publish("t", text).unwrap();
                        tokio::task::yield_now().await;
                    }
                    Mode::Naive => {
                        for w in &mut halves {
                            if w.send(Message::text(text.clone())).await.is_ok() {
                                naive_deliveries += 1;
                            }
                        }
                    }
                }
            }
            let _ = stop.wait_for(|s| *s).await;
            let cpu = thread_cpu() - cpu0;
            let deliveries = match &hub {
                Some(h) => h.metrics().deliveries - before,
                None => naive_deliveries,
            };
            drop(members);
            NodeResult { cpu, deliveries }
        })
    })
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(binary: &str, args: &[String], port: u16) -> Server {
    let child = Command::new(binary)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{binary}: {e}"));
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    Server(child)
}

/// One run: `nodes` nodes with `SUBSCRIBERS` clients each; returns deliveries per node
/// CPU-second (all nodes' deliveries over all nodes' CPU time) and the wall time.
fn run(
    rt: &tokio::runtime::Runtime,
    mode: Mode,
    nodes: usize,
    broker: &dyn Fn() -> Option<Box<dyn FnOnce() -> HubBuilder + Send>>,
    publications: u64,
    deflate: bool,
) -> (f64, Duration) {
    let (go_tx, go) = watch::channel(false);
    let (stop_tx, stop) = watch::channel(false);
    let mut threads = Vec::new();
    let mut addrs = Vec::new();
    for i in 0..nodes {
        let (tx, rx) = std::sync::mpsc::channel();
        let build = if mode == Mode::Hub {
            Some(broker().unwrap_or_else(|| Box::new(Hub::builder)))
        } else {
            None
        };
        threads.push(node(
            i,
            mode,
            build,
            publications,
            deflate,
            tx,
            go.clone(),
            stop.clone(),
        ));
        addrs.push(rx.recv().unwrap());
    }
    let expected = publications as usize * nodes;
    let done = Arc::new(AtomicUsize::new(0));
    let client = if deflate {
        ClientConfig::default().with_deflate(Some(DeflateConfig::default()))
    } else {
        ClientConfig::default()
    };
    let clients: Vec<_> = rt.block_on(async {
        let mut v = Vec::new();
        for addr in &addrs {
            for _ in 0..SUBSCRIBERS {
                let mut ws = connect(&format!("ws://{addr}/"), &client).await.unwrap();
                let done = done.clone();
                v.push(tokio::spawn(async move {
                    let mut n = 0;
                    while n < expected {
                        match ws.recv().await {
                            Ok(Some(Message::Text(_))) => n += 1,
                            Ok(Some(_)) => {}
                            _ => break,
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    ws
                }));
            }
        }
        v
    });
    // Let the nodes finish their joins (and broker subscriptions).
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    go_tx.send(true).unwrap();
    let total = clients.len();
    while done.load(Ordering::Relaxed) < total {
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "run did not finish"
        );
    }
    let wall = started.elapsed();
    stop_tx.send(true).unwrap();
    let results: Vec<NodeResult> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    rt.block_on(async {
        for c in clients {
            drop(c.await);
        }
    });
    let cpu: f64 = results.iter().map(|r| r.cpu.as_secs_f64()).sum();
    let deliveries: u64 = results.iter().map(|r| r.deliveries).sum();
    assert_eq!(
        deliveries as usize,
        expected * SUBSCRIBERS * nodes,
        "every delivery counted"
    );
    (deliveries as f64 / cpu, wall)
}

fn main() {
    let publications: u64 = std::env::args()
        .nth(1)
        .map_or(200, |a| a.parse().expect("publications per node"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let redis_port = free_port();
    let dir = std::env::temp_dir().join(format!("rapidws-hub-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let redis_args: Vec<String> = [
        "--port",
        &redis_port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _redis = start("redis-server", &redis_args, redis_port);
    let nats_port = free_port();
    let nats_args: Vec<String> = ["-a", "127.0.0.1", "-p", &nats_port.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let _nats = start("nats-server", &nats_args, nats_port);
    let redis_url = format!("redis://127.0.0.1:{redis_port}/");
    let nats_url = format!("nats://127.0.0.1:{nats_port}");

    let none = || None;
    let redis = || {
        let url = redis_url.clone();
        Some(Box::new(move || {
            Hub::builder().broker(RedisBroker::new(RedisConfig::new(url)).unwrap())
        }) as Box<dyn FnOnce() -> HubBuilder + Send>)
    };
    let nats = || {
        let url = nats_url.clone();
        Some(
            Box::new(move || Hub::builder().broker(NatsBroker::new(NatsConfig::new(url))))
                as Box<dyn FnOnce() -> HubBuilder + Send>,
        )
    };
    println!(
        "| setup | deflate | deliveries per node CPU-second | vs in-memory hub | vs naive loop | wall |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    for deflate in [false, true] {
        let (naive, naive_wall) = run(&rt, Mode::Naive, 1, &none, publications * 3, deflate);
        let (memory, memory_wall) = run(&rt, Mode::Hub, 1, &none, publications * 3, deflate);
        let (via_redis, redis_wall) = run(&rt, Mode::Hub, 3, &redis, publications, deflate);
        let (via_nats, nats_wall) = run(&rt, Mode::Hub, 3, &nats, publications, deflate);
        let d = if deflate { "on" } else { "off" };
        let row = |name: &str, v: f64, wall: Duration| {
            println!(
                "| {name} | {d} | {:.0} | {:.2}x | {:.2}x | {:.1} s |",
                v,
                v / memory,
                v / naive,
                wall.as_secs_f64()
            );
        };
        row("naive `send` loop, 1 node x 1,000", naive, naive_wall);
        row("hub, in-memory, 1 node x 1,000", memory, memory_wall);
        row("hub via Redis, 3 nodes x 1,000", via_redis, redis_wall);
        row("hub via NATS, 3 nodes x 1,000", via_nats, nats_wall);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
