//! The per-send compression switch over real loopback sockets, rapidws on both ends, in
//! both roles, with and without context takeover: a recording relay between the two ends
//! shows RSV1 on the wire as it went, and every message arrives intact, so a message
//! sent uncompressed never put the two ends' compression windows out of step.
#![cfg(all(feature = "deflate", feature = "tokio", feature = "blocking"))]

use std::net::TcpListener;
use std::thread;

use bytes::Bytes;
use rapidws::Compression::{self, Always, Auto, Never};
use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ClientConfig, Message, MessageKind, ServerConfig};
use rapidws::{PreparedMessage, blocking};

mod connection_support;
mod tap_support;
mod tokio_support;
use connection_support::quote;
use tap_support::{messages, tap};
use tokio_support::{LIMIT, bounded};

// ----- what the sender sends -----

/// One send, through one of the send paths.
enum Step {
    Send(Message, Compression),
    Feed(Message, Compression),
    TrySend(Message, Compression),
    /// A fragmented message from `begin_message_with`: these chunks, the last one ending it.
    Writer(MessageKind, Vec<Bytes>, Compression),
    /// `send_from_with` in chunks of 300 bytes.
    From(MessageKind, Bytes, Compression),
    Prepared(PreparedMessage),
}

/// The script both roles send, with whether each message's first frame must carry RSV1.
fn script() -> Vec<(Step, bool)> {
    let (a, b) = (quote(1), quote(2));
    let text = |s: &str| Message::text(s.to_string());
    let chunks = |s: &str| {
        let s = Bytes::from(s.to_string());
        vec![s.slice(..100), s.slice(100..400), s.slice(400..)]
    };
    vec![
        (Step::Send(text(&a), Auto), true),
        // Sent as it is; the compressor must not see it, since the peer's inflater won't.
        (Step::Send(text(&b), Never), false),
        // Had the compressor seen `b`, this would refer to bytes the peer never inflated.
        (Step::Send(text(&b), Auto), true),
        (Step::Send(Message::binary(&b"tick"[..]), Always), true),
        (Step::Feed(text(&a), Never), false),
        (Step::TrySend(text(&b), Never), false),
        (Step::Writer(MessageKind::Text, chunks(&a), Never), false),
        (
            Step::From(MessageKind::Binary, Bytes::from(b.clone()), Never),
            false,
        ),
        (Step::Writer(MessageKind::Text, chunks(&b), Auto), true),
        (
            Step::Prepared(PreparedMessage::text(&a).with_compression(Never)),
            false,
        ),
        (Step::Prepared(PreparedMessage::text(&b)), true),
        (
            Step::Prepared(PreparedMessage::text("tock").with_compression(Always)),
            true,
        ),
        (Step::Send(text(&a), Auto), true),
    ]
}

/// The message a step's receiver gets.
fn expected(step: &Step) -> Message {
    match step {
        Step::Send(m, _) | Step::Feed(m, _) | Step::TrySend(m, _) => m.clone(),
        Step::Writer(kind, chunks, _) => data(*kind, chunks.concat().into()),
        Step::From(kind, data_, _) => data(*kind, data_.clone()),
        Step::Prepared(p) => data(p.kind(), p.payload()),
    }
}

fn data(kind: MessageKind, bytes: Bytes) -> Message {
    match kind {
        MessageKind::Text => Message::text(String::from_utf8(bytes.to_vec()).unwrap()),
        MessageKind::Binary => Message::binary(bytes),
    }
}

/// Runs one step on a tokio `WebSocket` or `WriteHalf` (the same method names).
macro_rules! run_step {
    ($ws:expr, $step:expr) => {
        match $step {
            Step::Send(m, c) => $ws.send_with(m, c).await.unwrap(),
            Step::Feed(m, c) => {
                $ws.feed_with(m, c).await.unwrap();
                $ws.flush().await.unwrap();
            }
            Step::TrySend(m, c) => {
                $ws.try_send_with(m, c).unwrap();
                $ws.flush().await.unwrap();
            }
            Step::Writer(kind, chunks, c) => {
                let mut w = $ws.begin_message_with(kind, c).unwrap();
                let (last, rest) = chunks.split_last().unwrap();
                for chunk in rest {
                    w.send_chunk(chunk).await.unwrap();
                }
                w.finish(last).await.unwrap();
            }
            Step::From(kind, data, c) => {
                let n = $ws.send_from_with(kind, &data[..], 300, c).await.unwrap();
                assert_eq!(n, data.len() as u64);
            }
            Step::Prepared(p) => $ws.send_prepared(&p).await.unwrap(),
        }
    };
}

