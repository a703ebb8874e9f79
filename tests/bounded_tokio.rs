//! What a hostile peer can make the tokio layer hold, over real loopback sockets, in both
//! roles: each shape is run against our server (raw clients attacking) and our client (a
//! raw server attacking), and each test asserts the bound (the budget's own accounting
//! and the process's live heap from the tests' counting allocator), the close code the
//! peer reads, and that a fresh client still gets its echo within
//! `bounded_support::LIVENESS` while the attack runs.
//!
//! | shape | bounded by | the peer reads |
//! |---|---|---|
//! | never reads, the application blocked in `send` | keepalive + pong timeout | nothing (it does not read); reset after the linger |
//! | compressed open fragments, 1,000x amplification, on 2,000 connections | the shared [`Budget`] | 1013 for those that waited `budget_wait` for memory |
//! | a fragmented message never finished | `message_timeout` | 1008 |
//! | one byte now and then | `idle_timeout` (progress is a frame, not a byte) | 1001 |
//!
//! The timeouts are short here (hundreds of milliseconds) so the whole file takes a few
//! seconds; the `#[ignore]`d `*_at_full_size` tests run the attacks at full size (16 MiB
//! messages, 15 MiB fragments from 15 KiB, 5,000 trickling connections): `cargo test --release --test bounded_tokio -- --ignored`.
//!
//! Tests run one at a time (a lock): the live-heap figures are the process's.
#![cfg(all(feature = "tokio", feature = "deflate"))]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ClientConfig, Config, Message, ServerConfig, WebSocket, connect, serve};
use rapidws::{Budget, Error, Timeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

mod alloc_count;
mod bounded_support;
use alloc_count::{live_heap, peak_heap, reset_peak};
use bounded_support::{
    BUDGET_WAIT, IDLE, LIMIT, MESSAGE_TIMEOUT, MIB, Probes, SETTLE, SLACK, accept, check_admitted,
    check_liveness, client_handshake, deflated_zeros, frame, hold_open_fragment, listener, ramp,
    read_close, settled, trickle, trickling_server, unfinished_message, write_until_stuck,
};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("a test step timed out")
}

// --- our side ---------------------------------------------------------------------------

/// How an echo handler ended, and when.
type Ended = (Result<(), Error>, Instant);

