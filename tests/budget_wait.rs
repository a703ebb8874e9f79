//! A budget that pushes back before it refuses (issue 41): when legitimate traffic
//! exhausts the shared memory budget, connections that need more stop reading and go on
//! once memory is returned; only a connection that cannot go on within
//! `Config::budget_wait` is refused with 1013.
//!
//! - Legitimate load: 16 connections each echoing 256 KiB messages through servers
//!   sharing a 512 KiB budget (each message is half the budget; together they want 8 times
//!   it), over the tokio layer with `recv`/`send` (uncompressed, and compressed: the
//!   inflater pauses at its grant), with the handler API's borrowed callback, and over the
//!   blocking layer, while one more client holds 400 KiB of the budget in a message it
//!   finishes once the others wait: every message comes back unchanged, nothing is
//!   refused, and the budget did run out (connections waited).
//! - No way forward: a raw peer holds most of the budget in a message it never finishes;
//!   another's message waits, then gets 1013 once `budget_wait` has passed, on the tokio
//!   and on the blocking server, while the holder is untouched.
//!
//! No timing is asserted beyond the wait's own deadline; the bounds are hang guards.
#![cfg(all(feature = "tokio", feature = "blocking", feature = "deflate"))]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rapidws::deflate::DeflateConfig;
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::tokio::{
    ClientConfig, CloseFrame, Config, Message, MessageRef, ServerConfig, WebSocket, connect, serve,
};
use rapidws::{Budget, Compression, Error, MessageKind};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod alloc_count;
mod bounded_support;
use bounded_support::{client_handshake, frame, read_close};

const CONNS: usize = 16;
const SIZE: usize = 256 << 10;
const ROUNDS: usize = 6;
const BUDGET: usize = 512 << 10;
/// Hang guard for a whole run.
const GUARD: Duration = Duration::from_secs(120);

/// The message connection `conn` sends in round `round`: a pattern of its own.
fn payload(conn: usize, round: usize) -> Vec<u8> {
    (0..SIZE)
        .map(|i| (i.wrapping_mul(31) + conn * 7 + round * 13) as u8)
        .collect()
}

fn server_config(budget: &Budget) -> ServerConfig {
    ServerConfig::default().with_connection(
        Config::default()
            .with_budget(Some(budget.clone()))
            .with_budget_wait(Duration::from_secs(10)),
    )
}

/// Errors the servers met, to be none.
type Failures = Arc<Mutex<Vec<String>>>;

