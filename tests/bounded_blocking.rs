//! What a hostile peer can make the blocking layer hold, over real loopback sockets, in
//! both roles: the shapes of `bounded_tokio.rs` against a thread-per-connection blocking
//! echo server (as `examples/blocking_echo.rs` is) and blocking clients. Each asserts the
//! bound (the budget's own accounting), the close code the peer reads, and that a fresh
//! blocking client gets its echo within `bounded_support::LIVENESS` while the attack holds.
//!
//! The blocking layer runs the connection's timers inside [`WebSocket::read`] (the
//! socket's read timeout is shortened to the next deadline) and nowhere else: a
//! `send` that cannot write waits for the socket's own write timeout, which is what
//! bounds a peer that never reads here.
//!
//! The attackers are raw peers on a tokio runtime of the test's own; the tests run one
//! at a time (a lock).
#![cfg(all(feature = "blocking", feature = "tokio", feature = "deflate"))]

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rapidws::blocking::{self, ClientConfig, Message, ServerConfig, WebSocket};
use rapidws::deflate::DeflateConfig;
use rapidws::{Budget, Config, Error, Timeout};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

mod bounded_support;
use bounded_support::{
    BUDGET_WAIT, IDLE, LIMIT, MESSAGE_TIMEOUT, MIB, Probes, SETTLE, SLACK, accept, check_admitted,
    check_liveness, client_handshake, deflated_zeros, frame, hold_open_fragment, ramp, read_close,
    settled, trickle, trickling_server, unfinished_message, write_until_stuck,
};

static SERIAL: Mutex<()> = Mutex::new(());

/// Stack of each connection thread: thousands of them.
const STACK: usize = 512 << 10;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn bounded<T>(rt: &tokio::runtime::Runtime, f: impl std::future::Future<Output = T>) -> T {
    rt.block_on(async { tokio::time::timeout(LIMIT, f).await })
        .expect("a test step timed out")
}

/// Waits until every fragment is held or refused, for good (see [`SETTLE`]); returns how
/// many are held.
fn settle(budget: &Budget, per: usize, refused: &AtomicUsize, conns: usize) -> usize {
    loop {
        until("every fragment is held or refused", || {
            settled(budget, per, refused, conns).is_some()
        });
        let first = settled(budget, per, refused, conns);
        thread::sleep(SETTLE);
        if let Some((held, _)) = first.filter(|f| settled(budget, per, refused, conns) == Some(*f))
        {
            return held / per;
        }
    }
}

fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LIMIT, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

// --- our side ---------------------------------------------------------------------------

/// How a connection thread ended, and when.
type Ended = (Result<(), Error>, Instant);

/// A blocking echo server: one thread per connection, every data message sent back;
/// `write_timeout` on each socket as `examples/blocking_echo.rs` sets one. Each
/// connection's end is reported on the channel.
fn echo_server(
    config: ServerConfig,
    write_timeout: Duration,
) -> (SocketAddr, std::sync::mpsc::Receiver<Ended>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let config = Arc::new(config);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            // The connection's timers shorten the read timeout as they need.
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            let _ = stream.set_write_timeout(Some(write_timeout));
            let (tx, config) = (tx.clone(), config.clone());
            let spawned = thread::Builder::new().stack_size(STACK).spawn(move || {
                let Ok(mut ws) = blocking::accept(stream, &config) else {
                    return;
                };
                let r = echo(&mut ws);
                let _ = tx.send((r, Instant::now()));
            });
            if spawned.is_err() {
                eprintln!("could not spawn a connection thread");
            }
        }
    });
    (addr, rx)
}

fn echo(ws: &mut WebSocket<std::net::TcpStream>) -> Result<(), Error> {
    loop {
        match ws.read()? {
            Some(msg) if msg.is_data() => ws.send(msg)?,
            Some(_) => {}
            None => return Ok(()),
        }
    }
}

/// The next connection that ended with an error (the probes' end cleanly).
fn next_failure(ended: &std::sync::mpsc::Receiver<Ended>) -> (Error, Instant) {
    loop {
        match ended.recv_timeout(LIMIT).expect("no connection ended") {
            (Ok(()), _) => {}
            (Err(e), at) => return (e, at),
        }
    }
}

