//! The batch scanner and decoder: every backend (and the public entries) against a
//! frame-by-frame oracle built on `parse_header`, the byte-at-a-time mask and std's UTF-8
//! check, through one runner ([`check`]), on every payload length up to four 64-byte
//! vectors at every start alignment, on random streams of well-formed and hostile
//! frames cut at random points, and on every rule a header can break. Under Miri the
//! lengths are the ones at and around every vector size (16, 32, 64 bytes and four of
//! them), which reach every unsafe path of each backend, and the random rounds are few.

mod common;
use common::*;
use rapidws_simd::frame::{
    self, Data, End, Frame, FrameHeader, Rules, Scanned, Violation, parse_header,
};

// ---------------------------------------------------------------------------------------
// The oracle: one frame at a time
// ---------------------------------------------------------------------------------------

/// Why a frame ends the batch, from its parsed header, written from RFC 6455 apart from
/// the crate's own code.
fn oracle_judge(h: &FrameHeader, rules: &Rules) -> Option<End> {
    let op = h.opcode;
    let known = [0x0, 0x1, 0x2, 0x8, 0x9, 0xA].contains(&op);
    if !known {
        return Some(End::Invalid(Violation::UnknownOpcode(op)));
    }
    let rsv1 = h.rsv & 0b100 != 0;
    if h.rsv & 0b011 != 0 || (rsv1 && !(rules.rsv1 && (op == 1 || op == 2))) {
        return Some(End::Invalid(Violation::ReservedBits));
    }
    if rules.masked && h.mask.is_none() {
        return Some(End::Invalid(Violation::Unmasked));
    }
    if !rules.masked && h.mask.is_some() {
        return Some(End::Invalid(Violation::Masked));
    }
    if op >= 8 {
        if h.payload_len > 125 {
            return Some(End::Invalid(Violation::ControlTooLong));
        }
        if !h.fin {
            return Some(End::Invalid(Violation::FragmentedControl));
        }
        return Some(End::Other);
    }
    if op == 0 || !h.fin || rsv1 {
        return Some(End::Other);
    }
    if h.payload_len > rules.max_payload {
        return Some(End::Invalid(Violation::TooLarge));
    }
    None
}

/// The frames `scan_batch` takes from `buf` (at most `limit`), and why it stops.
fn oracle_scan(buf: &[u8], rules: &Rules, limit: usize) -> (Vec<Frame>, Scanned) {
    let mut frames = Vec::new();
    let mut pos = 0;
    let end = loop {
        if frames.len() == limit {
            break End::Full;
        }
        let h = match parse_header(&buf[pos..]) {
            Ok(Some(h)) => h,
            Ok(None) => break End::Incomplete,
            Err(_) => break End::Invalid(Violation::LengthOverflow),
        };
        if let Some(end) = oracle_judge(&h, rules) {
            break end;
        }
        let total = u64::from(h.header_len) + h.payload_len;
        if total > (buf.len() - pos) as u64 {
            break End::Incomplete;
        }
        frames.push(Frame { at: pos, header: h });
        pos += total as usize;
    };
    let s = Scanned {
        frames: frames.len(),
        consumed: pos,
        end,
    };
    (frames, s)
}

/// `buf` as `decode` leaves it, and what it returns: the scan, then the payloads
/// unmasked and the text checked by std, stopping before the first invalid text.
fn oracle_decode(buf: &[u8], rules: &Rules, limit: usize) -> (Vec<u8>, Scanned, Vec<Frame>) {
    let (frames, mut s) = oracle_scan(buf, rules, limit);
    let mut out = buf.to_vec();
    for (i, f) in frames.iter().enumerate() {
        let mut p = buf[f.payload()].to_vec();
        if let Some(k) = f.header.mask {
            mask_oracle(&mut p, k, 0);
        }
        if f.header.opcode == 1 && core::str::from_utf8(&p).is_err() {
            s = Scanned {
                frames: i,
                consumed: f.at,
                end: End::Invalid(Violation::InvalidUtf8),
            };
            return (out, s, frames[..i].to_vec());
        }
        out[f.payload()].copy_from_slice(&p);
    }
    (out, s, frames)
}

// ---------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------

