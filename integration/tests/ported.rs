//! The programs ported from tokio-tungstenite (`integration/examples/port_chat.rs`,
//! `port_ticker.rs`, `port_relay.rs`; `src/docs/MIGRATION.md` walks through them), run end
//! to end as their own processes on free loopback ports and driven by rapidws clients and
//! servers:
//!
//! - the chat server broadcasts every member's messages to every member, each sender's in
//!   order, tells them who left, and closes a client that breaks the protocol with 1008
//!   and one that sends too much with 1009;
//! - the ticker client resumes after its server is killed and restarted, resubscribing on
//!   each connection, and drops a feed that went quiet with 1001 and reconnects; over
//!   `ws://` and (feature `tokio-rustls`) over `wss://` with a self-signed certificate;
//! - the relay forwards both ways in order, passes a close code on, and under a slow
//!   client stalls the upstream rather than holding what it sends: its peak memory grows
//!   by a bounded amount while megabytes wait upstream.
//!
//! The examples are the binaries `cargo test` builds next to this test (`cargo test
//! --workspace` builds the ticker and the relay; the chat server needs feature `axum`:
//! `cargo build -p rapidws-integration --example port_chat --features axum`). A test whose
//! binary is missing prints a SKIP notice and passes without running.
#![cfg(all(feature = "tokio", feature = "deflate"))]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rapidws::tokio::{ClientConfig, CloseCode, Message, ServerConfig, WebSocket, connect, serve};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader, Lines};
use tokio::net::TcpListener;
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::Instant;

/// Every wait in these tests is bounded by this.
const STEP: Duration = Duration::from_secs(10);

// --- the example processes ----------------------------------------------------------

/// `examples/<name>` as `cargo test` built it (next to this test's `deps/`), or `None`
/// with a SKIP notice.
fn example(name: &str, test: &str, build: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("examples").join(name);
    if bin.exists() {
        return Some(bin);
    }
    eprintln!(
        "SKIP {test}: {} is missing; `{build}` builds it",
        bin.display()
    );
    None
}

/// A running example, its standard output read line by line, and everything it printed.
struct Program {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Program {
    fn start(bin: &PathBuf, args: &[&str]) -> Program {
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", bin.display()));
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Program {
            _child: child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `want`, and returns it; panics with everything the
    /// program printed if none comes within [`STEP`].
    async fn expect(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + STEP;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => panic!("the program exited before {what}:\n{}", self.seen()),
                Ok(Err(e)) => panic!("reading its output: {e}"),
                Err(_) => panic!("no {what} within {STEP:?}:\n{}", self.seen()),
            };
            self.seen.push(line.clone());
            if want(&line) {
                return line;
            }
        }
    }

    /// The port in the `ws://127.0.0.1:PORT/` the program printed on starting.
    async fn port(&mut self) -> u16 {
        let line = self
            .expect("its listening line", |l| l.contains("ws://127.0.0.1:"))
            .await;
        let rest = line.split("ws://127.0.0.1:").nth(1).unwrap();
        rest.split('/').next().unwrap().parse().unwrap()
    }

    fn seen(&self) -> String {
        self.seen.join("\n")
    }
}

// --- chat --------------------------------------------------------------------------

#[cfg(feature = "axum")]
mod chat {
    use rapidws::deflate::DeflateConfig;
    use rapidws::tokio::connect_with_response;
    use serde_json::{Value, json};

    use super::*;

    type Client = WebSocket<rapidws::tokio::MaybeTlsStream<tokio::net::TcpStream>>;

    async fn next_event(ws: &mut Client) -> Value {
        loop {
            match tokio::time::timeout(STEP, ws.recv()).await {
                Ok(Ok(Some(Message::Text(t)))) => return serde_json::from_str(&t).unwrap(),
                Ok(Ok(Some(_))) => {}
                other => panic!("expected a chat event, got {other:?}"),
            }
        }
    }

    /// Connects `name` (offering permessage-deflate, which the server accepts) and joins;
    /// returns once the member heard its own join.
    async fn join(url: &str, name: &str) -> Client {
        let config = ClientConfig::default().with_deflate(Some(DeflateConfig::default()));
        let (mut ws, response) = connect_with_response(url, &config).await.unwrap();
        assert!(response.is_deflate(), "permessage-deflate was not agreed");
        let join = json!({"type": "join", "name": name}).to_string();
        ws.send_text(join).await.unwrap();
        loop {
            let event = next_event(&mut ws).await;
            if event == json!({"type": "joined", "name": name}) {
                return ws;
            }
        }
    }

