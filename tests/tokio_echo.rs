//! Echo over real loopback sockets: every size class, fragmentation, streaming, pings,
//! both close directions, split halves and permessage-deflate.
#![cfg(all(feature = "tokio", feature = "deflate"))]

mod tokio_support;

use bytes::Bytes;
use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{
    Delivery, MaybeTlsStream, Message, MessageKind, ServerConfig, WebSocket, connect,
};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_support::*;

const SIZES: [usize; 7] = [0, 125, 126, 65535, 65536, 1 << 20, 16 << 20];

async fn echo_sizes(server: ServerConfig, client: rapidws::tokio::ClientConfig, sizes: &[usize]) {
    let addr = echo_server(server).await;
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client))
        .await
        .unwrap();
    for &size in sizes {
        let data = Bytes::from(pattern(size));
        bounded(ws.send(Message::Binary(data.clone())))
            .await
            .unwrap();
        assert_eq!(
            recv_data(&mut ws).await,
            Message::Binary(data),
            "binary of {size} bytes"
        );
        let text: String = pattern(size)
            .iter()
            .map(|b| char::from(b'a' + b % 26))
            .collect();
        bounded(ws.send(Message::text(text.clone()))).await.unwrap();
        assert_eq!(
            recv_data(&mut ws).await,
            Message::text(text),
            "text of {size} bytes"
        );
    }
    bounded(ws.close(1000, "done")).await.unwrap();
}

/// A client connected to a new echo server, both with the big limits.
async fn connect_to_echo() -> WebSocket<MaybeTlsStream<TcpStream>> {
    let addr = echo_server(server_config()).await;
    bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap()
}

#[tokio::test]
async fn echo_returns_every_size_class_unchanged() {
    echo_sizes(server_config(), client_config(), &SIZES).await;
}

#[tokio::test]
async fn echo_with_permessage_deflate_returns_every_size_class_unchanged() {
    let server = server_config().with_deflate(Some(DeflateConfig::default()));
    let client = client_config().with_deflate(Some(DeflateConfig::default()));
    // Up to 1 MiB: inflating 16 MiB twice is slow in unoptimised test builds.
    echo_sizes(server, client, &SIZES[..6]).await;
}

#[tokio::test]
async fn deflate_is_negotiated_when_both_ends_want_it() {
    let addr = echo_server(server_config().with_deflate(Some(DeflateConfig::default()))).await;
    let client = client_config().with_deflate(Some(DeflateConfig::default()));
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client))
        .await
        .unwrap();
    // Highly compressible: the echo must still be exact.
    let data = Bytes::from(vec![b'z'; 300_000]);
    bounded(ws.send(Message::Binary(data.clone())))
        .await
        .unwrap();
    assert_eq!(recv_data(&mut ws).await, Message::Binary(data));
}

#[tokio::test]
async fn fragmented_message_arrives_whole() {
    let mut ws = connect_to_echo().await;
    let data = pattern(100_000);
    let mut w = ws.begin_message(MessageKind::Binary).unwrap();
    // Borrowed chunks (copied) and chunks given away (`Bytes`), in turn.
    for (i, part) in data.chunks(7_000).enumerate() {
        if i % 2 == 0 {
            bounded(w.send_chunk(part)).await.unwrap();
        } else {
            bounded(w.send_chunk_bytes(Bytes::copy_from_slice(part)))
                .await
                .unwrap();
        }
    }
    bounded(w.finish_bytes(Bytes::from_static(b"tail")))
        .await
        .unwrap();
    let mut expect = data.clone();
    expect.extend_from_slice(b"tail");
    assert_eq!(recv_data(&mut ws).await, Message::Binary(expect.into()));
}

#[tokio::test]
async fn send_from_reader_sends_one_message() {
    let mut ws = connect_to_echo().await;
    let data = pattern(300_001);
    let sent = bounded(ws.send_from(MessageKind::Binary, &data[..], 16 * 1024))
        .await
        .unwrap();
    assert_eq!(sent, data.len() as u64);
    assert_eq!(recv_data(&mut ws).await, Message::Binary(data.into()));
}

#[tokio::test]
async fn recv_stream_reads_a_large_message_in_chunks() {
    let addr = echo_server(server_config()).await;
    let client = client_config().with_connection(big_config().with_delivery(Delivery::Chunks));
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client))
        .await
        .unwrap();
    let data = pattern(5 << 20);
    bounded(ws.send(Message::Binary(data.clone().into())))
        .await
        .unwrap();
    let mut incoming = bounded(ws.recv_stream()).await.unwrap().expect("a message");
    assert_eq!(incoming.kind(), MessageKind::Binary);
    let mut got = Vec::new();
    let mut buf = [0u8; 10_000];
    let mut reads = 0;
    loop {
        let n = bounded(incoming.read(&mut buf)).await.unwrap();
        if n == 0 {
            break;
        }
        reads += 1;
        got.extend_from_slice(&buf[..n]);
    }
    assert!(reads > 1);
    assert!(got == data, "streamed payload differs");
}

