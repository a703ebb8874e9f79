//! A client and a server `Connection` wired through in-memory buffers.

use std::time::{Duration, Instant};

use bytes::Buf;
use rapidws::Role;
use rapidws::codec::{CloseCode, MessageKind, ProtocolError};
use rapidws::connection::{
    Config, Connection, Delivery, Error, Event, OwnedEvent, SendError, Timeout,
};
use rapidws::{CloseFrame, Message, PreparedMessage};

mod connection_support;
use connection_support::drain;

struct Pair {
    client: Connection,
    server: Connection,
    now: Instant,
}

impl Pair {
    fn new() -> Self {
        Self::with(Config::default(), Config::default())
    }

    fn with(client: Config, server: Config) -> Self {
        let now = Instant::now();
        Pair {
            client: Connection::new(Role::Client, client, now),
            server: Connection::new(Role::Server, server, now),
            now,
        }
    }
}

/// Moves everything `from` wants to write into `to`, through the vectored `Buf` view.
fn pump(from: &mut Connection, to: &mut Connection, now: Instant) -> usize {
    let mut wire = Vec::new();
    while let Some(mut t) = from.poll_transmit() {
        while t.has_remaining() {
            let c = t.chunk();
            wire.extend_from_slice(c);
            let n = c.len();
            t.advance(n);
        }
    }
    to.handle_bytes(now, &wire);
    wire.len()
}

fn msg(kind: MessageKind, data: &[u8]) -> Result<OwnedEvent, Error> {
    Ok(OwnedEvent::Message {
        kind,
        data: bytes::Bytes::copy_from_slice(data),
    })
}

#[test]
fn messages_flow_both_ways() {
    let mut p = Pair::new();
    p.client.send_text("hello").unwrap();
    p.client.send_binary(&[1, 2, 3]).unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(
        drain(&mut p.server),
        vec![
            msg(MessageKind::Text, b"hello"),
            msg(MessageKind::Binary, &[1, 2, 3])
        ]
    );
    p.server.send_text("world").unwrap();
    pump(&mut p.server, &mut p.client, p.now);
    assert_eq!(drain(&mut p.client), vec![msg(MessageKind::Text, b"world")]);
}

#[test]
fn borrowed_events_give_the_payload() {
    let mut p = Pair::new();
    p.client.send_text("borrowed").unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    match p.server.poll_event() {
        Some(Ok(Event::Message(m))) => assert_eq!(m.as_text(), Some("borrowed")),
        other => panic!("{other:?}"),
    }
    assert!(p.server.poll_event().is_none());
}

#[test]
fn ping_is_answered_automatically() {
    let mut p = Pair::new();
    p.client.ping(b"are you there").unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(
        drain(&mut p.server),
        vec![Ok(OwnedEvent::Ping(bytes::Bytes::from_static(
            b"are you there"
        )))]
    );
    pump(&mut p.server, &mut p.client, p.now);
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Pong(bytes::Bytes::from_static(
            b"are you there"
        )))]
    );
}

#[test]
fn auto_pong_can_be_turned_off() {
    let mut cfg = Config::default();
    cfg.auto_pong = false;
    let mut p = Pair::with(Config::default(), cfg);
    p.client.ping(b"x").unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(drain(&mut p.server).len(), 1);
    assert!(!p.server.has_pending_output());
}

#[test]
fn fragmented_message_with_interleaved_ping_is_assembled() {
    let mut p = Pair::new();
    p.client.begin_message(MessageKind::Text).unwrap();
    p.client.send_chunk("frag".as_bytes()).unwrap();
    p.client.ping(b"mid").unwrap();
    p.client.send_chunk("ment".as_bytes()).unwrap();
    // A whole message in the middle of a fragmented one is refused.
    assert_eq!(p.client.send_text("no"), Err(SendError::MessageInProgress));
    p.client.end_message("ed".as_bytes()).unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(
        drain(&mut p.server),
        vec![
            Ok(OwnedEvent::Ping(bytes::Bytes::from_static(b"mid"))),
            msg(MessageKind::Text, b"fragmented")
        ]
    );
}

