//! permessage-deflate through a client/server `Connection` pair.
#![cfg(feature = "deflate")]

use std::time::Instant;

use rapidws::codec::{CloseCode, MessageKind, ProtocolError};
use rapidws::connection::{Config, Connection, Delivery, Error, OwnedEvent};
use rapidws::deflate::{DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate};
use rapidws::{CloseFrame, Role};

mod connection_support;
mod noise;
use connection_support::drain;
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