/// An echo server (`serve`, every data message sent back with `send().await`) with
/// `config`; each handler's end is reported on the channel.
async fn echo_server(config: ServerConfig) -> (SocketAddr, mpsc::UnboundedReceiver<Ended>) {
    let (l, addr) = listener().await;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(serve(l, config, move |mut ws: WebSocket<TcpStream>| {
        let tx = tx.clone();
        async move {
            let r = loop {
                match ws.recv().await {
                    Ok(Some(m)) if m.is_data() => {
                        if let Err(e) = ws.send(m).await {
                            break Err(e);
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                }
            };
            let _ = tx.send((r, Instant::now()));
        }
    }));
    (addr, rx)
}

/// The next handler that ended with an error: the probes' handlers, which end cleanly,
/// are passed over.
async fn next_failure(ended: &mut mpsc::UnboundedReceiver<Ended>) -> (Error, Instant) {
    loop {
        match bounded(ended.recv()).await.expect("the server is gone") {
            (Ok(()), _) => {}
            (Err(e), at) => return (e, at),
        }
    }
}

/// A fresh client: handshake, one small echo. How long that took.
async fn probe(addr: SocketAddr) -> Duration {
    let url = format!("ws://{addr}/");
    let start = Instant::now();
    let mut ws = connect(&url, &ClientConfig::default().with_deflate(None))
        .await
        .expect("the probe connects");

    ws.send(Message::text("are you there?")).await.unwrap();
    match ws.recv().await {
        Ok(Some(Message::Text(t))) => assert_eq!(t, "are you there?"),
        other => panic!("the probe's echo: {other:?}"),
    }
    let took = start.elapsed();
    tokio::spawn(async move {
        let _ = ws.close(1000, "").await;
    });
    took
}

/// Probes `addr` every 50 ms until `stop`; the figures.
fn probing(addr: SocketAddr, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Probes> {
    tokio::spawn(async move {
        let mut probes = Probes::default();
        while !stop.load(Ordering::Relaxed) {
            let at = Instant::now();
            probes.push(at, bounded(probe(addr)).await);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        probes
    })
}

/// A plain echo server for the client-role tests' probes.
async fn healthy_server() -> SocketAddr {
    echo_server(ServerConfig::default().with_deflate(None))
        .await
        .0
}

/// Waits until every fragment is held or refused, for good (see [`SETTLE`]); returns how
/// many are held.
async fn settle(budget: &Budget, per: usize, refused: &AtomicUsize, conns: usize) -> usize {
    loop {
        until("every fragment is held or refused", || {
            settled(budget, per, refused, conns).is_some()
        })
        .await;
        let first = settled(budget, per, refused, conns);
        tokio::time::sleep(SETTLE).await;
        if let Some((held, _)) = first.filter(|f| settled(budget, per, refused, conns) == Some(*f))
        {
            return held / per;
        }
    }
}

/// Waits until `cond` holds, checking every 10 ms.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LIMIT, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// --- 1. a peer that never reads while the application is blocked in send --------------

const KEEPALIVE: Duration = Duration::from_millis(300);
const PONG: Duration = Duration::from_millis(300);

fn keepalive_config() -> Config {
    Config::default()
        .with_keepalive(Some(KEEPALIVE), PONG)
        .with_linger(Some(Duration::from_millis(200)), 64 * MIB)
}

/// `peers` raw clients each send `messages` binary messages of `size` bytes to our echo
/// server and never read; the handlers, blocked in `send`, end with `Timeout::Pong`
/// within keepalive + pong timeout of the last byte the peer got through, and the memory
/// they held goes back.
async fn never_reading_clients(peers: usize, messages: usize, size: usize, keepalive: Config) {
    let _serial = SERIAL.lock().await;
    let base = live_heap();
    let (ka, pong) = (
        keepalive.keepalive_interval.unwrap(),
        keepalive.pong_timeout.unwrap(),
    );
    let config = ServerConfig::default()
        .with_connection(keepalive)
        .with_deflate(None);
    let (addr, mut ended) = echo_server(config).await;
    let payload = Arc::new(frame(0x82, size as u64, &vec![0x5a; size], true));
    let stop = Arc::new(AtomicBool::new(false));
    let mut prober = probing(addr, stop.clone());
    let mut clients = Vec::new();
    for _ in 0..peers {
        let payload = payload.clone();
        clients.push(tokio::spawn(async move {
            let mut s = bounded_support::connect(addr).await;
            client_handshake(&mut s, false).await;
            // Write until the socket takes no more for a while: the server's handler is
            // then blocked in `send` towards us, and reads nothing more.
            let last_write = write_until_stuck(&mut s, &payload, messages).await;
            (s, last_write)
        }));
    }
    let mut sockets = Vec::new();
    let mut last_write = Instant::now() - Duration::from_secs(3600);
    for c in clients {
        let (s, at) = bounded(c).await.unwrap();
        sockets.push(s);
        last_write = last_write.max(at);
    }
    let held = live_heap().saturating_sub(base);
    let in_place = Instant::now();
    for _ in 0..peers {
        let (e, at) = next_failure(&mut ended).await;
        assert!(
            matches!(e, Error::Timeout(Timeout::Pong)),
            "the handler ended with {e:?}"
        );
        let after = at.saturating_duration_since(last_write);
        assert!(
            after <= ka + pong + SLACK,
            "dropped {after:?} after the peer's last write (keepalive {ka:?} + pong {pong:?})"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let probes = bounded(&mut prober).await.unwrap();
    // The peer did not read, so our close (1001) reaches it only if the socket buffers
    // had room for it behind the echoes; else it reads the echoes that fitted, then the
    // end of the stream (a reset after the linger).
    for mut s in sockets {
        let code = read_close(&mut s, &[], Duration::from_secs(5)).await;
        assert!(matches!(code, None | Some(1001)), "{code:?}");
    }
    let frame_len = payload.len();
    drop(payload);
    let left = live_heap().saturating_sub(base);
    eprintln!(
        "never-reading peers: {peers} x {messages} x {size} B; {held} heap bytes held while \
         blocked, {left} after"
    );
    // While blocked: per connection the message being echoed, one being received and the
    // socket-side buffers; the raw peers' one shared frame.
    assert!(held <= frame_len + peers * (3 * size + 2 * MIB), "{held}");
    assert!(left <= MIB, "{left} bytes still held after the drops");
    check_liveness("never-reading peers", &probes, in_place);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_blocked_in_send_to_a_peer_that_never_reads_is_dropped_after_keepalive_and_pong() {
    never_reading_clients(4, 8, 2 * MIB, keepalive_config()).await;
}

/// At full size: 50 peers, 16 MiB messages (800 MiB held before the timers ran in
/// send), 1 s + 1 s timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: 50 never-reading peers with 16 MiB messages, about 10 s and 2 GiB in a release build"]
async fn never_reading_peers_at_full_size() {
    let config = Config::default()
        .with_keepalive(Some(Duration::from_secs(1)), Duration::from_secs(1))
        .with_linger(Some(Duration::from_millis(500)), 64 * MIB);
    never_reading_clients(50, 4, 16 * MIB, config).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_blocked_in_send_to_a_server_that_never_reads_fails_after_keepalive_and_pong() {
    let _serial = SERIAL.lock().await;
    let probe_addr = healthy_server().await;
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let mut s = accept(&l, false).await;
        // Never reads; holds the socket until the client is gone.
        let mut one = [0u8; 1];
        tokio::time::sleep(Duration::from_secs(5)).await;
        let _ = s.read(&mut one).await;
    });
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(probe_addr, stop.clone());
    let in_place = Instant::now();
    let config = ClientConfig::default()
        .with_connection(keepalive_config())
        .with_deflate(None);
    let mut ws = connect(&format!("ws://{addr}/"), &config).await.unwrap();
    let opened = Instant::now();
    let message = Message::binary(vec![7u8; 2 * MIB]);
    let err = bounded(async {
        loop {
            if let Err(e) = ws.send(message.clone()).await {
                return e;
            }
        }
    })
    .await;
    let took = opened.elapsed();
    assert!(matches!(err, Error::Timeout(Timeout::Pong)), "{err:?}");
    // The server sent nothing after its handshake: keepalive, then the pong timeout.
    assert!(
        took >= KEEPALIVE + PONG && took <= KEEPALIVE + PONG + SLACK,
        "the send failed after {took:?}"
    );
    stop.store(true, Ordering::Relaxed);
    check_liveness(
        "client sending to a server that never reads",
        &prober.await.unwrap(),
        in_place,
    );
    drop(ws);
    server.abort();
}

// --- 2. open compressed fragments on many connections against the shared budget --------

/// `conns` raw clients each open a compressed message with one fragment (FIN = 0)
/// inflating to `inflated` bytes and keep it open; our server's budget is `limit`. Those
/// the budget takes hold their fragment, the others wait for memory (reading nothing)
/// and read 1013 once `BUDGET_WAIT` has passed; the budget never passes its limit (the
/// holders are not waiting, so no waiter is let past it) and is back at zero once the
/// attackers leave.
async fn open_fragments_against_our_server(conns: usize, inflated: usize, limit: usize) {
    let _serial = SERIAL.lock().await;
    bounded_support::ensure_descriptors(3 * conns as u64 + 256);
    let base = live_heap();
    reset_peak();
    let budget = Budget::new(limit);
    let config = ServerConfig::default()
        .with_connection(
            Config::default()
                .with_budget(Some(budget.clone()))
                .with_budget_wait(BUDGET_WAIT),
        )
        .with_deflate(Some(DeflateConfig::default()));
    let (addr, _ended) = echo_server(config).await;
    let fragment = {
        let p = deflated_zeros(inflated);
        Arc::new(frame(0x40 | 0x02, p.len() as u64, &p, true))
    };
    eprintln!(
        "open fragments: {conns} connections, {} wire bytes inflating to {inflated}, budget {limit}",
        fragment.len()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut prober = probing(addr, stop.clone());
    let refused = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(tokio::sync::Notify::new());
    let ramp = ramp();
    let mut attackers = Vec::new();
    for _ in 0..conns {
        let (fragment, refused, release) = (fragment.clone(), refused.clone(), release.clone());
        let ramp = ramp.clone();
        attackers.push(tokio::spawn(async move {
            if hold_open_fragment(addr, ramp, &fragment, &release).await {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Every fragment is either held or refused.
    let per = inflated;
    // No one still waiting: one whose inflater paused at a partial grant holds part of
    // a fragment until its wait ends in 1013.
    let admitted = settle(&budget, per, &refused, conns).await;
    // Let the probes run while everything is held.
    let in_place = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused_n = refused.load(Ordering::Relaxed);
    let heap = live_heap().saturating_sub(base);
    stop.store(true, Ordering::Relaxed);
    let probes = bounded(&mut prober).await.unwrap();
    eprintln!(
        "open fragments: {admitted} held ({} bytes charged), {refused_n} refused with 1013; \
         budget peak {} of {limit}; live heap +{heap} B (peak +{} B)",
        budget.held(),
        budget.peak(),
        peak_heap().saturating_sub(base)
    );
    assert!(budget.peak() <= limit);
    assert_eq!(
        budget.held(),
        admitted * per,
        "each holds exactly its inflated bytes"
    );
    assert_eq!(refused_n as u64, budget.refused());
    assert_eq!(admitted + refused_n, conns);
    // As many as fit, less at most one per worker thread whose grant was out at the time.
    assert!(
        admitted <= limit / per && admitted + 2 >= limit / per,
        "{admitted} held"
    );
    // The heap: the budget's bytes plus each connection's fixed cost (a socket's
    // buffers, the inflater's window and state) and the attackers' own sockets.
    let fixed = conns * 160 * 1024;
    assert!(
        heap <= limit + fixed,
        "live heap +{heap} B, bound {}",
        limit + fixed
    );
    release.notify_waiters();
    for a in attackers {
        bounded(a).await.unwrap();
    }
    // The attackers left without a close: every charge goes back.
    until("the budget is back at zero", || budget.held() == 0).await;
    check_liveness("open compressed fragments", &probes, in_place);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_open_compressed_fragments_stay_under_the_budget_and_the_refused_get_1013() {
    // 1,056 wire bytes inflating to 1 MiB each; a 64 MiB budget holds 64 of them.
    open_fragments_against_our_server(2000, MIB, 64 * MIB).await;
}

/// At full size: 15 KiB compressed fragments inflating to 15 MiB, the default 1 GiB
/// budget (its own instance here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: 2,000 connections x 15 MiB fragments against a 1 GiB budget, about 1.3 GiB and 20 s in a release build"]
async fn open_compressed_fragments_at_full_size() {
    open_fragments_against_our_server(2000, 15 * MIB, rapidws::connection::DEFAULT_BUDGET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_receiving_open_compressed_fragments_share_a_budget_and_the_refused_send_1013() {
    const CONNS: usize = 2000;
    const INFLATED: usize = MIB;
    let _serial = SERIAL.lock().await;
    bounded_support::ensure_descriptors(3 * CONNS as u64 + 256);
    let probe_addr = healthy_server().await;
    let budget = Budget::new(64 * MIB);
    let (l, addr) = listener().await;
    let fragment = {
        let p = deflated_zeros(INFLATED);
        Arc::new(frame(0x40 | 0x02, p.len() as u64, &p, false))
    };
    // The hostile server: sends each client an open compressed fragment and records the
    // close code each client sends back.
    let codes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = {
        let (fragment, codes) = (fragment.clone(), codes.clone());
        tokio::spawn(async move {
            let mut held = Vec::new();
            for _ in 0..CONNS {
                let mut s = accept(&l, true).await;
                let (fragment, codes) = (fragment.clone(), codes.clone());
                held.push(tokio::spawn(async move {
                    s.write_all(&fragment).await.unwrap();
                    let code = read_close(&mut s, &[], LIMIT).await;
                    codes.lock().unwrap().push(code);
                }));
            }
            held
        })
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut prober = probing(probe_addr, stop.clone());
    let config = ClientConfig::default()
        .with_connection(
            Config::default()
                .with_budget(Some(budget.clone()))
                .with_budget_wait(BUDGET_WAIT),
        )
        .with_deflate(Some(DeflateConfig::default()));
    let url = format!("ws://{addr}/");
    let refused = Arc::new(AtomicUsize::new(0));
    let ramp = ramp();
    let mut clients = Vec::new();
    for _ in 0..CONNS {
        let (url, config, refused) = (url.clone(), config.clone(), refused.clone());
        let ramp = ramp.clone();
        clients.push(tokio::spawn(async move {
            let permit = ramp.acquire_owned().await.unwrap();
            let mut ws = connect(&url, &config).await.expect("connect");
            drop(permit);
            // A client the budget takes waits here, holding its fragment, until aborted.
            match ws.recv().await {
                Err(Error::OverBudget) => refused.fetch_add(1, Ordering::Relaxed),
                other => panic!("a client got {other:?}"),
            };
        }));
    }
    // No one still waiting: one whose inflater paused at a partial grant holds part of
    // a fragment until its wait ends in 1013.
    let admitted = settle(&budget, INFLATED, &refused, CONNS).await;
    let in_place = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let probes = bounded(&mut prober).await.unwrap();
    check_admitted(
        "clients receiving open fragments",
        &budget,
        admitted,
        refused.load(Ordering::Relaxed),
    );
    // The holders are still in `recv`: drop them (no close), and the budget is back at 0.
    for c in clients {
        c.abort();
        let _ = c.await;
    }
    until("the budget is back at zero", || budget.held() == 0).await;
    for h in bounded(server).await.unwrap() {
        bounded(h).await.unwrap();
    }
    let codes = codes.lock().unwrap();
    let refusals = codes.iter().filter(|c| **c == Some(1013)).count();
    assert_eq!(
        refusals,
        CONNS - admitted,
        "close codes the server read: 1013 x {refusals}"
    );
    check_liveness(
        "clients holding open compressed fragments",
        &probes,
        in_place,
    );
}

// --- 3. a fragmented message that is never finished -------------------------------------

fn message_deadline_config() -> Config {
    Config::default().with_message_timeout(Some(MESSAGE_TIMEOUT))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_fragmented_message_to_our_server_is_closed_with_1008_at_the_deadline() {
    let _serial = SERIAL.lock().await;
    let budget = Budget::new(64 * MIB);
    let config = ServerConfig::default()
        .with_connection(message_deadline_config().with_budget(Some(budget.clone())))
        .with_deflate(Some(DeflateConfig::default()));
    let (addr, mut ended) = echo_server(config).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut prober = probing(addr, stop.clone());
    let ramp = ramp();
    let arrived = Arc::new(tokio::sync::Barrier::new(101));
    let mut peers = Vec::new();
    for i in 0..100 {
        let (ramp, arrived) = (ramp.clone(), arrived.clone());
        peers.push(tokio::spawn(async move {
            let compressed = i % 2 == 1;
            let permit = ramp.acquire_owned().await.unwrap();
            let mut s = bounded_support::connect(addr).await;
            let leftover = client_handshake(&mut s, compressed).await;
            drop(permit);
            arrived.wait().await;
            unfinished_message(&mut s, compressed, true, &leftover).await
        }));
    }
    arrived.wait().await;
    let in_place = Instant::now();
    for p in peers {
        let (code, after) = bounded(p).await.unwrap();
        assert_eq!(code, Some(1008));
        assert!(
            after >= MESSAGE_TIMEOUT - Duration::from_millis(20)
                && after <= MESSAGE_TIMEOUT + SLACK,
            "closed {after:?} after the first fragment"
        );
    }
    for _ in 0..100 {
        let (e, _) = next_failure(&mut ended).await;
        assert!(matches!(e, Error::Timeout(Timeout::Message)), "{e:?}");
    }
    stop.store(true, Ordering::Relaxed);
    until("the budget is back at zero", || budget.held() == 0).await;
    check_liveness(
        "unfinished fragmented messages",
        &bounded(&mut prober).await.unwrap(),
        in_place,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_closes_an_unfinished_fragmented_message_with_1008_at_the_deadline() {
    let _serial = SERIAL.lock().await;
    let probe_addr = healthy_server().await;
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(probe_addr, stop.clone());
    let in_place = Instant::now();
    for compressed in [false, true] {
        let (l, addr) = listener().await;
        let server = tokio::spawn(async move {
            let mut s = accept(&l, compressed).await;
            unfinished_message(&mut s, compressed, false, &[]).await
        });
        let config = ClientConfig::default()
            .with_connection(message_deadline_config())
            .with_deflate(compressed.then(DeflateConfig::default));
        let mut ws = connect(&format!("ws://{addr}/"), &config).await.unwrap();
        let r = loop {
            match bounded(ws.recv()).await {
                Ok(Some(Message::Ping(_))) => {}
                other => break other,
            }
        };
        assert!(matches!(r, Err(Error::Timeout(Timeout::Message))), "{r:?}");
        let (code, after) = bounded(server).await.unwrap();
        assert_eq!(code, Some(1008), "compressed: {compressed}");
        assert!(after <= MESSAGE_TIMEOUT + SLACK, "{after:?}");
    }
    stop.store(true, Ordering::Relaxed);
    check_liveness(
        "client, unfinished fragmented messages",
        &prober.await.unwrap(),
        in_place,
    );
}

// --- 4. a trickle of bytes ---------------------------------------------------------------

fn idle_config() -> Config {
    Config::default().with_idle_timeout(Some(IDLE))
}

async fn trickling_clients(conns: usize, idle: Duration) {
    let _serial = SERIAL.lock().await;
    bounded_support::ensure_descriptors(2 * conns as u64 + 256);
    let config = ServerConfig::default()
        .with_connection(Config::default().with_idle_timeout(Some(idle)))
        .with_deflate(None);
    let (addr, mut ended) = echo_server(config).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut prober = probing(addr, stop.clone());
    let ramp = ramp();
    let connected = Arc::new(AtomicUsize::new(0));
    let mut peers = Vec::new();
    for _ in 0..conns {
        let (ramp, connected) = (ramp.clone(), connected.clone());
        peers.push(tokio::spawn(async move {
            let permit = ramp.acquire_owned().await.unwrap();
            let start = Instant::now();
            let mut s = bounded_support::connect(addr).await;
            let leftover = client_handshake(&mut s, false).await;
            drop(permit);
            connected.fetch_add(1, Ordering::Relaxed);
            trickle(&mut s, true, &leftover, start).await
        }));
    }
    until("every trickler is connected", || {
        connected.load(Ordering::Relaxed) == conns
    })
    .await;
    let in_place = Instant::now();
    for p in peers {
        let (code, after) = bounded(p).await.unwrap();
        assert_eq!(code, Some(1001), "the close code for a trickle");
        assert!(
            after >= idle - Duration::from_millis(20) && after <= idle + SLACK + idle / 4,
            "a trickle was dropped after {after:?} (idle timeout {idle:?})"
        );
    }
    for _ in 0..conns {
        let (e, _) = next_failure(&mut ended).await;
        assert!(matches!(e, Error::Timeout(Timeout::Idle)), "{e:?}");
    }
    stop.store(true, Ordering::Relaxed);
    check_liveness(
        "trickling clients",
        &bounded(&mut prober).await.unwrap(),
        in_place,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickle_of_one_byte_per_150_ms_is_dropped_at_the_idle_timeout_with_1001() {
    trickling_clients(200, IDLE).await;
}

/// Five thousand trickling connections (half of `max_connections`; the other half of the
/// process's 20,000 descriptors is the attackers').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: 5,000 trickling connections, about 15 s"]
async fn trickling_clients_at_full_size() {
    trickling_clients(5000, Duration::from_secs(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drops_a_trickling_server_at_the_idle_timeout_with_1001() {
    let _serial = SERIAL.lock().await;
    let probe_addr = healthy_server().await;
    let stop = Arc::new(AtomicBool::new(false));
    let prober = probing(probe_addr, stop.clone());
    let in_place = Instant::now();
    let (l, addr) = listener().await;
    let server = tokio::spawn(trickling_server(l));
    let config = ClientConfig::default()
        .with_connection(idle_config())
        .with_deflate(None);
    let mut ws = connect(&format!("ws://{addr}/"), &config).await.unwrap();
    let r = bounded(ws.recv()).await;
    assert!(matches!(r, Err(Error::Timeout(Timeout::Idle))), "{r:?}");
    let (code, after) = bounded(server).await.unwrap();
    assert_eq!(code, Some(1001));
    assert!(after <= IDLE + SLACK, "{after:?}");
    stop.store(true, Ordering::Relaxed);
    check_liveness("client, trickling server", &prober.await.unwrap(), in_place);
}