#[test]
fn chunk_delivery_streams_the_message() {
    let mut cfg = Config::default();
    cfg.delivery = Delivery::Chunks;
    let mut p = Pair::with(Config::default(), cfg);
    p.client.begin_message(MessageKind::Binary).unwrap();
    p.client.send_chunk(&[1; 100]).unwrap();
    p.client.end_message(&[2; 50]).unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    let evs = drain(&mut p.server);
    let mut total = Vec::new();
    for (i, e) in evs.iter().enumerate() {
        match e {
            Ok(OwnedEvent::Chunk {
                kind: MessageKind::Binary,
                data,
                first,
                fin,
            }) => {
                assert_eq!(*first, i == 0);
                assert_eq!(*fin, i == evs.len() - 1);
                total.extend_from_slice(data);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(total, [vec![1; 100], vec![2; 50]].concat());
}

/// `send_chunk_bytes` queues a server's large chunk as it is: the bytes the queue hands
/// the writer are the caller's own, not a copy; a client's are masked (a copy), and both
/// arrive as the message sent, with a small last chunk given away too.
#[test]
fn a_chunk_given_away_is_queued_without_a_copy_by_a_server() {
    let big = bytes::Bytes::from(vec![7u8; 8 * 1024]);
    let tail = bytes::Bytes::from_static(b"end");
    for role in [Role::Server, Role::Client] {
        let mut p = Pair::new();
        let (from, to) = match role {
            Role::Server => (&mut p.server, &mut p.client),
            Role::Client => (&mut p.client, &mut p.server),
        };
        from.begin_message(MessageKind::Binary).unwrap();
        from.send_chunk_bytes(big.clone()).unwrap();
        let mut slices = [std::io::IoSlice::new(&[]); 8];
        let n = from.io_slices(&mut slices);
        let shares = slices[..n].iter().any(|s| s.as_ptr() == big.as_ptr());
        assert_eq!(shares, role == Role::Server, "{role:?}");
        from.end_message_bytes(tail.clone()).unwrap();
        pump(from, to, p.now);
        let sent = [&big[..], &tail[..]].concat();
        assert_eq!(drain(to), vec![msg(MessageKind::Binary, &sent)], "{role:?}");
    }
}

#[test]
fn chunk_delivery_hands_over_partial_frames_as_they_arrive() {
    let mut cfg = Config::default();
    cfg.delivery = Delivery::Chunks;
    let mut p = Pair::with(Config::default(), cfg);
    p.client.send_binary(&[7; 1000]).unwrap();
    let mut wire = Vec::new();
    p.client.write_pending(&mut wire);
    let mut got = 0;
    for piece in wire.chunks(300) {
        p.server.handle_bytes(p.now, piece);
        while let Some(e) = p.server.poll_event() {
            match e {
                Ok(Event::Chunk { data, .. }) => got += data.len(),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(got, 1000);
}

#[test]
fn a_whole_message_is_sent_by_its_kind_and_the_clock_is_read_for_a_close_only() {
    let mut p = Pair::new();
    let now = p.now;
    let reads = std::cell::Cell::new(0);
    let clock = || {
        reads.set(reads.get() + 1);
        now
    };
    let sends = [
        Message::text("t"),
        Message::binary(vec![1u8, 2]),
        Message::Ping(bytes::Bytes::from_static(b"p")),
    ];
    for m in sends {
        p.client
            .send_message(m, rapidws::Compression::Auto, clock)
            .unwrap();
    }
    assert_eq!(reads.get(), 0);
    p.client
        .send_message(Message::Close(None), rapidws::Compression::Auto, clock)
        .unwrap();
    assert_eq!(reads.get(), 1);
    pump(&mut p.client, &mut p.server, p.now);
    let got = drain(&mut p.server);
    assert_eq!(got[0], msg(MessageKind::Text, b"t"));
    assert_eq!(got[1], msg(MessageKind::Binary, &[1, 2]));
    assert_eq!(
        got[2],
        Ok(OwnedEvent::Ping(bytes::Bytes::from_static(b"p")))
    );
    // No close frame: 1000 without a reason.
    assert_eq!(
        got[3],
        Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::NORMAL,
            ""
        ))))
    );
    assert_eq!(
        p.client
            .send_message(Message::text("late"), rapidws::Compression::Auto, clock),
        Err(SendError::Closed)
    );
}

#[test]
fn a_1005_close_without_a_reason_is_sent_as_a_close_frame_without_a_code() {
    let mut p = Pair::new();
    let now = p.now;
    let no_code = Message::Close(Some(CloseFrame::new(CloseCode::NO_STATUS, "")));
    p.client
        .send_message(no_code, rapidws::Compression::Auto, || now)
        .unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    // The frame a code-less close is reported as, so echoing it sends it back as it came.
    assert_eq!(drain(&mut p.server), [Ok(OwnedEvent::Close(None))]);
    assert_eq!(
        p.server.peer_close().map(|c| c.code),
        Some(CloseCode::NO_STATUS)
    );
    // With a reason, or through `close`, 1005 is still refused.
    let mut p = Pair::new();
    let with_reason = Message::Close(Some(CloseFrame::new(CloseCode::NO_STATUS, "r")));
    assert_eq!(
        p.client
            .send_message(with_reason, rapidws::Compression::Auto, || now),
        Err(SendError::InvalidCloseCode(CloseCode::NO_STATUS))
    );
}

#[test]
fn close_initiated_by_client() {
    let mut p = Pair::new();
    p.client.close(p.now, CloseCode::NORMAL, "bye").unwrap();
    assert_eq!(p.client.send_text("late"), Err(SendError::Closed));
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(
        drain(&mut p.server),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::NORMAL,
            "bye"
        ))))]
    );
    assert!(p.server.is_closed());
    pump(&mut p.server, &mut p.client, p.now);
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::NORMAL,
            ""
        ))))]
    );
    assert!(p.client.is_closed());
    assert_eq!(p.server.send_text("late"), Err(SendError::Closed));
}

#[test]
fn close_initiated_by_server() {
    let mut p = Pair::new();
    p.server.close(p.now, CloseCode::GOING_AWAY, "").unwrap();
    pump(&mut p.server, &mut p.client, p.now);
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::GOING_AWAY,
            ""
        ))))]
    );
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(drain(&mut p.server).len(), 1);
    assert!(p.client.is_closed() && p.server.is_closed());
}