    /// The close code `ws` is closed with, after any events before it; the close
    /// handshake is then finished (`recv` answers the close, then returns `None`).
    async fn closed_with(ws: &mut Client) -> CloseCode {
        let code = loop {
            match tokio::time::timeout(STEP, ws.recv()).await {
                Ok(Ok(Some(Message::Close(Some(frame))))) => break frame.code,
                Ok(Ok(Some(_))) => {}
                other => panic!("expected a close frame, got {other:?}"),
            }
        };
        let end = tokio::time::timeout(STEP, ws.recv()).await.unwrap();
        assert!(matches!(end, Ok(None)), "after the close: {end:?}");
        code
    }

    #[tokio::test]
    async fn chat_broadcasts_every_message_to_every_member_in_order() {
        let test = "chat_broadcasts_every_message_to_every_member_in_order";
        let build = "cargo build -p rapidws-integration --example port_chat --features axum";
        let Some(bin) = example("port_chat", test, build) else {
            return;
        };
        let started = Instant::now();
        let mut server = Program::start(&bin, &["--port", "0"]);
        let url = format!("ws://127.0.0.1:{}/chat", server.port().await);

        const NAMES: [&str; 3] = ["alice", "bob", "carol"];
        const SAYS: usize = 50;
        let mut members = Vec::new();
        for name in NAMES {
            members.push(join(&url, name).await);
        }
        // Everyone talks at once; everyone hears all of it, each sender in order.
        let mut tasks = Vec::new();
        for (name, mut ws) in NAMES.into_iter().zip(members) {
            tasks.push(tokio::spawn(async move {
                for i in 0..SAYS {
                    let say = json!({"type": "say", "text": format!("{name} {i}")});
                    ws.feed(Message::text(say.to_string())).await.unwrap();
                }
                ws.flush().await.unwrap();
                let mut heard: Vec<(String, String)> = Vec::new();
                while heard.len() < NAMES.len() * SAYS {
                    let event = next_event(&mut ws).await;
                    if event["type"] == "said" {
                        let from = event["name"].as_str().unwrap().to_owned();
                        heard.push((from, event["text"].as_str().unwrap().to_owned()));
                    }
                }
                for sender in NAMES {
                    let texts: Vec<&str> = heard
                        .iter()
                        .filter(|(from, _)| from == sender)
                        .map(|(_, t)| t.as_str())
                        .collect();
                    let sent: Vec<String> = (0..SAYS).map(|i| format!("{sender} {i}")).collect();
                    assert_eq!(texts, sent, "{name} heard {sender}'s messages");
                }
                ws
            }));
        }
        let mut members = Vec::new();
        for t in tasks {
            members.push(t.await.unwrap());
        }

        // carol leaves; the others are told.
        let mut carol = members.pop().unwrap();
        carol.close(CloseCode::NORMAL, "bye").await.unwrap();
        for ws in &mut members {
            loop {
                let event = next_event(ws).await;
                if event == json!({"type": "left", "name": "carol"}) {
                    break;
                }
            }
        }

        // A client that is not speaking the chat protocol gets 1008; one that sends
        // more than the server's 64 KiB limit gets 1009 from the library.
        let (mut rude, _) = connect_with_response(&url, &ClientConfig::default())
            .await
            .unwrap();
        rude.send_text("not json").await.unwrap();
        assert_eq!(closed_with(&mut rude).await, CloseCode::POLICY);
        let mut big = join(&url, "dave").await;
        let huge = json!({"type": "say", "text": "x".repeat(100 << 10)});
        big.send_text(huge.to_string()).await.unwrap();
        assert_eq!(closed_with(&mut big).await, CloseCode::TOO_BIG);
        for ws in &mut members {
            ws.close(CloseCode::NORMAL, "").await.unwrap();
        }
        eprintln!("chat: {:?}", started.elapsed());
    }
}

// --- ticker ------------------------------------------------------------------------

/// The ticker's server: on its own thread and runtime, so that dropping it kills it the
/// way a crash would, every socket closed without a close frame.
struct TickerServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What every incarnation of the ticker's server shares.
#[derive(Default)]
struct Feed {
    /// The next tick's sequence number, continued across restarts.
    seq: AtomicU64,
    /// Subscriptions received (one per connection).
    subscriptions: Mutex<Vec<String>>,
    /// Connections still to be accepted without sending a tick (a feed gone quiet).
    silent: AtomicUsize,
    /// The close codes clients closed with.
    closes: Mutex<Vec<u16>>,
}

#[cfg(feature = "tokio-rustls")]
type Tls = Option<rapidws::tokio::TlsAcceptor>;
#[cfg(not(feature = "tokio-rustls"))]
type Tls = Option<NoTls>;
/// No TLS in this build: the server is always plain.
#[cfg(not(feature = "tokio-rustls"))]
#[derive(Clone)]
enum NoTls {}

impl TickerServer {
    /// Starts on `addr` (port 0 for any); returns the server and its address.
    fn start(addr: SocketAddr, feed: Arc<Feed>, tls: Tls) -> (TickerServer, SocketAddr) {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::bind(addr).await.unwrap();
                ready_tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let (tcp, _) = tokio::select! {
                        accepted = listener.accept() => accepted.unwrap(),
                        _ = &mut stopped => return,
                    };
                    let feed = feed.clone();
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        let config = ServerConfig::default();
                        match tls {
                            #[cfg(feature = "tokio-rustls")]
                            Some(acceptor) => {
                                if let Ok(ws) =
                                    rapidws::tokio::accept_tls(&acceptor, tcp, &config).await
                                {
                                    ticks(ws, feed).await;
                                }
                            }
                            #[cfg(not(feature = "tokio-rustls"))]
                            Some(never) => match never {},
                            None => {
                                if let Ok(ws) = rapidws::tokio::accept(tcp, &config).await {
                                    ticks(ws, feed).await;
                                }
                            }
                        }
                    });
                }
            });
            // Dropping the runtime here ends every connection task and closes its socket.
        });
        let addr = ready.recv().unwrap();
        let server = TickerServer {
            stop: Some(stop),
            thread: Some(thread),
        };
        (server, addr)
    }

    fn kill(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.thread.take().unwrap().join().unwrap();
    }
}

