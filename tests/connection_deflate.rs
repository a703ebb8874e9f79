//! permessage-deflate through a client/server `Connection` pair.
#![cfg(feature = "deflate")]

use std::time::Instant;

use rapidws::codec::{CloseCode, MessageKind, ProtocolError};
use rapidws::connection::{Config, Connection, Delivery, Error, OwnedEvent};
use rapidws::deflate::{DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate};
use rapidws::{CloseFrame, Role};

mod connection_support;
mod noise;
use connection_support::{drain, quote};
use noise::noise;

fn conn(role: Role, config: Config) -> Connection {
    let mut dc = DeflateConfig::default();
    dc.min_size = 0;
    let mut c = Connection::new(role, config, Instant::now());
    c.set_deflate(PerMessageDeflate::new(role, DeflateParams::default(), &dc));
    c
}

fn wire_of(conn: &mut Connection) -> Vec<u8> {
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    out
}

fn text(s: &str) -> Result<OwnedEvent, Error> {
    Ok(OwnedEvent::Message {
        kind: MessageKind::Text,
        data: bytes::Bytes::copy_from_slice(s.as_bytes()),
    })
}

#[test]
fn compressed_messages_round_trip_both_ways_with_rsv1() {
    let mut client = conn(Role::Client, Config::default());
    let mut server = conn(Role::Server, Config::default());
    let msg = "compress me ".repeat(100);
    for _ in 0..3 {
        client.send_text(&msg).unwrap();
        let wire = wire_of(&mut client);
        assert_eq!(wire[0], 0xc1, "FIN + RSV1 + text");
        assert!(wire.len() < msg.len());
        server.handle_bytes(Instant::now(), &wire);
        assert_eq!(drain(&mut server), vec![text(&msg)]);
        server.send_text(&msg).unwrap();
        let wire = wire_of(&mut server);
        client.handle_bytes(Instant::now(), &wire);
        assert_eq!(drain(&mut client), vec![text(&msg)]);
    }
}

#[test]
fn compressed_fragmented_message_sets_rsv1_on_first_frame_only() {
    let mut client = conn(Role::Client, Config::default());
    let mut cfg = Config::default();
    cfg.delivery = Delivery::Chunks;
    let mut server = conn(Role::Server, cfg);
    client.begin_message(MessageKind::Binary).unwrap();
    client.send_chunk(&[1; 5000]).unwrap();
    client.send_chunk(&[2; 5000]).unwrap();
    client.end_message(&[3; 5000]).unwrap();
    let wire = wire_of(&mut client);
    server.handle_bytes(Instant::now(), &wire);
    // The first byte of each frame (small frames share one write, so walk the headers).
    let mut frames = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        frames.push(wire[at]);
        let (len, ext) = match wire[at + 1] & 0x7f {
            126 => (
                usize::from(u16::from_be_bytes([wire[at + 2], wire[at + 3]])),
                2,
            ),
            127 => unreachable!("no frame here is that large"),
            n => (usize::from(n), 0),
        };
        at += 2 + ext + 4 + len;
    }
    assert_eq!(frames.len(), 3, "one frame per chunk");
    assert_eq!(frames[0] & 0x40, 0x40);
    assert!(frames[1..].iter().all(|b| b & 0x40 == 0));
    let mut got = Vec::new();
    for e in drain(&mut server) {
        match e {
            Ok(OwnedEvent::Chunk { data, .. }) => got.extend_from_slice(&data),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got, [vec![1; 5000], vec![2; 5000], vec![3; 5000]].concat());
}

#[test]
fn inflate_stops_at_max_message_size() {
    let mut client = conn(Role::Client, Config::default());
    let mut cfg = Config::default();
    cfg.max_message_size = 100_000;
    let mut server = conn(Role::Server, cfg);
    // 1 MiB of zeros compresses to about a kilobyte: the limit must apply to inflated bytes.
    client.send_binary(&vec![0; 1 << 20]).unwrap();
    let wire = wire_of(&mut client);
    assert!(wire.len() < 100_000);
    server.handle_bytes(Instant::now(), &wire);
    assert_eq!(
        drain(&mut server),
        vec![Err(Error::Deflate(DeflateError::TooLarge))]
    );
    let mut peer = Connection::new(Role::Client, Config::default(), Instant::now());
    peer.handle_bytes(Instant::now(), &wire_of(&mut server));
    assert_eq!(
        drain(&mut peer),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::TOO_BIG,
            "message too big"
        ))))]
    );
}

