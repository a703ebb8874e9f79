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
//! cost, and `--no-keepalive` the keepalive (both: no timer runs, as in the peers'
//! servers); `--shutdown` puts every connection under a shutdown signal that is never given,
//! to measure what that costs. `--stream` echoes through the streaming API (see
//! [`echo_stream`]).

use rapidws::deflate::DeflateConfig;
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::tokio::{
    Delivery, Error, Message, MessageRef, ReadHalf, ServerConfig, Shutdown, WebSocket, WriteHalf,
    serve,
};
use rapidws_load::{ServerArgs, announce, runtime};
use tokio::net::{TcpListener, TcpStream};

/// `--stream`: the send queue's high-water mark. A chunk waits in the queue only while
/// the peer's socket is full; the next chunk is then not read until it has left, so the
/// rest of the message waits in the kernel's socket buffers, not in the server.
const STREAM_QUEUE: usize = 16 * 1024;

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
        if args.no_keepalive {
            let connection = config
                .connection
                .clone()
                .with_keepalive(None, std::time::Duration::ZERO);
            config = config.with_connection(connection);
        }
        // Kept for the life of the server: the signal is never given.
        let shutdown = Shutdown::new();
        if args.shutdown {
            config = config.with_shutdown(&shutdown);
        }
        if let Some(bytes) = args.read_buffer {
            let connection = config.connection.clone().with_read_buffer_size(bytes);
            config = config.with_connection(connection);
        }
        if args.stream {
            // The library hands each message over in chunks as they arrive and never
            // assembles it.
            let connection = config
                .connection
                .clone()
                .with_delivery(Delivery::Chunks)
                .with_send_queue_high_water(STREAM_QUEUE);
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

/// `--stream`: each message echoed chunk by chunk as it arrives, never held whole: under
/// chunk delivery the reading half receives a chunk (`ReadHalf::recv_chunk`) and the
/// writing half sends it on at once as a fragment of the answer (`begin_message` at a
/// message's first chunk, `send_chunk_bytes`, `finish_bytes` with its last), in one task.
async fn echo_stream(ws: WebSocket<TcpStream>) {
    let (mut rd, mut wr) = ws.into_split();
    let _ = stream_loop(&mut rd, &mut wr).await;
}

async fn stream_loop(
    rd: &mut ReadHalf<TcpStream>,
    wr: &mut WriteHalf<TcpStream>,
) -> Result<(), Error> {
    // Pings are answered and closes echoed by the library while it receives.
    while let Some(mut chunk) = rd.recv_chunk().await? {
        let mut out = wr.begin_message(chunk.kind)?;
        while !chunk.last {
            // The chunk's bytes go into the send queue as they are (no copy), sharing
            // the receive buffer until they are written.
            out.send_chunk_bytes(chunk.data).await?;
            chunk = match rd.recv_chunk().await? {
                Some(next) => next,
                None => return Ok(()),
            };
        }
        out.finish_bytes(chunk.data).await?;
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
