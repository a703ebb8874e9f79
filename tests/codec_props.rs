//! Property tests: encode/decode round trips, and decoding split anywhere equals decoding whole.

use std::time::Instant;

use proptest::prelude::*;
use rapidws::CloseFrame;
use rapidws::Role;
use rapidws::codec::{Decoder, DecoderConfig, Encoder, Item, MessageKind, OpCode};
use rapidws::connection::{Config, Connection, Delivery, Event, OwnedEvent};

/// What a sender does.
#[derive(Clone, Debug)]
enum Op {
    Text(String),
    Binary(Vec<u8>),
    Fragmented(MessageKind, Vec<Vec<u8>>),
    Ping(Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<String>().prop_map(Op::Text),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Op::Binary),
        (
            prop_oneof![Just(MessageKind::Text), Just(MessageKind::Binary)],
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..5)
        )
            .prop_map(|(k, parts)| Op::Fragmented(k, parts)),
        proptest::collection::vec(any::<u8>(), 0..=125).prop_map(Op::Ping),
    ]
}

/// Text fragments must join into UTF-8; binary fragments are arbitrary.
fn fix(op: Op) -> Op {
    match op {
        Op::Fragmented(MessageKind::Text, parts) => {
            let joined: Vec<u8> = parts.concat();
            let text = String::from_utf8_lossy(&joined).into_owned().into_bytes();
            // Split the valid text at the same byte counts (code points may be cut).
            let mut out = Vec::new();
            let mut at = 0;
            for p in &parts {
                let end = (at + p.len()).min(text.len());
                out.push(text[at..end].to_vec());
                at = end;
            }
            if let Some(last) = out.last_mut() {
                last.extend_from_slice(&text[at..]);
            }
            Op::Fragmented(MessageKind::Text, out)
        }
        other => other,
    }
}

fn wire(role: Role, ops: &[Op]) -> Vec<u8> {
    let mut conn = Connection::new(role, Config::default(), Instant::now());
    for op in ops {
        match op {
            Op::Text(s) => conn.send_text(s).unwrap(),
            Op::Binary(b) => conn.send_binary(b).unwrap(),
            Op::Fragmented(k, parts) => {
                conn.begin_message(*k).unwrap();
                let (last, init) = parts.split_last().unwrap();
                for p in init {
                    conn.send_chunk(p).unwrap();
                }
                conn.end_message(last).unwrap();
            }
            Op::Ping(p) => conn.ping(p).unwrap(),
        }
    }
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    out
}

fn expected(ops: &[Op]) -> Vec<OwnedEvent> {
    // Pings may pass data frames in the queue; compare data and pings separately.
    ops.iter()
        .map(|op| match op {
            Op::Text(s) => OwnedEvent::Message {
                kind: MessageKind::Text,
                data: bytes::Bytes::copy_from_slice(s.as_bytes()),
            },
            Op::Binary(b) => OwnedEvent::Message {
                kind: MessageKind::Binary,
                data: bytes::Bytes::copy_from_slice(b),
            },
            Op::Fragmented(k, parts) => OwnedEvent::Message {
                kind: *k,
                data: bytes::Bytes::from(parts.concat()),
            },
            Op::Ping(p) => OwnedEvent::Ping(bytes::Bytes::copy_from_slice(p)),
        })
        .collect()
}

fn receive(role: Role, delivery: Delivery, bytes: &[u8], cuts: &[usize]) -> Vec<OwnedEvent> {
    let mut cfg = Config::default();
    cfg.delivery = delivery;
    receive_with(role, cfg, bytes, cuts, Poll::Owned, |conn, now, piece| {
        conn.handle_bytes(now, piece)
    })
}

/// As [`receive`], but reading as an IO layer does: into the buffer that
/// [`Connection::reserve_recv`] makes room in, with a small read-ahead limit so that both
/// the reserve-ahead and the grow-with-what-arrived paths run; each event taken as `poll`
/// says (lent events are copied here to compare).
fn receive_in_place(role: Role, bytes: &[u8], cuts: &[usize], poll: Poll) -> Vec<OwnedEvent> {
    let mut cfg = Config::default();
    cfg.max_read_ahead = 64;
    receive_with(role, cfg, bytes, cuts, poll, |conn, now, piece| {
        conn.reserve_recv(16).extend_from_slice(piece);
        conn.handle_received(now);
    })
}

/// How [`receive_with`] takes each event.
#[derive(Clone, Copy, PartialEq)]
enum Poll {
    /// `poll_event_owned`.
    Owned,
    /// `poll_event`.
    Lent,
    /// `poll_event` and `poll_event_owned` in turn.
    Mixed,
}

fn lent_to_owned(e: Event<'_>) -> OwnedEvent {
    let copy = bytes::Bytes::copy_from_slice;
    match e {
        Event::Message(m) => OwnedEvent::Message {
            kind: if m.is_text() {
                MessageKind::Text
            } else {
                MessageKind::Binary
            },
            data: copy(m.as_bytes()),
        },
        Event::Chunk {
            kind,
            data,
            first,
            fin,
        } => OwnedEvent::Chunk {
            kind,
            data: copy(data),
            first,
            fin,
        },
        Event::Ping(p) => OwnedEvent::Ping(copy(p)),
        Event::Pong(p) => OwnedEvent::Pong(copy(p)),
        Event::Close(c) => OwnedEvent::Close(c.map(|(code, reason)| CloseFrame::new(code, reason))),
        other => panic!("an event this test does not know: {other:?}"),
    }
}

