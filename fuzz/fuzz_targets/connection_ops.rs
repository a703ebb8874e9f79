//! Operation sequences against a client and a server wired through memory, with or without
//! permessage-deflate, plus hostile bytes and frames, early ends of the transport and the
//! teardown's shutdowns: never a panic; the close state machine and the teardown hold their
//! promises (one error, latched; no output after the shutdown; both ends done within a few
//! exchanges once both are closed); and every message one side sends arrives whole and in
//! order at the other, which never fails on it except for a size limit, a timer or the
//! transport's end, until hostile bytes reach it.
//!
//! Input: `flags | deflate | level | ops`, each op an op byte (low 4 bits the op, bit 4 the
//! side, bit 5 text or an op's variant) and its arguments. Large payloads are a length
//! ([`rapidws_fuzz::Reader::length`]) and a fill spec ([`rapidws_fuzz::Filler`]), so a short
//! input sends megabytes.
#![no_main]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use rapidws::Role;
use rapidws::codec::{CloseCode, MessageKind, ProtocolError};
use rapidws::connection::{Config, Connection, Delivery, Error, Event, PreparedMessage, SendError};
use rapidws::deflate::{
    CompressorPolicy, CompressorPool, DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate,
};
use rapidws_fuzz::{Filler, LenForm, Reader, header, mask};

/// Most payload bytes the ops of one input may generate.
const BUDGET: usize = 4 << 20;
/// Largest payload one op may generate.
const MAX_PAYLOAD: usize = (1 << 20) + (1 << 16);
/// Largest payload one op may generate, and most payload bytes per input, that zlib-rs
/// compresses: past a few windows its code paths repeat, and its lazy matching on megabytes
/// takes seconds here (zlib-rs is fuzzed on its own).
const MAX_ZLIB_PAYLOAD: usize = 128 << 10;
const ZLIB_BUDGET: usize = 512 << 10;
/// Most ops run per input.
const MAX_OPS: usize = 256;

fn config(flags: u8, server: bool) -> Config {
    let mut c = Config::default();
    if server && flags & 1 != 0 {
        c.delivery = Delivery::Chunks;
    }
    (c.max_frame_size, c.max_message_size) = match (flags >> 1) & 3 {
        0 => (c.max_frame_size, c.max_message_size),
        1 => (100, 300),
        2 => (70_000, 200_000),
        _ => (1 << 20, 1 << 20),
    };
    if flags & 8 != 0 {
        c.keepalive_interval = Some(Duration::from_secs(10));
        c.pong_timeout = Some(Duration::from_secs(5));
        c.idle_timeout = Some(Duration::from_secs(60));
    }
    if flags & 0x80 != 0 {
        // Tight buffers: reads stop on one queued control frame, read-ahead is small.
        c.control_queue_capacity = 1;
        c.max_read_ahead = 1024;
        c.read_buffer_size = 256;
        c.send_queue_high_water = 1024;
    }
    c
}

/// One end and what the test knows about what it should receive.
struct Side {
    conn: Connection,
    /// Messages the peer sent, in order, not yet received.
    expected: VecDeque<(MessageKind, Vec<u8>)>,
    /// Chunks of the message being received (`Delivery::Chunks`).
    partial: Vec<u8>,
    /// Hostile bytes reached this end: what it receives is no longer only the peer's.
    tainted: bool,
    /// The text message this end is sending in fragments: bytes of a code point the last
    /// chunk cut, sent with the next chunk so the whole stays UTF-8.
    carry: Vec<u8>,
    /// The kind and bytes of the fragmented message this end is sending.
    sending: Option<(MessageKind, Vec<u8>)>,
    /// This end shut its write half down (`handle_shutdown`): the peer reads its FIN once
    /// it has read the rest.
    shut: bool,
    /// The peer's FIN reached this end (`handle_eof`).
    eof: bool,
    /// `poll_event` reported an error (it may only once).
    error_reported: bool,
}