#[test]
fn simultaneous_close_completes_on_both_sides() {
    let mut p = Pair::new();
    p.client.close(p.now, CloseCode::NORMAL, "c").unwrap();
    p.server.close(p.now, CloseCode::NORMAL, "s").unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    pump(&mut p.server, &mut p.client, p.now);
    assert_eq!(
        drain(&mut p.server),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::NORMAL,
            "c"
        ))))]
    );
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::NORMAL,
            "s"
        ))))]
    );
    assert!(p.client.is_closed() && p.server.is_closed());
    // Neither echoes a second close.
    assert!(!p.client.has_pending_output() && !p.server.has_pending_output());
}

#[test]
fn close_after_close_is_refused() {
    let mut p = Pair::new();
    p.client.close(p.now, CloseCode::NORMAL, "").unwrap();
    assert_eq!(
        p.client.close(p.now, CloseCode::NORMAL, ""),
        Err(SendError::Closed)
    );
    assert_eq!(p.client.ping(b""), Err(SendError::Closed));
}

#[test]
fn data_after_our_close_is_delivered_until_the_peers_close() {
    let mut p = Pair::new();
    // Fragmented too: the peer may finish the message it was sending (RFC 6455 5.5.1).
    p.server.send_text("in flight").unwrap();
    p.server.begin_message(MessageKind::Binary).unwrap();
    p.server.send_chunk(b"first ").unwrap();
    p.client.close(p.now, CloseCode::NORMAL, "").unwrap();
    pump(&mut p.server, &mut p.client, p.now);
    let got = drain(&mut p.client);
    assert!(
        matches!(&got[..], [Ok(OwnedEvent::Message { data, .. })] if &data[..] == b"in flight"),
        "{got:?}"
    );
    p.server.end_message(b"half").unwrap();
    pump(&mut p.server, &mut p.client, p.now);
    let got = drain(&mut p.client);
    assert!(
        matches!(&got[..], [Ok(OwnedEvent::Message { data, .. })] if &data[..] == b"first half"),
        "{got:?}"
    );
    assert!(!p.client.is_closed());
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(drain(&mut p.server).len(), 1);
    pump(&mut p.server, &mut p.client, p.now);
    let got = drain(&mut p.client);
    assert!(matches!(&got[..], [Ok(OwnedEvent::Close(_))]), "{got:?}");
    assert!(p.client.is_closed());
}

#[test]
fn invalid_close_codes_cannot_be_sent() {
    let mut p = Pair::new();
    for code in [1005u16, 1006, 1015, 999, 5000] {
        assert_eq!(
            p.client.close(p.now, CloseCode(code), ""),
            Err(SendError::InvalidCloseCode(CloseCode(code)))
        );
    }
    assert_eq!(
        p.client.close(p.now, CloseCode::NORMAL, &"x".repeat(124)),
        Err(SendError::ControlTooLong)
    );
    assert!(
        p.client
            .close(p.now, CloseCode::NORMAL, &"x".repeat(123))
            .is_ok()
    );
}

#[test]
fn control_payload_over_125_refused_on_send() {
    let mut p = Pair::new();
    assert_eq!(p.client.ping(&[0; 126]), Err(SendError::ControlTooLong));
    assert_eq!(p.client.pong(&[0; 126]), Err(SendError::ControlTooLong));
}

fn expect_failure(bytes: &[u8], role: Role, code: u16, err: ProtocolError) {
    let now = Instant::now();
    let mut conn = Connection::new(role, Config::default(), now);
    conn.handle_bytes(now, bytes);
    assert_eq!(drain(&mut conn), vec![Err(Error::Protocol(err))]);
    assert!(conn.is_closed());
    let mut wire = Vec::new();
    conn.write_pending(&mut wire);
    // The close we sent carries the mapped code: unmasked from a server, masked from a client.
    let mut peer = Connection::new(
        if role == Role::Client {
            Role::Server
        } else {
            Role::Client
        },
        Config::default(),
        now,
    );
    peer.handle_bytes(now, &wire);
    assert_eq!(
        drain(&mut peer),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode(code),
            // A limit says which one it was; other failures carry the code alone.
            if code == 1009 { "message too big" } else { "" }
        ))))]
    );
}

#[test]
fn protocol_error_sends_1002() {
    expect_failure(
        &[0x83, 0x00],
        Role::Client,
        1002,
        ProtocolError::UnknownOpcode(3),
    );
    expect_failure(
        &[0x82, 0x00],
        Role::Server,
        1002,
        ProtocolError::UnmaskedFrame,
    );
}

#[test]
fn invalid_utf8_sends_1007() {
    expect_failure(
        &[0x81, 0x02, 0xc3, 0x28],
        Role::Client,
        1007,
        ProtocolError::InvalidUtf8,
    );
}

#[test]
fn oversized_frame_sends_1009() {
    expect_failure(
        &[0x82, 0x7f, 0, 0, 0, 0x10, 0, 0, 0, 0],
        Role::Client,
        1009,
        ProtocolError::FrameTooLarge,
    );
}

#[test]
fn error_is_reported_once_then_nothing() {
    let now = Instant::now();
    let mut conn = Connection::new(Role::Client, Config::default(), now);
    conn.handle_bytes(now, &[0x83, 0x00, 0x81, 0x01, b'a']);
    assert!(matches!(conn.poll_event(), Some(Err(_))));
    assert!(conn.poll_event().is_none());
    conn.handle_bytes(now, &[0x81, 0x01, b'a']);
    assert!(conn.poll_event().is_none());
    assert_eq!(conn.send_text("x"), Err(SendError::Closed));
}

