//! rapidws echo server: `serve` + `recv`/`send`, as in the crate's examples.
//!
//! `--deflate` turns permessage-deflate on (`DeflateConfig::default()`: context takeover,
//! level 1; `--level`, `--mem-level` and `--window-bits` change it); `--split` echoes through the split halves (`ReadHalf::recv` then
//! `WriteHalf::send`, in one task) to measure what splitting costs; `--feed` answers with
//! `feed` instead of `send`: the answers queue, and the library writes them out in one
//! vectored write when the next `recv` finds nothing more to read (its documented way
//! to batch); `--handler` echoes from `Handler::on_message` under `serve_handler`, the
//! event-handler API, and `--handler-ref` from its borrowed `on_message_ref` (messages lent
//! from the receive buffer, the whole messages of a read decoded by the batch kernel,
//! replies framed straight into the output queue); `--unbounded` turns the memory budget,
//! the message deadline and the idle timeout off (on by default) to measure what they
//! cost; `--shutdown` puts every connection under a shutdown signal that is never given,
//! to measure what that costs. `--stream` echoes through the streaming API (see
//! [`echo_stream`]).

use rapidws::deflate::DeflateConfig;
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::tokio::{
    Delivery, Error, Message, MessageRef, ServerConfig, Shutdown, WebSocket, serve,
};
use rapidws_load::{ServerArgs, announce, runtime};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// `--stream`: bytes read from the message per `read`, and the size of each fragment of
/// the answer.
const STREAM_CHUNK: usize = 16 * 1024;

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    runtime().block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", args.port)).await?;
        announce(&listener)?;
        let mut config = ServerConfig::default();
        // Room for the idle-memory run (10,000 connections) and then some.
        config.max_connections = 100_000;
        if args.deflate {
            let mut deflate = DeflateConfig::default();
            if let Some(level) = args.level {
                deflate.level = level as i32;
            }
            if let Some(mem_level) = args.mem_level {
                deflate.mem_level = mem_level;
            }
            if let Some(bits) = args.window_bits {
                deflate.server_max_window_bits = bits;
            }
            config = config.with_deflate(Some(deflate));
        }
        if args.unbounded {
            let connection = config
                .connection
                .clone()
                .with_budget(None)
                .with_message_timeout(None)
                .with_idle_timeout(None);
            config = config.with_connection(connection);
        }
        // Kept for the life of the server: the signal is never given.
        let shutdown = Shutdown::new();
        if args.shutdown {
            config = config.with_shutdown(&shutdown);
        }
        if args.stream {
            // The library hands each message over in chunks as they arrive and never
            // assembles it.
            let connection = config.connection.clone().with_delivery(Delivery::Chunks);
            config = config.with_connection(connection);
        }
        if args.stream {
            serve(listener, config, echo_stream).await
        } else if args.handler_ref {
            serve_handler(listener, config, |_peer| EchoRef).await
        } else if args.handler {
            serve_handler(listener, config, |_peer| Echo).await
        } else if args.split {
            serve(listener, config, echo_split).await
        } else if args.feed {
            serve(listener, config, echo_feed).await
        } else {
            serve(listener, config, echo).await
        }
    })
}

async fn echo(mut ws: WebSocket<TcpStream>) {
    while let Ok(Some(msg)) = ws.recv().await {
        // Pings are answered and closes echoed by the library.
        if msg.is_data() && ws.send(msg).await.is_err() {
            return;
        }
    }
}

/// `--stream`: each message received as it arrives (`recv_stream` under chunk delivery,
/// read [`STREAM_CHUNK`] bytes at a time) and answered as a fragmented message
/// (`begin_message`, `send_chunk` per [`STREAM_CHUNK`], `finish`).
///
/// The message is held whole in between, in a buffer of this function's: the reader
/// `recv_stream` returns borrows the `WebSocket` mutably until the message ends, and so
/// does the writer `begin_message` returns, so the answer cannot start while the message
/// is being read; the split halves, which could read and write at once, have no
/// `recv_stream`. The buffer is freed after each answer.
async fn echo_stream(mut ws: WebSocket<TcpStream>) {
    let _ = stream_loop(&mut ws).await;
}

async fn stream_loop(ws: &mut WebSocket<TcpStream>) -> Result<(), Error> {
    // Pings are answered and closes echoed by the library while it receives.
    while let Some(mut incoming) = ws.recv_stream().await? {
        let kind = incoming.kind();
        let mut body = Vec::new();
        loop {
            body.reserve(STREAM_CHUNK);
            if incoming.read_buf(&mut body).await? == 0 {
                break;
            }
        }
        let mut out = ws.begin_message(kind)?;
        let mut pieces = body.chunks(STREAM_CHUNK);
        let last = pieces.next_back().unwrap_or_default();
        for piece in pieces {
            out.send_chunk(piece).await?;
        }
        out.finish(last).await?;
    }
    Ok(())
}

async fn echo_feed(mut ws: WebSocket<TcpStream>) {
    while let Ok(Some(msg)) = ws.recv().await {
        if msg.is_data() && ws.feed(msg).await.is_err() {
            return;
        }
    }
}

async fn echo_split(ws: WebSocket<TcpStream>) {
    let (mut rd, mut wr) = ws.into_split();
    while let Ok(Some(msg)) = rd.recv().await {
        if msg.is_data() && wr.send(msg).await.is_err() {
            return;
        }
    }
}

/// The handler API's echo: pings are answered and closes echoed by the library.
struct Echo;

impl Handler for Echo {
    fn on_message(&mut self, socket: &mut Socket, msg: Message) {
        socket.send(msg);
    }
}

/// The handler API's borrowed echo: each message lent, its copy framed into the output
/// queue.
struct EchoRef;

impl Handler for EchoRef {
    const BORROWED: bool = true;
    /// Not inlined, so that a callgrind profile counts messages as calls to it
    /// (`COUNT=on_message_ref`, benches/callgrind.sh).
    #[inline(never)]
    fn on_message_ref(&mut self, socket: &mut Socket, msg: MessageRef<'_>) {
        socket.send_ref(msg);
    }
}