impl Side {
    fn new(conn: Connection) -> Self {
        Side {
            conn,
            expected: VecDeque::new(),
            partial: Vec::new(),
            tainted: false,
            carry: Vec::new(),
            sending: None,
            shut: false,
            eof: false,
            error_reported: false,
        }
    }
}

/// A message arrived at `side`: unless hostile bytes reached it, it is the next one its
/// peer sent.
fn received(side: &mut Side, kind: MessageKind, data: &[u8]) {
    if side.tainted {
        return;
    }
    let (want_kind, want) = side
        .expected
        .pop_front()
        .expect("a message arrived that the peer never sent");
    assert_eq!(kind, want_kind);
    assert!(
        data == want,
        "{} bytes arrived for {} sent",
        data.len(),
        want.len()
    );
}

/// What the lifecycle promises at any time.
fn check_lifecycle(conn: &Connection) {
    if conn.wants_shutdown() {
        assert!(conn.is_closed() && !conn.has_pending_output());
    }
    if conn.is_done() {
        assert!(conn.is_closed());
        assert_eq!(conn.poll_timeout(), None);
        assert!(!conn.wants_read());
    }
    if conn.close_received() {
        assert!(conn.peer_close().is_some());
    }
}

fn drain(side: &mut Side) {
    for _ in 0..100_000 {
        let event = match side.conn.poll_event() {
            None => {
                check_lifecycle(&side.conn);
                return;
            }
            Some(Ok(Event::Message(m))) => {
                // A text message is UTF-8: the core debug-asserts it where it lends the text
                // (fuzz builds keep debug assertions), and `MessageRef::Text` holds a `str`.
                if let Some(text) = m.as_text() {
                    assert_eq!(text.len(), m.len());
                }
                let kind = if m.as_text().is_some() {
                    MessageKind::Text
                } else {
                    MessageKind::Binary
                };
                Some((kind, m.as_bytes().to_vec(), true))
            }
            Some(Ok(Event::Chunk {
                kind, data, fin, ..
            })) => Some((kind, data.to_vec(), fin)),
            Some(Ok(Event::Close(_))) => {
                assert!(side.conn.close_received());
                None
            }
            Some(Ok(_)) => None,
            Some(Err(e)) => {
                assert!(side.conn.is_closed(), "an error closes the connection: {e}");
                assert!(!side.error_reported, "a second error: {e}");
                side.error_reported = true;
                assert_eq!(side.conn.failure(), Some(&e), "the latched error");
                // A well-behaved peer makes us fail only on a limit, a timer, or the end of
                // the transport before the close handshake.
                let expected = matches!(
                    e,
                    Error::Protocol(ProtocolError::FrameTooLarge | ProtocolError::MessageTooLarge)
                        | Error::Deflate(DeflateError::TooLarge)
                        | Error::Timeout(_)
                        | Error::Eof
                );
                assert!(
                    side.tainted || expected,
                    "the peer's own frames failed us: {e:?}"
                );
                None
            }
        };
        if let Some((kind, data, fin)) = event {
            side.partial.extend_from_slice(&data);
            if fin {
                let whole = std::mem::take(&mut side.partial);
                received(side, kind, &whole);
            }
        }
    }
    panic!("poll_event did not settle");
}

/// Most reads one pump makes: a megabyte read a byte at a time would take seconds and show
/// nothing a few thousand reads do not.
const MAX_READS: usize = 4096;

/// Moves what `from` has queued into `to`: the first `split` bytes through `handle_bytes`,
/// the rest in reads of `chunk` bytes (more when that would take over `MAX_READS` reads)
/// through `reserve_recv`, as an IO layer reads; then `from`'s FIN, once it shut its write
/// half down or is done (its IO layer then drops the transport).
fn pump(from: &mut Side, to: &mut Side, now: Instant, split: usize, chunk: usize) {
    let mut wire = Vec::new();
    from.conn.write_pending(&mut wire);
    if from.shut {
        assert!(wire.is_empty(), "output after the write half was shut down");
    }
    let split = split.min(wire.len());
    to.conn.handle_bytes(now, &wire[..split]);
    drain(to);
    let rest = &wire[split..];
    let chunk = chunk.max(rest.len().div_ceil(MAX_READS)).max(1);
    for piece in rest.chunks(chunk) {
        to.conn.reserve_recv(piece.len()).extend_from_slice(piece);
        to.conn.handle_received(now);
        drain(to);
    }
    if (from.shut || from.conn.is_done()) && !to.eof {
        to.eof = true;
        to.conn.handle_eof(now);
        drain(to);
    }
}