#[test]
fn message_over_limit_in_fragments_fails_with_1009() {
    let mut cfg = Config::default();
    cfg.max_message_size = 100;
    let mut p = Pair::with(Config::default(), cfg);
    p.client.begin_message(MessageKind::Binary).unwrap();
    p.client.send_chunk(&[0; 60]).unwrap();
    p.client.end_message(&[0; 60]).unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(
        drain(&mut p.server),
        vec![Err(Error::Protocol(ProtocolError::MessageTooLarge))]
    );
    pump(&mut p.server, &mut p.client, p.now);
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::TOO_BIG,
            "message too big"
        ))))]
    );
}

#[test]
fn prepared_message_goes_to_both_roles_and_a_client_masks_its_copy() {
    let mut p = Pair::new();
    let prepared = PreparedMessage::text("broadcast");
    p.server.send_prepared(&prepared).unwrap();
    // The server queues the shared frame as it is: the same bytes, unmasked.
    let mut wire = Vec::new();
    p.server.write_pending(&mut wire);
    assert_eq!(wire, prepared.frame()[..]);
    p.client.handle_bytes(p.now, &wire);
    assert_eq!(
        drain(&mut p.client),
        vec![msg(MessageKind::Text, b"broadcast")]
    );
    // A client masks every frame with a fresh key (RFC 6455 5.3): its own masked copy.
    p.client.send_prepared(&prepared).unwrap();
    let mut wire = Vec::new();
    p.client.write_pending(&mut wire);
    assert_eq!(wire[1] & 0x80, 0x80, "masked");
    assert_eq!(wire.len(), prepared.frame().len() + 4);
    p.server.handle_bytes(p.now, &wire);
    assert_eq!(
        drain(&mut p.server),
        vec![msg(MessageKind::Text, b"broadcast")]
    );
}

#[test]
fn server_send_bytes_does_not_copy() {
    let mut p = Pair::new();
    let payload = bytes::Bytes::from(vec![5u8; 4096]);
    p.server
        .send_bytes(MessageKind::Binary, payload.clone())
        .unwrap();
    let t = p.server.poll_transmit().unwrap();
    assert_eq!(t.payload().as_ptr(), payload.as_ptr());
    assert_eq!(t.header(), &[0x82, 0x7e, 0x10, 0x00]);
}

#[test]
fn transmit_gives_header_and_payload_as_two_io_slices() {
    let mut p = Pair::new();
    // Larger than what the queue copies next to its header (1.5 KiB).
    p.client.send_binary(&[9; 2000]).unwrap();
    let t = p.client.poll_transmit().unwrap();
    let mut slices = [std::io::IoSlice::new(&[]); 4];
    assert_eq!(t.chunks_vectored(&mut slices), 2);
    assert_eq!(slices[0].len(), 8);
    assert_eq!(slices[1].len(), 2000);
}

#[test]
fn small_frames_are_written_back_to_back_from_one_buffer() {
    let mut p = Pair::new();
    for _ in 0..10 {
        p.server.send_binary(&[7; 100]).unwrap();
    }
    let mut slices = [std::io::IoSlice::new(&[]); 16];
    assert_eq!(p.server.io_slices(&mut slices), 1, "one slice for all ten");
    assert_eq!(slices[0].len(), 10 * 102);
    p.server.advance_output(1020);
    assert!(!p.server.has_pending_output());
}

