//! What a connection reports once it has ended, in each way it can end: the peer vanished,
//! the peer closed, a fragmented send was abandoned. Each peer is a raw TCP socket, so the
//! test controls exactly what reaches our side.

#![cfg(feature = "tokio")]

use std::time::Duration;

use rapidws::tokio::{Message, WebSocket, accept};
use rapidws::{CloseCode, Error, MessageKind, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
    Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
    Sec-WebSocket-Version: 13\r\n\r\n";
/// A masked close with code 1000, as a client sends it.
const CLIENT_CLOSE: &[u8] = &[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8];

const LIMIT: Duration = Duration::from_secs(10);

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("step timed out")
}

/// Our server and a raw client that has read the 101.
async fn pair() -> (WebSocket<TcpStream>, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(UPGRADE).await.unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut b).await.unwrap(), 1, "the 101 arrives");
            head.push(b[0]);
        }
        s
    });
    let (stream, _) = l.accept().await.unwrap();
    let ws = bounded(accept(stream, &ServerConfig::default()))
        .await
        .unwrap();
    (ws, bounded(client).await.unwrap())
}

/// Reads one unmasked frame the server sent: (first byte, payload).
async fn read_frame(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 2];
    bounded(s.read_exact(&mut h)).await.unwrap();
    let len = match h[1] & 0x7f {
        126 => {
            let mut l = [0u8; 2];
            bounded(s.read_exact(&mut l)).await.unwrap();
            u16::from_be_bytes(l) as usize
        }
        127 => {
            let mut l = [0u8; 8];
            bounded(s.read_exact(&mut l)).await.unwrap();
            u64::from_be_bytes(l) as usize
        }
        n => n as usize,
    };
    let mut p = vec![0; len];
    bounded(s.read_exact(&mut p)).await.unwrap();
    (h[0], p)
}

#[tokio::test]
async fn after_the_peer_vanished_a_send_fails_instead_of_losing_the_data() {
    let (mut ws, raw) = pair().await;
    drop(raw);
    let end = bounded(ws.recv()).await;
    assert!(end.as_ref().is_err_and(Error::is_unexpected_eof), "{end:?}");
    let sent = bounded(ws.send(Message::text("lost?"))).await;
    assert!(sent.is_err(), "a send after the end must fail: {sent:?}");
    // And it stays ended.
    let again = bounded(ws.recv()).await;
    assert!(matches!(again, Ok(None) | Err(_)), "{again:?}");
}

#[tokio::test]
async fn after_the_peers_close_a_failed_echo_does_not_turn_recv_into_an_error() {
    let (mut ws, mut raw) = pair().await;
    raw.write_all(CLIENT_CLOSE).await.unwrap();
    let close = bounded(ws.recv()).await.unwrap();
    assert!(matches!(close, Some(Message::Close(Some(f))) if f.code == CloseCode::NORMAL));
    // The application echoes what it believes is a message: refused, typed.
    let sent = bounded(ws.send(Message::text("late"))).await;
    assert!(matches!(sent, Err(Error::Closed)), "{sent:?}");
    // The peer goes away hard meanwhile.
    drop(raw);
    assert_eq!(bounded(ws.recv()).await.unwrap(), None, "still a clean end");
    assert_eq!(bounded(ws.recv()).await.unwrap(), None, "and stays one");
}

#[tokio::test]
async fn a_writer_dropped_before_its_first_chunk_leaves_nothing_open() {
    let (mut ws, mut raw) = pair().await;
    {
        let _w = ws.begin_message(MessageKind::Text).unwrap();
    }
    bounded(ws.send(Message::text("next"))).await.unwrap();
    let (b0, p) = read_frame(&mut raw).await;
    assert_eq!(b0, 0x81, "one final text frame");
    assert_eq!(p, b"next");
}

