//! Hostile frames against the sans-IO connection: each one gets its exact error and close
//! code, and memory stays bounded while it is refused.
//!
//! Memory is measured with a counting global allocator that keeps per-thread figures
//! (each test runs on its own thread), so parallel tests do not disturb each other.

use std::time::{Duration, Instant};

use rapidws::codec::{CloseCode, ProtocolError};
use rapidws::connection::{Config, Connection, Error, OwnedEvent};
use rapidws::{CloseFrame, Role};

mod alloc_count;
mod connection_support;
mod hostile_support;
use alloc_count::peak_during;
use connection_support::drain;
use hostile_support::raw_frame;

// ---------------------------------------------------------------------------------------
// Raw frames, as a hostile client would write them
// ---------------------------------------------------------------------------------------

/// A masked frame: FIN bit, opcode, payload.
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    raw_frame(
        if fin { 0x80 } else { 0 } | opcode,
        payload.len() as u64,
        payload,
    )
}

fn close_payload(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason);
    p
}

fn server(config: Config) -> Connection {
    Connection::new(Role::Server, config, Instant::now())
}

/// The close code in the (unmasked, server-sent) output, if the output holds a close frame.
fn sent_close_code(conn: &mut Connection) -> Option<u16> {
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    let mut pos = 0;
    while pos + 2 <= out.len() {
        let op = out[pos] & 0x0f;
        let len = (out[pos + 1] & 0x7f) as usize;
        assert!(len < 126, "the server only sends small frames here");
        if op == 0x8 {
            let p = &out[pos + 2..pos + 2 + len];
            return (p.len() >= 2).then(|| u16::from_be_bytes([p[0], p[1]]));
        }
        pos += 2 + len;
    }
    None
}

/// Feeds `bytes` to a fresh server and expects exactly one error, `expected`, with a close
/// frame carrying `code` on the wire and the connection closed.
fn expect_refused(config: Config, bytes: &[u8], expected: Error, code: u16) {
    let mut conn = server(config);
    conn.handle_bytes(Instant::now(), bytes);
    let events = drain(&mut conn);
    let errors: Vec<_> = events.iter().filter_map(|e| e.as_ref().err()).collect();
    assert_eq!(errors, vec![&expected], "events: {events:?}");
    assert!(matches!(events.last(), Some(Err(_))), "error comes last");
    assert_eq!(expected.close_code(), Some(CloseCode(code)));
    assert_eq!(sent_close_code(&mut conn), Some(code));
    assert!(conn.is_closed());
    // Nothing more is read once failed, whatever arrives.
    conn.handle_bytes(Instant::now(), &frame(true, 0x1, b"late"));
    assert!(conn.poll_event_owned().is_none());
}

// ---------------------------------------------------------------------------------------
// Lengths
// ---------------------------------------------------------------------------------------

#[test]
fn length_of_2_pow_63_is_a_protocol_error_1002() {
    // RFC 6455 5.2: the most significant bit of a 64-bit length MUST be 0.
    let header = raw_frame(0x82, 1 << 63, &[]);
    expect_refused(
        Config::default(),
        &header,
        Error::Protocol(ProtocolError::LengthOverflow),
        1002,
    );
}

#[test]
fn length_of_2_pow_62_is_refused_at_the_header_with_1009_before_any_allocation() {
    // Only the 14 header bytes are sent: the refusal cannot wait for the payload.
    let header = raw_frame(0x82, 1 << 62, &[]);
    assert_eq!(header.len(), 14);
    let mut conn = server(Config::default());
    conn.handle_bytes(Instant::now(), &header);
    let (events, peak) = peak_during(|| drain(&mut conn));
    assert_eq!(
        events,
        vec![Err(Error::Protocol(ProtocolError::FrameTooLarge))]
    );
    assert_eq!(sent_close_code(&mut conn), Some(1009));
    // The close frame and its queue entry are all that was allocated.
    assert!(peak < 4096, "refusing the header allocated {peak} bytes");
}