#[test]
fn keepalive_ping_then_pong_timeout() {
    let mut cfg = Config::default();
    cfg.keepalive_interval = Some(Duration::from_secs(10));
    cfg.pong_timeout = Some(Duration::from_secs(5));
    let t0 = Instant::now();
    let mut conn = Connection::new(Role::Server, cfg, t0);
    assert_eq!(conn.poll_timeout(), Some(t0 + Duration::from_secs(10)));
    conn.handle_timeout(t0 + Duration::from_secs(10));
    let ping = conn.poll_transmit().unwrap();
    assert_eq!(ping.header(), &[0x89, 0x00]);
    assert_eq!(conn.poll_timeout(), Some(t0 + Duration::from_secs(15)));
    let t15 = t0 + Duration::from_secs(15);
    conn.handle_timeout(t15);
    assert_eq!(drain(&mut conn), vec![Err(Error::Timeout(Timeout::Pong))]);
    assert!(conn.is_closed() && !conn.is_done());
    // Our close tells the peer why (1001), then the teardown lingers for its deadline.
    let mut wire = Vec::new();
    conn.write_pending(&mut wire);
    assert_eq!(&wire[..4], &[0x88, 31, 0x03, 0xe9], "{wire:x?}");
    assert_eq!(&wire[4..], b"no pong to the keepalive ping");
    assert_eq!(conn.poll_timeout(), Some(t15 + Duration::from_secs(1)));
    conn.handle_timeout(t15 + Duration::from_secs(1));
    assert!(conn.is_done());
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn keepalive_pong_answer_rearms_the_timer() {
    let mut cfg = Config::default();
    cfg.keepalive_interval = Some(Duration::from_secs(10));
    let mut p = Pair::with(Config::default(), cfg);
    let t1 = p.now + Duration::from_secs(10);
    p.server.handle_timeout(t1);
    pump(&mut p.server, &mut p.client, t1);
    assert_eq!(drain(&mut p.client).len(), 1);
    let t2 = t1 + Duration::from_secs(1);
    pump(&mut p.client, &mut p.server, t2);
    assert_eq!(drain(&mut p.server).len(), 1);
    // The buffers go back a moment after the pong; the next keepalive ping is then due
    // an interval after it.
    p.server.release_idle_memory();
    assert_eq!(p.server.poll_timeout(), Some(t2 + Duration::from_secs(10)));
}

#[test]
fn close_handshake_times_out() {
    let t0 = Instant::now();
    let mut conn = Connection::new(Role::Client, Config::default(), t0);
    conn.close(t0, CloseCode::NORMAL, "").unwrap();
    assert_eq!(conn.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    conn.handle_timeout(t0 + Duration::from_secs(4));
    assert!(drain(&mut conn).is_empty());
    conn.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(drain(&mut conn), vec![Err(Error::Timeout(Timeout::Close))]);
    assert!(conn.is_closed());
}

#[test]
fn close_after_a_quiet_spell_waits_the_close_timeout_from_the_call() {
    let quiet = Config::default()
        .with_keepalive(None, Duration::from_secs(30))
        .with_idle_timeout(None);
    let mut p = Pair::with(quiet.clone(), quiet);
    let t0 = p.now;
    p.client.send_text("hello").unwrap();
    pump(&mut p.client, &mut p.server, t0);
    assert_eq!(drain(&mut p.server).len(), 1);
    // An hour passes with nothing received and no timer armed; the close then starts the
    // wait for the peer's close at the time of the call, not at the last received byte.
    let later = t0 + Duration::from_secs(3600);
    // (The memory timer gives the receive buffer back a moment after the message.)
    p.server.handle_timeout(t0 + Duration::from_secs(1));
    assert_eq!(p.server.poll_timeout(), None);
    p.server.close(later, CloseCode::NORMAL, "").unwrap();
    assert_eq!(
        p.server.poll_timeout(),
        Some(later + Duration::from_secs(5))
    );
    p.server.handle_timeout(later + Duration::from_secs(4));
    assert!(drain(&mut p.server).is_empty());
    assert!(!p.server.is_closed());
    // The peer's answer within the timeout completes the handshake.
    pump(&mut p.server, &mut p.client, later + Duration::from_secs(1));
    assert_eq!(drain(&mut p.client).len(), 1);
    pump(&mut p.client, &mut p.server, later + Duration::from_secs(4));
    assert!(matches!(
        drain(&mut p.server).as_slice(),
        [Ok(OwnedEvent::Close(Some(CloseFrame {
            code: CloseCode::NORMAL,
            ..
        })))]
    ));
    assert!(p.server.is_closed());
}

#[test]
fn idle_timeout_closes_with_1001() {
    let mut cfg = Config::default().with_keepalive(None, Duration::from_secs(30));
    cfg.idle_timeout = Some(Duration::from_secs(60));
    let t0 = Instant::now();
    let mut conn = Connection::new(Role::Server, cfg, t0);
    conn.handle_bytes(t0 + Duration::from_secs(30), &[0x89, 0x80, 0, 0, 0, 0]);
    // A whole frame (the ping) is progress once decoded.
    assert_eq!(drain(&mut conn).len(), 1);
    // First the memory timer gives the buffers back, then the idle timer is next.
    let _ = conn.poll_transmit();
    assert_eq!(
        conn.poll_timeout(),
        Some(t0 + Duration::from_secs(30) + Duration::from_millis(250))
    );
    conn.handle_timeout(t0 + Duration::from_secs(31));
    assert_eq!(conn.poll_timeout(), Some(t0 + Duration::from_secs(90)));
    conn.handle_timeout(t0 + Duration::from_secs(90));
    let evs = drain(&mut conn);
    assert_eq!(evs.last(), Some(&Err(Error::Timeout(Timeout::Idle))));
    let mut wire = Vec::new();
    conn.write_pending(&mut wire);
    assert!(wire.ends_with(b"\x88\x0e\x03\xe9idle timeout"), "{wire:x?}");
}

#[test]
fn a_trickle_of_bytes_is_no_progress_for_the_idle_timer() {
    let mut cfg = Config::default().with_keepalive(None, Duration::from_secs(30));
    cfg.idle_timeout = Some(Duration::from_secs(60));
    let t0 = Instant::now();
    let mut conn = Connection::new(Role::Server, cfg, t0);
    // One byte of a frame header every 25 s never completes a frame.
    let frame = [0x82u8, 0xfe, 0x10, 0x00, 1, 2, 3, 4];
    let mut t = t0;
    for b in frame {
        t += Duration::from_secs(25);
        if t >= t0 + Duration::from_secs(60) {
            break;
        }
        conn.handle_bytes(t, &[b]);
        assert!(drain(&mut conn).is_empty());
    }
    assert_eq!(conn.poll_timeout(), Some(t0 + Duration::from_secs(60)));
    conn.handle_timeout(t0 + Duration::from_secs(60));
    assert_eq!(drain(&mut conn), vec![Err(Error::Timeout(Timeout::Idle))]);
}

#[test]
fn a_fragmented_message_must_complete_within_the_message_timeout() {
    let cfg = Config::default()
        .with_keepalive(None, Duration::from_secs(30))
        .with_idle_timeout(None)
        .with_message_timeout(Some(Duration::from_secs(30)));
    let mut p = Pair::with(Config::default(), cfg);
    let t0 = p.now;
    p.client.begin_message(MessageKind::Text).unwrap();
    p.client.send_chunk(b"first part, ").unwrap();
    pump(&mut p.client, &mut p.server, t0);
    assert!(drain(&mut p.server).is_empty());
    // (The memory timer comes first, 250 ms after the bytes; then the message deadline.)
    p.server.release_idle_memory();
    assert_eq!(p.server.poll_timeout(), Some(t0 + Duration::from_secs(30)));
    // More fragments do not move the deadline: it counts from the first.
    p.client.send_chunk(b"second part").unwrap();
    pump(&mut p.client, &mut p.server, t0 + Duration::from_secs(20));
    assert!(drain(&mut p.server).is_empty());
    p.server.handle_timeout(t0 + Duration::from_secs(30));
    assert_eq!(
        drain(&mut p.server),
        vec![Err(Error::Timeout(Timeout::Message))]
    );
    pump(&mut p.server, &mut p.client, t0 + Duration::from_secs(30));
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::POLICY,
            "message not completed in time"
        ))))]
    );
}

