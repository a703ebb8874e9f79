//! The frame decoder on a byte stream fed in arbitrary chunks: never a panic; the outcome
//! (messages, control frames, or the error) is the same whole and split; and it is the
//! outcome of a plain reference decoder written from RFC 6455 here, which knows when a
//! stream is valid (then the messages must match exactly) and when it breaks a rule (then
//! the decoder must fail).
//!
//! Input: `selector | ncuts | cuts[2 * ncuts] | body`. The selector picks the role (bit 0),
//! whether RSV1 is allowed (bit 1), the limits (bits 2-3) and what the body is (bit 4):
//! the stream itself, or a list of frames each written as its wire header (2 to 14 bytes:
//! first byte, length byte, extended length, mask key) and a fill spec
//! ([`rapidws_fuzz::Filler`]) from which the harness makes the announced payload (masked
//! with the header's key), so that a few bytes describe a frame of any size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::Role;
use rapidws::codec::{ControlKind, Decoder, DecoderConfig, Item, MessageKind, ProtocolError};
use rapidws_fuzz::{Filler, Reader, mask};

/// Most bytes a synthesized stream may hold: room for a 1 MiB frame and its neighbours.
const SYNTH_BUDGET: usize = (1 << 20) + (256 << 10);

#[derive(Debug, PartialEq, Eq)]
enum Ev {
    Data {
        text: bool,
        compressed: bool,
        bytes: Vec<u8>,
    },
    Control(ControlKind, Vec<u8>),
}

/// Decodes `input` fed in pieces ending at `cuts` (sorted), as an IO layer would: bytes are
/// appended to a buffer and the consumed ones dropped from its front before the next read.
fn run(config: &DecoderConfig, input: &[u8], cuts: &[usize]) -> (Vec<Ev>, Option<ProtocolError>) {
    let mut dec = Decoder::new(config.clone());
    let mut buf = Vec::new();
    // Consumed bytes at the front of `buf`, dropped at the next read (dropping them after
    // every item would move a large buffer once per small frame).
    let mut start = 0;
    let mut events = Vec::new();
    let mut msg = Vec::new();
    let mut pos = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(pos, input.len());
        buf.drain(..start);
        start = 0;
        buf.extend_from_slice(&input[pos..cut]);
        pos = cut;
        loop {
            let d = match dec.decode(&mut buf[start..]) {
                Ok(d) => d,
                Err(e) => return (events, Some(e)),
            };
            assert!(d.consumed <= buf.len() - start);
            let more = d.item.is_some();
            match d.item {
                Some(Item::Data(c)) => {
                    assert!(c.payload.end <= d.consumed);
                    msg.extend_from_slice(&buf[start + c.payload.start..start + c.payload.end]);
                    // A size limit holds for uncompressed messages at every step.
                    if !c.compressed {
                        assert!(msg.len() <= config.max_message_size);
                    }
                    if c.message_end {
                        let bytes = std::mem::take(&mut msg);
                        if c.kind == MessageKind::Text && !c.compressed {
                            assert!(std::str::from_utf8(&bytes).is_ok());
                        }
                        events.push(Ev::Data {
                            text: c.kind == MessageKind::Text,
                            compressed: c.compressed,
                            bytes,
                        });
                    }
                }
                Some(Item::Control(c)) => {
                    assert!(c.payload.len() <= 125);
                    let payload = &buf[start + c.payload.start..start + c.payload.end];
                    events.push(Ev::Control(c.kind, payload.to_vec()));
                }
                None => {}
            }
            start += d.consumed;
            if !more {
                break;
            }
        }
    }
    (events, None)
}

