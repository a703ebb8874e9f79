//! Sending a prepared message allocates nothing per recipient: through a `Connection`,
//! a tokio `WebSocket`, and a `WriteHalf` with its bounded send queue. A counting global
//! allocator counts the allocations made by this thread while sending.
#![cfg(all(feature = "deflate", feature = "tokio"))]

use std::time::Instant;

mod alloc_count;
use alloc_count::allocations;

use rapidws::PreparedMessage;
use rapidws::Role;
use rapidws::connection::{Config, Connection};
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};
use rapidws::tokio::{ClientConfig, ServerConfig, WebSocket, accept, client_handshake};
use tokio::io::DuplexStream;

fn json(i: usize) -> String {
    let mut s = format!("{{\"seq\":{i},\"items\":[");
    while s.len() < 4000 {
        s.push_str(&format!(
            "{{\"id\":{},\"px\":{}}},",
            s.len(),
            s.len() * 7 % 1000
        ));
    }
    s.push_str("0]}");
    s
}

/// A message with its frames already made (the once-per-message work).
fn prepared(i: usize) -> PreparedMessage {
    let msg = PreparedMessage::text(&json(i));
    let _ = msg.compressed_frame(15);
    let _ = msg.payload();
    msg
}

#[test]
fn connection_sends_prepared_messages_without_allocating() {
    for compressed in [false, true] {
        let mut conns: Vec<Connection> = (0..200)
            .map(|_| {
                let mut c = Connection::new(Role::Server, Config::default(), Instant::now());
                if compressed {
                    let pmd = PerMessageDeflate::new(
                        Role::Server,
                        DeflateParams::default(),
                        &DeflateConfig::new(),
                    );
                    c.set_deflate(pmd);
                }
                c
            })
            .collect();
        // Warm-up: each connection's output queue gets its capacity.
        let warm = prepared(0);
        for c in &mut conns {
            c.send_prepared(&warm).unwrap();
            while c.poll_transmit().is_some() {}
        }
        for round in 1..4 {
            let msg = prepared(round);
            let (n, bytes) = allocations(|| {
                let mut bytes = 0;
                for c in &mut conns {
                    c.send_prepared(&msg).unwrap();
                    while let Some(t) = c.poll_transmit() {
                        bytes += t.len();
                    }
                }
                bytes
            });
            assert!(bytes >= 200 * 100, "frames were produced");
            assert_eq!(n, 0, "compressed {compressed}, round {round}");
        }
        // The counter is live: an ordinary compressed send allocates.
        if compressed {
            let text = json(9);
            let (n, _) = allocations(|| conns[0].send_text(&text).unwrap());
            assert!(n > 0);
        }
    }
}

async fn tokio_pair(deflate: bool) -> (WebSocket<DuplexStream>, WebSocket<DuplexStream>) {
    let (a, b) = tokio::io::duplex(1 << 20);
    let dc = deflate.then(DeflateConfig::new);
    let sc = ServerConfig::default().with_deflate(dc.clone());
    let cc = ClientConfig::default().with_deflate(dc);
    let (server, client) = tokio::join!(accept(a, &sc), client_handshake(b, "localhost", "/", &cc));
    (server.unwrap(), client.unwrap())
}

#[tokio::test(flavor = "current_thread")]
async fn tokio_layer_queues_prepared_messages_without_allocating() {
    for compressed in [false, true] {
        let mut servers = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..20 {
            let (s, c) = tokio_pair(compressed).await;
            servers.push(s);
            clients.push(c);
        }
        let mut it = servers.into_iter();
        let mut whole: Vec<_> = it.by_ref().take(10).collect();
        let mut split: Vec<_> = it.map(|s| s.into_split()).collect();
        for round in 0..4 {
            let msg = prepared(round);
            let (n, ()) = allocations(|| {
                for ws in &mut whole {
                    ws.try_send_prepared(&msg).unwrap();
                }
                for (_, wr) in &split {
                    wr.try_send_prepared(&msg).unwrap();
                }
            });
            // Round 0 warms the queues up; from then on nothing is allocated.
            if round > 0 {
                assert_eq!(n, 0, "compressed {compressed}, round {round}");
            }
            for ws in &mut whole {
                ws.flush().await.unwrap();
            }
            for (_, wr) in &mut split {
                wr.flush().await.unwrap();
            }
            for c in &mut clients {
                let got = c.recv().await.unwrap().unwrap();
                assert_eq!(got.len(), msg.len());
            }
        }
    }
}