#[test]
fn every_announced_length_past_the_frame_limit_is_refused_at_the_header() {
    let mut config = Config::default();
    config.max_frame_size = 1000;
    config.max_message_size = 1 << 30;
    for announced in [1001u64, 65_535, 65_536, 1 << 32, (1 << 63) - 1] {
        let header = raw_frame(0x82, announced, &[]);
        let mut conn = server(config.clone());
        conn.handle_bytes(Instant::now(), &header);
        let (events, peak) = peak_during(|| drain(&mut conn));
        assert_eq!(
            events,
            vec![Err(Error::Protocol(ProtocolError::FrameTooLarge))],
            "length {announced}"
        );
        assert!(peak < 4096, "length {announced}: {peak} bytes");
    }
}

#[test]
fn single_frame_message_past_the_message_limit_is_1009_at_the_header() {
    let mut config = Config::default();
    config.max_frame_size = 1 << 20;
    config.max_message_size = 1000;
    expect_refused(
        config,
        &raw_frame(0x81, 1001, &[]),
        Error::Protocol(ProtocolError::MessageTooLarge),
        1009,
    );
}

#[test]
fn fragments_adding_up_past_the_message_limit_are_refused_with_1009() {
    let mut config = Config::default();
    config.max_frame_size = 1000;
    config.max_message_size = 4000;
    let chunk = vec![b'x'; 1000];
    let mut wire = frame(false, 0x2, &chunk);
    for _ in 0..3 {
        wire.extend(frame(false, 0x0, &chunk));
    }
    // The fifth fragment's header takes the total to 4001 bytes: refused before its payload.
    wire.extend(raw_frame(0x00, 1, &[]));
    let mut conn = server(config);
    let (events, peak) = peak_during(|| {
        conn.handle_bytes(Instant::now(), &wire);
        drain(&mut conn)
    });
    assert_eq!(
        events,
        vec![Err(Error::Protocol(ProtocolError::MessageTooLarge))]
    );
    assert_eq!(sent_close_code(&mut conn), Some(1009));
    // The input itself (~4 KiB, copied into the receive buffer) and the partial message
    // (4000 bytes) are what was held.
    assert!(peak < 5 * wire.len(), "{peak} bytes for {} in", wire.len());
}

#[test]
fn fragments_past_the_limit_are_refused_in_chunk_delivery_too() {
    let mut config = Config::default();
    config.max_frame_size = 100;
    config.max_message_size = 250;
    config.delivery = rapidws::connection::Delivery::Chunks;
    let mut wire = frame(false, 0x1, &[b'a'; 100]);
    wire.extend(frame(false, 0x0, &[b'b'; 100]));
    wire.extend(frame(true, 0x0, &[b'c'; 51]));
    let mut conn = server(config);
    conn.handle_bytes(Instant::now(), &wire);
    let events = drain(&mut conn);
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[..2].iter().all(|e| matches!(
        e,
        Ok(OwnedEvent::Chunk { data, fin: false, .. }) if data.len() == 100
    )));
    assert_eq!(
        events[2],
        Err(Error::Protocol(ProtocolError::MessageTooLarge))
    );
    assert_eq!(sent_close_code(&mut conn), Some(1009));
}