#[test]
fn corrupt_deflate_data_fails_with_1007() {
    let mut client = conn(Role::Client, Config::default());
    // RSV1 + FIN + binary, unmasked (server to client), payload that is no deflate stream.
    client.handle_bytes(Instant::now(), &[0xc2, 0x04, 0xff, 0xff, 0xff, 0xff]);
    let evs = drain(&mut client);
    assert_eq!(evs, vec![Err(Error::Deflate(DeflateError::Corrupt))]);
    assert_eq!(
        evs[0].as_ref().unwrap_err().close_code(),
        Some(CloseCode(1007))
    );
}

#[test]
fn compressed_invalid_utf8_text_fails_with_1007() {
    let mut client = conn(Role::Client, Config::default());
    let mut server = conn(Role::Server, Config::default());
    client
        .send(MessageKind::Text, b"valid start \xff\xfe then not")
        .unwrap();
    server.handle_bytes(Instant::now(), &wire_of(&mut client));
    assert_eq!(
        drain(&mut server),
        vec![Err(Error::Protocol(ProtocolError::InvalidUtf8))]
    );
}

#[test]
fn rsv1_refused_when_deflate_not_agreed() {
    let mut client = Connection::new(Role::Client, Config::default(), Instant::now());
    client.handle_bytes(Instant::now(), &[0xc1, 0x01, b'a']);
    assert_eq!(
        drain(&mut client),
        vec![Err(Error::Protocol(ProtocolError::ReservedBits))]
    );
}

#[test]
fn incompressible_message_goes_with_rsv1_clear_and_text_around_it_still_decodes() {
    let mut client = conn(Role::Client, Config::default());
    let mut server = conn(Role::Server, Config::default());
    let msg = "compress me ".repeat(100);
    let random = noise(4096, 3);
    for round in 0..3 {
        server.send_text(&msg).unwrap();
        let wire = wire_of(&mut server);
        assert_eq!(wire[0], 0xc1, "FIN + RSV1 + text");
        client.handle_bytes(Instant::now(), &wire);
        assert_eq!(drain(&mut client), vec![text(&msg)]);
        // Both ways of sending: copied (`send`) and owned (`send_bytes`).
        if round % 2 == 0 {
            server.send_binary(&random).unwrap();
        } else {
            server
                .send_bytes(MessageKind::Binary, bytes::Bytes::from(random.clone()))
                .unwrap();
        }
        let wire = wire_of(&mut server);
        assert_eq!(wire[0], 0x82, "FIN + binary, RSV1 clear");
        assert_eq!(wire.len(), 4 + random.len(), "sent as it is");
        client.handle_bytes(Instant::now(), &wire);
        assert_eq!(
            drain(&mut client),
            vec![Ok(OwnedEvent::Message {
                kind: MessageKind::Binary,
                data: bytes::Bytes::from(random.clone()),
            })]
        );
    }
}

// ----- the per-send switch (`Compression`) -----

/// A server and a client that agreed `params`, with the default deflate settings (a
/// 128-byte threshold, the incompressibility test on).
fn agreed(params: DeflateParams) -> (Connection, Connection) {
    let settings = DeflateConfig::default();
    let now = Instant::now();
    let mut server = Connection::new(Role::Server, Config::default(), now);
    let mut client = Connection::new(Role::Client, Config::default(), now);
    server.set_deflate(PerMessageDeflate::new(Role::Server, params, &settings));
    client.set_deflate(PerMessageDeflate::new(Role::Client, params, &settings));
    (server, client)
}

/// The four agreements: context takeover both ways, neither way, and one way each.
fn agreements() -> [DeflateParams; 4] {
    [(false, false), (true, false), (false, true), (true, true)].map(|(s, c)| DeflateParams {
        server_no_context_takeover: s,
        client_no_context_takeover: c,
        ..DeflateParams::default()
    })
}