/// Hands `bytes` to a connection in the pieces `cuts` make (each cut taken modulo the
/// length), through `feed`, polling every event after each piece.
fn receive_with(
    role: Role,
    cfg: Config,
    bytes: &[u8],
    cuts: &[usize],
    poll: Poll,
    feed: impl Fn(&mut Connection, Instant, &[u8]),
) -> Vec<OwnedEvent> {
    let now = Instant::now();
    let mut conn = Connection::new(role, cfg, now);
    let mut events = Vec::new();
    let mut pos = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    for cut in cuts {
        feed(&mut conn, now, &bytes[pos..cut]);
        pos = cut;
        loop {
            let lend = match poll {
                Poll::Owned => false,
                Poll::Lent => true,
                Poll::Mixed => events.len() % 2 == 0,
            };
            let e = if lend {
                conn.poll_event().map(|e| e.map(lent_to_owned))
            } else {
                conn.poll_event_owned()
            };
            let Some(e) = e else { break };
            events.push(e.expect("valid stream"));
        }
    }
    events
}

/// Joins chunk events into whole messages, so chunked and whole delivery compare equal.
fn join_chunks(events: Vec<OwnedEvent>) -> Vec<OwnedEvent> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for e in events {
        match e {
            OwnedEvent::Chunk {
                kind, data, fin, ..
            } => {
                buf.extend_from_slice(&data);
                if fin {
                    out.push(OwnedEvent::Message {
                        kind,
                        data: bytes::Bytes::from(std::mem::take(&mut buf)),
                    });
                }
            }
            other => out.push(other),
        }
    }
    out
}

fn split_by_kind(events: Vec<OwnedEvent>) -> (Vec<OwnedEvent>, Vec<OwnedEvent>) {
    events
        .into_iter()
        .partition(|e| matches!(e, OwnedEvent::Ping(_)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn client_to_server_round_trip_split_anywhere(
        ops in proptest::collection::vec(op().prop_map(fix), 1..12),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let bytes = wire(Role::Client, &ops);
        let whole = receive(Role::Server, Delivery::Whole, &bytes, &[]);
        prop_assert_eq!(split_by_kind(whole.clone()), split_by_kind(expected(&ops)));
        prop_assert_eq!(&receive(Role::Server, Delivery::Whole, &bytes, &cuts), &whole);
        prop_assert_eq!(&join_chunks(receive(Role::Server, Delivery::Chunks, &bytes, &cuts)), &whole);
        prop_assert_eq!(&receive_in_place(Role::Server, &bytes, &cuts, Poll::Owned), &whole);
        prop_assert_eq!(&receive_in_place(Role::Server, &bytes, &cuts, Poll::Lent), &whole);
        prop_assert_eq!(&receive_in_place(Role::Server, &bytes, &cuts, Poll::Mixed), &whole);
    }

    #[test]
    fn server_to_client_round_trip_split_anywhere(
        ops in proptest::collection::vec(op().prop_map(fix), 1..12),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let bytes = wire(Role::Server, &ops);
        let whole = receive(Role::Client, Delivery::Whole, &bytes, &[]);
        prop_assert_eq!(split_by_kind(whole.clone()), split_by_kind(expected(&ops)));
        prop_assert_eq!(&receive(Role::Client, Delivery::Whole, &bytes, &cuts), &whole);
        prop_assert_eq!(&receive_in_place(Role::Client, &bytes, &cuts, Poll::Lent), &whole);
        prop_assert_eq!(&receive_in_place(Role::Client, &bytes, &cuts, Poll::Mixed), &whole);
    }

    #[test]
    fn encoder_frame_decodes_to_same_header_and_payload(
        fin in any::<bool>(),
        op in prop_oneof![Just(OpCode::Text), Just(OpCode::Binary)],
        payload in proptest::collection::vec(any::<u8>(), 0..70_000),
        client in any::<bool>(),
    ) {
        let (send, recv) = if client { (Role::Client, Role::Server) } else { (Role::Server, Role::Client) };
        let payload = if op == OpCode::Text { String::from_utf8_lossy(&payload).into_owned().into_bytes() } else { payload };
        let mut buf = Vec::new();
        Encoder::new(send).encode_into(fin, false, op, &payload, &mut buf).unwrap();
        let mut dec = Decoder::new(DecoderConfig::new(recv));
        let d = dec.decode(&mut buf).unwrap();
        prop_assert_eq!(d.consumed, buf.len());
        match d.item {
            Some(Item::Data(c)) => {
                prop_assert_eq!(&buf[c.payload.clone()], &payload[..]);
                prop_assert_eq!(c.message_end, fin);
                prop_assert!(c.frame_end && c.first);
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    #[test]
    fn every_single_byte_split_point_gives_the_same_events(
        ops in proptest::collection::vec(op().prop_map(fix), 1..4),
    ) {
        let bytes = wire(Role::Client, &ops);
        let whole = receive(Role::Server, Delivery::Whole, &bytes, &[]);
        for cut in 0..=bytes.len() {
            prop_assert_eq!(&receive(Role::Server, Delivery::Whole, &bytes, &[cut]), &whole);
            prop_assert_eq!(&receive_in_place(Role::Server, &bytes, &[cut], Poll::Owned), &whole);
            prop_assert_eq!(&receive_in_place(Role::Server, &bytes, &[cut], Poll::Mixed), &whole);
        }
    }
}