/// A fresh blocking client: handshake, one small echo. How long that took.
fn probe(addr: SocketAddr) -> Duration {
    let start = Instant::now();
    let config = ClientConfig::default().with_deflate(None);
    let mut ws = blocking::connect(format!("ws://{addr}/"), &config).expect("the probe connects");
    ws.send(Message::text("are you there?")).unwrap();
    match ws.read() {
        Ok(Some(Message::Text(t))) => assert_eq!(t, "are you there?"),
        other => panic!("the probe's echo: {other:?}"),
    }
    let took = start.elapsed();
    let _ = ws.close(1000, "");
    took
}

/// Probes `addr` every 50 ms from a thread of its own until `stop`.
fn probing(addr: SocketAddr, stop: Arc<AtomicBool>) -> thread::JoinHandle<Probes> {
    thread::spawn(move || {
        let mut probes = Probes::default();
        while !stop.load(Ordering::Relaxed) {
            let at = Instant::now();
            probes.push(at, probe(addr));
            thread::sleep(Duration::from_millis(50));
        }
        probes
    })
}

fn healthy_server() -> SocketAddr {
    echo_server(
        ServerConfig::default().with_deflate(None),
        Duration::from_secs(5),
    )
    .0
}

// --- 1. a peer that never reads while the application is blocked in send --------------

const WRITE_TIMEOUT: Duration = Duration::from_millis(500);

#[test]
fn blocking_server_stuck_writing_to_a_peer_that_never_reads_gives_up_at_the_write_timeout() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let config = ServerConfig::default().with_deflate(None);
    let (addr, ended) = echo_server(config, WRITE_TIMEOUT);
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(addr, stop.clone());
    let size = 2 * MIB;
    let payload = Arc::new(frame(0x82, size as u64, &vec![0x5a; size], true));
    let mut clients = Vec::new();
    for _ in 0..4 {
        let payload = payload.clone();
        clients.push(rt.spawn(async move {
            // A small receive buffer that never grows: what the server writes stops
            // being taken at once (with autotuning the kernel keeps taking a little now
            // and then, and each blocking write that makes progress starts its timeout
            // afresh).
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(64 << 10).unwrap();
            let mut s = socket.connect(addr).await.unwrap();
            client_handshake(&mut s, false).await;
            let last_write = write_until_stuck(&mut s, &payload, 8).await;
            (s, last_write)
        }));
    }
    let mut sockets = Vec::new();
    let mut last_write = Instant::now() - Duration::from_secs(3600);
    for c in clients {
        let (s, at) = bounded(&rt, c).unwrap();
        sockets.push(s);
        last_write = last_write.max(at);
    }
    let in_place = Instant::now();
    // A blocking write that makes any progress starts the socket's timeout afresh, and
    // the kernel takes a last piece when the peer's window settles: measured, the send
    // that gives up takes two write timeouts (1.02 s for 500 ms).
    for _ in 0..4 {
        let (e, at) = next_failure(&ended);
        assert!(e.is_would_block(), "the connection ended with {e:?}");
        let after = at.saturating_duration_since(last_write);
        assert!(
            after <= 2 * WRITE_TIMEOUT + SLACK,
            "gave up {after:?} after the peer's last write"
        );
    }
    stop.store(true, Ordering::Relaxed);
    check_liveness("never-reading peers", &prober.join().unwrap(), in_place);
    drop(sockets);
}

