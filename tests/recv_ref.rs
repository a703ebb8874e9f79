//! Borrowing receive (`recv_ref`): messages lent from the receive buffer allocate nothing
//! per message once the buffer is warm; larger, fragmented and chunk-delivered messages,
//! split halves, and cancellation still behave. A counting global allocator counts the
//! allocations this thread makes while receiving.
#![cfg(feature = "tokio")]

use std::time::{Duration, Instant};

mod alloc_count;

use rapidws::connection::{Connection, Delivery};
use rapidws::tokio::{Config, MessageKind, MessageRef, WebSocket};
use rapidws::{CloseCode, Role};
use tokio::io::{AsyncWriteExt, DuplexStream, duplex};

/// The frames a client would send for `messages`, masked, back to back.
fn client_frames(messages: &[(MessageKind, Vec<u8>)]) -> Vec<u8> {
    let mut conn = Connection::new(Role::Client, Default::default(), Instant::now());
    let mut out = Vec::new();
    for (kind, payload) in messages {
        conn.send(*kind, payload).unwrap();
        conn.write_pending(&mut out);
    }
    out
}

/// A server `WebSocket` over an in-memory pipe, and the client's end of the pipe.
fn server(config: &Config) -> (WebSocket<DuplexStream>, DuplexStream) {
    let (client, server) = duplex(4 << 20);
    (
        WebSocket::from_raw(server, Role::Server, config, &[]),
        client,
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

#[test]
fn recv_ref_allocates_nothing_per_message_that_fits_the_buffer() {
    runtime().block_on(async {
        let (mut ws, mut client) = server(&Config::default());
        const WARM: usize = 10;
        const COUNTED: usize = 1000;
        let mut allocations = 0;
        for i in 0..WARM + COUNTED {
            let kind = if i % 2 == 0 {
                MessageKind::Binary
            } else {
                MessageKind::Text
            };
            let data: Vec<u8> = payload(i, 100 + i % 900)
                .into_iter()
                .map(|b| b'a' + b % 26)
                .collect();
            client
                .write_all(&client_frames(&[(kind, data.clone())]))
                .await
                .unwrap();
            let counting = i >= WARM;
            if counting {
                alloc_count::start();
            }
            let msg = ws.recv_ref().await.unwrap().unwrap();
            let n = alloc_count::stop();
            if counting {
                allocations += n;
            }
            assert_eq!(msg.as_bytes(), &data[..], "message {i}");
            assert!(msg.is_data());
            assert_eq!(msg.as_text().is_some(), kind == MessageKind::Text);
        }
        assert_eq!(
            allocations, 0,
            "allocations while receiving {COUNTED} messages that fit the receive buffer"
        );
        // The counter does see this path's allocations: an owned receive hands the
        // payload over as `Bytes`, which allocates.
        client
            .write_all(&client_frames(&[(MessageKind::Binary, vec![1; 100])]))
            .await
            .unwrap();
        alloc_count::start();
        let owned = ws.recv().await.unwrap().unwrap();
        assert!(alloc_count::stop() > 0, "the counter counts");
        assert_eq!(owned.len(), 100);
    });
}

#[test]
fn recv_ref_lends_a_message_larger_than_the_read_buffer() {
    runtime().block_on(async {
        let config = Config::default().with_read_buffer_size(4096);
        let (mut ws, mut client) = server(&config);
        let big = payload(7, 1 << 20);
        let frames = client_frames(&[(MessageKind::Binary, big.clone())]);
        let writer = tokio::spawn(async move {
            client.write_all(&frames).await.unwrap();
            client
        });
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.recv_ref())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(msg, MessageRef::Binary(&big));
        let _client = writer.await.unwrap();
    });
}

#[test]
fn large_single_frame_message_read_in_pieces_is_read_into_place_not_copied() {
    // 256 KiB arriving 16 KiB per read, read as the tokio layer reads: once the header has
    // announced the length, room for the whole frame is reserved in one step and every
    // later read lands in place; the message is handed over from that buffer. Growing
    // the buffer read by read, or copying each piece into a message buffer, would take an
    // allocation per doubling.
    let wire = client_frames(&[(MessageKind::Binary, payload(3, 256 << 10))]);
    let now = Instant::now();
    let mut conn = Connection::new(Role::Server, Default::default(), now);
    let mut got = None;
    let (allocations, ()) = alloc_count::allocations(|| {
        // `arrived` bytes are in the socket; each read takes what fits the spare room.
        let (mut read, mut arrived) = (0, 0);
        while read < wire.len() {
            arrived = (arrived + (16 << 10)).min(wire.len());
            while read < arrived {
                let buf = conn.reserve_recv(4096);
                let n = (buf.capacity() - buf.len()).min(arrived - read);
                buf.extend_from_slice(&wire[read..read + n]);
                read += n;
                conn.handle_received(now);
                if let Some(ev) = conn.poll_event_owned() {
                    got = Some(ev.unwrap());
                }
            }
        }
    });
    match got {
        Some(rapidws::connection::OwnedEvent::Message { kind, data }) => {
            assert_eq!(kind, MessageKind::Binary);
            assert_eq!(&data[..], &payload(3, 256 << 10)[..]);
        }
        other => panic!("{other:?}"),
    }
    // The first read's buffer, the room for the frame, the handle shared with the message.
    assert!(allocations <= 3, "{allocations} allocations");
}

#[test]
fn recv_ref_lends_fragmented_and_chunk_delivered_messages_whole() {
    for delivery in [Delivery::Whole, Delivery::Chunks] {
        runtime().block_on(async {
            let (mut ws, mut client) = server(&Config::default().with_delivery(delivery));
            // A fragmented text message, then a ping, then a one-frame binary message.
            let mut conn = Connection::new(Role::Client, Default::default(), Instant::now());
            let mut out = Vec::new();
            conn.begin_message(MessageKind::Text).unwrap();
            conn.send_chunk("héllo, ".as_bytes()).unwrap();
            conn.ping(b"p").unwrap();
            conn.end_message("wörld".as_bytes()).unwrap();
            conn.send(MessageKind::Binary, &[1, 2, 3]).unwrap();
            conn.write_pending(&mut out);
            client.write_all(&out).await.unwrap();
            assert_eq!(ws.recv_ref().await.unwrap(), Some(MessageRef::Ping(b"p")));
            assert_eq!(
                ws.recv_ref().await.unwrap(),
                Some(MessageRef::Text("héllo, wörld")),
                "{delivery:?}"
            );
            assert_eq!(
                ws.recv_ref().await.unwrap(),
                Some(MessageRef::Binary(&[1, 2, 3])),
                "{delivery:?}"
            );
        });
    }
}

#[test]
fn recv_ref_on_a_read_half_copies_into_the_half() {
    runtime().block_on(async {
        let (ws, mut client) = server(&Config::default());
        let (mut rd, _wr) = ws.into_split();
        let messages: Vec<_> = (0..50)
            .map(|i| (MessageKind::Binary, payload(i, 10 + i * 100)))
            .collect();
        client.write_all(&client_frames(&messages)).await.unwrap();
        for (i, (_, data)) in messages.iter().enumerate() {
            let msg = rd.recv_ref().await.unwrap().unwrap();
            assert_eq!(msg, MessageRef::Binary(data), "message {i}");
        }
        // The peer's close is lent too, then the end.
        let mut conn = Connection::new(Role::Client, Default::default(), Instant::now());
        conn.close(Instant::now(), rapidws::codec::CloseCode(1000), "bye")
            .unwrap();
        let mut out = Vec::new();
        conn.write_pending(&mut out);
        client.write_all(&out).await.unwrap();
        assert_eq!(
            rd.recv_ref().await.unwrap(),
            Some(MessageRef::Close(Some((CloseCode::NORMAL, "bye"))))
        );
        drop(client);
        assert_eq!(rd.recv_ref().await.unwrap(), None);
    });
}

#[test]
fn dropped_recv_ref_loses_nothing() {
    runtime().block_on(async {
        let (mut ws, mut client) = server(&Config::default());
        // Nothing to read yet: the call is cancelled by the timeout.
        let r = tokio::time::timeout(Duration::from_millis(20), ws.recv_ref()).await;
        assert!(r.is_err());
        let frames = client_frames(&[(MessageKind::Text, b"after".to_vec())]);
        // Half the frame, a cancelled receive, then the rest.
        client.write_all(&frames[..3]).await.unwrap();
        let r = tokio::time::timeout(Duration::from_millis(20), ws.recv_ref()).await;
        assert!(r.is_err());
        client.write_all(&frames[3..]).await.unwrap();
        assert_eq!(
            ws.recv_ref().await.unwrap(),
            Some(MessageRef::Text("after"))
        );
    });
}

/// A burst read at once: lent messages around a ping (its pong written before the ping
/// is handed over), then a text frame that is not UTF-8: the error is returned once the
/// connection has sent its close with 1007, and nothing follows it.
#[test]
fn recv_ref_answers_pings_in_a_burst_and_fails_invalid_text_with_1007() {
    runtime().block_on(async {
        let (mut ws, mut client) = server(&Config::default());
        let mut frames = client_frames(&[
            (MessageKind::Text, b"one".to_vec()),
            (MessageKind::Binary, vec![1, 2, 3]),
        ]);
        let mut conn = Connection::new(Role::Client, Default::default(), Instant::now());
        conn.ping(b"p").unwrap();
        conn.send(MessageKind::Text, b"two").unwrap();
        // Not UTF-8: sent as text through the sans-IO core, which does not check it.
        conn.send(MessageKind::Text, &[b'x', 0xC3, 0x28]).unwrap();
        conn.write_pending(&mut frames);
        client.write_all(&frames).await.unwrap();

        assert_eq!(ws.recv_ref().await.unwrap(), Some(MessageRef::Text("one")));
        assert_eq!(
            ws.recv_ref().await.unwrap(),
            Some(MessageRef::Binary(&[1, 2, 3]))
        );
        assert_eq!(ws.recv_ref().await.unwrap(), Some(MessageRef::Ping(b"p")));
        assert_eq!(ws.recv_ref().await.unwrap(), Some(MessageRef::Text("two")));
        // The teardown waits for the peer: read what the server sent, then close.
        let peer = tokio::spawn(async move {
            let mut peer = Connection::new(Role::Client, Default::default(), Instant::now());
            let mut buf = vec![0u8; 4096];
            let mut events = Vec::new();
            loop {
                let n = tokio::io::AsyncReadExt::read(&mut client, &mut buf)
                    .await
                    .unwrap();
                if n == 0 {
                    break;
                }
                peer.handle_bytes(Instant::now(), &buf[..n]);
                while let Some(ev) = peer.poll_event_owned() {
                    events.push(format!("{:?}", ev.map(|e| format!("{e:?}"))));
                }
                let mut out = Vec::new();
                peer.write_pending(&mut out);
                client.write_all(&out).await.unwrap();
                if peer.peer_close().is_some() {
                    break;
                }
            }
            (events, peer.peer_close().map(|c| c.code))
        });
        let err = ws.recv_ref().await.unwrap_err();
        assert!(
            matches!(err, rapidws::Error::Protocol(ref e) if e.close_code() == CloseCode::INVALID_DATA),
            "{err}"
        );
        assert_eq!(ws.recv_ref().await.unwrap(), None);
        let (events, code) = peer.await.unwrap();
        assert!(events[0].contains("Pong"), "the pong first: {events:?}");
        assert_eq!(code, Some(CloseCode::INVALID_DATA), "{events:?}");
    });
}
