//! A streaming echo server: every text and binary message is received as it arrives
//! (chunk delivery and `recv_stream`, read 16 KiB at a time) and sent back as a fragmented
//! message (`begin_message`, `send_chunk`, `finish`), 16 KiB a fragment.
//!
//! The library never assembles a message here, but this program does: the reader
//! `recv_stream` returns borrows the `WebSocket` mutably until the message ends, and so
//! does the writer `begin_message` returns, so the answer cannot start before the message
//! has been read to its end, and the split halves (which could read and write at once)
//! have no `recv_stream`. Each message is held whole in a buffer between the two, freed
//! after its answer; messages are limited to the default 16 MiB.
//!
//! ```text
//! cargo run --release --features tokio --example stream_echo [-- --port 9001]
//! ```

use rapidws::tokio::{Delivery, Error, ServerConfig, WebSocket, serve};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Bytes read from a message per `read`, and the size of each fragment of the answer.
const CHUNK: usize = 16 * 1024;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = port_arg().unwrap_or(9001);
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "streaming echo server listening on ws://{}/",
        listener.local_addr()?
    );
    let config = ServerConfig::default();
    let connection = config.connection.clone().with_delivery(Delivery::Chunks);
    serve(listener, config.with_connection(connection), echo).await
}

async fn echo(mut ws: WebSocket<TcpStream>) {
    if let Err(e) = echo_messages(&mut ws).await {
        eprintln!("connection failed: {e}");
    }
}

async fn echo_messages(ws: &mut WebSocket<TcpStream>) -> Result<(), Error> {
    // Pings are answered and closes echoed by the library while it receives; `None` once
    // the connection closed.
    while let Some(mut incoming) = ws.recv_stream().await? {
        let kind = incoming.kind();
        let mut body = Vec::new();
        loop {
            body.reserve(CHUNK);
            if incoming.read_buf(&mut body).await? == 0 {
                break;
            }
        }
        let mut out = ws.begin_message(kind)?;
        let mut pieces = body.chunks(CHUNK);
        let last = pieces.next_back().unwrap_or_default();
        for piece in pieces {
            out.send_chunk(piece).await?;
        }
        out.finish(last).await?;
    }
    Ok(())
}

fn port_arg() -> Option<u16> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--port")?;
    args.get(i + 1)?.parse().ok()
}
