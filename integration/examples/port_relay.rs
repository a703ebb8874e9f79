//! A WebSocket relay, as a tokio-tungstenite program is usually written (accept, dial
//! the upstream, two `split()`s, two forwarding loops), ported to rapidws: every client
//! that connects gets its own connection to the upstream server, and data messages are
//! forwarded both ways, in order, with backpressure.
//!
//! Backpressure: each forwarding loop receives one message and `send`s it on; `send`
//! waits while the other connection's send queue is past its high-water mark
//! ([`Config::send_queue_high_water`], 256 KiB by default), and while it waits the loop
//! reads nothing more. So a client that reads slowly slows the upstream down through TCP
//! flow control, and the relay holds at most one queue and one message per direction,
//! whatever the upstream sends. (A tokio-tungstenite relay that forwards through an
//! unbounded channel holds everything the slow side has not taken yet.)
//!
//! Pings are answered on each hop by the library, not forwarded. A close is forwarded with
//! its code and reason; an upstream that fails closes the client with 1014 (bad gateway),
//! a client that fails closes the upstream connection with 1001 (going away).
//!
//! ```text
//! cargo run -p rapidws-integration --example port_relay [-- --listen 127.0.0.1:9004] [--upstream ws://127.0.0.1:9001/]
//! ```
//!
//! [`Config::send_queue_high_water`]: rapidws::Config::send_queue_high_water

use std::sync::Arc;
use std::time::Duration;

use rapidws::tokio::{
    ClientConfig, CloseCode, Message, ReadHalf, ServerConfig, WebSocket, WriteHalf, connect, serve,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

struct Args {
    listen: String,
    upstream: String,
}

fn args() -> Args {
    let mut args = Args {
        listen: "127.0.0.1:9004".to_owned(),
        upstream: "ws://127.0.0.1:9001/".to_owned(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{a} needs a value")));
        match a.as_str() {
            "--listen" => args.listen = value,
            "--upstream" => args.upstream = value,
            other => usage(&format!("unknown option {other}")),
        }
    }
    args
}

fn usage(problem: &str) -> ! {
    eprintln!("port_relay: {problem}");
    eprintln!("usage: port_relay [--listen ADDR:PORT] [--upstream ws://HOST:PORT/PATH]");
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = args();
    let listener = TcpListener::bind(&args.listen).await?;
    println!(
        "relay listening on ws://{}/ -> {}",
        listener.local_addr()?,
        args.upstream
    );
    let upstream: Arc<str> = args.upstream.into();
    // Bounded connect and handshake towards the upstream; the library's defaults for
    // everything else (16 MiB messages, keepalive, idle timeout, 256 KiB send queues).
    let dial = Arc::new(
        ClientConfig::default()
            .with_connect_timeout(Duration::from_secs(5))
            .with_handshake_timeout(Some(Duration::from_secs(5))),
    );
    serve(listener, ServerConfig::default(), move |client| {
        relay(client, upstream.clone(), dial.clone())
    })
    .await
}

async fn relay(mut client: WebSocket<TcpStream>, upstream: Arc<str>, dial: Arc<ClientConfig>) {
    let server = match connect(&upstream, &dial).await {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("upstream {upstream}: {e}");
            let _ = client
                .close(CloseCode::BAD_GATEWAY, "upstream unavailable")
                .await;
            return;
        }
    };
    // `into_split()` gives the receiving half first: `(ReadHalf, WriteHalf)`.
    let (client_rx, client_tx) = client.into_split();
    let (server_rx, server_tx) = server.into_split();
    // Both directions on this task; each loop keeps its receiving half polled.
    tokio::join!(
        forward(client_rx, server_tx, CloseCode::GOING_AWAY, "client gone"),
        forward(
            server_rx,
            client_tx,
            CloseCode::BAD_GATEWAY,
            "upstream failed"
        ),
    );
}

/// Forwards data messages from `from` to `to` until `from` ends, then passes its end on:
/// its close frame, or `failed` with `reason` when it ended in an error.
async fn forward<R, W>(mut from: ReadHalf<R>, mut to: WriteHalf<W>, failed: CloseCode, reason: &str)
where
    R: AsyncRead + AsyncWrite + Unpin,
    W: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match from.recv().await {
            Ok(Some(msg)) if msg.is_data() => {
                // Waits while `to`'s queue is full: the backpressure. An error means `to`
                // is gone; the other loop sees why.
                if to.send(msg).await.is_err() {
                    break;
                }
            }
            Ok(Some(Message::Close(frame))) => {
                // The library has answered this close; pass it on, code and reason.
                let (code, reason) = match &frame {
                    Some(f) if f.code.is_valid_on_wire() => (f.code, f.reason.as_str()),
                    _ => (CloseCode::NORMAL, ""),
                };
                let _ = to.close(code, reason).await;
            }
            Ok(Some(_)) => {} // pings and pongs: each hop answers its own
            Ok(None) => break,
            Err(e) => {
                eprintln!("{reason}: {e}");
                let _ = to.close(failed, reason).await;
                break;
            }
        }
    }
}
