//! An echo server: every text and binary message is sent back. permessage-deflate is
//! accepted unless `--no-deflate` is given.
//!
//! It runs at the library's defaults (16 MiB messages, the process-wide memory budget,
//! keepalive, idle, message and send timeouts: SECURITY.md lists them). A peer that stops
//! reading fails the echo at the send timeout (30 s) and the connection closes with 1008.
//!
//! ```text
//! cargo run --release --example echo_server [-- --port 9001] [--no-deflate]
//! ```

use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{Error, ServerConfig, Timeout, WebSocket, serve};
use tokio::net::{TcpListener, TcpStream};

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
            Ok(Some(msg)) if msg.is_data() => match ws.send(msg).await {
                Ok(()) => {}
                Err(Error::Timeout(Timeout::Send)) => {
                    eprintln!("the peer stopped reading: dropped");
                    return;
                }
                Err(e) => {
                    eprintln!("send failed: {e}");
                    return;
                }
            },
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
