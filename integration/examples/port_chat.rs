//! A chat server on axum, as a tokio-tungstenite (or axum `extract::ws`) program is
//! usually written, ported to rapidws: each connection is split into its two halves, JSON
//! messages go through serde, and every member hears every message through a
//! `tokio::sync::broadcast` channel.
//!
//! The protocol, one JSON object per text message:
//! - a client sends `{"type":"join","name":"alice"}` first, then
//!   `{"type":"say","text":"hello"}` as often as it likes;
//! - every member (the sender too) receives `{"type":"joined","name":"alice"}`,
//!   `{"type":"said","name":"alice","text":"hello"}` and `{"type":"left","name":"alice"}`.
//!
//! What the port changed, beside the names (`src/docs/MIGRATION.md` has the whole map):
//! - `ws.split()` (futures' `StreamExt::split`, `(sink, stream)`) becomes
//!   `ws.into_split()`, which returns `(ReadHalf, WriteHalf)`: the receiving half first.
//!   The receiving half also answers pings and runs the timers, so it is polled for the
//!   whole life of the connection.
//! - Each broadcast is serialized and framed once, as a [`PreparedMessage`] (compressed
//!   once for every member that negotiated permessage-deflate), instead of once per
//!   member.
//! - A member too slow to keep up with the channel is closed with 1013 ("try again
//!   later") rather than silently skipping messages; a message that is not a chat message
//!   gets 1008 (policy) and one over 64 KiB gets 1009, from the library.
//!
//! ```text
//! cargo run -p rapidws-integration --example port_chat --features axum [-- --port 9002]
//! ```

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::any;
use rapidws::axum::{CloseCode, Message, WebSocket, WebSocketUpgrade};
use rapidws::deflate::DeflateConfig;
use rapidws::{MessageKind, PreparedMessage};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, oneshot};

/// What a client sends.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Request {
    Join { name: String },
    Say { text: String },
}

/// What every member receives.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event<'a> {
    Joined { name: &'a str },
    Said { name: &'a str, text: &'a str },
    Left { name: &'a str },
}

/// Broadcasts a member has not sent yet before it counts as too slow.
const CHANNEL_CAPACITY: usize = 256;
/// Largest message a client may send.
const MAX_MESSAGE: usize = 64 << 10;

struct Room {
    events: broadcast::Sender<PreparedMessage>,
}

impl Room {
    /// Serializes `event` once, straight into the frame every member is sent.
    fn publish(&self, event: &Event<'_>) {
        let prepared =
            PreparedMessage::build(MessageKind::Text, |w| serde_json::to_writer(w, event))
                .expect("chat events serialize to JSON");
        // No receivers is not an error: the room is empty.
        let _ = self.events.send(prepared);
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = port_arg().unwrap_or(9002);
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "chat server listening on ws://{}/chat",
        listener.local_addr()?
    );
    let room = Arc::new(Room {
        events: broadcast::channel(CHANNEL_CAPACITY).0,
    });
    // `any`, not `get`: browsers on HTTP/2 open WebSockets with CONNECT (RFC 8441).
    let app = Router::new().route("/chat", any(upgrade)).with_state(room);
    axum::serve(listener, app).await
}

async fn upgrade(ws: WebSocketUpgrade, State(room): State<Arc<Room>>) -> impl IntoResponse {
    // The builder's order does not matter: the finer setters win over `config(..)`.
    ws.max_message_size(MAX_MESSAGE)
        .deflate(Some(DeflateConfig::default()))
        .on_upgrade(move |ws| member(ws, room))
}

async fn member(ws: WebSocket, room: Arc<Room>) {
    // Subscribe before the first message is read, so that the member hears its own join.
    let mut events = room.events.subscribe();
    // Receiving half first: `(ReadHalf, WriteHalf)`, not `(sink, stream)`.
    let (mut rx, mut tx) = ws.into_split();
    // The reader asks the writer to close with this code when the client breaks the
    // protocol.
    let (close_tx, mut close_rx) = oneshot::channel::<(CloseCode, &'static str)>();

    // Broadcasts out, on their own task.
    let writer = tokio::spawn(async move {
        loop {
            tokio::select! {
                close = &mut close_rx => {
                    if let Ok((code, reason)) = close {
                        let _ = tx.close(code, reason).await;
                    }
                    return;
                }
                event = events.recv() => match event {
                    Ok(event) => {
                        if tx.send_prepared(&event).await.is_err() {
                            return; // the connection is gone; the reader sees why
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.close(CloseCode::TRY_AGAIN_LATER, "too slow").await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    });

    // Requests in, on this task. It owns the receiving half, which also answers pings,
    // echoes the close and runs the timers: it is polled until the connection ends.
    let mut close_tx = Some(close_tx);
    let mut name: Option<String> = None;
    loop {
        let msg = match rx.recv().await {
            Ok(Some(msg)) => msg,
            Ok(None) => break, // closed, the close handshake done
            Err(e) => {
                eprintln!("member {name:?}: {e}");
                break;
            }
        };
        let Message::Text(text) = msg else {
            continue; // pings and pongs are the library's business; binary is not chat
        };
        match (serde_json::from_str::<Request>(&text), &name) {
            (Ok(Request::Join { name: n }), None) => {
                room.publish(&Event::Joined { name: &n });
                name = Some(n);
            }
            (Ok(Request::Say { text }), Some(n)) => {
                room.publish(&Event::Said {
                    name: n,
                    text: &text,
                });
            }
            // Not JSON, not a chat request, or a request out of turn: close with 1008
            // and keep receiving until the client's answer ends the connection.
            _ => {
                if let Some(close) = close_tx.take() {
                    let _ = close.send((CloseCode::POLICY, "expected a chat request"));
                }
            }
        }
    }
    writer.abort();
    if let Some(n) = &name {
        room.publish(&Event::Left { name: n });
    }
}

fn port_arg() -> Option<u16> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--port")?;
    args.get(i + 1)?.parse().ok()
}