/// A payload of at most `max` bytes (and within the budget) from a fill spec; text made
/// UTF-8.
fn payload(r: &mut Reader<'_>, text: bool, max: usize, budget: &mut usize) -> Vec<u8> {
    let len = r.length().min(max).min(*budget);
    let mut out = Vec::new();
    Filler::new().fill(r, len, true, &mut out);
    if text {
        out = String::from_utf8_lossy(&out).into_owned().into_bytes();
    }
    *budget = budget.saturating_sub(out.len());
    out
}

fn kind(text: bool) -> MessageKind {
    if text {
        MessageKind::Text
    } else {
        MessageKind::Binary
    }
}

/// Queues `data` as a whole message from `side` to its peer, by copy (`how` 0), as owned
/// `Bytes` (1), or prepared at the default level (2) or at `level` (3); on success the
/// peer expects it.
fn send(side: &mut Side, peer: &mut Side, k: MessageKind, data: Vec<u8>, how: u8, level: i32) {
    let was_closed = side.conn.close_sent() || side.conn.is_closed();
    let r = match how {
        0 => side.conn.send(k, &data),
        1 => side.conn.send_bytes(k, Bytes::from(data.clone())),
        _ => match PreparedMessage::new(k, &data) {
            Ok(p) if how == 2 => side.conn.send_prepared(&p),
            Ok(p) => side.conn.send_prepared(&p.with_compression_level(level)),
            Err(e) => panic!("prepared {k:?}: {e:?}"),
        },
    };
    if was_closed {
        assert_eq!(r, Err(SendError::Closed));
    }
    if r.is_ok() {
        peer.expected.push_back((k, data));
    }
}

/// One fragment of the message `side` is sending; text keeps the whole UTF-8 by carrying
/// the bytes of a code point it would cut over to the next fragment.
fn fragment(side: &mut Side, peer: &mut Side, mut data: Vec<u8>, fin: bool) {
    let Some((k, _)) = side.sending else {
        let r = if fin {
            side.conn.end_message(&data)
        } else {
            side.conn.send_chunk(&data)
        };
        assert!(r.is_err());
        return;
    };
    if k == MessageKind::Text {
        let mut text = std::mem::take(&mut side.carry);
        text.extend_from_slice(String::from_utf8_lossy(&data).as_bytes());
        if !fin && data.len() % 2 == 1 {
            // Cut inside the last code point, if it has more than one byte.
            let last = text.iter().rposition(|&b| b & 0xc0 != 0x80).unwrap_or(0);
            if text.len() - last > 1 {
                side.carry = text.split_off(last + 1);
            }
        }
        data = text;
    }
    let r = if fin {
        side.conn.end_message(&data)
    } else {
        side.conn.send_chunk(&data)
    };
    match r {
        Ok(()) => {
            let (_, so_far) = side.sending.as_mut().unwrap();
            so_far.extend_from_slice(&data);
            if fin {
                let (k, whole) = side.sending.take().unwrap();
                peer.expected.push_back((k, whole));
            }
        }
        Err(_) => {
            side.sending = None;
            side.carry.clear();
        }
    }
}

/// Compression levels by the low 3 bits of the level byte.
const LEVELS: [i32; 8] = [1, 1, 1, 1, 1, 0, 2, 9];

