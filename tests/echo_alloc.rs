//! An echo through the tokio layer (`recv` then `send`, one message at a time, as request/
//! response traffic goes) allocates nothing per message once warm: the receive buffer and
//! the coalesce chunk come back from the thread's buffer stock, the output queues hold one
//! frame inline, and a single-frame payload is split off the receive buffer and written
//! from there. A counting global allocator counts this thread's allocations.
#![cfg(feature = "tokio")]

use std::future::poll_fn;
use std::task::Poll;
use std::time::Instant;

mod alloc_count;

use rapidws::Role;
use rapidws::connection::Connection;
use rapidws::tokio::{Config, Message, MessageKind, WebSocket};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

/// The masked frame a client would send for one message.
fn client_frame(kind: MessageKind, payload: &[u8]) -> Vec<u8> {
    let mut conn = Connection::new(Role::Client, Default::default(), Instant::now());
    conn.send(kind, payload).unwrap();
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    out
}

/// Echoes `rounds` messages of `len` bytes through a server `WebSocket`; returns the
/// allocations made by `recv` + `send` over the rounds after the first ten.
async fn echo_allocations(kind: MessageKind, len: usize, rounds: usize) -> usize {
    let (mut client, server) = duplex(1 << 20);
    let mut ws: WebSocket<DuplexStream> =
        WebSocket::from_raw(server, Role::Server, &Config::default(), &[]);
    let mut allocations = 0;
    let mut echo = Vec::new();
    for i in 0..rounds {
        let payload: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
        // Built before counting starts: the client's work is not the server's.
        let frame = client_frame(kind, &payload);
        let counting = i >= 50;
        if counting {
            alloc_count::start();
        }
        // The socket is empty: the first poll finds nothing to read, and the connection
        // goes idle (giving its receive buffer back) as it does between two requests.
        let first = poll_fn(|cx| Poll::Ready(ws.poll_recv(cx))).await;
        assert!(first.is_pending(), "round {i}: {first:?}");
        let paused = alloc_count::stop();
        client.write_all(&frame).await.unwrap();
        if counting {
            allocations += paused;
            alloc_count::start();
        }
        let msg = ws.recv().await.unwrap().unwrap();
        ws.send(msg).await.unwrap();
        let n = alloc_count::stop();
        if counting {
            allocations += n;
        }
        // The server's frame: header (2 or 4 bytes here) then the payload, unmasked.
        let header = if len < 126 { 2 } else { 4 };
        echo.resize(header + len, 0);
        client.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo[header..], &payload[..], "round {i}");
    }
    allocations
}

/// A runtime on a paused clock: messages one after another come back to back (a busy
/// connection), however slow the machine.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn one_at_a_time_echo_allocates_nothing_per_message() {
    runtime().block_on(async {
        for (kind, len) in [
            (MessageKind::Binary, 16),
            (MessageKind::Text, 100),
            (MessageKind::Binary, 1024),
            (MessageKind::Text, 3000),
        ] {
            let n = echo_allocations(kind, len, 550).await;
            assert_eq!(
                n, 0,
                "allocations over 500 echoes of {len}-byte {kind:?} messages"
            );
        }
    });
}

#[test]
fn the_counter_sees_the_echo_path_allocate_when_cold() {
    // The first echo on a fresh thread allocates (the receive buffer, the chunk): the
    // counter is not blind to this path.
    runtime().block_on(async {
        let (mut client, server) = duplex(1 << 20);
        let mut ws: WebSocket<DuplexStream> =
            WebSocket::from_raw(server, Role::Server, &Config::default(), &[]);
        client
            .write_all(&client_frame(MessageKind::Binary, &[7; 16]))
            .await
            .unwrap();
        alloc_count::start();
        let msg = ws.recv().await.unwrap().unwrap();
        ws.send(msg.clone()).await.unwrap();
        assert!(alloc_count::stop() > 0);
        assert_eq!(msg, Message::binary(vec![7u8; 16]));
    });
}

/// Many connections each sending now and then (2.5 messages a second here, on a paused
/// clock): once warm, an echo allocates nothing and arms no timer. Each connection gives
/// its buffers to the thread's stock when its read finds nothing, the next connection with
/// a message takes them, and its next deadline stays the keepalive's (no memory timer to
/// arm, fire and re-arm per message).
#[test]
fn quiet_connections_allocate_nothing_and_arm_no_timer_per_message() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conns: Vec<(DuplexStream, WebSocket<DuplexStream>)> = (0..20)
            .map(|_| {
                let (client, server) = duplex(1 << 16);
                let ws = WebSocket::from_raw(server, Role::Server, &Config::default(), &[]);
                (client, ws)
            })
            .collect();
        let mut allocations = 0;
        for round in 0..40 {
            // The sizes a request/response server sees, in turn.
            let (kind, len) = [
                (MessageKind::Binary, 1024),
                (MessageKind::Text, 16),
                (MessageKind::Text, 3000),
                (MessageKind::Binary, 100),
            ][round % 4];
            let payload = vec![b'q'; len];
            let frame = client_frame(kind, &payload);
            let header = if len < 126 { 2 } else { 4 };
            let mut echo = vec![0; header + len];
            tokio::time::advance(std::time::Duration::from_millis(400)).await;
            for (client, ws) in &mut conns {
                client.write_all(&frame).await.unwrap();
                let counting = round >= 8;
                if counting {
                    alloc_count::start();
                }
                let msg = ws.recv().await.unwrap().unwrap();
                ws.send(msg).await.unwrap();
                // The next receive finds nothing: the connection waits for its peer.
                let next = poll_fn(|cx| Poll::Ready(ws.poll_recv(cx))).await;
                assert!(next.is_pending(), "round {round}: {next:?}");
                let n = alloc_count::stop();
                if counting {
                    allocations += n;
                }
                let now = tokio::time::Instant::now().into_std();
                let deadline = ws.connection().poll_timeout().expect("the keepalive runs");
                assert!(
                    deadline >= now + std::time::Duration::from_secs(29),
                    "round {round}: a timer {:?} from now",
                    deadline - now
                );
                client.read_exact(&mut echo).await.unwrap();
                assert_eq!(&echo[header..], &payload[..]);
            }
        }
        assert_eq!(allocations, 0, "allocations over 640 quiet echoes");
    });
}
