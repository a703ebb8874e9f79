//! An echo server: every text and binary message is sent back. permessage-deflate is
//! accepted unless `--no-deflate` is given.
//!
//! It runs at the library's defaults (16 MiB messages, the process-wide memory budget,
//! keepalive, idle and message timeouts: SECURITY.md lists them) and follows its advice
//! for peers that do not read: an echo waits at most [`SEND_TIMEOUT`] for the peer to
//! take it, then the connection is dropped.
//!
//! ```text
//! cargo run --release --example echo_server [-- --port 9001] [--no-deflate]
//! ```

use std::time::Duration;

use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ServerConfig, WebSocket, serve};
use tokio::net::{TcpListener, TcpStream};

/// How long one echo may wait for a peer that does not read. Without it the wait would
/// still end (the keepalive runs while a send waits: a peer that neither reads nor
/// answers is dropped after `keepalive_interval` + `pong_timeout`, 60 s by default), but
/// an echo server has no reason to hold a message that long.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = port_arg().unwrap_or(9001);
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "echo server listening on ws://{}/ (permessage-deflate {})",
        listener.local_addr()?,
        if deflate_arg() { "on" } else { "off" }
    );
    let config = ServerConfig::default().with_deflate(deflate_arg().then(DeflateConfig::default));
    serve(listener, config, echo).await
}

async fn echo(mut ws: WebSocket<TcpStream>) {
    loop {
        match ws.recv().await {
            Ok(Some(msg)) if msg.is_data() => {
                match tokio::time::timeout(SEND_TIMEOUT, ws.send(msg)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        eprintln!("send failed: {e}");
                        return;
                    }
                    Err(_) => {
                        eprintln!("the peer took no echo for {SEND_TIMEOUT:?}: dropped");
                        return;
                    }
                }
            }
            // Pings are answered and closes echoed by the library.
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(e) => {
                eprintln!("connection failed: {e}");
                return;
            }
        }
    }
}

fn port_arg() -> Option<u16> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--port")?;
    args.get(i + 1)?.parse().ok()
}

fn deflate_arg() -> bool {
    !std::env::args().any(|a| a == "--no-deflate")
}