fn deflate(d: u8, level: u8) -> (DeflateParams, DeflateConfig) {
    let params = DeflateParams {
        server_no_context_takeover: d & 1 != 0,
        client_no_context_takeover: d & 2 != 0,
        server_max_window_bits: 8 + (d >> 2 & 7),
        client_max_window_bits: 8 + (d >> 5 & 7),
    };
    // Our own level 1 most often; zlib-rs's stored, fast and best levels too (rarely: zlib-rs
    // is fuzzed on its own, and its slow levels would take most of the time here).
    let mut config = DeflateConfig::new()
        .level(LEVELS[usize::from(level & 7)])
        .min_size(usize::from(level >> 3 & 3) * 64)
        .predict_incompressible(level & 0x20 != 0)
        .skip_if_not_smaller(level & 0x40 != 0);
    if level & 0x80 != 0 {
        config = config.policy(CompressorPolicy::Pooled(Arc::new(CompressorPool::new(2))));
    }
    (params, config)
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let flags = r.u8();
    let d = r.u8();
    let level = r.u8();
    let t0 = Instant::now();
    let mut now = t0;
    let mut client = Side::new(Connection::new(Role::Client, config(flags, false), now));
    let mut server = Side::new(Connection::new(Role::Server, config(flags, true), now));
    if flags & 0x10 != 0 {
        // The parameters a handshake agreed, the same at both ends.
        let (params, settings) = deflate(d, level);
        client
            .conn
            .set_deflate(PerMessageDeflate::new(Role::Client, params, &settings));
        server
            .conn
            .set_deflate(PerMessageDeflate::new(Role::Server, params, &settings));
    }
    let mut budget = BUDGET;
    // What zlib-rs compresses is kept shorter: everything when the connection's level is not
    // our own 1, and prepared messages at their default level.
    let deflate_on = flags & 0x10 != 0;
    let zlib_level = deflate_on && LEVELS[usize::from(level & 7)] != 1;
    let mut zlib_budget = ZLIB_BUDGET;
    for _ in 0..MAX_OPS {
        if r.is_empty() {
            break;
        }
        let op = r.u8();
        let on_server = op & 0x10 != 0;
        let variant = op & 0x20 != 0;
        let (side, peer) = if on_server {
            (&mut server, &mut client)
        } else {
            (&mut client, &mut server)
        };
        match op & 0x0f {
            // Whole messages: a few literal bytes, or a large fill; sent by copy, as owned
            // `Bytes`, or prepared (op bits 6-7).
            0 | 1 => {
                let data = if op & 0x0f == 0 {
                    let n = usize::from(r.u8());
                    let raw = r.take(n);
                    if variant {
                        String::from_utf8_lossy(raw).into_owned().into_bytes()
                    } else {
                        raw.to_vec()
                    }
                } else if zlib_level || (deflate_on && op >> 6 == 2) {
                    payload(&mut r, variant, MAX_ZLIB_PAYLOAD, &mut zlib_budget)
                } else {
                    payload(&mut r, variant, MAX_PAYLOAD, &mut budget)
                };
                send(
                    side,
                    peer,
                    kind(variant),
                    data,
                    op >> 6,
                    LEVELS[usize::from(level & 7)],
                );
            }
            2 => {
                let k = kind(variant);
                if side.conn.begin_message(k).is_ok() {
                    side.sending = Some((k, Vec::new()));
                    side.carry.clear();
                }
            }
            // A fragment, literal or filled; bit 5 ends the message.
            3 | 4 => {
                let text = side
                    .sending
                    .as_ref()
                    .is_some_and(|(k, _)| *k == MessageKind::Text);
                let data = if op & 0x0f == 3 {
                    let n = usize::from(r.u8());
                    r.take(n).to_vec()
                } else if zlib_level {
                    payload(&mut r, text, MAX_ZLIB_PAYLOAD, &mut zlib_budget)
                } else {
                    payload(&mut r, text, MAX_PAYLOAD, &mut budget)
                };
                fragment(side, peer, data, variant);
            }
            5 => {
                let n = usize::from(r.u8());
                let data = r.take(n);
                let res = if variant {
                    side.conn.pong(data)
                } else {
                    side.conn.ping(data)
                };
                if data.len() > 125 {
                    assert!(res.is_err());
                }
            }
            6 => {
                let code = r.u16();
                let n = usize::from(r.u8());
                let reason = String::from_utf8_lossy(r.take(n)).into_owned();
                if side.conn.close(now, CloseCode(code), &reason).is_ok() {
                    assert!(side.conn.close_sent());
                    assert_eq!(side.conn.send_binary(b"x"), Err(SendError::Closed));
                }
            }
            // Moves this side's output to the peer: split once, then in reads of a chunk
            // size (the whole rest unless bit 5).
            7 => {
                let split = usize::from(r.u16());
                let chunk = if variant {
                    usize::from(r.u16()) + 1
                } else {
                    usize::MAX
                };
                pump(side, peer, now, split, chunk);
            }
            // Hostile bytes straight into this side's input.
            8 => {
                let n = usize::from(r.u16());
                let bytes = r.take(n);
                side.tainted = true;
                side.conn.handle_bytes(now, bytes);
                drain(side);
            }
            // A hostile frame of any size: first byte, mask and length form, length, fill.
            9 => {
                let b0 = r.u8();
                let shape = r.u8();
                let key = (shape & 0x80 != 0).then(|| r.u32().to_be_bytes());
                let form = match shape & 3 {
                    0 | 3 => LenForm::Minimal,
                    1 => LenForm::Ext16,
                    _ => LenForm::Ext64,
                };
                // Any 64-bit length with bit 6 of the shape, else a short one.
                let announced = if shape & 0x40 != 0 {
                    u64::from(r.u32()) << 32 | u64::from(r.u32())
                } else {
                    r.length() as u64
                };
                // A frame larger than the budget is sent in part: the peer waits inside it.
                let room = MAX_PAYLOAD.min(budget);
                let len = usize::try_from(announced)
                    .ok()
                    .filter(|&n| n <= room)
                    .unwrap_or(room.min(4096));
                budget -= len;
                let mut frame = Vec::new();
                header(b0, key, announced, form, &mut frame);
                let start = frame.len();
                Filler::new().fill(&mut r, len, true, &mut frame);
                if let Some(k) = key {
                    mask(&mut frame[start..], k);
                }
                side.tainted = true;
                side.conn.handle_bytes(now, &frame);
                drain(side);
            }
            10 => {
                now += Duration::from_secs(u64::from(r.u8()));
                for s in [&mut client, &mut server] {
                    if let Some(t) = s.conn.poll_timeout() {
                        assert!(t >= t0);
                    }
                    s.conn.handle_timeout(now);
                    drain(s);
                }
            }
            11 => side.conn.release_idle_memory(),
            // The transport ends early on this side: what arrived is delivered, then Eof.
            12 => {
                if !side.eof {
                    side.eof = true;
                    side.conn.handle_eof(now);
                    drain(side);
                }
            }
            // The IO layer does what the teardown asks: shut the write half down.
            13 => shutdown(side, now),
            _ => {}
        }
    }
    // Once both ends are closed, carrying out what the core asks (flush, shut down when it
    // says so, read the peer's FIN) ends both teardowns within a few exchanges: nothing
    // waits for a timer when the peer is there and answers.
    for _ in 0..8 {
        pump(&mut client, &mut server, now, usize::MAX, usize::MAX);
        pump(&mut server, &mut client, now, usize::MAX, usize::MAX);
        shutdown(&mut client, now);
        shutdown(&mut server, now);
    }
    if client.conn.is_closed() && server.conn.is_closed() {
        assert!(client.conn.is_done(), "client: {:?}", client.conn);
        assert!(server.conn.is_done(), "server: {:?}", server.conn);
    }
});

/// Shuts `side`'s write half down if its connection asks for it.
fn shutdown(side: &mut Side, now: Instant) {
    if !side.shut && side.conn.wants_shutdown() {
        side.shut = true;
        side.conn.handle_shutdown(now);
        check_lifecycle(&side.conn);
    }
}