/// One connection of the feed: waits for the subscription, then sends a tick every 20 ms
/// (none if this connection is to be silent) until the client closes.
async fn ticks<S: AsyncRead + AsyncWrite + Unpin>(mut ws: WebSocket<S>, feed: Arc<Feed>) {
    let symbol = match ws.recv().await {
        Ok(Some(Message::Text(t))) => {
            let sub: serde_json::Value = serde_json::from_str(&t).unwrap();
            assert_eq!(sub["op"], "subscribe", "{t}");
            sub["symbol"].as_str().unwrap().to_owned()
        }
        _ => return,
    };
    feed.subscriptions.lock().unwrap().push(symbol.clone());
    let silent = feed
        .silent
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let mut every = tokio::time::interval(Duration::from_millis(20));
    loop {
        let tick = tokio::select! {
            got = ws.recv() => match got {
                Ok(Some(_)) => false,
                _ => break,
            },
            _ = every.tick() => !silent,
        };
        if tick {
            let seq = feed.seq.fetch_add(1, Ordering::SeqCst);
            let text = format!(r#"{{"symbol":"{symbol}","seq":{seq}}}"#);
            if ws.send_text(text).await.is_err() {
                break;
            }
        }
    }
    if let Some(frame) = ws.close_frame() {
        feed.closes.lock().unwrap().push(frame.code.0);
    }
}

fn tick_seq(line: &str) -> Option<u64> {
    let json = line.strip_prefix("tick ")?;
    let tick: serde_json::Value = serde_json::from_str(json).ok()?;
    assert_eq!(tick["symbol"], "ETH-EUR", "{line}");
    tick["seq"].as_u64()
}

/// The ticker against a server that is killed and restarted once: it resumes with the
/// ticks after the last it saw; and a restarted feed that stays quiet is closed with 1001
/// after `--stale-ms` and replaced.
async fn ticker_resumes_after_a_restart(test: &str, scheme: &str, tls: Tls, ca: Option<&str>) {
    let build = "cargo build -p rapidws-integration --example port_ticker";
    let Some(bin) = example("port_ticker", test, build) else {
        return;
    };
    let started = Instant::now();
    let feed = Arc::new(Feed::default());
    let (server, addr) =
        TickerServer::start("127.0.0.1:0".parse().unwrap(), feed.clone(), tls.clone());
    let host = if tls.is_some() {
        "localhost"
    } else {
        "127.0.0.1"
    };
    let url = format!("{scheme}://{host}:{}/ticker", addr.port());
    let mut args = vec![
        url.as_str(),
        "--symbol",
        "ETH-EUR",
        "--stale-ms",
        "500",
        "--give-up-s",
        "8",
    ];
    if let Some(ca) = ca {
        args.extend(["--ca", ca]);
    }
    let mut ticker = Program::start(&bin, &args);
    let tls_flag = format!("tls={}", tls.is_some());
    let first = ticker
        .expect("the first connection", |l| l.starts_with("connected 1 "))
        .await;
    assert!(first.ends_with(&tls_flag), "{first}");
    let mut last = 0;
    for _ in 0..3 {
        let line = ticker.expect("a tick", |l| l.starts_with("tick ")).await;
        last = tick_seq(&line).unwrap();
    }

    // Kill the server; the ticker sees the connection lost and keeps trying.
    server.kill();
    ticker.expect("the loss", |l| l.starts_with("lost: ")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Back, but its first connection sends nothing: the ticker gives up on it and
    // reconnects.
    feed.silent.store(1, Ordering::SeqCst);
    let (server, _) = TickerServer::start(addr, feed.clone(), tls);
    ticker
        .expect("the stale feed", |l| l == "stale after 500 ms")
        .await;
    ticker
        .expect("a new connection", |l| l.starts_with("connected "))
        .await;
    let line = ticker
        .expect("a tick after the restart", |l| l.starts_with("tick "))
        .await;
    let resumed = tick_seq(&line).unwrap();
    assert!(resumed > last, "tick {resumed} after {last}");
    for _ in 0..2 {
        let line = ticker.expect("a tick", |l| l.starts_with("tick ")).await;
        assert!(tick_seq(&line).unwrap() > resumed);
    }
    drop(ticker);
    server.kill();

    // Every connection subscribed (three, or more if a loaded machine delayed a tick long
    // enough to look stale), and the quiet one was closed with 1001.
    let subscriptions = feed.subscriptions.lock().unwrap().clone();
    assert!(subscriptions.len() >= 3, "{subscriptions:?}");
    assert!(
        subscriptions.iter().all(|s| s == "ETH-EUR"),
        "{subscriptions:?}"
    );
    let closes = feed.closes.lock().unwrap().clone();
    assert!(
        closes.contains(&CloseCode::GOING_AWAY.0),
        "closes: {closes:?}"
    );
    eprintln!("{test}: {:?}", started.elapsed());
}

#[tokio::test]
async fn ticker_over_ws_resumes_after_its_server_restarts() {
    let test = "ticker_over_ws_resumes_after_its_server_restarts";
    ticker_resumes_after_a_restart(test, "ws", None, None).await;
}

#[cfg(feature = "tokio-rustls")]
#[tokio::test]
async fn ticker_over_wss_resumes_after_its_server_restarts() {
    let test = "ticker_over_wss_resumes_after_its_server_restarts";
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key =
        rapidws::tls::rustls::pki_types::PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    let server = rapidws::tls::server_config(vec![ck.cert.der().clone()], key.into()).unwrap();
    let pem = std::env::temp_dir().join(format!("rapidws-ported-{}.pem", std::process::id()));
    std::fs::write(&pem, ck.cert.pem()).unwrap();
    let acceptor = rapidws::tokio::TlsAcceptor::from(server);
    ticker_resumes_after_a_restart(test, "wss", Some(acceptor), Some(pem.to_str().unwrap())).await;
    let _ = std::fs::remove_file(&pem);
}

// --- relay -------------------------------------------------------------------------

/// What the relay's upstream saw.
#[derive(Default)]
struct Upstream {
    /// Flood messages whose `send` returned: handed to the socket.
    flooded: AtomicUsize,
    /// The close frames clients closed with.
    closes: Mutex<Vec<(u16, String)>>,
}

const FLOOD: usize = 1024;
const FLOOD_SIZE: usize = 64 << 10;
/// Most the relay's peak RSS may grow by while the flood passes: 8 MiB, against 64 MiB
/// sent (about 0.3 MiB measured).
const HELD_LIMIT_KIB: u64 = 8 << 10;

/// The upstream: echoes data messages; `flood` makes it send [`FLOOD`] binary messages
/// of [`FLOOD_SIZE`] bytes, each starting with its number, as fast as they are taken.
async fn upstream(mut ws: WebSocket<tokio::net::TcpStream>, seen: Arc<Upstream>) {
    while let Ok(Some(msg)) = ws.recv().await {
        if msg.as_text() == Some("flood") {
            for i in 0..FLOOD {
                let mut payload = vec![(i % 251) as u8; FLOOD_SIZE];
                payload[..4].copy_from_slice(&(i as u32).to_le_bytes());
                if ws.send(Message::binary(payload)).await.is_err() {
                    return;
                }
                seen.flooded.fetch_add(1, Ordering::SeqCst);
            }
        } else if msg.is_data() && ws.send(msg).await.is_err() {
            return;
        }
    }
    if let Some(frame) = ws.close_frame() {
        let close = (frame.code.0, frame.reason.to_string());
        seen.closes.lock().unwrap().push(close);
    }
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_forwards_both_ways_in_order_and_a_slow_client_stalls_the_upstream() {
    let test = "relay_forwards_both_ways_in_order_and_a_slow_client_stalls_the_upstream";
    let Some(bin) = example(
        "port_relay",
        test,
        "cargo build -p rapidws-integration --example port_relay",
    ) else {
        return;
    };
    let started = Instant::now();
    let seen = Arc::new(Upstream::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_url = format!("ws://{}/", listener.local_addr().unwrap());
    let s = seen.clone();
    tokio::spawn(serve(listener, ServerConfig::default(), move |ws| {
        upstream(ws, s.clone())
    }));
    let mut relay = Program::start(
        &bin,
        &["--listen", "127.0.0.1:0", "--upstream", &upstream_url],
    );
    let url = format!("ws://127.0.0.1:{}/", relay.port().await);
    let pid = relay._child.id().unwrap();

    // Both ways, in order: 500 messages out, their 500 echoes back; then the close code.
    let mut ws = connect(&url, &ClientConfig::default()).await.unwrap();
    for i in 0..500 {
        let msg = if i % 2 == 0 {
            Message::text(format!("m{i} {}", "é".repeat(i)))
        } else {
            Message::binary(vec![i as u8; i * 10])
        };
        ws.feed(msg).await.unwrap();
    }
    ws.flush().await.unwrap();
    for i in 0..500 {
        let echo = tokio::time::timeout(STEP, ws.recv())
            .await
            .unwrap()
            .unwrap();
        let want = if i % 2 == 0 {
            Message::text(format!("m{i} {}", "é".repeat(i)))
        } else {
            Message::binary(vec![i as u8; i * 10])
        };
        assert_eq!(echo, Some(want), "echo {i}");
    }
    ws.close(4000, "bye").await.unwrap();
    let deadline = Instant::now() + STEP;
    while seen.closes.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the close never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.closes.lock().unwrap()[0], (4000, "bye".to_owned()));

    // A client that asks for a flood and then reads nothing.
    let baseline = status_kib(pid, "VmRSS:");
    let mut slow = connect(&url, &ClientConfig::default()).await.unwrap();
    slow.send_text("flood").await.unwrap();
    // The upstream stops being able to send: no progress for a second.
    let (mut last, mut since) = (0, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = seen.flooded.load(Ordering::SeqCst);
        assert!(
            now < FLOOD,
            "the whole flood left the upstream towards a client that reads nothing"
        );
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() > Duration::from_secs(1) {
            break;
        }
        assert!(started.elapsed() < STEP * 2, "the upstream never stalled");
    }
    let held = status_kib(pid, "VmHWM:").saturating_sub(baseline);
    let in_flight = (last * FLOOD_SIZE) >> 10;
    eprintln!(
        "{test}: stalled after {last} of {FLOOD} messages ({in_flight} KiB in flight); the \
         relay's peak RSS grew by {held} KiB"
    );
    // What the relay holds: a send queue (256 KiB), a message and a receive buffer per
    // direction, and the allocator's slack; not what is in flight (the rest sits in the
    // sockets' buffers). A relay that buffered what its slow client has not taken would
    // hold most of the megabytes in flight.
    assert!(
        in_flight > 4 << 10,
        "only {in_flight} KiB in flight: the test proves nothing"
    );
    assert!(
        held < HELD_LIMIT_KIB,
        "the relay's peak RSS grew by {held} KiB"
    );

    // Now the client reads: everything arrives, in order, and the upstream finishes.
    for i in 0..FLOOD {
        let msg = tokio::time::timeout(STEP, slow.recv())
            .await
            .unwrap()
            .unwrap();
        let Some(Message::Binary(data)) = msg else {
            panic!("flood message {i}: {msg:?}");
        };
        assert_eq!(data.len(), FLOOD_SIZE);
        assert_eq!(u32::from_le_bytes(data[..4].try_into().unwrap()), i as u32);
    }
    assert_eq!(seen.flooded.load(Ordering::SeqCst), FLOOD);
    let held = status_kib(pid, "VmHWM:").saturating_sub(baseline);
    assert!(
        held < HELD_LIMIT_KIB,
        "the relay's peak RSS grew by {held} KiB"
    );
    slow.close(CloseCode::NORMAL, "").await.unwrap();
    eprintln!("{test}: {:?}", started.elapsed());
}