#[test]
fn a_first_frame_that_arrives_in_pieces_starts_the_message_timer() {
    let cfg = Config::default()
        .with_keepalive(None, Duration::from_secs(30))
        .with_idle_timeout(None)
        .with_message_timeout(Some(Duration::from_secs(30)));
    for delivery in [Delivery::Whole, Delivery::Chunks] {
        let mut server_cfg = cfg.clone();
        server_cfg.delivery = delivery;
        let mut p = Pair::with(Config::default(), server_cfg);
        let t0 = p.now;
        p.client.begin_message(MessageKind::Binary).unwrap();
        p.client.send_chunk(&[7; 5000]).unwrap();
        let mut wire = Vec::new();
        p.client.write_pending(&mut wire);
        // The first frame arrives in three reads; it ends in the last.
        for (i, piece) in wire.chunks(2000).enumerate() {
            p.server
                .handle_bytes(t0 + Duration::from_secs(i as u64), piece);
            drain(&mut p.server);
        }
        p.server.release_idle_memory();
        assert_eq!(
            p.server.poll_timeout(),
            Some(t0 + Duration::from_secs(32)),
            "{delivery:?}: the deadline counts from the end of the first frame"
        );
        p.server.handle_timeout(t0 + Duration::from_secs(32));
        assert_eq!(
            drain(&mut p.server),
            vec![Err(Error::Timeout(Timeout::Message))],
            "{delivery:?}"
        );
    }
}

#[test]
fn the_default_keepalive_comes_first_and_no_timer_runs_when_all_are_off() {
    let t0 = Instant::now();
    let conn = Connection::new(Role::Client, Config::default(), t0);
    assert_eq!(conn.poll_timeout(), Some(t0 + Duration::from_secs(30)));
    let quiet = Config::default()
        .with_keepalive(None, Duration::from_secs(30))
        .with_idle_timeout(None);
    let conn = Connection::new(Role::Client, quiet, t0);
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn auto_close_off_leaves_the_reply_to_the_caller() {
    let mut cfg = Config::default();
    cfg.auto_close = false;
    let mut p = Pair::with(Config::default(), cfg);
    p.client.close(p.now, CloseCode::NORMAL, "").unwrap();
    pump(&mut p.client, &mut p.server, p.now);
    assert_eq!(drain(&mut p.server).len(), 1);
    assert!(!p.server.has_pending_output());
    assert!(!p.server.is_closed());
    p.server.close(p.now, CloseCode(4000), "app").unwrap();
    assert!(p.server.is_closed());
    pump(&mut p.server, &mut p.client, p.now);
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode(4000),
            "app"
        ))))]
    );
}

#[test]
fn many_small_messages_in_one_read() {
    let mut p = Pair::new();
    for i in 0..500u32 {
        p.client.send_binary(&i.to_be_bytes()).unwrap();
    }
    pump(&mut p.client, &mut p.server, p.now);
    let evs = drain(&mut p.server);
    assert_eq!(evs.len(), 500);
    for (i, e) in evs.into_iter().enumerate() {
        assert_eq!(e, msg(MessageKind::Binary, &(i as u32).to_be_bytes()));
    }
}

#[test]
fn connection_and_transmit_can_move_between_threads() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<Connection>();
    assert_send::<rapidws::connection::Transmit>();
    assert_send::<OwnedEvent>();
    assert_send::<Error>();
}

#[test]
fn invalid_utf8_fails_before_the_message_ends() {
    let mut cfg = Config::default();
    cfg.delivery = Delivery::Chunks;
    let mut p = Pair::with(Config::default(), cfg);
    p.client.begin_message(MessageKind::Text).unwrap();
    p.client.send_chunk(b"fine so far").unwrap();
    p.client.send_chunk(b"then \xff").unwrap();
    // No end_message: FIN never comes, the error must not wait for it.
    pump(&mut p.client, &mut p.server, p.now);
    let evs = drain(&mut p.server);
    assert!(matches!(
        evs.first(),
        Some(Ok(OwnedEvent::Chunk {
            first: true,
            fin: false,
            ..
        }))
    ));
    assert_eq!(
        evs.last(),
        Some(&Err(Error::Protocol(ProtocolError::InvalidUtf8)))
    );
}