/// Decision: empty continuation frames are accepted without a count limit. Each costs the
/// peer 6 bytes and us O(1) time and no memory (no per-fragment state is kept), so a flood
/// of them is no worse than any other stream of bytes; the message limit still applies to
/// the payload they carry.
#[test]
fn hundred_thousand_empty_continuations_finish_quickly_in_bounded_memory() {
    const N: usize = 100_000;
    let empty_cont = frame(false, 0x0, &[]);
    let mut conn = server(Config::default());
    let start = Instant::now();
    let ((delivered, fed), peak) = peak_during(|| {
        let mut delivered = Vec::new();
        let mut fed = 0usize;
        // Arrives the way a socket delivers it: 4 KiB reads, events polled after each.
        let mut pending = frame(false, 0x1, b"he");
        for i in 0..=N {
            if i == N {
                pending.extend(frame(true, 0x0, b"llo"));
            } else {
                pending.extend_from_slice(&empty_cont);
            }
            if pending.len() >= 4096 || i == N {
                fed += pending.len();
                conn.handle_bytes(Instant::now(), &pending);
                pending.clear();
                delivered.extend(drain(&mut conn));
            }
        }
        (delivered, fed)
    });
    let took = start.elapsed();
    assert_eq!(
        delivered,
        vec![Ok(OwnedEvent::Message {
            kind: rapidws::codec::MessageKind::Text,
            data: bytes::Bytes::from_static(b"hello"),
        })]
    );
    assert!(fed > 6 * N);
    assert!(peak < 64 * 1024, "{peak} bytes held for {fed} bytes in");
    assert!(
        took < Duration::from_secs(10),
        "{N} empty fragments took {took:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Reserved bits and opcodes
// ---------------------------------------------------------------------------------------

#[test]
fn rsv1_without_negotiated_deflate_is_1002() {
    expect_refused(
        Config::default(),
        &raw_frame(0x80 | 0x40 | 0x1, 5, b"hello"),
        Error::Protocol(ProtocolError::ReservedBits),
        1002,
    );
}

#[test]
fn rsv2_and_rsv3_are_1002() {
    for rsv in [0x20u8, 0x10, 0x30, 0x70] {
        expect_refused(
            Config::default(),
            &raw_frame(0x80 | rsv | 0x2, 1, b"x"),
            Error::Protocol(ProtocolError::ReservedBits),
            1002,
        );
    }
}

#[test]
fn unknown_opcodes_are_1002() {
    for op in [0x3u8, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] {
        expect_refused(
            Config::default(),
            &frame(true, op, b""),
            Error::Protocol(ProtocolError::UnknownOpcode(op)),
            1002,
        );
    }
}

#[test]
fn unknown_opcode_inside_a_fragmented_message_is_1002() {
    let mut wire = frame(false, 0x1, b"part");
    wire.extend(frame(false, 0x3, b""));
    let mut conn = server(Config::default());
    conn.handle_bytes(Instant::now(), &wire);
    assert_eq!(
        drain(&mut conn),
        vec![Err(Error::Protocol(ProtocolError::UnknownOpcode(3)))]
    );
    assert_eq!(sent_close_code(&mut conn), Some(1002));
}

#[cfg(feature = "deflate")]
mod deflate {
    use super::*;
    use rapidws::deflate::{DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate};

    fn with_deflate(role: Role, config: Config) -> Connection {
        let mut c = Connection::new(role, config, Instant::now());
        c.set_deflate(PerMessageDeflate::new(
            role,
            DeflateParams::default(),
            &DeflateConfig::new().min_size(0),
        ));
        c
    }

    fn refused_with_deflate(bytes: &[u8], expected: Error, code: u16) {
        let mut conn = with_deflate(Role::Server, Config::default());
        conn.handle_bytes(Instant::now(), bytes);
        let events = drain(&mut conn);
        assert_eq!(events, vec![Err(expected)]);
        assert_eq!(sent_close_code(&mut conn), Some(code));
    }

    #[test]
    fn rsv1_on_a_control_frame_is_1002_even_with_deflate() {
        for op in [0x8u8, 0x9, 0xA] {
            refused_with_deflate(
                &raw_frame(0x80 | 0x40 | op, 0, &[]),
                Error::Protocol(ProtocolError::ReservedBits),
                1002,
            );
        }
    }

    #[test]
    fn rsv1_on_a_continuation_frame_is_1002_even_with_deflate() {
        let mut wire = frame(false, 0x2, b"a");
        wire.extend(raw_frame(0x80 | 0x40, 1, b"b"));
        refused_with_deflate(&wire, Error::Protocol(ProtocolError::ReservedBits), 1002);
    }

    /// The compressed bytes of `len` zero bytes, as a client would put them in a frame.
    fn bomb(len: usize) -> Vec<u8> {
        let config = DeflateConfig::new().level(9);
        let mut sender = PerMessageDeflate::new(Role::Client, DeflateParams::default(), &config);
        let mut out = Vec::new();
        assert!(sender.compress(&vec![0u8; len], &mut out).unwrap());
        out
    }

    #[test]
    fn compressed_message_inflating_past_the_limit_is_1009_with_memory_near_the_limit() {
        const LIMIT: usize = 1 << 20;
        let payload = bomb(64 << 20);
        assert!(
            payload.len() < LIMIT / 4,
            "{} compressed bytes",
            payload.len()
        );
        let wire = raw_frame(0x80 | 0x40 | 0x2, payload.len() as u64, &payload);
        drop(payload);
        let mut config = Config::default();
        config.max_message_size = LIMIT;
        let mut conn = with_deflate(Role::Server, config);
        let (events, peak) = peak_during(|| {
            conn.handle_bytes(Instant::now(), &wire);
            drain(&mut conn)
        });
        assert_eq!(events, vec![Err(Error::Deflate(DeflateError::TooLarge))]);
        assert_eq!(sent_close_code(&mut conn), Some(1009));
        // The receive buffer (the wire bytes), the inflater (~49 KiB) and at most the
        // limit (+1 byte, grown in steps) of output.
        let bound = LIMIT + 2 * wire.len() + 256 * 1024;
        assert!(peak <= bound, "held {peak} bytes, bound {bound}");
        assert!(peak >= LIMIT, "the output should reach the limit: {peak}");
    }

    #[test]
    fn compressed_message_inflating_past_the_limit_in_chunk_delivery_is_1009() {
        const LIMIT: usize = 1 << 20;
        let payload = bomb(16 << 20);
        // Sent as 64 fragments: the limit counts inflated bytes across frames.
        let pieces: Vec<&[u8]> = payload.chunks(payload.len().div_ceil(64)).collect();
        let mut wire = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            let fin = i + 1 == pieces.len();
            let b0 = if fin { 0x80 } else { 0 } | if i == 0 { 0x40 | 0x2 } else { 0 };
            wire.extend(raw_frame(b0, piece.len() as u64, piece));
        }
        let mut config = Config::default();
        config.max_message_size = LIMIT;
        config.delivery = rapidws::connection::Delivery::Chunks;
        let mut conn = with_deflate(Role::Server, config);
        // Chunks are dropped as they come, as a streaming consumer would.
        let ((delivered, last), peak) = peak_during(|| {
            conn.handle_bytes(Instant::now(), &wire);
            let mut delivered = 0;
            let mut last = None;
            while let Some(e) = conn.poll_event_owned() {
                match e {
                    Ok(OwnedEvent::Chunk { data, .. }) => delivered += data.len(),
                    other => last = Some(other),
                }
            }
            (delivered, last)
        });
        assert_eq!(last, Some(Err(Error::Deflate(DeflateError::TooLarge))));
        assert!(delivered <= LIMIT, "{delivered} bytes delivered");
        assert_eq!(sent_close_code(&mut conn), Some(1009));
        assert!(peak <= LIMIT + 2 * wire.len() + 256 * 1024, "held {peak}");
    }

    /// `len` bytes that DEFLATE cannot shrink (xorshift), compressed with zlib-rs's
    /// level 1 (its fixed-Huffman quick strategy), which makes them larger.
    fn incompressible_compressed(len: usize) -> (Vec<u8>, Vec<u8>) {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let config = DeflateConfig::new()
            .level(1)
            .min_size(0)
            .predict_incompressible(false);
        let mut sender = PerMessageDeflate::new(Role::Client, DeflateParams::default(), &config);
        let mut out = Vec::new();
        assert!(sender.compress(&data, &mut out).unwrap());
        (data, out)
    }

    #[test]
    fn compressed_frame_over_the_frame_limit_is_accepted_when_it_inflates_within_the_message_limit()
    {
        const LIMIT: usize = 1 << 20;
        let (data, payload) = incompressible_compressed(LIMIT);
        // Larger than the frame limit on the wire, within DEFLATE's worst case.
        assert!(payload.len() > LIMIT, "{} compressed bytes", payload.len());
        assert!(payload.len() <= rapidws::codec::max_compressed_frame_size(LIMIT));
        let mut config = Config::default();
        config.max_message_size = LIMIT;
        config.max_frame_size = LIMIT;
        let mut conn = with_deflate(Role::Server, config);
        conn.handle_bytes(
            Instant::now(),
            &raw_frame(0x80 | 0x40 | 0x2, payload.len() as u64, &payload),
        );
        assert_eq!(
            drain(&mut conn),
            vec![Ok(OwnedEvent::Message {
                kind: rapidws::codec::MessageKind::Binary,
                data: data.into(),
            })]
        );
    }

    #[test]
    fn compressed_frame_past_deflates_worst_case_is_1009_at_the_header() {
        const LIMIT: usize = 1 << 20;
        let over = rapidws::codec::max_compressed_frame_size(LIMIT) as u64 + 1;
        let mut config = Config::default();
        config.max_frame_size = LIMIT;
        // A first frame, and a continuation of a compressed message.
        let mut continued = raw_frame(0x40 | 0x2, 1, &[0]);
        continued.extend(raw_frame(0x80, over, &[]));
        for wire in [raw_frame(0x80 | 0x40 | 0x2, over, &[]), continued] {
            let mut conn = with_deflate(Role::Server, config.clone());
            conn.handle_bytes(Instant::now(), &wire);
            assert_eq!(
                drain(&mut conn),
                vec![Err(Error::Protocol(ProtocolError::FrameTooLarge))]
            );
            assert_eq!(sent_close_code(&mut conn), Some(1009));
        }
        // Uncompressed frames keep the plain limit, with deflate agreed too.
        let mut conn = with_deflate(Role::Server, config);
        conn.handle_bytes(
            Instant::now(),
            &raw_frame(0x80 | 0x2, LIMIT as u64 + 1, &[]),
        );
        assert_eq!(
            drain(&mut conn),
            vec![Err(Error::Protocol(ProtocolError::FrameTooLarge))]
        );
    }

    /// Wire bytes of a compressed message are not limited, only what they inflate to: a
    /// message of empty stored blocks (5 bytes each, inflating to nothing) bigger than the
    /// message limit is accepted, and memory stays at one frame.
    #[test]
    fn compressed_padding_past_the_limit_inflates_to_nothing_in_bounded_memory() {
        const LIMIT: usize = 64 * 1024;
        // An empty non-final stored block: BFINAL=0 BTYPE=00, LEN=0, NLEN=0xffff.
        let block = [0x00u8, 0x00, 0x00, 0xff, 0xff];
        let frame_payload: Vec<u8> = block.repeat(1000);
        let mut config = Config::default();
        config.max_message_size = LIMIT;
        let mut conn = with_deflate(Role::Server, config);
        let frames = 40; // 200 KB of compressed input, 3x the limit
        let (events, peak) = peak_during(|| {
            let mut events = Vec::new();
            for i in 0..frames {
                let fin = i + 1 == frames;
                let b0 = if fin { 0x80 } else { 0 } | if i == 0 { 0x40 | 0x2 } else { 0 };
                let f = raw_frame(b0, frame_payload.len() as u64, &frame_payload);
                conn.handle_bytes(Instant::now(), &f);
                events.extend(drain(&mut conn));
            }
            events
        });
        assert_eq!(
            events,
            vec![Ok(OwnedEvent::Message {
                kind: rapidws::codec::MessageKind::Binary,
                data: bytes::Bytes::new(),
            })]
        );
        assert!(peak < 256 * 1024, "held {peak} bytes");
    }
}

// ---------------------------------------------------------------------------------------
// Close frames
// ---------------------------------------------------------------------------------------

#[test]
fn invalid_close_codes_are_1002() {
    for code in [
        0u16, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535,
    ] {
        expect_refused(
            Config::default(),
            &frame(true, 0x8, &close_payload(code, b"")),
            Error::Protocol(ProtocolError::InvalidCloseCode(code)),
            1002,
        );
    }
}

#[test]
fn one_byte_close_payload_is_1002() {
    expect_refused(
        Config::default(),
        &frame(true, 0x8, &[0x03]),
        Error::Protocol(ProtocolError::InvalidClosePayload),
        1002,
    );
}

#[test]
fn invalid_utf8_in_the_close_reason_is_1007() {
    for reason in [
        &b"\xff"[..],
        b"ok\xc3",           // ends inside a code point
        b"\xed\xa0\x80",     // a surrogate
        b"\xf4\x90\x80\x80", // past U+10FFFF
        b"\xc0\xaf",         // overlong
    ] {
        expect_refused(
            Config::default(),
            &frame(true, 0x8, &close_payload(1000, reason)),
            Error::Protocol(ProtocolError::InvalidUtf8),
            1007,
        );
    }
}

#[test]
fn invalid_utf8_in_a_text_message_is_1007_at_the_first_bad_fragment() {
    let mut wire = frame(false, 0x1, b"fine so far \xf0\x9f");
    // The code point is broken here; the message never ends, yet it fails now.
    wire.extend(frame(false, 0x0, b"\x41"));
    expect_refused(
        Config::default(),
        &wire,
        Error::Protocol(ProtocolError::InvalidUtf8),
        1007,
    );
}

#[test]
fn data_after_the_peers_close_is_ignored() {
    let mut wire = frame(true, 0x8, &close_payload(1000, b"bye"));
    wire.extend(frame(true, 0x1, b"after close"));
    wire.extend(frame(true, 0x9, b"ping after close"));
    // Garbage that would be a protocol error if it were read.
    wire.extend_from_slice(&[0xff; 64]);
    let mut conn = server(Config::default());
    conn.handle_bytes(Instant::now(), &wire);
    let events = drain(&mut conn);
    assert_eq!(
        events,
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::NORMAL,
            "bye"
        ))))]
    );
    // The close is echoed; no pong for the late ping.
    assert_eq!(sent_close_code(&mut conn), Some(1000));
    assert!(conn.is_closed());
    conn.handle_bytes(Instant::now(), &frame(true, 0x2, b"more"));
    assert!(conn.poll_event_owned().is_none());
    assert!(!conn.has_pending_output());
}

