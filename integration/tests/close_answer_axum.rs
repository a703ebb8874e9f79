//! axum's chat example stops at the first message that is not text and drops the socket:
//! the peer's close is answered all the same, before the loop sees it (the rest of the
//! layers are in `tests/close_answer.rs`).
#![cfg(feature = "axum")]

#[path = "../../tests/bounded_support/mod.rs"]
mod bounded_support;

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bounded_support::{client_handshake, read_close, text_then_close};
use futures_util::StreamExt;
use rapidws::axum::WebSocketUpgrade;
use rapidws::hyper::HyperWebSocket;
use rapidws::tokio::Message;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// The close code the raw client sends, and expects back.
const CODE: u16 = 4321;

#[tokio::test]
async fn an_axum_chat_loop_answers_the_close() {
    async fn chat(mut socket: HyperWebSocket) {
        // axum's chat example: the loop ends at the first message that is not text.
        while let Some(Ok(Message::Text(_))) = socket.next().await {}
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route(
        "/",
        get(|ws: WebSocketUpgrade| async move { ws.on_upgrade(chat) }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });

    // A raw client: "hi" and a close with CODE in one write, then the close code it reads
    // back (`None`: the stream ended without a close frame).
    let mut s = TcpStream::connect(addr).await.unwrap();
    let leftover = client_handshake(&mut s, false).await;
    s.write_all(&text_then_close("hi", CODE, "bye"))
        .await
        .unwrap();
    let code = read_close(&mut s, &leftover, Duration::from_secs(20)).await;
    assert_eq!(code, Some(CODE));
}