// ----- tokio, both roles, whole and split -----

fn deflate(takeover: bool) -> DeflateConfig {
    DeflateConfig::default()
        .server_no_context_takeover(!takeover)
        .client_no_context_takeover(!takeover)
}

/// `sender` sends the script (through its `WriteHalf` when `split`); the other end
/// receives it; the relay's record of the sender's direction is checked.
async fn tokio_run(sender: rapidws::Role, split: bool, takeover: bool) {
    let ctx = format!("{sender:?} sending, split {split}, context takeover {takeover}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay = tap(listener.local_addr().unwrap());
    let server_config = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
    let client_config = ClientConfig::default().with_deflate(Some(deflate(takeover)));

    let sending = sender;
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let ws = rapidws::tokio::accept(s, &server_config).await.unwrap();
        endpoint(ws, sending == rapidws::Role::Server, split).await
    });
    let url = format!("ws://{}/", relay.addr);
    let ws = rapidws::tokio::connect(&url, &client_config).await.unwrap();
    let client = endpoint(ws, sender == rapidws::Role::Client, split);
    let (got_client, got_server) = bounded(async { tokio::join!(client, server) }).await;
    let got = match sender {
        rapidws::Role::Server => got_client,
        rapidws::Role::Client => got_server.unwrap(),
    };

    let script = script();
    let want: Vec<Message> = script.iter().map(|(s, _)| expected(s)).collect();
    assert_eq!(got, want, "{ctx}: every message arrived intact");

    let down = relay.down.lock().unwrap().clone();
    let head =
        String::from_utf8_lossy(&down[..down.windows(4).position(|w| w == b"\r\n\r\n").unwrap()])
            .to_string();
    assert!(head.contains("permessage-deflate"), "{ctx}: {head}");
    assert_eq!(
        head.contains("server_no_context_takeover") && head.contains("client_no_context_takeover"),
        !takeover,
        "{ctx}: {head}"
    );
    let log = match sender {
        rapidws::Role::Server => down,
        rapidws::Role::Client => relay.up.lock().unwrap().clone(),
    };
    let sent = messages(&log);
    assert_eq!(sent.len(), script.len(), "{ctx}: {sent:?}");
    for (i, (m, (_, rsv1))) in sent.iter().zip(&script).enumerate() {
        assert_eq!(m.rsv1, *rsv1, "{ctx}: message {i}: {m:?}");
        assert!(!m.continuation_rsv1, "{ctx}: message {i}: {m:?}");
    }
    // The writer's three chunks and `send_from`'s 300-byte ones, plus its empty last
    // frame, each went as a frame of their own.
    assert_eq!(sent[6].frames, 3, "{ctx}");
    assert_eq!(sent[7].frames, quote(2).len().div_ceil(300) + 1, "{ctx}");
}

/// One end: sends the script when `sends`, else receives until the peer's close; returns
/// the data messages received.
async fn endpoint<S>(ws: rapidws::tokio::WebSocket<S>, sends: bool, split: bool) -> Vec<Message>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut ws = ws;
    if !sends {
        let mut got = Vec::new();
        while let Some(msg) = ws.recv().await.unwrap() {
            if msg.is_data() {
                got.push(msg);
            }
            if got.len() == script().len() {
                ws.close(1000, "done").await.unwrap();
                break;
            }
        }
        return got;
    }
    if split {
        let (mut rd, mut wr) = ws.into_split();
        // The reading half answers the close; keep it polled.
        let reader = tokio::spawn(async move { while rd.recv().await.unwrap().is_some() {} });
        for (step, _) in script() {
            run_step!(wr, step);
        }
        reader.await.unwrap();
    } else {
        for (step, _) in script() {
            run_step!(ws, step);
        }
        while ws.recv().await.unwrap().is_some() {}
    }
    Vec::new()
}

#[tokio::test]
async fn tokio_server_switches_compression_per_send_with_context_takeover() {
    for split in [false, true] {
        tokio_run(rapidws::Role::Server, split, true).await;
    }
}

#[tokio::test]
async fn tokio_server_switches_compression_per_send_without_context_takeover() {
    for split in [false, true] {
        tokio_run(rapidws::Role::Server, split, false).await;
    }
}