/// What the reference decoder concludes about a whole stream.
#[derive(Debug)]
enum Verdict {
    /// Every frame keeps the rules: these are the events (the stream may end inside a
    /// frame, whose part yields none).
    Valid(Vec<Ev>),
    /// A rule is broken: the decoder must fail.
    Invalid(&'static str),
    /// The stream ends inside a text message whose bytes so far cannot be UTF-8: the
    /// decoder may fail now or wait for more.
    Undecided,
}

/// Message state of the reference decoder.
struct Msg {
    text: bool,
    compressed: bool,
    bytes: Vec<u8>,
}

/// RFC 6455 section 5 (and RFC 7692's RSV1), one frame at a time over the whole stream,
/// written for clarity rather than speed, sharing no code with the library.
fn reference(config: &DecoderConfig, wire: &[u8]) -> Verdict {
    use Verdict::Invalid;
    let mut events = Vec::new();
    let mut msg: Option<Msg> = None;
    let mut pos = 0;
    loop {
        let rest = &wire[pos..];
        if rest.len() < 2 {
            return ended(events, &msg);
        }
        let (b0, b1) = (rest[0], rest[1]);
        let ext = match b1 & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let masked = b1 & 0x80 != 0;
        let hlen = 2 + ext + if masked { 4 } else { 0 };
        if rest.len() < hlen {
            return ended(events, &msg);
        }
        let len = match ext {
            2 => u64::from(u16::from_be_bytes([rest[2], rest[3]])),
            8 => u64::from_be_bytes(rest[2..10].try_into().unwrap()),
            _ => u64::from(b1 & 0x7f),
        };
        if len >> 63 != 0 {
            return Invalid("64-bit length with the top bit set");
        }
        let fin = b0 & 0x80 != 0;
        let rsv1 = b0 & 0x40 != 0;
        let op = b0 & 0x0f;
        let control = op >= 8;
        if !matches!(op, 0 | 1 | 2 | 8 | 9 | 10) {
            return Invalid("reserved opcode");
        }
        if b0 & 0x30 != 0 {
            return Invalid("RSV2 or RSV3");
        }
        // RFC 7692 6: RSV1 only on the first frame of a message, when negotiated.
        if rsv1 && !(config.rsv1_allowed && (op == 1 || op == 2)) {
            return Invalid("RSV1");
        }
        if masked != (config.role == Role::Server) {
            return Invalid("mask bit for the role");
        }
        if control && (len > 125 || !fin) {
            return Invalid("long or fragmented control frame");
        }
        // A frame of a compressed message may announce DEFLATE's worst-case expansion of
        // the frame limit (a peer that compresses a whole message into one frame).
        let compressed_frame = rsv1 || (op == 0 && msg.as_ref().is_some_and(|m| m.compressed));
        let frame_limit = if compressed_frame {
            rapidws::codec::max_compressed_frame_size(config.max_frame_size)
        } else {
            config.max_frame_size
        };
        if !control && len > frame_limit as u64 {
            return Invalid("frame too large");
        }
        if !control {
            match (op, &msg) {
                (0, None) => return Invalid("continuation without a message"),
                (1 | 2, Some(_)) => return Invalid("new message inside a fragmented one"),
                _ => {}
            }
            let (so_far, compressed) = msg
                .as_ref()
                .map_or((0, rsv1), |m| (m.bytes.len(), m.compressed));
            if !compressed && so_far as u64 + len > config.max_message_size as u64 {
                return Invalid("message too large");
            }
        }
        let key: [u8; 4] = if masked {
            rest[2 + ext..hlen].try_into().unwrap()
        } else {
            [0; 4]
        };
        let avail = (rest.len() - hlen).min(usize::try_from(len).unwrap_or(usize::MAX));
        let mut payload = rest[hlen..hlen + avail].to_vec();
        mask(&mut payload, key);
        let complete = avail as u64 == len;
        if control {
            if !complete {
                return ended(events, &msg);
            }
            let kind = match op {
                8 => {
                    if payload.len() == 1 {
                        return Invalid("1-byte close payload");
                    }
                    if payload.len() >= 2 {
                        let code = u16::from_be_bytes([payload[0], payload[1]]);
                        // RFC 6455 7.4.1 and 7.4.2, with 1012-1014 from the IANA registry
                        // that RFC 6455 11.7 set up.
                        if !matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999) {
                            return Invalid("close code");
                        }
                        if std::str::from_utf8(&payload[2..]).is_err() {
                            return Invalid("close reason not UTF-8");
                        }
                    }
                    ControlKind::Close
                }
                9 => ControlKind::Ping,
                _ => ControlKind::Pong,
            };
            events.push(Ev::Control(kind, payload));
        } else {
            let m = msg.get_or_insert_with(|| Msg {
                text: op == 1,
                compressed: rsv1,
                bytes: Vec::new(),
            });
            m.bytes.extend_from_slice(&payload);
            let validate = m.text && !m.compressed;
            if complete && fin {
                if validate && std::str::from_utf8(&m.bytes).is_err() {
                    return Invalid("text not UTF-8");
                }
                let m = msg.take().unwrap();
                events.push(Ev::Data {
                    text: m.text,
                    compressed: m.compressed,
                    bytes: m.bytes,
                });
            } else if !complete {
                return ended(events, &msg);
            }
        }
        pos += hlen + avail;
    }
}

