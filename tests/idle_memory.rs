//! Heap held per idle server connection: `serve` + an echo handler on its own thread and
//! current-thread runtime, clients on another. A counting global allocator tracks the
//! bytes live on the server thread; after every connection has echoed one small message
//! and gone quiet, the growth over the server's heap before the first connection, divided
//! by the connection count, must stay within budget. This is the cheap local check behind
//! the RSS figure of `benches/RESULTS.md` ("Idle memory per connection").
#![cfg(feature = "tokio")]

use std::sync::mpsc;
use std::time::Duration;

use rapidws::tokio::{ClientConfig, Message, ServerConfig, WebSocket, connect, serve};
use tokio::net::{TcpListener, TcpStream};

mod alloc_count;
use alloc_count::{track_this_thread, tracked_by_size, tracked_live};

/// Connections held idle at once (two descriptors each in this process).
const CONNS: usize = 200;

/// Heap bytes an idle, uncompressed server connection may hold: the tokio task, the
/// handler's future (the `WebSocket` inside, ~1.5 KiB for this echo handler), the
/// socket's registration with the IO driver and the keepalive timer; about 2.4 KiB in
/// debug and release builds alike (2026-11-30; the output queues' first slots are inline,
/// about 100 bytes, so that one-at-a-time traffic never allocates them). Receive buffers, send queues and the
/// handshake's state must all be released: any of them would exceed this.
const BUDGET_PER_CONN: isize = 2560;

async fn echo(mut ws: WebSocket<TcpStream>) {
    while let Ok(Some(msg)) = ws.recv().await {
        if msg.is_data() && ws.send(msg).await.is_err() {
            return;
        }
    }
}

#[test]
fn idle_server_connection_holds_little_heap() {
    let (addr_tx, addr_rx) = mpsc::channel();
    // The server runs on its own thread, tracked, until the test process ends.
    std::thread::spawn(move || {
        track_this_thread();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let _ = serve(listener, ServerConfig::default(), echo).await;
        });
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let url = format!("ws://{addr}/");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let config = ClientConfig::default();
        let open = |url: String, config: ClientConfig| async move {
            let mut ws = connect(&url, &config).await.unwrap();
            ws.send(Message::binary(vec![7u8; 16])).await.unwrap();
            let echo = ws.recv().await.unwrap().unwrap();
            assert_eq!(echo, Message::binary(vec![7u8; 16]));
            ws
        };
        let limit = Duration::from_secs(30);
        // One connection first, so that what the server sets up once (timer wheel levels,
        // the driver's structures) is in the baseline.
        let warm = tokio::time::timeout(limit, open(url.clone(), config.clone()))
            .await
            .unwrap();
        settle().await;
        let before = tracked_live();
        let sizes_before = tracked_by_size();
        let mut held = Vec::with_capacity(CONNS);
        for _ in 0..CONNS {
            held.push(
                tokio::time::timeout(limit, open(url.clone(), config.clone()))
                    .await
                    .unwrap(),
            );
        }
        // The server gives each connection's buffers back once it has been quiet for a
        // moment (the memory timer, 250 ms): wait for that to have happened, as long as
        // it takes the server's thread to run (a starved machine may take seconds), not a
        // fixed 300 ms. Only timers run on the server now, and they only free memory: a
        // connection that keeps more than the budget never gets under it.
        let waited = std::time::Instant::now();
        let per_conn = loop {
            settle().await;
            let per_conn = (tracked_live() - before) / CONNS as isize;
            if per_conn <= BUDGET_PER_CONN || waited.elapsed() > Duration::from_secs(20) {
                break per_conn;
            }
        };
        eprintln!("idle server connection: {per_conn} heap bytes ({CONNS} connections)");
        for (size, (a, b)) in tracked_by_size().iter().zip(&sizes_before).enumerate() {
            if a - b >= CONNS as isize / 2 {
                eprintln!("  {} live allocations of {size} bytes", a - b);
            }
        }
        assert!(
            per_conn <= BUDGET_PER_CONN,
            "an idle connection holds {per_conn} heap bytes, budget {BUDGET_PER_CONN}"
        );
        drop(held);
        drop(warm);
    });
}

/// Lets the server finish handling what it was sent and go idle.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}
