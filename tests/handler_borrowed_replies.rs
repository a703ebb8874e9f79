//! The borrowed callback's replies on each path a message takes to it: a message alone
//! (its echo held and written straight from the receive buffer), the echo sent twice (the
//! held reply queued ahead of the second), another reply first, an echo and a close from
//! the same callback, a fragmented message (lent from the message buffer) and, with
//! permessage-deflate, compressed ones (inflated, their echoes compressed).
#![cfg(all(feature = "tokio", feature = "deflate"))]

use std::time::Duration;

use rapidws::deflate::DeflateConfig;
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::tokio::{ClientConfig, Message, MessageRef, ServerConfig, WebSocket, connect};
use rapidws::{CloseCode, MessageKind};

struct Echo;

impl Handler for Echo {
    const BORROWED: bool = true;
    fn on_message_ref(&mut self, socket: &mut Socket<'_>, msg: MessageRef<'_>) {
        match msg {
            MessageRef::Text("twice") => {
                socket.send_ref(msg);
                socket.send_ref(msg);
            }
            MessageRef::Text("after") => {
                socket.send_text("first");
                socket.send_ref(msg);
            }
            MessageRef::Text("bye") => {
                socket.send_ref(msg);
                socket.close(4001, "bye");
            }
            msg => socket.send_ref(msg),
        }
    }
}

async fn next<S>(ws: &mut WebSocket<S>) -> Option<Message>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::time::timeout(Duration::from_secs(20), ws.recv())
        .await
        .expect("a reply in time")
        .unwrap()
}

async fn run(deflate: bool) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let mut server = ServerConfig::default();
    let mut client = ClientConfig::default();
    if deflate {
        server = server.with_deflate(Some(DeflateConfig::default()));
        client = client.with_deflate(Some(DeflateConfig::default()));
    }
    tokio::spawn(serve_handler(listener, server, |_| Echo));
    let mut ws = connect(&url, &client).await.unwrap();
    assert_eq!(ws.is_deflate(), deflate);

    // One message at a time: each alone in its read.
    let big = "x".repeat(70_000);
    for text in ["hello", big.as_str(), ""] {
        ws.send(Message::text(text)).await.unwrap();
        assert_eq!(next(&mut ws).await, Some(Message::text(text)));
    }
    ws.send(Message::binary(vec![7u8; 300])).await.unwrap();
    assert_eq!(next(&mut ws).await, Some(Message::binary(vec![7u8; 300])));

    ws.send(Message::text("twice")).await.unwrap();
    assert_eq!(next(&mut ws).await, Some(Message::text("twice")));
    assert_eq!(next(&mut ws).await, Some(Message::text("twice")));

    ws.send(Message::text("after")).await.unwrap();
    assert_eq!(next(&mut ws).await, Some(Message::text("first")));
    assert_eq!(next(&mut ws).await, Some(Message::text("after")));

    // A fragmented message, lent from the message buffer.
    let mut w = ws.begin_message(MessageKind::Text).unwrap();
    w.send_chunk(b"frag").await.unwrap();
    w.finish(b"mented").await.unwrap();
    assert_eq!(next(&mut ws).await, Some(Message::text("fragmented")));

    // A ping between messages is answered by the library (the pong may go ahead of the
    // echoes queued before it), the messages echoed in order.
    ws.feed(Message::text("a")).await.unwrap();
    ws.feed(Message::Ping(bytes::Bytes::from_static(b"p")))
        .await
        .unwrap();
    ws.feed(Message::text("b")).await.unwrap();
    ws.flush().await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(next(&mut ws).await.unwrap());
    }
    let pong = Message::Pong(bytes::Bytes::from_static(b"p"));
    assert!(seen.contains(&pong), "{seen:?}");
    seen.retain(|m| *m != pong);
    assert_eq!(seen, [Message::text("a"), Message::text("b")]);

    // An echo and a close from one callback: the echo first.
    ws.send(Message::text("bye")).await.unwrap();
    assert_eq!(next(&mut ws).await, Some(Message::text("bye")));
    match next(&mut ws).await {
        Some(Message::Close(Some(c))) => assert_eq!(c.code, CloseCode(4001)),
        other => panic!("expected the close, got {other:?}"),
    }
    assert_eq!(next(&mut ws).await, None);
}

#[tokio::test]
async fn borrowed_replies_on_every_path() {
    run(false).await;
}

#[tokio::test]
async fn borrowed_replies_on_every_path_compressed() {
    run(true).await;
}