/// The verdict on a stream that ends here, with `msg` in progress: valid so far, unless
/// the message is text whose bytes cannot begin UTF-8 (the decoder may fail at once or when
/// more arrives; its validator may hold back the last few bytes of a chunk).
fn ended(events: Vec<Ev>, msg: &Option<Msg>) -> Verdict {
    match msg {
        Some(m)
            if m.text
                && !m.compressed
                && std::str::from_utf8(&m.bytes).is_err_and(|e| e.error_len().is_some()) =>
        {
            Verdict::Undecided
        }
        _ => Verdict::Valid(events),
    }
}

/// Turns a list of `header | fill spec` records into a stream (see the module docs).
fn synthesize(body: &[u8]) -> Vec<u8> {
    let mut r = Reader::new(body);
    let mut wire = Vec::new();
    let mut data = Filler::new();
    while !r.is_empty() && wire.len() < SYNTH_BUDGET {
        let b0 = r.u8();
        let b1 = r.u8();
        wire.extend_from_slice(&[b0, b1]);
        let len = match b1 & 0x7f {
            126 => {
                let n = r.u16();
                wire.extend_from_slice(&n.to_be_bytes());
                u64::from(n)
            }
            127 => {
                let hi = r.u32();
                let lo = r.u32();
                wire.extend_from_slice(&hi.to_be_bytes());
                wire.extend_from_slice(&lo.to_be_bytes());
                u64::from(hi) << 32 | u64::from(lo)
            }
            n => u64::from(n),
        };
        let key = if b1 & 0x80 != 0 {
            let k = r.u32().to_be_bytes();
            wire.extend_from_slice(&k);
            k
        } else {
            [0; 4]
        };
        // A frame past the budget ends the stream inside it: a few KiB of its payload show
        // the decoder a partial frame as well as megabytes would, in far less time.
        let room = SYNTH_BUDGET.saturating_sub(wire.len());
        let announced = usize::try_from(len).unwrap_or(usize::MAX);
        let n = if announced <= room {
            announced
        } else {
            room.min(4096)
        };
        let start = wire.len();
        let op = b0 & 0x0f;
        if op >= 8 {
            // A control frame between fragments leaves the message's text where it was.
            Filler::new().fill(&mut r, n, true, &mut wire);
        } else {
            if op != 0 {
                data.new_message();
            }
            data.fill(&mut r, n, b0 & 0x80 != 0, &mut wire);
        }
        mask(&mut wire[start..], key);
        if n < announced {
            break;
        }
    }
    wire
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let selector = r.u8();
    let ncuts = usize::from(r.u8() % 16);
    let cut_bytes = r.take(ncuts * 2).to_vec();
    let body = r.rest();

    let role = if selector & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let mut config = DecoderConfig::new(role);
    config.rsv1_allowed = selector & 2 != 0;
    // Small limits, so the fuzzer reaches them; 64 KiB ones, which a 127-length frame
    // passes; megabyte ones, which long fragmented messages pass.
    (config.max_frame_size, config.max_message_size) = match (selector >> 2) & 3 {
        0 => (config.max_frame_size, config.max_message_size),
        1 => (64, 200),
        2 => (65_535, 131_072),
        _ => (1 << 20, 3 << 19),
    };
    let synthesized;
    let input = if selector & 0x10 != 0 {
        synthesized = synthesize(body);
        &synthesized[..]
    } else {
        body
    };
    let mut cr = Reader::new(&cut_bytes);
    let mut cuts: Vec<usize> = (0..ncuts).map(|_| cr.position(input.len())).collect();
    cuts.sort_unstable();

    let whole = run(&config, input, &[]);
    let split = run(&config, input, &cuts);
    assert_eq!(whole, split);

    match reference(&config, input) {
        Verdict::Valid(events) => assert_eq!(whole, (events, None), "a valid stream"),
        Verdict::Invalid(rule) => {
            assert!(whole.1.is_some(), "accepted a stream that breaks: {rule}")
        }
        Verdict::Undecided => {}
    }
});
