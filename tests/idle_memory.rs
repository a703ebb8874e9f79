//! Heap held per idle server connection: `serve` + an echo handler on its own thread and
//! current-thread runtime, clients on another. A counting global allocator tracks the
//! bytes live on the server thread; after every connection has echoed one small message
//! and gone quiet, the growth over the server's heap before the first connection, divided
//! by the connection count, must stay within budget. This is the cheap local check behind
//! the RSS figure of `benches/RESULTS.md` ("Idle memory per connection").
#![cfg(feature = "tokio")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rapidws::tokio::{ClientConfig, Message, ServerConfig, WebSocket, connect, serve};
use tokio::net::{TcpListener, TcpStream};

struct Counting;

thread_local! {
    /// Whether this thread's allocations are tracked (the server thread only).
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

/// Bytes allocated and not yet freed by the tracked thread.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Live allocations of the tracked thread by size (the last slot: this size or larger),
/// to name what grew when the budget is exceeded.
const SIZES: usize = 8192;
static BY_SIZE: [AtomicIsize; SIZES] = [const { AtomicIsize::new(0) }; SIZES];

fn note(size: usize, count: isize) {
    // `try_with`: the thread-local may be gone while the thread shuts down.
    if TRACKED.try_with(|t| t.get()).unwrap_or(false) {
        LIVE.fetch_add(size as isize * count, Ordering::Relaxed);
        BY_SIZE[size.min(SIZES - 1)].fetch_add(count, Ordering::Relaxed);
    }
}

fn by_size() -> Vec<isize> {
    BY_SIZE.iter().map(|c| c.load(Ordering::Relaxed)).collect()
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), 1);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(layout.size(), -1);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), 1);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(layout.size(), -1);
        note(new_size, 1);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

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
        TRACKED.with(|t| t.set(true));
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
        let before = LIVE.load(Ordering::Relaxed);
        let sizes_before = by_size();
        let mut held = Vec::with_capacity(CONNS);
        for _ in 0..CONNS {
            held.push(
                tokio::time::timeout(limit, open(url.clone(), config.clone()))
                    .await
                    .unwrap(),
            );
        }
        settle().await;
        let after = LIVE.load(Ordering::Relaxed);
        let per_conn = (after - before) / CONNS as isize;
        eprintln!("idle server connection: {per_conn} heap bytes ({CONNS} connections)");
        for (size, (a, b)) in by_size().iter().zip(&sizes_before).enumerate() {
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
