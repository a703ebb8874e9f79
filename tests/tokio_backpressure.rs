//! Send-queue limits, ping floods and cancelled reads, over loopback sockets.
#![cfg(feature = "tokio")]

mod tokio_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use rapidws::tokio::{Config, Message, TrySendError, accept, connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_support::*;

#[tokio::test]
async fn try_send_reports_queue_full_when_the_peer_stops_reading() {
    let (l, addr) = listener().await;
    let (hold_tx, hold_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        // Handshake, then never read: the socket buffers fill up.
        let ws = accept(s, &server_config()).await.unwrap();
        let _ = hold_rx.await;
        drop(ws);
    });
    let config =
        client_config().with_connection(big_config().with_send_queue_high_water(64 * 1024));
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &config))
        .await
        .unwrap();
    let chunk = Bytes::from(vec![7u8; 16 * 1024]);
    let mut stuck = false;
    // Bounded: at most 64 MiB offered before the socket must push back.
    for _ in 0..4096 {
        match ws.try_send(Message::Binary(chunk.clone())) {
            Ok(()) => {}
            Err(TrySendError::QueueFull(_)) => {
                // Drain what the socket takes; when it takes nothing more, the peer is stuck.
                if tokio::time::timeout(Duration::from_millis(200), ws.flush())
                    .await
                    .is_err()
                {
                    stuck = true;
                    break;
                }
            }
            Err(e) => panic!("send failed: {e}"),
        }
    }
    assert!(stuck, "the socket never pushed back");
    // The socket takes nothing more: the queue fills to its mark and then refuses.
    let mut full = false;
    for _ in 0..100 {
        if let Err(TrySendError::QueueFull(m)) = ws.try_send(Message::Binary(chunk.clone())) {
            assert_eq!(m.len(), chunk.len(), "the refused message is handed back");
            full = true;
            break;
        }
    }
    assert!(full, "try_send never reported QueueFull");
    assert!(ws.queued_bytes() >= 48 * 1024);
    // The queue never passes the high-water mark plus one message.
    assert!(ws.queued_bytes() <= 64 * 1024 + 16 * 1024 + 14);
    let _ = hold_tx.send(());
}

#[tokio::test]
async fn awaiting_send_waits_for_room_instead_of_failing() {
    let (l, addr) = listener().await;
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let reader = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut ws = accept(s, &server_config()).await.unwrap();
        let _ = go_rx.await;
        let mut n = 0usize;
        while let Ok(Some(m)) = ws.recv().await {
            if m.is_data() {
                n += 1;
            }
        }
        n
    });
    let config =
        client_config().with_connection(big_config().with_send_queue_high_water(32 * 1024));
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &config))
        .await
        .unwrap();
    let chunk = Bytes::from(vec![1u8; 32 * 1024]);
    // With the reader paused, `send` must block (not error) once buffers fill.
    let blocked = tokio::time::timeout(Duration::from_millis(500), async {
        for _ in 0..10_000 {
            ws.send(Message::Binary(chunk.clone())).await.unwrap();
        }
    })
    .await;
    assert!(blocked.is_err(), "send never waited");
    let _ = go_tx.send(());
    for _ in 0..20 {
        bounded(ws.send(Message::Binary(chunk.clone())))
            .await
            .unwrap();
    }
    bounded(ws.close(1000, "")).await.unwrap();
    let n = bounded(reader).await.unwrap();
    assert!(n >= 20);
}

#[tokio::test]
async fn cancelled_receives_lose_no_messages() {
    const N: usize = 3_000;
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut ws = accept(s, &server_config()).await.unwrap();
        for i in 0..N {
            // Sizes that cross read boundaries often.
            let body = format!("{i:06}").repeat(1 + i % 700);
            ws.feed(Message::text(body)).await.unwrap();
            if i % 7 == 0 {
                ws.flush().await.unwrap();
                tokio::task::yield_now().await;
            }
        }
        ws.flush().await.unwrap();
        let _ = ws.close(1000, "").await;
    });
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap();
    let mut next = 0usize;
    let mut cancelled = 0usize;
    let deadline = tokio::time::Instant::now() + LIMIT;
    while next < N {
        assert!(tokio::time::Instant::now() < deadline, "test took too long");
        tokio::select! {
            m = ws.recv() => {
                let m = m.unwrap().expect("closed early");
                let expect = format!("{next:06}").repeat(1 + next % 700);
                assert_eq!(m, Message::text(expect));
                next += 1;
            }
            // Fires often enough to cancel receives in the middle of messages.
            _ = tokio::task::yield_now() => { cancelled += 1; }
        }
    }
    assert!(cancelled > 0, "no receive was cancelled");
}

/// A raw client frame: masked with a zero key (legal, and keeps the test simple).
fn masked_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    f
}

#[tokio::test]
async fn ping_flood_from_a_peer_that_never_reads_keeps_memory_bounded() {
    let (l, addr) = listener().await;
    let max_queued = Arc::new(AtomicUsize::new(0));
    let seen = max_queued.clone();
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let config = server_config().with_connection(big_config().with_control_queue_capacity(8));
        let mut ws = accept(s, &config).await.unwrap();
        while let Ok(Some(_)) = ws.recv().await {
            seen.fetch_max(ws.queued_bytes(), Ordering::Relaxed);
        }
    });
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = [0u8; 129];
    let n = bounded(s.read(&mut head)).await.unwrap();
    assert!(head[..n].starts_with(b"HTTP/1.1 101"));
    // Flood 125-byte pings and never read the pongs; stop when our writes block.
    let ping = masked_frame(0x9, &[0xAB; 125]).repeat(64);
    let mut sent = 0usize;
    for _ in 0..20_000 {
        match tokio::time::timeout(Duration::from_millis(300), s.write_all(&ping)).await {
            Ok(Ok(())) => sent += ping.len(),
            _ => break,
        }
    }
    assert!(sent < 20_000 * ping.len(), "the server never pushed back");
    // The server's queue stayed bounded while it was flooded.
    let max = max_queued.load(Ordering::Relaxed);
    assert!(max < 1 << 20, "send queue grew to {max} bytes");
}

#[tokio::test]
async fn default_config_limits_are_safe() {
    let c = Config::default();
    assert!(c.send_queue_high_water > 0 && c.send_queue_high_water <= 1 << 20);
    assert!(c.max_message_size <= 64 << 20);
    assert!(rapidws::ServerConfig::default().handshake_timeout.is_some());
    assert!(rapidws::ClientConfig::default().handshake_timeout.is_some());
    assert!(c.keepalive_interval.is_some());
}
