//! A streaming echo server: every text and binary message is sent back chunk by chunk as
//! it arrives, so that no message is ever held whole, whatever its size.
//!
//! The connection is configured for chunk delivery (`Delivery::Chunks`): the library
//! hands each piece of a message over as a read brings it. The connection is split; in
//! one task the reading half receives a chunk (`ReadHalf::recv_chunk`, owned bytes cut
//! from the receive buffer) and the writing half sends it on at once as a fragment of the
//! answer (`WriteHalf::begin_message` at a message's first chunk, `send_chunk_bytes`, `finish_bytes`
//! with its last). Pings are answered and the close echoed by the reading half meanwhile;
//! the size limit (16 MiB by default), the UTF-8 check of text and the message deadline
//! apply to each message across its chunks.
//!
//! ```text
//! cargo run --release --features tokio --example stream_echo [-- --port 9001]
//! ```

use rapidws::tokio::{Delivery, Error, ReadHalf, ServerConfig, WebSocket, WriteHalf, serve};
use tokio::net::{TcpListener, TcpStream};

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

async fn echo(ws: WebSocket<TcpStream>) {
    let (mut rd, mut wr) = ws.into_split();
    if let Err(e) = echo_chunks(&mut rd, &mut wr).await {
        eprintln!("connection failed: {e}");
    }
}

async fn echo_chunks(
    rd: &mut ReadHalf<TcpStream>,
    wr: &mut WriteHalf<TcpStream>,
) -> Result<(), Error> {
    // `None` once the connection closed; a chunk that is not its message's last is
    // always followed by the next one of the same message (or by the end).
    while let Some(mut chunk) = rd.recv_chunk().await? {
        let mut out = wr.begin_message(chunk.kind)?;
        while !chunk.last {
            // The chunk's bytes go into the send queue as they are, not copied: they share
            // the receive buffer until written, and the buffer is then reused for the
            // next read (or given back while the peer is quiet).
            out.send_chunk_bytes(chunk.data).await?;
            chunk = match rd.recv_chunk().await? {
                Some(next) => next,
                // Closed in the middle of a message: dropping `out` abandons the answer.
                None => return Ok(()),
            };
        }
        out.finish_bytes(chunk.data).await?;
    }
    Ok(())
}

fn port_arg() -> Option<u16> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--port")?;
    args.get(i + 1)?.parse().ok()
}