#[tokio::test]
async fn tokio_client_switches_compression_per_send_with_context_takeover() {
    for split in [false, true] {
        tokio_run(rapidws::Role::Client, split, true).await;
    }
}

#[tokio::test]
async fn tokio_client_switches_compression_per_send_without_context_takeover() {
    for split in [false, true] {
        tokio_run(rapidws::Role::Client, split, false).await;
    }
}

// ----- blocking, both roles -----

/// What the blocking ends send, each with whether it must carry RSV1.
fn blocking_script() -> Vec<(Message, Compression, bool)> {
    let (a, b) = (quote(3), quote(4));
    vec![
        (Message::text(a.clone()), Auto, true),
        (Message::text(b.clone()), Never, false),
        (Message::text(b.clone()), Auto, true),
        (Message::binary(&b"tick"[..]), Always, true),
        (Message::binary(Bytes::from(a.clone())), Never, false),
        (Message::text(a), Auto, true),
    ]
}

fn blocking_run(takeover: bool) {
    let ctx = format!("blocking, context takeover {takeover}");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = tap(listener.local_addr().unwrap());
    let server = thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let config = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
        let mut ws = blocking::accept(s, &config).unwrap();
        // The server speaks first, then reads the client's turn.
        for (msg, c, _) in blocking_script() {
            ws.send_with(msg, c).unwrap();
        }
        let mut got = Vec::new();
        while let Some(msg) = ws.read().unwrap() {
            got.push(msg);
        }
        got
    });
    let config = ClientConfig::default().with_deflate(Some(deflate(takeover)));
    let mut ws = blocking::connect(format!("ws://{}/", relay.addr), &config).unwrap();
    blocking::Transport::set_read_timeout(ws.get_mut(), Some(LIMIT)).unwrap();
    assert!(ws.is_deflate());
    let want: Vec<Message> = blocking_script().into_iter().map(|(m, _, _)| m).collect();
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.push(ws.read().unwrap().unwrap());
    }
    assert_eq!(got, want, "{ctx}: the server's messages");
    for (msg, c, _) in blocking_script() {
        ws.send_with(msg, c).unwrap();
    }
    ws.close(1000, "").unwrap();
    let got: Vec<Message> = server
        .join()
        .unwrap()
        .into_iter()
        .filter(Message::is_data)
        .collect();
    assert_eq!(got, want, "{ctx}: the client's messages");

    for (dir, log) in [("down", &relay.down), ("up", &relay.up)] {
        let sent = messages(&log.lock().unwrap());
        let rsv1: Vec<bool> = sent.iter().map(|m| m.rsv1).collect();
        let want: Vec<bool> = blocking_script().iter().map(|(_, _, r)| *r).collect();
        assert_eq!(rsv1, want, "{ctx}, {dir}: {sent:?}");
    }
}

#[test]
fn blocking_ends_switch_compression_per_send_with_context_takeover() {
    blocking_run(true);
}

#[test]
fn blocking_ends_switch_compression_per_send_without_context_takeover() {
    blocking_run(false);
}

// ----- callbacks (`handler::Socket`) -----

struct Greeter;

impl rapidws::handler::Handler for Greeter {
    fn on_open(&mut self, socket: &mut rapidws::handler::Socket) {
        socket.send_with(Message::text(quote(5)), Never);
        socket.send_with(Message::text("hi"), Always);
        socket.send(Message::text(quote(5)));
    }
}

#[tokio::test]
async fn a_handler_switches_compression_per_send() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay = tap(listener.local_addr().unwrap());
    let config = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
    tokio::spawn(rapidws::handler::serve_handler(listener, config, |_| {
        Greeter
    }));
    let client = ClientConfig::default().with_deflate(Some(DeflateConfig::default()));
    let url = format!("ws://{}/", relay.addr);
    let mut ws = bounded(rapidws::tokio::connect(&url, &client))
        .await
        .unwrap();
    for want in [
        Message::text(quote(5)),
        Message::text("hi"),
        Message::text(quote(5)),
    ] {
        assert_eq!(bounded(ws.recv()).await.unwrap(), Some(want));
    }
    bounded(ws.close(1000, "")).await.unwrap();
    let rsv1: Vec<bool> = messages(&relay.down.lock().unwrap())
        .iter()
        .map(|m| m.rsv1)
        .collect();
    assert_eq!(rsv1, [false, true, true]);
}