/// One frame on the wire: its first header byte and its payload length.
#[derive(Debug)]
struct Head {
    b0: u8,
    len: usize,
}

impl Head {
    fn rsv1(&self) -> bool {
        self.b0 & 0x40 != 0
    }
}

/// The frame headers in `wire` (masked or not).
fn heads(wire: &[u8]) -> Vec<Head> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        let b1 = wire[at + 1];
        let (len, mut next) = match b1 & 0x7f {
            126 => (
                usize::from(u16::from_be_bytes([wire[at + 2], wire[at + 3]])),
                at + 4,
            ),
            127 => {
                let len = u64::from_be_bytes(wire[at + 2..at + 10].try_into().unwrap());
                (len as usize, at + 10)
            }
            n => (usize::from(n), at + 2),
        };
        if b1 & 0x80 != 0 {
            next += 4;
        }
        out.push(Head { b0: wire[at], len });
        at = next + len;
    }
    assert_eq!(at, wire.len(), "the wire ends at a frame boundary");
    out
}

/// Sends with `send`, moves the bytes to `to`, and returns the one frame's header after
/// checking that `to` got `want`.
fn one(
    from: &mut Connection,
    to: &mut Connection,
    send: impl FnOnce(&mut Connection) -> Result<(), rapidws::connection::SendError>,
    want: Result<OwnedEvent, Error>,
) -> Head {
    send(from).unwrap();
    let wire = wire_of(from);
    to.handle_bytes(Instant::now(), &wire);
    assert_eq!(drain(to), vec![want]);
    let mut heads = heads(&wire);
    assert_eq!(heads.len(), 1, "one frame per message");
    heads.remove(0)
}

fn binary(data: &[u8]) -> Result<OwnedEvent, Error> {
    Ok(OwnedEvent::Message {
        kind: MessageKind::Binary,
        data: bytes::Bytes::copy_from_slice(data),
    })
}

#[test]
fn a_message_sent_uncompressed_keeps_rsv1_clear_and_the_next_compressed_one_inflates() {
    use rapidws::Compression::{Always, Auto, Never};
    for params in agreements() {
        for role in [Role::Server, Role::Client] {
            let (mut server, mut client) = agreed(params);
            let takeover = match role {
                Role::Server => !params.server_no_context_takeover,
                Role::Client => !params.client_no_context_takeover,
            };
            let (from, to) = match role {
                Role::Server => (&mut server, &mut client),
                Role::Client => (&mut client, &mut server),
            };
            let ctx = format!("{role:?} sending, {params:?}");
            let (a, b) = (quote(1), quote(2));

            let first = one(from, to, |c| c.send_text(&a), text(&a));
            assert_eq!(first.b0, 0xc1, "{ctx}: FIN + RSV1 + text");
            assert!(first.len < a.len() / 2, "{ctx}");

            // `b` goes as it is; our compressor must not see it, since the peer's
            // inflater will not.
            let plain = one(
                from,
                to,
                |c| c.send_with(MessageKind::Text, b.as_bytes(), Never),
                text(&b),
            );
            assert_eq!(plain.b0, 0x81, "{ctx}: FIN + text, RSV1 clear");
            assert_eq!(plain.len, b.len(), "{ctx}: the payload as it is");

            // Had the compressor seen `b`, this would refer back to bytes the peer
            // never inflated, and come out wrong or fail.
            let again = one(
                from,
                to,
                |c| c.send_with(MessageKind::Text, b.as_bytes(), Auto),
                text(&b),
            );
            assert!(again.rsv1(), "{ctx}");

            // `a` once more: with context takeover it refers back to the first message
            // (a few bytes); without, the compressor starts afresh and makes the same
            // bytes as the first time.
            let repeat = one(from, to, |c| c.send_text(&a), text(&a));
            assert!(repeat.rsv1(), "{ctx}");
            if takeover {
                assert!(
                    repeat.len < first.len / 4,
                    "{ctx}: {} vs {}",
                    repeat.len,
                    first.len
                );
            } else {
                assert_eq!(repeat.len, first.len, "{ctx}");
            }

            // Under the threshold, and random: compressed all the same when asked.
            let tiny = one(
                from,
                to,
                |c| c.send_with(MessageKind::Binary, b"tick", Always),
                binary(b"tick"),
            );
            assert_eq!(tiny.b0, 0xc2, "{ctx}: FIN + RSV1 + binary");
            let random = noise(2048, 7);
            let forced = one(
                from,
                to,
                |c| c.send_with(MessageKind::Binary, &random, Always),
                binary(&random),
            );
            assert!(forced.rsv1(), "{ctx}");
            // The incompressibility test still applies when not overridden.
            let skipped = one(from, to, |c| c.send_binary(&random), binary(&random));
            assert_eq!(skipped.b0, 0x82, "{ctx}");

            // The owned-payload form, both ways.
            let owned = one(
                from,
                to,
                |c| c.send_bytes_with(MessageKind::Text, a.clone().into(), Never),
                text(&a),
            );
            assert_eq!(owned.b0, 0x81, "{ctx}");
            let owned = one(
                from,
                to,
                |c| {
                    c.send_bytes_with(
                        MessageKind::Binary,
                        bytes::Bytes::from_static(b"tock"),
                        Always,
                    )
                },
                binary(b"tock"),
            );
            assert_eq!(owned.b0, 0xc2, "{ctx}");

            let last = one(from, to, |c| c.send_text(&b), text(&b));
            assert!(last.rsv1(), "{ctx}");
        }
    }
}