#[test]
fn announced_frame_size_does_not_allocate_ahead() {
    let now = Instant::now();
    let mut conn = Connection::new(Role::Client, Config::default(), now);
    // A header announcing 10 MiB, followed by only 100 bytes of it.
    let mut bytes = vec![0x82, 0x7f, 0, 0, 0, 0, 0, 0xa0, 0, 0];
    bytes.extend_from_slice(&[0; 100]);
    conn.handle_bytes(now, &bytes);
    assert!(conn.poll_event().is_none());
    assert!(conn.recv_buffer().capacity() < 64 * 1024);
}

/// Feeds `client`'s pending output to `server` through `reserve_read`, each read filling
/// the room offered, until a message comes out; returns it and the number of reads.
fn read_one_message(
    server: &mut Connection,
    client: &mut Connection,
    now: Instant,
) -> (Message, usize) {
    let mut wire = Vec::new();
    client.write_pending(&mut wire);
    let mut at = 0;
    let mut reads = 0;
    loop {
        if let Some(ev) = server.poll_message() {
            return (ev.unwrap(), reads);
        }
        assert!(at < wire.len(), "the message was all delivered");
        at += read_some(server, &wire, at, now);
        reads += 1;
    }
}

/// One read as an IO layer does it: the bytes of `wire` from `at`, up to the room
/// `reserve_read` offers, into `server`; returns how many it took.
fn read_some(server: &mut Connection, wire: &[u8], at: usize, now: Instant) -> usize {
    let buf = server.reserve_read();
    let n = (buf.capacity() - buf.len()).min(wire.len() - at);
    buf.extend_from_slice(&wire[at..at + n]);
    server.handle_received(now);
    n
}

/// In chunk delivery each read is handed over as a chunk, so a read takes no more than the
/// read size (`read_limit`) even where the buffer has more room: here the 64 KiB buffer a
/// connection reading 64 KiB at a time gave to the thread's stock, which the next read of a
/// chunk-delivery connection on the thread takes. The chunk is what the read brought.
#[test]
fn a_chunk_read_takes_no_more_than_the_read_size_from_a_larger_stocked_buffer() {
    let now = Instant::now();
    let mut client = Connection::new(Role::Client, Config::default(), now);
    let mut wide = Config::default();
    wide.read_buffer_size = 64 * 1024;
    let mut big = Connection::new(Role::Server, wide, now);
    client.send(MessageKind::Binary, &[1; 10]).unwrap();
    let (m, _) = read_one_message(&mut big, &mut client, now);
    assert_eq!(m.as_bytes(), &[1; 10][..]);
    drop(m);
    big.read_would_block();

    let mut cfg = Config::default();
    cfg.delivery = Delivery::Chunks;
    let mut chunked = Connection::new(Role::Server, cfg, now);
    client.send(MessageKind::Binary, &[2; 200 * 1024]).unwrap();
    let mut wire = Vec::new();
    client.write_pending(&mut wire);
    let limit = chunked.read_limit();
    let buf = chunked.reserve_read();
    let room = buf.capacity() - buf.len();
    assert!(room >= 64 * 1024, "the stocked buffer was taken: {room}");
    assert!(limit <= 16 * 1024, "{limit}");
    // The read as the tokio layer makes it.
    let n = room.min(limit);
    buf.extend_from_slice(&wire[..n]);
    chunked.handle_received(now);
    let mut chunk = 0;
    while let Some(ev) = chunked.poll_event_owned() {
        match ev.unwrap() {
            OwnedEvent::Chunk { data, .. } => chunk += data.len(),
            other => panic!("{other:?}"),
        }
    }
    assert!(chunk > 0 && chunk <= limit, "one read's chunk: {chunk}");
}

/// A pipelined burst whose last frame is cut by the end of a read: once the complete
/// messages are taken, the room for the next read keeps only the cut frame's bytes (they
/// may move to a new buffer, never the burst before them), and the frame completes
/// with its rest.
#[test]
fn a_frame_cut_by_the_end_of_a_burst_is_carried_into_the_next_read() {
    let now = Instant::now();
    let mut client = Connection::new(Role::Client, Config::default(), now);
    let mut server = Connection::new(Role::Server, Config::default(), now);
    let payloads: Vec<Vec<u8>> = (0..65u8).map(|i| vec![i; 1024]).collect();
    for p in &payloads {
        client.send(MessageKind::Binary, p).unwrap();
    }
    let mut wire = Vec::new();
    client.write_pending(&mut wire);
    // Every frame is 1,032 bytes (2 + 2 length + 4 key + 1,024); the cut leaves 100
    // bytes of the last one for later.
    let cut = wire.len() - 100;
    let mut at = 0;
    let mut got = Vec::new();
    while at < cut {
        at += read_some(&mut server, &wire[..cut], at, now);
        while let Some(m) = server.poll_message() {
            got.push(m.unwrap());
        }
    }
    assert_eq!(got.len(), 64, "every frame but the cut one");
    let buf = server.reserve_read();
    // The cut frame's header and first 928 payload bytes (unmasked in place already).
    assert_eq!(
        buf.len(),
        1032 - 100,
        "only the cut frame's bytes are carried"
    );
    assert!(buf.capacity() - buf.len() >= 100, "room for the rest");
    buf.extend_from_slice(&wire[cut..]);
    server.handle_received(now);
    got.push(
        server
            .poll_message()
            .expect("the cut frame completes")
            .unwrap(),
    );
    let want: Vec<Message> = payloads
        .iter()
        .map(|p| Message::Binary(p.clone().into()))
        .collect();
    assert_eq!(got, want);
}