#[test]
fn frame_cut_off_mid_payload_yields_nothing_and_holds_only_what_arrived() {
    // A peer announces 1000 bytes, sends 10, and stops: the connection waits; the IO
    // layer turns the end of the stream into an error (see hostile_tokio.rs).
    let full = frame(true, 0x2, &[7u8; 1000]);
    let mut conn = server(Config::default());
    conn.handle_bytes(Instant::now(), &full[..18]);
    let (events, peak) = peak_during(|| drain(&mut conn));
    assert!(events.is_empty(), "{events:?}");
    assert!(peak < 4096, "{peak}");
    assert!(!conn.is_closed());
    assert!(!conn.has_pending_output());
}

/// Reads `bytes` into the connection as the tokio layer does: into the room
/// `reserve_recv` makes, `read` bytes at a time, polling events after each read.
fn read_in_place(
    conn: &mut Connection,
    bytes: &[u8],
    read: usize,
) -> Vec<Result<OwnedEvent, Error>> {
    let mut events = Vec::new();
    for piece in bytes.chunks(read) {
        conn.reserve_recv(4096).extend_from_slice(piece);
        conn.handle_received(Instant::now());
        events.extend(drain(conn));
    }
    events
}

#[test]
fn frame_announcing_1_gib_then_stalling_reserves_only_the_read_ahead_limit() {
    // Limits raised so that the header is accepted: the read-ahead limit alone must keep
    // the room reserved for the announced payload bounded.
    let mut config = Config::default();
    config.max_frame_size = 2 << 30;
    config.max_message_size = 2 << 30;
    let limit = config.max_read_ahead;
    let header_and_10 = &raw_frame(0x82, 1 << 30, &[5; 10]);
    let mut conn = server(config);
    let (events, peak) = peak_during(|| {
        let mut events = read_in_place(&mut conn, header_and_10, 4096);
        // The peer stalls; the IO layer keeps asking for room to read into.
        for _ in 0..10 {
            events.extend(read_in_place(&mut conn, &[], 1));
            let _ = conn.reserve_recv(4096);
        }
        events
    });
    assert!(events.is_empty(), "{events:?}");
    assert!(!conn.is_closed());
    assert!(
        peak <= limit + 64 * 1024,
        "announcing 1 GiB and sending 10 bytes held {peak} bytes"
    );
}