#[test]
fn a_fragmented_message_sent_uncompressed_keeps_rsv1_clear_on_every_frame() {
    use rapidws::Compression::{Always, Never};
    for params in agreements() {
        for role in [Role::Server, Role::Client] {
            let (mut server, mut client) = agreed(params);
            let (from, to) = match role {
                Role::Server => (&mut server, &mut client),
                Role::Client => (&mut client, &mut server),
            };
            let ctx = format!("{role:?} sending, {params:?}");
            let (a, b) = (quote(3), quote(4));
            from.send_text(&a).unwrap();

            from.begin_message_with(MessageKind::Text, Never).unwrap();
            from.send_chunk(&b.as_bytes()[..100]).unwrap();
            from.send_chunk(&b.as_bytes()[100..500]).unwrap();
            from.end_message(&b.as_bytes()[500..]).unwrap();
            // Compressed as a whole when asked to (as by default), however short.
            from.begin_message_with(MessageKind::Binary, Always)
                .unwrap();
            from.end_message(b"ab").unwrap();
            from.send_text(&b).unwrap();

            let wire = wire_of(from);
            let firsts: Vec<u8> = heads(&wire).iter().map(|h| h.b0).collect();
            assert_eq!(
                firsts,
                [0xc1, 0x01, 0x00, 0x80, 0xc2, 0xc1],
                "{ctx}: compressed, three plain fragments, compressed, compressed"
            );
            to.handle_bytes(Instant::now(), &wire);
            assert_eq!(
                drain(to),
                vec![text(&a), text(&b), binary(b"ab"), text(&b)],
                "{ctx}"
            );
        }
    }
}

#[test]
fn the_switch_is_ignored_without_permessage_deflate() {
    use rapidws::Compression::Always;
    let now = Instant::now();
    let mut server = Connection::new(Role::Server, Config::default(), now);
    let mut client = Connection::new(Role::Client, Config::default(), now);
    let a = quote(5);
    let head = one(
        &mut server,
        &mut client,
        |c| c.send_with(MessageKind::Text, a.as_bytes(), Always),
        text(&a),
    );
    assert_eq!((head.b0, head.len), (0x81, a.len()));
    client
        .begin_message_with(MessageKind::Binary, Always)
        .unwrap();
    client.end_message(b"xyz").unwrap();
    let wire = wire_of(&mut client);
    assert_eq!(wire[0], 0x82);
    server.handle_bytes(now, &wire);
    assert_eq!(drain(&mut server), vec![binary(b"xyz")]);
}