#[tokio::test]
async fn ping_is_answered_with_identical_pong() {
    let mut ws = connect_to_echo().await;
    bounded(ws.ping(Bytes::from_static(b"are you there")))
        .await
        .unwrap();
    match bounded(ws.recv()).await.unwrap().unwrap() {
        Message::Pong(p) => assert_eq!(&p[..], b"are you there"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn client_close_is_echoed_and_both_ends_finish() {
    let (l, addr) = listener().await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut ws = rapidws::tokio::accept(s, &server_config()).await.unwrap();
        let mut seen = Vec::new();
        while let Ok(Some(m)) = ws.recv().await {
            seen.push(m);
        }
        tx.send((seen, ws.close_frame().cloned())).unwrap();
    });
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap();
    bounded(ws.close(4000, "bye")).await.unwrap();
    let (seen, frame) = bounded(rx).await.unwrap();
    let frame = frame.expect("server saw the close");
    assert_eq!((frame.code.0, frame.reason.as_str()), (4000, "bye"));
    assert!(matches!(seen.last(), Some(Message::Close(Some(_)))));
    // The client's own receive side is finished too.
    assert!(bounded(ws.recv()).await.unwrap().is_none());
}

#[tokio::test]
async fn server_close_reaches_client_then_stream_ends() {
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut ws = rapidws::tokio::accept(s, &server_config()).await.unwrap();
        let _ = ws.close(4001, "server done").await;
    });
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap();
    match bounded(ws.recv()).await.unwrap() {
        Some(Message::Close(Some(f))) => {
            assert_eq!((f.code.0, f.reason.as_str()), (4001, "server done"))
        }
        other => panic!("expected a close, got {other:?}"),
    }
    assert!(bounded(ws.recv()).await.unwrap().is_none());
    assert!(matches!(
        bounded(ws.send(Message::text("late"))).await,
        Err(rapidws::tokio::Error::Closed)
    ));
}

#[tokio::test]
async fn split_halves_work_from_different_tasks() {
    let ws = connect_to_echo().await;
    let (mut rd, mut wr) = ws.into_split();
    const N: usize = 2_000;
    let writer = tokio::spawn(async move {
        for i in 0..N {
            wr.feed(Message::text(format!("message {i}")))
                .await
                .unwrap();
            if i % 64 == 0 {
                wr.flush().await.unwrap();
            }
        }
        wr.flush().await.unwrap();
        wr
    });
    for i in 0..N {
        let m = loop {
            let m = bounded(rd.recv()).await.unwrap().unwrap();
            if m.is_data() {
                break m;
            }
        };
        assert_eq!(m, Message::text(format!("message {i}")));
    }
    let mut wr = bounded(writer).await.unwrap();
    bounded(wr.close(1000, "")).await.unwrap();
    while let Some(m) = bounded(rd.recv()).await.unwrap() {
        assert!(matches!(m, Message::Close(_)), "unexpected {m:?}");
    }
}

#[tokio::test]
async fn write_half_has_the_whole_connections_send_shorthands() {
    let ws = connect_to_echo().await;
    let (mut rd, mut wr) = ws.into_split();
    bounded(wr.send_text("from the half")).await.unwrap();
    bounded(wr.send_binary(vec![1u8, 2, 3])).await.unwrap();
    bounded(wr.ping(&b"half"[..])).await.unwrap();
    assert_eq!(
        bounded(rd.recv()).await.unwrap(),
        Some(Message::text("from the half"))
    );
    assert_eq!(
        bounded(rd.recv()).await.unwrap(),
        Some(Message::Binary(Bytes::from_static(&[1, 2, 3])))
    );
    assert_eq!(
        bounded(rd.recv()).await.unwrap(),
        Some(Message::Pong(Bytes::from_static(b"half")))
    );
}

#[tokio::test]
async fn stream_and_sink_traits_move_messages() {
    use futures_core::Stream;
    use futures_sink::Sink;
    use std::pin::Pin;

    let mut ws = connect_to_echo().await;
    for i in 0..10 {
        bounded(std::future::poll_fn(|cx| Pin::new(&mut ws).poll_ready(cx)))
            .await
            .unwrap();
        Pin::new(&mut ws)
            .start_send(Message::binary(vec![i as u8; 10]))
            .unwrap();
    }
    bounded(std::future::poll_fn(|cx| Pin::new(&mut ws).poll_flush(cx)))
        .await
        .unwrap();
    for i in 0..10 {
        let m = bounded(std::future::poll_fn(|cx| Pin::new(&mut ws).poll_next(cx))).await;
        assert_eq!(m.unwrap().unwrap(), Message::binary(vec![i as u8; 10]));
    }
}

#[tokio::test]
async fn write_half_sends_a_fragmented_message_while_read_half_receives() {
    let ws = connect_to_echo().await;
    let (mut rd, mut wr) = ws.into_split();
    let data = pattern(200_000);
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        let n = wr
            .send_from(MessageKind::Binary, &sent[..], 10_000)
            .await
            .unwrap();
        assert_eq!(n, 200_000);
        let mut w = wr.begin_message(MessageKind::Text).unwrap();
        w.send_chunk_bytes(Bytes::from("héllo ")).await.unwrap();
        // The first chunk is written before the last is queued.
        w.flush().await.unwrap();
        w.finish("wörld".as_bytes()).await.unwrap();
        wr
    });
    let first = loop {
        let m = bounded(rd.recv()).await.unwrap().unwrap();
        if m.is_data() {
            break m;
        }
    };
    assert_eq!(first, Message::Binary(data.into()));
    let second = bounded(rd.recv()).await.unwrap().unwrap();
    assert_eq!(second, Message::text("héllo wörld"));
    drop(bounded(writer).await.unwrap());
}

/// `send_from` on a whole connection and on a write half can run on a spawned task (its
/// future is `Send`).
#[allow(dead_code)]
fn send_from_futures_are_send(
    ws: &mut rapidws::tokio::WebSocket<tokio::net::TcpStream>,
    wr: &mut rapidws::tokio::WriteHalf<tokio::net::TcpStream>,
) {
    fn is_send<T: Send>(_: T) {}
    is_send(ws.send_from(rapidws::codec::MessageKind::Binary, &b""[..], 16));
    is_send(wr.send_from(rapidws::codec::MessageKind::Binary, &b""[..], 16));
}