/// Reads through `reserve_read` as an IO layer does: each read takes what the socket has,
/// up to the room offered. A stream of 16 KiB messages, each in the socket whole, settles
/// to one read per message: the room made between messages fits the next one, so no frame
/// is read in part at the end of the buffer and moved before its rest fits.
#[test]
fn a_stream_of_16_kib_messages_settles_to_one_read_each() {
    let now = Instant::now();
    let mut client = Connection::new(Role::Client, Config::default(), now);
    let mut server = Connection::new(Role::Server, Config::default(), now);
    let payload = vec![7u8; 16 * 1024];
    let mut reads_per_message = Vec::new();
    for _ in 0..24 {
        client.send(MessageKind::Binary, &payload).unwrap();
        let (got, reads) = read_one_message(&mut server, &mut client, now);
        assert_eq!(got.as_bytes(), &payload[..]);
        reads_per_message.push(reads);
    }
    assert!(
        reads_per_message[4..].iter().all(|&r| r == 1),
        "reads per message: {reads_per_message:?}"
    );
}

/// A connection receiving large messages holds no receive buffer while it waits: a read
/// that finds nothing gives the empty buffer to the thread's stock, and the next
/// connection to read takes that same allocation; so does one with small messages that
/// come now and then.
#[test]
fn large_reads_share_one_buffer_through_the_stock_while_connections_wait() {
    let now = Instant::now();
    let pair = || {
        (
            Connection::new(Role::Client, Config::default(), now),
            Connection::new(Role::Server, Config::default(), now),
        )
    };
    let (mut ca, mut a) = pair();
    let (mut cb, mut b) = pair();
    let large = vec![3u8; 16 * 1024];
    for _ in 0..4 {
        ca.send(MessageKind::Binary, &large).unwrap();
        assert_eq!(
            read_one_message(&mut a, &mut ca, now).0.as_bytes(),
            &large[..]
        );
    }
    // The next read finds nothing: the buffer goes, and the connection still reads
    // through its own buffer (not as an idle connection does).
    a.reserve_read();
    a.read_would_block();
    assert_eq!(a.recv_buffer().capacity(), 0, "nothing held while waiting");
    assert!(!a.recv_buffer_is_unallocated());
    let stocked = a.reserve_read().as_ptr();
    a.read_would_block();
    // Another connection with something to read takes the same allocation.
    cb.send(MessageKind::Binary, &large).unwrap();
    assert_eq!(b.reserve_read().as_ptr(), stocked);
    assert_eq!(
        read_one_message(&mut b, &mut cb, now).0.as_bytes(),
        &large[..]
    );

    // Small messages arriving back to back: the buffer stays with its connection (the
    // memory timer gives it back if no more come).
    let (mut cc, mut c) = pair();
    for _ in 0..4 {
        cc.send(MessageKind::Binary, &[1; 1024]).unwrap();
        assert_eq!(
            read_one_message(&mut c, &mut cc, now).0.as_bytes(),
            &[1; 1024][..]
        );
    }
    c.reserve_read();
    c.read_would_block();
    assert!(
        c.recv_buffer().capacity() > 0,
        "a busy connection keeps its buffer"
    );
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_millis(250)));

    // Small messages now and then (a second apart): the buffer goes to the stock, and with
    // nothing else held no memory timer is armed (the next deadline is the keepalive's).
    let later = now + Duration::from_secs(1);
    cc.send(MessageKind::Binary, &[1; 1024]).unwrap();
    assert_eq!(
        read_one_message(&mut c, &mut cc, later).0.as_bytes(),
        &[1; 1024][..]
    );
    c.reserve_read();
    c.read_would_block();
    assert_eq!(c.poll_timeout(), Some(later + Duration::from_secs(30)));
    assert_eq!(c.recv_buffer().capacity(), 0, "nothing held while waiting");
    // The next read on the thread takes it back (after the client's send, whose output
    // chunk comes from the same stock).
    cc.send(MessageKind::Binary, &[2; 1024]).unwrap();
    let small = c.reserve_read().as_ptr();
    c.read_would_block();
    assert_eq!(c.reserve_read().as_ptr(), small);
    assert_eq!(
        read_one_message(&mut c, &mut cc, later).0.as_bytes(),
        &[2; 1024][..]
    );
}

/// Output waiting for a peer that does not read is no idle memory: the memory timer gives
/// back only what nothing uses, so with frames queued (the data queue's spill in use) no
/// deadline is left in the past, to fire on every poll (a stuck subscriber's connection
/// spun its task that way, starving the others on its thread).
#[test]
fn queued_output_leaves_no_memory_deadline_in_the_past() {
    let t0 = Instant::now();
    let mut conn = Connection::new(Role::Server, Config::default(), t0);
    for i in 0..8u8 {
        conn.send(MessageKind::Binary, &[i; 3000]).unwrap();
    }
    let later = t0 + Duration::from_secs(1);
    conn.handle_timeout(later);
    let next = conn.poll_timeout().expect("the keepalive runs");
    assert!(next > later, "a deadline {:?} before now", later - next);
}
