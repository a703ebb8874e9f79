//! Shared helpers for the tokio integration tests: loopback servers and bounded waits.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use rapidws::tokio::{ClientConfig, Config, Message, ServerConfig, WebSocket, serve};
use tokio::net::{TcpListener, TcpStream};

/// Every wait in these tests is bounded by this.
pub const LIMIT: Duration = Duration::from_secs(20);

/// Awaits `f`, failing the test if it takes longer than [`LIMIT`].
pub async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test step timed out")
}

/// A loopback listener on a free port.
pub async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// Settings generous enough for the 16 MiB test message.
pub fn big_config() -> Config {
    Config::default()
        .with_max_message_size(17 << 20)
        .with_max_frame_size(17 << 20)
}

/// Starts an echo server (every text and binary message sent back) and returns its address.
pub async fn echo_server(config: ServerConfig) -> SocketAddr {
    let (l, addr) = listener().await;
    tokio::spawn(serve(
        l,
        config,
        |mut ws: WebSocket<TcpStream>| async move {
            while let Ok(Some(msg)) = ws.recv().await {
                if msg.is_data() && ws.send(msg).await.is_err() {
                    break;
                }
            }
        },
    ));
    addr
}

/// A client config with the big limits.
pub fn client_config() -> ClientConfig {
    ClientConfig::default().with_connection(big_config())
}

/// A server config with the big limits.
pub fn server_config() -> ServerConfig {
    ServerConfig::default().with_connection(big_config())
}

/// `n` bytes of a pattern that does not repeat with a short period.
pub fn pattern(n: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Receives until a data message arrives (skipping pings and pongs).
pub async fn recv_data<S>(ws: &mut WebSocket<S>) -> Message
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        match bounded(ws.recv())
            .await
            .expect("recv failed")
            .expect("connection closed")
        {
            m if m.is_data() => return m,
            _ => {}
        }
    }
}