#[test]
fn blocking_client_stuck_writing_to_a_server_that_never_reads_gives_up_at_the_write_timeout() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let probe_addr = healthy_server();
    let listener = rt.block_on(bounded_support::listener());
    let (l, addr) = listener;
    let server = rt.spawn(async move {
        let s = accept(&l, false).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(s);
    });
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(probe_addr, stop.clone());
    let in_place = Instant::now();
    let mut config = ClientConfig::default().with_deflate(None);
    config.write_timeout = Some(WRITE_TIMEOUT);
    let mut ws = blocking::connect(format!("ws://{addr}/"), &config).unwrap();
    let message = Message::binary(vec![7u8; 2 * MIB]);
    let start = Instant::now();
    let err = loop {
        let before = Instant::now();
        if let Err(e) = ws.send(message.clone()) {
            break (e, before.elapsed());
        }
        assert!(start.elapsed() < LIMIT);
    };
    assert!(err.0.is_would_block(), "{:?}", err.0);
    assert!(
        err.1 <= WRITE_TIMEOUT + SLACK,
        "the send gave up after {:?}",
        err.1
    );
    stop.store(true, Ordering::Relaxed);
    check_liveness(
        "client sending to a server that never reads",
        &prober.join().unwrap(),
        in_place,
    );
    server.abort();
}

// --- 2. open compressed fragments on many connections against the shared budget --------