#[tokio::test]
async fn a_writer_dropped_mid_message_closes_with_1011_instead_of_blocking_sends() {
    let (mut ws, mut raw) = pair().await;
    {
        let mut w = ws.begin_message(MessageKind::Binary).unwrap();
        w.send_chunk(b"part one").await.unwrap();
    }
    let sent = bounded(ws.send(Message::text("next"))).await;
    assert!(
        matches!(sent, Err(Error::Abandoned | Error::Closed)),
        "refused as closed, not stuck on the abandoned message: {sent:?}"
    );
    // The peer reads the fragment and our close, then answers it.
    let peer = tokio::spawn(async move {
        let first = read_frame(&mut raw).await;
        let close = read_frame(&mut raw).await;
        raw.write_all(CLIENT_CLOSE).await.unwrap();
        (first, close)
    });
    let mut reported = false;
    for _ in 0..4 {
        match bounded(ws.recv()).await {
            Err(Error::Abandoned) => reported = true,
            Ok(None) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        reported,
        "the next receive reports why the connection ended"
    );
    let ((b0, p), (c0, c)) = bounded(peer).await.unwrap();
    assert_eq!(b0, 0x02, "the first fragment went out");
    assert_eq!(p, b"part one");
    assert_eq!(c0, 0x88, "then our close");
    assert_eq!(u16::from_be_bytes([c[0], c[1]]), CloseCode::INTERNAL.0);
    assert_eq!(&c[2..], b"message abandoned by the sender");
}

#[tokio::test]
async fn a_cancelled_send_from_does_not_block_later_sends() {
    let (mut ws, mut raw) = pair().await;
    // A reader that never yields anything: the send is cancelled by the timeout.
    let (_keep, never) = tokio::io::duplex(16);
    let r = tokio::time::timeout(
        Duration::from_millis(50),
        ws.send_from(MessageKind::Binary, never, 1024),
    )
    .await;
    assert!(r.is_err(), "cancelled");
    bounded(ws.send(Message::text("after"))).await.unwrap();
    let (b0, p) = read_frame(&mut raw).await;
    assert_eq!(b0, 0x81);
    assert_eq!(p, b"after");
}

/// A masked ping with payload "hi", as a client sends it.
const CLIENT_PING: &[u8] = &[0x89, 0x82, 0, 0, 0, 0, b'h', b'i'];
/// A masked text frame "x".
const CLIENT_TEXT: &[u8] = &[0x81, 0x81, 0, 0, 0, 0, b'x'];

#[tokio::test]
async fn with_the_read_half_dropped_the_write_half_still_answers_pings_and_closes() {
    let (ws, mut raw) = pair().await;
    let (rd, mut wr) = ws.into_split();
    drop(rd);
    // Data no one will receive, then a ping: the ping is answered at the next send.
    raw.write_all(CLIENT_TEXT).await.unwrap();
    raw.write_all(CLIENT_PING).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    bounded(wr.send(Message::text("one"))).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        got.push(read_frame(&mut raw).await);
    }
    assert!(got.contains(&(0x8a, b"hi".to_vec())), "the pong: {got:?}");
    assert!(
        got.contains(&(0x81, b"one".to_vec())),
        "our message: {got:?}"
    );
    // The peer closes: the next send sees it and our close echo goes out.
    raw.write_all(CLIENT_CLOSE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sent = bounded(wr.send(Message::text("late"))).await;
    assert!(matches!(sent, Err(Error::Closed)), "{sent:?}");
    let (b0, p) = read_frame(&mut raw).await;
    assert_eq!((b0, &p[..]), (0x88, &[0x03, 0xe8][..]), "the close echo");
}

#[tokio::test]
async fn a_half_writer_dropped_mid_message_closes_with_1011() {
    let (ws, mut raw) = pair().await;
    let (mut rd, mut wr) = ws.into_split();
    {
        let mut w = wr.begin_message(MessageKind::Text).unwrap();
        w.send_chunk(b"half").await.unwrap();
    }
    let peer = tokio::spawn(async move {
        let first = read_frame(&mut raw).await;
        let close = read_frame(&mut raw).await;
        raw.write_all(CLIENT_CLOSE).await.unwrap();
        (first, close)
    });
    let end = bounded(rd.recv()).await;
    assert!(matches!(end, Err(Error::Abandoned)), "{end:?}");
    let ((b0, p), (c0, c)) = bounded(peer).await.unwrap();
    assert_eq!((b0, &p[..]), (0x01, &b"half"[..]));
    assert_eq!(c0, 0x88);
    assert_eq!(u16::from_be_bytes([c[0], c[1]]), 1011);
}