#[test]
fn room_for_a_huge_announced_frame_grows_only_with_what_arrives() {
    // 1 GiB announced, 3 MiB sent in 64 KiB reads, then a stall: the room reserved stays
    // within a small multiple of what arrived plus the read-ahead limit.
    let mut config = Config::default();
    config.max_frame_size = 2 << 30;
    config.max_message_size = 2 << 30;
    let limit = config.max_read_ahead;
    let sent = 3 << 20;
    let wire = raw_frame(0x82, 1 << 30, &vec![9; sent]);
    let mut conn = server(config);
    let (events, peak) = peak_during(|| {
        let events = read_in_place(&mut conn, &wire, 64 * 1024);
        let _ = conn.reserve_recv(4096);
        events
    });
    assert!(events.is_empty(), "{events:?}");
    let bound = 2 * (2 * sent + limit) + 64 * 1024;
    assert!(peak <= bound, "{sent} bytes sent, {peak} bytes held");
}

#[test]
fn control_frames_flood_is_answered_one_pong_each_within_125_bytes() {
    // The sans-IO core answers every ping (RFC 6455 5.5.2 MUST); bounding the queue of
    // pongs is the IO layer's job (it stops reading, see hostile_tokio.rs). Here: each
    // pong is exactly as large as its ping, so output never exceeds input.
    let ping = frame(true, 0x9, &[0xab; 125]);
    let mut wire = Vec::new();
    for _ in 0..1000 {
        wire.extend_from_slice(&ping);
    }
    let mut conn = server(Config::default());
    conn.handle_bytes(Instant::now(), &wire);
    let events = drain(&mut conn);
    assert_eq!(events.len(), 1000);
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    // Unmasked pongs: 2 + 125 bytes each, against 6 + 125 bytes per masked ping.
    assert_eq!(out.len(), 1000 * 127);
    assert!(out.len() < wire.len());
}

#[test]
fn control_frame_over_125_bytes_is_1002_without_waiting_for_its_payload() {
    expect_refused(
        Config::default(),
        &raw_frame(0x89, 126, &[]),
        Error::Protocol(ProtocolError::ControlFrameTooLong),
        1002,
    );
}

#[test]
fn fragmented_ping_is_1002() {
    expect_refused(
        Config::default(),
        &frame(false, 0x9, b"x"),
        Error::Protocol(ProtocolError::FragmentedControlFrame),
        1002,
    );
}

#[test]
fn unmasked_frame_to_a_server_is_1002() {
    expect_refused(
        Config::default(),
        &[0x81, 0x02, b'h', b'i'],
        Error::Protocol(ProtocolError::UnmaskedFrame),
        1002,
    );
}
