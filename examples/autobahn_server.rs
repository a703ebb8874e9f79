//! Autobahn testsuite testee (server role): echoes every text and binary message exactly,
//! with permessage-deflate accepted and generous limits.
//!
//! ```text
//! cargo run --release --example autobahn_server [-- --port 9001] [--split | --handler-ref]
//! wstest -m fuzzingclient -s autobahn/fuzzingclient.json
//! ```
//!
//! `--split` runs each connection with split halves: one task receives and forwards
//! messages over a small channel, another sends them back and acknowledges each echo.
//! `--handler-ref` echoes from the handler API's borrowed callback: the whole messages of a
//! read decoded by the batch kernel and lent, each reply framed into the output queue.

use std::time::Duration;

use rapidws::deflate::DeflateConfig;
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::tokio::{Config, MessageRef, ServerConfig, WebSocket, serve};
use tokio::net::{TcpListener, TcpStream};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|i| args.get(i + 1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(9001u16);
    let split = args.iter().any(|a| a == "--split");
    let handler_ref = args.iter().any(|a| a == "--handler-ref");
    let connection = Config::default()
        .with_max_message_size(64 << 20)
        .with_max_frame_size(64 << 20)
        .with_keepalive(None, Duration::from_secs(30))
        .with_close_timeout(Duration::from_secs(3));
    let config = ServerConfig::default()
        .with_connection(connection)
        .with_deflate(Some(DeflateConfig::default()));
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "autobahn testee server on ws://{}/ ({})",
        listener.local_addr()?,
        if split {
            "split halves"
        } else if handler_ref {
            "borrowed handler"
        } else {
            "single task"
        }
    );
    if handler_ref {
        serve_handler(listener, config, |_peer| EchoRef).await
    } else if split {
        serve(listener, config, echo_split).await
    } else {
        serve(listener, config, echo).await
    }
}

async fn echo(mut ws: WebSocket<TcpStream>) {
    while let Ok(Some(msg)) = ws.recv().await {
        if msg.is_data() && ws.send(msg).await.is_err() {
            return;
        }
    }
}

async fn echo_split(ws: WebSocket<TcpStream>) {
    let (mut rd, mut wr) = ws.into_split();
    // Each message travels with an acknowledgement the writer fires once the echo is
    // written. The reader waits for it before reading on, so an echo is always on the wire
    // before a close the reader may send for a later protocol error (Autobahn checks that
    // order strictly), while reading and writing still happen in different tasks.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(_, tokio::sync::oneshot::Sender<()>)>(16);
    let writer = tokio::spawn(async move {
        while let Some((msg, done)) = rx.recv().await {
            if wr.send(msg).await.is_err() {
                return;
            }
            let _ = done.send(());
        }
    });
    while let Ok(Some(msg)) = rd.recv().await {
        if !msg.is_data() {
            continue;
        }
        let (done, written) = tokio::sync::oneshot::channel();
        if tx.send((msg, done)).await.is_err() || written.await.is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// The borrowed echo: every text and binary message lent, its copy framed into the
/// output queue (a message that is the only one of its read goes back from the receive
/// buffer itself).
struct EchoRef;

impl Handler for EchoRef {
    const BORROWED: bool = true;
    fn on_message_ref(&mut self, socket: &mut Socket<'_>, msg: MessageRef<'_>) {
        socket.send_ref(msg);
    }
}