/// `CONNS` clients, each sending `ROUNDS` messages one at a time and checking each echo,
/// while a client of the same server first holds 400 KiB of the budget in a message it
/// finishes only once the others have run into the budget: the budget surely runs out
/// (no scheduling luck needed), and is then shared under load.
async fn run_clients(addr: SocketAddr, budget: &Budget, config: ClientConfig) {
    let url = format!("ws://{addr}/");
    let mut holder = connect(&url, &config).await.expect("connect");
    let held = vec![7u8; 400 << 10];
    let mut writer = holder
        .begin_message_with(MessageKind::Binary, Compression::Never)
        .expect("begin");
    writer.send_chunk(&held).await.expect("first fragment");
    writer.flush().await.expect("flush");
    let start = Instant::now();
    while budget.held() < held.len() {
        assert!(
            start.elapsed() < GUARD,
            "the holder's fragment never arrived"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut tasks = Vec::new();
    for conn in 0..CONNS {
        let (url, config) = (url.clone(), config.clone());
        tasks.push(tokio::spawn(async move {
            let mut ws = connect(&url, &config).await.expect("connect");
            for round in 0..ROUNDS {
                let sent = payload(conn, round);
                ws.send(Message::binary(sent.clone())).await.expect("send");
                match ws.recv().await {
                    Ok(Some(Message::Binary(got))) => {
                        assert!(
                            got[..] == sent[..],
                            "connection {conn} round {round}: echo differs"
                        )
                    }
                    other => panic!("connection {conn} round {round}: {other:?}"),
                }
            }
            ws.close(1000u16, "done").await.expect("close");
        }));
    }
    // The others run into the budget the holder fills: they wait.
    while budget.waiting() == 0 {
        assert!(start.elapsed() < GUARD, "no one waited: {budget:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    writer.finish(&[]).await.expect("last fragment");
    match holder.recv().await {
        Ok(Some(Message::Binary(got))) => assert!(got[..] == held[..], "the holder's echo"),
        other => panic!("the holder: {other:?}"),
    }
    holder.close(1000u16, "done").await.expect("close");
    for t in tasks {
        t.await.expect("a client failed");
    }
}

/// Checks what the budget saw once every connection has ended.
async fn check_budget(what: &str, budget: &Budget, failures: &Failures) {
    let start = Instant::now();
    while budget.held() != 0 && start.elapsed() < GUARD {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("{what}: {budget:?}");
    assert!(failures.lock().unwrap().is_empty(), "{what}: {failures:?}");
    assert_eq!(budget.refused(), 0, "{what}: no 1013 under legitimate load");
    assert_eq!((budget.held(), budget.waiting()), (0, 0), "{what}");
    assert!(
        budget.waited() > 0,
        "{what}: the budget never ran out: {budget:?}"
    );
    // Past the limit only by the one message the oldest waiter was let through with.
    assert!(budget.peak() <= BUDGET + SIZE + 64, "{what}: {budget:?}");
}

/// A `recv`/`send` echo server on `l` with `config`.
fn echo_server(l: tokio::net::TcpListener, config: ServerConfig, failures: &Failures) {
    let f = failures.clone();
    tokio::spawn(serve(l, config, move |mut ws: WebSocket<TcpStream>| {
        let f = f.clone();
        async move {
            loop {
                match ws.recv().await {
                    Ok(Some(m)) if m.is_data() => {
                        if let Err(e) = ws.send(m).await {
                            f.lock().unwrap().push(format!("send: {e}"));
                            break;
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        f.lock().unwrap().push(format!("recv: {e}"));
                        break;
                    }
                }
            }
        }
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_load_past_the_budget_is_slowed_not_refused_recv_send() {
    let budget = Budget::new(BUDGET);
    let failures = Failures::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    echo_server(l, server_config(&budget), &failures);
    tokio::time::timeout(GUARD, run_clients(addr, &budget, ClientConfig::default()))
        .await
        .expect("hang guard");
    check_budget("recv/send", &budget, &failures).await;
}

/// Compressed: each message inflates to 256 KiB from a few KiB, so the server's
/// inflater pauses at what the budget grants and goes on when more comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_compressed_load_past_the_budget_is_slowed_not_refused() {
    let budget = Budget::new(BUDGET);
    let failures = Failures::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let deflate = Some(DeflateConfig::default());
    echo_server(
        l,
        server_config(&budget).with_deflate(deflate.clone()),
        &failures,
    );
    let config = ClientConfig::default().with_deflate(deflate);
    tokio::time::timeout(GUARD, run_clients(addr, &budget, config))
        .await
        .expect("hang guard");
    check_budget("compressed", &budget, &failures).await;
}

/// The handler API's borrowed echo.
struct Echo(Failures);

impl Handler for Echo {
    const BORROWED: bool = true;
    fn on_message_ref(&mut self, socket: &mut Socket<'_>, msg: MessageRef<'_>) {
        socket.send_ref(msg);
    }
    fn on_close(&mut self, _: Option<&CloseFrame>, error: Option<&Error>) {
        if let Some(e) = error {
            self.0.lock().unwrap().push(format!("handler: {e}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_load_past_the_budget_is_slowed_not_refused_borrowed_handler() {
    let budget = Budget::new(BUDGET);
    let failures = Failures::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let f = failures.clone();
    tokio::spawn(serve_handler(l, server_config(&budget), move |_| {
        Echo(f.clone())
    }));
    tokio::time::timeout(GUARD, run_clients(addr, &budget, ClientConfig::default()))
        .await
        .expect("hang guard");
    check_budget("borrowed handler", &budget, &failures).await;
}

/// A blocking echo server, a thread per connection, each socket with a read timeout of
/// its own (a `read` that times out, waiting for the peer or for memory, is called
/// again); its address, and how many reads timed out.
fn blocking_echo_server(
    config: ServerConfig,
    failures: Failures,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let timeouts = Arc::new(AtomicUsize::new(0));
    let counted = timeouts.clone();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in l.incoming() {
            let Ok(stream) = stream else { return };
            let (config, failures) = (config.clone(), failures.clone());
            let timeouts = counted.clone();
            std::thread::spawn(move || {
                let mut ws = match rapidws::blocking::accept(stream, &config) {
                    Ok(ws) => ws,
                    Err(e) => return failures.lock().unwrap().push(format!("accept: {e}")),
                };
                ws.get_mut()
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .unwrap();
                let mut mine = 0;
                loop {
                    match ws.read() {
                        Ok(Some(m)) if m.is_data() => {
                            if let Err(e) = ws.send(m) {
                                return failures.lock().unwrap().push(format!("send: {e}"));
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => return,
                        Err(e) if e.is_would_block() => {
                            mine += 1;
                            timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            let e = format!("read: {e} (after {mine} read timeouts)");
                            return failures.lock().unwrap().push(e);
                        }
                    }
                }
            });
        }
    });
    (addr, timeouts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_load_past_the_budget_is_slowed_not_refused_blocking() {
    let budget = Budget::new(BUDGET);
    let failures = Failures::default();
    let (addr, _) = blocking_echo_server(server_config(&budget), failures.clone());
    tokio::time::timeout(GUARD, run_clients(addr, &budget, ClientConfig::default()))
        .await
        .expect("hang guard");
    check_budget("blocking", &budget, &failures).await;
}

// --- no way forward within the bound ------------------------------------------------------

const WAIT: Duration = Duration::from_millis(300);

/// A raw client holds 400 KiB of a 512 KiB budget in a message it never finishes; a
/// second one's message needs 300 KiB: it waits, and gets 1013 once `budget_wait` has
/// passed. The holder is still open then (its message timer is the default 30 s).
async fn a_message_that_cannot_fit_gets_1013_after_the_wait(addr: SocketAddr, budget: &Budget) {
    let mut holder = TcpStream::connect(addr).await.unwrap();
    let _ = client_handshake(&mut holder, false).await;
    holder
        .write_all(&frame(0x02, 400 << 10, &vec![1; 400 << 10], true))
        .await
        .unwrap();
    let start = Instant::now();
    while budget.held() < 400 << 10 {
        assert!(
            start.elapsed() < GUARD,
            "the holder's fragment never arrived"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut late = TcpStream::connect(addr).await.unwrap();
    let leftover = client_handshake(&mut late, false).await;
    let sent = Instant::now();
    late.write_all(&frame(0x02, 300 << 10, &vec![2; 300 << 10], true))
        .await
        .unwrap();
    let code = read_close(&mut late, &leftover, GUARD).await;
    let after = sent.elapsed();
    eprintln!("refused after {after:?}: {budget:?}");
    assert_eq!(code, Some(1013));
    assert!(
        after >= WAIT,
        "refused after {after:?}, before the wait was over"
    );
    assert_eq!(budget.refused(), 1);
    assert!(budget.waited() >= 1);
    // The holder is untouched: it still holds its bytes.
    assert!(budget.held() >= 400 << 10, "{budget:?}");
    drop(holder);
    let start = Instant::now();
    while budget.held() != 0 {
        assert!(
            start.elapsed() < GUARD,
            "the budget never came back: {budget:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn waiting_config(budget: &Budget) -> ServerConfig {
    ServerConfig::default().with_connection(
        Config::default()
            .with_budget(Some(budget.clone()))
            .with_budget_wait(WAIT),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokio_server_refuses_with_1013_what_cannot_fit_within_the_wait() {
    let budget = Budget::new(BUDGET);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let ended = Failures::default();
    let e = ended.clone();
    tokio::spawn(serve(
        l,
        waiting_config(&budget),
        move |mut ws: WebSocket<TcpStream>| {
            let e = e.clone();
            async move {
                loop {
                    match ws.recv().await {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(err) => {
                            e.lock().unwrap().push(format!("{err:?}"));
                            break;
                        }
                    }
                }
            }
        },
    ));
    a_message_that_cannot_fit_gets_1013_after_the_wait(addr, &budget).await;
    let start = Instant::now();
    while !ended.lock().unwrap().iter().any(|e| e == "OverBudget") {
        assert!(start.elapsed() < GUARD, "{ended:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_server_refuses_with_1013_what_cannot_fit_within_the_wait() {
    let budget = Budget::new(BUDGET);
    let failures = Failures::default();
    let (addr, timeouts) = blocking_echo_server(waiting_config(&budget), failures.clone());
    a_message_that_cannot_fit_gets_1013_after_the_wait(addr, &budget).await;
    let start = Instant::now();
    while !failures
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.contains("budget"))
    {
        assert!(start.elapsed() < GUARD, "{failures:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The 300 ms wait for memory outlasted the socket's 50 ms read timeout: `read`
    // returned to its caller meanwhile, as a read that found nothing does.
    assert!(timeouts.load(Ordering::Relaxed) > 0);
    let refused = failures.lock().unwrap().clone();
    assert!(
        refused
            .iter()
            .any(|e| e.contains("budget") && !e.contains("after 0 read timeouts")),
        "{refused:?}"
    );
}