/// Every entry on every backend against the oracle, on `wire` placed at every offset in
/// `aligns` of a 64-byte aligned buffer.
fn check(wire: &[u8], rules: &Rules, aligns: &[usize]) {
    let mut store = vec![0u8; wire.len() + 128];
    let base = store.as_ptr().align_offset(64);
    for &align in aligns {
        let at = base + align;
        let place = |store: &mut Vec<u8>| {
            store[at..at + wire.len()].copy_from_slice(wire);
        };
        // Scanning: a few output sizes, so `Full` is met. Scanning is safe code on every
        // backend: Miri checks it once.
        let limits: &[usize] = if cfg!(miri) { &[3] } else { &[1, 3, 64] };
        for &limit in limits {
            let (want, want_s) = oracle_scan(wire, rules, limit);
            let mut out = vec![Frame::default(); limit];
            place(&mut store);
            let got = frame::scan_batch(&store[at..at + wire.len()], rules, &mut out);
            assert_eq!(got, want_s, "scan_batch, limit {limit}, align {align}");
            assert_eq!(&out[..got.frames], &want[..]);
            for b in backends() {
                let got = frame::scan_batch_with(b, &store[at..at + wire.len()], rules, &mut out)
                    .unwrap();
                assert_eq!(got, want_s, "{} scan_batch, limit {limit}", b.name());
                assert_eq!(&out[..got.frames], &want[..], "{}", b.name());
            }
        }
        // Decoding, with a limit that cuts rounds and one that does not.
        let limits: &[usize] = if cfg!(miri) { &[1000] } else { &[5, 1000] };
        for &limit in limits {
            let (want_buf, want_s, _) = oracle_decode(wire, rules, limit);
            let mut run = |name: &str, f: &dyn Fn(&mut [u8]) -> Scanned| {
                place(&mut store);
                let got = f(&mut store[at..at + wire.len()]);
                assert_eq!(got, want_s, "{name} decode, limit {limit}, align {align}");
                assert!(
                    store[at..at + wire.len()] == want_buf[..],
                    "{name} decode, limit {limit}, align {align}: bytes differ"
                );
            };
            run("auto", &|b| frame::decode(b, rules, limit));
            for be in backends() {
                run(be.name(), &|b| {
                    frame::decode_with(be, b, rules, limit).unwrap()
                });
            }
        }
        // The run: every message lent as the oracle decodes it, then dropped early.
        let (want_buf, want_s, frames) = oracle_decode(wire, rules, usize::MAX);
        for be in backends().map(Some).chain([None]) {
            let name = be.map_or("auto", |b| b.name());
            place(&mut store);
            let buf = &mut store[at..at + wire.len()];
            let mut run = match be {
                Some(b) => frame::run_with(b, buf, *rules).unwrap(),
                None => frame::run(buf, *rules),
            };
            for f in &frames {
                let payload = &want_buf[f.payload()];
                let want = if f.header.opcode == 1 {
                    Data::Text(core::str::from_utf8(payload).unwrap())
                } else {
                    Data::Binary(payload)
                };
                assert_eq!(run.next(), Some(want), "{name} run, align {align}");
            }
            assert_eq!(run.next(), None, "{name} run end");
            assert_eq!(run.consumed(), want_s.consumed, "{name} run consumed");
            assert_eq!(run.end(), Some(want_s.end), "{name} run end reason");
            drop(run);
            assert!(
                store[at..at + wire.len()] == want_buf[..],
                "{name} run bytes"
            );
            // Dropped after `k` messages: the rest is as it arrived.
            let drops: &[usize] = if cfg!(miri) {
                &[1]
            } else {
                &[0, 1, frames.len() / 2]
            };
            for &k in drops {
                if k > frames.len() {
                    continue;
                }
                place(&mut store);
                let buf = &mut store[at..at + wire.len()];
                let mut run = match be {
                    Some(b) => frame::run_with(b, buf, *rules).unwrap(),
                    None => frame::run(buf, *rules),
                };
                for _ in 0..k {
                    run.next().unwrap();
                }
                let consumed = run.consumed();
                drop(run);
                let got = &store[at..at + wire.len()];
                assert!(got[..consumed] == want_buf[..consumed], "{name} k {k}");
                assert!(
                    got[consumed..] == wire[consumed..],
                    "{name} k {k}: left as arrived"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------------------

/// A frame: `b0` (FIN, RSV, opcode), `payload` masked with `key` when given, its length
/// in the smallest class that holds it, or in the 64-bit class when `long`.
fn frame(b0: u8, payload: &[u8], key: Option<[u8; 4]>, long: bool) -> Vec<u8> {
    let len = payload.len();
    let m = if key.is_some() { 0x80 } else { 0 };
    let mut f = vec![b0];
    if len < 126 && !long {
        f.push(m | len as u8);
    } else if len < 1 << 16 && !long {
        f.push(m | 126);
        f.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        f.push(m | 127);
        f.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let mut p = payload.to_vec();
    if let Some(k) = key {
        f.extend_from_slice(&k);
        mask_oracle(&mut p, k, 0);
    }
    f.extend_from_slice(&p);
    f
}

fn key(rng: &mut Rng) -> [u8; 4] {
    rng.next_u64().to_le_bytes()[..4].try_into().unwrap()
}

/// Text of `len` bytes: ASCII, or mixed 1- to 4-byte characters (cut to a character
/// boundary, padded with ASCII).
fn text(rng: &mut Rng, len: usize, mixed: bool) -> Vec<u8> {
    if !mixed {
        return (0..len).map(|i| b'a' + (i % 26) as u8).collect();
    }
    let t = mixed_text(len + 8, rng.next_u64());
    let s = core::str::from_utf8(&t).unwrap();
    let mut cut = len.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut v = t[..cut].to_vec();
    v.resize(len, b' ');
    v
}

fn rules_for(masked: bool) -> Rules {
    if masked {
        Rules::server(1 << 20)
    } else {
        Rules::client(1 << 20)
    }
}

#[cfg(not(miri))]
const ALIGNS: &[usize] = &[0, 1, 3, 17, 31, 33, 63];
#[cfg(miri)]
const ALIGNS: &[usize] = &[0, 1, 33];

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

/// Payload lengths: every one up to four 64-byte vectors and past them, or under Miri those
/// at and around each vector size.
fn lengths() -> Vec<usize> {
    if cfg!(miri) {
        vec![
            0, 1, 3, 4, 7, 8, 15, 16, 19, 31, 32, 35, 63, 64, 67, 100, 128, 131, 255, 257,
        ]
    } else {
        (0..=260).collect()
    }
}

#[test]
fn every_payload_length_up_to_four_vectors_at_every_alignment() {
    let mut rng = Rng(11);
    for masked in [false, true] {
        let rules = rules_for(masked);
        for len in lengths() {
            for (op, mixed) in [(0x81u8, false), (0x81, true), (0x82, false)] {
                let k = masked.then(|| key(&mut rng));
                let p = if op == 0x82 {
                    rng.bytes(len)
                } else {
                    text(&mut rng, len, mixed)
                };
                // The frame between two others, so the vectors at its ends see its
                // neighbours' bytes, and alone at the end of the buffer.
                let mut wire = frame(0x82, &rng.bytes(3), k, false);
                wire.extend(frame(op, &p, k, false));
                let aligns: &[usize] = if len % 7 == 0 { ALIGNS } else { &[0, 5] };
                let aligns = if cfg!(miri) {
                    &ALIGNS[len % 3..][..1]
                } else {
                    aligns
                };
                check(&wire, &rules, aligns);
                if !cfg!(miri) {
                    wire.extend(frame(0x81, b"end", k, false));
                    check(&wire, &rules, &[3]);
                }
            }
        }
    }
}

#[test]
fn invalid_text_ends_the_batch_before_its_message_at_every_position() {
    let mut rng = Rng(12);
    let lens: Vec<usize> = if cfg!(miri) {
        vec![1, 5, 33, 70]
    } else {
        (1..=140).collect()
    };
    for masked in [false, true] {
        let rules = rules_for(masked);
        for len in lens.iter().copied() {
            let k = masked.then(|| key(&mut rng));
            let good = text(&mut rng, len, true);
            let bads: &[u8] = if cfg!(miri) {
                &[0xC0]
            } else {
                &[0xFF, 0xC0, 0x80, 0xED]
            };
            for &bad in bads {
                let mut p = good.clone();
                let i = rng.below(len);
                p[i] = bad;
                let mut wire = frame(0x81, b"ok", k, false);
                wire.extend(frame(0x82, &[0xFF; 9], k, false));
                wire.extend(frame(0x81, &p, k, false));
                wire.extend(frame(0x81, &good, k, false));
                check(&wire, &rules, &[1]);
            }
            // A message ending inside a character, followed by one that starts with the
            // rest of it: each message is checked on its own.
            let mut wire = frame(0x81, "aé".as_bytes().split_at(2).0, k, false);
            wire.extend(frame(0x81, &[0xA9, b'b'], k, false));
            check(&wire, &rules, &[0]);
            let mut wire = frame(0x81, &[b'a', 0xF0, 0x9F, 0x98], k, false);
            wire.extend(frame(0x82, &[0x80], k, false));
            check(&wire, &rules, &[0]);
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the rules are safe code, checked natively on every backend"
)]
fn every_rule_a_header_breaks_ends_the_batch_with_its_violation() {
    let mut rng = Rng(13);
    for masked in [false, true] {
        for rsv1 in [false, true] {
            let rules = Rules {
                masked,
                rsv1,
                max_payload: 300,
            };
            let k = masked.then(|| key(&mut rng));
            let other = (!masked).then(|| key(&mut rng));
            let cases: Vec<Vec<u8>> = vec![
                frame(0x83, b"x", k, false),         // unknown data opcode
                frame(0x8B, b"", k, false),          // unknown control opcode
                frame(0xA1, b"x", k, false),         // RSV2
                frame(0x91, b"x", k, false),         // RSV3
                frame(0xC1, b"x", k, false),         // RSV1 text
                frame(0xC2, b"x", k, false),         // RSV1 binary
                frame(0xC0, b"x", k, false),         // RSV1 continuation
                frame(0xC9, b"x", k, false),         // RSV1 ping
                frame(0x81, b"x", other, false),     // masking the wrong way
                frame(0x89, &[1; 126], k, false),    // control too long
                frame(0x09, b"x", k, false),         // fragmented ping
                frame(0x89, b"x", k, false),         // ping
                frame(0x8A, b"", k, false),          // pong
                frame(0x88, &[3, 232], k, false),    // close
                frame(0x01, b"x", k, false),         // first fragment
                frame(0x80, b"x", k, false),         // continuation
                frame(0x81, &[b'a'; 301], k, false), // too large
                frame(0x82, &[b'a'; 300], k, true),  // 64-bit length, small value
                frame(0x82, &[b'a'; 301], k, true),  // 64-bit length, too large
                vec![
                    0x82,
                    127 | if masked { 0x80 } else { 0 },
                    0x80,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    1,
                    1,
                    2,
                    3,
                    4,
                ], // length overflow
            ];
            for case in &cases {
                let mut wire = frame(0x81, b"first", k, false);
                wire.extend_from_slice(case);
                wire.extend(frame(0x82, b"after", k, false));
                check(&wire, &rules, &[0, 1]);
                // Cut in the middle of the frame that ends the batch.
                for cut in [6, 7, 8, 9, 12, 15] {
                    let n = (wire.len() - 1).min(cut + case.len() / 2);
                    check(&wire[..n], &rules, &[0]);
                }
            }
        }
    }
}

#[test]
fn random_streams_of_frames_cut_anywhere() {
    let mut rng = Rng(14);
    let rounds = if cfg!(miri) { 2 } else { 400 };
    for round in 0..rounds {
        let masked = round % 2 == 0;
        let rules = Rules {
            masked,
            rsv1: round % 3 == 0,
            max_payload: if round % 5 == 0 { 100 } else { 1 << 20 },
        };
        let mut wire = Vec::new();
        let frames = 1 + rng.below(if cfg!(miri) { 8 } else { 150 });
        for _ in 0..frames {
            let k = masked.then(|| key(&mut rng));
            let len = match rng.below(10) {
                0 => rng.below(2000),
                1..=3 => rng.below(8),
                _ => rng.below(130),
            };
            let f = match rng.below(40) {
                0 => frame(0x89, &rng.bytes(len.min(125)), k, false),
                1 => frame(0x01, &rng.bytes(len), k, false),
                2 => frame(0xC1, &rng.bytes(len), k, false),
                3 => frame(0x81, &rng.bytes(len), k, false), // random bytes as text
                4 => frame(0x82, &rng.bytes(len), k, true),
                5 => frame(
                    0x81,
                    &text(&mut rng, len, true),
                    masked.then_some([0; 4]),
                    false,
                ),
                6..=15 => frame(0x82, &rng.bytes(len), k, false),
                _ => {
                    let mixed = rng.below(2) == 0;
                    frame(0x81, &text(&mut rng, len, mixed), k, false)
                }
            };
            wire.extend(f);
        }
        let aligns: &[usize] = if round % 16 == 0 {
            ALIGNS
        } else {
            &[round % 64]
        };
        check(&wire, &rules, aligns);
        let cut = rng.below(wire.len() + 1);
        check(&wire[..cut], &rules, &[0]);
    }
}

#[test]
fn random_bytes() {
    let mut rng = Rng(15);
    let rounds = if cfg!(miri) { 4 } else { 5000 };
    for round in 0..rounds {
        let len = rng.below(100);
        let mut buf = rng.bytes(len);
        // Short lengths and the usual first bytes now and then, so frames follow each
        // other.
        let mut i = 0;
        while i + 1 < buf.len() {
            if rng.below(2) == 0 {
                buf[i] = [0x81, 0x82, 0x89, 0x01][rng.below(4)];
                buf[i + 1] &= 0x87;
            }
            i += 2 + rng.below(6);
        }
        check(&buf, &rules_for(round % 2 == 0), &[round % 64]);
    }
}

#[test]
fn a_long_read_of_small_messages_takes_many_rounds() {
    let mut rng = Rng(16);
    let count = if cfg!(miri) { 70 } else { 1000 };
    for masked in [false, true] {
        let mut wire = Vec::new();
        for i in 0..count {
            let k = masked.then(|| key(&mut rng));
            let len = [0, 5, 16, 31, 64][i % 5];
            wire.extend(frame(0x81, &text(&mut rng, len, i % 3 == 0), k, false));
        }
        check(&wire, &rules_for(masked), &[0]);
    }
}