#[test]
fn two_thousand_open_compressed_fragments_to_a_blocking_server_stay_under_the_budget() {
    const CONNS: usize = 2000;
    const INFLATED: usize = MIB;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    bounded_support::ensure_descriptors(3 * CONNS as u64 + 256);
    let rt = runtime();
    let budget = Budget::new(64 * MIB);
    let config = ServerConfig::default()
        .with_connection(
            Config::default()
                .with_budget(Some(budget.clone()))
                .with_budget_wait(BUDGET_WAIT),
        )
        .with_deflate(Some(DeflateConfig::default()));
    let (addr, ended) = echo_server(config, Duration::from_secs(5));
    let fragment = {
        let p = deflated_zeros(INFLATED);
        Arc::new(frame(0x40 | 0x02, p.len() as u64, &p, true))
    };
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(addr, stop.clone());
    let refused = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(tokio::sync::Notify::new());
    let ramp = ramp();
    let mut attackers = Vec::new();
    for _ in 0..CONNS {
        let (fragment, refused, release, ramp) = (
            fragment.clone(),
            refused.clone(),
            release.clone(),
            ramp.clone(),
        );
        attackers.push(rt.spawn(async move {
            if hold_open_fragment(addr, ramp, &fragment, &release).await {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // No one still waiting: one whose inflater paused at a partial grant holds part of
    // a fragment until its wait ends in 1013.
    let admitted = settle(&budget, INFLATED, &refused, CONNS);
    let in_place = Instant::now();
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let probes = prober.join().unwrap();
    check_admitted(
        "open fragments",
        &budget,
        admitted,
        refused.load(Ordering::Relaxed),
    );
    let mut over = 0;
    while let Ok((r, _)) = ended.try_recv() {
        over += usize::from(matches!(r, Err(Error::OverBudget)));
    }
    assert_eq!(over, CONNS - admitted, "threads ended with OverBudget");
    release.notify_waiters();
    for a in attackers {
        bounded(&rt, a).unwrap();
    }
    until("the budget is back at zero", || budget.held() == 0);
    check_liveness("open compressed fragments", &probes, in_place);
}

#[test]
fn two_thousand_blocking_clients_receiving_open_compressed_fragments_share_a_budget() {
    const CONNS: usize = 2000;
    const INFLATED: usize = MIB;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    bounded_support::ensure_descriptors(3 * CONNS as u64 + 256);
    let rt = runtime();
    let probe_addr = healthy_server();
    let budget = Budget::new(64 * MIB);
    let (l, addr) = rt.block_on(bounded_support::listener());
    let fragment = {
        let p = deflated_zeros(INFLATED);
        Arc::new(frame(0x40 | 0x02, p.len() as u64, &p, false))
    };
    let (codes_tx, mut codes) = mpsc::unbounded_channel();
    let accept = {
        let fragment = fragment.clone();
        rt.spawn(async move {
            for _ in 0..CONNS {
                let mut s = accept(&l, true).await;
                let (fragment, codes_tx) = (fragment.clone(), codes_tx.clone());
                tokio::spawn(async move {
                    s.write_all(&fragment).await.unwrap();
                    let _ = codes_tx.send(read_close(&mut s, &[], LIMIT).await);
                });
            }
        })
    };
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(probe_addr, stop.clone());
    let config = Arc::new(
        ClientConfig::default()
            .with_connection(
                Config::default()
                    .with_budget(Some(budget.clone()))
                    .with_budget_wait(BUDGET_WAIT),
            )
            .with_deflate(Some(DeflateConfig::default())),
    );
    let url = format!("ws://{addr}/");
    let refused = Arc::new(AtomicUsize::new(0));
    let quit = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for i in 0..CONNS {
        let (url, config, refused, quit) =
            (url.clone(), config.clone(), refused.clone(), quit.clone());
        clients.push(
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    let mut ws = blocking::connect(&url, &config).expect("connect");
                    let _ = ws
                        .get_mut()
                        .set_read_timeout(Some(Duration::from_millis(200)));
                    loop {
                        match ws.read() {
                            Err(Error::OverBudget) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                            // Holding the fragment: the socket's own timeout, to look at
                            // `quit` now and then.
                            Err(e) if e.is_would_block() => {
                                if quit.load(Ordering::Relaxed) {
                                    return; // dropped without a close
                                }
                            }
                            other => panic!("a client got {other:?}"),
                        }
                    }
                })
                .unwrap(),
        );
        // No more than the listen backlog connects at once.
        if i % 64 == 63 {
            thread::sleep(Duration::from_millis(5));
        }
    }
    // No one still waiting: one whose inflater paused at a partial grant holds part of
    // a fragment until its wait ends in 1013.
    let admitted = settle(&budget, INFLATED, &refused, CONNS);
    let in_place = Instant::now();
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let probes = prober.join().unwrap();
    check_admitted(
        "clients receiving open fragments",
        &budget,
        admitted,
        refused.load(Ordering::Relaxed),
    );
    quit.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(budget.held(), 0, "every client thread is gone");
    bounded(&rt, accept).unwrap();
    let mut refusals = 0;
    for _ in 0..CONNS {
        refusals += usize::from(bounded(&rt, codes.recv()).unwrap() == Some(1013));
    }
    assert_eq!(refusals, CONNS - admitted, "1013s the server read");
    check_liveness(
        "clients holding open compressed fragments",
        &probes,
        in_place,
    );
}

// --- 3. a fragmented message that is never finished -------------------------------------

#[test]
fn unfinished_fragmented_message_to_a_blocking_server_is_closed_with_1008_at_the_deadline() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let budget = Budget::new(64 * MIB);
    let config = ServerConfig::default()
        .with_connection(
            Config::default()
                .with_message_timeout(Some(MESSAGE_TIMEOUT))
                .with_budget(Some(budget.clone())),
        )
        .with_deflate(Some(DeflateConfig::default()));
    let (addr, ended) = echo_server(config, Duration::from_secs(5));
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(addr, stop.clone());
    let arrived = Arc::new(tokio::sync::Barrier::new(101));
    let mut peers = Vec::new();
    for i in 0..100 {
        let arrived = arrived.clone();
        peers.push(rt.spawn(async move {
            let compressed = i % 2 == 1;
            let mut s = bounded_support::connect(addr).await;
            let leftover = client_handshake(&mut s, compressed).await;
            arrived.wait().await;
            unfinished_message(&mut s, compressed, true, &leftover).await
        }));
    }
    bounded(&rt, arrived.wait());
    let in_place = Instant::now();
    for p in peers {
        let (code, after) = bounded(&rt, p).unwrap();
        assert_eq!(code, Some(1008));
        assert!(
            after >= MESSAGE_TIMEOUT - Duration::from_millis(20)
                && after <= MESSAGE_TIMEOUT + SLACK,
            "closed {after:?} after the first fragment"
        );
    }
    for _ in 0..100 {
        let (e, _) = next_failure(&ended);
        assert!(matches!(e, Error::Timeout(Timeout::Message)), "{e:?}");
    }
    stop.store(true, Ordering::Relaxed);
    until("the budget is back at zero", || budget.held() == 0);
    check_liveness(
        "unfinished fragmented messages",
        &prober.join().unwrap(),
        in_place,
    );
}

#[test]
fn blocking_client_closes_an_unfinished_fragmented_message_with_1008_at_the_deadline() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let probe_addr = healthy_server();
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(probe_addr, stop.clone());
    let in_place = Instant::now();
    for compressed in [false, true] {
        let (l, addr) = rt.block_on(bounded_support::listener());
        let server = rt.spawn(async move {
            let mut s = accept(&l, compressed).await;
            unfinished_message(&mut s, compressed, false, &[]).await
        });
        let config = ClientConfig::default()
            .with_connection(Config::default().with_message_timeout(Some(MESSAGE_TIMEOUT)))
            .with_deflate(compressed.then(DeflateConfig::default));
        let mut ws = blocking::connect(format!("ws://{addr}/"), &config).unwrap();
        let r = loop {
            match ws.read() {
                Ok(Some(Message::Ping(_))) => {}
                other => break other,
            }
        };
        assert!(matches!(r, Err(Error::Timeout(Timeout::Message))), "{r:?}");
        let (code, after) = bounded(&rt, server).unwrap();
        assert_eq!(code, Some(1008), "compressed: {compressed}");
        assert!(after <= MESSAGE_TIMEOUT + SLACK, "{after:?}");
    }
    stop.store(true, Ordering::Relaxed);
    check_liveness(
        "client, unfinished fragmented messages",
        &prober.join().unwrap(),
        in_place,
    );
}

// --- 4. a trickle of bytes ---------------------------------------------------------------

#[test]
fn trickle_to_a_blocking_server_is_dropped_at_the_idle_timeout_with_1001() {
    const CONNS: usize = 200;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let config = ServerConfig::default()
        .with_connection(Config::default().with_idle_timeout(Some(IDLE)))
        .with_deflate(None);
    let (addr, ended) = echo_server(config, Duration::from_secs(5));
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(addr, stop.clone());
    let ramp = ramp();
    let connected = Arc::new(AtomicUsize::new(0));
    let mut peers = Vec::new();
    for _ in 0..CONNS {
        let (ramp, connected) = (ramp.clone(), connected.clone());
        peers.push(rt.spawn(async move {
            let permit = ramp.acquire_owned().await.unwrap();
            let start = Instant::now();
            let mut s = bounded_support::connect(addr).await;
            let leftover = client_handshake(&mut s, false).await;
            assert!(leftover.is_empty());
            drop(permit);
            connected.fetch_add(1, Ordering::Relaxed);
            trickle(&mut s, true, &leftover, start).await
        }));
    }
    until("every trickler is connected", || {
        connected.load(Ordering::Relaxed) == CONNS
    });
    let in_place = Instant::now();
    for p in peers {
        let (code, after) = bounded(&rt, p).unwrap();
        assert_eq!(code, Some(1001), "the close code for a trickle");
        assert!(
            after >= IDLE - Duration::from_millis(20) && after <= IDLE + SLACK,
            "a trickle was dropped after {after:?}"
        );
    }
    for _ in 0..CONNS {
        let (e, _) = next_failure(&ended);
        assert!(matches!(e, Error::Timeout(Timeout::Idle)), "{e:?}");
    }
    stop.store(true, Ordering::Relaxed);
    check_liveness("trickling clients", &prober.join().unwrap(), in_place);
}

#[test]
fn blocking_client_drops_a_trickling_server_at_the_idle_timeout_with_1001() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let probe_addr = healthy_server();
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(probe_addr, stop.clone());
    let in_place = Instant::now();
    let (l, addr) = rt.block_on(bounded_support::listener());
    let server = rt.spawn(trickling_server(l));
    let config = ClientConfig::default()
        .with_connection(Config::default().with_idle_timeout(Some(IDLE)))
        .with_deflate(None);
    let mut ws = blocking::connect(format!("ws://{addr}/"), &config).unwrap();
    let r = ws.read();
    assert!(matches!(r, Err(Error::Timeout(Timeout::Idle))), "{r:?}");
    let (code, after) = bounded(&rt, server).unwrap();
    assert_eq!(code, Some(1001));
    assert!(after <= IDLE + SLACK, "{after:?}");
    stop.store(true, Ordering::Relaxed);
    check_liveness(
        "client, trickling server",
        &prober.join().unwrap(),
        in_place,
    );
}
